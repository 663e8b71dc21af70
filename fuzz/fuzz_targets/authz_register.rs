//! A dynamic client registration body (RFC 7591) sent to `/register` by
//! anyone: read, never a panic, and what is accepted keeps the redirect
//! rules (no fragment, no plain http off loopback, at most the bound).
#![no_main]

use executor_authz::{MAX_REDIRECT_URIS, register};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(client) = register(body) {
        assert!(!client.redirect_uris.is_empty());
        assert!(client.redirect_uris.len() <= MAX_REDIRECT_URIS);
        for uri in &client.redirect_uris {
            assert!(!uri.as_str().contains('#'));
            if uri.as_str().starts_with("http:") {
                assert!(uri.is_loopback());
            }
        }
    }
});
