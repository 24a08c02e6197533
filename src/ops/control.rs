//! `approve`, `pause`, `resume` and `abort`: writes an operator makes to a promotion, each one a
//! JSON patch guarded by the resourceVersion read (`rollback` and `freeze bypass` use the same
//! helpers, in [`super::rollback`] and [`super::freeze`]).

use crate::annotations::{
    ABORTED, Aborted, DEADLINE_CLOCK, FAILED, History, PAUSED, RETRY, ROLLBACK, Record, Retry, Run,
    aborted, approval_key, completed, encode, failed, grant, has, paused, retry, rollback,
};
use crate::api::{ClusterPromotion, Timestamp, revision_id};
use crate::pass::decision::Reason;
use crate::pass::events;
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The stage to approve: the one named, or the current stage when it awaits approval.
pub fn stage_to_approve(
    p: &ClusterPromotion,
    stage: Option<&str>,
) -> Result<(usize, String), String> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let target = match stage {
        Some(s) => s.to_string(),
        None => p
            .status
            .as_ref()
            .and_then(|s| s.current_stage_name.clone())
            .ok_or_else(|| format!("{name} has not started; name the stage with --stage"))?,
    };
    let idx = p
        .spec
        .stages
        .iter()
        .position(|s| s.name == target)
        .ok_or_else(|| {
            let stages = p.spec.stages.iter().map(|s| s.name.as_str());
            format!(
                "{name} has no stage {target:?}{}; {}",
                crate::suggest::did_you_mean(&target, stages),
                manual_stages_text(p)
            )
        })?;
    if !is_manual(&p.spec.stages[idx]) {
        let complete = stage.is_none() && crate::annotations::is_complete(p);
        return Err(format!(
            "{}stage {target:?} of {name} has no manual trigger; nothing to approve; {}",
            if complete {
                "the rollout is complete (approving a manual stage pre-approves it for the next \
                 revision): "
            } else {
                ""
            },
            manual_stages_text(p)
        ));
    }
    Ok((idx, target))
}

fn is_manual(stage: &crate::api::Stage) -> bool {
    stage
        .trigger
        .as_ref()
        .and_then(|t| t.manual.as_ref())
        .is_some()
}

/// The stages `approve --stage` accepts, for its errors.
fn manual_stages_text(p: &ClusterPromotion) -> String {
    let manual: Vec<&str> = p
        .spec
        .stages
        .iter()
        .filter(|s| is_manual(s))
        .map(|s| s.name.as_str())
        .collect();
    if manual.is_empty() {
        "it has no stage with a manual trigger".into()
    } else {
        format!("stages with a manual trigger: {}", manual.join(", "))
    }
}

/// Who acts, and why: recorded in the promoter.dev/ annotation and in the Event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actor {
    /// The authenticated identity, with the `--by` note (see `identity::recorded_by`).
    pub by: String,
    /// `--reason`, at most [`REASON_LIMIT`] bytes.
    pub reason: Option<String>,
    /// The username the API server authenticated (a SelfSubjectReview); None where it could not
    /// say. A freeze bypass needs it.
    pub identity: Option<String>,
}

/// The longest `--reason` accepted: it goes into an annotation and into an Event's note (1 KiB).
pub const REASON_LIMIT: usize = 512;

impl Actor {
    /// An actor; a blank reason is none, a reason longer than [`REASON_LIMIT`] bytes is refused.
    pub fn new(by: &str, reason: Option<&str>) -> anyhow::Result<Actor> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if let Some(r) = reason
            && r.len() > REASON_LIMIT
        {
            anyhow::bail!(
                "--reason is {} bytes long; at most {REASON_LIMIT} are recorded",
                r.len()
            );
        }
        Ok(Actor {
            by: if by.trim().is_empty() {
                "unknown".into()
            } else {
                by.to_string()
            },
            reason: reason.map(String::from),
            identity: None,
        })
    }

    pub(crate) fn record(&self, now: DateTime<Utc>, revision: Option<String>) -> Record {
        Record {
            by: self.by.clone(),
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            revision,
            reason: self.reason.clone(),
        }
    }

    /// `<text>` or `<text>: <reason>`, the Event's note.
    pub(crate) fn note(&self, text: String) -> String {
        match &self.reason {
            Some(r) => format!("{text}: {r}"),
            None => text,
        }
    }
}

