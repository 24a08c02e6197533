//! One reconciliation pass: observe the cluster, decide per promotion (pure), act idempotently.

pub mod act;
pub mod budget;
pub mod completion;
pub mod deadline;
pub mod decide;
pub mod decision;
pub mod deployment;
pub mod empty_stage;
pub mod events;
pub mod failing;
pub mod freeze_status;
pub mod gates;
pub mod known_hashes;
pub mod notifications;
pub mod observe;
pub mod ownership;
pub mod phase;
mod planner;
mod problems;
mod profile_writes;
pub mod profiles;
pub mod revisions;
pub mod rollback;
pub mod shard;
pub mod stage_status;
pub mod summaries;
pub mod takeover;
pub mod undecodable;
pub mod world;
pub mod write_plan;

pub use crate::api::inventory::ClusterKind;
pub use decide::decide;
pub use decision::{Action, Context, Decision, HealthResults, HealthVerdict, Phase};
pub use planner::FAILED_DEADLINE;
pub use world::{InventoryCluster, World};

use crate::api::ClusterPromotion;
use crate::notify;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use futures::future::BoxFuture;
use serde::Serialize;
use std::collections::BTreeMap;

/// A stage whose postDelayHealthChecks a pass needs.
pub struct HealthRequest<'a> {
    pub promotion: &'a ClusterPromotion,
    pub stage: String,
}

/// Evaluates a stage's postDelayHealthChecks against every cluster of the stage.
pub trait HealthEvaluator: Send + Sync {
    fn evaluate<'a>(
        &'a self,
        promotion: &'a ClusterPromotion,
        stage: &'a str,
        world: &'a World,
    ) -> BoxFuture<'a, HealthVerdict>;

    /// Every stage a pass needs, in one go, so that they can share the pass's budget fairly (the
    /// health-check engine does); by default one after another.
    fn evaluate_all<'a>(
        &'a self,
        requests: &'a [HealthRequest<'a>],
        world: &'a World,
    ) -> BoxFuture<'a, Vec<HealthVerdict>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(requests.len());
            for r in requests {
                out.push(self.evaluate(r.promotion, &r.stage, world).await);
            }
            out
        })
    }
}

/// Evaluates nothing: a stage with postDelayHealthChecks waits, and its status says why (tests and
/// benchmarks of the pass alone; `promoter step` uses the health-check engine).
pub struct ChecksNotEvaluated;

impl HealthEvaluator for ChecksNotEvaluated {
    fn evaluate<'a>(
        &'a self,
        _: &'a ClusterPromotion,
        _: &'a str,
        _: &'a World,
    ) -> BoxFuture<'a, HealthVerdict> {
        Box::pin(async {
            HealthVerdict::NotEvaluated(
                "postDelayHealthChecks are not evaluated by this evaluator; the stage waits".into(),
            )
        })
    }
}

#[derive(Clone, Debug)]
pub struct PassOptions {
    pub dry_run: bool,
    /// Only ClusterPromotions with these labels (a label selector).
    pub selector: Option<String>,
    pub default_tz: Tz,
    pub now: DateTime<Utc>,
    /// Where the notification settings are (`--notifications`); None: notifications off.
    pub notifications: Option<crate::notify::Location>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionReport {
    pub name: String,
    pub phase: Phase,
    pub stage: Option<String>,
    pub summary: String,
    /// What was written (or, in a dry run, what would be).
    pub actions: Vec<String>,
    pub next_check: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// 1-based position of `stage` among the promotion's stages (metrics, dashboards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_index: Option<usize>,
    /// The status' lastPromotionTime after this pass (what was observed, or written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_promotion_time: Option<DateTime<Utc>>,
    /// Decided but not acted on: the pass deadline came first (not an error; the next pass decides
    /// again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred: Option<String>,
    /// Not decided: a read it needs still failed after its retries (also its `error`); the next
    /// pass reads again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecided: Option<String>,
    /// Its notifications in this pass (none when there were none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<crate::notify::delivery::Counts>,
    /// The stage that holds it because it selects no cluster (see `empty_stage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_stage: Option<String>,
    /// By stage, how many of its clusters the run counts against its failure budget after this
    /// pass (see `budget`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub budgeted: std::collections::BTreeMap<String, usize>,
}

impl PromotionReport {
    /// The report of `name` in `phase` with nothing else said yet.
    pub fn new(name: impl Into<String>, phase: Phase) -> PromotionReport {
        PromotionReport {
            name: name.into(),
            phase,
            stage: None,
            summary: String::new(),
            actions: Vec::new(),
            next_check: None,
            conflict: None,
            error: None,
            stage_index: None,
            last_promotion_time: None,
            deferred: None,
            undecided: None,
            notifications: None,
            empty_stage: None,
            budgeted: Default::default(),
        }
    }

