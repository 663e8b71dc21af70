//! The HTTP request of an OpenAPI operation (SPEC §7–9): turns an
//! [`HttpOperation`] and its flat arguments (one property per parameter,
//! plus `body`) into an [`OutboundRequest`] — path, query, header and
//! cookie parameters in their OpenAPI styles, the body in its media type —
//! and picks where the connection's credential goes among the schemes the
//! document declares. Sending, the SSRF guard and redaction are
//! `executor-outbound`'s.

use std::sync::Arc;

use executor_catalog::HostBudget;
use executor_outbound::{
    BuildRequest, COMPONENT, Credential, HttpClient, HttpFailure, HttpSuccess, OutboundRequest,
    Placement,
};
use percent_encoding::{AsciiSet, utf8_percent_encode};
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use crate::model::{AuthMethod, BodySpec, HttpOperation, ParamLocation, ParamSpec, ParamStyle};

/// `allowReserved: true` query values keep the reserved characters that
/// cannot change how the query string splits into pairs.
const RESERVED_ALLOWED: &AsciiSet = &COMPONENT
    .remove(b':')
    .remove(b'/')
    .remove(b'?')
    .remove(b'@')
    .remove(b'!')
    .remove(b'$')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b',')
    .remove(b';')
    .remove(b'[')
    .remove(b']');

/// One call's request as [`call`] builds it, for whichever credential: the
/// invoker's renewing send builds it again for a renewed one.
pub(crate) struct OperationCall<'a> {
    pub tool: &'a HttpOperation,
    pub auth: &'a [AuthMethod],
    pub args: &'a Value,
}

impl BuildRequest for OperationCall<'_> {
    fn build<'a>(
        &'a self,
        credential: &'a Credential,
    ) -> Result<(OutboundRequest, Option<Placement<'a>>), HttpFailure> {
        let tool = self.tool;
        let request = build(tool, arg_map(self.args)?)?;
        let public = tool.security.as_ref().is_some_and(Vec::is_empty);
        let placement = if public {
            None
        } else {
            placement(
                choose_auth_method(self.auth, tool.security.as_deref(), credential),
                credential,
            )
        };
        Ok((request, placement))
    }
}

/// Sends the request `tool` names for `args` through `client`, with the
/// credential placed as the first of `auth` the tool's `security` allows
/// (else the first method); `security: []` sends none. A JSON answer is
/// parsed only once its estimated parsed size is held in `budget`.
pub async fn call(
    client: &HttpClient,
    base_url: &str,
    tool: &HttpOperation,
    auth: &[AuthMethod],
    credential: &Credential,
    args: &Value,
    budget: &HostBudget,
) -> Result<HttpSuccess, HttpFailure> {
    let operation = OperationCall { tool, auth, args };
    let (request, placement) = operation.build(credential)?;
    let base = tool.base_url.as_deref().unwrap_or(base_url);
    client
        .send(base, request, credential, placement, budget)
        .await
}

/// Builds the request for `args` without sending it (and without the
/// credential), to refuse before any approval what cannot be sent as the
/// operation names it.
pub fn check_args(tool: &HttpOperation, args: &Value) -> Result<(), HttpFailure> {
    build(tool, arg_map(args)?).map(drop)
}

fn arg_map(args: &Value) -> Result<&Map<String, Value>, HttpFailure> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match args {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(EMPTY.get_or_init(Map::new)),
        _ => Err(HttpFailure::invalid("the arguments must be an object")),
    }
}

/// The request `tool` names for `args`, without the credential.
fn build(tool: &HttpOperation, args: &Map<String, Value>) -> Result<OutboundRequest, HttpFailure> {
    let method = Method::from_bytes(tool.method.as_bytes())
        .map_err(|_| HttpFailure::invalid(format!("unsupported method {}", tool.method)))?;
    let path = expand_path(&tool.path_template, &tool.parameters, args)?;
    let mut parts = OutboundRequest::new(method, path);
    parts
        .headers
        .insert(ACCEPT, HeaderValue::from_static("application/json"));
    for spec in &tool.parameters {
        let value = match args.get(&spec.property) {
            None | Some(Value::Null) if spec.required => {
                return Err(HttpFailure::invalid(format!(
                    "the required parameter `{}` is missing",
                    spec.property
                )));
            }
            None | Some(Value::Null) => continue,
            Some(value) => value,
        };
        add_param(&mut parts, spec, value)?;
    }
    if let Some((content_type, body)) = encode_body(tool.body.as_ref(), args.get("body"))? {
        let content_type = HeaderValue::from_str(&content_type)
            .map_err(|_| HttpFailure::invalid("the body's content type is not a valid header"))?;
        parts.headers.insert(CONTENT_TYPE, content_type);
        parts.body = Some(body);
    }
    Ok(parts)
}

/// Puts one parameter's value where its spec says.
fn add_param(
    parts: &mut OutboundRequest,
    spec: &ParamSpec,
    value: &Value,
) -> Result<(), HttpFailure> {
    match spec.location {
        // Already in the path.
        ParamLocation::Path => {}
        ParamLocation::Query => parts.query.extend(query_pieces(spec, value)),
        ParamLocation::Header => {
            let name = HeaderName::from_bytes(spec.name.as_bytes()).map_err(|_| {
                HttpFailure::invalid(format!("`{}` is not a valid header name", spec.name))
            })?;
            let text = header_text(spec, value);
            let value = HeaderValue::from_str(&text).map_err(|_| {
                HttpFailure::invalid(format!(
                    "the value of `{}` cannot be sent as a header",
                    spec.property
                ))
            })?;
            parts.headers.insert(name, value);
        }
        ParamLocation::Cookie => parts.cookies.extend(cookie_pairs(spec, value)),
    }
    Ok(())
}

/// Substitutes each `{name}` of the template with its parameter's value.
///
/// A value that makes a path segment `.` or `..` (in any spelling the URL
/// parser reads as one: `%2e`, `%2E`, mixes, a `label` value of `.`) is
/// refused: the parser would remove the segment, and the upstream would
/// receive another operation than the one the policy and the approval named.
fn expand_path(
    template: &str,
    params: &[Arc<ParamSpec>],
    args: &Map<String, Value>,
) -> Result<String, HttpFailure> {
    let mut path = String::with_capacity(template.len());
    if !template.starts_with('/') {
        path.push('/');
    }
    // Where each substituted value landed, to name it in an error.
    let mut substituted: Vec<(std::ops::Range<usize>, &str)> = Vec::new();
    let mut rest = template;
    while let Some((before, after)) = rest.split_once('{') {
        let Some((name, tail)) = after.split_once('}') else {
            break;
        };
        path.push_str(before);
        let spec = params
            .iter()
            .find(|p| p.location == ParamLocation::Path && p.name == name);
        let property = spec.map_or(name, |s| s.property.as_str());
        let value = match args.get(property) {
            None | Some(Value::Null) => {
                return Err(HttpFailure::invalid(format!(
                    "the required path parameter `{property}` is missing"
                )));
            }
            Some(value) => value,
        };
        let start = path.len();
        path.push_str(&path_text(spec.map(Arc::as_ref), name, value));
        substituted.push((start..path.len(), property));
        rest = tail;
    }
    path.push_str(rest);
    check_dot_segments(&path, &substituted)?;
    Ok(path)
}

