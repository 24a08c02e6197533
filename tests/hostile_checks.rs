//! Health checks as untrusted code: hostile scripts and rules, each bounded (1 s, 64 MiB per
//! evaluation), each failing its own check with a short, clear message, none stopping the pass; and
//! the pass-wide budget, shared fairly (black-holed clusters starve no one).
//!
//! Evaluations run in workers started from the real `promoter` binary, as in `promoter step`; the
//! last tests run `promoter step` itself.

mod common;

use common::{Env, promoter};
use promoter::api::ClusterPromotion;
use promoter::fake::FakeApiServer;
use promoter::fake::managed::{self, deployment_type, kubeconfig_for};
use promoter::fake::secret_type;
use promoter::pass::{HealthEvaluator, HealthVerdict, World};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A managed cluster serving one ready Deployment, `app/web`.
async fn managed_cluster(env: &Env, namespace: &str, names: &[&str]) -> FakeApiServer {
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "app", "labels": {"app": "web"}},
                     "spec": {"replicas": 2}, "status": {"availableReplicas": 2}});
    managed::managed_cluster(
        &env.server,
        namespace,
        names,
        &[deployment_type(), secret_type()],
        vec![(deployment_type(), web)],
    )
    .await
    .unwrap()
}

/// A listener that accepts connections and never answers: a black-holed cluster.
async fn black_hole() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    kubeconfig_for(&format!("http://{addr}"))
}

/// A two-stage promotion whose first stage (`env: <selector>`) is gated by `checks` only.
fn promotion(name: &str, selector: &str, checks: Value) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "policyRefs": [{"name": "cm", "namespace": "default", "kind": "ConfigMap"}]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": selector}},
                 "trigger": {"auto": {"postDelayHealthChecks": checks}}},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}},
                 "trigger": {"auto": {}}}
            ]
        }
    }))
    .unwrap()
}

fn lua_check(script: &str) -> Value {
    json!([{"name": "hostile", "featureID": "Resources", "group": "apps", "version": "v1",
            "kind": "Deployment", "namespace": "app", "script": script}])
}

fn cel_check(rule: &str) -> Value {
    json!([{"name": "hostile", "featureID": "Resources", "group": "apps", "version": "v1",
            "kind": "Deployment", "namespace": "app", "evaluateCEL": [{"name": "r", "rule": rule}]}])
}

const GOOD_LUA: &str = "function evaluate() return {healthy = obj.status.availableReplicas == obj.spec.replicas, message = 'replicas'} end";
const GOOD_CEL: &str = "resource.status.availableReplicas == resource.spec.replicas";

