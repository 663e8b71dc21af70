//! The SPEC §8 import rules, one small document each.

use std::time::Instant;

use executor_openapi::{
    AuthMethod, ImportError, ImportOptions, ImportedIntegration, OperationTool, ParamLocation,
    ParamStyle, SpecVersion, import,
};
use serde_json::{Value, json};

fn run(doc: &Value) -> ImportedIntegration {
    import(&doc.to_string(), &ImportOptions::new("api")).unwrap_or_else(|e| panic!("{e}"))
}

fn names(integration: &ImportedIntegration) -> Vec<&str> {
    integration.tools.iter().map(|t| t.name.as_str()).collect()
}

fn only(integration: &ImportedIntegration) -> &OperationTool {
    assert_eq!(integration.tools.len(), 1, "{:?}", names(integration));
    &integration.tools[0]
}

fn v3(paths: Value) -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": paths})
}

fn properties(tool: &OperationTool) -> Vec<&str> {
    tool.input_schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn yaml_and_json_are_detected() {
    let yaml = "openapi: 3.1.0\ninfo: {title: Pets, version: '1'}\nservers:\n  - url: https://pets.test/v1/\npaths:\n  /pets:\n    get:\n      operationId: listPets\n      tags: [pets]\n      responses:\n        200:\n          description: ok\n";
    let pets = import(yaml, &ImportOptions::new("pets")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pets.spec_version, SpecVersion::OpenApi31);
    assert_eq!(pets.title.as_deref(), Some("Pets"));
    assert_eq!(pets.base_url.as_deref(), Some("https://pets.test/v1"));
    // Only a leading group word is dropped.
    assert_eq!(names(&pets), ["pets.listPets"]);
    let json = run(&v3(json!({"/pets": {"get": {"operationId": "listPets"}}})));
    assert_eq!(json.spec_version, SpecVersion::OpenApi30);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let options = ImportOptions::new("api");
    assert!(matches!(
        import("", &options),
        Err(ImportError::NotOpenApi(_))
    ));
    assert!(matches!(import("{", &options), Err(ImportError::Parse(_))));
    assert!(matches!(
        import("openapi: 2.5.0", &options),
        Err(ImportError::UnsupportedVersion(_))
    ));
    let doc = v3(json!({})).to_string();
    for namespace in ["", "1abc", "a.b", "a-b"] {
        let result = import(&doc, &ImportOptions::new(namespace));
        assert!(
            matches!(result, Err(ImportError::InvalidNamespace(_))),
            "{namespace}"
        );
    }
    // Wrong types everywhere still import, with warnings.
    let weird = json!({"openapi": "3.0.0", "paths": {
        "/a": {"get": 5, "post": {"parameters": [7, {"in": "query"}, {"$ref": "#/nope"}],
                                  "requestBody": {"content": 3}, "responses": []}},
        "/b": [],
        "/c": {"$ref": "other.yaml#/c"}
    }});
    let imported = run(&weird);
    assert_eq!(names(&imported), ["a.postA"]);
    assert!(imported.warnings.len() >= 5, "{:?}", imported.warnings);
}

#[test]
fn naming_follows_tags_operation_ids_and_paths() {
    let doc = v3(json!({
        "/repos/{owner}/{repo}/issues": {
            "post": {"tags": ["issues"], "operationId": "issues/create"},
            "get": {"tags": ["Issues"], "operationId": "issuesListForRepo"}
        },
        "/issues/{id}": {"get": {"tags": ["issues"], "operationId": "get_issue"}},
        "/api/v2/users/{id}": {"delete": {}},
        "/v1/pull-requests": {"get": {"operationId": "list"}},
        "/{id}": {"put": {}}
    }));
    assert_eq!(
        names(&run(&doc)),
        [
            "issues.create",
            "issues.listForRepo",
            "issues.getIssue",
            "users.deleteApiV2UsersId",
            "pullRequests.list",
            "root.putId"
        ]
    );
}

#[test]
fn collisions_are_numbered_in_document_order() {
    let doc = v3(json!({
        "/a": {"get": {"tags": ["pets"], "operationId": "list"},
               "post": {"tags": ["pets"], "operationId": "pets_list"}},
        "/b": {"get": {"tags": ["pets"], "operationId": "petsList"}}
    }));
    assert_eq!(names(&run(&doc)), ["pets.list", "pets.list2", "pets.list3"]);
}

#[test]
fn parameters_merge_with_the_path_item() {
    let doc = v3(json!({"/items/{id}": {
        "parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "verbose", "in": "query", "schema": {"type": "boolean"}}
        ],
        "get": {"parameters": [
            {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}, "description": "Item id"},
            {"name": "fields", "in": "query", "style": "form", "explode": false,
             "schema": {"type": "array", "items": {"type": "string"}}}
        ]}
    }}));
    let integration = run(&doc);
    let tool = only(&integration);
    assert_eq!(properties(tool), ["id", "verbose", "fields"]);
    assert_eq!(
        tool.input_schema["properties"]["id"],
        json!({"type": "integer", "description": "Item id"})
    );
    assert_eq!(tool.input_schema["required"], json!(["id"]));
    let fields = &tool.parameters[2];
    assert_eq!((fields.style, fields.explode), (ParamStyle::Form, false));
    assert!(!tool.requires_approval);
}

