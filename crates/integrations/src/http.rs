//! The HTTP invoker for OpenAPI tools (SPEC §7–9): turns an
//! [`HttpOperation`] and its flat arguments into a request, sends it through
//! one shared client guarded against local-network targets, and shapes the
//! response into a success or a coded failure.
//!
//! Credentials are rendered into headers, query or cookies only here, and
//! every message, detail and result this module returns is scrubbed of them.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::{ACCEPT, CONTENT_TYPE, COOKIE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use rustls_platform_verifier::BuilderVerifierExt;
use serde_json::{Map, Value};

use zeroize::Zeroizing;

pub use crate::credential::Credential;
use crate::json_scan::JsonScan;
use crate::redact::Redactor;
use crate::{AuthMethod, BodySpec, HttpOperation, ParamLocation, ParamSpec, ParamStyle};
use executor_catalog::{HostBudget, HostHold};

/// SPEC §7 error codes this module produces.
pub const INVALID_TOOL_ARGUMENTS: &str = "invalid_tool_arguments";
pub const CONNECTION_REJECTED: &str = "connection_rejected";
pub const UPSTREAM_HTTP_ERROR: &str = "upstream_http_error";
pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";

/// How much of an upstream error body is kept in `details`.
const MAX_ERROR_DETAIL_BYTES: usize = 4096;
/// Same-origin redirects followed before the 3xx is returned as is.
const MAX_REDIRECTS: usize = 10;
/// Everything but RFC 3986 unreserved characters is encoded: a value can
/// never break out of its path segment, query pair or cookie.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
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

/// Operator settings for outbound calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Allows loopback, private and link-local targets (`--allow-local-network`).
    pub allow_local_network: bool,
    /// From sending the request to the end of the response headers.
    pub header_timeout: Duration,
    /// For reading the whole response body.
    pub body_timeout: Duration,
    /// Larger response bodies fail rather than fill memory.
    pub max_response_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allow_local_network: false,
            header_timeout: Duration::from_secs(110),
            body_timeout: Duration::from_secs(60),
            max_response_bytes: 8 * 1024 * 1024,
        }
    }
}

/// A 2xx (or an unfollowed 3xx) response.
#[derive(Debug)]
pub struct HttpSuccess {
    pub status: u16,
    /// A safe subset of the response headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// Parsed JSON, else the body as text, or null when there is no body.
    pub data: Value,
    /// Room `data` holds in the execution's host budget.
    pub held: Option<HostHold>,
}

/// What one call carries through sending and reading.
struct Call<'a> {
    redactor: &'a Redactor,
    budget: &'a HostBudget,
}

/// Host bytes per JSON value beyond its text: the value's enum, its slot in
/// an array or a map entry (key, hash, index).
const PARSED_VALUE_OVERHEAD: usize = 80;

/// An upper estimate of what `bytes` takes once parsed: its text plus
/// [`PARSED_VALUE_OVERHEAD`] per value (counted by the separators outside
/// strings). Text that is not JSON is kept as one string.
fn parsed_size_estimate(bytes: &[u8], is_json: bool) -> usize {
    if !is_json {
        return bytes.len();
    }
    let mut scan = JsonScan::default();
    let separators = bytes
        .iter()
        .filter(|&&b| scan.outside(b) && matches!(b, b',' | b'[' | b'{' | b':'))
        .count();
    bytes.len() + (1 + separators) * PARSED_VALUE_OVERHEAD
}

/// A call that did not succeed, as SPEC §7's `error` object.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpFailure {
    pub code: &'static str,
    pub message: String,
    pub status: Option<u16>,
    /// The upstream error body (bounded), when there is one.
    pub details: Option<Value>,
    pub retryable: Option<bool>,
}

impl HttpFailure {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        HttpFailure {
            code,
            message: message.into(),
            status: None,
            details: None,
            retryable: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        HttpFailure::new(INVALID_TOOL_ARGUMENTS, message)
    }

