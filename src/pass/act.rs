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
//!
//! What to write is planned purely (`write_plan`: the requests, in order, and how each answer is
//! judged); this module only sends each request through kube and hands the answer back.

use super::decision::Decision;
use super::world::World;
pub(crate) use super::write_plan::describe;
use super::write_plan::{Answer, Request, Verdict, When, plan};
use crate::api::{ClusterProfile, ClusterPromotion, PromotionRevision};
use chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

#[derive(Debug, Default, Clone)]
pub struct ActOutcome {
    /// What was written, one line each.
    pub done: Vec<String>,
    /// Another writer changed the promotion or a profile first; retried on the next pass.
    pub conflict: Option<String>,
    /// An error that stopped this promotion's actions, with context.
    pub error: Option<String>,
    /// The promotion as the server returned it after this pass's last write to it (None: no
    /// write to it succeeded): what notifications are sent from.
    pub promotion: Option<Box<ClusterPromotion>>,
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

/// A failed request as the write plan judges it.
fn answer_of(e: kube::Error) -> Answer {
    if outcome_unknown(&e) {
        return Answer::Unknown(crate::cli_error::line(&e));
    }
    match &e {
        kube::Error::Api(s) => Answer::Refused {
            code: s.code,
            not_applied: crate::guard::patch_not_applied(&e),
            text: crate::cli_error::line_with_hint(&e),
        },
        _ => Answer::Failed(crate::cli_error::line(&e)),
    }
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
    for write in plan(d, world) {
        let Some(request) = write.request(&current) else {
            continue;
        };
        let stop = match write.judge(&name, send(&apis, request).await) {
            Verdict::Done(line, updated) => {
                if let Some(updated) = updated {
                    current = *updated;
                }
                out.done.push(line);
                continue;
            }
            Verdict::Skipped => continue,
            Verdict::NotStored(line) => {
                tracing::warn!(promotion = %name, "{line}");
                out.done.push(line);
                continue;
            }
            Verdict::Conflict(text) => {
                out.conflict = Some(text);
                write.when
            }
            Verdict::Error(text) => {
                out.error = Some(text);
                write.when
            }
        };
        // Before the status is recorded nothing of this decision stands: no Events. After it,
        // the status's Events are true; the rest is retried by the next pass.
        if stop != When::AfterStatus {
            return with_promotion(out, promotion, current);
        }
        break;
    }
    super::events::emit(client, &current, &d.events, "ClusterPromotion", now).await;
    with_promotion(out, promotion, current)
}

/// `out` with the promotion as this pass last wrote it, if it wrote it.
fn with_promotion(
    mut out: ActOutcome,
    observed: &ClusterPromotion,
    current: ClusterPromotion,
) -> ActOutcome {
    if current.metadata.resource_version != observed.metadata.resource_version {
        out.promotion = Some(Box::new(current));
    }
    out
}

/// The APIs a decision writes to.
struct Apis<'a> {
    promotions: &'a Api<ClusterPromotion>,
    profiles: &'a Api<ClusterProfile>,
    revisions: &'a Api<PromotionRevision>,
}

/// Sends one request; the answer as the plan judges it.
async fn send(apis: &Apis<'_>, request: Request) -> Answer {
    let promotion = |r: kube::Result<ClusterPromotion>| match r {
        Ok(updated) => Answer::Written(Some(Box::new(updated))),
        Err(e) => answer_of(e),
    };
    let other = |r: kube::Result<()>| match r {
        Ok(()) => Answer::Written(None),
        Err(e) => answer_of(e),
    };
    let params = PatchParams::default();
    match request {
        Request::MergePatchPromotion { name, patch } => promotion(
            apis.promotions
                .patch(&name, &params, &Patch::Merge(patch))
                .await,
        ),
        Request::JsonPatchPromotion { name, patch } => {
            let patch: json_patch::Patch = match serde_json::from_value(patch) {
                Ok(p) => p,
                Err(e) => return Answer::Failed(kube::Error::SerdeError(e).to_string()),
            };
            promotion(
                apis.promotions
                    .patch(&name, &params, &Patch::<()>::Json(patch))
                    .await,
            )
        }
        Request::ReplacePromotionStatus { name, body } => promotion(
            apis.promotions
                .replace_status(&name, &PostParams::default(), &*body)
                .await,
        ),
        Request::CreateProfile { body } => other(
            apis.profiles
                .create(&PostParams::default(), &body)
                .await
                .map(drop),
        ),
        Request::ReplaceProfile { name, body } => other(
            apis.profiles
                .replace(&name, &PostParams::default(), &body)
                .await
                .map(drop),
        ),
        Request::DeleteProfile { name, uid } => {
            let params = DeleteParams {
                preconditions: uid.map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            other(apis.profiles.delete(&name, &params).await.map(drop))
        }
        Request::MergePatchProfile { name, patch } => other(
            apis.profiles
                .patch(&name, &params, &Patch::Merge(patch))
                .await
                .map(drop),
        ),
        Request::StoreRevision { body } => {
            // Looked up first, so that a pass that keeps dying right after its first write still
            // gets to its record patch.
            let name = body.metadata.name.clone().unwrap_or_default();
            match apis.revisions.get_opt(&name).await {
                Ok(Some(_)) => Answer::Present,
                Ok(None) => other(
                    apis.revisions
                        .create(&PostParams::default(), &body)
                        .await
                        .map(drop),
                ),
                Err(e) => answer_of(e),
            }
        }
    }
}
