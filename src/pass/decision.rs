//! The decision's vocabulary: what a decision says about one ClusterPromotion (its [`Phase`], the
//! [`Action`]s and [`RecordOp`]s to apply, the [`EventNote`]s and their [`Reason`]s, the new status)
//! and what it is decided from besides the observed world ([`Context`], [`HealthResults`]).
//! `decide` and its gates write it, `act` applies it, `events` records its notes.

use super::profiles::DesiredProfile;
use crate::annotations::{DeadlineClock, Failed, Grant, History, Record, Rollback, Run};
use crate::api::{ClusterPromotionStatus, PromotionRevision};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::collections::BTreeMap;

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

pub use super::phase::Phase;

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
    /// Stores a completed revision (`PromotionRevision`, content-addressed: one that already
    /// exists is the same revision, and is left as it is). Revisions the history forgets are
    /// deleted by the pass's sweep (`revisions::sweep`), not by the decision.
    StoreRevision(Box<PromotionRevision>),
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
    /// Writes the revision history (`promoter.dev/history`) as a whole.
    History(History),
    /// A sweep of the stored revisions is due (`promoter.dev/revision-sweep`, this token): the
    /// history written with it forgets a revision it kept.
    SweepDue(String),
    /// A stage of the run missed its progress deadline (`promoter.dev/failed`).
    Failed(Failed),
    /// A rollback of the run starts, or (with `completed_at`) is complete (`promoter.dev/rollback`).
    Rollback(Rollback),
    /// Writes the deadline clock (`promoter.dev/deadline-clock`) as a whole.
    Clock(DeadlineClock),
    /// Writes the clusters counted against the failure budgets of the run
    /// (`promoter.dev/budgeted`) as a whole; an empty record removes it.
    Budgeted(crate::annotations::Budgeted),
    /// Removes a record that holds or releases a run (the run it was about is over).
    Drop(Hold),
    /// Writes the notification outbox (`promoter.dev/outbox`) as a whole: the transitions of this
    /// decision added, before the status write that records them (see `notifications`).
    Outbox(Vec<crate::annotations::outbox::Entry>),
    /// What Sveltos redeploys for the spec this decision writes to a profile
    /// (`promoter.dev/redeploy`, see `profile_writes::ensure`).
    Redeploy {
        profile: String,
        record: crate::annotations::redeploy::Redeploy,
    },
}

/// The records about one run that a new run makes void.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    Failed,
    Rollback,
    Aborted,
    Retry,
    /// The deadline clock (about the run's stage or rollback).
    Clock,
    /// The clusters counted against the run's failure budgets.
    Budgeted,
}

impl Hold {
    pub const ALL: [Hold; 6] = [
        Hold::Failed,
        Hold::Rollback,
        Hold::Aborted,
        Hold::Retry,
        Hold::Clock,
        Hold::Budgeted,
    ];

    /// The annotation that holds it.
    pub fn key(self) -> &'static str {
        use crate::annotations::{ABORTED, BUDGETED, DEADLINE_CLOCK, FAILED, RETRY, ROLLBACK};
        match self {
            Hold::Failed => FAILED,
            Hold::Rollback => ROLLBACK,
            Hold::Aborted => ABORTED,
            Hold::Retry => RETRY,
            Hold::Clock => DEADLINE_CLOCK,
            Hold::Budgeted => BUDGETED,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    pub warning: bool,
    pub reason: String,
    pub message: String,
    /// The stage it is about (for notifications; an Event names it in its note).
    pub stage: Option<String>,
    /// Recorded by the decision's record patch itself, or announced before such a transition in
    /// the same decision (see [`Decision::recorded_event`]).
    pub recorded: bool,
    /// Its transition was recorded (and notified) by an earlier pass that died before its status
    /// write: only the Event is still owed (see [`Decision::owed_event`]).
    pub owed: bool,
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
    /// What happens at `next_check`, in words: `soak ends`, `progress deadline`, …
    pub next_check_for: Option<&'static str>,
    /// The stage whose postDelayHealthChecks must be evaluated before this decision is final.
    pub needs_health: Option<String>,
    /// The stored `PromotionRevision` (its name) a rollback needs: the pass reads it and decides
    /// again.
    pub needs_revision: Option<String>,
    /// Profiles whose spec this decision changes but whose ClusterSummaries the pass did not list:
    /// the pass lists them and decides again, so that the `promoter.dev/redeploy` record keeps the
    /// hashes they carry before the write.
    pub needs_summaries: Vec<String>,
    /// The manual stages this decision lets through on their approval (the approval gate is the
    /// last: the stage is promoted past in this decision). Notified as "approved"; no Event.
    pub approved: Vec<LetThrough>,
    /// The stage holding the rollout because it selects no cluster (`empty_stage`).
    pub empty_stage: Option<String>,
    /// The stages whose completion waits only for the freshness grace (a `Provisioned` promoter
    /// can tell neither by content nor by the API server's times to be about the current spec).
    pub grace: Vec<String>,
}

/// A manual stage let through on its approval.
#[derive(Clone, Debug, PartialEq)]
pub struct LetThrough {
    pub stage: String,
    /// The `promoter approve` record of who approved, when there is one.
    pub approval: Option<Record>,
    /// How many of the decision's events come before it (its place among them).
    pub after: usize,
}

impl Decision {
    pub(super) fn new(promotion: &str) -> Self {
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
            next_check_for: None,
            needs_health: None,
            needs_revision: None,
            needs_summaries: Vec::new(),
            approved: Vec::new(),
            empty_stage: None,
            grace: Vec::new(),
        }
    }

