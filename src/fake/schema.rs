//! Structural schemas of custom resources, compiled once from a CRD's `openAPIV3Schema` into a tree,
//! and the three things kube-apiserver's apiextensions does with them on every write (and, for
//! defaulting and pruning, on every read from storage):
//!
//! * **pruning** of fields the schema does not declare, unless `x-kubernetes-preserve-unknown-fields`
//!   (the root and `x-kubernetes-embedded-resource` objects keep `apiVersion`, `kind` and
//!   `metadata`, whose unknown fields are dropped as ObjectMeta decoding drops them);
//!   after kubernetes/kubernetes `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm.go`;
//! * **defaulting**: a property's `default` is set when the property is absent (or null and not
//!   nullable) and its parent object is present, at every depth, array items included, and the
//!   defaulted value is defaulted in turn; then nulls of non-nullable fields without a default are
//!   dropped (`schema/defaulting/algorithm.go`, `PruneNonNullableNullsWithoutDefaults`);
//! * **validation** with kube-openapi's rules and texts (`k8s.io/kube-openapi/pkg/validation/errors/schema.go`,
//!   converted to field errors by `kubeOpenAPIResultToFieldErrors` in
//!   `apiextensions-apiserver/pkg/apiserver/validation/validation.go`), `x-kubernetes-list-type`
//!   uniqueness (`schema/listtype/validation.go`) and `x-kubernetes-validations` CEL rules
//!   (`apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`), with update ratcheting:
//!   a subtree equal to the stored one is not re-validated (feature `CRDValidationRatcheting`, on by
//!   default since 1.30).
//!
//! Read for kubernetes v1.33 (commit 490ffa4 and later of kubernetes/kubernetes); no code copied.

use super::field::{BadValue, ErrorType, FieldError, child, go_quote};
use cel_interpreter::{Context, Program};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ty {
    #[default]
    Any,
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Any => "",
            Ty::Object => "object",
            Ty::Array => "array",
            Ty::String => "string",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::Boolean => "boolean",
        }
    }
}

struct Rule {
    source: String,
    program: Option<Program>,
    message: Option<String>,
    field_path: Option<String>,
    transition: bool,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule({:?})", self.source)
    }
}

/// One node of a structural schema.
#[derive(Debug, Default)]
pub struct Schema {
    ty: Ty,
    properties: BTreeMap<String, Schema>,
    additional: Option<Box<Schema>>,
    items: Option<Box<Schema>>,
    required: Vec<String>,
    enumeration: Vec<Value>,
    default: Option<Value>,
    nullable: bool,
    preserve_unknown: bool,
    embedded: bool,
    int_or_string: bool,
    pattern: Option<(String, Regex)>,
    format: Option<String>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    list_type: Option<String>,
    list_map_keys: Vec<String>,
    rules: Vec<Rule>,
}

