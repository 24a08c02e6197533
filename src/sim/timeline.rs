//! What a simulation saw, per promotion and stage, read off the statuses promoter wrote and the
//! Events each pass recorded: when each stage started, was provisioned, soaked, waited for its
//! window or an approval, and was promoted.
//!
//! A timeline follows the promotion's runs (a run is one revision from the restart that started
//! it, [`Run`]): when the status shows a new run, what ended with the old one is said (a freeze
//! lifted), and the stages start over; a revision applied while a freeze holds the old run is one
//! line when it is applied, and its run's lines when it starts. Lines of one instant read cause
//! before effect ([`Order`]).

use crate::annotations::Run;
use crate::api::{ClusterPromotion, StageStatus, revision_id};
use crate::pass::FAILED_DEADLINE;
use crate::pass::decision::Reason;
use crate::pass::gates::freeze::{FROZEN, said_awaits_approval};
use crate::pass::phase::{
    BLOCKED, DEPLOYMENT_FAILED, DEPLOYMENT_FAILING, EMPTY_STAGE, PROVISIONING,
};
use crate::pass::rollback;
use crate::pass::stage_status::{description_text, description_time};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StageTimeline {
    pub name: String,
    pub clusters: Vec<String>,
    pub started_at: Option<DateTime<Utc>>,
    /// When every cluster was first seen deployed in this run (an approval or a promotion later
    /// does not move it).
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
    /// The run the stages' lines are about.
    #[serde(skip)]
    run: Option<Run>,
    /// Each line's place among the lines of its instant, beside `events`.
    #[serde(skip)]
    order: Vec<(Order, Option<usize>)>,
    /// A new spec was applied whose run has not started yet (a freeze may hold it): the old run's
    /// completion is not the rollout's.
    #[serde(skip)]
    pending_run: bool,
}

/// Where a line goes among the lines of the same instant: what came from outside the pass first,
/// then what ended, then what was concluded, the promotions, and last what began because of them
/// (a stage rolled back, then the next one down starts rolling back). Within one place, in stage
/// order, then in the order observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Order {
    /// Done to the promotion before the pass: an approval, a new revision.
    Input,
    /// A hold ended: a freeze lifted, a window opened.
    HoldEnded,
    /// What the pass found: deployed everywhere, a deadline missed, a stage rolled back.
    Concluded,
    Promoted,
    /// What starts or waits from now on.
    Began,
}

