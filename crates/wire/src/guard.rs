//! The DNS-rebinding guard: which Host and Origin headers are accepted.

use axum::http::HeaderMap;
use axum::http::header;

use crate::WireError;

/// Hosts and origins the server answers. A loopback server accepts only
/// loopback names unless configured otherwise; a server bound to another
/// address accepts any unless a list is configured.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    /// Host names (without port) accepted; None = any.
    pub allowed_hosts: Option<Vec<String>>,
    /// Origins (`scheme://host[:port]`) accepted besides ones whose host is
    /// in `allowed_hosts`; None = any.
    pub allowed_origins: Option<Vec<String>>,
}

const LOOPBACK_NAMES: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

impl HostPolicy {
    pub fn loopback() -> Self {
        HostPolicy {
            allowed_hosts: Some(LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect()),
            allowed_origins: None,
        }
    }

    pub fn open() -> Self {
        HostPolicy {
            allowed_hosts: None,
            allowed_origins: None,
        }
    }

    /// The DNS-rebinding guard of `/mcp`: Host, then Origin.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), WireError> {
        self.check_host(headers)?;
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin) {
                return Err(WireError::HostNotAllowed("Origin not allowed"));
            }
        }
        Ok(())
    }

    /// The Host check alone, for documents that answer any origin (the
    /// protected-resource metadata) but name this server by its Host.
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), WireError> {
        if let Some(hosts) = &self.allowed_hosts {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host_name(host)))
            {
                return Err(WireError::HostNotAllowed("Host header not allowed"));
            }
        }
        Ok(())
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if let Some(origins) = &self.allowed_origins
            && origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
        {
            return true;
        }
        let Some(authority) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            // "null" and other opaque origins are never allowed.
            return false;
        };
        match &self.allowed_hosts {
            Some(hosts) => hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host_name(authority))),
            None => self.allowed_origins.is_none(),
        }
    }
}

/// The host part of `host[:port]`, keeping IPv6 brackets.
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(i) => &authority[..=i],
            None => authority,
        };
    }
    authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    }

    #[test]
    fn loopback_policy_refuses_foreign_hosts_and_origins() {
        let p = HostPolicy::loopback();
        assert!(p.check(&headers("127.0.0.1:4788", None)).is_ok());
        assert!(
            p.check(&headers("localhost:4788", Some("http://localhost:3000")))
                .is_ok()
        );
        assert!(
            p.check(&headers("[::1]:4788", Some("http://[::1]:1")))
                .is_ok()
        );
        assert!(p.check(&headers("evil.example:4788", None)).is_err());
        assert!(
            p.check(&headers("127.0.0.1:4788", Some("http://evil.example")))
                .is_err()
        );
        assert!(p.check(&headers("127.0.0.1:4788", Some("null"))).is_err());
    }
}
