//! A completion recorded whose status was never written. The pass that passes the last stage
//! records the completion (`promoter.dev/completed`, with the history's `completedAt`) in its
//! guarded record patch, then writes the status that shows it. When that status is not written
//! (the answer to the record patch was lost and the pass stopped, the status write was reset
//! before the server read it, the process was killed in between), the next pass trusts the
//! record and plans nothing more for the run: it writes here what the completing pass would have
//! written, at the time that pass recorded, with the Events it owed (its notifications went out
//! with the record).

use super::decision::{Decision, Reason};
use super::phase::{Phase, of_description};
use super::stage_status::{description_text, entry, set_description};
use crate::annotations::{self, History, Run};
use crate::api::{ClusterPromotion, ClusterPromotionStatus, StageStatus, Timestamp};
use chrono::{DateTime, Utc};

/// Upstream's description of a stage passed (on the last stage: the rollout is complete).
pub const PASSED: &str = "Successfully provisioned";

/// A stage passed at `at`: provisioned then, checked then, nothing failing.
pub fn passed(e: &mut StageStatus, at: DateTime<Utc>) {
    e.last_successful_applied_time = Some(Timestamp::new(at));
    e.last_status_check_time = Some(Timestamp::new(at));
    e.failure_message = None;
    set_description(e, PASSED, at);
}

/// The Event of a stage found deployed on every matching cluster (upstream's text).
pub fn provisioned_event(stage: &str) -> String {
    format!("Stage {stage} provisioned")
}

/// The Event of a rollout whose last stage was passed.
pub fn complete_event(promotion: &str, stage: &str) -> String {
    format!("ClusterPromotion {promotion} complete: stage {stage} provisioned")
}

/// When the observed run of `p` is recorded complete but its status never showed it: the time the
/// completing pass recorded (the history's `completedAt` of the run; `now` without one). The
/// status never showed it when the last stage's entry is missing, has no
/// lastSuccessfulAppliedTime (the completing pass sets it, or a pass before it found the stage
/// provisioned), or still says the stage is on its way: once shown, a completed run's
/// description says it passed, or what held it since (a pause, a block), never a stage on its
/// way. Judged from the status's content, never by comparing its times with the record's.
pub fn unshown(p: &ClusterPromotion, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let status = p.status.as_ref()?;
    let run = Run::of(status)?;
    if annotations::completed(p).as_ref() != Some(&run) {
        return None;
    }
    let last = p.spec.stages.last()?;
    if status.current_stage_name.as_deref() != Some(last.name.as_str()) {
        return None;
    }
    let observed = status.stages.iter().flatten().find(|e| e.name == last.name);
    let text = observed
        .and_then(|e| e.current_status_description.as_deref())
        .map(description_text)
        .unwrap_or_default();
    let on_its_way = matches!(
        of_description(text, true),
        Phase::Progressing
            | Phase::Soaking
            | Phase::WindowClosed
            | Phase::RunningChecks
            | Phase::ChecksFailing
            | Phase::AwaitingApproval
            | Phase::Failing
            | Phase::Failed
    );
    let provisioned = observed.is_some_and(|e| e.last_successful_applied_time.is_some());
    if provisioned && !on_its_way {
        return None;
    }
    let recorded = History::of(p).completed_at(&run);
    Some(recorded.map_or(now, |t| t.as_datetime()))
}

/// Shows in `status` the completion of `p`'s run that its status never showed ([`unshown`]): the
/// last stage passed at the recorded time, and the Events the completing pass owed (the stage
/// provisioned, unless an earlier pass said so, and the rollout complete).
pub fn show_unshown(
    p: &ClusterPromotion,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
    now: DateTime<Utc>,
) {
    let (Some(at), Some(last)) = (unshown(p, now), p.spec.stages.last()) else {
        return;
    };
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let e = entry(status, &last.name);
    if e.last_successful_applied_time.is_none() {
        d.owed_event(
            Reason::StageProvisioned,
            Some(&last.name),
            provisioned_event(&last.name),
        );
    }
    passed(e, at);
    d.owed_event(
        Reason::RolloutComplete,
        Some(&last.name),
        complete_event(name, &last.name),
    );
}
