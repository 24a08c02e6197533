//! The ClusterPromotion CRD's `openAPIV3Schema` as a JSON Schema (draft 2020-12), validated with
//! the `boon` crate, and its errors worded as the API server words them (`Unsupported value: …`,
//! `Required value`), so that `lint` reports what `kubectl apply` would refuse, every error at once.
//!
//! A CRD schema is not quite JSON Schema: the Kubernetes extensions (`x-kubernetes-*`, `nullable`,
//! formats the API server does not check) are translated in `translate`.

use boon::{Compiler, ErrorKind, Schemas, ValidationError};
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

/// One thing the API server would refuse, at a field path such as `spec.stages[0].name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

/// Kubernetes' DNS-1123 subdomain (object names) and label rules (apimachinery `validation.go`).
const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const LABEL_VALUE: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
const QUALIFIED_NAME: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// Formats the API server checks (`formats.go` keeps a fixed list and drops the others, such as
/// `int32`); of those, the ones a CRD of Sveltos or promoter uses. `byte` is registered below.
const ENFORCED_FORMATS: &[&str] = &["date-time", "byte"];

/// A compiled CRD schema.
pub struct CrdSchema {
    schemas: Schemas,
    index: boon::SchemaIndex,
}

impl CrdSchema {
    /// Compiles the `openAPIV3Schema` of a CRD served as `api_version`/`kind`.
    pub fn compile(
        open_api_v3_schema: &Value,
        api_version: &str,
        kind: &str,
    ) -> Result<Self, String> {
        let mut schema = open_api_v3_schema.clone();
        translate(&mut schema);
        add_object_meta(&mut schema, api_version, kind);
        schema
            .as_object_mut()
            .ok_or("openAPIV3Schema is not an object")?
            .insert(
                "$schema".into(),
                json!("https://json-schema.org/draft/2020-12/schema"),
            );
        let url = "urn:promoter:crd";
        let mut compiler = Compiler::new();
        compiler.enable_format_assertions();
        compiler.register_format(boon::Format {
            name: "byte",
            func: validate_byte,
        });
        compiler
            .add_resource(url, schema)
            .map_err(|e| format!("CRD schema: {e}"))?;
        let mut schemas = Schemas::new();
        let index = compiler
            .compile(url, &mut schemas)
            .map_err(|e| format!("CRD schema: {e:#}"))?;
        Ok(CrdSchema { schemas, index })
    }

    /// Every error of `object` (in the schema's order; `lint` sorts them by position).
    pub fn validate(&self, object: &Value) -> Vec<SchemaError> {
        let mut out = Vec::new();
        if let Err(e) = self.schemas.validate(object, self.index) {
            collect(&e, object, &mut out);
        }
        out.dedup();
        out
    }
}

/// promoter's ClusterPromotion CRD as JSON, what both checks of `lint` compile from.
fn crd_json() -> Result<Value, String> {
    serde_json::to_value(crate::crd::cluster_promotion_crd()).map_err(|e| format!("CRD: {e}"))
}

/// A CRD's first version's schema, compiled for objects of its group, version and kind.
fn compile_crd(crd: &Value) -> Result<CrdSchema, String> {
    let text = |pointer: &str| {
        crd.pointer(pointer)
            .and_then(Value::as_str)
            .ok_or(format!("CRD has no {pointer}"))
    };
    let api_version = format!(
        "{}/{}",
        text("/spec/group")?,
        text("/spec/versions/0/name")?
    );
    let schema = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema")
        .ok_or("CRD has no openAPIV3Schema")?;
    CrdSchema::compile(schema, &api_version, text("/spec/names/kind")?)
}

/// promoter's own ClusterPromotion CRD (what `promoter crd` prints), compiled once.
pub fn cluster_promotion() -> Result<&'static CrdSchema, String> {
    static SCHEMA: OnceLock<Result<CrdSchema, String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| compile_crd(&crd_json()?))
        .as_ref()
        .map_err(Clone::clone)
}

