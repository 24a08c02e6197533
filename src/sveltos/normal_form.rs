//! The normal form in which a ClusterProfile spec is really stored in a ClusterSummary.
//!
//! Sveltos' ClusterProfile controller copies the profile's spec into each ClusterSummary through
//! its Go types (`clusterSummary.Spec.ClusterProfileSpec = *profileScope.GetSpec()`,
//! projectsveltos/addon-controller `controllers/profile_utils.go`, commit
//! 60c6358035778386ccb9599f4944d2f5a0ec8926), and the API server then prunes and defaults the result
//! from the ClusterSummary CRD. So a summary never holds the profile's bytes: Go's `encoding/json`
//! drops `omitempty` zero values (`values: ""`, `valuesFrom: []`), always emits non-pointer structs
//! (`installOptions: {}`), emits non-`omitempty` fields even when empty (`repositoryURL: ""`), and
//! `metav1.Duration` re-formats its text (`10m` → `10m0s`); then the CRD fills its defaults
//! (`createNamespace: true`, `maxHistory: 2`, `tier: 100`, …).
//!
//! [`normalize`] maps a spec to that stored form: prune and default (what the API server did to the
//! profile), Go round trip (what the controller did), prune and default again (what the API server
//! did to the summary). It is idempotent, so a profile written verbatim, a profile written in
//! normal form and a summary copied from either all compare equal when they carry the same content.
//!
//! The Go facts below come from the types, not from guesses: `api/v1beta1/spec.go` of
//! projectsveltos/addon-controller (commit 60c6358035778386ccb9599f4944d2f5a0ec8926: `Spec`,
//! `HelmChart`, `HelmOptions`, `HelmInstallOptions`, `HelmUpgradeOptions`, `HelmUninstallOptions`,
//! `ValueFrom`, `PolicyRef`, `RemoteURL`, `KustomizationRef`, `RemoteKustomizeURL`,
//! `TemplateResourceRef`, `CosignVerification`, `OIDCIdentityMatcher`, `ProvenanceVerification`) and
//! `api/v1beta1/common_types.go` of projectsveltos/libsveltos (commit
//! fe4f45bd59468b6b648f859ae621ff492fec762a: `Selector`, `ValidateHealth`, `LabelFilter`,
//! `MetricSource`, `MetricQuery`, `CELRule`, `JobHealthCheck`, `PolicyRef`, `Patch`,
//! `PatchSelector`, `DriftExclusion`). Every other field of those types is `omitempty` and either a
//! plain scalar, a slice, a map or a pointer to a struct; the schema says which.

use crate::api::duration::GoDuration;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The ClusterSummary CRD's `spec.clusterProfileSpec` schema (the ClusterProfile CRD's `spec` has the
/// same structure), vendored from `shared/reference/crds/` without descriptions.
pub const CLUSTER_PROFILE_SPEC_SCHEMA: &str =
    include_str!("../api/schema/cluster_profile_spec.json");

/// The four lists of libsveltos `ValidateHealth`.
const CHECK_LISTS: [&str; 4] = [
    "validateHealths",
    "preDeployChecks",
    "preDeleteChecks",
    "postDeleteChecks",
];

/// Non-pointer struct fields: Go always emits them, at least as `{}`.
const VALUE_STRUCTS: &[&str] = &[
    "clusterSelector",
    "helmCharts[].options.installOptions",
    "helmCharts[].options.upgradeOptions",
    "helmCharts[].options.uninstallOptions",
    "helmCharts[].provenanceVerification.keyringSecretRef",
    "templateResourceRefs[].resource",
    "@checks[].jobCheck.jobRef",
];

