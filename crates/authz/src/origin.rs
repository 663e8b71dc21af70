//! Which URL names this server to a client: the issuer, the resource and
//! every endpoint in the documents derive from it (SPEC §4).
//!
//! A configured public URL is used as it is, whatever `Host` a request
//! carries: an attacker who can send any `Host` must not be able to make
//! the server name itself after them. Without one, a loopback server
//! answers in the loopback spelling the request used (`localhost`,
//! `127.0.0.1`, `[::1]`), so that a client configured with either URL
//! finds an issuer that matches it; any other `Host` gets the default URL.

use axum::http::{HeaderMap, header};

#[derive(Debug, Clone)]
pub struct PublicOrigin {
    /// `--public-url`, without a trailing slash.
    configured: Option<String>,
    /// `http://<listen address>`, for a request that is not on a loopback
    /// name when nothing is configured.
    default: String,
}

/// Loopback host names a request may use (ports aside).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl PublicOrigin {
    /// `configured` is `--public-url` (None when not given); `default` is
    /// `http://<listen address>`.
    pub fn new(configured: Option<&str>, default: &str) -> Self {
        PublicOrigin {
            configured: configured.map(normalise),
            default: normalise(default),
        }
    }

    /// The base URL (scheme, authority and any path, without a trailing
    /// slash) for a request with these headers.
    pub fn for_request(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.configured {
            return url.clone();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if is_loopback_authority(host) && self.is_loopback_default_on_port_of(host) {
            format!("http://{}", host.to_ascii_lowercase())
        } else {
            self.default.clone()
        }
    }

    /// Whether the default URL is a loopback one on the port `authority`
    /// names (so that a loopback spelling names this very server, not any
    /// port a `Host` header cares to say).
    fn is_loopback_default_on_port_of(&self, authority: &str) -> bool {
        let Some(default) = self.default.strip_prefix("http://") else {
            return false;
        };
        is_loopback_authority(default) && port_of(default) == port_of(authority)
    }

    /// Whether the public URL is https (cookies are then `Secure`).
    pub fn is_https(&self) -> bool {
        self.configured
            .as_deref()
            .unwrap_or(&self.default)
            .starts_with("https://")
    }

    /// The path part of the public URL ("" or "/base"), which RFC 8414
    /// inserts after `/.well-known/oauth-authorization-server`.
    pub fn path(&self) -> &str {
        let url = self.configured.as_deref().unwrap_or(&self.default);
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        after_scheme.find('/').map_or("", |i| &after_scheme[i..])
    }
}

impl PublicOrigin {
    /// Whether `resource` names this server's `/mcp` as seen from `base`
    /// (SPEC §4's forgiven spellings); on a loopback server without a
    /// configured URL, any loopback spelling of it does.
    pub fn names_mcp(&self, resource: Option<&str>, base: &str) -> bool {
        let candidates: Vec<String> = if self.configured.is_none() {
            let authority = base.strip_prefix("http://").unwrap_or(base);
            let port = authority
                .rsplit_once(':')
                .filter(|(_, p)| !p.contains(']'))
                .map(|(_, p)| format!(":{p}"))
                .unwrap_or_default();
            let mut all = vec![base.to_string()];
            if is_loopback_authority(authority) {
                all.extend(LOOPBACK_HOSTS.iter().map(|h| format!("http://{h}{port}")));
            }
            all
        } else {
            vec![base.to_string()]
        };
        candidates.iter().any(|base| {
            url::Url::parse(&format!("{base}/mcp"))
                .is_ok_and(|mcp| crate::resource::names_this_server(resource, &mcp))
        })
    }
}

/// A URL as the documents spell it: scheme and host lower-cased, a
/// default port dropped, no trailing slash.
fn normalise(url: &str) -> String {
    let parsed = url::Url::parse(url).map(|u| u.to_string());
    parsed
        .as_deref()
        .unwrap_or(url)
        .trim_end_matches('/')
        .to_string()
}

/// The port of `host[:port]`, if it names one.
fn port_of(authority: &str) -> Option<&str> {
    authority
        .rsplit_once(':')
        .filter(|(_, p)| !p.contains(']'))
        .map(|(_, p)| p)
}

