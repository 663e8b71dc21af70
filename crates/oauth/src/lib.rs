//! OAuth connections (SPEC §9): logging in to the APIs and MCP servers
//! behind the gateway, and the access token of each call.
//!
//! - `challenge`: the `WWW-Authenticate: Bearer` a resource refuses with.
//! - `discovery`: RFC 9728 resource metadata, RFC 8414 / OpenID discovery,
//!   the MCP 2025-03-26 fallbacks; what it finds is `metadata`'s
//!   [`ServerMetadata`], which a grant keeps.
//! - `grant`: what a connection stores: the [`Grant`] in the open, the
//!   tokens and client secret sealed.
//! - `login`: client identity (pre-registered, metadata document, dynamic
//!   registration), the authorization URL with PKCE S256, `state` and the
//!   RFC 8707 `resource`, the callback's code exchange, client credentials.
//! - `oauth`: [`OAuth`], the client of one process, which `login` and
//!   `refresh` extend.
//! - `refresh`: [`OAuth::access_token`] and [`OAuth::refused`]: one refresh
//!   for all concurrent callers across processes, saved before use.
//! - `token` and `http`: the token requests, through oauth2 on the guarded
//!   outbound client.
//!
//! oauth2 speaks the token endpoint's protocol; discovery, registration,
//! the `iss` check, storage and single-flight refresh are ours
//! (docs/decisions/oauth2-crate-for-token-endpoint.md says why).

mod challenge;
mod discovery;
mod error;
mod grant;
mod http;
mod login;
mod metadata;
mod oauth;
mod refresh;
mod token;

pub use challenge::Challenge;
pub use discovery::{Declared, same_issuer};
pub use error::{OAUTH_REAUTH_REQUIRED, OAuthError, login_command, reauth_required};
pub use grant::{AuthMethod, ClientSource, Flow, Grant, GrantStatus, Secrets};
pub use login::{
    Finished, LOGIN_TIMEOUT_MS, LoginOptions, LoginTarget, Resource, Started,
    client_metadata_document, read_login_outcome, state_hash,
};
pub use metadata::ServerMetadata;
pub use oauth::OAuth;
