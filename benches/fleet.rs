//! Fleet-scale benchmark: one pass over N promotions × S stages × C clusters served by the fake API
//! server over HTTP. Prints, per size: wall time of a first and of a steady pass, requests by verb and
//! bytes read (gzip, as sent), writes (0 expected for a steady pass), the floor (the same requests
//! one after the other with their bodies received and dropped: what serving the lists takes), the
//! steady pass ÷ that floor, each shard's steady pass at 1, 2 and 4 shards with the load they make
//! together, CPU time of the decision alone, and, when an optimised binary exists
//! (`target/release/promoter`), peak RSS of the `promoter` process, the same with no promotion
//! selected (what is not the summaries), the difference per 10,000 ClusterSummaries read, and its
//! start-to-first-request time.
//!
//! Then rollouts over a flaky network (`support/flaky.rs`): the share of passes that did not decide
//! every promotion they read, and the completion delay in ticks, with 10 % of requests failing.
//!
//!     cargo build --profile bench --bin promoter && cargo bench --bench fleet
//!     cargo bench --bench fleet -- --quick        (smallest size only; CI's smoke test)
//!     cargo bench --bench fleet -- flaky          (only the flaky-network rollouts)
//!     cargo bench --bench fleet -- scale          (only the fleet sizes)
//!     cargo bench --bench fleet -- scale size=100x4x200   (one size; with `perf record`)
//!     PROMOTER_BENCH_BIN=… cargo bench --bench fleet -- scale process size=…   (only the process
//!         figures, of that binary)

#[path = "support/flaky.rs"]
mod flaky;

use chrono::Utc;
use promoter::fake::FakeApiServer;
use promoter::pass::shard::Shard;
use promoter::pass::{
    ChecksNotEvaluated, Context, HealthResults, PassLimits, PassOptions, decide, run_pass,
    run_pass_with,
};
use promoter::sim::scale::{Scale, populate};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Milliseconds the fake server spent on the logged requests (store, serialisation, gzip): in a
/// real deployment that CPU is the API server's, not promoter's.
fn served_ms(server: &FakeApiServer) -> f64 {
    server
        .requests()
        .iter()
        .map(|r| r.served.as_secs_f64() * 1e3)
        .sum()
}

fn verbs(server: &FakeApiServer) -> (String, usize, usize) {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    let requests = server.requests();
    for r in &requests {
        *by.entry(r.verb.clone()).or_default() += 1;
    }
    let text = by
        .iter()
        .map(|(v, n)| format!("{v} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    (
        text,
        requests.iter().map(|r| r.bytes).sum(),
        server.writes(),
    )
}

/// Lists in the request log, and how many of them were of ClusterSummaries.
fn lists_of(server: &FakeApiServer) -> (usize, usize) {
    let requests = server.requests();
    let lists = requests.iter().filter(|r| r.verb == "list").count();
    let pages = requests
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "clustersummaries")
        .count();
    (lists, pages)
}

