//! The failure budget of a stage (`promoter.dev/failure-budget`): how many of its clusters may be
//! failing while the stage still passes. The rule, exactly:
//!
//! * **The stage's clusters** are its *active* clusters: every inventory cluster its selector
//!   matches that is not paused (paused clusters are skipped, as without a budget). A share
//!   (`10%`) is of their number, rounded down; `B` below is the number of clusters it allows.
//! * **Outside the revision**: an active cluster that is not deployed with the stage's profile as
//!   the run wrote it ([`deployment::Standing::Deployed`]: its ClusterSummary in sync and every
//!   feature `Provisioned` for that spec, freshness rules included).
//! * **Failing**: an active cluster outside the revision that (a) is not ready in the inventory
//!   (SveltosCluster `status.ready` false, CAPI control plane not initialized: unreachable, so
//!   neither Sveltos nor a health check can reach it), or (b) has a feature `Failed` or
//!   `FailedNonRetriable` in its ClusterSummary of the stage's profile, or (c) is still not
//!   deployed once the stage's progress deadline (its deploying part: the stage's start plus the
//!   deadline plus time held, the soak not added) has fallen. A cluster merely deploying before the
//!   deadline is not failing: the stage waits for it, as without a budget.
//! * **Budgeted** (counted against the budget) in a pass: every failing cluster, and every cluster
//!   the run's record already counts for the stage that is still outside the revision (a counted
//!   cluster that goes back to deploying stays counted until it runs the revision or leaves the
//!   stage: the budget it spent is not spent again by another cluster meanwhile).
//! * **The stage is deployed** when every active cluster outside the revision is budgeted, there
//!   are at most `B` budgeted clusters, and at least one active cluster runs the revision (a budget
//!   never passes a stage on which the revision runs nowhere). Otherwise it is not: more than `B`
//!   budgeted is *over budget* (a failure, as a failed deployment is without a budget, when a
//!   feature failed), else it waits for the first cluster still deploying. Deployed is judged
//!   every pass until the stage is promoted past (its soak and checks included), so the stage
//!   passes only while at most `B` of its clusters are outside the revision.
//! * **Recorded per run** (`promoter.dev/budgeted`, [`crate::annotations::budgeted`]): while the
//!   stage is within budget, the pass writes its budgeted clusters in the record of the run (in
//!   the guarded record patch, before the status write); a cluster counted for the first time is
//!   announced (Event `FailureBudgetSpent`, notified). A stage promoted past keeps its entry, each
//!   cluster until it runs the revision or leaves the stage (no longer matching, paused, or gone).
//!   The record names its run: a new run (a new revision, or the same revision again) drops it and
//!   starts every stage with its whole budget, and a cluster that failed in the previous run counts
//!   as deployed only once it is deployed with the new run's profile, like every other cluster.
//! * **Health checks** (postDelayHealthChecks) run on the stage's active clusters that are not
//!   budgeted, and must pass on every one of them. A check that fails on a reachable cluster is
//!   not budgeted: it holds the stage as without a budget.
//! * **Rollbacks and the failure policy**: the budget applies to a forward run only. A rollback
//!   targets every cluster of every stage it restores, budgeted ones included, and waits for all of
//!   them (within its own deadline). The failure policy acts when the progress deadline falls with
//!   the stage not deployed, that is, over budget (or waiting) at the deadline; budgeted clusters
//!   alone never trigger it.
//!
//! With budget 0 and no record, nothing here applies: [`deployment::check`] judges the stage as
//! upstream does.

use super::deadline;
use super::deployment::{self, DeploymentCheck, Look, Standing};
use super::world::{InventoryCluster, World};
use crate::annotations::budgeted::WHY_MAX;
use crate::annotations::{BudgetedCluster, Run, budgeted_in};
use crate::api::{ClusterProfile, ClusterPromotion, Stage, StageStatus};
use crate::settings::{Budget, Settings};
use chrono::{DateTime, Utc};

/// A stage's budget in a run, as a pass counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageBudget {
    /// As written (`10%`).
    pub written: Budget,
    /// The clusters already counted in this run, as recorded.
    pub recorded: Vec<BudgetedCluster>,
    /// The stage's progress deadline (its deploying part) has fallen: a cluster still not
    /// deployed is failing.
    pub deadline_fell: bool,
}

