//! promoter's own records on a ClusterPromotion. Extensions live in annotations, since the API
//! server prunes status fields the Sveltos schema does not have; every write of a record is a JSON
//! patch guarded by the resourceVersion the pass observed (see `pass::act`).
//!
//! * `promoter.dev/paused`: set by `promoter pause`; every pass leaves the promotion alone.
//! * `promoter.dev/approval.<stage>`: who approved with `promoter approve`, and for which revision.
//!   It lives exactly as long as the approval it describes: it is removed in the same patch that
//!   consumes the approval, and a record whose approval was revoked by hand is removed, so it never
//!   judges a later hand approval (`kubectl patch ... approved: true`).
//! * `promoter.dev/grant.<stage>`: an approval consumed for one run (see [`Run`]). Consuming moves
//!   the approval from `spec.stages[i].trigger.manual.approved` into this record in one write, before
//!   the status write that records the promotion; the grant approves that stage of that run only.
//! * `promoter.dev/completed`: the run whose last stage was promoted past. Only a new run (a new
//!   revision) undoes a completion.
//! * `promoter.dev/history`: the bounded revision history ([`history`]); `promoter.dev/revision-sweep`:
//!   stored revisions it forgot are still to be deleted ([`revision_sweep`]).
//! * `promoter.dev/failed`, `rollback`, `aborted`, `retry`: what holds or releases the current run
//!   ([`run_holds`]).
//! * `promoter.dev/budgeted`: the clusters counted against their stage's failure budget in the
//!   current run ([`budgeted`]).
//! * `promoter.dev/deadline-clock`: what the pass saw of the running deadline, in its own clock
//!   ([`deadline_clock`]).
//! * `promoter.dev/freeze-bypass`: `promoter freeze bypass` ([`freeze_bypass`]).
//! * `promoter.dev/outbox`: the transitions still to be notified ([`outbox`]).
//! * `promoter.dev/redeploy`: what Sveltos redeploys after promoter changed a profile's spec, and
//!   what the summaries carried before ([`redeploy`]).
//!
//! The settings annotations (`progress-deadline`, `failure-policy`, …) are in [`crate::settings`].

pub mod budgeted;
pub mod deadline_clock;
pub mod freeze_bypass;
pub mod history;
mod keys;
pub mod outbox;
pub mod redeploy;
pub mod revision_sweep;
pub mod run_holds;

pub use budgeted::{BUDGETED, Budgeted, BudgetedCluster, budgeted, budgeted_in, budgeted_now};
pub use deadline_clock::{DEADLINE_CLOCK, DeadlineClock, Subject, deadline_clock};
pub use freeze_bypass::{FreezeBypass, freeze_bypass};
pub use history::{Cause, History, HistoryEntry, RolledBack};
pub use keys::*;
pub use revision_sweep::{REVISION_SWEEP, sweep_due};
pub use run_holds::{
    Aborted, Failed, Retry, Rollback, RollbackMiss, aborted, failed, retry, rollback,
};

use crate::api::ClusterPromotion;
use crate::api::promotion_revision::hex;
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// An approval consumed for one run of one stage. `approval` is the `promoter approve` record it
/// came with, so that an approval whose run is superseded before its promotion was recorded can be
/// given back exactly as it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub run: Run,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Record>,
}

/// Whether the promotion carries the annotation `key` (whatever its value).
pub fn has(p: &ClusterPromotion, key: &str) -> bool {
    p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// A record, or for a hand-written value that is not JSON, the value as `by`.
fn record(p: &ClusterPromotion, key: &str) -> Option<Record> {
    let v = annotation(p, key)?;
    Some(serde_json::from_str(&v).unwrap_or(Record {
        by: v,
        at: String::new(),
        revision: None,
        reason: None,
    }))
}

/// The record `promoter pause` writes, if `value` is one.
pub fn paused_record(value: &str) -> Option<Record> {
    serde_json::from_str(value).ok()
}

/// A hand-written `promoter.dev/paused` that says no (`false`, `no`, `off`, `0`, empty): no pause.
pub fn not_a_pause(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "false" | "no" | "off" | "0" | ""
    )
}

/// Who paused `p`, and since when: the record `promoter pause` writes. A value written by hand is
/// explained instead of read as a name: one that says no (`paused=false`) is no pause; anything
/// else pauses "by hand", quoting the value.
pub fn paused(p: &ClusterPromotion) -> Option<Record> {
    let value = annotation(p, PAUSED)?;
    if let Some(r) = paused_record(&value) {
        return Some(r);
    }
    if not_a_pause(&value) {
        return None;
    }
    Some(Record {
        by: format!("hand ({PAUSED}={value:?}, not written by `promoter pause`)"),
        at: String::new(),
        revision: None,
        reason: None,
    })
}

