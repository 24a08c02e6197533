//! The simulator on the seed scenarios: timelines asserted, not just printed.

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use promoter::api::ClusterPromotion;
use promoter::sim::timeline::PromotionTimeline;
use promoter::sim::{
    Fleet, ScriptedApproval, ScriptedFailure, ScriptedUpdate, SimHealth, SimOptions, SimReport,
    SimWorld, simulate,
};
use serde_json::json;
use std::path::Path;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 17, 6, 0, 0).unwrap() // a Tuesday
}

fn example(file: &str) -> Vec<ClusterPromotion> {
    let docs = promoter::manifest::load_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file),
    )
    .unwrap();
    docs.iter().filter_map(|d| d.promotion().cloned()).collect()
}

fn fleet(file: &str) -> Fleet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/fleets")
        .join(file);
    Fleet::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap()
}

fn opts() -> SimOptions {
    SimOptions {
        start: start(),
        tick: Duration::minutes(1),
        until: Duration::days(14),
        approvals: Vec::new(),
        failures: Vec::new(),
        updates: Vec::new(),
        freezes: Vec::new(),
        default_tz: chrono_tz::Tz::UTC,
        sveltos_clock_skew: Duration::zero(),
        progress: false,
    }
}

async fn run(promotions: Vec<ClusterPromotion>, fleet: Fleet, opts: &SimOptions) -> SimReport {
    simulate(
        SimWorld {
            promotions,
            fleet,
            objects: Vec::new(),
        },
        SimHealth::FleetObjects,
        opts,
    )
    .await
    .unwrap()
}

fn stage<'a>(t: &'a PromotionTimeline, name: &str) -> &'a promoter::sim::timeline::StageTimeline {
    t.stages.iter().find(|s| s.name == name).unwrap()
}

#[tokio::test]
async fn blog_auto_rollout_timeline_and_eta() {
    let report = run(
        example("blog-kyverno-auto.yaml"),
        fleet("blog-lab.yaml"),
        &opts(),
    )
    .await;
    let t = &report.promotions[0];
    assert!(t.complete, "{}", report.render_text());
    for (prev, next) in [("dev", "staging"), ("staging", "production")] {
        let (p, n) = (stage(t, prev), stage(t, next));
        assert!(
            n.started_at.unwrap() >= p.provisioned_at.unwrap() + Duration::minutes(2),
            "{next} starts after {prev} + its 2m soak"
        );
        assert_eq!(
            p.soak_ends_at,
            Some(p.provisioned_at.unwrap() + Duration::minutes(2))
        );
    }
    // Deploy 2m (prod 4m), seen on the next one-minute pass, then the 2m soak: 5 + 5 + 7 minutes.
    assert_eq!(t.eta_seconds, Some(17 * 60));
    assert_eq!(stage(t, "dev").clusters, ["dev/dev01", "dev/dev02"]);
    assert!(report.render_text().contains(
        "=> complete: production promoted at 2026-02-17T06:17:00Z, 17m after the start (ETA)"
    ));
}

#[tokio::test]
async fn a_weekend_window_holds_the_promotion_and_the_clock_jumps() {
    let mut p = example("docs-payment-processor.yaml").remove(0);
    p.spec.stages[1].trigger = serde_json::from_value(json!({"auto": {"delay": "1h",
        "promotionWindow": {"from": "0 10 * * 6", "to": "0 22 * * 0"}}}))
    .unwrap();
    let report = run(vec![p], fleet("payment-processor.yaml"), &opts()).await;
    let t = &report.promotions[0];
    assert!(t.complete);
    let saturday_10 = Utc.with_ymd_and_hms(2026, 2, 21, 10, 0, 0).unwrap();
    assert_eq!(stage(t, "uat").window_opened_at, Some(saturday_10));
    assert_eq!(
        stage(t, "staging").started_at,
        Some(saturday_10),
        "held until the window opened"
    );
    // Four and a half simulated days, yet only the passes where something happens were run.
    assert!(report.passes < 100, "{} passes", report.passes);
}

