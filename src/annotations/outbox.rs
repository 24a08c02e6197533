//! `promoter.dev/outbox`: the transitions of a promotion still to be notified, a transactional
//! outbox in the promotion's own annotations (the pass keeps no state anywhere else).
//!
//! A pass adds an [`Entry`] per transition it decides in its guarded record patch, before the
//! status write that records the transition. The entry names that status by a digest
//! ([`status_token`]): it is deliverable only once the promotion's status is that one (the write
//! happened), or once a pass saw it so and marked it `confirmed` (before any later status write
//! moves the status on). An entry whose status write never happened is never sent. The
//! [`key`] is stable per transition, so a resend after a crash carries the same idempotency key.

use super::keys::Run;
use crate::api::promotion_revision::hex;
use crate::api::{ClusterPromotion, ClusterPromotionStatus, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The annotation holding the outbox (a JSON list of [`Entry`], oldest first).
pub const OUTBOX: &str = "promoter.dev/outbox";
/// At most this many entries; the oldest are dropped (and counted) beyond it.
pub const MAX_ENTRIES: usize = 50;
/// At most this many bytes of annotation value; the oldest entries are dropped beyond it.
pub const MAX_BYTES: usize = 16 * 1024;
/// A message is cut to this many bytes (an Event's note has the same limit).
pub const MESSAGE_LIMIT: usize = 1024;
/// A delivery error is cut to this many bytes.
pub const ERROR_LIMIT: usize = 256;

/// One transition to notify.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The idempotency key ([`key`]): hex SHA-256, the same for every send of this transition.
    pub key: String,
    /// What happened, as rules name it (`StageCompleted`, `Failed`, …).
    pub transition: String,
    /// The pass's Event reason it comes from (`StageProvisioned`, `DeploymentFailed`, …).
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    pub message: String,
    pub at: Timestamp,
    /// The run's revision (`profileSpecHash`), when the status records one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// [`status_token`] of the status written with the transition.
    pub status: String,
    /// A pass saw that status recorded: deliverable from now on, whatever the status becomes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmed: bool,
    /// The receivers still to deliver to, by name; absent until routed (the rules could not be
    /// read when the transition was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<BTreeMap<String, Delivery>>,
}

/// How delivery to one receiver went so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Entry {
    /// Deliverable: confirmed, or the promotion's status is the one written with it.
    pub fn deliverable(&self, status_token: &str) -> bool {
        self.confirmed || self.status == status_token
    }
}

/// The outbox of a promotion. A value that does not parse is an empty outbox (`Err` says why).
pub fn read(p: &ClusterPromotion) -> Result<Vec<Entry>, String> {
    match super::annotation(p, OUTBOX) {
        None => Ok(Vec::new()),
        Some(v) => decode(&v),
    }
}

pub fn decode(value: &str) -> Result<Vec<Entry>, String> {
    serde_json::from_str(value).map_err(|e| format!("annotation {OUTBOX} does not parse: {e}"))
}

pub fn encode(entries: &[Entry]) -> String {
    super::encode(&entries)
}

/// A digest naming one status exactly (16 hex digits of SHA-256 of its JSON): equal for the
/// status a pass writes and the same status read back, different once anything in it changes.
pub fn status_token(status: Option<&ClusterPromotionStatus>) -> String {
    // Through the JSON value first, so that a status and its round trip are one text.
    let value = status
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_default();
    hex(&Sha256::digest(value.to_string().as_bytes()), 16)
}

