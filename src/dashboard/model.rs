//! What the dashboard shows, built only from what `status`, `explain` and `freeze list` compute
//! (`ops::inspect`, `ops::explain`, `ops::freeze`), plus which of the commands' guards let an
//! action through now (the commands' own pure `*_ops`): the page never decides a state itself.

use crate::annotations::{History, HistoryEntry, Run, rollback};
use crate::api::{ClusterPromotion, revision_id};
use crate::ops::control::{
    Actor, abort_ops, passed_in_current_run, pause_ops, resume_ops, stage_to_approve,
};
use crate::ops::explain::Explanation;
use crate::ops::freeze::FreezeRow;
use crate::ops::inspect::StatusRow;
use crate::ops::stages::{StageState, stage_states};
use crate::pass::rollback::{ROLLED_BACK, ROLLING_BACK};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

/// One promotion of the overview.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Row {
    Promotion(Box<OverviewRow>),
    /// A ClusterPromotion that does not decode (its status says why, as `step` writes it).
    Unreadable {
        name: String,
        error: String,
    },
}

impl Row {
    pub fn name(&self) -> &str {
        match self {
            Row::Promotion(r) => &r.status.name,
            Row::Unreadable { name, .. } => name,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverviewRow {
    /// `promoter status`'s line.
    pub status: StatusRow,
    pub labels: BTreeMap<String, String>,
    pub stages: Vec<StageState>,
    /// The id of the revision the status records (`profileSpecHash`).
    pub revision: Option<String>,
    pub offers: Offers,
}

/// The actions whose command would write something now (each decided by the command's own
/// guard, run on the promotion as read; the command checks again when it runs).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offers {
    /// Manual stages not approved, each with whether approving it is a pre-approval (the current
    /// run has passed it).
    pub approve: Vec<(String, bool)>,
    pub pause: bool,
    /// What `resume` would lift, one phrase each (none: nothing holds it).
    pub resume: Vec<String>,
    pub abort: bool,
    /// A completed revision to roll back to is in the history.
    pub rollback: bool,
}

/// What the guards of `approve`, `pause`, `resume`, `abort` and `rollback` say about `p` now.
pub fn offers(p: &ClusterPromotion, now: DateTime<Utc>) -> Offers {
    // Who acts changes no guard; the records these would write are thrown away.
    let actor = Actor::default();
    let approve = p
        .spec
        .stages
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.trigger
                .as_ref()
                .and_then(|t| t.manual.as_ref())
                .is_some_and(|m| !m.is_approved())
        })
        .filter(|(_, s)| stage_to_approve(p, Some(&s.name)).is_ok())
        .map(|(i, s)| (s.name.clone(), passed_in_current_run(p, i)))
        .collect();
    let run = p.status.as_ref().and_then(Run::of);
    let deleting = p.metadata.deletion_timestamp.is_some();
    Offers {
        approve: if deleting { Vec::new() } else { approve },
        pause: !deleting && pause_ops(p, &actor, now).is_ok(),
        resume: resume_ops(p, &actor, now).lifted,
        abort: !deleting && matches!(abort_ops(p, &actor, now), Ok(Ok(_))),
        rollback: !deleting
            && run.is_some_and(|run| History::of(p).candidates(&run.revision).next().is_some()),
    }
}

pub fn overview_row(p: &ClusterPromotion, status: StatusRow, now: DateTime<Utc>) -> OverviewRow {
    OverviewRow {
        labels: p.metadata.labels.clone().unwrap_or_default(),
        stages: stage_states(p, &status),
        revision: p
            .status
            .as_ref()
            .and_then(|s| s.profile_spec_hash.as_deref())
            .map(revision_id),
        offers: offers(p, now),
        status,
    }
}

/// One promotion's page.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    /// `promoter explain`'s model.
    pub explanation: Explanation,
    pub labels: BTreeMap<String, String>,
    pub stages: Vec<StageState>,
    /// Per stage, per cluster (as `explanation.stages[i].clusters`): the revision it runs.
    pub cluster_revisions: Vec<Vec<ClusterRevision>>,
    /// What `promoter rollback` would restore now: the newest completed revision that was not
    /// rolled back and is stored.
    pub restore: Option<HistoryEntry>,
    /// Every revision `rollback --to-revision` accepts now, newest first.
    pub rollback_targets: Vec<HistoryEntry>,
    pub offers: Offers,
    /// The promotion's Events, oldest first.
    pub events: Vec<EventLine>,
    /// Why the Events could not be read (not allowed, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_error: Option<String>,
}

/// The revision a cluster of a stage runs, from what `explain` says of its stage's profile and
/// of the cluster's ClusterSummary.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterRevision {
    /// Provisioned with this revision (an id).
    Runs(String),
    /// Being deployed with this revision, not provisioned yet.
    Deploying(String),
    /// A feature failed deploying this revision.
    Failed(String),
    /// Provisioned with a revision before the current one (the profile is not the current
    /// revision's and no rollback names it).
    Earlier,
    /// Provisioned, as the ClusterSummary says, but before its current spec was written.
    Stale(String),
    /// No profile for this stage (not reached), or no ClusterSummary yet.
    Nothing,
}

