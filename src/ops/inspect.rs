//! What `status` and `explain` show: the **observed** state of a promotion (what the last pass
//! recorded in its status, and what the live objects say), and, labelled as such, the decision the
//! next pass would make (a dry run: health checks are not run; their last results are in the status).

use crate::api::{ClusterPromotion, StageStatus, Timestamp};
use crate::pass::gates::freeze::{self, FreezeCheck};
use crate::pass::phase::of_description;
use crate::pass::profiles::profile_name;
use crate::pass::stage_status::description_text;
use crate::pass::{Context, Decision, HealthResults, Phase, World, decide};
use crate::pass::{deployment, failing};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use k8s_openapi::api::batch::v1::CronJob;
use kube::Api;
use serde::Serialize;

/// The decision the next pass would make, if nothing changes before it runs.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prediction {
    pub phase: Phase,
    pub stage: Option<String>,
    pub summary: String,
    pub actions: Vec<String>,
    pub next_check: Option<DateTime<Utc>>,
    /// What happens at `next_check`: `soak ends`, `progress deadline`, `rollback deadline`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_check_for: Option<&'static str>,
}

/// When a pass last ran, from where the deployment records it (no pass writes anything for this).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastPass {
    /// `CronJob promoter-system/promoter`.
    pub source: String,
    pub last_successful_time: Option<DateTime<Utc>>,
    pub last_schedule_time: Option<DateTime<Utc>>,
    pub suspended: bool,
}

/// One line of `promoter status`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    pub name: String,
    pub stage: String,
    /// 1-based position of `stage` (0 when there is none yet).
    pub stage_number: usize,
    pub stage_count: usize,
    pub phase: Phase,
    /// What else holds the promotion now besides `phase`, each as true as it (a freeze over a
    /// stage that also awaits its approval, a pause over a failing deployment); `message` says
    /// both.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Phase>,
    /// Since when the current stage's recorded state holds.
    pub since: Option<DateTime<Utc>>,
    /// When the current wait ends, as recorded (soak end, window opening).
    pub until: Option<DateTime<Utc>>,
    pub message: String,
    pub last_promotion_time: Option<DateTime<Utc>>,
    /// What the next pass would do: a prediction, not the state.
    pub prediction: Prediction,
    /// When a pass last ran, when the deployment's CronJob is readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_pass: Option<LastPass>,
    /// The newest time a pass stamped in this promotion's status (see [`recorded_write`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_recorded_write: Option<DateTime<Utc>>,
    /// Every stage's name, to size the STAGE column of `status -w` (not part of the output).
    #[serde(skip)]
    pub stage_names: Vec<String>,
    /// Transitions recorded and not yet delivered to every receiver (`promoter.dev/outbox`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<PendingNotification>,
    /// The clusters counted against their stage's failure budget in the current run
    /// (`promoter.dev/budgeted`), each until it runs the revision or leaves the stage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgeted: Vec<BudgetedRow>,
}

/// A cluster counted against its stage's failure budget.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetedRow {
    pub stage: String,
    pub cluster: String,
    pub why: String,
}

/// The clusters of the current run counted against the failure budgets, by stage in the spec's
/// order.
pub fn budgeted_rows(p: &ClusterPromotion) -> Vec<BudgetedRow> {
    let Some(b) = crate::annotations::budgeted_now(p) else {
        return Vec::new();
    };
    p.spec
        .stages
        .iter()
        .flat_map(|s| {
            b.of_stage(&s.name).iter().map(|c| BudgetedRow {
                stage: s.name.clone(),
                cluster: c.cluster.clone(),
                why: c.why.clone(),
            })
        })
        .collect()
}

/// `counted against the failure budget: stage production: ns/a (why); ns/b (why)`.
pub fn budgeted_text(rows: &[BudgetedRow]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    for r in rows {
        let named = format!("{} ({})", r.cluster, r.why);
        match stages.iter_mut().find(|(s, _)| *s == r.stage) {
            Some((_, v)) => v.push(named),
            None => stages.push((r.stage.clone(), vec![named])),
        }
    }
    let parts: Vec<String> = stages
        .into_iter()
        .map(|(s, v)| format!("stage {s}: {}", v.join("; ")))
        .collect();
    Some(format!(
        "counted against the failure budget: {}",
        parts.join("; ")
    ))
}

