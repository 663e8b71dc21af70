//! Renders a sandbox outcome as the MCP `CallToolResult` of SPEC §5.

use executor_sandbox::RunOutcome;
use serde_json::{Value, json};

/// Longest result text, in characters, before it is cut with a note.
pub const MAX_RESULT_TEXT_CHARS: usize = 30_000;

/// The `CallToolResult` for a finished execution.
pub fn render(outcome: &RunOutcome) -> Value {
    match outcome {
        RunOutcome::Completed { value, logs } => {
            let body = match value {
                None => "(no result)".to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
            };
            let mut structured = json!({ "status": "completed" });
            if let Some(v) = value {
                structured["result"] = v.clone();
            }
            structured["logs"] = json!(logs);
            json!({
                "content": [{ "type": "text", "text": with_logs(body, logs) }],
                "structuredContent": structured,
            })
        }
        RunOutcome::Failed { message, logs } => tool_error(message, logs),
    }
}

/// A tool-level error: `isError` with the message and any logs.
pub fn tool_error(message: &str, logs: &[String]) -> Value {
    json!({
        "content": [{ "type": "text", "text": with_logs(format!("Error: {message}"), logs) }],
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

fn with_logs(body: String, logs: &[String]) -> String {
    let text = if logs.is_empty() {
        body
    } else {
        format!("{body}\n\nLogs:\n{}", logs.join("\n"))
    };
    truncate(text)
}

fn truncate(text: String) -> String {
    let total = text.chars().count();
    if total <= MAX_RESULT_TEXT_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_RESULT_TEXT_CHARS).collect();
    format!(
        "{kept}\n... [truncated {} chars]",
        total - MAX_RESULT_TEXT_CHARS
    )
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

    fn completed(value: Option<Value>, logs: &[&str]) -> Value {
        render(&RunOutcome::Completed {
            value,
            logs: logs.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn numbers_strings_and_nothing() {
        let r = completed(Some(json!(1)), &[]);
        assert_eq!(r["content"][0]["text"], "1");
        assert_eq!(
            r["structuredContent"],
            json!({"status":"completed","result":1,"logs":[]})
        );
        assert!(r.get("isError").is_none());
        assert_eq!(
            completed(Some(json!("hi")), &[])["content"][0]["text"],
            "hi"
        );
        assert_eq!(completed(None, &[])["content"][0]["text"], "(no result)");
    }

    #[test]
    fn objects_are_pretty_printed_in_insertion_order_with_logs() {
        let v: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).unwrap();
        let r = completed(Some(v), &["[log] x"]);
        assert_eq!(
            r["content"][0]["text"],
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}\n\nLogs:\n[log] x"
        );
    }

    #[test]
    fn long_text_is_truncated_with_a_note() {
        let r = completed(Some(json!("x".repeat(30_005))), &[]);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.ends_with("\n... [truncated 5 chars]"));
        assert_eq!(
            text.chars().count(),
            30_000 + "\n... [truncated 5 chars]".len()
        );
    }

    #[test]
    fn errors_carry_is_error_and_the_message() {
        let r = render(&RunOutcome::Failed {
            message: "boom".into(),
            logs: vec![],
        });
        assert_eq!(r["content"][0]["text"], "Error: boom");
        assert_eq!(r["isError"], true);
        assert_eq!(r["structuredContent"]["status"], "error");
    }
}