#[tokio::test]
async fn failure_scenario_never_reaches_staging() {
    let mut o = opts();
    o.failures.push(ScriptedFailure::parse("dev01").unwrap());
    let report = run(
        example("blog-kyverno-failure.yaml"),
        fleet("blog-lab.yaml"),
        &o,
    )
    .await;
    let t = &report.promotions[0];
    assert!(!t.complete);
    assert!(stage(t, "staging").started_at.is_none());
    let stop = t.stopped.as_ref().unwrap();
    assert_eq!(stop.stage.as_deref(), Some("dev"));
    assert!(
        stop.reason
            .contains("cluster dev/dev01: feature Helm Failed"),
        "{}",
        stop.reason
    );
}

#[tokio::test]
async fn manual_approval_stops_at_staging_until_approved() {
    let report = run(
        example("blog-kyverno-manual.yaml"),
        fleet("blog-lab.yaml"),
        &opts(),
    )
    .await;
    let t = &report.promotions[0];
    assert!(!t.complete);
    assert_eq!(
        t.stopped.as_ref().unwrap().reason,
        "stage staging: awaiting manual approval"
    );
    let mut o = opts();
    o.approvals
        .push(ScriptedApproval::parse("kyverno-prog-rollout-man/staging@2h").unwrap());
    let report = run(
        example("blog-kyverno-manual.yaml"),
        fleet("blog-lab.yaml"),
        &o,
    )
    .await;
    let t = &report.promotions[0];
    assert!(t.complete);
    assert_eq!(
        stage(t, "staging").approved_at,
        Some(start() + Duration::hours(2))
    );
    assert_eq!(
        stage(t, "production").started_at,
        Some(start() + Duration::hours(2))
    );
}

#[tokio::test]
async fn an_update_restarts_at_dev_while_production_keeps_the_old_version() {
    let mut o = opts();
    o.updates.push(ScriptedUpdate {
        promotions: example("blog-kyverno-update.yaml"),
        at: Duration::hours(1),
    });
    let report = run(
        example("blog-kyverno-auto.yaml"),
        fleet("blog-lab.yaml"),
        &o,
    )
    .await;
    let t = &report.promotions[0];
    assert!(t.complete);
    let after: Vec<(&str, &str)> = t
        .events
        .iter()
        .skip_while(|e| e.event != "new revision applied")
        .map(|e| (e.stage.as_str(), e.event.as_str()))
        .filter(|(_, e)| e.starts_with("profile applied") || *e == "promoted")
        .map(|(s, e)| {
            (
                s,
                if e == "promoted" {
                    "promoted"
                } else {
                    "applied"
                },
            )
        })
        .collect();
    assert_eq!(
        after,
        [
            ("dev", "applied"),
            ("dev", "promoted"),
            ("staging", "applied"),
            ("staging", "promoted"),
            ("production", "applied"),
            ("production", "promoted")
        ]
    );
    assert_eq!(
        stage(t, "dev").started_at,
        Some(start() + Duration::hours(1))
    );
}

#[tokio::test]
async fn derived_fleet_runs_any_manifest() {
    for file in [
        "pr-kyverno-auto.yaml",
        "docs-kyverno-auto.yaml",
        "docs-payment-processor.yaml",
        "blog-kyverno-auto.yaml",
    ] {
        let promotions = example(file);
        let fleet = Fleet::derive(&promotions, 2);
        let report = run(promotions, fleet, &opts()).await;
        assert!(
            report.promotions.iter().all(|p| p.complete),
            "{file}: {}",
            report.render_text()
        );
    }
}

