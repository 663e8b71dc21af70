//! The `requestState` of an `input_required` result (2026-07-28, SPEC §2):
//! what a retry brings back to name the paused execution it answers. The
//! client holds it, so it is signed — HMAC-SHA256 under a key every node
//! shares (derived from the store's secret key) — and says who it was
//! issued to (account, org), for which method, and until when. A state
//! that was changed, issued to another caller or for another method, or
//! that expired, is refused before anything is decided.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::jsonrpc::RpcError;

/// The prefix of every state this server issues (and its format).
const PREFIX: &str = "executor/v2.";

/// The key that signs request states.
#[derive(Clone)]
pub struct RequestStateKey {
    key: [u8; 32],
}

impl std::fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestStateKey([redacted])")
    }
}

impl Drop for RequestStateKey {
    fn drop(&mut self) {
        self.key = [0; 32];
    }
}

/// What a state says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateClaims {
    /// The paused execution.
    #[serde(rename = "e")]
    pub execution_id: String,
    #[serde(rename = "a")]
    pub account_id: String,
    #[serde(rename = "o")]
    pub org_id: String,
    /// The method whose retry may carry it.
    #[serde(rename = "m")]
    pub method: String,
    /// Until when it may be used (ms since the epoch).
    #[serde(rename = "x")]
    pub expires_at_ms: i64,
}

impl RequestStateKey {
    pub fn new(key: [u8; 32]) -> Self {
        RequestStateKey { key }
    }

    /// A key of this process alone (a server whose nodes do not share a
    /// store key, and tests): states it signs are good only here.
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        // No randomness at all is a broken host; a fixed key would make
        // states forgeable, so the process refuses to go on.
        if getrandom::fill(&mut key).is_err() {
            panic!("the system's random number generator is not available");
        }
        RequestStateKey { key }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // An HMAC takes a key of any length: this cannot fail.
        match <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts every key length"),
        }
    }

    /// The state for `claims`: `executor/v2.<claims>.<signature>`.
    pub fn sign(&self, claims: &StateClaims) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{PREFIX}{body}.{signature}")
    }

    /// The execution a retry's `state` names, if this server signed it for
    /// (`account`, `org`) and `method`, and it has not expired at `now_ms`.
    pub fn open(
        &self,
        state: &str,
        account: &str,
        org: &str,
        method: &str,
        now_ms: i64,
    ) -> Result<String, RpcError> {
        let refused = |why: &str| RpcError::invalid_params(format!("requestState {why}"));
        let (body, signature) = state
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .ok_or_else(|| refused("was not issued by this server"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| refused("was changed: its signature does not match"))?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| refused("was changed: its signature does not match"))?;
        let claims: StateClaims = URL_SAFE_NO_PAD
            .decode(body)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| refused("was not issued by this server"))?;
        if claims.account_id != account || claims.org_id != org {
            return Err(refused("was issued to another caller"));
        }
        if claims.method != method {
            return Err(refused(&format!(
                "belongs to {}, not {method}",
                claims.method
            )));
        }
        if claims.expires_at_ms <= now_ms {
            return Err(refused(
                "has expired: the approval it answers timed out; run the program again",
            ));
        }
        Ok(claims.execution_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn claims() -> StateClaims {
        StateClaims {
            execution_id: "exec_1".into(),
            account_id: "acc_a".into(),
            org_id: "org_a".into(),
            method: "tools/call".into(),
            expires_at_ms: 10_000,
        }
    }

    #[test]
    fn a_state_opens_only_for_its_caller_method_and_time() {
        let key = RequestStateKey::new([7; 32]);
        let state = key.sign(&claims());
        let open = |account, org, method, now| key.open(&state, account, org, method, now);
        assert_eq!(
            open("acc_a", "org_a", "tools/call", 9_999),
            Ok("exec_1".to_string())
        );
        let message = |r: Result<String, RpcError>| r.unwrap_err().message;
        assert!(message(open("acc_b", "org_a", "tools/call", 1)).contains("another caller"));
        assert!(message(open("acc_a", "org_b", "tools/call", 1)).contains("another caller"));
        assert!(
            message(open("acc_a", "org_a", "prompts/get", 1)).contains("belongs to tools/call")
        );
        assert!(message(open("acc_a", "org_a", "tools/call", 10_000)).contains("expired"));
        // Another key (another deployment) did not sign it.
        let other = RequestStateKey::new([8; 32]);
        assert!(
            other
                .open(&state, "acc_a", "org_a", "tools/call", 1)
                .is_err()
        );
        for forged in [
            "executor/v1:exec_1",
            "nope",
            "executor/v2.",
            "executor/v2.e30.AAAA",
        ] {
            let refused = key
                .open(forged, "acc_a", "org_a", "tools/call", 1)
                .unwrap_err();
            assert_eq!(refused.code, RpcError::INVALID_PARAMS, "{forged}");
        }
    }

    proptest! {
        /// Any change to a signed state — one character replaced — is refused.
        #[test]
        fn a_changed_state_never_opens(at in 0usize..200, c in proptest::char::range('-', 'z')) {
            let key = RequestStateKey::new([3; 32]);
            let state = key.sign(&claims());
            let at = at % state.len();
            let mut changed: Vec<char> = state.chars().collect();
            prop_assume!(changed[at] != c);
            changed[at] = c;
            let changed: String = changed.into_iter().collect();
            prop_assert!(key.open(&changed, "acc_a", "org_a", "tools/call", 1).is_err());
        }
    }
}
