//! Which outbox entries of a promotion are due, and the outbox after sending them (pure).
//!
//! An entry is sent only once deliverable (see `annotations::outbox`), to the receivers the rules
//! route it to (routed when first due, if the rules could not be read when it was recorded).
//! Entries older than `maxAge` are dropped, counted and logged, whatever happened to them; an
//! entry that is not deliverable is left alone here: only a pass's guarded record patch may drop
//! it (see `pass::notifications`), since only that patch knows the status it judged is current.

use super::config::{Config, DEFAULT_MAX_AGE};
use super::transition::Transition;
use crate::annotations::outbox::{Delivery, ERROR_LIMIT, Entry, cut};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// Whether an entry is older than `max_age` at `now`.
pub fn expired(e: &Entry, max_age: std::time::Duration, now: DateTime<Utc>) -> bool {
    chrono::Duration::from_std(max_age).is_ok_and(|age| e.at.as_datetime() + age < now)
}

/// One entry, or one receiver of it, dropped: why, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub key: String,
    /// None: the whole entry.
    pub receiver: Option<String>,
    pub why: String,
    /// A transition that was recorded (deliverable) and will never be sent: counted and logged
    /// as a warning. Otherwise (not deliverable, or routed to nobody) it is no loss.
    pub lost: bool,
}

/// What to do with one promotion's outbox now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// (key, receiver), oldest entry first.
    pub sends: Vec<(String, String)>,
    /// Entries routed now (they had no receivers yet).
    pub routed: BTreeMap<String, BTreeSet<String>>,
    /// Entries to mark confirmed (deliverable by their status, not yet marked).
    pub confirmed: BTreeSet<String>,
    pub dropped: Vec<Dropped>,
}

/// The entries due now. `config` None: the rules could not be read in this pass; nothing is
/// routed or sent, and entries expire after the default `maxAge`.
pub fn due(
    entries: &[Entry],
    status_token: &str,
    config: Option<&Config>,
    labels: &BTreeMap<String, String>,
    now: DateTime<Utc>,
) -> Due {
    let mut out = Due::default();
    let max_age = config.map_or(DEFAULT_MAX_AGE, |c| c.max_age);
    for e in entries {
        let deliverable = e.deliverable(status_token);
        if expired(e, max_age, now) {
            out.dropped.push(Dropped {
                key: e.key.clone(),
                receiver: None,
                why: format!("older than maxAge {}", humantime::format_duration(max_age)),
                lost: deliverable && e.to.as_ref().is_none_or(|t| !t.is_empty()),
            });
            continue;
        }
        if !deliverable {
            continue;
        }
        if !e.confirmed {
            out.confirmed.insert(e.key.clone());
        }
        let Some(config) = config else {
            continue;
        };
        let receivers: BTreeSet<String> = match &e.to {
            Some(to) => to.keys().cloned().collect(),
            None => {
                let routes = match Transition::parse(&e.transition) {
                    Some(t) => config.routes(labels, t),
                    None => BTreeSet::new(),
                };
                if routes.is_empty() {
                    out.dropped.push(Dropped {
                        key: e.key.clone(),
                        receiver: None,
                        why: "no rule sends it anywhere".into(),
                        lost: false,
                    });
                    continue;
                }
                out.routed.insert(e.key.clone(), routes.clone());
                routes
            }
        };
        for r in receivers {
            if config.receiver(&r).is_some() {
                out.sends.push((e.key.clone(), r));
            } else {
                out.dropped.push(Dropped {
                    key: e.key.clone(),
                    receiver: Some(r.clone()),
                    why: format!("receiver {r:?} is no longer configured"),
                    lost: true,
                });
            }
        }
    }
    out
}

/// How a send went, for the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    Sent,
    Failed(String),
}