    /// An Event of this pass about `stage` (see `events` for when a transition is one).
    pub(super) fn event(&mut self, reason: Reason, stage: Option<&str>, message: String) {
        self.events.push(EventNote {
            stage: stage.map(String::from),
            ..reason.note(message)
        });
    }

    /// The manual stage `stage` passes its approval gate in this decision.
    pub(super) fn let_through(&mut self, stage: &str, approval: Option<Record>) {
        self.approved.push(LetThrough {
            stage: stage.to_string(),
            approval,
            after: self.events.len(),
        });
    }

    /// An Event of a transition that the decision's record patch records by itself (a completion,
    /// a missed deadline, a finished rollback): it holds even when the status write that follows
    /// fails, and the next pass, reading the record, announces neither it nor what this decision
    /// announced before it (it holds the run, or keeps it complete). So they are all marked.
    pub(super) fn recorded_event(&mut self, reason: Reason, stage: Option<&str>, message: String) {
        self.event(reason, stage, message);
        for e in &mut self.events {
            e.recorded = true;
        }
    }

    /// The Event of a transition an earlier pass recorded in its record patch (with its
    /// notification) but died before the status write that it goes with: the status shows it
    /// now, and its Event follows that write, once. Not notified again.
    pub(super) fn owed_event(&mut self, reason: Reason, stage: Option<&str>, message: String) {
        self.events.push(EventNote {
            stage: stage.map(String::from),
            owed: true,
            ..reason.note(message)
        });
    }

    /// Adds a record to the decision's one guarded record patch.
    pub(super) fn record(&mut self, op: RecordOp) {
        match self.actions.iter_mut().find_map(|a| match a {
            Action::Record(ops) => Some(ops),
            _ => None,
        }) {
            Some(ops) => ops.push(op),
            None => self.actions.push(Action::Record(vec![op])),
        }
    }

    /// The phase and the one-line summary (bounded: it quotes Sveltos' messages, and a missed
    /// deadline records it).
    pub(super) fn outcome(&mut self, phase: Phase, summary: String) {
        self.phase = phase;
        self.summary = crate::bounded_text::recorded(&summary);
    }

    /// The earliest of the current `next_check` and `t`, when `what` happens.
    pub(super) fn check_by(&mut self, t: Option<DateTime<Utc>>, what: &'static str) {
        if let Some(t) = t
            && self.next_check.is_none_or(|a| t < a)
        {
            self.next_check = Some(t);
            self.next_check_for = Some(what);
        }
    }

    /// The next check is `t`, when `what` happens (none: no time-driven change).
    pub(super) fn check_at(&mut self, t: Option<DateTime<Utc>>, what: &'static str) {
        self.next_check = t;
        self.next_check_for = t.map(|_| what);
    }

    /// `stage` waits for the freshness grace until `until` (if it does): a pass is due then.
    pub(super) fn wait_for_grace(&mut self, stage: &str, until: Option<DateTime<Utc>>) {
        if until.is_some() {
            self.grace.push(stage.to_string());
        }
        self.check_by(until, "freshness grace ends");
    }

    pub fn writes(&self) -> bool {
        !self.actions.is_empty() || self.status.is_some() || !self.after_status.is_empty()
    }
}

