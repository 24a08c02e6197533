//! Whether a generated profile has really finished: every cluster of the inventory that its stage
//! selects (not only those that already have a ClusterSummary) has a ClusterSummary whose whole
//! spec is in sync with the profile (in the normal form in which both are stored) and whose
//! features are all `Provisioned` for that spec ([`super::summaries::Summary::provisioned`], from
//! the `promoter.dev/redeploy` record of the write: [`WriteRecord`]). Texts follow upstream's.

use super::profiles::SPEC_HASH_ANNOTATION;
use super::summaries::{Freshness, ProfileSummaries, Provisioned, Stale, not_in_sync_text};
use super::world::{InventoryCluster, World};
use crate::annotations::redeploy::{Before, redeploys};
use crate::api::{ClusterProfile, ClusterPromotion, Timestamp};
use crate::labels::LabelSelector;
use crate::sveltos::redeploy::Expect;
use chrono::{DateTime, Utc};

/// What promoter recorded when it last wrote a profile's spec (`promoter.dev/redeploy`), if that
/// record is about the spec the profile now carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub expect: Expect,
    pub before: Option<Before>,
    pub unsettled: bool,
}

impl WriteRecord {
    pub fn of(p: &ClusterPromotion, profile: &ClusterProfile) -> Option<WriteRecord> {
        let name = profile.metadata.name.as_deref()?;
        let written = profile
            .metadata
            .annotations
            .as_ref()?
            .get(SPEC_HASH_ANNOTATION)?;
        let r = redeploys(p).remove(name).filter(|r| &r.spec == written)?;
        Some(WriteRecord {
            expect: r.expect(),
            before: r.before(),
            unsettled: r.unsettled,
        })
    }

    pub fn freshness(record: Option<&WriteRecord>) -> Freshness<'_> {
        match record {
            // After an unsettled write, the Provisioned shown may be of a spec before the previous
            // one (copied, not yet redeployed): "nothing to redeploy" from the previous spec says
            // nothing about it.
            Some(WriteRecord {
                expect: Expect::Nothing,
                unsettled: false,
                ..
            }) => Freshness::Nothing,
            Some(WriteRecord {
                expect: Expect::Features(features),
                before,
                unsettled,
            }) => Freshness::Redeploy {
                features: *features,
                before: before.as_ref(),
                unsettled: *unsettled,
            },
            Some(r) => Freshness::Unknown {
                unsettled: r.unsettled,
            },
            None => Freshness::UNKNOWN,
        }
    }
}

/// Why a summary whose features are all `Provisioned` does not count yet, for the status and
/// `explain`.
pub fn stale_text(stale: Stale) -> String {
    match stale {
        Stale::OldHash => "Sveltos has not redeployed it for its current spec yet".into(),
        Stale::NoStatusSince { grace_ends } => format!(
            "no status from Sveltos since its spec changed; counted as current at {} unless \
             Sveltos redeploys it",
            grace_time(grace_ends)
        ),
        Stale::Unsettled { grace_ends } => format!(
            "when promoter wrote this spec a summary showed no status of the spec before it yet: \
             a status written in this spec's second may still be about the one before, and no \
             hash Sveltos reported for this spec is known; counted as current at {} unless \
             Sveltos writes a status after that second",
            grace_time(grace_ends)
        ),
    }
}

fn grace_time(epoch: i64) -> String {
    DateTime::<Utc>::from_timestamp(epoch, 0)
        .map(|t| Timestamp::new(t).to_string())
        .unwrap_or_default()
}

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
    /// When a summary waited for only by the grace will count as current.
    pub until: Option<DateTime<Utc>>,
    /// No cluster of the inventory matches the stage's selector (see `empty_stage`).
    pub selects_none: bool,
    /// How the stage used its failure budget (a stage with one, see `budget`).
    pub budget: Option<super::budget::BudgetUse>,
}

/// The clusters a stage selects: every inventory cluster matching its selector (an empty selector
/// selects nothing, as in Sveltos).
pub fn matching_clusters<'a>(
    selector: &LabelSelector,
    world: &'a World,
) -> Vec<&'a InventoryCluster> {
    world.clusters_where(|labels| selector.selects(labels).unwrap_or(false))
}

/// Where one active, ready cluster of a stage stands with the stage's profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Its ClusterSummary is in sync with the profile and every feature is `Provisioned` for it.
    Deployed,
    /// Not yet: upstream's message, and when a summary waited for only by the grace counts.
    Waiting {
        message: String,
        until: Option<DateTime<Utc>>,
    },
}

/// What judging a cluster's standing with one profile needs, read once per profile.
pub struct Look<'a> {
    name: String,
    summaries: &'a ProfileSummaries,
    comparison: super::summaries::Comparison,
    record: Option<WriteRecord>,
    known: Option<super::known_hashes::Known>,
    now: Option<DateTime<Utc>>,
}