/// The outbox after `due` was acted on, applied to `entries` as they are now (read again after
/// sending, if another pass changed them): sent receivers removed, failures counted with their
/// error, routes and confirmations recorded, dropped entries gone, delivered entries gone.
pub fn apply(entries: &[Entry], due: &Due, results: &[((String, String), Attempt)]) -> Vec<Entry> {
    let mut out = Vec::new();
    for e in entries {
        if due
            .dropped
            .iter()
            .any(|d| d.key == e.key && d.receiver.is_none())
        {
            continue;
        }
        let mut e = e.clone();
        if due.confirmed.contains(&e.key) {
            e.confirmed = true;
        }
        if let (None, Some(routes)) = (&e.to, due.routed.get(&e.key)) {
            e.to = Some(
                routes
                    .iter()
                    .map(|r| (r.clone(), Delivery::default()))
                    .collect(),
            );
        }
        if let Some(to) = &mut e.to {
            for d in due.dropped.iter().filter(|d| d.key == e.key) {
                if let Some(r) = &d.receiver {
                    to.remove(r);
                }
            }
            for ((key, receiver), result) in results {
                if *key != e.key {
                    continue;
                }
                match result {
                    Attempt::Sent => {
                        to.remove(receiver);
                    }
                    Attempt::Failed(error) => {
                        if let Some(d) = to.get_mut(receiver) {
                            d.attempts += 1;
                            d.last_error = Some(cut(error, ERROR_LIMIT));
                        }
                    }
                }
            }
            if to.is_empty() {
                continue;
            }
        }
        out.push(e);
    }
    out
}

/// A promotion's notification figures of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Recorded transitions still to be delivered (to at least one receiver) after the pass.
    pub pending: usize,
    /// Deliveries that succeeded in the pass.
    pub sent: usize,
    /// Deliveries that failed in the pass (retried by the next passes).
    pub failed: usize,
    /// Transitions (or receivers of one) given up in the pass: too old, beyond the outbox's
    /// bound, or for a receiver no longer configured.
    pub dropped: usize,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.pending += other.pending;
        self.sent += other.sent;
        self.failed += other.failed;
        self.dropped += other.dropped;
    }

    pub fn is_zero(&self) -> bool {
        *self == Counts::default()
    }
}

/// The entries still to be delivered: deliverable ones (by mark or by `status_token`).
pub fn pending(entries: &[Entry], status_token: &str) -> usize {
    deliverable(entries, status_token).count()
}

