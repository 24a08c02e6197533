//! Object metadata validation as kube-apiserver does it for every kind (`ValidateObjectMeta` in
//! kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go`, the
//! name rules of `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`), the
//! generated-name rule of `staging/src/k8s.io/apiserver/pkg/storage/names/generate.go`, and the
//! Event rules of `pkg/apis/core/validation/events.go` (v1.33). Texts are the real ones.

use super::field::{FieldError, child};
use serde_json::Value;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// `TotalAnnotationSizeLimitB`.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// `validation.RegexError`: the message, the examples, and the regular expression.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn is_alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn label_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum_lower(b[0])
        && is_alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
}

/// `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_ok(s) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if s.is_empty() || !s.split('.').all(label_ok) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn qualified_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName`: `[prefix/]name`, for label and annotation keys.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !name.is_empty() && !qualified_part_ok(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !s.is_empty() && !qualified_part_ok(s) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Which rule a kind's names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    /// Only the generic rule of every REST path segment (`path.ValidatePathSegmentName`): core/v1
    /// Events, whose strategy validates nothing stricter.
    PathSegment,
}

/// The name rule of a served kind: custom resources and most built-ins use DNS-1123 subdomains;
/// namespaces (and services) use labels; core/v1 Events only the path-segment rule.
pub fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") | ("", "Service") => NameRule::Dns1123Label,
        ("", "Event") => NameRule::PathSegment,
        _ => NameRule::Dns1123Subdomain,
    }
}

/// `NameIsDNSSubdomain`/`NameIsDNSLabel` with `prefix`: a generateName may end with `-`.
fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 1]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::Dns1123Subdomain => dns1123_subdomain(name),
        NameRule::Dns1123Label => dns1123_label(name),
        NameRule::PathSegment => {
            let mut errs = Vec::new();
            if !prefix && (name == "." || name == "..") {
                errs.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    errs.push(format!("may not contain '{bad}'"));
                }
            }
            errs
        }
    }
}

/// `ValidateObjectMeta` for a create or an update (names, generateName, namespace, labels,
/// annotations, owner references and finalizers as far as promoter writes them).
pub fn validate_object_meta(obj: &Value, rule: NameRule, namespaced: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
    let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    let generate_name = s("generateName");
    if !generate_name.is_empty() {
        for m in name_errors(rule, generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                &Value::String(generate_name.into()),
                m,
            ));
        }
    }
    let name = s("name");
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for m in name_errors(rule, name, false) {
            errs.push(FieldError::invalid(
                "metadata.name",
                &Value::String(name.into()),
                m,
            ));
        }
    }
    let ns = s("namespace");
    if namespaced {
        if ns.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for m in dns1123_label(ns) {
                errs.push(FieldError::invalid(
                    "metadata.namespace",
                    &Value::String(ns.into()),
                    m,
                ));
            }
        }
    } else if !ns.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for m in qualified_name(k) {
                errs.push(FieldError::invalid(
                    "metadata.labels",
                    &Value::String(k.clone()),
                    m,
                ));
            }
            match v {
                Value::String(v) => {
                    for m in label_value(v) {
                        errs.push(FieldError::invalid(
                            "metadata.labels",
                            &Value::String(v.clone()),
                            m,
                        ));
                    }
                }
                other => errs.push(FieldError::invalid(
                    &format!("metadata.labels[{k}]"),
                    other,
                    "must be a string",
                )),
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            for m in qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    &Value::String(k.clone()),
                    m,
                ));
            }
            total += k.len() + v.as_str().map(str::len).unwrap_or(0);
        }
        if total > ANNOTATIONS_LIMIT {
            errs.push(FieldError::too_long(
                "metadata.annotations",
                ANNOTATIONS_LIMIT,
            ));
        }
    }
    for (i, r) in meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = format!("metadata.ownerReferences[{i}]");
        for key in ["apiVersion", "kind", "name", "uid"] {
            if r.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                let detail = match key {
                    "apiVersion" => "version must not be empty",
                    "kind" => "kind must not be empty",
                    "name" => "name must not be empty",
                    _ => "uid must not be empty",
                };
                errs.push(FieldError::invalid(
                    &child(&path, key),
                    &Value::String(String::new()),
                    detail,
                ));
            }
        }
    }
    for (i, f) in meta
        .get("finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let f = f.as_str().unwrap_or_default();
        for m in qualified_name(f) {
            errs.push(FieldError::invalid(
                &format!("metadata.finalizers[{i}]"),
                &Value::String(f.into()),
                m,
            ));
        }
    }
    errs
}

