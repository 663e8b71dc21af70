//! Security schemes (`components.securitySchemes`, Swagger's
//! `securityDefinitions`) as the auth methods a connection can supply.

use serde_json::{Map, Value};

use crate::model::{AuthMethod, OAuthFlow, OAuthFlows, SpecVersion};
use crate::pointer;
use crate::warnings::Warnings;

pub(crate) fn methods(
    doc: &Value,
    version: SpecVersion,
    warnings: &mut Warnings,
) -> Vec<AuthMethod> {
    let schemes = match version {
        SpecVersion::Swagger2 => doc.get("securityDefinitions"),
        SpecVersion::OpenApi30 | SpecVersion::OpenApi31 => {
            doc.pointer("/components/securitySchemes")
        }
    };
    let Some(schemes) = schemes.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut methods = Vec::new();
    for (name, raw) in schemes {
        match pointer::follow(doc, raw) {
            Ok(Value::Object(scheme)) => {
                let mut method = method(name, scheme);
                if let AuthMethod::OAuth2 {
                    required_scopes, ..
                } = &mut method
                {
                    *required_scopes = requirement_scopes(doc, name);
                }
                methods.push(method)
            }
            Ok(_) => warnings.push(format!(
                "security scheme {name:?} is not an object; skipped"
            )),
            Err(e) => warnings.push(format!("security scheme {name:?}: {e}; skipped")),
        }
    }
    methods
}

fn method(name: &str, scheme: &Map<String, Value>) -> AuthMethod {
    let text = |key: &str| scheme.get(key).and_then(Value::as_str).map(str::trim);
    let scheme_name = name.to_string();
    let kind = text("type").unwrap_or("");
    match kind {
        "apiKey" => api_key(scheme_name, text("in"), text("name")),
        "http" => match text("scheme").map(str::to_ascii_lowercase).as_deref() {
            Some("bearer") => AuthMethod::Bearer {
                scheme: scheme_name,
            },
            Some("basic") => AuthMethod::Basic {
                scheme: scheme_name,
            },
            other => AuthMethod::Other {
                scheme: scheme_name,
                kind: format!("http:{}", other.unwrap_or("")),
            },
        },
        "basic" => AuthMethod::Basic {
            scheme: scheme_name,
        },
        "oauth2" => AuthMethod::OAuth2 {
            scheme: scheme_name,
            flows: Some(flows(scheme)),
            openid_connect_url: None,
            required_scopes: Vec::new(),
        },
        "openIdConnect" => AuthMethod::OAuth2 {
            scheme: scheme_name,
            flows: None,
            openid_connect_url: text("openIdConnectUrl").map(str::to_string),
            required_scopes: Vec::new(),
        },
        other => AuthMethod::Other {
            scheme: scheme_name,
            kind: other.to_string(),
        },
    }
}

/// The flows a login can use: OpenAPI 3's `flows.authorizationCode` and
/// `flows.clientCredentials`, Swagger 2's `flow: accessCode | application`.
fn flows(scheme: &Map<String, Value>) -> OAuthFlows {
    let flow = |raw: Option<&Value>| {
        let raw = raw?.as_object()?;
        let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_string);
        Some(OAuthFlow {
            authorization_url: text("authorizationUrl"),
            token_url: text("tokenUrl"),
            scopes: raw
                .get("scopes")
                .and_then(Value::as_object)
                .map(|s| s.keys().cloned().collect())
                .unwrap_or_default(),
        })
    };
    match scheme.get("flows") {
        Some(flows) => OAuthFlows {
            authorization_code: flow(flows.get("authorizationCode")),
            client_credentials: flow(flows.get("clientCredentials")),
        },
        None => {
            let swagger = flow(Some(&Value::Object(scheme.clone())));
            match scheme.get("flow").and_then(Value::as_str) {
                Some("accessCode") => OAuthFlows {
                    authorization_code: swagger,
                    client_credentials: None,
                },
                Some("application") => OAuthFlows {
                    authorization_code: None,
                    client_credentials: swagger,
                },
                _ => OAuthFlows::default(),
            }
        }
    }
}