    fn upstream(message: impl Into<String>, retryable: bool) -> Self {
        HttpFailure {
            retryable: Some(retryable),
            ..HttpFailure::new(UPSTREAM_HTTP_ERROR, message)
        }
    }

    fn timeout(message: impl Into<String>) -> Self {
        HttpFailure {
            retryable: Some(true),
            ..HttpFailure::new(UPSTREAM_TIMEOUT, message)
        }
    }

    fn local_network(host: &str) -> Self {
        HttpFailure::upstream(
            format!(
                "the request to {host} was refused: the address is on a local network; \
                 the operator can allow it with --allow-local-network"
            ),
            false,
        )
    }
}

impl fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl StdError for HttpFailure {}

/// Sends tool calls; one client (and so one connection pool) for all calls.
#[derive(Debug, Clone)]
pub struct HttpInvoker {
    client: reqwest::Client,
    config: HttpConfig,
}

impl HttpInvoker {
    pub fn new(config: HttpConfig) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .dns_resolver(Arc::new(GuardedResolver {
                allow_local_network: config.allow_local_network,
            }))
            // A proxy would resolve the target itself, bypassing the guard.
            .no_proxy()
            .redirect(redirect_policy())
            .connect_timeout(config.header_timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpInvoker { client, config })
    }

    /// Builds and sends the request for `tool` with flat `args` (one property
    /// per parameter, plus `body`), injecting `credential` according to the
    /// first of `auth` the tool's `security` allows, else the first method.
    /// A JSON answer is parsed only once its estimated parsed size is held
    /// in `budget` (the execution's share of host memory).
    pub async fn invoke_within(
        &self,
        base_url: &str,
        tool: &HttpOperation,
        auth: &[AuthMethod],
        credential: &Credential,
        args: &Value,
        budget: &HostBudget,
    ) -> Result<HttpSuccess, HttpFailure> {
        let redactor = Redactor::new(credential);
        let call = Call {
            redactor: &redactor,
            budget,
        };
        match self
            .send(base_url, tool, auth, credential, args, &call)
            .await
        {
            Ok(success) => Ok(redact_success(&redactor, success)),
            Err(failure) => Err(redact_failure(&redactor, failure)),
        }
    }

    /// [`HttpInvoker::invoke_within`] with a budget of 64 MiB.
    #[cfg(test)]
    pub(crate) async fn invoke(
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

    async fn send(
        &self,
        base_url: &str,
        tool: &HttpOperation,
        auth: &[AuthMethod],
        credential: &Credential,
        args: &Value,
        call: &Call<'_>,
    ) -> Result<HttpSuccess, HttpFailure> {
        let args = arg_map(args)?;
        let mut parts = RequestParts::from_args(tool, args)?;
        // `security: []` declares the operation public: no credential goes out.
        let public = tool.security.as_ref().is_some_and(Vec::is_empty);
        if !public {
            let method = choose_auth_method(auth, tool.security.as_deref(), credential);
            parts.apply_credential(placement(method, credential))?;
        }
        let base = tool.base_url.as_deref().unwrap_or(base_url);
        let url = parts.url(base)?;
        let host = url.host_str().unwrap_or_default().to_string();
        self.check_target(&url)?;
        let http_method = Method::from_bytes(tool.method.as_bytes())
            .map_err(|_| HttpFailure::invalid(format!("unsupported method {}", tool.method)))?;
        let is_head = http_method == Method::HEAD;
        let mut request = self.client.request(http_method, url).headers(parts.headers);
        if let Some(body) = parts.body {
            request = request.body(body);
        }
        let sent = tokio::time::timeout(self.config.header_timeout, request.send()).await;
        let response = match sent {
            Err(_) => {
                return Err(HttpFailure::timeout(format!(
                    "{host} did not answer within {} s",
                    self.config.header_timeout.as_secs_f64()
                )));
            }
            Ok(Err(e)) => return Err(send_failure(&e, &host)),
            Ok(Ok(response)) => response,
        };
        self.read_response(response, is_head, call).await
    }

    /// GETs a document (an API description) through the same client, SSRF
    /// guard and timeouts as tool calls; at most `max_bytes`.
    pub async fn fetch_document(&self, url: &str, max_bytes: usize) -> Result<String, HttpFailure> {
        let parsed =
            Url::parse(url).map_err(|e| HttpFailure::invalid(format!("not a URL: {e}")))?;
        self.check_target(&parsed)?;
        let host = parsed.host_str().unwrap_or_default().to_string();
        let sent =
            tokio::time::timeout(self.config.header_timeout, self.client.get(parsed).send()).await;
        let response = match sent {
            Err(_) => {
                return Err(HttpFailure::timeout(
                    "the document's server sent no response in time",
                ));
            }
            Ok(Err(e)) => return Err(send_failure(&e, &host)),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(HttpFailure {
                status: Some(status),
                ..HttpFailure::upstream(
                    format!("fetching the document answered HTTP {status}"),
                    false,
                )
            });
        }
        let (bytes, truncated) = self.read_body(response, max_bytes).await?;
        if truncated {
            return Err(HttpFailure::upstream(
                format!("the document is larger than {max_bytes} bytes"),
                false,
            ));
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Literal IP hosts never reach the resolver, so they are checked here.
    fn check_target(&self, url: &Url) -> Result<(), HttpFailure> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HttpFailure::upstream(
                format!("unsupported URL scheme {:?}", url.scheme()),
                false,
            ));
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        match ip {
            Some(ip) if !self.config.allow_local_network && is_local(ip) => {
                Err(HttpFailure::local_network(&ip.to_string()))
            }
            _ => Ok(()),
        }
    }

    async fn read_response(
        &self,
        response: reqwest::Response,
        is_head: bool,
        call: &Call<'_>,
    ) -> Result<HttpSuccess, HttpFailure> {
        let status = response.status().as_u16();
        let headers = safe_headers(response.headers());
        let is_json = is_json_media(headers.get("content-type").map(String::as_str));
        if !(200..400).contains(&status) {
            return Err(self
                .error_response(response, status, is_json, call.redactor)
                .await);
        }
        let no_body = is_head || matches!(status, 204 | 205 | 304);
        let mut held = None;
        let data = if no_body {
            Value::Null
        } else {
            let limit = self.config.max_response_bytes;
            let (bytes, truncated) = self.read_body(response, limit).await?;
            if truncated {
                return Err(HttpFailure {
                    status: Some(status),
                    ..HttpFailure::upstream(
                        format!("the response is larger than the {limit}-byte limit"),
                        false,
                    )
                });
            }
            // Held before parsing: the parsed value is what costs memory.
            let estimate = parsed_size_estimate(&bytes, is_json);
            held = Some(
                call.budget
                    .hold(estimate)
                    .await
                    .map_err(|message| HttpFailure {
                        status: Some(status),
                        ..HttpFailure::upstream(message, false)
                    })?,
            );
            redacted_body(&bytes, is_json, call.redactor)
        };
        Ok(HttpSuccess {
            status,
            headers,
            data,
            held,
        })
    }

    async fn error_response(
        &self,
        response: reqwest::Response,
        status: u16,
        is_json: bool,
        redactor: &Redactor,
    ) -> HttpFailure {
        // The details are a courtesy: a body that cannot be read is dropped.
        // More than is kept is read, so that redaction runs before the cut.
        let limit = MAX_ERROR_DETAIL_BYTES + redactor.slack();
        let details = match self.read_body(response, limit).await {
            Ok((bytes, _)) if bytes.is_empty() => None,
            Ok((bytes, false)) if bytes.len() <= MAX_ERROR_DETAIL_BYTES => {
                Some(redacted_body(&bytes, is_json, redactor))
            }
            Ok((bytes, _)) => {
                let text = String::from_utf8_lossy(&bytes);
                Some(Value::String(redactor.cut(&text, MAX_ERROR_DETAIL_BYTES)))
            }
            Err(_) => None,
        };
        let mut failure = if matches!(status, 401 | 403) {
            HttpFailure {
                retryable: Some(false),
                ..HttpFailure::new(
                    CONNECTION_REJECTED,
                    format!(
                        "the upstream API rejected the connection's credential (HTTP {status})"
                    ),
                )
            }
        } else {
            let retryable = matches!(status, 408 | 425 | 429) || status >= 500;
            HttpFailure::upstream(
                format!("the upstream API answered HTTP {status}"),
                retryable,
            )
        };
        failure.status = Some(status);
        failure.details = details;
        failure
    }

    /// Reads at most `limit` bytes; the flag says whether more were left.
    async fn read_body(
        &self,
        response: reqwest::Response,
        limit: usize,
    ) -> Result<(Vec<u8>, bool), HttpFailure> {
        let timeout = self.config.body_timeout;
        match tokio::time::timeout(timeout, read_bounded(response, limit)).await {
            Err(_) => Err(HttpFailure::timeout(format!(
                "the response body did not arrive within {} s",
                timeout.as_secs_f64()
            ))),
            Ok(Err(e)) if e.is_timeout() => {
                Err(HttpFailure::timeout("the response body timed out"))
            }
            Ok(Err(e)) => Err(HttpFailure::upstream(
                format!("reading the response body failed: {}", error_chain(&e)),
                true,
            )),
            Ok(Ok(read)) => Ok(read),
        }
    }
}

