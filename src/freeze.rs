//! Freeze evaluation, pure: given the PromotionFreezes, `now` and a promotion's labels, which
//! freezes hold it, where each freeze stands (Scheduled, Active, Expired, Invalid and why), the
//! next moment any of them changes, and whether a bypass record lets a promotion pass a freeze.
//! The pass's planner, `status`, `explain`, `doctor` and `freeze list` all read freezes here.
//!
//! A freeze holds the promotions it selects while it is Active, and also those it selected when it
//! became active (its status' `held`, written once by the pass that saw it become active): a
//! promotion relabelled during the freeze stays held until a bypass or the freeze's end.
//!
//! A freeze that cannot be decoded (`PromotionFreezeSpec::unreadable`) fails closed: it is Active
//! (unless a start or end it could read says otherwise) and holds every promotion its selector may
//! select (all of them when the selector cannot be read), and says why everywhere it shows: a
//! freeze is an emergency brake, and reading it wrong must not release it.
//!
//! A freeze's selector is over ClusterPromotion labels, and unlike a stage's `clusterSelector`
//! (Sveltos: empty selects nothing) an absent or empty `promotionSelector` selects every
//! promotion. The range is `[start, end)`: absent start = from creation, absent end = until the
//! object is deleted. A freeze whose selector does not parse or whose end is not after its start
//! is Invalid: it holds nothing, and says why.

use crate::annotations::FreezeBypass;
use crate::api::{FreezePhase, PromotionFreeze, PromotionFreezeSpec, PromotionFreezeStatus};
use crate::labels::{Requirement, matches_all, to_selector_string};
use crate::validation::Violation;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// One freeze, evaluated at one moment.
#[derive(Clone, Debug)]
pub struct Evaluated<'a> {
    pub freeze: &'a PromotionFreeze,
    pub name: &'a str,
    pub phase: FreezePhase,
    /// Why it is Invalid; otherwise when it starts or ends.
    pub message: String,
    /// When its phase changes next (its start when Scheduled, its end when Active).
    pub next_change: Option<DateTime<Utc>>,
    /// The compiled selector; None for every promotion (and for an Invalid freeze, unused).
    selector: Option<Vec<Requirement>>,
    /// The promotions its status says it selected when it became active (this generation).
    held: Vec<String>,
    /// What the promotions it holds say about it.
    reason: String,
}

/// What makes a freeze Invalid, each at its field path: a selector that does not parse, an end
/// not after the start.
pub fn problems(spec: &PromotionFreezeSpec) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(s) = &spec.promotion_selector
        && let Err(e) = s.requirements()
    {
        // The error starts with the field inside the selector (`matchExpressions[0]: …`).
        let text = e.to_string();
        let (field, message) = text.split_once(": ").unwrap_or(("", text.as_str()));
        out.push(Violation {
            path: ["spec.promotionSelector", field]
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("."),
            message: message.to_string(),
        });
    }
    if let (Some(start), Some(end)) = (spec.start, spec.end)
        && end <= start
    {
        out.push(Violation {
            path: "spec.end".into(),
            message: format!("Invalid value: \"{end}\": must be after spec.start ({start})"),
        });
    }
    out
}

fn until(end: Option<DateTime<Utc>>) -> String {
    match end {
        Some(e) => format!("until {}", crate::api::Timestamp::new(e)),
        None => "until lifted".into(),
    }
}

