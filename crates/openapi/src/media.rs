//! Request bodies and response schemas, and which media type to use.

use serde_json::{Map, Value, json};

use crate::context::{Context, Operation};
use crate::model::{BodySpec, SpecVersion};
use crate::parameters::{self, Split};
use crate::pointer;
use crate::schema::DocBuilder;

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";
const MULTIPART: &str = "multipart/form-data";

/// A request body: how to send it and the schema of the `body` property.
pub(crate) struct BodyShape {
    pub(crate) spec: BodySpec,
    pub(crate) schema: Value,
}

/// Lower is better: JSON, then other JSON types, then forms, then the rest.
fn rank(media_type: &str) -> u8 {
    let essence = essence(media_type);
    match essence.as_str() {
        JSON => 0,
        e if e.contains("json") => 1,
        FORM => 2,
        MULTIPART => 3,
        _ => 4,
    }
}

/// Whether a media type is JSON (`…/json` or `…+json`): the rule the
/// outbound client reads responses by, so the importer's output schemas
/// and the invoker agree with it.
pub(crate) use executor_outbound::names_json;

/// The type without parameters, lower case: `application/json` (parsed by
/// the `mime` crate; a key that is no media type is compared as written).
pub(crate) fn essence(media_type: &str) -> String {
    let media_type = media_type.trim();
    match media_type.parse::<mime::Mime>() {
        Ok(parsed) => parsed.essence_str().to_ascii_lowercase(),
        Err(_) => media_type.to_ascii_lowercase(),
    }
}

/// The best of the media types (the first among equals).
pub(crate) fn preferred<'k>(types: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    let mut best: Option<(u8, &str)> = None;
    for media_type in types {
        let rank = rank(media_type);
        if best.is_none_or(|(best_rank, _)| rank < best_rank) {
            best = Some((rank, media_type));
        }
    }
    best.map(|(_, media_type)| media_type)
}

/// Whether a response of this type can be read as JSON.
fn is_json(media_type: &str) -> bool {
    names_json(media_type) || essence(media_type) == "*/*"
}

/// The operation's request body: OpenAPI 3's `requestBody`, Swagger 2's
/// `in: body` parameter, or its `formData` parameters as a form.
pub(crate) fn body<'a>(
    ctx: &mut Context<'a, '_>,
    operation: &Operation<'a>,
    split: &Split<'a>,
    input: &mut DocBuilder,
    label: &str,
) -> Option<BodyShape> {
    match ctx.version {
        SpecVersion::Swagger2 => swagger_body(ctx, operation, split, input, label),
        SpecVersion::OpenApi30 | SpecVersion::OpenApi31 => {
            request_body(ctx, operation, input, label)
        }
    }
}

fn request_body<'a>(
    ctx: &mut Context<'a, '_>,
    operation: &Operation<'a>,
    input: &mut DocBuilder,
    label: &str,
) -> Option<BodyShape> {
    let raw = operation.op.get("requestBody")?;
    let body = match pointer::follow(ctx.doc, raw) {
        Ok(Value::Object(body)) => body,
        Ok(_) => {
            ctx.warnings
                .push(format!("{label}: requestBody is not an object; left out"));
            return None;
        }
        Err(e) => {
            ctx.warnings
                .push(format!("{label}: requestBody left out: {e}"));
            return None;
        }
    };
    let content = body.get("content").and_then(Value::as_object);
    let Some(media_type) = content.and_then(|c| preferred(c.keys().map(String::as_str))) else {
        ctx.warnings
            .push(format!("{label}: requestBody has no content; left out"));
        return None;
    };
    let raw_schema = content
        .and_then(|c| c.get(media_type))
        .and_then(|m| m.get("schema"));
    let schema = match raw_schema {
        Some(raw_schema) => ctx.normalize(input, raw_schema),
        None => json!({}),
    };
    // "Anything" is read as permission to send JSON.
    let content_type = if essence(media_type) == "*/*" {
        JSON
    } else {
        media_type
    };
    Some(BodyShape {
        spec: BodySpec {
            content_type: content_type.to_string(),
            required: body.get("required") == Some(&Value::Bool(true)),
        },
        schema: parameters::annotate(schema, body.get("description"), false),
    })
}

fn swagger_body<'a>(
    ctx: &mut Context<'a, '_>,
    operation: &Operation<'a>,
    split: &Split<'a>,
    input: &mut DocBuilder,
    label: &str,
) -> Option<BodyShape> {
    let consumes = media_list(ctx.doc, operation.op, "consumes");
    let Some(param) = &split.body else {
        return (!split.form.is_empty()).then(|| form_body(ctx, &consumes, split, input));
    };
    if !split.form.is_empty() {
        ctx.warnings.push(format!(
            "{label}: both a body and formData parameters; formData ignored"
        ));
    }
    let schema = match param.get("schema") {
        Some(raw_schema) => ctx.normalize(input, raw_schema),
        None => json!({}),
    };
    let content_type = preferred(consumes.iter().copied()).unwrap_or(JSON);
    Some(BodyShape {
        spec: BodySpec {
            content_type: content_type.to_string(),
            required: param.required(),
        },
        schema: parameters::annotate(schema, param.get("description"), false),
    })
}