/// The deliverable entries (see `annotations::outbox`): recorded transitions not yet delivered.
pub fn deliverable<'a>(
    entries: &'a [Entry],
    status_token: &'a str,
) -> impl Iterator<Item = &'a Entry> + 'a {
    entries.iter().filter(move |e| e.deliverable(status_token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;
    use chrono::TimeZone;

    const TOKEN: &str = "0000000000000001";
    const OTHER: &str = "0000000000000002";

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap() + chrono::Duration::minutes(min)
    }

    fn entry(key: &str, transition: &str, status: &str, at: i64) -> Entry {
        Entry {
            key: key.into(),
            transition: transition.into(),
            reason: "R".into(),
            stage: Some("dev".into()),
            message: format!("{key} happened"),
            at: Timestamp::new(t(at)),
            revision: None,
            status: status.into(),
            confirmed: false,
            to: None,
        }
    }

    fn config() -> Config {
        Config::parse(
            "receivers:\n- {name: slack, type: slack, url: 'http://s/x'}\n- {name: hook, type: webhook, url: 'http://h/x'}\nrules:\n- receivers: [slack]\n  transitions: [Failed]\n- receivers: [hook]\n  transitions: [Failed, StageCompleted]\nmaxAge: 1h\n",
        )
        .unwrap()
    }

    fn to(receivers: &[&str]) -> Option<BTreeMap<String, Delivery>> {
        Some(
            receivers
                .iter()
                .map(|r| (r.to_string(), Delivery::default()))
                .collect(),
        )
    }

    #[test]
    fn only_confirmed_entries_are_due_and_routed_by_the_rules() {
        let labels = BTreeMap::new();
        let entries = vec![
            entry("a", "Failed", TOKEN, 0),
            entry("b", "StageCompleted", OTHER, 0),
            entry("c", "StageStarted", TOKEN, 0),
        ];
        let due = due(&entries, TOKEN, Some(&config()), &labels, t(5));
        assert_eq!(
            due.sends,
            [("a".into(), "hook".into()), ("a".into(), "slack".into())]
        );
        assert_eq!(due.confirmed, BTreeSet::from(["a".into(), "c".into()]));
        assert_eq!(due.dropped.len(), 1, "{due:?}");
        assert_eq!(
            (due.dropped[0].key.as_str(), due.dropped[0].lost),
            ("c", false)
        );
        // b waits: its status write did not happen (or not yet).
        let after = apply(
            &entries,
            &due,
            &[
                (("a".into(), "hook".into()), Attempt::Sent),
                (
                    ("a".into(), "slack".into()),
                    Attempt::Failed("HTTP 500: x".into()),
                ),
            ],
        );
        assert_eq!(after.len(), 2);
        assert_eq!(after[0].key, "a");
        assert!(after[0].confirmed);
        assert_eq!(
            after[0].to,
            Some(BTreeMap::from([(
                "slack".to_string(),
                Delivery {
                    attempts: 1,
                    last_error: Some("HTTP 500: x".into())
                }
            )]))
        );
        assert_eq!(after[1], entries[1]);
        assert_eq!(pending(&after, TOKEN), 1);
        assert_eq!(pending(&after, OTHER), 2);
    }

    #[test]
    fn a_confirmed_entry_stays_due_after_the_status_moved_on() {
        let mut e = entry("a", "Failed", TOKEN, 0);
        e.confirmed = true;
        e.to = to(&["slack"]);
        let due = due(&[e.clone()], OTHER, Some(&config()), &BTreeMap::new(), t(1));
        assert_eq!(due.sends, [("a".into(), "slack".into())]);
        assert!(due.confirmed.is_empty() && due.routed.is_empty());
        let after = apply(&[e], &due, &[(("a".into(), "slack".into()), Attempt::Sent)]);
        assert!(after.is_empty(), "delivered everywhere: gone");
    }

    #[test]
    fn old_entries_and_gone_receivers_are_dropped() {
        let mut old = entry("old", "Failed", TOKEN, 0);
        old.to = to(&["slack"]);
        let mut gone = entry("gone", "Failed", TOKEN, 30);
        gone.to = to(&["pager", "slack"]);
        let unconfirmed_old = entry("u", "Failed", OTHER, 0);
        let entries = vec![old, gone, unconfirmed_old];
        let due = due(&entries, TOKEN, Some(&config()), &BTreeMap::new(), t(61));
        let lost: Vec<(&str, Option<&str>)> = due
            .dropped
            .iter()
            .filter(|d| d.lost)
            .map(|d| (d.key.as_str(), d.receiver.as_deref()))
            .collect();
        assert_eq!(lost, [("old", None), ("gone", Some("pager"))]);
        assert!(due.dropped.iter().any(|d| d.key == "u" && !d.lost));
        assert_eq!(due.sends, [("gone".into(), "slack".into())]);
        let after = apply(&entries, &due, &[]);
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].to, to(&["slack"]));
    }

    #[test]
    fn without_the_rules_nothing_is_routed_or_sent() {
        let entries = vec![entry("a", "Failed", TOKEN, 0)];
        let due = due(&entries, TOKEN, None, &BTreeMap::new(), t(1));
        assert!(due.sends.is_empty() && due.routed.is_empty());
        assert_eq!(due.confirmed, BTreeSet::from(["a".into()]));
        let after = apply(&entries, &due, &[]);
        assert!(after[0].confirmed && after[0].to.is_none());
        // The default maxAge still applies.
        assert!(super::due(&entries, TOKEN, None, &BTreeMap::new(), t(61)).dropped[0].lost);
    }

    #[test]
    fn results_apply_to_the_outbox_as_it_is_now() {
        // Between the read and the patch, another pass delivered `a` and recorded `z`.
        let mut a = entry("a", "Failed", TOKEN, 0);
        a.to = to(&["slack"]);
        let due = due(&[a.clone()], TOKEN, Some(&config()), &BTreeMap::new(), t(1));
        let now = vec![entry("z", "Failed", TOKEN, 1)];
        let after = apply(
            &now,
            &due,
            &[(("a".into(), "slack".into()), Attempt::Failed("x".into()))],
        );
        assert_eq!(after, now);
    }
}
