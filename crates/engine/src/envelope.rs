//! Renders a sandbox outcome as the MCP `CallToolResult` of SPEC §5.

use executor_sandbox::RunOutcome;
use serde_json::{Value, json};

/// Longest result text, in characters, before it is cut with a note, by
/// default (SPEC §12), so that one result cannot flood the agent's context.
pub const MAX_RESULT_TEXT_CHARS: usize = 30_000;

/// How much text a rendered outcome may hold (SPEC §12).
#[derive(Debug, Clone, Copy)]
pub struct TextLimits {
    /// The result (or error) text with its logs; see [`MAX_RESULT_TEXT_CHARS`].
    pub result_chars: usize,
    /// One emitted text file shown inline; see [`MAX_EMITTED_TEXT_CHARS`].
    pub emitted_chars: usize,
}

impl Default for TextLimits {
    fn default() -> Self {
        TextLimits {
            result_chars: MAX_RESULT_TEXT_CHARS,
            emitted_chars: MAX_EMITTED_TEXT_CHARS,
        }
    }
}

/// The `CallToolResult` for a finished execution.
pub fn render(outcome: &RunOutcome, limits: TextLimits) -> Value {
    if !outcome.emitted.is_empty() {
        return render_with_emitted(outcome, limits);
    }
    let max = limits.result_chars;
    match &outcome.result {
        Ok(value) => {
            let body = match value {
                None => "(no result)".to_string(),
                Some(v) => value_text(v),
            };
            json!({
                "content": [{ "type": "text", "text": with_logs(body, &outcome.logs, max) }],
                "structuredContent": completed(value, &outcome.logs, None),
            })
        }
        Err(message) => error_within(message, &outcome.logs, max),
    }
}

fn completed(value: &Option<Value>, logs: &[String], emitted: Option<usize>) -> Value {
    let mut structured = json!({
        "status": "completed",
        "result": value.clone().unwrap_or(Value::Null),
        "logs": logs,
    });
    if let Some(n) = emitted {
        structured["emitted"] = json!(n);
    }
    structured
}

/// A string verbatim, anything else as `JSON.stringify(v, null, 2)`.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
    }
}

/// Emitted values become content blocks; one text block follows with the
/// error or a note and the logs. The return value is only structured.
fn render_with_emitted(outcome: &RunOutcome, limits: TextLimits) -> Value {
    let n = outcome.emitted.len();
    let max = limits.result_chars;
    let mut content: Vec<Value> = outcome
        .emitted
        .iter()
        .map(|value| emitted_block(value, limits.emitted_chars))
        .collect();
    match &outcome.result {
        Ok(value) => {
            let note = match value {
                None => format!("(no return value; {n} item(s) emitted to the user)"),
                Some(_) => format!(
                    "({n} item(s) emitted to the user; the return value is in structuredContent.result)"
                ),
            };
            content.push(json!({ "type": "text", "text": with_logs(note, &outcome.logs, max) }));
            json!({ "content": content, "structuredContent": completed(value, &outcome.logs, Some(n)) })
        }
        Err(message) => {
            content.push(json!({ "type": "text", "text": with_logs(format!("Error: {message}"), &outcome.logs, max) }));
            json!({
                "content": content,
                "structuredContent": { "status": "error", "error": message, "logs": outcome.logs, "emitted": n },
                "isError": true,
            })
        }
    }
}

/// Longest decoded text file shown inline, in characters, by default
/// (SPEC §12): the user asked for the file, so it may be longer than a
/// result, but still bounded.
pub const MAX_EMITTED_TEXT_CHARS: usize = 64_000;

/// One emitted value as an MCP content block; a text file is cut at
/// `max_text_chars`.
fn emitted_block(value: &Value, max_text_chars: usize) -> Value {
    if let Some(file) = tool_file(value) {
        return file_block(file, max_text_chars);
    }
    if is_content_block(value) {
        return value.clone();
    }
    json!({ "type": "text", "text": value_text(value) })
}

struct ToolFile<'a> {
    name: &'a str,
    mime: &'a str,
    data: &'a str,
}

