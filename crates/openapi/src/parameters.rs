//! Parameters: merged from the path item and the operation, sorted by where
//! they go, and turned into [`ParamSpec`]s and input properties.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::context::{Context, Operation};
use crate::model::{ParamLocation, ParamSpec, ParamStyle, SpecVersion};
use crate::pointer;
use crate::schema::DocBuilder;
use crate::text::bounded;
use crate::warnings::Warnings;

/// The input property that carries the request body.
pub(crate) const BODY: &str = "body";
/// Headers the invoker sets itself (content negotiation, credentials).
const INVOKER_HEADERS: &[&str] = &["accept", "content-type", "authorization"];
/// Longest parameter description kept, in characters.
const MAX_PARAM_DESCRIPTION: usize = 400;

/// A parameter as the document declares it, `$ref` followed.
pub(crate) struct RawParam<'a> {
    pub(crate) name: String,
    /// As written: `path`, `query`, `header`, `cookie`, `body`, `formData`.
    pub(crate) location: String,
    /// None for a path parameter the document forgot to declare.
    pub(crate) value: Option<&'a Value>,
}

impl<'a> RawParam<'a> {
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.value?.get(key)
    }

    pub(crate) fn required(&self) -> bool {
        self.location == "path" || self.get("required") == Some(&Value::Bool(true))
    }

    fn deprecated(&self) -> bool {
        self.get("deprecated") == Some(&Value::Bool(true))
    }
}

/// An operation's parameters by destination.
pub(crate) struct Split<'a> {
    pub(crate) params: Vec<(ParamLocation, RawParam<'a>)>,
    /// Swagger 2 `in: body`.
    pub(crate) body: Option<RawParam<'a>>,
    /// Swagger 2 `in: formData`.
    pub(crate) form: Vec<RawParam<'a>>,
}

/// Merges, classifies and completes an operation's parameters: headers
/// the invoker owns are dropped, and path parameters the template uses but
/// the document does not declare are added as required strings.
pub(crate) fn split<'a>(
    doc: &'a Value,
    operation: &Operation<'a>,
    label: &str,
    warnings: &mut Warnings,
) -> Split<'a> {
    let mut split = Split {
        params: Vec::new(),
        body: None,
        form: Vec::new(),
    };
    for raw in merged(doc, operation, label, warnings) {
        let location = match raw.location.as_str() {
            "path" => ParamLocation::Path,
            "query" => ParamLocation::Query,
            "header" if is_invoker_header(&raw.name) => continue,
            "header" => ParamLocation::Header,
            "cookie" => ParamLocation::Cookie,
            "body" if split.body.is_none() => {
                split.body = Some(raw);
                continue;
            }
            "formData" => {
                split.form.push(raw);
                continue;
            }
            other => {
                warnings.push(format!(
                    "{label}: parameter {:?} in {other:?} skipped",
                    raw.name
                ));
                continue;
            }
        };
        split.params.push((location, raw));
    }
    add_undeclared_path_params(&mut split, &operation.path, label, warnings);
    split
}

fn is_invoker_header(name: &str) -> bool {
    INVOKER_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Path-item parameters, each replaced by the operation's parameter of the
/// same name and location, then the operation's others.
fn merged<'a>(
    doc: &'a Value,
    operation: &Operation<'a>,
    label: &str,
    warnings: &mut Warnings,
) -> Vec<RawParam<'a>> {
    let mut params = resolve_list(doc, operation.item.get("parameters"), label, warnings);
    for param in resolve_list(doc, operation.op.get("parameters"), label, warnings) {
        let same = |p: &&mut RawParam<'a>| p.name == param.name && p.location == param.location;
        match params.iter_mut().find(same) {
            Some(slot) => *slot = param,
            None => params.push(param),
        }
    }
    params
}

fn resolve_list<'a>(
    doc: &'a Value,
    list: Option<&'a Value>,
    label: &str,
    warnings: &mut Warnings,
) -> Vec<RawParam<'a>> {
    let items = list
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut params = Vec::with_capacity(items.len());
    for item in items {
        let value = match pointer::follow(doc, item) {
            Ok(value) => value,
            Err(e) => {
                warnings.push(format!("{label}: parameter skipped: {e}"));
                continue;
            }
        };
        let text = |key: &str| value.get(key).and_then(Value::as_str);
        match (text("name"), text("in")) {
            (Some(name), Some(location)) => params.push(RawParam {
                name: name.to_string(),
                location: location.to_string(),
                value: Some(value),
            }),
            _ => warnings.push(format!("{label}: a parameter without name or in skipped")),
        }
    }
    params
}