/// Why an Event was recorded: its `reason`, one CamelCase word as Kubernetes' own reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A stage's ClusterProfile was applied: `Provisioning stage <s>` (`(Restart)` for stage 1 of a
    /// new revision).
    StageProvisioning,
    /// Every matching cluster is deployed: `Stage <s> provisioned`.
    StageProvisioned,
    /// A manual stage waits for `promoter approve`.
    AwaitingApproval,
    /// A stage that waited for its promotion window is past it.
    WindowOpened,
    /// A stage's postDelayHealthChecks started failing (Warning).
    ChecksFailing,
    /// They pass again.
    ChecksPassing,
    /// The last stage was promoted past.
    RolloutComplete,
    /// A deployment failed on some cluster (Warning).
    DeploymentFailed,
    /// The ClusterPromotion cannot be processed as written (Warning).
    Blocked,
    /// promoter continued a rollout another writer recorded (see `pass::takeover`).
    TookOver,
    /// The served ClusterProfile CRD dropped fields of a generated profile (Warning).
    FieldsPruned,
    /// `promoter approve`.
    Approved,
    /// `promoter pause`.
    Paused,
    /// `promoter resume`.
    Resumed,
    /// `promoter rollback`.
    RollbackRequested,
    /// `promoter abort`.
    Aborted,
    /// `promoter freeze bypass`.
    FreezeBypassGranted,
    /// A stage did not complete within its progress deadline (Warning).
    ProgressDeadlineExceeded,
    /// A rollback to the last known good revision starts (Warning).
    RollbackStarted,
    /// A stage of a rollback runs the revision rolled back to on every matching cluster.
    StageRolledBack,
    /// Every stage of a rollback is rolled back; the promotion holds (Warning).
    RolledBack,
    /// A rollback did not finish within its own deadline; it holds for a person (Warning).
    RollbackDeadlineExceeded,
    /// A freeze holds the promotion: the next stage does not start.
    Frozen,
    /// A stage started while a freeze held the promotion, under a recorded bypass.
    FreezeBypassed,
    /// A PromotionFreeze that holds nothing because it is invalid (Warning, on the freeze).
    InvalidFreeze,
    /// A PromotionFreeze that cannot be decoded: it holds every promotion it may select (Warning,
    /// on the freeze).
    UnreadableFreeze,
    /// Clusters of a stage were counted against its failure budget (Warning).
    FailureBudgetSpent,
}

impl Reason {
    /// Every reason, in the order the enum declares them.
    pub const ALL: [Reason; 27] = [
        Reason::StageProvisioning,
        Reason::StageProvisioned,
        Reason::AwaitingApproval,
        Reason::WindowOpened,
        Reason::ChecksFailing,
        Reason::ChecksPassing,
        Reason::RolloutComplete,
        Reason::DeploymentFailed,
        Reason::Blocked,
        Reason::TookOver,
        Reason::FieldsPruned,
        Reason::Approved,
        Reason::Paused,
        Reason::Resumed,
        Reason::RollbackRequested,
        Reason::Aborted,
        Reason::FreezeBypassGranted,
        Reason::ProgressDeadlineExceeded,
        Reason::RollbackStarted,
        Reason::StageRolledBack,
        Reason::RolledBack,
        Reason::RollbackDeadlineExceeded,
        Reason::Frozen,
        Reason::FreezeBypassed,
        Reason::InvalidFreeze,
        Reason::UnreadableFreeze,
        Reason::FailureBudgetSpent,
    ];