/// Fields without `omitempty`: emitted even when zero (`""`).
const NOT_OMITEMPTY: &[&str] = &[
    "helmCharts[].repositoryURL",
    "helmCharts[].releaseName",
    "helmCharts[].releaseNamespace",
    "helmCharts[].valuesFrom[].name",
    "helmCharts[].valuesFrom[].kind",
    "kustomizationRefs[].valuesFrom[].name",
    "kustomizationRefs[].valuesFrom[].kind",
    "patchesFrom[].name",
    "patchesFrom[].kind",
    "helmCharts[].signatureVerification.provider",
    "helmCharts[].signatureVerification.matchOIDCIdentity[].issuer",
    "helmCharts[].signatureVerification.matchOIDCIdentity[].subject",
    "policyRefs[].remoteURL.url",
    "kustomizationRefs[].remoteURL.url",
    "templateResourceRefs[].identifier",
    "clusterSelector.matchExpressions[].key",
    "clusterSelector.matchExpressions[].operator",
    "patches[].patch",
    // A non-omitempty slice: `[]` stays `[]`; absent becomes `null`, which the server prunes.
    "driftExclusions[].paths",
    "@checks[].name",
    "@checks[].featureID",
    "@checks[].labelFilters[].key",
    "@checks[].labelFilters[].operation",
    "@checks[].metricSource.url",
    "@checks[].metricQueries[].name",
    "@checks[].metricQueries[].query",
    "@checks[].evaluateCEL[].name",
    "@checks[].evaluateCEL[].rule",
    "@checks[].jobCheck.jobRef.namespace",
    "@checks[].jobCheck.jobRef.name",
    "@checks[].jobCheck.jobRef.kind",
];

/// Pointer scalars (`*bool`, `*metav1.Duration`, `*intstr.IntOrString`, `*uint`): a zero value is
/// kept, only absence is omitted.
const POINTER_SCALARS: &[&str] = &[
    "helmCharts[].options.installOptions.createNamespace",
    "helmCharts[].options.installOptions.replace",
    "helmCharts[].options.timeout",
    "policyRefs[].remoteURL.interval",
    "kustomizationRefs[].remoteURL.interval",
    "maxUpdate",
    "maxConsecutiveFailures",
    "@checks[].jobCheck.timeout",
];

/// `metav1.Duration` fields: parsed with `time.ParseDuration`, written with `Duration.String()`.
const DURATIONS: &[&str] = &[
    "helmCharts[].options.timeout",
    "policyRefs[].remoteURL.interval",
    "kustomizationRefs[].remoteURL.interval",
    "@checks[].jobCheck.timeout",
];

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        // Compiled in and checked by tests; a broken file would leave everything unpruned.
        serde_json::from_str(CLUSTER_PROFILE_SPEC_SCHEMA)
            .unwrap_or_else(|_| serde_json::json!({"type": "object"}))
    })
}

/// The path as the tables spell it: the four check lists share one name.
fn fact_path(path: &str) -> std::borrow::Cow<'_, str> {
    for list in CHECK_LISTS {
        if let Some(rest) = path.strip_prefix(list)
            && rest.starts_with("[]")
        {
            return format!("@checks{rest}").into();
        }
    }
    path.into()
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The stored form of a ClusterProfile spec (see the module comment). Idempotent.
pub fn normalize(spec: &Map<String, Value>) -> Map<String, Value> {
    let schema = schema();
    let mut v = Value::Object(spec.clone());
    server_defaults(&mut v, schema);
    let mut v = go_struct("", schema, Some(&v));
    server_defaults(&mut v, schema);
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// What the API server does to a custom resource's field on write: unknown fields pruned, `null`
/// of non-nullable fields dropped, then the schema's defaults filled in, top down (a defaulted
/// object is defaulted further).
pub fn server_defaults(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let preserve = schema
                    .get("x-kubernetes-preserve-unknown-fields")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                m.retain(|k, x| match props.get(k) {
                    Some(sub) => !x.is_null() || sub.get("nullable") == Some(&Value::Bool(true)),
                    None => preserve,
                });
                for (k, sub) in props {
                    if !m.contains_key(k)
                        && let Some(d) = sub.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, x) in m.iter_mut() {
                    if let Some(sub) = props.get(k) {
                        server_defaults(x, sub);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                m.retain(|_, x| !x.is_null());
                for x in m.values_mut() {
                    server_defaults(x, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for x in a.iter_mut() {
                    server_defaults(x, items);
                }
            }
        }
        _ => {}
    }
}

fn is_struct(schema: &Value) -> bool {
    schema.get("properties").is_some_and(Value::is_object)
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn zero_of(schema: &Value) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => Value::Bool(false),
        Some("integer" | "number") => Value::from(0),
        Some("array") => Value::Null,
        _ => Value::String(String::new()),
    }
}

/// A Go struct decoded from `v` and encoded again. A value of the wrong shape (which the API
/// server's validation would have refused) is kept as it is.
fn go_struct(path: &str, schema: &Value, v: Option<&Value>) -> Value {
    let empty = Map::new();
    let input = match v {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => &empty,
        Some(other) => return other.clone(),
    };
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            let x = input.get(k).filter(|x| !x.is_null());
            // An absent field yields something only when a table names it (a value struct or a
            // field without omitempty); most of the schema is absent from a spec, so skip those
            // without building their paths.
            if x.is_none() && !emitted_when_absent(k) {
                continue;
            }
            let p = child(path, k);
            if let Some(x) = go_field(&p, sub, x) {
                out.insert(k.clone(), x);
            }
        }
    }
    Value::Object(out)
}