impl<'a> Look<'a> {
    pub fn new(
        p: &ClusterPromotion,
        profile: &ClusterProfile,
        world: &World,
        summaries: &'a ProfileSummaries,
    ) -> Look<'a> {
        Look {
            name: profile.metadata.name.clone().unwrap_or_default(),
            summaries,
            comparison: summaries.comparison(&profile.spec.fields),
            record: WriteRecord::of(p, profile),
            known: super::known_hashes::of(p, world, profile),
            now: world.now,
        }
    }

    /// The summaries of the profile.
    pub fn summaries(&self) -> &'a ProfileSummaries {
        self.summaries
    }

    /// Where `cluster` stands (its readiness aside), in upstream's words.
    pub fn standing(&self, cluster: &InventoryCluster) -> Standing {
        let name = &self.name;
        let waiting = |message: String| Standing::Waiting {
            message,
            until: None,
        };
        let Some(cs) = self
            .summaries
            .find(cluster.kind, &cluster.namespace, &cluster.name)
        else {
            let expected = format!("{name}-{}-{}", cluster.kind.summary_infix(), cluster.name);
            return waiting(format!("ClusterSummary {expected} does not exist yet."));
        };
        if let Some(field) = self.comparison.differs(cs) {
            return waiting(not_in_sync_text(field, &cs.name));
        }
        let freshness = WriteRecord::freshness(self.record.as_ref());
        match cs.provisioned(
            self.comparison.content(cs),
            freshness,
            self.known.as_ref().map(|k| &k.hashes),
            self.now,
        ) {
            Provisioned::Yes => Standing::Deployed,
            Provisioned::No => waiting(format!(
                "ClusterSummary {} is not yet provisioned.",
                cs.name
            )),
            Provisioned::Stale(stale) => {
                let until = match stale {
                    Stale::NoStatusSince { grace_ends } | Stale::Unsettled { grace_ends } => {
                        DateTime::<Utc>::from_timestamp(grace_ends, 0)
                    }
                    Stale::OldHash => None,
                };
                Standing::Waiting {
                    message: format!(
                        "ClusterSummary {} is not yet provisioned ({}).",
                        cs.name,
                        stale_text(stale)
                    ),
                    until,
                }
            }
        }
    }

    /// The failure a feature of `cluster`'s summary reports, if any.
    pub fn failure(&self, cluster: &InventoryCluster) -> Option<String> {
        self.summaries
            .find(cluster.kind, &cluster.namespace, &cluster.name)
            .and_then(|s| s.failure())
    }
}

/// The deployment check of a forward run's stage: with its failure budget, when it has one
/// (`budget`), else [`check`].
pub fn check_within(
    p: &ClusterPromotion,
    profile: &ClusterProfile,
    selector: &LabelSelector,
    world: &World,
    budget: Option<&super::budget::StageBudget>,
) -> DeploymentCheck {
    let Some(b) = budget else {
        return check(p, profile, selector, world);
    };
    let clusters = matching_clusters(selector, world);
    let (paused, active): (Vec<&InventoryCluster>, Vec<&InventoryCluster>) =
        clusters.into_iter().partition(|c| c.paused);
    if active.is_empty() {
        return check(p, profile, selector, world);
    }
    DeploymentCheck {
        skipped_paused: paused.iter().map(|c| c.to_string()).collect(),
        ..super::budget::check(p, profile, &active, world, b)
    }
}

/// Whether every active cluster the stage selects is deployed with `profile` (upstream's rule).
pub fn check(
    p: &ClusterPromotion,
    profile: &ClusterProfile,
    selector: &LabelSelector,
    world: &World,
) -> DeploymentCheck {
    let name = profile.metadata.name.clone().unwrap_or_default();
    let clusters = matching_clusters(selector, world);
    let selects_none = clusters.is_empty();
    let (paused, active): (Vec<_>, Vec<_>) = clusters.into_iter().partition(|c| c.paused);
    let skipped_paused: Vec<String> = paused.iter().map(|c| c.to_string()).collect();
    let outcome = |done: bool, message: String, failure: Option<String>| DeploymentCheck {
        done,
        message,
        failure,
        skipped_paused: skipped_paused.clone(),
        until: None,
        selects_none,
        budget: None,
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
    let look = Look::new(p, profile, world, summaries);
    for cluster in active {
        if let Standing::Waiting { message, until } = look.standing(cluster) {
            let mut out = outcome(false, message, failure);
            out.until = until;
            return out;
        }
    }
    outcome(
        true,
        "All matching clusters are successfully deployed.".into(),
        None,
    )
}
