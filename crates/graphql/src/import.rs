//! A schema imported: introspection JSON or SDL into the tools of its root
//! fields, with the definitions they share.

use serde_json::{Map, Value};

use crate::tools::{self, GraphqlTool};
use crate::{introspection, sdl};

/// A schema imported: the tools of its root fields and the definitions
/// (input objects, enums) their schemas share, once.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedGraphql {
    pub tools: Vec<GraphqlTool>,
    pub definitions: Map<String, Value>,
    /// What the import could not take as it was, for the operator.
    pub warnings: Vec<String>,
}

/// Why a schema cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError(pub String);

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImportError {}

/// The tools of a schema given as introspection JSON (text starting with
/// `{`) or as SDL.
pub fn import(text: &str) -> Result<ImportedGraphql, ImportError> {
    let (schema, mut warnings) = if text.trim_start().starts_with('{') {
        let schema = introspection::read(text).map_err(|e| ImportError(e.0))?;
        (schema, Vec::new())
    } else {
        sdl::read(text)
    };
    let mut maker = tools::ToolMaker::new(&schema);
    let tools = maker.tools();
    if tools.is_empty() {
        return Err(ImportError(
            "the schema has no query or mutation fields to make tools of".into(),
        ));
    }
    warnings.append(&mut maker.warnings);
    Ok(ImportedGraphql {
        tools,
        definitions: maker.definitions,
        warnings,
    })
}
