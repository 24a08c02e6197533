//! Act: apply one promotion's decision idempotently, in order, with optimistic concurrency. A 409
//! (or a refused JSON-patch `test`) means another writer got there first: the rest of this
//! promotion is skipped for this pass, and the next pass starts from what is recorded.
//!
//! Order (the invariants are listed in `decide`): the decision's `actions` (the finalizer, stale
//! profiles, repairs of what the status already records, and promoter's records in one JSON patch
//! whose first operation tests the resourceVersion the pass observed), then the status (PUT with the
//! resourceVersion of the pass's last own write, so any other write in between refuses it), then
//! `after_status`: only what that status write decided. Nothing a cluster runs changes before the
//! decision that changes it is recorded, and every write is one the next pass would redo, so a pass
//! killed after any write converges.

use super::decision::{Action, Decision, RecordOp};
use super::world::World;
use crate::annotations::{COMPLETED, FAILED, HISTORY, ROLLBACK, approval_key, grant_key};
use crate::api::promotion::FINALIZER;
use crate::api::{ClusterProfile, ClusterPromotion, PromotionRevision};
use chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
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

/// A write whose outcome is not known: its answer was lost (connection reset, timeout) or the
/// server timed out (504: the write may still be committed). Never replayed: the next pass reads
/// what happened and decides again.
fn outcome_unknown(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(_) | kube::Error::HyperError(_)) || is_status(e, 504)
}

/// How a failed write of one promotion ends its actions for this pass: `Some(text)` when it is not
/// an error (another writer was first, the promotion is gone, the answer was lost; the next pass
/// reads again and decides), `None` when it is.
fn settled(e: &kube::Error, name: &str, what: &str, promotion_write: bool) -> Option<String> {
    if is_status(e, 409) {
        Some(format!(
            "ClusterPromotion {name}: {what}: another writer was first"
        ))
    } else if is_status(e, 404) && promotion_write {
        Some(format!(
            "ClusterPromotion {name}: {what}: the promotion is gone (deleted by another pass or a user)"
        ))
    } else if outcome_unknown(e) {
        Some(format!(
            "ClusterPromotion {name}: {what}: the answer was lost ({e}); not sent again, the next pass reads what happened"
        ))
    } else {
        None
    }
}

