//! Root fields → tools (SPEC §8): one per field of the query and mutation
//! roots, named `query.<field>` / `mutation.<field>`; the arguments as a
//! JSON Schema whose input objects and enums are shared definitions; an
//! optional `select`; the default selection (the return type's leaf
//! fields one level deep) and the shape it answers with.

use serde_json::{Map, Value, json};

use crate::model::{Field, InputValue, Schema, TypeKind, TypeRef};

/// Which root a tool's field is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperationKind {
    Query,
    Mutation,
}

impl OperationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Query => "query",
            OperationKind::Mutation => "mutation",
        }
    }
}

/// One argument as the operation declares its variable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArgSpec {
    pub name: String,
    /// GraphQL's notation (`[ID!]!`).
    #[serde(rename = "type")]
    pub ty: String,
}

/// One root field as a tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GraphqlTool {
    /// `query.<field>` or `mutation.<field>`.
    pub name: String,
    pub description: Option<String>,
    pub operation: OperationKind,
    pub field: String,
    pub args: Vec<ArgSpec>,
    /// The fields selected when the call gives no `select`; None when the
    /// field returns a scalar or an enum (nothing to select).
    pub default_selection: Option<String>,
    /// Whether the input takes `select` (a field returning an object, with
    /// no argument of its own named `select`).
    pub takes_select: bool,
    pub input_schema: Value,
    /// The shape the default selection answers with.
    pub output_schema: Value,
    /// Mutations wait for approval; queries do not.
    pub requires_approval: bool,
}

/// The name of the input property that holds a selection set.
pub const SELECT: &str = "select";

/// Makes the tools of a schema and the definitions their schemas share.
pub(crate) struct ToolMaker<'s> {
    schema: &'s Schema,
    pub(crate) definitions: Map<String, Value>,
    pub(crate) warnings: Vec<String>,
}

impl<'s> ToolMaker<'s> {
    pub(crate) fn new(schema: &'s Schema) -> Self {
        ToolMaker {
            schema,
            definitions: Map::new(),
            warnings: Vec::new(),
        }
    }

    /// The tools of both roots, in the schema's order.
    pub(crate) fn tools(&mut self) -> Vec<GraphqlTool> {
        let roots = [
            (OperationKind::Query, self.schema.query.clone()),
            (OperationKind::Mutation, self.schema.mutation.clone()),
        ];
        let schema = self.schema;
        let mut tools = Vec::new();
        for (operation, root) in roots {
            let Some(root) = root else { continue };
            let Some(def) = schema.types.get(&root) else {
                self.warnings.push(format!(
                    "the {} root type `{root}` is not defined",
                    operation.as_str()
                ));
                continue;
            };
            for field in def.fields.iter().filter(|f| !f.name.starts_with("__")) {
                tools.push(self.tool(operation, field));
            }
        }
        tools
    }

    fn tool(&mut self, operation: OperationKind, field: &Field) -> GraphqlTool {
        let returns = self.kind_of(field.ty.named());
        let composite = returns.is_some_and(|k| !k.is_leaf());
        let default_selection = composite.then(|| self.default_selection(field.ty.named()));
        let takes_select = composite && !field.args.iter().any(|a| a.name == SELECT);
        let mut properties = Map::new();
        let mut required = Vec::new();
        for arg in &field.args {
            properties.insert(arg.name.clone(), self.argument_schema(arg));
            if arg.is_required() {
                required.push(Value::String(arg.name.clone()));
            }
        }
        if takes_select {
            let default = default_selection.as_deref().unwrap_or("__typename");
            properties.insert(
                SELECT.into(),
                json!({
                    "type": "string",
                    "description": format!(
                        "The fields to return, as a GraphQL selection set (such as `id name owner {{ login }}`). Default: `{default}`."
                    ),
                }),
            );
        }
        let mut input =
            json!({"type": "object", "properties": properties, "additionalProperties": false});
        if !required.is_empty() {
            input["required"] = Value::Array(required);
        }
        let output_schema = self.output_schema(&field.ty, default_selection.as_deref());
        GraphqlTool {
            name: format!("{}.{}", operation.as_str(), field.name),
            description: field.description.clone(),
            operation,
            field: field.name.clone(),
            args: field
                .args
                .iter()
                .map(|a| ArgSpec {
                    name: a.name.clone(),
                    ty: a.ty.to_string(),
                })
                .collect(),
            default_selection,
            takes_select,
            input_schema: input,
            output_schema,
            requires_approval: operation == OperationKind::Mutation,
        }
    }

    fn kind_of(&self, name: &str) -> Option<TypeKind> {
        self.schema.types.get(name).map(|t| t.kind)
    }

