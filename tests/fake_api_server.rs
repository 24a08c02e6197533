//! The fake API server, behaviour by behaviour, through kube's real client over HTTP.

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
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

/// Pages continue where the previous one ended in the server's order: namespace, then name. As
/// text, "a-b/y" sorts before "a/x"; a continuation compared as text skipped every object of "a-b".
#[tokio::test]
async fn pagination_follows_the_servers_order_and_rules() {
    let (_s, client) = server().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for (ns, names) in [("a", ["x", "z"]), ("a-b", ["w", "y"])] {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .unwrap();
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for name in names {
            cms.create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
            )
            .await
            .unwrap();
        }
    }
    let all: Api<ConfigMap> = Api::all(client);
    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(1);
    loop {
        let page = all.list(&params).await.unwrap();
        for cm in page.items {
            seen.push(format!(
                "{}/{}",
                cm.metadata.namespace.unwrap(),
                cm.metadata.name.unwrap()
            ));
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(seen, ["a/x", "a/z", "a-b/w", "a-b/y"]);
    // With a selector, as the real server: a full page continues while the type holds more
    // objects (matching or not), the next page may be empty, and nothing counts what remains.
    let selective = ListParams::default()
        .fields("metadata.namespace=a")
        .limit(2);
    let page1 = all.list(&selective).await.unwrap();
    assert_eq!(page1.items.len(), 2);
    assert_eq!(page1.metadata.remaining_item_count, None);
    let token = page1
        .metadata
        .continue_
        .expect("more objects of the type remain");
    let page2 = all.list(&selective.continue_token(&token)).await.unwrap();
    assert!(page2.items.is_empty());
    assert!(page2.metadata.continue_.is_none());
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
        ..common::sveltos_event("Provisioning stage dev")
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
    let server = FakeApiServer::start_with_sveltos().await.unwrap();
    // kube's client as it comes: promoter's own client would retry the injected 409 on a read.
    let client = server.plain_client_as("admin").await.unwrap();
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
    // Nothing the manifest says is lost; the CRD's defaults are filled in, as a real server does.
    let mut want = serde_json::to_value(p).unwrap();
    _s.store()
        .schema(&promoter::fake::cluster_promotion_type())
        .unwrap()
        .normalise(&mut want);
    assert_eq!(serde_json::to_value(&back.spec).unwrap(), want["spec"]);
    assert_eq!(
        back.spec.profile_spec.as_ref().unwrap().0["policyRefs"][0]["deploymentType"],
        "Remote"
    );
}

// ---- The CRDs' structural semantics (pruning, defaulting, validation) and metadata rules ----

fn profile_value(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
           "metadata": {"name": name}, "spec": spec})
}

async fn create_raw(client: &kube::Client, body: Value) -> Result<Value, Status> {
    let api: Api<kube::core::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::discovery::ApiResource {
            group: "config.projectsveltos.io".into(),
            version: "v1beta1".into(),
            api_version: "config.projectsveltos.io/v1beta1".into(),
            kind: body["kind"].as_str().unwrap().into(),
            plural: format!("{}s", body["kind"].as_str().unwrap().to_lowercase()),
        },
    );
    let obj: kube::core::DynamicObject = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &obj)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
        .map_err(api_error)
}

fn chart() -> Value {
    json!({"repositoryURL": "https://charts.jetstack.io", "repositoryName": "jetstack",
           "chartName": "jetstack/cert-manager", "chartVersion": "v1.19.1",
           "releaseName": "cert-manager", "releaseNamespace": "cert-manager"})
}

#[tokio::test]
async fn unknown_fields_are_pruned_at_every_depth() {
    let (_s, client) = server().await;
    let mut c = chart();
    c["chartVerison"] = json!("typo");
    let created = create_raw(
        &client,
        profile_value("pruned", json!({"helmCharts": [c], "notAField": {"x": 1}})),
    )
    .await
    .unwrap();
    assert!(created["spec"].get("notAField").is_none());
    assert!(
        created["spec"]["helmCharts"][0]
            .get("chartVerison")
            .is_none()
    );
    assert_eq!(
        created["spec"]["helmCharts"][0]["chartName"],
        "jetstack/cert-manager"
    );
}