/// The promotion was written between our read and our guarded patch.
pub(crate) struct Changed;

/// Runs a read-and-guarded-patch until it is not refused for a concurrent change: the minute's
/// pass may write the promotion between our read and our patch, and the person should not have to
/// run the command again.
pub(crate) async fn retrying<T, F, Fut>(name: &str, what: &str, mut once: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Result<T, Changed>>>,
{
    let mut attempt: u64 = 0;
    loop {
        attempt += 1;
        match once().await? {
            Ok(done) => return Ok(done),
            Err(Changed) if attempt < 5 => {
                tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
            }
            Err(Changed) => anyhow::bail!(
                "{name} kept changing while {what} ({attempt} attempts); run the command again"
            ),
        }
    }
}

/// `ops` after a `test` of `read`'s resourceVersion: the API server applies them only to the
/// object as read.
pub fn guarded(read: &ClusterPromotion, ops: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let guard = json!({"op": "test", "path": "/metadata/resourceVersion", "value": read.metadata.resource_version});
    std::iter::once(guard).chain(ops).collect()
}

/// `ops` as a JSON patch of `read` that the API server applies only to the resourceVersion read
/// (its first operation tests it): `Err(Changed)` when it was refused for a concurrent change (a
/// failed `test` is 422, a conflict 409).
pub(crate) async fn guarded_patch(
    api: &Api<ClusterPromotion>,
    read: &ClusterPromotion,
    ops: Vec<serde_json::Value>,
) -> anyhow::Result<Result<ClusterPromotion, Changed>> {
    let name = read.metadata.name.as_deref().unwrap_or_default();
    let ops = guarded(read, ops);
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))?;
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(updated) => Ok(Ok(updated)),
        // Only a JSON patch that did not apply (a failed `test`) or a conflict is a lost race; an
        // invalid result (any other 422) is an error that retrying would only repeat.
        Err(e) if is_status(&e, 409) || crate::guard::patch_not_applied(&e) => Ok(Err(Changed)),
        Err(e) => Err(e).with_context(|| format!("patching ClusterPromotion {name}")),
    }
}

/// Sets `approved: true` on the stage, and records who approved, when, why and which revision, with
/// a JSON patch guarded by the stage name and the object's resourceVersion; records an `Approved`
/// Event.
pub async fn approve(
    client: &kube::Client,
    name: &str,
    stage: Option<&str>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let (stage, pre_approval, record, updated) = retrying(name, "approving", || {
        approve_once(&api, name, stage, actor, now)
    })
    .await?;
    let Some(updated) = updated else {
        // Approved already for the same revision: nothing written, no second Event.
        return Ok(format!(
            "stage {stage} of {name} is already approved by {} at {} for {}; nothing changed",
            record.by,
            record.at,
            match &record.revision {
                Some(r) => format!("revision {}", revision_id(r)),
                None => "the next revision".into(),
            }
        ));
    };
    // The revision as everything else names it (its ID); the record keeps the hash beside it.
    let revision = record
        .revision
        .as_deref()
        .map_or_else(|| "(not started)".into(), revision_id);
    let what = if pre_approval {
        format!("pre-approved stage {stage} of {name} for the next revision")
    } else {
        format!("approved stage {stage} of {name} for revision {revision}")
    };
    let note = if pre_approval {
        actor.note(format!(
            "Stage {stage} pre-approved by {} for the next revision",
            actor.by
        ))
    } else {
        actor.note(format!(
            "Stage {stage} approved by {} for revision {revision}",
            actor.by
        ))
    };
    events::emit_action(client, &updated, Reason::Approved, note, now).await;
    Ok(if pre_approval {
        format!("{what} (the current one has passed it)")
    } else {
        what
    })
}

