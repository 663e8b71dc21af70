//! What the shaping of one operation works on: the operation as found under
//! `paths`, and what every tool of one import shares (the document, its
//! definitions, the warnings). Its own module so that `operation.rs` drives
//! `parameters.rs` and `media.rs` and neither imports back from it.

use serde_json::{Map, Value};

use crate::model::SpecVersion;
use crate::schema::{DocBuilder, Schemas};
use crate::warnings::Warnings;

/// One operation found under `paths`.
pub(crate) struct Operation<'a> {
    /// The path template, with a leading `/`.
    pub(crate) path: String,
    /// Lower case.
    pub(crate) method: String,
    pub(crate) op: &'a Map<String, Value>,
    pub(crate) item: &'a Map<String, Value>,
}

impl Operation<'_> {
    /// `GET /pets`, for warnings.
    pub(crate) fn label(&self) -> String {
        format!("{} {}", self.method.to_ascii_uppercase(), self.path)
    }
}

/// What the parts of every tool of one import share: the document, its
/// definitions and the warnings.
pub(crate) struct Context<'a, 'w> {
    pub(crate) doc: &'a Value,
    pub(crate) version: SpecVersion,
    pub(crate) schemas: Schemas<'a>,
    pub(crate) warnings: &'w mut Warnings,
}

impl<'a> Context<'a, '_> {
    /// A raw schema of the document, normalised into a tool document.
    pub(crate) fn normalize(&mut self, builder: &mut DocBuilder, raw: &'a Value) -> Value {
        self.schemas.normalize(builder, raw, self.warnings)
    }

    pub(crate) fn finish(&mut self, builder: DocBuilder, root: Value, input: bool) -> Value {
        self.schemas.finish(builder, root, input)
    }
}