    /// In error for the exit code: invalid, failing deployment, a missed progress deadline and
    /// what follows it (a rollback, rolled back), or a write that failed.
    pub fn in_error(&self) -> bool {
        self.error.is_some() || self.phase.in_error()
    }
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassReport {
    pub time: DateTime<Utc>,
    pub dry_run: bool,
    pub promotions: Vec<PromotionReport>,
    /// PromotionFreezes that hold nothing because they are invalid (stored before the CRD's
    /// admission rules, or wrong in a way no rule can say): said in every pass's report while
    /// they stay so, not only once in their status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_freezes: Vec<InvalidFreeze>,
}

/// An Invalid PromotionFreeze, and why it holds nothing.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct InvalidFreeze {
    pub name: String,
    pub message: String,
}

impl PassReport {
    pub fn errors(&self) -> usize {
        self.promotions.iter().filter(|p| p.in_error()).count()
    }

    /// Promotions decided but not acted on: the pass deadline came first.
    pub fn deferred(&self) -> usize {
        self.promotions
            .iter()
            .filter(|p| p.deferred.is_some())
            .count()
    }

    /// The notification figures of every promotion, added up.
    pub fn notifications(&self) -> notify::delivery::Counts {
        let mut all = notify::delivery::Counts::default();
        for c in self.promotions.iter().filter_map(|p| p.notifications) {
            all.add(c);
        }
        all
    }

    /// Promotions not decided: a read they need failed after its retries.
    pub fn undecided(&self) -> usize {
        self.promotions
            .iter()
            .filter(|p| p.undecided.is_some())
            .count()
    }
}

/// The actions of a decision, one line each (what a dry run prints), in the order `act` applies them.
pub fn planned(d: &Decision) -> Vec<String> {
    let mut out: Vec<String> = d.actions.iter().map(planned_line).collect();
    if d.status.is_some() {
        out.push("write status".into());
    }
    out.extend(d.after_status.iter().map(planned_line));
    out
}

fn planned_line(a: &Action) -> String {
    match a {
        Action::AddFinalizer => "add finalizer".to_string(),
        Action::RemoveFinalizer => "remove finalizer".into(),
        Action::Apply(p) => format!("apply ClusterProfile {}", p.name),
        Action::Delete { name } => format!("delete ClusterProfile {name}"),
        Action::Disown { name } => format!("remove owner reference from ClusterProfile {name}"),
        Action::Record(_) | Action::StoreRevision(_) => act::describe(a),
    }
}

/// Decides for one promotion, running its health checks when the decision needs them.
pub async fn decide_with_health(
    p: &ClusterPromotion,
    world: &World,
    health: &dyn HealthEvaluator,
    ctx: &Context,
) -> Decision {
    let first = decide(p, world, &HealthResults::new(), ctx);
    let Some(stage) = first.needs_health.clone() else {
        return first;
    };
    let verdict = health.evaluate(p, &stage, world).await;
    decide(p, world, &HealthResults::from([(stage, verdict)]), ctx)
}

/// A promotion that cannot be read: its status says why (written once), the pass goes on.
async fn report_undecodable(
    client: &kube::Client,
    bad: &observe::Undecodable,
    opts: &PassOptions,
) -> PromotionReport {
    let mut r = PromotionReport {
        summary: undecodable::failure_message(&bad.error),
        ..PromotionReport::new(bad.name.clone(), Phase::Blocked)
    };
    if undecodable::status_patch(bad, opts.now).is_none() {
        return r;
    }
    r.actions.push("write status".into());
    if opts.dry_run {
        return r;
    }
    match undecodable::report(client, bad, opts.now).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
            r.actions.clear();
            r.conflict = Some(format!(
                "ClusterPromotion {} changed or went away during the pass; status not written",
                bad.name
            ));
        }
        Err(e) => {
            r.actions.clear();
            r.error = Some(format!(
                "ClusterPromotion {}: writing status: {}",
                bad.name,
                crate::cli_error::line_with_hint(&e)
            ));
        }
    }
    r
}