/// A recorded transition still to be notified.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingNotification {
    pub transition: String,
    pub stage: Option<String>,
    pub message: String,
    pub at: DateTime<Utc>,
    /// The idempotency key receivers see.
    pub key: String,
    /// The receivers still to deliver to, with the attempts and the last error so far; none
    /// until routed (the settings could not be read when it was recorded).
    pub receivers: Option<std::collections::BTreeMap<String, crate::annotations::outbox::Delivery>>,
}

impl StatusRow {
    /// The undelivered notifications that failed at least once: `receiver: error` of each.
    pub fn notification_errors(&self) -> Vec<String> {
        self.notifications
            .iter()
            .flat_map(|n| n.receivers.iter().flatten())
            .filter_map(|(r, d)| Some(format!("{r}: {}", d.last_error.as_deref()?)))
            .collect()
    }
}

/// The promotion's pending notifications, from its outbox and status.
pub fn pending_notifications(p: &ClusterPromotion) -> Vec<PendingNotification> {
    use crate::annotations::outbox;
    let entries = outbox::read(p).unwrap_or_default();
    let token = outbox::status_token(p.status.as_ref());
    crate::notify::delivery::deliverable(&entries, &token)
        .map(|e| PendingNotification {
            transition: e.transition.clone(),
            stage: e.stage.clone(),
            message: e.message.clone(),
            at: e.at.as_datetime(),
            key: e.key.clone(),
            receivers: e.to.clone(),
        })
        .collect()
}

impl StatusRow {
    /// What happens next and when, in words: the end of the current wait as recorded (`soak
    /// ends`), or the next pass's next check (`rollback deadline`). The dashboard's Next column.
    pub fn next(&self) -> Option<(&'static str, DateTime<Utc>)> {
        let recorded = match self.phase {
            Phase::Soaking => Some("soak ends"),
            Phase::WindowClosed => Some("window opens"),
            Phase::Failing => Some("progress deadline"),
            Phase::Frozen => Some("freeze ends"),
            _ => None,
        };
        match (recorded, self.until) {
            (Some(what), Some(t)) => Some((what, t)),
            _ => {
                let p = &self.prediction;
                Some((p.next_check_for.unwrap_or("next check"), p.next_check?))
            }
        }
    }

    /// `2/3`.
    pub fn position(&self) -> String {
        format!("{}/{}", self.stage_number, self.stage_count)
    }
}

pub fn decision(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, tz: Tz) -> Decision {
    decide(
        p,
        world,
        &HealthResults::new(),
        &Context {
            now,
            default_tz: tz,
        },
    )
}

pub fn prediction(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, tz: Tz) -> Prediction {
    let d = decision(p, world, now, tz);
    let mut summary = d.summary.clone();
    // A dry run does not run the checks: the last result is the one in the status.
    if let Some(stage) = &d.needs_health
        && let Some(f) = stored(p, stage).and_then(|s| s.failure_message.clone())
    {
        summary = format!("stage {stage}: {f}");
    }
    Prediction {
        phase: d.phase,
        stage: d.stage.clone(),
        summary,
        actions: crate::pass::planned(&d),
        next_check: d.next_check,
        next_check_for: d.next_check_for,
    }
}

fn stored<'a>(p: &'a ClusterPromotion, stage: &str) -> Option<&'a StageStatus> {
    p.status
        .as_ref()?
        .stages
        .iter()
        .flatten()
        .find(|s| s.name == stage)
}

/// The first time in a description, as the pass wrote it: `… (2026-02-16T06:36:24Z).`,
/// `…: 2026-02-16T06:36:24Z`, `… until 2026-02-16T06:36:24Z, then halt`.
fn time_in(text: &str) -> Option<DateTime<Utc>> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c| matches!(c, '(' | ')' | '.' | ',' | ';')))
        .find_map(|w| Timestamp::parse(w).ok())
        .map(|t| t.as_datetime())
}

