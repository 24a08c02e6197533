//! The simulated addon-controller's per-feature deployment hash (`status.featureSummaries[].hash`):
//! from the same inputs as the real one, so that a spec change is redeployed in the simulation
//! exactly when it would be by Sveltos (not the same bytes: the real one hashes Go's encoding and
//! the content of what the spec references, which a simulation does not have).
//!
//! Upstream (projectsveltos/addon-controller, commit 60c6358035778386ccb9599f4944d2f5a0ec8926; the
//! same structure since v1.14.0):
//!
//! * `controllers/handlers_utils.go` `getClusterProfileSpecHash`, shared by every feature:
//!   `syncMode`, `reloader`, `tier`, `continueOnConflict` (plus a fixed marker under
//!   `ContinuousWithDriftDetection`), the content of the `templateResourceRefs` resources, the
//!   instantiated `patches` and `patchesFrom`, and `driftExclusions` (in spec order);
//! * `controllers/handlers_helm.go` `helmHash`: no `helmCharts` at all is the hash of nothing
//!   (`sha256.New().Sum(nil)`, without the shared part); else the shared part, each chart (sorted
//!   by repositoryURL, releaseNamespace, releaseName; `controllers/sort.go`) with its instantiated
//!   values, and the `validateHealths` whose featureID is `Helm`;
//! * `controllers/handlers_resources.go` `resourcesHash`: the shared part, the `policyRefs` sorted by
//!   kind, namespace, name, the referenced content, the `validateHealths` of `Resources`;
//! * `controllers/handlers_kustomize.go` `kustomizationHash`: the same for `kustomizationRefs` and
//!   `Kustomize`.
//!
//! Nothing else of the spec enters a hash: `dependsOn`, `maxUpdate`, `clusterSelector`,
//! `extraLabels`, `stopMatchingBehavior`, … are never redeployed. Here the references stand for
//! their content (the simulation has no ConfigMaps to read).

use base64::Engine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

fn text(v: Option<&Value>) -> String {
    v.map(Value::to_string).unwrap_or_default()
}

fn hex_of(v: &Value) -> String {
    Sha256::digest(v.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The part every feature's hash shares (`getClusterProfileSpecHash`).
fn shared(spec: &Map<String, Value>) -> String {
    let mut config = String::new();
    for field in ["syncMode", "reloader", "tier", "continueOnConflict"] {
        config += &text(spec.get(field));
    }
    if spec.get("syncMode").and_then(Value::as_str) == Some("ContinuousWithDriftDetection") {
        config += "v1.0.1";
    }
    let mut refs: Vec<Value> = spec
        .get("templateResourceRefs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    refs.sort_by_key(|r| text(r.get("identifier")));
    if !refs.is_empty() {
        config += &hex_of(&Value::Array(refs));
    }
    for field in ["patches", "patchesFrom", "driftExclusions"] {
        if let Some(v) = spec.get(field).filter(|v| !v.is_null()) {
            config += &hex_of(v);
        }
    }
    config
}

fn key_of(item: &Value, fields: &[&str]) -> Vec<String> {
    fields
        .iter()
        .map(|f| {
            item.get(*f)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

fn sorted(spec: &Map<String, Value>, field: &str, by: &[&str]) -> Vec<Value> {
    let mut items: Vec<Value> = spec
        .get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items.sort_by_key(|i| key_of(i, by));
    items
}

fn health_checks(spec: &Map<String, Value>, feature: &str) -> String {
    spec.get("validateHealths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|h| h.get("featureID").and_then(Value::as_str) == Some(feature))
        .map(hex_of)
        .collect()
}

fn encode(config: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(config.as_bytes()))
}

/// The hash Sveltos stores for `feature` (`Helm`, `Resources`, `Kustomize`) of a ClusterSummary
/// carrying `spec` (in its stored normal form), as the JSON of a Go `[]byte`: base64.
pub fn feature_hash(spec: &Map<String, Value>, feature: &str) -> String {
    match feature {
        "Helm" => {
            if !spec.contains_key("helmCharts") {
                return encode("");
            }
            let mut config = shared(spec);
            for chart in sorted(
                spec,
                "helmCharts",
                &["repositoryURL", "releaseNamespace", "releaseName"],
            ) {
                config += &hex_of(&chart);
            }
            config += &health_checks(spec, "Helm");
            encode(&config)
        }
        "Resources" => {
            let mut config = shared(spec);
            config += &hex_of(&Value::Array(sorted(
                spec,
                "policyRefs",
                &["kind", "namespace", "name"],
            )));
            config += &health_checks(spec, "Resources");
            encode(&config)
        }
        _ => {
            let mut config = shared(spec);
            config += &hex_of(&Value::Array(sorted(
                spec,
                "kustomizationRefs",
                &["kind", "namespace", "name"],
            )));
            config += &health_checks(spec, "Kustomize");
            encode(&config)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sveltos::normal_form::normalize;
    use serde_json::json;

    fn spec(v: Value) -> Map<String, Value> {
        normalize(v.as_object().unwrap())
    }

    #[test]
    fn only_what_sveltos_hashes_changes_a_feature_hash() {
        let base = json!({"helmCharts": [{"repositoryURL": "u", "releaseName": "a", "releaseNamespace": "n", "chartName": "c", "chartVersion": "1"},
                                         {"repositoryURL": "u", "releaseName": "b", "releaseNamespace": "n", "chartName": "c", "chartVersion": "1"}],
                          "policyRefs": [{"kind": "ConfigMap", "namespace": "d", "name": "x"}]});
        let h = |v: &Value, f: &str| feature_hash(&spec(v.clone()), f);
        let mut same = base.clone();
        same["dependsOn"] = json!(["other"]);
        same["maxUpdate"] = json!("10%");
        same["stopMatchingBehavior"] = json!("LeavePolicies");
        same["extraLabels"] = json!({"a": "b"});
        same["clusterSelector"] = json!({"matchLabels": {"env": "prod"}});
        // A reorder of charts is not a change for Sveltos (it sorts them).
        same["helmCharts"] = json!([base["helmCharts"][1], base["helmCharts"][0]]);
        for f in ["Helm", "Resources"] {
            assert_eq!(h(&base, f), h(&same, f), "{f}");
        }
        let mut chart = base.clone();
        chart["helmCharts"][0]["chartVersion"] = json!("2");
        assert_ne!(h(&base, "Helm"), h(&chart, "Helm"));
        assert_eq!(h(&base, "Resources"), h(&chart, "Resources"));
        let mut tier = base.clone();
        tier["tier"] = json!(50);
        for f in ["Helm", "Resources"] {
            assert_ne!(h(&base, f), h(&tier, f), "{f}");
        }
        let mut health = base.clone();
        health["validateHealths"] = json!([{"name": "h", "featureID": "Resources", "group": "", "version": "v1", "kind": "Pod"}]);
        assert_eq!(h(&base, "Helm"), h(&health, "Helm"));
        assert_ne!(h(&base, "Resources"), h(&health, "Resources"));
        // No charts at all: the hash of nothing, whatever else the spec says.
        assert_eq!(
            h(&json!({"tier": 1}), "Helm"),
            h(&json!({"tier": 2}), "Helm")
        );
        assert_eq!(h(&base, "Helm").len(), 44, "base64 of 32 bytes");
    }
}