/// How a stage used its budget in a pass (part of [`DeploymentCheck`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetUse {
    pub written: Budget,
    /// The number of clusters the budget allows.
    pub allowed: usize,
    /// The stage's active clusters.
    pub clusters: usize,
    /// The budgeted clusters, sorted.
    pub budgeted: Vec<BudgetedCluster>,
}

impl BudgetUse {
    /// More clusters budgeted than the budget allows.
    pub fn over(&self) -> bool {
        self.budgeted.len() > self.allowed
    }

    /// `10% (2 of 20 clusters)`.
    pub fn budget_text(&self) -> String {
        format!(
            "{} ({} of {} clusters)",
            self.written.text(),
            self.allowed,
            self.clusters
        )
    }
}

/// `ns/a (why); ns/b (why)`.
pub fn names(clusters: &[BudgetedCluster]) -> String {
    clusters
        .iter()
        .map(|c| format!("{} ({})", c.cluster, c.why))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The budget of `stage` in the observed run at `now`; None when the stage has no budget and the
/// run counted none of its clusters (the stage is judged as without a budget).
pub fn of(
    p: &ClusterPromotion,
    stage: &Stage,
    entry: Option<&StageStatus>,
    run: Option<&Run>,
    now: DateTime<Utc>,
) -> Option<StageBudget> {
    let settings = Settings::of(p);
    let written = settings.failure_budget.for_stage(&stage.name);
    let recorded = run
        .map(|r| budgeted_in(p, r).of_stage(&stage.name).to_vec())
        .unwrap_or_default();
    if written.is_zero() && recorded.is_empty() {
        return None;
    }
    let deadline_fell = match (settings.deadline_for(&stage.name), run, entry) {
        (Some(limit), Some(run), Some(entry)) => {
            let clock = deadline::stage_clock(p, run, &stage.name, now).clock;
            // The deploying part of the deadline: the soak is not added.
            let deploying = StageStatus {
                last_successful_applied_time: None,
                ..entry.clone()
            };
            matches!(deadline::due(limit, stage, &deploying, &clock), Ok(Some(due)) if now >= due)
        }
        _ => false,
    };
    Some(StageBudget {
        written,
        recorded,
        deadline_fell,
    })
}

/// The deployment check of a stage with a budget (see the module's rule).
pub fn check(
    p: &ClusterPromotion,
    profile: &ClusterProfile,
    active: &[&InventoryCluster],
    world: &World,
    b: &StageBudget,
) -> DeploymentCheck {
    let none = super::summaries::ProfileSummaries::default();
    let name = profile.metadata.name.clone().unwrap_or_default();
    let summaries = world.summaries.get(&name).unwrap_or(&none);
    let look = Look::new(p, profile, world, summaries);
    let mut deployed = 0;
    let mut budgeted = Vec::new();
    let mut waiting: Option<(String, Option<DateTime<Utc>>)> = None;
    let mut failed_feature = false;
    for c in active {
        let cluster = c.to_string();
        let recorded = b.recorded.iter().find(|r| r.cluster == cluster);
        let failing = if !c.ready {
            Some("unreachable: not ready in the inventory".to_string())
        } else {
            match look.standing(c) {
                Standing::Deployed => {
                    deployed += 1;
                    continue;
                }
                Standing::Waiting { message, until } => match look.failure(c) {
                    Some(f) => {
                        failed_feature = true;
                        Some(f)
                    }
                    None if b.deadline_fell => {
                        Some(format!("not deployed by the progress deadline: {message}"))
                    }
                    None => {
                        if recorded.is_none() && waiting.is_none() {
                            waiting = Some((message, until));
                        }
                        None
                    }
                },
            }
        };
        let why = match (recorded, failing) {
            (Some(r), _) => r.why.clone(),
            (None, Some(why)) => crate::bounded_text::bounded(&why, WHY_MAX),
            (None, None) => continue,
        };
        budgeted.push(BudgetedCluster { cluster, why });
    }
    budgeted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let used = BudgetUse {
        written: b.written,
        allowed: b.written.allows(active.len()),
        clusters: active.len(),
        budgeted,
    };
    let list = names(&used.budgeted);
    let (done, message, failure, until) = if used.over() {
        let message = format!(
            "{} clusters failing, more than the failure budget of {}: {list}",
            used.budgeted.len(),
            used.budget_text()
        );
        let failure = failed_feature.then(|| message.clone());
        (false, message, failure, None)
    } else if let Some((message, until)) = waiting {
        (false, message, None, until)
    } else if deployed == 0 {
        let message = format!("No matching cluster runs the revision: {list}");
        let failure = failed_feature.then(|| message.clone());
        (false, message, failure, None)
    } else if used.budgeted.is_empty() {
        (
            true,
            "All matching clusters are successfully deployed.".to_string(),
            None,
            None,
        )
    } else {
        (
            true,
            format!(
                "Deployed on {deployed} of {} matching clusters; {} within the failure budget of {}: {list}.",
                active.len(),
                used.budgeted.len(),
                used.budget_text()
            ),
            None,
            None,
        )
    };
    DeploymentCheck {
        done,
        message,
        failure,
        skipped_paused: Vec::new(),
        until,
        selects_none: false,
        budget: Some(used),
    }
}

/// Which of `clusters` (recorded for a stage promoted past) still count: those still active in
/// the stage and not deployed with its profile. Where the pass did not list the stage's
/// ClusterSummaries (nor, then, the inventory), it cannot tell: all of them.
pub fn still_outside(
    p: &ClusterPromotion,
    stage: &Stage,
    world: &World,
    clusters: &[BudgetedCluster],
) -> Vec<BudgetedCluster> {
    let selector = stage.cluster_selector.clone().unwrap_or_default();
    let active: Vec<&InventoryCluster> = deployment::matching_clusters(&selector, world)
        .into_iter()
        .filter(|c| !c.paused)
        .collect();
    let name =
        super::profiles::profile_name(p.metadata.name.as_deref().unwrap_or_default(), &stage.name);
    if !world.summaries_listed.contains(&name) {
        return clusters.to_vec();
    }
    let none = super::summaries::ProfileSummaries::default();
    let profile = world.profiles.get(&name);
    let summaries = world.summaries.get(&name).unwrap_or(&none);
    clusters
        .iter()
        .filter(|r| {
            let Some(c) = active.iter().find(|c| c.to_string() == r.cluster) else {
                return false;
            };
            // Without its profile (being recreated), it stays named.
            let Some(profile) = profile else {
                return true;
            };
            !c.ready || Look::new(p, profile, world, summaries).standing(c) != Standing::Deployed
        })
        .cloned()
        .collect()
}

/// The clusters of `stage` the health checks skip: the budgeted ones, when the stage is within
/// its budget as the observed world shows it (the health checks run on every other cluster).
pub fn skipped_by_checks(
    p: &ClusterPromotion,
    stage: &Stage,
    world: &World,
    now: DateTime<Utc>,
) -> Vec<String> {
    let status = p.status.as_ref();
    let run = status.and_then(Run::of);
    let entry = status
        .and_then(|s| s.stages.as_ref())
        .and_then(|s| s.iter().find(|e| e.name == stage.name));
    let Some(b) = of(p, stage, entry, run.as_ref(), now) else {
        return Vec::new();
    };
    let name =
        super::profiles::profile_name(p.metadata.name.as_deref().unwrap_or_default(), &stage.name);
    let Some(profile) = world.profiles.get(&name) else {
        return Vec::new();
    };
    let selector = stage.cluster_selector.clone().unwrap_or_default();
    let active: Vec<&InventoryCluster> = deployment::matching_clusters(&selector, world)
        .into_iter()
        .filter(|c| !c.paused)
        .collect();
    let check = check(p, profile, &active, world, &b);
    match check.budget {
        Some(u) if !u.over() => u.budgeted.into_iter().map(|c| c.cluster).collect(),
        _ => Vec::new(),
    }
}

/// By stage, how many clusters the run counts against the failure budgets once `d` is written:
/// the record `d` writes, else the observed one (metrics).
pub fn counts(
    p: &ClusterPromotion,
    d: &super::decision::Decision,
) -> std::collections::BTreeMap<String, usize> {
    use super::decision::{Action, RecordOp};
    let written = d.actions.iter().rev().find_map(|a| match a {
        Action::Record(ops) => ops.iter().rev().find_map(|op| match op {
            RecordOp::Budgeted(b) => Some(Some(b.clone())),
            RecordOp::Drop(super::decision::Hold::Budgeted) => Some(None),
            _ => None,
        }),
        _ => None,
    });
    let record = match written {
        Some(w) => w,
        None => crate::annotations::budgeted_now(p),
    };
    record
        .map(|b| {
            b.stages
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(s, c)| (s.clone(), c.len()))
                .collect()
        })
        .unwrap_or_default()
}
