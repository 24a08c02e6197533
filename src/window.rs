//! Promotion windows: upstream's pair of five-field cron expressions (robfig/cron v1.2.0
//! `ParseStandard` syntax), plus an optional `CRON_TZ=<IANA zone>` prefix.
//!
//! A window is open when the last `from` occurrence ≤ now < the next `to` occurrence after it.
//! Occurrences are found by walking days and the hour and minute bitsets directly, both forwards and
//! backwards, so an evaluation costs microseconds even for `* * * * *` (upstream iterates minute by
//! minute over 366 days).
//!
//! Time zones (Vixie cron's rule, which robfig/cron, upstream's library, approximates): a
//! wall-clock time that does not exist (the spring-forward gap) fires at the first instant after the
//! gap; one that occurs twice (the fall-back hour) fires once, at its first instant.
//!
//! A window is a span of wall-clock time: it opens at a `from` occurrence and closes at the first
//! `to` wall-clock time strictly after that `from` wall-clock time, each mapped to an instant by the
//! rule above. So a window whose two ends fall into one spring-forward gap (`0 2 * * *` to
//! `0 3 * * *` in Europe/Berlin on the last Sunday of March: 02:00 and 03:00 are both 03:00 CEST) is
//! empty that day, not open for 24 hours; a window across the fall-back hour lasts one hour longer
//! in real time, like the wall-clock night it spans.
//! `@every <duration>` fires at multiples of the duration since the Unix epoch (upstream counts from
//! an arbitrary start, which a stateless evaluator cannot reproduce).

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;

/// How far `next` searches forwards (robfig gives up after five years too).
const MAX_FORWARD_DAYS: i64 = 5 * 366;
/// How far back a window's opening is searched (upstream's look-back).
const MAX_BACKWARD_DAYS: i64 = 366;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{expr:?}: {message}")]
pub struct CronError {
    pub expr: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// robfig's star bit: with `*` or `?` in day-of-month or day-of-week, both must match;
    /// with both restricted, either may (the cron OR rule).
    dom_star: bool,
    dow_star: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Fields(Fields),
    Every(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronSchedule {
    kind: Kind,
    tz: Tz,
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

fn parse_value(s: &str, b: &Bounds) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + b.min);
    }
    s.parse::<u32>()
        .map_err(|_| format!("failed to parse int from {s}"))
}

/// One comma-separated field: returns its bitset and whether it carries robfig's star bit.
fn parse_field(field: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                // robfig parses steps as Go ints; a step beyond the field's range selects only
                // its start. Kept as u64 and added with a check: `*/4294967295` never wraps.
                let step: u64 = s
                    .parse()
                    .ok()
                    .filter(|n| *n <= i64::MAX as u64)
                    .ok_or_else(|| format!("failed to parse int from {s}"))?;
                if step == 0 {
                    return Err(format!("step of range should be a positive number: {part}"));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (start, end) = if range == "*" || range == "?" {
            star = true;
            (b.min, b.max)
        } else if let Some((lo, hi)) = range.split_once('-') {
            (parse_value(lo, b)?, parse_value(hi, b)?)
        } else {
            let v = parse_value(range, b)?;
            // `N/step` means N through the maximum.
            (v, if step.is_some() { b.max } else { v })
        };
        if start < b.min {
            return Err(format!(
                "beginning of range ({start}) below minimum ({}): {part}",
                b.min
            ));
        }
        if end > b.max {
            return Err(format!(
                "end of range ({end}) above maximum ({}): {part}",
                b.max
            ));
        }
        if start > end {
            return Err(format!(
                "beginning of range ({start}) beyond end of range ({end}): {part}"
            ));
        }
        let step = step.unwrap_or(1);
        let mut v = u64::from(start);
        while v <= u64::from(end) {
            bits |= 1 << v;
            match v.checked_add(step) {
                Some(next) => v = next,
                None => break,
            }
        }
    }
    Ok((bits, star))
}

fn parse_go_seconds(d: &str) -> Option<i64> {
    let parsed = crate::api::GoDuration::parse(d).ok()?;
    // robfig rounds `@every` down to whole seconds, with a minimum of one second.
    Some((parsed.to_std().as_secs() as i64).max(1))
}

