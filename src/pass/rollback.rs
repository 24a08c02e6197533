//! A rollback of the current run (`promoter.dev/rollback`, written by the pass when a stage misses
//! its progress deadline under `failure-policy: rollback`, or by `promoter rollback`): every stage
//! the run reached, and every stage an earlier unfinished run left on another revision, goes back
//! to a revision that completed the whole rollout (stored as a `PromotionRevision`).
//!
//! A rollback is a rollout with the same completion rule as a forward stage: a stage is rolled
//! back when its profile is the one generated from the stored revision and every matching cluster
//! runs it (in sync and Provisioned, never in the pass that applied it: `deployment::check`). It is
//! decided from what is observed, each pass again, so a crash or a lost answer never confuses it
//! with a forward rollout: the record names the run it rolls back, and while it exists for the
//! current run the forward planner does not run.
//!
//! * `reverse` (default): the highest target first; a lower target's profile changes only once
//!   every higher target is rolled back.
//! * `all-at-once`: every target's profile at once; done when all are rolled back.
//!
//! Each target's profile changes only after the status write that describes it as rolling back
//! (invariant 1 of `decide`). When every target is rolled back, the record gets `completedAt` and
//! the promotion holds (phase RolledBack) until its spec changes or `promoter resume`; later passes
//! only repair the targets' profiles back to the stored revision.

use super::deadline;
use super::decision::{Context, Decision, Phase, Reason, RecordOp};
use super::deployment;
use super::profile_writes::{delete_after, ensure_after};
use super::profiles::{DesiredProfile, main_profile, preverification_name};
use super::stage_status::{description_text, entry, set_description, set_failure};
use super::world::World;
use crate::annotations::{History, Rollback, RollbackMiss, RolledBack, Run, Subject};
use crate::api::sveltos::{SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL};
use crate::api::{
    ClusterPromotion, ClusterPromotionStatus, PromotionRevision, Timestamp, revision_id,
    revision_name,
};
use crate::settings::{RollbackOrder, Settings};
use chrono::{DateTime, Utc};

/// The stage a rollback waited for when it missed its own deadline (its failureMessage says why).
pub use super::phase::ROLLBACK_FAILED;
/// A stage whose rollback is done.
pub use super::phase::ROLLED_BACK;
/// How a rolling-back stage's description begins.
pub use super::phase::ROLLING_BACK;
/// A lower stage of a `reverse` rollback, before its turn.
pub use super::phase::WAITING;

/// Whether a description is one of a rollback's.
pub fn is_rollback_text(description: &str) -> bool {
    let t = description_text(description);
    t.starts_with(ROLLING_BACK)
        || t.starts_with(WAITING)
        || t.starts_with(ROLLED_BACK)
        || t == ROLLBACK_FAILED
}

/// The promotion as it was at the stored revision: its profileSpec and tenant labels, with the
/// current stages (their selectors decide which clusters a stage's profile reaches).
pub fn promotion_at(p: &ClusterPromotion, rev: &PromotionRevision) -> ClusterPromotion {
    let mut good = p.clone();
    good.spec.profile_spec = Some(rev.spec.profile_spec.clone());
    let labels = good.metadata.labels.get_or_insert_with(Default::default);
    for key in [SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL] {
        labels.remove(key);
    }
    labels.extend(rev.spec.tenant_labels.clone());
    good
}

/// A stage the rollback returns to the stored revision.
struct Target {
    index: usize,
    stage: String,
    desired: DesiredProfile,
    /// Its profile is the stored revision's.
    holds: bool,
    /// … and every matching cluster runs it; else why not.
    deployed: Result<(), String>,
    /// When a summary waited for only by the grace will count (`DeploymentCheck::until`).
    until: Option<DateTime<Utc>>,
    /// Reached by the run (it has a status entry, which describes its rollback).
    reached: bool,
}

