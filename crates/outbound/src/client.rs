//! The one outbound HTTP client: TLS, the SSRF guard, timeouts, redirects
//! kept within the origin, bounded reads, the parsed size of an answer held
//! in the execution's host budget, failures mapped to SPEC §7 codes, and
//! every answer redacted of the credential before anyone sees it.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use executor_catalog::{HostBudget, HostHold, ToolError};
use reqwest::header::HeaderMap;
use reqwest::{Method, Url};
use rustls_platform_verifier::BuilderVerifierExt;
use serde_json::Value;

use crate::credential::{Connection, Credential, renewed};
use crate::failure::{CONNECTION_REJECTED, HttpFailure};
use crate::guard::{GuardedResolver, is_local, is_local_network_refusal};
use crate::json_scan::JsonScan;
use crate::redact::Redactor;
use crate::request::{BuildRequest, OutboundRequest, Placement};

/// How much of an upstream error body is kept in `details`.
pub const MAX_ERROR_DETAIL_BYTES: usize = 4096;
/// Same-origin redirects followed before the 3xx is returned as is.
pub const MAX_REDIRECTS: usize = 10;
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

/// A document as [`HttpClient::get_document`] read it.
#[derive(Debug)]
pub struct FetchedDocument {
    pub body: Vec<u8>,
    /// Its `Cache-Control`, every field joined.
    pub cache_control: Option<String>,
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
pub fn parsed_size_estimate(bytes: &[u8], is_json: bool) -> usize {
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

/// Sends every integration's requests; one client (and so one connection
/// pool) for all calls.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    config: HttpConfig,
}

/// Why the HTTP client could not be built (at start-up, for the operator;
/// the cause is kept as the source).
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    #[error("cannot configure TLS")]
    Tls(#[source] rustls::Error),
    #[error("cannot load the platform's TLS roots")]
    TrustStore(#[source] rustls::Error),
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
}

impl HttpClient {
    pub fn new(config: HttpConfig) -> Result<Self, ClientSetupError> {
        Self::with_redirects(config, redirect_policy())
    }

    /// A client that follows no redirect at all (a 3xx is the answer): for
    /// a document that must be served at exactly the URL that names it, a
    /// client ID metadata document (SPEC §4).
    pub fn without_redirects(config: HttpConfig) -> Result<Self, ClientSetupError> {
        Self::with_redirects(config, reqwest::redirect::Policy::none())
    }

    fn with_redirects(
        config: HttpConfig,
        redirects: reqwest::redirect::Policy,
    ) -> Result<Self, ClientSetupError> {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .dns_resolver(Arc::new(GuardedResolver {
                allow_local_network: config.allow_local_network,
            }))
            // A proxy would resolve the target itself, bypassing the guard.
            .no_proxy()
            .redirect(redirects)
            .connect_timeout(config.header_timeout)
            .build()
            .map_err(ClientSetupError::Client)?;
        Ok(HttpClient { client, config })
    }

    /// Sends `request` under `base_url` with the credential where
    /// `placement` says, and reads the answer: a JSON answer is parsed only
    /// once its estimated parsed size is held in `budget` (the execution's
    /// share of host memory). Everything returned — data, headers, message,
    /// details — is scrubbed of every form of the credential.
    pub async fn send(
        &self,
        base_url: &str,
        request: OutboundRequest,
        credential: &Credential,
        placement: Option<Placement<'_>>,
        budget: &HostBudget,
    ) -> Result<HttpSuccess, HttpFailure> {
        let redactor = Redactor::new(credential);
        let call = Call {
            redactor: &redactor,
            budget,
        };
        match self.send_placed(base_url, request, placement, &call).await {
            Ok(success) => Ok(redact_success(&redactor, success)),
            Err(failure) => Err(redact_failure(&redactor, failure)),
        }
    }

    /// [`HttpClient::send`] under [`renewed`]'s rule: `request` built and
    /// sent with the connection's credential and, when the upstream refused
    /// it, built and sent once more with the credential its source renewed
    /// it to (an OAuth connection refreshed its token). A failure is the
    /// call's error, and so is the source's answer that a login is needed.
    pub async fn send_renewing(
        &self,
        base_url: &str,
        request: &impl BuildRequest,
        connection: Connection<'_>,
        budget: &HostBudget,
    ) -> Result<HttpSuccess, ToolError> {
        let Connection {
            source,
            org_id,
            namespace,
            credential,
        } = connection;
        let failure = match self.send_built(base_url, request, credential, budget).await {
            Ok(success) => return Ok(success),
            Err(failure) => failure,
        };
        let (status, challenge) = (failure.status, failure.www_authenticate.as_deref());
        match renewed(source, org_id, namespace, credential, status, challenge).await? {
            Some(renewed) => self
                .send_built(base_url, request, &renewed, budget)
                .await
                .map_err(ToolError::from),
            None => Err(ToolError::from(failure)),
        }
    }

    /// A request that cannot be built is not sent (and its failure, which
    /// holds no answer, is not redacted).
    async fn send_built(
        &self,
        base_url: &str,
        request: &impl BuildRequest,
        credential: &Credential,
        budget: &HostBudget,
    ) -> Result<HttpSuccess, HttpFailure> {
        let (request, placement) = request.build(credential)?;
        self.send(base_url, request, credential, placement, budget)
            .await
    }

    async fn send_placed(
        &self,
        base_url: &str,
        mut request: OutboundRequest,
        placement: Option<Placement<'_>>,
        call: &Call<'_>,
    ) -> Result<HttpSuccess, HttpFailure> {
        request.apply_credential(placement)?;
        let url = request.url(base_url)?;
        let host = url.host_str().unwrap_or_default().to_string();
        self.check_target(&url)?;
        let is_head = request.method == Method::HEAD;
        let mut built = self
            .client
            .request(request.method, url)
            .headers(request.headers);
        if let Some(body) = request.body {
            built = built.body(body);
        }
        let sent = tokio::time::timeout(self.config.header_timeout, built.send()).await;
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
        let document = self.get_document(url, max_bytes).await?;
        Ok(String::from_utf8_lossy(&document.body).into_owned())
    }

    /// GETs a document with the headers that say how long to keep it; a
    /// non-2xx answer (a 3xx on a client without redirects) fails.
    pub async fn get_document(
        &self,
        url: &str,
        max_bytes: usize,
    ) -> Result<FetchedDocument, HttpFailure> {
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
        let cache_control = response
            .headers()
            .get_all(reqwest::header::CACHE_CONTROL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(", ");
        let (body, truncated) = self.read_body(response, max_bytes).await?;
        if truncated {
            return Err(HttpFailure::upstream(
                format!("the document is larger than {max_bytes} bytes"),
                false,
            ));
        }
        Ok(FetchedDocument {
            body,
            cache_control: (!cache_control.is_empty()).then_some(cache_control),
        })
    }

    /// The guarded client itself, for a protocol that reads its answers on
    /// its own (an upstream MCP server's streams): the SSRF guard still
    /// applies to every connection it makes, and `url`'s scheme and literal
    /// IP host are checked here, as [`HttpClient::send`] checks them.
    pub fn client_for(&self, url: &str) -> Result<reqwest::Client, HttpFailure> {
        let parsed =
            Url::parse(url).map_err(|e| HttpFailure::invalid(format!("not a URL: {e}")))?;
        self.check_target(&parsed)?;
        Ok(self.client.clone())
    }

    /// The settings the client was built with.
    pub fn config(&self) -> &HttpConfig {
        &self.config
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
                    .map_err(|refused| HttpFailure {
                        status: Some(status),
                        ..HttpFailure::upstream(refused.to_string(), false)
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
        let challenge = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(4096).collect::<String>());
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
        if matches!(status, 401 | 403) {
            failure.www_authenticate = challenge;
        }
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
fn tls_config() -> Result<rustls::ClientConfig, ClientSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientSetupError::Tls)?
        .with_platform_verifier()
        .map_err(ClientSetupError::TrustStore)?
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

/// Whether a media type is JSON: `application/json`,
/// `application/problem+json`, … (any case, parameters ignored). The one
/// rule for reading responses and for choosing request and response
/// schemas at import.
pub fn names_json(media_type: &str) -> bool {
    media_type
        .trim()
        .parse::<mime::Mime>()
        .is_ok_and(|m| m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON))
}

fn is_json_media(content_type: Option<&str>) -> bool {
    content_type.is_some_and(names_json)
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
    if is_local_network_refusal(error) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn default_timeouts_are_specs() {
        // SPEC §8: 110 s for the response headers, 60 s for the body.
        let config = HttpConfig::default();
        assert_eq!(config.header_timeout, Duration::from_secs(110));
        assert_eq!(config.body_timeout, Duration::from_secs(60));
        assert!(!config.allow_local_network);
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
        let mut request = OutboundRequest::new(Method::GET, "/".into());
        request
            .apply_credential(Some(Placement::Bearer("s3cr3t-value")))
            .unwrap();
        assert!(!format!("{:?}", request.headers).contains("s3cr3t"));
    }

    /// Issue 37: a name that resolves only to local addresses is refused
    /// by the resolver, and the refusal is found again in reqwest's error
    /// (where an upstream MCP server's transport reads it); allowed, the
    /// same request reaches the server.
    #[tokio::test]
    async fn issue_37_a_local_name_is_refused_in_the_resolver_and_said_so() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://localhost:{}/",
            listener.local_addr().unwrap().port()
        );
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
            }
        });
        let refusing = HttpClient::new(HttpConfig::default()).unwrap();
        let sent = refusing.client_for(&url).unwrap().get(&url).send().await;
        let error = sent.unwrap_err();
        assert!(is_local_network_refusal(&error), "{error:?}");
        let failure = refusing.fetch_document(&url, 1024).await.unwrap_err();
        assert_eq!(failure, HttpFailure::local_network("localhost"));
        assert_eq!(failure.retryable, Some(false));
        assert!(failure.message.contains("--allow-local-network"));

        let allowing = HttpClient::new(HttpConfig {
            allow_local_network: true,
            ..HttpConfig::default()
        })
        .unwrap();
        assert_eq!(allowing.fetch_document(&url, 1024).await.unwrap(), "ok");
    }
}
