//! Where a rollout is, in one vocabulary: the [`Phase`] a decision reaches is the phase `promoter
//! status` shows once that decision is recorded, `step -o json` reports, the metrics label and
//! `--exit-code` turns into a number. What a pass records in a stage's
//! `currentStatusDescription` maps back to the same phase ([`DESCRIPTIONS`]), so the stored texts
//! and `status` never tell two stories.
//!
//! Some stored texts are upstream's, kept exactly so that dashboards and scripts written for
//! Sveltos keep working, even where their words are narrower than what they stand for (upstream
//! says `Delayed: Waiting for Time Window` for a soak); `status` then says what it means. The other
//! texts are promoter's own. The book's reference (docs/src/reference/phases.md, generated) lists both.

use serde::Serialize;

/// Where a rollout is. Every phase but `Pending` is one a decision reaches; `Pending` is what
/// `status` shows before any pass processed the current revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Phase {
    /// No pass has processed this revision yet (never run, or the spec changed since).
    Pending,
    /// The current stage's profile is being deployed.
    Progressing,
    /// Deployed; waiting for the stage's delay to pass (`until`).
    Soaking,
    /// Waiting for the promotion window to open (`until`).
    WindowClosed,
    /// Health checks or the preHealthCheckDeployment are running (or not evaluated yet).
    RunningChecks,
    /// Health checks did not pass; the next passes check again.
    ChecksFailing,
    /// A manual stage waits for `promoter approve`.
    AwaitingApproval,
    /// The last stage was promoted past.
    Complete,
    /// A deployment failed on a cluster of the current stage and its progress deadline is ahead:
    /// Sveltos retries until then; then the failure policy acts (halt or rollback).
    Failing,
    /// The run is halted: a deployment failed and no progress deadline will act on it, or the
    /// stage missed its deadline under `failure-policy: halt`. A person acts.
    Failed,
    /// The ClusterPromotion cannot be processed as written (invalid, overlapping stages, …).
    Blocked,
    /// `promoter pause`: left alone until resumed.
    Paused,
    /// Being deleted.
    Deleting,
    /// A PromotionFreeze holds it: the current stage finishes, the next one does not start.
    Frozen,
    /// Stages are going back to the last known good revision (or `--to-revision`).
    RollingBack,
    /// Rolled back: holds until its spec changes or `promoter resume`.
    RolledBack,
    /// `promoter abort`: the run holds where it is until its spec changes or `promoter resume`.
    Aborted,
    /// A rollback missed its own deadline (`promoter.dev/rollback-deadline`): it holds for a
    /// person; `promoter resume` gives it a new deadline.
    RollbackFailed,
}

impl Phase {
    /// Every phase, in the order the one-hot gauges and the tables list them.
    pub const ALL: [Phase; 18] = [
        Phase::Pending,
        Phase::Progressing,
        Phase::Soaking,
        Phase::WindowClosed,
        Phase::RunningChecks,
        Phase::ChecksFailing,
        Phase::AwaitingApproval,
        Phase::Complete,
        Phase::Failing,
        Phase::Failed,
        Phase::Blocked,
        Phase::Paused,
        Phase::Deleting,
        Phase::Frozen,
        Phase::RollingBack,
        Phase::RolledBack,
        Phase::Aborted,
        Phase::RollbackFailed,
    ];