/// The targets, in stage order: the stages the run reached, and every stage whose profile exists
/// (an earlier unfinished revision may have left it anywhere; once the rollback re-applied it, it
/// stays a target until its clusters run the stored revision). A stage without a profile that the
/// run never reached stays as it is.
fn targets(
    p: &ClusterPromotion,
    good: &ClusterPromotion,
    world: &World,
    status: &ClusterPromotionStatus,
    check_deployment: bool,
) -> Vec<Target> {
    let mut out = Vec::new();
    for (index, stage) in p.spec.stages.iter().enumerate() {
        let desired = main_profile(good, stage);
        let observed = world
            .profiles
            .get(&desired.name)
            .filter(|cp| cp.metadata.deletion_timestamp.is_none());
        let reached = status.stages.iter().flatten().any(|s| s.name == stage.name);
        let holds = observed.is_some_and(|cp| desired.is_applied(cp));
        if !reached && observed.is_none() {
            continue;
        }
        let mut until = None;
        let deployed = match observed {
            Some(_) if holds && !check_deployment => Ok(()),
            // Not listed in this pass (the pass that starts a rollback observed before it was
            // recorded, and listed the current stage's only; or the list failed): nothing is
            // known of them, so nothing is claimed, and the stage is not done yet.
            Some(_) if holds && !world.summaries_known(&desired.name) => Err(format!(
                "the ClusterSummaries of ClusterProfile {} were not read in this pass; the next pass reads them",
                desired.name
            )),
            Some(cp) if holds => {
                let check = deployment::check(
                    p,
                    cp,
                    &stage.cluster_selector.clone().unwrap_or_default(),
                    world,
                );
                until = check.until;
                match (check.done, check.failure) {
                    (true, _) => Ok(()),
                    (false, Some(f)) => Err(format!("deployment failed: {f}")),
                    (false, None) => Err(check.message),
                }
            }
            _ => Err(format!(
                "ClusterProfile {} is applied in this pass.",
                desired.name
            )),
        };
        out.push(Target {
            index,
            stage: stage.name.clone(),
            desired,
            holds,
            deployed,
            until,
            reached,
        });
    }
    out
}

