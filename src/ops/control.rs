//! `approve`, `pause` and `resume`: the only writes an operator makes, each one guarded.

use crate::annotations::{PAUSED, Record, Run, approval_key, completed, grant};
use crate::api::ClusterPromotion;
use chrono::{DateTime, Utc};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

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
        .ok_or_else(|| format!("{name} has no stage {target:?}"))?;
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

/// Sets `approved: true` on the stage, and records who approved, when, and which revision, with a
/// JSON patch guarded by the stage name and the object's resourceVersion.
pub async fn approve(
    client: &kube::Client,
    name: &str,
    stage: Option<&str>,
    by: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    // The minute's pass may write the promotion between our read and our patch: read again and
    // retry a few times rather than asking the person to.
    let mut attempt: u64 = 0;
    let (stage, pre_approval, record) = loop {
        attempt += 1;
        match approve_once(&api, name, stage, by, now).await {
            Err(ApproveError::Changed) if attempt < 5 => {
                tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
            }
            Err(ApproveError::Changed) => anyhow::bail!(
                "{name} kept changing while approving ({attempt} attempts); run the command again"
            ),
            Err(ApproveError::Other(e)) => return Err(e),
            Ok(done) => break done,
        }
    };
    Ok(if pre_approval {
        format!(
            "pre-approved stage {stage} of {name} for the next revision (the current one has passed it)"
        )
    } else {
        format!(
            "approved stage {stage} of {name} for revision {}",
            record.revision.as_deref().unwrap_or("(not started)")
        )
    })
}

enum ApproveError {
    /// The resourceVersion (or the stage at that index) changed since it was read.
    Changed,
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for ApproveError {
    fn from(e: E) -> Self {
        ApproveError::Other(e.into())
    }
}

/// One read and one guarded patch: (stage, whether it is a pre-approval, the record written).
async fn approve_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    stage: Option<&str>,
    by: &str,
    now: DateTime<Utc>,
) -> Result<(String, bool, Record), ApproveError> {
    let p = api.get(name).await?;
    let (idx, stage) = stage_to_approve(&p, stage).map_err(|e| anyhow::anyhow!(e))?;
    let pre_approval = passed_in_current_run(&p, idx);
    let record = Record {
        by: by.to_string(),
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        // Approving a stage the current run has passed approves the next revision to reach it.
        revision: if pre_approval {
            None
        } else {
            p.status.as_ref().and_then(|s| s.profile_spec_hash.clone())
        },
    };
    let value = serde_json::to_string(&record)?;
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": p.metadata.resource_version}),
        json!({"op": "test", "path": format!("/spec/stages/{idx}/name"), "value": stage}),
        json!({"op": "add", "path": format!("/spec/stages/{idx}/trigger/manual/approved"), "value": true}),
    ];
    ops.push(match p.metadata.annotations {
        Some(_) => json!({"op": "add", "path": format!("/metadata/annotations/{}", escape(&approval_key(&stage))), "value": value}),
        None => json!({"op": "add", "path": "/metadata/annotations", "value": {approval_key(&stage): value}}),
    });
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))?;
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok((stage, pre_approval, record)),
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Err(ApproveError::Changed),
        Err(e) => Err(e.into()),
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

pub async fn set_paused(
    client: &kube::Client,
    name: &str,
    pause: bool,
    by: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let value = if pause {
        let r = Record {
            by: by.to_string(),
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            revision: None,
        };
        json!(serde_json::to_string(&r)?)
    } else {
        serde_json::Value::Null
    };
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {PAUSED: value}}})),
    )
    .await?;
    Ok(if pause {
        format!("paused {name}: passes leave it alone until `promoter resume {name}`")
    } else {
        format!("resumed {name}")
    })
}