/// Refuses a path with a `.` or `..` segment that a substituted value
/// produced (or took part in).
fn check_dot_segments(
    path: &str,
    substituted: &[(std::ops::Range<usize>, &str)],
) -> Result<(), HttpFailure> {
    let mut start = 0;
    for segment in path.split('/') {
        let range = start..start + segment.len();
        start = range.end + 1;
        if !is_dot_segment(segment) {
            continue;
        }
        let culprit = substituted
            .iter()
            .find(|(r, _)| r.start <= range.end && range.start <= r.end);
        if let Some((_, property)) = culprit {
            return Err(HttpFailure::invalid(format!(
                "the path parameter `{property}` cannot be `.` or `..`: \
                 the URL would then name a different path"
            )));
        }
    }
    Ok(())
}

/// `.` or `..`, with each dot possibly written `%2e` or `%2E` (the WHATWG
/// URL parser's single- and double-dot segments).
fn is_dot_segment(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let dots = lower.replace("%2e", ".");
    dots == "." || dots == ".."
}

/// A JSON value seen the way OpenAPI styles serialise it.
enum Shape {
    Scalar(String),
    List(Vec<String>),
    Pairs(Vec<(String, String)>),
}

/// A parameter with a `content` media type is sent as that media's text
/// (JSON); otherwise arrays and objects spread out and deeper nesting is
/// sent as JSON text.
fn shape(spec: Option<&ParamSpec>, value: &Value) -> Shape {
    if spec.is_some_and(|s| s.content_type.is_some()) {
        return Shape::Scalar(scalar_text(value));
    }
    match value {
        Value::Array(items) => Shape::List(items.iter().map(scalar_text).collect()),
        Value::Object(map) => Shape::Pairs(
            map.iter()
                .map(|(k, v)| (k.clone(), scalar_text(v)))
                .collect(),
        ),
        _ => Shape::Scalar(scalar_text(value)),
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn encode(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

fn encode_all(items: &[String]) -> Vec<String> {
    items.iter().map(|s| encode(s)).collect()
}

fn encode_pairs(pairs: &[(String, String)], joiner: &str) -> Vec<String> {
    pairs
        .iter()
        .map(|(k, v)| format!("{}{joiner}{}", encode(k), encode(v)))
        .collect()
}

/// `simple`, `label` and `matrix` path expansion (RFC 6570 style); every
/// value is fully encoded, so `/` inside a value stays in its segment.
fn path_text(spec: Option<&ParamSpec>, name: &str, value: &Value) -> String {
    let style = spec.map_or(ParamStyle::Simple, |s| s.style);
    let explode = spec.is_some_and(|s| s.explode);
    let shape = shape(spec, value);
    let name = encode(name);
    match style {
        ParamStyle::Label => {
            let sep = if explode { "." } else { "," };
            let body = match &shape {
                Shape::Scalar(s) => encode(s),
                Shape::List(items) => encode_all(items).join(sep),
                Shape::Pairs(pairs) if explode => encode_pairs(pairs, "=").join(sep),
                Shape::Pairs(pairs) => encode_pairs(pairs, ",").join(","),
            };
            format!(".{body}")
        }
        ParamStyle::Matrix => match &shape {
            Shape::Scalar(s) => format!(";{name}={}", encode(s)),
            Shape::List(items) if explode => encode_all(items)
                .iter()
                .map(|v| format!(";{name}={v}"))
                .collect(),
            Shape::List(items) => format!(";{name}={}", encode_all(items).join(",")),
            Shape::Pairs(pairs) if explode => encode_pairs(pairs, "=")
                .iter()
                .map(|p| format!(";{p}"))
                .collect(),
            Shape::Pairs(pairs) => format!(";{name}={}", encode_pairs(pairs, ",").join(",")),
        },
        _ => simple_text(&shape, explode, encode),
    }
}

/// `simple` style, with `escape` applied to each name and value.
fn simple_text(shape: &Shape, explode: bool, escape: fn(&str) -> String) -> String {
    match shape {
        Shape::Scalar(s) => escape(s),
        Shape::List(items) => items
            .iter()
            .map(|s| escape(s))
            .collect::<Vec<_>>()
            .join(","),
        Shape::Pairs(pairs) => {
            let joiner = if explode { "=" } else { "," };
            pairs
                .iter()
                .map(|(k, v)| format!("{}{joiner}{}", escape(k), escape(v)))
                .collect::<Vec<_>>()
                .join(",")
        }
    }
}

/// Header values are sent as text, in `simple` style.
fn header_text(spec: &ParamSpec, value: &Value) -> String {
    simple_text(&shape(Some(spec), value), spec.explode, str::to_string)
}

/// Encoded `name=value` pieces of one query parameter.
fn query_pieces(spec: &ParamSpec, value: &Value) -> Vec<String> {
    let set = if spec.allow_reserved {
        RESERVED_ALLOWED
    } else {
        COMPONENT
    };
    let enc = |s: &str| utf8_percent_encode(s, set).to_string();
    let name = enc(&spec.name);
    if spec.style == ParamStyle::DeepObject && spec.content_type.is_none() {
        let mut pieces = Vec::new();
        deep_object(&name, value, &enc, &mut pieces);
        return pieces;
    }
    let delimiter = match spec.style {
        ParamStyle::SpaceDelimited => "%20",
        ParamStyle::PipeDelimited => "|",
        ParamStyle::TabDelimited => "%09",
        _ => ",",
    };
    match shape(Some(spec), value) {
        Shape::Scalar(s) => vec![format!("{name}={}", enc(&s))],
        Shape::List(items) if spec.explode => {
            items.iter().map(|v| format!("{name}={}", enc(v))).collect()
        }
        Shape::List(items) => {
            let joined: Vec<String> = items.iter().map(|v| enc(v)).collect();
            vec![format!("{name}={}", joined.join(delimiter))]
        }
        Shape::Pairs(pairs) if spec.explode => pairs
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect(),
        Shape::Pairs(pairs) => {
            let flat: Vec<String> = pairs.iter().flat_map(|(k, v)| [enc(k), enc(v)]).collect();
            vec![format!("{name}={}", flat.join(delimiter))]
        }
    }
}

/// `name[key][sub]=value`; arrays inside become `name[key][]=item`.
fn deep_object(prefix: &str, value: &Value, enc: &dyn Fn(&str) -> String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                deep_object(&format!("{prefix}[{}]", enc(key)), item, enc, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                deep_object(&format!("{prefix}[]"), item, enc, out);
            }
        }
        Value::Null => {}
        scalar => out.push(format!("{prefix}={}", enc(&scalar_text(scalar)))),
    }
}

/// Cookie pairs of one parameter (`form` style), values encoded.
fn cookie_pairs(spec: &ParamSpec, value: &Value) -> Vec<(String, String)> {
    match shape(Some(spec), value) {
        Shape::Pairs(pairs) if spec.explode => {
            pairs.iter().map(|(k, v)| (encode(k), encode(v))).collect()
        }
        shape => vec![(spec.name.clone(), simple_text(&shape, false, encode))],
    }
}

/// The encoded body and its content type, per the operation's media type.
fn encode_body(
    spec: Option<&BodySpec>,
    value: Option<&Value>,
) -> Result<Option<(String, Vec<u8>)>, HttpFailure> {
    let value = value.filter(|v| !v.is_null());
    let (spec, value) = match (spec, value) {
        (None, None) => return Ok(None),
        (None, Some(_)) => return Err(HttpFailure::invalid("this tool takes no `body`")),
        (Some(spec), None) if spec.required => {
            return Err(HttpFailure::invalid("the required `body` is missing"));
        }
        (Some(_), None) => return Ok(None),
        (Some(spec), Some(value)) => (spec, value),
    };
    let content_type = spec.content_type.clone();
    let essence = crate::media::essence(&content_type);
    let bytes = if crate::media::names_json(&essence) {
        serde_json::to_vec(value)
            .map_err(|e| HttpFailure::invalid(format!("the body cannot be encoded: {e}")))?
    } else if essence == "application/x-www-form-urlencoded" {
        form_body(value)?
    } else if essence.starts_with("multipart/") {
        return Err(HttpFailure::invalid(format!(
            "{essence} request bodies are not supported yet"
        )));
    } else {
        match value {
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        }
    };
    Ok(Some((content_type, bytes)))
}

/// A flat object as `a=1&b=2`; arrays repeat the key, objects are JSON text.
fn form_body(value: &Value) -> Result<Vec<u8>, HttpFailure> {
    let Value::Object(map) = value else {
        return Err(HttpFailure::invalid("a form `body` must be an object"));
    };
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    for (key, item) in map {
        match item {
            Value::Null => {}
            Value::Array(items) => {
                for item in items {
                    form.append_pair(key, &scalar_text(item));
                }
            }
            other => {
                form.append_pair(key, &scalar_text(other));
            }
        }
    }
    Ok(form.finish().into_bytes())
}

// ---------------------------------------------------------------------------
// Credentials.

/// Among the methods the tool's `security` names (else all declared), the
/// first that fits the kind of credential held, else the first: an API key
/// goes where an API-key scheme says even when an OAuth2 scheme is listed
/// before it.
fn choose_auth_method<'a>(
    auth: &'a [AuthMethod],
    security: Option<&[String]>,
    credential: &Credential,
) -> Option<&'a AuthMethod> {
    let named: Vec<&AuthMethod> = security
        .map(|names| {
            auth.iter()
                .filter(|m| names.iter().any(|n| n == m.scheme()))
                .collect()
        })
        .unwrap_or_default();
    let candidates = if named.is_empty() {
        auth.iter().collect()
    } else {
        named
    };
    let fits = |m: &&&AuthMethod| match credential {
        Credential::ApiKey(_) => matches!(
            m,
            AuthMethod::ApiKeyHeader { .. }
                | AuthMethod::ApiKeyQuery { .. }
                | AuthMethod::ApiKeyCookie { .. }
        ),
        Credential::Bearer(_) => matches!(m, AuthMethod::Bearer { .. } | AuthMethod::OAuth2 { .. }),
        Credential::Basic { .. } => matches!(m, AuthMethod::Basic { .. }),
        Credential::None => false,
    };
    candidates
        .iter()
        .find(fits)
        .or_else(|| candidates.first())
        .copied()
}