/// TLS through rustls with the `ring` provider (no C toolchain needed) and
/// the operating system's trust store.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure TLS: {e}"))?
        .with_platform_verifier()
        .map_err(|e| format!("cannot load the platform's TLS roots: {e}"))?
        .with_no_client_auth();
    Ok(config)
}

/// Follows redirects only within the origin of the first request: those
/// keep the credential safely (a custom API-key header would otherwise be
/// forwarded to another host), and their host is resolved through the guard
/// again. A redirect elsewhere is returned as the 3xx with its `location`.
/// One more same-origin redirect than [`MAX_REDIRECTS`] is an error
/// ([`TooManyRedirects`]): the API is looping, and its last 3xx is no answer.
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        // `previous` holds the first request's URL and every redirect's.
        let followed = attempt.previous().len().saturating_sub(1);
        if !same_origin {
            attempt.stop()
        } else if followed < MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.error(TooManyRedirects)
        }
    })
}

/// The same-origin redirect limit was reached; found in a send error's
/// sources by [`send_failure`].
#[derive(Debug)]
struct TooManyRedirects;

impl fmt::Display for TooManyRedirects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("too many redirects")
    }
}

impl StdError for TooManyRedirects {}

async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(chunk.get(..room).unwrap_or_default());
            return Ok((bytes, true));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, false))
}