/// Whether a field named `key` can be emitted although absent: the last segment of some entry of
/// [`VALUE_STRUCTS`] or [`NOT_OMITEMPTY`] (the only ways [`go_field`] yields a value for `None`).
fn emitted_when_absent(key: &str) -> bool {
    // Asked for every absent field of every struct of the schema: the last segments are
    // collected once, not split again per field.
    static LAST: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    LAST.get_or_init(|| {
        VALUE_STRUCTS
            .iter()
            .chain(NOT_OMITEMPTY)
            .filter_map(|path| path.rsplit(['.', ']']).next())
            .collect()
    })
    .contains(key)
}

/// One field of a Go struct after a round trip: `None` when Go omits it.
fn go_field(path: &str, schema: &Value, v: Option<&Value>) -> Option<Value> {
    let fact = fact_path(path);
    let fact = fact.as_ref();
    if is_struct(schema) {
        if VALUE_STRUCTS.contains(&fact) {
            return Some(go_struct(path, schema, v));
        }
        // A pointer to a struct: nil is omitted, a present (even empty) struct is emitted.
        return v.map(|x| go_struct(path, schema, Some(x)));
    }
    let v = match v {
        Some(x) => x,
        None => {
            return (NOT_OMITEMPTY.contains(&fact) && !is_array(schema)).then(|| zero_of(schema));
        }
    };
    if let Value::Array(items) = v {
        if items.is_empty() {
            return NOT_OMITEMPTY
                .contains(&fact)
                .then(|| Value::Array(Vec::new()));
        }
        let item_schema = schema.get("items").unwrap_or(&Value::Null);
        let p = format!("{path}[]");
        let out = items
            .iter()
            .map(|x| {
                if is_struct(item_schema) {
                    go_struct(&p, item_schema, Some(x))
                } else {
                    x.clone()
                }
            })
            .collect();
        return Some(Value::Array(out));
    }
    if let Value::Object(m) = v {
        // A map (`map[string]string`): omitempty drops an empty one.
        return (!m.is_empty()).then(|| v.clone());
    }
    if DURATIONS.contains(&fact)
        && let Value::String(text) = v
    {
        return Some(Value::String(
            go_duration_text(text).unwrap_or_else(|| text.clone()),
        ));
    }
    if POINTER_SCALARS.contains(&fact) || NOT_OMITEMPTY.contains(&fact) {
        return Some(v.clone());
    }
    (!is_zero(v)).then(|| v.clone())
}

fn is_array(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("array")
}

/// `time.ParseDuration` then `Duration.String()`; `None` when Go could not parse it.
pub fn go_duration_text(text: &str) -> Option<String> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let d = GoDuration::parse(body).ok()?.to_std();
    let nanos = d.as_nanos();
    Some(format_go_duration(nanos, neg && nanos > 0))
}

/// Go's `time.Duration.String()`: `0s`, `1.5µs`, `300ms`, `10m0s`, `1h0m0s`, `1h2m3.5s`.
pub fn format_go_duration(nanos: u128, negative: bool) -> String {
    fn frac(v: u128, digits: u32) -> String {
        let unit = 10u128.pow(digits);
        let (int, rest) = (v / unit, v % unit);
        if rest == 0 {
            return int.to_string();
        }
        let f = format!("{rest:0width$}", width = digits as usize);
        format!("{int}.{}", f.trim_end_matches('0'))
    }
    let sign = if negative { "-" } else { "" };
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000 {
        return format!("{sign}{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{sign}{}µs", frac(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{sign}{}ms", frac(nanos, 6));
    }
    let secs = nanos / 1_000_000_000;
    let seconds = frac((secs % 60) * 1_000_000_000 + nanos % 1_000_000_000, 9);
    let (minutes, hours) = ((secs / 60) % 60, secs / 3600);
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    }
}

/// The top-level fields of two normal forms that differ, in the order a status names them: the
/// three lists upstream compares first, then the rest by name.
pub fn differing_fields<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a str> {
    const FIRST: [&str; 3] = ["helmCharts", "policyRefs", "kustomizationRefs"];
    let mut keys: Vec<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    keys.sort_by_key(|k| (FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()), *k));
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .collect()
}