fn cluster_revisions(p: &ClusterPromotion, e: &Explanation) -> Vec<Vec<ClusterRevision>> {
    let current = e.revision.as_deref().map(revision_id);
    let run = p.status.as_ref().and_then(Run::of);
    // A rollback of the current run names the revision its restored profiles hold.
    let rolled_back_to = rollback(p)
        .filter(|r| run.as_ref() == Some(&r.from))
        .map(|r| revision_id(&r.to));
    e.stages
        .iter()
        .map(|s| {
            let restored = s.description.as_deref().is_some_and(|d| {
                let d = crate::pass::stage_status::description_text(d);
                d.starts_with(ROLLED_BACK) || d.starts_with(ROLLING_BACK)
            });
            let revision = match s.profile_state {
                "current" => current.clone(),
                "earlierRevision" if restored => rolled_back_to.clone(),
                _ => None,
            };
            s.clusters
                .iter()
                .map(|c| {
                    let failed = c.features.iter().any(|f| {
                        f.status.as_deref() == Some("Failed") || f.failure_message.is_some()
                    });
                    match (s.profile_state, &revision, c.cluster_summary.as_ref()) {
                        ("notCreated", _, _) | (_, _, None) => ClusterRevision::Nothing,
                        ("earlierRevision", None, Some(_)) => ClusterRevision::Earlier,
                        (_, None, Some(_)) => ClusterRevision::Nothing,
                        (_, Some(id), Some(_)) => match c.provisioned {
                            Some("Yes") => ClusterRevision::Runs(id.clone()),
                            Some("Stale") => ClusterRevision::Stale(id.clone()),
                            _ if failed => ClusterRevision::Failed(id.clone()),
                            _ => ClusterRevision::Deploying(id.clone()),
                        },
                    }
                })
                .collect()
        })
        .collect()
}

/// One Event about the promotion.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    pub at: Option<DateTime<Utc>>,
    /// `Normal` or `Warning`.
    pub kind: String,
    pub reason: String,
    pub note: String,
    /// How often it was seen (Events of a series).
    pub count: i32,
}

pub fn detail(
    p: &ClusterPromotion,
    explanation: Explanation,
    events: Result<Vec<EventLine>, String>,
    now: DateTime<Utc>,
) -> Detail {
    let run = p.status.as_ref().and_then(Run::of);
    let current = run.as_ref().map(|r| r.revision.clone()).unwrap_or_default();
    let history = History::of(p);
    let rollback_targets: Vec<HistoryEntry> = history.candidates(&current).cloned().collect();
    let restore = rollback_targets
        .iter()
        .find(|e| !explanation.not_stored.contains(&e.id))
        .cloned();
    Detail {
        cluster_revisions: cluster_revisions(p, &explanation),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        stages: stage_states(p, &explanation.status),
        restore,
        rollback_targets,
        offers: offers(p, now),
        events_error: events.as_ref().err().cloned(),
        events: events.unwrap_or_default(),
        explanation,
    }
}

/// The freezes page: `freeze list`'s rows, and the bypasses on record.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezesView {
    pub freezes: Vec<FreezeRow>,
    /// Promotions with a `promoter.dev/freeze-bypass`: the bypass, or why it is ignored.
    pub bypasses: Vec<(String, Result<crate::annotations::FreezeBypass, String>)>,
    /// promoter.dev's CRDs are not served: nothing can be frozen.
    pub not_served: bool,
    /// Freezes that cannot be decoded: they hold every promotion they may select (fail closed).
    pub unreadable: Vec<String>,
}

pub fn freezes_view(
    promotions: &[ClusterPromotion],
    world: &crate::pass::World,
    now: DateTime<Utc>,
) -> FreezesView {
    let labels: BTreeMap<String, BTreeMap<String, String>> = promotions
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.name.clone()?,
                p.metadata.labels.clone().unwrap_or_default(),
            ))
        })
        .collect();
    FreezesView {
        freezes: crate::ops::freeze::rows(&world.freezes, Some(&labels), now),
        bypasses: promotions
            .iter()
            .filter_map(|p| {
                Some((
                    p.metadata.name.clone()?,
                    crate::annotations::freeze_bypass(p)?,
                ))
            })
            .collect(),
        not_served: world.own_crds_missing,
        unreadable: world
            .freezes
            .iter()
            .filter(|f| f.spec.unreadable.is_some())
            .filter_map(|f| f.metadata.name.clone())
            .collect(),
    }
}

/// The banner of every page: why the last read failed (the rows are the last ones read), and when
/// a pass last ran.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Banner {
    pub error: Option<String>,
    pub last_pass: Option<crate::ops::inspect::LastPass>,
}