/// The body as the agent will see it, redacted once, where it becomes a
/// value: a JSON text before it is parsed (so a secret echoed as a number is
/// caught, and the parsed tree is never walked again), any other text — or
/// JSON that does not parse — as the string it becomes.
fn redacted_body(bytes: &[u8], is_json: bool, redactor: &Redactor) -> Value {
    let redacted = if is_json {
        redactor.json_text(bytes)
    } else {
        None
    };
    let mut value = body_value(redacted.as_deref().unwrap_or(bytes), is_json);
    if let Value::String(text) = &mut value {
        redactor.text_in_place(text);
    }
    value
}

fn body_value(bytes: &[u8], is_json: bool) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    if is_json && let Ok(value) = serde_json::from_slice(bytes) {
        return value;
    }
    Value::String(String::from_utf8_lossy(bytes).into_owned())
}

/// `application/json`, `application/problem+json`, … (parameters ignored).
fn is_json_media(content_type: Option<&str>) -> bool {
    content_type.is_some_and(crate::media::names_json)
}

/// Response headers worth showing the agent; the rest may carry cookies or
/// infrastructure details.
fn safe_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    const KEPT: &[&str] = &["content-type", "etag", "link", "location", "retry-after"];
    let mut kept = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str();
        let wanted = KEPT.contains(&name) || name.starts_with("x-ratelimit-");
        let Ok(value) = value.to_str() else { continue };
        if wanted {
            kept.entry(name.to_string())
                .and_modify(|v: &mut String| {
                    v.push_str(", ");
                    v.push_str(value);
                })
                .or_insert_with(|| value.to_string());
        }
    }
    kept
}