/// One freeze at `now`.
pub fn evaluate(freeze: &PromotionFreeze, now: DateTime<Utc>) -> Evaluated<'_> {
    let spec = &freeze.spec;
    let name = freeze.metadata.name.as_deref().unwrap_or_default();
    let start = spec.start.map(|t| t.as_datetime());
    let end = spec.end.map(|t| t.as_datetime());
    // An unreadable freeze is never Invalid: what could be read of it holds (fail closed).
    let problems = match spec.unreadable {
        Some(_) => Vec::new(),
        None => problems(spec),
    };
    let reason = match &spec.unreadable {
        Some(why) => format!(
            "it cannot be read ({why}); it holds every promotion it may select until it is fixed or deleted"
        ),
        None => spec.reason.clone(),
    };
    let evaluated = |phase, message: String, next_change| Evaluated {
        freeze,
        name,
        phase,
        message,
        next_change,
        selector: None,
        held: Vec::new(),
        reason: reason.clone(),
    };
    if !problems.is_empty() {
        let why: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return evaluated(FreezePhase::Invalid, why.join("; "), None);
    }
    let selector = spec
        .promotion_selector
        .as_ref()
        .filter(|s| !s.is_empty())
        .and_then(|s| s.requirements().ok());
    let mut e = match (start, end) {
        (Some(s), _) if now < s => evaluated(
            FreezePhase::Scheduled,
            format!("starts {} {}", crate::api::Timestamp::new(s), until(end)),
            Some(s),
        ),
        (_, Some(e)) if now >= e => evaluated(
            FreezePhase::Expired,
            format!("ended {}", crate::api::Timestamp::new(e)),
            None,
        ),
        _ => evaluated(FreezePhase::Active, format!("active {}", until(end)), end),
    };
    if let Some(why) = &spec.unreadable {
        e.message = format!(
            "cannot be read ({why}): it holds every promotion it may select (fail closed) until it is fixed or deleted; {}",
            e.message
        );
    }
    e.selector = selector;
    e.held = held_names(freeze);
    e
}

/// The promotions the freeze's status says it selected when it became active, while that status
/// is about its current generation and says Active.
fn held_names(freeze: &PromotionFreeze) -> Vec<String> {
    freeze
        .status
        .as_ref()
        .filter(|s| s.phase == Some(FreezePhase::Active))
        .filter(|s| s.observed_generation == freeze.metadata.generation)
        .and_then(|s| s.held.clone())
        .unwrap_or_default()
}

impl Evaluated<'_> {
    /// Whether the freeze's selector picks a promotion with these labels (whatever its phase; an
    /// Invalid freeze picks nothing).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.phase != FreezePhase::Invalid
            && self
                .selector
                .as_ref()
                .is_none_or(|r| matches_all(r, labels))
    }

    /// Whether it holds the promotion `name` with these labels now: it is Active and selects
    /// them, or selected the promotion when it became active.
    pub fn holds(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.phase == FreezePhase::Active
            && (self.selects(labels) || self.held.iter().any(|h| h == name))
    }

    /// Whether it could not be decoded (it holds, failing closed, and says so).
    pub fn unreadable(&self) -> Option<&str> {
        self.freeze.spec.unreadable.as_deref()
    }

    /// Why it holds, as the promotions it holds say it: its reason, or why it cannot be read.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// `until <end>` or `until lifted`, as status texts say it.
    pub fn until(&self) -> String {
        until(self.freeze.spec.end.map(|t| t.as_datetime()))
    }

    /// The selector as `kubectl get -l` writes it, or `every promotion`.
    pub fn selector_text(&self) -> String {
        match &self.selector {
            Some(r) => to_selector_string(r),
            None if self.phase == FreezePhase::Invalid => "(invalid)".into(),
            None => "every promotion".into(),
        }
    }

    /// The status the freeze should have: its phase, the message, the generation seen, and while
    /// it is active the promotions it held when it became active: the recorded list when the
    /// status already says Active for this generation, else the names of `selected_now` (the
    /// promotions it selects as this pass sees them; None: the pass did not see them all, so a
    /// recorded list is kept and none is started).
    pub fn status(&self, selected_now: Option<Vec<String>>) -> PromotionFreezeStatus {
        let recorded = self
            .freeze
            .status
            .as_ref()
            .filter(|s| s.phase == Some(FreezePhase::Active))
            .filter(|s| s.observed_generation == self.freeze.metadata.generation)
            .and_then(|s| s.held.clone());
        let held = match self.phase {
            FreezePhase::Active => recorded.or(selected_now),
            _ => None,
        };
        PromotionFreezeStatus {
            phase: Some(self.phase),
            message: Some(self.message.clone()),
            observed_generation: self.freeze.metadata.generation,
            held,
        }
    }
}