fn tool_file(v: &Value) -> Option<ToolFile<'_>> {
    if v.get("_tag")?.as_str()? != "ToolFile"
        || v.get("encoding").and_then(Value::as_str) != Some("base64")
    {
        return None;
    }
    Some(ToolFile {
        name: v.get("name").and_then(Value::as_str).unwrap_or("file"),
        mime: v.get("mimeType")?.as_str()?,
        data: v.get("data")?.as_str()?,
    })
}

fn file_block(f: ToolFile<'_>, max_text_chars: usize) -> Value {
    use base64::Engine as _;
    // A block with broken base64 would make clients reject the whole result.
    if base64::engine::general_purpose::STANDARD
        .decode(f.data.trim())
        .is_err()
    {
        return json!({
            "type": "text",
            "text": format!("[emitted file {:?} was dropped: its data is not valid base64]", f.name),
        });
    }
    let mime = f.mime.to_ascii_lowercase();
    if mime.starts_with("image/") {
        return json!({ "type": "image", "data": f.data, "mimeType": f.mime });
    }
    if mime.starts_with("audio/") {
        return json!({ "type": "audio", "data": f.data, "mimeType": f.mime });
    }
    if is_text_mime(&mime)
        && let Some(text) = decode_text(f.data)
    {
        return json!({ "type": "text", "text": truncate_chars(text, max_text_chars) });
    }
    json!({
        "type": "resource",
        "resource": { "uri": format!("executor-file:///{}", f.name), "mimeType": f.mime, "blob": f.data },
    })
}

fn is_text_mime(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or("").trim();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-yaml"
                | "application/yaml"
                | "application/csv"
                | "application/x-ndjson"
        )
}

