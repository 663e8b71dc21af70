//! RFC 8707 `resource` (SPEC §4): a token is for this server's `/mcp`
//! only. Clients spell that URL in several ways — a trailing slash, an
//! upper-case host or scheme, a query — and those are forgiven; another
//! scheme, host, port or path is `invalid_target`.

use url::Url;

/// Whether `resource` (absent: this server) names `mcp_url`.
pub fn names_this_server(resource: Option<&str>, mcp_url: &Url) -> bool {
    let Some(resource) = resource else {
        return true;
    };
    let Ok(named) = Url::parse(resource) else {
        return false;
    };
    // Url lower-cases the scheme and host and drops a default port.
    named.fragment().is_none()
        && named.username().is_empty()
        && named.password().is_none()
        && named.scheme() == mcp_url.scheme()
        && named.host_str() == mcp_url.host_str()
        && named.port_or_known_default() == mcp_url.port_or_known_default()
        && named.path().trim_end_matches('/') == mcp_url.path().trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn mcp() -> Url {
        Url::parse("https://gateway.example.com/mcp").unwrap()
    }

    #[test]
    fn spellings_of_this_server_are_forgiven() {
        for same in [
            None,
            Some("https://gateway.example.com/mcp"),
            Some("https://gateway.example.com/mcp/"),
            Some("HTTPS://Gateway.Example.COM/mcp"),
            Some("https://gateway.example.com:443/mcp"),
            Some("https://gateway.example.com/mcp?session=1"),
        ] {
            assert!(names_this_server(same, &mcp()), "{same:?}");
        }
        for other in [
            "https://evil.example.com/mcp",
            "http://gateway.example.com/mcp",
            "https://gateway.example.com:8443/mcp",
            "https://gateway.example.com/other",
            "https://gateway.example.com/",
            "https://gateway.example.com/mcp#x",
            "not a url",
        ] {
            assert!(!names_this_server(Some(other), &mcp()), "{other}");
        }
    }

    proptest! {
        /// Another host is never this server, however it is written.
        #[test]
        fn another_host_is_refused(host in "[a-z]{1,12}\\.[a-z]{2,4}", slash in any::<bool>()) {
            prop_assume!(host != "gateway.example.com");
            let text = format!("https://{host}/mcp{}", if slash { "/" } else { "" });
            prop_assert!(!names_this_server(Some(&text), &mcp()));
        }
    }
}
