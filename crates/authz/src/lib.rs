//! The built-in OAuth 2.1 authorization server of `/mcp` (SPEC §4), which
//! lets clients that cannot take a pasted token log in with a browser, and
//! browser sign-in (SPEC §14), which its consent page needs.
//!
//! The endpoints (`server.rs` routes them, `endpoints/` holds one module
//! each) keep their state in the store (`OAuthStore`, `SignInStore`);
//! access tokens are rows of the tokens table, so `/mcp` checks them as it
//! checks API tokens. `origin.rs` says which URL names this server (the
//! issuer); `signin.rs` the console session cookie and its CSRF token;
//! `secrets.rs` the codes, refresh tokens, client secrets and links, all
//! stored hashed; `pages.rs` the HTML; `cimd.rs` clients described by a
//! client ID metadata document at their https `client_id`.
//!
//! The rules are pure functions, each tested with generated inputs, so
//! that the endpoints built on them cannot drift from SPEC §4:
//! - `redirect.rs`: which redirect URIs a client may register, and when
//!   the one presented at `/authorize` is a registered one (exactly, or a
//!   loopback one on another port). A URI that is not is never redirected
//!   to: that is the open-redirect rule.
//! - `pkce.rs`: PKCE with `S256` only (RFC 7636).
//! - `resource.rs`: whether an RFC 8707 `resource` names this server's
//!   `/mcp` (spelling differences that clients make are forgiven).
//! - `registration.rs`: dynamic client registration (RFC 7591): a
//!   request body checked into what the server keeps, or the RFC's error.
//! - `token_request.rs`: a `/token` request's form body and client
//!   credentials read into one typed request, or the RFC 6749 §5.2 error.

mod cimd;
mod endpoints;
mod origin;
mod pages;
mod pkce;
mod redirect;
mod registration;
mod resource;
mod secrets;
mod server;
mod signin;
mod token_request;

pub use cimd::{
    DocumentError, DocumentFetcher, FETCH_TIMEOUT, FetchedDocument, MAX_DOCUMENT_BYTES, MAX_FRESH,
    MIN_FRESH, freshness, is_document_url, read_document,
};
pub use endpoints::metadata::document as metadata_document;
pub use endpoints::same_origin;
pub use origin::PublicOrigin;
pub use pages::html_headers;
pub use secrets::preregistered_client;
pub use server::{
    AuthorizationServer, AuthzConfig, CODE_TTL, REFRESH_GRACE, SCOPES, router, sign_in_router,
};
pub use signin::{IDLE_TIMEOUT, LOGIN_LINK_TTL, SignedIn, mint_login_link, signed_in};

pub use pkce::{PkceError, check_challenge, s256, verify_s256};
pub use redirect::{RedirectError, RedirectUri};
pub use registration::{
    ClientAuth, ClientRegistration, MAX_CLIENT_NAME_CHARS, MAX_REDIRECT_URIS,
    MAX_REGISTRATION_BYTES, RegistrationError, register,
};
pub use resource::names_this_server;
pub use token_request::{
    ClientCredentials, MAX_TOKEN_BODY_BYTES, TokenError, TokenRequest, read_client,
    read_token_request,
};