#[tokio::test]
async fn plan_predicts_the_rest_from_live_state() {
    let env = common::Env::new(&[
        ("dev", "dev01", "dev"),
        ("staging", "stg", "staging"),
        ("prod", "prod", "prod"),
    ])
    .await;
    env.apply_example("blog-kyverno-auto.yaml");
    for _ in 0..6 {
        env.tick().await;
    }
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("staging")
    );
    let world = promoter::sim::plan::load_live(&env.client, "kyverno-rollout-auto")
        .await
        .unwrap();
    assert_eq!(world.fleet.clusters.len(), 3);
    assert!(world.objects.len() >= 3, "profiles and summaries loaded");
    let mut o = opts();
    o.start = env.now();
    let report = simulate(world, SimHealth::FleetObjects, &o).await.unwrap();
    let t = &report.promotions[0];
    assert!(t.complete, "{}", report.render_text());
    // The past is shown from the status; the future is predicted.
    assert!(stage(t, "dev").promoted_at.unwrap() < env.now());
    assert!(stage(t, "production").promoted_at.unwrap() > env.now());
    assert!(
        report.render_text().contains("  -"),
        "past events have negative offsets"
    );
    // Issue 31: in time order (the past read off the status came after what the first pass saw
    // now: dev's "promoted" after staging's soak), ties in stage order.
    let order = |name: &str| t.stages.iter().position(|s| s.name == name);
    let keys: Vec<_> = t.events.iter().map(|e| (e.at, order(&e.stage))).collect();
    assert!(
        keys.windows(2).all(|w| w[0] <= w[1]),
        "{}",
        report.render_text()
    );
}