    /// The name everywhere: JSON, YAML, tables, metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Progressing => "Progressing",
            Phase::Soaking => "Soaking",
            Phase::WindowClosed => "WindowClosed",
            Phase::RunningChecks => "RunningChecks",
            Phase::ChecksFailing => "ChecksFailing",
            Phase::AwaitingApproval => "AwaitingApproval",
            Phase::Complete => "Complete",
            Phase::Failing => "Failing",
            Phase::Failed => "Failed",
            Phase::Blocked => "Blocked",
            Phase::Paused => "Paused",
            Phase::Deleting => "Deleting",
            Phase::Frozen => "Frozen",
            Phase::RollingBack => "RollingBack",
            Phase::RolledBack => "RolledBack",
            Phase::Aborted => "Aborted",
            Phase::RollbackFailed => "RollbackFailed",
        }
    }

    /// What the phase means, for a person (the book's reference of phases says it).
    pub fn about(self) -> &'static str {
        match self {
            Phase::Pending => {
                "no pass has processed this revision yet (never run, or the spec changed since)"
            }
            Phase::Progressing => "the current stage's profile is being deployed",
            Phase::Soaking => "deployed; waiting for the stage's delay to pass (`until`)",
            Phase::WindowClosed => "waiting for the promotion window to open (`until`)",
            Phase::RunningChecks => {
                "health checks or the preHealthCheckDeployment are running (or not evaluated yet)"
            }
            Phase::ChecksFailing => "health checks did not pass; the next passes check again",
            Phase::AwaitingApproval => "a manual stage waits for `promoter approve`",
            Phase::Complete => "the last stage was promoted past",
            Phase::Failing => {
                "a deployment failed on a cluster of the current stage and its progress deadline is ahead: Sveltos retries until then (`until`); then the failure policy acts"
            }
            Phase::Failed => {
                "the run is halted: a deployment failed and no progress deadline will act on it, or the stage missed its deadline under `failure-policy: halt`; a person acts"
            }
            Phase::Blocked => {
                "the ClusterPromotion cannot be processed as written (invalid, overlapping stages, a bad setting)"
            }
            Phase::Paused => "`promoter pause`: every pass leaves it alone until resumed",
            Phase::Deleting => "being deleted: a pass removes its profiles, then the finalizer",
            Phase::Frozen => {
                "a PromotionFreeze holds it: the current stage finishes, the next one does not start"
            }
            Phase::RollingBack => {
                "stages are going back to the last known good revision (or `--to-revision`)"
            }
            Phase::RolledBack => "rolled back: holds until its spec changes or `promoter resume`",
            Phase::Aborted => {
                "`promoter abort`: the run holds where it is until its spec changes or `promoter resume`"
            }
            Phase::RollbackFailed => {
                "a rollback missed its own deadline (`promoter.dev/rollback-deadline`): it holds for a person; `promoter resume` gives it a new deadline"
            }
        }
    }

    /// `status --exit-code`: what a CI job gates on. 0 complete; 3 still moving (promoter or
    /// Sveltos will act without a person: deploying, waiting on time, checks, a freeze, a failing
    /// deployment before its deadline, a rollback under way, a pause); 4 awaiting approval; 5 held
    /// for a person (failed, blocked, rolled back, aborted, a rollback that missed its deadline).
    pub fn exit_code(self) -> u8 {
        use Phase::*;
        match self {
            Complete => 0,
            Pending | Progressing | Soaking | WindowClosed | RunningChecks | ChecksFailing
            | Failing | Paused | Deleting | Frozen | RollingBack => 3,
            AwaitingApproval => 4,
            Failed | Blocked | RolledBack | Aborted | RollbackFailed => 5,
        }
    }

    /// Whether `status --watch` stops here: the rollout is done, or waits for a person.
    pub fn settled(self) -> bool {
        self.exit_code() != 3
    }

    /// In error for `promoter step`'s exit code (`--fail-on promotions`): failing, failed,
    /// blocked, rolling back, rolled back or a rollback that failed.
    pub fn in_error(self) -> bool {
        matches!(
            self,
            Phase::Failing
                | Phase::Failed
                | Phase::Blocked
                | Phase::RollingBack
                | Phase::RolledBack
                | Phase::RollbackFailed
        )
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who wrote a stored text first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Sveltos' own controller writes it in the same situation: kept exactly.
    Upstream,
    /// promoter's.
    Promoter,
}

/// A stored `currentStatusDescription` (without its timestamp): how it begins, the phase it
/// stands for on the current stage, and whose text it is.
pub struct Description {
    pub begins: &'static str,
    pub phase: Phase,
    pub origin: Origin,
}

const fn text(begins: &'static str, phase: Phase, origin: Origin) -> Description {
    Description {
        begins,
        phase,
        origin,
    }
}

// The texts of promoter's own holds and failures, here so that the modules that write them and
// this one (which reads them back) share them without a circle of imports.
/// The description of the stage of a ClusterPromotion that cannot be processed (a problem found
/// before planning, or a decode error); its failureMessage says why.
pub const BLOCKED: &str = "Blocked: the ClusterPromotion cannot be processed (see failureMessage)";
/// The description of a stage that missed its progress deadline (its failureMessage says why).
pub const FAILED_DEADLINE: &str = "Failed: Progress Deadline Exceeded";
/// How a rolling-back stage's description begins.
pub const ROLLING_BACK: &str = "Rolling back to revision";
/// A lower stage of a `reverse` rollback, before its turn.
pub const WAITING: &str = "Waiting to roll back to revision";
/// A stage whose rollback is done.
pub const ROLLED_BACK: &str = "Rolled back to revision";
/// The stage a rollback waited for when it missed its own deadline (its failureMessage says why).
pub const ROLLBACK_FAILED: &str = "Rollback failed: its deadline passed (see failureMessage)";
/// How a stage's description begins while a freeze holds the promotion.
pub const FROZEN: &str = "Frozen:";

