//! The postDelayHealthChecks: every cluster of the stage passes them. The pass evaluates them only
//! for a stage that reaches this gate (`needs_health`), then decides again with the verdict.

use super::{GatedStage, Wait};
use crate::api::ClusterPromotionStatus;
use crate::pass::decision::{Decision, HealthVerdict, Phase, Reason};
use crate::pass::events::checks_were_failing;
use crate::pass::stage_status::{entry, set_description};

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) -> Option<Wait> {
    if s.gates()?.post_delay_health_checks.is_empty() {
        return None;
    }
    let now = s.ctx.now;
    let stage = &s.stage.name;
    let e = entry(status, stage);
    match s.health.get(stage) {
        Some(HealthVerdict::Passed) => {
            if checks_were_failing(s.p, stage) {
                let text = format!("Stage {stage}: health checks pass again");
                d.event(Reason::ChecksPassing, Some(stage), text);
            }
            None
        }
        Some(HealthVerdict::Failing(message)) => {
            if !checks_were_failing(s.p, stage) {
                let text = format!("Stage {stage}: health checks failing: {message}");
                d.event(Reason::ChecksFailing, Some(stage), text);
            }
            set_description(e, "Awaiting Health Checks to Pass", now);
            let summary = format!("stage {stage}: health checks failing: {message}");
            Some(Wait::new(Phase::ChecksFailing, summary, Some(message.clone())).incomplete())
        }
        Some(HealthVerdict::NotEvaluated(reason)) => {
            set_description(e, "Running Post-Promotion Health Checks", now);
            let summary = format!("stage {stage}: health checks not evaluated: {reason}");
            Some(Wait::new(
                Phase::RunningChecks,
                summary,
                Some(reason.clone()),
            ))
        }
        None => {
            // Only a first look: the pass evaluates the checks and decides again.
            d.needs_health = Some(stage.clone());
            set_description(e, "Running Post-Promotion Health Checks", now);
            let keep = e.failure_message.clone();
            Some(Wait::new(
                Phase::RunningChecks,
                format!("stage {stage}: health checks pending"),
                keep,
            ))
        }
    }
}