/// Plans the pass of a promotion whose current run `run` is being rolled back as `record` says.
pub fn plan(
    p: &ClusterPromotion,
    world: &World,
    ctx: &Context,
    run: &Run,
    record: &Rollback,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) {
    let now = ctx.now;
    let id = revision_id(&record.to);
    let name = p.metadata.name.clone().unwrap_or_default();
    let current = status.current_stage_name.clone().unwrap_or_default();
    d.stage = Some(current.clone());
    record_in_history(p, world, run, record, now, d);
    if let Some(at) = record.completed_at {
        show_unshown(p, &id, at, status, d);
    }
    if record.kept.as_deref() == Some(fingerprint(p, world, status).as_str()) {
        // Rolled back (or holding for a person), and no target's profile changed since: nothing
        // to repair, nothing to read.
        if let Some(at) = record.completed_at {
            return held(d, &id, at, record);
        }
        if let Some(m) = &record.missed {
            return stalled_outcome(d, &id, m);
        }
    }
    let rev = match world.revisions.get(&revision_name(&name, &record.to)) {
        None => {
            // The pass reads the stored revision and decides again.
            d.needs_revision = Some(revision_name(&name, &record.to));
            d.outcome(
                Phase::RollingBack,
                format!("rolling back to revision {id}: reading its stored PromotionRevision"),
            );
            return;
        }
        // A stored object of another revision under this name (edited by hand) is no revision.
        Some(r) if r.as_ref().is_none_or(|r| r.spec.revision != record.to) => {
            let message = format!(
                "{CANNOT_ROLL_BACK}{id}: PromotionRevision {} is gone; `promoter rollback --to-revision` another revision, or change the spec",
                revision_name(&name, &record.to)
            );
            let e = entry(status, &current);
            if e.failure_message.as_deref() != Some(&message) {
                d.event(
                    Reason::Blocked,
                    Some(&current),
                    format!("ClusterPromotion {name}: {message}"),
                );
            }
            set_failure(e, Some(&message), now);
            d.outcome(Phase::Blocked, message);
            return;
        }
        Some(r) => match r {
            Some(rev) => rev,
            None => return,
        },
    };
    let good = promotion_at(p, rev);
    if let Some(at) = record.completed_at {
        // Rolled back: the targets only keep the stored revision (repairs); nothing is re-judged,
        // so a cluster that drifts later never re-opens a finished rollback. Once they all hold
        // it again, their fingerprint is recorded, and steady passes read nothing more.
        let targets = targets(p, &good, world, status, false);
        let all_hold = targets.iter().all(|t| t.holds);
        for t in targets {
            ensure_after(p, world, d, t.desired);
        }
        let kept = fingerprint(p, world, status);
        if all_hold && record.kept.as_deref() != Some(kept.as_str()) {
            d.record(RecordOp::Rollback(Rollback {
                kept: Some(kept),
                ..record.clone()
            }));
        }
        return held(d, &id, at, record);
    }
    let targets = targets(p, &good, world, status, true);
    let observed = p.status.clone().unwrap_or_default();
    let was = |stage: &str| {
        observed
            .stages
            .iter()
            .flatten()
            .find(|s| s.name == stage)
            .and_then(|s| s.current_status_description.as_deref())
            .map(description_text)
            .map(String::from)
    };
    if !observed
        .stages
        .iter()
        .flatten()
        .filter_map(|s| s.current_status_description.as_deref())
        .any(is_rollback_text)
    {
        let names: Vec<&str> = targets.iter().rev().map(|t| t.stage.as_str()).collect();
        d.event(
            Reason::RollbackStarted,
            Some(&current),
            format!(
                "Rolling back {} to revision {id} ({}, {}): {}",
                if names.is_empty() {
                    "no stage".to_string()
                } else {
                    format!("stages {}", names.join(", "))
                },
                record.cause.as_str(),
                record.order.as_str(),
                record.reason.as_deref().unwrap_or("no reason given")
            ),
        );
    }
    // Which targets change in this pass: in reverse order only the highest one not rolled back.
    let active: Option<usize> = targets.iter().rposition(|t| t.deployed.is_err());
    let done = targets.iter().filter(|t| t.deployed.is_ok()).count();
    // Its own deadline: past it, the rollback holds for a person.
    let due = match active {
        Some(a) if record.missed.is_none() => {
            match overdue(p, world, run, record, &targets[a], &current, now, d) {
                Ok(due) => due,
                Err(miss) => Some(miss.due.as_datetime()),
            }
        }
        _ => None,
    };
    if let Some(miss) = record.missed.clone().or_else(|| pending_miss(d)) {
        return stall(p, world, &targets, &current, status, &miss, &id, now, d);
    }
    for (i, t) in targets.iter().enumerate() {
        let turn = match record.order {
            RollbackOrder::AllAtOnce => true,
            RollbackOrder::Reverse => active.is_none_or(|a| i >= a),
        };
        if turn {
            // The profile follows the status write that describes the stage as rolling back.
            ensure_after(p, world, d, t.desired.clone());
            delete_after(
                world,
                d,
                preverification_name(&name, &p.spec.stages[t.index].name),
            );
        }
        if !t.reached {
            continue;
        }
        let text = match (&t.deployed, turn) {
            (Ok(()), _) => format!("{ROLLED_BACK} {id}"),
            (Err(_), true) => format!("{ROLLING_BACK} {id}"),
            (Err(_), false) => format!("{WAITING} {id}"),
        };
        if t.deployed.is_ok() && was(&t.stage).as_deref() != Some(text.as_str()) {
            d.event(
                Reason::StageRolledBack,
                Some(&t.stage),
                stage_rolled_back_event(&t.stage, &id),
            );
        }
        set_description(entry(status, &t.stage), &text, now);
    }
    let progress = format!("{done}/{} stages done", targets.len());
    if let Some(a) = active {
        let t = &targets[a];
        let why = match &t.deployed {
            Err(m) if t.holds => m.clone(),
            _ => format!("applying the revision to ClusterProfile {}", t.desired.name),
        };
        d.outcome(
            Phase::RollingBack,
            format!(
                "rolling back to revision {id} ({}): stage {}: {why} ({progress}){}",
                record.cause.as_str(),
                t.stage,
                due.map(|t| format!(" (rollback deadline {})", Timestamp::new(t)))
                    .unwrap_or_default()
            ),
        );
        d.check_by(due);
        // A pass when the grace ends, not only at the deadline (a scheduler that sleeps until
        // the next check, the simulator, must not sleep through it).
        d.wait_for_grace(&t.stage, t.until);
        return;
    }
    d.record(RecordOp::Rollback(Rollback {
        completed_at: Some(Timestamp::new(now)),
        kept: Some(fingerprint(p, world, status)),
        ..record.clone()
    }));
    // The rollback's completion is recorded: later passes hold without announcing it again.
    d.recorded_event(
        Reason::RolledBack,
        Some(&current),
        rolled_back_event(&name, &id),
    );
    held(d, &id, Timestamp::new(now), record);
}