/// Shapes a send error without its URL, which may hold a query credential.
fn send_failure(error: &reqwest::Error, host: &str) -> HttpFailure {
    if has_source::<LocalNetworkRefused>(error) {
        return HttpFailure::local_network(host);
    }
    if has_source::<TooManyRedirects>(error) {
        return HttpFailure::upstream(
            format!("{TooManyRedirects}: {host} redirected more than {MAX_REDIRECTS} times"),
            false,
        );
    }
    if error.is_timeout() {
        return HttpFailure::timeout(format!("{host} did not answer in time"));
    }
    let cause = error_chain(error);
    if error.is_connect() {
        HttpFailure::upstream(format!("could not connect to {host}: {cause}"), true)
    } else {
        HttpFailure::upstream(format!("the request to {host} failed: {cause}"), true)
    }
}

fn has_source<E: StdError + 'static>(error: &(dyn StdError + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<E>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// The error's sources joined with `: `, skipping reqwest's own text (which
/// names the URL).
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut current = error.source();
    while let Some(e) = current {
        parts.push(e.to_string());
        current = e.source();
    }
    if parts.is_empty() {
        "unknown error".to_string()
    } else {
        parts.join(": ")
    }
}

// ---------------------------------------------------------------------------
// Building the request.

/// Builds the request for `args` without sending it (and without the
/// credential), to refuse before any approval what cannot be sent as the
/// operation names it.
pub fn check_args(tool: &HttpOperation, args: &Value) -> Result<(), HttpFailure> {
    RequestParts::from_args(tool, arg_map(args)?).map(drop)
}

fn arg_map(args: &Value) -> Result<&Map<String, Value>, HttpFailure> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match args {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(EMPTY.get_or_init(Map::new)),
        _ => Err(HttpFailure::invalid("the arguments must be an object")),
    }
}

/// The request before it becomes a URL: query pieces are already encoded.
#[derive(Default)]
struct RequestParts {
    path: String,
    query: Vec<String>,
    headers: HeaderMap,
    cookies: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl RequestParts {
    fn from_args(tool: &HttpOperation, args: &Map<String, Value>) -> Result<Self, HttpFailure> {
        let mut parts = RequestParts {
            path: expand_path(&tool.path_template, &tool.parameters, args)?,
            ..RequestParts::default()
        };
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
            parts.add_param(spec, value)?;
        }
        if let Some((content_type, body)) = encode_body(tool.body.as_ref(), args.get("body"))? {
            let content_type = HeaderValue::from_str(&content_type).map_err(|_| {
                HttpFailure::invalid("the body's content type is not a valid header")
            })?;
            parts.headers.insert(CONTENT_TYPE, content_type);
            parts.body = Some(body);
        }
        Ok(parts)
    }

