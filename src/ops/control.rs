//! `approve`, `pause` and `resume`: the only writes an operator makes, each one guarded.

use crate::annotations::{PAUSED, Record, Run, approval_key, completed, grant, paused};
use crate::api::ClusterPromotion;
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
                "{name} has no stage {target:?}{}",
                crate::ops::suggest::did_you_mean(&target, stages)
            )
        })?;
    if p.spec.stages[idx]
        .trigger
        .as_ref()
        .and_then(|t| t.manual.as_ref())
        .is_none()
    {
        return Err(format!(
            "stage {target:?} of {name} has no manual trigger; nothing to approve"
        ));
    }
    Ok((idx, target))
}

/// Who acts, and why: recorded in the promoter.dev/ annotation and in the Event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actor {
    /// The authenticated identity, with the `--by` note (see `identity::recorded_by`).
    pub by: String,
    /// `--reason`, at most [`REASON_LIMIT`] bytes.
    pub reason: Option<String>,
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
        })
    }

    fn record(&self, now: DateTime<Utc>, revision: Option<String>) -> Record {
        Record {
            by: self.by.clone(),
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            revision,
            reason: self.reason.clone(),
        }
    }

    /// `<text>` or `<text>: <reason>`, the Event's note.
    fn note(&self, text: String) -> String {
        match &self.reason {
            Some(r) => format!("{text}: {r}"),
            None => text,
        }
    }
}

/// The promotion was written between our read and our guarded patch.
struct Changed;

/// Runs a read-and-guarded-patch until it is not refused for a concurrent change: the minute's
/// pass may write the promotion between our read and our patch, and the person should not have to
/// run the command again.
async fn retrying<T, F, Fut>(name: &str, what: &str, mut once: F) -> anyhow::Result<T>
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

/// A JSON patch that the API server applies only to the resourceVersion read: `Err(Changed)` when
/// it was refused for a concurrent change (a failed `test` is 422, a conflict 409).
async fn guarded_patch(
    api: &Api<ClusterPromotion>,
    name: &str,
    ops: Vec<serde_json::Value>,
) -> anyhow::Result<Result<ClusterPromotion, Changed>> {
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
    let what = if pre_approval {
        format!("pre-approved stage {stage} of {name} for the next revision")
    } else {
        format!(
            "approved stage {stage} of {name} for revision {}",
            record.revision.as_deref().unwrap_or("(not started)")
        )
    };
    let note = if pre_approval {
        actor.note(format!(
            "Stage {stage} pre-approved by {} for the next revision",
            actor.by
        ))
    } else {
        actor.note(format!(
            "Stage {stage} approved by {} for revision {}",
            actor.by,
            record.revision.as_deref().unwrap_or("(not started)")
        ))
    };
    events::emit_action(client, &updated, Reason::Approved, note, now).await;
    Ok(if pre_approval {
        format!("{what} (the current one has passed it)")
    } else {
        what
    })
}

/// One read and one guarded patch: (stage, whether it is a pre-approval, the record written, the
/// promotion as written).
async fn approve_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    stage: Option<&str>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<(String, bool, Record, ClusterPromotion), Changed>> {
    let p = api.get(name).await?;
    let (idx, stage) = stage_to_approve(&p, stage).map_err(|e| anyhow::anyhow!(e))?;
    let pre_approval = passed_in_current_run(&p, idx);
    // Approving a stage the current run has passed approves the next revision to reach it.
    let revision = if pre_approval {
        None
    } else {
        p.status.as_ref().and_then(|s| s.profile_spec_hash.clone())
    };
    let record = actor.record(now, revision);
    let value = serde_json::to_string(&record)?;
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": p.metadata.resource_version}),
        json!({"op": "test", "path": format!("/spec/stages/{idx}/name"), "value": stage}),
        json!({"op": "add", "path": format!("/spec/stages/{idx}/trigger/manual/approved"), "value": true}),
    ];
    ops.push(set_annotation(&p, &approval_key(&stage), value));
    Ok(guarded_patch(api, name, ops)
        .await?
        .map(|updated| (stage, pre_approval, record, updated)))
}

/// The JSON-patch operation that sets one annotation (creating the map when there is none).
fn set_annotation(p: &ClusterPromotion, key: &str, value: String) -> serde_json::Value {
    match p.metadata.annotations {
        Some(_) => {
            json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(key)), "value": value})
        }
        None => json!({"op": "add", "path": "/metadata/annotations", "value": {key: value}}),
    }
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

/// Pauses or resumes with a JSON patch guarded by the resourceVersion read, retried when the
/// promotion changed in between; records a `Paused` or `Resumed` Event. Pausing a paused promotion
/// or resuming one that is not paused writes nothing and records nothing.
pub async fn set_paused(
    client: &kube::Client,
    name: &str,
    pause: bool,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let what = if pause { "pausing" } else { "resuming" };
    let outcome = retrying(name, what, || pause_once(&api, name, pause, actor, now)).await?;
    let since = |r: &Record| {
        if r.at.is_empty() {
            r.by.clone()
        } else {
            format!("{} since {}", r.by, r.at)
        }
    };
    Ok(match outcome {
        PauseOutcome::Unchanged(Some(r)) => format!("{name} is already paused by {}", since(&r)),
        PauseOutcome::Unchanged(None) => format!("{name} is not paused"),
        PauseOutcome::Written(updated, _) if pause => {
            let note = actor.note(format!("Paused by {}", actor.by));
            events::emit_action(client, &updated, Reason::Paused, note, now).await;
            format!("paused {name}: passes leave it alone until `promoter resume {name}`")
        }
        PauseOutcome::Written(updated, ended) => {
            let was = ended.map(|r| format!(" (paused by {})", since(&r)));
            let note = actor.note(format!(
                "Resumed by {}{}",
                actor.by,
                was.unwrap_or_default()
            ));
            events::emit_action(client, &updated, Reason::Resumed, note, now).await;
            format!("resumed {name}")
        }
    })
}

enum PauseOutcome {
    /// Nothing to do: already paused (by this record), or not paused.
    Unchanged(Option<Record>),
    /// Written; for a resume, the pause it ended.
    Written(Box<ClusterPromotion>, Option<Record>),
}

async fn pause_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    pause: bool,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<PauseOutcome, Changed>> {
    let p = api.get(name).await?;
    let current = paused(&p);
    let test = json!({"op": "test", "path": "/metadata/resourceVersion", "value": p.metadata.resource_version});
    let op = match (pause, &current) {
        (true, Some(_)) | (false, None) => return Ok(Ok(PauseOutcome::Unchanged(current))),
        (true, None) => {
            set_annotation(&p, PAUSED, serde_json::to_string(&actor.record(now, None))?)
        }
        (false, Some(_)) => {
            json!({"op": "remove", "path": format!("/metadata/annotations/{}", escape(PAUSED))})
        }
    };
    Ok(guarded_patch(api, name, vec![test, op])
        .await?
        .map(|updated| PauseOutcome::Written(Box::new(updated), current)))
}
