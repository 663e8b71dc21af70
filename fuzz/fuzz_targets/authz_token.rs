//! A `/token` request (form body and `Authorization` header) sent by
//! anyone: read into a request or an RFC 6749 §5.2 error, never a panic;
//! an error is 401 exactly when it is `invalid_client`.
#![no_main]

use executor_authz::read_token_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&[u8], Option<&str>)| {
    let (body, header) = input;
    if let Err(e) = read_token_request(body, header) {
        assert_eq!(e.status() == 401, e.code == "invalid_client");
    }
});