fn add_undeclared_path_params(
    split: &mut Split<'_>,
    path: &str,
    label: &str,
    warnings: &mut Warnings,
) {
    for name in template_names(path) {
        let declared = split
            .params
            .iter()
            .any(|(location, p)| *location == ParamLocation::Path && p.name == name);
        if declared {
            continue;
        }
        warnings.push(format!(
            "{label}: path parameter {{{name}}} is not declared; added as a string"
        ));
        let raw = RawParam {
            name: name.to_string(),
            location: "path".to_string(),
            value: None,
        };
        split.params.push((ParamLocation::Path, raw));
    }
}

/// The `{name}`s of a path template, in order.
fn template_names(path: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = path;
    while let Some((_, after)) = rest.split_once('{') {
        let Some((name, tail)) = after.split_once('}') else {
            break;
        };
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
        rest = tail;
    }
    names
}

/// Each parameter's spec and input property schema, in document order.
pub(crate) fn shape<'a>(
    ctx: &mut Context<'a, '_>,
    split: &Split<'a>,
    input: &mut DocBuilder,
) -> Vec<(ParamSpec, Value)> {
    let properties = property_names(&split.params);
    let mut shaped = Vec::with_capacity(split.params.len());
    for ((location, raw), property) in split.params.iter().zip(properties) {
        let schema = schema(ctx, raw, input);
        shaped.push((spec(ctx.version, *location, raw, property), schema));
    }
    shaped
}