    /// When an Event of this reason is recorded, and its note (`<s>`: a stage, `<p>`: the
    /// promotion, `<id>`: a revision ID, `<who>`: the identity the API server authenticated).
    pub fn about(self) -> &'static str {
        match self {
            Reason::StageProvisioning => {
                "a stage's ClusterProfile was applied: `Provisioning stage <s> (Restart)` for stage 1 of a new revision, `Provisioning stage <s>` for any other stage and for stage 1 of the first rollout (where upstream also says `(Restart)`)"
            }
            Reason::StageProvisioned => {
                "every matching cluster of the stage is deployed: `Stage <s> provisioned`"
            }
            Reason::AwaitingApproval => {
                "a manual stage waits for `promoter approve`: `Stage <s> awaits manual approval`"
            }
            Reason::WindowOpened => {
                "a stage that waited for its promotion window is past it: `Stage <s>: promotion window open`"
            }
            Reason::ChecksFailing => {
                "a stage's postDelayHealthChecks started failing: `Stage <s>: health checks failing: <cluster, check, message>`"
            }
            Reason::ChecksPassing => "they pass again: `Stage <s>: health checks pass again`",
            Reason::RolloutComplete => {
                "the last stage was promoted past: `ClusterPromotion <p> complete: stage <s> provisioned`"
            }
            Reason::DeploymentFailed => {
                "a deployment failed on some cluster: `Stage <s>: <cluster and feature that failed>`"
            }
            Reason::Blocked => {
                "the ClusterPromotion cannot be processed as written, or the stage it reached selects no cluster: `ClusterPromotion <p> is blocked: <why>` (`… is blocked: stage <s> selects no cluster: <selector>: <nearest labels>; …`)"
            }
            Reason::TookOver => {
                "promoter continued a rollout another writer recorded: `Took over the rollout recorded by <writer> at stage <s>: …`"
            }
            Reason::FieldsPruned => {
                "the served ClusterProfile CRD dropped fields of a generated profile (an older Sveltos): `The served ClusterProfile CRD is older than promoter's schema and dropped …`"
            }
            Reason::Approved => {
                "`promoter approve`: `Stage <s> approved by <who> for revision <id>` (or `pre-approved … for the next revision`)"
            }
            Reason::Paused => "`promoter pause`: `Paused by <who>`",
            Reason::Resumed => "`promoter resume`: `Resumed by <who> (<each hold lifted>)`",
            Reason::RollbackRequested => {
                "`promoter rollback`: `Rollback of revision <id> to revision <id> (<order>) requested by <who>`"
            }
            Reason::Aborted => "`promoter abort`: `Aborted by <who> at stage <s>`",
            Reason::FreezeBypassGranted => {
                "`promoter freeze bypass`: `Freeze bypass for freeze <f> (or any freeze) granted by <who> until <time>`"
            }
            Reason::ProgressDeadlineExceeded => {
                "a stage did not complete within its progress deadline: `Stage <s> did not complete within its progress deadline <D> (due <time>): <why>`"
            }
            Reason::RollbackStarted => {
                "a rollback starts: `Rolling back stages <s>, … to revision <id> (<cause>, <order>): <reason>`"
            }
            Reason::StageRolledBack => {
                "a stage of a rollback runs the revision rolled back to on every matching cluster: `Stage <s> rolled back to revision <id>`"
            }
            Reason::RolledBack => {
                "every stage of a rollback is rolled back: `ClusterPromotion <p> rolled back to revision <id>; it holds until its spec changes or `promoter resume``"
            }
            Reason::RollbackDeadlineExceeded => {
                "a rollback did not finish within its own deadline: `Rollback to revision <id> did not complete within its deadline <D> (due <time>): stage <s>: <why>; it holds for a person`"
            }
            Reason::Frozen => {
                "a freeze holds the promotion: `Stage <s>: stage <next> held by freeze <f>: <reason> (until <end>)`"
            }
            Reason::FreezeBypassed => {
                "a stage started during a freeze under a recorded bypass: `Stage <s> started during freeze <f> under the bypass by <who> until <time>: <reason>`"
            }
            Reason::InvalidFreeze => {
                "on the PromotionFreeze: it holds nothing because it is invalid: `PromotionFreeze <f> holds nothing: <why>`"
            }
            Reason::FailureBudgetSpent => {
                "clusters of a stage were counted against its failure budget in this run: `Stage <s>: <n> of <budget> spent: <cluster> (<why>); …` (the clusters counted for the first time; each stays named until it runs the revision)"
            }
            Reason::UnreadableFreeze => {
                "on the PromotionFreeze: it cannot be decoded, so it holds every promotion it may select: `PromotionFreeze <f> holds every promotion it may select: cannot be read (<why>): …`"
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::StageProvisioning => "StageProvisioning",
            Reason::StageProvisioned => "StageProvisioned",
            Reason::AwaitingApproval => "AwaitingApproval",
            Reason::WindowOpened => "WindowOpened",
            Reason::ChecksFailing => "ChecksFailing",
            Reason::ChecksPassing => "ChecksPassing",
            Reason::RolloutComplete => "RolloutComplete",
            Reason::DeploymentFailed => "DeploymentFailed",
            Reason::Blocked => "Blocked",
            Reason::TookOver => "TookOver",
            Reason::FieldsPruned => "FieldsPruned",
            Reason::Approved => "Approved",
            Reason::Paused => "Paused",
            Reason::Resumed => "Resumed",
            Reason::RollbackRequested => "RollbackRequested",
            Reason::Aborted => "Aborted",
            Reason::FreezeBypassGranted => "FreezeBypassGranted",
            Reason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            Reason::RollbackStarted => "RollbackStarted",
            Reason::StageRolledBack => "StageRolledBack",
            Reason::RolledBack => "RolledBack",
            Reason::RollbackDeadlineExceeded => "RollbackDeadlineExceeded",
            Reason::Frozen => "Frozen",
            Reason::FreezeBypassed => "FreezeBypassed",
            Reason::InvalidFreeze => "InvalidFreeze",
            Reason::UnreadableFreeze => "UnreadableFreeze",
            Reason::FailureBudgetSpent => "FailureBudgetSpent",
        }
    }