/// What holds the recorded run, from promoter's records about it: an abort, a rollback, a missed
/// deadline under `halt` (see `pass::planner`).
fn run_hold(
    p: &ClusterPromotion,
    status: &crate::api::ClusterPromotionStatus,
) -> Option<(Phase, Option<DateTime<Utc>>, Option<String>)> {
    use crate::annotations::{aborted, failed, rollback};
    let run = crate::annotations::Run::of(status)?;
    if let Some(a) = aborted(p).filter(|a| a.run == run) {
        let why = a.reason.map(|r| format!(": {r}")).unwrap_or_default();
        return Some((
            Phase::Aborted,
            None,
            Some(format!("aborted by {} at {}{why}", a.by, a.at)),
        ));
    }
    if let Some(r) = rollback(p).filter(|r| r.from == run) {
        let id = crate::api::revision_id(&r.to);
        if let (None, Some(m)) = (r.completed_at, &r.missed) {
            return Some((
                Phase::RollbackFailed,
                None,
                Some(format!(
                    "the rollback to revision {id} failed: {}; it holds for a person",
                    m.message()
                )),
            ));
        }
        return Some(match r.completed_at {
            Some(at) => (
                Phase::RolledBack,
                None,
                Some(format!(
                    "rolled back to revision {id} at {at} ({}); holds until the spec changes or `promoter resume`",
                    r.cause.as_str()
                )),
            ),
            None => (
                Phase::RollingBack,
                None,
                Some(format!(
                    "rolling back to revision {id} ({}, {}) since {}",
                    r.cause.as_str(),
                    r.order.as_str(),
                    r.at
                )),
            ),
        });
    }
    let f = failed(p).filter(|f| f.run == run && f.resumed.is_none())?;
    Some((
        Phase::Failed,
        None,
        Some(format!(
            "stage {} missed its progress deadline ({}) at {}: {}",
            f.stage, f.deadline, f.at, f.why
        )),
    ))
}

/// A new revision the last pass held back (a freeze; a revision rolled back before), as its
/// description says.
fn held_new_revision(
    p: &ClusterPromotion,
    stage: &str,
) -> Option<(Phase, Option<DateTime<Utc>>, Option<String>)> {
    let description = stored(p, stage)?
        .current_status_description
        .as_deref()
        .map(description_text)?;
    let phase = of_description(description, false);
    matches!(phase, Phase::Frozen | Phase::RolledBack)
        .then(|| (phase, None, Some(description.to_string())))
}

/// The observed phase of the current stage, from what the last pass recorded and the live objects.
fn observed(
    p: &ClusterPromotion,
    world: &World,
    stage: &str,
    last: bool,
    now: DateTime<Utc>,
) -> (Phase, Option<DateTime<Utc>>, Option<String>) {
    use Phase::*;
    let entry = stored(p, stage);
    let description = entry
        .and_then(|s| s.current_status_description.as_deref())
        .map(description_text)
        .unwrap_or_default();
    let phase = of_description(description, last);
    let until = match phase {
        Soaking | WindowClosed | Failing | Frozen => time_in(description),
        _ => None,
    };
    let failure = entry.and_then(|s| s.failure_message.clone());
    let message = match (phase, failure) {
        // Upstream's texts (kept exactly in the status), in status' words.
        (_, failure) if upstream(description) => Some(in_own_words(
            phase,
            stage,
            description,
            until,
            failure.as_deref(),
        )),
        // `Deployment Failing: retrying until …, then rollback (cluster …: …)`.
        (Failing | Failed, Some(f)) if description.starts_with("Deployment ") => {
            Some(format!("{description} ({f})"))
        }
        (_, Some(f)) => Some(f),
        (_, None) => (!description.is_empty()).then(|| description.to_string()),
    };
    // A deployment that failed shows in the live ClusterSummaries before any pass says so; what
    // becomes of it is what the pass will record (`pass::failing`).
    if matches!(phase, Progressing | ChecksFailing)
        && let Some(spec) = p.spec.stage(stage)
        && let Some(cp) = world.profiles.get(&profile_name(
            p.metadata.name.as_deref().unwrap_or_default(),
            stage,
        ))
    {
        let check = deployment::check(
            p,
            cp,
            &spec.cluster_selector.clone().unwrap_or_default(),
            world,
        );
        if let Some(f) = check.failure {
            let run = p.status.as_ref().and_then(crate::annotations::Run::of);
            let due = entry.and_then(|e| crate::pass::deadline::predicted_due(p, spec, e, now));
            let then = failing::then(p, run.as_ref());
            let (phase, _) = failing::outlook(due, then);
            let message = match due {
                Some(due) => format!(
                    "deployment failing: {f}; Sveltos retries until {}, then {then}",
                    Timestamp::new(due)
                ),
                None => format!("deployment failed: {f}"),
            };
            return (phase, due, Some(message));
        }
    }
    (phase, until, message)
}