/// Where `credential` goes in a request that names no operation (a
/// connection test): the declared method that fits it, placed as a call
/// would place it.
pub fn credential_placement<'a>(
    auth: &'a [AuthMethod],
    credential: &'a Credential,
) -> Option<Placement<'a>> {
    placement(choose_auth_method(auth, None, credential), credential)
}

/// A username and password always go as Basic; a single secret goes where
/// an API-key method says, else as a bearer token (bearer, OAuth2 and
/// unknown schemes, or no declared method).
fn placement<'a>(
    method: Option<&'a AuthMethod>,
    credential: &'a Credential,
) -> Option<Placement<'a>> {
    let secret = match credential {
        Credential::None => return None,
        Credential::Basic { username, password } => {
            return Some(Placement::Basic(username, password.expose()));
        }
        Credential::ApiKey(secret) | Credential::Bearer(secret) => secret.expose(),
    };
    Some(match method {
        Some(AuthMethod::ApiKeyHeader { name, .. }) => Placement::Header(name, secret),
        Some(AuthMethod::ApiKeyQuery { name, .. }) => Placement::Query(name, secret),
        Some(AuthMethod::ApiKeyCookie { name, .. }) => Placement::Cookie(name, secret),
        _ => Placement::Bearer(secret),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use executor_catalog::ToolError;
    use executor_outbound::{
        CONNECTION_REJECTED, Connection, CredentialSource, HttpConfig, INVALID_TOOL_ARGUMENTS,
        MAX_ERROR_DETAIL_BYTES, MAX_REDIRECTS, Refusal, Retry, UPSTREAM_HTTP_ERROR,
        UPSTREAM_TIMEOUT,
    };
    use futures::future::BoxFuture;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// What the test server answers to a raw request; None stalls forever.
    type Reply = fn(&str) -> Option<String>;

    struct Server {
        base: String,
        port: u16,
        requests: Arc<Mutex<Vec<String>>>,
        connections: Arc<AtomicUsize>,
    }

    impl Server {
        fn last(&self) -> String {
            self.requests
                .lock()
                .map(|r| r.last().cloned().unwrap_or_default())
                .unwrap_or_default()
        }
    }

    fn respond(status: &str, content_type: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn ok_json(_: &str) -> Option<String> {
        Some(respond("200 OK", "application/json", r#"{"ok":true}"#))
    }

    async fn serve(reply: Reply) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (reqs, conns) = (requests.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                conns.fetch_add(1, Ordering::SeqCst);
                let reqs = reqs.clone();
                tokio::spawn(async move {
                    let raw = read_request(&mut stream).await;
                    reqs.lock().unwrap().push(raw.clone());
                    match reply(&raw) {
                        Some(answer) => {
                            let _ = stream.write_all(answer.as_bytes()).await;
                            // Keep the socket open: the body-timeout test sends
                            // less than its content-length.
                            tokio::time::sleep(Duration::from_secs(5)).await;
                        }
                        None => tokio::time::sleep(Duration::from_secs(30)).await,
                    }
                });
            }
        });
        Server {
            base: format!("http://127.0.0.1:{port}"),
            port,
            requests,
            connections,
        }
    }

    async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&buf).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let length = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    return text;
                }
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).to_string(),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn config(allow_local_network: bool) -> HttpConfig {
        HttpConfig {
            allow_local_network,
            header_timeout: Duration::from_millis(500),
            body_timeout: Duration::from_millis(500),
            max_response_bytes: 1024,
        }
    }

    fn invoker() -> HttpClient {
        HttpClient::new(config(true)).unwrap()
    }

    /// An operation's call through a client, as the invoker makes it.
    trait Invoke {
        async fn invoke_within(
            &self,
            base_url: &str,
            tool: &HttpOperation,
            auth: &[AuthMethod],
            credential: &Credential,
            args: &Value,
            budget: &HostBudget,
        ) -> Result<HttpSuccess, HttpFailure>;

        /// With a budget of 64 MiB.
        async fn invoke(
            &self,
            base_url: &str,
            tool: &HttpOperation,
            auth: &[AuthMethod],
            credential: &Credential,
            args: &Value,
        ) -> Result<HttpSuccess, HttpFailure> {
            let budget = HostBudget::new(64 << 20);
            self.invoke_within(base_url, tool, auth, credential, args, &budget)
                .await
        }
    }

    impl Invoke for HttpClient {
        async fn invoke_within(
            &self,
            base_url: &str,
            tool: &HttpOperation,
            auth: &[AuthMethod],
            credential: &Credential,
            args: &Value,
            budget: &HostBudget,
        ) -> Result<HttpSuccess, HttpFailure> {
            call(self, base_url, tool, auth, credential, args, budget).await
        }
    }

    fn param(name: &str, location: ParamLocation, style: ParamStyle, explode: bool) -> ParamSpec {
        ParamSpec {
            name: name.to_string(),
            location,
            property: name.to_string(),
            required: location == ParamLocation::Path,
            style,
            explode,
            allow_reserved: false,
            content_type: None,
        }
    }

    fn tool(
        method: &str,
        path: &str,
        parameters: Vec<ParamSpec>,
        body: Option<&str>,
    ) -> HttpOperation {
        HttpOperation {
            method: method.to_string(),
            path_template: path.to_string(),
            base_url: None,
            parameters: parameters.into_iter().map(Arc::new).collect(),
            body: body.map(|c| BodySpec {
                content_type: c.to_string(),
                required: false,
            }),
            security: None,
        }
    }

    fn request_line(raw: &str) -> &str {
        raw.lines().next().unwrap_or_default()
    }

    fn header<'a>(raw: &'a str, name: &str) -> Option<&'a str> {
        raw.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn body(raw: &str) -> &str {
        raw.split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn path_query_header_and_cookie_parameters() {
        use ParamLocation::*;
        use ParamStyle::*;
        let server = serve(ok_json).await;
        let t = tool(
            "GET",
            "/items/{id}/{name}",
            vec![
                param("id", Path, Simple, false),
                param("name", Path, Simple, false),
                param("tags", Query, Form, true),
                param("ids", Query, Form, false),
                param("filter", Query, DeepObject, true),
                param("s", Query, SpaceDelimited, false),
                param("p", Query, PipeDelimited, false),
                param("tab", Query, TabDelimited, false),
                param("q", Query, Form, true),
                param("X-Trace", Header, Simple, false),
                param("session", Cookie, Form, true),
                param("theme", Cookie, Form, true),
            ],
            None,
        );
        let args = json!({
            "id": "a/b c", "name": "x?y#z",
            "tags": ["a", "b&c"], "ids": [1, 2],
            "filter": {"color": "red", "size": {"min": 1}},
            "s": ["a", "b"], "p": ["a", "b"], "tab": ["a", "b"],
            "q": "hello world", "X-Trace": ["7", "8"], "session": "abc", "theme": "dark"
        });
        let ok = invoker()
            .invoke(&server.base, &t, &[], &Credential::None, &args)
            .await
            .unwrap();
        assert_eq!(ok.status, 200);
        assert_eq!(ok.data, json!({"ok": true}));
        assert_eq!(ok.headers.get("content-type").unwrap(), "application/json");
        let raw = server.last();
        assert_eq!(
            request_line(&raw),
            "GET /items/a%2Fb%20c/x%3Fy%23z?tags=a&tags=b%26c&ids=1,2\
             &filter[color]=red&filter[size][min]=1&s=a%20b&p=a|b&tab=a%09b\
             &q=hello%20world HTTP/1.1"
        );
        assert_eq!(header(&raw, "x-trace"), Some("7,8"));
        assert_eq!(header(&raw, "cookie"), Some("session=abc; theme=dark"));
        assert_eq!(header(&raw, "accept"), Some("application/json"));
    }

    #[test]
    fn path_styles() {
        use ParamLocation::Path;
        let spec = |style, explode| param("v", Path, style, explode);
        let list = json!(["a", "b"]);
        let obj = json!({"x": 1, "y": "z"});
        let text = |style, explode, v: &Value| path_text(Some(&spec(style, explode)), "v", v);
        assert_eq!(text(ParamStyle::Simple, false, &list), "a,b");
        assert_eq!(text(ParamStyle::Simple, false, &obj), "x,1,y,z");
        assert_eq!(text(ParamStyle::Simple, true, &obj), "x=1,y=z");
        assert_eq!(text(ParamStyle::Label, false, &list), ".a,b");
        assert_eq!(text(ParamStyle::Label, true, &list), ".a.b");
        assert_eq!(text(ParamStyle::Matrix, false, &list), ";v=a,b");
        assert_eq!(text(ParamStyle::Matrix, true, &list), ";v=a;v=b");
        assert_eq!(text(ParamStyle::Matrix, true, &obj), ";x=1;y=z");
        assert_eq!(text(ParamStyle::Matrix, false, &json!(5)), ";v=5");
    }

    #[test]
    fn query_objects_reserved_and_content() {
        let mut spec = param("o", ParamLocation::Query, ParamStyle::Form, false);
        assert_eq!(query_pieces(&spec, &json!({"a": 1, "b": 2})), ["o=a,1,b,2"]);
        spec.explode = true;
        assert_eq!(
            query_pieces(&spec, &json!({"a": 1, "b": 2})),
            ["a=1", "b=2"]
        );
        spec.allow_reserved = true;
        assert_eq!(query_pieces(&spec, &json!("a/b:c&d")), ["o=a/b:c%26d"]);
        spec.allow_reserved = false;
        spec.content_type = Some("application/json".to_string());
        assert_eq!(
            query_pieces(&spec, &json!({"a": 1})),
            ["o=%7B%22a%22%3A1%7D"]
        );
    }

    #[tokio::test]
    async fn missing_required_path_parameter_sends_nothing() {
        let server = serve(ok_json).await;
        let t = tool(
            "GET",
            "/items/{id}",
            vec![param("id", ParamLocation::Path, ParamStyle::Simple, false)],
            None,
        );
        let err = invoker()
            .invoke(&server.base, &t, &[], &Credential::None, &json!({}))
            .await
            .unwrap_err();
        assert_eq!(err.code, INVALID_TOOL_ARGUMENTS);
        assert!(err.message.contains("`id`"), "{}", err.message);
        assert_eq!(server.connections.load(Ordering::SeqCst), 0);
    }

    fn key(kind: &str) -> AuthMethod {
        let (scheme, name) = ("k".to_string(), "X-Key".to_string());
        match kind {
            "header" => AuthMethod::ApiKeyHeader { scheme, name },
            "query" => AuthMethod::ApiKeyQuery { scheme, name },
            _ => AuthMethod::ApiKeyCookie { scheme, name },
        }
    }

    #[tokio::test]
    async fn credentials_are_injected_per_method() {
        let server = serve(ok_json).await;
        let inv = invoker();
        let secret = "s3cr3t-value";
        let cases: Vec<(Vec<AuthMethod>, Credential, &str, Option<&str>)> = vec![
            (
                vec![key("header")],
                Credential::api_key(secret),
                "x-key",
                Some(secret),
            ),
            (
                vec![key("cookie")],
                Credential::api_key(secret),
                "cookie",
                Some("X-Key=s3cr3t-value"),
            ),
            (
                vec![AuthMethod::Bearer { scheme: "b".into() }],
                Credential::bearer(secret),
                "authorization",
                Some("Bearer s3cr3t-value"),
            ),
            (
                vec![AuthMethod::Basic { scheme: "b".into() }],
                Credential::basic("user", "pass"),
                "authorization",
                Some("Basic dXNlcjpwYXNz"),
            ),
            (vec![key("header")], Credential::None, "x-key", None),
        ];
        let t = tool("GET", "/me", vec![], None);
        for (auth, credential, name, expected) in cases {
            inv.invoke(&server.base, &t, &auth, &credential, &json!({}))
                .await
                .unwrap();
            assert_eq!(header(&server.last(), name), expected, "{auth:?}");
        }
        inv.invoke(
            &server.base,
            &t,
            &[key("query")],
            &Credential::api_key("a b"),
            &json!({}),
        )
        .await
        .unwrap();
        assert_eq!(request_line(&server.last()), "GET /me?X-Key=a%20b HTTP/1.1");
    }

    #[test]
    fn auth_method_follows_security() {
        let auth = vec![key("header"), AuthMethod::Bearer { scheme: "b".into() }];
        let key_cred = Credential::api_key("t");
        let bearer_cred = Credential::bearer("t");
        let chosen = |security: Option<&[String]>, cred: &Credential| {
            choose_auth_method(&auth, security, cred).map(AuthMethod::scheme)
        };
        assert_eq!(chosen(Some(&["b".to_string()]), &key_cred), Some("b"));
        assert_eq!(chosen(Some(&["zzz".to_string()]), &key_cred), Some("k"));
        assert_eq!(chosen(None, &key_cred), Some("k"));
        assert_eq!(chosen(None, &bearer_cred), Some("b"));
        assert_eq!(choose_auth_method(&[], None, &key_cred), None);
        // An OAuth2 scheme listed first does not capture an API key.
        let oauth = AuthMethod::OAuth2 {
            scheme: "o".into(),
            flows: None,
            openid_connect_url: None,
            required_scopes: vec![],
        };
        let oauth_first = vec![oauth.clone(), key("header")];
        assert_eq!(
            choose_auth_method(&oauth_first, None, &key_cred).map(AuthMethod::scheme),
            Some("k")
        );
        let cred = key_cred;

        assert!(placement(Some(&oauth), &cred) == Some(Placement::Bearer("t")));
        assert!(placement(None, &cred) == Some(Placement::Bearer("t")));
    }

    #[tokio::test]
    async fn json_form_and_text_bodies() {
        let server = serve(ok_json).await;
        let inv = invoker();
        let payload = json!({"body": {"name": "a b", "tags": ["x", "y"], "n": 1}});
        let t = tool("POST", "/things", vec![], Some("application/json"));
        inv.invoke(&server.base, &t, &[], &Credential::None, &payload)
            .await
            .unwrap();
        let raw = server.last();
        assert_eq!(request_line(&raw), "POST /things HTTP/1.1");
        assert_eq!(header(&raw, "content-type"), Some("application/json"));
        assert_eq!(
            serde_json::from_str::<Value>(body(&raw)).unwrap(),
            payload["body"]
        );

        let t = tool(
            "POST",
            "/things",
            vec![],
            Some("application/x-www-form-urlencoded"),
        );
        inv.invoke(&server.base, &t, &[], &Credential::None, &payload)
            .await
            .unwrap();
        let raw = server.last();
        assert_eq!(
            header(&raw, "content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(body(&raw), "name=a+b&tags=x&tags=y&n=1");

        let t = tool("PUT", "/note", vec![], Some("text/plain"));
        inv.invoke(
            &server.base,
            &t,
            &[],
            &Credential::None,
            &json!({"body": "hi there"}),
        )
        .await
        .unwrap();
        assert_eq!(body(&server.last()), "hi there");

        let t = tool("POST", "/upload", vec![], Some("multipart/form-data"));
        let err = inv
            .invoke(
                &server.base,
                &t,
                &[],
                &Credential::None,
                &json!({"body": {}}),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code, INVALID_TOOL_ARGUMENTS);
        assert!(err.message.contains("not supported"));
    }

    #[tokio::test]
    async fn status_codes_map_to_spec_errors() {
        fn reply(raw: &str) -> Option<String> {
            let path = raw.split(' ').nth(1).unwrap_or_default();
            Some(match path {
                "/401" => respond(
                    "401 Unauthorized",
                    "application/json",
                    r#"{"error":"bad key s3cr3t-value"}"#,
                ),
                "/403" => respond("403 Forbidden", "application/json", "{}"),
                "/500" => respond(
                    "500 Internal Server Error",
                    "text/plain",
                    &"e".repeat(10_000),
                ),
                "/204" => "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n".to_string(),
                "/text" => respond("200 OK", "text/plain", "plain"),
                "/big" => respond(
                    "200 OK",
                    "application/json",
                    &format!("\"{}\"", "x".repeat(5000)),
                ),
                _ => respond("404 Not Found", "text/plain", ""),
            })
        }
        let server = serve(reply).await;
        let inv = invoker();
        let call = |path: &'static str| {
            let t = tool("GET", path, vec![], None);
            let inv = inv.clone();
            let base = server.base.clone();
            async move {
                inv.invoke(
                    &base,
                    &t,
                    &[key("header")],
                    &Credential::api_key("s3cr3t-value"),
                    &json!({}),
                )
                .await
            }
        };
        let err = call("/401").await.unwrap_err();
        assert_eq!(
            (err.code, err.status, err.retryable),
            (CONNECTION_REJECTED, Some(401), Some(false))
        );
        assert_eq!(err.details, Some(json!({"error": "bad key [redacted]"})));
        let err = call("/403").await.unwrap_err();
        assert_eq!(
            (err.code, err.status, err.retryable),
            (CONNECTION_REJECTED, Some(403), Some(false))
        );

        let err = call("/500").await.unwrap_err();
        assert_eq!(
            (err.code, err.status, err.retryable),
            (UPSTREAM_HTTP_ERROR, Some(500), Some(true))
        );
        let details = err.details.unwrap();
        assert_eq!(details.as_str().unwrap().len(), MAX_ERROR_DETAIL_BYTES);

        let err = call("/404").await.unwrap_err();
        assert_eq!(
            (err.code, err.status, err.details, err.retryable),
            (UPSTREAM_HTTP_ERROR, Some(404), None, Some(false))
        );

        let ok = call("/204").await.unwrap();
        assert_eq!((ok.status, ok.data), (204, Value::Null));
        assert_eq!(call("/text").await.unwrap().data, json!("plain"));

        let err = call("/big").await.unwrap_err();
        assert_eq!(err.code, UPSTREAM_HTTP_ERROR);
        assert!(err.message.contains("1024-byte limit"), "{}", err.message);
    }

    /// A source that answers every refusal the same way and notes the
    /// statuses it was told of.
    struct Source {
        answer: fn() -> Result<Retry, ToolError>,
        refusals: Mutex<Vec<u16>>,
    }

    /// What the renewal test's upstream refuses with.
    const CHALLENGE: &str = "Bearer error=\"invalid_token\"";

    impl CredentialSource for Source {
        fn credential<'a>(
            &'a self,
            _org_id: &'a str,
            _namespace: &'a str,
        ) -> BoxFuture<'a, Result<Option<Credential>, ToolError>> {
            Box::pin(async { Ok(None) })
        }

        fn refused<'a>(
            &'a self,
            _org_id: &'a str,
            _namespace: &'a str,
            refusal: Refusal<'a>,
        ) -> BoxFuture<'a, Result<Retry, ToolError>> {
            assert_eq!(refusal.www_authenticate, Some(CHALLENGE));
            self.refusals.lock().unwrap().push(refusal.status);
            Box::pin(async { (self.answer)() })
        }
    }

    #[tokio::test]
    async fn a_refused_credential_is_renewed_once() {
        /// 200 for the fresh token; else the status the path names, a
        /// 401/403 with a challenge.
        fn reply(raw: &str) -> Option<String> {
            if header(raw, "authorization") == Some("Bearer fresh") {
                return ok_json(raw);
            }
            let status = match raw.split(' ').nth(1).unwrap_or_default() {
                "/403" => "403 Forbidden",
                "/500" => "500 Internal Server Error",
                _ => "401 Unauthorized",
            };
            Some(format!(
                "HTTP/1.1 {status}\r\nwww-authenticate: {CHALLENGE}\r\n\
                 content-length: 0\r\nconnection: close\r\n\r\n"
            ))
        }
        /// The call's error code (or "ok"), the refusals its source was
        /// told of, and the requests the upstream received.
        async fn check(
            path: &str,
            credential: Credential,
            answer: fn() -> Result<Retry, ToolError>,
        ) -> (&'static str, Vec<u16>, usize) {
            let server = serve(reply).await;
            let source = Source {
                answer,
                refusals: Mutex::new(Vec::new()),
            };
            let (tool, args) = (tool("GET", path, vec![], None), json!({}));
            let request = OperationCall {
                tool: &tool,
                auth: &[],
                args: &args,
            };
            let connection = Connection::new(&source, "org", "api", &credential);
            let budget = HostBudget::new(64 << 20);
            let result = invoker()
                .send_renewing(&server.base, &request, connection, &budget)
                .await;
            let refusals = source.refusals.lock().unwrap().clone();
            let requests = server.requests.lock().unwrap().len();
            (result.map_or_else(|e| e.code, |_| "ok"), refusals, requests)
        }
        let fresh = || Ok(Retry::With(Credential::bearer("fresh")));
        let stale = || Ok(Retry::With(Credential::bearer("stale")));
        let no = || Ok(Retry::No);
        let login = || Err(ToolError::new("connection_missing", "log in"));
        let old = || Credential::bearer("old");
        assert_eq!(check("/401", old(), fresh).await, ("ok", vec![401], 2));
        assert_eq!(check("/403", old(), fresh).await, ("ok", vec![403], 2));
        // Once only: the renewed credential refused too is the answer.
        let refused = (CONNECTION_REJECTED, vec![401], 2);
        assert_eq!(check("/401", old(), stale).await, refused);
        let kept = (CONNECTION_REJECTED, vec![401], 1);
        assert_eq!(check("/401", old(), no).await, kept);
        let needs_login = ("connection_missing", vec![401], 1);
        assert_eq!(check("/401", old(), login).await, needs_login);
        // Not a refusal, or no credential to renew: the source is not asked.
        let failed = (UPSTREAM_HTTP_ERROR, vec![], 1);
        assert_eq!(check("/500", old(), fresh).await, failed);
        let anonymous = (CONNECTION_REJECTED, vec![], 1);
        assert_eq!(check("/401", Credential::None, fresh).await, anonymous);
    }

    #[tokio::test]
    async fn slow_headers_and_slow_bodies_time_out() {
        fn stall(_: &str) -> Option<String> {
            None
        }
        fn short_body(_: &str) -> Option<String> {
            Some(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\npartial"
                    .to_string(),
            )
        }
        let t = tool("GET", "/slow", vec![], None);
        for reply in [stall as Reply, short_body] {
            let server = serve(reply).await;
            let err = invoker()
                .invoke(&server.base, &t, &[], &Credential::None, &json!({}))
                .await
                .unwrap_err();
            assert_eq!(err.code, UPSTREAM_TIMEOUT, "{err}");
            assert_eq!(err.retryable, Some(true));
        }
    }

    #[tokio::test]
    async fn local_targets_are_refused_unless_allowed() {
        let server = serve(ok_json).await;
        let t = tool("GET", "/x", vec![], None);
        let guarded = HttpClient::new(config(false)).unwrap();
        let cred = Credential::api_key("s3cr3t-value");
        for base in [
            server.base.clone(),
            format!("http://localhost:{}", server.port),
            format!("http://[::ffff:127.0.0.1]:{}", server.port),
        ] {
            let err = guarded
                .invoke(&base, &t, &[key("query")], &cred, &json!({}))
                .await
                .unwrap_err();
            assert_eq!(err.code, UPSTREAM_HTTP_ERROR, "{base}");
            assert!(
                err.message.contains("--allow-local-network"),
                "{}",
                err.message
            );
            assert!(!err.message.contains("s3cr3t"), "{}", err.message);
        }
        assert_eq!(server.connections.load(Ordering::SeqCst), 0);
        for base in [
            server.base.clone(),
            format!("http://localhost:{}", server.port),
        ] {
            invoker()
                .invoke(&base, &t, &[], &Credential::None, &json!({}))
                .await
                .unwrap();
        }
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn same_origin_redirects_are_followed_others_returned() {
        fn reply(raw: &str) -> Option<String> {
            let path = raw.split(' ').nth(1).unwrap_or_default();
            Some(match path {
                "/old" => "HTTP/1.1 301 Moved\r\nlocation: /new\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
                "/away" => "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.2:9/x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
                _ => respond("200 OK", "application/json", r#""new""#),
            })
        }
        let server = serve(reply).await;
        let inv = invoker();
        let cred = Credential::api_key("s3cr3t-value");
        let ok = inv
            .invoke(
                &server.base,
                &tool("GET", "/old", vec![], None),
                &[key("header")],
                &cred,
                &json!({}),
            )
            .await
            .unwrap();
        assert_eq!((ok.status, ok.data), (200, json!("new")));
        assert_eq!(header(&server.last(), "x-key"), Some("s3cr3t-value"));
        let ok = inv
            .invoke(
                &server.base,
                &tool("GET", "/away", vec![], None),
                &[key("header")],
                &cred,
                &json!({}),
            )
            .await
            .unwrap();
        assert_eq!(ok.status, 302);
        assert_eq!(ok.headers.get("location").unwrap(), "http://127.0.0.2:9/x");
    }

    /// Hardening: a same-origin redirect loop is an upstream error after
    /// MAX_REDIRECTS redirects, never `{ok:true}` with the last 302.
    #[tokio::test]
    async fn hardening_same_origin_redirect_loop_is_an_upstream_error() {
        fn reply(_: &str) -> Option<String> {
            Some("HTTP/1.1 302 Found\r\nlocation: /loop\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string())
        }
        let server = serve(reply).await;
        let failure = invoker()
            .invoke(
                &server.base,
                &tool("GET", "/loop", vec![], None),
                &[],
                &Credential::None,
                &json!({}),
            )
            .await
            .unwrap_err();
        assert_eq!(failure.code, UPSTREAM_HTTP_ERROR, "{failure}");
        assert!(failure.message.contains("too many redirects"), "{failure}");
        assert_eq!(failure.retryable, Some(false));
        let requests = server.requests.lock().unwrap().len();
        assert_eq!(
            requests,
            MAX_REDIRECTS + 1,
            "the first request and each redirect"
        );
    }

    /// An upstream that echoes what it received, the ways SPEC §9 lists.
    fn echo(raw: &str) -> Option<String> {
        let target = raw.split(' ').nth(1).unwrap_or_default();
        let key = header(raw, "x-key").unwrap_or_default().to_string();
        let auth = header(raw, "authorization").unwrap_or_default().to_string();
        let token = auth.split(' ').nth(1).unwrap_or_default().to_string();
        let headers: BTreeMap<&str, &str> = raw
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(": "))
            .collect();
        let headers = serde_json::to_string(&headers).unwrap_or_default();
        let lower = |s: &str| s.bytes().map(|b| format!("%{b:02x}")).collect::<String>();
        Some(match target.split('?').next().unwrap_or_default() {
            "/key-as-key" => respond(
                "200 OK",
                "application/json",
                &json!({ key.clone(): "x-api-key", token.clone(): "basic" }).to_string(),
            ),
            "/key-as-number" => respond(
                "200 OK",
                "application/json",
                &format!("{{\"key\": {key}, \"in\": [{key}]}}"),
            ),
            "/in-headers" => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nlocation: /next?key={key}\r\n\
                 x-ratelimit-{key}: 1\r\nlink: <{}>\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}",
                lower(&key)
            ),
            "/escaped" => respond(
                "200 OK",
                "text/plain",
                &format!(
                    "json {} lower {} mixed {}",
                    serde_json::to_string(&key).unwrap_or_default(),
                    lower(&key),
                    serde_json::to_string(&lower(&key)).unwrap_or_default(),
                ),
            ),
            _ => respond(
                "500 Internal Server Error",
                "text/plain",
                &format!("request {target} headers {headers}"),
            ),
        })
    }

    const LEAKY_KEY: &str = "AKEY-alpha-SECRET-0123456789abcdef";

    fn assert_no_key(shown: &str, secret: &str) {
        let cut = &secret[..secret.len() - 1];
        assert!(!shown.contains(cut), "{cut:?} in {shown}");
        let lower: String = secret.bytes().map(|b| format!("%{b:02x}")).collect();
        assert!(
            !shown.to_lowercase().contains(&lower[..lower.len() - 3]),
            "{shown}"
        );
    }

    #[tokio::test]
    async fn echoed_credentials_never_come_back() {
        let server = serve(echo).await;
        let inv = invoker();
        let q = param("q", ParamLocation::Query, ParamStyle::Form, true);
        // A GET of `path` with the key in a header.
        let get = |path: &'static str, cred: Credential| {
            let (inv, base) = (&inv, &server.base);
            async move {
                let t = tool("GET", path, vec![], None);
                inv.invoke(base, &t, &[key("header")], &cred, &json!({}))
                    .await
                    .unwrap()
            }
        };
        // The key as an object key; a Basic pair's base64 likewise.
        for (cred, auth) in [
            (Credential::api_key(LEAKY_KEY), key("header")),
            (
                Credential::basic("user", LEAKY_KEY),
                AuthMethod::Basic { scheme: "b".into() },
            ),
        ] {
            let ok = inv
                .invoke(
                    &server.base,
                    &tool("GET", "/key-as-key", vec![], None),
                    &[auth],
                    &cred,
                    &json!({}),
                )
                .await
                .unwrap();
            let shown = ok.data.to_string();
            assert_no_key(&shown, LEAKY_KEY);
            assert!(
                !shown.contains(&*Credential::basic_token("user", LEAKY_KEY)),
                "{shown}"
            );
            assert!(shown.contains("[redacted]"), "{shown}");
        }
        // An all-digit key echoed as a JSON number, short and long.
        for digits in ["12345678", "98765432109876543210"] {
            let ok = get("/key-as-number", Credential::api_key(digits)).await;
            assert_eq!(
                ok.data,
                json!({"key": "[redacted]", "in": ["[redacted]"]}),
                "{digits}"
            );
        }
        // Response headers: values and names.
        let ok = get("/in-headers", Credential::api_key(LEAKY_KEY)).await;
        let shown = format!("{:?}", ok.headers);
        assert_no_key(&shown, LEAKY_KEY);
        assert_eq!(shown.matches("[redacted]").count(), 3, "{shown}");
        // JSON-escaped and lower-case percent-encoded copies.
        let cred = Credential::api_key(LEAKY_KEY);
        let ok = get("/escaped", cred.clone()).await;
        let shown = ok.data.to_string();
        assert_no_key(&shown, LEAKY_KEY);
        assert_eq!(shown.matches("[redacted]").count(), 3, "{shown}");
        // An error body cut at the detail bound, with the key in the header
        // echo and in the URL, at every offset around the bound.
        for (placement, tool_path) in [("header", "/items"), ("query", "/items")] {
            for n in (MAX_ERROR_DETAIL_BYTES - 200)..(MAX_ERROR_DETAIL_BYTES + 50) {
                let t = tool("GET", tool_path, vec![q.clone()], None);
                let args = json!({"q": "p".repeat(n)});
                let err = inv
                    .invoke(&server.base, &t, &[key(placement)], &cred, &args)
                    .await
                    .unwrap_err();
                let shown = err
                    .details
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                assert_no_key(&shown, LEAKY_KEY);
                assert!(
                    shown.len() <= MAX_ERROR_DETAIL_BYTES + 64,
                    "{}",
                    shown.len()
                );
            }
        }
    }

    #[tokio::test]
    async fn dot_segments_in_path_values_send_nothing() {
        use ParamLocation::Path;
        let server = serve(ok_json).await;
        let inv = invoker();
        let repo = tool(
            "GET",
            "/repos/{owner}/{repo}",
            vec![
                param("owner", Path, ParamStyle::Simple, false),
                param("repo", Path, ParamStyle::Simple, false),
            ],
            None,
        );
        let item = tool(
            "DELETE",
            "/pets/{id}",
            vec![param("id", Path, ParamStyle::Simple, false)],
            None,
        );
        let label = tool(
            "GET",
            "/pets/{id}",
            vec![param("id", Path, ParamStyle::Label, false)],
            None,
        );
        let base = format!("{}/api/v1", server.base);
        for (t, args) in [
            (&repo, json!({"owner": "..", "repo": "admin"})),
            (&repo, json!({"owner": "o", "repo": "."})),
            (&item, json!({"id": ".."})),
            (&item, json!({"id": [".."]})),
            (&label, json!({"id": "."})),
        ] {
            let err = inv
                .invoke(&base, t, &[], &Credential::api_key(LEAKY_KEY), &args)
                .await
                .unwrap_err();
            assert_eq!(err.code, INVALID_TOOL_ARGUMENTS, "{args}");
            assert!(
                err.message.contains("cannot be `.` or `..`"),
                "{}",
                err.message
            );
        }
        assert_eq!(server.connections.load(Ordering::SeqCst), 0);
        // Dots inside a value are fine, and so is an escaped dot: its `%`
        // is encoded, so the upstream sees the text, never a dot segment.
        for (id, sent) in [
            ("a..b", "a..b"),
            ("%2e%2E", "%252e%252E"),
            (".%2e", ".%252e"),
        ] {
            inv.invoke(&base, &item, &[], &Credential::None, &json!({ "id": id }))
                .await
                .unwrap();
            assert_eq!(
                request_line(&server.last()),
                format!("DELETE /api/v1/pets/{sent} HTTP/1.1")
            );
        }
    }

    fn path_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = prop_oneof![
            Just(".".to_string()),
            Just("..".to_string()),
            Just("%2e".to_string()),
            Just("%2E%2e".to_string()),
            Just(".%2E".to_string()),
            "[./%2eEa-c?#;=,\\ ]{0,6}",
        ];
        prop_oneof![
            text.clone().prop_map(Value::String),
            proptest::collection::vec(text.clone(), 0..3).prop_map(|v| json!(v)),
            (text.clone(), text).prop_map(|(k, v)| json!({ k: v })),
            any::<i32>().prop_map(|n| json!(n)),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// Whatever the values, either nothing is sent or the URL the
        /// upstream receives has exactly the template's segments: the fixed
        /// ones unchanged, one per parameter.
        #[test]
        fn the_request_path_always_matches_the_template(
            owner in path_value(),
            repo in path_value(),
            style in proptest::sample::select(vec![ParamStyle::Simple, ParamStyle::Label, ParamStyle::Matrix]),
            explode in proptest::prelude::any::<bool>(),
        ) {
            use ParamLocation::Path;
            let t = tool(
                "GET",
                "/repos/{owner}/x/{repo}",
                vec![param("owner", Path, style, explode), param("repo", Path, style, explode)],
                None,
            );
            let args = json!({"owner": owner, "repo": repo});
            let built = build(&t, args.as_object().unwrap())
                .and_then(|mut parts| parts.url("http://127.0.0.1:9/api/v1"));
            match built {
                Err(failure) => proptest::prop_assert_eq!(failure.code, INVALID_TOOL_ARGUMENTS),
                Ok(url) => {
                    let segments: Vec<&str> = url.path_segments().unwrap().collect();
                    proptest::prop_assert_eq!(segments.len(), 6, "{}", url);
                    proptest::prop_assert_eq!(&segments[..3], &["api", "v1", "repos"][..], "{}", url);
                    proptest::prop_assert_eq!(segments[4], "x", "{}", url);
                }
            }
        }
    }

    #[tokio::test]
    async fn parsed_answers_are_held_in_the_execution_budget() {
        fn numbers(_: &str) -> Option<String> {
            let body = format!("[{}1]", "1,".repeat(400));
            Some(respond("200 OK", "application/json", &body))
        }
        let server = serve(numbers).await;
        let inv = invoker();
        let t = tool("GET", "/n", vec![], None);
        // 801 bytes of text, about 32 KiB parsed: over a 16 KiB budget.
        let small = HostBudget::new(16 * 1024);
        let err = inv
            .invoke_within(&server.base, &t, &[], &Credential::None, &json!({}), &small)
            .await
            .unwrap_err();
        assert_eq!(err.code, UPSTREAM_HTTP_ERROR);
        assert!(
            err.message.contains("of memory once parsed"),
            "{}",
            err.message
        );
        // Within the budget it is parsed, and holds its room until dropped.
        let budget = HostBudget::new(64 * 1024);
        let ok = inv
            .invoke_within(
                &server.base,
                &t,
                &[],
                &Credential::None,
                &json!({}),
                &budget,
            )
            .await
            .unwrap();
        assert_eq!(ok.data.as_array().map(Vec::len), Some(401));
        let second = tokio::time::timeout(
            Duration::from_millis(100),
            inv.invoke_within(
                &server.base,
                &t,
                &[],
                &Credential::None,
                &json!({}),
                &budget,
            ),
        )
        .await;
        assert!(second.is_err(), "the second answer waits for room");
        drop(ok);
        inv.invoke_within(
            &server.base,
            &t,
            &[],
            &Credential::None,
            &json!({}),
            &budget,
        )
        .await
        .unwrap();
    }
}
