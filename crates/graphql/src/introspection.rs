//! A schema from an introspection result: `{"data": {"__schema": …}}` as
//! an endpoint answers the standard query, or `{"__schema": …}` as tools
//! save it. No crate reads this JSON into a schema without bringing a
//! client framework along, so this is serde over its documented shape.

use serde::Deserialize;

use crate::model::{EnumValue, Field, InputValue, Schema, TypeDef, TypeKind, TypeRef};

/// The introspection query an endpoint is asked: every type with its
/// fields, arguments, input fields and enum values, and type references
/// nested deep enough for `[[Int!]!]!`.
pub const INTROSPECTION_QUERY: &str = "query IntrospectionQuery { __schema { \
queryType { name } mutationType { name } \
types { kind name description \
fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } } \
inputFields { ...InputValue } \
enumValues(includeDeprecated: true) { name description } } } } \
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue } \
fragment TypeRef on __Type { kind name ofType { kind name ofType { kind name ofType { kind name \
ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }";

/// Why an introspection result cannot be read.
#[derive(Debug)]
pub struct IntrospectionError(pub String);

#[derive(Deserialize)]
#[serde(untagged)]
enum Envelope {
    Answer { data: Data },
    Bare(Data),
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "__schema")]
    schema: RawSchema,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSchema {
    query_type: Option<Named>,
    mutation_type: Option<Named>,
    #[serde(default)]
    types: Vec<RawType>,
}

#[derive(Deserialize)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawType {
    kind: String,
    name: Option<String>,
    description: Option<String>,
    fields: Option<Vec<RawField>>,
    input_fields: Option<Vec<RawInputValue>>,
    enum_values: Option<Vec<RawEnumValue>>,
}

#[derive(Deserialize)]
struct RawField {
    name: String,
    description: Option<String>,
    #[serde(default)]
    args: Vec<RawInputValue>,
    #[serde(rename = "type")]
    ty: RawTypeRef,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInputValue {
    name: String,
    description: Option<String>,
    #[serde(rename = "type")]
    ty: RawTypeRef,
    default_value: Option<String>,
}

#[derive(Deserialize)]
struct RawEnumValue {
    name: String,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTypeRef {
    kind: String,
    name: Option<String>,
    of_type: Option<Box<RawTypeRef>>,
}

impl RawTypeRef {
    fn into_ref(self) -> Result<TypeRef, IntrospectionError> {
        let inner = |of_type: Option<Box<RawTypeRef>>| {
            of_type
                .ok_or_else(|| {
                    IntrospectionError(format!("a {} type reference without ofType", self.kind))
                })
                .and_then(|inner| inner.into_ref())
        };
        match self.kind.as_str() {
            "NON_NULL" => Ok(TypeRef::NonNull(Box::new(inner(self.of_type)?))),
            "LIST" => Ok(TypeRef::List(Box::new(inner(self.of_type)?))),
            _ => self
                .name
                .map(TypeRef::Named)
                .ok_or_else(|| IntrospectionError("a named type reference without a name".into())),
        }
    }
}

fn kind_of(word: &str) -> Option<TypeKind> {
    Some(match word {
        "SCALAR" => TypeKind::Scalar,
        "OBJECT" => TypeKind::Object,
        "INTERFACE" => TypeKind::Interface,
        "UNION" => TypeKind::Union,
        "ENUM" => TypeKind::Enum,
        "INPUT_OBJECT" => TypeKind::InputObject,
        _ => return None,
    })
}

fn input_value(raw: RawInputValue) -> Result<InputValue, IntrospectionError> {
    Ok(InputValue {
        name: raw.name,
        description: raw.description,
        ty: raw.ty.into_ref()?,
        default_value: raw.default_value,
    })
}

/// The schema of an introspection result.
pub fn read(text: &str) -> Result<Schema, IntrospectionError> {
    let envelope: Envelope = serde_json::from_str(text)
        .map_err(|e| IntrospectionError(format!("not an introspection result: {e}")))?;
    let (Envelope::Answer { data } | Envelope::Bare(data)) = envelope;
    let raw = data.schema;
    let mut schema = Schema {
        query: raw.query_type.map(|t| t.name),
        mutation: raw.mutation_type.map(|t| t.name),
        types: Default::default(),
    };
    for ty in raw.types {
        let (Some(name), Some(kind)) = (ty.name, kind_of(&ty.kind)) else {
            continue;
        };
        let mut def = TypeDef::new(kind, ty.description);
        for field in ty.fields.unwrap_or_default() {
            def.fields.push(Field {
                name: field.name,
                description: field.description,
                args: field
                    .args
                    .into_iter()
                    .map(input_value)
                    .collect::<Result<_, _>>()?,
                ty: field.ty.into_ref()?,
            });
        }
        def.input_fields = ty
            .input_fields
            .unwrap_or_default()
            .into_iter()
            .map(input_value)
            .collect::<Result<_, _>>()?;
        def.enum_values = ty
            .enum_values
            .unwrap_or_default()
            .into_iter()
            .map(|v| EnumValue {
                name: v.name,
                description: v.description,
            })
            .collect();
        schema.types.insert(name, def);
    }
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(kind: &str, name: &str) -> serde_json::Value {
        json!({"kind": kind, "name": name, "ofType": null})
    }

    fn non_null(inner: serde_json::Value) -> serde_json::Value {
        json!({"kind": "NON_NULL", "name": null, "ofType": inner})
    }

    #[test]
    fn an_endpoints_answer_and_a_saved_schema_read_alike() {
        let schema = json!({"__schema": {
            "queryType": {"name": "Query"}, "mutationType": null,
            "types": [
                {"kind": "OBJECT", "name": "Query", "description": null, "fields": [
                    {"name": "user", "description": "One user", "args": [
                        {"name": "id", "description": null, "type": non_null(named("SCALAR", "ID")), "defaultValue": null},
                        {"name": "first", "description": null, "type": named("SCALAR", "Int"), "defaultValue": "10"}
                    ], "type": named("OBJECT", "User")}
                ], "inputFields": null, "enumValues": null},
                {"kind": "ENUM", "name": "Role", "description": null, "fields": null, "inputFields": null,
                 "enumValues": [{"name": "ADMIN", "description": null}]}
            ]
        }});
        let bare = read(&schema.to_string()).unwrap();
        let answer = read(&json!({"data": schema}).to_string()).unwrap();
        assert_eq!(bare, answer);
        assert_eq!(bare.query.as_deref(), Some("Query"));
        assert_eq!(bare.mutation, None);
        let user = &bare.types["Query"].fields[0];
        assert_eq!(user.args[0].ty.to_string(), "ID!");
        assert!(user.args[0].is_required());
        assert!(!user.args[1].is_required());
        assert_eq!(bare.types["Role"].enum_values[0].name, "ADMIN");
    }

    #[test]
    fn what_is_not_an_introspection_result_says_so() {
        assert!(read("{}").is_err());
        assert!(read("type Query { a: Int }").is_err());
        let broken = json!({"__schema": {"queryType": {"name": "Q"}, "types": [
            {"kind": "OBJECT", "name": "Q", "fields": [
                {"name": "a", "args": [], "type": {"kind": "LIST", "name": null, "ofType": null}}]}]}});
        assert!(read(&broken.to_string()).unwrap_err().0.contains("ofType"));
    }
}
