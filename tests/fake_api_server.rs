//! The fake API server, behaviour by behaviour, through kube's real client over HTTP.

use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use promoter::api::{ClusterProfile, ClusterPromotion, ClusterSummary};
use promoter::fake::{
    Attributes, Authorizer, FakeApiServer, FaultAction, FaultRule, RequestMatcher,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

async fn server() -> (FakeApiServer, kube::Client) {
    let s = FakeApiServer::start_with_sveltos().await.unwrap();
    let c = s.client().await.unwrap();
    (s, c)
}

fn promotion(name: &str) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}}]},
        "status": {"currentStageName": "ignored-on-create"}
    }))
    .unwrap()
}

fn profile(name: &str, labels: Value) -> ClusterProfile {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": name, "labels": labels}, "spec": {"tier": 100}
    }))
    .unwrap()
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn discovery_lists_registered_resources() {
    let (_s, client) = server().await;
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.plural == "clusterpromotions")
        .expect("clusterpromotions discovered");
    assert_eq!(ar.group, "config.projectsveltos.io");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    assert!(discovery.has_group("lib.projectsveltos.io"));
    assert!(
        !discovery.has_group("cluster.x-k8s.io"),
        "CAPI is served only when registered"
    );
}

#[tokio::test]
async fn create_sets_server_fields_and_drops_status() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let created = api
        .create(&PostParams::default(), &promotion("p"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert!(created.metadata.resource_version.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.status.is_none(),
        "status is a subresource: dropped on create"
    );
    let again = api_error(
        api.create(&PostParams::default(), &promotion("p"))
            .await
            .unwrap_err(),
    );
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        again.message,
        "clusterpromotions.config.projectsveltos.io \"p\" already exists"
    );
    let missing = api_error(api.get("nope").await.unwrap_err());
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        missing.message,
        "clusterpromotions.config.projectsveltos.io \"nope\" not found"
    );
}

#[tokio::test]
async fn list_with_selectors_pagination_and_resource_version() {
    let (_s, client) = server().await;
    let api: Api<ClusterProfile> = Api::all(client);
    for (name, labels) in [
        ("a", json!({"promo": "x", "stage": "dev"})),
        ("b", json!({"promo": "x", "stage": "prod"})),
        ("c", json!({"promo": "y"})),
        ("d", json!({})),
    ] {
        api.create(&PostParams::default(), &profile(name, labels))
            .await
            .unwrap();
    }
    let names = |l: kube::core::ObjectList<ClusterProfile>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let cases = [
        ("promo=x", vec!["a", "b"]),
        ("promo!=x", vec!["c", "d"]),
        ("promo in (x,y),stage notin (prod)", vec!["a", "c"]),
        ("stage", vec!["a", "b"]),
        ("!promo", vec!["d"]),
    ];
    for (sel, want) in cases {
        let got = names(api.list(&ListParams::default().labels(sel)).await.unwrap());
        assert_eq!(got, want, "{sel}");
    }
    let by_name = names(
        api.list(&ListParams::default().fields("metadata.name=c"))
            .await
            .unwrap(),
    );
    assert_eq!(by_name, vec!["c"]);
    let page1 = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert!(page1.metadata.resource_version.is_some());
    let token = page1.metadata.continue_.clone().expect("a continue token");
    assert_eq!(page1.metadata.remaining_item_count, Some(1));
    assert_eq!(names(page1), vec!["a", "b", "c"]);
    let page2 = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert!(page2.metadata.continue_.is_none());
    assert_eq!(names(page2), vec!["d"]);
    let bad = api_error(
        api.list(&ListParams::default().labels("a in b"))
            .await
            .unwrap_err(),
    );
    assert_eq!(bad.code, 400);
}

