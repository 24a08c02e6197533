//! promoter's own annotations on a ClusterPromotion (extensions live in annotations, since the API
//! server would prune fields the Sveltos schema does not have).

use crate::api::ClusterPromotion;
use serde::{Deserialize, Serialize};

/// Set by `promoter pause`; every pass leaves the promotion alone while it is present.
pub const PAUSED: &str = "promoter.dev/paused";
/// Prefix of the per-stage approval record written by `promoter approve`.
pub const APPROVAL_PREFIX: &str = "promoter.dev/approval.";

/// Who did something, and when (the value of the annotations above, as JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub by: String,
    pub at: String,
    /// For approvals: the profileSpecHash of the revision approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

fn annotation(p: &ClusterPromotion, key: &str) -> Option<String> {
    p.metadata.annotations.as_ref()?.get(key).cloned()
}

/// A record, or for a hand-written value that is not JSON, the value as `by`.
fn record(p: &ClusterPromotion, key: &str) -> Option<Record> {
    let v = annotation(p, key)?;
    Some(serde_json::from_str(&v).unwrap_or(Record {
        by: v,
        at: String::new(),
        revision: None,
    }))
}

pub fn paused(p: &ClusterPromotion) -> Option<Record> {
    record(p, PAUSED)
}

pub fn approval_key(stage: &str) -> String {
    format!("{APPROVAL_PREFIX}{stage}")
}

pub fn approval(p: &ClusterPromotion, stage: &str) -> Option<Record> {
    record(p, &approval_key(stage))
}
