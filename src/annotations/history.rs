//! `promoter.dev/history`: the bounded revision history, newest run first, at most the
//! `revision-history-limit` completed entries (each ~200 bytes, independent of the number of
//! stages). An entry is one run of one revision: added or updated by the record patch that records
//! its completion and by the one that starts its rollback.
//!
//! "Last known good" is the newest entry that completed, was not rolled back, is not the revision
//! being rolled back, and whose `PromotionRevision` object exists.

use super::keys::{HISTORY, annotation};
use crate::api::{ClusterPromotion, Timestamp, revision_id};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// Why a rollback happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cause {
    /// A stage missed its progress deadline under `failure-policy: rollback`.
    ProgressDeadline,
    /// `promoter rollback`.
    Manual,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::ProgressDeadline => "ProgressDeadline",
            Cause::Manual => "Manual",
        }
    }
}

/// When a run was rolled back, why, by whom, and to which revision id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    pub at: Timestamp,
    pub cause: Cause,
    pub by: String,
    /// The revision id rolled back to.
    pub to: String,
}

/// One run of one revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The status' profileSpecHash of the run.
    pub revision: String,
    /// [`revision_id`] of `revision`, as users see it.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<RolledBack>,
}

impl HistoryEntry {
    pub fn new(revision: &str, started_at: Option<Timestamp>) -> HistoryEntry {
        HistoryEntry {
            revision: revision.to_string(),
            id: revision_id(revision),
            started_at,
            completed_at: None,
            rolled_back: None,
        }
    }

    fn is_run(&self, revision: &str, started_at: Option<Timestamp>) -> bool {
        self.revision == revision && self.started_at == started_at
    }
}

/// The history, newest run first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History(pub Vec<HistoryEntry>);

/// How many rolled-back revisions the history remembers, whatever `revision-history-limit` says
/// (the limit's maximum): a revert to one of them holds until `promoter resume`.
pub const ROLLED_BACK_KEPT: usize = crate::settings::MAX_HISTORY_LIMIT;

impl History {
    /// The history recorded on `p`. An entry that does not parse is left out (the others still
    /// say what is known good); a value that is not a JSON list is no history.
    pub fn of(p: &ClusterPromotion) -> History {
        let Some(Ok(Value::Array(items))) =
            annotation(p, HISTORY).map(|v| serde_json::from_str::<Value>(&v))
        else {
            return History::default();
        };
        History(
            items
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
        )
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }

    /// The newest entry of `revision`.
    pub fn entry(&self, revision: &str) -> Option<&HistoryEntry> {
        self.0.iter().find(|e| e.revision == revision)
    }

    /// The newest entry of `promotion` that `wanted` names (`--to-revision`): its ID, its
    /// revision hash, or its PromotionRevision's name, as a person copies one from wherever
    /// they read it.
    pub fn find(&self, promotion: &str, wanted: &str) -> Option<&HistoryEntry> {
        let wanted = wanted.trim();
        self.0.iter().find(|e| {
            e.id == wanted
                || e.revision == wanted
                || crate::api::revision_name(promotion, &e.revision) == wanted
        })
    }

    /// Every revision of the history by its ID, newest first, with what it is (for errors that
    /// must say which revisions there are): `6de0401422 (current, rolled back), 382a9c254c
    /// (completed)`; `current` is the run's revision hash.
    pub fn known_ids(&self, current: &str) -> String {
        let ids: Vec<String> = self
            .0
            .iter()
            .map(|e| {
                let mut what = Vec::new();
                if e.revision == current {
                    what.push("current");
                }
                if e.rolled_back.is_some() {
                    what.push("rolled back");
                } else if e.completed_at.is_some() {
                    what.push("completed");
                } else if e.revision != current {
                    what.push("never completed");
                }
                format!("{} ({})", e.id, what.join(", "))
            })
            .collect();
        if ids.is_empty() {
            "its history has no revision yet".into()
        } else {
            format!("its revisions, newest first: {}", ids.join(", "))
        }
    }

    /// When the run completed, as its completion record patch recorded it.
    pub fn completed_at(&self, run: &super::Run) -> Option<Timestamp> {
        self.0
            .iter()
            .find(|e| e.is_run(&run.revision, run.started_at()))?
            .completed_at
    }

    /// Whether the newest entry of `revision` says it was rolled back.
    pub fn rolled_back(&self, revision: &str) -> Option<&RolledBack> {
        self.entry(revision)?.rolled_back.as_ref()
    }

    /// The newest entry that completed, was not rolled back, is not `rolling_back` (a revision
    /// hash), and whose PromotionRevision object exists (`stored`).
    pub fn last_known_good(
        &self,
        rolling_back: &str,
        stored: impl Fn(&HistoryEntry) -> bool,
    ) -> Option<&HistoryEntry> {
        self.candidates(rolling_back).find(|e| stored(e))
    }

