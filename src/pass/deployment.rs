//! Whether a generated profile has really finished: every cluster of the inventory that its stage
//! selects (not only those that already have a ClusterSummary) has a ClusterSummary whose whole
//! spec is in sync with the profile (in the normal form in which both are stored) and whose
//! features are all `Provisioned` for that spec. Texts follow upstream's.

use super::summaries::{ProfileSummaries, Provisioned, not_in_sync_text};
use super::world::{InventoryCluster, World};
use crate::api::ClusterProfile;
use crate::labels::LabelSelector;

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

/// The clusters a stage selects: every inventory cluster matching its selector (an empty selector
/// selects nothing, as in Sveltos).
pub fn matching_clusters<'a>(
    selector: &LabelSelector,
    world: &'a World,
) -> Vec<&'a InventoryCluster> {
    world.clusters_where(|labels| selector.selects(labels).unwrap_or(false))
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
    let none = ProfileSummaries::default();
    let summaries = world.summaries.get(&name).unwrap_or(&none);
    let failure = summaries.iter().find_map(|s| s.failure());
    let comparison = summaries.comparison(&profile.spec.fields);
    for cluster in active {
        let Some(cs) = summaries.find(cluster.kind, &cluster.namespace, &cluster.name) else {
            let expected = format!("{name}-{}-{}", cluster.kind.summary_infix(), cluster.name);
            return outcome(
                false,
                format!("ClusterSummary {expected} does not exist yet."),
                failure,
            );
        };
        if let Some(field) = comparison.differs(cs) {
            return outcome(false, not_in_sync_text(field, &cs.name), failure);
        }
        match cs.provisioned(comparison.content(cs), world.now) {
            Provisioned::Yes => {}
            Provisioned::No => {
                return outcome(
                    false,
                    format!("ClusterSummary {} is not yet provisioned.", cs.name),
                    failure,
                );
            }
            Provisioned::Stale => {
                return outcome(
                    false,
                    format!(
                        "ClusterSummary {} is not yet provisioned (its Provisioned predates its current spec).",
                        cs.name
                    ),
                    failure,
                );
            }
        }
    }
    outcome(
        true,
        "All matching clusters are successfully deployed.".into(),
        None,
    )
}