impl CronSchedule {
    /// Parses `[CRON_TZ=<zone> ]<five fields | descriptor>`; `default_tz` applies without a prefix.
    pub fn parse(expr: &str, default_tz: Tz) -> Result<Self, CronError> {
        let err = |message: String| CronError {
            expr: expr.to_string(),
            message,
        };
        let mut text = expr.trim();
        let mut tz = default_tz;
        if let Some(rest) = text
            .strip_prefix("CRON_TZ=")
            .or_else(|| text.strip_prefix("TZ="))
        {
            let (zone, rest) = rest
                .split_once(char::is_whitespace)
                .ok_or_else(|| err("missing schedule after the time zone".into()))?;
            tz = zone
                .parse::<Tz>()
                .map_err(|_| err(format!("unknown time zone {zone:?}")))?;
            text = rest.trim();
        }
        let standard = match text {
            "@yearly" | "@annually" => Some("0 0 1 1 *"),
            "@monthly" => Some("0 0 1 * *"),
            "@weekly" => Some("0 0 * * 0"),
            "@daily" | "@midnight" => Some("0 0 * * *"),
            "@hourly" => Some("0 * * * *"),
            _ => None,
        };
        if let Some(d) = text.strip_prefix("@every ") {
            let secs = parse_go_seconds(d.trim())
                .ok_or_else(|| err(format!("failed to parse duration {}", d.trim())))?;
            return Ok(CronSchedule {
                kind: Kind::Every(secs),
                tz,
            });
        }
        if text.starts_with('@') && standard.is_none() {
            return Err(err(format!("unrecognized descriptor: {text}")));
        }
        let text = standard.unwrap_or(text);
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "expected exactly 5 fields, found {}",
                fields.len()
            )));
        }
        let names = ["minute", "hour", "day of month", "month", "day of week"];
        let bounds = [&MINUTES, &HOURS, &DOM, &MONTHS, &DOW];
        let mut parsed = [(0u64, false); 5];
        for i in 0..5 {
            parsed[i] =
                parse_field(fields[i], bounds[i]).map_err(|m| err(format!("{}: {m}", names[i])))?;
        }
        Ok(CronSchedule {
            kind: Kind::Fields(Fields {
                minute: parsed[0].0,
                hour: parsed[1].0,
                dom: parsed[2].0,
                month: parsed[3].0,
                dow: parsed[4].0,
                dom_star: parsed[2].1,
                dow_star: parsed[4].1,
            }),
            tz,
        })
    }

    pub fn time_zone(&self) -> Tz {
        self.tz
    }

    /// The first wall-clock time of the schedule strictly after the wall-clock time `w`, within
    /// five years (`None` for `@every`, which has no wall clock).
    fn next_wall_after(&self, w: NaiveDateTime) -> Option<NaiveDateTime> {
        let Kind::Fields(f) = &self.kind else {
            return None;
        };
        for day in 0..=MAX_FORWARD_DAYS {
            let date = w.date() + Duration::days(day);
            if !f.date_matches(date) {
                continue;
            }
            for hour in (0..24).filter(|h| f.hour & (1 << h) != 0) {
                for minute in (0..60).filter(|m| f.minute & (1 << m) != 0) {
                    match date.and_hms_opt(hour, minute, 0) {
                        Some(naive) if naive > w => return Some(naive),
                        _ => {}
                    }
                }
            }
        }
        None
    }

    /// The first occurrence strictly after `t`, within five years.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let f = match &self.kind {
            Kind::Every(secs) => {
                return DateTime::from_timestamp((t.timestamp().div_euclid(*secs) + 1) * secs, 0);
            }
            Kind::Fields(f) => f,
        };
        let local = t.with_timezone(&self.tz).naive_local();
        for day in 0..=MAX_FORWARD_DAYS {
            let date = local.date() + Duration::days(day);
            if !f.date_matches(date) {
                continue;
            }
            // In the fall-back hour a wall-clock time earlier than `t`'s may still be later in UTC.
            let first_hour = if day == 0 {
                local.hour().saturating_sub(1)
            } else {
                0
            };
            for hour in (first_hour..24).filter(|h| f.hour & (1 << h) != 0) {
                for minute in (0..60).filter(|m| f.minute & (1 << m) != 0) {
                    let Some(naive) = date.and_hms_opt(hour, minute, 0) else {
                        continue;
                    };
                    if let Some(instant) = resolve(&self.tz, naive).into_iter().find(|i| *i > t) {
                        return Some(instant);
                    }
                }
            }
        }
        None
    }

    /// The last occurrence at or before `t`, within 366 days.
    pub fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.last_occurrence(t).map(|(_, instant)| instant)
    }

    /// The last occurrence at or before `t`: its wall-clock time (`None` for `@every`) and instant.
    fn last_occurrence(&self, t: DateTime<Utc>) -> Option<(Option<NaiveDateTime>, DateTime<Utc>)> {
        let f = match &self.kind {
            Kind::Every(secs) => {
                let at = DateTime::from_timestamp(t.timestamp().div_euclid(*secs) * secs, 0)?;
                return Some((None, at));
            }
            Kind::Fields(f) => f,
        };
        let local = t.with_timezone(&self.tz).naive_local();
        for day in 0..=MAX_BACKWARD_DAYS {
            let date = local.date() - Duration::days(day);
            if !f.date_matches(date) {
                continue;
            }
            let last_hour = if day == 0 {
                (local.hour() + 1).min(23)
            } else {
                23
            };
            for hour in (0..=last_hour).rev().filter(|h| f.hour & (1 << h) != 0) {
                for minute in (0..60).rev().filter(|m| f.minute & (1 << m) != 0) {
                    let Some(naive) = date.and_hms_opt(hour, minute, 0) else {
                        continue;
                    };
                    if let Some(instant) =
                        resolve(&self.tz, naive).into_iter().rev().find(|i| *i <= t)
                    {
                        return Some((Some(naive), instant));
                    }
                }
            }
        }
        None
    }
}

