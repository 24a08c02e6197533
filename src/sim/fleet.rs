//! The simulated fleet: clusters with labels, readiness, pause and deploy time, from a fleet file or,
//! by default, derived from the stage selectors so that any manifest runs without one.
//!
//! A derived fleet never invents clusters from what looks like a typo: a selector label within a
//! typo's reach of its stage's name or of a label another stage selects (`env: stagin` in stage
//! `staging`) gets none, and the fleet's notes say so; the simulation then shows that stage
//! selecting nothing, as promoter holds it (see `pass::empty_stage`), instead of a rollout through
//! clusters that exist nowhere. So does a stage whose selector is empty.
//!
//! A fleet file is YAML with documents of kind `Fleet` (promoter's own format, below) and/or plain
//! `SveltosCluster` objects:
//!
//! ```yaml
//! apiVersion: promoter.dev/v1alpha1
//! kind: Fleet
//! deployTime: 2m          # default time for a cluster to reach Provisioned
//! clusters:
//! - name: dev01
//!   namespace: dev
//!   labels: {env: dev}
//!   ready: true           # default true
//!   paused: false
//!   deployTime: 5m        # this cluster is slower
//!   objects:              # what health checks find there
//!   - {apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: app}, status: {…}}
//! ```

use crate::api::{ClusterPromotion, GoDuration};
use crate::labels::LabelSelector;
use crate::manifest::load_str;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetCluster {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default = "yes")]
    pub ready: bool,
    #[serde(default)]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_time: Option<GoDuration>,
    /// Objects the cluster holds, for postDelayHealthChecks (Deployments, Secrets, Jobs, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
}

