//! The importer and the operations over one schema that has each case
//! SPEC §8 names.

use serde_json::json;

use super::*;

const SCHEMA: &str = r#"
"An instant, ISO 8601"
scalar DateTime

enum Role { ADMIN USER }

"What a new user is made of"
input NewUser { name: String!, role: Role = USER, manager: NewUser, tags: [String!] }

interface Node { id: ID! }

type User implements Node {
  id: ID!
  name: String
  role: Role!
  joined: DateTime
  friends(first: Int = 10): [User!]!
  avatar(size: Int!): String
}

union SearchResult = User

type Query {
  "One user by id"
  user(id: ID!): User
  users(first: Int = 10, role: Role): [User!]!
  node(id: ID!): Node
  search(text: String!): [SearchResult!]!
  version: String!
  pick(select: String): User
  __hidden: Int
}

type Mutation {
  createUser(input: NewUser!): User!
}

type Subscription { userCreated: User }
"#;

fn tool<'a>(imported: &'a ImportedGraphql, name: &str) -> &'a GraphqlTool {
    imported
        .tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[test]
fn one_tool_per_root_field_and_mutations_wait_for_approval() {
    let imported = import(SCHEMA).unwrap();
    let names: Vec<&str> = imported.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "query.user",
            "query.users",
            "query.node",
            "query.search",
            "query.version",
            "query.pick",
            "mutation.createUser"
        ],
        "subscriptions and `__` fields are not tools"
    );
    assert!(tool(&imported, "mutation.createUser").requires_approval);
    assert!(!tool(&imported, "query.user").requires_approval);
    assert_eq!(
        tool(&imported, "query.user").description.as_deref(),
        Some("One user by id")
    );
}

#[test]
fn arguments_are_a_json_schema_with_shared_definitions() {
    let imported = import(SCHEMA).unwrap();
    let user = &tool(&imported, "query.user").input_schema;
    assert_eq!(user["required"], json!(["id"]));
    assert_eq!(user["properties"]["id"], json!({"type": "string"}));
    assert_eq!(user["additionalProperties"], json!(false));
    let users = &tool(&imported, "query.users").input_schema;
    assert!(
        users.get("required").is_none(),
        "defaults and nullables are optional"
    );
    assert_eq!(
        users["properties"]["first"]["type"],
        json!(["integer", "null"])
    );
    assert!(
        users["properties"]["first"]["description"]
            .as_str()
            .unwrap()
            .contains("Default: 10")
    );
    assert_eq!(
        users["properties"]["role"]["anyOf"][0],
        json!({"$ref": "#/$defs/Role"})
    );
    let create = &tool(&imported, "mutation.createUser").input_schema;
    assert_eq!(
        create["properties"]["input"],
        json!({"$ref": "#/$defs/NewUser"})
    );
    let defs = &imported.definitions;
    assert_eq!(
        defs["Role"],
        json!({"type": "string", "enum": ["ADMIN", "USER"]})
    );
    let new_user = &defs["NewUser"];
    assert_eq!(
        new_user["required"],
        json!(["name"]),
        "a default makes `role` optional"
    );
    assert_eq!(
        new_user["properties"]["manager"]["anyOf"][0],
        json!({"$ref": "#/$defs/NewUser"})
    );
    assert_eq!(
        new_user["properties"]["tags"]["type"],
        json!(["array", "null"])
    );
    assert_eq!(
        new_user["properties"]["tags"]["items"],
        json!({"type": "string"})
    );
    assert_eq!(new_user["description"], json!("What a new user is made of"));
}

#[test]
fn a_custom_scalar_is_a_string_that_says_so() {
    let imported = import(SCHEMA).unwrap();
    let joined = &tool(&imported, "query.user").output_schema["properties"]["joined"];
    assert_eq!(joined["type"], json!(["string", "null"]));
    let about = joined["description"].as_str().unwrap();
    assert!(
        about.contains("Custom scalar `DateTime`") && about.contains("ISO 8601"),
        "{about}"
    );
}

