//! The HTTP side of a streamable-HTTP upstream: rmcp's reqwest client on
//! our guarded `reqwest::Client`, with one addition. The MCP spec says a
//! server answers a session it forgot with 404, and rmcp then opens a new
//! session and sends the request again. Servers built on the official
//! TypeScript SDK's examples (server-everything among them) answer 400
//! with a JSON-RPC error that has no id instead; rmcp delivers that error
//! to no request, so the call would wait for ever. Such an answer to a
//! message sent within a session is taken here as the 404 it means.
//!
//! It also tells the session's opener when the session's own GET stream
//! (where the server's notifications and requests arrive) has been
//! answered: rmcp opens it beside the first requests, and a call sent
//! before it would race it (a server may then answer the call on that
//! stream rather than on its own; a `tools/list_changed` sent right after
//! initialisation would be lost).
//!
//! And it notes a request the outbound guard refused ([`GuardRefusal`]),
//! while the error still has its sources: rmcp keeps only its text.

use std::collections::HashMap;
use std::sync::Arc;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcError, JsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::error::GuardRefusal;

#[derive(Clone)]
pub(crate) struct UpstreamHttp {
    client: reqwest::Client,
    /// Woken (one stored permit) when the session's GET stream was
    /// answered, opened or refused.
    listening: Arc<tokio::sync::Notify>,
    /// Noted when the guard refused a request of the session.
    refusal: GuardRefusal,
}

impl UpstreamHttp {
    pub(crate) fn new(client: reqwest::Client, refusal: GuardRefusal) -> Self {
        UpstreamHttp {
            client,
            listening: Arc::new(tokio::sync::Notify::new()),
            refusal,
        }
    }

    /// Resolves once the session's GET stream has been answered.
    pub(crate) fn listening(&self) -> Arc<tokio::sync::Notify> {
        self.listening.clone()
    }
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

impl UpstreamHttp {
    /// `answer`, after noting a refusal by the guard in it.
    fn noted<T>(
        &self,
        answer: Result<T, StreamableHttpError<reqwest::Error>>,
    ) -> Result<T, StreamableHttpError<reqwest::Error>> {
        if let Err(StreamableHttpError::Client(error)) = &answer {
            self.refusal.note(error);
        }
        answer
    }

    /// The answer to the first POST (initialize): a server that gives no
    /// session id gets no GET stream, so nothing is left to wait for. A
    /// `server/discover` is never in a session: the `initialize` that may
    /// follow it (an older server) decides.
    fn after_post(&self, sent: Sent, answer: PostResult) -> PostResult {
        let Sent {
            in_session,
            discover,
        } = sent;
        let answer = self.noted(answer);
        if discover {
            return answer;
        }
        let sessionless = match &answer {
            Ok(
                StreamableHttpPostResponse::Json(_, id) | StreamableHttpPostResponse::Sse(_, id),
            ) => id.is_none(),
            Ok(_) => false,
            Err(_) => true,
        };
        if !in_session && sessionless {
            self.listening.notify_one();
        }
        forgotten(in_session, answer)
    }
}

/// What a POST carried, for reading its answer.
#[derive(Clone, Copy)]
struct Sent {
    in_session: bool,
    discover: bool,
}

impl Sent {
    fn new(message: &ClientJsonRpcMessage, session_id: &Option<Arc<str>>) -> Self {
        let discover = matches!(
            message,
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::DiscoverRequest(_))
        );
        Sent {
            in_session: session_id.is_some(),
            discover,
        }
    }
}

/// An id-less JSON-RPC error in answer to a message that carried a session
/// id: the server does not know the session.
fn forgotten(in_session: bool, answer: PostResult) -> PostResult {
    match answer {
        Ok(StreamableHttpPostResponse::Json(
            JsonRpcMessage::Error(JsonRpcError { id: None, .. }),
            _,
        )) if in_session => Err(StreamableHttpError::SessionExpired),
        other => other,
    }
}

impl StreamableHttpClient for UpstreamHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        let sent = Sent::new(&message, &session_id);
        let answer = self
            .client
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.after_post(sent, answer)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> PostResult {
        let sent = Sent::new(&message, &session_id);
        let answer = self
            .client
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.after_post(sent, answer)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let sent = Sent::new(&message, &session_id);
        let answer = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.after_post(sent, answer)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        let answer = self
            .client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await;
        self.noted(answer)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<reqwest::Error>> {
        let first = last_event_id.is_none();
        let answer = self
            .client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        if first {
            self.listening.notify_one();
        }
        self.noted(answer)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<reqwest::Error>> {
        let first = last_event_id.is_none();
        let answer = self
            .client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        if first {
            self.listening.notify_one();
        }
        self.noted(answer)
    }
}