    /// `type: Warning` for what needs somebody's attention.
    pub fn warning(self) -> bool {
        matches!(
            self,
            Reason::ChecksFailing
                | Reason::DeploymentFailed
                | Reason::Blocked
                | Reason::FieldsPruned
                | Reason::ProgressDeadlineExceeded
                | Reason::RollbackStarted
                | Reason::RolledBack
                | Reason::RollbackDeadlineExceeded
                | Reason::InvalidFreeze
                | Reason::UnreadableFreeze
                | Reason::FailureBudgetSpent
        )
    }

    /// The Event's `action`: upstream's `ClusterPromotion` for what a pass does; what the person did
    /// otherwise.
    pub fn action(self) -> &'static str {
        match self {
            Reason::Approved => "Approve",
            Reason::Paused => "Pause",
            Reason::Resumed => "Resume",
            Reason::RollbackRequested => "Rollback",
            Reason::Aborted => "Abort",
            Reason::FreezeBypassGranted => "FreezeBypass",
            _ => "ClusterPromotion",
        }
    }

    /// The note of an Event of this reason (bounded: an Event's note is at most 1 KiB, and a
    /// message quoting Sveltos can be any size).
    pub fn note(self, message: String) -> EventNote {
        EventNote {
            warning: self.warning(),
            reason: self.as_str().into(),
            message: crate::bounded_text::bounded(&message, crate::bounded_text::NOTE_MAX),
            stage: None,
            recorded: false,
            owed: false,
        }
    }
}

/// The description of the stage of a ClusterPromotion that cannot be processed (a problem found
/// before planning, or a decode error); its failureMessage says why.
pub use super::phase::BLOCKED;

#[cfg(test)]
mod tests {
    use super::*;

    /// `Reason::ALL` (which the book's reference lists) holds every variant: each one `as_str`
    /// names, read from this file, is in it once.
    #[test]
    fn every_reason_is_in_all() {
        let source = include_str!("decision.rs");
        let source = source
            .split("pub fn as_str(self)")
            .nth(1)
            .and_then(|s| s.split("pub fn ").next())
            .unwrap();
        let arms = regex::Regex::new(r#"Reason::(\w+) => "(\w+)","#).unwrap();
        let named: Vec<&str> = arms
            .captures_iter(source)
            .map(|c| c.get(2).unwrap().as_str())
            .collect();
        let all: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(named, all);
    }

    #[test]
    fn an_event_of_a_person_names_the_command_and_a_pass_s_names_upstream_s_kind() {
        let by_person: Vec<(&str, &str)> = Reason::ALL
            .iter()
            .filter(|r| r.action() != "ClusterPromotion")
            .map(|r| (r.as_str(), r.action()))
            .collect();
        assert_eq!(
            by_person,
            [
                ("Approved", "Approve"),
                ("Paused", "Pause"),
                ("Resumed", "Resume"),
                ("RollbackRequested", "Rollback"),
                ("Aborted", "Abort"),
                ("FreezeBypassGranted", "FreezeBypass"),
            ]
        );
        assert_eq!(Reason::StageProvisioned.action(), "ClusterPromotion");
    }

    #[test]
    fn warnings_are_the_reasons_that_need_somebody_s_attention() {
        let warnings: Vec<&str> = Reason::ALL
            .iter()
            .filter(|r| r.warning())
            .map(|r| r.as_str())
            .collect();
        assert_eq!(
            warnings,
            [
                "ChecksFailing",
                "DeploymentFailed",
                "Blocked",
                "FieldsPruned",
                "ProgressDeadlineExceeded",
                "RollbackStarted",
                "RolledBack",
                "RollbackDeadlineExceeded",
                "InvalidFreeze",
                "UnreadableFreeze",
                "FailureBudgetSpent",
            ]
        );
        assert!(Reason::Blocked.note("m".into()).warning);
        assert!(!Reason::StageProvisioned.note("m".into()).warning);
    }

    #[test]
    fn a_decision_writes_when_it_has_an_action_a_status_or_an_action_after_the_status() {
        let quiet = Decision::new("p");
        assert!(!quiet.writes());
        let mut d = Decision::new("p");
        d.actions.push(Action::AddFinalizer);
        assert!(d.writes(), "an action");
        let mut d = Decision::new("p");
        d.status = Some(ClusterPromotionStatus::default());
        assert!(d.writes(), "a status");
        let mut d = Decision::new("p");
        d.after_status.push(Action::Delete { name: "x".into() });
        assert!(d.writes(), "an action after the status");
    }
}