/// One read and one guarded patch: (stage, whether it is a pre-approval, the record written and
/// the promotion the patch returned; or, when the stage is approved already for the same revision,
/// the record found and no patch).
async fn approve_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    stage: Option<&str>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<(String, bool, Record, Option<ClusterPromotion>), Changed>> {
    let p = api.get(name).await?;
    let (stage, pre_approval, record, ops) = approval_ops(&p, stage, actor, now)?;
    if let Some(found) = approved_already(&p, &stage, &record) {
        return Ok(Ok((stage, pre_approval, found, None)));
    }
    Ok(guarded_patch(api, &p, ops)
        .await?
        .map(|updated| (stage, pre_approval, record, Some(updated))))
}

/// The approval `p` already holds for `stage` when it is what `record` would write again: the
/// trigger approved, and a record of the same revision (or both pre-approvals).
fn approved_already(p: &ClusterPromotion, stage: &str, record: &Record) -> Option<Record> {
    let approved = p
        .spec
        .stage(stage)
        .and_then(|s| s.trigger.as_ref())
        .and_then(|t| t.manual.as_ref())
        .and_then(|m| m.approved)
        == Some(true);
    let found = crate::annotations::approval(p, stage)?;
    (approved && found.revision == record.revision).then_some(found)
}

/// What `promoter approve` writes to `p` as read (pure; [`guarded`] when sent): the stage, whether
/// it is a pre-approval, the record, and the patch's operations.
pub fn approval_ops(
    p: &ClusterPromotion,
    stage: Option<&str>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<(String, bool, Record, Vec<serde_json::Value>)> {
    let (idx, stage) = stage_to_approve(p, stage).map_err(|e| anyhow::anyhow!(e))?;
    let pre_approval = passed_in_current_run(p, idx);
    // Approving a stage the current run has passed approves the next revision to reach it.
    let revision = if pre_approval {
        None
    } else {
        p.status.as_ref().and_then(|s| s.profile_spec_hash.clone())
    };
    let record = actor.record(now, revision);
    let value = serde_json::to_string(&record)?;
    let mut ops = vec![
        json!({"op": "test", "path": format!("/spec/stages/{idx}/name"), "value": stage}),
        json!({"op": "add", "path": format!("/spec/stages/{idx}/trigger/manual/approved"), "value": true}),
    ];
    ops.extend(set_annotations(
        p,
        &[(approval_key(&stage).as_str(), value)],
    ));
    Ok((stage, pre_approval, record, ops))
}

/// The JSON-patch operations that set annotations (creating the map, once, when there is none).
pub(crate) fn set_annotations(
    p: &ClusterPromotion,
    values: &[(&str, String)],
) -> Vec<serde_json::Value> {
    match p.metadata.annotations {
        Some(_) => values
            .iter()
            .map(|(key, value)| {
                json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(key)), "value": value})
            })
            .collect(),
        None => {
            let map: serde_json::Map<String, serde_json::Value> = values
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            vec![json!({"op": "add", "path": "/metadata/annotations", "value": map})]
        }
    }
}

/// The JSON-patch operation that removes one annotation.
fn remove_annotation(key: &str) -> serde_json::Value {
    json!({"op": "remove", "path": format!("/metadata/annotations/{}", escape(key))})
}

/// Whether the current run has passed stage `idx`: a later stage is current, the run is complete,
/// or the stage's approval was already consumed for this run.
pub fn passed_in_current_run(p: &ClusterPromotion, idx: usize) -> bool {
    let Some(status) = p.status.as_ref() else {
        return false;
    };
    let Some(run) = Run::of(status) else {
        return false;
    };
    let stage = &p.spec.stages[idx].name;
    let current = status.current_stage_name.as_deref().unwrap_or_default();
    let later_current = p.spec.stages[idx + 1..].iter().any(|s| s.name == current);
    later_current
        || completed(p).as_ref() == Some(&run)
        || grant(p, stage).is_some_and(|g| g.run == run)
}

/// `bob since 2026-…` (or just who, for a hand-written record without a time).
fn since(r: &Record) -> String {
    if r.at.is_empty() {
        r.by.clone()
    } else {
        format!("{} since {}", r.by, r.at)
    }
}

