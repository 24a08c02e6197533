//! The progress deadline of a stage (`promoter.dev/progress-deadline`): how long a stage may take
//! to be *complete* (deployed on every matching cluster, its preHealthCheckDeployment deployed, its
//! postDelayHealthChecks passing), its soak excluded. Waiting for a window, an approval or a freeze
//! comes after completion and never counts: a complete stage that waits there has met its
//! deadline, and nothing later (a flaky check, a drifting cluster) fails it.
//!
//! Counted from when the stage was reached in this run (its entry's `lastUpdateReconciledTime`,
//! written when the stage starts), or, after a `promoter resume` of its missed deadline, from the
//! first pass that saw the resume. Before the stage is provisioned it must deploy within `D`; once
//! provisioned, its soak (`delay`) is added: the time spent deploying plus the time spent failing
//! checks after the soak may not exceed `D` (`start + D + delay`). Time the run was held by a
//! pause or an abort is added too. Every time here is the pass's own (the deadline clock,
//! `annotations::deadline_clock`), never a command's.

use super::decision::{Decision, RecordOp};
use crate::annotations::{self, DeadlineClock, Run, Subject};
use crate::api::{ClusterPromotion, Stage, StageStatus};
use crate::settings::{Deadline, Settings};
use chrono::{DateTime, Utc};

/// When `stage`'s deadline falls, given its status entry and its clock (`since` replaces the
/// stage's start; held time is added). Ok(None): no recorded start. Err: the deadline falls beyond
/// the calendar (settings cap it; checked all the same, since a panic here would stop every
/// promotion of the pass).
pub fn due(
    deadline: &Deadline,
    stage: &Stage,
    entry: &StageStatus,
    clock: &DeadlineClock,
) -> Result<Option<DateTime<Utc>>, String> {
    let Some(reached) = entry.last_update_reconciled_time else {
        return Ok(None);
    };
    let start = clock.since.unwrap_or(reached).as_datetime();
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
        .and_then(|t| t.checked_add_signed(chrono::Duration::seconds(clock.held_seconds)))
        .map(Some)
        .ok_or_else(|| {
            format!(
                "Invalid value: {:?}: stage {}'s progress deadline falls beyond the calendar",
                deadline.text, stage.name
            )
        })
}

/// The deadline that runs for `p`'s current run, as observed: its rollback's (while it rolls
/// back), else its current stage's (while the stage is neither complete nor halted by its miss).
/// None when no deadline applies.
pub fn running(p: &ClusterPromotion) -> Option<(Run, Subject)> {
    let status = p.status.as_ref()?;
    let run = Run::of(status)?;
    let settings = Settings::of(p);
    if let Some(r) = annotations::rollback(p).filter(|r| r.from == run) {
        let runs = r.completed_at.is_none() && r.missed.is_none();
        return (runs && settings.rollback_deadline.is_some())
            .then_some((run, Subject::Rollback(r.to)));
    }
    if annotations::completed(p).as_ref() == Some(&run)
        || annotations::failed(p).is_some_and(|f| f.run == run && f.resumed.is_none())
    {
        return None;
    }
    let stage = status.current_stage_name.clone()?;
    settings.deadline_for(&stage)?;
    let subject = Subject::Stage(stage);
    let met = annotations::deadline_clock(p, &run, &subject).is_some_and(|c| c.met_at.is_some());
    (!met).then_some((run, subject))
}

/// A pause or an abort holds `p` (a pass that leaves it alone): the first pass that sees the hold
/// starts counting it on the running deadline's clock, so that it does not count against it.
pub fn hold(p: &ClusterPromotion, now: DateTime<Utc>, d: &mut Decision) {
    let Some((run, subject)) = running(p) else {
        return;
    };
    let mut clock = annotations::deadline_clock(p, &run, &subject)
        .unwrap_or_else(|| DeadlineClock::new(&run, &subject));
    if clock.hold(now) {
        d.record(RecordOp::Clock(clock));
    }
}

/// The clock of `run` about `subject` as this pass continues it: the observed one (or a fresh
/// one) with a hold that has ended added up. Record it with [`record`] once the pass has set
/// what it knows.
pub fn clock(p: &ClusterPromotion, run: &Run, subject: &Subject, now: DateTime<Utc>) -> Clock {
    let observed = annotations::deadline_clock(p, run, subject);
    let mut clock = observed
        .clone()
        .unwrap_or_else(|| DeadlineClock::new(run, subject));
    clock.release(now);
    Clock { observed, clock }
}