/// Whether a stored description (without its time) is one of upstream's texts, or none (a stage
/// reached, nothing recorded yet).
fn upstream(description: &str) -> bool {
    description.is_empty()
        || crate::pass::phase::DESCRIPTIONS.iter().any(|d| {
            d.origin == crate::pass::phase::Origin::Upstream && description.starts_with(d.begins)
        })
}

/// What an upstream text on the current stage means, in `status`' words (its phase's): upstream's
/// texts are kept exactly in the stored status, for Sveltos' dashboards and scripts, but read
/// `Paused` where a stage awaits an approval and name a time window where there is none. The
/// stage's failureMessage (upstream's `ClusterSummary … is not yet provisioned.`, a check that
/// fails) says what it waits for.
fn in_own_words(
    phase: Phase,
    stage: &str,
    description: &str,
    until: Option<DateTime<Utc>>,
    failure: Option<&str>,
) -> String {
    let what = match phase {
        Phase::Progressing if description.starts_with("No matching clusters found") => {
            format!("stage {stage} selects no cluster")
        }
        Phase::Progressing => format!("deploying stage {stage}"),
        Phase::RunningChecks => format!("running the health checks of stage {stage}"),
        Phase::ChecksFailing => format!("the health checks of stage {stage} fail"),
        Phase::WindowClosed => match until {
            Some(t) => format!(
                "the promotion window of stage {stage} is closed until {}",
                Timestamp::new(t)
            ),
            None => format!("the promotion window of stage {stage} is closed"),
        },
        Phase::AwaitingApproval => format!("stage {stage} awaits approval"),
        Phase::Complete => "rollout complete".to_string(),
        // Soaking is said with its delay (`soak_message`); no other phase has upstream's text.
        other => format!("{} at stage {stage}", other.as_str()),
    };
    match failure {
        Some(f) => format!("{what}: {f}"),
        None => what,
    }
}

/// Soaking, as `status` says it: upstream's stored text names a time window where there is only
/// the stage's delay.
fn soak_message(p: &ClusterPromotion, stage: &str, until: Option<DateTime<Utc>>) -> String {
    let delay = p
        .spec
        .stage(stage)
        .and_then(|s| s.trigger.as_ref())
        .and_then(|t| t.gates())
        .and_then(|g| g.delay)
        .map(|d| format!(" (delay {d})"))
        .unwrap_or_default();
    match until {
        Some(t) => format!("soaking{delay} until {}", Timestamp::new(t)),
        None => format!("soaking{delay}"),
    }
}

