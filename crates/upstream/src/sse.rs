//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer
//! has: a GET opens an event stream whose first event, `endpoint`, names
//! where to POST; every message from the server arrives on that stream as
//! a `message` event, every POST is answered 202. Given to rmcp as a sink
//! of our messages and a stream of the server's.

use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{StatusCode, Url};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use sse_stream::SseStream;

use crate::error::{GuardRefusal, OpenError};

/// Messages waiting to be sent or read, each way.
const QUEUE: usize = 64;

/// Aborts the stream's reader and writer when the session is dropped.
pub(crate) struct SseTasks {
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for SseTasks {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::AbortHandle::abort);
    }
}

/// The two ends rmcp drives, and the tasks behind them.
pub(crate) struct SseChannel {
    pub outgoing: mpsc::Sender<ClientJsonRpcMessage>,
    pub incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    pub tasks: SseTasks,
}

/// Opens the event stream at `url` and waits for its `endpoint` event.
/// A message the guard refuses later is noted in `refusal`.
pub(crate) async fn open(
    client: reqwest::Client,
    url: &str,
    headers: HeaderMap,
    max_event_bytes: usize,
    timeout: Duration,
    refusal: GuardRefusal,
) -> Result<SseChannel, OpenError> {
    let stream_url =
        Url::parse(url).map_err(|e| OpenError::Unavailable(format!("not a URL: {e}")))?;
    let sent = client
        .get(stream_url.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send();
    let response = tokio::time::timeout(timeout, sent)
        .await
        .map_err(|_| OpenError::Unavailable(format!("{url} sent no event stream in time")))?
        .map_err(|e| {
            refusal.note(&e);
            match refusal.failure() {
                Some(failure) => OpenError::Target(failure),
                None => OpenError::Unavailable(format!("cannot reach {url}: {}", without_url(&e))),
            }
        })?;
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED
        && let Some(challenge) = response.headers().get(WWW_AUTHENTICATE)
    {
        let challenge = challenge.to_str().ok().map(str::to_string);
        return Err(OpenError::NeedsLogin(challenge));
    }
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(OpenError::Refused(format!(
            "{url} refused the credential (HTTP {status})"
        )));
    }
    if !status.is_success() {
        return Err(OpenError::Unavailable(format!(
            "{url} answered HTTP {status} to the event stream request"
        )));
    }
    let mut events =
        SseStream::from_bytes_stream(bounded(response.bytes_stream(), max_event_bytes));
    let endpoint = tokio::time::timeout(timeout, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(event) if event.event.as_deref() == Some("endpoint") => return event.data,
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| OpenError::Unavailable(format!("{url} did not name its message endpoint")))?;
    let post_url = stream_url
        .join(endpoint.trim())
        .ok()
        .filter(|post| post.origin() == stream_url.origin())
        .ok_or_else(|| {
            OpenError::Unavailable(format!("{url} named a message endpoint on another origin"))
        })?;
    let (incoming_tx, incoming) = mpsc::channel(QUEUE);
    let (outgoing, outgoing_rx) = mpsc::channel(QUEUE);
    let reader = tokio::spawn(read_messages(events, incoming_tx));
    let writer = tokio::spawn(post_messages(
        client,
        post_url,
        headers,
        outgoing_rx,
        reader.abort_handle(),
        refusal,
    ));
    Ok(SseChannel {
        outgoing,
        incoming,
        tasks: SseTasks {
            tasks: vec![reader.abort_handle(), writer.abort_handle()],
        },
    })
}

/// The server's messages from the stream; the stream's end closes the
/// session.
async fn read_messages<S>(mut events: S, mut incoming: mpsc::Sender<ServerJsonRpcMessage>)
where
    S: Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "an upstream MCP event stream broke");
                return;
            }
        };
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
            Ok(message) => {
                if incoming.send(message).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "an upstream MCP server sent a message that is not JSON-RPC")
            }
        }
    }
}

/// Our messages, POSTed in order. A POST the server refuses ends the
/// session (404: it forgot it), so that the next call opens a new one.
async fn post_messages(
    client: reqwest::Client,
    post_url: Url,
    headers: HeaderMap,
    mut outgoing: mpsc::Receiver<ClientJsonRpcMessage>,
    reader: tokio::task::AbortHandle,
    refusal: GuardRefusal,
) {
    while let Some(message) = outgoing.next().await {
        let Ok(body) = serde_json::to_vec(&message) else {
            continue;
        };
        let sent = client
            .post(post_url.clone())
            .headers(headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => {
                tracing::warn!(status = %response.status(), "an upstream MCP server refused a message; closing the session");
                reader.abort();
                return;
            }
            Err(e) => {
                refusal.note(&e);
                tracing::warn!(error = %without_url(&e), "cannot send a message to an upstream MCP server; closing the session");
                reader.abort();
                return;
            }
        }
    }
}

/// A reqwest error's text without the URL (which may carry a key).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "the server");
    }
    text
}

/// The body's bytes, failing once an event (the bytes between two blank
/// lines) grows past `max_event_bytes`: the parser would buffer it whole.
fn bounded<S>(
    body: S,
    max_event_bytes: usize,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + Unpin
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + Unpin,
{
    let mut run = 0usize;
    let mut last = 0u8;
    body.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &byte in chunk.iter() {
            if byte == b'\n' && last == b'\n' {
                run = 0;
            } else if byte != b'\r' {
                run += 1;
            }
            if byte != b'\r' {
                last = byte;
            }
        }
        if run > max_event_bytes {
            return Err(std::io::Error::other(format!(
                "an event larger than {max_event_bytes} bytes"
            )));
        }
        Ok(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_event_past_the_bound_ends_the_stream_and_smaller_ones_pass() {
        let chunks: Vec<Result<Bytes, reqwest::Error>> = vec![
            Ok(Bytes::from_static(b"data: 12345\n\n")),
            Ok(Bytes::from_static(b"data: 1234")),
            Ok(Bytes::from_static(
                b"5\n\ndata: 123456789012345678901234567890",
            )),
        ];
        let mut stream = bounded(futures::stream::iter(chunks), 20);
        assert!(stream.next().await.is_some_and(|c| c.is_ok()));
        assert!(stream.next().await.is_some_and(|c| c.is_ok()));
        assert!(stream.next().await.is_some_and(|c| c.is_err()));
    }
}
