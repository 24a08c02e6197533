//! The decision for one ClusterPromotion: a pure function of (promotion, observed world, health
//! results, now) returning the new status, the actions, the events and a one-line summary.
//! No I/O, no clock, no randomness.
//!
//! # Invariants (the gates), and where they are kept
//!
//! A *run* is one revision (status `profileSpecHash` = [`revision_hash`], `stagesHash`) from the
//! restart that started it ([`Run`]). Writes happen in this order (see `act`): the promotion's
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
//!    ([`RecordOp::ConsumeApproval`]), before the status write. The grant approves that stage of
//!    that run only; a later revision is a new run and needs a new approval. A concurrent or late
//!    pass that observed an older resourceVersion cannot consume (its patch is refused), so it can
//!    neither reuse the approval nor remove a newer one.
//! 3. **A fresh approval is never removed.** Only the current stage's approval is consumed, and only
//!    when it lets the stage pass; a pre-approval of a stage already passed stays for the next run.
//!    A grant whose run was superseded before its promotion was recorded is given back
//!    ([`RecordOp::RestoreApproval`]) in the restart's own guarded patch.
//! 4. **Completion is recorded** (`promoter.dev/completed` = the run), before the status write, and
//!    only a new run undoes it: pause/resume, a blocked pass or any description text do not.
//! 5. **Progressive**: every change of what a generated profile carries from the promotion (order of
//!    lists included, tenant labels included) is a new revision, rolled out from stage 1; a stage
//!    beyond the current one keeps the revision it was promoted with.

use super::deployment::{self, DeploymentCheck};
use super::events::{Reason, checks_were_failing, window_was_closed};
use super::profiles::{
    DesiredProfile, has_owner_reference, main_profile, owned_by, preverification_name,
    preverification_profile, profile_name,
};
use super::stage_status::{description_text, entry, set_description, set_failure};
use super::takeover;
use super::world::World;
use crate::annotations::{Grant, Record, Run};
use crate::api::promotion::FINALIZER;
use crate::api::{
    ClusterProfile, ClusterPromotion, ClusterPromotionStatus, Stage, StageStatus, Timestamp,
};
use crate::hash::{revision_hash, stages_hash};
use crate::validation::{check_generated_name, name_violations, schema_violations};
use crate::window::{PromotionWindow, WindowState};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub struct Context {
    pub now: DateTime<Utc>,
    /// The zone of promotion windows without a `CRON_TZ=` prefix.
    pub default_tz: Tz,
}

/// The result of a stage's postDelayHealthChecks on every cluster of the stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthVerdict {
    Passed,
    /// Names the cluster, check and resource and the script's message.
    Failing(String),
    /// The checks could not be evaluated (yet); the stage waits.
    NotEvaluated(String),
}

