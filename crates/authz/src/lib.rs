//! The built-in OAuth 2.1 authorization server of `/mcp` (SPEC §4), which
//! lets clients that cannot take a pasted token log in with a browser.
//!
//! This crate holds its rules as pure functions, each tested with
//! generated inputs, so that the endpoints built on them cannot drift
//! from SPEC §4:
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

mod pkce;
mod redirect;
mod registration;
mod resource;
mod token_request;

pub use pkce::{PkceError, check_challenge, s256, verify_s256};
pub use redirect::{RedirectError, RedirectUri};
pub use registration::{
    ClientAuth, ClientRegistration, MAX_CLIENT_NAME_CHARS, MAX_REDIRECT_URIS,
    MAX_REGISTRATION_BYTES, RegistrationError, register,
};
pub use resource::names_this_server;
pub use token_request::{
    ClientCredentials, MAX_TOKEN_BODY_BYTES, TokenError, TokenRequest, read_token_request,
};
