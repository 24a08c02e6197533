//! A ClusterPromotion that promoter cannot decode (the API server stored it: the CRD types `delay`
//! and timestamps as plain strings) is an error in its own status, written from the raw object
//! without the typed one: the current (or first) stage's entry gets the decode error as its
//! `failureMessage` and a `Blocked:` description, upstream's status schema only. The write is a
//! merge patch of `/status` guarded by the resourceVersion, and it is skipped when the status
//! already says so.

use super::observe::Undecodable;
use super::stage_status::{description_text, with_timestamp};
use crate::api::{ClusterPromotion, Timestamp};
use chrono::{DateTime, Utc};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

pub const BLOCKED: &str = "Blocked: the ClusterPromotion cannot be processed (see failureMessage)";

/// The failureMessage written for a decode error.
pub fn failure_message(error: &str) -> String {
    format!("cannot read this ClusterPromotion: {error}")
}

/// The stage the error is reported on: the current one, else the first stage of the spec.
fn stage_name(raw: &Value) -> Option<String> {
    let current = raw
        .pointer("/status/currentStageName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let first = raw
        .pointer("/spec/stages/0/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    current.or(first).map(String::from)
}

/// The `/status` merge patch that reports the error, or `None` when the status already does (or
/// there is no stage to report it on).
pub fn status_patch(bad: &Undecodable, now: DateTime<Utc>) -> Option<Value> {
    let stage = stage_name(&bad.raw)?;
    let message = failure_message(&bad.error);
    let mut stages: Vec<Value> = bad
        .raw
        .pointer("/status/stages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let idx = match stages
        .iter()
        .position(|s| s.get("name").and_then(Value::as_str) == Some(stage.as_str()))
    {
        Some(i) => i,
        None => {
            stages.push(json!({"name": stage}));
            stages.len() - 1
        }
    };
    let entry = stages[idx].as_object_mut()?;
    let same_message = entry.get("failureMessage").and_then(Value::as_str) == Some(&message);
    let same_description = entry
        .get("currentStatusDescription")
        .and_then(Value::as_str)
        .map(description_text)
        == Some(BLOCKED);
    let current = bad
        .raw
        .pointer("/status/currentStageName")
        .and_then(Value::as_str);
    if same_message && same_description && current == Some(stage.as_str()) {
        return None;
    }
    entry.insert("failureMessage".into(), json!(message));
    if !same_description {
        entry.insert(
            "currentStatusDescription".into(),
            json!(with_timestamp(BLOCKED, now)),
        );
    }
    entry.insert(
        "lastStatusCheckTime".into(),
        json!(Timestamp::new(now).to_string()),
    );
    let mut status = Map::new();
    status.insert("stages".into(), Value::Array(stages));
    status.insert("currentStageName".into(), json!(stage));
    Some(json!({
        "metadata": {"resourceVersion": bad.raw.pointer("/metadata/resourceVersion")},
        "status": status,
    }))
}

/// Writes the error into the promotion's status. `Ok(true)` when something was written.
pub async fn report(
    client: &kube::Client,
    bad: &Undecodable,
    now: DateTime<Utc>,
) -> kube::Result<bool> {
    let Some(patch) = status_patch(bad, now) else {
        return Ok(false);
    };
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<ClusterPromotion>(&()));
    api.patch_status(&bad.name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn bad(raw: Value) -> Undecodable {
        Undecodable {
            name: "p".into(),
            raw,
            error: "spec.stages[0].trigger.auto.delay: invalid duration \"1d\"".into(),
        }
    }

    #[test]
    fn writes_once_on_the_current_or_first_stage() {
        let now = Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap();
        let b = bad(json!({"metadata": {"name": "p", "resourceVersion": "7"},
                           "spec": {"stages": [{"name": "dev"}, {"name": "prod"}]}}));
        let patch = status_patch(&b, now).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["currentStageName"], "dev");
        let e = &patch["status"]["stages"][0];
        assert_eq!(e["name"], "dev");
        assert_eq!(
            e["failureMessage"],
            "cannot read this ClusterPromotion: spec.stages[0].trigger.auto.delay: invalid duration \"1d\""
        );
        assert_eq!(
            e["currentStatusDescription"],
            format!("{BLOCKED} (2026-02-16T06:00:00Z)")
        );
        // Once written, the next pass writes nothing.
        let mut after = b.clone();
        after.raw["status"] = patch["status"].clone();
        assert_eq!(
            status_patch(&after, now + chrono::Duration::minutes(1)),
            None
        );
        // The current stage is preferred; other entries are kept as they are.
        let b = bad(json!({"metadata": {"name": "p"},
                           "spec": {"stages": [{"name": "dev"}, {"name": "prod"}]},
                           "status": {"currentStageName": "prod",
                                      "stages": [{"name": "dev", "lastStatusCheckTime": "x"}]}}));
        let patch = status_patch(&b, now).unwrap();
        assert_eq!(
            patch["status"]["stages"][0],
            json!({"name": "dev", "lastStatusCheckTime": "x"})
        );
        assert_eq!(patch["status"]["stages"][1]["name"], "prod");
        // No stage at all: nothing to write on.
        assert_eq!(
            status_patch(&bad(json!({"metadata": {"name": "p"}, "spec": {}})), now),
            None
        );
    }
}
