//! A ClusterPromotion that promoter cannot decode (the API server stored it: the CRD types `delay`
//! and timestamps as plain strings) is an error in its own status, written from the raw object
//! without the typed one: the current (or first) stage's entry gets the decode error as its
//! `failureMessage` and a `Blocked:` description, upstream's status schema only. The write is a
//! merge patch of `/status` guarded by the resourceVersion, and it is skipped when the status
//! already says so.
//!
//! Times in the status that are not RFC 3339 (written before the CRD validated them, or by another
//! tool) are removed in that same write: the API server refuses any status write that keeps one
//! inside `status.stages` (`format: date-time`, and the list is atomic, so validation ratcheting
//! does not spare the unchanged item), so the error could not be recorded otherwise, and the
//! promotion could never be read again. A stage without its times is re-checked from its current
//! state: at worst a soak starts again; nothing is promoted early.

use super::decision::BLOCKED;
use super::observe::Undecodable;
use super::stage_status::{description_text, with_timestamp};
use crate::api::{ClusterPromotion, Timestamp};
use chrono::{DateTime, Utc};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

/// The failureMessage written for a decode error.
pub fn failure_message(error: &str) -> String {
    format!("cannot read this ClusterPromotion: {error}")
}

/// The time fields of upstream's status schema, per stage.
const STAGE_TIMES: [&str; 3] = [
    "lastUpdateReconciledTime",
    "lastSuccessfulAppliedTime",
    "lastStatusCheckTime",
];

fn is_time(v: &Value) -> bool {
    v.as_str().is_some_and(|s| Timestamp::parse(s).is_ok())
}

/// Removes the stage times that are not RFC 3339; the paths removed.
fn drop_bad_times(stages: &mut [Value]) -> Vec<String> {
    let mut dropped = Vec::new();
    for (i, stage) in stages.iter_mut().enumerate() {
        let Some(entry) = stage.as_object_mut() else {
            continue;
        };
        for field in STAGE_TIMES {
            if entry
                .get(field)
                .is_some_and(|v| !v.is_null() && !is_time(v))
            {
                entry.remove(field);
                dropped.push(format!("status.stages[{i}].{field}"));
            }
        }
    }
    dropped
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
    let mut stages: Vec<Value> = bad
        .raw
        .pointer("/status/stages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut dropped = drop_bad_times(&mut stages);
    let bad_promotion_time = bad
        .raw
        .pointer("/status/lastPromotionTime")
        .is_some_and(|v| !v.is_null() && !is_time(v));
    if bad_promotion_time {
        dropped.push("status.lastPromotionTime".into());
    }
    let message = if dropped.is_empty() {
        failure_message(&bad.error)
    } else {
        format!(
            "{}; promoter removed the unreadable {} from the status",
            failure_message(&bad.error),
            dropped.join(", ")
        )
    };
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
    if same_message && same_description && current == Some(stage.as_str()) && dropped.is_empty() {
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
    if bad_promotion_time {
        status.insert("lastPromotionTime".into(), Value::Null);
    }
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
                                      "stages": [{"name": "dev", "lastStatusCheckTime": "2026-02-16T05:00:00Z"}]}}));
        let patch = status_patch(&b, now).unwrap();
        assert_eq!(
            patch["status"]["stages"][0],
            json!({"name": "dev", "lastStatusCheckTime": "2026-02-16T05:00:00Z"})
        );
        assert_eq!(patch["status"]["stages"][1]["name"], "prod");
        // Unreadable times are removed in the same write (a real API server refuses the write
        // otherwise), and the message says so.
        let b = bad(json!({"metadata": {"name": "p"},
                           "spec": {"stages": [{"name": "dev"}]},
                           "status": {"currentStageName": "dev", "lastPromotionTime": "yesterday",
                                      "stages": [{"name": "dev", "lastUpdateReconciledTime": "2026-02-16T06:00:00Z",
                                                  "lastSuccessfulAppliedTime": "2026-02-30T00:00:00Z"}]}}));
        let patch = status_patch(&b, now).unwrap();
        let e = &patch["status"]["stages"][0];
        assert_eq!(e["lastUpdateReconciledTime"], "2026-02-16T06:00:00Z");
        assert!(e.get("lastSuccessfulAppliedTime").is_none());
        assert_eq!(patch["status"]["lastPromotionTime"], Value::Null);
        assert!(
            e["failureMessage"].as_str().unwrap().ends_with(
                "; promoter removed the unreadable status.stages[0].lastSuccessfulAppliedTime, status.lastPromotionTime from the status"
            ),
            "{e}"
        );
        // No stage at all: nothing to write on.
        assert_eq!(
            status_patch(&bad(json!({"metadata": {"name": "p"}, "spec": {}})), now),
            None
        );
    }

    /// What is already right is not what makes a write: the message alone, or the description
    /// alone, being right still writes the other; readable (or null) times are kept and not
    /// reported as removed.
    #[test]
    fn writes_what_is_missing_and_keeps_readable_times() {
        let now = Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap();
        let spec = json!({"stages": [{"name": "dev"}]});
        let message = failure_message(&bad(Value::Null).error);
        let blocked = format!("{BLOCKED} (2026-02-16T05:00:00Z)");
        // Another writer replaced the description; the message is still ours.
        let b = bad(json!({"metadata": {"name": "p"}, "spec": spec,
                           "status": {"currentStageName": "dev",
                                      "stages": [{"name": "dev", "failureMessage": message,
                                                  "currentStatusDescription": "Successfully provisioned (2026-02-16T05:00:00Z)"}]}}));
        let patch = status_patch(&b, now).expect("the description is not Blocked");
        assert_eq!(
            patch["status"]["stages"][0]["currentStatusDescription"],
            format!("{BLOCKED} (2026-02-16T06:00:00Z)")
        );
        // Blocked already, for another error: the message is rewritten, the description kept.
        let b = bad(json!({"metadata": {"name": "p"}, "spec": spec,
                           "status": {"currentStageName": "dev",
                                      "stages": [{"name": "dev", "failureMessage": "cannot read this ClusterPromotion: an older error",
                                                  "currentStatusDescription": blocked}]}}));
        let patch = status_patch(&b, now).expect("the message is another error's");
        let e = &patch["status"]["stages"][0];
        assert_eq!(e["failureMessage"], message);
        assert_eq!(e["currentStatusDescription"], blocked);
        // A readable lastPromotionTime, or a null one, stays as it is.
        for kept in [json!("2026-02-16T05:00:00Z"), Value::Null] {
            let b = bad(json!({"metadata": {"name": "p"}, "spec": spec,
                               "status": {"currentStageName": "dev", "lastPromotionTime": kept,
                                          "stages": [{"name": "dev", "lastStatusCheckTime": kept}]}}));
            let patch = status_patch(&b, now).unwrap();
            assert!(
                patch["status"].get("lastPromotionTime").is_none(),
                "{kept}: {patch}"
            );
            assert_eq!(
                patch["status"]["stages"][0]["failureMessage"], message,
                "{kept}"
            );
        }
    }
}