/// A rollback recorded complete whose status was never written (the answer to the record patch
/// was lost and the pass stopped, its status write was reset before the server read it, or it
/// was killed in between): the observed status still shows stages rolling back or waiting to.
/// Every one of them was rolled back when the completion was recorded; each says so as of that
/// time (`at`), with the Events the completing pass owed (its notifications went with the record).
fn show_unshown(
    p: &ClusterPromotion,
    id: &str,
    at: Timestamp,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) {
    let observed = p.status.clone().unwrap_or_default();
    let unshown: Vec<String> = observed
        .stages
        .iter()
        .flatten()
        .filter(|s| {
            s.current_status_description
                .as_deref()
                .map(description_text)
                .is_some_and(|t| t.starts_with(ROLLING_BACK) || t.starts_with(WAITING))
        })
        .map(|s| s.name.clone())
        .collect();
    if unshown.is_empty() {
        return;
    }
    for stage in &unshown {
        set_description(
            entry(status, stage),
            &format!("{ROLLED_BACK} {id}"),
            at.as_datetime(),
        );
        d.owed_event(
            Reason::StageRolledBack,
            Some(stage),
            stage_rolled_back_event(stage, id),
        );
    }
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let current = observed.current_stage_name.clone().unwrap_or_default();
    d.owed_event(
        Reason::RolledBack,
        Some(&current),
        rolled_back_event(name, id),
    );
}

/// The Event of a stage whose profile holds the revision rolled back to, deployed everywhere.
fn stage_rolled_back_event(stage: &str, id: &str) -> String {
    format!("Stage {stage} rolled back to revision {id}")
}

/// The Event of a rollback whose every target holds the revision rolled back to.
fn rolled_back_event(promotion: &str, id: &str) -> String {
    format!(
        "ClusterPromotion {promotion} rolled back to revision {id}; it holds until its spec changes or `promoter resume`"
    )
}

