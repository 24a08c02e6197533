//! Rollouts over a flaky network: several promotions rolled out tick by tick (one pass a minute,
//! then the simulated addon-controller reacts) against the fake API server, first with no faults,
//! then with a seeded share of the pass's requests failing in the mix a real network shows: 409,
//! 500, 503 and 504 answers, resets before and after a request is applied, late commits, late and
//! hung answers, slow bodies. With health checks, the managed clusters (fake API servers reached
//! through kubeconfig Secrets) meet the same mix.
//!
//! Prints, per variant: the share of passes that ended without deciding every promotion they could
//! read (a pass error counts as one), and how many ticks later than the fault-free run each
//! promotion completed (median, worst).

use chrono::{DateTime, Duration as Minutes, TimeZone, Utc};
use promoter::api::ClusterPromotion;
use promoter::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher, sveltos_cluster_type};
use promoter::pass::{
    ChecksNotEvaluated, HealthEvaluator, PassLimits, PassOptions, Phase, run_pass_with,
};
use promoter::sim::{AddonController, sveltos_cluster};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const USER: &str = "promoter";
/// The pass's own timeout per request: hung and late answers beyond it are lost answers.
const TIMEOUT: Duration = Duration::from_millis(300);
const MAX_TICKS: usize = 45;

pub struct Run {
    pub passes: usize,
    /// Passes that returned an error (could not list the promotions).
    pub failed: usize,
    /// Passes in which some promotion was "not decided" (a read it needed failed after retries).
    pub undecided: usize,
    /// Per promotion, the tick at which it was first reported complete.
    pub completed: Vec<Option<usize>>,
}

/// The mix: each kind fires independently with the probability that makes `p` in all.
pub fn faults(p: f64, seed: u64, matcher: RequestMatcher) -> Vec<FaultRule> {
    let kinds = [
        FaultAction::Status(409),
        FaultAction::Status(500),
        FaultAction::Status(503),
        FaultAction::Status(504),
        FaultAction::ResetBefore,
        FaultAction::ResetAfter,
        FaultAction::LateCommit(Duration::from_millis(250)),
        FaultAction::AnswerAfter(Duration::from_millis(500)),
        FaultAction::Hang(Duration::from_millis(450)),
        FaultAction::SlowBody(Duration::from_millis(400)),
    ];
    let each = 1.0 - (1.0 - p).powf(1.0 / kinds.len() as f64);
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            FaultRule::random(matcher.clone(), each, seed.wrapping_mul(7919) + i as u64, a)
        })
        .collect()
}

fn example(file: &str) -> ClusterPromotion {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    promoter::manifest::load_file(&path).expect("example")[0]
        .promotion()
        .expect("a promotion")
        .clone()
}

/// `n` promotions over three stages (2 minutes' soak each), with or without a health check on
/// every stage (the Sveltos docs' cert-manager check).
fn promotions(n: usize, health: bool) -> Vec<ClusterPromotion> {
    (0..n)
        .map(|i| {
            let mut p = if health {
                let mut p = example("docs-cert-manager.yaml");
                let checked = p.spec.stages[0].trigger.clone();
                for s in &mut p.spec.stages {
                    s.trigger = checked.clone();
                }
                p
            } else {
                example("blog-kyverno-auto.yaml")
            };
            p.metadata.name = Some(format!("rollout-{i}"));
            p
        })
        .collect()
}

struct Lab {
    server: FakeApiServer,
    /// The managed clusters (health checks), kept serving.
    clusters: Vec<FakeApiServer>,
    addon: AddonController,
    now: Arc<Mutex<DateTime<Utc>>>,
    client: kube::Client,
}

async fn lab(health: bool) -> anyhow::Result<Lab> {
    let server = FakeApiServer::start_with_sveltos().await?;
    let now = Arc::new(Mutex::new(
        Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap(),
    ));
    let clock = now.clone();
    server.set_clock(Arc::new(move || {
        *clock.lock().unwrap_or_else(|p| p.into_inner())
    }));
    let envs = if health {
        ["dev", "staging", "production"]
    } else {
        ["dev", "staging", "prod"]
    };
    let mut clusters = Vec::new();
    for env in envs {
        for i in 0..2 {
            let name = format!("{env}{i:02}");
            server.store().seed(
                &sveltos_cluster_type(),
                sveltos_cluster(env, &name, &[("env", env)]),
            )?;
            if !health {
                continue;
            }
            let cluster =
                promoter::fake::managed::cert_manager_cluster(&server, env, &name).await?;
            clusters.push(cluster);
        }
    }
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml(USER))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = promoter::client::from_config_with_timeout(config, TIMEOUT)?;
    Ok(Lab {
        server,
        clusters,
        addon: AddonController::default(),
        now,
        client,
    })
}

