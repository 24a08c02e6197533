//! Which features Sveltos redeploys when a ClusterSummary's spec changes from one spec to
//! another: those whose deployment hash (`status.featureSummaries[].hash`) the change touches.
//! promoter knows both specs when it writes a profile, so it knows whether to wait for a redeploy.
//!
//! The hashes (projectsveltos/addon-controller, commit 60c6358035778386ccb9599f4944d2f5a0ec8926,
//! the same since v1.14.0; `crate::sim::feature_hash` simulates them):
//!
//! * shared by every feature (`controllers/handlers_utils.go` `getClusterProfileSpecHash`):
//!   `syncMode`, `reloader`, `tier`, `continueOnConflict`, `driftExclusions`, and the *content*
//!   reached through `templateResourceRefs`, `patches` (instantiated as templates) and
//!   `patchesFrom`;
//! * `Helm` (`controllers/handlers_helm.go` `helmHash`): each chart, sorted by repositoryURL,
//!   releaseNamespace, releaseName (`controllers/sort.go`), and the `validateHealths` of `Helm`;
//!   without any chart, the hash of nothing, whatever is shared;
//! * `Resources` (`handlers_resources.go` `resourcesHash`): `policyRefs` sorted by kind, namespace,
//!   name, and the `validateHealths` of `Resources`; `Kustomize` (`handlers_kustomize.go`
//!   `kustomizationHash`) likewise with `kustomizationRefs`.
//!
//! Nothing else is hashed, so a change of only [`NOT_HASHED`] fields is never redeployed and
//! Sveltos writes no status for it. A change whose effect on a hash depends on content promoter
//! does not read (`templateResourceRefs`, `patchesFrom`, a templated patch) or on a field this
//! table does not know (a newer CRD) cannot be predicted: [`Expect::Unknown`].

use serde_json::{Map, Value};

/// The features of a ClusterSummary, as Sveltos names them, and the list each deploys.
pub const FEATURES: [(&str, &str); 3] = [
    ("Helm", "helmCharts"),
    ("Resources", "policyRefs"),
    ("Kustomize", "kustomizationRefs"),
];

/// Fields no deployment hash includes.
pub const NOT_HASHED: [&str; 13] = [
    "clusterSelector",
    "clusterRefs",
    "setRefs",
    "dependsOn",
    "maxUpdate",
    "stopMatchingBehavior",
    "extraLabels",
    "extraAnnotations",
    "continueOnError",
    "maxConsecutiveFailures",
    "preDeployChecks",
    "preDeleteChecks",
    "postDeleteChecks",
];

/// Fields every feature's hash includes as they are written.
const SHARED: [&str; 5] = [
    "syncMode",
    "reloader",
    "tier",
    "continueOnConflict",
    "driftExclusions",
];

/// Fields every hash includes through content promoter does not read.
const SHARED_CONTENT: [&str; 2] = ["templateResourceRefs", "patchesFrom"];

/// What a spec change makes Sveltos do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// No feature's hash changes: nothing is redeployed, no status is written.
    Nothing,
    /// These features' hashes change (a bit per [`FEATURES`] entry): each is redeployed.
    Features(u8),
    /// Whether a hash changes depends on what promoter cannot see.
    Unknown,
}

/// The bit of a feature id in [`Expect::Features`].
pub fn bit(feature: &str) -> u8 {
    FEATURES
        .iter()
        .position(|(f, _)| *f == feature)
        .map_or(0, |i| 1 << i)
}

/// The feature ids of a bit set.
pub fn ids(bits: u8) -> impl Iterator<Item = &'static str> {
    FEATURES
        .iter()
        .enumerate()
        .filter(move |(i, _)| bits & (1 << i) != 0)
        .map(|(_, (f, _))| *f)
}

fn sorted_by(list: Option<&Value>, keys: &[&str]) -> Vec<Value> {
    let mut items: Vec<Value> = list.and_then(Value::as_array).cloned().unwrap_or_default();
    items.sort_by_cached_key(|i| {
        keys.iter()
            .map(|k| i.get(*k).and_then(Value::as_str).unwrap_or("").to_string())
            .collect::<Vec<_>>()
    });
    items
}

fn health_checks<'a>(spec: &'a Map<String, Value>, feature: &str) -> Vec<&'a Value> {
    spec.get("validateHealths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|h| h.get("featureID").and_then(Value::as_str) == Some(feature))
        .collect()
}

fn templated(v: Option<&Value>) -> bool {
    v.is_some_and(|v| v.to_string().contains("{{"))
}

