//! The Lambda `bootstrap` serves as the health-check worker too (it is the only binary in the
//! function's package): started again with the hidden argument, it evaluates under the same hard
//! bounds as `promoter`'s workers.

use promoter::health::pool::{Pool, Problem, Verdict};
use promoter::health::worker::Request;
use serde_json::json;
use std::time::{Duration, Instant};

fn request(script: &str) -> Request {
    Request {
        script: Some(script.into()),
        objects: vec![Some(json!({"spec": {"replicas": 1}}))],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bootstrap_serves_as_the_health_check_worker_with_hard_bounds() {
    let pool = Pool::new(Some(env!("CARGO_BIN_EXE_bootstrap").into()), 2);
    assert!(pool.isolated().await, "bootstrap answers as a worker");
    let good = "function evaluate() return {healthy = obj.spec.replicas == 1} end";
    assert_eq!(pool.run(request(good)).await, Verdict::Healthy);
    // Backtracking inside string.find: no hook runs there; the watchdog stops it.
    let started = Instant::now();
    let v = pool
        .run(request(
            "function evaluate() local s = string.rep('a', 200000) return {healthy = string.find(s, '.-.-.-.-.-.-.-.-b') ~= nil} end",
        ))
        .await;
    assert!(
        matches!(&v, Verdict::Object { problem: Problem::Error(m), .. } if m.contains("time limit of 1 s exceeded")),
        "{v:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A helper's allocation outside Lua's accounting: the counting allocator of bootstrap stops it.
    let v = pool
        .run(request(
            "local json = require('json')\nfunction evaluate() local big = string.rep('x', 1000000) local t = {} for i = 1, 2000 do t[i] = big end return {healthy = #json.encode(t) > 0} end",
        ))
        .await;
    assert!(
        matches!(&v, Verdict::Object { problem: Problem::Error(m), .. } if m.contains("memory limit of 64 MiB exceeded")),
        "{v:?}"
    );
    // Replaced workers serve the next check.
    assert_eq!(pool.run(request(good)).await, Verdict::Healthy);
}
