//! JSON-RPC 2.0 messages as MCP uses them.

use serde_json::{Map, Value, json};

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Value,
    pub method: Method,
    pub params: Value,
}

/// The request methods the server tells apart, parsed once where a
/// message comes in; every other name is kept, to be named in the
/// method-not-found error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Ping,
    ToolsList,
    ToolsCall,
    LoggingSetLevel,
    /// The sessionless revision's discovery request.
    ServerDiscover,
    Other(Box<str>),
}

impl Method {
    pub fn as_str(&self) -> &str {
        match self {
            Method::Initialize => "initialize",
            Method::Ping => "ping",
            Method::ToolsList => "tools/list",
            Method::ToolsCall => "tools/call",
            Method::LoggingSetLevel => "logging/setLevel",
            Method::ServerDiscover => "server/discover",
            Method::Other(name) => name,
        }
    }
}

impl From<String> for Method {
    fn from(name: String) -> Self {
        match name.as_str() {
            "initialize" => Method::Initialize,
            "ping" => Method::Ping,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "logging/setLevel" => Method::LoggingSetLevel,
            "server/discover" => Method::ServerDiscover,
            _ => Method::Other(name.into()),
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification {
        method: String,
        params: Value,
    },
    /// A response from the client to a server-initiated request.
    Response(Value),
}

impl Message {
    pub fn as_request(&self) -> Option<&Request> {
        match self {
            Message::Request(r) => Some(r),
            _ => None,
        }
    }
}

/// A POST body: one message or a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Single(Message),
    Batch(Vec<Message>),
}

impl Incoming {
    pub fn messages(&self) -> &[Message] {
        match self {
            Incoming::Single(m) => std::slice::from_ref(m),
            Incoming::Batch(ms) => ms,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// What exactly was wrong, for the client's developer (`error.data`):
    /// a sentence, or the structure the specification gives an error.
    pub data: Option<Value>,
}

impl RpcError {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Server errors (SPEC §2): no such session, or no valid bearer / a
    /// method the endpoint does not serve.
    pub const SESSION_NOT_FOUND: i64 = -32001;
    /// The session belongs to another principal.
    pub const FORBIDDEN: i64 = -32003;
    /// Any other refusal of the transport (limits, draining, overload).
    pub const SERVER_ERROR: i64 = -32000;

    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(code: i64, message: impl Into<String>, data: Value) -> Self {
        RpcError {
            data: Some(data),
            ..Self::new(code, message)
        }
    }
    pub fn parse_error() -> Self {
        Self::new(Self::PARSE_ERROR, "Parse error")
    }
    pub fn invalid_request(detail: &str) -> Self {
        RpcError {
            data: Some(json!(detail)),
            ..Self::new(Self::INVALID_REQUEST, "Invalid Request")
        }
    }
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, detail)
    }
    pub fn internal() -> Self {
        Self::new(Self::INTERNAL_ERROR, "Internal error")
    }
    /// A batch over the limit: the limit is in the message, because most
    /// clients show the message and not `data`.
    pub fn batch_too_large(len: usize, limit: usize) -> Self {
        RpcError {
            data: Some(json!(format!(
                "this batch has {len} messages; send at most {limit} per batch"
            ))),
            ..Self::new(
                Self::INVALID_REQUEST,
                format!("Invalid Request: a batch may hold at most {limit} messages"),
            )
        }
    }
}

pub fn result_response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// [`result_response`] written out, around a result that is JSON text
/// already.
pub fn result_response_text(id: &Value, result_json: &str) -> String {
    let id = id.to_string();
    let mut out = String::with_capacity(result_json.len() + id.len() + 36);
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(&id);
    out.push_str(r#","result":"#);
    out.push_str(result_json);
    out.push('}');
    out
}

pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// What an undelivered event of the SSE log is replaced by when its
/// session's log is over its bound (`executor_store::DroppedAnswer`): an
/// answer becomes an error answer to the same request, whose message is
/// `why`, so the client waiting for it is told; None for a notification or
/// a request of ours, which is deleted instead.
pub fn dropped_answer(data: &str, why: &str) -> Option<String> {
    let message: Value = serde_json::from_str(data).ok()?;
    let id = message.get("id")?;
    if message.get("result").is_none() && message.get("error").is_none() {
        return None;
    }
    Some(error_response(id, &RpcError::new(RpcError::SERVER_ERROR, why)).to_string())
}

/// The `elicitation/create` request the server sends to ask the human
/// through the client.
pub fn elicitation_request(id: &Value, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": params })
}

/// `notifications/cancelled` for a request of ours the client need no
/// longer answer.
pub fn cancelled_notification(request_id: &Value, reason: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": request_id, "reason": reason },
    })
}