/// The schema of one of promoter's own kinds (`PromotionFreeze`, `PromotionRevision`), compiled
/// once; None for another kind.
pub fn own_kind(kind: &str) -> Option<Result<&'static CrdSchema, String>> {
    static SCHEMAS: OnceLock<Vec<(String, Result<CrdSchema, String>)>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| own_compiled(compile_crd));
    schemas
        .iter()
        .find(|(k, _)| k == kind)
        .map(|(_, s)| s.as_ref().map_err(Clone::clone))
}

/// Each of promoter's own CRDs, by kind, compiled by `compile`.
fn own_compiled<T>(
    compile: impl Fn(&Value) -> Result<T, String>,
) -> Vec<(String, Result<T, String>)> {
    crate::crd::own_crds()
        .into_iter()
        .map(|crd| {
            let kind = crd.spec.names.kind.clone();
            let compiled = serde_json::to_value(crd)
                .map_err(|e| format!("CRD: {e}"))
                .and_then(|v| compile(&v));
            (kind, compiled)
        })
        .collect()
}

/// The ClusterPromotion CRD's CEL rules (`x-kubernetes-validations`, e.g. "ChartName must be
/// defined"), which JSON Schema cannot express: evaluated as the API server does, by the fake API
/// server's schema (`crate::fake::schema`, which carries cel-go's texts).
pub fn rule_errors(raw: &Value) -> Result<Vec<SchemaError>, String> {
    static RULES: OnceLock<Result<crate::fake::schema::Crd, String>> = OnceLock::new();
    let crd = RULES
        .get_or_init(|| crate::fake::schema::crd_from_value(&crd_json()?))
        .as_ref()
        .map_err(Clone::clone)?;
    Ok(errors_of_rules(crd, raw))
}

/// What `crd`'s CEL rules say of `raw`, as lint's errors.
fn errors_of_rules(crd: &crate::fake::schema::Crd, raw: &Value) -> Vec<SchemaError> {
    crd.schema
        .rule_errors(raw)
        .into_iter()
        .map(|e| SchemaError {
            message: e.body(),
            path: e.field,
        })
        .collect()
}

/// The CEL rules of one of promoter's own kinds (a PromotionFreeze's operator and time range),
/// evaluated as the API server does; empty for a kind without rules.
pub fn own_rule_errors(kind: &str, raw: &Value) -> Result<Vec<SchemaError>, String> {
    static RULES: OnceLock<Vec<(String, Result<crate::fake::schema::Crd, String>)>> =
        OnceLock::new();
    let crds = RULES.get_or_init(|| own_compiled(crate::fake::schema::crd_from_value));
    let Some((_, crd)) = crds.iter().find(|(k, _)| k == kind) else {
        return Ok(Vec::new());
    };
    Ok(errors_of_rules(crd.as_ref().map_err(Clone::clone)?, raw))
}

