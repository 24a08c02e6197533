//! Cold start of the Lambda function: the real `bootstrap`, started fresh for each round under the
//! Runtime API emulation, against the fake API server holding the blog's rollout. Prints process
//! start to its first Runtime API poll, to its first Kubernetes request, to the posted summary, and
//! the process's peak RSS; then the size of the shipped (musl, release) binary if it was built.
//!
//!   cargo bench -p promoter-lambda --bench cold_start
//!   make -C lambda dist && PROMOTER_LAMBDA_BOOTSTRAP=$PWD/lambda/dist/bootstrap cargo bench -p promoter-lambda --bench cold_start

use promoter::fake::{FakeApiServer, cluster_promotion_type, sveltos_cluster_type};
use promoter_lambda::emulator::{Outcome, RuntimeApi};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn show(label: &str, v: Vec<f64>, unit: &str) {
    let (min, med, max) = median(v);
    println!("{label:<34} median {med:>7.1} {unit}  (min {min:.1}, max {max:.1})");
}

/// VmHWM of a live process, in MB.
fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

async fn run(rounds: usize) -> anyhow::Result<()> {
    let server = FakeApiServer::start_with_sveltos().await?;
    {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/blog-kyverno-auto.yaml");
        let mut store = server.store();
        for doc in promoter::manifest::load_file(&path)? {
            if let Some(p) = doc.promotion() {
                store.seed(&cluster_promotion_type(), serde_json::to_value(p)?)?;
            }
        }
        for (name, env) in [
            ("dev-1", "dev"),
            ("staging-1", "staging"),
            ("prod-1", "production"),
        ] {
            store.seed(
                &sveltos_cluster_type(),
                promoter::sim::sveltos_cluster("fleet", name, &[("env", env)]),
            )?;
        }
    }
    let kubeconfig = server.kubeconfig_yaml("lambda");
    // PROMOTER_LAMBDA_BOOTSTRAP measures another build, e.g. the shipped lambda/dist/bootstrap.
    let bin = std::env::var("PROMOTER_LAMBDA_BOOTSTRAP")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_bootstrap").to_string());
    println!("binary: {bin}");
    let (mut ready, mut first_request, mut done, mut rss) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let runtime = RuntimeApi::start(Duration::from_secs(50)).await?;
        server.clear_requests();
        let id = runtime.invoke(json!({"detail-type": "Scheduled Event", "source": "aws.events"}));
        let spawned = Instant::now();
        let mut child = tokio::process::Command::new(&bin)
            .env_clear()
            .env("AWS_LAMBDA_RUNTIME_API", runtime.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "promoter")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("PROMOTER_KUBECONFIG_DATA", &kubeconfig)
            .env("PROMOTER_LOG_LEVEL", "warn")
            .kill_on_drop(true)
            .spawn()?;
        let posted = runtime
            .outcome(&id, Duration::from_secs(30))
            .await
            .ok_or_else(|| anyhow::anyhow!("no outcome"))?;
        anyhow::ensure!(posted.outcome == Outcome::Response, "{}", posted.body);
        let ms = |t: Instant| t.duration_since(spawned).as_secs_f64() * 1e3;
        if let Some(poll) = runtime.polls().first() {
            ready.push(ms(*poll));
        }
        if let Some(first) = server.requests().first() {
            first_request.push(ms(first.at));
        }
        done.push(ms(posted.at));
        if let Some(id) = child.id() {
            // Wait for the next poll, so that the peak includes the whole invocation.
            tokio::time::sleep(Duration::from_millis(20)).await;
            if let Some(mb) = peak_rss_mb(id) {
                rss.push(mb);
            }
        }
        let _ = child.kill().await;
    }
    println!("cold start of bootstrap ({rounds} fresh processes, blog rollout, one pass each)");
    show("start to first Runtime API poll", ready, "ms");
    show("start to first Kubernetes request", first_request, "ms");
    show("start to posted summary", done, "ms");
    if !rss.is_empty() {
        show("peak RSS", rss, "MB");
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/bootstrap");
    match std::fs::metadata(&shipped) {
        Ok(m) => println!(
            "shipped binary lambda/dist/bootstrap: {:.1} MB",
            m.len() as f64 / 1e6
        ),
        Err(_) => println!("shipped binary: (run `make -C lambda dist` for its size)"),
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(if quick { 2 } else { 15 }))
}
