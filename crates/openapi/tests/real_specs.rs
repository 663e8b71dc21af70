//! Imports of real, public API descriptions, installed with npm:
//!
//! ```sh
//! npm install --prefix /tmp/specs @octokit/openapi @readme/oas-examples
//! EXECUTOR_SPECS_DIR=/tmp/specs cargo test -p executor-openapi
//! ```
//!
//! `tests/specs/install` installs them and prints the directory. Without
//! `EXECUTOR_SPECS_DIR`, or with a package missing, every test here fails
//! and says so: a test that cannot run never passes silently.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use executor_openapi::{
    AuthMethod, ImportOptions, ImportedIntegration, OperationTool, ParamLocation, import,
};
use serde_json::Value;

const ENV: &str = "EXECUTOR_SPECS_DIR";

/// `$EXECUTOR_SPECS_DIR/node_modules/<package>/<path>`; panics, saying
/// what to do, when the variable is unset or the file is not there.
fn spec_path(package_path: &str) -> PathBuf {
    let Some(dir) = std::env::var_os(ENV) else {
        panic!(
            "set {ENV} to the directory tests/specs/install prints (an npm prefix holding the spec packages)"
        );
    };
    let path = PathBuf::from(dir).join("node_modules").join(package_path);
    assert!(
        path.exists(),
        "{} is missing: run tests/specs/install and set {ENV} to the directory it prints",
        path.display()
    );
    path
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn import_file(path: &PathBuf, namespace: &str) -> ImportedIntegration {
    import(&read(path), &ImportOptions::new(namespace))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tool<'a>(integration: &'a ImportedIntegration, name: &str) -> &'a OperationTool {
    integration
        .tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

fn property_names(tool: &OperationTool) -> Vec<&str> {
    tool.input_schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The invariants every import must keep.
fn check_invariants(integration: &ImportedIntegration) {
    let mut names = HashSet::new();
    for tool in &integration.tools {
        assert!(names.insert(&tool.name), "duplicate {}", tool.name);
        let segments: Vec<&str> = tool.name.split('.').collect();
        assert_eq!(segments.len(), 2, "{}", tool.name);
        for segment in segments {
            let mut chars = segment.chars();
            assert!(
                chars.next().is_some_and(|c| c.is_ascii_alphabetic()),
                "{}",
                tool.name
            );
            assert!(
                chars.all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{}",
                tool.name
            );
        }
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
        assert!(tool.input_schema["properties"].is_object(), "{}", tool.name);
        for param in &tool.parameters {
            assert!(
                tool.input_schema["properties"]
                    .get(&param.property)
                    .is_some(),
                "{}: {}",
                tool.name,
                param.property
            );
        }
        if tool.body.is_some() {
            assert!(
                tool.input_schema["properties"].get("body").is_some(),
                "{}",
                tool.name
            );
        }
        assert!(tool.input_schema.get("$defs").is_none(), "{}", tool.name);
        assert_refs_resolve(&tool.input_schema, integration, &tool.name);
        if let Some(output) = &tool.output_schema {
            assert_refs_resolve(output, integration, &tool.name);
        }
    }
    for (name, definition) in &integration.definitions {
        assert_refs_resolve(definition, integration, name);
    }
}

/// Every `$ref` in a schema points at one of the shared definitions.
fn assert_refs_resolve(document: &Value, integration: &ImportedIntegration, name: &str) {
    let defs = &integration.definitions;
    let mut stack = vec![document];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    let target = r.strip_prefix("#/$defs/").and_then(|n| defs.get(n));
                    assert!(target.is_some(), "{name}: dangling {r}");
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

#[test]
fn github() {
    let path = spec_path("@octokit/openapi/generated/api.github.com.json");
    let text = read(&path);
    let started = Instant::now();
    let github = import(&text, &ImportOptions::new("github")).unwrap_or_else(|e| panic!("{e}"));
    let elapsed = started.elapsed();
    let bytes: usize = github
        .tools
        .iter()
        .map(|t| {
            t.input_schema.to_string().len()
                + t.output_schema.as_ref().map_or(0, |o| o.to_string().len())
        })
        .sum();
    eprintln!(
        "github: {} tools from {} MB in {elapsed:?}; schemas {} MB as JSON; {} warnings",
        github.tools.len(),
        text.len() / 1_000_000,
        bytes / 1_000_000,
        github.warnings.len()
    );
    for warning in github.warnings.iter().take(10) {
        eprintln!("  warning: {warning}");
    }
    assert!(
        (1_000..2_000).contains(&github.tools.len()),
        "{}",
        github.tools.len()
    );
    assert_eq!(github.base_url.as_deref(), Some("https://api.github.com"));
    check_invariants(&github);

    let create = tool(&github, "issues.create");
    assert_eq!(create.method, "POST");
    assert_eq!(create.path_template, "/repos/{owner}/{repo}/issues");
    assert!(create.requires_approval);
    assert_eq!(property_names(create), ["owner", "repo", "body"]);
    assert_eq!(
        create.input_schema["required"],
        serde_json::json!(["owner", "repo", "body"])
    );
    let body = create.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(body, Some("application/json"));
    assert_eq!(
        create.input_schema["properties"]["body"]["required"],
        serde_json::json!(["title"])
    );
    assert!(create.output_schema.is_some());

    let list = tool(&github, "issues.listForRepo");
    assert_eq!(list.method, "GET");
    assert!(!list.requires_approval);
    let query: Vec<&str> = list
        .parameters
        .iter()
        .filter(|p| p.location == ParamLocation::Query)
        .map(|p| p.name.as_str())
        .collect();
    assert!(
        query.contains(&"state") && query.contains(&"per_page"),
        "{query:?}"
    );

    let content = tool(&github, "repos.getContent");
    assert_eq!(
        content.path_template,
        "/repos/{owner}/{repo}/contents/{path}"
    );
    let get_repo = tool(&github, "repos.get");
    assert_eq!(get_repo.path_template, "/repos/{owner}/{repo}");
    assert_eq!(
        get_repo.output_schema.as_ref().and_then(|o| o.get("$ref")),
        Some(&serde_json::json!("#/$defs/full-repository"))
    );
    assert!(github.definitions.contains_key("full-repository"));
}

#[test]
fn github_fully_dereferenced_stays_bounded() {
    // 70+ MB with every schema inlined at every use: the budgets, not the
    // document, decide how large the tool schemas get.
    let path = spec_path("@octokit/openapi/generated/api.github.com.deref.json");
    let text = read(&path);
    let started = Instant::now();
    let github = import(&text, &ImportOptions::new("github")).unwrap_or_else(|e| panic!("{e}"));
    let bytes: usize = github
        .tools
        .iter()
        .map(|t| {
            t.input_schema.to_string().len()
                + t.output_schema.as_ref().map_or(0, |o| o.to_string().len())
        })
        .sum();
    eprintln!(
        "github deref: {} tools from {} MB in {:?}; schemas {} MB as JSON",
        github.tools.len(),
        text.len() / 1_000_000,
        started.elapsed(),
        bytes / 1_000_000
    );
    check_invariants(&github);
    assert!(github.tools.len() >= 1_000);
}

/// `@readme/oas-examples`: every document imports and keeps the invariants.
#[test]
fn readme_examples() {
    let root = spec_path("@readme/oas-examples");
    let mut imported = 0;
    for version in ["2.0", "3.0", "3.1"] {
        for format in ["json", "yaml"] {
            let dir = root.join(version).join(format);
            let entries =
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    continue;
                }
                let integration = import_file(&path, "example");
                check_invariants(&integration);
                imported += 1;
            }
        }
    }
    eprintln!("readme examples: {imported} documents");
    assert!(imported > 50, "{imported}");
}

#[test]
fn swagger_petstore() {
    let path = spec_path("@readme/oas-examples/2.0/json/petstore.json");
    let petstore = import_file(&path, "petstore");
    assert_eq!(
        petstore.base_url.as_deref(),
        Some("http://petstore.swagger.io/v2")
    );
    let add = tool(&petstore, "pet.addPet");
    assert_eq!(
        (add.method.as_str(), add.path_template.as_str()),
        ("POST", "/pet")
    );
    assert_eq!(
        add.body.as_ref().map(|b| b.content_type.as_str()),
        Some("application/json")
    );
    assert_eq!(
        add.input_schema["properties"]["body"]["$ref"],
        "#/$defs/Pet"
    );
    assert_eq!(
        add.security.as_deref(),
        Some(&["petstore_auth".to_string()][..])
    );
    // formData becomes a form body; a file makes it multipart.
    let upload = tool(&petstore, "pet.uploadFile");
    let upload_body = upload.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(upload_body, Some("multipart/form-data"));
    let form = &upload.input_schema["properties"]["body"]["properties"];
    assert_eq!(form["file"]["format"], "binary");
    let update = tool(&petstore, "pet.updatePetWithForm");
    let update_body = update.body.as_ref().map(|b| b.content_type.as_str());
    assert_eq!(update_body, Some("application/x-www-form-urlencoded"));
    let find = tool(&petstore, "pet.findPetsByStatus");
    let status = find.parameters.iter().find(|p| p.name == "status");
    assert!(status.is_some_and(|p| p.explode && p.required));
    assert!(
        petstore
            .auth_methods
            .iter()
            .any(|m| matches!(m, AuthMethod::ApiKeyHeader { name, .. } if name == "api_key"))
    );
    assert!(
        petstore
            .auth_methods
            .iter()
            .any(|m| matches!(m, AuthMethod::OAuth2 { .. }))
    );
}

#[test]
fn openapi_3_petstore_yaml() {
    let path = spec_path("@readme/oas-examples/3.0/yaml/petstore.yaml");
    let petstore = import_file(&path, "petstore");
    let get = tool(&petstore, "pet.getPetById");
    assert_eq!(
        (get.method.as_str(), get.path_template.as_str()),
        ("GET", "/pet/{petId}")
    );
    assert_eq!(get.parameters.len(), 1);
    assert_eq!(get.parameters[0].location, ParamLocation::Path);
    assert!(get.output_schema.is_some());
}