/// Health verdicts of one promotion, by stage name.
pub type HealthResults = BTreeMap<String, HealthVerdict>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Phase {
    Progressing,
    Waiting,
    AwaitingApproval,
    Complete,
    /// A deployment failed on some cluster; the rollout halts at this stage.
    Failed,
    /// The ClusterPromotion cannot be processed as written (invalid, overlapping stages, …).
    Error,
    Deleting,
    /// `promoter pause`: left alone until resumed.
    Paused,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    AddFinalizer,
    RemoveFinalizer,
    /// Create or update a generated ClusterProfile.
    Apply(Box<DesiredProfile>),
    Delete {
        name: String,
    },
    /// Remove the promotion's owner reference so that garbage collection keeps the profile.
    Disown {
        name: String,
    },
    /// promoter's records on the promotion, in one JSON patch guarded by the resourceVersion the
    /// pass observed (a concurrent writer makes it fail, and the pass stops).
    Record(Vec<RecordOp>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum RecordOp {
    /// Moves stage `index`'s approval into a grant for one run: removes `approved` and the
    /// `promoter approve` record, writes `promoter.dev/grant.<stage>`.
    ConsumeApproval {
        index: usize,
        stage: String,
        grant: Grant,
    },
    /// Gives back an approval consumed for a run that was superseded before its promotion was
    /// recorded: sets `approved` again (with its `promoter approve` record) and drops the grant.
    RestoreApproval {
        index: usize,
        stage: String,
        approval: Option<Record>,
    },
    /// Drops a `promoter approve` record whose approval was revoked by hand, so that it never
    /// judges a later hand approval.
    ForgetApprovalRecord { stage: String },
    /// Records that the run is complete.
    Complete(Run),
    /// Rewrites a `promoter approve` record for the hash promoter records for the same revision
    /// (a status taken over from another writer).
    ReviseApprovalRecord { stage: String, record: Record },
    /// Removes an approval (and its record) that `promoter approve` gave an earlier revision.
    WithdrawApproval { index: usize, stage: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub promotion: String,
    pub phase: Phase,
    pub stage: Option<String>,
    pub summary: String,
    /// Actions applied before the status write, in order.
    pub actions: Vec<Action>,
    /// The new status, when it differs from the observed one.
    pub status: Option<ClusterPromotionStatus>,
    /// Actions applied only after a successful status write: what the new status decided
    /// (the next stage's profile, a restart's stage 1 profile, preverification deletions).
    pub after_status: Vec<Action>,
    pub events: Vec<EventNote>,
    /// When waiting on time: the moment the wait ends (soak end, window opening).
    pub next_check: Option<DateTime<Utc>>,
    /// The stage whose postDelayHealthChecks must be evaluated before this decision is final.
    pub needs_health: Option<String>,
}

impl Decision {
    fn new(promotion: &str) -> Self {
        Decision {
            promotion: promotion.to_string(),
            phase: Phase::Progressing,
            stage: None,
            summary: String::new(),
            actions: Vec::new(),
            status: None,
            after_status: Vec::new(),
            events: Vec::new(),
            next_check: None,
            needs_health: None,
        }
    }

    /// An Event of this pass (see `events` for when a transition is one).
    fn event(&mut self, reason: Reason, message: String) {
        self.events.push(reason.note(message));
    }

    /// Adds a record to the decision's one guarded record patch.
    fn record(&mut self, op: RecordOp) {
        match self.actions.iter_mut().find_map(|a| match a {
            Action::Record(ops) => Some(ops),
            _ => None,
        }) {
            Some(ops) => ops.push(op),
            None => self.actions.push(Action::Record(vec![op])),
        }
    }

    fn outcome(&mut self, phase: Phase, summary: String) {
        self.phase = phase;
        self.summary = summary;
    }

    pub fn writes(&self) -> bool {
        !self.actions.is_empty() || self.status.is_some() || !self.after_status.is_empty()
    }
}

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
    if let Some(by) = crate::annotations::paused(p) {
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
    Planner {
        p,
        name: &name,
        world,
        health,
        ctx,
        d: &mut d,
        run: None,
        adopted_from: None,
    }
    .plan(&mut status);
    if status != old {
        d.status = Some(status);
    }
    d
}

/// The profiles whose ClusterSummaries the decision may read: the current stage's main and
/// preverification profiles, unless the promotion is complete or being deleted.
pub fn watched_profiles(p: &ClusterPromotion) -> Vec<String> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    if p.metadata.deletion_timestamp.is_some() || name.is_empty() {
        return Vec::new();
    }
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
    if is_complete(p) {
        return Vec::new();
    }
    [
        profile_name(name, &stage.name),
        preverification_name(name, &stage.name),
    ]
    .into_iter()
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

/// What is wrong with a promotion that stops it from being processed, each with its field path.
fn problems(p: &ClusterPromotion, world: &World, ctx: &Context) -> Vec<String> {
    let mut out: Vec<String> = schema_violations(&p.spec)
        .iter()
        .chain(&name_violations(p))
        .map(ToString::to_string)
        .collect();
    let name = p.metadata.name.as_deref().unwrap_or_default();
    for (i, stage) in p.spec.stages.iter().enumerate() {
        if let Err(e) = stage
            .cluster_selector
            .clone()
            .unwrap_or_default()
            .requirements()
        {
            out.push(format!("spec.stages[{i}].clusterSelector.{e}"));
        }
        if preverification_profile(p, stage).is_some()
            && let Err(why) = check_generated_name(&preverification_name(name, &stage.name))
        {
            out.push(format!(
                "spec.stages[{i}].name: generated ClusterProfile name {:?} {why}",
                preverification_name(name, &stage.name)
            ));
        }
        if let Some(w) = stage
            .trigger
            .as_ref()
            .and_then(|t| t.auto.as_ref())
            .and_then(|a| a.promotion_window.as_ref())
            && let Err(e) = PromotionWindow::parse(&w.from, &w.to, ctx.default_tz)
        {
            out.push(format!("spec.stages[{i}].trigger.auto.{e}"));
        }
    }
    if let Some(ps) = &p.spec.profile_spec {
        let checks = [
            ps.helm_charts().err(),
            ps.policy_refs().err(),
            ps.kustomization_refs().err(),
            ps.validate_healths().err(),
            ps.max_update().err(),
        ];
        out.extend(checks.into_iter().flatten().map(|e| format!("spec.{e}")));
    }
    out.extend(super::ownership::problems(p, world));
    // A cluster in two stages would receive two conflicting ClusterProfiles (upstream Q11).
    let matchers: Vec<(&str, crate::labels::Matcher)> = p
        .spec
        .stages
        .iter()
        .filter_map(|s| {
            Some((
                s.name.as_str(),
                s.cluster_selector
                    .clone()
                    .unwrap_or_default()
                    .matcher()
                    .ok()?,
            ))
        })
        .collect();
    for (labels, ids) in world.label_sets() {
        let stages: Vec<&str> = matchers
            .iter()
            .filter(|(_, m)| m.matches(&labels))
            .map(|(n, _)| *n)
            .collect();
        if stages.len() < 2 {
            continue;
        }
        for c in ids.iter().map(|i| &world.clusters[*i]) {
            out.push(format!(
                "cluster {c} ({}Cluster) is selected by more than one stage: {}",
                if c.kind == super::world::ClusterKind::Capi {
                    "CAPI "
                } else {
                    "Sveltos"
                },
                stages
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ));
        }
    }
    out
}

struct Planner<'a> {
    p: &'a ClusterPromotion,
    name: &'a str,
    world: &'a World,
    health: &'a HealthResults,
    ctx: &'a Context,
    d: &'a mut Decision,
    /// The run this pass continues (the observed one, with promoter's hashes once taken over).
    run: Option<Run>,
    /// The `profileSpecHash` of a status taken over in this pass (see [`takeover`]): approval
    /// records written for it are records of the run being continued.
    adopted_from: Option<String>,
}

/// A generated profile, as observed against what it should be.
enum Observed<'a> {
    Applied(&'a ClusterProfile),
    /// Missing or different: an `Apply` was planned.
    Applying,
    /// Being deleted by someone: it can be recreated only once it is gone.
    Deleting,
}

impl<'a> Planner<'a> {
    fn now(&self) -> DateTime<Utc> {
        self.ctx.now
    }

    fn ensure(&mut self, desired: DesiredProfile) -> Observed<'a> {
        match self.world.profiles.get(&desired.name) {
            Some(o) if o.metadata.deletion_timestamp.is_some() => Observed::Deleting,
            Some(o) if desired.is_applied(o) => Observed::Applied(o),
            _ => {
                self.d.actions.push(Action::Apply(Box::new(desired)));
                Observed::Applying
            }
        }
    }

    fn delete_if_present(&mut self, name: String) {
        if self
            .world
            .profiles
            .get(&name)
            .is_some_and(|cp| cp.metadata.deletion_timestamp.is_none())
        {
            self.d.actions.push(Action::Delete { name });
        }
    }

    fn plan(&mut self, status: &mut ClusterPromotionStatus) {
        let problems = problems(self.p, self.world, self.ctx);
        if !problems.is_empty() {
            return self.blocked(status, problems);
        }
        self.remove_stale();
        self.forget_orphan_approval_records();
        let stages = &self.p.spec.stages;
        let ps_hash = revision_hash(self.p);
        let st_hash = stages_hash(stages);
        let current = status.current_stage_name.clone().unwrap_or_default();
        let cur_idx = stages.iter().position(|s| s.name == current);
        let has_entry = status.stages.iter().flatten().any(|s| s.name == current);
        let mut changed = status.profile_spec_hash.as_deref() != Some(&ps_hash)
            || status.stages_hash.as_deref() != Some(&st_hash);
        if changed && let Some(writer) = takeover::adoptable(self.p, status, self.world) {
            self.adopt(status, writer, &ps_hash, &st_hash);
            changed = false;
        }
        self.run = Run::of(status);
        match cur_idx {
            Some(i) if !changed && has_entry => self.progress(status, i),
            _ => self.restart(status, ps_hash, st_hash),
        }
    }

    /// Continues the rollout another writer recorded (see [`takeover`]): the status gets
    /// promoter's hashes in this pass's guarded status write, and `promoter approve` records of
    /// that run are rewritten for the new hash (in the guarded record patch before it).
    fn adopt(
        &mut self,
        status: &mut ClusterPromotionStatus,
        writer: takeover::Writer,
        ps_hash: &str,
        st_hash: &str,
    ) {
        let old = status.profile_spec_hash.replace(ps_hash.to_string());
        status.stages_hash = Some(st_hash.to_string());
        for stage in &self.p.spec.stages {
            if let Some(mut r) = crate::annotations::approval(self.p, &stage.name)
                && r.revision.is_some()
                && r.revision == old
            {
                r.revision = Some(ps_hash.to_string());
                self.d.record(RecordOp::ReviseApprovalRecord {
                    stage: stage.name.clone(),
                    record: r,
                });
            }
        }
        self.adopted_from = old;
        self.d.event(Reason::TookOver, format!(
            "Took over the rollout recorded by {} at stage {}: every reached stage already runs the current revision",
            writer.describe(),
            status.current_stage_name.clone().unwrap_or_default()
        ));
    }

    fn blocked(&mut self, status: &mut ClusterPromotionStatus, problems: Vec<String>) {
        let message = problems.join("; ");
        let now = self.now();
        let stage = status
            .current_stage_name
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| self.p.spec.stages.first().map(|s| s.name.clone()));
        if let Some(stage) = &stage {
            status.current_stage_name = Some(stage.clone());
            let e = entry(status, stage);
            if e.failure_message.as_deref() != Some(&message) {
                self.d.event(
                    Reason::Blocked,
                    format!("ClusterPromotion {} is blocked: {message}", self.name),
                );
            }
            set_failure(e, Some(&message), now);
            set_description(e, super::undecodable::BLOCKED, now);
        }
        self.d.stage = stage;
        self.d.outcome(Phase::Error, format!("blocked: {message}"));
    }

    /// Profiles of this promotion that no stage generates any more (upstream §3.9).
    fn remove_stale(&mut self) {
        let expected: BTreeSet<String> = self
            .p
            .spec
            .stages
            .iter()
            .flat_map(|s| {
                [
                    profile_name(self.name, &s.name),
                    preverification_name(self.name, &s.name),
                ]
            })
            .collect();
        let stale: Vec<String> = self
            .world
            .profiles_of(self.name)
            .filter(|cp| owned_by(cp, self.name) && cp.metadata.deletion_timestamp.is_none())
            .filter_map(|cp| cp.metadata.name.clone())
            .filter(|n| !expected.contains(n))
            .collect();
        // Removing a profile changes what clusters run: only once the status write succeeded.
        for name in stale {
            self.d.after_status.push(Action::Delete { name });
        }
    }

    /// A new revision (or the first pass): stage 1 gets the profile, the run starts over. The new
    /// hashes are recorded only together with the applied profile (upstream Q1).
    fn restart(&mut self, status: &mut ClusterPromotionStatus, ps_hash: String, st_hash: String) {
        let first = self.p.spec.stages[0].clone();
        let now = self.now();
        self.d.stage = Some(first.name.clone());
        if self.is_deleting(&profile_name(self.name, &first.name)) {
            self.d.outcome(
                Phase::Waiting,
                format!(
                    "restart waits: ClusterProfile {} is being deleted",
                    profile_name(self.name, &first.name)
                ),
            );
            return;
        }
        let first_time = status.profile_spec_hash.is_none();
        self.restore_unused_grants(&ps_hash);
        // Stage 1 gets the new revision only once the status records the restart (invariant 1).
        self.delete_after(preverification_name(self.name, &first.name));
        self.ensure_after(main_profile(self.p, &first));
        *status = ClusterPromotionStatus {
            stages: Some(vec![StageStatus {
                name: first.name.clone(),
                last_update_reconciled_time: Some(Timestamp::new(now)),
                ..Default::default()
            }]),
            profile_spec_hash: Some(ps_hash),
            stages_hash: Some(st_hash),
            current_stage_name: Some(first.name.clone()),
            last_promotion_time: Some(Timestamp::new(now)),
        };
        set_description(
            entry(status, &first.name),
            "Clusters are being provisioned",
            now,
        );
        // Upstream's description setter does not touch lastStatusCheckTime.
        entry(status, &first.name).last_status_check_time = None;
        self.d.event(
            Reason::StageProvisioning,
            format!("Provisioning stage {} (Restart)", first.name),
        );
        let why = if first_time {
            "started"
        } else {
            "restarted (new revision)"
        };
        self.d.outcome(
            Phase::Progressing,
            format!("{why}: provisioning stage {}", first.name),
        );
    }

    fn progress(&mut self, status: &mut ClusterPromotionStatus, idx: usize) {
        let stages = &self.p.spec.stages;
        let stage = stages[idx].clone();
        let now = self.now();
        self.d.stage = Some(stage.name.clone());
        // Stages already reached in this run keep their profiles (repairs drift or deletion): the
        // revision is the one they were promoted with, since equal hashes mean equal content.
        // Their preverification profiles are gone once passed (a pass may have died before).
        for earlier in &stages[..idx] {
            let desired = main_profile(self.p, earlier);
            let note = self.pruned_note(&desired);
            let _ = self.ensure(desired);
            self.delete_if_present(preverification_name(self.name, &earlier.name));
            self.note_pruned(status, earlier, note, false);
        }
        if self.complete_recorded(idx) {
            let desired = main_profile(self.p, &stage);
            let note = self.pruned_note(&desired);
            let _ = self.ensure(desired);
            self.delete_if_present(preverification_name(self.name, &stage.name));
            self.note_pruned(status, &stage, note, true);
            let e = entry(status, &stage.name);
            set_description(e, "Successfully provisioned", now);
            self.d.outcome(Phase::Complete, "complete".into());
            return;
        }
        let selector = stage.cluster_selector.clone().unwrap_or_default();
        let desired = main_profile(self.p, &stage);
        let pruned = self.pruned_note(&desired);
        let check = match self.ensure(desired) {
            Observed::Applied(cp) => deployment::check(cp, &selector, self.world),
            Observed::Applying => pending(format!(
                "ClusterProfile {} was applied in this pass.",
                profile_name(self.name, &stage.name)
            )),
            Observed::Deleting => pending(format!(
                "ClusterProfile {} is being deleted; it is recreated once it is gone.",
                profile_name(self.name, &stage.name)
            )),
        };
        let e = entry(status, &stage.name);
        let provisioned = e.last_successful_applied_time.is_some();
        if !check.done {
            let was = e.failure_message.clone();
            set_failure(e, Some(&check.message), now);
            if provisioned {
                // Regressed after it had been provisioned: the same wait as failing checks.
                set_description(e, "Awaiting Health Checks to Pass", now);
            }
            let (phase, summary) = match &check.failure {
                Some(f) => (
                    Phase::Failed,
                    format!("stage {}: deployment failed: {f}", stage.name),
                ),
                None => (
                    Phase::Progressing,
                    format!("stage {}: deploying: {}", stage.name, check.message),
                ),
            };
            // A failure is announced once, when it appears.
            if let Some(f) = &check.failure
                && was.as_deref() != Some(check.message.as_str())
            {
                self.d.event(
                    Reason::DeploymentFailed,
                    format!("Stage {}: {f}", stage.name),
                );
            }
            self.d.outcome(phase, summary);
            return;
        }
        if !provisioned {
            e.last_successful_applied_time = Some(Timestamp::new(now));
            e.last_status_check_time = Some(Timestamp::new(now));
            e.failure_message = None;
            let mut text = provisioned_text(&check);
            if let Some(note) = pruned {
                text = format!("{text} {note}");
            }
            let e = entry(status, &stage.name);
            set_description(e, &text, now);
            self.d.event(
                Reason::StageProvisioned,
                format!("Stage {} provisioned", stage.name),
            );
        }
        // The failure message is settled once per pass, so that it (and lastStatusCheckTime) does
        // not flip between passes that learn nothing new.
        match self.gates(status, &stage, idx) {
            Some(wait) => {
                set_failure(entry(status, &stage.name), wait.failure.as_deref(), now);
                self.d.outcome(wait.phase, wait.summary);
            }
            None => self.advance(status, idx),
        }
    }

    /// The trigger's gates, in upstream's order. `Some` when the stage waits.
    fn gates(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        idx: usize,
    ) -> Option<Wait> {
        let now = self.now();
        let trigger = stage.trigger.as_ref()?;
        let gates = trigger.gates()?;
        let e = entry(status, &stage.name);
        if let Some(delay) = gates.delay
            && let Some(since) = e.last_successful_applied_time
        {
            let ready_at = Timestamp::new(since.as_datetime() + delay.to_chrono());
            if now < ready_at.as_datetime() {
                set_description(
                    e,
                    &format!("Delayed: Waiting for Time Window: {ready_at}"),
                    now,
                );
                self.d.next_check = Some(ready_at.as_datetime());
                return Some(Wait::new(
                    Phase::Waiting,
                    format!("stage {}: soaking until {ready_at}", stage.name),
                    None,
                ));
            }
        }
        if let Some(pv) = preverification_profile(self.p, stage) {
            let pv_name = pv.name.clone();
            let pending_text = match self.ensure(pv) {
                Observed::Applied(cp) => {
                    let check = deployment::check(
                        cp,
                        &stage.cluster_selector.clone().unwrap_or_default(),
                        self.world,
                    );
                    (!check.done).then_some(check.message)
                }
                Observed::Applying => Some(format!(
                    "ClusterProfile {pv_name} was applied in this pass."
                )),
                Observed::Deleting => Some(format!("ClusterProfile {pv_name} is being deleted.")),
            };
            if let Some(text) = pending_text {
                set_description(
                    entry(status, &stage.name),
                    "Running Post-Promotion Health Checks",
                    now,
                );
                let summary = format!(
                    "stage {}: deploying preHealthCheckDeployment: {text}",
                    stage.name
                );
                return Some(Wait::new(
                    Phase::Waiting,
                    summary,
                    Some(format!("preHealthCheckDeployment: {text}")),
                ));
            }
        }
        if !gates.post_delay_health_checks.is_empty() {
            let e = entry(status, &stage.name);
            match self.health.get(&stage.name) {
                Some(HealthVerdict::Passed) => {
                    if checks_were_failing(self.p, &stage.name) {
                        let text = format!("Stage {}: health checks pass again", stage.name);
                        self.d.event(Reason::ChecksPassing, text);
                    }
                }
                Some(HealthVerdict::Failing(message)) => {
                    if !checks_were_failing(self.p, &stage.name) {
                        let text =
                            format!("Stage {}: health checks failing: {message}", stage.name);
                        self.d.event(Reason::ChecksFailing, text);
                    }
                    set_description(e, "Awaiting Health Checks to Pass", now);
                    let summary = format!("stage {}: health checks failing: {message}", stage.name);
                    return Some(Wait::new(Phase::Waiting, summary, Some(message.clone())));
                }
                Some(HealthVerdict::NotEvaluated(reason)) => {
                    set_description(e, "Running Post-Promotion Health Checks", now);
                    let summary = format!(
                        "stage {}: health checks not evaluated: {reason}",
                        stage.name
                    );
                    return Some(Wait::new(Phase::Waiting, summary, Some(reason.clone())));
                }
                None => {
                    // Only a first look: the pass evaluates the checks and decides again.
                    self.d.needs_health = Some(stage.name.clone());
                    set_description(e, "Running Post-Promotion Health Checks", now);
                    let keep = e.failure_message.clone();
                    return Some(Wait::new(
                        Phase::Waiting,
                        format!("stage {}: health checks pending", stage.name),
                        keep,
                    ));
                }
            }
        }
        if let Some(w) = trigger
            .auto
            .as_ref()
            .and_then(|a| a.promotion_window.as_ref())
        {
            // Parse errors were reported before planning; an unparsable window never opens.
            let state = PromotionWindow::parse(&w.from, &w.to, self.ctx.default_tz)
                .map(|w| w.state(now))
                .unwrap_or(WindowState::Closed { opens_at: None });
            if let WindowState::Closed { opens_at } = state {
                let when = opens_at
                    .map(|t| Timestamp::new(t).to_string())
                    .unwrap_or_else(|| "never".into());
                set_description(
                    entry(status, &stage.name),
                    &format!("Window Closed: Waiting for Next Schedule ({when})."),
                    now,
                );
                self.d.next_check = opens_at;
                let summary = format!("stage {}: promotion window closed until {when}", stage.name);
                return Some(Wait::new(Phase::Waiting, summary, None));
            }
            if window_was_closed(self.p, &stage.name) {
                let text = format!("Stage {}: promotion window open", stage.name);
                self.d.event(Reason::WindowOpened, text);
            }
        }
        if let Some(manual) = &trigger.manual {
            let run = self.run.clone();
            if run.is_some() && crate::annotations::grant(self.p, &stage.name).map(|g| g.run) == run
            {
                // Consumed for this run by an earlier pass that died before recording the promotion.
                return None;
            }
            // An approval recorded by `promoter approve` is for one revision; a spec change voids it.
            let revision = status.profile_spec_hash.clone();
            let stale = crate::annotations::approval(self.p, &stage.name).filter(|r| {
                manual.is_approved()
                    && r.revision.is_some()
                    && r.revision != revision
                    && r.revision != self.adopted_from
            });
            if let Some(r) = stale {
                // Withdrawn with its record, in the guarded patch: the stage then plainly awaits
                // approval, so that a hand approval (`approved: true`) works again.
                self.d.record(RecordOp::WithdrawApproval {
                    index: idx,
                    stage: stage.name.clone(),
                });
                let e = entry(status, &stage.name);
                set_description(e, "Paused: Awaiting Manual Approval", now);
                let why = format!(
                    "the approval by {} at {} was for an earlier revision of the profileSpec and was withdrawn; approve again",
                    r.by, r.at
                );
                let summary = format!("stage {}: awaiting manual approval ({why})", stage.name);
                return Some(Wait::new(Phase::AwaitingApproval, summary, Some(why)));
            }
            if !manual.is_approved() {
                let e = entry(status, &stage.name);
                let was = e
                    .current_status_description
                    .as_deref()
                    .map(description_text)
                    .map(String::from);
                set_description(e, "Paused: Awaiting Manual Approval", now);
                if was.as_deref() != Some("Paused: Awaiting Manual Approval") {
                    self.d.event(
                        Reason::AwaitingApproval,
                        format!("Stage {} awaits manual approval", stage.name),
                    );
                }
                let summary = format!("stage {}: awaiting manual approval", stage.name);
                return Some(Wait::new(Phase::AwaitingApproval, summary, None));
            }
            if manual.automatic_reset()
                && let Some(run) = run
            {
                // Consumed now, in the guarded patch before the status write (invariant 2).
                self.d.record(RecordOp::ConsumeApproval {
                    index: idx,
                    stage: stage.name.clone(),
                    grant: Grant {
                        run,
                        approval: crate::annotations::approval(self.p, &stage.name),
                    },
                });
            }
        }
        None
    }

    fn advance(&mut self, status: &mut ClusterPromotionStatus, idx: usize) {
        let now = self.now();
        let stages = &self.p.spec.stages;
        let stage = stages[idx].clone();
        let e = entry(status, &stage.name);
        e.last_successful_applied_time = Some(Timestamp::new(now));
        e.last_status_check_time = Some(Timestamp::new(now));
        e.failure_message = None;
        set_description(e, "Successfully provisioned", now);
        self.delete_after(preverification_name(self.name, &stage.name));
        let Some(next) = stages.get(idx + 1).cloned() else {
            if let Some(run) = self.run.clone() {
                self.d.record(RecordOp::Complete(run));
            }
            self.d.event(
                Reason::RolloutComplete,
                format!(
                    "ClusterPromotion {} complete: stage {} provisioned",
                    self.name, stage.name
                ),
            );
            self.d.outcome(
                Phase::Complete,
                format!("stage {} done: rollout complete", stage.name),
            );
            return;
        };
        // The next stage's profile follows the status write; while an old one is being deleted,
        // the next pass recreates it once it is gone.
        self.delete_after(preverification_name(self.name, &next.name));
        self.ensure_after(main_profile(self.p, &next));
        status
            .stages
            .get_or_insert_with(Vec::new)
            .push(StageStatus {
                name: next.name.clone(),
                last_update_reconciled_time: Some(Timestamp::new(now)),
                ..Default::default()
            });
        status.current_stage_name = Some(next.name.clone());
        status.last_promotion_time = Some(Timestamp::new(now));
        self.d.stage = Some(next.name.clone());
        self.d.event(
            Reason::StageProvisioning,
            format!("Provisioning stage {}", next.name),
        );
        self.d.outcome(
            Phase::Progressing,
            format!("promoted {} -> {}", stage.name, next.name),
        );
    }

    /// What the served ClusterProfile CRD dropped from a stage's profile (an older Sveltos than
    /// promoter's schema), said once in the status: Sveltos deploys without those fields.
    fn pruned_note(&self, desired: &DesiredProfile) -> Option<String> {
        let observed = self.world.profiles.get(&desired.name)?;
        let paths = desired.dropped_by_server(observed);
        (!paths.is_empty()).then(|| {
            format!(
                "{PRUNED_NOTE} and dropped {} from ClusterProfile {}; Sveltos deploys without {}.",
                paths
                    .iter()
                    .map(|p| format!("spec.{p}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                desired.name,
                if paths.len() == 1 { "it" } else { "them" }
            )
        })
    }

    /// A passed stage's failureMessage carries the pruned-fields note (upstream also keeps
    /// informational text there); a Warning Event announces it once, when it appears. Other text
    /// is replaced only when `replace_other` (the completed stage, whose message is cleared).
    fn note_pruned(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        note: Option<String>,
        replace_other: bool,
    ) {
        let now = self.now();
        let e = entry(status, &stage.name);
        let ours = e
            .failure_message
            .as_deref()
            .is_some_and(|m| m.starts_with(PRUNED_NOTE));
        if e.failure_message == note || (note.is_none() && !ours && !replace_other) {
            return;
        }
        if let Some(n) = &note {
            self.d
                .event(Reason::FieldsPruned, format!("Stage {}: {n}", stage.name));
        }
        set_failure(e, note.as_deref(), now);
    }

    fn is_deleting(&self, name: &str) -> bool {
        self.world
            .profiles
            .get(name)
            .is_some_and(|cp| cp.metadata.deletion_timestamp.is_some())
    }

    /// Like `ensure`, for a profile the status write decides: applied after it.
    fn ensure_after(&mut self, desired: DesiredProfile) {
        let before = self.d.actions.len();
        let _ = self.ensure(desired);
        let planned: Vec<Action> = self.d.actions.drain(before..).collect();
        self.d.after_status.extend(planned);
    }

    /// Like `delete_if_present`, for a deletion the status write decides.
    fn delete_after(&mut self, name: String) {
        let before = self.d.actions.len();
        self.delete_if_present(name);
        let planned: Vec<Action> = self.d.actions.drain(before..).collect();
        self.d.after_status.extend(planned);
    }

    /// Whether the observed run is complete: recorded, or (once, for promotions completed before
    /// promoter recorded completions, by upstream or an earlier promoter) shown by the last
    /// stage's status, in which case the record is written now.
    fn complete_recorded(&mut self, idx: usize) -> bool {
        if is_complete(self.p) {
            return true;
        }
        let last = idx + 1 == self.p.spec.stages.len();
        let observed = self.p.status.clone().unwrap_or_default();
        let legacy = last
            && !crate::annotations::has_completion_record(self.p)
            && observed
                .stages
                .iter()
                .flatten()
                .find(|s| s.name == self.p.spec.stages[idx].name)
                .is_some_and(|s| {
                    s.last_successful_applied_time.is_some()
                        && s.current_status_description
                            .as_deref()
                            .map(description_text)
                            == Some("Successfully provisioned")
                });
        match self.run.clone() {
            Some(run) if legacy => {
                self.d.record(RecordOp::Complete(run));
                true
            }
            _ => false,
        }
    }

    /// A restart supersedes the observed run: an approval consumed for it whose promotion was never
    /// recorded (the stage is still the current one) is given back, so that it is not lost, but
    /// only when the new run is of the same revision (a stages change): an approval approves one
    /// revision, and the new one must be approved on its own (invariant 2).
    fn restore_unused_grants(&mut self, revision: &str) {
        let Some(observed) = self.p.status.as_ref() else {
            return;
        };
        let Some(old_run) = Run::of(observed) else {
            return;
        };
        if is_complete(self.p) {
            return;
        }
        let current = observed.current_stage_name.clone().unwrap_or_default();
        let Some(grant) = crate::annotations::grant(self.p, &current) else {
            return;
        };
        let Some(index) = self.p.spec.stages.iter().position(|s| s.name == current) else {
            return;
        };
        let manual = self.p.spec.stages[index]
            .trigger
            .as_ref()
            .and_then(|t| t.manual.as_ref());
        if grant.run == old_run
            && grant.run.revision == revision
            && manual.is_some_and(|m| !m.is_approved())
        {
            self.d.record(RecordOp::RestoreApproval {
                index,
                stage: current,
                approval: grant.approval,
            });
        }
    }

    /// `promoter approve` records whose approval is gone (revoked by hand) are dropped, so that
    /// they never judge a later hand approval (problem 3 of issue 14).
    fn forget_orphan_approval_records(&mut self) {
        for s in &self.p.spec.stages {
            let approved = s
                .trigger
                .as_ref()
                .and_then(|t| t.manual.as_ref())
                .is_some_and(|m| m.is_approved());
            if !approved && crate::annotations::approval(self.p, &s.name).is_some() {
                self.d.record(RecordOp::ForgetApprovalRecord {
                    stage: s.name.clone(),
                });
            }
        }
    }
}

/// The last stage was promoted past: the run is complete until the next revision. Read from the
/// completion record, never from status text (which pause/resume or a blocked pass overwrite).
fn is_complete(p: &ClusterPromotion) -> bool {
    let run = p.status.as_ref().and_then(Run::of);
    run.is_some() && crate::annotations::completed(p) == run
}

/// How the note on fields the served CRD dropped begins.
const PRUNED_NOTE: &str = "The served ClusterProfile CRD is older than promoter's schema";

/// Why a provisioned stage is not promoted in this pass.
struct Wait {
    phase: Phase,
    summary: String,
    /// The stage's failureMessage while it waits.
    failure: Option<String>,
}

impl Wait {
    fn new(phase: Phase, summary: String, failure: Option<String>) -> Self {
        Wait {
            phase,
            summary,
            failure,
        }
    }
}

fn pending(message: String) -> DeploymentCheck {
    DeploymentCheck {
        done: false,
        message,
        failure: None,
        skipped_paused: Vec::new(),
    }
}

fn provisioned_text(check: &DeploymentCheck) -> String {
    if check.skipped_paused.is_empty() {
        check.message.clone()
    } else {
        format!(
            "{} Paused clusters skipped: {}.",
            check.message,
            check.skipped_paused.join(", ")
        )
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
