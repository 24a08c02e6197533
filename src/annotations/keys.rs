//! The annotation keys of promoter's records and what every record shares (who and when, the
//! run), apart from the records themselves, which import only from here.

use crate::api::{ClusterPromotion, ClusterPromotionStatus, Timestamp};
use serde::{Deserialize, Serialize};

/// Set by `promoter pause`; every pass leaves the promotion alone while it is present.
pub const PAUSED: &str = "promoter.dev/paused";
/// Prefix of the per-stage approval record written by `promoter approve`.
pub const APPROVAL_PREFIX: &str = "promoter.dev/approval.";
/// Prefix of the per-stage record of an approval consumed for one run.
pub const GRANT_PREFIX: &str = "promoter.dev/grant.";
/// The run whose rollout is complete.
pub const COMPLETED: &str = "promoter.dev/completed";
/// The bounded revision history.
pub const HISTORY: &str = "promoter.dev/history";
/// A stage of the current run missed its progress deadline.
pub const FAILED: &str = "promoter.dev/failed";
/// A rollback of the current run.
pub const ROLLBACK: &str = "promoter.dev/rollback";
/// `promoter abort` of the current run.
pub const ABORTED: &str = "promoter.dev/aborted";
/// `promoter resume` of a rolled-back revision.
pub const RETRY: &str = "promoter.dev/retry";
/// `promoter freeze bypass`.
pub const FREEZE_BYPASS: &str = "promoter.dev/freeze-bypass";
/// What Sveltos redeploys after promoter changed a generated profile's spec
/// ([`super::redeploy`]).
pub const REDEPLOY: &str = "promoter.dev/redeploy";
/// On a PromotionFreeze: who created it with `promoter freeze create` (a [`Record`]).
pub const CREATED_BY: &str = "promoter.dev/created-by";

/// A record's annotation value: compact JSON, as the records above are written.
pub fn encode(record: &impl Serialize) -> String {
    serde_json::to_string(record).unwrap_or_default()
}

/// Who did something, and when (the value of the annotations above, as JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "WrittenRecord")]
pub struct Record {
    pub by: String,
    pub at: String,
    /// For approvals: the profileSpecHash of the revision approved; none for a pre-approval of the
    /// next revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Why, as given with `--reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A [`Record`] as written: the revision's ID (`revisionId`, what every command, Event and
/// notification calls it) beside its hash, for the person who reads the annotation. Derived on
/// every write, never read back, so a record cannot hold an ID of another revision.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WrittenRecord {
    by: String,
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<Record> for WrittenRecord {
    fn from(r: Record) -> WrittenRecord {
        WrittenRecord {
            revision_id: r.revision.as_deref().map(crate::api::revision_id),
            by: r.by,
            at: r.at,
            revision: r.revision,
            reason: r.reason,
        }
    }
}

/// One run of a promotion: one revision (both hashes) started at one moment (the first stage's
/// `lastUpdateReconciledTime`, set by the restart). Reverting to an earlier revision is a new run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub revision: String,
    pub stages: String,
    #[serde(default)]
    pub since: String,
}

impl Run {
    /// When the run started (`since`), as the history keys a run's entry; None without one.
    pub fn started_at(&self) -> Option<Timestamp> {
        Timestamp::parse(&self.since).ok()
    }

    /// The run the status records, if it has started. A restart writes the first stage's entry
    /// first, so the first entry is the first stage's.
    pub fn of(status: &ClusterPromotionStatus) -> Option<Run> {
        Some(Run {
            revision: status.profile_spec_hash.clone()?,
            stages: status.stages_hash.clone()?,
            since: status
                .stages
                .iter()
                .flatten()
                .next()
                .and_then(|s| s.last_update_reconciled_time.as_ref())
                .map(ToString::to_string)
                .unwrap_or_default(),
        })
    }
}

pub(crate) fn annotation(p: &ClusterPromotion, key: &str) -> Option<String> {
    p.metadata.annotations.as_ref()?.get(key).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_shows_the_revision_id_beside_the_hash_and_reads_back() {
        let r = Record {
            by: "alice".into(),
            at: "2026-02-16T06:00:00Z".into(),
            revision: Some("abc".into()),
            reason: None,
        };
        let text = encode(&r);
        assert_eq!(
            text,
            r#"{"by":"alice","at":"2026-02-16T06:00:00Z","revision":"abc","revisionId":"ba7816bf8f"}"#
        );
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let pre = Record {
            revision: None,
            ..r
        };
        assert_eq!(
            encode(&pre),
            r#"{"by":"alice","at":"2026-02-16T06:00:00Z"}"#
        );
    }

    #[test]
    fn a_run_starts_when_its_since_says_and_without_one_never() {
        let run = Run {
            revision: "r1".into(),
            stages: "s1".into(),
            since: "2026-02-16T06:00:00Z".into(),
        };
        assert_eq!(
            run.started_at().map(|t| t.to_string()),
            Some("2026-02-16T06:00:00Z".to_string())
        );
        let unstarted = Run {
            since: String::new(),
            ..run
        };
        assert_eq!(unstarted.started_at(), None);
    }
}
