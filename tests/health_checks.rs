//! postDelayHealthChecks end to end: fake API servers play the managed clusters, reached through
//! kubeconfig Secrets in the (fake) management cluster, as promoter reaches real ones.

mod common;

use base64::Engine;
use common::Env;
use promoter::api::ClusterPromotion;
use promoter::fake::managed::{
    self, cloudflare_token_secret, cluster_issuer, cluster_issuer_type, deployment_type,
};
use promoter::fake::secret_type;
use promoter::fake::{FakeApiServer, ResourceType};
use promoter::pass::{HealthEvaluator, HealthVerdict, Phase, World};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A managed cluster serving Deployments, Jobs, Secrets and cert-manager ClusterIssuers.
async fn managed_cluster(
    env: &Env,
    namespace: &str,
    name: &str,
    objects: Vec<(ResourceType, Value)>,
) -> FakeApiServer {
    let types = [
        deployment_type(),
        ResourceType::builtin("batch", "v1", "Job", "jobs", true),
        secret_type(),
        cluster_issuer_type(),
    ];
    managed::managed_cluster(&env.server, namespace, &[name], &types, objects)
        .await
        .unwrap()
}

fn deployment(ready: bool) -> (ResourceType, Value) {
    (
        deployment_type(),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "cert-manager", "namespace": "cert-manager", "labels": {"app": "cert-manager"}},
               "spec": {"replicas": 2}, "status": {"availableReplicas": if ready { 2 } else { 1 }}}),
    )
}

fn cert_manager_promotion() -> ClusterPromotion {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/docs-cert-manager.yaml");
    promoter::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone()
}

fn with_checks(checks: Value) -> ClusterPromotion {
    let mut p = cert_manager_promotion();
    p.metadata.name = Some("checks".into());
    p.spec.stages[0].trigger =
        serde_json::from_value(json!({"auto": {"postDelayHealthChecks": checks}})).unwrap();
    p
}

async fn verdict(env: &Env, p: &ClusterPromotion) -> HealthVerdict {
    let world: World = promoter::pass::observe::observe(&env.client, None)
        .await
        .unwrap()
        .world;
    let world = World {
        clusters: promoter::pass::observe::inventory(&env.client)
            .await
            .unwrap(),
        ..world
    };
    env.health_engine().evaluate(p, "dev", &world).await
}

fn failing(v: HealthVerdict) -> String {
    match v {
        HealthVerdict::Failing(m) => m,
        other => panic!("expected a failing verdict, got {other:?}"),
    }
}

#[tokio::test]
async fn seed_003_checks_pass_and_fail_as_they_should() {
    let env = Env::new(&[("dev", "dev01", "dev"), ("dev", "dev02", "dev")]).await;
    let _c1 = managed_cluster(
        &env,
        "dev",
        "dev01",
        vec![cluster_issuer(true), cloudflare_token_secret()],
    )
    .await;
    let c2 = managed_cluster(
        &env,
        "dev",
        "dev02",
        vec![cluster_issuer(true), cloudflare_token_secret()],
    )
    .await;
    let p = cert_manager_promotion();
    assert_eq!(verdict(&env, &p).await, HealthVerdict::Passed);
    // The Secret goes missing on dev02: its four-argument getResource finds nothing.
    c2.store()
        .delete(
            &secret_type(),
            "cert-manager",
            "cloudflare-api-token",
            &Default::default(),
        )
        .unwrap();
    let m = failing(verdict(&env, &p).await);
    assert_eq!(
        m,
        "cluster dev/dev02: check cert-manager-resources-health: resource ClusterIssuer /cloudflare-issuer is not healthy: Missing Secret or ClusterIssuer not ready"
    );
}