/// Pauses, or resumes (see [`resume`]), with a JSON patch guarded by the resourceVersion read,
/// retried when the promotion changed in between; records a `Paused` or `Resumed` Event. Pausing
/// a paused promotion or resuming one that nothing holds writes nothing and records nothing.
pub async fn set_paused(
    client: &kube::Client,
    name: &str,
    pause: bool,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    if !pause {
        return resume(client, name, ResumeOptions::default(), actor, now).await;
    }
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let outcome = retrying(name, "pausing", || pause_once(&api, name, actor, now)).await?;
    Ok(match outcome {
        Err(r) => format!("{name} is already paused by {}", since(&r)),
        Ok(updated) => {
            let note = actor.note(format!("Paused by {}", actor.by));
            events::emit_action(client, &updated, Reason::Paused, note, now).await;
            format!(
                "paused {name}: passes leave it alone until `{} resume {name}`",
                crate::invocation::command()
            )
        }
    })
}

/// Written, or the pause already recorded.
async fn pause_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<Result<ClusterPromotion, Record>, Changed>> {
    let p = api.get(name).await?;
    match pause_ops(&p, actor, now) {
        Err(current) => Ok(Ok(Err(current))),
        Ok(ops) => Ok(guarded_patch(api, &p, ops).await?.map(Ok)),
    }
}

/// What `promoter pause` writes to `p` as read (pure; [`guarded`] when sent); the pause recorded
/// when it is paused already.
pub fn pause_ops(
    p: &ClusterPromotion,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<Vec<serde_json::Value>, Record> {
    match paused(p) {
        Some(current) => Err(current),
        None => Ok(set_annotations(
            p,
            &[(PAUSED, encode(&actor.record(now, None)))],
        )),
    }
}

/// How `promoter resume` was asked: `--yes` confirms redeploying a rolled-back revision;
/// `--dry-run` says what it would do and writes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    pub yes: bool,
    pub dry_run: bool,
}

/// Lifts everything that holds the promotion, in one guarded patch, and says which: the pause;
/// an abort of the current run (removed); a halted failure of the current run (`resumed` set: the
/// stage gets a fresh deadline); a rollback of the current run, or a new spec held because its
/// revision was rolled back (a `retry` record: that revision rolls out again from stage 1).
/// Records a `Resumed` Event naming each. Redeploying a rolled-back revision (the revision that
/// failed) is refused unless `options.yes`; `options.dry_run` writes nothing.
pub async fn resume(
    client: &kube::Client,
    name: &str,
    options: ResumeOptions,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let (updated, lifted) = retrying(name, "resuming", || {
        resume_once(&api, name, options, actor, now)
    })
    .await?;
    if lifted.is_empty() {
        return Ok(format!(
            "{name} is not paused, aborted, halted by a missed deadline or rolled back; nothing to resume"
        ));
    }
    let Some(updated) = updated else {
        // A dry run: what it would lift, and what it needs.
        return Ok(format!(
            "would resume {name}: {}; nothing written",
            lifted.join("; ")
        ));
    };
    let note = actor.note(format!("Resumed by {} ({})", actor.by, lifted.join("; ")));
    events::emit_action(client, &updated, Reason::Resumed, note, now).await;
    Ok(format!("resumed {name}: {}", lifted.join("; ")))
}

/// The promotion as written (None: nothing held it, or a dry run) and what was lifted (or would
/// be), one phrase each; an error when it would redeploy a rolled-back revision unconfirmed.
async fn resume_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    options: ResumeOptions,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<(Option<ClusterPromotion>, Vec<String>), Changed>> {
    let p = api.get(name).await?;
    let Resumption {
        ops,
        lifted,
        redeploys,
    } = resume_ops(&p, actor, now);
    if lifted.is_empty() {
        return Ok(Ok((None, lifted)));
    }
    if let Some(revision) = redeploys.filter(|_| !options.yes) {
        if options.dry_run {
            let text = format!(
                "{} (it redeploys revision {revision}: needs --yes)",
                lifted.join("; ")
            );
            return Ok(Ok((None, vec![text])));
        }
        anyhow::bail!(
            "resuming {name} would redeploy revision {revision}, which was rolled back ({}); nothing written: `{} resume {name} --yes` to redeploy it, or --dry-run to see what resume lifts",
            lifted.join("; "),
            crate::invocation::command()
        );
    }
    if options.dry_run {
        return Ok(Ok((None, lifted)));
    }
    Ok(guarded_patch(api, &p, ops)
        .await?
        .map(|updated| (Some(updated), lifted)))
}

