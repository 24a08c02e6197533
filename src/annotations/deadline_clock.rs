//! `promoter.dev/deadline-clock`: what the pass has seen of the deadline that is running for the
//! current run, stamped with the pass's own clock only (never a command's: every controller has
//! its own clock, and a deadline compared across two of them would be off by their skew). Written
//! only by the pass, only while a deadline applies, in the guarded record patch of a pass that
//! writes anyway or of the first pass that sees a change (a pause, an abort, their end, a stage
//! that completes and waits at a later gate, a rollback's first pass, the first pass after a
//! `promoter resume` of a missed deadline). A pass that sees nothing new writes nothing.
//!
//! It is about one run and one thing: the progress deadline of one stage, or the run's rollback
//! (its own deadline, `promoter.dev/rollback-deadline`). A clock about anything else is void; a
//! new run drops it. `promoter resume` of a missed deadline removes it, so that the pass starts a
//! new deadline at its first look.
//!
//! * `since`: when the deadline started counting, when not the stage's reach (the status'
//!   `lastUpdateReconciledTime`): the first pass after a resume of the stage's miss; for a
//!   rollback, its first pass.
//! * `metAt`: the stage was complete (deployed, its checks passed) and waited at a later gate (a
//!   freeze, a window, an approval): its deadline is done, and nothing later fails it.
//! * `heldSeconds`, `heldSince`: a pause or an abort held the run (as passes saw it: from the
//!   first pass that saw the hold to the first that saw it lifted); held time is added to the
//!   deadline.

use super::keys::{Run, annotation};
use crate::api::{ClusterPromotion, Timestamp};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The annotation.
pub const DEADLINE_CLOCK: &str = "promoter.dev/deadline-clock";

/// What a deadline clock is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The progress deadline of this stage.
    Stage(String),
    /// The run's rollback to this revision hash (a redirect to another revision is a new one).
    Rollback(String),
}

/// `promoter.dev/deadline-clock`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadlineClock {
    pub run: Option<Run>,
    /// The stage whose progress deadline it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The revision hash a rollback of the run goes back to: the clock is the rollback's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_seconds: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since: Option<Timestamp>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl DeadlineClock {
    /// A fresh clock of `run` about `subject`.
    pub fn new(run: &Run, subject: &Subject) -> DeadlineClock {
        let mut c = DeadlineClock {
            run: Some(run.clone()),
            ..Default::default()
        };
        match subject {
            Subject::Stage(s) => c.stage = Some(s.clone()),
            Subject::Rollback(to) => c.rollback_to = Some(to.clone()),
        }
        c
    }

    /// Whether it is the clock of `run` about `subject`.
    pub fn is_about(&self, run: &Run, subject: &Subject) -> bool {
        self.run.as_ref() == Some(run)
            && match subject {
                Subject::Stage(s) => {
                    self.stage.as_deref() == Some(s.as_str()) && self.rollback_to.is_none()
                }
                Subject::Rollback(to) => {
                    self.rollback_to.as_deref() == Some(to.as_str()) && self.stage.is_none()
                }
            }
    }

    /// The time held so far, a hold still running counted up to `now`.
    pub fn held(&self, now: DateTime<Utc>) -> Duration {
        let running = self.held_since.map_or_else(Duration::zero, |t| {
            (now - t.as_datetime()).max(Duration::zero())
        });
        Duration::seconds(self.held_seconds.max(0)) + running
    }

    /// A hold starts (the first pass that sees it): `false` when one is already running.
    pub fn hold(&mut self, now: DateTime<Utc>) -> bool {
        if self.held_since.is_some() {
            return false;
        }
        self.held_since = Some(Timestamp::new(now));
        true
    }

    /// The hold ends (the first pass that sees it lifted): its time is added up. `false` when
    /// none was running.
    pub fn release(&mut self, now: DateTime<Utc>) -> bool {
        if self.held_since.is_none() {
            return false;
        }
        self.held_seconds = self.held(now).num_seconds();
        self.held_since = None;
        true
    }
}

/// The clock of `run` about `subject` recorded on `p`, if any (a value that does not parse is
/// absent).
pub fn deadline_clock(p: &ClusterPromotion, run: &Run, subject: &Subject) -> Option<DeadlineClock> {
    let c: DeadlineClock = serde_json::from_str(&annotation(p, DEADLINE_CLOCK)?).ok()?;
    c.is_about(run, subject).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::encode;

    fn t(s: &str) -> DateTime<Utc> {
        Timestamp::parse(s).unwrap().as_datetime()
    }

    fn run(since: &str) -> Run {
        Run {
            revision: "h2".into(),
            stages: "s".into(),
            since: since.into(),
        }
    }

    fn with(value: &str) -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": {DEADLINE_CLOCK: value}},
            "spec": {"stages": [{"name": "dev"}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_json_is_compact_and_read_back_only_for_its_run_and_subject() {
        let r = run("2026-02-16T06:00:00Z");
        let staging = Subject::Stage("staging".into());
        let mut c = DeadlineClock::new(&r, &staging);
        c.met_at = Some(Timestamp::new(t("2026-02-16T06:10:00Z")));
        let text = encode(&c);
        assert_eq!(
            text,
            r#"{"run":{"revision":"h2","stages":"s","since":"2026-02-16T06:00:00Z"},"stage":"staging","metAt":"2026-02-16T06:10:00Z"}"#
        );
        let p = with(&text);
        assert_eq!(deadline_clock(&p, &r, &staging), Some(c));
        assert_eq!(
            deadline_clock(&p, &r, &Subject::Stage("dev".into())),
            None,
            "another stage's"
        );
        assert_eq!(
            deadline_clock(&p, &r, &Subject::Rollback("h1".into())),
            None,
            "not the rollback's"
        );
        assert_eq!(
            deadline_clock(&p, &run("2026-02-16T07:00:00Z"), &staging),
            None,
            "another run's"
        );
        assert_eq!(deadline_clock(&with("yes"), &r, &staging), None);
        let back = DeadlineClock::new(&r, &Subject::Rollback("h1".into()));
        assert_eq!(
            encode(&back),
            r#"{"run":{"revision":"h2","stages":"s","since":"2026-02-16T06:00:00Z"},"rollbackTo":"h1"}"#
        );
        assert!(back.is_about(&r, &Subject::Rollback("h1".into())));
        assert!(!back.is_about(&r, &Subject::Rollback("h0".into())));
    }

    #[test]
    fn holds_add_up_as_passes_see_them() {
        let mut c = DeadlineClock::default();
        assert_eq!(c.held(t("2026-02-16T06:00:00Z")), Duration::zero());
        assert!(!c.release(t("2026-02-16T06:00:00Z")), "nothing held");
        assert!(c.hold(t("2026-02-16T06:00:00Z")));
        assert!(!c.hold(t("2026-02-16T06:30:00Z")), "already held");
        assert_eq!(c.held(t("2026-02-16T06:20:00Z")), Duration::minutes(20));
        assert!(c.release(t("2026-02-16T07:00:00Z")));
        assert_eq!((c.held_seconds, c.held_since), (3600, None));
        assert!(c.hold(t("2026-02-16T08:00:00Z")));
        assert!(c.release(t("2026-02-16T08:01:30Z")));
        assert_eq!(c.held(t("2026-02-16T09:00:00Z")), Duration::seconds(3690));
        // A hold "ending" before it began (a pass with a slower clock) adds nothing.
        assert!(c.hold(t("2026-02-16T10:00:00Z")));
        assert!(c.release(t("2026-02-16T09:59:00Z")));
        assert_eq!(c.held_seconds, 3690);
    }
}
