//! The operation a call sends (SPEC §8): one named operation, the root
//! field with every argument given passed as a variable, and the call's
//! `select` or the tool's default selection.
//!
//! `select` is the agent's text inside our operation, so it is checked by
//! parsing the whole operation it makes: any syntax error, a second
//! definition (`} query Other { … `), anything but one operation of the
//! tool's own kind, or a root selection besides the tool's own field
//! (`id } adminOnly { secret`, which would call another tool's field
//! under this tool's policy) is refused before the request is sent. The
//! parser's recursion and token limits bound what a hostile `select`
//! costs.

use apollo_parser::cst::{CstNode, Definition, Selection};

use crate::tools::{ArgSpec, GraphqlTool, OperationKind};

/// Nesting a `select` may reach.
const RECURSION_LIMIT: usize = 64;
/// Tokens an operation may have.
const TOKEN_LIMIT: usize = 20_000;

/// Why a call's operation cannot be made: the agent's to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectError(pub String);

/// What a call's operation is made of, borrowed from a tool or from an
/// invoker's table: building one copies nothing.
#[derive(Clone, Copy)]
pub struct CallShape<'a> {
    pub operation: OperationKind,
    pub field: &'a str,
    pub args: &'a [ArgSpec],
    /// None when the field returns a scalar or an enum.
    pub default_selection: Option<&'a str>,
}

impl CallShape<'_> {
    /// `query.<field>`: the tool's name under its namespace.
    fn name(&self) -> String {
        format!("{}.{}", self.operation.as_str(), self.field)
    }
}

impl<'a> From<&'a GraphqlTool> for CallShape<'a> {
    fn from(tool: &'a GraphqlTool) -> Self {
        CallShape {
            operation: tool.operation,
            field: &tool.field,
            args: &tool.args,
            default_selection: tool.default_selection.as_deref(),
        }
    }
}

/// The operation of a call of `tool` that gives the arguments named in
/// `given` (in the tool's order), selecting `select` or the default.
pub fn operation_text<'a>(
    tool: impl Into<CallShape<'a>>,
    given: &[&str],
    select: Option<&str>,
) -> Result<String, SelectError> {
    let tool = tool.into();
    let selection = match (tool.default_selection, select) {
        (None, Some(_)) => {
            return Err(SelectError(format!(
                "`select` applies to a field that returns an object; {} returns a scalar or an enum",
                tool.name()
            )));
        }
        (None, None) => String::new(),
        (Some(_), Some(select)) if select.trim().is_empty() => {
            return Err(SelectError(
                "`select` is empty: name the fields to return".into(),
            ));
        }
        (Some(_), Some(select)) => format!(" {{ {select} }}"),
        (Some(default), None) => format!(" {{ {default} }}"),
    };
    let args: Vec<_> = tool
        .args
        .iter()
        .filter(|a| given.contains(&a.name.as_str()))
        .collect();
    let (declared, passed) = if args.is_empty() {
        (String::new(), String::new())
    } else {
        let declared: Vec<String> = args
            .iter()
            .map(|a| format!("${}: {}", a.name, a.ty))
            .collect();
        let passed: Vec<String> = args.iter().map(|a| format!("{0}: ${0}", a.name)).collect();
        (
            format!("({})", declared.join(", ")),
            format!("({})", passed.join(", ")),
        )
    };
    let text = format!(
        "{} {}{declared} {{ {}{passed}{selection} }}",
        tool.operation.as_str(),
        operation_name(tool.field),
        tool.field
    );
    check(&text, &tool)?;
    Ok(text)
}

/// The operation's name: the field's, capitalised (`user` → `User`).
pub fn operation_name(field: &str) -> String {
    let mut chars = field.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The text is exactly one operation of the tool's kind, without errors.
fn check(text: &str, tool: &CallShape<'_>) -> Result<(), SelectError> {
    let tree = apollo_parser::Parser::new(text)
        .recursion_limit(RECURSION_LIMIT)
        .token_limit(TOKEN_LIMIT)
        .parse();
    if let Some(error) = tree.errors().next() {
        return Err(SelectError(format!(
            "`select` is not a valid selection set: {}",
            error.message()
        )));
    }
    let definitions: Vec<Definition> = tree.document().definitions().collect();
    let [Definition::OperationDefinition(operation)] = definitions.as_slice() else {
        return Err(SelectError(
            "`select` must be a selection set only, not more operations or fragments".into(),
        ));
    };
    let kind = operation.operation_type().map(|t| t.source_string());
    if kind.as_deref().map(str::trim) != Some(tool.operation.as_str()) {
        return Err(SelectError("`select` changed the operation".into()));
    }
    let roots: Vec<Selection> = operation
        .selection_set()
        .map(|set| set.selections().collect())
        .unwrap_or_default();
    let only_the_field = match roots.as_slice() {
        [Selection::Field(field)] => {
            field.alias().is_none()
                && field
                    .name()
                    .is_some_and(|name| name.text().as_str() == tool.field)
        }
        _ => false,
    };
    if !only_the_field {
        return Err(SelectError(format!(
            "`select` must stay inside {}'s own selection: it reached other fields of the {} root",
            tool.name(),
            tool.operation.as_str()
        )));
    }
    Ok(())
}
