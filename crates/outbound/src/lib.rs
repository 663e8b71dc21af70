//! The outbound path of every integration kind: how a request leaves the
//! server and how its answer comes back.
//!
//! An integration kind builds an [`OutboundRequest`] (path, query, headers,
//! cookies and body already encoded) and says where the credential goes
//! ([`Placement`]); [`HttpClient::send`] places it, refuses targets on the
//! server's own network (`guard.rs`, also after DNS and redirects), sends
//! with timeouts, reads a bounded answer, holds its parsed size in the
//! execution's host budget, maps failures to SPEC §7 codes (`failure.rs`),
//! and scrubs every form of the credential from everything it returns
//! (`redact.rs`, with `json_scan.rs`). [`HttpClient::send_renewing`] is the
//! call of every invoker: a request the upstream refused (401/403) is
//! built ([`BuildRequest`]) and sent once more with the credential its
//! [`CredentialSource`] renews.
//!
//! Secrets are plaintext only here and in the caller that resolved them,
//! for the duration of one call (`credential.rs`). This crate must never
//! know an API description's dialect: that is the integration kind's.

mod client;
mod credential;
mod failure;
mod guard;
mod json_scan;
mod redact;
mod request;

pub use client::{
    ClientSetupError, FetchedDocument, HttpClient, HttpConfig, HttpSuccess, MAX_ERROR_DETAIL_BYTES,
    MAX_REDIRECTS, names_json, parsed_size_estimate,
};
pub use credential::{Connection, Credential, CredentialSource, Refusal, Retry, renewed};
pub use failure::{
    CONNECTION_REJECTED, HttpFailure, INVALID_TOOL_ARGUMENTS, UPSTREAM_HTTP_ERROR, UPSTREAM_TIMEOUT,
};
pub use guard::{is_local, is_local_network_refusal};
pub use redact::scrub_value;
pub use request::{BuildRequest, COMPONENT, OutboundRequest, Placement, sensitive_header};
