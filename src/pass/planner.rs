//! The planner of one ClusterPromotion's decision, in the order a pass goes: problems block it;
//! a new revision restarts the rollout at stage 1; otherwise the reached stages are kept, the
//! current stage is deployed, passes its gates (`gates`) in order, and [`Planner::advance`]
//! starts the next stage.

use super::decision::{Action, BLOCKED, Context, Decision, HealthResults, Phase, Reason, RecordOp};
use super::deployment::{self, DeploymentCheck};
use super::gates::{GATES, GatedStage, Wait, approval};
use super::problems::problems;
use super::profile_writes::{
    Observed, delete_after, delete_if_present, ensure, ensure_after, is_deleting,
};
use super::profiles::{DesiredProfile, main_profile, owned_by, preverification_name, profile_name};
use super::stage_status::{description_text, entry, set_description, set_failure};
use super::takeover;
use super::world::World;
use crate::annotations::{self, Run};
use crate::api::{ClusterPromotion, ClusterPromotionStatus, Stage, StageStatus, Timestamp};
use crate::hash::{revision_hash, stages_hash};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// Plans the decision of a promotion that is neither paused nor being deleted into `d` and `status`.
pub fn plan(
    p: &ClusterPromotion,
    name: &str,
    world: &World,
    health: &HealthResults,
    ctx: &Context,
    d: &mut Decision,
    status: &mut ClusterPromotionStatus,
) {
    Planner {
        p,
        name,
        world,
        health,
        ctx,
        d,
        run: None,
        adopted_from: None,
    }
    .plan(status);
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

impl Planner<'_> {
    fn now(&self) -> DateTime<Utc> {
        self.ctx.now
    }

    fn plan(&mut self, status: &mut ClusterPromotionStatus) {
        let problems = problems(self.p, self.world, self.ctx);
        if !problems.is_empty() {
            return self.blocked(status, problems);
        }
        self.remove_stale();
        approval::forget_orphan_records(self.p, self.d);
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
        approval::revise_records(self.p, old.as_deref(), ps_hash, self.d);
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
            set_description(e, BLOCKED, now);
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
        if is_deleting(self.world, &profile_name(self.name, &first.name)) {
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
        approval::restore_unused_grants(self.p, &ps_hash, self.d);
        // Stage 1 gets the new revision only once the status records the restart (invariant 1).
        delete_after(
            self.world,
            self.d,
            preverification_name(self.name, &first.name),
        );
        ensure_after(self.world, self.d, main_profile(self.p, &first));
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

    /// The observed run continues at stage `idx`: the reached stages are kept, the current one is
    /// deployed, then passes its gates in order, then the next stage starts.
    fn progress(&mut self, status: &mut ClusterPromotionStatus, idx: usize) {
        let stage = self.p.spec.stages[idx].clone();
        self.d.stage = Some(stage.name.clone());
        self.keep_reached(status, idx);
        if self.complete_recorded(idx) {
            return self.keep_complete(status, &stage);
        }
        if !self.deployed(status, &stage) {
            return;
        }
        // The failure message is settled once per pass, so that it (and lastStatusCheckTime) does
        // not flip between passes that learn nothing new.
        match self.gates(status, &stage, idx) {
            Some(wait) => {
                set_failure(
                    entry(status, &stage.name),
                    wait.failure.as_deref(),
                    self.now(),
                );
                self.d.next_check = wait.next_check;
                self.d.outcome(wait.phase, wait.summary);
            }
            None => self.advance(status, idx),
        }
    }

    /// Stages already reached in this run keep their profiles (repairs drift or deletion): the
    /// revision is the one they were promoted with, since equal hashes mean equal content.
    /// Their preverification profiles are gone once passed (a pass may have died before).
    fn keep_reached(&mut self, status: &mut ClusterPromotionStatus, idx: usize) {
        for earlier in &self.p.spec.stages[..idx] {
            self.keep(status, earlier, false);
        }
    }

    /// The run is complete: the last stage keeps its profile, as the reached stages do.
    fn keep_complete(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage) {
        self.keep(status, stage, true);
        let e = entry(status, &stage.name);
        set_description(e, "Successfully provisioned", self.now());
        self.d.outcome(Phase::Complete, "complete".into());
    }

    /// A passed stage's profile, as it was promoted, without its preverification profile; the
    /// failureMessage notes what the served CRD dropped from it (see [`Self::note_pruned`]).
    fn keep(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage, replace_other: bool) {
        let desired = main_profile(self.p, stage);
        let note = self.pruned_note(&desired);
        let _ = ensure(self.world, self.d, desired);
        delete_if_present(
            self.world,
            self.d,
            preverification_name(self.name, &stage.name),
        );
        self.note_pruned(status, stage, note, replace_other);
    }

    /// The current stage's profile is applied and deployed on every matching cluster; the first
    /// time, the stage is recorded as provisioned. `false` while it is not (the outcome says why).
    fn deployed(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage) -> bool {
        let now = self.now();
        let selector = stage.cluster_selector.clone().unwrap_or_default();
        let desired = main_profile(self.p, stage);
        let pruned = self.pruned_note(&desired);
        let check = match ensure(self.world, self.d, desired) {
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
            return false;
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
        true
    }

    /// The stage's gates, in order ([`GATES`]); `Some` when the stage waits.
    fn gates(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        index: usize,
    ) -> Option<Wait> {
        let gated = GatedStage {
            p: self.p,
            stage,
            index,
            world: self.world,
            health: self.health,
            ctx: self.ctx,
            run: self.run.as_ref(),
            adopted_from: self.adopted_from.as_deref(),
        };
        GATES.iter().find_map(|gate| gate(&gated, status, self.d))
    }

    /// The stage passed its gates: it is done, and the next stage starts (or the run is complete).
    fn advance(&mut self, status: &mut ClusterPromotionStatus, idx: usize) {
        let now = self.now();
        let stages = &self.p.spec.stages;
        let stage = stages[idx].clone();
        let e = entry(status, &stage.name);
        e.last_successful_applied_time = Some(Timestamp::new(now));
        e.last_status_check_time = Some(Timestamp::new(now));
        e.failure_message = None;
        set_description(e, "Successfully provisioned", now);
        delete_after(
            self.world,
            self.d,
            preverification_name(self.name, &stage.name),
        );
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
        delete_after(
            self.world,
            self.d,
            preverification_name(self.name, &next.name),
        );
        ensure_after(self.world, self.d, main_profile(self.p, &next));
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

    /// Whether the observed run is complete: recorded, or (once, for promotions completed before
    /// promoter recorded completions, by upstream or an earlier promoter) shown by the last
    /// stage's status, in which case the record is written now.
    fn complete_recorded(&mut self, idx: usize) -> bool {
        if annotations::is_complete(self.p) {
            return true;
        }
        let last = idx + 1 == self.p.spec.stages.len();
        let observed = self.p.status.clone().unwrap_or_default();
        let legacy = last
            && !annotations::has_completion_record(self.p)
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
}

/// How the note on fields the served CRD dropped begins.
const PRUNED_NOTE: &str = "The served ClusterProfile CRD is older than promoter's schema";

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
