//! The progress deadline of a stage (`promoter.dev/progress-deadline`): how long a stage may take
//! to be *complete* (deployed on every matching cluster, its preHealthCheckDeployment deployed, its
//! postDelayHealthChecks passing), its soak excluded. Waiting for a window, an approval or a freeze
//! comes after completion and never counts.
//!
//! Counted from when the stage was reached in this run (its entry's `lastUpdateReconciledTime`,
//! written when the stage starts), or from a `promoter resume` of its missed deadline, whichever is
//! later. Before the stage is provisioned it must deploy within `D`; once provisioned, its soak
//! (`delay`) is added: the time spent deploying plus the time spent failing checks after the soak
//! may not exceed `D` (`start + D + delay`).

use crate::annotations::Failed;
use crate::api::{Stage, StageStatus, Timestamp};
use crate::settings::Deadline;
use chrono::{DateTime, Utc};

/// When `stage`'s deadline falls, given its status entry and a missed deadline recorded for the run
/// (a resumed one re-opens the stage from `resumed.at`). Ok(None): no recorded start. Err: the
/// deadline falls beyond the calendar (settings cap it; checked all the same, since a panic here
/// would stop every promotion of the pass).
pub fn due(
    deadline: &Deadline,
    stage: &Stage,
    entry: &StageStatus,
    failed: Option<&Failed>,
) -> Result<Option<DateTime<Utc>>, String> {
    let Some(reached) = entry.last_update_reconciled_time else {
        return Ok(None);
    };
    let reached = reached.as_datetime();
    let resumed = failed
        .filter(|f| f.stage == stage.name)
        .and_then(|f| f.resumed.as_ref())
        .and_then(|r| Timestamp::parse(&r.at).ok())
        .map(|t| t.as_datetime());
    let start = resumed.map_or(reached, |r| r.max(reached));
    let soak = match entry.last_successful_applied_time {
        Some(_) => stage
            .trigger
            .as_ref()
            .and_then(|t| t.gates())
            .and_then(|g| g.delay)
            .map(|d| d.to_chrono())
            .unwrap_or_else(chrono::Duration::zero),
        None => chrono::Duration::zero(),
    };
    start
        .checked_add_signed(deadline.after)
        .and_then(|t| t.checked_add_signed(soak))
        .map(Some)
        .ok_or_else(|| {
            format!(
                "Invalid value: {:?}: stage {}'s progress deadline falls beyond the calendar",
                deadline.text, stage.name
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{Record, Run};
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        Timestamp::parse(s).unwrap().as_datetime()
    }

    fn stage(delay: Option<&str>) -> Stage {
        let trigger = match delay {
            Some(d) => json!({"auto": {"delay": d}}),
            None => json!({"auto": {}}),
        };
        serde_json::from_value(
            json!({"name": "staging", "clusterSelector": {}, "trigger": trigger}),
        )
        .unwrap()
    }

    fn entry(reached: &str, provisioned: Option<&str>) -> StageStatus {
        StageStatus {
            name: "staging".into(),
            last_update_reconciled_time: Some(Timestamp::parse(reached).unwrap()),
            last_successful_applied_time: provisioned.map(|p| Timestamp::parse(p).unwrap()),
            ..Default::default()
        }
    }

    fn two_hours() -> Deadline {
        Deadline {
            after: chrono::Duration::hours(2),
            text: "2h".into(),
        }
    }

    fn failed(stage: &str, resumed_at: Option<&str>) -> Failed {
        Failed {
            run: Run {
                revision: "r".into(),
                stages: "s".into(),
                since: String::new(),
            },
            stage: stage.into(),
            at: Timestamp::parse("2026-01-01T05:00:00Z").unwrap(),
            why: "x".into(),
            deadline: "2h".into(),
            resumed: resumed_at.map(|at| Record {
                by: "alice".into(),
                at: at.into(),
                revision: None,
                reason: None,
            }),
        }
    }

    #[test]
    fn counts_from_the_stage_start_with_the_soak_once_provisioned() {
        // (delay, provisioned at, failed record, due)
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<Failed>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (None, None, None, Some("2026-01-01T02:00:00Z")),
            (Some("1h"), None, None, Some("2026-01-01T02:00:00Z")),
            (
                Some("1h"),
                Some("2026-01-01T00:30:00Z"),
                None,
                Some("2026-01-01T03:00:00Z"),
            ),
            // A resumed miss of this stage re-opens it from the resume.
            (
                None,
                None,
                Some(failed("staging", Some("2026-01-01T06:00:00Z"))),
                Some("2026-01-01T08:00:00Z"),
            ),
            // Not resumed, or another stage's: the stage's own start.
            (
                None,
                None,
                Some(failed("staging", None)),
                Some("2026-01-01T02:00:00Z"),
            ),
            (
                None,
                None,
                Some(failed("dev", Some("2026-01-01T06:00:00Z"))),
                Some("2026-01-01T02:00:00Z"),
            ),
        ];
        for (delay, provisioned, f, want) in cases {
            let got = due(
                &two_hours(),
                &stage(delay),
                &entry("2026-01-01T00:00:00Z", provisioned),
                f.as_ref(),
            );
            assert_eq!(
                got,
                Ok(want.map(t)),
                "delay {delay:?}, provisioned {provisioned:?}"
            );
        }
        let mut no_start = entry("2026-01-01T00:00:00Z", None);
        no_start.last_update_reconciled_time = None;
        assert_eq!(due(&two_hours(), &stage(None), &no_start, None), Ok(None));
    }

    #[test]
    fn a_deadline_beyond_the_calendar_is_an_error_not_a_panic() {
        let huge = Deadline {
            after: chrono::Duration::days(300_000 * 365),
            text: "300000y".into(),
        };
        let got = due(
            &huge,
            &stage(None),
            &entry("2026-01-01T00:00:00Z", None),
            None,
        );
        assert_eq!(
            got,
            Err(
                "Invalid value: \"300000y\": stage staging's progress deadline falls beyond the calendar"
                    .into()
            )
        );
    }
}
