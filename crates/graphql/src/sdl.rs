//! A schema from SDL (`schema.graphql`), through apollo-compiler. Large
//! real schemas often break a strict validation rule somewhere, so the
//! schema it could build is used and what it found is kept as warnings.

use apollo_compiler::Schema as Compiled;
use apollo_compiler::ast::{self, OperationType};
use apollo_compiler::parser::Parser;
use apollo_compiler::schema::ExtendedType;

use crate::model::{EnumValue, Field, InputValue, Schema, TypeDef, TypeKind, TypeRef};

/// Nesting a hostile file may reach before the parser stops.
const RECURSION_LIMIT: usize = 256;
/// Tokens a schema may have (GitHub's has about 300,000).
const TOKEN_LIMIT: usize = 5_000_000;
/// Parser findings kept as warnings.
const MAX_WARNINGS: usize = 20;

/// The schema of SDL text, and what the parser and validation found wrong
/// with it.
pub fn read(text: &str) -> (Schema, Vec<String>) {
    let parsed = Parser::new()
        .recursion_limit(RECURSION_LIMIT)
        .token_limit(TOKEN_LIMIT)
        .parse_schema(text, "schema.graphql");
    let mut warnings = Vec::new();
    let mut keep = |errors: &apollo_compiler::validation::DiagnosticList| {
        let room = MAX_WARNINGS.saturating_sub(warnings.len());
        warnings.extend(errors.iter().take(room).map(|d| d.to_json().message));
    };
    let compiled = match parsed {
        Ok(compiled) => compiled,
        Err(with_errors) => {
            keep(&with_errors.errors);
            with_errors.partial
        }
    };
    let compiled = match compiled.validate() {
        Ok(valid) => valid.into_inner(),
        Err(with_errors) => {
            keep(&with_errors.errors);
            with_errors.partial
        }
    };
    (model_of(&compiled), warnings)
}

fn model_of(compiled: &Compiled) -> Schema {
    let root = |operation| compiled.root_operation(operation).map(|n| n.to_string());
    let mut schema = Schema {
        query: root(OperationType::Query),
        mutation: root(OperationType::Mutation),
        types: Default::default(),
    };
    for (name, ty) in &compiled.types {
        if ty.is_built_in() && !ty.is_scalar() {
            continue;
        }
        schema.types.insert(name.to_string(), type_def(ty));
    }
    schema
}

fn description(text: &Option<apollo_compiler::Node<str>>) -> Option<String> {
    text.as_ref().map(|d| String::from(&**d))
}

fn type_def(ty: &ExtendedType) -> TypeDef {
    match ty {
        ExtendedType::Scalar(s) => TypeDef::new(TypeKind::Scalar, description(&s.description)),
        ExtendedType::Object(o) => TypeDef {
            fields: o.fields.values().map(|f| field(f)).collect(),
            ..TypeDef::new(TypeKind::Object, description(&o.description))
        },
        ExtendedType::Interface(i) => TypeDef {
            fields: i.fields.values().map(|f| field(f)).collect(),
            ..TypeDef::new(TypeKind::Interface, description(&i.description))
        },
        ExtendedType::Union(u) => TypeDef::new(TypeKind::Union, description(&u.description)),
        ExtendedType::Enum(e) => TypeDef {
            enum_values: e
                .values
                .values()
                .map(|v| EnumValue {
                    name: v.value.to_string(),
                    description: description(&v.description),
                })
                .collect(),
            ..TypeDef::new(TypeKind::Enum, description(&e.description))
        },
        ExtendedType::InputObject(i) => TypeDef {
            input_fields: i.fields.values().map(|v| input_value(v)).collect(),
            ..TypeDef::new(TypeKind::InputObject, description(&i.description))
        },
    }
}

fn field(definition: &ast::FieldDefinition) -> Field {
    Field {
        name: definition.name.to_string(),
        description: description(&definition.description),
        args: definition
            .arguments
            .iter()
            .map(|a| input_value(a))
            .collect(),
        ty: type_ref(&definition.ty),
    }
}

fn input_value(definition: &ast::InputValueDefinition) -> InputValue {
    InputValue {
        name: definition.name.to_string(),
        description: description(&definition.description),
        ty: type_ref(&definition.ty),
        default_value: definition.default_value.as_ref().map(|v| v.to_string()),
    }
}

fn type_ref(ty: &ast::Type) -> TypeRef {
    match ty {
        ast::Type::Named(name) => TypeRef::Named(name.to_string()),
        ast::Type::NonNullNamed(name) => {
            TypeRef::NonNull(Box::new(TypeRef::Named(name.to_string())))
        }
        ast::Type::List(inner) => TypeRef::List(Box::new(type_ref(inner))),
        ast::Type::NonNullList(inner) => {
            TypeRef::NonNull(Box::new(TypeRef::List(Box::new(type_ref(inner)))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdl_reads_into_the_same_model() {
        let (schema, warnings) = read(
            r#"
            "A person"
            type User { id: ID!, name: String, friends(first: Int = 10): [User!]! }
            enum Role { ADMIN USER }
            input NewUser { name: String!, role: Role = USER }
            type Query { user(id: ID!): User, users: [User] }
            type Mutation { createUser(input: NewUser!): User! }
            "#,
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(schema.query.as_deref(), Some("Query"));
        assert_eq!(schema.mutation.as_deref(), Some("Mutation"));
        let user = &schema.types["User"];
        assert_eq!(user.kind, TypeKind::Object);
        assert_eq!(user.description.as_deref(), Some("A person"));
        let friends = &user.fields[2];
        assert_eq!(friends.ty.to_string(), "[User!]!");
        assert_eq!(friends.args[0].default_value.as_deref(), Some("10"));
        assert_eq!(
            schema.types["NewUser"].input_fields[1]
                .default_value
                .as_deref(),
            Some("USER")
        );
        assert_eq!(schema.types["Role"].enum_values.len(), 2);
        assert!(
            schema.types.contains_key("String"),
            "built-in scalars are known"
        );
        assert!(
            !schema.types.contains_key("__Schema"),
            "introspection types are not"
        );
    }

    #[test]
    fn a_schema_with_mistakes_is_read_as_far_as_it_goes() {
        let (schema, warnings) = read("type Query { a: Missing, b: Int }");
        assert!(!warnings.is_empty());
        assert_eq!(schema.types["Query"].fields.len(), 2);
        let (_, warnings) = read(&"[".repeat(10_000));
        assert!(
            !warnings.is_empty(),
            "a hostile nesting stops with an error"
        );
    }
}