#[tokio::test]
async fn lua_and_cel_over_a_deployment() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let cluster = managed_cluster(&env, "dev", "dev01", vec![deployment(true)]).await;
    let lua = json!([{"name": "deployment-health", "featureID": "Helm", "group": "apps", "version": "v1", "kind": "Deployment",
        "namespace": "cert-manager", "labelFilters": [{"key": "app", "operation": "Equal", "value": "cert-manager"}],
        "script": "function evaluate()\n local hs = {healthy = false, message = \"available replicas not matching requested replicas\"}\n if obj.status and obj.status.availableReplicas ~= nil and obj.status.availableReplicas == obj.spec.replicas then hs.healthy = true end\n return hs\nend"}]);
    let cel = json!([{"name": "cel", "featureID": "Helm", "group": "apps", "version": "v1", "kind": "Deployment", "namespace": "cert-manager",
        "evaluateCEL": [{"name": "ready", "rule": "resource.status.availableReplicas == resource.spec.replicas"}]}]);
    let both = json!([{"name": "both", "featureID": "Helm", "group": "apps", "version": "v1", "kind": "Deployment", "namespace": "cert-manager",
        "script": "function evaluate() return {healthy = true} end",
        "evaluateCEL": [{"name": "ready", "rule": "resource.status.availableReplicas == resource.spec.replicas"}]}]);
    for checks in [&lua, &cel, &both] {
        assert_eq!(
            verdict(&env, &with_checks(checks.clone())).await,
            HealthVerdict::Passed,
            "{checks}"
        );
    }
    cluster
        .store()
        .seed(&deployment(false).0, {
            let mut d = deployment(false).1;
            d["metadata"]["name"] = json!("webhook");
            d
        })
        .unwrap();
    assert!(failing(verdict(&env, &with_checks(lua.clone())).await).contains("resource Deployment cert-manager/webhook is not healthy: available replicas not matching requested replicas"));
    assert!(
        failing(verdict(&env, &with_checks(cel)).await).contains("no evaluateCEL rule is true")
    );
    assert!(
        failing(verdict(&env, &with_checks(both)).await).contains("webhook"),
        "script and CEL must both pass"
    );
    // Label filters narrow the list: no resource with that label is a failure.
    let mut filtered = lua.clone();
    filtered[0]["labelFilters"][0]["value"] = json!("nothing");
    assert!(
        failing(verdict(&env, &with_checks(filtered)).await)
            .contains("validateHealth: deployment-health did not fetch any resource")
    );
}

#[tokio::test]
async fn a_kind_the_cluster_does_not_serve_fails_and_names_it() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let _c = managed_cluster(&env, "dev", "dev01", vec![]).await;
    let checks = json!([{"name": "typo", "featureID": "Resources", "group": "cert-manager.io", "version": "v1", "kind": "ClusterIsuer",
        "script": "function evaluate() return {healthy = true} end"}]);
    let m = failing(verdict(&env, &with_checks(checks)).await);
    assert!(
        m.contains("kind ClusterIsuer (cert-manager.io/v1) is not served by the cluster"),
        "{m}"
    );
    let bad_cel = json!([{"name": "c", "featureID": "Resources", "group": "cert-manager.io", "version": "v1", "kind": "ClusterIssuer",
        "evaluateCEL": [{"name": "typo", "rule": "resource.status =="}]}]);
    assert!(
        failing(verdict(&env, &with_checks(bad_cel)).await)
            .contains("CEL rule \"typo\" does not compile")
    );
}

#[tokio::test]
async fn unreachable_clusters_are_named_never_hang() {
    let env = Env::new(&[
        ("dev", "a-missing-secret", "dev"),
        ("dev", "b-dead", "dev"),
        ("dev", "c-pull", "dev"),
    ])
    .await;
    // b-dead: a kubeconfig pointing at a port nobody listens on.
    let kubeconfig = promoter::fake::unreachable_kubeconfig_yaml().unwrap();
    env.server
        .store()
        .seed(
            &secret_type(),
            json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "b-dead-sveltos-kubeconfig", "namespace": "dev"},
        "data": {"value": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}}),
        )
        .unwrap();
    let sc = promoter::fake::sveltos_cluster_type();
    // spec.pullMode is immutable (a CEL transition rule of the SveltosCluster CRD): a cluster in
    // pull mode is registered so from the start.
    let mut pull = env.server.store().get(&sc, "dev", "c-pull").unwrap();
    env.server
        .store()
        .delete(&sc, "dev", "c-pull", &Default::default())
        .unwrap();
    pull["spec"]["pullMode"] = json!(true);
    pull["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    env.server.store().seed(&sc, pull).unwrap();
    let checks = json!([{"name": "c", "featureID": "Resources", "version": "v1", "kind": "Secret", "script": "function evaluate() return {healthy = true} end"}]);
    let p = with_checks(checks);
    let started = Instant::now();
    let world = World {
        clusters: promoter::pass::observe::inventory(&env.client)
            .await
            .unwrap(),
        ..Default::default()
    };
    let engine = env.health_engine();
    let m = failing(engine.evaluate(&p, "dev", &world).await);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        m,
        "cluster dev/a-missing-secret: cannot be checked: kubeconfig Secret dev/a-missing-secret-sveltos-kubeconfig not found (and 2 more clusters failing)"
    );
    // Each cluster's reason, one at a time: remove the first to see the next.
    let only = |name: &str| World {
        clusters: world
            .clusters
            .iter()
            .filter(|c| c.name == name)
            .cloned()
            .collect(),
        ..Default::default()
    };
    let dead = failing(engine.evaluate(&p, "dev", &only("b-dead")).await);
    assert!(
        dead.starts_with("cluster dev/b-dead: check c: discovering kind Secret (v1)"),
        "{dead}"
    );
    let pulled = failing(engine.evaluate(&p, "dev", &only("c-pull")).await);
    assert!(
        pulled.contains("cluster dev/c-pull: cannot be checked: is in pull mode"),
        "{pulled}"
    );
}