/// A failing deployment before its progress deadline:
/// `Deployment Failing: retrying until <time>, then <halt|rollback>`.
pub const DEPLOYMENT_FAILING: &str = "Deployment Failing: retrying until";
/// A failing deployment no progress deadline will act on.
pub const DEPLOYMENT_FAILED: &str =
    "Deployment Failed: no progress deadline; Sveltos retries until a person acts";
/// A stage being deployed (upstream writes it when a run starts; promoter also when a provisioned
/// stage redeploys or a failure clears).
pub const PROVISIONING: &str = "Clusters are being provisioned";

/// Every description a pass writes on the current stage, longest prefix first where two share one.
/// `Successfully provisioned` on the current stage is `Complete` only on the last stage (see
/// [`of_description`]).
pub const DESCRIPTIONS: &[Description] = &[
    text(PROVISIONING, Phase::Progressing, Origin::Upstream),
    text(
        "All matching clusters are successfully deployed.",
        Phase::Progressing,
        Origin::Upstream,
    ),
    text(
        "No matching clusters found for ClusterProfile",
        Phase::Progressing,
        Origin::Upstream,
    ),
    text(
        "Delayed: Waiting for Time Window:",
        Phase::Soaking,
        Origin::Upstream,
    ),
    text(
        "Running Post-Promotion Health Checks",
        Phase::RunningChecks,
        Origin::Upstream,
    ),
    text(
        "Awaiting Health Checks to Pass",
        Phase::ChecksFailing,
        Origin::Upstream,
    ),
    text(
        "Window Closed: Waiting for Next Schedule",
        Phase::WindowClosed,
        Origin::Upstream,
    ),
    text(
        "Paused: Awaiting Manual Approval",
        Phase::AwaitingApproval,
        Origin::Upstream,
    ),
    text(
        "Successfully provisioned",
        Phase::Complete,
        Origin::Upstream,
    ),
    text(DEPLOYMENT_FAILING, Phase::Failing, Origin::Promoter),
    text("Deployment Failed:", Phase::Failed, Origin::Promoter),
    text(FAILED_DEADLINE, Phase::Failed, Origin::Promoter),
    text(BLOCKED, Phase::Blocked, Origin::Promoter),
    text(
        "Paused: promotion paused by",
        Phase::Paused,
        Origin::Promoter,
    ),
    text(FROZEN, Phase::Frozen, Origin::Promoter),
    text("Held: revision", Phase::RolledBack, Origin::Promoter),
    text("Aborted by", Phase::Aborted, Origin::Promoter),
    text(ROLLING_BACK, Phase::RollingBack, Origin::Promoter),
    text(WAITING, Phase::RollingBack, Origin::Promoter),
    text(ROLLED_BACK, Phase::RolledBack, Origin::Promoter),
    text(ROLLBACK_FAILED, Phase::RollbackFailed, Origin::Promoter),
];

/// The phase a description (without its timestamp) stands for on the current stage; `last`: the
/// current stage is the last one. Text promoter does not know (written by hand, by another
/// controller) reads as `Progressing`.
pub fn of_description(description: &str, last: bool) -> Phase {
    match DESCRIPTIONS
        .iter()
        .find(|d| description.starts_with(d.begins))
    {
        Some(d) if d.phase == Phase::Complete && !last => Phase::Progressing,
        Some(d) => d.phase,
        None => Phase::Progressing,
    }
}

