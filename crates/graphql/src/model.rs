//! A GraphQL schema as the importer reads it, whichever form it came in
//! (introspection JSON or SDL): the types and, for each, what the tools
//! need — fields with their arguments, input fields, enum values.

use std::collections::BTreeMap;
use std::fmt;

/// The schema: its root operation types and every named type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    pub query: Option<String>,
    pub mutation: Option<String>,
    pub types: BTreeMap<String, TypeDef>,
}

/// What kind of type a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    Scalar,
    Object,
    Interface,
    Union,
    Enum,
    InputObject,
}

impl TypeKind {
    /// A leaf is selected without a selection set of its own.
    pub fn is_leaf(self) -> bool {
        matches!(self, TypeKind::Scalar | TypeKind::Enum)
    }
}

/// One named type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDef {
    pub kind: TypeKind,
    pub description: Option<String>,
    /// An object's or an interface's fields.
    pub fields: Vec<Field>,
    /// An input object's fields.
    pub input_fields: Vec<InputValue>,
    /// An enum's values.
    pub enum_values: Vec<EnumValue>,
}

impl TypeDef {
    pub fn new(kind: TypeKind, description: Option<String>) -> TypeDef {
        TypeDef {
            kind,
            description,
            fields: Vec::new(),
            input_fields: Vec::new(),
            enum_values: Vec::new(),
        }
    }
}

/// A field of an object or interface type.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub description: Option<String>,
    pub args: Vec<InputValue>,
    pub ty: TypeRef,
}

/// An argument, or a field of an input object.
#[derive(Debug, Clone, PartialEq)]
pub struct InputValue {
    pub name: String,
    pub description: Option<String>,
    pub ty: TypeRef,
    /// The default, as GraphQL text (`10`, `"x"`, `ASC`).
    pub default_value: Option<String>,
}

impl InputValue {
    /// Whether a caller must give it: non-null and without a default.
    pub fn is_required(&self) -> bool {
        self.ty.is_non_null() && self.default_value.is_none()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnumValue {
    pub name: String,
    pub description: Option<String>,
}

/// A reference to a type: named, a list of, or non-null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeRef {
    Named(String),
    List(Box<TypeRef>),
    NonNull(Box<TypeRef>),
}

impl TypeRef {
    /// The named type under the lists and non-nulls.
    pub fn named(&self) -> &str {
        match self {
            TypeRef::Named(name) => name,
            TypeRef::List(inner) | TypeRef::NonNull(inner) => inner.named(),
        }
    }

    pub fn is_non_null(&self) -> bool {
        matches!(self, TypeRef::NonNull(_))
    }
}

/// GraphQL's own notation (`[Int!]!`), as a variable is declared.
impl fmt::Display for TypeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeRef::Named(name) => f.write_str(name),
            TypeRef::List(inner) => write!(f, "[{inner}]"),
            TypeRef::NonNull(inner) => write!(f, "{inner}!"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_reference_prints_as_graphql_writes_it() {
        let ty = TypeRef::NonNull(Box::new(TypeRef::List(Box::new(TypeRef::NonNull(
            Box::new(TypeRef::Named("Int".into())),
        )))));
        assert_eq!(ty.to_string(), "[Int!]!");
        assert_eq!(ty.named(), "Int");
        assert!(ty.is_non_null());
    }
}