pub fn status_row(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, tz: Tz) -> StatusRow {
    let name = p.metadata.name.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    let stage = status
        .current_stage_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_default();
    let index = p.spec.stages.iter().position(|s| s.name == stage);
    let last = index.is_some_and(|i| i + 1 == p.spec.stages.len());
    let picked_up = status.profile_spec_hash.as_deref()
        == Some(crate::hash::revision_hash(p).as_str())
        && status.stages_hash.as_deref() == Some(crate::hash::stages_hash(&p.spec.stages).as_str());
    let prediction = prediction(p, world, now, tz);
    let (phase, until, message) = if p.metadata.deletion_timestamp.is_some() {
        (Phase::Deleting, None, None)
    } else if let Some(by) = crate::annotations::paused(p) {
        let message = format!("paused by {} {}", by.by, by.at);
        (Phase::Paused, None, Some(message.trim().to_string()))
    } else if prediction.phase == Phase::Blocked {
        // What blocks it is in the live objects (the spec, its annotations, the stored revision
        // a rollback needs), on the first pass as on any other: the next pass blocks it too.
        let why = prediction
            .summary
            .strip_prefix("blocked: ")
            .unwrap_or(&prediction.summary);
        (Phase::Blocked, None, Some(why.to_string()))
    } else if let Some(held) = run_hold(p, &status) {
        held
    } else if status.current_stage_name.is_none() {
        match freeze::state(p, world, now) {
            // A freeze holds the first stage: no pass records anything for it (nothing changes).
            FreezeCheck::Held(h) => (
                Phase::Frozen,
                None,
                Some(freeze::description(&h, "the rollout's start", None)),
            ),
            _ => {
                let why = "no pass has processed this ClusterPromotion yet";
                (Phase::Pending, None, Some(why.to_string()))
            }
        }
    } else if let Some(held) = held_new_revision(p, &stage).filter(|_| !picked_up) {
        held
    } else if index.is_none() || !picked_up {
        let why = "the spec changed since the last pass; its status is of an earlier revision";
        (Phase::Pending, None, Some(why.to_string()))
    } else {
        observed(p, world, &stage, last, now)
    };
    let message = match (phase, message) {
        (Phase::Soaking, _) => Some(soak_message(p, &stage, until)),
        (_, m) => m,
    };
    let mut message = message.unwrap_or_default();
    let current = picked_up && index.is_some() && status.current_stage_name.is_some();
    let also = second_facts(p, world, &stage, (now, tz), phase, current, &mut message);
    if phase == Phase::AwaitingApproval
        && let Some(manual) = p
            .spec
            .stage(&stage)
            .and_then(|s| s.trigger.as_ref())
            .and_then(|t| t.manual.as_ref())
        && manual.is_approved()
    {
        message = match crate::annotations::approval(p, &stage) {
            Some(r) => format!(
                "approved by {} at {}; not yet acted on by a pass",
                r.by, r.at
            ),
            None => "approved; not yet acted on by a pass".into(),
        };
    }
    let budgeted = budgeted_rows(p);
    if let Some(text) = budgeted_text(&budgeted) {
        message = if message.is_empty() {
            text
        } else {
            format!("{message}; {text}")
        };
    }
    let entry = stored(p, &stage);
    StatusRow {
        name,
        stage_number: index.map(|i| i + 1).unwrap_or(0),
        stage_count: p.spec.stages.len(),
        stage,
        phase,
        also,
        since: entry
            .and_then(|s| s.last_status_check_time.or(s.last_update_reconciled_time))
            .map(|t| t.as_datetime()),
        until,
        message,
        last_promotion_time: status.last_promotion_time.map(|t| t.as_datetime()),
        prediction,
        last_pass: None,
        last_recorded_write: recorded_write(p),
        stage_names: p.spec.stages.iter().map(|s| s.name.clone()).collect(),
        notifications: pending_notifications(p),
        budgeted,
    }
}

/// What else holds `p` at its current `stage` besides `phase`, each true now: under a pause, what
/// a pass would decide were it not paused (a failing deployment or checks, an approval awaited, a
/// freeze, a closed window); an approval awaited behind a freeze or a closed window (the gates
/// before it hold the stage first, and a person is needed anyway). Each is added to `message`,
/// unless the stored text (a freeze's, promoter's own) says it already; so is an active freeze
/// over a rollback, which it does not hold. `current`: the status is of the current revision, at
/// a stage of the spec.
fn second_facts(
    p: &ClusterPromotion,
    world: &World,
    stage: &str,
    (now, tz): (DateTime<Utc>, Tz),
    phase: Phase,
    current: bool,
    message: &mut String,
) -> Vec<Phase> {
    use Phase::*;
    if phase == RollingBack
        && let FreezeCheck::Held(h) = freeze::state(p, world, now)
    {
        message.push_str(&format!(
            "; freeze {} is active ({}): it does not hold a rollback",
            h.freeze, h.until
        ));
        return Vec::new();
    }
    if !current {
        return Vec::new();
    }
    let add = |fact: Phase, text: &str, message: &mut String| {
        if !text.is_empty() && !message.contains(text) {
            if !message.is_empty() {
                message.push_str("; ");
            }
            message.push_str(text);
        }
        vec![fact]
    };
    match phase {
        Paused => {
            // The pause's description replaced what the stage said: ask the decision.
            let mut unpaused = p.clone();
            if let Some(a) = unpaused.metadata.annotations.as_mut() {
                a.remove(crate::annotations::PAUSED);
            }
            let d = decision(&unpaused, world, now, tz);
            match d.phase {
                AwaitingApproval | Failing | Failed | ChecksFailing | Frozen | WindowClosed => {
                    add(d.phase, &d.summary, message)
                }
                _ => Vec::new(),
            }
        }
        Frozen | WindowClosed => {
            let Some(spec) = p.spec.stage(stage) else {
                return Vec::new();
            };
            let status = p.status.as_ref();
            let run = status.and_then(crate::annotations::Run::of);
            let revision = status.and_then(|s| s.profile_spec_hash.as_deref());
            if !crate::pass::gates::approval::pending_for(p, spec, run.as_ref(), revision, None) {
                return Vec::new();
            }
            let text = freeze::awaits_approval(stage);
            // `, and stage S awaits approval`, as the freeze's description says it.
            let text = text.trim_start_matches(", and ");
            add(AwaitingApproval, text, message)
        }
        _ => Vec::new(),
    }
}