/// A percent-decoded query (the request log's) encoded again for a URL.
fn encode_query(query: &str) -> String {
    query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let enc = |s: &str| {
                s.bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                            (b as char).to_string()
                        }
                        _ => format!("%{b:02X}"),
                    })
                    .collect::<String>()
            };
            format!("{}={}", enc(k), enc(v))
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The floor of a steady pass: its GET requests (as the fake server logged them, continue tokens
/// included) made again one after the other through the same client, each body received in full
/// (and ungzipped, as the pass's are) and dropped. Milliseconds.
async fn floor(
    server: &FakeApiServer,
    client: &kube::Client,
    opts: &PassOptions,
) -> anyhow::Result<f64> {
    server.clear_requests();
    run_pass(client, &ChecksNotEvaluated, opts).await?;
    let requests: Vec<(String, String)> = server
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .map(|r| (r.path.clone(), r.query.clone()))
        .collect();
    let t = Instant::now();
    for (path, query) in &requests {
        let url = if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{}", encode_query(query))
        };
        let req = http::Request::get(url).body(Vec::new())?;
        std::hint::black_box(client.request_text(req).await?.len());
    }
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Each shard's steady pass at 1, 2 and 4 shards (`--shard i/n`: several CronJobs), and what they
/// cost the API server together: lists, bytes sent, the fake server's time.
async fn shards(
    server: &FakeApiServer,
    client: &kube::Client,
    opts: &PassOptions,
    rounds: usize,
) -> anyhow::Result<()> {
    for count in [1u32, 2, 4] {
        let mut walls = Vec::new();
        let (mut lists, mut bytes, mut served) = (0, 0, 0.0);
        for index in 0..count {
            let limits = PassLimits {
                deadline: None,
                shard: Some(Shard { index, count }),
            };
            let mut w = Vec::new();
            for _ in 0..rounds {
                server.clear_requests();
                let t = Instant::now();
                run_pass_with(client, &ChecksNotEvaluated, opts, &limits).await?;
                w.push(t.elapsed().as_secs_f64() * 1e3);
            }
            walls.push(median(w));
            lists += lists_of(server).0;
            bytes += verbs(server).1;
            served += served_ms(server);
        }
        println!(
            "  {count} shard(s): steady pass per shard {} ms (medians); together {lists} lists, {:.1} MB, fake server {:.0} ms",
            walls
                .iter()
                .map(|w| format!("{w:.0}"))
                .collect::<Vec<_>>()
                .join(" / "),
            bytes as f64 / 1e6,
            served
        );
    }
    Ok(())
}

async fn bench(scale: Scale, rounds: usize, process_only: bool) -> anyhow::Result<()> {
    let server = FakeApiServer::start_with_sveltos().await?;
    let now = Utc::now();
    let started = Instant::now();
    let summaries = populate(&server, scale, now)?;
    println!(
        "\n== {} promotions × {} stages × {} clusters ({} ClusterSummaries; generated in {:.1}s)",
        scale.promotions,
        scale.stages,
        scale.clusters,
        summaries,
        started.elapsed().as_secs_f64()
    );
    let client = server.client().await?;
    if process_only {
        let read = promoter::pass::observe::observe(&client, None).await?;
        process_figures(
            &server,
            read.world.summaries.values().map(|s| s.len()).sum(),
        )
        .await;
        return Ok(());
    }
    let opts = PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now,
        notifications: None,
    };
    server.clear_requests();
    let t = Instant::now();
    run_pass(&client, &ChecksNotEvaluated, &opts).await?;
    let first = t.elapsed();
    let (v, bytes, writes) = verbs(&server);
    println!(
        "first pass:   {:>8.1} ms   requests: {v}; {:.1} MB read; {writes} writes",
        first.as_secs_f64() * 1e3,
        bytes as f64 / 1e6
    );
    let mut writes_by: BTreeMap<String, usize> = BTreeMap::new();
    for r in server.requests().iter().filter(|r| r.method != "GET") {
        let sub = r
            .subresource
            .as_deref()
            .map(|s| format!("/{s}"))
            .unwrap_or_default();
        *writes_by
            .entry(format!("{} {}{sub}", r.verb, r.resource))
            .or_default() += 1;
    }
    println!(
        "  its writes: {}",
        writes_by
            .iter()
            .map(|(w, n)| format!("{w} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut steady = Vec::new();
    let mut served = Vec::new();
    let mut last = (String::new(), 0, 0);
    for _ in 0..rounds {
        server.clear_requests();
        let t = Instant::now();
        run_pass(&client, &ChecksNotEvaluated, &opts).await?;
        steady.push(t.elapsed().as_secs_f64() * 1e3);
        served.push(served_ms(&server));
        last = verbs(&server);
    }
    println!(
        "steady pass:  {:>8.1} ms (median of {rounds}, {:.1}–{:.1})   requests: {}; {:.1} MB read; {} writes",
        median(steady.clone()),
        steady.iter().cloned().fold(f64::MAX, f64::min),
        steady.iter().cloned().fold(0.0, f64::max),
        last.0,
        last.1 as f64 / 1e6,
        last.2
    );
    let (lists, pages) = lists_of(&server);
    let floors: Vec<f64> = {
        let mut v = Vec::new();
        for _ in 0..rounds {
            v.push(floor(&server, &client, &opts).await?);
        }
        v
    };
    println!(
        "  floor:      {:>8.1} ms (median; the steady pass's {lists} lists, {pages} of them pages of ClusterSummaries, one after the other, bodies dropped); steady ÷ floor {:.2}",
        median(floors.clone()),
        median(steady.clone()) / median(floors)
    );
    shards(&server, &client, &opts, rounds).await?;
    // Where a steady pass's time goes: the fake server's share, the reads alone, and the same
    // pass through kube's bare client (no retry layer, no buffer) for the connection policy's cost.
    let mut observing = Vec::new();
    let mut observing_served = Vec::new();
    for _ in 0..rounds {
        server.clear_requests();
        let t = Instant::now();
        std::hint::black_box(promoter::pass::observe::observe_pass(&client, None, None).await?);
        observing.push(t.elapsed().as_secs_f64() * 1e3);
        observing_served.push(served_ms(&server));
    }
    let plain = server.plain_client_as(promoter::fake::ADMIN).await?;
    let mut bare = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        run_pass(&plain, &ChecksNotEvaluated, &opts).await?;
        bare.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "  of which:   fake server {:>8.1} ms; observe {:.1} ms (fake server {:.1} ms); same pass via kube's bare client {:.1} ms (medians)",
        median(served),
        median(observing),
        median(observing_served),
        median(bare)
    );
    let observation = promoter::pass::observe::observe(&client, None).await?;
    let ctx = Context {
        now,
        default_tz: chrono_tz::Tz::UTC,
    };
    let mut decision = Vec::new();
    for _ in 0..rounds.max(3) {
        let t = Instant::now();
        for p in &observation.promotions {
            std::hint::black_box(decide(p, &observation.world, &HealthResults::new(), &ctx));
        }
        decision.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "decision:     {:>8.2} ms for {} promotions (median, one core)",
        median(decision),
        observation.promotions.len()
    );
    let read: usize = observation.world.summaries.values().map(|s| s.len()).sum();
    process_figures(&server, read).await;
    Ok(())
}

/// Peak RSS and start-to-first-request of the real binary (a dry-run pass), if it was built.
/// `summaries`: how many ClusterSummaries a steady pass reads.
async fn process_figures(server: &FakeApiServer, summaries: usize) {
    // `PROMOTER_BENCH_BIN`: another build's binary against the same world (before and after).
    let bin = std::env::var_os("PROMOTER_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/promoter"));
    if !bin.exists() {
        println!(
            "process:      (no target/release/promoter: run `cargo build --release` for these figures)"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("promoter-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let kubeconfig = dir.join("kubeconfig");
    if std::fs::write(&kubeconfig, server.kubeconfig_yaml("bench")).is_err() {
        return;
    }
    let mut starts = Vec::new();
    for _ in 0..5 {
        server.clear_requests();
        let spawned = Instant::now();
        let status = tokio::process::Command::new(&bin)
            .args(["step", "--dry-run"])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .await;
        if status.is_err() {
            return;
        }
        if let Some(first) = server.requests().first() {
            starts.push(first.at.duration_since(spawned).as_secs_f64() * 1e3);
        }
    }
    // Peak RSS of a dry-run pass; with `args`, of one that selects no promotion (it lists the
    // profiles and finds none: the process, its client and runtime, not the summaries).
    let rss = |args: &'static [&'static str]| {
        let (bin, kubeconfig) = (bin.clone(), kubeconfig.clone());
        async move {
            let out = tokio::process::Command::new("/usr/bin/time")
                .args(["-f", "%M"])
                .arg(&bin)
                .args(["step", "--dry-run"])
                .args(args)
                .env("KUBECONFIG", &kubeconfig)
                .output()
                .await
                .ok()?;
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .and_then(|l| l.trim().parse::<f64>().ok())
        }
    };
    let mut full = Vec::new();
    let mut base = Vec::new();
    for _ in 0..5 {
        full.extend(rss(&[]).await);
        base.extend(rss(&["--selector", "promoter.dev/bench=none"]).await);
    }
    let mb = |kb: f64| format!("{:.1} MB", kb / 1024.0);
    // The spread too: peak RSS varies from run to run with the allocator's reuse of freed pages.
    let spread = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        format!("{}–{}", mb(lo), mb(hi))
    };
    let (full_spread, base_spread) = (spread(&full), spread(&base));
    let (full, base) = (
        (!full.is_empty()).then(|| median(full)),
        (!base.is_empty()).then(|| median(base)),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let per = match (full, base) {
        (Some(f), Some(b)) if summaries > 0 => format!(
            "; {:.2} MB per 10,000 ClusterSummaries read",
            (f - b) / 1024.0 / summaries as f64 * 10_000.0
        ),
        _ => String::new(),
    };
    println!(
        "process:      start to first request {:.1} ms (median of {}); peak RSS {} ({full_spread}; medians of 5), {} ({base_spread}) with no promotion selected{per}",
        if starts.is_empty() {
            f64::NAN
        } else {
            median(starts.clone())
        },
        starts.len(),
        full.map(mb)
            .unwrap_or_else(|| "n/a (no /usr/bin/time)".into()),
        base.map(mb).unwrap_or_else(|| "n/a".into()),
    );
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |what: &str| {
        let picked = ["flaky", "scale"]
            .iter()
            .filter(|w| args.iter().any(|a| a == *w))
            .count();
        picked == 0 || args.iter().any(|a| a == what)
    };
    // `size=PxSxC` runs only that size (profiling one size under `perf`).
    let picked: Vec<(usize, usize, usize)> = args
        .iter()
        .filter_map(|a| a.strip_prefix("size="))
        .filter_map(|s| {
            let n: Vec<usize> = s.split('x').filter_map(|n| n.parse().ok()).collect();
            (n.len() == 3).then(|| (n[0], n[1], n[2]))
        })
        .collect();
    let sizes: &[(usize, usize, usize)] = if !picked.is_empty() {
        &picked
    } else if quick {
        &[(1, 4, 10)]
    } else {
        &[(1, 4, 10), (100, 4, 200), (1000, 4, 2000)]
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if only("scale") {
            // More rounds for a single picked size, so that a profile is mostly steady passes.
            let rounds = match (quick, picked.as_slice()) {
                (true, _) => 2,
                (false, [(n, ..)]) if *n <= 100 => 50,
                _ => 5,
            };
            for (n, s, c) in sizes {
                bench(
                    Scale {
                        promotions: *n,
                        stages: *s,
                        clusters: *c,
                    },
                    rounds,
                    args.iter().any(|a| a == "process"),
                )
                .await?;
            }
        }
        if only("flaky") {
            println!("\n== rollouts over a flaky network (4 promotions × 3 stages, 6 clusters)");
            if quick {
                flaky::report(2, false, 0.10, 1).await?;
            } else {
                flaky::report(4, false, 0.10, 20).await?;
                flaky::report(4, true, 0.10, 10).await?;
            }
        }
        Ok(())
    })
}