/// `notifications/tools/list_changed`.
pub fn tools_list_changed() -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" })
}

impl RpcError {
    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut e = json!({ "code": self.code, "message": self.message });
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

/// Most messages in one JSON-RPC batch (SPEC §12). Every message of a
/// batch is answered in one reply, so without a bound a 4 MiB body of tiny
/// requests would build a reply dozens of times its size.
pub const MAX_BATCH: usize = 64;

/// Parses a POST body into messages. Invalid JSON is a parse error; JSON
/// that is not JSON-RPC (or an empty batch, or one of more than `max_batch`
/// messages) is an invalid request, refused before any message is handled.
pub fn parse(body: &[u8], max_batch: usize) -> Result<Incoming, RpcError> {
    if let Some(request) = fast_request(body) {
        return Ok(Incoming::Single(request));
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| RpcError::parse_error())?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(RpcError::invalid_request("empty batch"));
            }
            if items.len() > max_batch {
                return Err(RpcError::batch_too_large(items.len(), max_batch));
            }
            items
                .into_iter()
                .map(message)
                .collect::<Result<Vec<_>, _>>()
                .map(Incoming::Batch)
        }
        other => message(other).map(Incoming::Single),
    }
}

/// The members of a single request, read straight into place: the common
/// body, parsed without building (and then taking apart) a map of the
/// whole object. Absent and `null` stay apart (`Some(Null)`), as in the
/// map; other members are skipped.
#[derive(serde::Deserialize)]
struct RequestMembers<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a str>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// A well-formed single request, or None for anything else (a batch, a
/// notification, a response, a duplicate member, an error of any kind),
/// which [`message`] then reads, and refuses, as before.
fn fast_request(body: &[u8]) -> Option<Message> {
    let m: RequestMembers = serde_json::from_slice(body).ok()?;
    let id =
        m.id.filter(|id| id.is_string() || id.is_i64() || id.is_u64())?;
    let params = match m.params {
        None => Value::Object(Map::new()),
        Some(p) if p.is_object() || p.is_array() => p,
        Some(_) => return None,
    };
    if m.jsonrpc != Some("2.0") {
        return None;
    }
    Some(Message::Request(Request {
        id,
        method: m.method?.into_owned().into(),
        params,
    }))
}

