//! Writing stage statuses quietly: a timestamp moves only when the text it belongs to changes, so a
//! pass that learns nothing new writes nothing.

use crate::api::{ClusterPromotionStatus, StageStatus, Timestamp};
use crate::bounded_text::recorded;
use chrono::{DateTime, Utc};

/// `<text> (2006-01-02T15:04:05Z)`, upstream's description format.
pub fn with_timestamp(text: &str, now: DateTime<Utc>) -> String {
    format!("{text} ({})", Timestamp::new(now))
}

/// The description's text without its trailing timestamp.
pub fn description_text(description: &str) -> &str {
    match description.rfind(" (") {
        Some(i) if description.ends_with("Z)") && description.len() - i == 23 => &description[..i],
        _ => description,
    }
}

/// When the description's text was written: its trailing timestamp, if it has one.
pub fn description_time(description: &str) -> Option<DateTime<Utc>> {
    let text = description_text(description);
    let stamp = description.get(text.len() + 2..description.len().checked_sub(1)?)?;
    Timestamp::parse(stamp).ok().map(|t| t.as_datetime())
}

/// Sets the description (its text bounded, `bounded_text`), moving lastStatusCheckTime only when
/// the text changes.
pub fn set_description(stage: &mut StageStatus, text: &str, now: DateTime<Utc>) {
    let text = &recorded(text);
    if stage
        .current_status_description
        .as_deref()
        .map(description_text)
        != Some(text)
    {
        stage.current_status_description = Some(with_timestamp(text, now));
        stage.last_status_check_time = Some(Timestamp::new(now));
    }
}

/// Sets the failureMessage (bounded: it often carries Sveltos' messages), moving
/// lastStatusCheckTime only when it changes.
pub fn set_failure(stage: &mut StageStatus, message: Option<&str>, now: DateTime<Utc>) {
    let message = message.map(recorded);
    let message = message.as_deref();
    if stage.failure_message.as_deref() != message {
        stage.failure_message = message.map(String::from);
        stage.last_status_check_time = Some(Timestamp::new(now));
    }
}

/// The first entry for `name`, appended if there is none.
pub fn entry<'a>(status: &'a mut ClusterPromotionStatus, name: &str) -> &'a mut StageStatus {
    let stages = status.stages.get_or_insert_with(Vec::new);
    let idx = match stages.iter().position(|s| s.name == name) {
        Some(i) => i,
        None => {
            stages.push(StageStatus {
                name: name.to_string(),
                ..Default::default()
            });
            stages.len() - 1
        }
    };
    &mut stages[idx]
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_description_says_when_its_text_was_written() {
        let t0 = Utc.with_ymd_and_hms(2026, 2, 16, 6, 28, 24).unwrap();
        assert_eq!(
            description_time(&with_timestamp("Successfully provisioned", t0)),
            Some(t0)
        );
        assert_eq!(description_time("Successfully provisioned"), None);
        assert_eq!(description_time("Frozen: (until x)"), None);
    }

    #[test]
    fn quiet_updates() {
        let t0 = Utc.with_ymd_and_hms(2026, 2, 16, 6, 28, 24).unwrap();
        let t1 = t0 + chrono::Duration::minutes(1);
        let mut s = StageStatus::default();
        set_description(&mut s, "Paused: Awaiting Manual Approval", t0);
        assert_eq!(
            s.current_status_description.as_deref(),
            Some("Paused: Awaiting Manual Approval (2026-02-16T06:28:24Z)")
        );
        let before = s.clone();
        set_description(&mut s, "Paused: Awaiting Manual Approval", t1);
        set_failure(&mut s, None, t1);
        assert_eq!(s, before, "same text: nothing moves");
        set_failure(&mut s, Some("x"), t1);
        assert_eq!(s.last_status_check_time, Some(Timestamp::new(t1)));
        assert_eq!(
            description_text(
                "Window Closed: Waiting for Next Schedule (2026-02-16T06:36:24Z). (2026-02-16T06:34:24Z)"
            ),
            "Window Closed: Waiting for Next Schedule (2026-02-16T06:36:24Z)."
        );
        assert_eq!(description_text("no timestamp"), "no timestamp");
    }

    /// Only upstream's trailing ` (2006-01-02T15:04:05Z)` is a timestamp: a description written
    /// without one (by hand, by another controller) keeps its parenthesis; read without it, a pass
    /// setting the shorter text would take it as written already and say nothing (mutation
    /// campaign, issue 33).
    #[test]
    fn only_a_trailing_timestamp_is_taken_off_a_description() {
        for kept in [
            "Paused by alice (on call)",
            // Ends like a timestamp, is not one's length.
            "Blocked (see ticket OPS-1Z)",
            // A timestamp's length, without its `Z)`.
            "Blocked (2026-02-16T06:28:24z)",
        ] {
            assert_eq!(description_text(kept), kept);
        }
        assert_eq!(
            description_text("Blocked (see ticket OPS-1Z) (2026-02-16T06:28:24Z)"),
            "Blocked (see ticket OPS-1Z)"
        );
        let t0 = Utc.with_ymd_and_hms(2026, 2, 16, 6, 28, 24).unwrap();
        let mut s = StageStatus {
            current_status_description: Some("Paused by alice (on call)".into()),
            ..Default::default()
        };
        set_description(&mut s, "Paused by alice", t0);
        assert_eq!(
            s.current_status_description.as_deref(),
            Some("Paused by alice (2026-02-16T06:28:24Z)")
        );
        assert_eq!(s.last_status_check_time, Some(Timestamp::new(t0)));
    }
}