    fn add_param(&mut self, spec: &ParamSpec, value: &Value) -> Result<(), HttpFailure> {
        match spec.location {
            // Already in the path.
            ParamLocation::Path => {}
            ParamLocation::Query => self.query.extend(query_pieces(spec, value)),
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
                self.headers.insert(name, value);
            }
            ParamLocation::Cookie => self.cookies.extend(cookie_pairs(spec, value)),
        }
        Ok(())
    }

    fn apply_credential(&mut self, placement: Option<Placement<'_>>) -> Result<(), HttpFailure> {
        let header_error = || {
            HttpFailure::new(
                CONNECTION_REJECTED,
                "the connection's credential contains characters an HTTP header cannot carry",
            )
        };
        match placement {
            None => {}
            Some(Placement::Header(name, secret)) => {
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| header_error())?;
                let value = sensitive_header(secret).ok_or_else(header_error)?;
                self.headers.insert(name, value);
            }
            Some(Placement::Query(name, secret)) => self.query.push(format!(
                "{}={}",
                utf8_percent_encode(name, COMPONENT),
                utf8_percent_encode(secret, COMPONENT)
            )),
            Some(Placement::Cookie(name, secret)) => {
                // The credential wins over a parameter of the same name.
                self.cookies.retain(|(n, _)| n != name);
                let value = utf8_percent_encode(secret, COMPONENT).to_string();
                self.cookies.push((name.to_string(), value));
            }
            Some(Placement::Bearer(token)) => {
                let text = Zeroizing::new(format!("Bearer {token}"));
                let value = sensitive_header(&text).ok_or_else(header_error)?;
                self.headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            Some(Placement::Basic(user, password)) => {
                let token = Credential::basic_token(user, password);
                let text = Zeroizing::new(format!("Basic {}", token.as_str()));
                let value = sensitive_header(&text).ok_or_else(header_error)?;
                self.headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        Ok(())
    }

    fn url(&mut self, base: &str) -> Result<Url, HttpFailure> {
        if !self.cookies.is_empty() {
            let cookie = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            let value = sensitive_header(&cookie).ok_or_else(|| {
                HttpFailure::invalid("a cookie parameter cannot be sent as a header")
            })?;
            self.headers.insert(COOKIE, value);
        }
        let mut text = format!("{}{}", base.trim_end_matches('/'), self.path);
        if !self.query.is_empty() {
            text.push(if text.contains('?') { '&' } else { '?' });
            text.push_str(&self.query.join("&"));
        }
        // The message names the base only: the full URL may hold a key.
        Url::parse(&text).map_err(|e| {
            HttpFailure::upstream(format!("the base URL {base:?} is not usable: {e}"), false)
        })
    }
}

/// Marked sensitive so that reqwest and hyper never print it.
fn sensitive_header(text: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(text).ok()?;
    value.set_sensitive(true);
    Some(value)
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
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let bytes = if is_json_media(Some(&essence)) {
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

/// Where the credential goes, borrowed from the auth method and credential.
#[derive(PartialEq, Eq)]
enum Placement<'a> {
    Header(&'a str, &'a str),
    Query(&'a str, &'a str),
    Cookie(&'a str, &'a str),
    Bearer(&'a str),
    Basic(&'a str, &'a str),
}

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

/// Scrubs the credential from a success's headers (its body was redacted
/// as it was read, by [`redacted_body`]).
fn redact_success(redactor: &Redactor, mut success: HttpSuccess) -> HttpSuccess {
    if !redactor.is_empty() {
        // Names too: `x-ratelimit-*` headers are kept whatever they are called.
        success.headers = std::mem::take(&mut success.headers)
            .into_iter()
            .map(|(mut name, mut value)| {
                redactor.header_name_in_place(&mut name);
                redactor.text_in_place(&mut value);
                (name, value)
            })
            .collect();
    }
    success
}

/// Scrubs the credential from a failure's message (transport errors may
/// quote a URL) and details.
fn redact_failure(redactor: &Redactor, mut failure: HttpFailure) -> HttpFailure {
    redactor.text_in_place(&mut failure.message);
    if let Some(details) = &mut failure.details {
        redactor.value(details);
    }
    failure
}

// ---------------------------------------------------------------------------
// The SSRF guard.

/// Raised by the resolver when every address of a host is local; found
/// again in reqwest's error chain to report the refusal clearly.
#[derive(Debug)]
struct LocalNetworkRefused;

impl fmt::Display for LocalNetworkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the address is on a local network")
    }
}

impl StdError for LocalNetworkRefused {}

/// Resolves through the system and drops local addresses, so the check
/// applies to what is actually connected to (including redirects and
/// DNS names that point inside the network).
struct GuardedResolver {
    allow_local_network: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let allow_local = self.allow_local_network;
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|addr| allow_local || !is_local(addr.ip()))
                .collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(Box::new(LocalNetworkRefused) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether an address is loopback, private, link-local, CGNAT, reserved,
/// unspecified, multicast or broadcast, including IPv6 forms embedding one.
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_local_v4(v4),
        IpAddr::V6(v6) => is_local_v6(v6),
    }
}

