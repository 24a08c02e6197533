//! What becomes of a stage whose deployment fails: with a progress deadline ahead, Sveltos retries
//! until then and the failure policy acts after it (phase `Failing`); without one, nothing in
//! promoter will act on it (phase `Failed`: a person does). One place for the planner, which
//! records it, and for `status` and `explain`, which show it from the live ClusterSummaries before
//! a pass has.

use super::phase::{DEPLOYMENT_FAILED, DEPLOYMENT_FAILING, Phase};
use crate::annotations::{History, Run};
use crate::api::{ClusterPromotion, Timestamp};
use crate::settings::{FailurePolicy, Settings};
use chrono::{DateTime, Utc};

/// What the failure policy does once the deadline falls: `halt`, `rollback`, or `halt (no completed
/// revision to roll back to)` under a rollback policy with nothing to go back to.
pub fn then(p: &ClusterPromotion, run: Option<&Run>) -> &'static str {
    match Settings::of(p).failure_policy {
        FailurePolicy::Halt => "halt",
        FailurePolicy::Rollback => {
            let revision = run.map(|r| r.revision.as_str()).unwrap_or_default();
            if History::of(p).candidates(revision).next().is_some() {
                "rollback"
            } else {
                "halt (no completed revision to roll back to)"
            }
        }
    }
}

/// The phase and the stored description of a failing deployment: `Failing` with
/// `Deployment Failing: retrying until <due>, then <then>` before its deadline, `Failed` with
/// [`DEPLOYMENT_FAILED`] without one.
pub fn outlook(due: Option<DateTime<Utc>>, then: &str) -> (Phase, String) {
    match due {
        Some(due) => (
            Phase::Failing,
            format!("{DEPLOYMENT_FAILING} {}, then {then}", Timestamp::new(due)),
        ),
        None => (Phase::Failed, DEPLOYMENT_FAILED.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn failing_until_the_deadline_failed_without_one() {
        let due = Utc.with_ymd_and_hms(2026, 2, 16, 7, 0, 0).unwrap();
        assert_eq!(
            outlook(Some(due), "rollback"),
            (
                Phase::Failing,
                "Deployment Failing: retrying until 2026-02-16T07:00:00Z, then rollback".into()
            )
        );
        assert_eq!(
            outlook(None, "halt"),
            (Phase::Failed, DEPLOYMENT_FAILED.to_string())
        );
    }
}