/// What `promoter resume` would write and lift.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resumption {
    /// The patch ([`guarded`] when sent); empty when nothing holds the promotion.
    pub ops: Vec<serde_json::Value>,
    /// What it lifts, one phrase each (none: nothing holds it, nothing to write).
    pub lifted: Vec<String>,
    /// The id of the rolled-back revision it would roll out again (the one that failed): the
    /// command asks for a confirmation (`--yes`).
    pub redeploys: Option<String>,
}

/// What `promoter resume` writes to `p` as read (pure), what it lifts, and the rolled-back
/// revision it would roll out again.
pub fn resume_ops(p: &ClusterPromotion, actor: &Actor, now: DateTime<Utc>) -> Resumption {
    let mut removals = Vec::new();
    let mut sets: Vec<(&str, String)> = Vec::new();
    let mut lifted = Vec::new();
    if let Some(r) = paused(p) {
        removals.push(PAUSED);
        lifted.push(format!("paused by {}", since(&r)));
    }
    let run = p.status.as_ref().and_then(Run::of);
    if let Some(run) = &run {
        if let Some(a) = aborted(p).filter(|a| a.run == *run) {
            removals.push(ABORTED);
            lifted.push(format!("aborted by {} at {}", a.by, a.at));
        }
        // Under a rollback the miss belongs to it: only a retry (below) lifts it.
        let rolling_back = rollback(p).is_some_and(|r| r.from == *run);
        // A rollback that missed its own deadline goes on, with a new one: the pass starts its
        // clock again at its first look (the clock is the pass's, never this command's).
        if let Some(mut r) = rollback(p)
            .filter(|r| r.from == *run && r.completed_at.is_none())
            .filter(|_| lifted.is_empty())
            && let Some(m) = r.missed.take()
        {
            lifted.push(format!(
                "the rollback to revision {} missed its deadline ({}) at {}: it goes on with a new deadline",
                revision_id(&r.to),
                m.deadline,
                m.due
            ));
            sets.push((ROLLBACK, encode(&r)));
            if has(p, DEADLINE_CLOCK) {
                removals.push(DEADLINE_CLOCK);
            }
            // Lifting the miss is all this resume does (rolling the revision out again is
            // another resume, once it is rolled back).
            let ops = removals
                .into_iter()
                .map(remove_annotation)
                .chain(set_annotations(p, &sets))
                .collect();
            return Resumption {
                ops,
                lifted,
                redeploys: None,
            };
        }
        if let Some(mut f) = failed(p)
            .filter(|f| f.run == *run && f.resumed.is_none())
            .filter(|_| !rolling_back || lifted.is_empty())
        {
            f.resumed = Some(actor.record(now, None));
            lifted.push(format!(
                "stage {} missed its progress deadline ({}) at {}: it gets a new deadline",
                f.stage, f.deadline, f.at
            ));
            sets.push((FAILED, encode(&f)));
        }
    }
    // Lifting a pause or an abort is all this resume does: a rollback under way goes on, and
    // rolling its revision out again takes another `resume` (a person asks for that explicitly).
    let lifts_a_hold = removals.iter().any(|r| [PAUSED, ABORTED].contains(r));
    let retrying_revision = retry(p).map(|r| r.revision);
    let spec_revision = crate::hash::revision_hash(p);
    let to_retry = match &run {
        // The spec is a new revision: it restarts unless the history says it was rolled back.
        Some(run) if run.revision != spec_revision => History::of(p)
            .rolled_back(&spec_revision)
            .map(|rb| {
                format!(
                    "revision {} was rolled back at {} ({}): it may roll out again",
                    revision_id(&spec_revision),
                    rb.at,
                    rb.cause.as_str()
                )
            })
            .map(|why| (spec_revision.clone(), why)),
        Some(_) if lifts_a_hold => None,
        Some(run) => rollback(p).filter(|r| r.from == *run).map(|r| {
            (
                run.revision.clone(),
                format!(
                    "the rollback to revision {}: revision {} rolls out again from the first stage",
                    revision_id(&r.to),
                    revision_id(&run.revision)
                ),
            )
        }),
        None => None,
    };
    let mut redeploys = None;
    if let Some((revision, why)) = to_retry
        && retrying_revision.as_deref() != Some(revision.as_str())
    {
        redeploys = Some(revision_id(&revision));
        let record = Retry {
            revision,
            by: actor.by.clone(),
            at: Timestamp::new(now),
            reason: actor.reason.clone(),
        };
        sets.push((RETRY, encode(&record)));
        lifted.push(why);
    }
    if lifted.is_empty() {
        return Resumption::default();
    }
    let mut ops: Vec<serde_json::Value> = removals.into_iter().map(remove_annotation).collect();
    if !sets.is_empty() {
        ops.extend(set_annotations(p, &sets));
    }
    Resumption {
        ops,
        lifted,
        redeploys,
    }
}

