//! A GraphQL schema as `integrations add graphql` reads it (introspection
//! JSON or SDL): imported, stored and loaded, or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(imported) = executor_graphql::import(text) {
        let stored = executor_graphql::store(&imported, "fuzz", "https://example.com/graphql");
        assert!(executor_graphql::stored::load(&stored).is_ok());
    }
});
