//! An upstream's `input_required` answer (MCP 2026-07-28, SEP-2322): the
//! server asks the client something before it completes a `tools/call`,
//! and the client sends the call again with its answers and the server's
//! `requestState`, unchanged, under a new JSON-RPC id.
//!
//! Executor answers as the approval path of SPEC §9 decides (SPEC §8): an
//! elicitation is put to the person who approves the execution's calls,
//! the call pausing as a policy's approval does ([`HumanQuestions`]).
//! Their decision is the answer: approved → `accept`, with the defaults
//! the form declares; declined → `decline`; cancelled or not decided in
//! time → `cancel`. The upstream reads the answer and finishes the call.
//! What a decision cannot answer is refused with a clear error instead of
//! a guess: a form that requires a field without a default, a request to
//! sample a language model. `roots/list` needs nobody: Executor exposes no
//! roots, so the answer is an empty list.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use executor_catalog::{HumanAnswer, HumanQuestions, ToolError};
use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{Map, Value, json};

use crate::invoker::MCP_TOOL_ERROR;

/// Most `input_required` rounds one call goes through before it gives up
/// (a misbehaving upstream could otherwise ask for ever).
pub(crate) const MAX_INPUT_ROUNDS: usize = 8;

/// Longest question text shown to the person (the upstream's words).
const MAX_QUESTION_CHARS: usize = 2_000;

/// The next attempt of a call: the answers and the state to send with it.
pub(crate) struct Retry {
    pub input_responses: Option<InputResponses>,
    pub request_state: Option<String>,
}

/// Answers one `input_required` round of `namespace`'s call. `round`
/// counts from 0; a round that carries only state waits a little longer
/// each time before the call is sent again.
pub(crate) async fn answer(
    namespace: &str,
    asked: InputRequiredResult,
    questions: Option<&Arc<dyn HumanQuestions>>,
    round: usize,
) -> Result<Retry, ToolError> {
    let requests = asked.input_requests.unwrap_or_default();
    if requests.is_empty() && asked.request_state.is_none() {
        return Err(ToolError::new(
            MCP_TOOL_ERROR,
            format!("{namespace} answered input_required without asking anything"),
        ));
    }
    if requests.is_empty() {
        // The server is working on it and says so: ask again shortly.
        let backoff = Duration::from_millis(100u64 << round.min(4));
        tokio::time::sleep(backoff).await;
    }
    let mut responses = BTreeMap::new();
    for (key, request) in requests {
        let request = serde_json::to_value(&request).unwrap_or(Value::Null);
        let response = answer_one(namespace, &request, questions).await?;
        responses.insert(key, response);
    }
    Ok(Retry {
        input_responses: (!responses.is_empty()).then_some(responses),
        request_state: asked.request_state,
    })
}

/// The answer to one input request (`{method, params}` as JSON).
async fn answer_one(
    namespace: &str,
    request: &Value,
    questions: Option<&Arc<dyn HumanQuestions>>,
) -> Result<Value, ToolError> {
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "elicitation/create" => elicit(namespace, &params, questions).await,
        "roots/list" => Ok(json!({ "roots": [] })),
        "sampling/createMessage" => Err(cannot_answer(
            namespace,
            "asks to sample a language model, which Executor does not do",
        )),
        other => Err(cannot_answer(
            namespace,
            &format!("asks for {other:?}, which is not a request a client answers"),
        )),
    }
}

/// A form elicitation, decided by the person who approves the call.
async fn elicit(
    namespace: &str,
    params: &Value,
    questions: Option<&Arc<dyn HumanQuestions>>,
) -> Result<Value, ToolError> {
    let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
    if mode != "form" {
        // A URL to open is not something an approval carries.
        return Ok(json!({ "action": "decline" }));
    }
    let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
    let content = form_defaults(schema).map_err(|missing| {
        cannot_answer(
            namespace,
            &format!(
                "asks for input only a person can type ({}); an approval answers yes or no",
                missing.join(", ")
            ),
        )
    })?;
    let Some(questions) = questions else {
        return Ok(json!({ "action": "decline" }));
    };
    let message = params.get("message").and_then(Value::as_str).unwrap_or("");
    let question: String = message.chars().take(MAX_QUESTION_CHARS).collect();
    match questions.ask(question).await {
        HumanAnswer::Accepted => Ok(json!({ "action": "accept", "content": content })),
        HumanAnswer::Declined { reason: "declined" } => Ok(json!({ "action": "decline" })),
        HumanAnswer::Declined { .. } => Ok(json!({ "action": "cancel" })),
        HumanAnswer::Unavailable(why) => Err(ToolError::new(MCP_TOOL_ERROR, why)),
    }
}

/// The form's content when the person approves: each field's declared
/// default. `Err` names the required fields that have none.
fn form_defaults(schema: &Value) -> Result<Map<String, Value>, Vec<String>> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut content = Map::new();
    for (name, property) in properties.into_iter().flatten() {
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
    let missing: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !content.contains_key(*name))
        .map(str::to_string)
        .collect();
    if missing.is_empty() {
        Ok(content)
    } else {
        Err(missing)
    }
}

fn cannot_answer(namespace: &str, what: &str) -> ToolError {
    ToolError::new(MCP_TOOL_ERROR, format!("{namespace} {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approved_form_carries_its_defaults_and_a_required_field_without_one_is_refused() {
        let schema = json!({
            "type": "object",
            "properties": {
                "confirmed": { "type": "boolean", "default": true },
                "note": { "type": "string" },
            },
            "required": ["confirmed"],
        });
        assert_eq!(
            form_defaults(&schema),
            Ok(Map::from_iter([("confirmed".to_string(), json!(true))]))
        );
        let typed = json!({ "properties": { "name": { "type": "string" } }, "required": ["name"] });
        assert_eq!(form_defaults(&typed), Err(vec!["name".to_string()]));
        assert_eq!(form_defaults(&json!({})), Ok(Map::new()));
    }
}