/// A digest of the profiles of every stage a rollback targets (reached by the run, or with a
/// profile) as observed: name, UID, generation (which moves with every spec change), labels,
/// annotations and owner references; an absent profile counts as absent. A profile promoter
/// would repair (a hand edit, a deletion) changes it; Sveltos' status writes and finalizers do
/// not. Needs no stored revision: profile names depend only on the stages.
pub fn fingerprint(p: &ClusterPromotion, world: &World, status: &ClusterPromotionStatus) -> String {
    use sha2::Digest;
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut parts = Vec::new();
    for stage in &p.spec.stages {
        let profile = super::profiles::profile_name(&name, &stage.name);
        let observed = world
            .profiles
            .get(&profile)
            .filter(|cp| cp.metadata.deletion_timestamp.is_none());
        let reached = status.stages.iter().flatten().any(|s| s.name == stage.name);
        if !reached && observed.is_none() {
            continue;
        }
        parts.push(match observed {
            None => serde_json::json!([profile]),
            Some(cp) => serde_json::json!([
                profile,
                cp.metadata.uid,
                cp.metadata.generation,
                cp.metadata.labels,
                cp.metadata.annotations,
                cp.metadata.owner_references,
            ]),
        });
    }
    let bytes = serde_json::to_vec(&parts).unwrap_or_default();
    crate::api::promotion_revision::hex(&sha2::Sha256::digest(&bytes), 16)
}

/// The rollback's own deadline while target `stuck` is not rolled back: continues its clock
/// (started by the rollback's first pass, paused by holds) and says when it falls (`Ok`), or
/// records that it fell (`Err`: the miss, recorded with its Event in this decision).
#[allow(clippy::too_many_arguments)]
fn overdue(
    p: &ClusterPromotion,
    world: &World,
    run: &Run,
    record: &Rollback,
    stuck: &Target,
    current: &str,
    now: DateTime<Utc>,
    d: &mut Decision,
) -> Result<Option<DateTime<Utc>>, RollbackMiss> {
    let subject = Subject::Rollback(record.to.clone());
    let mut clock = deadline::clock(p, run, &subject, now);
    clock.clock.since.get_or_insert(Timestamp::new(now));
    let since = clock
        .clock
        .since
        .unwrap_or(Timestamp::new(now))
        .as_datetime();
    let held = chrono::Duration::seconds(clock.clock.held_seconds);
    clock.record(run, &subject, d);
    let Some(limit) = Settings::of(p).rollback_deadline else {
        return Ok(None);
    };
    let Some(due) = since
        .checked_add_signed(limit.after)
        .and_then(|t| t.checked_add_signed(held))
    else {
        return Ok(None);
    };
    if now < due {
        return Ok(Some(due));
    }
    let why = match &stuck.deployed {
        Err(m) if stuck.holds => m.clone(),
        _ => format!(
            "the revision was not applied to ClusterProfile {}",
            stuck.desired.name
        ),
    };
    let miss = RollbackMiss {
        at: Timestamp::new(now),
        due: Timestamp::new(due),
        deadline: limit.text.clone(),
        stage: stuck.stage.clone(),
        why: crate::bounded_text::recorded(&why),
    };
    d.record(RecordOp::Rollback(Rollback {
        missed: Some(miss.clone()),
        kept: Some(fingerprint(p, world, &p.status.clone().unwrap_or_default())),
        ..record.clone()
    }));
    // Recorded by the record patch: the run holds from now on, whatever the status write does.
    d.recorded_event(
        Reason::RollbackDeadlineExceeded,
        Some(if stuck.reached { &stuck.stage } else { current }),
        format!(
            "Rollback to revision {} did not complete within its deadline {} (due {}): stage {}: {}; it holds for a person",
            revision_id(&record.to),
            limit.text,
            miss.due,
            miss.stage,
            miss.why
        ),
    );
    Err(miss)
}

/// The miss this decision records, if it records one.
fn pending_miss(d: &Decision) -> Option<RollbackMiss> {
    d.actions.iter().find_map(|a| match a {
        super::decision::Action::Record(ops) => ops.iter().find_map(|op| match op {
            RecordOp::Rollback(r) => r.missed.clone(),
            _ => None,
        }),
        _ => None,
    })
}

