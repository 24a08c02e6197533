//! Issue 13: stage completion and coexistence against a Sveltos that behaves like the real one
//! (summaries re-encoded through its Go types and defaulted, spec written before status, deleting
//! clusters dropped, open-source v1.14+'s ClusterPromotion controller next to the garbage
//! collector), end to end through the fake API server and kube's client.

mod common;

use chrono::Duration;
use common::Env;
use promoter::api::ClusterPromotion;
use promoter::fake::store::DeleteOptions;
use promoter::fake::{cluster_profile_type, cluster_summary_type, sveltos_cluster_type};
use promoter::pass::Phase;
use promoter::sim::sveltos_cluster;
use serde_json::{Value, json};

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("prod", "prod01", "prod"),
];

fn promotion(profile_spec: Value, extra: Value) -> ClusterPromotion {
    let mut spec = json!({
        "profileSpec": profile_spec,
        "stages": [
            {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {}}},
            {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"auto": {}}},
        ]
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "app"}, "spec": spec
    }))
    .unwrap()
}

fn chart(version: &str) -> Value {
    json!({"repositoryURL": "https://charts.example/", "repositoryName": "ex", "chartName": "ex/app",
           "chartVersion": version, "releaseName": "app", "releaseNamespace": "app",
           "values": "", "valuesFrom": [],
           "options": {"timeout": "10m", "installOptions": {}}})
}

async fn until_complete(env: &Env, ticks: usize) -> Option<usize> {
    for i in 0..ticks {
        let r = env.tick().await;
        if r.promotions
            .iter()
            .any(|p| p.name == "app" && p.phase == Phase::Complete)
        {
            return Some(i);
        }
    }
    None
}

fn failure(env: &Env, stage: &str) -> Option<String> {
    env.promotion("app")?
        .status?
        .stages?
        .into_iter()
        .find(|s| s.name == stage)?
        .failure_message
}

/// Problem 1: a chart with `options`, a duration and an empty `values`, stored by Sveltos in its
/// normal form, counts as in sync.
#[tokio::test]
async fn charts_with_options_complete_against_the_stored_form() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({}),
    ));
    assert!(
        until_complete(&env, 15).await.is_some(),
        "stuck: {:?}",
        failure(&env, "dev")
    );
    // What the summaries really hold is not the profile's bytes.
    let prod = env
        .server
        .store()
        .get(&cluster_summary_type(), "prod", "app-prod-sveltos-prod01")
        .unwrap();
    let c = &prod["spec"]["clusterProfileSpec"]["helmCharts"][0];
    assert_eq!(c["options"]["timeout"], "10m0s");
    assert_eq!(c["options"]["upgradeOptions"]["maxHistory"], 2);
    assert!(c.get("values").is_none());
}

/// Problems 2 and 3: a revision that changes only `patches` is not done while the summaries still
/// show the previous spec's `Provisioned` (Sveltos writes the spec first and the status later).
#[tokio::test]
async fn a_patches_only_revision_waits_for_sveltos_to_redeploy() {
    let mut env = Env::new(FLEET).await;
    env.addon.status_lag = Duration::minutes(3);
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({}),
    ));
    assert!(until_complete(&env, 20).await.is_some());
    let revised = promotion(
        json!({"helmCharts": [chart("1.0.0")], "patches": [{"patch": "- op: add\n  path: /metadata/labels/x\n  value: y"}]}),
        json!({}),
    );
    env.apply_promotion(&revised);
    let restarted = env.now();
    assert!(until_complete(&env, 30).await.is_some());
    let dev = env
        .promotion("app")
        .unwrap()
        .status
        .unwrap()
        .stages
        .unwrap()
        .into_iter()
        .find(|s| s.name == "dev")
        .unwrap();
    let provisioned = dev.last_successful_applied_time.unwrap().as_datetime();
    assert!(
        provisioned >= restarted + Duration::minutes(3) + env.addon.default_deploy_time,
        "dev counted as provisioned at {provisioned}, before Sveltos redeployed (restart {restarted})"
    );
}

