//! Act: apply one promotion's decision idempotently, in order, with optimistic concurrency. A 409
//! means another pass got there first: the rest of this promotion is skipped for this pass, and the
//! next pass starts from what that pass recorded.

use super::decide::{Action, Decision, EventNote};
use super::world::World;
use crate::api::ClusterProfile;
use crate::api::ClusterPromotion;
use crate::api::promotion::FINALIZER;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ActOutcome {
    /// What was written, one line each.
    pub done: Vec<String>,
    /// Another writer changed the promotion or a profile first; retried on the next pass.
    pub conflict: Option<String>,
    /// An error that stopped this promotion's actions, with context.
    pub error: Option<String>,
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn finalizers_without(p: &ClusterPromotion) -> Vec<String> {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect()
}

pub async fn act(
    client: &kube::Client,
    promotion: &ClusterPromotion,
    d: &Decision,
    world: &World,
    now: DateTime<Utc>,
) -> ActOutcome {
    let mut out = ActOutcome::default();
    let mut current = promotion.clone();
    let name = d.promotion.clone();
    let promotions: Api<ClusterPromotion> = Api::all(client.clone());
    let profiles: Api<ClusterProfile> = Api::all(client.clone());
    for action in &d.actions {
        match apply_action(&promotions, &profiles, &mut current, action, world).await {
            Ok(Some(line)) => out.done.push(line),
            Ok(None) => {}
            Err(e) if is_status(&e, 409) => {
                out.conflict = Some(format!(
                    "ClusterPromotion {name}: {}: another writer was first",
                    describe(action)
                ));
                return out;
            }
            Err(e) => {
                out.error = Some(format!(
                    "ClusterPromotion {name}: {}: {e}",
                    describe(action)
                ));
                return out;
            }
        }
    }
    if let Some(status) = &d.status {
        let mut desired = current.clone();
        desired.status = Some(status.clone());
        // PUT on /status carries the resourceVersion: a concurrent pass makes this a 409.
        match promotions
            .replace_status(&name, &PostParams::default(), &desired)
            .await
        {
            Ok(updated) => {
                current = updated;
                out.done.push("wrote status".into());
            }
            Err(e) if is_status(&e, 409) => {
                out.conflict = Some(format!(
                    "ClusterPromotion {name} changed during the pass; status not written"
                ));
                return out;
            }
            Err(e) => {
                out.error = Some(format!("ClusterPromotion {name}: writing status: {e}"));
                return out;
            }
        }
    }
    for action in &d.after_status {
        match apply_action(&promotions, &profiles, &mut current, action, world).await {
            Ok(Some(line)) => out.done.push(line),
            Ok(None) => {}
            Err(e) => {
                // The next pass resets a consumed approval it still finds.
                tracing::warn!(promotion = %name, error = %e, "{} failed", describe(action));
            }
        }
    }
    emit_events(client, &current, &d.events, now).await;
    out
}

fn describe(action: &Action) -> String {
    match action {
        Action::AddFinalizer => "adding the finalizer".into(),
        Action::RemoveFinalizer => "removing the finalizer".into(),
        Action::Apply(p) => format!("applying ClusterProfile {}", p.name),
        Action::Delete { name } => format!("deleting ClusterProfile {name}"),
        Action::Disown { name } => format!("removing the owner reference of ClusterProfile {name}"),
        Action::ResetApproval { stage, .. } => format!("resetting the approval of stage {stage}"),
    }
}

/// One action. `Ok(None)`: nothing needed doing after all (already gone, already reset).
async fn apply_action(
    promotions: &Api<ClusterPromotion>,
    profiles: &Api<ClusterProfile>,
    current: &mut ClusterPromotion,
    action: &Action,
    world: &World,
) -> kube::Result<Option<String>> {
    let name = current.metadata.name.clone().unwrap_or_default();
    let rv = current.metadata.resource_version.clone();
    match action {
        Action::AddFinalizer | Action::RemoveFinalizer => {
            let mut finalizers = finalizers_without(current);
            if *action == Action::AddFinalizer {
                finalizers.push(FINALIZER.into());
            }
            // The resourceVersion makes the list replacement safe against concurrent writers.
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}});
            *current = promotions
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            Ok(Some(describe(action)))
        }
        Action::Apply(desired) => {
            match world.profiles.get(&desired.name) {
                Some(observed) => {
                    profiles
                        .replace(
                            &desired.name,
                            &PostParams::default(),
                            &desired.merged_into(observed),
                        )
                        .await?;
                }
                None => {
                    profiles
                        .create(&PostParams::default(), &desired.to_object())
                        .await?;
                }
            }
            Ok(Some(describe(action)))
        }
        Action::Delete { name } => match profiles.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(Some(describe(action))),
            Err(e) if is_status(&e, 404) => Ok(None),
            Err(e) => Err(e),
        },
        Action::Disown { name: profile } => {
            let Some(observed) = world.profiles.get(profile) else {
                return Ok(None);
            };
            let refs: Vec<Value> = observed
                .metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|r| !(r.kind == "ClusterPromotion" && r.name == name))
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect();
            let patch = json!({"metadata": {"ownerReferences": refs, "resourceVersion": observed.metadata.resource_version}});
            profiles
                .patch(profile, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            Ok(Some(describe(action)))
        }
        Action::ResetApproval { index, stage } => {
            let ops: json_patch::Patch = serde_json::from_value(json!([
                {"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage},
                {"op": "test", "path": format!("/spec/stages/{index}/trigger/manual/approved"), "value": true},
                {"op": "remove", "path": format!("/spec/stages/{index}/trigger/manual/approved")}
            ]))
            .map_err(kube::Error::SerdeError)?;
            match promotions
                .patch(&name, &PatchParams::default(), &Patch::<()>::Json(ops))
                .await
            {
                Ok(updated) => {
                    *current = updated;
                    Ok(Some(describe(action)))
                }
                // The stage moved or the approval is already gone: nothing to reset.
                Err(e) if is_status(&e, 422) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }
}

/// Kubernetes Events (events.k8s.io/v1) in `default`, where events of cluster-scoped objects go.
/// Failing to record one never fails the pass.
async fn emit_events(
    client: &kube::Client,
    p: &ClusterPromotion,
    notes: &[EventNote],
    now: DateTime<Utc>,
) {
    if notes.is_empty() {
        return;
    }
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let name = p.metadata.name.clone().unwrap_or_default();
    let micros = now.timestamp_micros();
    let event_time = k8s_openapi::jiff::Timestamp::from_microsecond(micros)
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime);
    for note in notes {
        let event = Event {
            metadata: kube::core::ObjectMeta {
                generate_name: Some(format!("{name}.")),
                ..Default::default()
            },
            event_time: event_time.clone(),
            action: Some("ClusterPromotion".into()),
            reason: Some(note.reason.clone()),
            note: Some(note.message.clone()),
            type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
            reporting_controller: Some("promoter.dev/promoter".into()),
            reporting_instance: Some("promoter".into()),
            regarding: Some(ObjectReference {
                api_version: Some("config.projectsveltos.io/v1beta1".into()),
                kind: Some("ClusterPromotion".into()),
                name: Some(name.clone()),
                uid: p.metadata.uid.clone(),
                resource_version: p.metadata.resource_version.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Err(e) = events.create(&PostParams::default(), &event).await {
            tracing::warn!(promotion = %name, error = %e, "could not record event {:?}", note.message);
        }
    }
}