/// `host[:port]` with a loopback host and, if any, a numeric port.
fn is_loopback_authority(authority: &str) -> bool {
    let (host, port) = match authority.rsplit_once(':') {
        // "[::1]" alone has colons inside the brackets only.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && LOOPBACK_HOSTS.iter().any(|h| h.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn host(h: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(h).unwrap());
        headers
    }

    #[test]
    fn a_configured_url_is_used_whatever_the_host() {
        let origin = PublicOrigin::new(Some("https://mcp.example.com/"), "http://127.0.0.1:8080");
        assert_eq!(
            origin.for_request(&host("evil.example")),
            "https://mcp.example.com"
        );
        assert_eq!(
            origin.for_request(&host("localhost:8080")),
            "https://mcp.example.com"
        );
        assert!(origin.is_https());
    }

    #[test]
    fn a_loopback_request_is_answered_in_its_own_spelling() {
        let origin = PublicOrigin::new(None, "http://127.0.0.1:8080");
        assert_eq!(
            origin.for_request(&host("localhost:8080")),
            "http://localhost:8080"
        );
        assert_eq!(
            origin.for_request(&host("127.0.0.1:8080")),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin.for_request(&host("[::1]:8080")), "http://[::1]:8080");
        assert_eq!(
            origin.for_request(&host("LOCALHOST:8080")),
            "http://localhost:8080"
        );
    }

    #[test]
    fn any_other_host_gets_the_default_and_never_itself() {
        let origin = PublicOrigin::new(None, "http://10.0.0.5:8080");
        for h in [
            "evil.example",
            "localhost.evil.example",
            "localhost:80@evil",
            "127.0.0.1:x",
            "",
        ] {
            assert_eq!(origin.for_request(&host(h)), "http://10.0.0.5:8080", "{h}");
        }
    }

    #[test]
    fn any_loopback_spelling_names_a_loopback_server_and_nothing_else_does() {
        let origin = PublicOrigin::new(None, "http://127.0.0.1:8080");
        let base = "http://localhost:8080";
        for ok in [
            None,
            Some("http://localhost:8080/mcp"),
            Some("http://127.0.0.1:8080/mcp/"),
            Some("http://LOCALHOST:8080/mcp"),
            Some("http://[::1]:8080/mcp"),
        ] {
            assert!(origin.names_mcp(ok, base), "{ok:?}");
        }
        for bad in [
            "http://127.0.0.1:8081/mcp",
            "http://evil.example:8080/mcp",
            "http://localhost:8080/other",
        ] {
            assert!(!origin.names_mcp(Some(bad), base), "{bad}");
        }
        let public = PublicOrigin::new(Some("https://mcp.example.com"), "http://127.0.0.1:8080");
        assert!(public.names_mcp(
            Some("https://MCP.example.com/mcp/"),
            "https://mcp.example.com"
        ));
        assert!(!public.names_mcp(Some("http://localhost:8080/mcp"), "https://mcp.example.com"));
    }

    #[test]
    fn a_loopback_host_is_believed_only_on_a_loopback_server_and_its_port() {
        let on_loopback = PublicOrigin::new(None, "http://127.0.0.1:8080");
        assert_eq!(
            on_loopback.for_request(&host("localhost:1")),
            "http://127.0.0.1:8080"
        );
        let elsewhere = PublicOrigin::new(None, "http://10.0.0.5:8080");
        assert_eq!(
            elsewhere.for_request(&host("localhost:8080")),
            "http://10.0.0.5:8080"
        );
    }

    #[test]
    fn a_configured_url_is_normalised() {
        let origin = PublicOrigin::new(Some("HTTPS://MCP.Example.com:443/"), "http://127.0.0.1:1");
        assert_eq!(
            origin.for_request(&HeaderMap::new()),
            "https://mcp.example.com"
        );
        assert!(origin.is_https());
    }

    #[test]
    fn the_path_of_the_public_url_is_kept_for_path_insertion() {
        assert_eq!(
            PublicOrigin::new(Some("https://x.example/exec/"), "").path(),
            "/exec"
        );
        assert_eq!(PublicOrigin::new(Some("https://x.example"), "").path(), "");
    }
}
