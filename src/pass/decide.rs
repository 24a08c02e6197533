//! The decision for one ClusterPromotion: a pure function of (promotion, observed world, health
//! results, now) returning the new status, the actions, the events and a one-line summary.
//! No I/O, no clock, no randomness.
//!
//! # Invariants (the gates), and where they are kept
//!
//! A *run* is one revision (status `profileSpecHash` = [`revision_hash`](crate::hash::revision_hash), `stagesHash`) from the
//! restart that started it ([`Run`](crate::annotations::Run)). Writes happen in this order (see `act`): the promotion's
//! records (one JSON patch guarded by the observed resourceVersion), the status (PUT guarded by the
//! resourceVersion), then what the status decided ([`Decision::after_status`]).
//!
//! 1. **Nothing irrevocable before the decision is recorded.** Before the status write a pass only
//!    re-applies what the observed status already records: the reached stages' profiles (equal
//!    revision hash means identical generated content), and removes preverification profiles of
//!    stages already passed. Applying the next stage's profile, a restart's stage 1 profile and
//!    deleting a preverification profile come after the status write. A pass refused at the status
//!    write (the promotion changed: an approval revoked, a new spec) changed nothing any cluster
//!    runs; a pass killed after it leaves a status whose next pass re-applies what it records.
//! 2. **An approval is consumed exactly once, for exactly one run.** Consuming it removes
//!    `approved` and writes `promoter.dev/grant.<stage>` for the current run in one guarded patch
//!    ([`RecordOp::ConsumeApproval`](super::decision::RecordOp::ConsumeApproval)), before the status write. The grant approves that stage of
//!    that run only; a later revision is a new run and needs a new approval. A concurrent or late
//!    pass that observed an older resourceVersion cannot consume (its patch is refused), so it can
//!    neither reuse the approval nor remove a newer one.
//! 3. **A fresh approval is never removed.** Only the current stage's approval is consumed, and only
//!    when it lets the stage pass; a pre-approval of a stage already passed stays for the next run.
//!    A grant whose run was superseded before its promotion was recorded is given back
//!    ([`RecordOp::RestoreApproval`](super::decision::RecordOp::RestoreApproval)) in the restart's own guarded patch.
//! 4. **Completion is recorded** (`promoter.dev/completed` = the run), before the status write, and
//!    only a new run undoes it: pause/resume, a blocked pass or any description text do not.
//! 5. **Progressive**: every change of what a generated profile carries from the promotion (order of
//!    lists included, tenant labels included) is a new revision, rolled out from stage 1; a stage
//!    beyond the current one keeps the revision it was promoted with.
//!
//! # Where the decision lives
//!
//! * `decision`: the vocabulary (`Decision`, `Action`, `RecordOp`, `EventNote`, `Reason`, `Phase`,
//!   `Context`, `HealthResults`).
//! * here: [`decide`]: a paused promotion, a deleted one (`deletion`), else the planner.
//! * `problems`: what blocks a promotion before planning.
//! * `planner`: restart or progress: the reached stages, the current stage's deployment, its
//!   gates, then `advance` to the next stage (the one place a stage is promoted past).
//! * `gates/`: one module per gate, in order: `delay`, `preverification`, `health`, `window`,
//!   `approval` (with the approval and grant records).
//! * `profile_writes`: applying and deleting generated profiles, before or after the status write.

use super::decision::{Action, Context, Decision, HealthResults, Phase, RecordOp};
use super::planner;
use super::profiles::{
    has_owner_reference, has_preverification, owned_by, preverification_name, profile_name,
};
use super::stage_status::{entry, set_description};
use super::world::World;
use crate::annotations::{self, Run};
use crate::api::promotion::FINALIZER;
use crate::api::{ClusterProfile, ClusterPromotion};
use crate::validation::check_generated_name;

pub fn has_finalizer(p: &ClusterPromotion) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

pub fn decide(
    p: &ClusterPromotion,
    world: &World,
    health: &HealthResults,
    ctx: &Context,
) -> Decision {
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut d = Decision::new(&name);
    let old = p.status.clone().unwrap_or_default();
    let mut status = old.clone();
    if p.metadata.deletion_timestamp.is_none() {
        super::completion::show_unshown(p, &mut status, &mut d, ctx.now);
    }
    if let Some(by) = annotations::paused(p) {
        // Left alone, even when deleted: nothing applied or deleted; only the status says so, once.
        let text = format!(
            "Paused: promotion paused by {}{}",
            by.by,
            if by.at.is_empty() {
                String::new()
            } else {
                format!(" since {}", by.at)
            }
        );
        if let Some(stage) = status.current_stage_name.clone().filter(|s| !s.is_empty()) {
            set_description(entry(&mut status, &stage), &text, ctx.now);
            d.stage = Some(stage);
        }
        // The time it is paused does not count against the running deadline.
        super::deadline::hold(p, ctx.now, &mut d);
        if status != old {
            d.status = Some(status);
        }
        d.outcome(Phase::Paused, text);
        return d;
    }
    if p.metadata.deletion_timestamp.is_some() {
        deletion(p, &name, world, &mut d);
        return d;
    }
    if !has_finalizer(p) {
        d.actions.push(Action::AddFinalizer);
    }
    planner::plan(p, &name, world, health, ctx, &mut d, &mut status);
    drop_recorded_redeploys(p, &mut d);
    if status != old {
        d.status = Some(status);
    }
    d
}