/// Every freeze, evaluated once per pass (selectors compiled once), in name order.
#[derive(Clone, Debug, Default)]
pub struct Freezes<'a> {
    pub all: Vec<Evaluated<'a>>,
}

impl<'a> Freezes<'a> {
    pub fn new(freezes: &'a [PromotionFreeze], now: DateTime<Utc>) -> Freezes<'a> {
        let mut all: Vec<Evaluated<'a>> = freezes.iter().map(|f| evaluate(f, now)).collect();
        all.sort_by(|a, b| a.name.cmp(b.name));
        Freezes { all }
    }

    /// The Active freezes that hold the promotion `name` with these labels, in name order.
    pub fn holding(&self, name: &str, labels: &BTreeMap<String, String>) -> Vec<&Evaluated<'a>> {
        self.all.iter().filter(|f| f.holds(name, labels)).collect()
    }

    /// The next moment a freeze that selects (or holds) the promotion starts or ends (a pass's
    /// `next_check`).
    pub fn next_change_for(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<DateTime<Utc>> {
        self.all
            .iter()
            .filter(|f| f.selects(labels) || f.holds(name, labels))
            .filter_map(|f| f.next_change)
            .min()
    }

    /// The next moment any freeze starts or ends.
    pub fn next_change(&self) -> Option<DateTime<Utc>> {
        self.all.iter().filter_map(|f| f.next_change).min()
    }

    pub fn invalid(&self) -> impl Iterator<Item = &Evaluated<'a>> {
        self.all.iter().filter(|f| f.phase == FreezePhase::Invalid)
    }
}