fn decode_text(data: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// MCP content blocks pass through as they are.
fn is_content_block(v: &Value) -> bool {
    let has = |k: &str| v.get(k).is_some_and(Value::is_string);
    match v.get("type").and_then(Value::as_str) {
        Some("text") => has("text"),
        Some("image") | Some("audio") => has("data") && has("mimeType"),
        Some("resource") => v.get("resource").is_some_and(Value::is_object),
        Some("resource_link") => has("uri") && has("name"),
        _ => false,
    }
}

/// A tool-level error: `isError` with the message and any logs.
pub fn tool_error(message: &str, logs: &[String]) -> Value {
    error_within(message, logs, MAX_RESULT_TEXT_CHARS)
}

/// [`tool_error`], its text cut at `max` characters.
fn error_within(message: &str, logs: &[String], max: usize) -> Value {
    json!({
        "content": [{ "type": "text", "text": with_logs(format!("Error: {message}"), logs, max) }],
        "structuredContent": { "status": "error", "error": message, "logs": logs },
        "isError": true,
    })
}

/// A plain text result (no structured content).
pub fn text_result(text: String, is_error: bool) -> Value {
    let mut v = json!({ "content": [{ "type": "text", "text": text }] });
    if is_error {
        v["isError"] = json!(true);
    }
    v
}

/// The body and the logs, cut at `max` characters.
fn with_logs(body: String, logs: &[String], max: usize) -> String {
    let text = if logs.is_empty() {
        body
    } else {
        format!("{body}\n\nLogs:\n{}", logs.join("\n"))
    };
    truncate_chars(text, max)
}

fn truncate_chars(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n... [truncated {} chars]", total - max)
}

/// A short random id that ties an agent-facing "Internal tool error" to the
/// detailed server-log line.
pub fn internal_error_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..8].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(outcome: &RunOutcome) -> Value {
        super::render(outcome, TextLimits::default())
    }

    fn outcome(
        result: Result<Option<Value>, &str>,
        logs: &[&str],
        emitted: Vec<Value>,
    ) -> RunOutcome {
        RunOutcome {
            result: result.map_err(str::to_string),
            logs: logs.iter().map(|s| s.to_string()).collect(),
            emitted,
        }
    }

    #[test]
    fn numbers_strings_and_nothing() {
        let r = render(&outcome(Ok(Some(json!(1))), &[], vec![]));
        assert_eq!(r["content"][0]["text"], "1");
        assert_eq!(
            r["structuredContent"],
            json!({"status":"completed","result":1,"logs":[]})
        );
        assert!(r.get("isError").is_none());
        assert_eq!(
            render(&outcome(Ok(Some(json!("hi"))), &[], vec![]))["content"][0]["text"],
            "hi"
        );
        let none = render(&outcome(Ok(None), &[], vec![]));
        assert_eq!(none["content"][0]["text"], "(no result)");
        assert_eq!(none["structuredContent"]["result"], Value::Null);
    }

    #[test]
    fn objects_are_pretty_printed_in_insertion_order_with_logs() {
        let v: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).unwrap();
        let r = render(&outcome(Ok(Some(v)), &["[log] x"], vec![]));
        assert_eq!(
            r["content"][0]["text"],
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}\n\nLogs:\n[log] x"
        );
    }

    #[test]
    fn long_text_is_truncated_with_a_note() {
        let r = render(&outcome(Ok(Some(json!("x".repeat(30_005)))), &[], vec![]));
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with("\n... [truncated 5 chars]"));
        assert_eq!(
            text.chars().count(),
            30_000 + "\n... [truncated 5 chars]".len()
        );
    }

    #[test]
    fn configured_text_limits_cut_the_result_and_emitted_files() {
        let limits = TextLimits {
            result_chars: 10,
            emitted_chars: 4,
        };
        let long = outcome(Ok(Some(json!("x".repeat(12)))), &[], vec![]);
        assert_eq!(
            super::render(&long, limits)["content"][0]["text"],
            format!("{}\n... [truncated 2 chars]", "x".repeat(10))
        );
        let txt = json!({"_tag":"ToolFile","name":"a.txt","mimeType":"text/plain","encoding":"base64","data":"aGVsbG8=","byteLength":5});
        let emitted = super::render(&outcome(Ok(None), &[], vec![txt]), limits);
        assert_eq!(
            emitted["content"][0]["text"],
            "hell\n... [truncated 1 chars]"
        );
    }

    #[test]
    fn errors_carry_is_error_and_the_message() {
        let r = render(&outcome(Err("boom"), &["[log] a"], vec![]));
        assert_eq!(r["content"][0]["text"], "Error: boom\n\nLogs:\n[log] a");
        assert_eq!(r["isError"], true);
        assert_eq!(
            r["structuredContent"],
            json!({"status":"error","error":"boom","logs":["[log] a"]})
        );
    }

    #[test]
    fn emitted_values_become_blocks_by_kind() {
        let png = json!({"_tag":"ToolFile","name":"a.png","mimeType":"image/png","encoding":"base64","data":"iVBO","byteLength":3});
        let txt = json!({"_tag":"ToolFile","name":"a.txt","mimeType":"text/plain","encoding":"base64","data":"aGVsbG8=","byteLength":5});
        let bin = json!({"_tag":"ToolFile","name":"a.bin","mimeType":"application/octet-stream","encoding":"base64","data":"AAE=","byteLength":2});
        let block = json!({"type":"text","text":"as is"});
        let r = render(&outcome(
            Ok(None),
            &[],
            vec![json!({"a":1}), png, txt, bin, block],
        ));
        let c = &r["content"];
        assert_eq!(c[0], json!({"type":"text","text":"{\n  \"a\": 1\n}"}));
        assert_eq!(
            c[1],
            json!({"type":"image","data":"iVBO","mimeType":"image/png"})
        );
        assert_eq!(c[2], json!({"type":"text","text":"hello"}));
        assert_eq!(c[3]["resource"]["uri"], "executor-file:///a.bin");
        assert_eq!(c[4], json!({"type":"text","text":"as is"}));
        assert_eq!(
            c[5]["text"],
            "(no return value; 5 item(s) emitted to the user)"
        );
        assert_eq!(r["structuredContent"]["emitted"], 5);
        let failed = render(&outcome(Err("late"), &[], vec![json!("x")]));
        assert_eq!(failed["content"][1]["text"], "Error: late");
        assert_eq!(failed["isError"], true);
    }
}
