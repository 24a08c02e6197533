//! Every phase a decision can produce, as operators and CI gates see it through the binary: the
//! phase `step -o json` reports for the pass that records it is the phase `status -o json` and
//! `explain -o json` show afterwards, `status --exit-code` turns it into the code of the table,
//! and `status -w` returns at once where a person must act (0, 4, 5) and keeps watching where
//! promoter or Sveltos will (3). Blocked on the first pass and failing before the progress
//! deadline included (issue 31).
//!
//! Each row's world is set up by in-process passes on a clock some hours behind the real one; the
//! binary then runs at the real time (it reads the system clock), as the CronJob would.

mod common;

use chrono::{DateTime, Duration, Utc};
use common::{Env, promoter};
use promoter::api::ClusterPromotion;
use serde_json::{Value, json};

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

/// How each row's world is made.
#[derive(Clone, Copy, Debug)]
enum World {
    /// Applied; no pass yet.
    NeverPassed,
    /// The first pass applies stage 1.
    FirstPass,
    Soak,
    WindowClosed,
    PreHealthCheckDeployment,
    ChecksAgainstUnreachableClusters,
    ManualStage,
    OneStage,
    FailingWithDeadline,
    FailingWithoutDeadline,
    DeadlineMissedUnderHalt,
    BadAnnotation,
    OverlappingStages,
    PausedBeforeFirstPass,
    DeletedWhileDeploying,
    FrozenBeforeFirstPass,
    RollbackRequested,
    RollbackDone,
    /// The rollback's own deadline passed with the good revision failing on dev.
    RollbackMissedItsDeadline,
    AbortedRun,
}

/// (world, phase every output names, `--exit-code`, whether `-w` stops).
const TABLE: &[(World, &str, i32, bool)] = &[
    (World::NeverPassed, "Pending", 3, false),
    (World::FirstPass, "Progressing", 3, false),
    (World::Soak, "Soaking", 3, false),
    (World::WindowClosed, "WindowClosed", 3, false),
    (World::PreHealthCheckDeployment, "RunningChecks", 3, false),
    (
        World::ChecksAgainstUnreachableClusters,
        "ChecksFailing",
        3,
        false,
    ),
    (World::ManualStage, "AwaitingApproval", 4, true),
    (World::OneStage, "Complete", 0, true),
    (World::FailingWithDeadline, "Failing", 3, false),
    (World::FailingWithoutDeadline, "Failed", 5, true),
    (World::DeadlineMissedUnderHalt, "Failed", 5, true),
    (World::BadAnnotation, "Blocked", 5, true),
    (World::OverlappingStages, "Blocked", 5, true),
    (World::PausedBeforeFirstPass, "Paused", 3, false),
    (World::DeletedWhileDeploying, "Deleting", 3, false),
    (World::FrozenBeforeFirstPass, "Frozen", 3, false),
    (World::RollbackRequested, "RollingBack", 3, false),
    (World::RollbackDone, "RolledBack", 5, true),
    (World::RollbackMissedItsDeadline, "RollbackFailed", 5, true),
    (World::AbortedRun, "Aborted", 5, true),
];

const NAME: &str = "p";

fn promotion(stages: Value, annotations: Value) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": NAME, "annotations": annotations},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [{
                "repositoryURL": "https://kyverno.github.io/kyverno/", "repositoryName": "kyverno",
                "chartName": "kyverno/kyverno", "chartVersion": "3.5.2",
                "releaseName": "kyverno-latest", "releaseNamespace": "kyverno",
                "helmChartAction": "Install"}]},
            "stages": stages
        }
    }))
    .unwrap()
}

fn stage(name: &str, env: &str, trigger: Value) -> Value {
    json!({"name": name, "clusterSelector": {"matchLabels": {"env": env}}, "trigger": trigger})
}

fn two_stages(dev_trigger: Value) -> Value {
    json!([
        stage("dev", "dev", dev_trigger),
        stage("staging", "staging", json!(null))
    ])
}

fn set_clock(env: &Env, t: DateTime<Utc>) {
    *env.now.lock().unwrap() = t;
}

/// In-process passes (Sveltos reacting after each) until `done` holds; at most 20.
async fn ticks_until(env: &Env, done: impl Fn(&ClusterPromotion) -> bool) {
    for _ in 0..20 {
        env.tick().await;
        if env.promotion(NAME).is_some_and(|p| done(&p)) {
            return;
        }
    }
    panic!(
        "never got there: {:#?}",
        env.promotion(NAME).unwrap().status
    );
}

fn description(p: &ClusterPromotion, stage: &str) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.stages.as_ref())
        .and_then(|s| s.iter().find(|s| s.name == stage))
        .and_then(|s| s.current_status_description.clone())
        .unwrap_or_default()
}

