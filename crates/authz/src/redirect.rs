//! Redirect URIs (SPEC §4): what a client may register, and whether the
//! one presented at `/authorize` is one it registered.
//!
//! Registration takes `https` with any host, `http` only on a loopback
//! host (`localhost`, `127.0.0.1`, `[::1]`), and private-use schemes
//! (`cursor://…`, `com.example.app:/cb`) but those that run or read
//! something in a browser; never a fragment or user info. At `/authorize`
//! the presented URI must equal a registered one exactly, except that a
//! loopback `http` URI matches on any port: native clients register
//! `http://127.0.0.1/callback` and listen wherever a port is free.

use url::Url;

/// Schemes a browser would run or read instead of handing to an app.
const FORBIDDEN_SCHEMES: [&str; 6] = ["javascript", "data", "file", "vbscript", "about", "blob"];

/// Why a redirect URI cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedirectError {
    #[error("the redirect URI is not an absolute URI")]
    NotAUri,
    #[error("a redirect URI has no fragment")]
    Fragment,
    #[error("a redirect URI carries no user name or password")]
    UserInfo,
    #[error("the scheme {0:?} cannot be a redirect URI")]
    ForbiddenScheme(String),
    #[error("plain http is for loopback hosts only (localhost, 127.0.0.1, [::1]); use https")]
    PlainHttp,
    #[error("a redirect URI names a host")]
    NoHost,
}

/// A registered redirect URI: checked, and kept as the client wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectUri {
    text: String,
    url: Url,
}