    /// The entries that could be last known good, newest first, before checking their objects.
    pub fn candidates<'a, 'b>(
        &'a self,
        rolling_back: &'b str,
    ) -> impl Iterator<Item = &'a HistoryEntry> + use<'a, 'b> {
        self.0.iter().filter(move |e| {
            e.completed_at.is_some() && e.rolled_back.is_none() && e.revision != rolling_back
        })
    }

    /// The entry of the run (`revision` started at `started_at`), added first if there is none.
    fn run_entry(&mut self, revision: &str, started_at: Option<Timestamp>) -> &mut HistoryEntry {
        let i = match self.0.iter().position(|e| e.is_run(revision, started_at)) {
            Some(i) => i,
            None => {
                self.0.insert(0, HistoryEntry::new(revision, started_at));
                0
            }
        };
        &mut self.0[i]
    }

    /// The completion record patch: the run completed at `at`; then bounded by `limit`.
    pub fn record_completion(
        &mut self,
        revision: &str,
        started_at: Option<Timestamp>,
        at: Timestamp,
        limit: usize,
    ) {
        self.run_entry(revision, started_at).completed_at = Some(at);
        self.trim(limit);
    }

    /// The rollback start's record patch: the run is rolled back; then bounded by `limit`.
    pub fn record_rollback(
        &mut self,
        revision: &str,
        started_at: Option<Timestamp>,
        rolled_back: RolledBack,
        limit: usize,
    ) {
        self.run_entry(revision, started_at).rolled_back = Some(rolled_back);
        self.trim(limit);
    }

    /// Keeps the newest `limit` completed entries, at most `limit` runs that never completed,
    /// and the newest [`ROLLED_BACK_KEPT`] rolled-back revisions whatever the limit (each one
    /// holds a revert to it until a person resumes it; forgetting it would let that revision
    /// roll out unasked): the history stays bounded whatever happens, and a run in progress
    /// never pushes out what a rollback needs.
    pub fn trim(&mut self, limit: usize) {
        let (mut completed, mut rolled_back, mut other) = (0, 0, 0);
        self.0.retain(|e| {
            let (count, cap) = if e.rolled_back.is_some() {
                (&mut rolled_back, ROLLED_BACK_KEPT.max(limit))
            } else if e.completed_at.is_some() {
                (&mut completed, limit)
            } else {
                (&mut other, limit)
            };
            *count += 1;
            *count <= cap
        });
    }

    /// The revisions whose PromotionRevision objects the history still refers to (the others
    /// may be deleted).
    pub fn kept_revisions(&self) -> BTreeSet<&str> {
        self.0
            .iter()
            .filter(|e| e.completed_at.is_some())
            .map(|e| e.revision.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    fn with_history(value: &str) -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": {HISTORY: value}}, "spec": {"stages": [{"name": "dev"}]}
        }))
        .unwrap()
    }

    fn rolled(to: &str) -> RolledBack {
        RolledBack {
            at: at("2026-02-16T09:00:00Z"),
            cause: Cause::ProgressDeadline,
            by: "promoter".into(),
            to: revision_id(to),
        }
    }

    /// The cause is named in explain, the status and events as the annotation stores it.
    #[test]
    fn a_cause_is_named_as_the_annotation_stores_it() {
        for (cause, name) in [
            (Cause::ProgressDeadline, "ProgressDeadline"),
            (Cause::Manual, "Manual"),
        ] {
            assert_eq!(cause.as_str(), name);
            assert_eq!(
                serde_json::to_value(cause).unwrap(),
                Value::String(name.into())
            );
        }
    }

    #[test]
    fn the_designs_json_read_back_and_a_bad_entry_left_out() {
        let mut h = History::default();
        h.record_completion(
            "h1",
            Some(at("2026-02-16T06:00:00Z")),
            at("2026-02-16T07:00:00Z"),
            10,
        );
        h.record_rollback("h2", Some(at("2026-02-16T08:00:00Z")), rolled("h1"), 10);
        let text = h.to_annotation();
        let id = |r: &str| revision_id(r);
        assert_eq!(
            text,
            format!(
                r#"[{{"revision":"h2","id":"{}","startedAt":"2026-02-16T08:00:00Z","rolledBack":{{"at":"2026-02-16T09:00:00Z","cause":"ProgressDeadline","by":"promoter","to":"{}"}}}},{{"revision":"h1","id":"{}","startedAt":"2026-02-16T06:00:00Z","completedAt":"2026-02-16T07:00:00Z"}}]"#,
                id("h2"),
                id("h1"),
                id("h1")
            )
        );
        assert_eq!(History::of(&with_history(&text)), h);
        // One entry that does not parse does not hide the others.
        let damaged = text.replacen(r#""revision":"h2""#, r#""revision":2"#, 1);
        assert_eq!(History::of(&with_history(&damaged)).0, h.0[1..]);
        assert_eq!(History::of(&with_history("not json")), History::default());
        assert_eq!(History::of(&with_history("{}")), History::default());
    }

    #[test]
    fn last_known_good_is_the_newest_stored_completed_revision_not_rolled_back() {
        let mut h = History::default();
        let t = |m: u32| at(&format!("2026-02-16T06:{m:02}:00Z"));
        h.record_completion("h1", Some(t(0)), t(1), 10);
        h.record_completion("h2", Some(t(2)), t(3), 10);
        h.record_completion("h3", Some(t(4)), t(5), 10);
        h.record_rollback("h3", Some(t(4)), rolled("h2"), 10);
        h.record_rollback("h4", Some(t(6)), rolled("h2"), 10);
        assert_eq!(h.0.len(), 4, "the rollback of h3's run updates its entry");
        let every = |_: &HistoryEntry| true;
        assert_eq!(h.last_known_good("h4", every).unwrap().revision, "h2");
        assert_eq!(h.last_known_good("h2", every).unwrap().revision, "h1");
        let h2_gone = |e: &HistoryEntry| e.revision != "h2";
        assert_eq!(h.last_known_good("h4", h2_gone).unwrap().revision, "h1");
        assert_eq!(h.last_known_good("h4", |_| false), None);
        assert!(h.rolled_back("h3").is_some() && h.rolled_back("h2").is_none());
        assert_eq!(h.find("p", &revision_id("h1")).unwrap().revision, "h1");
        assert_eq!(h.find("p", "h1").unwrap().id, revision_id("h1"));
        let object = crate::api::revision_name("p", "h1");
        assert_eq!(h.find("p", &object).unwrap().revision, "h1");
        assert_eq!(h.find("p", &format!(" {object}\n")).unwrap().revision, "h1");
        assert!(
            h.find("q", &object).is_none(),
            "another promotion's revision"
        );
        assert!(h.find("p", &revision_id("h1")[..8]).is_none());
        assert_eq!(
            h.known_ids("h4"),
            format!(
                "its revisions, newest first: {} (current, rolled back), {} (rolled back), {} (completed), {} (completed)",
                revision_id("h4"),
                revision_id("h3"),
                revision_id("h2"),
                revision_id("h1")
            )
        );
        let started = History(vec![
            HistoryEntry::new("h5", None),
            HistoryEntry::new("h6", None),
        ]);
        assert_eq!(
            started.known_ids("h5"),
            format!(
                "its revisions, newest first: {} (current), {} (never completed)",
                revision_id("h5"),
                revision_id("h6")
            )
        );
        assert_eq!(
            History::default().known_ids("h2"),
            "its history has no revision yet"
        );
        assert_eq!(h.find("p", "nope"), None);
        // A revision run again (a retry) is a new entry; the newest entry speaks for it.
        h.record_completion("h3", Some(t(8)), t(9), 10);
        assert!(h.rolled_back("h3").is_none());
        assert_eq!(h.0.len(), 5);
    }

    #[test]
    fn bounded_by_the_limit_of_completed_revisions() {
        let mut h = History::default();
        let t = |m: u32| at(&format!("2026-02-16T06:{m:02}:00Z"));
        for i in 0..5u32 {
            h.record_completion(&format!("c{i}"), Some(t(2 * i)), t(2 * i + 1), 2);
        }
        for i in 0..3u32 {
            h.record_rollback(&format!("r{i}"), Some(t(20 + i)), rolled("c4"), 2);
        }
        // Rolled-back revisions are remembered beyond the limit: each holds a revert to it.
        let revisions: Vec<&str> = h.0.iter().map(|e| e.revision.as_str()).collect();
        assert_eq!(revisions, ["r2", "r1", "r0", "c4", "c3"]);
        assert_eq!(h.kept_revisions(), BTreeSet::from(["c4", "c3"]));
        assert_eq!(h.last_known_good("r2", |_| true).unwrap().revision, "c4");
        // … up to ROLLED_BACK_KEPT of them.
        for i in 3..(ROLLED_BACK_KEPT as u32 + 5) {
            h.record_rollback(&format!("r{i}"), None, rolled("c4"), 2);
        }
        assert_eq!(
            h.0.iter().filter(|e| e.rolled_back.is_some()).count(),
            ROLLED_BACK_KEPT
        );
        assert!(h.rolled_back("r0").is_none());
        assert!(
            h.rolled_back(&format!("r{}", ROLLED_BACK_KEPT + 4))
                .is_some()
        );
    }
}