/// Records an abort of the current run (`promoter.dev/aborted`): passes hold it where it is, with
/// no profile writes, until `promoter resume` or a new revision; an `Aborted` Event. Refuses when
/// nothing runs (not started, complete, rolled back).
pub async fn abort(
    client: &kube::Client,
    name: &str,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let outcome = retrying(name, "aborting", || abort_once(&api, name, actor, now)).await?;
    Ok(match outcome {
        Err(a) => format!(
            "{name}'s current run is already aborted by {} at {}",
            a.by, a.at
        ),
        Ok(updated) => {
            let stage = updated
                .status
                .as_ref()
                .and_then(|s| s.current_stage_name.clone())
                .unwrap_or_default();
            let note = actor.note(format!("Aborted by {} at stage {stage}", actor.by));
            events::emit_action(client, &updated, Reason::Aborted, note, now).await;
            format!(
                "aborted {name} at stage {stage}: passes hold it where it is until `{} resume {name}` or a new revision",
                crate::invocation::command()
            )
        }
    })
}

async fn abort_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<Result<ClusterPromotion, Aborted>, Changed>> {
    let p = api.get(name).await?;
    match abort_ops(&p, actor, now)? {
        Err(a) => Ok(Ok(Err(a))),
        Ok(ops) => Ok(guarded_patch(api, &p, ops).await?.map(Ok)),
    }
}