#[tokio::test]
async fn job_check_needs_a_complete_job() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let cluster = managed_cluster(&env, "dev", "dev01", vec![]).await;
    env.server.store().seed(&ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true), json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "verify", "namespace": "default"},
        "data": {"job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: verify\n  namespace: checks\nspec: {}\n"}})).unwrap();
    let p = with_checks(
        json!([{"name": "job", "featureID": "Resources", "jobCheck": {"jobRef": {"kind": "ConfigMap", "name": "verify", "namespace": "default"}, "timeout": "2m"}}]),
    );
    assert!(failing(verdict(&env, &p).await).contains("Job checks/verify does not exist"));
    let job = |status: &str| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "verify", "namespace": "checks"},
        "status": {"conditions": [{"type": status, "status": "True"}]}})
    };
    let jobs = ResourceType::builtin("batch", "v1", "Job", "jobs", true);
    cluster.store().seed(&jobs, job("Failed")).unwrap();
    assert!(failing(verdict(&env, &p).await).contains("Job checks/verify failed"));
    cluster
        .store()
        .delete(&jobs, "checks", "verify", &Default::default())
        .unwrap();
    cluster.store().seed(&jobs, job("Complete")).unwrap();
    assert_eq!(verdict(&env, &p).await, HealthVerdict::Passed);
}

/// A Prometheus stand-in on loopback answering instant queries.
async fn prometheus(value: &'static str) -> String {
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let svc = service_fn(
                    move |req: http::Request<hyper::body::Incoming>| async move {
                        let authorized = req
                            .headers()
                            .get("authorization")
                            .is_some_and(|h| h == "Bearer s3cret");
                        let body = if authorized {
                            format!(
                                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"{value}"]}}]}}}}"#
                            )
                        } else {
                            r#"{"status":"error","error":"unauthorized"}"#.to_string()
                        };
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from(body)),
                        ))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn metric_queries_feed_the_script() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let _c = managed_cluster(&env, "dev", "dev01", vec![(secret_type(), json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "prom", "namespace": "monitoring"}, "data": {"token": base64::engine::general_purpose::STANDARD.encode("s3cret")}}))]).await;
    for (value, healthy) in [("0.01", true), ("0.30", false)] {
        let url = prometheus(value).await;
        let p = with_checks(json!([{"name": "errors", "featureID": "Helm",
            "metricSource": {"url": url, "secretRef": {"namespace": "monitoring", "name": "prom"}},
            "metricQueries": [{"name": "error_rate", "query": "sum(rate(http_errors[5m]))"}],
            "script": "function evaluate() return {healthy = metrics.error_rate < 0.05, message = 'error rate ' .. metrics.error_rate} end"}]));
        let v = verdict(&env, &p).await;
        if healthy {
            assert_eq!(v, HealthVerdict::Passed);
        } else {
            assert!(failing(v).contains("not healthy: error rate 0.3"));
        }
    }
}

#[tokio::test]
async fn a_rollout_waits_for_its_checks_and_a_hostile_script_harms_no_one() {
    let env = Env::new(&[("dev", "dev01", "dev"), ("staging", "stg01", "staging")]).await;
    let _c = managed_cluster(
        &env,
        "dev",
        "dev01",
        vec![cluster_issuer(true), cloudflare_token_secret()],
    )
    .await;
    let mut good = cert_manager_promotion();
    good.spec
        .profile_spec
        .as_mut()
        .unwrap()
        .0
        .remove("maxUpdate");
    env.apply_promotion(&good);
    let mut evil = with_checks(
        json!([{"name": "loop", "featureID": "Resources", "group": "cert-manager.io", "version": "v1",
        "kind": "ClusterIssuer", "script": "function evaluate() while true do end end"}]),
    );
    evil.metadata.name = Some("evil".into());
    env.apply_promotion(&evil);
    let mut promoted = false;
    for _ in 0..15 {
        let report = env.pass_with(&env.health_engine()).await;
        env.addon.reconcile(&env.server, env.now());
        env.advance(chrono::Duration::minutes(1));
        let evil_report = report.promotions.iter().find(|p| p.name == "evil").unwrap();
        assert_ne!(evil_report.phase, Phase::Complete);
        if report.promotions.iter().any(|p| {
            p.name == "cert-manager-rollout-auto" && p.summary == "promoted dev -> staging"
        }) {
            promoted = true;
            let why = env
                .promotion("evil")
                .unwrap()
                .status
                .unwrap()
                .stages
                .unwrap()[0]
                .failure_message
                .clone()
                .unwrap_or_default();
            assert!(why.contains("instruction budget"), "{why}");
        }
    }
    assert!(promoted, "the seed rollout passed its checks and moved on");
}