/// Kubernetes extensions → JSON Schema, node by node.
fn translate(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    let flag = |map: &Map<String, Value>, key: &str| map.get(key) == Some(&Value::Bool(true));
    // The CEL rules (`x-kubernetes-validations`) are not JSON Schema; the ones promoter knows are
    // checked by `validation::schema_violations`.
    map.remove("x-kubernetes-validations");
    if flag(map, "x-kubernetes-int-or-string") {
        map.remove("anyOf");
        map.insert("type".into(), json!(["integer", "string"]));
    }
    if flag(map, "nullable")
        && let Some(Value::String(t)) = map.get("type").cloned()
    {
        map.insert("type".into(), json!([t, "null"]));
        if let Some(Value::Array(allowed)) = map.get_mut("enum") {
            allowed.push(Value::Null);
        }
    }
    if let Some(Value::String(f)) = map.get("format")
        && !ENFORCED_FORMATS.contains(&f.as_str())
    {
        map.remove("format");
    }
    // Unknown fields: kubectl's strict field validation refuses them, a lax client has them pruned.
    if map.contains_key("properties")
        && !map.contains_key("additionalProperties")
        && !flag(map, "x-kubernetes-preserve-unknown-fields")
    {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = map.get_mut(key) {
            props.values_mut().for_each(translate);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = map.get_mut(key) {
            translate(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(translate);
        }
    }
}

/// `apiVersion`, `kind` and `metadata` as the API server checks them for this resource: a CRD's
/// schema says only `type: object` for metadata, the server validates the ObjectMeta itself.
fn add_object_meta(schema: &mut Value, api_version: &str, kind: &str) {
    let Some(root) = schema.as_object_mut() else {
        return;
    };
    let props = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(props) = props {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "enum": [api_version]}),
        );
        props.insert("kind".into(), json!({"type": "string", "enum": [kind]}));
        props.insert(
            "metadata".into(),
            json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN},
                    "labels": {
                        "type": "object",
                        "propertyNames": {"pattern": QUALIFIED_NAME},
                        "additionalProperties": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
                    },
                    "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            }),
        );
        // With the status subresource, the API server ignores the status of a create or update.
        props.insert("status".into(), json!({}));
    }
    root.insert("required".into(), json!(["apiVersion", "kind", "metadata"]));
}

fn validate_byte(v: &Value) -> Result<(), Box<dyn std::error::Error>> {
    use base64::Engine;
    match v {
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map(|_| ())
            .map_err(|e| e.into()),
        _ => Ok(()),
    }
}

/// The leaves of boon's error tree; a failed `anyOf`/`oneOf`/`not` is one error of its own
/// (its branches' failures would contradict each other).
fn collect(e: &ValidationError, object: &Value, out: &mut Vec<SchemaError>) {
    let (mut path, mut pointer) = (String::new(), String::new());
    for token in &e.instance_location.tokens {
        match token {
            boon::InstanceToken::Prop(p) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(p);
                pointer.push('/');
                pointer.push_str(&p.replace('~', "~0").replace('/', "~1"));
            }
            boon::InstanceToken::Item(i) => {
                path.push_str(&format!("[{i}]"));
                pointer.push_str(&format!("/{i}"));
            }
        }
    }
    let child = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    let mut push = |path: String, message: String| out.push(SchemaError { path, message });
    match &e.kind {
        ErrorKind::Group
        | ErrorKind::Schema { .. }
        | ErrorKind::Reference { .. }
        | ErrorKind::AllOf
        | ErrorKind::PropertyName { .. }
            if !e.causes.is_empty() =>
        {
            if let ErrorKind::PropertyName { prop } = &e.kind {
                push(
                    child(prop),
                    format!(
                        "Invalid value: {prop:?}: a qualified name (an optional DNS subdomain prefix and '/', then at most 63 characters: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric)"
                    ),
                );
                return;
            }
            for cause in &e.causes {
                collect(cause, object, out);
            }
        }
        ErrorKind::Required { want } => {
            for key in want {
                push(child(key), "Required value".into());
            }
        }
        ErrorKind::AdditionalProperties { got } => {
            for key in got {
                push(
                    child(key),
                    format!(
                        "unknown field {key:?}: kubectl's strict field validation refuses it; a client that does not validate has it pruned"
                    ),
                );
            }
        }
        kind => push(path, message(kind, object.pointer(&pointer))),
    }
}

