//! Reading the document: JSON or YAML, and which OpenAPI dialect.

use serde_json::Value;

use crate::error::ImportError;
use crate::model::SpecVersion;

/// Larger documents are refused before parsing. The biggest public specs
/// (GitHub's fully dereferenced one) are around 75 MB.
pub(crate) const MAX_SPEC_BYTES: usize = 256 * 1024 * 1024;

/// Parses JSON when the text looks like JSON, else YAML (a superset of
/// JSON, but far slower to parse, so JSON goes first).
pub(crate) fn parse(text: &str) -> Result<Value, ImportError> {
    if text.len() > MAX_SPEC_BYTES {
        return Err(ImportError::TooLarge {
            size: text.len(),
            limit: MAX_SPEC_BYTES,
        });
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let looks_like_json = text.trim_start().starts_with('{');
    let value = if looks_like_json {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            // A YAML flow mapping also starts with `{`; report the JSON
            // error if YAML cannot make sense of it either.
            Err(json_error) => serde_norway::from_str::<Value>(text)
                .map_err(|_| ImportError::Parse(json_error.to_string()))?,
        }
    } else {
        serde_norway::from_str::<Value>(text).map_err(|e| ImportError::Parse(e.to_string()))?
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ImportError::NotOpenApi(
            "the top level is not an object".to_string(),
        ))
    }
}

/// `swagger: "2.0"`, `openapi: 3.0.x` or `openapi: 3.1.x`.
pub(crate) fn version(doc: &Value) -> Result<SpecVersion, ImportError> {
    if let Some(swagger) = doc.get("swagger") {
        let text = version_text(swagger);
        return match text.as_str() {
            "2.0" | "2" => Ok(SpecVersion::Swagger2),
            _ => Err(ImportError::UnsupportedVersion(text)),
        };
    }
    let Some(openapi) = doc.get("openapi") else {
        return Err(ImportError::NotOpenApi(
            "neither `openapi` nor `swagger` is set".to_string(),
        ));
    };
    let text = version_text(openapi);
    if text == "3.0" || text.starts_with("3.0.") {
        Ok(SpecVersion::OpenApi30)
    } else if text == "3.1" || text.starts_with("3.1.") {
        Ok(SpecVersion::OpenApi31)
    } else {
        Err(ImportError::UnsupportedVersion(text))
    }
}

/// YAML authors often write `swagger: 2.0` unquoted, which parses as a
/// number.
fn version_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// `info.title`, trimmed, when present.
pub(crate) fn title(doc: &Value) -> Option<String> {
    let title = doc.pointer("/info/title")?.as_str()?.trim();
    (!title.is_empty()).then(|| crate::text::bounded(title, 200))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_json_and_yaml() {
        assert_eq!(
            parse("{\"openapi\": \"3.0.0\"}").unwrap(),
            json!({"openapi": "3.0.0"})
        );
        assert_eq!(
            parse("\u{feff}openapi: 3.1.0\n").unwrap(),
            json!({"openapi": "3.1.0"})
        );
        // Flow-style YAML that is not JSON.
        assert_eq!(
            parse("{openapi: 3.0.1}").unwrap(),
            json!({"openapi": "3.0.1"})
        );
        // Integer keys (response codes) become strings.
        let doc = parse("responses:\n  200:\n    description: ok\n").unwrap();
        assert!(doc.pointer("/responses/200").is_some());
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(parse("{\"a\": "), Err(ImportError::Parse(_))));
        assert!(matches!(
            parse("- 1\n- 2\n"),
            Err(ImportError::NotOpenApi(_))
        ));
        assert!(matches!(
            parse("just text"),
            Err(ImportError::NotOpenApi(_))
        ));
        assert!(matches!(parse("a: [1, 2"), Err(ImportError::Parse(_))));
    }

    #[test]
    fn yaml_alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
            ));
        }
        assert!(matches!(parse(&text), Err(ImportError::Parse(_))));
    }

    #[test]
    fn detects_versions() {
        let v = |doc: Value| version(&doc);
        assert_eq!(v(json!({"swagger": "2.0"})), Ok(SpecVersion::Swagger2));
        assert_eq!(v(json!({"swagger": 2.0})), Ok(SpecVersion::Swagger2));
        assert_eq!(v(json!({"openapi": "3.0.3"})), Ok(SpecVersion::OpenApi30));
        assert_eq!(v(json!({"openapi": "3.1.0"})), Ok(SpecVersion::OpenApi31));
        assert_eq!(
            v(json!({"openapi": "4.0.0"})),
            Err(ImportError::UnsupportedVersion("4.0.0".into()))
        );
        assert_eq!(
            v(json!({"swagger": "1.2"})),
            Err(ImportError::UnsupportedVersion("1.2".into()))
        );
        assert!(matches!(
            v(json!({"info": {}})),
            Err(ImportError::NotOpenApi(_))
        ));
    }
}
