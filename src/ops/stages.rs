//! Where every stage of a promotion stands at once, for views that draw the whole pipeline (the
//! dashboard's rows and columns): the current stage in the phase `status` observes, the stages
//! before it passed (or, in a rollback, rolling back or rolled back, as the pass recorded on each),
//! the ones after it not reached. Nothing here decides anything: it arranges what `status` and the
//! recorded stage statuses already say.

use super::inspect::StatusRow;
use crate::api::ClusterPromotion;
use crate::pass::phase::Phase;
use crate::pass::rollback::{ROLLED_BACK, ROLLING_BACK, WAITING};
use crate::pass::stage_status::description_text;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// One stage's place in the rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StageProgress {
    /// The current run has passed it.
    Passed,
    /// The stage the rollout is at, in its observed phase.
    Current(Phase),
    /// A rollback is restoring it (or it waits for its turn).
    RollingBack,
    /// A rollback restored it.
    RolledBack,
    /// The current run has not reached it.
    NotReached,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageState {
    pub name: String,
    pub progress: StageProgress,
    /// What the last pass recorded for this stage (its description, without the time stamp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the current stage's wait ends (the current stage only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// Every stage of `p`, in order, as `row` (its `status` line) places the rollout.
pub fn stage_states(p: &ClusterPromotion, row: &StatusRow) -> Vec<StageState> {
    let recorded = |name: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.stages.as_ref())
            .and_then(|stages| stages.iter().find(|s| s.name == name))
            .and_then(|s| s.current_status_description.as_deref())
            .map(|d| description_text(d).to_string())
    };
    p.spec
        .stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let description = recorded(&stage.name);
            let number = i + 1;
            let progress = if row.stage_number == 0 || number > row.stage_number {
                StageProgress::NotReached
            } else if number == row.stage_number {
                StageProgress::Current(row.phase)
            } else {
                match description.as_deref() {
                    Some(d) if d.starts_with(ROLLED_BACK) => StageProgress::RolledBack,
                    Some(d) if d.starts_with(ROLLING_BACK) || d.starts_with(WAITING) => {
                        StageProgress::RollingBack
                    }
                    _ => StageProgress::Passed,
                }
            };
            StageState {
                name: stage.name.clone(),
                progress,
                until: (number == row.stage_number).then_some(row.until).flatten(),
                description,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterPromotionStatus, StageStatus};

    fn promotion(current: Option<&str>, recorded: &[(&str, &str)]) -> ClusterPromotion {
        let mut p: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"profileSpec": {}, "stages": [
                {"name": "dev", "clusterSelector": {}},
                {"name": "staging", "clusterSelector": {}},
                {"name": "prod", "clusterSelector": {}}]}}))
        .unwrap();
        p.status = Some(ClusterPromotionStatus {
            current_stage_name: current.map(String::from),
            stages: Some(
                recorded
                    .iter()
                    .map(|(name, d)| StageStatus {
                        name: name.to_string(),
                        current_status_description: Some(format!("{d} (2026-02-16T06:36:24Z)")),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        p
    }

    fn row(p: &ClusterPromotion, number: usize, phase: Phase) -> StatusRow {
        let mut r = crate::ops::inspect::status_row(
            p,
            &Default::default(),
            chrono::Utc::now(),
            chrono_tz::UTC,
        );
        r.stage_number = number;
        r.phase = phase;
        r.until = Some(DateTime::UNIX_EPOCH);
        r
    }

    fn progress(states: &[StageState]) -> Vec<StageProgress> {
        states.iter().map(|s| s.progress).collect()
    }

    #[test]
    fn before_the_current_stage_passed_after_it_not_reached() {
        let p = promotion(Some("staging"), &[("dev", "Successfully provisioned")]);
        let states = stage_states(&p, &row(&p, 2, Phase::Soaking));
        assert_eq!(
            progress(&states),
            [
                StageProgress::Passed,
                StageProgress::Current(Phase::Soaking),
                StageProgress::NotReached
            ]
        );
        assert_eq!(
            states[0].description.as_deref(),
            Some("Successfully provisioned")
        );
        // Only the current stage carries the wait's end.
        assert_eq!(states[1].until, Some(DateTime::UNIX_EPOCH));
        assert_eq!(states[0].until, None);
    }

    #[test]
    fn before_any_pass_nothing_is_reached() {
        let p = promotion(None, &[]);
        let states = stage_states(&p, &row(&p, 0, Phase::Pending));
        assert_eq!(progress(&states), [StageProgress::NotReached; 3]);
    }

    #[test]
    fn a_rollback_shows_on_each_stage_as_the_pass_recorded_it() {
        let p = promotion(
            Some("prod"),
            &[
                ("dev", "Waiting to roll back to revision 1a2b3c4d5e"),
                ("staging", "Rolled back to revision 1a2b3c4d5e"),
                ("prod", "Rolled back to revision 1a2b3c4d5e"),
            ],
        );
        let states = stage_states(&p, &row(&p, 3, Phase::RollingBack));
        assert_eq!(
            progress(&states),
            [
                StageProgress::RollingBack,
                StageProgress::RolledBack,
                StageProgress::Current(Phase::RollingBack)
            ]
        );
        let p = promotion(
            Some("staging"),
            &[("dev", "Rolling back to revision 1a2b3c4d5e")],
        );
        let states = stage_states(&p, &row(&p, 2, Phase::RollingBack));
        assert_eq!(states[0].progress, StageProgress::RollingBack);
    }
}