#[tokio::test]
async fn update_uses_optimistic_concurrency() {
    let (_s, client) = server().await;
    let api: Api<ClusterProfile> = Api::all(client);
    let created = api
        .create(&PostParams::default(), &profile("p", json!({})))
        .await
        .unwrap();
    let mut first = created.clone();
    first.spec.fields.insert("tier".into(), json!(90));
    let updated = api
        .replace("p", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(updated.metadata.generation, Some(2));
    // A second writer still holding the old resourceVersion loses.
    let mut stale = created.clone();
    stale.spec.fields.insert("tier".into(), json!(80));
    let conflict = api_error(
        api.replace("p", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("the object has been modified"),
        "{}",
        conflict.message
    );
    // A write that changes nothing is not persisted.
    let same = api
        .replace("p", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        updated.metadata.resource_version
    );
    // Metadata-only changes do not move generation.
    let mut labelled = same.clone();
    labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let labelled = api
        .replace("p", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
}

#[tokio::test]
async fn merge_and_json_patches() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let mut p = promotion("p");
    p.spec.stages[0].trigger =
        serde_json::from_value(json!({"manual": {"approved": true}})).unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
    let merged = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": null, "x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.metadata.labels,
        Some([("x".to_string(), "y".to_string())].into())
    );
    // The guarded reset the stepper uses for automaticReset.
    let guarded: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/stages/0/name", "value": "dev"},
        {"op": "remove", "path": "/spec/stages/0/trigger/manual/approved"}
    ]))
    .unwrap();
    let reset = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(guarded))
        .await
        .unwrap();
    assert_eq!(reset.spec.stages[0].manual_approval(), None);
    assert_eq!(reset.metadata.generation, Some(2));
    let failing: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/spec/stages/0/name", "value": "prod"}]),
    )
    .unwrap();
    let err = api_error(
        api.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    // A resourceVersion in a merge patch is a precondition.
    let stale = json!({"metadata": {"resourceVersion": "1"}, "spec": {"preserveClusterProfilesOnDelete": true}});
    let err = api_error(
        api.patch("p", &PatchParams::default(), &Patch::Merge(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn status_subresource_is_separate_from_spec() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let created = api
        .create(&PostParams::default(), &promotion("p"))
        .await
        .unwrap();
    let status = json!({"status": {"currentStageName": "dev"}, "spec": {"preserveClusterProfilesOnDelete": true}});
    let after_status = api
        .patch_status("p", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(
        after_status.status.unwrap().current_stage_name.as_deref(),
        Some("dev")
    );
    assert_eq!(
        after_status.spec.preserve_cluster_profiles_on_delete, None,
        "a status write never changes spec"
    );
    assert_eq!(
        after_status.metadata.generation, created.metadata.generation,
        "generation moves only with spec"
    );
    let spec = json!({"spec": {"preserveClusterProfilesOnDelete": true}, "status": {"currentStageName": "prod"}});
    let after_spec = api
        .patch("p", &PatchParams::default(), &Patch::Merge(spec))
        .await
        .unwrap();
    assert_eq!(
        after_spec.status.unwrap().current_stage_name.as_deref(),
        Some("dev"),
        "a spec write never changes status"
    );
    assert_eq!(after_spec.metadata.generation, Some(2));
    // PUT on /status with optimistic concurrency.
    let mut current = api.get("p").await.unwrap();
    current.status.get_or_insert_default().current_stage_name = Some("uat".into());
    let replaced = api
        .replace_status("p", &PostParams::default(), &current)
        .await
        .unwrap();
    assert_eq!(
        replaced.status.unwrap().current_stage_name.as_deref(),
        Some("uat")
    );
    let err = api_error(
        api.replace_status("p", &PostParams::default(), &current)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let mut p = promotion("p");
    p.metadata.finalizers = Some(vec!["config.projectsveltos.io/clusterpromotion".into()]);
    api.create(&PostParams::default(), &p).await.unwrap();
    let deleted = api.delete("p", &DeleteParams::default()).await.unwrap();
    let marked = deleted
        .left()
        .expect("still present while a finalizer is set");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        api.get("p")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // No new finalizer may be added once deletion started.
    let add =
        json!({"metadata": {"finalizers": ["config.projectsveltos.io/clusterpromotion", "other"]}});
    assert_eq!(
        api_error(
            api.patch("p", &PatchParams::default(), &Patch::Merge(add))
                .await
                .unwrap_err()
        )
        .code,
        422
    );
    api.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("p").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn owner_references_garbage_collection() {
    let (server, client) = server().await;
    let promos: Api<ClusterPromotion> = Api::all(client.clone());
    let profiles: Api<ClusterProfile> = Api::all(client);
    let mut uids = Vec::new();
    for name in ["owner1", "owner2"] {
        uids.push(
            promos
                .create(&PostParams::default(), &promotion(name))
                .await
                .unwrap()
                .metadata
                .uid
                .unwrap(),
        );
    }
    let owned = |name: &str, uid: &str, finalizer: bool| {
        let mut p = profile(name, json!({}));
        p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "owner", "uid": uid
        })).unwrap()]);
        if finalizer {
            p.metadata.finalizers = Some(vec!["clusterprofilefinalizer.projectsveltos.io".into()]);
        }
        p
    };
    profiles
        .create(&PostParams::default(), &owned("plain", &uids[0], false))
        .await
        .unwrap();
    profiles
        .create(&PostParams::default(), &owned("finalized", &uids[0], true))
        .await
        .unwrap();
    profiles
        .create(&PostParams::default(), &owned("orphaned", &uids[1], false))
        .await
        .unwrap();
    // Background (the default): dependents are deleted, honouring their own finalizers.
    promos
        .delete("owner1", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        api_error(profiles.get("plain").await.unwrap_err()).code,
        404
    );
    assert!(
        profiles
            .get("finalized")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // Orphan: dependents stay, without the owner reference.
    promos
        .delete(
            "owner2",
            &DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let orphan = profiles.get("orphaned").await.unwrap();
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    assert!(orphan.metadata.deletion_timestamp.is_none());
    assert_eq!(
        server
            .store()
            .all(&promoter::fake::cluster_profile_type())
            .len(),
        2
    );
}

#[tokio::test]
async fn events_can_be_created() {
    let (_s, client) = server().await;
    let events: Api<Event> = Api::namespaced(client, "default");
    let event = Event {
        metadata: kube::core::ObjectMeta {
            generate_name: Some("p.".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("ClusterPromotion".into()),
            name: Some("p".into()),
            ..Default::default()
        },
        reason: Some("Sveltos".into()),
        message: Some("Provisioning stage dev".into()),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    let created = events.create(&PostParams::default(), &event).await.unwrap();
    assert!(created.metadata.name.unwrap().starts_with("p."));
    assert_eq!(
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn builtin_delete_answers_with_status() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = ConfigMap {
        metadata: kube::core::ObjectMeta {
            name: Some("c".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await.unwrap();
    assert!(
        cms.delete("c", &DeleteParams::default())
            .await
            .unwrap()
            .is_right()
    );
}

#[tokio::test]
async fn request_log_counts_and_injected_faults() {
    let (server, client) = server().await;
    let api: Api<ClusterProfile> = Api::all(client);
    server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["create"]),
        2,
        FaultAction::Status(500),
    ));
    server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["get"]).name("a"),
        1,
        FaultAction::Status(409),
    ));
    api.create(&PostParams::default(), &profile("a", json!({})))
        .await
        .unwrap();
    let e = api_error(
        api.create(&PostParams::default(), &profile("b", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    api.create(&PostParams::default(), &profile("b", json!({})))
        .await
        .unwrap();
    assert_eq!(api_error(api.get("a").await.unwrap_err()).code, 409);
    api.get("a").await.unwrap();
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(server.count(|r| r.verb == "create"), 3);
    assert_eq!(
        server.count(|r| r.verb == "get" && r.resource == "clusterprofiles"),
        2
    );
    assert_eq!(server.count(|r| r.verb == "list"), 1);
    assert_eq!(server.writes(), 3);
    server.clear_requests();
    assert_eq!(server.writes(), 0);
    // Every write after the first one is refused: the crash-safety harness.
    // (500, not 503: kube's client retries 429/503/504 by itself.)
    server.inject(FaultRule::after(
        RequestMatcher::writes(),
        1,
        FaultAction::Status(500),
    ));
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        api_error(api.delete("b", &DeleteParams::default()).await.unwrap_err()).code,
        500
    );
    assert_eq!(
        api_error(
            api.create(&PostParams::default(), &profile("c", json!({})))
                .await
                .unwrap_err()
        )
        .code,
        500
    );
    server.clear_faults();
    // A hang holds the answer back.
    server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["get"]),
        1,
        FaultAction::Hang(Duration::from_secs(30)),
    ));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), api.get("b"))
            .await
            .is_err()
    );
}