impl Fields {
    fn date_matches(&self, d: NaiveDate) -> bool {
        if self.month & (1 << d.month()) == 0 {
            return false;
        }
        let dom = self.dom & (1 << d.day()) != 0;
        let dow = self.dow & (1 << d.weekday().num_days_from_sunday()) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }
}

/// The instant a wall-clock time fires at: its only one, the first of two (fall-back), or the end of
/// a spring-forward gap.
fn resolve(tz: &Tz, naive: NaiveDateTime) -> Vec<DateTime<Utc>> {
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(dt) => vec![dt.with_timezone(&Utc)],
        LocalResult::Ambiguous(a, b) => vec![a.min(b).with_timezone(&Utc)],
        LocalResult::None => (1..=240)
            .map(|m| naive + Duration::minutes(m))
            .find_map(|n| tz.from_local_datetime(&n).earliest())
            .map(|dt| dt.with_timezone(&Utc))
            .into_iter()
            .collect(),
    }
}

/// A parsed `promotionWindow`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromotionWindow {
    pub from: CronSchedule,
    pub to: CronSchedule,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// Open; closes at the given time (`None`: `to` does not fire within five years).
    Open { closes_at: Option<DateTime<Utc>> },
    /// Closed; opens at the given time (`None`: `from` does not fire within five years).
    Closed { opens_at: Option<DateTime<Utc>> },
}

impl PromotionWindow {
    pub fn parse(from: &str, to: &str, default_tz: Tz) -> Result<Self, String> {
        Ok(PromotionWindow {
            from: CronSchedule::parse(from, default_tz)
                .map_err(|e| format!("promotionWindow.from: {e}"))?,
            to: CronSchedule::parse(to, default_tz)
                .map_err(|e| format!("promotionWindow.to: {e}"))?,
        })
    }

