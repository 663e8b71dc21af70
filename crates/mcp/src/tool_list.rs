//! A session's tool list, kept with its JSON written out once.

use serde_json::{Value, json};

/// The tools a session sees, and the result of `tools/list` already written
/// as JSON. The list depends only on the org's integration inventory, and
/// sessions share one snapshot per inventory, so the text is written when
/// the snapshot is built and every `tools/list` copies it instead of
/// cloning and serialising the tree again.
#[derive(Debug, Default)]
pub struct ToolList {
    tools: Vec<Value>,
    /// `{"tools":[…]}`.
    result_json: String,
}

impl ToolList {
    pub fn new(tools: Vec<Value>) -> Self {
        let result_json = json!({ "tools": tools }).to_string();
        ToolList { tools, result_json }
    }

    pub fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// The result of `tools/list`, as JSON text.
    pub fn result_json(&self) -> &str {
        &self.result_json
    }
}

/// Two lists are the same when they read the same, which is what a client
/// notified of a change would see.
impl PartialEq for ToolList {
    fn eq(&self, other: &Self) -> bool {
        self.result_json == other.result_json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_result_reads_as_the_tools() {
        let list = ToolList::new(vec![json!({ "name": "execute", "inputSchema": {} })]);
        let parsed: Value = serde_json::from_str(list.result_json()).expect("JSON");
        assert_eq!(parsed, json!({ "tools": list.tools() }));
    }

    #[test]
    fn lists_compare_by_what_they_say() {
        let a = ToolList::new(vec![json!({ "name": "execute" })]);
        let b = ToolList::new(vec![json!({ "name": "execute" })]);
        let c = ToolList::new(vec![json!({ "name": "skills" })]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