/// An Event the pass recorded about the promotion: its reason and note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassEvent {
    pub reason: String,
    pub note: String,
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
            run: None,
            order: Vec::new(),
            pending_run: false,
        }
    }

    /// Adds a line in time order, then by [`Order`], then stage order, after the lines already
    /// there with the same key: a pass reads past times off the status (a stage's entry may be
    /// older than the next one's: a rollback restores from the top) next to what it sees now.
    fn push(
        &mut self,
        start: DateTime<Utc>,
        at: DateTime<Utc>,
        stage: &str,
        order: Order,
        event: String,
    ) {
        let stage_index = self.stages.iter().position(|s| s.name == stage);
        let key = (at, order, stage_index);
        let index = self
            .events
            .iter()
            .zip(&self.order)
            .take_while(|(e, (o, s))| (e.at, *o, *s) <= key)
            .count();
        self.events.insert(
            index,
            TimelineEvent {
                at,
                offset_seconds: (at - start).num_seconds(),
                stage: stage.into(),
                event,
            },
        );
        self.order.insert(index, (order, stage_index));
    }

    /// Records what changed in the promotion's status in the pass at `now`, with the Events that
    /// pass recorded about it. Times come from the status where it has them, so a timeline of live
    /// state (`promoter plan`) shows the past too.
    pub fn observe(
        &mut self,
        start: DateTime<Utc>,
        now: DateTime<Utc>,
        p: &ClusterPromotion,
        recorded: &[PassEvent],
    ) {
        let status = p.status.clone().unwrap_or_default();
        if let Some(run) = Run::of(&status) {
            if self.run.as_ref().is_some_and(|r| *r != run) {
                self.run_ended(start, now);
            }
            self.run = Some(run);
        }
        let statuses: Vec<StageStatus> = status.stages.unwrap_or_default();
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
            let failed_now = recorded
                .iter()
                .filter(|e| e.reason == Reason::DeploymentFailed.as_str())
                .find_map(|e| e.note.strip_prefix(&format!("Stage {name}: ")))
                .map(String::from);
            let spent_now = recorded
                .iter()
                .filter(|e| e.reason == Reason::FailureBudgetSpent.as_str())
                .find_map(|e| e.note.strip_prefix(&format!("Stage {name}: ")))
                .map(String::from);
            let st = &mut self.stages[i];
            let mut events: Vec<(DateTime<Utc>, Order, String)> = Vec::new();
            if st.started_at.is_none() {
                let at = s
                    .last_update_reconciled_time
                    .map(|t| t.as_datetime())
                    .unwrap_or(now);
                st.started_at = Some(at);
                events.push((
                    at,
                    Order::Began,
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
                let counted: Vec<String> = crate::annotations::budgeted_now(p)
                    .map(|b| {
                        b.of_stage(&name)
                            .iter()
                            .map(|c| c.cluster.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let what = if counted.is_empty() {
                    "all clusters provisioned".to_string()
                } else {
                    format!(
                        "provisioned within its failure budget, except {}",
                        counted.join(", ")
                    )
                };
                events.push((t.as_datetime(), Order::Concluded, what));
            }
            // Clusters counted against the budget later in the stage (during its soak).
            if let Some(spent) = spent_now {
                events.push((now, Order::Began, spent));
            }
            if let Some(t) = text.strip_prefix("Delayed: Waiting for Time Window: ")
                && st.soak_ends_at.is_none()
            {
                st.soak_ends_at = DateTime::parse_from_rfc3339(t)
                    .ok()
                    .map(|t| t.with_timezone(&Utc));
                events.push((now, Order::Began, format!("soaking until {t}")));
            }
            if text.starts_with("Window Closed") && !previous.starts_with("Window Closed") {
                events.push((
                    now,
                    Order::Began,
                    "waiting for the promotion window".to_string(),
                ));
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
                events.push((now, Order::HoldEnded, "promotion window open".to_string()));
            }
            // Said once, as the pass says it (its AwaitingApproval Event): a freeze that began
            // or ended over a stage awaiting its approval said so in its own text.
            if said_awaits_approval(&text, &name)
                && !previous.starts_with("Paused")
                && !said_awaits_approval(&previous, &name)
            {
                events.push((now, Order::Began, "awaiting manual approval".to_string()));
            }
            let failure = s.failure_message.clone().unwrap_or_default();
            if previous != text {
                if regressed {
                    events.push((now, Order::Began, format!("redeploying: {failure}")));
                }
                if text == "Awaiting Health Checks to Pass" {
                    events.push((
                        now,
                        Order::Began,
                        format!("health checks failing: {failure}"),
                    ));
                }
            }
            // A failure is said when the pass recorded it (Sveltos' error, from its Event); a
            // status that enters a failure without one (read as it is, by `plan`), from its
            // failureMessage.
            let failing =
                text.starts_with(DEPLOYMENT_FAILING) || text.starts_with(DEPLOYMENT_FAILED);
            if let Some(what) =
                failed_now.or_else(|| (failing && previous != text).then(|| failure.clone()))
            {
                let line = match text.strip_prefix(DEPLOYMENT_FAILING) {
                    Some(rest) => format!("deployment failing: {what}; retrying until{rest}"),
                    None => format!("deployment failed: {what}"),
                };
                events.push((now, Order::Began, line));
            }
            events.extend(
                hold_events(&previous, &text, s)
                    .into_iter()
                    .map(|(order, e)| (now, order, e)),
            );
            let st = &mut self.stages[i];
            if st.promoted_at.is_none() && text == "Successfully provisioned" {
                // The promotion's own time: the description's (lastSuccessfulAppliedTime stays
                // the deployment's).
                let at = s
                    .current_status_description
                    .as_deref()
                    .and_then(description_time)
                    .unwrap_or(now);
                st.promoted_at = Some(at);
                events.push((at, Order::Promoted, "promoted".to_string()));
            }
            self.waiting.insert(name.clone(), text);
            for (at, order, e) in events {
                self.push(start, at, &name, order, e);
            }
        }
        if let Some(last) = self.stages.last()
            && let Some(done) = last.promoted_at
            && !self.complete
            && !self.pending_run
        {
            self.complete = true;
            self.finished_at = Some(done);
            self.eta_seconds = Some((done - start).num_seconds());
        }
    }

    /// The status shows a new run: what held the old one has ended, and the stages start over.
    fn run_ended(&mut self, start: DateTime<Utc>, now: DateTime<Utc>) {
        let lifted: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, text)| text.starts_with(FROZEN))
            .map(|(stage, _)| stage.clone())
            .collect();
        for stage in lifted {
            self.push(start, now, &stage, Order::HoldEnded, "freeze lifted".into());
        }
        for st in &mut self.stages {
            *st = StageTimeline {
                name: st.name.clone(),
                clusters: st.clusters.clone(),
                ..Default::default()
            };
        }
        self.waiting.clear();
        self.pending_run = false;
    }

    /// A new spec was applied at `now` (`kubectl apply`): `old` is the run the status recorded
    /// then, `new` the promotion as stored. A new revision or new stages start a new run once the
    /// passes let them (a freeze may hold them); until then the old run's lines go on.
    pub fn new_revision(
        &mut self,
        start: DateTime<Utc>,
        now: DateTime<Utc>,
        old: Option<&Run>,
        new: &ClusterPromotion,
    ) {
        let revision = crate::hash::revision_hash(new);
        let stages = crate::hash::stages_hash(&new.spec.stages);
        let id = revision_id(&revision);
        let line = match old {
            Some(old) if old.revision != revision => format!(
                "new revision {id} applied (replaces {})",
                revision_id(&old.revision)
            ),
            Some(old) if old.stages != stages => {
                format!("new stages applied (revision {id}): the rollout starts over")
            }
            Some(_) => format!("applied again: revision {id} unchanged"),
            None => format!("new revision {id} applied"),
        };
        if old.is_none_or(|o| o.revision != revision || o.stages != stages) {
            self.complete = false;
            self.finished_at = None;
            self.eta_seconds = None;
            self.stopped = None;
            self.pending_run = true;
        }
        let first = self
            .stages
            .first()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        self.push(start, now, &first, Order::Input, line);
    }

    pub fn approved(&mut self, start: DateTime<Utc>, now: DateTime<Utc>, stage: &str) {
        if let Some(st) = self.stages.iter_mut().find(|s| s.name == stage) {
            st.approved_at = Some(now);
        }
        self.push(start, now, stage, Order::Input, "approved".into());
    }
}

/// What a freeze, a missed deadline or a rollback did to a stage, from its description's change.
fn hold_events(previous: &str, text: &str, s: &StageStatus) -> Vec<(Order, String)> {
    let mut out = Vec::new();
    let entered = |prefix: &str| text.starts_with(prefix) && !previous.starts_with(prefix);
    if entered(FROZEN) {
        out.push((
            Order::Began,
            format!("frozen: {}", text.trim_start_matches(FROZEN).trim()),
        ));
    }
    if previous.starts_with(FROZEN) && !text.starts_with(FROZEN) {
        out.push((Order::HoldEnded, "freeze lifted".to_string()));
    }
    // A missed deadline shows as the stage's description, or (rolled back in the same pass) in
    // the failureMessage the rollback keeps.
    let missed = s
        .failure_message
        .as_deref()
        .filter(|m| m.starts_with("progress deadline"));
    let rolling = text.starts_with(rollback::ROLLING_BACK) || text.starts_with(rollback::WAITING);
    if entered(FAILED_DEADLINE) || (rolling && missed.is_some() && !is_rollback(previous)) {
        out.push((
            Order::Concluded,
            missed
                .map(String::from)
                .unwrap_or_else(|| "progress deadline exceeded".into()),
        ));
    }
    for (prefix, order, what) in [
        (
            rollback::ROLLING_BACK,
            Order::Began,
            "rolling back to revision",
        ),
        (
            rollback::WAITING,
            Order::Began,
            "waits to roll back to revision",
        ),
        (
            rollback::ROLLED_BACK,
            Order::Concluded,
            "rolled back to revision",
        ),
    ] {
        if entered(prefix) {
            out.push((order, format!("{what}{}", &text[prefix.len()..])));
        }
    }
    if entered("Held:") {
        out.push((Order::Began, text.to_string()));
    }
    // Blocked: a problem of the promotion, or the stage selecting no cluster; the failureMessage
    // says which.
    if entered(BLOCKED) || entered(EMPTY_STAGE) {
        out.push((
            Order::Began,
            format!("blocked: {}", s.failure_message.as_deref().unwrap_or(text)),
        ));
    }
    if entered(rollback::ROLLBACK_FAILED) {
        out.push((
            Order::Concluded,
            s.failure_message
                .clone()
                .unwrap_or_else(|| "rollback deadline exceeded".into()),
        ));
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
            &[],
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
        t.observe(t0, t0, &provisioned, &[]);
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
