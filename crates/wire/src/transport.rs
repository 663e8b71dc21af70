//! The transport checks of `/mcp` (SPEC §2: Accept, Content-Type, the
//! body's size and pace) and the headers and JSON answers its handlers
//! share.

use axum::body::{Body, BodyDataStream};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use executor_mcp::Incoming;
use futures::StreamExt;
use serde_json::Value;

use crate::WireError;
use crate::app::App;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";
pub(crate) const LAST_EVENT_HEADER: &str = "last-event-id";

#[derive(Debug, Clone, Copy)]
pub(crate) struct Accepts {
    pub(crate) json: bool,
    pub(crate) sse: bool,
}

impl Accepts {
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        // Media ranges of every Accept header, without their parameters;
        // read in place (this runs on every request).
        let mut ranges = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|part| part.split(';').next().unwrap_or("").trim());
        let mut accepts = Accepts {
            json: false,
            sse: false,
        };
        ranges.all(|range| {
            let is = |t: &str| range.eq_ignore_ascii_case(t);
            if is("*/*") {
                accepts.json = true;
                accepts.sse = true;
            }
            accepts.json |= is("application/json") || is("application/*");
            accepts.sse |= is("text/event-stream") || is("text/*");
            !(accepts.json && accepts.sse)
        });
        accepts
    }
}

pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), WireError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(WireError::UnsupportedMediaType)
    }
}

pub(crate) async fn read_body(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> Result<Incoming, WireError> {
    let bytes = read_bytes(app, headers, body).await?;
    executor_mcp::parse(&bytes, app.config.max_batch).map_err(WireError::Rpc)
}

/// The request body, within the size and stall limits (SPEC §12).
pub(crate) async fn read_bytes(
    app: &App,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, WireError> {
    let limit = app.config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        drain(body).await;
        return Err(WireError::PayloadTooLarge(limit));
    }
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    let stalled = app.config.body_read_timeout;
    // The timer restarts with every chunk (SPEC §12: between chunks). On a
    // stall the body is left unread, so the connection closes after the 408.
    let next_chunk = async |stream: &mut BodyDataStream| {
        if stalled.is_zero() {
            return Ok(stream.next().await);
        }
        tokio::time::timeout(stalled, stream.next())
            .await
            .map_err(|_| WireError::BodyTimeout(stalled))
    };
    while let Some(chunk) = next_chunk(&mut stream).await? {
        let chunk = chunk
            .map_err(|_| WireError::BadRequest("the request body could not be read".into()))?;
        if bytes.len() + chunk.len() > limit {
            drain(Body::from_stream(stream)).await;
            return Err(WireError::PayloadTooLarge(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(bytes))
}

/// Reads and discards the rest of an oversized body (bounded in bytes and
/// time) so the client, still uploading, receives the 413 instead of a
/// reset connection.
async fn drain(body: Body) {
    const MAX_DRAIN_BYTES: usize = 64 * 1024 * 1024;
    let mut stream = body.into_data_stream();
    let mut seen = 0usize;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len();
            if seen > MAX_DRAIN_BYTES {
                break;
            }
        }
    })
    .await;
}

pub(crate) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

pub(crate) fn json_response(body: Value) -> Response {
    json_text_response(body.to_string())
}

pub(crate) fn json_text_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn set_session_header(res: &mut Response, session_id: &str) {
    if let Ok(v) = HeaderValue::from_str(session_id) {
        res.headers_mut().insert(SESSION_HEADER, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(values: &[&str]) -> (bool, bool) {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::ACCEPT, HeaderValue::from_str(v).expect("header"));
        }
        let a = Accepts::of(&headers);
        (a.json, a.sse)
    }

    #[test]
    fn accept_headers_are_read_by_media_range() {
        assert_eq!(
            accepts(&["application/json, text/event-stream"]),
            (true, true)
        );
        assert_eq!(
            accepts(&["Application/JSON;q=0.9", "TEXT/Event-Stream"]),
            (true, true)
        );
        assert_eq!(accepts(&["*/*"]), (true, true));
        assert_eq!(accepts(&["application/*"]), (true, false));
        assert_eq!(accepts(&["text/*;q=1"]), (false, true));
        assert_eq!(
            accepts(&["application/jsonx, text/event-streams"]),
            (false, false)
        );
        assert_eq!(accepts(&[]), (false, false));
    }
}
