//! The base URL requests go to.

use serde_json::Value;
use url::Url;

use crate::model::{ImportOptions, SpecVersion};
use crate::warnings::Warnings;

/// `--base-url`, else what the document declares.
pub(crate) fn base_url(
    doc: &Value,
    version: SpecVersion,
    options: &ImportOptions,
    warnings: &mut Warnings,
) -> Option<String> {
    if let Some(url) = &options.base_url {
        return Some(url.trim().trim_end_matches('/').to_string());
    }
    let url = match version {
        SpecVersion::Swagger2 => swagger_base(doc, options),
        SpecVersion::OpenApi30 | SpecVersion::OpenApi31 => match doc.get("servers") {
            Some(servers) if has_servers(servers) => server_url(servers, options, warnings),
            // OpenAPI: no servers means the document's own location.
            _ => options.source_url.as_deref().and_then(|s| resolve(s, "/")),
        },
    };
    if url.is_none() {
        warnings.push("the document gives no absolute server URL; pass a base URL");
    }
    url
}

fn has_servers(servers: &Value) -> bool {
    servers.as_array().is_some_and(|s| !s.is_empty())
}

/// The first entry of an OpenAPI 3 `servers` list, with its variables at
/// their defaults and resolved against the source URL when relative.
pub(crate) fn server_url(
    servers: &Value,
    options: &ImportOptions,
    warnings: &mut Warnings,
) -> Option<String> {
    let servers = servers.as_array()?;
    let first = servers.first()?;
    if let Some(url) = usable_url(first, options, warnings) {
        return Some(url);
    }
    // A relative first server with nothing to resolve it against: a later
    // absolute one still names the API's host.
    servers.iter().skip(1).find_map(|server| {
        let url = substitute(
            server.get("url")?.as_str()?.trim(),
            server.get("variables"),
            &mut Warnings::default(),
        );
        absolute(&scheme_relative_as_https(&url))
    })
}

/// One server's URL, absolute, or resolved against the document's source.
fn usable_url(server: &Value, options: &ImportOptions, warnings: &mut Warnings) -> Option<String> {
    let template = server.get("url")?.as_str()?.trim();
    let url = scheme_relative_as_https(&substitute(template, server.get("variables"), warnings));
    if let Some(absolute) = absolute(&url) {
        return Some(absolute);
    }
    let source = options.source_url.as_deref()?;
    resolve(source, &url)
}

/// `//host/path` (what converters make of a Swagger 2 document without
/// `schemes`) is taken as https, as a Swagger 2 `host` without schemes is.
fn scheme_relative_as_https(url: &str) -> String {
    match url.strip_prefix("//") {
        Some(rest) if !rest.is_empty() => format!("https://{rest}"),
        _ => url.to_string(),
    }
}

