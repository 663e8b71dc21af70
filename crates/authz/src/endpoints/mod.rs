//! One module per endpoint; each handler is thin, the rules it applies
//! live in the crate's rule modules and the store.

pub(crate) mod authorize;
pub(crate) mod metadata;
pub(crate) mod register;
pub(crate) mod revoke;
pub(crate) mod signin;
pub(crate) mod token;

use axum::http::{HeaderMap, header};

/// The source address a request came from, when the server recorded it.
pub(crate) fn peer(extensions: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// The `Origin` (scheme and authority) of a base URL.
pub(crate) fn origin_of(base: &str) -> &str {
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    match base[after_scheme..].find('/') {
        Some(i) => &base[..after_scheme + i],
        None => base,
    }
}

/// Whether an unsafe browser request comes from this server's own pages:
/// its `Origin` is present and is ours (SPEC §14).
pub fn same_origin(headers: &HeaderMap, base: &str) -> bool {
    headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|o| o.eq_ignore_ascii_case(origin_of(base)))
}