/// Input property names: a parameter keeps its name unless `body` or a
/// parameter in an earlier location (path, then query, header, cookie) has
/// it; then it is `<location>_<name>`, numbered if even that is taken.
fn property_names(params: &[(ParamLocation, RawParam<'_>)]) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::from([BODY.to_string()]);
    let mut names = vec![String::new(); params.len()];
    let order = [
        ParamLocation::Path,
        ParamLocation::Query,
        ParamLocation::Header,
        ParamLocation::Cookie,
    ];
    for location in order {
        for (i, (_, raw)) in params
            .iter()
            .enumerate()
            .filter(|(_, (l, _))| *l == location)
        {
            let name = if taken.contains(&raw.name) {
                let base = format!("{}_{}", location.as_str(), raw.name);
                (1..)
                    .map(|n| {
                        if n == 1 {
                            base.clone()
                        } else {
                            format!("{base}_{n}")
                        }
                    })
                    .find(|candidate| !taken.contains(candidate))
                    .unwrap_or(base)
            } else {
                raw.name.clone()
            };
            taken.insert(name.clone());
            if let Some(slot) = names.get_mut(i) {
                *slot = name;
            }
        }
    }
    names
}

fn spec(
    version: SpecVersion,
    location: ParamLocation,
    raw: &RawParam<'_>,
    property: String,
) -> ParamSpec {
    let (style, explode) = match version {
        SpecVersion::Swagger2 => swagger_style(location, raw.get("collectionFormat")),
        SpecVersion::OpenApi30 | SpecVersion::OpenApi31 => {
            openapi_style(location, raw.get("style"), raw.get("explode"))
        }
    };
    let content_type = match version {
        SpecVersion::Swagger2 => None,
        _ if raw.get("schema").is_some() => None,
        _ => raw
            .get("content")
            .and_then(Value::as_object)
            .and_then(|content| content.keys().next().cloned()),
    };
    ParamSpec {
        name: raw.name.clone(),
        location,
        property,
        required: raw.required(),
        style,
        explode,
        allow_reserved: raw.get("allowReserved") == Some(&Value::Bool(true)),
        content_type,
    }
}

fn default_style(location: ParamLocation) -> ParamStyle {
    match location {
        ParamLocation::Query | ParamLocation::Cookie => ParamStyle::Form,
        ParamLocation::Path | ParamLocation::Header => ParamStyle::Simple,
    }
}

/// OpenAPI 3 `style` and `explode`, defaults applied.
fn openapi_style(
    location: ParamLocation,
    style: Option<&Value>,
    explode: Option<&Value>,
) -> (ParamStyle, bool) {
    let style = match style.and_then(Value::as_str) {
        Some("simple") => ParamStyle::Simple,
        Some("form") => ParamStyle::Form,
        Some("label") => ParamStyle::Label,
        Some("matrix") => ParamStyle::Matrix,
        Some("spaceDelimited") => ParamStyle::SpaceDelimited,
        Some("pipeDelimited") => ParamStyle::PipeDelimited,
        Some("deepObject") => ParamStyle::DeepObject,
        _ => default_style(location),
    };
    let explode = explode
        .and_then(Value::as_bool)
        .unwrap_or(style == ParamStyle::Form);
    (style, explode)
}

/// Swagger 2 `collectionFormat` in OpenAPI 3 terms (`csv` is the default).
fn swagger_style(location: ParamLocation, format: Option<&Value>) -> (ParamStyle, bool) {
    match format.and_then(Value::as_str) {
        Some("multi") => (ParamStyle::Form, true),
        Some("ssv") => (ParamStyle::SpaceDelimited, false),
        Some("pipes") => (ParamStyle::PipeDelimited, false),
        Some("tsv") => (ParamStyle::TabDelimited, false),
        _ => (default_style(location), false),
    }
}

/// The input property schema of one parameter: OpenAPI 3's `schema` (or
/// the schema of its single `content` entry); in Swagger 2 the parameter
/// object is its own schema (`type`, `items`, `enum`, …).
pub(crate) fn schema<'a>(
    ctx: &mut Context<'a, '_>,
    raw: &RawParam<'a>,
    input: &mut DocBuilder,
) -> Value {
    let Some(value) = raw.value else {
        return json!({"type": "string"});
    };
    let source = match ctx.version {
        SpecVersion::Swagger2 => Some(value),
        SpecVersion::OpenApi30 | SpecVersion::OpenApi31 => openapi_schema(value),
    };
    let schema = match source {
        Some(source) => ctx.normalize(input, source),
        None => json!({}),
    };
    annotate(schema, value.get("description"), raw.deprecated())
}

fn openapi_schema(param: &Value) -> Option<&Value> {
    param.get("schema").or_else(|| {
        let content = param.get("content")?.as_object()?;
        content.values().next()?.get("schema")
    })
}

/// Puts the description (bounded) and `deprecated` of the object that holds
/// a schema (a parameter, a request body) on the schema itself.
pub(crate) fn annotate(schema: Value, description: Option<&Value>, deprecated: bool) -> Value {
    let mut map = match schema {
        Value::Object(map) => map,
        Value::Bool(false) => serde_json::Map::from_iter([("not".to_string(), json!({}))]),
        _ => serde_json::Map::new(),
    };
    if let Some(description) = description.and_then(Value::as_str).map(str::trim)
        && !description.is_empty()
    {
        let bounded = bounded(description, MAX_PARAM_DESCRIPTION);
        map.insert("description".to_string(), json!(bounded));
    }
    if deprecated {
        map.insert("deprecated".to_string(), json!(true));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str, location: &str) -> RawParam<'static> {
        RawParam {
            name: name.to_string(),
            location: location.to_string(),
            value: None,
        }
    }

    #[test]
    fn template_names_in_order() {
        assert_eq!(template_names("/a/{x}/b/{y}.{fmt}/{x}"), ["x", "y", "fmt"]);
        assert!(template_names("/a/{unclosed").is_empty());
        assert!(template_names("/a/{}").is_empty());
    }

    #[test]
    fn colliding_properties_are_disambiguated() {
        let params = vec![
            (ParamLocation::Query, raw("id", "query")),
            (ParamLocation::Path, raw("id", "path")),
            (ParamLocation::Header, raw("id", "header")),
            (ParamLocation::Query, raw("body", "query")),
            (ParamLocation::Cookie, raw("query_id", "cookie")),
            (ParamLocation::Query, raw("limit", "query")),
        ];
        assert_eq!(
            property_names(&params),
            [
                "query_id",
                "id",
                "header_id",
                "query_body",
                "cookie_query_id",
                "limit"
            ]
        );
    }

    #[test]
    fn styles_and_defaults() {
        use ParamLocation::*;
        assert_eq!(openapi_style(Query, None, None), (ParamStyle::Form, true));
        assert_eq!(openapi_style(Path, None, None), (ParamStyle::Simple, false));
        assert_eq!(
            openapi_style(Cookie, None, Some(&json!(false))),
            (ParamStyle::Form, false)
        );
        assert_eq!(
            openapi_style(Query, Some(&json!("deepObject")), Some(&json!(true))),
            (ParamStyle::DeepObject, true)
        );
        assert_eq!(
            openapi_style(Header, Some(&json!("bogus")), None),
            (ParamStyle::Simple, false)
        );
        assert_eq!(swagger_style(Query, None), (ParamStyle::Form, false));
        assert_eq!(
            swagger_style(Query, Some(&json!("multi"))),
            (ParamStyle::Form, true)
        );
        assert_eq!(
            swagger_style(Path, Some(&json!("csv"))),
            (ParamStyle::Simple, false)
        );
        assert_eq!(
            swagger_style(Query, Some(&json!("pipes"))),
            (ParamStyle::PipeDelimited, false)
        );
        assert_eq!(
            swagger_style(Query, Some(&json!("tsv"))),
            (ParamStyle::TabDelimited, false)
        );
    }

    #[test]
    fn annotations_land_on_the_schema() {
        let s = annotate(json!({"type": "string"}), Some(&json!(" The id. ")), true);
        assert_eq!(
            s,
            json!({"type": "string", "description": "The id.", "deprecated": true})
        );
        assert_eq!(annotate(json!(true), None, false), json!({}));
        assert_eq!(annotate(json!(false), None, false), json!({"not": {}}));
    }
}