#[test]
fn invoker_headers_are_dropped_and_collisions_renamed() {
    let doc = v3(json!({"/things/{id}": {"patch": {
        "parameters": [
            {"name": "Accept", "in": "header", "schema": {"type": "string"}},
            {"name": "content-type", "in": "header", "schema": {"type": "string"}},
            {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
            {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
            {"name": "id", "in": "query", "schema": {"type": "string"}},
            {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
            {"name": "body", "in": "query", "schema": {"type": "string"}}
        ],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}
    }}}));
    let integration = run(&doc);
    let tool = only(&integration);
    assert_eq!(
        properties(tool),
        ["X-Trace", "query_id", "id", "query_body", "body"]
    );
    let query_id = &tool.parameters[1];
    assert_eq!(
        (query_id.name.as_str(), query_id.location),
        ("id", ParamLocation::Query)
    );
    assert_eq!(query_id.property, "query_id");
    assert_eq!(tool.input_schema["required"], json!(["id", "body"]));
    assert!(tool.requires_approval);
}

#[test]
fn undeclared_path_parameters_are_added() {
    let integration = run(&v3(json!({"/a/{x}": {"get": {}}})));
    let tool = only(&integration);
    assert_eq!(tool.parameters[0].name, "x");
    assert_eq!(
        tool.input_schema["properties"]["x"],
        json!({"type": "string"})
    );
    assert!(
        integration
            .warnings
            .iter()
            .any(|w| w.contains("{x} is not declared")),
        "{:?}",
        integration.warnings
    );
}

#[test]
fn request_bodies_prefer_json_then_forms() {
    let doc = json!({"openapi": "3.0.0", "paths": {"/a": {
        "post": {"requestBody": {"$ref": "#/components/requestBodies/Thing"}},
        "patch": {"requestBody": {"content": {"*/*": {"schema": {"type": "object"}}}}},
        "put": {"requestBody": {"content": {
            "multipart/form-data": {"schema": {"type": "object"}},
            "application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }}}
    }}, "components": {"requestBodies": {"Thing": {"description": "A thing", "content": {
        "text/plain": {"schema": {"type": "string"}},
        "application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}
    }}}, "schemas": {"Thing": {"type": "object"}}}});
    let integration = run(&doc);
    let post = &integration.tools[0];
    let body = post
        .body
        .as_ref()
        .map(|b| (b.content_type.as_str(), b.required));
    assert_eq!(body, Some(("application/json", false)));
    assert_eq!(
        post.input_schema["properties"]["body"],
        json!({"$ref": "#/$defs/Thing", "description": "A thing"})
    );
    assert_eq!(integration.definitions["Thing"], json!({"type": "object"}));
    let patch = &integration.tools[1];
    let patch_type = patch.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(patch_type, Some("application/json"));
    let put = &integration.tools[2];
    let put_type = put.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(put_type, Some("application/x-www-form-urlencoded"));
}

#[test]
fn swagger_body_and_form_data() {
    let doc = json!({
        "swagger": "2.0", "host": "api.test", "basePath": "/v1", "schemes": ["https"],
        "consumes": ["application/xml", "application/json"],
        "paths": {
            "/pets": {"post": {"operationId": "addPet", "tags": ["pet"], "parameters": [
                {"name": "pet", "in": "body", "required": true, "schema": {"$ref": "#/definitions/Pet"}},
                {"$ref": "#/parameters/trace"}
            ]}},
            "/pets/{id}/photo": {"post": {"consumes": ["multipart/form-data"], "parameters": [
                {"name": "id", "in": "path", "required": true, "type": "integer", "format": "int64"},
                {"name": "caption", "in": "formData", "type": "string", "required": true},
                {"name": "file", "in": "formData", "type": "file"}
            ]}},
            "/pets/{id}": {"get": {"parameters": [
                {"name": "id", "in": "path", "required": true, "type": "integer"},
                {"name": "tags", "in": "query", "type": "array", "items": {"type": "string"},
                 "collectionFormat": "multi"}
            ], "responses": {"200": {"$ref": "#/responses/PetResponse"}}}}
        },
        "parameters": {"trace": {"name": "X-Trace", "in": "header", "type": "string"}},
        "responses": {"PetResponse": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}},
        "definitions": {"Pet": {"type": "object", "required": ["name"],
                                "properties": {"name": {"type": "string", "x-nullable": true}}}}
    });
    let integration = run(&doc);
    assert_eq!(integration.base_url.as_deref(), Some("https://api.test/v1"));
    let [add, photo, get] = integration.tools.as_slice() else {
        panic!("{:?}", names(&integration));
    };
    assert_eq!(add.name, "pet.addPet");
    assert_eq!(properties(add), ["X-Trace", "body"]);
    let add_body = add
        .body
        .as_ref()
        .map(|b| (b.content_type.as_str(), b.required));
    assert_eq!(add_body, Some(("application/json", true)));
    assert_eq!(
        integration.definitions["Pet"]["properties"]["name"]["type"],
        json!(["string", "null"])
    );

    let photo_body = photo.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(photo_body, Some("multipart/form-data"));
    assert_eq!(
        photo.input_schema["properties"]["body"],
        json!({"type": "object", "properties": {
            "caption": {"type": "string"},
            "file": {"type": "string", "format": "binary"}
        }, "required": ["caption"]})
    );
    assert_eq!(
        photo.input_schema["properties"]["id"],
        json!({"type": "integer", "format": "int64"})
    );

    let tags = &get.parameters[1];
    assert_eq!((tags.style, tags.explode), (ParamStyle::Form, true));
    assert_eq!(get.output_schema, Some(json!({"$ref": "#/$defs/Pet"})));
    assert_eq!(
        integration.definitions["Pet"],
        json!({"type": "object", "required": ["name"], "properties": {"name": {"type": ["string", "null"]}}})
    );
}

#[test]
fn output_is_the_first_json_success() {
    let doc = v3(json!({"/a": {"get": {"responses": {
        "default": {"content": {"application/json": {"schema": {"type": "string"}}}},
        "204": {"description": "none"},
        "202": {"content": {"text/html": {"schema": {"type": "string"}}}},
        "201": {"content": {"application/hal+json": {"schema": {"type": "integer"}}}},
        "2XX": {"content": {"application/json": {"schema": {"type": "boolean"}}}}
    }}}}));
    let integration = run(&doc);
    assert_eq!(
        only(&integration).output_schema,
        Some(json!({"type": "integer"}))
    );
}

#[test]
fn approval_defaults_by_method() {
    let doc = v3(json!({"/a": {
        "get": {}, "head": {}, "options": {}, "post": {}, "put": {}, "patch": {}, "delete": {}
    }}));
    let integration = run(&doc);
    let approvals: Vec<(&str, bool)> = integration
        .tools
        .iter()
        .map(|t| (t.method.as_str(), t.requires_approval))
        .collect();
    assert_eq!(
        approvals,
        [
            ("GET", false),
            ("HEAD", false),
            ("OPTIONS", false),
            ("POST", true),
            ("PUT", true),
            ("PATCH", true),
            ("DELETE", true)
        ]
    );
}

#[test]
fn security_schemes_and_requirements() {
    let doc = json!({"openapi": "3.0.0",
        "security": [{"token": []}],
        "components": {"securitySchemes": {
            "token": {"type": "http", "scheme": "bearer"},
            "key": {"type": "apiKey", "in": "query", "name": "api_key"}
        }},
        "paths": {"/a": {"get": {}, "post": {"security": [{"key": []}]}, "put": {"security": []}}}
    });
    let integration = run(&doc);
    assert_eq!(
        integration.auth_methods,
        [
            AuthMethod::Bearer {
                scheme: "token".into()
            },
            AuthMethod::ApiKeyQuery {
                scheme: "key".into(),
                name: "api_key".into()
            }
        ]
    );
    let security: Vec<Option<Vec<String>>> = integration
        .tools
        .iter()
        .map(|t| t.security.clone())
        .collect();
    assert_eq!(
        security,
        [
            Some(vec!["token".to_string()]),
            Some(vec!["key".to_string()]),
            Some(vec![])
        ]
    );
}

#[test]
fn servers_and_base_url_override() {
    let doc = json!({"openapi": "3.0.0",
        "servers": [{"url": "https://{env}.api.test/", "variables": {"env": {"default": "prod"}}}],
        "paths": {"/a": {"get": {"servers": [{"url": "https://upload.api.test"}]}, "post": {}}}
    });
    let integration = run(&doc);
    assert_eq!(
        integration.base_url.as_deref(),
        Some("https://prod.api.test")
    );
    assert_eq!(
        integration.tools[0].base_url.as_deref(),
        Some("https://upload.api.test")
    );
    assert_eq!(integration.tools[1].base_url, None);
    let options = ImportOptions {
        base_url: Some("http://localhost:9999".into()),
        ..ImportOptions::new("api")
    };
    let overridden = import(&doc.to_string(), &options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        overridden.base_url.as_deref(),
        Some("http://localhost:9999")
    );
    assert_eq!(overridden.tools[0].base_url, None);
}

#[test]
fn descriptions_are_bounded() {
    let doc = v3(json!({"/a": {"get": {"summary": "Short", "description": "x".repeat(50_000)}}}));
    let integration = run(&doc);
    let description = only(&integration).description.clone().unwrap_or_default();
    assert!(description.starts_with("Short\n\nxxx"));
    assert_eq!(description.chars().count(), 2_000);
}

/// `T0 → T1 → …` where every level refers to the next twice: inlining would
/// produce 2^40 nodes; definitions keep it linear.
#[test]
fn doubling_references_do_not_blow_up() {
    let mut schemas = serde_json::Map::new();
    for i in 0..40 {
        let next = json!({"$ref": format!("#/components/schemas/T{}", i + 1)});
        schemas.insert(
            format!("T{i}"),
            json!({"type": "object", "properties": {"left": next, "right": next}}),
        );
    }
    schemas.insert("T40".into(), json!({"$ref": "#/components/schemas/T0"}));
    let doc = json!({"openapi": "3.0.0", "components": {"schemas": schemas}, "paths": {"/a": {"post": {
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/T0"}}}},
        "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/T0"}}}}}
    }}}});
    let integration = run(&doc);
    let tool = only(&integration);
    assert_eq!(integration.definitions.len(), 41);
    assert_eq!(
        tool.input_schema["properties"]["body"]["$ref"],
        "#/$defs/T0"
    );
    assert!(tool.input_schema.to_string().len() < 10_000);
}