/// The alphabet of `utilrand.String` (no vowels, no confusable characters).
const RAND_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `SimpleNameGenerator.GenerateName`: the base cut to 58 characters, then 5 characters drawn
/// from the alphabet (here derived from `seed`, so that runs are reproducible).
pub fn generate_name(base: &str, seed: u64) -> String {
    let mut base = base.to_string();
    if base.len() > 58 {
        let mut cut = 58;
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    // A multiplicative hash spreads consecutive seeds over the alphabet.
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
    for _ in 0..5 {
        base.push(RAND_ALPHABET[(x % RAND_ALPHABET.len() as u64) as usize] as char);
        x /= RAND_ALPHABET.len() as u64;
    }
    base
}

/// Field limits of `events.go`.
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
pub const NOTE_LIMIT: usize = 1024;

/// `ValidateEventCreate` for an Event written through `events.k8s.io/v1` (`strict`) or core/v1,
/// on the object in its own version's field names.
pub fn validate_event(obj: &Value, events_api: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let regarding = if events_api {
        "regarding"
    } else {
        "involvedObject"
    };
    let involved_ns = obj
        .get(regarding)
        .and_then(|r| r.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let event_time_set = obj.get("eventTime").is_some_and(|t| !t.is_null());
    // Both versions store `reportingController`; core/v1 names it `reportingComponent`, and the
    // error path is the internal type's.
    let controller_field = "reportingController";
    let controller = if events_api {
        s("reportingController")
    } else {
        s("reportingComponent")
    };
    let message_field = if events_api { "note" } else { "message" };
    let ns_error = || {
        FieldError::invalid(
            "involvedObject.namespace",
            &Value::String(involved_ns.into()),
            "does not match event.namespace",
        )
    };
    // Old-style events (no eventTime) only need their namespace to agree with the object's.
    if !event_time_set {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(ns_error());
            }
        } else if ns != involved_ns {
            errs.push(ns_error());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(ns_error());
        }
        if controller.is_empty() {
            errs.push(FieldError::required(controller_field, ""));
        }
        for m in qualified_name(controller) {
            errs.push(FieldError::invalid(
                controller_field,
                &Value::String(controller.into()),
                m,
            ));
        }
        for (field, limit) in [
            ("reportingInstance", REPORTING_INSTANCE_LIMIT),
            ("action", ACTION_LIMIT),
            ("reason", REASON_LIMIT),
        ] {
            let v = s(field);
            if v.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if v.len() > limit {
                errs.push(FieldError::invalid(
                    field,
                    &Value::String(String::new()),
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if s(message_field).len() > NOTE_LIMIT {
            errs.push(FieldError::invalid(
                "message",
                &Value::String(String::new()),
                format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    for m in dns1123_subdomain(ns) {
        errs.push(FieldError::invalid(
            "namespace",
            &Value::String(ns.into()),
            m,
        ));
    }
    if events_api {
        if !event_time_set {
            errs.push(FieldError::required("eventTime", ""));
        }
        let ty = s("type");
        if ty != "Normal" && ty != "Warning" {
            errs.push(FieldError::invalid(
                "type",
                &Value::String(String::new()),
                format!("has invalid value: {ty}"),
            ));
        }
        for (field, what) in [
            ("deprecatedFirstTimestamp", "firstTimestamp"),
            ("deprecatedLastTimestamp", "lastTimestamp"),
        ] {
            if obj.get(field).is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::invalid(
                    what,
                    &Value::String(String::new()),
                    "needs to be unset",
                ));
            }
        }
        if obj
            .get("deprecatedCount")
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0)
        {
            errs.push(FieldError::invalid(
                "count",
                &Value::String(String::new()),
                "needs to be unset",
            ));
        }
        if let Some(series) = obj.get("series").filter(|v| !v.is_null()) {
            if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
                errs.push(FieldError::invalid(
                    "series.count",
                    &Value::String(String::new()),
                    "should be at least 2",
                ));
            }
            if series.get("lastObservedTime").is_none_or(Value::is_null) {
                errs.push(FieldError::required("series.lastObservedTime", ""));
            }
        }
        if obj
            .get("deprecatedSource")
            .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        {
            errs.push(FieldError::invalid(
                "source",
                &Value::String(String::new()),
                "needs to be unset",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generate_name_prefix_rules() {
        let rule = NameRule::Dns1123Subdomain;
        assert!(name_errors(rule, "promo-", true).is_empty());
        assert_eq!(
            name_errors(rule, "promo.", true),
            vec![format!(
                "{DNS1123_SUBDOMAIN_MSG} (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
            )]
        );
        assert!(!name_errors(NameRule::Dns1123Label, "a.b", false).is_empty());
        let n = generate_name(&"x".repeat(70), 1);
        assert_eq!(n.len(), 63);
        assert!(dns1123_subdomain(&generate_name("promo-", 7)).is_empty());
    }

    #[test]
    fn labels_and_annotations() {
        let obj = json!({"metadata": {"name": "a", "labels": {"ok/x": "v", "bad key": "v", "k": "-bad"},
            "annotations": {"big": "x".repeat(ANNOTATIONS_LIMIT)}}});
        let errs: Vec<String> = validate_object_meta(&obj, NameRule::Dns1123Subdomain, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            errs.iter().any(|e| e.starts_with(
                r#"metadata.labels: Invalid value: "bad key": name part must consist of"#
            )),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e
                .starts_with(r#"metadata.labels: Invalid value: "-bad": a valid label must be"#)),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &"metadata.annotations: Too long: may not be more than 262144 bytes".to_string()
            ),
            "{errs:?}"
        );
    }
}