fn provisioned(p: &ClusterPromotion, stage: &str) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.stages.as_ref())
        .and_then(|s| s.iter().find(|s| s.name == stage))
        .is_some_and(|s| s.last_successful_applied_time.is_some())
}

fn run(env: &Env, args: &[&str]) -> String {
    let (code, out, err) = promoter(env, args);
    assert_eq!(code, 0, "{args:?}: {out}{err}");
    out
}

/// The row's world; whether the binary's `step` is the pass that shows the phase (not for
/// `Pending`, which no pass produces).
async fn prepare(world: World) -> (Env, bool) {
    let mut env = Env::new(FLEET).await;
    env.addon.default_deploy_time = Duration::minutes(1);
    // The setup's passes happen hours ago; the binary's, now.
    set_clock(&env, Utc::now() - Duration::hours(3));
    if matches!(
        world,
        World::FailingWithDeadline | World::FailingWithoutDeadline | World::DeadlineMissedUnderHalt
    ) {
        env.addon
            .failing
            .insert("dev/dev01".into(), Utc::now() - Duration::days(1));
    }
    if matches!(world, World::RollbackMissedItsDeadline) {
        // After the first rollout: the good revision no longer deploys on dev01.
        env.addon
            .failing
            .insert("dev/dev01".into(), Utc::now() - Duration::minutes(150));
        env.addon
            .failing_only
            .insert("dev/dev01".into(), "3.5.2".into());
    }
    let env = env;
    let apply = |p: ClusterPromotion| env.apply_promotion(&p);
    let plain = || promotion(two_stages(json!(null)), json!({}));
    match world {
        World::NeverPassed => {
            apply(plain());
            return (env, false);
        }
        World::FirstPass => apply(plain()),
        World::Soak => {
            apply(promotion(
                two_stages(json!({"auto": {"delay": "24h"}})),
                json!({}),
            ));
            ticks_until(&env, |p| description(p, "dev").starts_with("Delayed")).await;
        }
        World::WindowClosed => {
            // Open one minute a year, on 1 January.
            let window =
                json!({"auto": {"promotionWindow": {"from": "0 0 1 1 *", "to": "1 0 1 1 *"}}});
            apply(promotion(two_stages(window), json!({})));
            ticks_until(&env, |p| description(p, "dev").starts_with("Window Closed")).await;
        }
        World::PreHealthCheckDeployment => {
            let pre = json!({"auto": {"preHealthCheckDeployment": [
                {"kind": "ConfigMap", "namespace": "default", "name": "verify"}]}});
            apply(promotion(two_stages(pre), json!({})));
            // Sveltos stops once the stage is provisioned: the verification never deploys.
            for _ in 0..10 {
                env.pass().await;
                if provisioned(&env.promotion(NAME).unwrap(), "dev") {
                    break;
                }
                env.addon.reconcile(&env.server, env.now());
                env.advance(Duration::minutes(1));
            }
        }
        World::ChecksAgainstUnreachableClusters => {
            // No kubeconfig Secret for the cluster: the binary's checks fail.
            let checks = json!({"auto": {"postDelayHealthChecks": [
                {"name": "pods", "featureID": "Helm", "group": "", "version": "v1", "kind": "Pod", "namespace": "kyverno"}]}});
            apply(promotion(two_stages(checks), json!({})));
            ticks_until(&env, |p| provisioned(p, "dev")).await;
        }
        World::ManualStage => {
            apply(promotion(
                json!([
                    stage("dev", "dev", json!(null)),
                    stage("staging", "staging", json!({"manual": {}}))
                ]),
                json!({}),
            ));
            ticks_until(&env, |p| description(p, "staging").starts_with("Paused")).await;
        }
        World::OneStage => {
            apply(promotion(
                json!([stage("dev", "dev", json!(null))]),
                json!({}),
            ));
            ticks_until(&env, promoter::annotations::is_complete).await;
        }
        World::FailingWithDeadline | World::FailingWithoutDeadline => {
            let annotations = match world {
                World::FailingWithDeadline => json!({"promoter.dev/progress-deadline": "1d"}),
                _ => json!({}),
            };
            apply(promotion(two_stages(json!(null)), annotations));
            ticks_until(&env, |p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.stages.as_ref())
                    .is_some_and(|s| s.iter().any(|s| s.failure_message.is_some()))
                    && !description(p, "dev").starts_with("Clusters")
            })
            .await;
        }
        World::DeadlineMissedUnderHalt => {
            apply(promotion(
                two_stages(json!(null)),
                json!({"promoter.dev/progress-deadline": "1h"}),
            ));
            ticks_until(&env, |p| {
                description(p, "dev").starts_with("Deployment Failing")
            })
            .await;
        }
        World::BadAnnotation => apply(promotion(
            two_stages(json!(null)),
            json!({"promoter.dev/failure-policy": "rolback"}),
        )),
        World::OverlappingStages => apply(promotion(
            json!([
                stage("dev", "dev", json!(null)),
                stage("again", "dev", json!(null))
            ]),
            json!({}),
        )),
        World::PausedBeforeFirstPass => {
            apply(plain());
            set_clock(&env, Utc::now());
            run(&env, &["pause", NAME]);
        }
        World::DeletedWhileDeploying => {
            apply(plain());
            env.tick().await;
            env.tick().await;
            let api: kube::Api<ClusterPromotion> = kube::Api::all(env.client.clone());
            api.delete(NAME, &Default::default()).await.unwrap();
        }
        World::FrozenBeforeFirstPass => {
            apply(plain());
            set_clock(&env, Utc::now());
            run(&env, &["freeze", "create", "holidays", "--reason", "CAB-1"]);
        }
        World::RollbackRequested | World::RollbackDone | World::RollbackMissedItsDeadline => {
            let plain = || match world {
                World::RollbackMissedItsDeadline => promotion(
                    two_stages(json!(null)),
                    json!({"promoter.dev/rollback-deadline": "5m"}),
                ),
                _ => plain(),
            };
            apply(plain());
            ticks_until(&env, promoter::annotations::is_complete).await;
            let mut next = plain();
            next.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] =
                json!("3.6.0");
            apply(next);
            env.tick().await;
            env.tick().await;
            set_clock(&env, Utc::now() - Duration::hours(2));
            run(&env, &["rollback", NAME, "--reason", "INC-1"]);
            if matches!(world, World::RollbackDone) {
                ticks_until(&env, |p| {
                    promoter::annotations::rollback(p).is_some_and(|r| r.completed_at.is_some())
                })
                .await;
            }
            if matches!(world, World::RollbackMissedItsDeadline) {
                ticks_until(&env, |p| {
                    promoter::annotations::rollback(p).is_some_and(|r| r.missed.is_some())
                })
                .await;
            }
        }
        World::AbortedRun => {
            apply(plain());
            env.tick().await;
            set_clock(&env, Utc::now() - Duration::hours(2));
            run(&env, &["abort", NAME, "--reason", "INC-2"]);
        }
    }
    (env, true)
}