/// Whether `action` writes the ClusterPromotion itself (a 404 then means it is gone).
fn writes_promotion(action: &Action) -> bool {
    matches!(
        action,
        Action::AddFinalizer | Action::RemoveFinalizer | Action::Record(_)
    )
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
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    let apis = Apis {
        promotions: &promotions,
        profiles: &profiles,
        revisions: &revisions,
    };
    for action in &d.actions {
        match apply_action(&apis, &mut current, action, world).await {
            Ok(Some(line)) => out.done.push(line),
            Ok(None) => {}
            Err(e) if settled(&e, &name, &describe(action), writes_promotion(action)).is_some() => {
                out.conflict = settled(&e, &name, &describe(action), writes_promotion(action));
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
            Err(e) if settled(&e, &name, "writing status", true).is_some() => {
                out.conflict = settled(&e, &name, "writing status", true);
                return out;
            }
            Err(e) => {
                out.error = Some(format!("ClusterPromotion {name}: writing status: {e}"));
                return out;
            }
        }
    }
    // What the status decided. If this fails, the next pass redoes it from the recorded status.
    for action in &d.after_status {
        match apply_action(&apis, &mut current, action, world).await {
            Ok(Some(line)) => out.done.push(line),
            Ok(None) => {}
            Err(e) if settled(&e, &name, &describe(action), writes_promotion(action)).is_some() => {
                out.conflict = settled(&e, &name, &describe(action), writes_promotion(action));
                break;
            }
            Err(e) => {
                out.error = Some(format!(
                    "ClusterPromotion {name}: {} (after recording the status; the next pass retries): {e}",
                    describe(action)
                ));
                break;
            }
        }
    }
    super::events::emit(client, &current, &d.events, "ClusterPromotion", now).await;
    out
}

pub(crate) fn describe(action: &Action) -> String {
    match action {
        Action::AddFinalizer => "adding the finalizer".into(),
        Action::RemoveFinalizer => "removing the finalizer".into(),
        Action::Apply(p) => format!("applying ClusterProfile {}", p.name),
        Action::Delete { name } => format!("deleting ClusterProfile {name}"),
        Action::Disown { name } => format!("removing the owner reference of ClusterProfile {name}"),
        Action::StoreRevision(r) => format!(
            "storing PromotionRevision {}",
            r.metadata.name.as_deref().unwrap_or_default()
        ),
        Action::DeleteRevision { name } => {
            format!("deleting PromotionRevision {name} (beyond the revision history)")
        }
        Action::Record(ops) => ops
            .iter()
            .map(|op| match op {
                RecordOp::ConsumeApproval { stage, .. } => {
                    format!("consuming the approval of stage {stage}")
                }
                RecordOp::RestoreApproval { stage, .. } => {
                    format!("giving back the unused approval of stage {stage}")
                }
                RecordOp::ForgetApprovalRecord { stage } => {
                    format!("dropping the revoked approval record of stage {stage}")
                }
                RecordOp::Complete(_) => "recording completion".into(),
                RecordOp::ReviseApprovalRecord { stage, .. } => {
                    format!("carrying the approval of stage {stage} over to the taken-over run")
                }
                RecordOp::WithdrawApproval { stage, .. } => {
                    format!(
                        "withdrawing the approval of stage {stage} given to an earlier revision"
                    )
                }
                RecordOp::History(_) => "recording the revision history".into(),
                RecordOp::Failed(f) => {
                    format!(
                        "recording that stage {} missed its progress deadline",
                        f.stage
                    )
                }
                RecordOp::Rollback(r) if r.completed_at.is_some() => {
                    "recording the rollback's completion".into()
                }
                RecordOp::Rollback(r) => format!(
                    "recording a rollback to revision {}",
                    crate::api::revision_id(&r.to)
                ),
                RecordOp::Drop(hold) => format!("dropping {}", hold.key()),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The APIs a decision writes to.
struct Apis<'a> {
    promotions: &'a Api<ClusterPromotion>,
    profiles: &'a Api<ClusterProfile>,
    revisions: &'a Api<PromotionRevision>,
}

/// One action. `Ok(None)`: nothing needed doing after all (already gone, already reset).
async fn apply_action(
    apis: &Apis<'_>,
    current: &mut ClusterPromotion,
    action: &Action,
    world: &World,
) -> kube::Result<Option<String>> {
    let (promotions, profiles) = (apis.promotions, apis.profiles);
    let name = current.metadata.name.clone().unwrap_or_default();
    let rv = current.metadata.resource_version.clone();
    match action {
        Action::StoreRevision(revision) => {
            // Content-addressed: one that exists is the same revision, stored by an earlier or a
            // concurrent pass. Looked up first, so that a pass that keeps dying right after its
            // first write still gets to its record patch.
            let name = revision.metadata.name.clone().unwrap_or_default();
            if apis.revisions.get_opt(&name).await?.is_some() {
                return Ok(None);
            }
            match apis
                .revisions
                .create(&PostParams::default(), revision)
                .await
            {
                Ok(_) => Ok(Some(describe(action))),
                Err(e) if is_status(&e, 409) => Ok(None),
                Err(e) => Err(e),
            }
        }
        Action::DeleteRevision { name: revision } => {
            match apis
                .revisions
                .delete(revision, &DeleteParams::default())
                .await
            {
                Ok(_) => Ok(Some(describe(action))),
                Err(e) if is_status(&e, 404) => Ok(None),
                Err(e) => Err(e),
            }
        }
        Action::AddFinalizer | Action::RemoveFinalizer => {
            let mut finalizers = finalizers_without(current);
            if *action == Action::AddFinalizer {
                finalizers.push(FINALIZER.into());
            }
            // The resourceVersion makes the list replacement safe against concurrent writers.
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}});
            match promotions
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(updated) => {
                    *current = updated;
                    Ok(Some(describe(action)))
                }
                // Gone: a faster pass removed the last finalizer and the promotion with it.
                Err(e) if is_status(&e, 404) && *action == Action::RemoveFinalizer => Ok(None),
                Err(e) => Err(e),
            }
        }
        Action::Apply(desired) => {
            match world.profiles.get(&desired.name) {
                Some(observed) => {
                    // Deleted since observed (another pass, a user): the next pass creates it
                    // again from what it reads, like a conflict.
                    profiles
                        .replace(
                            &desired.name,
                            &PostParams::default(),
                            &desired.merged_into(observed),
                        )
                        .await
                        .map_err(|e| if is_status(&e, 404) { conflict(e) } else { e })?;
                }
                None => {
                    profiles
                        .create(&PostParams::default(), &desired.to_object())
                        .await?;
                }
            }
            Ok(Some(describe(action)))
        }
        Action::Delete { name } => {
            // Only the object the pass judged: if it was deleted and created again since (by
            // someone else, or for another promotion), the UID precondition makes this a 409.
            let params = DeleteParams {
                preconditions: world
                    .profiles
                    .get(name)
                    .and_then(|cp| cp.metadata.uid.clone())
                    .map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                ..DeleteParams::default()
            };
            match profiles.delete(name, &params).await {
                Ok(_) => Ok(Some(describe(action))),
                Err(e) if is_status(&e, 404) => Ok(None),
                Err(e) => Err(e),
            }
        }
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
            match profiles
                .patch(profile, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => Ok(Some(describe(action))),
                // Gone: nothing left to disown.
                Err(e) if is_status(&e, 404) => Ok(None),
                Err(e) => Err(e),
            }
        }
        Action::Record(ops) => {
            let patch: json_patch::Patch =
                serde_json::from_value(Value::Array(record_patch(current, ops)))
                    .map_err(kube::Error::SerdeError)?;
            match promotions
                .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
            {
                Ok(updated) => {
                    *current = updated;
                    Ok(Some(describe(action)))
                }
                // A `test` failed: the promotion changed since it was observed. Reported as a
                // conflict: the next pass decides again from what it finds. Any other 422 (an
                // invalid result) is an error, since deciding again would only repeat it.
                Err(e) if crate::guard::patch_not_applied(&e) => Err(conflict(e)),
                Err(e) => Err(e),
            }
        }
    }
}

