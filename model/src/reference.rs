//! References the invariants judge by, independent of the code they check: a promotion window
//! evaluated minute by minute with another cron library (`croner`), not promoter's `window`.

use chrono::{DateTime, Duration, DurationRound, Utc};
use std::cell::RefCell;
use std::collections::HashMap;
use std::str::FromStr;

/// How far back a window's last opening is looked for (the model's windows open every hour).
const LOOK_BACK_MINUTES: i64 = 2 * 24 * 60;

thread_local! {
    static OPEN: RefCell<HashMap<(String, String, i64), bool>> = RefCell::default();
}

/// Whether the window `from`–`to` (five-field cron, UTC) is open at `t`: walking back minute by
/// minute from `t`, a `from` time comes before any `to` time (the book, docs/src/concepts/stages-and-gates.md: a window closes at the
/// first `to` time after its `from` time; at a minute where both match, it is closed).
pub fn window_open(from: &str, to: &str, t: DateTime<Utc>) -> bool {
    let minute = t
        .duration_trunc(Duration::minutes(1))
        .unwrap_or(t)
        .timestamp();
    let key = (from.to_string(), to.to_string(), minute);
    if let Some(open) = OPEN.with(|m| m.borrow().get(&key).copied()) {
        return open;
    }
    let open = evaluate(from, to, t);
    OPEN.with(|m| m.borrow_mut().insert(key, open));
    open
}

fn evaluate(from: &str, to: &str, t: DateTime<Utc>) -> bool {
    let (Ok(from), Ok(to)) = (croner::Cron::from_str(from), croner::Cron::from_str(to)) else {
        return false;
    };
    let Ok(start) = t.duration_trunc(Duration::minutes(1)) else {
        return false;
    };
    for back in 0..LOOK_BACK_MINUTES {
        let m = start - Duration::minutes(back);
        if to.is_time_matching(&m).unwrap_or(false) {
            return false;
        }
        if from.is_time_matching(&m).unwrap_or(false) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 2, 16, h, m, 0).unwrap()
    }

    #[test]
    fn the_first_half_of_every_hour() {
        let (from, to) = ("0 * * * *", "30 * * * *");
        assert!(window_open(from, to, at(6, 0)));
        assert!(window_open(from, to, at(6, 29)));
        assert!(!window_open(from, to, at(6, 30)));
        assert!(!window_open(from, to, at(6, 59)));
        assert!(window_open(from, to, at(7, 0)));
    }

    #[test]
    fn a_window_that_opens_once_a_day() {
        let (from, to) = ("0 22 * * *", "0 2 * * *");
        assert!(window_open(from, to, at(23, 0)));
        assert!(window_open(from, to, at(1, 59)));
        assert!(!window_open(from, to, at(2, 0)));
        assert!(!window_open(from, to, at(12, 0)));
    }
}