/// The scopes that security requirements (the document's and each
/// operation's) ask of the scheme `name`, each once, in order.
fn requirement_scopes(doc: &Value, name: &str) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    let mut take = |requirements: Option<&Value>| {
        for requirement in requirements.and_then(Value::as_array).into_iter().flatten() {
            let named = requirement.get(name).and_then(Value::as_array);
            for scope in named.into_iter().flatten().filter_map(Value::as_str) {
                if !scopes.iter().any(|s| s == scope) {
                    scopes.push(scope.to_string());
                }
            }
        }
    };
    take(doc.get("security"));
    for item in doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
    {
        for operation in item.as_object().into_iter().flat_map(|o| o.values()) {
            take(operation.get("security"));
        }
    }
    scopes
}

fn api_key(scheme: String, location: Option<&str>, name: Option<&str>) -> AuthMethod {
    let Some(name) = name.filter(|n| !n.is_empty()).map(str::to_string) else {
        return AuthMethod::Other {
            scheme,
            kind: "apiKey".to_string(),
        };
    };
    match location {
        Some("header") => AuthMethod::ApiKeyHeader { scheme, name },
        Some("query") => AuthMethod::ApiKeyQuery { scheme, name },
        Some("cookie") => AuthMethod::ApiKeyCookie { scheme, name },
        _ => AuthMethod::Other {
            scheme,
            kind: "apiKey".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openapi_3_schemes() {
        let doc = json!({"components": {"securitySchemes": {
            "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
            "q": {"type": "apiKey", "in": "query", "name": "api_key"},
            "c": {"type": "apiKey", "in": "cookie", "name": "sid"},
            "bearer": {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT"},
            "basic": {"type": "http", "scheme": "basic"},
            "digest": {"type": "http", "scheme": "digest"},
            "oauth": {"type": "oauth2", "flows": {}},
            "oidc": {"type": "openIdConnect"},
            "shared": {"$ref": "#/components/securitySchemes/bearer"},
            "broken": {"$ref": "#/nowhere"},
            "nameless": {"type": "apiKey", "in": "header"}
        }}});
        let mut warnings = Warnings::default();
        let methods = methods(&doc, SpecVersion::OpenApi31, &mut warnings);
        let s = |x: &str| x.to_string();
        assert_eq!(
            methods,
            vec![
                AuthMethod::ApiKeyHeader {
                    scheme: s("key"),
                    name: s("X-Key")
                },
                AuthMethod::ApiKeyQuery {
                    scheme: s("q"),
                    name: s("api_key")
                },
                AuthMethod::ApiKeyCookie {
                    scheme: s("c"),
                    name: s("sid")
                },
                AuthMethod::Bearer {
                    scheme: s("bearer")
                },
                AuthMethod::Basic { scheme: s("basic") },
                AuthMethod::Other {
                    scheme: s("digest"),
                    kind: s("http:digest")
                },
                AuthMethod::OAuth2 {
                    scheme: s("oauth"),
                    flows: Some(OAuthFlows::default()),
                    openid_connect_url: None,
                    required_scopes: vec![],
                },
                AuthMethod::OAuth2 {
                    scheme: s("oidc"),
                    flows: None,
                    openid_connect_url: None,
                    required_scopes: vec![],
                },
                AuthMethod::Bearer {
                    scheme: s("shared")
                },
                AuthMethod::Other {
                    scheme: s("nameless"),
                    kind: s("apiKey")
                },
            ]
        );
        assert_eq!(warnings.finish().len(), 1);
    }

    #[test]
    fn swagger_2_definitions() {
        let doc = json!({"securityDefinitions": {
            "basic": {"type": "basic"},
            "key": {"type": "apiKey", "in": "query", "name": "k"},
            "oauth": {"type": "oauth2", "flow": "implicit"}
        }});
        let methods = methods(&doc, SpecVersion::Swagger2, &mut Warnings::default());
        assert_eq!(methods.len(), 3);
        assert_eq!(
            methods[0],
            AuthMethod::Basic {
                scheme: "basic".into()
            }
        );
        assert_eq!(methods[2].scheme(), "oauth");
    }
}
