//! What a simulation saw, per promotion and stage, read off the statuses promoter wrote: when each
//! stage started, was provisioned, soaked, waited for its window or an approval, and was promoted.

use crate::api::{ClusterPromotion, StageStatus};
use crate::pass::FAILED_DEADLINE;
use crate::pass::gates::freeze::FROZEN;
use crate::pass::phase::{DEPLOYMENT_FAILING, PROVISIONING};
use crate::pass::rollback;
use crate::pass::stage_status::description_text;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StageTimeline {
    pub name: String,
    pub clusters: Vec<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub provisioned_at: Option<DateTime<Utc>>,
    pub soak_ends_at: Option<DateTime<Utc>>,
    pub window_opened_at: Option<DateTime<Utc>>,
    pub approved_at: Option<DateTime<Utc>>,
    pub promoted_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEvent {
    pub at: DateTime<Utc>,
    pub offset_seconds: i64,
    pub stage: String,
    pub event: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Stop {
    pub stage: Option<String>,
    pub at: DateTime<Utc>,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PromotionTimeline {
    pub name: String,
    pub stages: Vec<StageTimeline>,
    pub events: Vec<TimelineEvent>,
    pub complete: bool,
    /// When the last stage was promoted (the rollout reached production).
    pub finished_at: Option<DateTime<Utc>>,
    /// Time from the start of the simulation to `finished_at`.
    pub eta_seconds: Option<i64>,
    /// Where and why it stopped, if it did not finish.
    pub stopped: Option<Stop>,
    #[serde(skip)]
    waiting: BTreeMap<String, String>,
}

impl PromotionTimeline {
    pub fn new(p: &ClusterPromotion, clusters_of: impl Fn(&str) -> Vec<String>) -> Self {
        PromotionTimeline {
            name: p.metadata.name.clone().unwrap_or_default(),
            stages: p
                .spec
                .stages
                .iter()
                .map(|s| StageTimeline {
                    name: s.name.clone(),
                    clusters: clusters_of(&s.name),
                    ..Default::default()
                })
                .collect(),
            events: Vec::new(),
            complete: false,
            finished_at: None,
            eta_seconds: None,
            stopped: None,
            waiting: BTreeMap::new(),
        }
    }

    /// Adds an event in time order, ties in stage order, after the events already there with the
    /// same time and stage: a pass reads past times off the status (a stage's entry may be older
    /// than the next one's: a rollback restores from the top) next to what it sees now.
    fn push(&mut self, start: DateTime<Utc>, at: DateTime<Utc>, stage: &str, event: String) {
        let order = |name: &str| self.stages.iter().position(|s| s.name == name);
        let key = (at, order(stage));
        let index = self
            .events
            .partition_point(|e| (e.at, order(&e.stage)) <= key);
        self.events.insert(
            index,
            TimelineEvent {
                at,
                offset_seconds: (at - start).num_seconds(),
                stage: stage.into(),
                event,
            },
        );
    }

    /// Records what changed in the promotion's status in the pass at `now`. Times come from the
    /// status where it has them, so a timeline of live state (`promoter plan`) shows the past too.
    pub fn observe(&mut self, start: DateTime<Utc>, now: DateTime<Utc>, p: &ClusterPromotion) {
        let statuses: Vec<StageStatus> = p
            .status
            .as_ref()
            .and_then(|s| s.stages.clone())
            .unwrap_or_default();
        for i in 0..self.stages.len() {
            let name = self.stages[i].name.clone();
            let Some(s) = statuses.iter().find(|s| s.name == name) else {
                continue;
            };
            let text = s
                .current_status_description
                .as_deref()
                .map(description_text)
                .unwrap_or_default()
                .to_string();
            let previous = self.waiting.get(&name).cloned().unwrap_or_default();
            let st = &mut self.stages[i];
            let mut events: Vec<(DateTime<Utc>, String)> = Vec::new();
            if st.started_at.is_none() {
                let at = s
                    .last_update_reconciled_time
                    .map(|t| t.as_datetime())
                    .unwrap_or(now);
                st.started_at = Some(at);
                events.push((
                    at,
                    format!(
                        "profile applied ({}{})",
                        plural(st.clusters.len(), "cluster"),
                        cluster_list(&st.clusters)
                    ),
                ));
            }
            if st.provisioned_at.is_none()
                && let Some(t) = s.last_successful_applied_time
            {
                st.provisioned_at = Some(t.as_datetime());
                events.push((t.as_datetime(), "all clusters provisioned".to_string()));
            }
            if let Some(t) = text.strip_prefix("Delayed: Waiting for Time Window: ")
                && st.soak_ends_at.is_none()
            {
                st.soak_ends_at = DateTime::parse_from_rfc3339(t)
                    .ok()
                    .map(|t| t.with_timezone(&Utc));
                events.push((now, format!("soaking until {t}")));
            }
            if text.starts_with("Window Closed") && !previous.starts_with("Window Closed") {
                events.push((now, "waiting for the promotion window".to_string()));
            }
            // A provisioned stage being provisioned again (a cluster redeploying) is neither
            // failing checks nor the window opening.
            let regressed =
                text.starts_with(PROVISIONING) && s.last_successful_applied_time.is_some();
            if previous.starts_with("Window Closed")
                && !text.starts_with("Window Closed")
                && !regressed
            {
                st.window_opened_at = Some(now);
                events.push((now, "promotion window open".to_string()));
            }
            if text.starts_with("Paused: Awaiting Manual Approval")
                && !previous.starts_with("Paused")
            {
                events.push((now, "awaiting manual approval".to_string()));
            }
            let failure = s.failure_message.clone().unwrap_or_default();
            if previous != text {
                if regressed {
                    events.push((now, format!("redeploying: {failure}")));
                }
                if text == "Awaiting Health Checks to Pass" {
                    events.push((now, format!("health checks failing: {failure}")));
                }
                if let Some(rest) = text.strip_prefix(DEPLOYMENT_FAILING) {
                    events.push((
                        now,
                        format!("deployment failing: {failure}; retrying until{rest}"),
                    ));
                }
                if text.starts_with("Deployment Failed:") {
                    events.push((now, format!("deployment failed: {failure}")));
                }
            }
            events.extend(
                hold_events(&previous, &text, s)
                    .into_iter()
                    .map(|e| (now, e)),
            );
            if st.promoted_at.is_none() && text == "Successfully provisioned" {
                let at = s
                    .last_successful_applied_time
                    .map(|t| t.as_datetime())
                    .unwrap_or(now);
                st.promoted_at = Some(at);
                events.push((at, "promoted".to_string()));
            }
            self.waiting.insert(name.clone(), text);
            for (at, e) in events {
                self.push(start, at, &name, e);
            }
        }
        if let Some(last) = self.stages.last()
            && let Some(done) = last.promoted_at
            && !self.complete
        {
            self.complete = true;
            self.finished_at = Some(done);
            self.eta_seconds = Some((done - start).num_seconds());
        }
    }

    /// A new revision was applied: the run starts over.
    pub fn new_revision(&mut self, start: DateTime<Utc>, now: DateTime<Utc>) {
        for st in &mut self.stages {
            *st = StageTimeline {
                name: st.name.clone(),
                clusters: st.clusters.clone(),
                ..Default::default()
            };
        }
        self.complete = false;
        self.finished_at = None;
        self.eta_seconds = None;
        self.stopped = None;
        self.waiting.clear();
        let first = self
            .stages
            .first()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        self.push(start, now, &first, "new revision applied".into());
    }

    pub fn approved(&mut self, start: DateTime<Utc>, now: DateTime<Utc>, stage: &str) {
        if let Some(st) = self.stages.iter_mut().find(|s| s.name == stage) {
            st.approved_at = Some(now);
        }
        self.push(start, now, stage, "approved".into());
    }
}

/// What a freeze, a missed deadline or a rollback did to a stage, from its description's change.
fn hold_events(previous: &str, text: &str, s: &StageStatus) -> Vec<String> {
    let mut out = Vec::new();
    let entered = |prefix: &str| text.starts_with(prefix) && !previous.starts_with(prefix);
    if entered(FROZEN) {
        out.push(format!(
            "frozen: {}",
            text.trim_start_matches(FROZEN).trim()
        ));
    }
    if previous.starts_with(FROZEN) && !text.starts_with(FROZEN) {
        out.push("freeze lifted".to_string());
    }
    // A missed deadline shows as the stage's description, or (rolled back in the same pass) in
    // the failureMessage the rollback keeps.
    let missed = s
        .failure_message
        .as_deref()
        .filter(|m| m.starts_with("progress deadline"));
    let rolling = text.starts_with(rollback::ROLLING_BACK) || text.starts_with(rollback::WAITING);
    if entered(FAILED_DEADLINE) || (rolling && missed.is_some() && !is_rollback(previous)) {
        out.push(
            missed
                .map(String::from)
                .unwrap_or_else(|| "progress deadline exceeded".into()),
        );
    }
    for (prefix, what) in [
        (rollback::ROLLING_BACK, "rolling back to revision"),
        (rollback::WAITING, "waits to roll back to revision"),
        (rollback::ROLLED_BACK, "rolled back to revision"),
    ] {
        if entered(prefix) {
            out.push(format!("{what}{}", &text[prefix.len()..]));
        }
    }
    if entered("Held:") {
        out.push(text.to_string());
    }
    if entered(rollback::ROLLBACK_FAILED) {
        out.push(
            s.failure_message
                .clone()
                .unwrap_or_else(|| "rollback deadline exceeded".into()),
        );
    }
    out
}

fn is_rollback(text: &str) -> bool {
    text.starts_with(rollback::ROLLING_BACK)
        || text.starts_with(rollback::WAITING)
        || text.starts_with(rollback::ROLLED_BACK)
        || text == rollback::ROLLBACK_FAILED
        || text == FAILED_DEADLINE
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn cluster_list(clusters: &[String]) -> String {
    match clusters.len() {
        0 => String::new(),
        1..=4 => format!(": {}", clusters.join(", ")),
        n => format!(": {}, … and {} more", clusters[..3].join(", "), n - 3),
    }
}

/// `+1h02m`, `+3d4h00m`, `+45s`, `-5m`: to the minute past a day too, so that a day's events do not
/// all read `+1d0h`.
pub fn offset(d: Duration) -> String {
    if d < Duration::zero() {
        return offset(-d).replacen('+', "-", 1);
    }
    let s = d.num_seconds();
    let (days, hours, mins, secs) = (s / 86_400, (s % 86_400) / 3_600, (s % 3_600) / 60, s % 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("+{secs}s"),
        (0, 0, m) => format!("+{m}m"),
        (0, h, m) => format!("+{h}h{m:02}m"),
        (d, h, m) => format!("+{d}d{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regression_is_neither_failing_checks_nor_an_open_window() {
        let p: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev", "trigger": {"auto": {
                "promotionWindow": {"from": "0 3 * * *", "to": "0 4 * * *"}}}}]}
        }))
        .unwrap();
        let with = |text: &str| {
            let mut p = p.clone();
            p.status = serde_json::from_value(serde_json::json!({"stages": [{"name": "dev",
                "currentStatusDescription": text, "failureMessage": "ClusterSummary x is not yet provisioned."}]}))
            .unwrap();
            p
        };
        let t0 = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
        let mut t = PromotionTimeline::new(&p, |_| Vec::new());
        t.observe(
            t0,
            t0,
            &with("Window Closed: Waiting for Next Schedule (1970-01-01T03:00:00Z)."),
        );
        let mut provisioned = with("Clusters are being provisioned");
        provisioned
            .status
            .as_mut()
            .unwrap()
            .stages
            .as_mut()
            .unwrap()[0]
            .last_successful_applied_time = Some(crate::api::Timestamp::new(t0));
        t.observe(t0, t0, &provisioned);
        let events: Vec<&str> = t.events.iter().map(|e| e.event.as_str()).collect();
        assert!(
            !events.iter().any(|e| e.contains("window open")),
            "{events:?}"
        );
        assert!(
            events.contains(&"redeploying: ClusterSummary x is not yet provisioned."),
            "{events:?}"
        );
    }

    #[test]
    fn offsets() {
        assert_eq!(offset(Duration::seconds(45)), "+45s");
        assert_eq!(offset(Duration::minutes(13)), "+13m");
        assert_eq!(offset(Duration::minutes(62)), "+1h02m");
        assert_eq!(offset(Duration::hours(76)), "+3d4h00m");
        assert_eq!(offset(Duration::minutes(24 * 60 + 17)), "+1d0h17m");
        assert_eq!(offset(Duration::minutes(-5)), "-5m");
    }
}
