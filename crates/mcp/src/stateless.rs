//! What a request of the sessionless revision (2026-07-28, SPEC §2) must
//! carry before it is served, checked in one place: its `_meta` (version
//! and client capabilities), the headers that repeat the body
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), and a method that
//! revision has. Each refusal says which HTTP status goes with it; the
//! transport answers it with the request's id.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::jsonrpc::{Method, Request, RpcError};
use crate::versions::ProtocolVersion;

/// `_meta` keys of the sessionless revision.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// `HeaderMismatchError`: a header that is missing, malformed or says
/// something else than the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// `UnsupportedProtocolVersionError`.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// A header value as it arrived: its bytes (None when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct StatelessHeaders<'a> {
    pub protocol_version: Option<&'a [u8]>,
    pub method: Option<&'a [u8]>,
    pub name: Option<&'a [u8]>,
}

/// Why a request is refused before it is served, and the HTTP status
/// its answer goes with.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// 400, or 404 for a method the revision does not have.
    pub http_status: u16,
    pub error: RpcError,
}

impl Refusal {
    fn bad(error: RpcError) -> Self {
        Refusal {
            http_status: 400,
            error,
        }
    }

    /// `-32022`, with the versions this server speaks and the one asked.
    pub fn unsupported_version(requested: &str) -> Self {
        let supported: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
        Self::bad(RpcError::with_data(
            UNSUPPORTED_VERSION,
            format!("Unsupported protocol version: {requested}"),
            json!({ "supported": supported, "requested": requested }),
        ))
    }

    fn header_mismatch(message: String) -> Self {
        Self::bad(RpcError::new(HEADER_MISMATCH, message))
    }

    fn invalid_meta(message: &str) -> Self {
        Self::bad(RpcError::invalid_params(message))
    }

    fn method_not_found(method: &Method) -> Self {
        Refusal {
            http_status: 404,
            error: RpcError::new(
                RpcError::METHOD_NOT_FOUND,
                format!("Method not found: {method} (protocol version 2026-07-28)"),
            ),
        }
    }
}

/// Whether `method` exists at 2026-07-28 on this server: discovery, the
/// tools, and the listen stream. The methods that revision removed
/// (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`, …)
/// and any other are not found.
fn served(method: &Method) -> bool {
    match method {
        Method::ServerDiscover | Method::ToolsList | Method::ToolsCall => true,
        Method::Other(name) => &**name == SUBSCRIPTIONS_LISTEN,
        Method::Initialize | Method::Ping | Method::LoggingSetLevel => false,
    }
}

/// The listen stream's method (it replaces the GET stream).
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";

/// `_meta` key that names the listen stream a message belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The messages of one `subscriptions/listen` stream, each tagged with
/// the stream's id (its request's id).
#[derive(Debug, Clone, PartialEq)]
pub struct ListenMessages {
    /// First: the notification types honoured — only the tool list's
    /// change, the one list this server has.
    pub acknowledged: Value,
    /// `notifications/tools/list_changed`, when the client asked for it.
    pub tools_changed: Option<Value>,
    /// The request's result, when the server ends the stream.
    pub ended: Value,
}

/// The messages of the stream `req` (a `subscriptions/listen`) opens.
pub fn listen_messages(req: &Request) -> ListenMessages {
    let wants_tools = req
        .params
        .pointer("/notifications/toolsListChanged")
        .and_then(Value::as_bool)
        == Some(true);
    let tag = json!({ SUBSCRIPTION_ID: req.id });
    let honoured = if wants_tools {
        json!({ "toolsListChanged": true })
    } else {
        json!({})
    };
    let mut meta = json!({ "io.modelcontextprotocol/serverInfo": crate::McpServer::server_info() });
    meta[SUBSCRIPTION_ID] = req.id.clone();
    ListenMessages {
        acknowledged: json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "notifications": honoured, "_meta": tag },
        }),
        tools_changed: wants_tools.then(|| {
            json!({
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": { "_meta": tag },
            })
        }),
        ended: crate::jsonrpc::result_response(
            &req.id,
            json!({ "resultType": "complete", "_meta": meta }),
        ),
    }
}