/// Swagger 2 `formData` parameters as the properties of one form body:
/// multipart when a file is among them or only multipart is consumed.
fn form_body<'a>(
    ctx: &mut Context<'a, '_>,
    consumes: &[&str],
    split: &Split<'a>,
    input: &mut DocBuilder,
) -> BodyShape {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for param in &split.form {
        properties.insert(param.name.clone(), parameters::schema(ctx, param, input));
        if param.required() {
            required.push(json!(param.name));
        }
    }
    let has_file = split
        .form
        .iter()
        .any(|p| p.get("type").and_then(Value::as_str) == Some("file"));
    let consumes_form = consumes.iter().any(|c| essence(c) == FORM);
    let consumes_multipart = consumes.iter().any(|c| essence(c) == MULTIPART);
    let multipart = has_file || (consumes_multipart && !consumes_form);
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    let body_required = !required.is_empty();
    if body_required {
        schema.insert("required".into(), Value::Array(required));
    }
    BodyShape {
        spec: BodySpec {
            content_type: if multipart { MULTIPART } else { FORM }.to_string(),
            required: body_required,
        },
        schema: Value::Object(schema),
    }
}

/// Swagger 2 `consumes`/`produces`: the operation's, else the document's.
fn media_list<'a>(doc: &'a Value, op: &'a Map<String, Value>, key: &str) -> Vec<&'a str> {
    let list = op
        .get(key)
        .and_then(Value::as_array)
        .or_else(|| doc.get(key).and_then(Value::as_array));
    list.map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The schema of the first 2xx response (by status code, `2XX` last) that
/// has a JSON one.
pub(crate) fn response_schema<'a>(
    ctx: &mut Context<'a, '_>,
    operation: &Operation<'a>,
    output: &mut DocBuilder,
) -> Option<Value> {
    let responses = operation.op.get("responses")?.as_object()?;
    let mut successes: Vec<(u16, &'a Value)> = responses
        .iter()
        .filter_map(|(code, response)| success_rank(code).map(|rank| (rank, response)))
        .collect();
    successes.sort_by_key(|(rank, _)| *rank);
    let produces = media_list(ctx.doc, operation.op, "produces");
    for (_, raw) in successes {
        let Ok(Value::Object(response)) = pointer::follow(ctx.doc, raw) else {
            continue;
        };
        if let Some(raw_schema) = response_json_schema(ctx.version, &produces, response) {
            return Some(ctx.normalize(output, raw_schema));
        }
    }
    None
}

/// `200`…`299` by number, then the `2XX` range.
fn success_rank(code: &str) -> Option<u16> {
    if code.eq_ignore_ascii_case("2xx") {
        return Some(300);
    }
    code.parse::<u16>().ok().filter(|c| (200..300).contains(c))
}

fn response_json_schema<'a>(
    version: SpecVersion,
    produces: &[&str],
    response: &'a Map<String, Value>,
) -> Option<&'a Value> {
    if version == SpecVersion::Swagger2 {
        let json = produces.is_empty() || produces.iter().any(|p| is_json(p));
        return response.get("schema").filter(|_| json);
    }
    let content = response.get("content")?.as_object()?;
    let json_types = content
        .iter()
        .filter(|(media_type, media)| is_json(media_type) && media.get("schema").is_some())
        .map(|(media_type, _)| media_type.as_str());
    let media_type = preferred(json_types)?;
    content.get(media_type)?.get("schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_json_then_forms() {
        assert_eq!(preferred(["text/plain", JSON, FORM]), Some(JSON));
        assert_eq!(
            preferred(["application/xml", "application/vnd.github+json"]),
            Some("application/vnd.github+json")
        );
        assert_eq!(preferred([MULTIPART, FORM]), Some(FORM));
        assert_eq!(
            preferred(["text/plain", "application/xml"]),
            Some("text/plain")
        );
        assert_eq!(
            preferred(["Application/JSON; charset=utf-8", JSON]),
            Some("Application/JSON; charset=utf-8")
        );
        assert_eq!(preferred([]), None);
    }

    #[test]
    fn json_responses() {
        assert!(is_json("application/json"));
        assert!(is_json("application/problem+json"));
        assert!(is_json("*/*"));
        assert!(!is_json("text/html"));
        // Line-delimited JSON is not one JSON value: the invoker returns it
        // as text, so no JSON output schema is promised for it.
        assert!(!is_json("application/x-ndjson"));
        assert!(names_json("Application/Vnd.Api+JSON; charset=utf-8"));
    }

    #[test]
    fn success_codes() {
        assert_eq!(success_rank("200"), Some(200));
        assert_eq!(success_rank("204"), Some(204));
        assert_eq!(success_rank("2XX"), Some(300));
        assert_eq!(success_rank("default"), None);
        assert_eq!(success_rank("404"), None);
    }
}