/// What changing a summary's spec from `old` to `new` (both in Sveltos' stored normal form,
/// [`super::normal_form::normalize`]) makes Sveltos redeploy.
pub fn expected(old: &Map<String, Value>, new: &Map<String, Value>) -> Expect {
    let differs = |field: &str| old.get(field) != new.get(field);
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let known = |k: &str| {
        NOT_HASHED.contains(&k)
            || SHARED.contains(&k)
            || SHARED_CONTENT.contains(&k)
            || k == "patches"
            || k == "validateHealths"
            || FEATURES.iter().any(|(_, list)| *list == k)
    };
    if keys.iter().any(|k| !known(k) && differs(k))
        || SHARED_CONTENT.iter().any(|f| differs(f))
        || (differs("patches") && (templated(old.get("patches")) || templated(new.get("patches"))))
    {
        return Expect::Unknown;
    }
    let shared = SHARED.iter().any(|f| differs(f)) || differs("patches");
    let mut bits = 0u8;
    for (i, (feature, list)) in FEATURES.iter().enumerate() {
        let keys: &[&str] = if *feature == "Helm" {
            &["repositoryURL", "releaseNamespace", "releaseName"]
        } else {
            &["kind", "namespace", "name"]
        };
        let content = sorted_by(old.get(*list), keys) != sorted_by(new.get(*list), keys)
            || health_checks(old, feature) != health_checks(new, feature);
        // Without any chart, Helm's hash is the hash of nothing: shared fields do not count.
        let has_content = *feature != "Helm" || old.contains_key(*list) || new.contains_key(*list);
        if content || (shared && has_content) {
            bits |= 1 << i;
        }
    }
    if bits == 0 {
        Expect::Nothing
    } else {
        Expect::Features(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::feature_hash::feature_hash;
    use crate::sveltos::normal_form::normalize;
    use serde_json::json;

    fn spec(v: Value) -> Map<String, Value> {
        normalize(v.as_object().unwrap())
    }

    fn chart(name: &str, version: &str) -> Value {
        json!({"repositoryURL": "u", "releaseName": name, "releaseNamespace": "n", "chartName": "c", "chartVersion": version})
    }

    /// The table agrees with the simulated hashes, which follow upstream's: a feature is expected
    /// exactly when its hash changes.
    #[test]
    fn expected_features_are_those_whose_hash_changes() {
        let base = json!({"helmCharts": [chart("a", "1"), chart("b", "1")],
                          "policyRefs": [{"kind": "ConfigMap", "namespace": "d", "name": "x"}],
                          "validateHealths": [{"name": "h", "featureID": "Helm", "group": "", "version": "v1", "kind": "Pod"}]});
        let changes: Vec<(&str, Value)> = vec![
            ("maxUpdate", json!("10%")),
            ("dependsOn", json!(["x"])),
            ("stopMatchingBehavior", json!("LeavePolicies")),
            ("extraLabels", json!({"a": "b"})),
            ("clusterSelector", json!({"matchLabels": {"a": "b"}})),
            ("continueOnError", json!(true)),
            ("helmCharts", json!([chart("b", "1"), chart("a", "1")])),
            ("helmCharts", json!([chart("a", "2"), chart("b", "1")])),
            ("helmCharts", json!([chart("a", "1")])),
            ("policyRefs", json!([])),
            (
                "policyRefs",
                json!([{"kind": "Secret", "namespace": "d", "name": "x"}]),
            ),
            (
                "kustomizationRefs",
                json!([{"kind": "GitRepository", "namespace": "d", "name": "k", "path": "p"}]),
            ),
            ("tier", json!(10)),
            ("syncMode", json!("ContinuousWithDriftDetection")),
            ("reloader", json!(true)),
            ("continueOnConflict", json!(true)),
            (
                "patches",
                json!([{"patch": "- op: add\n  path: /a\n  value: b"}]),
            ),
            ("driftExclusions", json!([{"paths": ["/spec/replicas"]}])),
            ("validateHealths", json!([])),
        ];
        let old = spec(base.clone());
        for (field, value) in changes {
            let mut next = base.clone();
            next[field] = value.clone();
            let new = spec(next);
            let mut want = 0u8;
            for (feature, _) in FEATURES {
                if feature_hash(&old, feature) != feature_hash(&new, feature) {
                    want |= bit(feature);
                }
            }
            let want = if want == 0 {
                Expect::Nothing
            } else {
                Expect::Features(want)
            };
            assert_eq!(expected(&old, &new), want, "{field} = {value}");
        }
    }

    #[test]
    fn what_depends_on_content_promoter_does_not_read_is_unknown() {
        let base =
            spec(json!({"policyRefs": [{"kind": "ConfigMap", "namespace": "d", "name": "x"}]}));
        for (field, value) in [
            (
                "templateResourceRefs",
                json!([{"identifier": "i", "resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "c"}}]),
            ),
            (
                "patchesFrom",
                json!([{"kind": "ConfigMap", "namespace": "d", "name": "p"}]),
            ),
            (
                "patches",
                json!([{"patch": "{{ .Cluster.metadata.name }}"}]),
            ),
        ] {
            let mut next = base.clone();
            next.insert(field.into(), value);
            assert_eq!(
                expected(&base, &normalize(&next)),
                Expect::Unknown,
                "{field}"
            );
        }
        let mut unknown = base.clone();
        unknown.insert("someFutureField".into(), json!(1));
        assert_eq!(expected(&base, &unknown), Expect::Unknown);
        assert_eq!(expected(&base, &base), Expect::Nothing);
        assert_eq!(
            ids(bit("Helm") | bit("Kustomize")).collect::<Vec<_>>(),
            ["Helm", "Kustomize"]
        );
    }
}