fn conflict(e: kube::Error) -> kube::Error {
    match e {
        kube::Error::Api(mut s) => {
            s.code = 409;
            kube::Error::Api(s)
        }
        other => other,
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The JSON patch of promoter's records, guarded by the resourceVersion of `current` (what the pass
/// observed, or its own last write).
fn record_patch(current: &ClusterPromotion, ops: &[RecordOp]) -> Vec<Value> {
    let annotations = current.metadata.annotations.clone().unwrap_or_default();
    let mut out = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
        "value": current.metadata.resource_version})];
    if current.metadata.annotations.is_none() {
        out.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    let annotation = |key: &str| format!("/metadata/annotations/{}", escape(key));
    let set =
        |key: &str, value: String| json!({"op": "add", "path": annotation(key), "value": value});
    let remove = |out: &mut Vec<Value>, key: &str| {
        if annotations.contains_key(key) {
            out.push(json!({"op": "remove", "path": annotation(key)}));
        }
    };
    for op in ops {
        match op {
            RecordOp::ConsumeApproval {
                index,
                stage,
                grant,
            } => {
                let approved = format!("/spec/stages/{index}/trigger/manual/approved");
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "test", "path": approved, "value": true}));
                out.push(json!({"op": "remove", "path": approved}));
                remove(&mut out, &approval_key(stage));
                out.push(set(&grant_key(stage), to_json(grant)));
            }
            RecordOp::RestoreApproval {
                index,
                stage,
                approval,
            } => {
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "add", "path": format!("/spec/stages/{index}/trigger/manual/approved"), "value": true}));
                if let Some(r) = approval {
                    out.push(set(&approval_key(stage), to_json(r)));
                }
                remove(&mut out, &grant_key(stage));
            }
            RecordOp::ForgetApprovalRecord { stage } => remove(&mut out, &approval_key(stage)),
            RecordOp::Complete(run) => out.push(set(COMPLETED, to_json(run))),
            RecordOp::ReviseApprovalRecord { stage, record } => {
                out.push(set(&approval_key(stage), to_json(record)));
            }
            RecordOp::History(h) => out.push(set(HISTORY, h.to_annotation())),
            RecordOp::Failed(f) => out.push(set(FAILED, to_json(f))),
            RecordOp::Rollback(r) => out.push(set(ROLLBACK, to_json(r))),
            RecordOp::Drop(hold) => remove(&mut out, hold.key()),
            RecordOp::WithdrawApproval { index, stage } => {
                let approved = format!("/spec/stages/{index}/trigger/manual/approved");
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "test", "path": approved, "value": true}));
                out.push(json!({"op": "remove", "path": approved}));
                remove(&mut out, &approval_key(stage));
            }
        }
    }
    out
}

/// A record as the annotation's JSON text.
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