/// A rollback that missed its deadline holds for a person: the targets whose profiles hold the
/// revision rolled back to keep it (repairs), no other profile changes, and the stage it waited
/// for says why.
#[allow(clippy::too_many_arguments)]
fn stall(
    p: &ClusterPromotion,
    world: &World,
    targets: &[Target],
    current: &str,
    status: &mut ClusterPromotionStatus,
    miss: &RollbackMiss,
    id: &str,
    now: DateTime<Utc>,
    d: &mut Decision,
) {
    for t in targets.iter().filter(|t| t.holds) {
        ensure_after(p, world, d, t.desired.clone());
    }
    let stage = match targets.iter().find(|t| t.stage == miss.stage) {
        Some(t) if t.reached => t.stage.clone(),
        _ => current.to_string(),
    };
    let e = entry(status, &stage);
    // The stage that missed its progress deadline keeps that cause too, after the newer one.
    let message = match e.failure_message.as_deref() {
        Some(earlier) if earlier.starts_with(PROGRESS_MISS) => format!(
            "{}; earlier: {}",
            crate::bounded_text::bounded(&miss.message(), 500),
            crate::bounded_text::bounded(earlier, 500)
        ),
        Some(kept) if kept.starts_with(ROLLBACK_MISS) => kept.to_string(),
        _ => miss.message(),
    };
    set_failure(e, Some(&message), now);
    set_description(e, ROLLBACK_FAILED, now);
    stalled_outcome(d, id, miss);
}

/// How the failureMessage of a stage that missed its progress deadline begins (`Failed::message`).
const PROGRESS_MISS: &str = "progress deadline ";
/// … and of the stage a rollback waited for when it missed its own (`RollbackMiss::message`).
const ROLLBACK_MISS: &str = "rollback deadline ";

/// How the failureMessage of a rollback whose stored revision is gone begins.
const CANNOT_ROLL_BACK: &str = "cannot roll back to revision ";

/// Whether `message`, the failureMessage of the stage whose miss started or preceded this
/// rollback, is one that [`plan`] writes over that miss (the Blocked text of a gone revision, a
/// stalled rollback's miss). `plan` runs only once the rollback is recorded, which is in the
/// record patch of the miss or after it: such a text says the miss was shown, by its content, not
/// by comparing two passes' clocks.
pub fn written_over_miss(message: &str) -> bool {
    message.starts_with(CANNOT_ROLL_BACK) || message.starts_with(ROLLBACK_MISS)
}

fn stalled_outcome(d: &mut Decision, id: &str, miss: &RollbackMiss) {
    d.next_check = None;
    d.outcome(
        Phase::RollbackFailed,
        format!(
            "the rollback to revision {id} failed: {}; it holds: `promoter resume` gives it a new deadline, `promoter rollback --to-revision` another revision, a new spec starts over",
            miss.message()
        ),
    );
}

fn held(d: &mut Decision, id: &str, at: Timestamp, record: &Rollback) {
    d.outcome(
        Phase::RolledBack,
        format!(
            "rolled back to revision {id} at {at} ({}); holds until the spec changes or `promoter resume`",
            record.cause.as_str()
        ),
    );
}

/// The run's history entry says it was rolled back (once: the first pass of the rollback records
/// it, whether the pass or `promoter rollback` started it).
fn record_in_history(
    p: &ClusterPromotion,
    world: &World,
    run: &Run,
    record: &Rollback,
    now: chrono::DateTime<chrono::Utc>,
    d: &mut Decision,
) {
    let mut history = History::of(p);
    let since = run.started_at();
    if history
        .0
        .iter()
        .any(|e| e.revision == run.revision && e.started_at == since && e.rolled_back.is_some())
    {
        return;
    }
    let limit = Settings::of(p).revision_history_limit;
    history.record_rollback(
        &run.revision,
        since,
        RolledBack {
            at: record.at,
            cause: record.cause,
            by: record.by.clone(),
            to: revision_id(&record.to),
        },
        limit,
    );
    super::revisions::record_history(p, world, history, now, d);
}