/// A `promoter.dev/redeploy` entry the promotion already holds is not written again (a pass that
/// died before its profile write plans the same record): a pass that changes nothing writes
/// nothing, and a pass that dies after its first write every time still gets further.
fn drop_recorded_redeploys(p: &ClusterPromotion, d: &mut Decision) {
    let recorded = crate::annotations::redeploy::redeploys(p);
    if recorded.is_empty() {
        return;
    }
    for action in &mut d.actions {
        if let Action::Record(ops) = action {
            ops.retain(|op| {
                !matches!(op, RecordOp::Redeploy { profile, record }
                    if recorded.get(profile) == Some(record))
            });
        }
    }
    d.actions
        .retain(|a| !matches!(a, Action::Record(ops) if ops.is_empty()));
}

/// The profiles whose ClusterSummaries the decision may read: the current stage's main profile and
/// its preverification profile (if its trigger has a preHealthCheckDeployment), unless the promotion is complete or being deleted;
/// and, while the run counts clusters against a stage's failure budget, that stage's profile (its
/// clusters stay named until they run the revision: `budget`).
pub fn watched_profiles(p: &ClusterPromotion) -> Vec<String> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    if p.metadata.deletion_timestamp.is_some() || name.is_empty() {
        return Vec::new();
    }
    let mut watched = watched_by_stage(p, name);
    if let Some(b) = annotations::budgeted_now(p) {
        for stage in b.stages.keys() {
            let profile = profile_name(name, stage);
            if check_generated_name(&profile).is_ok() && !watched.contains(&profile) {
                watched.push(profile);
            }
        }
    }
    watched
}

fn watched_by_stage(p: &ClusterPromotion, name: &str) -> Vec<String> {
    let status = p.status.clone().unwrap_or_default();
    let current = status.current_stage_name.clone().unwrap_or_default();
    let Some(idx) =
        p.spec
            .stages
            .iter()
            .position(|s| s.name == current)
            .or(if p.spec.stages.is_empty() {
                None
            } else {
                Some(0)
            })
    else {
        return Vec::new();
    };
    let stage = &p.spec.stages[idx];
    let run = Run::of(&status);
    if let Some(r) = annotations::rollback(p).filter(|r| Some(&r.from) == run.as_ref()) {
        // A rollback in progress judges every stage it may restore.
        if r.completed_at.is_some() {
            return Vec::new();
        }
        return p
            .spec
            .stages
            .iter()
            .map(|s| profile_name(name, &s.name))
            .filter(|n| check_generated_name(n).is_ok())
            .collect();
    }
    if annotations::is_complete(p) {
        return Vec::new();
    }
    // The preverification profile's summaries only where the gate reads them (`has_preverification`).
    std::iter::once(profile_name(name, &stage.name))
        .chain(has_preverification(stage).then(|| preverification_name(name, &stage.name)))
        .filter(|n| check_generated_name(n).is_ok())
        .collect()
}

fn deletion(p: &ClusterPromotion, name: &str, world: &World, d: &mut Decision) {
    if !has_finalizer(p) {
        d.outcome(Phase::Deleting, "being deleted".into());
        return;
    }
    let owned: Vec<&ClusterProfile> = world
        .profiles_of(name)
        .filter(|cp| owned_by(cp, name))
        .collect();
    if p.spec.preserve_cluster_profiles_on_delete.unwrap_or(false) {
        // Profiles carry no owner reference while preserve is set (see DesiredProfile::owned); one
        // still there (preserve set just before the delete) goes first, or garbage collection
        // would delete what we preserve.
        for cp in owned.iter().filter(|cp| has_owner_reference(cp, name)) {
            d.actions.push(Action::Disown {
                name: cp.metadata.name.clone().unwrap_or_default(),
            });
        }
        d.actions.push(Action::RemoveFinalizer);
        d.outcome(
            Phase::Deleting,
            format!("deleted; {} ClusterProfiles preserved", owned.len()),
        );
        return;
    }
    let all: Vec<&ClusterProfile> = world.profiles_of(name).collect();
    if all.is_empty() {
        d.actions.push(Action::RemoveFinalizer);
        d.outcome(
            Phase::Deleting,
            "deleted: all ClusterProfiles are gone".into(),
        );
        return;
    }
    for cp in &all {
        if cp.metadata.deletion_timestamp.is_none() {
            d.actions.push(Action::Delete {
                name: cp.metadata.name.clone().unwrap_or_default(),
            });
        }
    }
    d.outcome(
        Phase::Deleting,
        format!(
            "deleting: waiting for {} ClusterProfiles to be removed",
            all.len()
        ),
    );
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