/// What `promoter abort` writes to `p` as read (pure; [`guarded`] when sent); the abort recorded
/// when the current run is aborted already; an error when nothing runs.
pub fn abort_ops(
    p: &ClusterPromotion,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<Vec<serde_json::Value>, Aborted>> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let Some(run) = p.status.as_ref().and_then(Run::of) else {
        anyhow::bail!("{name} has not started; nothing runs to abort");
    };
    if completed(p).as_ref() == Some(&run) {
        anyhow::bail!(
            "{name} has completed revision {}; nothing runs to abort",
            revision_id(&run.revision)
        );
    }
    if rollback(p).is_some_and(|r| r.from == run && r.completed_at.is_some()) {
        anyhow::bail!("{name} is rolled back and holds; nothing runs to abort");
    }
    if let Some(a) = aborted(p).filter(|a| a.run == run) {
        return Ok(Err(a));
    }
    let record = Aborted {
        run,
        by: actor.by.clone(),
        at: Timestamp::new(now),
        reason: actor.reason.clone(),
    };
    Ok(Ok(set_annotations(p, &[(ABORTED, encode(&record))])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{Cause, Rollback, RollbackMiss};
    use crate::settings::RollbackOrder;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap()
    }

    /// Issue 30: a rollback that missed its own deadline holds for a person; `resume` lifts the
    /// miss and drops the deadline clock (so the next pass starts a new deadline on its own
    /// clock), and does nothing else: the rollback goes on.
    #[test]
    fn resume_lets_a_failed_rollback_go_on_with_a_new_deadline() {
        let run = Run {
            revision: "h2".into(),
            stages: "s".into(),
            since: "2026-02-16T06:00:00Z".into(),
        };
        let record = Rollback {
            from: run.clone(),
            to: "h1".into(),
            order: RollbackOrder::Reverse,
            cause: Cause::ProgressDeadline,
            by: "promoter".into(),
            at: at("2026-02-16T07:00:00Z"),
            reason: None,
            completed_at: None,
            kept: Some("k".into()),
            missed: Some(RollbackMiss {
                at: at("2026-02-16T08:00:00Z"),
                due: at("2026-02-16T08:00:00Z"),
                deadline: "1h".into(),
                stage: "staging".into(),
                why: "not in sync".into(),
            }),
        };
        let p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "resourceVersion": "7", "annotations": {
                ROLLBACK: encode(&record), DEADLINE_CLOCK: "{}"}},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev"}, {"name": "staging"}]},
            "status": {"profileSpecHash": "h2", "stagesHash": "s", "currentStageName": "staging",
                       "stages": [{"name": "dev", "lastUpdateReconciledTime": "2026-02-16T06:00:00Z"},
                                  {"name": "staging"}]}
        }))
        .unwrap();
        let actor = Actor::new("alice", None).unwrap();
        let Resumption {
            ops,
            lifted,
            redeploys,
        } = resume_ops(&p, &actor, at("2026-02-16T09:00:00Z").as_datetime());
        assert_eq!(redeploys, None, "the rollback goes on; nothing redeploys");
        assert_eq!(
            lifted,
            ["the rollback to revision 4f2ee9cfa0 missed its deadline (1h) at 2026-02-16T08:00:00Z: it goes on with a new deadline"
                .replace("4f2ee9cfa0", &revision_id("h1"))]
        );
        let patched = crate::fake::patch::json_patch(
            &serde_json::to_value(&p).unwrap(),
            &serde_json::Value::Array(guarded(&p, ops)),
        )
        .unwrap();
        let after: ClusterPromotion = serde_json::from_value(patched).unwrap();
        let r = rollback(&after).unwrap();
        assert_eq!(r.missed, None);
        assert_eq!(
            Rollback {
                missed: record.missed.clone(),
                ..r
            },
            record
        );
        assert!(!has(&after, DEADLINE_CLOCK));
        assert!(retry(&after).is_none(), "the rollback goes on; no retry");
    }

    /// `approve` of a stage without a manual trigger: only a complete rollout with no stage named
    /// says the rollout is complete; a named stage, or a rollout in progress, gets the plain refusal.
    #[test]
    fn a_stage_without_a_manual_trigger_is_refused_saying_whether_the_rollout_is_complete() {
        let mut p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev"},
                     {"name": "staging", "trigger": {"manual": {}}}, {"name": "prod"}]},
            "status": {"profileSpecHash": "h2", "stagesHash": "s", "currentStageName": "dev",
                       "stages": [{"name": "dev", "lastUpdateReconciledTime": "2026-02-16T06:00:00Z"}]}
        }))
        .unwrap();
        let refused = |p: &ClusterPromotion, stage: &str, named: Option<&str>| {
            let err = stage_to_approve(p, named).unwrap_err();
            let plain = format!(
                "stage \"{stage}\" of p has no manual trigger; nothing to approve; stages with a manual trigger: staging"
            );
            (err.strip_suffix(&plain).map(String::from), err)
        };
        for named in [None, Some("dev")] {
            let (prefix, err) = refused(&p, "dev", named);
            assert_eq!(prefix.as_deref(), Some(""), "{err}");
        }
        let status = p.status.as_mut().unwrap();
        status.current_stage_name = Some("prod".into());
        let run = Run::of(status).unwrap();
        p.metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::annotations::COMPLETED.into(), encode(&run));
        assert!(crate::annotations::is_complete(&p));
        let (prefix, err) = refused(&p, "prod", None);
        assert_eq!(
            prefix.as_deref(),
            Some(
                "the rollout is complete (approving a manual stage pre-approves it for the next revision): "
            ),
            "{err}"
        );
        let (prefix, err) = refused(&p, "dev", Some("dev"));
        assert_eq!(prefix.as_deref(), Some(""), "{err}");
    }
}
