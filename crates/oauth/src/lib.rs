//! OAuth connections (SPEC §9): logging in to the APIs and MCP servers
//! behind the gateway, and the access token of each call.
//!
//! - `challenge`: the `WWW-Authenticate: Bearer` a resource refuses with.
//! - `discovery`: RFC 9728 resource metadata, RFC 8414 / OpenID discovery,
//!   the MCP 2025-03-26 fallbacks.
//! - `grant`: what a connection stores: the [`Grant`] in the open, the
//!   tokens and client secret sealed.
//! - `login`: client identity (pre-registered, metadata document, dynamic
//!   registration), the authorization URL with PKCE S256, `state` and the
//!   RFC 8707 `resource`, the callback's code exchange, client credentials.
//! - `refresh`: [`OAuth::access_token`] and [`OAuth::refused`]: one refresh
//!   for all concurrent callers across processes, saved before use.
//! - `token` and `http`: the token requests, through oauth2 on the guarded
//!   outbound client.
//!
//! oauth2 speaks the token endpoint's protocol; discovery, registration,
//! the `iss` check, storage and single-flight refresh are ours
//! (ARCHITECTURE.md says why).

mod challenge;
mod discovery;
mod error;
mod grant;
mod http;
mod login;
mod refresh;
mod token;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_outbound::HttpClient;
use executor_store::Store;
use executor_store::secrets::SecretKey;

pub use challenge::Challenge;
pub use discovery::{ServerMetadata, same_issuer};
pub use error::{OAUTH_REAUTH_REQUIRED, OAuthError, login_command, reauth_required};
pub use grant::{AuthMethod, ClientSource, Flow, Grant, GrantStatus, Secrets};
pub use login::{
    Declared, Finished, LOGIN_TIMEOUT_MS, LoginOptions, LoginTarget, Resource, Started, state_hash,
};

/// The OAuth client of one process: logins and the tokens of calls.
pub struct OAuth {
    store: Arc<dyn Store>,
    key: Arc<SecretKey>,
    http: http::OAuthHttp,
    /// Names this process in a refresh lease.
    holder: String,
    /// One lock per connection being refreshed in this process.
    flights: Mutex<HashMap<(String, String), Flight>>,
}

/// The turn of one connection's refresh in this process.
type Flight = Arc<tokio::sync::Mutex<()>>;

impl OAuth {
    pub fn new(store: Arc<dyn Store>, key: Arc<SecretKey>, http: HttpClient) -> Self {
        OAuth {
            store,
            key,
            http: http::OAuthHttp::new(http),
            holder: format!(
                "{}-{}",
                std::process::id(),
                executor_store::tokens::random_id(8)
            ),
            flights: Mutex::new(HashMap::new()),
        }
    }
}

/// The client ID metadata document served at `metadata_url` (the draft
/// "OAuth Client ID Metadata Document"): a public client with our callback.
pub fn client_metadata_document(metadata_url: &str, redirect_uri: &str) -> serde_json::Value {
    serde_json::json!({
        "client_id": metadata_url,
        "client_name": "Executor",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}
