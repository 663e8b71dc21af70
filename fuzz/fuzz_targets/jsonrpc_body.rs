//! A request body as a client sends it to `/mcp`: parsed or refused with a
//! JSON-RPC error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let _ = executor_mcp::parse(body, executor_mcp::MAX_BATCH);
});