/// The ObjectMeta fields a server keeps; anything else under `metadata` is dropped on decoding.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl Schema {
    /// Compiles an `openAPIV3Schema` (as JSON). Patterns and CEL rules that do not compile are
    /// errors: the real server refuses such a CRD.
    pub fn compile(v: &Value) -> Result<Schema, String> {
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let ty = match v.get("type").and_then(Value::as_str) {
            None | Some("") => Ty::Any,
            Some("object") => Ty::Object,
            Some("array") => Ty::Array,
            Some("string") => Ty::String,
            Some("integer") => Ty::Integer,
            Some("number") => Ty::Number,
            Some("boolean") => Ty::Boolean,
            Some(other) => return Err(format!("unknown type {other:?}")),
        };
        let mut properties = BTreeMap::new();
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, p) in props {
                properties.insert(
                    k.clone(),
                    Schema::compile(p).map_err(|e| format!("{k}: {e}"))?,
                );
            }
        }
        let additional = match v.get("additionalProperties") {
            Some(Value::Object(_)) => Some(Box::new(Schema::compile(&v["additionalProperties"])?)),
            // `additionalProperties: true` is only allowed with preserve-unknown-fields semantics.
            Some(Value::Bool(true)) => Some(Box::new(Schema {
                preserve_unknown: true,
                ..Default::default()
            })),
            _ => None,
        };
        let items = match v.get("items") {
            Some(i @ Value::Object(_)) => Some(Box::new(Schema::compile(i)?)),
            _ => None,
        };
        let pattern = match v.get("pattern").and_then(Value::as_str) {
            Some(p) => Some((
                p.to_string(),
                Regex::new(p).map_err(|e| format!("pattern {p:?}: {e}"))?,
            )),
            None => None,
        };
        let mut rules = Vec::new();
        for r in v
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let source = r
                .get("rule")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let program = crate::health::cel::compile(&[(String::new(), source.clone())])
                .ok()
                .and_then(|mut p| p.pop())
                .map(|(_, p)| p);
            rules.push(Rule {
                transition: source.contains("oldSelf"),
                program,
                message: r.get("message").and_then(Value::as_str).map(String::from),
                field_path: r.get("fieldPath").and_then(Value::as_str).map(String::from),
                source,
            });
        }
        Ok(Schema {
            ty,
            properties,
            additional,
            items,
            required: v
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect(),
            enumeration: v
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            default: v.get("default").cloned(),
            nullable: flag("nullable"),
            preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
            embedded: flag("x-kubernetes-embedded-resource"),
            int_or_string: flag("x-kubernetes-int-or-string"),
            pattern,
            format: v.get("format").and_then(Value::as_str).map(String::from),
            min_length: u64_of(v, "minLength"),
            max_length: u64_of(v, "maxLength"),
            min_items: u64_of(v, "minItems"),
            max_items: u64_of(v, "maxItems"),
            min_properties: u64_of(v, "minProperties"),
            max_properties: u64_of(v, "maxProperties"),
            minimum: v.get("minimum").and_then(Value::as_f64),
            maximum: v.get("maximum").and_then(Value::as_f64),
            exclusive_minimum: flag("exclusiveMinimum"),
            exclusive_maximum: flag("exclusiveMaximum"),
            list_type: v
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .map(String::from),
            list_map_keys: v
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect(),
            rules,
        })
    }

    /// Pruning, then defaulting, of a whole object (the root is a resource: it keeps
    /// `apiVersion`, `kind` and `metadata`).
    pub fn normalise(&self, obj: &mut Value) {
        self.prune(obj, true);
        self.apply_defaults(obj);
        self.drop_nulls(obj);
    }

    fn prune(&self, v: &mut Value, resource_root: bool) {
        let keep_type_meta = resource_root || self.embedded;
        match v {
            Value::Object(m) => {
                if keep_type_meta && let Some(Value::Object(meta)) = m.get_mut("metadata") {
                    meta.retain(|k, _| OBJECT_META_FIELDS.contains(&k.as_str()));
                }
                m.retain(|k, child| {
                    if keep_type_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        return true;
                    }
                    if let Some(p) = self.properties.get(k) {
                        p.prune(child, false);
                        true
                    } else if let Some(a) = &self.additional {
                        a.prune(child, false);
                        true
                    } else {
                        self.preserve_unknown
                    }
                });
            }
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    items.iter_mut().for_each(|i| s.prune(i, false));
                } else if !self.preserve_unknown {
                    // Items without a schema keep nothing of their objects.
                    for i in items.iter_mut() {
                        if let Value::Object(m) = i {
                            m.clear();
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn apply_defaults(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, p) in &self.properties {
                    if let Some(d) = &p.default {
                        let absent = match m.get(k) {
                            None => true,
                            Some(Value::Null) => !p.nullable,
                            Some(_) => false,
                        };
                        if absent {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                }
                for (k, child) in m.iter_mut() {
                    if let Some(p) = self.properties.get(k) {
                        p.apply_defaults(child);
                    } else if let Some(a) = &self.additional {
                        a.apply_defaults(child);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    for i in items.iter_mut() {
                        if i.is_null()
                            && !s.nullable
                            && let Some(d) = &s.default
                        {
                            *i = d.clone();
                        }
                        s.apply_defaults(i);
                    }
                }
            }
            _ => {}
        }
    }

    fn drop_nulls(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, child| {
                    let schema = self.properties.get(k).or(self.additional.as_deref());
                    match schema {
                        Some(s) if child.is_null() => s.nullable || s.default.is_some(),
                        Some(s) => {
                            s.drop_nulls(child);
                            true
                        }
                        None => true,
                    }
                });
            }
            Value::Array(items) => {
                if let Some(s) = &self.items {
                    items.iter_mut().for_each(|i| s.drop_nulls(i));
                }
            }
            _ => {}
        }
    }

    /// Validates a whole object; `old` is the stored object on an update (for ratcheting and
    /// transition rules).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let (mut errs, rule_errs) = self.validate_parts(obj, old);
        if errs.iter().any(|e| e.kind == ErrorType::TypeInvalid) {
            // As the real server: rules are not evaluated over values of the wrong type.
            errs.push(FieldError::new(
                ErrorType::Invalid,
                "<nil>",
                BadValue::Raw("null".into()),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            errs.extend(rule_errs);
        }
        errs
    }

    /// The failures of the CEL rules (`x-kubernetes-validations`) alone, for `promoter lint`, which
    /// checks the structural schema with a JSON-schema validator; none when a value has the wrong
    /// type (the server does not evaluate rules then).
    pub fn rule_errors(&self, obj: &Value) -> Vec<FieldError> {
        let (errs, rule_errs) = self.validate_parts(obj, None);
        if errs.iter().any(|e| e.kind == ErrorType::TypeInvalid) {
            return Vec::new();
        }
        rule_errs
    }

    /// Structural errors, and rule errors.
    fn validate_parts(
        &self,
        obj: &Value,
        old: Option<&Value>,
    ) -> (Vec<FieldError>, Vec<FieldError>) {
        let mut errs = Vec::new();
        let mut rule_errs = Vec::new();
        if let (Some(m), Some(props)) = (obj.as_object(), Some(&self.properties)) {
            // The root: ObjectMeta is validated elsewhere; apiVersion and kind are set by the server.
            for key in &self.required {
                if !m.contains_key(key) {
                    errs.push(FieldError::required(key, ""));
                }
            }
            for (k, v) in m {
                if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(p) = props.get(k) {
                    p.check(v, old.and_then(|o| o.get(k)), k, &mut errs, &mut rule_errs);
                }
            }
            self.run_rules(obj, old, "", &mut rule_errs);
        }
        (errs, rule_errs)
    }

    fn check(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        errs: &mut Vec<FieldError>,
        rule_errs: &mut Vec<FieldError>,
    ) {
        if old == Some(v) {
            // Ratcheting: an unchanged value is not validated again.
            return;
        }
        if v.is_null() {
            if self.nullable || (self.ty == Ty::Any && !self.int_or_string) {
                return;
            }
            let want = if self.int_or_string {
                "integer,string"
            } else {
                self.ty.name()
            };
            errs.push(type_error(path, "null", want));
            return;
        }
        let actual = json_type(v);
        let type_ok = if self.int_or_string {
            matches!(actual, "integer" | "string")
        } else {
            match self.ty {
                Ty::Any => true,
                Ty::Number => matches!(actual, "integer" | "number"),
                t => t.name() == actual,
            }
        };
        if !type_ok {
            let want = if self.int_or_string {
                "integer,string"
            } else {
                self.ty.name()
            };
            errs.push(type_error(path, actual, want));
            return;
        }
        if !self.enumeration.is_empty() && !self.enumeration.contains(v) {
            let supported: Vec<String> = self
                .enumeration
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            errs.push(FieldError::not_supported(path, v, &supported));
        }
        match v {
            Value::String(s) => self.check_string(s, v, path, errs),
            Value::Number(_) => self.check_number(v, path, errs),
            Value::Array(items) => self.check_array(items, v, old, path, errs, rule_errs),
            Value::Object(m) => self.check_object(m, v, old, path, errs, rule_errs),
            _ => {}
        }
        self.run_rules(v, old, path, rule_errs);
    }

    fn check_string(&self, s: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let chars = s.chars().count() as u64;
        if let Some(max) = self.max_length
            && chars > max
        {
            errs.push(FieldError::too_long(path, max as usize));
        }
        if let Some(min) = self.min_length
            && chars < min
        {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some((src, re)) = &self.pattern
            && !re.is_match(s)
        {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body should match '{src}'"),
            ));
        }
        if let Some(format) = &self.format
            && !format_ok(format, s)
        {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body must be of type {format}: {}", go_quote(s)),
            ));
        }
    }

    fn check_number(&self, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
        let Some(x) = v.as_f64() else { return };
        let shown = |b: f64| {
            if b.fract() == 0.0 && b.abs() < 1e15 {
                format!("{}", b as i64)
            } else {
                format!("{b}")
            }
        };
        if let Some(min) = self.minimum
            && (x < min || (self.exclusive_minimum && x == min))
        {
            let op = if self.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body should be {op} {}", shown(min)),
            ));
        }
        if let Some(max) = self.maximum
            && (x > max || (self.exclusive_maximum && x == max))
        {
            let op = if self.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{path} in body should be {op} {}", shown(max)),
            ));
        }
        let range = match self.format.as_deref() {
            Some("int32") => Some((i32::MIN as i64, i32::MAX as i64)),
            Some("int64") => Some((i64::MIN, i64::MAX)),
            _ => None,
        };
        if let Some((lo, hi)) = range {
            let fits = v.as_i64().is_some_and(|i| i >= lo && i <= hi);
            if !fits {
                errs.push(FieldError::invalid(
                    path,
                    v,
                    format!(
                        "{path} in body must be of type {}: {}",
                        self.format.as_deref().unwrap_or_default(),
                        go_quote(&v.to_string())
                    ),
                ));
            }
        }
    }

    fn check_array(
        &self,
        items: &[Value],
        v: &Value,
        old: Option<&Value>,
        path: &str,
        errs: &mut Vec<FieldError>,
        rule_errs: &mut Vec<FieldError>,
    ) {
        let n = items.len() as u64;
        if let Some(max) = self.max_items
            && n > max
        {
            errs.push(FieldError::new(
                ErrorType::TooMany,
                path,
                BadValue::Raw(n.to_string()),
                format!("must have at most {max} items"),
            ));
        }
        if let Some(min) = self.min_items
            && n < min
        {
            errs.push(FieldError::new(
                ErrorType::Invalid,
                path,
                BadValue::Raw(n.to_string()),
                format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(s) = &self.items {
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                // Only map lists correlate items with the stored ones (by their keys).
                let old_item = match (self.list_type.as_deref(), old_items) {
                    (Some("map"), Some(olds)) => olds
                        .iter()
                        .find(|o| self.list_map_keys.iter().all(|k| o.get(k) == item.get(k))),
                    _ => None,
                };
                s.check(item, old_item, &format!("{path}[{i}]"), errs, rule_errs);
            }
        }
        match self.list_type.as_deref() {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        errs.push(FieldError::new(
                            ErrorType::Duplicate,
                            &format!("{path}[{i}]"),
                            BadValue::Json(item.clone()),
                            "",
                        ));
                    }
                }
            }
            Some("map") => {
                let key_of = |item: &Value| {
                    let mut m = Map::new();
                    for k in &self.list_map_keys {
                        if let Some(kv) = item.get(k) {
                            m.insert(k.clone(), kv.clone());
                        } else if let Some(d) = self
                            .items
                            .as_ref()
                            .and_then(|s| s.properties.get(k))
                            .and_then(|p| p.default.clone())
                        {
                            m.insert(k.clone(), d);
                        }
                    }
                    Value::Object(m)
                };
                let keys: Vec<Value> = items.iter().map(key_of).collect();
                for i in 0..keys.len() {
                    if keys[..i].contains(&keys[i]) {
                        errs.push(FieldError::new(
                            ErrorType::Duplicate,
                            &format!("{path}[{i}]"),
                            BadValue::Json(keys[i].clone()),
                            "",
                        ));
                    }
                }
            }
            _ => {}
        }
        let _ = v;
    }

    fn check_object(
        &self,
        m: &Map<String, Value>,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        errs: &mut Vec<FieldError>,
        rule_errs: &mut Vec<FieldError>,
    ) {
        for key in &self.required {
            if !m.contains_key(key) {
                errs.push(FieldError::required(&child(path, key), ""));
            }
        }
        let n = m.len() as u64;
        if let Some(max) = self.max_properties
            && n > max
        {
            errs.push(FieldError::new(
                ErrorType::TooMany,
                path,
                BadValue::Raw(n.to_string()),
                format!("must have at most {max} items"),
            ));
        }
        if let Some(min) = self.min_properties
            && n < min
        {
            errs.push(FieldError::new(
                ErrorType::Invalid,
                path,
                BadValue::Raw(n.to_string()),
                format!("{path} in body should have at least {min} properties"),
            ));
        }
        if self.embedded {
            for key in ["apiVersion", "kind"] {
                if m.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                    errs.push(FieldError::required(&child(path, key), "must not be empty"));
                }
            }
        }
        for (k, child_v) in m {
            let schema = self.properties.get(k).or(self.additional.as_deref());
            if let Some(s) = schema {
                s.check(
                    child_v,
                    old.and_then(|o| o.get(k)),
                    &child(path, k),
                    errs,
                    rule_errs,
                );
            }
        }
        let _ = v;
    }

    /// A value as CEL sees it under this schema (`SchemaDeclType` in
    /// k8s.io/apiserver/pkg/cel/common/schemas.go): a string of format `date-time` or `date` is a
    /// `timestamp` (so `self.end > self.start` compares times, not text) and of format
    /// `duration` a `duration`; everything else as its JSON.
    fn cel_value(&self, v: &Value) -> cel_interpreter::Value {
        use cel_interpreter::Value as Cel;
        match v {
            Value::String(text) if self.ty == Ty::String => {
                let as_time = match self.format.as_deref() {
                    Some("date-time") => chrono::DateTime::parse_from_rfc3339(text).ok(),
                    Some("date") => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                        .map(|t| t.and_utc().fixed_offset()),
                    _ => None,
                };
                if let Some(t) = as_time {
                    return Cel::Timestamp(t);
                }
                if self.format.as_deref() == Some("duration")
                    && let Ok(d) = crate::api::GoDuration::parse(text)
                {
                    return Cel::Duration(d.to_chrono());
                }
                crate::health::cel::to_cel(v)
            }
            Value::Array(items) => match &self.items {
                Some(schema) => Cel::List(std::sync::Arc::new(
                    items.iter().map(|i| schema.cel_value(i)).collect(),
                )),
                None => crate::health::cel::to_cel(v),
            },
            Value::Object(m) => {
                let map: std::collections::HashMap<cel_interpreter::objects::Key, Cel> = m
                    .iter()
                    .map(|(k, child)| {
                        let value = match self.properties.get(k).or(self.additional.as_deref()) {
                            Some(schema) => schema.cel_value(child),
                            None => crate::health::cel::to_cel(child),
                        };
                        (
                            cel_interpreter::objects::Key::String(k.clone().into()),
                            value,
                        )
                    })
                    .collect();
                Cel::Map(cel_interpreter::objects::Map {
                    map: std::sync::Arc::new(map),
                })
            }
            _ => crate::health::cel::to_cel(v),
        }
    }

    fn run_rules(
        &self,
        v: &Value,
        old: Option<&Value>,
        path: &str,
        rule_errs: &mut Vec<FieldError>,
    ) {
        if self.rules.is_empty() || v.is_null() {
            return;
        }
        let ty = if self.ty == Ty::Any {
            json_type(v)
        } else {
            self.ty.name()
        };
        let mut ctx: Option<Context> = None;
        for rule in &self.rules {
            if rule.transition && old.is_none() {
                continue;
            }
            let field = match &rule.field_path {
                Some(fp) => format!("{path}{fp}"),
                None => path.to_string(),
            };
            let field = if field.is_empty() {
                "<nil>".to_string()
            } else {
                field
            };
            let Some(program) = &rule.program else {
                rule_errs.push(FieldError::new(
                    ErrorType::Invalid,
                    &field,
                    BadValue::Json(Value::String(ty.into())),
                    format!("compilation failed: {}", rule.source),
                ));
                continue;
            };
            let ctx = ctx.get_or_insert_with(|| {
                let mut c = Context::default();
                c.add_variable_from_value("self", self.cel_value(v));
                if let Some(o) = old {
                    c.add_variable_from_value("oldSelf", self.cel_value(o));
                }
                c
            });
            let detail = match program.execute(ctx) {
                Ok(cel_interpreter::Value::Bool(true)) => continue,
                Ok(cel_interpreter::Value::Bool(false)) => rule
                    .message
                    .clone()
                    .map(|m| m.trim().to_string())
                    .unwrap_or_else(|| format!("failed rule: {}", rule.source.trim())),
                Ok(other) => format!("rule did not evaluate to a bool: {other:?}"),
                // cel-go's runtime errors are lower case ("no such key: chartName"), and the
                // server names the rule by its message when it has one (`ruleErrorString`).
                Err(e) => {
                    let e = e.to_string();
                    let mut chars = e.chars();
                    let e = match chars.next() {
                        Some(c) => c.to_lowercase().chain(chars).collect::<String>(),
                        None => e,
                    };
                    let rule_name = rule.message.clone().unwrap_or_else(|| rule.source.clone());
                    format!("{e} evaluating rule: {}", rule_name.trim())
                }
            };
            rule_errs.push(FieldError::new(
                ErrorType::Invalid,
                &field,
                BadValue::Json(Value::String(ty.into())),
                detail,
            ));
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// kube-openapi's `InvalidType` as a `TypeInvalid` field error: `<path> in body must be of type
/// <want>: "<actual>"`, with the actual type as the bad value.
fn type_error(path: &str, actual: &str, want: &str) -> FieldError {
    FieldError::new(
        ErrorType::TypeInvalid,
        path,
        BadValue::Json(Value::String(actual.into())),
        format!(
            "{path} in body must be of type {want}: {}",
            go_quote(actual)
        ),
    )
}

/// The string formats kube-apiserver checks (`apiextensions-apiserver/pkg/apiserver/validation/formats.go`
/// lists the supported ones; others are stripped and never checked).
fn format_ok(format: &str, s: &str) -> bool {
    use base64::Engine;
    match format {
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "uuid" => {
            s.len() == 36
                && s.chars().enumerate().all(|(i, c)| match i {
                    8 | 13 | 18 | 23 => c == '-',
                    _ => c.is_ascii_hexdigit(),
                })
        }
        "int32" => s.parse::<i32>().is_ok(),
        "int64" => s.parse::<i64>().is_ok(),
        _ => true,
    }
}

/// A custom resource type registered from a CRD document: its names and its compiled schema.
pub struct Crd {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub status_subresource: bool,
    pub schema: Schema,
}

/// Reads a CRD (`apiextensions.k8s.io/v1`, as JSON) for its storage version.
pub fn crd_from_value(crd: &Value) -> Result<Crd, String> {
    let spec = crd.get("spec").ok_or("a CRD has a spec")?;
    let s = |v: Option<&Value>, what: &str| {
        v.and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| format!("a CRD has {what}"))
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("a CRD has versions")?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .or_else(|| versions.first())
        .ok_or("a CRD has a version")?;
    let schema = version
        .pointer("/schema/openAPIV3Schema")
        .map(Schema::compile)
        .transpose()?
        .unwrap_or(Schema {
            preserve_unknown: true,
            ..Default::default()
        });
    Ok(Crd {
        group: s(spec.get("group"), "a group")?,
        version: s(version.get("name"), "a version name")?,
        kind: s(spec.pointer("/names/kind"), "a kind")?,
        plural: s(spec.pointer("/names/plural"), "a plural")?,
        namespaced: spec.get("scope").and_then(Value::as_str) == Some("Namespaced"),
        status_subresource: version.pointer("/subresources/status").is_some(),
        schema,
    })
}

/// The CRDs the fake server serves for Sveltos, vendored from upstream (see `src/fake/crds/`).
pub const SVELTOS_CRDS: &[&str] = &[
    include_str!("crds/config.projectsveltos.io_clusterpromotions.yaml"),
    include_str!("crds/config.projectsveltos.io_clusterprofiles.yaml"),
    include_str!("crds/config.projectsveltos.io_clustersummaries.yaml"),
    include_str!("crds/lib.projectsveltos.io_sveltosclusters.yaml"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "required": ["mode"], "properties": {
                    "mode": {"type": "string", "enum": ["A", "B"]},
                    "n": {"type": "integer", "format": "int32", "minimum": 0, "default": 3},
                    "opts": {"type": "object", "properties": {
                        "create": {"type": "boolean", "default": true},
                        "keep": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                             "items": {"type": "object", "properties": {"name": {"type": "string"}, "w": {"type": "integer", "default": 1}}}},
                    "ios": {"x-kubernetes-int-or-string": true},
                    "b": {"type": "string", "format": "byte"}
                },
                "x-kubernetes-validations": [{"rule": "self.mode != 'B' || has(self.opts)", "message": "B needs opts"}]}
            }
        }))
        .unwrap()
    }

    #[test]
    fn prunes_defaults_at_depth_and_keeps_preserved() {
        let s = schema();
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "junk": 1},
            "spec": {"mode": "A", "unknown": 1, "opts": {"keep": {"any": {"thing": 1}}, "zap": 2},
                     "list": [{"name": "x", "extra": true}], "ios": "50%"}, "top": 1});
        s.normalise(&mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
                "spec": {"mode": "A", "n": 3, "opts": {"create": true, "keep": {"any": {"thing": 1}}},
                         "list": [{"name": "x", "w": 1}], "ios": "50%"}})
        );
        assert!(s.validate(&obj, None).is_empty());
    }

    #[test]
    fn validation_texts() {
        let s = schema();
        let obj = json!({"spec": {"mode": "C", "n": -1, "b": "!!", "ios": 1.5,
            "list": [{"name": "x"}, {"name": "x"}]}});
        let errs: Vec<String> = s
            .validate(&obj, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.contains(
                &r#"spec.mode: Unsupported value: "C": supported values: "A", "B""#.to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &"spec.n: Invalid value: -1: spec.n in body should be greater than or equal to 0"
                    .to_string()
            ),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &r#"spec.b: Invalid value: "!!": spec.b in body must be of type byte: "!!""#
                    .to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.contains(&r#"spec.ios: Invalid value: "number": spec.ios in body must be of type integer,string: "number""#.to_string()), "{errs:?}");
        assert!(
            errs.contains(
                &r#"spec.list[1]: Duplicate value: map[string]interface {}{"name":"x"}"#
                    .to_string()
            ),
            "{errs:?}"
        );
        let errs = s.validate(&json!({"spec": {"mode": "B"}}), None);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            r#"spec: Invalid value: "object": B needs opts"#
        );
        let errs = s.validate(&json!({"spec": {}}), None);
        assert_eq!(errs[0].to_string(), "spec.mode: Required value");
        let errs = s.validate(&json!({"spec": {"mode": "A", "n": 3000000000i64}}), None);
        assert_eq!(
            errs[0].to_string(),
            r#"spec.n: Invalid value: 3000000000: spec.n in body must be of type int32: "3000000000""#
        );
    }

    #[test]
    fn promoters_own_crd_compiles_and_enforces_the_trigger_rule() {
        let crd = serde_json::to_value(crate::crd::cluster_promotion_crd()).unwrap();
        let crd = crd_from_value(&crd).unwrap();
        let mut ok = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"}, "spec": {"profileSpec": {}, "stages": [{"name": "dev",
            "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"manual": {}}}]}});
        crd.schema.normalise(&mut ok);
        assert_eq!(crd.schema.validate(&ok, None), vec![]);
        let mut both = ok.clone();
        both["spec"]["stages"][0]["trigger"]["auto"] = json!({});
        let errs = crd.schema.validate(&both, None);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "spec.stages[0].trigger");
    }

    #[test]
    fn upstream_crds_compile() {
        for text in SVELTOS_CRDS {
            let v: Value = serde_saphyr::from_str(text).unwrap();
            let crd = crd_from_value(&v).unwrap();
            assert!(crd.status_subresource, "{}", crd.kind);
            let mut stack = vec![&crd.schema];
            while let Some(s) = stack.pop() {
                for r in &s.rules {
                    assert!(r.program.is_some(), "{} does not compile", r.source);
                }
                stack.extend(s.properties.values());
                stack.extend(s.items.as_deref());
                stack.extend(s.additional.as_deref());
            }
        }
    }
}