impl RedirectUri {
    /// Checks `text` against the registration rules.
    pub fn parse(text: &str) -> Result<Self, RedirectError> {
        let url = Url::parse(text).map_err(|_| RedirectError::NotAUri)?;
        if url.fragment().is_some() || text.contains('#') {
            return Err(RedirectError::Fragment);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(RedirectError::UserInfo);
        }
        match url.scheme() {
            "https" if url.host_str().is_none_or(str::is_empty) => {
                return Err(RedirectError::NoHost);
            }
            "http" if !is_loopback(&url) => return Err(RedirectError::PlainHttp),
            scheme if FORBIDDEN_SCHEMES.contains(&scheme) => {
                return Err(RedirectError::ForbiddenScheme(scheme.to_string()));
            }
            _ => {}
        }
        Ok(RedirectUri {
            text: text.to_string(),
            url,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// A loopback `http` URI (matched on any port).
    pub fn is_loopback(&self) -> bool {
        self.url.scheme() == "http" && is_loopback(&self.url)
    }

    /// Whether `presented` (at `/authorize`) is this URI: the same text,
    /// or, for a loopback `http` URI, the same but for the port.
    pub fn matches(&self, presented: &str) -> bool {
        if presented == self.text {
            return true;
        }
        if !self.is_loopback() || presented.contains('#') {
            return false;
        }
        let Ok(other) = Url::parse(presented) else {
            return false;
        };
        other.scheme() == "http"
            && other.username().is_empty()
            && other.password().is_none()
            && other.host_str() == self.url.host_str()
            && other.path() == self.url.path()
            && other.query() == self.url.query()
    }

    /// The host a person is sent to, shown in full on the consent page.
    pub fn host(&self) -> Option<&str> {
        self.url.host_str()
    }
}

/// `localhost`, `127.0.0.1` or `[::1]`, written so.
fn is_loopback(url: &Url) -> bool {
    matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn registration_takes_https_loopback_http_and_app_schemes_only() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1/callback",
            "http://localhost:33418/cb",
            "http://[::1]:8080/",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
            "com.example.app:/oauth2redirect",
        ] {
            assert!(RedirectUri::parse(ok).is_ok(), "{ok}");
        }
        let refused = [
            ("http://example.com/cb", RedirectError::PlainHttp),
            ("http://127.0.0.2/cb", RedirectError::PlainHttp),
            ("https://example.com/cb#frag", RedirectError::Fragment),
            ("https://user:pw@example.com/cb", RedirectError::UserInfo),
            (
                "javascript:alert(1)",
                RedirectError::ForbiddenScheme("javascript".into()),
            ),
            (
                "data:text/html,hi",
                RedirectError::ForbiddenScheme("data".into()),
            ),
            (
                "file:///etc/passwd",
                RedirectError::ForbiddenScheme("file".into()),
            ),
            ("/relative", RedirectError::NotAUri),
        ];
        for (text, why) in refused {
            assert_eq!(RedirectUri::parse(text), Err(why), "{text}");
        }
    }

    #[test]
    fn a_loopback_uri_matches_on_any_port_and_nothing_else_moves() {
        let registered = RedirectUri::parse("http://127.0.0.1/callback").unwrap();
        assert!(registered.matches("http://127.0.0.1:53124/callback"));
        assert!(registered.matches("http://127.0.0.1/callback"));
        assert!(
            !registered.matches("http://localhost:53124/callback"),
            "another host"
        );
        assert!(!registered.matches("http://127.0.0.1:53124/other"));
        assert!(!registered.matches("http://127.0.0.1:53124/callback?x=1"));
        assert!(!registered.matches("https://127.0.0.1:53124/callback"));
        let app = RedirectUri::parse("https://claude.ai/api/mcp/auth_callback").unwrap();
        assert!(
            !app.matches("https://claude.ai:444/api/mcp/auth_callback"),
            "ports move only on loopback"
        );
        assert!(!app.matches("https://claude.ai/api/mcp/auth_callback/"));
    }

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("localhost".to_string()),
            Just("127.0.0.1".to_string()),
            Just("[::1]".to_string()),
            "[a-z]{1,10}\\.(com|ai|dev)",
        ]
    }

    fn path() -> impl Strategy<Value = String> {
        "(/[a-zA-Z0-9_.~-]{0,8}){0,3}"
    }

    proptest! {
        /// A registered loopback URI matches itself on every port.
        #[test]
        fn loopback_matches_every_port(
            host in prop_oneof![Just("localhost"), Just("127.0.0.1"), Just("[::1]")],
            path in path(),
            port in 1u16..,
        ) {
            let registered = RedirectUri::parse(&format!("http://{host}{path}")).unwrap();
            let presented = format!("http://{host}:{port}{path}");
            prop_assert!(registered.matches(&presented), "{} vs {}", registered.as_str(), presented);
        }

        /// The open-redirect rule: a URI that differs from the registered
        /// one in scheme, host or path never matches, whatever the port.
        #[test]
        fn another_host_or_path_never_matches(
            (h1, h2) in (host(), host()),
            (p1, p2) in (path(), path()),
            https in any::<bool>(),
            port in proptest::option::of(1u16..),
        ) {
            let scheme = |h: &str| if https || !matches!(h, "localhost" | "127.0.0.1" | "[::1]") { "https" } else { "http" };
            let Ok(registered) = RedirectUri::parse(&format!("{}://{h1}{p1}", scheme(&h1))) else {
                return Ok(());
            };
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            let presented = format!("{}://{h2}{port}{p2}", scheme(&h2));
            let same_place = h1 == h2 && Url::parse(&presented).map(|u| u.path().to_string()).ok()
                == Some(registered.url.path().to_string())
                && scheme(&h1) == scheme(&h2);
            if !same_place {
                prop_assert!(!registered.matches(&presented), "{} matched {}", registered.as_str(), presented);
            }
        }

        /// Whatever text is offered, parsing never panics, and what it
        /// accepts keeps the rules.
        #[test]
        fn accepted_uris_keep_the_rules(text in "\\PC{0,60}") {
            if let Ok(uri) = RedirectUri::parse(&text) {
                prop_assert!(!uri.as_str().contains('#'));
                prop_assert!(uri.url.username().is_empty());
                prop_assert!(!FORBIDDEN_SCHEMES.contains(&uri.url.scheme()));
                if uri.url.scheme() == "http" {
                    prop_assert!(uri.is_loopback());
                }
            }
        }
    }
}
