//! The dashboard at scale: a management cluster of N promotions × 4 stages × C clusters
//! (`sim::scale`, the fleet benchmark's world) behind the fake API server.
//!
//! * Server: a cold read (every row computed and rendered), a quiet read (nothing changed: nothing
//!   published, nothing sent), a read after one promotion changed (the bytes an open overview gets),
//!   and the overview page's size and serving time.
//! * Browser (headless Chromium, when one starts): time to first contentful paint of the overview,
//!   and the cost in the page of one promotion's update (the swap, its filter, the countdowns),
//!   of a filter over every row, and of a countdown tick.
//!
//! * Watches: a change made through the API (not the dashboard) until the dashboard publishes it
//!   (the promotion read again alone, from the watches' cache), and what an open, idle page costs
//!   the API server for a minute, once the dashboard reads through its watches.
//!
//! `cargo bench --bench dashboard` (1,000 promotions); `-- --quick` 20 promotions, no browser;
//! `-- --promotions N` N promotions × 4 stages × 2N clusters; `-- --watches` only the watches'
//! figures.

#[path = "../tests/browser/mod.rs"]
mod browser;

use chrono::Utc;
use promoter::dashboard::hub::WallClock;
use promoter::dashboard::{Dashboard, Options};
use promoter::fake::{FakeApiServer, cluster_promotion_type};
use promoter::sim::scale::{Scale, populate};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

async fn dashboard(server: &FakeApiServer) -> anyhow::Result<Dashboard> {
    let mut options = Options::new("cluster");
    // The benchmark reads when it wants to.
    options.refresh = Some(Duration::from_secs(3600));
    promoter::dashboard::start(server.client().await?, Arc::new(WallClock), None, options).await
}

/// One promotion changes as a person's `kubectl annotate` would change it: its row changes.
fn touch(server: &FakeApiServer, name: &str, i: usize) {
    let mut store = server.store();
    if let Ok(mut p) = store.get(&cluster_promotion_type(), "", name) {
        p["metadata"]["labels"]["touched"] = json!(format!("t{i}"));
        let _ = store.update(&cluster_promotion_type(), "", name, p, false);
    }
}

async fn page_bytes(d: &Dashboard, path: &str) -> anyhow::Result<(usize, f64)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let mut s = tokio::net::TcpStream::connect(d.addr).await?;
    s.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
            d.addr, d.cookie
        )
        .as_bytes(),
    )
    .await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    Ok((out.len(), started.elapsed().as_secs_f64() * 1000.0))
}

