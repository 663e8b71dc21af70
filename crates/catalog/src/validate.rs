//! Argument validation against a tool's input JSON Schema (SPEC §7: after
//! the policy, before any approval, so a call that can only fail never
//! pauses). Validators are compiled once per tool, on first use, from the
//! tool's schema and the part of its integration's shared definitions it
//! reaches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::schema::{ComposeLimits, Definitions, ToolSchema};

/// Messages shown per failed call, at most.
const MAX_REPORTED_ERRORS: usize = 5;
/// How much of the shared definitions one validator takes: enough for any
/// real API's request bodies (GitHub's largest takes a few hundred nodes),
/// while bounding compile time and memory for a schema graph that reaches
/// a whole 20k-tool document. What is left out accepts anything.
const VALIDATION_LIMITS: ComposeLimits = ComposeLimits {
    definitions: 2_000,
    nodes: 200_000,
};

#[derive(Default)]
pub struct Validators {
    /// None: the schema could not be compiled (e.g. a `pattern` in another
    /// regex dialect); such a tool is called without validation.
    compiled: Mutex<HashMap<String, Option<Arc<jsonschema::Validator>>>>,
}

/// What is wrong with a tool's input, by path (at most a few); shown to
/// the agent joined by `; `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblems(pub Vec<String>);

impl std::fmt::Display for SchemaProblems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

impl std::error::Error for SchemaProblems {}

impl Validators {
    /// Checks `args` against `schema`; `Err` lists what is wrong, by path.
    pub fn check(
        &self,
        path: &str,
        schema: &ToolSchema,
        definitions: Option<&Definitions>,
        args: &Value,
    ) -> Result<(), SchemaProblems> {
        let Some(validator) = self.validator(path, schema, definitions) else {
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
            Err(SchemaProblems(problems))
        }
    }

    fn validator(
        &self,
        path: &str,
        schema: &ToolSchema,
        definitions: Option<&Definitions>,
    ) -> Option<Arc<jsonschema::Validator>> {
        if let Ok(cache) = self.compiled.lock()
            && let Some(entry) = cache.get(path)
        {
            return entry.clone();
        }
        let root = schema.to_value();
        let document = match definitions {
            Some(definitions) => definitions.compose(&root, VALIDATION_LIMITS, true),
            None => root,
        };
        let compiled = match jsonschema::validator_for(&document) {
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
    use crate::schema::ToolSchema;
    use serde_json::json;

    fn check(v: &Validators, schema: &Value, args: &Value) -> Result<(), String> {
        v.check("t", &ToolSchema::from_value(schema), None, args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reports_what_is_wrong_and_where() {
        let v = Validators::default();
        let schema = json!({"type": "object", "properties": {"owner": {"type": "string"}}, "required": ["owner"], "additionalProperties": false});
        assert!(check(&v, &schema, &json!({"owner": "a"})).is_ok());
        let e = check(&v, &schema, &json!({"owner": 1, "x": 2})).unwrap_err();
        assert!(e.contains("/owner") && e.contains("string"), "{e}");
        assert!(
            check(&v, &schema, &json!({}))
                .unwrap_err()
                .contains("owner")
        );
    }

    #[test]
    fn uncompilable_schemas_do_not_block_calls() {
        let v = Validators::default();
        let schema = json!({"type": "string", "pattern": "\\P{C}(("});
        assert!(check(&v, &schema, &json!(5)).is_ok());
    }
}
