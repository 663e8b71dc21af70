//! Argument validation against a tool's input JSON Schema (SPEC §7: after
//! the policy, before any approval, so a call that can only fail never
//! pauses). Validators are compiled once per tool, on first use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Messages shown per failed call, at most.
const MAX_REPORTED_ERRORS: usize = 5;

#[derive(Default)]
pub struct Validators {
    /// None: the schema could not be compiled (e.g. a `pattern` in another
    /// regex dialect); such a tool is called without validation.
    compiled: Mutex<HashMap<String, Option<Arc<jsonschema::Validator>>>>,
}

impl Validators {
    /// Checks `args` against `schema`; `Err` lists what is wrong, by path.
    pub fn check(&self, path: &str, schema: &Value, args: &Value) -> Result<(), String> {
        let Some(validator) = self.validator(path, schema) else {
            return Ok(());
        };
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(MAX_REPORTED_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    fn validator(&self, path: &str, schema: &Value) -> Option<Arc<jsonschema::Validator>> {
        if let Ok(cache) = self.compiled.lock()
            && let Some(entry) = cache.get(path)
        {
            return entry.clone();
        }
        let compiled = match jsonschema::validator_for(schema) {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(tool = %path, error = %e, "input schema does not compile; calls go unvalidated");
                None
            }
        };
        if let Ok(mut cache) = self.compiled.lock() {
            cache.insert(path.to_string(), compiled.clone());
        }
        compiled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_what_is_wrong_and_where() {
        let v = Validators::default();
        let schema = json!({"type": "object", "properties": {"owner": {"type": "string"}}, "required": ["owner"], "additionalProperties": false});
        assert!(v.check("t", &schema, &json!({"owner": "a"})).is_ok());
        let e = v
            .check("t", &schema, &json!({"owner": 1, "x": 2}))
            .unwrap_err();
        assert!(e.contains("/owner") && e.contains("string"), "{e}");
        assert!(
            v.check("t", &schema, &json!({}))
                .unwrap_err()
                .contains("owner")
        );
    }

    #[test]
    fn uncompilable_schemas_do_not_block_calls() {
        let v = Validators::default();
        let schema = json!({"type": "string", "pattern": "\\P{C}(("});
        assert!(v.check("t", &schema, &json!(5)).is_ok());
    }
}