/// Whether `bypass` lets a promotion start a stage while the freeze `freeze` holds it at `now`:
/// until is still ahead, and it names this freeze or none.
pub fn bypass_allows(bypass: &FreezeBypass, freeze: &str, now: DateTime<Utc>) -> bool {
    bypass.until.as_datetime() > now && bypass.freeze.as_deref().is_none_or(|f| f == freeze)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        Timestamp::parse(s).unwrap().as_datetime()
    }

    fn freeze(name: &str, spec: serde_json::Value) -> PromotionFreeze {
        serde_json::from_value(json!({
            "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
            "metadata": {"name": name, "generation": 3}, "spec": spec
        }))
        .unwrap()
    }

    use crate::labels::label_map as labels;

    #[test]
    fn phases_over_time() {
        let f = freeze(
            "holidays",
            json!({"reason": "CAB-123", "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}),
        );
        let table = [
            (
                "2026-12-19T23:59:59Z",
                FreezePhase::Scheduled,
                Some("2026-12-20T00:00:00Z"),
                "starts 2026-12-20T00:00:00Z until 2027-01-04T00:00:00Z",
            ),
            (
                "2026-12-20T00:00:00Z",
                FreezePhase::Active,
                Some("2027-01-04T00:00:00Z"),
                "active until 2027-01-04T00:00:00Z",
            ),
            (
                "2027-01-03T23:59:59Z",
                FreezePhase::Active,
                Some("2027-01-04T00:00:00Z"),
                "active until 2027-01-04T00:00:00Z",
            ),
            (
                "2027-01-04T00:00:00Z",
                FreezePhase::Expired,
                None,
                "ended 2027-01-04T00:00:00Z",
            ),
        ];
        for (now, phase, next, message) in table {
            let e = evaluate(&f, t(now));
            assert_eq!(e.phase, phase, "{now}");
            assert_eq!(e.next_change, next.map(t), "{now}");
            assert_eq!(e.message, message, "{now}");
        }
        let open = freeze("incident", json!({"reason": "INC-9"}));
        let e = evaluate(&open, t("2026-01-01T00:00:00Z"));
        assert_eq!((e.phase, e.next_change), (FreezePhase::Active, None));
        assert_eq!(e.until(), "until lifted");
        assert_eq!(e.status(None).observed_generation, Some(3));
        assert_eq!(e.status(None).phase, Some(FreezePhase::Active));
    }

    #[test]
    fn invalid_freezes_hold_nothing_and_say_why() {
        let now = t("2026-12-25T00:00:00Z");
        let bad_selector = freeze(
            "bad-selector",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": "tier", "operator": "Near"}]}}),
        );
        let backwards = freeze(
            "backwards",
            json!({"reason": "x", "start": "2026-12-20T00:00:00Z", "end": "2026-12-20T00:00:00Z"}),
        );
        for (f, why) in [
            (
                &bad_selector,
                "spec.promotionSelector.matchExpressions[0]: unknown operator \"Near\"",
            ),
            (
                &backwards,
                "spec.end: Invalid value: \"2026-12-20T00:00:00Z\": must be after spec.start (2026-12-20T00:00:00Z)",
            ),
        ] {
            let e = evaluate(f, now);
            assert_eq!(e.phase, FreezePhase::Invalid);
            assert!(e.message.starts_with(why), "{}", e.message);
            // `freeze list` and `doctor` show it selecting nothing; what it holds says its reason.
            assert_eq!(e.selector_text(), "(invalid)");
            assert_eq!(e.reason(), "x");
            assert!(!e.holds("p", &labels(&[])) && !e.holds("p", &labels(&[("tier", "prod")])));
            assert_eq!(e.next_change, None);
        }
        let all = [bad_selector, backwards];
        let freezes = Freezes::new(&all, now);
        let names: Vec<&str> = freezes.invalid().map(|f| f.name).collect();
        assert_eq!(names, ["backwards", "bad-selector"]);
    }

    #[test]
    fn selectors_pick_promotions_by_their_labels() {
        let now = t("2026-12-25T00:00:00Z");
        let all = [
            freeze(
                "prod",
                json!({"reason": "prod only", "promotionSelector": {"matchLabels": {"tier": "prod"}}}),
            ),
            freeze(
                "everything",
                json!({"reason": "all", "promotionSelector": {}}),
            ),
            freeze(
                "later",
                json!({"reason": "later", "start": "2026-12-26T00:00:00Z",
                                   "promotionSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["prod"]}]}}),
            ),
            freeze(
                "not-payments",
                json!({"reason": "r", "end": "2026-12-25T12:00:00Z",
                                   "promotionSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["payments"]}]}}),
            ),
        ];
        let freezes = Freezes::new(&all, now);
        let holding = |l: &[(&str, &str)]| -> Vec<&str> {
            freezes
                .holding("p", &labels(l))
                .iter()
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(
            holding(&[("tier", "prod")]),
            ["everything", "not-payments", "prod"]
        );
        assert_eq!(holding(&[("team", "payments")]), ["everything"]);
        assert_eq!(
            freezes.next_change_for("p", &labels(&[("tier", "prod"), ("team", "payments")])),
            Some(t("2026-12-26T00:00:00Z"))
        );
        assert_eq!(
            freezes.next_change_for("p", &labels(&[("tier", "dev")])),
            Some(t("2026-12-25T12:00:00Z"))
        );
        assert_eq!(freezes.next_change(), Some(t("2026-12-25T12:00:00Z")));
        let texts: Vec<String> = freezes.all.iter().map(|f| f.selector_text()).collect();
        assert_eq!(
            texts,
            [
                "every promotion",
                "tier=prod",
                "team!=payments",
                "tier=prod"
            ]
        );
    }

    /// Issue 30: a freeze that cannot be read fails closed: Active unless a start or end it could
    /// read says otherwise, every promotion it may select held, and it says why.
    #[test]
    fn an_unreadable_freeze_holds_what_it_may_select_and_says_why() {
        let now = t("2026-12-25T00:00:00Z");
        let mut f = freeze("broken", json!({"reason": "INC-9"}));
        f.spec.unreadable = Some("spec.end: invalid time \"next tuesday\"".into());
        let e = evaluate(&f, now);
        assert_eq!(e.phase, FreezePhase::Active);
        assert!(e.holds("any", &labels(&[])) && e.holds("other", &labels(&[("tier", "dev")])));
        assert!(
            e.message.starts_with("cannot be read (spec.end: invalid time \"next tuesday\"): it holds every promotion it may select (fail closed)"),
            "{}",
            e.message
        );
        assert!(
            e.reason().starts_with("it cannot be read ("),
            "{}",
            e.reason()
        );
        assert_eq!(
            e.unreadable(),
            Some("spec.end: invalid time \"next tuesday\"")
        );
        // What could be read still counts: its selector, and an end that has passed.
        f.spec.promotion_selector =
            serde_json::from_value(json!({"matchLabels": {"tier": "prod"}})).unwrap();
        let e = evaluate(&f, now);
        assert!(e.holds("p", &labels(&[("tier", "prod")])) && !e.holds("p", &labels(&[])));
        f.spec.end = Some(Timestamp::new(t("2026-12-24T00:00:00Z")));
        assert_eq!(evaluate(&f, now).phase, FreezePhase::Expired);
        // Never Invalid (an end before the start it could read still holds).
        f.spec.start = Some(Timestamp::new(t("2026-12-24T12:00:00Z")));
        f.spec.end = None;
        assert_eq!(evaluate(&f, now).phase, FreezePhase::Active);
    }

    /// Issue 30: an Active freeze's status records the promotions it selected when it became
    /// active (once), and they stay held whatever their labels become; a new generation (the
    /// freeze edited) records them again; an inactive freeze records none.
    #[test]
    fn the_promotions_a_freeze_selected_when_it_became_active_stay_held() {
        let now = t("2026-12-25T00:00:00Z");
        let mut f = freeze(
            "prod",
            json!({"reason": "r", "promotionSelector": {"matchLabels": {"tier": "prod"}}}),
        );
        let e = evaluate(&f, now);
        assert!(
            !e.holds("payments", &labels(&[])),
            "relabelled before any status: free"
        );
        let status = e.status(Some(vec!["payments".into()]));
        assert_eq!(status.held, Some(vec!["payments".to_string()]));
        f.status = Some(status);
        let e = evaluate(&f, now);
        assert!(
            e.holds("payments", &labels(&[("tier", "dev")])),
            "relabelled: still held"
        );
        assert!(!e.holds("billing", &labels(&[("tier", "dev")])));
        // Written once: later passes keep the list, whoever they see selected now.
        assert_eq!(
            e.status(Some(vec![])).held,
            Some(vec!["payments".to_string()])
        );
        assert_eq!(e.status(None).held, Some(vec!["payments".to_string()]));
        assert_eq!(
            Freezes::new(std::slice::from_ref(&f), now)
                .holding("payments", &labels(&[]))
                .len(),
            1
        );
        // Edited (a new generation): the old list no longer holds; the next status records anew.
        f.metadata.generation = Some(4);
        let e = evaluate(&f, now);
        assert!(!e.holds("payments", &labels(&[("tier", "dev")])));
        assert_eq!(
            e.status(Some(vec!["billing".into()])).held,
            Some(vec!["billing".to_string()])
        );
        // Ended: nothing is held, nothing recorded.
        f.spec.end = Some(Timestamp::new(t("2026-12-24T00:00:00Z")));
        let e = evaluate(&f, now);
        assert!(!e.holds("payments", &labels(&[("tier", "prod")])));
        assert_eq!(e.status(Some(vec!["x".into()])).held, None);
    }

    #[test]
    fn a_bypass_passes_until_it_ends_and_only_the_freeze_it_names() {
        let now = t("2026-12-25T10:00:00Z");
        let bypass = |until: &str, freeze: Option<&str>| FreezeBypass {
            by: "alice".into(),
            user: Some("alice".into()),
            at: None,
            reason: "hotfix".into(),
            until: Timestamp::parse(until).unwrap(),
            freeze: freeze.map(String::from),
        };
        assert!(bypass_allows(
            &bypass("2026-12-25T14:00:00Z", None),
            "holidays",
            now
        ));
        assert!(bypass_allows(
            &bypass("2026-12-25T14:00:00Z", Some("holidays")),
            "holidays",
            now
        ));
        assert!(!bypass_allows(
            &bypass("2026-12-25T14:00:00Z", Some("incident")),
            "holidays",
            now
        ));
        assert!(!bypass_allows(
            &bypass("2026-12-25T10:00:00Z", None),
            "holidays",
            now
        ));
    }
}