/// Decides for every promotion; the health checks the decisions need run together, sharing the
/// pass's health-check budget fairly, instead of one promotion's checks after another's.
pub async fn decide_all(
    promotions: &[ClusterPromotion],
    world: &World,
    health: &dyn HealthEvaluator,
    ctx: &Context,
) -> Vec<Decision> {
    decide_all_until(promotions, world, health, ctx, None).await
}

/// [`decide_all`], with the health checks ended at `deadline`: a stage whose checks did not finish
/// by then is "not evaluated" and waits (never fails), and the pass still has time to write.
pub async fn decide_all_until(
    promotions: &[ClusterPromotion],
    world: &World,
    health: &dyn HealthEvaluator,
    ctx: &Context,
    deadline: Option<tokio::time::Instant>,
) -> Vec<Decision> {
    decide_all_with_results(promotions, world, health, ctx, deadline)
        .await
        .into_iter()
        .map(|(d, _)| d)
        .collect()
}

/// [`decide_all_until`], each decision with the health verdicts it was made from (a promotion
/// decided again in the same pass, after a read, is decided from the same verdicts).
async fn decide_all_with_results(
    promotions: &[ClusterPromotion],
    world: &World,
    health: &dyn HealthEvaluator,
    ctx: &Context,
    deadline: Option<tokio::time::Instant>,
) -> Vec<(Decision, HealthResults)> {
    let mut decisions: Vec<(Decision, HealthResults)> = promotions
        .iter()
        .map(|p| {
            (
                decide(p, world, &HealthResults::new(), ctx),
                HealthResults::new(),
            )
        })
        .collect();
    let (indices, requests): (Vec<usize>, Vec<HealthRequest>) = decisions
        .iter()
        .enumerate()
        .filter_map(|(i, (d, _))| {
            let stage = d.needs_health.clone()?;
            Some((
                i,
                HealthRequest {
                    promotion: &promotions[i],
                    stage,
                },
            ))
        })
        .unzip();
    if requests.is_empty() {
        return decisions;
    }
    let all = health.evaluate_all(&requests, world);
    let verdicts = match deadline {
        Some(d) => match tokio::time::timeout_at(d, all).await {
            Ok(v) => v,
            Err(_) => {
                tracing::warn!(
                    "health checks not finished when the pass deadline neared; their stages wait"
                );
                requests
                    .iter()
                    .map(|_| {
                        HealthVerdict::NotEvaluated(
                            "the pass deadline came before the health checks finished; the next pass checks again".into(),
                        )
                    })
                    .collect()
            }
        },
        None => all.await,
    };
    for ((i, r), v) in indices.into_iter().zip(&requests).zip(verdicts) {
        let results = HealthResults::from([(r.stage.clone(), v)]);
        decisions[i] = (decide(&promotions[i], world, &results, ctx), results);
    }
    decisions
}

/// Bounds of one pass beyond [`PassOptions`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PassLimits {
    /// When the pass stops: reads are not retried past it, health checks end before it, and no
    /// promotion's writes start after it (a promotion whose writes started finishes them). What was
    /// not reached is reported as deferred.
    pub deadline: Option<tokio::time::Instant>,
    /// Only the promotions of this shard (and only their ClusterSummaries are read).
    pub shard: Option<shard::Shard>,
}

/// The default pass deadline: the CronJob (`activeDeadlineSeconds`) and the Lambda function
/// (`Timeout`) end a pass at 50 s; this leaves 10 s for the last promotion's writes and the report.
pub const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(40);