/// Replaces `{name}` with the variable's default (or its first enum value).
fn substitute(template: &str, variables: Option<&Value>, warnings: &mut Warnings) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some((before, after)) = rest.split_once('{') {
        let Some((name, tail)) = after.split_once('}') else {
            break;
        };
        out.push_str(before);
        match variable_default(variables, name) {
            Some(value) => out.push_str(&value),
            None => {
                warnings.push(format!("server variable {{{name}}} has no default"));
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

fn variable_default(variables: Option<&Value>, name: &str) -> Option<String> {
    let variable = variables?.get(name)?;
    let value = variable
        .get("default")
        .or_else(|| variable.get("enum").and_then(|e| e.get(0)))?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Swagger 2: `schemes` (https preferred) + `host` + `basePath`; the
/// source URL stands in for a missing scheme or host.
fn swagger_base(doc: &Value, options: &ImportOptions) -> Option<String> {
    let source = options
        .source_url
        .as_deref()
        .and_then(|s| Url::parse(s).ok());
    let host = match doc.get("host").and_then(Value::as_str) {
        Some(host) if !host.trim().is_empty() => host.trim().to_string(),
        _ => {
            let source = source.as_ref()?;
            let host = source.host_str()?;
            match source.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            }
        }
    };
    let schemes: Vec<&str> = doc
        .get("schemes")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let scheme = if schemes.contains(&"https") {
        "https".to_string()
    } else if let Some(first) = schemes.first() {
        first.to_string()
    } else {
        source.map_or_else(|| "https".to_string(), |s| s.scheme().to_string())
    };
    let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
    let base_path = base_path.trim();
    let slash = if base_path.is_empty() || base_path.starts_with('/') {
        ""
    } else {
        "/"
    };
    absolute(&format!("{scheme}://{host}{slash}{base_path}"))
}

/// The URL without trailing slashes when it is an absolute http(s) URL.
fn absolute(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return None;
    }
    Some(url.trim_end_matches('/').to_string())
}

fn resolve(source: &str, relative: &str) -> Option<String> {
    let joined = Url::parse(source).ok()?.join(relative).ok()?;
    absolute(joined.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base(doc: Value, version: SpecVersion, source: Option<&str>) -> Option<String> {
        let options = ImportOptions {
            source_url: source.map(str::to_string),
            ..ImportOptions::new("ns")
        };
        base_url(&doc, version, &options, &mut Warnings::default())
    }

    const V3: SpecVersion = SpecVersion::OpenApi30;
    const V2: SpecVersion = SpecVersion::Swagger2;

    #[test]
    fn option_wins() {
        let options = ImportOptions {
            base_url: Some("https://example.test/api/".into()),
            ..ImportOptions::new("ns")
        };
        let doc = json!({"servers": [{"url": "https://other.test"}]});
        let url = base_url(&doc, V3, &options, &mut Warnings::default());
        assert_eq!(url.as_deref(), Some("https://example.test/api"));
    }

    #[test]
    fn first_server_with_variables() {
        let doc = json!({"servers": [
            {"url": "https://{region}.example.test:{port}/{version}/",
             "variables": {"region": {"default": "eu"}, "port": {"enum": ["8443"]},
                           "version": {"default": "v2"}}},
            {"url": "https://second.test"}
        ]});
        assert_eq!(
            base(doc, V3, None).as_deref(),
            Some("https://eu.example.test:8443/v2")
        );
    }

    #[test]
    fn scheme_relative_and_later_absolute_servers() {
        let doc = json!({"servers": [{"url": "//api.example.test/v1/"}]});
        assert_eq!(
            base(doc, V3, None).as_deref(),
            Some("https://api.example.test/v1")
        );
        let doc = json!({"servers": [{"url": "/api"}, {"url": "https://abs.test/api"}]});
        assert_eq!(
            base(doc.clone(), V3, None).as_deref(),
            Some("https://abs.test/api")
        );
        // With a source, the first server resolved against it still wins.
        let source = Some("https://docs.test/openapi.json");
        assert_eq!(
            base(doc, V3, source).as_deref(),
            Some("https://docs.test/api")
        );
    }

    #[test]
    fn relative_servers_need_a_source() {
        let doc = json!({"servers": [{"url": "/api/v3"}]});
        assert_eq!(base(doc.clone(), V3, None), None);
        let source = Some("https://petstore3.test/openapi.json");
        assert_eq!(
            base(doc, V3, source).as_deref(),
            Some("https://petstore3.test/api/v3")
        );
        let none = json!({});
        assert_eq!(
            base(none.clone(), V3, source).as_deref(),
            Some("https://petstore3.test")
        );
        assert_eq!(base(none, V3, None), None);
    }

    #[test]
    fn swagger_host_and_base_path() {
        let doc = json!({"host": "petstore.test", "basePath": "/v2", "schemes": ["http", "https"]});
        assert_eq!(
            base(doc, V2, None).as_deref(),
            Some("https://petstore.test/v2")
        );
        let doc = json!({"host": "petstore.test", "schemes": ["http"]});
        assert_eq!(base(doc, V2, None).as_deref(), Some("http://petstore.test"));
        let doc = json!({"basePath": "/api"});
        assert_eq!(base(doc.clone(), V2, None), None);
        let source = Some("http://localhost:8080/swagger.json");
        assert_eq!(
            base(doc, V2, source).as_deref(),
            Some("http://localhost:8080/api")
        );
    }

    #[test]
    fn only_http_urls() {
        let doc = json!({"servers": [{"url": "ftp://files.test"}]});
        assert_eq!(base(doc, V3, None), None);
    }
}