/// Problem 4: a cluster being deleted (a finalizer hangs) does not block its stage, and `explain`
/// names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleting_cluster_does_not_block_and_is_named() {
    let env = Env::new(FLEET).await;
    {
        let mut store = env.server.store();
        let mut c = sveltos_cluster("dev", "dev03", &[("env", "dev")]);
        c["metadata"]["finalizers"] = json!(["example.com/hang"]);
        store.seed(&sveltos_cluster_type(), c).unwrap();
        store
            .delete(
                &sveltos_cluster_type(),
                "dev",
                "dev03",
                &DeleteOptions::default(),
            )
            .unwrap();
    }
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({}),
    ));
    for _ in 0..3 {
        env.tick().await;
    }
    let (code, out, err) = common::promoter(&env, &["explain", "app"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("dev/dev03 (left out: being deleted"),
        "explain: {out}"
    );
    assert!(
        until_complete(&env, 15).await.is_some(),
        "blocked: {:?}",
        failure(&env, "dev")
    );
}

/// Problem 6: preserve-on-delete keeps the profiles beside open-source Sveltos v1.14+'s
/// ClusterPromotion controller, which removes the finalizer at once, and the garbage collector.
#[tokio::test]
async fn preserve_on_delete_survives_the_upstream_controller() {
    let mut env = Env::new(FLEET).await;
    env.addon.oss_promotion_controller = true;
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({"preserveClusterProfilesOnDelete": true}),
    ));
    assert!(until_complete(&env, 15).await.is_some());
    let before = env.profiles().len();
    assert_eq!(before, 2);
    assert!(
        env.profiles().iter().all(|p| p
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .is_empty()),
        "no owner reference while preserve is set"
    );
    let api: kube::Api<ClusterPromotion> = kube::Api::all(env.client.clone());
    api.delete("app", &Default::default()).await.unwrap();
    // Sveltos reacts before promoter's next pass.
    env.addon.reconcile(&env.server, env.now());
    for _ in 0..3 {
        env.tick().await;
    }
    assert!(env.promotion("app").is_none());
    assert_eq!(
        env.profiles().len(),
        before,
        "the garbage collector kept them"
    );
}

/// Turning preserve off puts the owner reference back.
#[tokio::test]
async fn owner_reference_returns_when_preserve_is_turned_off() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({"preserveClusterProfilesOnDelete": true}),
    ));
    assert!(until_complete(&env, 15).await.is_some());
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({"preserveClusterProfilesOnDelete": false}),
    ));
    env.tick().await;
    assert!(env.profiles().iter().all(|p| {
        p.metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .iter()
            .any(|r| r.kind == "ClusterPromotion" && r.name == "app")
    }));
}

/// Problem 5: a field the served CRD prunes does not make promoter rewrite the profile every pass.
#[tokio::test]
async fn a_field_pruned_by_an_older_crd_is_not_rewritten_forever() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")], "extraNewField": {"a": 1}, "tier": 90,
               "driftExclusions": [{"paths": ["/spec/replicas"]}]}),
        json!({}),
    ));
    assert!(until_complete(&env, 15).await.is_some());
    // An older served CRD: fields are gone from what the server stores (one promoter's schema
    // knows, `driftExclusions`, and one it does not know either).
    for name in ["app-dev", "app-prod"] {
        let mut store = env.server.store();
        let mut p = store.get(&cluster_profile_type(), "", name).unwrap();
        if let Some(spec) = p["spec"].as_object_mut() {
            spec.remove("extraNewField");
            spec.remove("driftExclusions");
        }
        store
            .update(&cluster_profile_type(), "", name, p, false)
            .unwrap();
    }
    env.tick().await;
    env.server.clear_requests();
    for _ in 0..2 {
        env.tick().await;
    }
    let writes: Vec<_> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "clusterprofiles" && r.verb != "list" && r.verb != "get")
        .collect();
    assert!(writes.is_empty(), "rewritten: {writes:?}");
    // Reported once, in the status of every stage whose profile lost the field, and then quiet.
    for stage in ["dev", "prod"] {
        let m = failure(&env, stage).unwrap_or_default();
        assert!(
            m.contains("older than promoter's schema") && m.contains("spec.driftExclusions"),
            "{stage}: {m:?}"
        );
        assert!(!m.contains("tier"), "only what was dropped: {m}");
    }
    let status_writes = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "clusterpromotions" && r.is_write())
        .count();
    assert_eq!(
        status_writes, 0,
        "said in the first pass after the change, not again"
    );
}

