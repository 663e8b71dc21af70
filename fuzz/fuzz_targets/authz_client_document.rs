//! A client ID metadata document, fetched from any https URL a client
//! names: read, never a panic, and what is accepted is that URL's own
//! public client with redirect URIs that keep the registration rules.
#![no_main]

use executor_authz::{MAX_REDIRECT_URIS, read_document};
use libfuzzer_sys::fuzz_target;

const URL: &str = "https://client.example/oauth/client.json";

fuzz_target!(|body: &[u8]| {
    if let Ok(client) = read_document(URL, body) {
        assert_eq!(client.id, URL);
        assert_eq!(client.auth_method, "none");
        assert!(client.secret_hash.is_none());
        assert!(!client.redirect_uris.is_empty());
        assert!(client.redirect_uris.len() <= MAX_REDIRECT_URIS);
        assert!(client.redirect_uris.iter().all(|u| !u.contains('#')));
    }
});