/// Where `cronjob/` installs the CronJob that runs the passes: what `status` and `explain` read
/// and `doctor` checks (`--cronjob`, `PROMOTER_CRONJOB`) by default; the
/// tests of `cronjob/` check that the shipped manifests say the same.
pub const CRONJOB_NAMESPACE: &str = "promoter-system";
pub const CRONJOB_NAME: &str = "promoter";
/// `NAMESPACE/NAME` of the same CronJob (clap defaults must be literals or constants).
pub const CRONJOB: &str = "promoter-system/promoter";

/// Reads when the CronJob last ran. `None` when it cannot be read (not installed, not allowed):
/// promoter may run as a Lambda function or from CI.
pub async fn last_pass(client: &kube::Client, namespace: &str, name: &str) -> Option<LastPass> {
    let api: Api<CronJob> = Api::namespaced(client.clone(), namespace);
    let cj = match api.get_opt(name).await {
        Ok(cj) => cj?,
        Err(e) => {
            tracing::debug!(
                "CronJob {namespace}/{name} not readable: {}",
                crate::cli_error::line(&e)
            );
            return None;
        }
    };
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.and_then(|t| DateTime::<Utc>::from_timestamp(t.0.as_second(), 0))
    };
    let status = cj.status.as_ref();
    Some(LastPass {
        source: format!("CronJob {namespace}/{name}"),
        last_successful_time: time(status.and_then(|s| s.last_successful_time.as_ref())),
        last_schedule_time: time(status.and_then(|s| s.last_schedule_time.as_ref())),
        suspended: cj.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false),
    })
}

/// The newest time a pass stamped in `p`'s status (its clock, when it wrote: a promotion or
/// stage time, a description's change). What is known of passes run by hand, from CI or from
/// Lambda without a CronJob: the last one that changed something. No pass writes only to say it
/// ran (a pass that changes nothing writes nothing), so a quiet pass leaves no record.
pub fn recorded_write(p: &ClusterPromotion) -> Option<DateTime<Utc>> {
    let status = p.status.as_ref()?;
    let stages = status.stages.iter().flatten().flat_map(|s| {
        [
            s.last_status_check_time,
            s.last_update_reconciled_time,
            s.last_successful_applied_time,
        ]
    });
    std::iter::once(status.last_promotion_time)
        .chain(stages)
        .flatten()
        .map(|t| t.as_datetime())
        .max()
}

/// The last status change a pass recorded, and what that does not say: `status`/`explain`
/// without a readable CronJob.
pub fn recorded_write_text(at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    let at = match at {
        Some(t) => format!("{} ({} ago)", Timestamp::new(t), age(Some(t), now)),
        None => "none yet".into(),
    };
    format!(
        "the last status change a pass recorded: {at}; a pass that changes nothing writes nothing, so a quiet pass leaves no record"
    )
}

impl LastPass {
    /// A warning when passes look stopped (suspended, never succeeded, last success long ago);
    /// with the last status change a pass `recorded`, when passes may run elsewhere.
    pub fn stale(&self, now: DateTime<Utc>, recorded: Option<DateTime<Utc>>) -> Option<String> {
        if self.suspended {
            return Some(format!("{} is suspended: no pass runs", self.source));
        }
        let elsewhere = recorded
            .map(|t| {
                format!(
                    "; a pass recorded a status change at {} ({} ago): if passes run elsewhere (Lambda, CI), --cronjob none",
                    Timestamp::new(t),
                    age(Some(t), now)
                )
            })
            .unwrap_or_default();
        match self.last_successful_time {
            None => Some(format!(
                "{} has never succeeded yet{elsewhere}",
                self.source
            )),
            Some(t) if now - t > chrono::Duration::minutes(5) => Some(format!(
                "{} last succeeded {} ago: rollouts are not advancing{elsewhere}",
                self.source,
                age(Some(t), now)
            )),
            Some(_) => None,
        }
    }
}

