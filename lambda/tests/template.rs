//! The SAM template and the RBAC binding: the properties that keep passes from overlapping, every
//! reference resolvable, every setting one the function reads, and the access entry's group bound
//! to promoter's ClusterRole.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use promoter_lambda::SETTINGS;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn yaml(path: &str) -> Value {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&full).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn template() -> Value {
    yaml("template.yaml")
}

fn function(t: &Value) -> &Value {
    &t["Resources"]["PromoterFunction"]["Properties"]
}

/// Seconds between two runs of `rate(N unit)`.
fn rate_seconds(schedule: &str) -> u64 {
    let inner = schedule
        .strip_prefix("rate(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap();
    let (n, unit) = inner.split_once(' ').unwrap();
    let n: u64 = n.parse().unwrap();
    n * match unit.trim_end_matches('s') {
        "minute" => 60,
        "hour" => 3600,
        other => panic!("unit {other}"),
    }
}

#[test]
fn passes_never_overlap_and_are_not_retried() {
    let t = template();
    let f = function(&t);
    assert_eq!(f["Runtime"], "provided.al2023");
    assert_eq!(f["Handler"], "bootstrap");
    let schedule = f["Events"]["EveryMinute"]["Properties"]["Schedule"]
        .as_str()
        .unwrap();
    let period = rate_seconds(schedule);
    assert_eq!(period, 60, "one pass a minute");
    let timeout = f["Timeout"].as_u64().unwrap();
    assert!(
        timeout < period,
        "timeout {timeout}s below the {period}s schedule"
    );
    assert!(timeout > 10, "room for a pass with health checks");
    assert_eq!(f["ReservedConcurrentExecutions"], 1);
    assert_eq!(f["EventInvokeConfig"]["MaximumRetryAttempts"], 0);
    assert!(
        f["EventInvokeConfig"]["MaximumEventAgeInSeconds"]
            .as_u64()
            .unwrap()
            <= period
    );
}

#[test]
fn settings_are_ones_the_function_reads_and_are_documented() {
    let t = template();
    let vars = function(&t)["Environment"]["Variables"]
        .as_object()
        .unwrap();
    for name in vars.keys() {
        assert!(
            SETTINGS.contains(&name.as_str()),
            "{name} is not read by the function"
        );
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for name in SETTINGS {
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} is not documented in lambda/README.md"
        );
    }
    let sources: String = ["src/cluster.rs", "src/handler.rs", "src/main.rs"]
        .iter()
        .map(|f| std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(f)).unwrap())
        .collect();
    for name in SETTINGS {
        assert!(
            sources.contains(&format!("\"{name}\"")),
            "{name} is listed but never read"
        );
    }
}

fn references(v: &Value, refs: &mut BTreeSet<String>, attrs: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("Ref") {
                refs.insert(r.clone());
            }
            if let Some(Value::Array(a)) = map.get("Fn::GetAtt")
                && let Some(Value::String(r)) = a.first()
            {
                attrs.insert(r.clone());
            }
            map.values().for_each(|v| references(v, refs, attrs));
        }
        Value::Array(a) => a.iter().for_each(|v| references(v, refs, attrs)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves() {
    let t = template();
    let params: BTreeSet<&String> = t["Parameters"].as_object().unwrap().keys().collect();
    let resources = t["Resources"].as_object().unwrap();
    // SAM creates `<Function>Role` for each function without a Role.
    let mut known: BTreeSet<String> = resources.keys().cloned().collect();
    for (name, r) in resources {
        if r["Type"] == "AWS::Serverless::Function" && r["Properties"].get("Role").is_none() {
            known.insert(format!("{name}Role"));
        }
    }
    let (mut refs, mut attrs) = (BTreeSet::new(), BTreeSet::new());
    references(&t, &mut refs, &mut attrs);
    assert!(!refs.is_empty() && !attrs.is_empty());
    for r in refs {
        assert!(
            r.starts_with("AWS::") || params.contains(&r) || known.contains(&r),
            "Ref {r} resolves to nothing"
        );
    }
    for a in attrs {
        assert!(known.contains(&a), "Fn::GetAtt {a} resolves to nothing");
    }
}

#[test]
fn the_access_entry_group_is_bound_to_promoters_cluster_role() {
    let t = template();
    let groups = &t["Resources"]["PromoterAccessEntry"]["Properties"]["KubernetesGroups"];
    let binding: ClusterRoleBinding =
        serde_json::from_value(yaml("clusterrolebinding.yaml")).unwrap();
    let role: ClusterRole = serde_json::from_value(yaml("../cronjob/clusterrole.yaml")).unwrap();
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(binding.role_ref.name), role.metadata.name);
    let subjects = binding.subjects.unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0].kind, "Group");
    assert_eq!(groups, &serde_json::json!([subjects[0].name]));
}