#[test]
fn the_default_selection_is_the_leaf_fields_one_level_deep() {
    let imported = import(SCHEMA).unwrap();
    let user = tool(&imported, "query.user");
    // Not `friends` (an object), not `avatar` (a required argument).
    assert_eq!(
        user.default_selection.as_deref(),
        Some("id name role joined")
    );
    assert_eq!(
        user.output_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["id", "name", "role", "joined"]
    );
    assert_eq!(
        user.output_schema["type"],
        json!(["object", "null"]),
        "the user may be null"
    );
    let users = tool(&imported, "query.users");
    assert_eq!(users.output_schema["type"], json!("array"));
    assert_eq!(
        users.output_schema["items"]["properties"]["role"],
        json!({"$ref": "#/$defs/Role"})
    );
    assert_eq!(
        tool(&imported, "query.node").default_selection.as_deref(),
        Some("id")
    );
    assert_eq!(
        tool(&imported, "query.search").default_selection.as_deref(),
        Some("__typename")
    );
    let version = tool(&imported, "query.version");
    assert_eq!(version.default_selection, None);
    assert!(!version.takes_select);
    assert_eq!(version.output_schema, json!({"type": "string"}));
    assert!(user.takes_select && user.input_schema["properties"]["select"].is_object());
}

#[test]
fn an_argument_named_select_stays_the_apis_own() {
    let imported = import(SCHEMA).unwrap();
    let pick = tool(&imported, "query.pick");
    assert!(!pick.takes_select);
    assert_eq!(
        pick.input_schema["properties"]["select"]["type"],
        json!(["string", "null"])
    );
}

#[test]
fn a_call_is_one_named_operation_with_the_given_arguments_as_variables() {
    let imported = import(SCHEMA).unwrap();
    let users = tool(&imported, "query.users");
    assert_eq!(
        operation_text(users, &["role"], None).unwrap(),
        "query Users($role: Role) { users(role: $role) { id name role joined } }",
        "an argument not given keeps the API's default"
    );
    let user = tool(&imported, "query.user");
    assert_eq!(
        operation_text(user, &["id"], Some("id friends(first: 2) { name }")).unwrap(),
        "query User($id: ID!) { user(id: $id) { id friends(first: 2) { name } } }"
    );
    let create = tool(&imported, "mutation.createUser");
    assert_eq!(
        operation_text(create, &["input"], None).unwrap(),
        "mutation CreateUser($input: NewUser!) { createUser(input: $input) { id name role joined } }"
    );
    assert_eq!(
        operation_text(tool(&imported, "query.version"), &[], None).unwrap(),
        "query Version { version }"
    );
}

#[test]
fn a_select_that_is_not_a_selection_set_is_refused() {
    let imported = import(SCHEMA).unwrap();
    let user = tool(&imported, "query.user");
    for bad in [
        "id name {",
        "id } } query Other { users { id",
        "id } } mutation M { createUser(input: {name: \"x\"}) { id",
        "id } } fragment F on User { id",
        "id } version",
        "id } users { name",
        "id } other: user(id: \"2\") { name",
        "id } mutation X { y",
        "",
        "   ",
        &"a { ".repeat(200),
    ] {
        let refused = operation_text(user, &["id"], Some(bad));
        assert!(refused.is_err(), "{bad:?} was let through: {refused:?}");
    }
    let scalar = operation_text(tool(&imported, "query.version"), &[], Some("id"));
    assert!(scalar.unwrap_err().0.contains("returns a scalar"));
}

#[test]
fn introspection_json_gives_the_same_tools_as_sdl() {
    let introspected = json!({"data": {"__schema": {
        "queryType": {"name": "Query"}, "mutationType": null,
        "types": [
            {"kind": "OBJECT", "name": "Query", "fields": [
                {"name": "version", "description": null, "args": [],
                 "type": {"kind": "NON_NULL", "name": null, "ofType": {"kind": "SCALAR", "name": "String", "ofType": null}}}
            ]},
            {"kind": "SCALAR", "name": "String"}
        ]
    }}});
    let from_json = import(&introspected.to_string()).unwrap();
    let from_sdl = import("type Query { version: String! }").unwrap();
    assert_eq!(from_json.tools, from_sdl.tools);
}

#[test]
fn a_schema_without_root_fields_is_refused_with_why() {
    assert!(
        import("type Foo { a: Int }")
            .unwrap_err()
            .0
            .contains("no query or mutation")
    );
    assert!(import("{\"nope\": 1}").is_err());
}