fn quote(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn invalid(got: &dyn std::fmt::Display, should: String) -> String {
    format!("Invalid value: {got}: should {should}")
}

fn too_many(got: &usize, want: &usize, what: &str) -> String {
    format!("Too many: {got}: must have at most {want} {what}")
}

/// The API server's wording (apimachinery `field.Error` types: Unsupported value, Invalid value,
/// Too long, Too many), with the value that failed.
fn message(kind: &ErrorKind, got: Option<&Value>) -> String {
    match kind {
        ErrorKind::Enum { want } => format!(
            "Unsupported value: {}: supported values: {}",
            got.map(quote).unwrap_or_default(),
            want.iter().map(quote).collect::<Vec<_>>().join(", ")
        ),
        ErrorKind::Const { want } => format!("Unsupported value: supported value: {}", quote(want)),
        ErrorKind::Type { got, want } => {
            let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            format!(
                "Invalid value: \"{got}\": must be of type {}",
                want.join(" or ")
            )
        }
        ErrorKind::Pattern { got, want } => {
            format!("Invalid value: {got:?}: should match '{want}'")
        }
        ErrorKind::MaxLength { want, .. } => format!("Too long: may not be more than {want} bytes"),
        ErrorKind::MinLength { want, .. } => {
            format!("Invalid value: should be at least {want} chars long")
        }
        ErrorKind::MaxItems { got, want } => too_many(got, want, "items"),
        ErrorKind::MinItems { got, want } => invalid(got, format!("have at least {want} items")),
        ErrorKind::MaxProperties { got, want } => too_many(got, want, "properties"),
        ErrorKind::MinProperties { got, want } => {
            invalid(got, format!("have at least {want} properties"))
        }
        ErrorKind::Minimum { got, want } => {
            invalid(got, format!("be greater than or equal to {want}"))
        }
        ErrorKind::Maximum { got, want } => {
            invalid(got, format!("be less than or equal to {want}"))
        }
        ErrorKind::ExclusiveMinimum { got, want } => {
            invalid(got, format!("be greater than {want}"))
        }
        ErrorKind::ExclusiveMaximum { got, want } => invalid(got, format!("be less than {want}")),
        ErrorKind::MultipleOf { got, want } => invalid(got, format!("be a multiple of {want}")),
        ErrorKind::UniqueItems { got } => {
            format!("Duplicate value: items {} and {} are equal", got[0], got[1])
        }
        ErrorKind::Format { got, want, .. } => {
            format!("Invalid value: {}: must be a valid {want}", quote(got))
        }
        other => format!("Invalid value: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(errors: Vec<SchemaError>) -> Vec<String> {
        let mut paths: Vec<String> = errors.into_iter().map(|e| e.path).collect();
        paths.sort();
        paths
    }

    /// The Kubernetes extensions read as the API server reads them.
    #[test]
    fn kubernetes_extensions() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "n": {"x-kubernetes-int-or-string": true,
                  "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+%$"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"a": {"type": "string"}}},
            "opt": {"type": "string", "nullable": true, "enum": ["x"]},
            "count": {"type": "integer", "format": "int32"},
            "when": {"type": "string", "format": "date-time"},
            "rule": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'x'"}]},
        }}}});
        let crd = CrdSchema::compile(&schema, "g.io/v1", "K").unwrap();
        let object = |spec: Value| json!({"apiVersion": "g.io/v1", "kind": "K", "metadata": {"name": "a"}, "spec": spec});
        let fine = object(
            json!({"n": 3, "free": {"b": 1}, "opt": null, "count": 5_000_000_000u64,
            "when": "2026-01-01T00:00:00Z", "rule": "y"}),
        );
        assert_eq!(crd.validate(&fine), vec![]);
        assert_eq!(crd.validate(&object(json!({"n": "50%"}))), vec![]);
        let bad = object(json!({"n": true, "opt": "z", "when": "yesterday", "extra": 1}));
        assert_eq!(
            paths(crd.validate(&bad)),
            ["spec.extra", "spec.n", "spec.opt", "spec.when"]
        );
        let unnamed = json!({"apiVersion": "g.io/v2", "kind": "K", "metadata": {}});
        let errors = crd.validate(&unnamed);
        assert_eq!(paths(errors.clone()), ["apiVersion", "metadata.name"]);
        assert_eq!(
            errors[0].message,
            "Unsupported value: \"g.io/v2\": supported values: \"g.io/v1\""
        );
    }
}