    pub fn state(&self, now: DateTime<Utc>) -> WindowState {
        let closed = || WindowState::Closed {
            opens_at: self.from.next_after(now),
        };
        let Some((wall, opened)) = self.from.last_occurrence(now) else {
            return closed();
        };
        // The close is the next `to` wall-clock time after the opening one (see the module doc);
        // `@every` (no wall clock) on either side counts in instants.
        let close = match (wall, &self.to.kind) {
            (Some(w), Kind::Fields(_)) => self
                .to
                .next_wall_after(w)
                .and_then(|n| resolve(&self.to.tz, n).into_iter().next()),
            _ => self.to.next_after(opened),
        };
        match close {
            // Closed already, or empty (both ends in one spring-forward gap).
            Some(close) if close <= now || close <= opened => closed(),
            closes_at => WindowState::Open { closes_at },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn window(from: &str, to: &str) -> PromotionWindow {
        PromotionWindow::parse(from, to, Tz::UTC).unwrap()
    }

    // Upstream unit cases 15-17 (reference §5).
    #[test]
    fn upstream_window_cases() {
        assert_eq!(
            window("0 10 * * *", "0 11 * * *").state(utc("2025-10-07T10:05:00Z")),
            WindowState::Open {
                closes_at: Some(utc("2025-10-07T11:00:00Z"))
            }
        );
        assert_eq!(
            window("0 20 * * *", "0 22 * * *").state(utc("2025-10-07T19:30:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2025-10-07T20:00:00Z"))
            }
        );
        assert_eq!(
            window("0 10 * * 6", "0 22 * * 0").state(utc("2025-10-07T17:30:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2025-10-11T10:00:00Z"))
            }
        );
    }

    #[test]
    fn window_boundaries() {
        let w = window("0 10 * * *", "0 11 * * *");
        assert!(
            matches!(
                w.state(utc("2025-10-07T10:00:00Z")),
                WindowState::Open { .. }
            ),
            "from ≤ now"
        );
        assert!(
            matches!(
                w.state(utc("2025-10-07T11:00:00Z")),
                WindowState::Closed { .. }
            ),
            "now < to"
        );
        assert!(matches!(
            w.state(utc("2025-10-07T10:59:59Z")),
            WindowState::Open { .. }
        ));
        // A weekend window spanning midnight and days.
        let weekend = window("0 10 * * 6", "0 22 * * 0");
        assert_eq!(
            weekend.state(utc("2025-10-12T03:00:00Z")),
            WindowState::Open {
                closes_at: Some(utc("2025-10-12T22:00:00Z"))
            }
        );
        // Every minute: always open, closing at the next minute.
        assert_eq!(
            window("* * * * *", "* * * * *").state(utc("2025-10-07T10:05:30Z")),
            WindowState::Open {
                closes_at: Some(utc("2025-10-07T10:06:00Z"))
            }
        );
    }

