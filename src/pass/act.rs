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

/// A failed request as the write plan judges it.
fn answer_of(e: kube::Error) -> Answer {
    if crate::guard::outcome_unknown(&e) {
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
        let answer = send(&apis, request).await;
        let lost = matches!(answer, Answer::Unknown(_));
        let mut verdict = write.judge(&name, answer);
        if lost && write.reads_back_after_a_lost_answer() {
            let read = promotions.get_opt(&name).await;
            if let Err(e) = &read {
                tracing::debug!(promotion = %name, error = %crate::cli_error::line(e), "reading back after a lost answer");
            }
            verdict = write.after_lost_answer(&current, read.ok().flatten(), verdict);
        }
        let stop = match verdict {
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
    super::events::emit_transitions(client, &current, &d.events, now).await;
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

#[cfg(test)]
mod tests {
    //! `act` against the in-process fake API server: what each answer does to the rest of a
    //! promotion's writes, its Events and the promotion handed back.
    use super::*;
    use crate::api::ClusterPromotionStatus;
    use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
    use crate::pass::decision::Reason;
    use k8s_openapi::api::events::v1::Event;

    /// The blog's automatic rollout, stored as `p`; the server and the promotion as stored.
    async fn stored() -> (FakeApiServer, kube::Client, ClusterPromotion) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/blog-kyverno-auto.yaml");
        let mut p = crate::manifest::load_file(&path).unwrap()[0]
            .promotion()
            .unwrap()
            .clone();
        p.metadata.name = Some("p".into());
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        let client = server.client().await.unwrap();
        let api: Api<ClusterPromotion> = Api::all(client.clone());
        let p = api.create(&PostParams::default(), &p).await.unwrap();
        (server, client, p)
    }

    /// Add the finalizer, then write the status, announcing one Event.
    fn decision() -> Decision {
        let mut d = Decision::new("p");
        d.actions.push(super::super::Action::AddFinalizer);
        d.status = Some(ClusterPromotionStatus {
            current_stage_name: Some("dev".into()),
            ..Default::default()
        });
        d.events
            .push(Reason::StageProvisioning.note("Provisioning stage dev".into()));
        d
    }

    async fn events(client: &kube::Client) -> usize {
        let api: Api<Event> =
            Api::namespaced(client.clone(), super::super::events::EVENT_NAMESPACE);
        api.list(&Default::default()).await.unwrap().items.len()
    }

    fn status_writes() -> RequestMatcher {
        RequestMatcher::verbs(&["update"])
            .resource("clusterpromotions")
            .subresource("status")
    }

    #[tokio::test]
    async fn a_decision_is_written_in_order_and_the_promotion_handed_back_as_stored() {
        let (_server, client, p) = stored().await;
        let now = Utc::now();
        let out = act(&client, &p, &decision(), &World::default(), now).await;
        assert_eq!(out.done, ["adding the finalizer", "wrote status"]);
        assert_eq!((out.conflict, out.error), (None, None));
        let written = out
            .promotion
            .expect("the promotion as the last write returned it");
        assert_ne!(
            written.metadata.resource_version,
            p.metadata.resource_version
        );
        assert_eq!(
            written.status.and_then(|s| s.current_stage_name).as_deref(),
            Some("dev")
        );
        assert_eq!(events(&client).await, 1, "the status's Event");

        // Nothing to write: nothing handed back (notifications then go from the observed one).
        let stored = Api::<ClusterPromotion>::all(client.clone())
            .get("p")
            .await
            .unwrap();
        let out = act(
            &client,
            &stored,
            &Decision::new("p"),
            &World::default(),
            now,
        )
        .await;
        assert!(out.done.is_empty() && out.promotion.is_none(), "{out:?}");
    }

    /// A 409 is another writer (a conflict, said as such); a 504 or a lost answer is a write of
    /// unknown outcome (a conflict that says the answer was lost, never an error), unless the
    /// promotion read back shows the status written: then the status's Events follow, once.
    #[tokio::test]
    async fn a_refused_status_write_is_a_conflict_and_a_lost_answer_is_read_back() {
        for (fault, says) in [
            (FaultAction::Status(409), Some("changed during the pass")),
            (FaultAction::Status(504), Some("the answer was lost")),
            (FaultAction::ResetBefore, Some("the answer was lost")),
            (FaultAction::ResetAfter, None),
            (
                FaultAction::AnswerAfter(std::time::Duration::from_secs(5)),
                None,
            ),
        ] {
            let (server, _, p) = stored().await;
            // A request timeout shorter than the late answer: the client gives up on a write made.
            let yaml = server.kubeconfig_yaml("admin");
            let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap();
            let client = crate::client::from_config_with_timeout(
                config,
                std::time::Duration::from_millis(500),
            )
            .unwrap();
            server.inject(FaultRule::nth(status_writes(), 1, fault.clone()));
            let out = act(&client, &p, &decision(), &World::default(), Utc::now()).await;
            assert!(out.error.is_none(), "{fault:?}: {out:?}");
            match says {
                Some(says) => {
                    assert_eq!(out.done, ["adding the finalizer"], "{fault:?}");
                    let conflict = out.conflict.unwrap_or_default();
                    assert!(conflict.contains(says), "{fault:?}: {conflict}");
                    assert_eq!(events(&client).await, 0, "{fault:?}: no status, no Event");
                }
                None => {
                    assert_eq!(
                        out.done,
                        ["adding the finalizer", "wrote status"],
                        "{fault:?}"
                    );
                    assert_eq!(out.conflict, None, "{fault:?}");
                    let written = out.promotion.expect("the promotion as read back");
                    assert_eq!(
                        written.status.and_then(|s| s.current_stage_name).as_deref(),
                        Some("dev")
                    );
                    assert_eq!(events(&client).await, 1, "{fault:?}: the status's Event");
                }
            }
        }
    }

    /// Issue 45: an Event's create that the server refused for now (503, 429) or whose answer was
    /// lost, before or after the server stored it, is sent again under its name and stored once;
    /// the campaign's automatic rollout at 10 % ended with 2 `StageProvisioned` Events for the
    /// calm run's 3 (refused once, never sent again).
    #[tokio::test]
    async fn a_refused_or_lost_event_create_is_sent_again_and_stored_once() {
        let event_creates = || RequestMatcher::verbs(&["create"]).resource("events");
        for faults in [
            vec![FaultAction::Status(503)],
            vec![FaultAction::Status(429), FaultAction::ResetBefore],
            vec![FaultAction::ResetAfter],
            vec![FaultAction::Status(500), FaultAction::ResetAfter],
        ] {
            let (server, client, p) = stored().await;
            for (i, fault) in faults.iter().enumerate() {
                server.inject(FaultRule::nth(event_creates(), i + 1, fault.clone()));
            }
            let out = act(&client, &p, &decision(), &World::default(), Utc::now()).await;
            assert!(
                out.error.is_none() && out.conflict.is_none(),
                "{faults:?}: {out:?}"
            );
            assert_eq!(events(&client).await, 1, "{faults:?}");
        }
    }

    /// Before the status nothing of the decision stands: no Events. After it, the status's Events
    /// are true even though a later write failed.
    #[tokio::test]
    async fn events_follow_the_status_write_whatever_comes_after_it() {
        let (server, client, p) = stored().await;
        server.inject(FaultRule::nth(
            RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
            1,
            FaultAction::Status(409),
        ));
        let out = act(&client, &p, &decision(), &World::default(), Utc::now()).await;
        assert!(out.done.is_empty() && out.conflict.is_some(), "{out:?}");
        assert_eq!(events(&client).await, 0);
        assert!(out.promotion.is_none(), "nothing was written");

        let mut d = decision();
        d.after_status.push(super::super::Action::AddFinalizer);
        server.inject(FaultRule::nth(
            RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
            2,
            FaultAction::Status(500),
        ));
        let out = act(&client, &p, &d, &World::default(), Utc::now()).await;
        assert_eq!(
            out.done,
            ["adding the finalizer", "wrote status"],
            "{out:?}"
        );
        assert!(out.error.is_some(), "{out:?}");
        assert_eq!(events(&client).await, 1, "the status's Event");
    }

    /// A profile is deleted only if it is still the one the pass judged: one created again since
    /// (another UID) is a conflict, and stays.
    #[tokio::test]
    async fn a_profile_deleted_and_created_again_since_the_pass_read_it_is_not_deleted() {
        let (_server, client, p) = stored().await;
        let profiles: Api<ClusterProfile> = Api::all(client.clone());
        let profile: ClusterProfile = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": "p-dev"}, "spec": {}
        }))
        .unwrap();
        let mut observed = profiles
            .create(&PostParams::default(), &profile)
            .await
            .unwrap();
        observed.metadata.uid = Some("the-one-deleted-since".into());
        let mut world = World::default();
        world.profiles.insert("p-dev".into(), observed);
        let mut d = Decision::new("p");
        d.actions.push(super::super::Action::Delete {
            name: "p-dev".into(),
        });
        let out = act(&client, &p, &d, &world, Utc::now()).await;
        assert!(out.conflict.is_some() && out.done.is_empty(), "{out:?}");
        assert!(profiles.get_opt("p-dev").await.unwrap().is_some());
    }
}
