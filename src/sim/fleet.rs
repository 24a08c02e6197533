//! The simulated fleet: clusters with labels, readiness, pause and deploy time, from a fleet file or,
//! by default, derived from the stage selectors so that any manifest runs without one.
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

    /// A few clusters per stage whose labels satisfy the stage's selector.
    pub fn derive(promotions: &[ClusterPromotion], per_stage: usize) -> Fleet {
        let mut clusters: Vec<FleetCluster> = Vec::new();
        for p in promotions {
            for stage in &p.spec.stages {
                let Some(labels) = stage.cluster_selector.as_ref().and_then(labels_satisfying)
                else {
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
        }
    }

    pub fn find(&self, name: &str) -> Option<&FleetCluster> {
        self.clusters
            .iter()
            .find(|c| c.name == name || c.key() == name)
    }
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
            fleet.clusters[2].labels,
            BTreeMap::from([
                ("env".into(), "prod".into()),
                ("region".into(), "eu".into()),
                ("tier".into(), "true".into())
            ])
        );
        assert_eq!(fleet.clusters[3].key(), "prod/prod-2");
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
