//! The planner of one ClusterPromotion's decision, in the order a pass goes: problems block it;
//! a new revision restarts the rollout at stage 1; otherwise the reached stages are kept, the
//! current stage is deployed, passes its gates (`gates`) in order, and [`Planner::advance`]
//! starts the next stage.

use super::budget;
use super::completion::{PASSED, complete_event, passed, provisioned_event};
use super::deadline;
use super::decision::{
    Action, BLOCKED, Context, Decision, HealthResults, Hold, Phase, Reason, RecordOp,
};
use super::deployment::{self, DeploymentCheck};
use super::empty_stage;
use super::failing;
use super::gates::freeze::{self, FreezeCheck};
use super::gates::{GATES, GatedStage, Progress, Wait, approval};
use super::known_hashes;
use super::phase::{EMPTY_STAGE, PROVISIONING, of_description};
use super::problems::problems;
use super::profile_writes::{
    Observed, delete_after, delete_if_present, ensure, ensure_after, is_deleting,
};
use super::profiles::{DesiredProfile, main_profile, owned_by, preverification_name, profile_name};
use super::revisions;
use super::rollback;
use super::stage_status::{description_text, entry, set_description, set_failure};
use super::takeover;
use super::world::World;
use crate::annotations::{self, Aborted, Cause, Failed, History, Rollback, Run, Subject};
use crate::api::{
    ClusterPromotion, ClusterPromotionStatus, PromotionRevision, Stage, StageStatus, Timestamp,
    revision_id,
};
use crate::hash::{revision_hash, stages_hash};
use crate::settings::{Deadline, FailurePolicy, Settings};
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
            Some(i) if !changed && has_entry => self.continue_run(status, i, ps_hash, st_hash),
            _ => self.start_run(status, ps_hash, st_hash),
        }
    }

    /// The records that hold the current run, in precedence order: an abort, a rollback (which a
    /// `retry` of its revision turns into a new run), a missed deadline under `halt`.
    fn continue_run(
        &mut self,
        status: &mut ClusterPromotionStatus,
        idx: usize,
        ps_hash: String,
        st_hash: String,
    ) {
        let Some(run) = self.run.clone() else {
            return self.progress(status, idx);
        };
        if let Some(a) = annotations::aborted(self.p).filter(|a| a.run == run) {
            return self.hold_aborted(status, &a);
        }
        if let Some(r) = annotations::rollback(self.p).filter(|r| r.from == run) {
            // A retried revision starts again as a new run does: a freeze holds it (the retry
            // record waits for the freeze to lift).
            if annotations::retry(self.p).is_some_and(|t| t.revision == run.revision) {
                return self.start_run(status, ps_hash, st_hash);
            }
            if let Some(f) = annotations::failed(self.p).filter(|f| f.run == run) {
                self.show_miss(status, &f, true);
            }
            return rollback::plan(self.p, self.world, self.ctx, &run, &r, status, self.d);
        }
        if let Some(f) = annotations::failed(self.p).filter(|f| f.run == run && f.resumed.is_none())
        {
            self.show_miss(status, &f, false);
            return self.hold_failed(status, idx, &f);
        }
        self.progress(status, idx)
    }

    /// A new revision (or the first pass) starts a run at stage 1, unless a freeze holds the
    /// promotion (nothing new starts) or the revision was rolled back before and no person asked
    /// for it again (`promoter resume` writes `promoter.dev/retry`).
    fn start_run(&mut self, status: &mut ClusterPromotionStatus, ps_hash: String, st_hash: String) {
        let now = self.now();
        let current = status.current_stage_name.clone().filter(|s| !s.is_empty());
        let first = self.p.spec.stages[0].name.clone();
        let what = if status.profile_spec_hash.is_none() {
            format!("stage {first} (the rollout's start)")
        } else {
            format!("stage {first} of a new revision")
        };
        if let FreezeCheck::Held(h) = freeze::state(self.p, self.world, now) {
            if let Some(stage) = &current {
                freeze::hold(stage, &h, &what, None, status, self.d, now);
            }
            self.d.stage = current.or(Some(first));
            self.d.check_at(h.next_change, h.next_change_for);
            return self.d.outcome(
                Phase::Frozen,
                format!(
                    "{what} held by freeze {}: {} ({})",
                    h.freeze, h.reason, h.until
                ),
            );
        }
        let retried = annotations::retry(self.p).is_some_and(|t| t.revision == ps_hash);
        if let Some(rb) = History::of(self.p).rolled_back(&ps_hash).cloned()
            && !retried
        {
            let text = format!(
                "Held: revision {} was rolled back at {} ({}); `promoter resume` rolls it out again",
                revision_id(&ps_hash),
                rb.at,
                rb.cause.as_str()
            );
            if let Some(stage) = &current {
                set_description(entry(status, stage), &text, now);
            }
            self.d.stage = current.or(Some(first));
            return self.d.outcome(Phase::RolledBack, text);
        }
        self.restart(status, ps_hash, st_hash)
    }

    /// `promoter abort`: the run holds where it is, like a pause, until a new revision or a resume.
    fn hold_aborted(&mut self, status: &mut ClusterPromotionStatus, a: &Aborted) {
        let stage = status.current_stage_name.clone().unwrap_or_default();
        let text = format!(
            "Aborted by {} at {}{}",
            a.by,
            a.at,
            a.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
        set_description(entry(status, &stage), &text, self.now());
        // The time it is held does not count against the running deadline.
        deadline::hold(self.p, self.now(), self.d);
        self.d.stage = Some(stage);
        self.d.outcome(
            Phase::Aborted,
            format!("{text}; holds until the spec changes or `promoter resume`"),
        );
    }

    /// The missed deadline `f` in the failed stage's status, and its Event, when the pass that
    /// recorded it died between its record patch and its status write: the observed entry's
    /// failureMessage neither is the miss nor (`rolling_back`) a text the rollback writes over it
    /// ([`rollback::written_over_miss`]). Judged by content: the entry's lastStatusCheckTime and
    /// the miss's `at` are stamped by two passes' clocks (a pass 2 s behind showed it "before"
    /// the miss, and every later pass said it again). Its notification was in that record patch:
    /// only the Event is owed.
    fn show_miss(&mut self, status: &mut ClusterPromotionStatus, f: &Failed, rolling_back: bool) {
        let message = f.message();
        let observed = self
            .p
            .status
            .as_ref()
            .and_then(|s| s.stages.as_ref())
            .and_then(|s| s.iter().find(|e| e.name == f.stage));
        let shown = observed
            .and_then(|e| e.failure_message.as_deref())
            .is_some_and(|m| m == message || (rolling_back && rollback::written_over_miss(m)));
        if shown {
            return;
        }
        // At the time the pass that recorded the miss wrote it, as that pass's status would have.
        let at = f.at.as_datetime();
        let e = entry(status, &f.stage);
        set_failure(e, Some(&message), at);
        set_description(e, FAILED_DEADLINE, at);
        self.d.owed_event(
            Reason::ProgressDeadlineExceeded,
            Some(&f.stage),
            f.event_note(),
        );
    }

    /// A start of `stage` the status records whose profile does not carry the run's spec yet (the
    /// profile write's answer was lost before the server applied it, or the pass stopped between
    /// its status write and its profile write), while a freeze holds the promotion: writing the
    /// profile now would bring new configuration to the stage's clusters during the freeze, so the
    /// start is held as a new one is, and the status says so. A profile that carries the spec, or
    /// of a stage found deployed in this run, is repaired as usual (a stage already started keeps
    /// running what it was given).
    fn hold_unapplied_start(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage) -> bool {
        let now = self.now();
        let FreezeCheck::Held(h) = freeze::state(self.p, self.world, now) else {
            return false;
        };
        let desired = main_profile(self.p, stage);
        if (self.world.profiles.get(&desired.name)).is_some_and(|o| desired.carries_spec(o)) {
            return false;
        }
        // A stage a pass found deployed in this run was started: its profile, deleted since, is
        // repaired as a reached stage's is (its clusters keep running what they were given).
        let deployed = status
            .stages
            .iter()
            .flatten()
            .any(|e| e.name == stage.name && e.last_successful_applied_time.is_some());
        if deployed {
            return false;
        }
        let what = format!(
            "the start of stage {} (recorded; its ClusterProfile not yet applied)",
            stage.name
        );
        freeze::hold(&stage.name, &h, &what, None, status, self.d, now);
        self.d.check_at(h.next_change, h.next_change_for);
        self.d.outcome(
            Phase::Frozen,
            format!(
                "{what} held by freeze {}: {} ({})",
                h.freeze, h.reason, h.until
            ),
        );
        true
    }

    /// A stage missed its progress deadline under `halt`: the run holds; the reached stages and
    /// the failed one keep their profiles (repairs only), nothing advances.
    fn hold_failed(&mut self, status: &mut ClusterPromotionStatus, idx: usize, f: &Failed) {
        let stage = self.p.spec.stages[idx].clone();
        self.d.stage = Some(stage.name.clone());
        self.keep_reached(status, idx);
        let _ = ensure(self.p, self.world, self.d, main_profile(self.p, &stage));
        self.d.outcome(
            Phase::Failed,
            format!(
                "stage {} missed its progress deadline ({}) at {}: {}; `promoter resume` retries it, a new revision starts over",
                f.stage, f.deadline, f.at, f.why
            ),
        );
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
        let at = status.current_stage_name.clone();
        self.d.event(Reason::TookOver, at.as_deref(), format!(
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
                    Some(stage),
                    format!("ClusterPromotion {} is blocked: {message}", self.name),
                );
            }
            set_failure(e, Some(&message), now);
            set_description(e, BLOCKED, now);
        }
        self.d.stage = stage;
        self.d
            .outcome(Phase::Blocked, format!("blocked: {message}"));
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
                Phase::Progressing,
                format!(
                    "restart waits: ClusterProfile {} is being deleted",
                    profile_name(self.name, &first.name)
                ),
            );
            return;
        }
        let first_time = status.profile_spec_hash.is_none();
        approval::restore_unused_grants(self.p, &ps_hash, self.d);
        // What held or released the old run is about that run only.
        for hold in Hold::ALL {
            if annotations::has(self.p, hold.key()) {
                self.d.record(RecordOp::Drop(hold));
            }
        }
        revisions::superseded(self.p, self.world, now, self.d);
        let bypass_note = match freeze::state(self.p, self.world, now) {
            FreezeCheck::Bypassed { freeze, bypass } => {
                Some(freeze::bypassed(&first.name, &freeze, &bypass, self.d))
            }
            _ => None,
        };
        // Stage 1 gets the new revision only once the status records the restart (invariant 1).
        delete_after(
            self.world,
            self.d,
            preverification_name(self.name, &first.name),
        );
        ensure_after(self.p, self.world, self.d, main_profile(self.p, &first));
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
        let text = match &bypass_note {
            Some(note) => format!("Clusters are being provisioned {note}"),
            None => "Clusters are being provisioned".to_string(),
        };
        set_description(entry(status, &first.name), &text, now);
        // Upstream's description setter does not touch lastStatusCheckTime.
        entry(status, &first.name).last_status_check_time = None;
        // Upstream says "(Restart)" on the very first rollout too; promoter only for a new
        // revision (a first rollout restarts nothing).
        self.d.event(
            Reason::StageProvisioning,
            Some(&first.name),
            if first_time {
                format!("Provisioning stage {}", first.name)
            } else {
                format!("Provisioning stage {} (Restart)", first.name)
            },
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
        if self.hold_unapplied_start(status, &stage) {
            return;
        }
        if !self.deployed(status, &stage) {
            let failing = self.d.phase == Phase::Failed;
            let deadline = self.deadline(status, &stage, Progress::Incomplete);
            if failing {
                self.failing(status, &stage, deadline);
            }
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
                self.d.check_at(wait.next_check, wait.next_check_for);
                self.d.outcome(wait.phase, wait.summary);
                self.deadline(status, &stage, wait.progress);
            }
            None => self.advance(status, idx),
        }
    }

    /// A deployment failed on a cluster of the current stage (the decision says `Failed`): with its
    /// progress deadline ahead, Sveltos retries until then (`Failing`, saying when and what the
    /// failure policy does next); without one, nothing acts on it but a person (`Failed`). A
    /// missed deadline was recorded by [`Self::fail`] already.
    fn failing(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage, deadline: Due) {
        let due = match deadline {
            Due::Ahead(due) => Some(due),
            Due::None => None,
            Due::Missed | Due::Blocked => return,
        };
        let then = failing::then(self.p, self.run.as_ref());
        let (phase, text) = failing::outlook(due, then);
        set_description(entry(status, &stage.name), &text, self.now());
        self.d.phase = phase;
        if let Some(due) = due {
            self.d.summary =
                self.d
                    .summary
                    .replacen(": deployment failed: ", ": deployment failing: ", 1)
                    + &format!(
                        "; Sveltos retries until {}, then {then}",
                        Timestamp::new(due)
                    );
        }
    }

    /// The current stage's progress deadline (`deadline`): while it is not complete it says when
    /// the deadline falls; once it has passed, the stage failed and the failure policy decides.
    /// A complete stage waiting at a later gate has met it: that is recorded on its clock, and the
    /// deadline is done for the run.
    fn deadline(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        progress: Progress,
    ) -> Due {
        let settings = Settings::of(self.p);
        let Some(limit) = settings.deadline_for(&stage.name).cloned() else {
            return Due::None;
        };
        let Some(run) = self.run.clone() else {
            return Due::None;
        };
        let now = self.now();
        let subject = Subject::Stage(stage.name.clone());
        let mut clock = deadline::stage_clock(self.p, &run, &stage.name, now);
        if clock.clock.met_at.is_none() && progress == Progress::Complete {
            clock.clock.met_at = Some(Timestamp::new(now));
        }
        let met = clock.clock.met_at.is_some();
        let due = deadline::due(&limit, stage, entry(status, &stage.name), &clock.clock);
        clock.record(&run, &subject, self.d);
        let due = match due {
            Ok(Some(due)) => due,
            Ok(None) => return Due::None,
            Err(e) => {
                let path = crate::settings::SettingError {
                    annotation: crate::settings::PROGRESS_DEADLINE.into(),
                    message: e,
                };
                self.blocked(status, vec![path.to_string()]);
                return Due::Blocked;
            }
        };
        if met {
            return Due::None;
        }
        if progress != Progress::Incomplete {
            return Due::Ahead(due);
        }
        if now < due {
            self.d.check_by(Some(due), "progress deadline");
            if self.d.phase != Phase::Failed {
                self.d.summary = format!(
                    "{} (progress deadline {})",
                    self.d.summary,
                    Timestamp::new(due)
                );
            }
            return Due::Ahead(due);
        }
        self.fail(status, stage, &limit, due, &settings);
        Due::Missed
    }

    /// The stage missed its deadline: recorded (`promoter.dev/failed`), said, and then the failure
    /// policy: `halt` holds the run; `rollback` starts a rollback to the last known good revision
    /// in this same pass (halting when there is none).
    fn fail(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        limit: &Deadline,
        due: DateTime<Utc>,
        settings: &Settings,
    ) {
        let Some(run) = self.run.clone() else {
            return;
        };
        let now = self.now();
        let failed = Failed {
            run: run.clone(),
            stage: stage.name.clone(),
            at: Timestamp::new(now),
            why: crate::bounded_text::recorded(&self.d.summary),
            deadline: limit.text.clone(),
            resumed: None,
            due: Some(Timestamp::new(due)),
        };
        let message = failed.message();
        self.d.record(RecordOp::Failed(failed.clone()));
        // The stage's clock is done: a resume of the miss starts a new one.
        if annotations::has(self.p, annotations::DEADLINE_CLOCK) {
            self.d.record(RecordOp::Drop(Hold::Clock));
        }
        // `promoter.dev/failed` holds the run from now on, whatever the status write does.
        self.d.recorded_event(
            Reason::ProgressDeadlineExceeded,
            Some(&stage.name),
            failed.event_note(),
        );
        let e = entry(status, &stage.name);
        set_failure(e, Some(&message), now);
        set_description(e, FAILED_DEADLINE, now);
        self.d.check_at(None, "");
        let good = match settings.failure_policy {
            FailurePolicy::Halt => None,
            FailurePolicy::Rollback => History::of(self.p)
                .candidates(&run.revision)
                .next()
                .cloned(),
        };
        let Some(good) = good else {
            let policy = match settings.failure_policy {
                FailurePolicy::Halt => "halted".to_string(),
                FailurePolicy::Rollback => {
                    "no completed revision to roll back to: halted".to_string()
                }
            };
            return self.d.outcome(
                Phase::Failed,
                format!("stage {}: {message}; {policy}", stage.name),
            );
        };
        let record = Rollback {
            from: run.clone(),
            to: good.revision.clone(),
            order: settings.rollback_order,
            cause: Cause::ProgressDeadline,
            by: "promoter".into(),
            at: Timestamp::new(now),
            reason: Some(crate::bounded_text::recorded(&format!(
                "stage {}: {message}",
                stage.name
            ))),
            completed_at: None,
            kept: None,
            missed: None,
        };
        self.d.record(RecordOp::Rollback(record.clone()));
        // The forward run's repairs planned above give way to the rollback's writes.
        self.d.actions.retain(|a| !matches!(a, Action::Apply(_)));
        rollback::plan(self.p, self.world, self.ctx, &run, &record, status, self.d);
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
        // A rollout completed before promoter kept a history: under a rollback policy its revision
        // is stored once, so that the next revision has something to roll back to.
        if let Some(run) = self.run.clone()
            && Settings::of(self.p).failure_policy == FailurePolicy::Rollback
            && History::of(self.p)
                .entry(&run.revision)
                .is_none_or(|e| e.completed_at.is_none())
        {
            let at = entry(status, &stage.name)
                .last_successful_applied_time
                .map_or(self.now(), |t| t.as_datetime());
            self.record_completion(&run, at);
        }
        // Budgeted clusters stay named until they run the revision.
        self.spend_budget(None, None);
        // A completion whose status was never written was shown before planning (`completion`).
        set_description(entry(status, &stage.name), PASSED, self.now());
        self.d.outcome(Phase::Complete, "complete".into());
    }

    /// A passed stage's profile, as it was promoted, without its preverification profile; the
    /// failureMessage notes what the served CRD dropped from it (see [`Self::note_pruned`]).
    fn keep(&mut self, status: &mut ClusterPromotionStatus, stage: &Stage, replace_other: bool) {
        let desired = main_profile(self.p, stage);
        let note = self.pruned_note(&desired);
        let _ = ensure(self.p, self.world, self.d, desired);
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
        let observed = status
            .stages
            .iter()
            .flatten()
            .find(|e| e.name == stage.name);
        let budget = budget::of(self.p, stage, observed, self.run.as_ref(), now);
        let check = match ensure(self.p, self.world, self.d, desired) {
            Observed::Applied(cp) => {
                deployment::check_within(self.p, cp, &selector, self.world, budget.as_ref())
            }
            Observed::Applying => pending(format!(
                "ClusterProfile {} was applied in this pass.",
                profile_name(self.name, &stage.name)
            )),
            Observed::Deleting => pending(format!(
                "ClusterProfile {} is being deleted; it is recreated once it is gone.",
                profile_name(self.name, &stage.name)
            )),
        };
        if check.done
            && check.selects_none
            && !Settings::of(self.p).allow_empty_stages.allowed(&stage.name)
        {
            self.hold_empty(status, stage, &selector);
            return false;
        }
        self.spend_budget(Some(&stage.name), check.budget.as_ref());
        let e = entry(status, &stage.name);
        let provisioned = e.last_successful_applied_time.is_some();
        if !check.done {
            self.d.wait_for_grace(&stage.name, check.until);
            let was = e.failure_message.clone();
            set_failure(e, Some(&check.message), now);
            let failing_before = e
                .current_status_description
                .as_deref()
                .map(description_text)
                .is_some_and(|t| {
                    matches!(
                        of_description(t, false),
                        Phase::Failing | Phase::Failed | Phase::Blocked
                    )
                });
            if check.failure.is_none() && (provisioned || failing_before) {
                // Redeploying after it had been provisioned (a cluster drifted, joined, or is
                // redeployed), or after a failure cleared: upstream's text for a stage being
                // provisioned (upstream says "Awaiting Health Checks to Pass" for a regression,
                // untrue where no check fails). A failure's text follows its deadline (`failing`).
                set_description(e, PROVISIONING, now);
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
                    Some(&stage.name),
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
                Some(&stage.name),
                provisioned_event(&stage.name),
            );
        }
        true
    }

    /// The run's record of budgeted clusters (`budget`), written when it changes: the current
    /// stage's clusters as this pass counted them (while within its budget), every stage promoted
    /// past keeping only its clusters still outside the revision. Clusters counted for the first
    /// time are announced.
    fn spend_budget(&mut self, current: Option<&str>, used: Option<&budget::BudgetUse>) {
        let Some(run) = self.run.clone() else {
            return;
        };
        let observed = annotations::budgeted_in(self.p, &run);
        let mut next = observed.clone();
        for (stage, clusters) in next.stages.iter_mut() {
            if Some(stage.as_str()) == current {
                continue;
            }
            if let Some(s) = self.p.spec.stages.iter().find(|s| &s.name == stage) {
                *clusters = budget::still_outside(self.p, s, self.world, clusters);
            }
        }
        match (current, used) {
            (Some(current), Some(u)) if !u.over() => {
                let before = observed.of_stage(current);
                let spent: Vec<_> = u
                    .budgeted
                    .iter()
                    .filter(|c| !before.iter().any(|b| b.cluster == c.cluster))
                    .cloned()
                    .collect();
                next.stages.insert(current.to_string(), u.budgeted.clone());
                if !spent.is_empty() {
                    self.d.event(
                        Reason::FailureBudgetSpent,
                        Some(current),
                        format!(
                            "Stage {current}: {} of the failure budget {} spent: {}",
                            u.budgeted.len(),
                            u.budget_text(),
                            budget::names(&spent)
                        ),
                    );
                    // The record patch records it: a later pass does not announce it again, and
                    // its notification is deliverable once the patch is written.
                    if let Some(e) = self.d.events.last_mut() {
                        e.recorded = true;
                    }
                }
            }
            // Over its budget the stage holds: what it recorded stays as it was.
            _ => {}
        }
        next.stages.retain(|_, clusters| !clusters.is_empty());
        let was = annotations::budgeted(self.p);
        let unchanged = match &was {
            Some(w) => *w == next,
            None => next.is_empty(),
        };
        if !unchanged {
            self.d.record(RecordOp::Budgeted(next));
        }
    }

    /// The stage selects no cluster of the inventory and no setting lets it pass empty: the
    /// rollout holds here, Blocked, saying which selector and the nearest labels, with an Event
    /// when the hold begins (see `empty_stage`).
    fn hold_empty(
        &mut self,
        status: &mut ClusterPromotionStatus,
        stage: &Stage,
        selector: &crate::labels::LabelSelector,
    ) {
        let now = self.now();
        let message = empty_stage::message(
            &stage.name,
            selector,
            self.world.clusters.iter().map(|c| &c.labels),
        );
        let e = entry(status, &stage.name);
        let held = e
            .current_status_description
            .as_deref()
            .map(description_text)
            == Some(EMPTY_STAGE);
        if !held {
            self.d.event(
                Reason::Blocked,
                Some(&stage.name),
                format!("ClusterPromotion {} is blocked: {message}", self.name),
            );
        }
        set_failure(e, Some(&message), now);
        set_description(e, EMPTY_STAGE, now);
        self.d.empty_stage = Some(stage.name.clone());
        self.d
            .outcome(Phase::Blocked, format!("blocked: {message}"));
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
        // The promotion's time is the description's, the next stage's lastUpdateReconciledTime
        // and lastPromotionTime; the stage keeps its deployment's time.
        passed(entry(status, &stage.name), now);
        delete_after(
            self.world,
            self.d,
            preverification_name(self.name, &stage.name),
        );
        let Some(next) = stages.get(idx + 1).cloned() else {
            let message = complete_event(self.name, &stage.name);
            match self.run.clone() {
                Some(run) => {
                    self.record_completion(&run, now);
                    self.d.record(RecordOp::Complete(run));
                    // The completion record is the truth (invariant 4): a later pass keeps it.
                    self.d
                        .recorded_event(Reason::RolloutComplete, Some(&stage.name), message);
                }
                None => self
                    .d
                    .event(Reason::RolloutComplete, Some(&stage.name), message),
            }
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
        ensure_after(self.p, self.world, self.d, main_profile(self.p, &next));
        status
            .stages
            .get_or_insert_with(Vec::new)
            .push(StageStatus {
                name: next.name.clone(),
                last_update_reconciled_time: Some(Timestamp::new(now)),
                ..Default::default()
            });
        if let FreezeCheck::Bypassed { freeze, bypass } = freeze::state(self.p, self.world, now) {
            let note = freeze::bypassed(&next.name, &freeze, &bypass, self.d);
            set_description(
                entry(status, &next.name),
                &format!("Clusters are being provisioned {note}"),
                now,
            );
            entry(status, &next.name).last_status_check_time = None;
        }
        status.current_stage_name = Some(next.name.clone());
        status.last_promotion_time = Some(Timestamp::new(now));
        self.d.stage = Some(next.name.clone());
        self.d.event(
            Reason::StageProvisioning,
            Some(&next.name),
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
            self.d.event(
                Reason::FieldsPruned,
                Some(&stage.name),
                format!("Stage {}: {n}", stage.name),
            );
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
                            == Some(PASSED)
                });
        match self.run.clone() {
            Some(run) if legacy => {
                self.record_completion(&run, self.now());
                self.d.record(RecordOp::Complete(run));
                true
            }
            _ => false,
        }
    }

    /// A run completed: its revision is stored (a `PromotionRevision`, before the record patch, so
    /// the history never names a revision that is not stored) and added to the history, which
    /// keeps the newest `revision-history-limit`; revisions it no longer names are swept by this
    /// or a later pass (`revisions`). Where promoter's CRDs are not served, only the history is kept
    /// (a rollback policy is a problem there, `problems`; a manual rollback says the revision is
    /// not stored).
    fn record_completion(&mut self, run: &Run, at: DateTime<Utc>) {
        let limit = Settings::of(self.p).revision_history_limit;
        let started = run.started_at();
        let stored = !self.world.own_crds_missing;
        if stored {
            let mut revision = PromotionRevision::of(
                self.p,
                &run.revision,
                &run.stages,
                started,
                Timestamp::new(at),
            );
            // What Sveltos reported for each stage's profile, for a rollback to this revision:
            // the pass reads the summaries of the stages it did not list, and decides again.
            for profile in known_hashes::unread(self.p, self.world) {
                if !self.d.needs_summaries.contains(&profile) {
                    self.d.needs_summaries.push(profile);
                }
            }
            revision.spec.feature_hashes = known_hashes::of_run(self.p, self.world);
            let before = self
                .d
                .actions
                .iter()
                .position(|a| matches!(a, Action::Record(_)))
                .unwrap_or(self.d.actions.len());
            self.d
                .actions
                .insert(before, Action::StoreRevision(Box::new(revision)));
        }
        let mut history = History::of(self.p);
        history.record_completion(&run.revision, started, Timestamp::new(at), limit);
        revisions::record_history(self.p, self.world, history, self.now(), self.d);
    }
}

/// Where the current stage's progress deadline stands after [`Planner::deadline`].
enum Due {
    /// The stage has no deadline (or no recorded start).
    None,
    Ahead(DateTime<Utc>),
    /// It fell in this pass: the stage failed and the failure policy acted.
    Missed,
    /// It cannot be computed: the promotion is blocked.
    Blocked,
}

/// The description of a stage that missed its progress deadline (its failureMessage says why).
pub use super::phase::FAILED_DEADLINE;

/// How the note on fields the served CRD dropped begins.
const PRUNED_NOTE: &str = "The served ClusterProfile CRD is older than promoter's schema";

fn pending(message: String) -> DeploymentCheck {
    DeploymentCheck {
        done: false,
        message,
        failure: None,
        skipped_paused: Vec::new(),
        until: None,
        selects_none: false,
        budget: None,
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
