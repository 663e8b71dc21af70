//! [`import`]: a document's text to an [`ImportedIntegration`], through
//! the dialect (`document.rs`), the servers, the security schemes and every
//! operation.

use crate::error::ImportError;
use crate::model::{FORMAT, ImportOptions, ImportedIntegration};
use crate::warnings::Warnings;
use crate::{auth, document, operation, servers};

/// Imports one OpenAPI document.
pub fn import(
    spec_text: &str,
    options: &ImportOptions,
) -> Result<ImportedIntegration, ImportError> {
    import_with_progress(spec_text, options, &mut |_, _| {})
}

/// [`import`], calling `progress(done, total)` as operations are shaped so
/// that a large document can show progress (SPEC §8).
pub fn import_with_progress(
    spec_text: &str,
    options: &ImportOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ImportedIntegration, ImportError> {
    check_namespace(&options.namespace)?;
    let doc = document::parse(spec_text)?;
    let version = document::version(&doc)?;
    let mut warnings = Warnings::default();
    let base_url = servers::base_url(&doc, version, options, &mut warnings);
    let auth_methods = auth::methods(&doc, version, &mut warnings);
    let (tools, definitions) = operation::tools(
        &doc,
        version,
        options,
        base_url.as_deref(),
        &mut warnings,
        progress,
    );
    Ok(ImportedIntegration {
        format: FORMAT,
        namespace: options.namespace.clone(),
        spec_version: version,
        title: document::title(&doc),
        base_url,
        base_url_override: options.base_url.clone(),
        auth_methods,
        tools,
        definitions,
        warnings: warnings.finish(),
    })
}

/// The namespace becomes the first segment of `tools.<ns>.<group>.<leaf>`,
/// so it must be a plain identifier.
fn check_namespace(namespace: &str) -> Result<(), ImportError> {
    if executor_catalog::is_valid_namespace(namespace) {
        Ok(())
    } else {
        Err(ImportError::InvalidNamespace(namespace.to_string()))
    }
}
