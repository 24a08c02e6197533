//! Whether a generated profile has really finished: every cluster of the inventory that its stage
//! selects (not only those that already have a ClusterSummary) has a ClusterSummary whose spec is in
//! sync with the profile and whose features are all `Provisioned`. Texts follow upstream's.

use super::world::{InventoryCluster, World};
use crate::api::{ClusterProfile, ClusterSummary};
use crate::labels::LabelSelector;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeploymentCheck {
    pub done: bool,
    /// Upstream's message (`ClusterSummary X is not yet provisioned.`, `All matching clusters …`).
    pub message: String,
    /// A feature reported `Failed` or `FailedNonRetriable` on some cluster: the rollout is failing,
    /// not merely in progress. Holds the cluster and Sveltos' failure message.
    pub failure: Option<String>,
    /// Paused clusters that were skipped.
    pub skipped_paused: Vec<String>,
}

fn empty_or_missing(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// Upstream compares with DeepEqual; an absent list and an empty one are the same here.
fn same_list(a: Option<&Value>, b: Option<&Value>) -> bool {
    (empty_or_missing(a) && empty_or_missing(b)) || a == b
}

fn summary_name(cs: &ClusterSummary) -> String {
    cs.metadata.name.clone().unwrap_or_default()
}

/// Every feature `Provisioned`, and one present for each kind of content the summary carries.
pub fn is_provisioned(cs: &ClusterSummary) -> bool {
    let features = cs
        .status
        .as_ref()
        .and_then(|s| s.feature_summaries.clone())
        .unwrap_or_default();
    if !features
        .iter()
        .all(|f| f.status.as_deref() == Some("Provisioned"))
    {
        return false;
    }
    let spec = &cs.spec.cluster_profile_spec;
    [
        ("helmCharts", "Helm"),
        ("policyRefs", "Resources"),
        ("kustomizationRefs", "Kustomize"),
    ]
    .iter()
    .all(|(field, feature)| {
        empty_or_missing(spec.get(*field)) || features.iter().any(|f| f.feature_id == *feature)
    })
}

fn failure_of(cs: &ClusterSummary) -> Option<String> {
    let features = cs
        .status
        .as_ref()
        .and_then(|s| s.feature_summaries.as_ref())?;
    features
        .iter()
        .find(|f| matches!(f.status.as_deref(), Some("Failed" | "FailedNonRetriable")))
        .map(|f| {
            format!(
                "cluster {}/{}: feature {} {}: {}",
                cs.spec.cluster_namespace,
                cs.spec.cluster_name,
                f.feature_id,
                f.status.as_deref().unwrap_or_default(),
                f.failure_message.as_deref().unwrap_or("no failure message")
            )
        })
}

/// The clusters a stage selects: every inventory cluster matching its selector (an empty selector
/// selects nothing, as in Sveltos).
pub fn matching_clusters<'a>(
    selector: &LabelSelector,
    world: &'a World,
) -> Vec<&'a InventoryCluster> {
    let mut out: Vec<&InventoryCluster> = world
        .clusters
        .iter()
        .filter(|c| selector.selects(&c.labels).unwrap_or(false))
        .collect();
    out.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
    out
}

pub fn check(profile: &ClusterProfile, selector: &LabelSelector, world: &World) -> DeploymentCheck {
    let name = profile.metadata.name.clone().unwrap_or_default();
    let clusters = matching_clusters(selector, world);
    let (paused, active): (Vec<_>, Vec<_>) = clusters.into_iter().partition(|c| c.paused);
    let skipped_paused: Vec<String> = paused.iter().map(|c| c.to_string()).collect();
    let outcome = |done: bool, message: String, failure: Option<String>| DeploymentCheck {
        done,
        message,
        failure,
        skipped_paused: skipped_paused.clone(),
    };
    if active.is_empty() {
        return outcome(
            true,
            format!(
                "No matching clusters found for ClusterProfile {name}. Deployment considered complete."
            ),
            None,
        );
    }
    let not_ready: Vec<String> = active
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.to_string())
        .collect();
    if !not_ready.is_empty() {
        return outcome(
            false,
            format!("Clusters not ready: {}.", not_ready.join(", ")),
            None,
        );
    }
    let summaries = world
        .summaries
        .get(&name)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let failure = summaries.iter().filter_map(failure_of).next();
    for cluster in active {
        let Some(cs) = summaries.iter().find(|cs| {
            cs.spec.cluster_name == cluster.name
                && cs.spec.cluster_namespace == cluster.namespace
                && cs.spec.cluster_type == cluster.kind.cluster_type()
        }) else {
            let expected = format!("{name}-{}-{}", cluster.kind.summary_infix(), cluster.name);
            return outcome(
                false,
                format!("ClusterSummary {expected} does not exist yet."),
                failure,
            );
        };
        let (cs_spec, cp_spec) = (&cs.spec.cluster_profile_spec, &profile.spec.fields);
        let cs_name = summary_name(cs);
        for (field, text) in [
            (
                "helmCharts",
                format!("ClusterSummary HelmCharts {cs_name} is not in sync."),
            ),
            (
                "policyRefs",
                format!("ClusterSummary PolicyRefs {cs_name} is not in sync."),
            ),
            // Upstream's text, missing space included.
            (
                "kustomizationRefs",
                format!("ClusterSummaryKustomizationRefs {cs_name} is not in sync."),
            ),
        ] {
            if !same_list(cs_spec.get(field), cp_spec.get(field)) {
                return outcome(false, text, failure);
            }
        }
        if !is_provisioned(cs) {
            return outcome(
                false,
                format!("ClusterSummary {cs_name} is not yet provisioned."),
                failure,
            );
        }
    }
    outcome(
        true,
        "All matching clusters are successfully deployed.".into(),
        None,
    )
}
