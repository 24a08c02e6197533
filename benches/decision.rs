//! Decision CPU at fleet scale, without the HTTP passes of `benches/fleet.rs`: the 1,000 × 4 × 2,000
//! world is generated into the fake API server, passed over once (as the fleet bench's first pass),
//! observed, then `decide` runs for every
//! promotion (median of rounds), and `normalize` is timed alone on the observed profile specs.
//!
//!     cargo bench --bench decision                 (1000 × 4 × 2000, 5 rounds)
//!     cargo bench --bench decision -- 100 4 200    (another size)

use chrono::Utc;
use promoter::fake::FakeApiServer;
use promoter::pass::{ChecksNotEvaluated, Context, HealthResults, PassOptions, decide, run_pass};
use promoter::sim::scale::{Scale, populate};
use promoter::sveltos::normal_form::normalize;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let (promotions, stages, clusters) = match args[..] {
        [n, s, c] => (n, s, c),
        _ => (1000, 4, 2000),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = FakeApiServer::start_with_sveltos().await?;
        let now = Utc::now();
        let scale = Scale {
            promotions,
            stages,
            clusters,
        };
        populate(&server, scale, now)?;
        let client = server.client().await?;
        // As in `benches/fleet.rs`: the first pass writes what the generated state lacks.
        let opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: chrono_tz::Tz::UTC,
            now,
            notifications: None,
        };
        run_pass(&client, &ChecksNotEvaluated, &opts).await?;
        let observation = promoter::pass::observe::observe(&client, None).await?;
        let ctx = Context {
            now,
            default_tz: chrono_tz::Tz::UTC,
        };
        let mut decision = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            for p in &observation.promotions {
                std::hint::black_box(decide(p, &observation.world, &HealthResults::new(), &ctx));
            }
            decision.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let specs: Vec<_> = observation
            .world
            .profiles
            .values()
            .map(|p| p.spec.fields.clone())
            .collect();
        let mut norm = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            for s in &specs {
                std::hint::black_box(normalize(s));
            }
            norm.push(t.elapsed().as_secs_f64() * 1e6 / specs.len().max(1) as f64);
        }
        println!(
            "{promotions} × {stages} × {clusters}: decision {:.1} ms for {} promotions (median of 5, one core); normalize {:.1} µs per profile spec (median of 5 over {} specs)",
            median(decision),
            observation.promotions.len(),
            median(norm),
            specs.len()
        );
        anyhow::Ok(())
    })
}
