//! `approve`, `pause` and `resume`: the only writes an operator makes, each one guarded.

use crate::annotations::{PAUSED, Record, approval_key};
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
    let p = api.get(name).await?;
    let (idx, stage) = stage_to_approve(&p, stage).map_err(|e| anyhow::anyhow!(e))?;
    let record = Record {
        by: by.to_string(),
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        revision: p.status.as_ref().and_then(|s| s.profile_spec_hash.clone()),
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
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 422 || s.code == 409 => {
                anyhow::anyhow!("{name} changed while approving; run the command again")
            }
            other => other.into(),
        })?;
    Ok(format!(
        "approved stage {stage} of {name} for revision {}",
        record.revision.as_deref().unwrap_or("(not started)")
    ))
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