struct DenySecrets;
impl Authorizer for DenySecrets {
    fn authorize(&self, a: &Attributes) -> Result<(), String> {
        if a.resource == "secrets" {
            Err(String::new())
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn authorizer_decides_with_forbidden_status() {
    let (server, _client) = server().await;
    server.set_authorizer(Arc::new(DenySecrets));
    let client = server
        .client_as("system:serviceaccount:promoter:promoter")
        .await
        .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "dev");
    let err = api_error(secrets.get("dev-sveltos-kubeconfig").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "secrets \"dev-sveltos-kubeconfig\" is forbidden: User \"system:serviceaccount:promoter:promoter\" cannot get resource \"secrets\" in API group \"\" in the namespace \"dev\""
    );
    let summaries: Api<ClusterSummary> = Api::all(client);
    assert!(summaries.list(&ListParams::default()).await.is_ok());
    assert_eq!(
        server.requests().last().unwrap().user,
        "system:serviceaccount:promoter:promoter"
    );
}

#[tokio::test]
async fn seed_manifests_survive_the_server_unchanged() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/docs-cert-manager.yaml");
    let docs = promoter::manifest::load_file(&path).unwrap();
    let p = docs[0].promotion().unwrap();
    api.create(&PostParams::default(), p).await.unwrap();
    let back = api.get(p.metadata.name.as_deref().unwrap()).await.unwrap();
    assert_eq!(back.spec, p.spec);
}