/// Checks `req` as a 2026-07-28 request, in the order the specification
/// gives the errors: `_meta` and its version, the headers, the method.
pub fn admit(req: &Request, headers: StatelessHeaders<'_>) -> Result<(), Refusal> {
    let meta = req
        .params
        .get("_meta")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            Refusal::invalid_meta("params._meta is required at protocol version 2026-07-28")
        })?;
    let version = meta
        .get(META_PROTOCOL_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Refusal::invalid_meta("params._meta must name io.modelcontextprotocol/protocolVersion")
        })?;
    if !meta
        .get(META_CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(Refusal::invalid_meta(
            "params._meta must carry io.modelcontextprotocol/clientCapabilities (an object)",
        ));
    }
    // Before the version is judged: a client that disagrees with itself
    // is told so, not that the body's version is unsupported.
    matches_body(
        "MCP-Protocol-Version",
        headers.protocol_version,
        Some(version),
    )?;
    matches_body("Mcp-Method", headers.method, Some(req.method.as_str()))?;
    if let Some(name) = named(req) {
        matches_body("Mcp-Name", headers.name, Some(name))?;
    }
    if version != ProtocolVersion::SESSIONLESS.as_str() {
        return Err(Refusal::unsupported_version(version));
    }
    if !served(&req.method) {
        return Err(Refusal::method_not_found(&req.method));
    }
    Ok(())
}

/// What `Mcp-Name` repeats for a method: a tool's or prompt's name, a
/// resource's URI; None for the others.
fn named(req: &Request) -> Option<&str> {
    let key = match req.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    req.params.get(key).and_then(Value::as_str)
}

/// A header that must say what the body says.
fn matches_body(header: &str, raw: Option<&[u8]>, body: Option<&str>) -> Result<(), Refusal> {
    let text = header_text(header, raw)?;
    match (text.as_deref(), body) {
        (Some(t), Some(b)) if t == b => Ok(()),
        (None, _) => Err(Refusal::header_mismatch(format!(
            "the {header} header is required"
        ))),
        (Some(t), b) => Err(Refusal::header_mismatch(format!(
            "the {header} header ({t:?}) differs from the body ({:?})",
            b.unwrap_or("")
        ))),
    }
}

