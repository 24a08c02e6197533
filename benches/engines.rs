//! On-demand benchmark of the per-evaluation engines: Lua and CEL health checks over a realistic
//! Deployment, and promotion-window evaluation. Prints medians and spread over several rounds.
//!
//!     cargo bench --bench engines
//!     cargo bench --bench engines -- --quick      (fewer rounds; what CI runs as a smoke test)

use chrono::{TimeZone, Utc};
use promoter::health::pool::Pool;
use promoter::health::worker::Request;
use promoter::health::{cel, lua};
use promoter::window::PromotionWindow;
use serde_json::json;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

/// Runs `f` `n` times per round; returns the per-call times of each round, in microseconds.
fn measure(rounds: usize, n: usize, mut f: impl FnMut()) -> Vec<f64> {
    let mut out: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / n as f64
        })
        .collect();
    out.sort_by(|a, b| a.total_cmp(b));
    out
}

fn report(name: &str, times: &[f64]) {
    let median = times[times.len() / 2];
    println!(
        "{name:<48} median {median:>9.2} µs/op  ({:>10.0} ops/s)  min {:.2}  max {:.2}",
        1e6 / median,
        times[0],
        times[times.len() - 1]
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, scale) = if quick { (3, 1) } else { (9, 10) };
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "cert-manager", "namespace": "cert-manager", "labels": {"app": "cert-manager", "app.kubernetes.io/version": "v1.19.1"},
                     "annotations": {"deployment.kubernetes.io/revision": "3"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "cert-manager"}},
                 "template": {"spec": {"containers": [{"name": "cert-manager", "image": "quay.io/jetstack/cert-manager-controller:v1.19.1",
                   "args": ["--v=2", "--cluster-resource-namespace=$(POD_NAMESPACE)"], "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}},
        "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 3,
                   "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}]}
    });
    let script = "function evaluate()\n  local hs = {healthy = false, message = \"available replicas not matching requested replicas\"}\n  if obj.status and obj.status.availableReplicas ~= nil and obj.status.availableReplicas == obj.spec.replicas then\n    hs.healthy = true\n  end\n  return hs\nend";
    let resources = Arc::new(BTreeMap::new());
    let metrics = BTreeMap::new();
    report(
        "lua: typical check (fresh sandbox per evaluation)",
        &measure(rounds, 200 * scale, || {
            black_box(lua::evaluate(script, Some(&deployment), &metrics, resources.clone()).ok());
        }),
    );
    // What a check does on a cluster: one sandbox, one evaluation per fetched object.
    let evaluator = lua::Evaluator::new(script, &metrics, resources.clone());
    if let Ok(evaluator) = &evaluator {
        report(
            "lua: typical check (sandbox reused per check and cluster)",
            &measure(rounds, 2000 * scale, || {
                black_box(evaluator.evaluate(Some(&deployment)).ok());
            }),
        );
    }
    let rules = vec![
        (
            "ready".to_string(),
            "resource.status.availableReplicas == resource.spec.replicas".to_string(),
        ),
        (
            "available".to_string(),
            "resource.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')"
                .to_string(),
        ),
    ];
    let programs = cel::compile(&rules).unwrap_or_default();
    report(
        "cel: typical rule (compiled once)",
        &measure(rounds, 2_000 * scale, || {
            black_box(cel::evaluate(&programs, &deployment).ok());
        }),
    );
    report(
        "cel: compile + evaluate",
        &measure(rounds, 200 * scale, || {
            let p = cel::compile(&rules).unwrap_or_default();
            black_box(cel::evaluate(&p, &deployment).ok());
        }),
    );
    // How checks really run: a request to a warm worker process (the promoter binary built with
    // this benchmark), with the watchdog; one object per request, the worst case for the IPC.
    if let Ok(rt) = tokio::runtime::Runtime::new() {
        let pool = Pool::new(Some(env!("CARGO_BIN_EXE_promoter").into()), 2);
        if rt.block_on(pool.isolated()) {
            for (name, request, n) in [
                (
                    "worker: lua typical check, 1 object per request",
                    Request {
                        script: Some(script.to_string()),
                        objects: vec![Some(deployment.clone())],
                        ..Default::default()
                    },
                    200,
                ),
                (
                    "worker: lua typical check, 100 objects per request",
                    Request {
                        script: Some(script.to_string()),
                        objects: vec![Some(deployment.clone()); 100],
                        ..Default::default()
                    },
                    10,
                ),
                (
                    "worker: cel typical rules, 1 object per request",
                    Request {
                        rules: rules.clone(),
                        objects: vec![Some(deployment.clone())],
                        ..Default::default()
                    },
                    200,
                ),
            ] {
                report(
                    name,
                    &measure(rounds, n * scale, || {
                        black_box(rt.block_on(pool.run(request.clone())));
                    }),
                );
            }
        } else {
            println!("worker: the promoter binary cannot serve as a worker; skipped");
        }
    }
    let now = Utc
        .with_ymd_and_hms(2026, 2, 17, 17, 30, 0)
        .single()
        .unwrap_or_default();
    for (name, from, to) in [
        ("window: * * * * *", "* * * * *", "* * * * *"),
        (
            "window: weekly (Sat 10:00 to Sun 22:00)",
            "0 10 * * 6",
            "0 22 * * 0",
        ),
        (
            "window: CRON_TZ=Europe/Berlin business hours",
            "CRON_TZ=Europe/Berlin 0 9 * * 1-5",
            "CRON_TZ=Europe/Berlin 0 17 * * 1-5",
        ),
    ] {
        let Ok(w) = PromotionWindow::parse(from, to, chrono_tz::Tz::UTC) else {
            continue;
        };
        report(
            name,
            &measure(rounds, 20_000 * scale, || {
                black_box(w.state(now));
            }),
        );
    }
}