/// A pass deadline as written in a flag or environment variable: `40s`, `1m30s`, `45` (seconds).
pub fn parse_deadline(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let d = match text.parse::<u64>() {
        Ok(secs) => std::time::Duration::from_secs(secs),
        Err(_) => crate::api::GoDuration::parse(text)
            .map_err(|e| format!("{text:?}: {e}"))?
            .to_std(),
    };
    if d.is_zero() {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(d)
}

/// Time kept back from the health checks for the writes, when the deadline is near.
const WRITE_RESERVE: std::time::Duration = std::time::Duration::from_secs(5);

/// Exactly one pass over all (selected) ClusterPromotions, without a deadline or shard.
pub async fn run_pass(
    client: &kube::Client,
    health: &dyn HealthEvaluator,
    opts: &PassOptions,
) -> anyhow::Result<PassReport> {
    run_pass_with(client, health, opts, &PassLimits::default()).await
}

/// Exactly one pass over all (selected) ClusterPromotions. An error here means the pass could not
/// run at all (promotions cannot be listed: API unreachable, unauthorized); per-promotion problems,
/// reads that failed for some promotions included, are in the report.
pub async fn run_pass_with(
    client: &kube::Client,
    health: &dyn HealthEvaluator,
    opts: &PassOptions,
    limits: &PassLimits,
) -> anyhow::Result<PassReport> {
    run_pass_for(client, health, opts, limits, None).await
}

/// [`run_pass_with`] deciding only the promotion `only` (`promoter step NAME`); the others are
/// still observed, since who owns a generated profile name is decided among all of them.
pub async fn run_pass_for(
    client: &kube::Client,
    health: &dyn HealthEvaluator,
    opts: &PassOptions,
    limits: &PassLimits,
    only: Option<&str>,
) -> anyhow::Result<PassReport> {
    let pass = pass_body(client, health, opts, limits, only);
    match limits.deadline {
        Some(d) => crate::client::retry::within_deadline(d, pass).await,
        None => pass.await,
    }
}

fn past(deadline: Option<tokio::time::Instant>) -> bool {
    deadline.is_some_and(|d| tokio::time::Instant::now() >= d)
}

fn deferred_text(limits: &PassLimits) -> String {
    "not acted on: the pass deadline came first; the next pass decides again".to_string()
        + &limits
            .shard
            .map(|s| format!(" (shard {s})"))
            .unwrap_or_default()
}

async fn pass_body(
    client: &kube::Client,
    health: &dyn HealthEvaluator,
    opts: &PassOptions,
    limits: &PassLimits,
    only: Option<&str>,
) -> anyhow::Result<PassReport> {
    let (mut observation, unread) =
        observe::observe_pass(client, opts.selector.as_deref(), limits.shard).await?;
    observation.world.claims = ownership::claims(&observation.promotions);
    if let Some(name) = only {
        observation
            .promotions
            .retain(|p| p.metadata.name.as_deref() == Some(name));
        observation.undecodable.retain(|b| b.name == name);
    }
    observation.world.now = Some(opts.now);
    let ctx = Context {
        now: opts.now,
        default_tz: opts.default_tz,
    };
    let mut report = PassReport {
        time: opts.now,
        dry_run: opts.dry_run,
        promotions: Vec::new(),
        invalid_freezes: crate::freeze::Freezes::new(&observation.world.freezes, opts.now)
            .invalid()
            .map(|f| InvalidFreeze {
                name: f.name.to_string(),
                message: f.message.clone(),
            })
            .collect(),
    };
    for bad in &observation.undecodable {
        if past(limits.deadline) {
            report.promotions.push(PromotionReport {
                deferred: Some(deferred_text(limits)),
                actions: Vec::new(),
                ..report_undecodable(
                    client,
                    bad,
                    &PassOptions {
                        dry_run: true,
                        ..opts.clone()
                    },
                )
                .await
            });
            continue;
        }
        report
            .promotions
            .push(report_undecodable(client, bad, opts).await);
    }
    // A promotion whose reads failed is not decided (its world is incomplete: a missing
    // ClusterSummary or cluster could look like a finished stage); it says why, the others go on.
    let (promotions, held): (Vec<ClusterPromotion>, Vec<ClusterPromotion>) =
        std::mem::take(&mut observation.promotions)
            .into_iter()
            .partition(|p| unread.missing_for(p).is_none());
    for p in &held {
        let why = unread.missing_for(p).unwrap_or_default();
        let r = not_decided(p, &why);
        tracing::error!(promotion = %r.name, "{why}; not decided in this pass");
        report.promotions.push(r);
    }
    let health_deadline = limits.deadline.map(|d| {
        let now = tokio::time::Instant::now();
        d.checked_sub(WRITE_RESERVE)
            .filter(|h| *h > now)
            .unwrap_or(now)
    });
    let settings = notifications::load(client, opts.notifications.as_ref()).await;
    let mut notified: BTreeMap<String, notify::delivery::Counts> = BTreeMap::new();
    let mut written: BTreeMap<String, ClusterPromotion> = BTreeMap::new();
    let decisions = decide_all_with_results(
        &promotions,
        &observation.world,
        health,
        &ctx,
        health_deadline,
    )
    .await;
    for (p, (mut d, results)) in promotions.iter().zip(decisions) {
        let reached = !past(limits.deadline);
        if reached && ownership::fetch_unlisted(client, &mut observation.world, &d).await {
            d = decide_with_health(p, &observation.world, health, &ctx).await;
        }
        if let Some(name) = d.needs_revision.clone() {
            // A rollback reads the one revision it restores, then is decided again.
            if let Err(e) = revisions::fetch(client, &mut observation.world, &name).await {
                let why = format!(
                    "reading PromotionRevision {name} failed: {}",
                    crate::cli_error::line_with_hint(&e)
                );
                let r = not_decided(p, &why);
                tracing::error!(promotion = %r.name, "{why}; not decided in this pass");
                report.promotions.push(r);
                continue;
            }
            d = decide(p, &observation.world, &results, &ctx);
        }
        if reached && !d.needs_summaries.is_empty() {
            // A profile whose spec changes: the hashes its summaries carry before the write go
            // into the record (see `profile_writes`), read now rather than every pass.
            match observe::summaries_of(client, &d.needs_summaries).await {
                Ok(listed) => {
                    let world = &mut observation.world;
                    world
                        .summaries_listed
                        .extend(d.needs_summaries.iter().cloned());
                    world.summaries.extend(listed);
                    d = decide(p, world, &results, &ctx);
                }
                Err(e) => tracing::warn!(
                    promotion = %d.promotion,
                    error = format!("{e:#}"),
                    "the ClusterSummaries of a profile to be rewritten could not be read; stage completion judges them by the API server's times"
                ),
            }
        }
        if let Some(s) = &settings
            && let Some(rec) = notifications::record(p, &d, s.config.as_ref(), opts.now)
        {
            for (e, why) in &rec.lost {
                tracing::warn!(promotion = %d.promotion, key = %e.key, "a notification of {} is dropped: {why}", e.transition);
            }
            notified.entry(d.promotion.clone()).or_default().dropped += rec.lost.len();
            d.record(decision::RecordOp::Outbox(rec.entries));
        }
        let mut r = PromotionReport {
            name: d.promotion.clone(),
            phase: d.phase,
            stage: d.stage.clone(),
            summary: d.summary.clone(),
            actions: planned(&d),
            next_check: d.next_check,
            conflict: None,
            error: None,
            stage_index: d
                .stage
                .as_ref()
                .and_then(|s| p.spec.stages.iter().position(|x| &x.name == s))
                .map(|i| i + 1),
            last_promotion_time: d
                .status
                .as_ref()
                .or(p.status.as_ref())
                .and_then(|s| s.last_promotion_time)
                .map(|t| t.as_datetime()),
            deferred: None,
            undecided: None,
            notifications: None,
            empty_stage: d.empty_stage.clone(),
            budgeted: budget::counts(p, &d),
        };
        if !opts.dry_run && d.writes() {
            if reached {
                let outcome = act::act(client, p, &d, &observation.world, opts.now).await;
                r.actions = outcome.done;
                r.conflict = outcome.conflict;
                r.error = outcome.error;
                if let Some(p) = outcome.promotion {
                    written.insert(r.name.clone(), *p);
                }
            } else {
                r.actions.clear();
                r.deferred = Some(deferred_text(limits));
            }
        }
        // Revisions the history forgot, once this promotion's own writes all went through.
        if !opts.dry_run
            && !past(limits.deadline)
            && !observation.world.own_crds_missing
            && r.conflict.is_none()
            && r.error.is_none()
            && r.deferred.is_none()
        {
            let now_p = written.get(&r.name).unwrap_or(p);
            r.actions
                .extend(revisions::sweep_if_due(client, now_p).await);
        }
        match (&r.error, &r.conflict, &r.deferred) {
            (Some(e), _, _) => {
                tracing::error!(promotion = %r.name, error = %e, "pass failed for this promotion")
            }
            (_, Some(c), _) => tracing::info!(promotion = %r.name, "{c}; retried on the next pass"),
            (_, _, Some(why)) => tracing::warn!(promotion = %r.name, "{why}"),
            _ => {
                tracing::info!(promotion = %r.name, phase = ?r.phase, actions = r.actions.len(), "{}", r.summary)
            }
        }
        report.promotions.push(r);
    }
    // Notifications, once every promotion's own writes are done (their outbox patches then
    // conflict with none of them), each promotion as this pass last wrote or read it.
    // Notifications off at a location (no ConfigMap): outboxes recorded while the settings could
    // not be read are dropped, as nothing would ever send them.
    if (settings.is_some() || opts.notifications.is_some())
        && !opts.dry_run
        && !past(limits.deadline)
    {
        let states: Vec<ClusterPromotion> = promotions
            .iter()
            .chain(&held)
            .map(|p| {
                let name = p.metadata.name.as_deref().unwrap_or_default();
                written.remove(name).unwrap_or_else(|| p.clone())
            })
            .collect();
        match &settings {
            Some(s) => {
                let until = notifications::send_deadline(limits.deadline);
                for (name, c) in notifications::deliver(client, s, &states, opts.now, until).await {
                    notified.entry(name).or_default().add(c);
                }
            }
            None => notifications::drop_outboxes(client, &states).await,
        }
    }
    for r in &mut report.promotions {
        if let Some(c) = notified.get(&r.name).filter(|c| !c.is_zero()) {
            r.notifications = Some(*c);
        }
    }
    // The freezes' own status, by one stepper only (the first shard), for the whole fleet.
    if !opts.dry_run
        && !past(limits.deadline)
        && only.is_none()
        && limits.shard.is_none_or(|s| s.index == 0)
    {
        let world = &observation.world;
        let promotions = world.all_promotions.as_ref();
        for line in freeze_status::write(client, &world.freezes, promotions, opts.now).await {
            tracing::info!("{line}");
        }
    }
    Ok(report)
}

/// The report of a promotion not decided because a read it needs failed.
fn not_decided(p: &ClusterPromotion, why: &str) -> PromotionReport {
    let status = p.status.as_ref();
    let stage = status.and_then(|s| s.current_stage_name.clone());
    PromotionReport {
        name: p.metadata.name.clone().unwrap_or_default(),
        phase: phase::recorded(p),
        stage_index: stage
            .as_ref()
            .and_then(|s| p.spec.stages.iter().position(|x| &x.name == s))
            .map(|i| i + 1),
        stage,
        summary: format!("not decided in this pass: {why}"),
        actions: Vec::new(),
        next_check: None,
        conflict: None,
        error: Some(format!(
            "not decided in this pass: {why} (after retries; the next pass reads again)"
        )),
        last_promotion_time: status
            .and_then(|s| s.last_promotion_time)
            .map(|t| t.as_datetime()),
        deferred: None,
        undecided: Some(why.to_string()),
        notifications: None,
        empty_stage: None,
        budgeted: Default::default(),
    }
}

#[cfg(test)]
mod pass_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn pass_report(promotions: Vec<PromotionReport>) -> PassReport {
        PassReport {
            time: DateTime::UNIX_EPOCH,
            dry_run: false,
            promotions,
            invalid_freezes: Vec::new(),
        }
    }

    #[test]
    fn a_promotion_is_in_error_by_its_phase_or_by_a_failed_write() {
        assert!(!PromotionReport::new("a", Phase::Progressing).in_error());
        assert!(PromotionReport::new("a", Phase::Failed).in_error());
        let failed_write = PromotionReport {
            error: Some("writing status: 500".into()),
            ..PromotionReport::new("a", Phase::Progressing)
        };
        assert!(failed_write.in_error());
    }

    #[test]
    fn a_pass_counts_its_errors_deferred_undecided_and_notifications() {
        let counts = |sent| notify::delivery::Counts {
            sent,
            ..Default::default()
        };
        let r = pass_report(vec![
            PromotionReport::new("ok", Phase::Complete),
            PromotionReport {
                notifications: Some(counts(1)),
                ..PromotionReport::new("failed", Phase::Failed)
            },
            PromotionReport {
                error: Some("x".into()),
                notifications: Some(counts(2)),
                ..PromotionReport::new("write-failed", Phase::Progressing)
            },
            PromotionReport {
                deferred: Some("x".into()),
                ..PromotionReport::new("deferred-1", Phase::Progressing)
            },
            PromotionReport {
                deferred: Some("x".into()),
                ..PromotionReport::new("deferred-2", Phase::Progressing)
            },
            PromotionReport {
                undecided: Some("x".into()),
                ..PromotionReport::new("undecided-1", Phase::Progressing)
            },
            PromotionReport {
                undecided: Some("x".into()),
                ..PromotionReport::new("undecided-2", Phase::Progressing)
            },
        ]);
        assert_eq!((r.errors(), r.deferred(), r.undecided()), (2, 2, 2));
        assert_eq!(r.notifications(), counts(3));
        let quiet = pass_report(vec![PromotionReport::new("ok", Phase::Complete)]);
        assert_eq!(
            (quiet.errors(), quiet.deferred(), quiet.undecided()),
            (0, 0, 0)
        );
    }

    #[test]
    fn a_dry_run_lists_the_actions_then_the_status_then_what_follows_it() {
        let mut d = Decision::new("p");
        assert!(planned(&d).is_empty());
        d.actions.push(Action::AddFinalizer);
        d.actions.push(Action::Delete { name: "old".into() });
        d.status = Some(crate::api::ClusterPromotionStatus::default());
        d.after_status.push(Action::Disown {
            name: "kept".into(),
        });
        assert_eq!(
            planned(&d),
            [
                "add finalizer",
                "delete ClusterProfile old",
                "write status",
                "remove owner reference from ClusterProfile kept",
            ]
        );
    }

    #[test]
    fn a_pass_deadline_is_seconds_or_a_go_duration_and_longer_than_zero() {
        let secs = std::time::Duration::from_secs;
        assert_eq!(parse_deadline("45"), Ok(secs(45)));
        assert_eq!(parse_deadline(" 1m30s "), Ok(secs(90)));
        assert_eq!(parse_deadline("40s"), Ok(secs(40)));
        assert!(parse_deadline("0").is_err());
        assert!(parse_deadline("0s").is_err());
        assert!(parse_deadline("soon").is_err());
    }

    #[test]
    fn a_deadline_is_past_once_reached_and_never_without_one() {
        let now = tokio::time::Instant::now();
        assert!(!past(None));
        assert!(past(Some(now)));
        assert!(!past(Some(now + std::time::Duration::from_secs(3600))));
    }

    #[test]
    fn a_deferred_promotion_says_why_and_names_its_shard() {
        let plain = deferred_text(&PassLimits::default());
        assert_eq!(
            plain,
            "not acted on: the pass deadline came first; the next pass decides again"
        );
        let sharded = deferred_text(&PassLimits {
            shard: Some(shard::Shard { index: 1, count: 3 }),
            ..PassLimits::default()
        });
        assert_eq!(sharded, format!("{plain} (shard 1/3)"));
    }

    #[test]
    fn a_promotion_not_decided_keeps_its_recorded_stage_and_says_why() {
        let p: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"stages": [{"name": "dev"}, {"name": "prod"}]},
            "status": {"currentStageName": "prod", "lastPromotionTime": "2026-02-16T06:28:24Z"}
        }))
        .unwrap();
        let r = not_decided(&p, "listing ClusterSummaries failed");
        assert_eq!(r.name, "p");
        assert_eq!(r.phase, phase::recorded(&p));
        assert_eq!((r.stage.as_deref(), r.stage_index), (Some("prod"), Some(2)));
        assert_eq!(
            r.undecided.as_deref(),
            Some("listing ClusterSummaries failed")
        );
        assert!(r.in_error() && r.actions.is_empty(), "{r:?}");
        assert_eq!(
            r.last_promotion_time.map(|t| t.to_rfc3339()),
            Some("2026-02-16T06:28:24+00:00".into())
        );
    }
}