/// The idempotency key of a transition: hex SHA-256 of the promotion's UID, the run, the stage,
/// the reason, the message and the status written with it (which holds the stage's description
/// with its timestamp). Two passes deciding the same transition from the same observation at the
/// same second compute the same key; a later transition with the same text has another status.
pub fn key(
    uid: &str,
    run: Option<&Run>,
    stage: Option<&str>,
    reason: &str,
    message: &str,
    status_token: &str,
) -> String {
    let mut h = Sha256::new();
    let (revision, since) = run.map_or(("", ""), |r| (r.revision.as_str(), r.since.as_str()));
    for field in [
        uid,
        revision,
        since,
        stage.unwrap_or_default(),
        reason,
        message,
        status_token,
    ] {
        // Length-prefixed, so that no two field lists make one byte string.
        h.update((field.len() as u64).to_be_bytes());
        h.update(field.as_bytes());
    }
    hex(&h.finalize(), 64)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn cut(s: &str, max: usize) -> String {
    crate::bounded_text::prefix(s, max).to_string()
}

/// Keeps the newest entries within [`MAX_ENTRIES`] and [`MAX_BYTES`]; returns the dropped ones.
pub fn bound(entries: &mut Vec<Entry>) -> Vec<Entry> {
    let mut dropped = Vec::new();
    while entries.len() > MAX_ENTRIES || (entries.len() > 1 && encode(entries).len() > MAX_BYTES) {
        dropped.push(entries.remove(0));
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StageStatus;
    use chrono::TimeZone;

    fn at(min: u32) -> Timestamp {
        Timestamp::new(
            chrono::Utc
                .with_ymd_and_hms(2026, 2, 16, 6, min, 0)
                .unwrap(),
        )
    }

    fn entry(n: usize, message: &str) -> Entry {
        Entry {
            key: format!("{n:064x}"),
            transition: "StageCompleted".into(),
            reason: "StageProvisioned".into(),
            stage: Some("dev".into()),
            message: message.into(),
            at: at(0),
            revision: None,
            status: "0123456789abcdef".into(),
            confirmed: false,
            to: None,
        }
    }

    fn status(description: &str) -> ClusterPromotionStatus {
        ClusterPromotionStatus {
            stages: Some(vec![StageStatus {
                name: "dev".into(),
                current_status_description: Some(description.into()),
                last_status_check_time: Some(at(1)),
                ..Default::default()
            }]),
            current_stage_name: Some("dev".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_status_and_its_round_trip_have_one_token() {
        let s = status("Clusters are being provisioned (2026-02-16T06:01:00Z)");
        let back: ClusterPromotionStatus =
            serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(status_token(Some(&s)), status_token(Some(&back)));
        assert_eq!(status_token(Some(&s)).len(), 16);
        let later = status("Clusters are being provisioned (2026-02-16T06:02:00Z)");
        assert_ne!(status_token(Some(&s)), status_token(Some(&later)));
        assert_ne!(status_token(None), status_token(Some(&s)));
        assert_eq!(status_token(None), status_token(None));
    }

    #[test]
    fn keys_are_stable_and_tell_transitions_apart() {
        let run = Run {
            revision: "r1".into(),
            stages: "s1".into(),
            since: "2026-02-16T06:00:00Z".into(),
        };
        let k = |stage: &str, reason: &str, message: &str, token: &str| {
            key("uid-1", Some(&run), Some(stage), reason, message, token)
        };
        let a = k("dev", "StageProvisioned", "Stage dev provisioned", "t1");
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            a,
            k("dev", "StageProvisioned", "Stage dev provisioned", "t1")
        );
        // Every field counts.
        assert_ne!(
            a,
            k("prod", "StageProvisioned", "Stage dev provisioned", "t1")
        );
        assert_ne!(
            a,
            k("dev", "AwaitingApproval", "Stage dev provisioned", "t1")
        );
        assert_ne!(
            a,
            k("dev", "StageProvisioned", "Stage dev provisioned.", "t1")
        );
        assert_ne!(
            a,
            k("dev", "StageProvisioned", "Stage dev provisioned", "t2")
        );
        assert_ne!(
            a,
            key(
                "uid-2",
                Some(&run),
                Some("dev"),
                "StageProvisioned",
                "Stage dev provisioned",
                "t1"
            )
        );
        assert_ne!(
            a,
            key(
                "uid-1",
                None,
                Some("dev"),
                "StageProvisioned",
                "Stage dev provisioned",
                "t1"
            )
        );
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        assert_ne!(
            key("u", None, Some("ab"), "c", "m", "t"),
            key("u", None, Some("a"), "bc", "m", "t")
        );
    }

    #[test]
    fn confirmation() {
        let mut e = entry(1, "m");
        assert!(e.deliverable("0123456789abcdef"));
        assert!(!e.deliverable("fedcba9876543210"));
        e.confirmed = true;
        assert!(e.deliverable("fedcba9876543210"));
    }

    #[test]
    fn the_outbox_is_bounded_oldest_first() {
        let mut entries: Vec<Entry> = (0..60).map(|n| entry(n, "short")).collect();
        let dropped = bound(&mut entries);
        assert_eq!(entries.len(), MAX_ENTRIES);
        assert_eq!(dropped.len(), 10);
        assert_eq!(dropped[0].key, format!("{:064x}", 0));
        assert_eq!(entries[0].key, format!("{:064x}", 10));
        let big = "x".repeat(MESSAGE_LIMIT);
        let mut entries: Vec<Entry> = (0..30).map(|n| entry(n, &big)).collect();
        let dropped = bound(&mut entries);
        assert!(
            encode(&entries).len() <= MAX_BYTES,
            "{}",
            encode(&entries).len()
        );
        assert!(!dropped.is_empty() && entries.len() + dropped.len() == 30);
        assert_eq!(entries.last().unwrap().key, format!("{:064x}", 29));
    }

    #[test]
    fn the_byte_bound_is_inclusive_and_keeps_a_dozen_full_messages_and_the_newest_entry() {
        // Two entries encoding to exactly MAX_BYTES are kept; one byte more drops the oldest.
        let base = encode(&[entry(0, "m"), entry(1, "")]).len();
        let fill = "x".repeat(MAX_BYTES - base);
        let mut exact = vec![entry(0, "m"), entry(1, &fill)];
        assert_eq!(encode(&exact).len(), MAX_BYTES);
        assert!(bound(&mut exact).is_empty());
        assert_eq!(exact.len(), 2);
        let mut over = vec![entry(0, "mm"), entry(1, &fill)];
        let dropped = bound(&mut over);
        assert_eq!(dropped.len(), 1);
        assert_eq!(over[0].key, format!("{:064x}", 1));
        // 16 KiB holds more than a dozen messages at their limit.
        let big = "x".repeat(MESSAGE_LIMIT);
        let mut full: Vec<Entry> = (0..30).map(|n| entry(n, &big)).collect();
        bound(&mut full);
        assert!(full.len() >= 12, "{}", full.len());
        // An entry bigger than the bound alone is kept, not dropped to nothing.
        let mut alone = vec![entry(0, &"x".repeat(MAX_BYTES + 1))];
        assert!(bound(&mut alone).is_empty());
        assert_eq!(alone.len(), 1);
    }

    #[test]
    fn entries_round_trip_and_stay_compact() {
        let mut e = entry(7, "Stage dev provisioned");
        let text = encode(std::slice::from_ref(&e));
        assert!(
            !text.contains("confirmed") && !text.contains("\"to\""),
            "{text}"
        );
        e.confirmed = true;
        e.to = Some(BTreeMap::from([
            ("slack".to_string(), Delivery::default()),
            (
                "hook".to_string(),
                Delivery {
                    attempts: 2,
                    last_error: Some("HTTP 500".into()),
                },
            ),
        ]));
        let text = encode(std::slice::from_ref(&e));
        assert!(text.contains(r#""slack":{}"#), "{text}");
        assert_eq!(decode(&text).unwrap(), vec![e]);
        assert!(decode("not json").unwrap_err().contains(OUTBOX));
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("hello", 10), "hello");
    }
}