/// (name, checks, what the failure must say). Each is a real attack on the evaluator.
fn hostile_cases() -> Vec<(&'static str, Value, &'static str)> {
    let nested_all = format!(
        "{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, a + b + c + d >= 0))))",
        l = format!(
            "[{}]",
            (0..200)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    );
    let list_bomb = format!(
        "size({l}.map(a, {l}.map(b, {l}.map(c, resource.metadata.name + resource.metadata.name)))) > 0",
        l = format!(
            "[{}]",
            (0..100)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    );
    vec![
        (
            "lua-backtracking",
            lua_check(
                "function evaluate() local s = string.rep('a', 200000) return {healthy = string.find(s, '.-.-.-.-.-.-.-.-.-b') ~= nil} end",
            ),
            "time limit of 1 s exceeded",
        ),
        (
            "lua-rep-loop",
            lua_check(
                "function evaluate() while true do local s = string.rep('x', 50000000) end end",
            ),
            "memory limit|time limit",
        ),
        (
            "lua-gc-finalizer",
            lua_check(
                "setmetatable({}, {__gc = function() while true do end end})\nfunction evaluate() return {healthy = true} end",
            ),
            "finalizers (__gc) are not allowed",
        ),
        (
            "lua-gc-late",
            lua_check(
                "local mt = {}\nlocal t = setmetatable({}, mt)\nmt.__gc = function() while true do end end\nt = nil\nfunction evaluate() local x = {} for i = 1, 100000 do x[i] = {} end return {healthy = false, message = 'late __gc never runs'} end",
            ),
            "late __gc never runs",
        ),
        (
            "helper-replace-bomb",
            lua_check(
                "local strings = require('strings')\nfunction evaluate() local s = string.rep('a', 1000000) return {healthy = #strings.replace(s, 'a', string.rep('b', 10000)) > 0} end",
            ),
            "exceeds the memory limit of 64 MiB",
        ),
        (
            "helper-split-bomb",
            lua_check(
                "local strings = require('strings')\nfunction evaluate() local s = string.rep(',', 30000000) return {healthy = #strings.split(s, ',') > 0} end",
            ),
            // The size guard, or the time limit in a debug build.
            "exceeds the memory limit|time limit",
        ),
        (
            "helper-json-bomb",
            lua_check(
                "local json = require('json')\nfunction evaluate() local big = string.rep('x', 1000000) local t = {} for i = 1, 2000 do t[i] = big end return {healthy = #json.encode(t) > 0} end",
            ),
            "memory limit of 64 MiB exceeded",
        ),
        (
            "lua-memory",
            lua_check(
                "function evaluate() local t = {} for i = 1, 100000000 do t[i] = i end return {healthy = true} end",
            ),
            "memory limit|time limit|instruction budget",
        ),
        (
            "lua-deep-json",
            lua_check(
                "local json = require('json')\nfunction evaluate() return {healthy = json.decode(string.rep('[', 100000)) ~= nil} end",
            ),
            "recursion limit exceeded",
        ),
        (
            "lua-deep-table-encode",
            lua_check(
                "local json = require('json')\nfunction evaluate() local t = {} local c = t for i = 1, 1000000 do c.n = {} c = c.n end return {healthy = #json.encode(t) > 0} end",
            ),
            "memory limit|time limit",
        ),
        (
            "lua-huge-message",
            lua_check(
                "function evaluate() return {healthy = false, message = string.rep('é', 2 * 1024 * 1024)} end",
            ),
            "(truncated, 4194304 bytes in all)",
        ),
        (
            "lua-huge-error",
            lua_check("function evaluate() error(string.rep('e', 3000000)) end"),
            "truncated",
        ),
        (
            "lua-recursion",
            lua_check(
                "local function f(n) return f(n + 1) + 1 end\nfunction evaluate() return {healthy = f(1) > 0} end",
            ),
            "stack overflow|time limit",
        ),
        (
            "cel-deep-nesting",
            cel_check(&format!("{}true{}", "(".repeat(100), ")".repeat(100))),
            "nests brackets 100 deep",
        ),
        (
            "cel-deep-unary",
            cel_check(&format!("{}true", "!".repeat(8000))),
            "CEL rule",
        ),
        (
            "cel-deep-ternary",
            // As deep as the length limit allows: parsed and evaluated without overflowing.
            cel_check(&format!("{}false", "false ? true : ".repeat(540))),
            "no evaluateCEL rule is true",
        ),
        (
            "cel-nested-all",
            cel_check(&nested_all),
            "time limit of 1 s exceeded",
        ),
        ("cel-list-bomb", cel_check(&list_bomb), "exceeded"),
        (
            "cel-too-long",
            cel_check(&format!("{}true", "true && ".repeat(2000))),
            "at most 8192 are accepted",
        ),
    ]
}

/// Whether `m` says one of the `|`-separated alternatives (which limit is hit first can depend on
/// the machine's speed).
fn says(m: &str, expected: &str) -> bool {
    expected.split('|').any(|e| m.contains(e))
}

async fn world(env: &Env) -> World {
    World {
        clusters: promoter::pass::observe::inventory(&env.client)
            .await
            .unwrap(),
        ..Default::default()
    }
}

/// Each hostile check fails its own check with a short message, within its bounds, and the good
/// check evaluated in the same engine afterwards still passes.
#[tokio::test(flavor = "multi_thread")]
async fn each_hostile_check_fails_alone_within_its_bounds() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let _cluster = managed_cluster(&env, "dev", &["dev01"]).await;
    let world = world(&env).await;
    let engine = env.health_engine();
    assert!(engine.isolated().await, "evaluations run in workers");
    let only = std::env::var("HOSTILE_CASE").ok();
    for (name, checks, expected) in hostile_cases() {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let p = promotion(name, "dev", checks);
        let started = Instant::now();
        let verdict = engine.evaluate(&p, "dev", &world).await;
        let took = started.elapsed();
        let HealthVerdict::Failing(m) = verdict else {
            panic!("{name}: expected a failing verdict, got {verdict:?}");
        };
        eprintln!("{name}: {took:?}: {}", &m[..m.len().min(300)]);
        assert!(says(&m, expected), "{name}: {m}");
        assert!(
            m.len() <= 4096 + 200,
            "{name}: message of {} bytes",
            m.len()
        );
        assert!(
            took < Duration::from_secs(4),
            "{name}: took {took:?}, the bound is 1 s per evaluation"
        );
        let good = promotion("good", "dev", lua_check(GOOD_LUA));
        assert_eq!(
            engine.evaluate(&good, "dev", &world).await,
            HealthVerdict::Passed,
            "after {name}"
        );
    }
    let good = promotion("good-cel", "dev", cel_check(GOOD_CEL));
    assert_eq!(
        engine.evaluate(&good, "dev", &world).await,
        HealthVerdict::Passed
    );
}

/// The promotion's first-stage failure message, as written into its status.
fn stage_message(env: &Env, name: &str) -> String {
    env.promotion(name)
        .and_then(|p| p.status)
        .and_then(|s| s.stages)
        .and_then(|s| s.into_iter().find(|s| s.name == "dev"))
        .and_then(|s| s.failure_message)
        .unwrap_or_default()
}

/// Runs `promoter step` until `good` has promoted dev -> prod (at most `passes`); each pass must end
/// well within the CronJob's 50 s with exit code 0 (waiting promotions are not errors).
fn step_until_promoted(env: &Env, good: &str, passes: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    for _ in 0..passes {
        let started = Instant::now();
        // The fake servers live in this test's runtime: keep them served while the binary runs.
        let (code, out, err) =
            tokio::task::block_in_place(|| promoter(env, &["step", "-o", "json"]));
        took.push(started.elapsed());
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "the pass took {:?}: {}",
            started.elapsed(),
            err.lines()
                .take(8)
                .chain(err.lines().rev().take(8))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let report: Value = serde_json::from_str(&out).unwrap();
        let entry = report["promotions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == good)
            .cloned();
        eprintln!(
            "pass {}: {}",
            took.len(),
            entry.unwrap_or_default()["summary"]
        );
        for l in err.lines().filter(|l| l.contains("dev01")) {
            eprintln!("  {l}");
        }
        let promoted = report["promotions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == good && p["summary"] == "promoted dev -> prod");
        if promoted {
            return took;
        }
        env.addon.reconcile(&env.server, env.now());
        env.advance(chrono::Duration::minutes(1));
    }
    panic!("{good} did not promote in {passes} passes");
}

/// Every hostile script and rule at once, each in its own promotion next to a good one, through
/// the real `promoter step`: the good promotion promotes, each hostile one waits with a short
/// message naming what it hit, and the pass ends in seconds.
#[tokio::test(flavor = "multi_thread")]
async fn step_with_every_hostile_check_next_to_a_good_promotion() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    *env.now.lock().unwrap() = chrono::Utc::now();
    let _cluster = managed_cluster(&env, "dev", &["dev01"]).await;
    let good = json!([lua_check(GOOD_LUA)[0], cel_check(GOOD_CEL)[0]]);
    env.apply_promotion(&promotion("good", "dev", good));
    let cases = hostile_cases();
    for (name, checks, _) in &cases {
        env.apply_promotion(&promotion(name, "dev", checks.clone()));
    }
    let took = step_until_promoted(&env, "good", 4);
    eprintln!("passes took {took:?}");
    for (name, _, expected) in &cases {
        let m = stage_message(&env, name);
        assert!(says(&m, expected), "{name}: {m}");
        assert!(m.len() < 4096 + 200, "{name}: {} bytes", m.len());
    }
}

/// Starvation: four promotions whose 60 clusters each are black-holed (connections accepted, never
/// answered) next to a good promotion with checks: the good one promotes in its first checking
/// pass; the black-holed ones wait, failing or "not evaluated (budget)", and the pass ends within
/// the CronJob's deadline.
#[tokio::test(flavor = "multi_thread")]
async fn black_holed_clusters_starve_no_one() {
    let mut fleet: Vec<(String, String, String)> =
        vec![("dev".into(), "dev01".into(), "dev".into())];
    for p in 0..4 {
        for c in 0..60 {
            fleet.push((format!("hole{p}"), format!("c{c:02}"), format!("hole{p}")));
        }
    }
    let refs: Vec<(&str, &str, &str)> = fleet
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    let env = Env::new(&refs).await;
    *env.now.lock().unwrap() = chrono::Utc::now();
    let _cluster = managed_cluster(&env, "dev", &["dev01"]).await;
    let hole = black_hole().await;
    for p in 0..4 {
        for c in 0..60 {
            env.server
                .seed_kubeconfig(&format!("hole{p}"), &format!("c{c:02}"), &hole)
                .unwrap();
        }
        env.apply_promotion(&promotion(
            &format!("stuck{p}"),
            &format!("hole{p}"),
            lua_check(GOOD_LUA),
        ));
    }
    env.apply_promotion(&promotion("good", "dev", lua_check(GOOD_LUA)));
    let took = step_until_promoted(&env, "good", 3);
    eprintln!("passes took {took:?}");
    for p in 0..4 {
        let m = stage_message(&env, &format!("stuck{p}"));
        assert!(
            says(&m, "did not answer|budget|client error|timed out"),
            "stuck{p}: {m}"
        );
    }
}

/// A stage not finished when the pass's budget is spent is "not evaluated (budget)", naming the
/// clusters not reached, never failing; a cluster that really failed still fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_check_not_reached_within_the_budget_is_not_evaluated_never_failing() {
    let env = Env::new(&[
        ("dev", "dev01", "dev"),
        ("hole", "h1", "hole"),
        ("hole", "h2", "hole"),
    ])
    .await;
    let _cluster = managed_cluster(&env, "dev", &["dev01"]).await;
    let hole = black_hole().await;
    env.server.seed_kubeconfig("hole", "h1", &hole).unwrap();
    env.server.seed_kubeconfig("hole", "h2", &hole).unwrap();
    let world = world(&env).await;
    let mut engine = env.health_engine();
    engine.budget = Duration::from_secs(2);
    let stuck = promotion("stuck", "hole", lua_check(GOOD_LUA));
    let good = promotion("good", "dev", lua_check(GOOD_LUA));
    let bad = promotion(
        "bad",
        "dev",
        lua_check("function evaluate() return {healthy = false, message = 'down'} end"),
    );
    let requests = [
        promoter::pass::HealthRequest {
            promotion: &stuck,
            stage: "dev".into(),
        },
        promoter::pass::HealthRequest {
            promotion: &good,
            stage: "dev".into(),
        },
        promoter::pass::HealthRequest {
            promotion: &bad,
            stage: "dev".into(),
        },
    ];
    let started = Instant::now();
    let verdicts = engine.evaluate_all(&requests, &world).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let HealthVerdict::NotEvaluated(why) = &verdicts[0] else {
        panic!("{:?}", verdicts[0]);
    };
    assert!(
        why.starts_with(
            "budget: 2 of 2 clusters not checked within the pass's health-check budget of 2 s"
        ) && why.contains("hole/h1, hole/h2"),
        "{why}"
    );
    assert_eq!(verdicts[1], HealthVerdict::Passed);
    let HealthVerdict::Failing(m) = &verdicts[2] else {
        panic!("{:?}", verdicts[2]);
    };
    assert!(m.ends_with("is not healthy: down"), "{m}");
}