fn is_local_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        // 0.0.0.0/8 "this network", 100.64.0.0/10 CGNAT, 240.0.0.0/4 reserved.
        || a == 0
        || (a == 100 && (b & 0xc0) == 64)
        || a >= 240
}

fn is_local_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let first = segments[0];
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return true;
    }
    // fe80::/10 link-local, fec0::/10 site-local (deprecated), fc00::/7 ULA.
    if (first & 0xffc0) == 0xfe80 || (first & 0xffc0) == 0xfec0 || (first & 0xfe00) == 0xfc00 {
        return true;
    }
    embedded_v4(ip).is_some_and(is_local_v4)
}

/// The IPv4 address inside IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
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

    fn invoker() -> HttpInvoker {
        HttpInvoker::new(config(true)).unwrap()
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
        let oauth_first = vec![AuthMethod::OAuth2 { scheme: "o".into() }, key("header")];
        assert_eq!(
            choose_auth_method(&oauth_first, None, &key_cred).map(AuthMethod::scheme),
            Some("k")
        );
        let cred = key_cred;
        let oauth = AuthMethod::OAuth2 { scheme: "o".into() };
        assert!(placement(Some(&oauth), &cred) == Some(Placement::Bearer("t")));
        assert!(placement(None, &cred) == Some(Placement::Bearer("t")));
    }

    #[test]
    fn default_timeouts_are_specs() {
        // SPEC §8: 110 s for the response headers, 60 s for the body.
        let config = HttpConfig::default();
        assert_eq!(config.header_timeout, Duration::from_secs(110));
        assert_eq!(config.body_timeout, Duration::from_secs(60));
        assert!(!config.allow_local_network);
    }

    #[test]
    fn basic_token_matches_rfc7617() {
        // RFC 7617 §2's example.
        let token = Credential::basic_token("Aladdin", "open sesame");
        assert_eq!(token.as_str(), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
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
        let guarded = HttpInvoker::new(config(false)).unwrap();
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

    #[test]
    fn local_address_classification() {
        let local = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
        ];
        for ip in local {
            assert!(is_local(ip.parse().unwrap()), "{ip}");
        }
        let public = [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ];
        for ip in public {
            assert!(!is_local(ip.parse().unwrap()), "{ip}");
        }
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
            let built = RequestParts::from_args(&t, args.as_object().unwrap())
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

    #[test]
    fn parsed_size_estimates_count_values_not_string_contents() {
        assert_eq!(
            parsed_size_estimate(b"[1,2]", true),
            5 + 3 * PARSED_VALUE_OVERHEAD
        );
        assert_eq!(
            parsed_size_estimate(br#"{"a,b":"c\",d"}"#, true),
            15 + 3 * PARSED_VALUE_OVERHEAD
        );
        assert_eq!(parsed_size_estimate(b"[1,2]", false), 5);
    }

    #[test]
    fn secrets_never_print() {
        let secret = "s3cr3t value";
        let creds = [
            Credential::api_key(secret),
            Credential::bearer(secret),
            Credential::basic("u", secret),
        ];
        let basic = Credential::basic_token("u", "s3cr3t value").to_string();
        for cred in &creds {
            assert!(!format!("{cred:?}").contains("s3cr3t"));
            let echoed = match cred {
                Credential::Basic { .. } => json!([secret, "s3cr3t%20value", basic]),
                _ => json!([secret, "s3cr3t%20value"]),
            };
            let failure = redact_failure(
                &Redactor::new(cred),
                HttpFailure {
                    details: Some(json!({"echo": echoed})),
                    ..HttpFailure::upstream("key s3cr3t value rejected", false)
                },
            );
            for shown in [format!("{failure:?}"), failure.to_string()] {
                assert!(!shown.contains("s3cr3t"), "{shown}");
                assert!(!shown.contains(&basic), "{shown}");
            }
        }
        let mut parts = RequestParts::default();
        parts
            .apply_credential(Some(Placement::Bearer("s3cr3t-value")))
            .unwrap();
        assert!(!format!("{:?}", parts.headers).contains("s3cr3t"));
    }
}
