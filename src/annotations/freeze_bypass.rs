//! `promoter.dev/freeze-bypass`: `promoter freeze bypass` lets one promotion start stages while a
//! freeze holds it, until a time, with who and why on record. Kept after it expires (the audit
//! trail); replaced by the next bypass. Unlike the other records, a value that is not a valid
//! bypass is reported ("present but invalid"), so that the status can say why it is ignored.

use super::keys::{FREEZE_BYPASS, annotation};
use crate::api::{ClusterPromotion, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeBypass {
    /// Who, as shown: the authenticated user, with the operator's `--by` note.
    pub by: String,
    /// The username the API server authenticated for `promoter freeze bypass` (a
    /// SelfSubjectReview); a record without one is not a bypass (the book's invariants, docs/src/contributors/invariants.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    pub reason: String,
    pub until: Timestamp,
    /// The one freeze bypassed; absent: any freeze.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<String>,
}

/// The bypass recorded on `p`: None when there is none, `Err(why)` when the value is not a valid
/// bypass (hand-written without `by`, the authenticated `user`, `reason` or a parsable `until`;
/// not JSON): it is ignored.
pub fn freeze_bypass(p: &ClusterPromotion) -> Option<Result<FreezeBypass, String>> {
    let raw = annotation(p, FREEZE_BYPASS)?;
    Some(validate(&raw))
}

fn validate(raw: &str) -> Result<FreezeBypass, String> {
    let ignored = |why: &str| Err(format!("{FREEZE_BYPASS} is ignored: {why}"));
    let Ok(Value::Object(v)) = serde_json::from_str::<Value>(raw) else {
        return ignored("it is not a JSON object");
    };
    let text = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    if text("by").is_none() {
        return ignored("it does not say who (by)");
    }
    let Some(user) = text("user") else {
        return ignored(
            "it does not name the identity the API server authenticated (user); `promoter freeze bypass` records it",
        );
    };
    let by = text("by").unwrap_or_default();
    // `by` is what every message shows: it must be the authenticated user (with a note).
    if by != user && !by.starts_with(&format!("{user} (")) {
        return ignored(&format!(
            "its by {by:?} is not its authenticated user {user:?}"
        ));
    }
    if text("reason").is_none() {
        return ignored("it does not say why (reason)");
    }
    match text("until") {
        None => return ignored("it has no end (until)"),
        Some(u) if Timestamp::parse(u).is_err() => {
            return ignored(&format!("its until {u:?} is not an RFC 3339 time"));
        }
        Some(_) => {}
    }
    serde_json::from_value(Value::Object(v.clone()))
        .or_else(|e| ignored(&format!("it does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_written_bypasses_say_why_they_are_ignored() {
        let ok = r#"{"by":"alice","user":"alice","at":"2026-12-24T10:00:00Z","reason":"hotfix","until":"2026-12-24T14:00:00Z","freeze":"holidays"}"#;
        let b = validate(ok).unwrap();
        assert_eq!(b.freeze.as_deref(), Some("holidays"));
        assert_eq!(serde_json::to_string(&b).unwrap(), ok);
        for (raw, why) in [
            ("yes", "it is not a JSON object"),
            (
                r#"{"reason":"x","until":"2026-12-24T14:00:00Z"}"#,
                "it does not say who (by)",
            ),
            (
                r#"{"by":"a","user":"a","reason":" ","until":"2026-12-24T14:00:00Z"}"#,
                "it does not say why (reason)",
            ),
            (
                r#"{"by":"a","user":"a","reason":"x"}"#,
                "it has no end (until)",
            ),
            (
                r#"{"by":"a","reason":"x","until":"2026-12-24T14:00:00Z"}"#,
                "it does not name the identity the API server authenticated (user)",
            ),
            (
                r#"{"by":"a (INC-1)","user":"b","reason":"x","until":"2026-12-24T14:00:00Z"}"#,
                r#"its by "a (INC-1)" is not its authenticated user "b""#,
            ),
            (
                r#"{"by":"a","user":"a","reason":"x","until":"4h"}"#,
                r#"its until "4h" is not an RFC 3339 time"#,
            ),
            (
                r#"{"by":"a","user":"a","reason":"x","until":"2026-12-24T14:00:00Z","at":"now"}"#,
                "it does not parse",
            ),
        ] {
            let e = validate(raw).unwrap_err();
            assert!(
                e.starts_with("promoter.dev/freeze-bypass is ignored: "),
                "{e}"
            );
            assert!(e.contains(why), "{raw}: {e}");
        }
    }
}
