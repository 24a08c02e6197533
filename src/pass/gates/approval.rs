//! Manual approval (`trigger.manual`), and the records that make an approval approve exactly one run
//! (invariants 2 and 3 of `decide`): an approval is consumed into `promoter.dev/grant.<stage>` for
//! the current run when it lets the stage pass (with `automaticReset`), given back when that run is
//! superseded before its promotion was recorded, withdrawn when `promoter approve` gave it an
//! earlier revision, and its `promoter approve` record is dropped when it is revoked by hand.

use super::{GatedStage, Wait};
use crate::annotations::{self, Grant, Run};
use crate::api::{ClusterPromotion, ClusterPromotionStatus};
use crate::pass::decision::{Decision, Phase, Reason, RecordOp};
use crate::pass::stage_status::{description_text, entry, set_description};

/// Upstream's description of a stage that awaits its approval.
pub const AWAITING: &str = "Paused: Awaiting Manual Approval";

/// Whether this gate would hold the stage for a person, were it reached now: its manual trigger is
/// not approved (or approved for an earlier revision), and no approval was consumed for the run.
/// What a gate before it says when it holds the stage first (a freeze).
pub fn pending(s: &GatedStage, status: &ClusterPromotionStatus) -> bool {
    pending_for(
        s.p,
        s.stage,
        s.run,
        status.profile_spec_hash.as_deref(),
        s.adopted_from,
    )
}

/// [`pending`] for `stage` of `p` in `run`, whose status records `revision` (`status` asks it of
/// the recorded run).
pub fn pending_for(
    p: &ClusterPromotion,
    stage: &crate::api::Stage,
    run: Option<&Run>,
    revision: Option<&str>,
    adopted_from: Option<&str>,
) -> bool {
    let Some(manual) = stage.trigger.as_ref().and_then(|t| t.manual.as_ref()) else {
        return false;
    };
    if annotations::grant(p, &stage.name).is_some_and(|g| run == Some(&g.run)) {
        return false;
    }
    let stale = annotations::approval(p, &stage.name).is_some_and(|r| {
        r.revision.is_some()
            && r.revision.as_deref() != revision
            && r.revision.as_deref() != adopted_from
    });
    !manual.is_approved() || stale
}

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) -> Option<Wait> {
    let manual = s.trigger()?.manual.as_ref()?;
    let now = s.ctx.now;
    let stage = &s.stage.name;
    if let Some(grant) = annotations::grant(s.p, stage).filter(|g| s.run == Some(&g.run)) {
        // Consumed for this run by an earlier pass that died before recording the promotion.
        d.let_through(stage, grant.approval);
        return None;
    }
    // An approval recorded by `promoter approve` is for one revision; a spec change voids it.
    let revision = status.profile_spec_hash.clone();
    let stale = annotations::approval(s.p, stage).filter(|r| {
        manual.is_approved()
            && r.revision.is_some()
            && r.revision != revision
            && r.revision.as_deref() != s.adopted_from
    });
    if let Some(r) = stale {
        // Withdrawn with its record, in the guarded patch: the stage then plainly awaits
        // approval, so that a hand approval (`approved: true`) works again.
        d.record(RecordOp::WithdrawApproval {
            index: s.index,
            stage: stage.clone(),
        });
        let e = entry(status, stage);
        set_description(e, AWAITING, now);
        let why = format!(
            "the approval by {} at {} was for revision {}, an earlier revision of the profileSpec, and was withdrawn; approve again",
            r.by,
            r.at,
            r.revision
                .as_deref()
                .map(crate::api::revision_id)
                .unwrap_or_default()
        );
        let summary = format!("stage {stage}: awaiting manual approval ({why})");
        return Some(Wait::new(Phase::AwaitingApproval, summary, Some(why)).complete());
    }
    if !manual.is_approved() {
        let e = entry(status, stage);
        let was = e
            .current_status_description
            .as_deref()
            .map(description_text)
            .map(String::from);
        set_description(e, AWAITING, now);
        // Said already by upstream's text, or by a freeze that held the stage first.
        if !was
            .as_deref()
            .is_some_and(|w| super::freeze::said_awaits_approval(w, stage))
        {
            d.event(
                Reason::AwaitingApproval,
                Some(stage),
                format!("Stage {stage} awaits manual approval"),
            );
        }
        let summary = format!("stage {stage}: awaiting manual approval");
        return Some(Wait::new(Phase::AwaitingApproval, summary, None).complete());
    }
    d.let_through(stage, annotations::approval(s.p, stage));
    if manual.automatic_reset()
        && let Some(run) = s.run
    {
        // Consumed now, in the guarded patch before the status write (invariant 2).
        d.record(RecordOp::ConsumeApproval {
            index: s.index,
            stage: stage.clone(),
            grant: Grant {
                run: run.clone(),
                approval: annotations::approval(s.p, stage),
            },
        });
    }
    None
}

/// A restart supersedes the observed run: an approval consumed for it whose promotion was never
/// recorded (the stage is still the current one) is given back, so that it is not lost, but
/// only when the new run is of the same revision (a stages change): an approval approves one
/// revision, and the new one must be approved on its own (invariant 2).
pub fn restore_unused_grants(p: &ClusterPromotion, revision: &str, d: &mut Decision) {
    let Some(observed) = p.status.as_ref() else {
        return;
    };
    let Some(old_run) = Run::of(observed) else {
        return;
    };
    if annotations::is_complete(p) {
        return;
    }
    let current = observed.current_stage_name.clone().unwrap_or_default();
    let Some(grant) = annotations::grant(p, &current) else {
        return;
    };
    let Some(index) = p.spec.stages.iter().position(|s| s.name == current) else {
        return;
    };
    let manual = p.spec.stages[index]
        .trigger
        .as_ref()
        .and_then(|t| t.manual.as_ref());
    if grant.run == old_run
        && grant.run.revision == revision
        && manual.is_some_and(|m| !m.is_approved())
    {
        d.record(RecordOp::RestoreApproval {
            index,
            stage: current,
            approval: grant.approval,
        });
    }
}

/// `promoter approve` records whose approval is gone (revoked by hand) are dropped, so that
/// they never judge a later hand approval (problem 3 of issue 14).
pub fn forget_orphan_records(p: &ClusterPromotion, d: &mut Decision) {
    for s in &p.spec.stages {
        let approved = s
            .trigger
            .as_ref()
            .and_then(|t| t.manual.as_ref())
            .is_some_and(|m| m.is_approved());
        if !approved && annotations::approval(p, &s.name).is_some() {
            d.record(RecordOp::ForgetApprovalRecord {
                stage: s.name.clone(),
            });
        }
    }
}

/// A status taken over from another writer gets promoter's hash for the same revision: the
/// `promoter approve` records of that revision are rewritten for it.
pub fn revise_records(p: &ClusterPromotion, old: Option<&str>, new: &str, d: &mut Decision) {
    for stage in &p.spec.stages {
        if let Some(mut r) = annotations::approval(p, &stage.name)
            && r.revision.is_some()
            && r.revision.as_deref() == old
        {
            r.revision = Some(new.to_string());
            d.record(RecordOp::ReviseApprovalRecord {
                stage: stage.name.clone(),
                record: r,
            });
        }
    }
}