    #[test]
    fn syntax_of_robfig_parse_standard() {
        let next = |e: &str, t: &str| {
            CronSchedule::parse(e, Tz::UTC)
                .unwrap()
                .next_after(utc(t))
                .unwrap()
        };
        let t = "2025-10-07T17:30:00Z"; // a Tuesday
        assert_eq!(next("*/15 * * * *", t), utc("2025-10-07T17:45:00Z"));
        assert_eq!(
            next("5/20 * * * *", t),
            utc("2025-10-07T17:45:00Z"),
            "N/step is N through max"
        );
        assert_eq!(next("0 9-17 * * MON-FRI", t), utc("2025-10-08T09:00:00Z"));
        assert_eq!(next("0 9 * * sat,SUN", t), utc("2025-10-11T09:00:00Z"));
        assert_eq!(next("0 0 1 JAN ?", t), utc("2026-01-01T00:00:00Z"));
        assert_eq!(next("@daily", t), utc("2025-10-08T00:00:00Z"));
        assert_eq!(next("@midnight", t), utc("2025-10-08T00:00:00Z"));
        assert_eq!(next("@hourly", t), utc("2025-10-07T18:00:00Z"));
        assert_eq!(next("@weekly", t), utc("2025-10-12T00:00:00Z"));
        assert_eq!(next("@monthly", t), utc("2025-11-01T00:00:00Z"));
        assert_eq!(next("@yearly", t), utc("2026-01-01T00:00:00Z"));
        assert_eq!(next("@annually", t), utc("2026-01-01T00:00:00Z"));
        assert_eq!(
            next("@every 1h30m", t),
            utc("2025-10-07T18:00:00Z"),
            "multiples of 90 minutes since the epoch"
        );
        // Day-of-month and day-of-week both restricted: either matches (the 13th, or a Friday).
        assert_eq!(next("0 0 13 * 5", t), utc("2025-10-10T00:00:00Z"));
        assert_eq!(
            next("0 0 13 * 5", "2025-10-10T01:00:00Z"),
            utc("2025-10-13T00:00:00Z")
        );
        // With a star in either, both must match: Friday the 13th.
        assert_eq!(next("0 0 13 * *", t), utc("2025-10-13T00:00:00Z"));
        assert_eq!(next("0 0 */1 * 5", t), utc("2025-10-10T00:00:00Z"));
        assert_eq!(next("0 0 29 2 *", t), utc("2028-02-29T00:00:00Z"));
        for bad in [
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "x * * * *",
            "@fortnightly",
            "CRON_TZ=Mars/Base * * * * *",
            "@every 5x",
            "*/18446744073709551615 * * * *",
            "*/-1 * * * *",
        ] {
            assert!(
                CronSchedule::parse(bad, Tz::UTC).is_err(),
                "{bad} must be rejected"
            );
        }
        // Huge steps neither wrap nor panic: they select the start of the range only.
        assert_eq!(next("*/4294967295 * * * *", t), utc("2025-10-07T18:00:00Z"));
        assert_eq!(
            next("30/9223372036854775807 * * * *", t),
            utc("2025-10-07T18:30:00Z")
        );
        let e = CronSchedule::parse("* * * * 7", Tz::UTC).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"* * * * 7\": day of week: end of range (7) above maximum (6): 7"
        );
    }

    #[test]
    fn last_occurrence_mirrors_next() {
        let s = CronSchedule::parse("30 2 * * 1", Tz::UTC).unwrap();
        let t = utc("2025-10-07T17:30:00Z");
        assert_eq!(s.last_at_or_before(t), Some(utc("2025-10-06T02:30:00Z")));
        assert_eq!(
            s.last_at_or_before(utc("2025-10-06T02:30:00Z")),
            Some(utc("2025-10-06T02:30:00Z")),
            "at counts"
        );
        assert_eq!(
            CronSchedule::parse("0 0 29 2 *", Tz::UTC)
                .unwrap()
                .last_at_or_before(t),
            None,
            "beyond the look-back"
        );
    }

    #[test]
    fn time_zones_and_dst() {
        let berlin = "CRON_TZ=Europe/Berlin 0 10 * * *";
        let s = CronSchedule::parse(berlin, Tz::UTC).unwrap();
        assert_eq!(
            s.next_after(utc("2026-07-01T00:00:00Z")),
            Some(utc("2026-07-01T08:00:00Z")),
            "CEST is UTC+2"
        );
        assert_eq!(
            s.next_after(utc("2026-12-01T00:00:00Z")),
            Some(utc("2026-12-01T09:00:00Z")),
            "CET is UTC+1"
        );
        // The default zone (the --timezone flag) applies without a prefix.
        let ny = CronSchedule::parse("0 10 * * *", "America/New_York".parse().unwrap()).unwrap();
        assert_eq!(
            ny.next_after(utc("2026-07-01T00:00:00Z")),
            Some(utc("2026-07-01T14:00:00Z"))
        );
        // Spring forward (2026-03-29, 02:00 -> 03:00 in Berlin): 02:30 fires at 03:00 CEST.
        let gap = CronSchedule::parse("CRON_TZ=Europe/Berlin 30 2 * * *", Tz::UTC).unwrap();
        assert_eq!(
            gap.next_after(utc("2026-03-28T23:00:00Z")),
            Some(utc("2026-03-29T01:00:00Z"))
        );
        assert_eq!(
            gap.next_after(utc("2026-03-29T01:00:00Z")),
            Some(utc("2026-03-30T00:30:00Z"))
        );
        // Fall back (2026-10-25, 03:00 -> 02:00): 02:30 occurs twice and fires once, at the first.
        assert_eq!(
            gap.next_after(utc("2026-10-24T23:00:00Z")),
            Some(utc("2026-10-25T00:30:00Z"))
        );
        assert_eq!(
            gap.next_after(utc("2026-10-25T00:30:00Z")),
            Some(utc("2026-10-26T01:30:00Z"))
        );
        assert_eq!(
            gap.last_at_or_before(utc("2026-10-25T01:45:00Z")),
            Some(utc("2026-10-25T00:30:00Z"))
        );
        // A Berlin business-hours window evaluated across the spring change.
        let w = PromotionWindow::parse(
            "CRON_TZ=Europe/Berlin 0 9 * * *",
            "CRON_TZ=Europe/Berlin 0 17 * * *",
            Tz::UTC,
        )
        .unwrap();
        assert_eq!(
            w.state(utc("2026-03-29T07:30:00Z")),
            WindowState::Open {
                closes_at: Some(utc("2026-03-29T15:00:00Z"))
            }
        );
        assert_eq!(
            w.state(utc("2026-03-28T07:30:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2026-03-28T08:00:00Z"))
            }
        );
    }

    /// The zone a schedule is read in: its `CRON_TZ=` (or robfig's older `TZ=`) prefix, else the
    /// default (the `--timezone` flag), whatever the default says when there is a prefix.
    #[test]
    fn a_schedule_keeps_the_zone_it_was_read_in() {
        let ny: Tz = "America/New_York".parse().unwrap();
        let zone =
            |expr: &str, default: Tz| CronSchedule::parse(expr, default).unwrap().time_zone();
        assert_eq!(zone("0 10 * * *", ny), ny);
        assert_eq!(
            zone("CRON_TZ=Europe/Berlin 0 10 * * *", ny),
            chrono_tz::Europe::Berlin
        );
        assert_eq!(
            zone("TZ=Asia/Kolkata @daily", Tz::UTC),
            chrono_tz::Asia::Kolkata
        );
        assert_eq!(zone("CRON_TZ=UTC @every 1h", ny), Tz::UTC);
    }

    /// Antarctica/Troll falls back two hours (2026-10-25, 03:00 +02 -> 01:00 +00 at 01:00Z): just
    /// after the change the wall clock reads 01:15 while 02:30, an hour later on the wall, already
    /// fired (at its first instant, 00:30Z). The look-back must search the hour after `t`'s.
    #[test]
    fn a_two_hour_fall_back_looks_back_past_the_wall_clock_hour() {
        let s = CronSchedule::parse("CRON_TZ=Antarctica/Troll 30 2 * * *", Tz::UTC).unwrap();
        let t = utc("2026-10-25T01:15:00Z");
        assert_eq!(
            t.with_timezone(&chrono_tz::Antarctica::Troll)
                .naive_local()
                .hour(),
            1,
            "the wall clock is back at 01:15"
        );
        assert_eq!(s.last_at_or_before(t), Some(utc("2026-10-25T00:30:00Z")));
        let w = PromotionWindow::parse(
            "CRON_TZ=Antarctica/Troll 30 2 * * *",
            "CRON_TZ=Antarctica/Troll 0 4 * * *",
            Tz::UTC,
        )
        .unwrap();
        assert_eq!(
            w.state(t),
            WindowState::Open {
                closes_at: Some(utc("2026-10-25T04:00:00Z"))
            }
        );
    }

    /// `@every` has no wall clock: a window opened by one closes at the first `to` instant after
    /// its opening instant, and its last opening is the multiple of the period at or before now.
    #[test]
    fn a_window_opened_by_every_counts_in_instants() {
        let every = CronSchedule::parse("@every 6h", Tz::UTC).unwrap();
        assert_eq!(
            every.last_at_or_before(utc("2025-10-07T17:30:00Z")),
            Some(utc("2025-10-07T12:00:00Z"))
        );
        assert_eq!(
            every.last_at_or_before(utc("2025-10-07T18:00:00Z")),
            Some(utc("2025-10-07T18:00:00Z")),
            "at counts"
        );
        let w = window("@every 6h", "30 * * * *");
        assert_eq!(
            w.state(utc("2025-10-07T18:10:00Z")),
            WindowState::Open {
                closes_at: Some(utc("2025-10-07T18:30:00Z"))
            }
        );
        assert_eq!(
            w.state(utc("2025-10-07T19:00:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2025-10-08T00:00:00Z"))
            }
        );
        // And closed by one: the first multiple of the period after the opening.
        let w = window("0 10 * * *", "@every 4h");
        assert_eq!(
            w.state(utc("2025-10-07T10:30:00Z")),
            WindowState::Open {
                closes_at: Some(utc("2025-10-07T12:00:00Z"))
            }
        );
        assert_eq!(
            w.state(utc("2025-10-07T12:00:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2025-10-08T10:00:00Z"))
            }
        );
    }

    /// Minutes of `[start, end)` during which the window is open.
    fn open_minutes(w: &PromotionWindow, start: DateTime<Utc>, end: DateTime<Utc>) -> i64 {
        let mut t = start;
        let mut open = 0;
        while t < end {
            if matches!(w.state(t), WindowState::Open { .. }) {
                open += 1;
            }
            t += Duration::minutes(1);
        }
        open
    }

    /// The UTC span of a local calendar day.
    fn local_day(tz: Tz, date: &str) -> (DateTime<Utc>, DateTime<Utc>) {
        let d: NaiveDate = date.parse().unwrap();
        let at = |d: NaiveDate| {
            tz.from_local_datetime(&d.and_hms_opt(0, 0, 0).unwrap())
                .earliest()
                .unwrap()
                .with_timezone(&Utc)
        };
        (at(d), at(d + Duration::days(1)))
    }

    // Issue 14, problem 8: the issue's own case. 02:00 does not exist in Berlin on 2026-03-29, and
    // 03:00 is the same instant: the window is empty that day, not open for 24 hours.
    #[test]
    fn issue14_p8_berlin_spring_forward_window_is_not_open_all_day() {
        let w = PromotionWindow::parse(
            "CRON_TZ=Europe/Berlin 0 2 * * *",
            "CRON_TZ=Europe/Berlin 0 3 * * *",
            Tz::UTC,
        )
        .unwrap();
        assert_eq!(
            w.state(utc("2026-03-29T10:00:00Z")),
            WindowState::Closed {
                opens_at: Some(utc("2026-03-30T00:00:00Z"))
            },
            "production at noon"
        );
        let (start, end) = local_day(chrono_tz::Europe::Berlin, "2026-03-29");
        assert_eq!(open_minutes(&w, start, end), 0);
        let (start, end) = local_day(chrono_tz::Europe::Berlin, "2026-03-30");
        assert_eq!(open_minutes(&w, start, end), 60);
    }

    /// Spring forward and fall back in four zones, one with a half-hour offset (Adelaide).
    /// `(zone, spring-forward day, gap hour, fall-back day, repeated hour)`.
    #[test]
    fn dst_windows_in_four_zones() {
        let zones = [
            ("Europe/Berlin", "2026-03-29", 2, "2026-10-25", 2),
            ("America/New_York", "2026-03-08", 2, "2026-11-01", 1),
            ("Australia/Sydney", "2026-10-04", 2, "2026-04-05", 2),
            ("Australia/Adelaide", "2026-10-04", 2, "2026-04-05", 2),
        ];
        for (zone, spring, gap, fall, repeated) in zones {
            let tz: Tz = zone.parse().unwrap();
            let w = |from: String, to: String| {
                PromotionWindow::parse(
                    &format!("CRON_TZ={zone} {from}"),
                    &format!("CRON_TZ={zone} {to}"),
                    Tz::UTC,
                )
                .unwrap()
            };
            // Both ends in the gap: empty that day, one hour the day before.
            let in_gap = w(format!("0 {gap} * * *"), format!("0 {} * * *", gap + 1));
            let (s, e) = local_day(tz, spring);
            assert_eq!(open_minutes(&in_gap, s, e), 0, "{zone} spring");
            assert_eq!(
                open_minutes(&in_gap, s - Duration::days(1), s),
                60,
                "{zone} day before spring"
            );
            // Opening in the gap, closing after it: opens when the gap ends.
            let from_gap = w(format!("30 {gap} * * *"), format!("0 {} * * *", gap + 2));
            assert_eq!(
                open_minutes(&from_gap, s, e),
                60,
                "{zone} opening in the gap"
            );
            // Across the gap: 00:00 to 06:00 is five real hours that day.
            let night = w("0 0 * * *".into(), "0 6 * * *".into());
            assert_eq!(open_minutes(&night, s, e), 300, "{zone} night, spring");
            // Fall back: a window inside the repeated hour opens once, at its first occurrence.
            let (s, e) = local_day(tz, fall);
            let twice = w(
                format!("30 {repeated} * * *"),
                format!("45 {repeated} * * *"),
            );
            assert_eq!(open_minutes(&twice, s, e), 15, "{zone} repeated hour");
            let opened = (0..1440)
                .map(|m| s + Duration::minutes(m))
                .find(|t| matches!(twice.state(*t), WindowState::Open { .. }))
                .unwrap();
            assert_eq!(
                opened,
                tz.from_local_datetime(
                    &fall
                        .parse::<NaiveDate>()
                        .unwrap()
                        .and_hms_opt(repeated, 30, 0)
                        .unwrap()
                )
                .earliest()
                .unwrap()
                .with_timezone(&Utc)
            );
            // Across the repeated hour: 00:00 to 06:00 is seven real hours that day.
            assert_eq!(open_minutes(&night, s, e), 420, "{zone} night, fall");
        }
    }

    /// A small seeded generator (tests only; no dependency needed).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    fn field(r: &mut Lcg, min: u64, max: u64, names: &[&str]) -> String {
        let v = |r: &mut Lcg| min + r.next(max - min + 1);
        let name = |r: &mut Lcg, x: u64| -> String {
            if !names.is_empty() && r.next(3) == 0 {
                names[(x - min) as usize].to_string()
            } else {
                x.to_string()
            }
        };
        match r.next(6) {
            0 => "*".into(),
            1 => {
                let x = v(r);
                name(r, x)
            }
            2 | 3 => {
                let (a, b) = (v(r), v(r));
                let (a, b) = (a.min(b), a.max(b));
                if a == b {
                    // croner reads `SUN-SUN` as 0-7; a one-value range is not worth the quirk.
                    return a.to_string();
                }
                let mut out = format!("{}-{}", name(r, a), name(r, b));
                if r.next(2) == 0 {
                    out += &format!("/{}", 1 + r.next(5));
                }
                out
            }
            4 => format!("*/{}", 1 + r.next((max - min).max(1))),
            _ => {
                let (a, b) = (v(r), v(r));
                format!("{},{}", name(r, a), name(r, b))
            }
        }
    }

    /// The evaluator against the `croner` crate, on the syntax both accept (five fields; no `a/n`,
    /// no day-of-week 7, and no `*/n` in the day fields, where robfig's star rule differs), in UTC
    /// and a zone without DST.
    #[test]
    fn differential_against_croner() {
        use std::str::FromStr;
        const MONTHS: &[&str] = &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ];
        const DAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
        let mut r = Lcg(14);
        let (mut compared, mut skipped) = (0, 0);
        for _ in 0..400 {
            let day = |r: &mut Lcg, min, max, names| loop {
                let f = field(r, min, max, names);
                if !f.starts_with("*/") {
                    return f;
                }
            };
            let expr = format!(
                "{} {} {} {} {}",
                field(&mut r, 0, 59, &[]),
                field(&mut r, 0, 23, &[]),
                day(&mut r, 1, 31, &[]),
                field(&mut r, 1, 12, MONTHS),
                day(&mut r, 0, 6, DAYS)
            );
            let (Ok(ours), Ok(theirs)) = (
                CronSchedule::parse(&expr, Tz::UTC),
                croner::Cron::from_str(&expr),
            ) else {
                skipped += 1;
                continue;
            };
            let kolkata =
                CronSchedule::parse(&format!("CRON_TZ=Asia/Kolkata {expr}"), Tz::UTC).unwrap();
            for _ in 0..5 {
                let t = utc("2026-01-01T00:00:00Z")
                    + Duration::minutes(r.next(2 * 366 * 1440) as i64)
                    + Duration::seconds(r.next(60) as i64);
                let expected = theirs
                    .find_next_occurrence(&t, false)
                    .ok()
                    .filter(|n| *n - t < Duration::days(5 * 366));
                assert_eq!(ours.next_after(t), expected, "{expr} after {t}");
                let tk = t.with_timezone(&chrono_tz::Asia::Kolkata);
                let expected = theirs
                    .find_next_occurrence(&tk, false)
                    .ok()
                    .filter(|n| n.with_timezone(&Utc) - t < Duration::days(5 * 366))
                    .map(|n| n.with_timezone(&Utc));
                assert_eq!(kolkata.next_after(t), expected, "Kolkata {expr} after {t}");
                compared += 2;
            }
        }
        assert!(
            compared >= 3000 && skipped < 40,
            "{compared} compared, {skipped} skipped"
        );
    }
}
