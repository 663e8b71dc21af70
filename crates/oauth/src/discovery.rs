//! Where a resource's authorization server is and what it supports: RFC 9728
//! protected-resource metadata, then RFC 8414 / OpenID Connect discovery,
//! with the MCP 2025-03-26 fallbacks for servers that publish neither.

use serde::Deserialize;
use url::Url;

use crate::challenge::Challenge;
use crate::error::OAuthError;
use crate::grant::Flow;
use crate::http::OAuthHttp;
use crate::metadata::ServerMetadata;

/// RFC 9728 protected-resource metadata (the fields we use).
#[derive(Debug, Clone, Deserialize)]
pub struct ResourceMetadata {
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// What an API description says about its OAuth (an OpenAPI `oauth2` or
/// `openIdConnect` scheme).
#[derive(Debug, Clone, Default)]
pub struct Declared {
    pub authorization_url: Option<String>,
    pub token_url: Option<String>,
    /// The token URL of a client-credentials flow.
    pub client_credentials_token_url: Option<String>,
    pub openid_connect_url: Option<String>,
    /// What to ask for when the operator names no scope.
    pub scopes: Vec<String>,
}

/// What discovery found for one protected resource.
#[derive(Debug, Clone)]
pub struct Discovered {
    pub server: ServerMetadata,
    /// The RFC 8707 `resource` to ask tokens for.
    pub resource: Option<String>,
    /// Where the resource metadata was (asked again at the next login).
    pub resource_metadata_url: Option<String>,
    /// The resource's own `scopes_supported`.
    pub resource_scopes: Option<Vec<String>>,
    /// The flow an API description declares alone.
    pub preferred_flow: Option<Flow>,
}

/// Discovery for an MCP server at `server_url` (MCP authorization,
/// 2025-11-25, with the 2025-03-26 fallbacks).
pub async fn discover_mcp(
    http: &OAuthHttp,
    server_url: &Url,
    challenge: Option<&Challenge>,
    remembered_metadata_url: Option<&str>,
) -> Result<Discovered, OAuthError> {
    let hinted = challenge
        .and_then(|c| c.resource_metadata.as_deref())
        .or(remembered_metadata_url);
    let mut found = None;
    for candidate in resource_metadata_urls(server_url, hinted) {
        if let Some(document) = http.get_json::<ResourceMetadata>(&candidate, None).await? {
            found = Some((candidate, document));
            break;
        }
    }
    let Some((metadata_url, prm)) = found else {
        return legacy_mcp(http, server_url).await;
    };
    let resource = match prm.resource.as_deref() {
        Some(named) => {
            if !resource_matches(named, server_url) {
                return Err(OAuthError::Discovery(format!(
                    "the server's resource metadata names another resource ({named}); \
                     refusing to ask for tokens for it"
                )));
            }
            named.to_string()
        }
        None => canonical_resource(server_url),
    };
    let Some(issuer) = prm.authorization_servers.first() else {
        return Err(OAuthError::Discovery(
            "the server's resource metadata names no authorization server".into(),
        ));
    };
    let server = discover_issuer(http, issuer).await?;
    Ok(Discovered {
        server,
        resource: Some(resource),
        resource_metadata_url: Some(metadata_url),
        resource_scopes: prm.scopes_supported,
        preferred_flow: None,
    })
}

/// Discovery for an HTTP API: `--issuer`; else the OpenID configuration
/// its description names; else its declared flows, completed by the
/// metadata of the server at the token URL's origin when that metadata
/// names the same token endpoint (registration, auth methods, PKCE); else
/// the resource metadata its challenge names. No `resource` unless
/// resource metadata names one (some servers refuse the parameter).
pub async fn discover_api(
    http: &OAuthHttp,
    url: &Url,
    declared: &Declared,
    challenge: Option<&Challenge>,
    issuer: Option<&str>,
) -> Result<Discovered, OAuthError> {
    let plain = |server: ServerMetadata, preferred_flow| Discovered {
        server,
        resource: None,
        resource_metadata_url: None,
        resource_scopes: None,
        preferred_flow,
    };
    if let Some(issuer) = issuer {
        return Ok(plain(discover_issuer(http, issuer).await?, None));
    }
    if let Some(config) = &declared.openid_connect_url {
        let config = resolve(url, config)?;
        let server = http
            .get_json::<ServerMetadata>(&config, None)
            .await?
            .filter(|m| m.token_endpoint.is_some())
            .ok_or_else(|| {
                OAuthError::Discovery(format!(
                    "the OpenID configuration at {config} is not usable"
                ))
            })?;
        return Ok(plain(server, None));
    }
    let code_token = declared
        .token_url
        .as_deref()
        .map(|t| resolve(url, t))
        .transpose()?;
    let cc_token = declared
        .client_credentials_token_url
        .as_deref()
        .map(|t| resolve(url, t))
        .transpose()?;
    if let Some(token) = code_token.as_ref().or(cc_token.as_ref()) {
        let only_client_credentials = code_token.is_none();
        let mut server = ServerMetadata {
            authorization_endpoint: declared
                .authorization_url
                .as_deref()
                .map(|a| resolve(url, a))
                .transpose()?,
            token_endpoint: Some(token.clone()),
            grant_types_supported: only_client_credentials
                .then(|| vec!["client_credentials".to_string()]),
            ..ServerMetadata::default()
        };
        if let Ok(token_url) = Url::parse(token) {
            adopt_published(http, &token_url, &mut server).await;
        }
        let preferred = only_client_credentials.then_some(Flow::ClientCredentials);
        return Ok(plain(server, preferred));
    }
    if let Some(challenge) = challenge.filter(|c| c.resource_metadata.is_some()) {
        return discover_mcp(http, url, Some(challenge), None).await;
    }
    Err(OAuthError::Setup(
        "nothing names this API's authorization server: pass --issuer URL".into(),
    ))
}

/// Completes declared endpoints with the metadata the token URL's server
/// publishes, when that metadata is about the same token endpoint.
async fn adopt_published(http: &OAuthHttp, token_url: &Url, server: &mut ServerMetadata) {
    let origin = origin_of(token_url);
    for candidate in [
        format!("{origin}/.well-known/oauth-authorization-server"),
        format!("{origin}/.well-known/openid-configuration"),
    ] {
        let Ok(Some(published)) = http.get_json::<ServerMetadata>(&candidate, None).await else {
            continue;
        };
        if published.token_endpoint != server.token_endpoint {
            continue;
        }
        let declared = std::mem::take(server);
        *server = ServerMetadata {
            authorization_endpoint: declared
                .authorization_endpoint
                .or(published.authorization_endpoint.clone()),
            token_endpoint: declared.token_endpoint,
            grant_types_supported: declared
                .grant_types_supported
                .or(published.grant_types_supported.clone()),
            ..published
        };
        return;
    }
}

fn resolve(base: &Url, url: &str) -> Result<String, OAuthError> {
    base.join(url)
        .map(|u| u.to_string())
        .map_err(|_| OAuthError::Discovery(format!("{url} is not a URL")))
}

/// RFC 8414 / OpenID discovery of an issuer; its `issuer` must match
/// (one trailing `/` ignored on either side).
pub async fn discover_issuer(http: &OAuthHttp, issuer: &str) -> Result<ServerMetadata, OAuthError> {
    let parsed = Url::parse(issuer)
        .map_err(|_| OAuthError::Discovery(format!("the issuer {issuer} is not a URL")))?;
    for candidate in server_metadata_urls(&parsed) {
        let Some(metadata) = http.get_json::<ServerMetadata>(&candidate, None).await? else {
            continue;
        };
        let named = metadata.issuer.as_deref().unwrap_or_default();
        if !same_issuer(named, issuer) {
            return Err(OAuthError::Discovery(format!(
                "the metadata at {candidate} is for the issuer {named:?}, not {issuer}"
            )));
        }
        return Ok(metadata);
    }
    Err(OAuthError::Discovery(format!(
        "the authorization server {issuer} publishes no metadata"
    )))
}

/// MCP 2025-03-26: no resource metadata, the authorization server's
/// metadata at the MCP server's origin (its issuer is not checked: it was
/// found by origin), else `/authorize`, `/token` and `/register` there.
async fn legacy_mcp(http: &OAuthHttp, server_url: &Url) -> Result<Discovered, OAuthError> {
    let origin = origin_of(server_url);
    let url = format!("{origin}/.well-known/oauth-authorization-server");
    let server = match http
        .get_json::<ServerMetadata>(&url, Some(("mcp-protocol-version", "2025-03-26")))
        .await?
    {
        Some(metadata) => metadata,
        None => ServerMetadata {
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: Some(format!("{origin}/token")),
            registration_endpoint: Some(format!("{origin}/register")),
            code_challenge_methods_supported: Some(vec!["S256".into()]),
            token_endpoint_auth_methods_supported: None,
            ..ServerMetadata::default()
        },
    };
    Ok(Discovered {
        server,
        resource: Some(canonical_resource(server_url)),
        resource_metadata_url: None,
        resource_scopes: None,
        preferred_flow: None,
    })
}

/// The challenge's metadata URL first, then the path-inserted well-known
/// URL, then the root one.
pub fn resource_metadata_urls(server_url: &Url, hinted: Option<&str>) -> Vec<String> {
    let mut urls = Vec::new();
    if let Some(hint) = hinted.and_then(|h| server_url.join(h).ok()) {
        // An https resource is never sent to plain http metadata.
        if !(server_url.scheme() == "https" && hint.scheme() != "https") {
            urls.push(hint.to_string());
        }
    }
    let origin = origin_of(server_url);
    let path = server_url.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
    urls.dedup();
    urls
}

/// RFC 8414 §3.1 and OpenID Discovery: for an issuer with a path, the
/// path-inserted forms, then OpenID's appended form, and never the root
/// (it belongs to another tenant).
pub fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Issuers compare exactly, but for one trailing `/` on either side.
pub fn same_issuer(a: &str, b: &str) -> bool {
    !a.is_empty() && a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// A resource named by metadata covers the server when it is the server's
/// URL or a parent path of it on the same origin.
pub fn resource_matches(named: &str, server_url: &Url) -> bool {
    let Ok(named) = Url::parse(named) else {
        return false;
    };
    if named.fragment().is_some() || origin_of(&named) != origin_of(server_url) {
        return false;
    }
    let parent = named.path().trim_end_matches('/');
    let path = server_url.path().trim_end_matches('/');
    parent.is_empty() || path == parent || path.starts_with(&format!("{parent}/"))
}

/// The server's URL as an RFC 8707 resource: no fragment, no query.
pub fn canonical_resource(server_url: &Url) -> String {
    let mut url = server_url.clone();
    url.set_fragment(None);
    url.set_query(None);
    url.to_string()
}

/// `scheme://host[:port]`, lower case, default port dropped (the url crate
/// normalises both).
pub fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn resource_metadata_is_looked_for_hint_first_then_path_then_root() {
        assert_eq!(
            resource_metadata_urls(&url("http://h:1/mcp"), None),
            vec![
                "http://h:1/.well-known/oauth-protected-resource/mcp",
                "http://h:1/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls(
                &url("http://h:1/mcp"),
                Some("/custom/metadata/location.json")
            )[0],
            "http://h:1/custom/metadata/location.json"
        );
        assert_eq!(
            resource_metadata_urls(&url("https://h/"), Some("http://h/evil")),
            vec!["https://h/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn a_path_issuer_never_tries_the_root() {
        let urls = server_metadata_urls(&url("http://h:1/tenant1"));
        assert_eq!(
            urls,
            vec![
                "http://h:1/.well-known/oauth-authorization-server/tenant1",
                "http://h:1/.well-known/openid-configuration/tenant1",
                "http://h:1/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(server_metadata_urls(&url("http://h:1/")).len(), 2);
        // A trailing slash on the issuer builds the same URLs.
        assert_eq!(server_metadata_urls(&url("http://h:1/tenant1/")), urls);
    }

    #[test]
    fn issuers_match_but_for_one_trailing_slash() {
        assert!(same_issuer("https://a.example/", "https://a.example"));
        assert!(same_issuer("https://a.example/t", "https://a.example/t/"));
        assert!(!same_issuer("https://a.example/t", "https://a.example/u"));
        assert!(!same_issuer("", "https://a.example"));
    }

    #[test]
    fn a_resource_must_be_the_server_or_its_parent() {
        let server = url("http://localhost:3000/mcp");
        assert!(resource_matches("http://localhost:3000/mcp", &server));
        assert!(resource_matches("http://localhost:3000/mcp/", &server));
        assert!(resource_matches("http://localhost:3000", &server));
        assert!(resource_matches("http://LOCALHOST:3000/", &server));
        assert!(!resource_matches("https://evil.example.com/mcp", &server));
        assert!(!resource_matches("http://localhost:3001/mcp", &server));
        assert!(!resource_matches("http://localhost:3000/mcpx", &server));
        assert!(!resource_matches("http://localhost:3000/mcp#f", &server));
    }
}