/// The clock of `stage`'s progress deadline in `run`, as a pass at `now` continues it: a hold
/// that ended added up, and after a `promoter resume` of the stage's miss a new deadline from
/// `now` (the first pass that sees the resume).
pub fn stage_clock(p: &ClusterPromotion, run: &Run, stage: &str, now: DateTime<Utc>) -> Clock {
    let subject = Subject::Stage(stage.to_string());
    let mut c = clock(p, run, &subject, now);
    let resumed = annotations::failed(p)
        .is_some_and(|f| f.run == *run && f.stage == stage && f.resumed.is_some());
    if c.clock.since.is_none() && resumed {
        c.clock.since = Some(crate::api::Timestamp::new(now));
    }
    c
}

/// When the current stage's progress deadline falls, as the next pass at `now` would count it;
/// None when it has none, has met it, or it cannot be computed (`status`, `explain`).
pub fn predicted_due(
    p: &ClusterPromotion,
    stage: &Stage,
    entry: &StageStatus,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let run = Run::of(p.status.as_ref()?)?;
    let limit = Settings::of(p).deadline_for(&stage.name)?.clone();
    let c = stage_clock(p, &run, &stage.name, now);
    if c.clock.met_at.is_some() {
        return None;
    }
    // Beyond the calendar: no time to show (the pass blocks the promotion and says why).
    due(&limit, stage, entry, &c.clock).ok().flatten()
}

/// When the run's rollback in progress must be done, as the next pass at `now` would count it
/// (its clock's start, or `now` for a rollback no pass has started yet, plus the deadline and the
/// time held); None without a rollback in progress, once it missed its deadline, or with
/// `promoter.dev/rollback-deadline: none`.
pub fn predicted_rollback_due(p: &ClusterPromotion, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let (run, subject) = running(p)?;
    let Subject::Rollback(_) = &subject else {
        return None;
    };
    let limit = Settings::of(p).rollback_deadline?;
    let c = clock(p, &run, &subject, now);
    let since = c.clock.since.map_or(now, |t| t.as_datetime());
    since
        .checked_add_signed(limit.after)?
        .checked_add_signed(chrono::Duration::seconds(c.clock.held_seconds))
}

/// A deadline clock being continued by a pass: what was observed, and what it is now.
pub struct Clock {
    observed: Option<DeadlineClock>,
    pub clock: DeadlineClock,
}

impl Clock {
    /// Records the clock when the pass changed it (and it says something: a fresh clock with
    /// nothing in it is not written).
    pub fn record(self, run: &Run, subject: &Subject, d: &mut Decision) {
        let fresh = DeadlineClock::new(run, subject);
        let changed = match &self.observed {
            Some(o) => *o != self.clock,
            None => self.clock != fresh,
        };
        if changed {
            d.record(RecordOp::Clock(self.clock));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;
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

    fn clock(since: Option<&str>, held_seconds: i64) -> DeadlineClock {
        DeadlineClock {
            since: since.map(|s| Timestamp::parse(s).unwrap()),
            held_seconds,
            ..Default::default()
        }
    }

    #[test]
    fn counts_from_the_stage_start_with_the_soak_once_provisioned() {
        // (delay, provisioned at, clock, due)
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            DeadlineClock,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (None, None, clock(None, 0), Some("2026-01-01T02:00:00Z")),
            (
                Some("1h"),
                None,
                clock(None, 0),
                Some("2026-01-01T02:00:00Z"),
            ),
            (
                Some("1h"),
                Some("2026-01-01T00:30:00Z"),
                clock(None, 0),
                Some("2026-01-01T03:00:00Z"),
            ),
            // A resumed miss re-opens the stage from the first pass after the resume.
            (
                None,
                None,
                clock(Some("2026-01-01T06:00:00Z"), 0),
                Some("2026-01-01T08:00:00Z"),
            ),
            // An hour held by a pause or an abort does not count.
            (None, None, clock(None, 3600), Some("2026-01-01T03:00:00Z")),
            (
                Some("1h"),
                Some("2026-01-01T00:30:00Z"),
                clock(Some("2026-01-01T01:00:00Z"), 90),
                Some("2026-01-01T04:01:30Z"),
            ),
        ];
        for (delay, provisioned, c, want) in cases {
            let got = due(
                &two_hours(),
                &stage(delay),
                &entry("2026-01-01T00:00:00Z", provisioned),
                &c,
            );
            assert_eq!(
                got,
                Ok(want.map(t)),
                "delay {delay:?}, provisioned {provisioned:?}, clock {c:?}"
            );
        }
        let mut no_start = entry("2026-01-01T00:00:00Z", None);
        no_start.last_update_reconciled_time = None;
        assert_eq!(
            due(&two_hours(), &stage(None), &no_start, &clock(None, 0)),
            Ok(None)
        );
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
            &DeadlineClock::default(),
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
