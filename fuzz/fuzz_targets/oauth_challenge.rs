//! What a protected resource or an authorization server sends a login: a
//! `WWW-Authenticate` header and metadata documents — read, never a panic,
//! and a challenge's scopes are what its `scope` parameter says.
#![no_main]

use executor_oauth::{Challenge, ServerMetadata, same_issuer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Some(challenge) = Challenge::parse(text) {
        let joined = challenge.scopes().join(" ");
        let scope = challenge.scope.as_deref().unwrap_or("");
        assert_eq!(joined, scope.split_ascii_whitespace().collect::<Vec<_>>().join(" "));
    }
    if let Ok(metadata) = serde_json::from_str::<ServerMetadata>(text) {
        let issuer = metadata.issuer.as_deref().unwrap_or_default();
        assert!(issuer.is_empty() || same_issuer(issuer, issuer));
        let _ = metadata.offers_grant("refresh_token");
    }
});