/// The longest name part of an annotation key (IsQualifiedName in apimachinery
/// `pkg/util/validation/validation.go`): a longer key makes the API server refuse the write.
const KEY_NAME_MAX: usize = 63;

/// `<prefix><stage>`, or for a stage name too long for an annotation key, a prefix of the name and
/// a digest of the whole name, so that every stage name upstream accepts has a valid, distinct key.
fn stage_key(prefix: &str, stage: &str) -> String {
    let (domain, name_prefix) = prefix.split_once('/').unwrap_or(("", prefix));
    if name_prefix.len() + stage.len() <= KEY_NAME_MAX {
        return format!("{prefix}{stage}");
    }
    let digest = hex(&sha2::Sha256::digest(stage.as_bytes()), 8);
    let keep = KEY_NAME_MAX - name_prefix.len() - digest.len() - 1;
    // Stage names are DNS-1123 (ASCII), so a byte cut is a character cut; be safe regardless.
    let mut cut = keep.min(stage.len());
    while !stage.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{domain}/{name_prefix}{}-{digest}", &stage[..cut])
}

pub fn approval_key(stage: &str) -> String {
    stage_key(APPROVAL_PREFIX, stage)
}

pub fn approval(p: &ClusterPromotion, stage: &str) -> Option<Record> {
    record(p, &approval_key(stage))
}

pub fn grant_key(stage: &str) -> String {
    stage_key(GRANT_PREFIX, stage)
}

/// The grant of a stage; a value that does not parse grants nothing.
pub fn grant(p: &ClusterPromotion, stage: &str) -> Option<Grant> {
    serde_json::from_str(&annotation(p, &grant_key(stage))?).ok()
}

/// The completed run; a value that does not parse completes nothing.
pub fn completed(p: &ClusterPromotion) -> Option<Run> {
    serde_json::from_str(&annotation(p, COMPLETED)?).ok()
}

/// The last stage was promoted past: the run is complete until the next revision. Read from the
/// completion record, never from status text (which pause/resume or a blocked pass overwrite).
pub fn is_complete(p: &ClusterPromotion) -> bool {
    let run = p.status.as_ref().and_then(Run::of);
    run.is_some() && completed(p) == run
}

/// Whether the promotion carries any completion record, even one that does not parse.
pub fn has_completion_record(p: &ClusterPromotion) -> bool {
    annotation(p, COMPLETED).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::meta::qualified_name;

    /// The upstream CRD gives a stage name no pattern: a long name of multi-byte characters is
    /// cut on a character boundary, never past the 63 bytes of a key's name part, and two such
    /// names keep distinct keys.
    #[test]
    fn a_long_stage_name_of_multibyte_characters_is_cut_between_characters() {
        let e = "é".repeat(40);
        let o = format!("{}ö", "é".repeat(39));
        for (key, prefix) in [
            (approval_key(&e), APPROVAL_PREFIX),
            (grant_key(&e), GRANT_PREFIX),
        ] {
            let name = key.split_once('/').map(|(_, n)| n).unwrap_or_default();
            let name_prefix = prefix.split_once('/').map(|(_, n)| n).unwrap_or_default();
            // A cut inside an `é` (2 bytes) moves back one byte; 8 hex digits and a dash follow.
            assert!(
                (KEY_NAME_MAX - 1..=KEY_NAME_MAX).contains(&name.len()),
                "{key}: {} bytes",
                name.len()
            );
            let cut = &name[name_prefix.len()..name.len() - 9];
            assert!(cut.chars().all(|c| c == 'é') && !cut.is_empty(), "{key}");
        }
        assert_ne!(approval_key(&e), approval_key(&o));
    }

    #[test]
    fn every_stage_name_has_a_valid_distinct_key() {
        let short = "production";
        assert_eq!(approval_key(short), "promoter.dev/approval.production");
        assert_eq!(grant_key(short), "promoter.dev/grant.production");
        let long_a = format!("{}-a", "x".repeat(61));
        let long_b = format!("{}-b", "x".repeat(61));
        for stage in [
            short,
            "a".repeat(54).as_str(),
            "a".repeat(55).as_str(),
            &long_a,
            &long_b,
        ] {
            for key in [approval_key(stage), grant_key(stage)] {
                assert!(
                    qualified_name(&key).is_empty(),
                    "{key}: {:?}",
                    qualified_name(&key)
                );
            }
        }
        assert_eq!(
            approval_key(&"a".repeat(54)),
            format!("promoter.dev/approval.{}", "a".repeat(54))
        );
        assert_ne!(approval_key(&long_a), approval_key(&long_b));
        assert_ne!(grant_key(&long_a), grant_key(&long_b));
    }
}