#[tokio::test]
async fn defaults_are_filled_at_depth_inside_array_items() {
    let (_s, client) = server().await;
    let mut c = chart();
    c["options"] = json!({"installOptions": {}});
    let created = create_raw(
        &client,
        profile_value("defaults", json!({"helmCharts": [c]})),
    )
    .await
    .unwrap();
    let chart = &created["spec"]["helmCharts"][0];
    assert_eq!(chart["options"]["installOptions"]["createNamespace"], true);
    assert_eq!(chart["options"]["installOptions"]["replace"], true);
    // An absent parent object is not created by defaulting.
    assert!(chart["options"].get("upgradeOptions").is_none());
    assert_eq!(chart["helmChartAction"], "Install");
    assert_eq!(created["spec"]["syncMode"], "Continuous");
    assert_eq!(created["spec"]["tier"], 100);
}

#[tokio::test]
async fn an_enum_violation_is_refused_with_the_real_message() {
    let (_s, client) = server().await;
    let err = create_raw(
        &client,
        profile_value("enum", json!({"syncMode": "Sometimes"})),
    )
    .await
    .unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "ClusterProfile.config.projectsveltos.io \"enum\" is invalid: spec.syncMode: Unsupported value: \"Sometimes\": supported values: \"OneTime\", \"Continuous\", \"ContinuousWithDriftDetection\", \"DryRun\""
    );
    let details = err.details.unwrap();
    assert_eq!(
        (details.kind.as_str(), details.group.as_str()),
        ("ClusterProfile", "config.projectsveltos.io")
    );
    assert_eq!(details.causes[0].field, "spec.syncMode");
    assert_eq!(details.causes[0].reason, "FieldValueNotSupported");
}