/// Paths (`helmCharts[0].options.foo`) present in `desired` but missing from `observed`, where
/// everything else is equal: what a served CRD that does not know those fields pruned. `None` when
/// the two differ otherwise.
pub fn pruned_paths(desired: &Value, observed: &Value) -> Option<Vec<String>> {
    fn walk(path: &str, d: &Value, o: &Value, out: &mut Vec<String>) -> bool {
        match (d, o) {
            (Value::Object(dm), Value::Object(om)) => {
                if om.keys().any(|k| !dm.contains_key(k)) {
                    return false;
                }
                dm.iter().all(|(k, dv)| match om.get(k) {
                    Some(ov) => walk(&child(path, k), dv, ov, out),
                    None => {
                        out.push(child(path, k));
                        true
                    }
                })
            }
            (Value::Array(da), Value::Array(oa)) => {
                da.len() == oa.len()
                    && da
                        .iter()
                        .zip(oa)
                        .enumerate()
                        .all(|(i, (dv, ov))| walk(&format!("{path}[{i}]"), dv, ov, out))
            }
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            _ => d == o,
        }
    }
    let mut out = Vec::new();
    walk("", desired, observed, &mut out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn n(v: Value) -> Value {
        Value::Object(normalize(v.as_object().unwrap()))
    }

    #[test]
    fn go_durations_format_as_go_does() {
        for (input, want) in [
            ("10m", "10m0s"),
            ("1h", "1h0m0s"),
            ("90s", "1m30s"),
            ("0", "0s"),
            ("1.5s", "1.5s"),
            ("300ms", "300ms"),
            ("1500us", "1.5ms"),
            ("2h3m4.05s", "2h3m4.05s"),
            ("-5m", "-5m0s"),
            ("10m0s", "10m0s"),
        ] {
            assert_eq!(go_duration_text(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(go_duration_text("ten minutes"), None);
    }

    #[test]
    fn helm_options_are_stored_as_sveltos_stores_them() {
        let spec = json!({"helmCharts": [{"repositoryURL": "https://k", "repositoryName": "k",
            "chartName": "k/kyverno", "chartVersion": "3.5.2", "releaseName": "kyverno",
            "releaseNamespace": "kyverno", "values": "", "valuesFrom": [],
            "options": {"timeout": "10m", "wait": false}}]});
        let out = n(spec);
        let chart = &out["helmCharts"][0];
        assert!(chart.get("values").is_none(), "omitempty drops \"\"");
        assert!(chart.get("valuesFrom").is_none(), "omitempty drops []");
        assert_eq!(chart["helmChartAction"], "Install", "CRD default");
        let o = &chart["options"];
        assert_eq!(o["timeout"], "10m0s");
        assert_eq!(o["wait"], false, "defaulted back by the CRD");
        assert_eq!(o["installOptions"]["createNamespace"], true);
        assert_eq!(o["installOptions"]["replace"], true);
        assert_eq!(o["upgradeOptions"]["maxHistory"], 2);
        assert!(o["uninstallOptions"].is_object());
        assert_eq!(out["clusterSelector"], json!({}), "a value struct");
        assert_eq!(out["tier"], 100);
        assert_eq!(out["syncMode"], "Continuous");
    }

    #[test]
    fn pointer_zeroes_kept_value_zeroes_dropped_and_required_emitted() {
        let out = n(json!({
            "helmCharts": [{"chartName": "x", "options": {"installOptions": {"createNamespace": false,
                            "recoverAfterConsecutiveFailures": 0}}}],
            "maxUpdate": 0, "tier": 0, "unknownField": 1,
            "patches": [{"target": {"kind": ""}}],
        }));
        let chart = &out["helmCharts"][0];
        assert_eq!(chart["repositoryURL"], "", "not omitempty");
        assert_eq!(chart["releaseName"], "");
        let io = &chart["options"]["installOptions"];
        assert_eq!(io["createNamespace"], false, "*bool keeps false");
        assert_eq!(
            io["recoverAfterConsecutiveFailures"], 5,
            "int 0 omitted, then defaulted"
        );
        assert_eq!(out["maxUpdate"], 0);
        assert_eq!(out["tier"], 100, "int32 0 is omitted, then defaulted");
        assert!(out.get("unknownField").is_none());
        assert_eq!(out["patches"][0], json!({"patch": "", "target": {}}));
    }

    #[test]
    fn verbatim_and_normal_form_compare_equal_and_changes_show() {
        let verbatim = json!({"helmCharts": [{"repositoryURL": "u", "releaseName": "r", "releaseNamespace": "n",
                                             "chartName": "c", "chartVersion": "1", "options": {"timeout": "5m"}}],
                              "clusterSelector": {"matchLabels": {"env": "dev"}}});
        let stored = n(verbatim.clone());
        assert_eq!(n(stored.clone()), stored);
        let mut changed = verbatim.clone();
        changed["patches"] = json!([{"patch": "x"}]);
        let (a, b) = (n(changed), stored);
        assert_eq!(
            differing_fields(a.as_object().unwrap(), b.as_object().unwrap()),
            vec!["patches"]
        );
    }

    #[test]
    fn pruned_paths_are_the_missing_fields_only() {
        let d = json!({"a": {"b": 1, "c": [{"d": 1, "e": 2}]}, "f": 1});
        let o = json!({"a": {"c": [{"d": 1}]}, "f": 1});
        assert_eq!(
            pruned_paths(&d, &o),
            Some(vec!["a.b".to_string(), "a.c[0].e".to_string()])
        );
        assert_eq!(pruned_paths(&d, &json!({"a": {}, "f": 2})), None);
    }

    /// Property test without a framework (none is a dependency): specs shaped by the schema, so
    /// that they reach the deep fields, with type noise; a fixed seed keeps CI reproducible, and
    /// `PROMOTER_PROPERTY_CASES` runs more.
    #[test]
    fn normalize_is_idempotent() {
        struct Rng(u64);
        impl Rng {
            fn next(&mut self) -> u64 {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                self.0
            }
            fn below(&mut self, n: u64) -> u64 {
                self.next() % n.max(1)
            }
        }
        fn scalar(r: &mut Rng) -> Value {
            match r.below(8) {
                0 => Value::Null,
                1 => Value::Bool(r.below(2) == 1),
                2 => Value::from(r.below(3)),
                3 => json!({"x": 1}),
                4 => json!([]),
                _ => {
                    let s = ["", "x", "10m", "1h30m", "Install", "50%", "0"];
                    Value::String(s[r.below(s.len() as u64) as usize].to_string())
                }
            }
        }
        fn shaped(schema: &Value, r: &mut Rng, depth: u32) -> Value {
            if r.below(12) == 0 {
                return scalar(r);
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                let mut out = Map::new();
                for (k, sub) in props {
                    if r.below(props.len() as u64) < 4 {
                        out.insert(k.clone(), shaped(sub, r, depth + 1));
                    }
                }
                return Value::Object(out);
            }
            if let Some(items) = schema.get("items") {
                let n = if depth < 6 { r.below(3) } else { 0 };
                return Value::Array((0..n).map(|_| shaped(items, r, depth + 1)).collect());
            }
            if schema.get("additionalProperties").is_some() {
                let mut out = Map::new();
                for _ in 0..r.below(3) {
                    out.insert(format!("k{}", r.below(3)), scalar(r));
                }
                return Value::Object(out);
            }
            scalar(r)
        }
        let cases: u64 = std::env::var("PROMOTER_PROPERTY_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500);
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..cases {
            let v = shaped(schema(), &mut r, 0);
            let spec = v.as_object().cloned().unwrap_or_default();
            let once = normalize(&spec);
            assert_eq!(normalize(&once), once, "case {case}: {v}");
        }
    }
}
