//! An agent's `select`: refused, or made into the tool's own operation
//! around it — never a panic, whatever the text.
#![no_main]

use std::sync::OnceLock;

use executor_graphql::{GraphqlTool, import, operation_text};
use libfuzzer_sys::fuzz_target;

fn tool() -> &'static GraphqlTool {
    static TOOL: OnceLock<GraphqlTool> = OnceLock::new();
    TOOL.get_or_init(|| {
        let schema = "type User { id: ID! name: String friends: [User!]! }
                      type Query { user(id: ID!): User, secret: String }";
        let imported = import(schema).expect("the fixed schema imports");
        imported.tools.into_iter().find(|t| t.name == "query.user").expect("query.user")
    })
}

fuzz_target!(|select: &str| {
    if let Ok(text) = operation_text(tool(), &["id"], Some(select)) {
        assert_eq!(text, format!("query User($id: ID!) {{ user(id: $id) {{ {select} }} }}"));
    }
});