fn phase_of(json_text: &str, what: &str) -> String {
    let v: Value =
        serde_json::from_str(json_text).unwrap_or_else(|e| panic!("{what}: {e}: {json_text}"));
    v["phase"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_phase_reads_the_same_in_step_status_watch_and_explain() {
    let mut failures = Vec::new();
    for (world, phase, code, stops) in TABLE {
        let (env, pass) = prepare(*world).await;
        set_clock(&env, Utc::now());
        let row = format!("{world:?} ({phase})");
        if pass {
            let (_, out, err) = promoter(&env, &["step", NAME, "-o", "json"]);
            let report: Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{row}: {e}: {out}{err}"));
            let got = report["promotions"][0]["phase"]
                .as_str()
                .unwrap_or_default();
            if got != *phase {
                failures.push(format!(
                    "{row}: step -o json says {got}: {}",
                    report["promotions"][0]["summary"]
                ));
            }
        }
        let (_, out, err) = promoter(&env, &["status", NAME, "-o", "json"]);
        let got = phase_of(&out, &format!("{row} status: {err}"));
        if got != *phase {
            failures.push(format!("{row}: status says {got}: {out}"));
        }
        let (_, out, err) = promoter(&env, &["explain", NAME, "-o", "json"]);
        let got = phase_of(&out, &format!("{row} explain: {err}"));
        if got != *phase {
            failures.push(format!("{row}: explain says {got}"));
        }
        let (got, _, err) = promoter(&env, &["status", NAME, "--exit-code"]);
        if got != *code {
            failures.push(format!("{row}: --exit-code {got}, not {code}: {err}"));
        }
        // -w: a phase that waits for a person returns at once with its code; one that promoter
        // or Sveltos will move on keeps watching until the timeout, then says so (code 3).
        let timeout = if *stops { "5m" } else { "1s" };
        let (got, out, err) = promoter(
            &env,
            &[
                "status",
                NAME,
                "-w",
                "--timeout",
                timeout,
                "--poll-interval",
                "200ms",
            ],
        );
        let timed_out = err.contains("timed out");
        if got != *code || timed_out == *stops || !out.contains(phase) {
            failures.push(format!(
                "{row}: -w exited {got} (timed out: {timed_out}), expected {code} and {}: {out}{err}",
                if *stops { "at once" } else { "a timeout" }
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