#[tokio::test]
async fn types_required_fields_and_several_causes() {
    let (_s, client) = server().await;
    let mut c = chart();
    c.as_object_mut().unwrap().remove("releaseName");
    let err = create_raw(
        &client,
        profile_value("bad", json!({"tier": "high", "helmCharts": [c]})),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .starts_with("ClusterProfile.config.projectsveltos.io \"bad\" is invalid: ["),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("spec.helmCharts[0].releaseName: Required value"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("spec.tier: Invalid value: \"string\": spec.tier in body must be of type integer: \"string\""),
        "{}",
        err.message
    );
    assert!(err.details.unwrap().causes.len() >= 2);
}

#[tokio::test]
async fn cel_rules_of_the_crds_are_enforced() {
    let (_s, client) = server().await;
    let both = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "both"},
        "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
                 "trigger": {"manual": {}, "auto": {"delay": "1m"}}}]}});
    let err = create_raw(&client, both).await.unwrap_err();
    assert_eq!(
        err.message,
        "ClusterPromotion.config.projectsveltos.io \"both\" is invalid: spec.stages[0].trigger: Invalid value: \"object\": A trigger must have either a 'manual' or 'auto' field, but not both."
    );
    let mut c = chart();
    c["chartName"] = json!("");
    let err = create_raw(&client, profile_value("cel", json!({"helmCharts": [c]})))
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains("spec.helmCharts[0]: Invalid value: \"object\": ChartName must be defined"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn status_is_a_subresource_and_generation_follows_the_spec() {
    let (s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    let created = api
        .create(&PostParams::default(), &promotion("gen"))
        .await
        .unwrap();
    assert!(created.status.is_none(), "status is dropped on create");
    assert_eq!(created.metadata.generation, Some(1));
    // A status write ignores the spec; the generation stays.
    let mut next = serde_json::to_value(&created).unwrap();
    next["spec"]["stages"][0]["name"] = json!("changed");
    next["status"] = json!({"currentStageName": "dev"});
    let after: ClusterPromotion = api
        .replace_status(
            "gen",
            &PostParams::default(),
            &serde_json::from_value(next).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(after.spec.stages[0].name, "dev");
    assert_eq!(after.metadata.generation, Some(1));
    // A main-resource write ignores the status and moves the generation.
    let mut next = serde_json::to_value(&after).unwrap();
    next["spec"]["stages"][0]["name"] = json!("dev2");
    next["status"] = json!({"currentStageName": "ignored"});
    let after: ClusterPromotion = api
        .replace(
            "gen",
            &PostParams::default(),
            &serde_json::from_value(next).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, Some(2));
    let stored = s
        .store()
        .get(&promoter::fake::cluster_promotion_type(), "", "gen")
        .unwrap();
    assert_eq!(stored["status"]["currentStageName"], "dev");
    // Invalid status is refused on the status subresource too.
    let err = api
        .patch_status(
            "gen",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"stages": "no"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 422);
}

#[tokio::test]
async fn json_patch_failures_have_the_real_codes() {
    let (_s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client);
    api.create(&PostParams::default(), &promotion("jp"))
        .await
        .unwrap();
    let test_fails: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/spec/stages/0/name", "value": "x"}]),
    )
    .unwrap();
    let err = api
        .patch(
            "jp",
            &PatchParams::default(),
            &Patch::<()>::Json(test_fails),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 422);
}

#[tokio::test]
async fn metadata_is_validated_for_every_kind() {
    let (_s, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let bad = |meta: Value| -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}))
            .unwrap()
    };
    let err = api_error(
        cms.create(&PostParams::default(), &bad(json!({"generateName": "cm."})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("metadata.generateName: Invalid value: \"cm.\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        "{}",
        err.message
    );
    let ok = cms
        .create(&PostParams::default(), &bad(json!({"generateName": "cm-"})))
        .await
        .unwrap();
    let name = ok.metadata.name.unwrap();
    assert!(name.starts_with("cm-") && name.len() == 8, "{name}");
    let err = api_error(
        cms.create(&PostParams::default(), &bad(json!({"name": "Upper"})))
            .await
            .unwrap_err(),
    );
    assert!(err.message.starts_with("ConfigMap \"Upper\" is invalid: metadata.name: Invalid value: \"Upper\": a lowercase RFC 1123 subdomain"), "{}", err.message);
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &bad(json!({"name": "l", "labels": {"a": "not valid"}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message.contains(
            "metadata.labels: Invalid value: \"not valid\": a valid label must be an empty string"
        ),
        "{}",
        err.message
    );
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &bad(json!({"name": "a", "annotations": {"big": "x".repeat(256 * 1024)}})),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message
            .ends_with("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{}",
        err.message
    );
    // Namespaces are DNS labels: no dots.
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let err = api_error(
        nss.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a.b"}})).unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message
            .contains("a lowercase RFC 1123 label must consist of"),
        "{}",
        err.message
    );
}

fn events_v1(generate_name: &str, note: &str) -> k8s_openapi::api::events::v1::Event {
    serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"generateName": generate_name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "action": "ClusterPromotion", "reason": "StageProvisioned", "note": note, "type": "Normal",
        "reportingController": "promoter.dev/promoter", "reportingInstance": "promoter",
        "regarding": {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "p"}
    }))
    .unwrap()
}

#[tokio::test]
async fn events_k8s_io_validation_is_the_real_one() {
    let (_s, client) = server().await;
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
    // promoter's former generateName "<promotion>." is refused by a real server.
    let err = api_error(
        api.create(&PostParams::default(), &events_v1("p.", "n"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("metadata.generateName: Invalid value: \"p.\""),
        "{}",
        err.message
    );
    let created = api
        .create(&PostParams::default(), &events_v1("p-", "n"))
        .await
        .unwrap();
    assert!(created.metadata.name.unwrap().starts_with("p-"));
    let err = api_error(
        api.create(&PostParams::default(), &events_v1("p-", &"x".repeat(1025)))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message
            .contains("message: Invalid value: \"\": can have at most 1024 characters"),
        "{}",
        err.message
    );
    let mut e = events_v1("p-", "n");
    e.event_time = None;
    e.type_ = Some("Info".into());
    e.reporting_controller = None;
    let err = api_error(api.create(&PostParams::default(), &e).await.unwrap_err());
    assert!(
        err.message.contains("eventTime: Required value"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("type: Invalid value: \"\": has invalid value: Info"),
        "{}",
        err.message
    );
}

/// promoter's own Events pass the real validation: before the fix every one of them was refused
/// with 422 (`generateName: "<promotion>."`) and only logged as a warning.
#[tokio::test]
async fn a_pass_records_events_the_server_accepts() {
    let (s, client) = server().await;
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let mut p = promotion("evented");
    p.status = None;
    api.create(&PostParams::default(), &p).await.unwrap();
    s.clear_requests();
    let opts = promoter::pass::PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: chrono::Utc::now(),
        notifications: None,
    };
    promoter::pass::run_pass(&client, &promoter::pass::ChecksNotEvaluated, &opts)
        .await
        .unwrap();
    let events: Vec<_> = s
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events" && r.verb == "create")
        .collect();
    assert!(!events.is_empty(), "the first pass records a transition");
    assert!(events.iter().all(|r| r.code == 201), "{events:?}");
    let stored = s.store().all(&promoter::fake::ResourceType::builtin(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        true,
    ));
    assert_eq!(stored.len(), events.len());
    // Named by their content under the promotion's name (so a create sent again after a lost
    // answer is stored once).
    assert!(
        stored.iter().all(|e| {
            e["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("evented."))
        }),
        "{stored:?}"
    );
}

/// promoter's own kinds are served from the CRDs generated from its types, with their schema:
/// required fields and RFC 3339 times validated, unknown fields pruned (but not inside a
/// revision's profileSpec), the freeze's status written only through its subresource.
#[tokio::test]
async fn promoters_own_kinds_are_served_with_their_schema() {
    use promoter::api::{FreezePhase, PromotionFreeze, PromotionRevision};
    let (_s, client) = server().await;
    let freezes: Api<PromotionFreeze> = Api::all(client.clone());
    let raw: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<PromotionFreeze>(&()),
    );
    let bad: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
        "metadata": {"name": "bad"}, "spec": {"start": "tomorrow", "junk": 1}
    }))
    .unwrap();
    let err = api_error(raw.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("spec.reason: Required value"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("spec.start: Invalid value: \"tomorrow\""),
        "{}",
        err.message
    );
    let good: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
        "metadata": {"name": "holidays"},
        "spec": {"reason": "CAB-123", "promotionSelector": {"matchLabels": {"tier": "prod"}},
                 "end": "2027-01-04T00:00:00Z", "junk": 1},
        "status": {"phase": "Active"}
    }))
    .unwrap();
    raw.create(&PostParams::default(), &good).await.unwrap();
    let f = freezes.get("holidays").await.unwrap();
    assert_eq!(f.spec.reason, "CAB-123");
    assert_eq!(f.status, None, "a create ignores the status");
    let back = raw.get("holidays").await.unwrap();
    assert!(back.data["spec"].get("junk").is_none(), "pruned");
    let status = json!({"status": {"phase": "Invalid", "message": "x", "observedGeneration": 1}});
    freezes
        .patch_status("holidays", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let f = freezes.get("holidays").await.unwrap();
    assert_eq!(f.status.unwrap().phase, Some(FreezePhase::Invalid));
    let err = freezes
        .patch_status(
            "holidays",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Frozen"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 422);

    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    let mut p = promotion("app");
    p.metadata.uid = Some("u-1".into());
    let at = promoter::api::Timestamp::parse("2026-02-16T06:00:00Z").unwrap();
    let mut r = PromotionRevision::of(&p, "aGFzaA==", "c3RhZ2Vz", None, at);
    r.spec
        .profile_spec
        .0
        .insert("notModelled".into(), json!({"deep": {"x": 1}}));
    let created = revisions.create(&PostParams::default(), &r).await.unwrap();
    assert_eq!(
        created.spec.profile_spec, r.spec.profile_spec,
        "kept verbatim"
    );
    assert_eq!(created.metadata.name, r.metadata.name);
    let listed = revisions
        .list(&ListParams::default().labels("promoter.dev/promotion=app"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    let err = revisions
        .create(&PostParams::default(), &r)
        .await
        .unwrap_err();
    assert_eq!(
        api_error(err).code,
        409,
        "AlreadyExists: the pass takes it as done"
    );
}