/// The phase a promotion's stored status and records show, without the live objects (a promotion
/// a pass could not decide is reported in it).
pub fn recorded(p: &crate::api::ClusterPromotion) -> Phase {
    if p.metadata.deletion_timestamp.is_some() {
        return Phase::Deleting;
    }
    if crate::annotations::paused(p).is_some() {
        return Phase::Paused;
    }
    let Some(status) = p.status.as_ref() else {
        return Phase::Pending;
    };
    let Some(stage) = status
        .current_stage_name
        .as_deref()
        .filter(|s| !s.is_empty())
    else {
        return Phase::Pending;
    };
    let last = p.spec.stages.last().is_some_and(|s| s.name == stage);
    let description = status
        .stages
        .iter()
        .flatten()
        .find(|s| s.name == stage)
        .and_then(|s| s.current_status_description.as_deref())
        .map(super::stage_status::description_text)
        .unwrap_or_default();
    of_description(description, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_exit_codes() {
        for p in Phase::ALL {
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
            assert_eq!(p.settled(), [0, 4, 5].contains(&p.exit_code()), "{p}");
        }
        let codes: Vec<(Phase, u8)> = Phase::ALL.iter().map(|p| (*p, p.exit_code())).collect();
        assert_eq!(
            codes,
            vec![
                (Phase::Pending, 3),
                (Phase::Progressing, 3),
                (Phase::Soaking, 3),
                (Phase::WindowClosed, 3),
                (Phase::RunningChecks, 3),
                (Phase::ChecksFailing, 3),
                (Phase::AwaitingApproval, 4),
                (Phase::Complete, 0),
                (Phase::Failing, 3),
                (Phase::Failed, 5),
                (Phase::Blocked, 5),
                (Phase::Paused, 3),
                (Phase::Deleting, 3),
                (Phase::Frozen, 3),
                (Phase::RollingBack, 3),
                (Phase::RolledBack, 5),
                (Phase::Aborted, 5),
                (Phase::RollbackFailed, 5),
            ]
        );
    }

    /// `step --fail-on promotions` fails on exactly these; `Display` is the name everywhere.
    #[test]
    fn phases_in_error_and_their_display() {
        let in_error: Vec<Phase> = Phase::ALL.into_iter().filter(|p| p.in_error()).collect();
        assert_eq!(
            in_error,
            [
                Phase::Failing,
                Phase::Failed,
                Phase::Blocked,
                Phase::RollingBack,
                Phase::RolledBack,
                Phase::RollbackFailed,
            ]
        );
        for p in Phase::ALL {
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!(
            format!("phase {}", Phase::RollbackFailed),
            "phase RollbackFailed"
        );
    }

    /// `status` of a promotion a pass could not decide: the current stage's stored description.
    #[test]
    fn the_recorded_phase_is_the_current_stages() {
        let promotion = |current: &str| -> crate::api::ClusterPromotion {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                "metadata": {"name": "kyverno"},
                "spec": {"profileSpec": {}, "stages": [
                    {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}]},
                "status": {"currentStageName": current, "stages": [
                    {"name": "dev", "currentStatusDescription": "Successfully provisioned (2026-02-16T06:00:00Z)"},
                    {"name": "prod", "currentStatusDescription": "Paused: Awaiting Manual Approval (2026-02-16T06:00:00Z)"}]}
            }))
            .unwrap()
        };
        assert_eq!(recorded(&promotion("")), Phase::Pending);
        assert_eq!(recorded(&promotion("prod")), Phase::AwaitingApproval);
        // Provisioned on a stage that is not the last: the rollout goes on.
        assert_eq!(recorded(&promotion("dev")), Phase::Progressing);
        let mut done = promotion("prod");
        done.status.as_mut().unwrap().stages.as_mut().unwrap()[1].current_status_description =
            Some("Successfully provisioned (2026-02-16T06:00:00Z)".into());
        assert_eq!(recorded(&done), Phase::Complete);
    }

    #[test]
    fn descriptions_map_to_their_phase() {
        let cases = [
            (
                "Delayed: Waiting for Time Window: 2026-02-16T07:00:00Z",
                Phase::Soaking,
            ),
            (
                "Window Closed: Waiting for Next Schedule (2026-02-16T07:00:00Z).",
                Phase::WindowClosed,
            ),
            (
                "Deployment Failing: retrying until 2026-02-16T07:00:00Z, then halt",
                Phase::Failing,
            ),
            (DEPLOYMENT_FAILED, Phase::Failed),
            ("Failed: Progress Deadline Exceeded", Phase::Failed),
            (
                "Clusters are being provisioned (freeze f bypassed by a until b)",
                Phase::Progressing,
            ),
            (
                "Rollback failed: its deadline passed (see failureMessage)",
                Phase::RollbackFailed,
            ),
            ("something a person wrote", Phase::Progressing),
            ("Successfully provisioned", Phase::Complete),
        ];
        for (text, phase) in cases {
            assert_eq!(of_description(text, true), phase, "{text}");
        }
        assert_eq!(
            of_description("Successfully provisioned", false),
            Phase::Progressing
        );
        // No text is a prefix of another that maps elsewhere, but an earlier one wins.
        for (i, a) in DESCRIPTIONS.iter().enumerate() {
            for b in &DESCRIPTIONS[i + 1..] {
                assert!(
                    !b.begins.starts_with(a.begins) || a.phase == b.phase,
                    "{:?} shadows {:?}",
                    a.begins,
                    b.begins
                );
            }
        }
    }
}