/// A header's text: printable ASCII as it is, or `=?base64?…?=` decoded
/// (strict Base64 with its padding, UTF-8 inside). Anything else is
/// malformed.
fn header_text(header: &str, raw: Option<&[u8]>) -> Result<Option<String>, Refusal> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let malformed = || Refusal::header_mismatch(format!("the {header} header is malformed"));
    let text = std::str::from_utf8(raw).map_err(|_| malformed())?;
    if !text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) || b == b'\t')
    {
        return Err(malformed());
    }
    let text = text.trim();
    match text
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = STANDARD.decode(encoded).map_err(|_| malformed())?;
            String::from_utf8(bytes).map(Some).map_err(|_| malformed())
        }
        None => Ok(Some(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: json!(7),
            method: method.to_string().into(),
            params,
        }
    }

    fn meta() -> Value {
        json!({ META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {} })
    }

    fn headers<'a>(method: &'a str, name: Option<&'a str>) -> StatelessHeaders<'a> {
        StatelessHeaders {
            protocol_version: Some(b"2026-07-28"),
            method: Some(method.as_bytes()),
            name: name.map(str::as_bytes),
        }
    }

    fn code(result: Result<(), Refusal>) -> Option<(u16, i64)> {
        result.err().map(|r| (r.http_status, r.error.code))
    }

    #[test]
    fn a_well_formed_request_is_admitted() {
        let call = request("tools/call", json!({ "name": "execute", "_meta": meta() }));
        assert_eq!(
            code(admit(&call, headers("tools/call", Some("execute")))),
            None
        );
        let list = request("tools/list", json!({ "_meta": meta() }));
        assert_eq!(code(admit(&list, headers("tools/list", None))), None);
        // A name sent as Base64 is decoded before it is compared.
        let encoded = format!("=?base64?{}?=", STANDARD.encode("execute"));
        assert_eq!(
            code(admit(&call, headers("tools/call", Some(&encoded)))),
            None
        );
    }

    #[test]
    fn missing_meta_is_invalid_params() {
        for params in [
            json!({}),
            json!({ "_meta": { META_CLIENT_CAPABILITIES: {} } }),
            json!({ "_meta": { META_PROTOCOL_VERSION: "2026-07-28" } }),
        ] {
            let req = request("server/discover", params);
            assert_eq!(
                code(admit(&req, headers("server/discover", None))),
                Some((400, -32602))
            );
        }
    }

    #[test]
    fn headers_must_repeat_the_body() {
        let call = request("tools/call", json!({ "name": "execute", "_meta": meta() }));
        let mismatch = Some((400, HEADER_MISMATCH));
        assert_eq!(
            code(admit(&call, headers("tools/list", Some("execute")))),
            mismatch
        );
        assert_eq!(code(admit(&call, headers("tools/call", None))), mismatch);
        assert_eq!(
            code(admit(&call, headers("tools/call", Some("skills")))),
            mismatch
        );
        for bad in ["=?base64?ZXhlY3V0ZQ?=", "=?base64?ZXhl!!Y3V0ZQ==?="] {
            assert_eq!(
                code(admit(&call, headers("tools/call", Some(bad)))),
                mismatch,
                "{bad}"
            );
        }
        let no_version = StatelessHeaders {
            protocol_version: None,
            ..headers("tools/call", Some("execute"))
        };
        assert_eq!(code(admit(&call, no_version)), mismatch);
        // A name header on a method without a name is not looked at.
        let list = request("tools/list", json!({ "_meta": meta() }));
        assert_eq!(code(admit(&list, headers("tools/list", Some("x")))), None);
    }

    #[test]
    fn an_unknown_version_names_the_supported_ones() {
        let meta = json!({ META_PROTOCOL_VERSION: "v999", META_CLIENT_CAPABILITIES: {} });
        let req = request("server/discover", json!({ "_meta": meta }));
        let refused = admit(
            &req,
            StatelessHeaders {
                protocol_version: Some(b"v999"),
                method: Some(b"server/discover"),
                name: None,
            },
        )
        .unwrap_err();
        assert_eq!(
            (refused.http_status, refused.error.code),
            (400, UNSUPPORTED_VERSION)
        );
        let data = refused.error.to_json()["data"].clone();
        assert_eq!(data["requested"], "v999");
        assert!(
            data["supported"]
                .as_array()
                .is_some_and(|s| s.contains(&json!("2026-07-28")))
        );
        // The header says one version and the body another: a mismatch.
        let refused = admit(&req, headers("server/discover", None)).unwrap_err();
        assert_eq!(refused.error.code, HEADER_MISMATCH);
    }

    #[test]
    fn a_listen_stream_names_itself_and_honours_only_the_tool_list() {
        let req = request(
            SUBSCRIPTIONS_LISTEN,
            json!({ "_meta": meta(), "notifications": { "toolsListChanged": true, "promptsListChanged": true } }),
        );
        let m = listen_messages(&req);
        assert_eq!(
            m.acknowledged["params"]["notifications"],
            json!({ "toolsListChanged": true })
        );
        assert_eq!(m.acknowledged["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
        let changed = m.tools_changed.unwrap();
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
        assert_eq!(m.ended["id"], json!(7));
        assert_eq!(m.ended["result"]["_meta"][SUBSCRIPTION_ID], json!(7));
        let prompts_only = request(
            SUBSCRIPTIONS_LISTEN,
            json!({ "_meta": meta(), "notifications": { "promptsListChanged": true } }),
        );
        let m = listen_messages(&prompts_only);
        assert_eq!(m.acknowledged["params"]["notifications"], json!({}));
        assert_eq!(m.tools_changed, None);
    }

    #[test]
    fn removed_and_unknown_methods_are_not_found() {
        for method in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "unknown/method",
            "prompts/list",
        ] {
            let req = request(method, json!({ "_meta": meta() }));
            assert_eq!(
                code(admit(&req, headers(method, None))),
                Some((404, -32601)),
                "{method}"
            );
        }
        let listen = request(
            SUBSCRIPTIONS_LISTEN,
            json!({ "_meta": meta(), "notifications": {} }),
        );
        assert_eq!(
            code(admit(&listen, headers(SUBSCRIPTIONS_LISTEN, None))),
            None
        );
    }
}
