//! Every request of the OAuth client (metadata, registration, tokens) goes
//! through the guarded outbound client: an MCP server names its own
//! authorization server, so those URLs are as untrusted as any upstream's.
//! Answers are bounded, and no error keeps a body (a token answer's body
//! holds tokens).

use std::time::Duration;

use executor_outbound::HttpClient;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use crate::challenge::Challenge;
use crate::error::OAuthError;

/// Largest metadata, registration or token answer read.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// One OAuth request, from sending to the end of the body.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct OAuthHttp {
    http: HttpClient,
}

/// oauth2 sends its token requests through this (a boxed future: a closure
/// would make every caller's future lose `Send` to a higher-ranked bound).
impl<'c> oauth2::AsyncHttpClient<'c> for OAuthHttp {
    type Error = TransportError;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<oauth2::HttpResponse, TransportError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}

/// The transport failure of a token request, for oauth2 (no body, no URL
/// query).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

impl OAuthHttp {
    pub fn new(http: HttpClient) -> Self {
        OAuthHttp { http }
    }

    /// GETs a JSON document: Some when it answers 200 with JSON of that
    /// shape, None for any other answer (the caller tries the next place);
    /// Err only when the request could not be made.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        url: &str,
        header: Option<(&str, &str)>,
    ) -> Result<Option<T>, OAuthError> {
        let client = self.client(url)?;
        let mut request = client.get(url).header("accept", "application/json");
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let (status, body) = self.exchange(request, url).await?;
        if status != 200 {
            return Ok(None);
        }
        Ok(serde_json::from_slice(&body).ok())
    }

    /// What `url` answers without a token: its Bearer challenge, if any.
    /// `body`: POSTed as JSON (a GraphQL query), else a GET.
    pub async fn probe(&self, url: &str, body: Option<&str>) -> Option<Challenge> {
        let client = self.client(url).ok()?;
        let request = match body {
            Some(body) => client
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string()),
            None => client.get(url),
        };
        let response = tokio::time::timeout(REQUEST_TIMEOUT, request.send())
            .await
            .ok()?
            .ok()?;
        if !matches!(response.status().as_u16(), 401 | 403) {
            return None;
        }
        let header = response.headers().get("www-authenticate")?.to_str().ok()?;
        Challenge::parse(header)
    }

    /// POSTs JSON (dynamic registration): the status and body.
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, Vec<u8>), OAuthError> {
        let client = self.client(url)?;
        let request = client
            .post(url)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default());
        self.exchange(request, url).await
    }

    /// The request oauth2 built, sent through the guarded client.
    pub async fn send(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, TransportError> {
        let url = request.uri().to_string();
        let client = self
            .client(&url)
            .map_err(|e| TransportError(e.to_string()))?;
        let (parts, body) = request.into_parts();
        let mut builder = client.request(parts.method, &url).body(body);
        for (name, value) in parts.headers.iter() {
            builder = builder.header(name, value);
        }
        let (status, body) = self
            .exchange(builder, &url)
            .await
            .map_err(|e| TransportError(e.to_string()))?;
        let mut response = oauth2::HttpResponse::new(body);
        *response.status_mut() = oauth2::http::StatusCode::from_u16(status)
            .unwrap_or(oauth2::http::StatusCode::BAD_GATEWAY);
        response.headers_mut().insert(
            "content-type",
            oauth2::http::HeaderValue::from_static("application/json"),
        );
        Ok(response)
    }

    fn client(&self, url: &str) -> Result<reqwest::Client, OAuthError> {
        self.http
            .client_for(url)
            .map_err(|e| OAuthError::Unreachable(e.message))
    }

    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<(u16, Vec<u8>), OAuthError> {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let work = async {
            let response = request.send().await.map_err(|e| {
                OAuthError::Unreachable(if self.http.config().allow_local_network || !e.is_connect() {
                    format!("{host} could not be reached")
                } else {
                    format!(
                        "{host} could not be reached (a local address needs --allow-local-network)"
                    )
                })
            })?;
            let status = response.status().as_u16();
            let mut body = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk
                    .map_err(|_| OAuthError::Unreachable(format!("{host} broke off its answer")))?;
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(OAuthError::Unreachable(format!(
                        "{host} answered more than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, work)
            .await
            .map_err(|_| OAuthError::Unreachable(format!("{host} did not answer in time")))?
    }
}