async fn server_side(scale: Scale, rounds: usize) -> anyhow::Result<(FakeApiServer, Dashboard)> {
    let server = FakeApiServer::start_with_sveltos().await?;
    populate(&server, scale, Utc::now())?;
    println!(
        "\n== {} promotions × {} stages × {} clusters",
        scale.promotions, scale.stages, scale.clusters
    );
    let mut cold = Vec::new();
    for _ in 0..rounds.min(3) {
        let t = Instant::now();
        let d = dashboard(&server).await?;
        while d.hub.snapshot().at.is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cold.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let client = server.client().await?;
    let mut reads = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        promoter::ops::load::status_world(&client, None, chrono::Utc::now(), chrono_tz::UTC)
            .await?;
        reads.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let d = dashboard(&server).await?;
    d.hub.refresh().await;
    let mut quiet = Vec::new();
    let seq = d.hub.snapshot().seq;
    for _ in 0..rounds {
        let t = Instant::now();
        d.hub.refresh().await;
        quiet.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let published = d.hub.snapshot().seq - seq;
    println!(
        "server: first snapshot {:.0} ms; a read as `status` reads (ops::load::status_world) {:.0} ms; a whole refresh with nothing changed {:.0} ms, {published} snapshots published in {rounds} (0 bytes to any page)",
        median(cold),
        median(reads),
        median(quiet)
    );
    let mut after = Vec::new();
    for i in 0..rounds {
        touch(&server, "app-0007", 500 + i);
        let t = Instant::now();
        d.hub.refresh_after(Some("app-0007"), false).await;
        after.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "server: after an action on one promotion (its re-read, every model recomputed, its row rendered) {:.0} ms",
        median(after)
    );
    let mut changed = Vec::new();
    let mut bytes = Vec::new();
    let name = "app-0007";
    for i in 0..rounds {
        touch(&server, name, i);
        let before = d.hub.snapshot().seq;
        let t = Instant::now();
        d.hub.refresh().await;
        changed.push(t.elapsed().as_secs_f64() * 1000.0);
        let s = d.hub.snapshot();
        let sent: usize = s
            .rows
            .values()
            .filter(|r| r.version > before)
            .map(|r| r.html.len())
            .sum();
        bytes.push(sent as f64);
    }
    let (size, served) = page_bytes(&d, "/").await?;
    let mut serve_times = vec![served];
    for _ in 1..rounds {
        serve_times.push(page_bytes(&d, "/").await?.1);
    }
    println!(
        "server: a whole refresh after one promotion changed {:.0} ms, {:.0} bytes of HTML to an open overview (one row)",
        median(changed),
        median(bytes)
    );
    println!(
        "server: overview page {:.0} KB, served in {:.1} ms (median of {rounds})",
        size as f64 / 1024.0,
        median(serve_times)
    );
    Ok((server, d))
}

/// A change made through the API, until the dashboard (its default `--refresh`, reading through
/// its watches) publishes it; then an idle minute's requests to the API server.
async fn from_watches(server: &FakeApiServer, rounds: usize) -> anyhow::Result<()> {
    let mut options = Options::new("cluster");
    // As `promoter dashboard` makes them: a quiet watch lasts its `timeoutSeconds`.
    options.watches = Some(promoter::dashboard::Watches(server.watch_client().await?));
    let d = promoter::dashboard::start(server.client().await?, Arc::new(WallClock), None, options)
        .await?;
    let lists = || {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == "list")
            .count()
    };
    let t = Instant::now();
    loop {
        let before = lists();
        d.hub.refresh().await;
        if lists() == before {
            break;
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(600),
            "never read from the watches"
        );
    }
    let settled = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    d.hub.refresh().await;
    let refresh = t.elapsed().as_secs_f64() * 1000.0;
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(server.client().await?);
    let name = "app-0007";
    let version = || d.hub.snapshot().rows.get(name).map(|r| r.version);
    let mut latency = Vec::new();
    for i in 0..rounds {
        let before = version();
        let patch = json!({"metadata": {"labels": {"touched": format!("w{i}")}}});
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
        let t = Instant::now();
        while version() == before {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(120), "never published");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latency.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "watches: every collection listed once and watched after {settled:.0} ms; a whole refresh from the watches {refresh:.0} ms; a change made through the API published {:.0} ms after the API's answer (median of {rounds}, max {:.0} ms)",
        median(latency.clone()),
        latency.iter().cloned().fold(0.0, f64::max)
    );
    server.clear_requests();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let requests = server.requests();
    let mut by_verb = std::collections::BTreeMap::<String, usize>::new();
    for r in &requests {
        *by_verb.entry(r.verb.clone()).or_default() += 1;
        if std::env::var_os("PROMOTER_BENCH_REQUESTS").is_some() {
            println!("  {} {}?{} {}", r.verb, r.path, r.query, r.code);
        }
    }
    println!(
        "watches: an open, idle page for 60 s (its rows computed again every 2 s): {} requests to the API server {by_verb:?}, {} bytes",
        requests.len(),
        requests.iter().map(|r| r.bytes).sum::<usize>()
    );
    Ok(())
}

async fn in_browser(server: &FakeApiServer, d: &Dashboard, rounds: usize) -> anyhow::Result<()> {
    let Some(browser) = browser::Browser::launch().await? else {
        println!("browser: skipped (no Chromium)");
        return Ok(());
    };
    let mut page = browser.page(1400, 900).await?;
    page.goto(&d.login_url).await?;
    let mut fcp = Vec::new();
    let mut loaded = Vec::new();
    for _ in 0..rounds {
        page.call("Page.reload", json!({"ignoreCache": false}))
            .await?;
        page.wait_for(
            "document.readyState === 'complete' && performance.getEntriesByName('first-contentful-paint').length > 0",
            Duration::from_secs(60),
        )
        .await?;
        let v = page
            .eval("[performance.getEntriesByName('first-contentful-paint')[0].startTime, performance.getEntriesByType('navigation')[0].loadEventEnd]")
            .await?;
        fcp.push(v[0].as_f64().unwrap_or(f64::NAN));
        loaded.push(v[1].as_f64().unwrap_or(f64::NAN));
    }
    let rows = page
        .eval("document.querySelectorAll('#rows tr').length")
        .await?;
    println!(
        "browser: {} rows; first contentful paint {:.0} ms, load {:.0} ms (median of {rounds} loads)",
        rows,
        median(fcp),
        median(loaded)
    );
    page.wait_for(
        "document.getElementById('live').textContent === '● live'",
        Duration::from_secs(60),
    )
    .await?;
    let mut update = Vec::new();
    for i in 0..rounds {
        page.eval("window.promoterStats.updates = []").await?;
        touch(server, "app-0007", 1000 + i);
        d.hub.refresh_after(Some("app-0007"), false).await;
        page.wait_for(
            "window.promoterStats.updates.some(u => u.event === 'row')",
            Duration::from_secs(60),
        )
        .await?;
        let ms = page
            .eval("window.promoterStats.updates.find(u => u.event === 'row').ms")
            .await?;
        update.push(ms.as_f64().unwrap_or(f64::NAN));
    }
    let mut filter = Vec::new();
    let mut tick = Vec::new();
    for i in 0..rounds {
        let q = if i % 2 == 0 { "app-001" } else { "" };
        let v: Value = page
            .eval(&format!(
                "(() => {{ const q = document.getElementById('q'); q.value = {q:?}; q.dispatchEvent(new Event('input')); return [window.promoterStats.filter, window.promoterStats.tick]; }})()"
            ))
            .await?;
        filter.push(v[0].as_f64().unwrap_or(f64::NAN));
        tick.push(v[1].as_f64().unwrap_or(f64::NAN));
    }
    println!(
        "browser: one promotion's update applied in {:.2} ms; a filter over every row {:.1} ms; a countdown tick {:.1} ms (medians of {rounds})",
        median(update),
        median(filter),
        median(tick)
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let watches_only = args.iter().any(|a| a == "--watches");
    let promotions: Option<usize> = args
        .iter()
        .position(|a| a == "--promotions")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (scale, rounds) = if let Some(n) = promotions {
            (
                Scale {
                    promotions: n,
                    stages: 4,
                    clusters: 2 * n,
                },
                7,
            )
        } else if quick {
            (
                Scale {
                    promotions: 20,
                    stages: 4,
                    clusters: 40,
                },
                2,
            )
        } else {
            (
                Scale {
                    promotions: 1000,
                    stages: 4,
                    clusters: 2000,
                },
                7,
            )
        };
        if watches_only {
            let server = FakeApiServer::start_with_sveltos().await?;
            populate(&server, scale, Utc::now())?;
            println!(
                "\n== {} promotions × {} stages × {} clusters",
                scale.promotions, scale.stages, scale.clusters
            );
            return from_watches(&server, rounds).await;
        }
        let (server, d) = server_side(scale, rounds).await?;
        from_watches(&server, rounds).await?;
        if !quick {
            in_browser(&server, &d, rounds).await?;
        }
        Ok(())
    })
}