fn default_namespace() -> String {
    "default".into()
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fleet {
    pub clusters: Vec<FleetCluster>,
    pub default_deploy_time: Option<GoDuration>,
    /// Whether the fleet was derived from the selectors rather than read from a file.
    pub derived: bool,
    /// What a person should know of how it was made (a selector that got no clusters, and why).
    pub notes: Vec<String>,
    /// Read from a live cluster's inventory.
    pub live: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FleetDoc {
    #[serde(default)]
    deploy_time: Option<GoDuration>,
    #[serde(default)]
    clusters: Vec<FleetCluster>,
}

impl FleetCluster {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn to_sveltos_cluster(&self) -> Value {
        json!({
            "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
            "spec": {"paused": self.paused},
            "status": {"ready": self.ready}
        })
    }
}

impl Fleet {
    /// Reads a fleet file (Fleet documents and SveltosCluster objects).
    pub fn parse(text: &str, source: &str) -> Result<Fleet, String> {
        let docs = load_str(text, source).map_err(|e| e.to_string())?;
        let mut fleet = Fleet::default();
        for doc in docs {
            let kind = doc
                .raw
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match kind {
                "Fleet" => {
                    let f: FleetDoc = serde_path_to_error::deserialize(&doc.raw).map_err(|e| {
                        format!(
                            "{source}: document {}: {}: {}",
                            doc.index,
                            e.path(),
                            e.inner()
                        )
                    })?;
                    fleet.default_deploy_time = f.deploy_time.or(fleet.default_deploy_time);
                    fleet.clusters.extend(f.clusters);
                }
                "SveltosCluster" => {
                    let m = &doc.raw["metadata"];
                    fleet.clusters.push(FleetCluster {
                        name: m["name"].as_str().unwrap_or_default().to_string(),
                        namespace: m["namespace"].as_str().unwrap_or("default").to_string(),
                        labels: serde_json::from_value(m["labels"].clone()).unwrap_or_default(),
                        ready: doc
                            .raw
                            .pointer("/status/ready")
                            .and_then(Value::as_bool)
                            .unwrap_or(true),
                        paused: doc
                            .raw
                            .pointer("/spec/paused")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        deploy_time: None,
                        objects: Vec::new(),
                    });
                }
                other => {
                    return Err(format!(
                        "{source}: document {}: a fleet holds Fleet or SveltosCluster documents, not {other:?}",
                        doc.index
                    ));
                }
            }
        }
        Ok(fleet)
    }

    /// A few clusters per stage whose labels satisfy the stage's selector; none for a selector
    /// that is empty or looks like a typo (see the module's documentation), each said in `notes`.
    pub fn derive(promotions: &[ClusterPromotion], per_stage: usize) -> Fleet {
        let mut clusters: Vec<FleetCluster> = Vec::new();
        let mut notes = Vec::new();
        let all: Vec<(&str, &BTreeMap<String, String>)> = promotions
            .iter()
            .flat_map(|p| &p.spec.stages)
            .filter_map(|s| {
                Some((
                    s.name.as_str(),
                    s.cluster_selector.as_ref()?.match_labels.as_ref()?,
                ))
            })
            .collect();
        for p in promotions {
            let promotion = p.metadata.name.as_deref().unwrap_or_default();
            for stage in &p.spec.stages {
                let what = format!("stage {} of {promotion}", stage.name);
                let selector = stage.cluster_selector.clone().unwrap_or_default();
                if selector.is_empty() {
                    notes.push(format!(
                        "{what}: no clusters derived: its clusterSelector is empty (it selects no cluster)"
                    ));
                    continue;
                }
                if let Some(typo) = looks_like_a_typo(&stage.name, &selector, &all) {
                    notes.push(format!(
                        "{what}: no clusters derived: {typo}; a fleet file (--fleet) simulates the real inventory"
                    ));
                    continue;
                }
                let Some(labels) = labels_satisfying(&selector) else {
                    notes.push(format!(
                        "{what}: no clusters derived: no labels satisfy its clusterSelector"
                    ));
                    continue;
                };
                // Stages of several promotions with the same selector share their clusters.
                if clusters.iter().any(|c| c.labels == labels) {
                    continue;
                }
                // A stage of another promotion with the same name and other labels has the
                // stage's plain names already: these carry the promotion's name too.
                let taken = clusters
                    .iter()
                    .any(|c| c.namespace == stage.name && c.name == format!("{}-1", stage.name));
                let base = match (&p.metadata.name, taken) {
                    (Some(promotion), true) => format!("{promotion}-{}", stage.name),
                    _ => stage.name.clone(),
                };
                for i in 1..=per_stage {
                    clusters.push(FleetCluster {
                        name: format!("{base}-{i}"),
                        namespace: stage.name.clone(),
                        labels: labels.clone(),
                        ready: true,
                        paused: false,
                        deploy_time: None,
                        objects: Vec::new(),
                    });
                }
            }
        }
        Fleet {
            clusters,
            default_deploy_time: None,
            derived: true,
            notes,
            live: false,
        }
    }

    /// The clusters of a live inventory (`plan`, `lint --inventory`).
    pub fn of_inventory(inventory: Vec<crate::pass::InventoryCluster>) -> Fleet {
        Fleet {
            clusters: inventory
                .into_iter()
                .map(|c| FleetCluster {
                    name: c.name,
                    namespace: c.namespace,
                    labels: c.labels,
                    ready: c.ready,
                    paused: c.paused,
                    deploy_time: None,
                    objects: Vec::new(),
                })
                .collect(),
            live: true,
            ..Fleet::default()
        }
    }

    /// What its clusters are, in a sentence: `the inventory`, `the fleet`.
    pub fn source(&self) -> &'static str {
        match (self.live, self.derived) {
            (true, _) => "the inventory",
            (false, true) => "the derived fleet",
            (false, false) => "the fleet",
        }
    }

    pub fn find(&self, name: &str) -> Option<&FleetCluster> {
        self.clusters
            .iter()
            .find(|c| c.name == name || c.key() == name)
    }
}

/// Why a stage's `matchLabels` look like a typo: a value within a typo's reach of the stage's own
/// name, or of the value another stage gives the same key where that value is some stage's name
/// (`env: prodution` in stage `canary` beside stage `production` with `env: production`); or a key
/// no other stage uses within a typo's reach of a key two other stages use. Which of two near
/// values is the typo is otherwise unknowable, so neither is suspected. Values that differ only in
/// digits (`eu-1`, `eu-2`; `qa1`, `qa`) are a sequence, not a typo.
fn looks_like_a_typo(
    stage: &str,
    selector: &LabelSelector,
    all: &[(&str, &BTreeMap<String, String>)],
) -> Option<String> {
    let others = || all.iter().filter(move |(name, _)| *name != stage);
    let digitless = |s: &str| {
        s.chars()
            .filter(|c| !c.is_ascii_digit())
            .collect::<String>()
    };
    let names: Vec<&str> = all.iter().map(|(name, _)| *name).collect();
    for (key, value) in selector.match_labels.iter().flatten() {
        let mut values: Vec<&str> = others()
            .filter_map(|(_, labels)| labels.get(key).map(String::as_str))
            .filter(|v| names.contains(v))
            .collect();
        values.push(stage);
        let near = crate::suggest::closest(
            value,
            values
                .iter()
                .copied()
                .filter(|v| digitless(v) != digitless(value)),
        );
        if let Some(near) = near {
            let whose = if near == stage {
                "the stage's name"
            } else {
                "another stage's"
            };
            return Some(format!(
                "{key}={value} looks like a typo of {key}={near} ({whose})"
            ));
        }
        let keys: Vec<&str> = others()
            .flat_map(|(_, labels)| labels.keys().map(String::as_str))
            .collect();
        if !keys.contains(&key.as_str())
            && let Some(near) = crate::suggest::closest(key, keys.iter().copied())
            && keys.iter().filter(|k| **k == near).count() >= 2
        {
            return Some(format!(
                "the label key {key} looks like a typo of {near} (other stages')"
            ));
        }
    }
    None
}

/// Labels that a selector selects, if it can be satisfied (an empty selector selects nothing).
pub fn labels_satisfying(selector: &LabelSelector) -> Option<BTreeMap<String, String>> {
    if selector.is_empty() {
        return None;
    }
    let mut labels = selector.match_labels.clone().unwrap_or_default();
    for e in selector.match_expressions.iter().flatten() {
        match e.operator.as_str() {
            "In" => {
                labels.insert(e.key.clone(), e.values.as_ref()?.first()?.clone());
            }
            "Exists" => {
                labels.entry(e.key.clone()).or_insert_with(|| "true".into());
            }
            _ => {}
        }
    }
    selector.selects(&labels).ok()?.then_some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_clusters_that_the_selectors_select() {
        let p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "metadata": {"name": "p"},
            "spec": {"stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"},
                  "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us"]},
                                       {"key": "canary", "operator": "DoesNotExist"}, {"key": "tier", "operator": "Exists"}]}},
                {"name": "none"}
            ]}
        }))
        .unwrap();
        let fleet = Fleet::derive(&[p], 2);
        assert_eq!(fleet.clusters.len(), 4);
        assert_eq!(
            fleet.notes,
            [
                "stage none of p: no clusters derived: its clusterSelector is empty (it selects no cluster)"
            ]
        );
        assert_eq!(
            fleet.clusters[2].labels,
            BTreeMap::from([
                ("env".into(), "prod".into()),
                ("region".into(), "eu".into()),
                ("tier".into(), "true".into())
            ])
        );
        assert_eq!(fleet.clusters[3].key(), "prod/prod-2");
    }

    /// Issue 46 §2: a derived fleet invented clusters labelled `env=stagin` for a typo, and the
    /// rollout went through them.
    #[test]
    fn derives_no_clusters_from_what_looks_like_a_typo() {
        let p = |stages: serde_json::Value| -> ClusterPromotion {
            serde_json::from_value(json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                "metadata": {"name": "p"}, "spec": {"stages": stages}
            }))
            .unwrap()
        };
        let sel = |k: &str, v: &str| json!({"matchLabels": {k: v}});
        let table: &[(serde_json::Value, &[&str], &[&str])] = &[
            // The issue's: a value near the stage's own name.
            (
                json!([{"name": "dev", "clusterSelector": sel("env", "dev")},
                       {"name": "staging", "clusterSelector": sel("env", "stagin")},
                       {"name": "production", "clusterSelector": sel("env", "prod")}]),
                &["dev", "production"],
                &[
                    "stage staging of p: no clusters derived: env=stagin looks like a typo of env=staging (the stage's name); a fleet file (--fleet) simulates the real inventory",
                ],
            ),
            // A value near another stage's, which is that stage's name.
            (
                json!([{"name": "canary", "clusterSelector": sel("env", "prodution")},
                       {"name": "production", "clusterSelector": sel("env", "production")}]),
                &["production"],
                &[
                    "stage canary of p: no clusters derived: env=prodution looks like a typo of env=production (another stage's); a fleet file (--fleet) simulates the real inventory",
                ],
            ),
            // Which of two near values is the typo is unknowable: neither is suspected.
            (
                json!([{"name": "a", "clusterSelector": sel("env", "production")},
                       {"name": "b", "clusterSelector": sel("env", "prodution")}]),
                &["a", "b"],
                &[],
            ),
            // A key near the key of two other stages.
            (
                json!([{"name": "a", "clusterSelector": sel("env", "dev")},
                       {"name": "b", "clusterSelector": sel("env", "stg")},
                       {"name": "c", "clusterSelector": sel("evn", "prod")}]),
                &["a", "b"],
                &[
                    "stage c of p: no clusters derived: the label key evn looks like a typo of env (other stages'); a fleet file (--fleet) simulates the real inventory",
                ],
            ),
            // Sequences and unrelated names are no typos.
            (
                json!([{"name": "wave-1", "clusterSelector": sel("wave", "1")},
                       {"name": "eu-1", "clusterSelector": sel("region", "eu-1")},
                       {"name": "eu-2", "clusterSelector": sel("region", "eu-2")},
                       {"name": "qa", "clusterSelector": sel("env", "qa1")},
                       {"name": "dev", "clusterSelector": sel("env", "development")},
                       {"name": "prod", "clusterSelector": sel("env", "production")}]),
                &["wave-1", "eu-1", "eu-2", "qa", "dev", "prod"],
                &[],
            ),
        ];
        for (stages, derived, notes) in table {
            let fleet = Fleet::derive(&[p(stages.clone())], 1);
            let namespaces: Vec<&str> = fleet
                .clusters
                .iter()
                .map(|c| c.namespace.as_str())
                .collect();
            assert_eq!(namespaces, *derived, "{stages}");
            assert_eq!(fleet.notes, *notes, "{stages}");
        }
    }

    #[test]
    fn parses_fleet_files() {
        let text = "apiVersion: promoter.dev/v1alpha1\nkind: Fleet\ndeployTime: 2m\nclusters:\n- name: a\n  namespace: dev\n  labels: {env: dev}\n  deployTime: 5m\n- name: b\n  ready: false\n---\napiVersion: lib.projectsveltos.io/v1beta1\nkind: SveltosCluster\nmetadata:\n  name: c\n  namespace: prod\n  labels: {env: prod}\nspec:\n  paused: true\n";
        let f = Fleet::parse(text, "fleet.yaml").unwrap();
        assert_eq!(f.clusters.len(), 3);
        assert_eq!(f.default_deploy_time.as_ref().unwrap().as_str(), "2m");
        assert_eq!(f.clusters[0].deploy_time.as_ref().unwrap().as_str(), "5m");
        assert!(!f.clusters[1].ready);
        assert!(f.clusters[2].paused);
        assert_eq!(f.find("prod/c").unwrap().name, "c");
        let bad = Fleet::parse("apiVersion: promoter.dev/v1alpha1\nkind: Fleet\nclusters:\n- name: a\n  deployTime: 5x\n", "f.yaml").unwrap_err();
        assert!(bad.contains("clusters[0].deployTime"), "{bad}");
    }
}