/// Issue 31: a rollback restores the stages from the top down, so dev's status entry is newer
/// than staging's: `plan` printed dev's past before staging's older one.
#[tokio::test(flavor = "multi_thread")]
async fn plan_of_a_rollback_lists_events_in_time_order() {
    let mut env = common::Env::new(&[
        ("dev", "dev01", "dev"),
        ("staging", "staging", "staging"),
        ("prod", "prod", "prod"),
    ])
    .await;
    let name =
        common::completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] =
        serde_json::json!("3.6.0");
    env.apply_promotion(&p);
    let mut ticks = 0;
    while promoter::annotations::rollback(&env.promotion(&name).unwrap()).is_none() {
        env.tick().await;
        ticks += 1;
        assert!(ticks < 40, "never rolled back");
    }
    let mut wrong = Vec::new();
    for pass in 0..3 {
        env.tick().await;
        let world = promoter::sim::plan::load_live(&env.client, &name)
            .await
            .unwrap();
        let mut o = opts();
        o.start = env.now();
        let report = simulate(world, SimHealth::FleetObjects, &o).await.unwrap();
        let t = &report.promotions[0];
        let order = |name: &str| t.stages.iter().position(|s| s.name == name);
        let keys: Vec<_> = t.events.iter().map(|e| (e.at, order(&e.stage))).collect();
        if !keys.windows(2).all(|w| w[0] <= w[1]) {
            wrong.push(format!("after pass {pass}:\n{}", report.render_text()));
        }
        // The revision it restores is stored, and the plan reads it.
        if report.render_text().contains("is gone") {
            wrong.push(format!("after pass {pass}:\n{}", report.render_text()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn health_checks_run_against_the_objects_each_fleet_cluster_holds() {
    let report = run(
        example("docs-cert-manager.yaml"),
        fleet("cert-manager.yaml"),
        &opts(),
    )
    .await;
    let t = &report.promotions[0];
    assert!(t.complete, "{}", report.render_text());
    // Without the objects (a derived fleet), the checks fail and the rollout waits at dev, saying why.
    let promotions = example("docs-cert-manager.yaml");
    let derived = Fleet::derive(&promotions, 2);
    let mut o = opts();
    o.until = Duration::hours(2);
    let report = run(promotions, derived, &o).await;
    let stop = report.promotions[0].stopped.clone().unwrap();
    assert_eq!(stop.stage.as_deref(), Some("dev"));
    assert!(
        stop.reason.contains("check cert-manager-resources-health"),
        "{}",
        stop.reason
    );
}

/// `promoter plan` through the binary: live summaries reloaded are not redeployed (no invented
/// "health checks failing" for a promotion without checks), `--deploy-time` takes the flags' one
/// duration grammar (`1d`), and an `--approve` naming no stage is refused.
#[tokio::test(flavor = "multi_thread")]
async fn plan_through_the_binary_reports_only_what_happens() {
    let env = common::Env::new(&[
        ("dev", "dev01", "dev"),
        ("staging", "stg", "staging"),
        ("prod", "prod", "prod"),
    ])
    .await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..12 {
        env.tick().await;
    }
    assert_eq!(
        env.current_stage("kyverno-prog-rollout-man").as_deref(),
        Some("staging")
    );
    let (code, _, err) = common::promoter(
        &env,
        &["plan", "kyverno-prog-rollout-man", "--approve", "stagin@2h"],
    );
    assert_eq!(code, 1, "a typo is refused: {err}");
    assert!(err.contains(r#"no stage "stagin""#), "{err}");
    let (code, out, err) = common::promoter(
        &env,
        &[
            "plan",
            "kyverno-prog-rollout-man",
            "--approve",
            "staging@1h",
            "--deploy-time",
            "1d",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let events = report["promotions"][0]["events"].as_array().unwrap();
    let texts: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    // Issue 31: in time order, ties in stage order.
    let stages: Vec<&str> = report["promotions"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    let keys: Vec<(i64, Option<usize>)> = events
        .iter()
        .map(|e| {
            let stage = e["stage"].as_str().unwrap_or_default();
            (
                e["offsetSeconds"].as_i64().unwrap(),
                stages.iter().position(|s| *s == stage),
            )
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}\n{texts:?}");
    assert!(
        !texts.iter().any(|e| e.contains("health checks")),
        "no health checks here: {texts:?}"
    );
    assert!(!texts.iter().any(|e| e.contains("window")), "{texts:?}");
    assert_eq!(report["promotions"][0]["complete"], true, "{out}");
    // Past a day the timeline still tells minutes apart.
    let (code, text, err) = common::promoter(
        &env,
        &[
            "plan",
            "kyverno-prog-rollout-man",
            "--approve",
            "staging@1d",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("+1d0h0"), "{text}");
}

/// Every `$ cargo run -- simulate …` line of the book's getting started runs as written (with a
/// fixed start; tests/console.rs compares their whole output), and the issue-24 ones show what
/// they promise: a missed deadline rolled back, a freeze held and lifted.
#[test]
fn the_books_simulations_run_as_written() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/getting-started/simulate.md"),
    )
    .unwrap();
    let commands: Vec<Vec<String>> = page
        .lines()
        .filter_map(|l| l.trim().strip_prefix("$ cargo run -- simulate "))
        // `--dashboard` serves the page until interrupted: tests/dashboard.rs and
        // tests/dashboard_browser.rs play that simulation through its page.
        .filter(|rest| !rest.split_whitespace().any(|a| a == "--dashboard"))
        .map(|rest| {
            let rest = rest.split(" # ").next().unwrap_or_default();
            rest.split_whitespace().map(String::from).collect()
        })
        .collect();
    assert!(commands.len() >= 9, "{commands:?}");
    let mut seen_rollback = false;
    let mut seen_failed_rollback = false;
    let mut seen_freeze = false;
    for args in commands {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("simulate")
            .args(&args)
            .args(["--start", "2026-11-20T00:00:00Z"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "simulate {args:?}: {code:?}\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args.iter().any(|a| a == "staging@1d") {
            // Issue 30: the good revision fails too; the rollback misses its own deadline.
            seen_failed_rollback = true;
            assert_eq!(code, Some(2), "stopped, the rollback failed:\n{text}");
            for line in [
                "staging     progress deadline 30m exceeded",
                "staging     rolling back to revision",
                "staging     rollback deadline 1h exceeded at 2026-11-21T01:35:00Z: stage staging:",
                "=> stopped at stage staging at 2026-11-21T01:36:00Z: the rollback to revision",
            ] {
                assert!(text.contains(line), "no {line:?} in:\n{text}");
            }
            assert!(
                !text.contains("dev         rolling back"),
                "dev never went back:\n{text}"
            );
        } else if args.iter().any(|a| a.contains("rollback-on-deadline-v2")) {
            seen_rollback = true;
            assert_eq!(code, Some(2), "stopped rolled back:\n{text}");
            for line in [
                "staging     progress deadline 30m exceeded",
                "staging     rolling back to revision",
                // The next pass after the rollback's write: no grace.
                "+1d0h37m  2026-11-21T00:37:00Z  staging     rolled back to revision",
                "dev         rolled back to revision",
                "=> stopped at stage staging at 2026-11-21T00:39:00Z: rolled back to revision",
            ] {
                assert!(text.contains(line), "no {line:?} in:\n{text}");
            }
        }
        if args.iter().any(|a| a.starts_with("4m..1d")) {
            seen_freeze = true;
            assert_eq!(code, Some(0), "{text}");
            for line in [
                "dev         frozen: freeze simulated-freeze-1: holidays (until 2026-11-21T00:00:00Z); stage staging waits",
                "+1d0h00m  2026-11-21T00:00:00Z  dev         freeze lifted",
                "+1d0h00m  2026-11-21T00:00:00Z  staging     profile applied",
            ] {
                assert!(text.contains(line), "no {line:?} in:\n{text}");
            }
        }
    }
    assert!(seen_rollback && seen_failed_rollback && seen_freeze);
}

/// Issue 30 §3: with `--sveltos-clock-skew`, a simulated Sveltos 2 s behind or ahead of the API
/// server finishes fast deployments (done in the reconcile that writes the spec) at the same
/// simulated times as one in step: promoter never compares its `lastAppliedTime` with the API
/// server's times. (Before: 2 s behind, every stage waited out the 10-minute grace.)
#[tokio::test]
async fn a_skewed_sveltos_clock_does_not_slow_a_simulated_rollout() {
    let mut finished = Vec::new();
    for skew in [0, -2, 2] {
        let mut f = fleet("blog-lab.yaml");
        f.default_deploy_time = Some(promoter::api::GoDuration::parse("0s").unwrap());
        for c in &mut f.clusters {
            c.deploy_time = None;
        }
        let report = run(
            example("blog-kyverno-auto.yaml"),
            f,
            &SimOptions {
                sveltos_clock_skew: Duration::seconds(skew),
                ..opts()
            },
        )
        .await;
        let t = &report.promotions[0];
        assert!(t.complete, "skew {skew} s: {}", report.render_text());
        finished.push((skew, t.finished_at));
    }
    assert!(
        finished.iter().all(|(_, at)| *at == finished[0].1),
        "{finished:?}"
    );
}

/// `--sveltos-clock-skew` through the binary: in the help, signed, and without effect on the
/// timeline; a value that is not a duration is a usage error naming the flag.
#[test]
fn the_sveltos_clock_skew_flag_through_the_binary() {
    let bin = || std::process::Command::new(env!("CARGO_BIN_EXE_promoter"));
    let help = bin().args(["simulate", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--sveltos-clock-skew"));
    let plan_help = bin().args(["plan", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&plan_help.stdout).contains("--sveltos-clock-skew"));
    let sim = |skew: &str| {
        bin()
            .args([
                "simulate",
                "examples/blog-kyverno-auto.yaml",
                "--fleet",
                "examples/fleets/blog-lab.yaml",
                "--start",
                "2026-02-17T06:00:00Z",
                "--sveltos-clock-skew",
                skew,
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let base = sim("0s");
    assert_eq!(
        base.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&base.stderr)
    );
    for skew in ["-2s", "2s", "+2s"] {
        let out = sim(skew);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{skew}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, base.stdout, "{skew}");
    }
    let bad = sim("2 parsecs");
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--sveltos-clock-skew"));
}
