//! Imports an OpenAPI document and prints the result as JSON, for a look at
//! what the importer makes of a spec:
//!
//! ```sh
//! cargo run --release --example import -- spec.yaml [namespace] [tool-name]
//! ```

use std::process::ExitCode;

use executor_openapi::{ImportOptions, import};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: import <spec> [namespace] [tool-name]");
        return ExitCode::FAILURE;
    };
    let namespace = args.get(1).map_or("api", String::as_str);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = std::time::Instant::now();
    let integration = match import(&text, &ImportOptions::new(namespace)) {
        Ok(integration) => integration,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "{} tools in {:?}",
        integration.tools.len(),
        started.elapsed()
    );
    let output = match args.get(2) {
        Some(name) => {
            let tool = integration.tools.iter().find(|t| &t.name == name);
            serde_json::to_string_pretty(&tool)
        }
        None => serde_json::to_string_pretty(&integration),
    };
    match output {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
