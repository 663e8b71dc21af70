//! How a paused approval reaches the human (SPEC §9): model mode (the paused
//! envelope and the `resume` tool), native elicitation on session-based
//! revisions (`elicitation/create` on the request's stream), and the
//! `input_required` round trip of the sessionless revision.

use executor_call::{Action, ApprovalPrompt, ApprovalRequest};
use serde_json::{Value, json};

use crate::ProtocolVersion;
use crate::jsonrpc::RpcError;

/// The approval mode of one request.
#[derive(Clone, Copy, Default)]
pub enum Approvals<'a> {
    /// The paused envelope; the agent calls `resume`.
    #[default]
    Model,
    /// Asked inline through the transport (`elicitation/create`).
    Elicit(&'a dyn ApprovalPrompt),
    /// 2026-07-28: answered with `input_required`, retried with the answer.
    InputRequired,
}

/// Whether a client gets native elicitation: it asked for it (the
/// `elicitation_mode=native` opt-in), its protocol revision can carry it,
/// and it declared the elicitation capability. Anyone else gets model mode.
pub fn native_mode(version: ProtocolVersion, opted_in: bool, client_capabilities: &Value) -> bool {
    opted_in
        && version.has_elicitation()
        && client_capabilities
            .get("elicitation")
            .is_some_and(Value::is_object)
}

/// The `elicitation/create` params asking about `request`: a form with no
/// fields, where accept/decline/cancel is the answer.
pub fn elicitation_params(version: ProtocolVersion, request: &ApprovalRequest) -> Value {
    let mut params = json!({
        "message": request.message,
        "requestedSchema": { "type": "object", "properties": {} },
    });
    if version.names_elicitation_mode() {
        params["mode"] = json!("form");
    }
    params
}

/// The action of an `ElicitResult` (`{action, content?}`), if well formed.
pub fn action_of(elicit_result: &Value) -> Option<Action> {
    elicit_result.get("action")?.as_str()?.parse().ok()
}

/// Key of the one embedded request of an `input_required` result.
const INPUT_KEY: &str = "approval";

/// The `input_required` result asking the human about `request` (its
/// arguments already cut at the preview length), with `state` (the signed
/// `requestState` that names its execution) for the retry to bring back.
pub(crate) fn input_required(request: &ApprovalRequest, state: String) -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {
                "method": "elicitation/create",
                "params": elicitation_params(ProtocolVersion::SESSIONLESS, request),
            }
        },
        "requestState": state,
    })
}

/// A retried `tools/call`: its `requestState` (not yet checked) and the
/// human's answer; None for a first call. A state without the answer is
/// refused (the client must say what the human chose).
pub(crate) fn retried(params: &Value) -> Result<Option<(&str, Action)>, RpcError> {
    let Some(state) = params.get("requestState") else {
        return Ok(None);
    };
    let state = state.as_str().ok_or_else(|| {
        RpcError::invalid_params("requestState must be the string this server issued")
    })?;
    let action = params
        .get("inputResponses")
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(action_of)
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "a retry with requestState needs inputResponses.{INPUT_KEY}: the elicitation's result ({{\"action\": \"accept\" | \"decline\" | \"cancel\"}})"
            ))
        })?;
    Ok(Some((state, action)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_needs_opt_in_revision_and_capability() {
        let caps = json!({ "elicitation": {} });
        use ProtocolVersion::*;
        assert!(native_mode(V2025_11_25, true, &caps));
        assert!(native_mode(V2025_06_18, true, &caps));
        assert!(!native_mode(V2025_03_26, true, &caps));
        assert!(!native_mode(V2025_11_25, false, &caps));
        assert!(!native_mode(V2025_11_25, true, &json!({})));
    }

    #[test]
    fn retries_carry_their_state_and_action() {
        let params = json!({
            "name": "execute",
            "requestState": "executor/v2.x.y",
            "inputResponses": { "approval": { "action": "accept", "content": {} } },
        });
        assert_eq!(
            retried(&params).ok().flatten(),
            Some(("executor/v2.x.y", Action::Accept))
        );
        assert_eq!(retried(&json!({ "name": "execute" })).ok(), Some(None));
        for bad in [
            json!({ "requestState": 7, "inputResponses": { "approval": { "action": "accept" } } }),
            json!({ "requestState": "executor/v2.x.y" }),
            json!({ "requestState": "executor/v2.x.y", "inputResponses": { "approval": { "action": "yes" } } }),
        ] {
            assert!(retried(&bad).is_err(), "{bad}");
        }
    }
}