/// `--exit-code`: what a CI job gates on (see [`Phase::exit_code`]).
pub fn exit_code(phase: Phase) -> u8 {
    phase.exit_code()
}

/// Whether `status --watch` stops here: the rollout is done, or waits for a person.
pub fn settled(phase: Phase) -> bool {
    phase.settled()
}

/// `1h02m`, `3d4h`, `45s` (two units, as kubectl's AGE).
pub fn age(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    let Some(t) = since else {
        return "-".into();
    };
    let s = (now - t).num_seconds().max(0);
    let (days, hours, mins, secs) = (s / 86_400, (s % 86_400) / 3_600, (s % 3_600) / 60, s % 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h{m:02}m"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

/// The NEXT column: `in 1h59m`, `due` once passed, `-` when nothing is scheduled.
pub fn relative(until: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match until {
        None => "-".into(),
        Some(t) if t <= now => "due".into(),
        Some(t) => format!("in {}", age(Some(now), t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 46 §5: upstream's texts, kept exactly in the stored status, are said in `status`' own
    /// words (the overview's Message column is `status`' message): no `Paused:` for a stage that
    /// awaits an approval, no time window for a closed window's wait, the phase's words first.
    #[test]
    fn upstream_texts_are_said_in_status_words() {
        let p = |current: &str, description: &str, failure: Option<&str>| -> ClusterPromotion {
            let mut p: ClusterPromotion = serde_json::from_value(serde_json::json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                "metadata": {"name": "p"},
                "spec": {"profileSpec": {}, "stages": [
                    {"name": "dev", "clusterSelector": {}},
                    {"name": "staging", "clusterSelector": {}, "trigger": {"manual": {}}},
                    {"name": "prod", "clusterSelector": {}}]}}))
            .unwrap();
            p.status = Some(crate::api::ClusterPromotionStatus {
                current_stage_name: Some(current.into()),
                profile_spec_hash: Some(crate::hash::revision_hash(&p)),
                stages_hash: Some(crate::hash::stages_hash(&p.spec.stages)),
                stages: Some(vec![StageStatus {
                    name: current.into(),
                    current_status_description: Some(format!(
                        "{description} (2026-02-16T06:00:00Z)"
                    )),
                    failure_message: failure.map(String::from),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            p
        };
        let now: DateTime<Utc> = "2026-02-16T06:01:00Z".parse().unwrap();
        let said =
            |p: ClusterPromotion| status_row(&p, &World::default(), now, chrono_tz::UTC).message;
        assert_eq!(
            said(p("staging", "Paused: Awaiting Manual Approval", None)),
            "stage staging awaits approval"
        );
        assert_eq!(
            said(p(
                "dev",
                "Clusters are being provisioned",
                Some("ClusterSummary p-dev-sveltos-dev01 is not yet provisioned.")
            )),
            "deploying stage dev: ClusterSummary p-dev-sveltos-dev01 is not yet provisioned."
        );
        assert_eq!(
            said(p("dev", "Clusters are being provisioned", None)),
            "deploying stage dev"
        );
        assert_eq!(
            said(p(
                "dev",
                "Window Closed: Waiting for Next Schedule (2026-02-16T07:00:00Z).",
                None
            )),
            "the promotion window of stage dev is closed until 2026-02-16T07:00:00Z"
        );
        assert_eq!(
            said(p("dev", "Running Post-Promotion Health Checks", None)),
            "running the health checks of stage dev"
        );
        assert_eq!(
            said(p("prod", "Successfully provisioned", None)),
            "rollout complete"
        );
        // promoter's own texts are said as written.
        assert!(
            said(p(
                "dev",
                "Frozen: freeze f: r (until lifted); stage staging waits",
                None
            ))
            .starts_with("Frozen: freeze f")
        );
    }

    #[test]
    fn times_in_descriptions() {
        assert_eq!(
            time_in("Window Closed: Waiting for Next Schedule (2026-02-16T06:36:24Z).")
                .map(|t| t.to_rfc3339()),
            Some("2026-02-16T06:36:24+00:00".into())
        );
        assert_eq!(
            time_in("Delayed: Waiting for Time Window: 2026-02-16T06:36:24Z")
                .map(|t| t.to_rfc3339()),
            Some("2026-02-16T06:36:24+00:00".into())
        );
        assert_eq!(
            time_in("Window Closed: Waiting for Next Schedule (never)."),
            None
        );
    }
}