/// One rollout of `n` promotions; faults with probability `p` (0: none) from `seed`.
pub async fn rollout(n: usize, health: bool, p: f64, seed: u64) -> anyhow::Result<Run> {
    let lab = lab(health).await?;
    let rt = promoter::fake::cluster_promotion_type();
    for pr in promotions(n, health) {
        lab.server
            .store()
            .create(&rt, "", serde_json::to_value(&pr)?)?;
    }
    if p > 0.0 {
        for f in faults(p, seed, RequestMatcher::any().user(USER)) {
            lab.server.inject(f);
        }
        for (i, c) in lab.clusters.iter().enumerate() {
            for f in faults(p, seed * 1000 + i as u64 + 1, RequestMatcher::any()) {
                c.inject(f);
            }
        }
    }
    let mut run = Run {
        passes: 0,
        failed: 0,
        undecided: 0,
        completed: vec![None; n],
    };
    let worker = std::path::PathBuf::from(env!("CARGO_BIN_EXE_promoter"));
    for tick in 0..MAX_TICKS {
        let now = *lab.now.lock().unwrap_or_else(|p| p.into_inner());
        let opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: chrono_tz::Tz::UTC,
            now,
            notifications: None,
        };
        let limits = PassLimits {
            deadline: Some(tokio::time::Instant::now() + promoter::pass::DEFAULT_DEADLINE),
            shard: None,
        };
        let engine;
        let evaluator: &dyn HealthEvaluator = if health {
            engine = promoter::health::HealthEngine::new(lab.client.clone(), now)
                .worker_program(worker.clone());
            &engine
        } else {
            &ChecksNotEvaluated
        };
        run.passes += 1;
        match run_pass_with(&lab.client, evaluator, &opts, &limits).await {
            Err(_) => run.failed += 1,
            Ok(report) => {
                if report.promotions.iter().any(|r| {
                    r.error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("not decided"))
                }) {
                    run.undecided += 1;
                }
                for r in &report.promotions {
                    let i: usize = r
                        .name
                        .strip_prefix("rollout-")
                        .and_then(|i| i.parse().ok())
                        .unwrap_or(usize::MAX);
                    if r.phase == Phase::Complete
                        && let Some(slot) = run.completed.get_mut(i)
                        && slot.is_none()
                    {
                        *slot = Some(tick);
                    }
                }
            }
        }
        if run.completed.iter().all(Option::is_some) {
            break;
        }
        // Late commits and hung writes land before the world moves on.
        tokio::time::sleep(Duration::from_millis(300)).await;
        lab.addon.reconcile(&lab.server, now);
        *lab.now.lock().unwrap_or_else(|p| p.into_inner()) += Minutes::minutes(1);
    }
    Ok(run)
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Runs the variant and prints its line.
pub async fn report(n: usize, health: bool, p: f64, seeds: u64) -> anyhow::Result<()> {
    let base = rollout(n, health, 0.0, 0).await?;
    let (mut passes, mut bad, mut failed) = (0, 0, 0);
    let mut late = Vec::new();
    let mut unfinished = 0;
    for seed in 1..=seeds {
        let run = rollout(n, health, p, seed).await?;
        passes += run.passes;
        bad += run.failed + run.undecided;
        failed += run.failed;
        for (free, faulty) in base.completed.iter().zip(&run.completed) {
            match (free, faulty) {
                (Some(a), Some(b)) => late.push(*b as i64 - *a as i64),
                _ => unfinished += 1,
            }
        }
    }
    let worst = late.iter().copied().max().unwrap_or(0);
    println!(
        "{:<22} {:>4.0} % faults: {bad} of {passes} passes ({:.1} %) did not decide every promotion they read ({failed} could not list promotions); \
         completion vs fault-free ({} ticks): median {:+} ticks, worst {:+}, {unfinished} unfinished after {MAX_TICKS} ticks",
        if health {
            "with health checks"
        } else {
            "without health checks"
        },
        p * 100.0,
        100.0 * bad as f64 / passes.max(1) as f64,
        base.completed.iter().flatten().max().copied().unwrap_or(0),
        median(late),
        worst,
    );
    Ok(())
}
