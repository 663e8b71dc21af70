//! An API description as `integrations add openapi` reads it (JSON or
//! YAML): imported or refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = executor_openapi::import(text, &executor_openapi::ImportOptions::new("fuzz"));
});
