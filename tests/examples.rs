//! Every seed manifest in examples/ loads and round-trips through the Rust types unchanged.

mod common;

use common::yaml_files;
use promoter::api::ClusterPromotion;
use promoter::manifest::{Object, load_file};
use serde_json::{Value, json};

#[test]
fn every_seed_manifest_loads_and_round_trips() {
    let mut files = yaml_files("examples");
    files.extend(yaml_files("examples/demo"));
    let mut promotions = 0;
    for file in &files {
        let docs = load_file(file).unwrap_or_else(|e| panic!("{e}"));
        for doc in docs {
            if let Object::ClusterPromotion(p) = &doc.object {
                promotions += 1;
                let back = serde_json::to_value(p.as_ref()).unwrap();
                assert_eq!(
                    back,
                    doc.raw,
                    "{} document {} changed in a round trip",
                    file.display(),
                    doc.index
                );
            }
        }
    }
    // The nine ClusterPromotion manifests of the seed documents, rollback-on-deadline.yaml with
    // its next revision (-v2), promotion-window.yaml, health-check.yaml, failure-budget.yaml and
    // the demo's three.
    assert_eq!(promotions, 17, "promotions found in {files:?}");
}

/// A value for every property the schema declares, recursively, plus an unknown field in every
/// object that could carry one.
fn sample(schema: &Value, depth: usize) -> Value {
    if let Some(default) = schema.get("enum").and_then(|e| e.get(0)) {
        return default.clone();
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return json!("10%");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2026-01-02T03:04:05Z"),
            Some("byte") => json!("aGFzaA=="),
            _ => json!("x"),
        },
        Some("integer") => json!(7),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(schema.get("items").unwrap_or(&json!({})), depth + 1)]),
        Some("object") | None => {
            let mut obj = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    obj.insert(k.clone(), sample(v, depth + 1));
                }
                obj.insert(
                    format!("futureField{depth}"),
                    json!({"addedBy": "a newer Sveltos"}),
                );
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                obj.insert("key".into(), sample(ap, depth + 1));
            } else {
                obj.insert("free".into(), json!({"form": [1, "two"]}));
            }
            Value::Object(obj)
        }
        Some(other) => panic!("unexpected type {other}"),
    }
}

#[test]
fn profile_spec_with_every_upstream_property_survives_round_trip() {
    let schema: Value = serde_json::from_str(promoter::api::schema::PROFILE_SPEC).unwrap();
    let profile_spec = sample(&schema, 0);
    // Every top-level upstream property is set.
    let top = schema["properties"].as_object().unwrap();
    assert_eq!(top.len(), 20);
    for k in top.keys() {
        assert!(profile_spec.get(k).is_some(), "{k} not set");
    }
    let stage_check = profile_spec["validateHealths"][0].clone();
    let policy_ref = profile_spec["policyRefs"][0].clone();
    let raw = json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "everything", "labels": {"a": "b"}},
        "spec": {
            "profileSpec": profile_spec,
            "preserveClusterProfilesOnDelete": true,
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"},
                  "matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]},
                 "trigger": {"auto": {"delay": "1h30m", "preHealthCheckDeployment": [policy_ref.clone()],
                   "postDelayHealthChecks": [stage_check.clone()],
                   "promotionWindow": {"from": "0 10 * * *", "to": "0 11 * * *"}}}},
                {"name": "prod", "trigger": {"manual": {"delay": "5m", "approved": true, "automaticReset": false,
                   "preHealthCheckDeployment": [policy_ref], "postDelayHealthChecks": [stage_check]}}}
            ]
        },
        "status": {
            "currentStageName": "dev", "profileSpecHash": "aGFzaA==", "stagesHash": "aGFzaA==",
            "lastPromotionTime": "2026-01-02T03:04:05Z",
            "stages": [{"name": "dev", "lastUpdateReconciledTime": "2026-01-02T03:04:05Z",
              "lastSuccessfulAppliedTime": "2026-01-02T03:04:05Z", "lastStatusCheckTime": "2026-01-02T03:04:05Z",
              "failureMessage": "m", "currentStatusDescription": "d (2026-01-02T03:04:05Z)"}]
        }
    });
    let typed: ClusterPromotion = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), raw);
    // The typed accessors see through the pass-through object.
    let ps = typed.spec.profile_spec.as_ref().unwrap();
    assert_eq!(ps.helm_charts().unwrap().len(), 1);
    assert_eq!(
        ps.validate_healths().unwrap()[0].extra.len(),
        1,
        "unknown ValidateHealth field kept in extra"
    );
}
