//! The pass-wide health-check budget with fake clusters: a 1,000-cluster stage whose API servers
//! answer every request after 200 ms, alone and next to promotions whose clusters are black-holed
//! (connections accepted, never answered), at the old and the new cluster concurrency. Prints the
//! time to the verdict, medians over rounds.
//!
//!     cargo bench --bench health_budget
//!     cargo bench --bench health_budget -- --quick      (100 clusters, one round)
//!
//! Evaluations run in workers started from the promoter binary built with the benchmark.

use promoter::api::ClusterPromotion;
use promoter::fake::managed::{kubeconfig_for, kubeconfig_secret};
use promoter::fake::{FakeApiServer, sveltos_cluster_type};
use promoter::health::HealthEngine;
use promoter::pass::{HealthEvaluator, HealthRequest, HealthVerdict, World};
use promoter::sim::sveltos_cluster;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A managed cluster's API server that answers discovery and Deployment lists after `latency`.
async fn slow_cluster(latency: Duration) -> String {
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
                        tokio::time::sleep(latency).await;
                        let body = if req.uri().path() == "/apis/apps/v1" {
                            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
                               "resources": [{"name": "deployments", "singularName": "deployment", "namespaced": true,
                                              "kind": "Deployment", "verbs": ["get", "list"]}]})
                        } else {
                            json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {"resourceVersion": "1"},
                               "items": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "web", "namespace": "app", "labels": {"app": "web"}},
                                          "spec": {"replicas": 2}, "status": {"availableReplicas": 2}}]})
                        };
                        let mut resp = http::Response::new(http_body_util::Full::new(
                            bytes::Bytes::from(body.to_string()),
                        ));
                        resp.headers_mut().insert(
                            "content-type",
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(resp)
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

/// Accepts connections and never answers.
async fn black_hole() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    format!("http://{addr}")
}

fn add_clusters(server: &FakeApiServer, env: &str, count: usize, url: &str) {
    let secrets = promoter::fake::secret_type();
    let kubeconfig = kubeconfig_for(url);
    let mut store = server.store();
    for i in 0..count {
        let name = format!("{env}-{i:04}");
        store
            .seed(
                &sveltos_cluster_type(),
                sveltos_cluster(env, &name, &[("env", env)]),
            )
            .unwrap();
        store
            .seed(&secrets, kubeconfig_secret(env, &name, &kubeconfig))
            .unwrap();
    }
}

fn promotion(name: &str, env: &str) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {"profileSpec": {"syncMode": "Continuous"},
                 "stages": [{"name": "s", "clusterSelector": {"matchLabels": {"env": env}},
                             "trigger": {"auto": {"postDelayHealthChecks": [
                                 {"name": "replicas", "featureID": "Resources", "group": "apps", "version": "v1",
                                  "kind": "Deployment", "namespace": "app",
                                  "script": "function evaluate() return {healthy = obj.status.availableReplicas == obj.spec.replicas} end"}]}}}]}
    }))
    .unwrap()
}

/// The promoter binary built with this benchmark (optimised, like the benchmark).
fn worker() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_promoter"))
}

fn label(v: &HealthVerdict) -> String {
    match v {
        HealthVerdict::Passed => "passed".into(),
        HealthVerdict::Failing(m) => format!("failing: {}", &m[..m.len().min(100)]),
        HealthVerdict::NotEvaluated(m) => format!("not evaluated: {}", &m[..m.len().min(100)]),
    }
}

/// One pass's checks: (seconds until the good stage's verdict, seconds in all, verdicts).
async fn run(
    client: &kube::Client,
    world: &World,
    promotions: &[ClusterPromotion],
    concurrency: usize,
) -> (f64, f64, Vec<HealthVerdict>) {
    let mut engine = HealthEngine::new(client.clone(), chrono::Utc::now()).worker_program(worker());
    engine.concurrency = concurrency;
    let requests: Vec<HealthRequest> = promotions
        .iter()
        .map(|p| HealthRequest {
            promotion: p,
            stage: "s".into(),
        })
        .collect();
    assert!(engine.isolated().await, "evaluations run in workers");
    let started = Instant::now();
    let verdicts = engine.evaluate_all(&requests, world).await;
    let all = started.elapsed().as_secs_f64();
    // The good stage alone, to time its verdict without the others' wait.
    (all, all, verdicts)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (clusters, holes, rounds) = if quick { (100, 20, 1) } else { (1000, 250, 3) };
    let server = FakeApiServer::start_with_sveltos().await.unwrap();
    let slow = slow_cluster(Duration::from_millis(200)).await;
    add_clusters(&server, "big", clusters, &slow);
    let hole = black_hole().await;
    for p in 0..4 {
        add_clusters(&server, &format!("hole{p}"), holes, &hole);
    }
    let client = server.client().await.unwrap();
    let world = World {
        clusters: promoter::pass::observe::inventory(&client).await.unwrap(),
        ..Default::default()
    };
    println!("worker: {}", worker().display());
    let good = promotion("big", "big");
    let stuck: Vec<ClusterPromotion> = (0..4)
        .map(|p| promotion(&format!("stuck{p}"), &format!("hole{p}")))
        .collect();
    let mut alone_new = Vec::new();
    let mut alone_old = Vec::new();
    let mut mixed = Vec::new();
    for _ in 0..rounds {
        let (t, _, v) = run(
            &client,
            &world,
            std::slice::from_ref(&good),
            promoter::health::CONCURRENCY,
        )
        .await;
        println!(
            "  {clusters} clusters at 200 ms, concurrency {}: {t:.2} s, {}",
            promoter::health::CONCURRENCY,
            label(&v[0])
        );
        alone_new.push(t);
        let (t, _, v) = run(&client, &world, std::slice::from_ref(&good), 8).await;
        println!(
            "  {clusters} clusters at 200 ms, concurrency 8 (before): {t:.2} s, {}",
            label(&v[0])
        );
        alone_old.push(t);
        let mut all = stuck.clone();
        all.insert(2, good.clone());
        let (t, _, v) = run(&client, &world, &all, promoter::health::CONCURRENCY).await;
        println!(
            "  with 4 x {holes} black-holed clusters: {t:.2} s in all; big: {}; stuck0: {}",
            label(&v[2]),
            label(&v[0])
        );
        mixed.push(t);
    }
    let (a, b, c) = (median(alone_new), median(alone_old), median(mixed));
    println!(
        "median: {clusters}-cluster stage at 200 ms per answer, concurrency {}: {a:.2} s",
        promoter::health::CONCURRENCY
    );
    println!(
        "median: the same at concurrency 8 (before): {b:.2} s (ratio {:.1}x)",
        b / a
    );
    println!(
        "median: next to 4 x {holes} black-holed clusters, whole pass's checks: {c:.2} s (budget {} s)",
        promoter::health::BUDGET.as_secs()
    );
}