fn message(value: Value) -> Result<Message, RpcError> {
    let Value::Object(mut obj) = value else {
        return Err(RpcError::invalid_request("a message must be a JSON object"));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::invalid_request("jsonrpc must be \"2.0\""));
    }
    let id = obj.remove("id");
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Err(RpcError::invalid_request(
            "id must be a string or an integer",
        ));
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params").unwrap_or(Value::Object(Map::new()));
            if !(params.is_object() || params.is_array()) {
                return Err(RpcError::invalid_request("params must be an object"));
            }
            Ok(match id {
                Some(id) => Message::Request(Request {
                    id,
                    method: method.into(),
                    params,
                }),
                None => Message::Notification { method, params },
            })
        }
        Some(_) => Err(RpcError::invalid_request("method must be a string")),
        None => {
            let has_outcome = obj.contains_key("result") || obj.contains_key("error");
            match id {
                Some(id) if has_outcome => {
                    obj.insert("id".into(), id);
                    Ok(Message::Response(Value::Object(obj)))
                }
                _ => Err(RpcError::invalid_request(
                    "not a request, notification or response",
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_dropped_answer_becomes_an_error_to_the_same_request_and_nothing_else_does() {
        for id in [json!(7), json!("req-7")] {
            for body in [json!({"result": {"x": 1}}), json!({"error": {"code": 1}})] {
                let mut message = json!({"jsonrpc": "2.0", "id": id});
                if let (Some(m), Some(b)) = (message.as_object_mut(), body.as_object()) {
                    m.extend(b.clone());
                }
                let told: Value =
                    serde_json::from_str(&dropped_answer(&message.to_string(), "why").unwrap())
                        .unwrap();
                assert_eq!(told["id"], id);
                assert_eq!(told["error"]["code"], RpcError::SERVER_ERROR);
                assert_eq!(told["error"]["message"], "why");
                assert!(told.get("result").is_none());
            }
        }
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create"});
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/message"});
        for other in [
            request.to_string(),
            notification.to_string(),
            "not json".into(),
        ] {
            assert_eq!(dropped_answer(&other, "why"), None);
        }
    }

    use super::*;
    use proptest::prelude::*;

    /// Members a message may carry, each absent or one of a few values
    /// (well-formed and not), in any order and possibly twice.
    fn member() -> impl Strategy<Value = (String, String)> {
        let value = prop_oneof![
            Just("null"),
            Just("\"2.0\""),
            Just("\"2\\u002e0\""),
            Just("2"),
            Just("7"),
            Just("-3"),
            Just("1.5"),
            Just("\"id-1\""),
            Just("\"tools/list\""),
            Just("\"tools/c\\u0061ll\""),
            Just("{}"),
            Just("[]"),
            Just("{\"a\":1}"),
            Just("true"),
            Just("\"\""),
        ];
        let name = prop_oneof![
            Just("jsonrpc"),
            Just("id"),
            Just("method"),
            Just("params"),
            Just("result"),
            Just("error"),
            Just("extra"),
        ];
        (name, value).prop_map(|(n, v)| (n.to_string(), v.to_string()))
    }

    #[test]
    fn the_fast_path_takes_plain_requests_only() {
        let fast = |b: &str| fast_request(b.as_bytes());
        assert!(fast(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).is_some());
        assert!(
            fast(r#"{"method":"tools/call","params":{"a":1},"id":"x","jsonrpc":"2.0"}"#).is_some()
        );
        for general in [
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        ] {
            assert!(fast(general).is_none(), "{general}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// The fast path reads exactly what the general one does: the
        /// same message, or nothing, for any mix of members.
        #[test]
        fn the_fast_path_agrees_with_the_general_one(members in proptest::collection::vec(member(), 0..7)) {
            let body = format!(
                "{{{}}}",
                members.iter().map(|(n, v)| format!("\"{n}\":{v}")).collect::<Vec<_>>().join(",")
            );
            let general = serde_json::from_slice::<Value>(body.as_bytes())
                .map_err(|_| RpcError::parse_error())
                .and_then(message);
            if let Some(fast) = fast_request(body.as_bytes()) {
                prop_assert_eq!(Some(fast), general.ok(), "{}", body);
            }
        }
    }

    fn parse_default(body: &[u8]) -> Result<Incoming, RpcError> {
        parse(body, MAX_BATCH)
    }

    #[test]
    fn batches_over_the_limit_are_refused_naming_it() {
        let batch = |n: usize| {
            let items: Vec<Value> = (0..n)
                .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"}))
                .collect();
            Value::Array(items).to_string()
        };
        assert!(matches!(
            parse(batch(3).as_bytes(), 3),
            Ok(Incoming::Batch(m)) if m.len() == 3
        ));
        let refused = parse(batch(4).as_bytes(), 3).unwrap_err();
        assert_eq!(refused.code, RpcError::INVALID_REQUEST);
        assert!(
            refused.message.contains("at most 3 messages"),
            "{refused:?}"
        );
        assert!(
            refused
                .data
                .unwrap()
                .as_str()
                .unwrap()
                .contains("has 4 messages")
        );
        // A single message is not a batch, whatever the limit.
        assert!(parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 0).is_ok());
    }

    #[test]
    fn a_written_result_reads_as_the_built_one() {
        for id in [json!(7), json!("a\"b"), Value::Null] {
            let result = json!({ "tools": [{ "name": "execute" }] });
            let text = result_response_text(&id, &result.to_string());
            let parsed: Value = serde_json::from_str(&text).expect("JSON");
            assert_eq!(parsed, result_response(&id, result));
        }
    }

    #[test]
    fn what_the_server_sends_on_its_own_is_well_formed() {
        let id = json!("approval-1");
        let ask = elicitation_request(&id, json!({ "message": "?" }));
        assert_eq!(ask["method"], "elicitation/create");
        assert_eq!(ask["id"], id);
        let cancelled = cancelled_notification(&id, "settled");
        assert_eq!(cancelled["params"]["requestId"], id);
        assert!(cancelled.get("id").is_none());
        let changed = tools_list_changed();
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert!(changed.get("params").is_none() && changed.get("id").is_none());
    }

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            parse_default(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Single(Message::Request(_)))
        ));
        assert!(matches!(
            parse_default(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Single(Message::Notification { .. }))
        ));
        assert!(matches!(
            parse_default(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Ok(Incoming::Single(Message::Response(_)))
        ));
        assert!(matches!(
            parse_default(br#"[{"jsonrpc":"2.0","method":"a"}]"#),
            Ok(Incoming::Batch(_))
        ));
    }

    #[test]
    fn rejects_malformed_input_with_the_right_code() {
        assert_eq!(
            parse_default(b"{nope").unwrap_err().code,
            RpcError::PARSE_ERROR
        );
        for bad in [
            &br#"[]"#[..],
            br#"42"#,
            br#"{"id":1,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"[{"jsonrpc":"2.0","method":"a"}, 5]"#,
        ] {
            assert_eq!(
                parse_default(bad).unwrap_err().code,
                RpcError::INVALID_REQUEST,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