/// 10k operations that each reach a large web of schemas: the import stays
/// fast, every tool root stays within its budget, and the web is stored
/// once, not once per tool.
#[test]
fn ten_thousand_operations_stay_bounded() {
    let mut schemas = serde_json::Map::new();
    for i in 0..300 {
        let mut props = serde_json::Map::new();
        for j in 0..20 {
            props.insert(
                format!("field{j}"),
                json!({"$ref": format!("#/components/schemas/S{}", (i * 7 + j) % 300),
                       "description": "A field with a description long enough to weigh."}),
            );
        }
        schemas.insert(
            format!("S{i}"),
            json!({"type": "object", "properties": props}),
        );
    }
    let mut paths = serde_json::Map::new();
    for i in 0..5_000 {
        let schema = json!({"$ref": format!("#/components/schemas/S{}", i % 300)});
        paths.insert(
            format!("/things{i}/{{id}}"),
            json!({"get": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                           "responses": {"200": {"content": {"application/json": {"schema": schema}}}}},
                   "put": {"requestBody": {"content": {"application/json": {"schema": schema}}}}}),
        );
    }
    let doc = json!({"openapi": "3.0.0", "components": {"schemas": schemas}, "paths": paths});
    let text = doc.to_string();
    let started = Instant::now();
    let integration = import(&text, &ImportOptions::new("api")).unwrap_or_else(|e| panic!("{e}"));
    let elapsed = started.elapsed();
    assert_eq!(integration.tools.len(), 10_000);
    let largest = integration
        .tools
        .iter()
        .flat_map(|t| [Some(&t.input_schema), t.output_schema.as_ref()])
        .flatten()
        .map(|s| s.to_string().len())
        .max()
        .unwrap_or(0);
    eprintln!(
        "10k operations from {} KB in {elapsed:?}; largest tool schema {largest} bytes",
        text.len() / 1000
    );
    // 800 budget nodes at most (8M / 10k), each well under 100 bytes.
    assert!(largest < 80_000, "{largest}");
    assert_eq!(integration.definitions.len(), 300);
    let stored = serde_json::to_string(&integration).unwrap_or_default();
    assert!(stored.len() < 6_000_000, "{} bytes stored", stored.len());
}