    /// The leaf fields of a composite type that take no required argument;
    /// `__typename` when there are none (a union has only that).
    fn default_selection(&self, type_name: &str) -> String {
        let leaves: Vec<&str> = self
            .schema
            .types
            .get(type_name)
            .map(|def| {
                def.fields
                    .iter()
                    .filter(|f| self.kind_of(f.ty.named()).is_some_and(TypeKind::is_leaf))
                    .filter(|f| !f.args.iter().any(InputValue::is_required))
                    .map(|f| f.name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        if leaves.is_empty() {
            "__typename".into()
        } else {
            leaves.join(" ")
        }
    }

    fn argument_schema(&mut self, arg: &InputValue) -> Value {
        let mut schema = self.input_schema(&arg.ty);
        let mut notes = Vec::new();
        if let Some(description) = &arg.description {
            notes.push(description.clone());
        }
        if let Some(default) = &arg.default_value {
            notes.push(format!("Default: {default}."));
        }
        if !notes.is_empty()
            && let Value::Object(map) = &mut schema
            && !map.contains_key("$ref")
        {
            map.insert("description".into(), Value::String(notes.join(" ")));
        } else if !notes.is_empty() {
            schema = json!({"allOf": [schema], "description": notes.join(" ")});
        }
        schema
    }

    /// The JSON Schema of an input type reference: nullable types also
    /// take `null`.
    fn input_schema(&mut self, ty: &TypeRef) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null_input(inner),
            other => or_null(self.non_null_input(other)),
        }
    }

    fn non_null_input(&mut self, ty: &TypeRef) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null_input(inner),
            TypeRef::List(inner) => json!({"type": "array", "items": self.input_schema(inner)}),
            TypeRef::Named(name) => self.named_input(name),
        }
    }

    fn named_input(&mut self, name: &str) -> Value {
        match self.kind_of(name) {
            Some(TypeKind::Scalar) => self.scalar(name),
            Some(TypeKind::Enum) => self.enum_ref(name),
            Some(TypeKind::InputObject) => self.input_object_ref(name),
            Some(_) | None => {
                self.warnings.push(format!(
                    "`{name}` is used as an input but is not an input type; it accepts anything"
                ));
                json!({})
            }
        }
    }

    fn scalar(&self, name: &str) -> Value {
        match name {
            "String" | "ID" => json!({"type": "string"}),
            "Int" => json!({"type": "integer"}),
            "Float" => json!({"type": "number"}),
            "Boolean" => json!({"type": "boolean"}),
            custom => {
                let about = self
                    .schema
                    .types
                    .get(custom)
                    .and_then(|t| t.description.as_deref())
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                json!({"type": "string", "description": format!("Custom scalar `{custom}`, as a string{about}")})
            }
        }
    }

    fn enum_ref(&mut self, name: &str) -> Value {
        if !self.definitions.contains_key(name)
            && let Some(def) = self.schema.types.get(name)
        {
            let values: Vec<Value> = def
                .enum_values
                .iter()
                .map(|v| Value::String(v.name.clone()))
                .collect();
            let mut schema = json!({"type": "string", "enum": values});
            if let Some(description) = &def.description {
                schema["description"] = Value::String(description.clone());
            }
            self.definitions.insert(name.to_string(), schema);
        }
        reference(name)
    }

    fn input_object_ref(&mut self, name: &str) -> Value {
        if self.definitions.contains_key(name) {
            return reference(name);
        }
        let schema = self.schema;
        let Some(def) = schema.types.get(name) else {
            return json!({});
        };
        // Placed first: an input object may contain itself.
        self.definitions.insert(name.to_string(), json!({}));
        let mut properties = Map::new();
        let mut required = Vec::new();
        for field in &def.input_fields {
            properties.insert(field.name.clone(), self.argument_schema(field));
            if field.is_required() {
                required.push(Value::String(field.name.clone()));
            }
        }
        let mut schema =
            json!({"type": "object", "properties": properties, "additionalProperties": false});
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        if let Some(description) = &def.description {
            schema["description"] = Value::String(description.clone());
        }
        self.definitions.insert(name.to_string(), schema);
        reference(name)
    }

    /// The shape a field answers with under `selection` (its leaf fields,
    /// one level), in the lists and nullability of its type.
    fn output_schema(&mut self, ty: &TypeRef, selection: Option<&str>) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null_output(inner, selection),
            other => or_null(self.non_null_output(other, selection)),
        }
    }

    fn non_null_output(&mut self, ty: &TypeRef, selection: Option<&str>) -> Value {
        match ty {
            TypeRef::NonNull(inner) => self.non_null_output(inner, selection),
            TypeRef::List(inner) => {
                json!({"type": "array", "items": self.output_schema(inner, selection)})
            }
            TypeRef::Named(name) => match self.kind_of(name) {
                Some(TypeKind::Scalar) => self.scalar(name),
                Some(TypeKind::Enum) => self.enum_ref(name),
                Some(_) => self.selected_object(name, selection.unwrap_or("__typename")),
                None => json!({}),
            },
        }
    }

    fn selected_object(&mut self, name: &str, selection: &str) -> Value {
        let fields: Vec<Field> = self
            .schema
            .types
            .get(name)
            .map(|def| def.fields.clone())
            .unwrap_or_default();
        let mut properties = Map::new();
        for selected in selection.split_whitespace() {
            let schema = match fields.iter().find(|f| f.name == selected) {
                Some(field) => self.output_schema(&field.ty, None),
                None if selected == "__typename" => json!({"type": "string"}),
                None => json!({}),
            };
            properties.insert(selected.to_string(), schema);
        }
        let mut schema = json!({"type": "object", "properties": properties});
        if let Some(description) = self
            .schema
            .types
            .get(name)
            .and_then(|t| t.description.clone())
        {
            schema["description"] = Value::String(description);
        }
        schema
    }
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

/// `schema`, also accepting `null`.
fn or_null(schema: Value) -> Value {
    match schema {
        Value::Object(map)
            if !map.contains_key("$ref")
                && !map.contains_key("enum")
                && map.get("type").is_some_and(Value::is_string) =>
        {
            // Rebuilt in order: `type` stays first (stored.rs reads it there).
            let widened = map.into_iter().map(|(key, value)| match key.as_str() {
                "type" => (key, json!([value, "null"])),
                _ => (key, value),
            });
            Value::Object(widened.collect())
        }
        Value::Object(map) if map.is_empty() => Value::Object(map),
        other => json!({"anyOf": [other, {"type": "null"}]}),
    }
}