/// One ClusterSummary that does not decode does not fail the list; its cluster is not in sync.
#[tokio::test]
async fn an_undecodable_summary_is_skipped_not_fatal() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion(
        json!({"helmCharts": [chart("1.0.0")]}),
        json!({}),
    ));
    env.tick().await;
    env.server
        .store()
        .seed_unvalidated(
            &cluster_summary_type(),
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
                   "metadata": {"name": "app-dev-broken", "namespace": "dev",
                                "labels": {"projectsveltos.io/cluster-profile-name": "app-dev"}},
                   "spec": {"clusterName": 7}}),
        )
        .unwrap();
    let report = env.pass().await;
    assert!(
        report.promotions.iter().all(|p| p.phase != Phase::Blocked),
        "{report:?}"
    );
}

/// A rollout completed by `writer` (upstream's controller, or an earlier promoter) before promoter
/// ran: its status hashes, no promoter records, and for upstream, profiles written through Go
/// types without promoter's annotations.
async fn completed_before_upgrade(upstream: bool) -> Env {
    let env = Env::new(FLEET).await;
    // Two charts out of upstream's sort order, so that the earlier, order-insensitive hash differs
    // from promoter's revision hash.
    let mut b = chart("1.0.0");
    b["releaseName"] = json!("b");
    b["repositoryURL"] = json!("https://b.example/");
    let mut a = chart("1.0.0");
    a["releaseName"] = json!("a");
    a["repositoryURL"] = json!("https://a.example/");
    env.apply_promotion(&promotion(json!({"helmCharts": [b, a]}), json!({})));
    assert!(until_complete(&env, 15).await.is_some());
    let rt = promoter::fake::cluster_promotion_type();
    let mut store = env.server.store();
    let mut p = store.get(&rt, "", "app").unwrap();
    let typed: ClusterPromotion = serde_json::from_value(p.clone()).unwrap();
    let (ps, st) = if upstream {
        (
            "733VG+o3aBR450lx7xW7VEDjNQr4syJT5pukWmJo3c4=".to_string(),
            promoter::hash::upstream_stages_hash(&typed.spec.stages),
        )
    } else {
        (
            promoter::hash::profile_spec_hash(typed.spec.profile_spec.as_ref()),
            promoter::hash::stages_hash(&typed.spec.stages),
        )
    };
    assert_ne!(ps, promoter::hash::revision_hash(&typed));
    p["status"]["profileSpecHash"] = json!(ps);
    p["status"]["stagesHash"] = json!(st);
    store.update(&rt, "", "app", p.clone(), true).unwrap();
    let mut p = store.get(&rt, "", "app").unwrap();
    p["metadata"].as_object_mut().unwrap().remove("annotations");
    store.update(&rt, "", "app", p, false).unwrap();
    if upstream {
        let prt = cluster_profile_type();
        for name in ["app-dev", "app-prod"] {
            let mut cp = store.get(&prt, "", name).unwrap();
            let spec = cp["spec"].as_object().unwrap().clone();
            cp["spec"] = Value::Object(promoter::sveltos::normal_form::normalize(&spec));
            cp["metadata"]["annotations"] =
                json!({"config.projectsveltos.io/stagename": name.trim_start_matches("app-")});
            store.update(&prt, "", name, cp, false).unwrap();
        }
    }
    drop(store);
    env
}

/// Issue 14 (upgrade): statuses another writer recorded hold another profile hash. Comparing
/// hashes alone restarted every such rollout at stage 1 once, re-opening completed ones.
#[tokio::test]
async fn a_completed_rollout_is_taken_over_not_restarted() {
    for upstream in [false, true] {
        let env = completed_before_upgrade(upstream).await;
        let before = env.promotion("app").unwrap().status.unwrap();
        for _ in 0..3 {
            let r = env.tick().await;
            let app = r.promotions.iter().find(|p| p.name == "app").unwrap();
            assert_eq!(app.phase, Phase::Complete, "upstream={upstream}: {app:?}");
        }
        let p = env.promotion("app").unwrap();
        let after = p.status.clone().unwrap();
        assert_eq!(
            after.stages, before.stages,
            "upstream={upstream}: no stage restarted"
        );
        assert_eq!(after.last_promotion_time, before.last_promotion_time);
        assert_eq!(
            after.profile_spec_hash,
            Some(promoter::hash::revision_hash(&p)),
            "promoter's own hash from then on"
        );
        let rv = p.metadata.resource_version.clone();
        env.tick().await;
        assert_eq!(
            env.promotion("app").unwrap().metadata.resource_version,
            rv,
            "upstream={upstream}: quiet once taken over"
        );
    }
}
