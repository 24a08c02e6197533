//! What holds the current run, or releases it, besides a pause: each record names the run (or the
//! revision) it is about, so a new run makes it void (the restart's record patch removes it).
//!
//! * `promoter.dev/failed`: a stage of the run missed its progress deadline (any policy);
//!   `resumed` set by `promoter resume` re-opens it.
//! * `promoter.dev/rollback`: a rollback of the run, by the pass (deadline, `rollback` policy) or
//!   by `promoter rollback`; `completedAt` once every target is rolled back.
//! * `promoter.dev/aborted`: `promoter abort`: the run holds where it is.
//! * `promoter.dev/retry`: `promoter resume` of a rolled-back revision: it may roll out again.
//!
//! A value that does not parse is absent.

use super::history::Cause;
use super::keys::{ABORTED, FAILED, RETRY, ROLLBACK, Record, Run, annotation};
use crate::api::{ClusterPromotion, Timestamp};
use crate::settings::RollbackOrder;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `promoter.dev/failed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failed {
    pub run: Run,
    pub stage: String,
    pub at: Timestamp,
    /// What the stage was waiting for when its deadline passed.
    pub why: String,
    /// The deadline as written (`2h`).
    pub deadline: String,
    /// `promoter resume`: the stage gets a fresh deadline, counted from the first pass that sees
    /// the resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<Record>,
    /// When the deadline fell (the pass's clock); absent in records of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<Timestamp>,
}

impl Failed {
    /// The failed stage's failureMessage: `progress deadline <D> exceeded at <due>: <why>`
    /// (bounded, as the status keeps it).
    pub fn message(&self) -> String {
        crate::bounded_text::recorded(&format!(
            "progress deadline {} exceeded at {}: {}",
            self.deadline,
            self.due.unwrap_or(self.at),
            self.why
        ))
    }

    /// The note of its `ProgressDeadlineExceeded` Event.
    pub fn event_note(&self) -> String {
        format!(
            "Stage {} did not complete within its progress deadline {} (due {}): {}",
            self.stage,
            self.deadline,
            self.due.unwrap_or(self.at),
            self.why
        )
    }
}

/// `promoter.dev/rollback`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollback {
    /// The run rolled back; a record whose `from` is not the current run is void.
    pub from: Run,
    /// The revision hash rolled back to.
    pub to: String,
    pub order: RollbackOrder,
    pub cause: Cause,
    pub by: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set by the pass that finds every target rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Once rolled back: a digest of the targets' profiles as they were when they held the
    /// revision rolled back to (`pass::rollback::fingerprint`). While it still matches, a pass
    /// has nothing to repair and does not read the stored revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
    /// The rollback missed its own deadline (`promoter.dev/rollback-deadline`): it holds for a
    /// person (`promoter resume` gives it a new deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<RollbackMiss>,
}

/// A rollback that did not finish within its deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollbackMiss {
    /// When the pass saw it.
    pub at: Timestamp,
    /// When the deadline fell.
    pub due: Timestamp,
    /// The deadline as written (`1h`).
    pub deadline: String,
    /// The stage it waited for.
    pub stage: String,
    /// What that stage waited for (bounded).
    pub why: String,
}

impl RollbackMiss {
    /// `rollback deadline <D> exceeded at <due>: stage <s>: <why>` (bounded).
    pub fn message(&self) -> String {
        crate::bounded_text::recorded(&format!(
            "rollback deadline {} exceeded at {}: stage {}: {}",
            self.deadline, self.due, self.stage, self.why
        ))
    }
}

/// `promoter.dev/aborted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Aborted {
    pub run: Run,
    pub by: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `promoter.dev/retry`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// The revision hash that may roll out again.
    pub revision: String,
    pub by: String,
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn parsed<T: DeserializeOwned>(p: &ClusterPromotion, key: &str) -> Option<T> {
    serde_json::from_str(&annotation(p, key)?).ok()
}

pub fn failed(p: &ClusterPromotion) -> Option<Failed> {
    parsed(p, FAILED)
}

pub fn rollback(p: &ClusterPromotion) -> Option<Rollback> {
    parsed(p, ROLLBACK)
}

pub fn aborted(p: &ClusterPromotion) -> Option<Aborted> {
    parsed(p, ABORTED)
}

pub fn retry(p: &ClusterPromotion) -> Option<Retry> {
    parsed(p, RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::encode;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn run() -> Run {
        Run {
            revision: "h2".into(),
            stages: "s".into(),
            since: "2026-02-16T06:00:00Z".into(),
        }
    }

    fn with(key: &str, value: &str) -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": {key: value}}, "spec": {"stages": [{"name": "dev"}]}
        }))
        .unwrap()
    }

    /// The JSON text of each record, exactly as the design writes it, read back from the
    /// annotation; a value that does not parse is absent.
    #[test]
    fn records_are_the_designs_json_and_read_back() {
        const RUN: &str = r#"{"revision":"h2","stages":"s","since":"2026-02-16T06:00:00Z"}"#;
        let failed_record = Failed {
            run: run(),
            stage: "staging".into(),
            at: at("2026-02-16T08:00:00Z"),
            why: "Waiting for ClusterSummary st01 to be Provisioned".into(),
            deadline: "2h".into(),
            resumed: Some(Record {
                by: "alice".into(),
                at: "2026-02-16T09:00:00Z".into(),
                revision: None,
                reason: Some("flaky".into()),
            }),
            due: None,
        };
        let text = format!(
            r#"{{"run":{RUN},"stage":"staging","at":"2026-02-16T08:00:00Z","why":"Waiting for ClusterSummary st01 to be Provisioned","deadline":"2h","resumed":{{"by":"alice","at":"2026-02-16T09:00:00Z","reason":"flaky"}}}}"#
        );
        assert_eq!(encode(&failed_record), text);
        assert_eq!(failed(&with(FAILED, &text)), Some(failed_record));

        let rollback_record = Rollback {
            from: run(),
            to: "h1".into(),
            order: RollbackOrder::Reverse,
            cause: Cause::ProgressDeadline,
            by: "promoter".into(),
            at: at("2026-02-16T08:00:00Z"),
            reason: None,
            completed_at: Some(at("2026-02-16T08:30:00Z")),
            kept: None,
            missed: None,
        };
        let text = format!(
            r#"{{"from":{RUN},"to":"h1","order":"reverse","cause":"ProgressDeadline","by":"promoter","at":"2026-02-16T08:00:00Z","completedAt":"2026-02-16T08:30:00Z"}}"#
        );
        assert_eq!(encode(&rollback_record), text);
        assert_eq!(rollback(&with(ROLLBACK, &text)), Some(rollback_record));
        let manual = format!(
            r#"{{"from":{RUN},"to":"h1","order":"all-at-once","cause":"Manual","by":"bob","at":"2026-02-16T08:00:00Z","reason":"bad release"}}"#
        );
        let r = rollback(&with(ROLLBACK, &manual)).unwrap();
        assert_eq!(
            (r.order, r.cause),
            (RollbackOrder::AllAtOnce, Cause::Manual)
        );
        assert_eq!(encode(&r), manual);

        let aborted_record = Aborted {
            run: run(),
            by: "carol".into(),
            at: at("2026-02-16T08:00:00Z"),
            reason: Some("incident".into()),
        };
        let text = format!(
            r#"{{"run":{RUN},"by":"carol","at":"2026-02-16T08:00:00Z","reason":"incident"}}"#
        );
        assert_eq!(encode(&aborted_record), text);
        assert_eq!(aborted(&with(ABORTED, &text)), Some(aborted_record));

        let retry_record = Retry {
            revision: "h2".into(),
            by: "dave".into(),
            at: at("2026-02-16T08:00:00Z"),
            reason: None,
        };
        let text = r#"{"revision":"h2","by":"dave","at":"2026-02-16T08:00:00Z"}"#;
        assert_eq!(encode(&retry_record), text);
        assert_eq!(retry(&with(RETRY, text)), Some(retry_record));

        for key in [FAILED, ROLLBACK, ABORTED, RETRY] {
            let p = with(key, r#"{"by":"hand-written"}"#);
            assert!(
                failed(&p).is_none()
                    && rollback(&p).is_none()
                    && aborted(&p).is_none()
                    && retry(&p).is_none(),
                "{key}"
            );
        }
        let bad_order = manual.replace("all-at-once", "sideways");
        assert_eq!(rollback(&with(ROLLBACK, &bad_order)), None);
    }
    /// What a person reads of a missed deadline: the failed stage's failureMessage, the note of
    /// its `ProgressDeadlineExceeded` Event (when the deadline fell, or when the pass saw it in
    /// records of earlier versions), and a missed rollback deadline's message.
    #[test]
    fn a_missed_deadline_says_which_deadline_when_and_why() {
        let mut f = Failed {
            run: run(),
            stage: "staging".into(),
            at: at("2026-02-16T08:03:00Z"),
            why: "Waiting for ClusterSummary st01 to be Provisioned".into(),
            deadline: "2h".into(),
            resumed: None,
            due: Some(at("2026-02-16T08:00:00Z")),
        };
        assert_eq!(
            f.message(),
            "progress deadline 2h exceeded at 2026-02-16T08:00:00Z: Waiting for ClusterSummary st01 to be Provisioned"
        );
        assert_eq!(
            f.event_note(),
            "Stage staging did not complete within its progress deadline 2h (due 2026-02-16T08:00:00Z): Waiting for ClusterSummary st01 to be Provisioned"
        );
        f.due = None;
        assert!(f.message().contains("exceeded at 2026-02-16T08:03:00Z: "));
        assert!(f.event_note().contains("(due 2026-02-16T08:03:00Z): "));
        let miss = RollbackMiss {
            at: at("2026-02-16T09:01:00Z"),
            due: at("2026-02-16T09:00:00Z"),
            deadline: "1h".into(),
            stage: "dev".into(),
            why: "Waiting for ClusterSummary dev01 to be Provisioned".into(),
        };
        assert_eq!(
            miss.message(),
            "rollback deadline 1h exceeded at 2026-02-16T09:00:00Z: stage dev: Waiting for ClusterSummary dev01 to be Provisioned"
        );
    }
}
