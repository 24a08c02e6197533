//! `promoter step`'s pass, end to end through the fake API server and kube's client, on the seed
//! scenarios, with a simulated Sveltos addon-controller and a clock the test controls.

mod common;

use chrono::Duration;
use common::Env;
use promoter::api::StageStatus;
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
use promoter::pass::Phase;
use serde_json::json;
use std::collections::BTreeSet;

const BLOG_FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

fn stage<'a>(stages: &'a [StageStatus], name: &str) -> &'a StageStatus {
    stages.iter().find(|s| s.name == name).unwrap()
}

async fn run_until_complete(env: &Env, name: &str, max_ticks: usize) -> usize {
    for i in 0..max_ticks {
        let report = env.tick().await;
        if report
            .promotions
            .iter()
            .any(|p| p.name == name && p.phase == Phase::Complete)
        {
            return i;
        }
    }
    panic!(
        "{name} did not complete in {max_ticks} ticks: {:?}",
        env.promotion(name).and_then(|p| p.status)
    );
}

#[tokio::test]
async fn kyverno_two_stage_auto_rollout() {
    let env = Env::new(&[
        ("staging", "s1", "staging"),
        ("staging", "s2", "staging"),
        ("production", "p1", "production"),
    ])
    .await;
    env.apply_example("docs-kyverno-auto.yaml");
    run_until_complete(&env, "test-kyverno-rollout", 30).await;
    let p = env.promotion("test-kyverno-rollout").unwrap();
    assert!(
        p.metadata
            .finalizers
            .unwrap()
            .contains(&"config.projectsveltos.io/clusterpromotion".to_string())
    );
    let status = p.status.unwrap();
    let stages = status.stages.unwrap();
    assert_eq!(
        stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["staging", "production"]
    );
    // Production was promoted no earlier than staging's provisioning plus the 5m delay; staging's
    // description says when it was promoted, its lastSuccessfulAppliedTime when it was deployed.
    let staging = stage(&stages, "staging");
    let staging_promoted = staging
        .current_status_description
        .as_deref()
        .and_then(promoter::pass::stage_status::description_time)
        .unwrap();
    let production_started = stage(&stages, "production")
        .last_update_reconciled_time
        .unwrap()
        .as_datetime();
    assert_eq!(staging_promoted, production_started);
    assert!(
        staging.last_successful_applied_time.unwrap().as_datetime() + Duration::minutes(5)
            <= staging_promoted
    );
    let first_provisioned = env
        .server
        .requests()
        .iter()
        .position(|r| r.verb == "create" && r.resource == "events")
        .is_some();
    assert!(first_provisioned, "events were recorded");
    assert!(
        production_started
            - status
                .stages_hash
                .as_ref()
                .map(|_| common::start_time())
                .unwrap()
            >= Duration::minutes(5)
    );
    assert!(
        stage(&stages, "production")
            .current_status_description
            .as_deref()
            .unwrap()
            .starts_with("Successfully provisioned (")
    );
    // The generated profiles are upstream's.
    let prod = env.profile("test-kyverno-rollout-production").unwrap();
    assert_eq!(
        prod.metadata.labels.as_ref().unwrap()["config.projectsveltos.io/promotionname"],
        "test-kyverno-rollout"
    );
    assert_eq!(
        prod.metadata.annotations.as_ref().unwrap()["config.projectsveltos.io/stagename"],
        "production"
    );
    let owner = &prod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ClusterPromotion", "test-kyverno-rollout", None)
    );
    assert_eq!(
        prod.spec.fields["clusterSelector"],
        json!({"matchLabels": {"env": "production"}})
    );
    assert_eq!(
        prod.metadata.finalizers.as_ref().unwrap(),
        &vec!["clusterprofilefinalizer.projectsveltos.io".to_string()],
        "Sveltos' finalizer kept"
    );
}

#[tokio::test]
async fn four_stage_payment_processor_goes_in_order() {
    let env = Env::new(&[
        ("d", "d1", "development"),
        ("u", "u1", "uat"),
        ("s", "s1", "staging"),
        ("p", "p1", "production"),
    ])
    .await;
    env.apply_example("docs-payment-processor.yaml");
    let mut seen = Vec::new();
    for _ in 0..30 {
        env.tick().await;
        let names: Vec<String> = env
            .profiles()
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        if seen.last() != Some(&names) {
            seen.push(names);
        }
    }
    let order: Vec<usize> = seen.iter().map(Vec::len).collect();
    assert_eq!(order, [1, 2, 3, 4], "one stage at a time: {seen:?}");
    assert_eq!(
        env.current_stage("core-payment-processor-ci").as_deref(),
        Some("production")
    );
    assert_eq!(
        env.description("core-payment-processor-ci", "production")
            .unwrap()
            .split(" (")
            .next(),
        Some("Successfully provisioned")
    );
}

#[tokio::test]
async fn manual_approval_stops_at_staging_until_approved() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..20 {
        env.tick().await;
    }
    let name = "kyverno-prog-rollout-man";
    assert_eq!(env.current_stage(name).as_deref(), Some("staging"));
    assert!(
        env.description(name, "staging")
            .unwrap()
            .starts_with("Paused: Awaiting Manual Approval (")
    );
    assert!(env.profile("kyverno-prog-rollout-man-production").is_none());
    // The approval exactly as the blog gives it.
    env.json_patch(
        name,
        json!([{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]),
    )
    .await;
    run_until_complete(&env, name, 10).await;
    let p = env.promotion(name).unwrap();
    assert_eq!(
        p.spec.stages[1].manual_approval(),
        None,
        "automaticReset consumed it"
    );
    assert!(env.profile("kyverno-prog-rollout-man-production").is_some());
}

/// A stage name too long for `promoter.dev/grant.<stage>` as an annotation key (a name part of at
/// most 63 characters) used to make every record patch a 422, read as a lost race forever: the
/// approval was never consumed and the rollout never moved (issue 14 review). Upstream accepts the
/// name, so promoter must too.
#[tokio::test]
async fn a_manual_stage_with_a_long_name_is_approved_and_passed() {
    let env = Env::new(BLOG_FLEET).await;
    let long = format!("staging-{}", "x".repeat(51));
    assert_eq!(long.len(), 59);
    let p: promoter::api::ClusterPromotion = serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "app"},
        "spec": {"profileSpec": {"helmCharts": [{"repositoryURL": "https://charts.example/",
                    "repositoryName": "ex", "chartName": "ex/app", "chartVersion": "1.0.0",
                    "releaseName": "app", "releaseNamespace": "app"}]},
                 "stages": [
                    {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                    {"name": long, "clusterSelector": {"matchLabels": {"env": "staging"}},
                     "trigger": {"manual": {"approved": true}}},
                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}]}
    }))
    .unwrap();
    env.apply_promotion(&p);
    run_until_complete(&env, "app", 15).await;
    let p = env.promotion("app").unwrap();
    assert_eq!(p.spec.stages[1].manual_approval(), None, "consumed once");
    let keys: Vec<String> = p
        .metadata
        .annotations
        .unwrap_or_default()
        .into_keys()
        .collect();
    assert!(
        keys.iter()
            .any(|k| k.starts_with("promoter.dev/grant.staging-x")),
        "{keys:?}"
    );
}

#[tokio::test]
async fn failure_halts_at_dev_and_says_why() {
    let mut env = Env::new(BLOG_FLEET).await;
    env.addon
        .failing
        .insert("dev/dev01".into(), common::start_time());
    env.apply_example("blog-kyverno-failure.yaml");
    let mut last = None;
    for _ in 0..30 {
        last = Some(env.tick().await);
    }
    let report = last.unwrap();
    assert_eq!(report.errors(), 1, "exit code 2 for CI");
    assert_eq!(report.promotions[0].phase, Phase::Failed);
    assert!(
        report.promotions[0]
            .summary
            .contains("cluster dev/dev01: feature Helm Failed"),
        "{}",
        report.promotions[0].summary
    );
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("dev")
    );
    assert!(
        env.profile("kyverno-rollout-auto-staging").is_none(),
        "never reaches staging"
    );
    let status = env
        .promotion("kyverno-rollout-auto")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        status.stages.unwrap()[0].failure_message.as_deref(),
        Some("ClusterSummary kyverno-rollout-auto-dev-sveltos-dev01 is not yet provisioned.")
    );
}

#[tokio::test]
async fn update_restarts_at_dev_while_production_keeps_the_old_version() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    run_until_complete(&env, "kyverno-rollout-auto", 40).await;
    assert_eq!(
        env.chart_version("kyverno-rollout-auto-production")
            .as_deref(),
        Some("3.5.2")
    );
    env.apply_example("blog-kyverno-update.yaml");
    env.tick().await;
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("dev")
    );
    assert_eq!(
        env.chart_version("kyverno-rollout-auto-dev").as_deref(),
        Some("3.6.2")
    );
    assert_eq!(
        env.chart_version("kyverno-rollout-auto-production")
            .as_deref(),
        Some("3.5.2")
    );
    let mut prod_updated_while_staging_old = false;
    for _ in 0..40 {
        env.tick().await;
        if env
            .chart_version("kyverno-rollout-auto-production")
            .as_deref()
            == Some("3.6.2")
            && env.chart_version("kyverno-rollout-auto-staging").as_deref() != Some("3.6.2")
        {
            prod_updated_while_staging_old = true;
        }
    }
    assert!(!prod_updated_while_staging_old);
    assert_eq!(
        env.chart_version("kyverno-rollout-auto-production")
            .as_deref(),
        Some("3.6.2")
    );
}

#[tokio::test]
async fn quiet_when_complete_and_while_soaking() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    // Soaking: dev provisioned, its 2m delay running.
    let mut ticks = 0;
    while env.tick().await.promotions[0].phase != Phase::Soaking {
        ticks += 1;
        assert!(ticks < 10, "never soaked");
    }
    env.server.clear_requests();
    let report = env.pass().await;
    assert_eq!(
        report.promotions[0].phase,
        Phase::Soaking,
        "{:?}",
        report.promotions[0]
    );
    assert_eq!(env.server.writes(), 0, "{:#?}", env.server.requests());
    // An active pass reads: promotions, profiles, PromotionFreezes, the summaries of the watched
    // profiles, SveltosClusters (5 lists), and discovers whether Cluster API is served.
    assert_eq!(
        env.server.count(|r| r.verb == "list"),
        5,
        "{:#?}",
        env.server.requests()
    );
    assert_eq!(env.server.count(|r| r.verb == "discovery"), 1);
    run_until_complete(&env, "kyverno-rollout-auto", 40).await;
    env.server.clear_requests();
    for _ in 0..3 {
        env.pass().await;
    }
    assert_eq!(
        env.server.writes(),
        0,
        "a complete rollout is never rewritten"
    );
    assert_eq!(
        env.server.count(|r| r.verb == "list"),
        9,
        "three list calls per steady pass: promotions, profiles, freezes"
    );
}

#[tokio::test]
async fn steady_pass_costs_the_same_for_1_and_50_promotions() {
    let mut counts = Vec::new();
    for n in [1usize, 50] {
        // A cluster in every stage: a stage that selects none holds the rollout.
        let env = Env::new(&[
            ("dev", "d1", "dev"),
            ("staging", "s1", "staging"),
            ("prod", "p1", "prod"),
        ])
        .await;
        let base = env.apply_example("blog-kyverno-auto.yaml");
        let template = env.promotion(&base[0]).unwrap();
        for i in 1..n {
            let mut p = template.clone();
            p.metadata = kube::core::ObjectMeta {
                name: Some(format!("copy-{i}")),
                ..Default::default()
            };
            p.status = None;
            env.apply_promotion(&p);
        }
        for _ in 0..40 {
            env.tick().await;
        }
        let report = env.pass().await;
        assert!(
            report.promotions.iter().all(|p| p.phase == Phase::Complete),
            "all complete"
        );
        env.server.clear_requests();
        env.pass().await;
        counts.push((env.server.count(|_| true), env.server.writes()));
    }
    assert_eq!(
        counts[0], counts[1],
        "requests of a steady pass (1 vs 50 promotions)"
    );
    assert_eq!(counts[0].1, 0);
}

/// The state a rollout ends in, without timestamps.
fn end_state(env: &Env, name: &str) -> serde_json::Value {
    let p = env.promotion(name).unwrap();
    let status = p.status.unwrap_or_default();
    let stages: Vec<_> = status
        .stages
        .unwrap_or_default()
        .into_iter()
        .map(|s| {
            (
                s.name,
                s.current_status_description
                    .map(|d| d.split(" (").next().unwrap_or_default().to_string()),
                s.failure_message,
            )
        })
        .collect();
    let mut profiles: Vec<_> = env
        .profiles()
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap(),
                p.spec.fields,
                p.metadata.labels,
                p.metadata.owner_references.map(|o| o.len()),
            )
        })
        .collect();
    profiles.sort_by(|a, b| a.0.cmp(&b.0));
    json!({
        "finalizers": p.metadata.finalizers,
        "spec": p.spec.stages,
        "current": status.current_stage_name,
        "hashes": [status.profile_spec_hash, status.stages_hash],
        "stages": stages,
        "profiles": profiles,
    })
}

/// The stages whose profile carries the promotion's current configuration.
fn stages_with_current_version(env: &Env, name: &str) -> BTreeSet<usize> {
    let Some(p) = env.promotion(name) else {
        return BTreeSet::new();
    };
    let charts = p
        .spec
        .profile_spec
        .as_ref()
        .and_then(|s| s.get("helmCharts"))
        .cloned();
    p.spec
        .stages
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            env.profile(&format!("{name}-{}", s.name))
                .is_some_and(|cp| cp.spec.fields.get("helmCharts").cloned() == charts)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether every ClusterSummary of a profile is in sync and provisioned (what Sveltos shows now).
fn stage_deployed(env: &Env, profile: &str) -> bool {
    let cp = env.profile(profile).unwrap();
    env.server
        .store()
        .all(&promoter::fake::cluster_summary_type())
        .iter()
        .filter(|cs| cs["metadata"]["labels"]["projectsveltos.io/cluster-profile-name"] == profile)
        .all(|cs| {
            cs["spec"]["clusterProfileSpec"]["helmCharts"] == cp.spec.fields["helmCharts"]
                && cs["status"]["featureSummaries"]
                    .as_array()
                    .is_some_and(|f| f.iter().all(|x| x["status"] == "Provisioned"))
        })
}

/// A pass, checking that no stage receives the current version unless, at that moment, the stage
/// before it had it and was deployed everywhere: a crash may delay the record, never skip a stage.
async fn checked_pass(env: &Env, name: &str) {
    let before = stages_with_current_version(env, name);
    env.pass().await;
    let after = stages_with_current_version(env, name);
    let p = env.promotion(name).unwrap();
    for j in after.difference(&before).filter(|j| **j > 0) {
        let prev = format!("{name}-{}", p.spec.stages[j - 1].name);
        assert!(
            before.contains(&(j - 1)) && stage_deployed(env, &prev),
            "stage {j} got the new version before {prev} was deployed"
        );
    }
}

async fn crash_scenario(
    example: &str,
    name: &str,
    crash_after_write: Option<usize>,
    approve_at: Option<usize>,
) -> (serde_json::Value, usize) {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example(example);
    if let Some(k) = crash_after_write {
        env.server.inject(FaultRule::after(
            RequestMatcher::writes(),
            k,
            FaultAction::Status(500),
        ));
    }
    for tick in 0..40 {
        if Some(tick) == approve_at {
            env.store_json_patch(name, json!([{"op": "add", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]));
        }
        checked_pass(&env, name).await;
        // The pass in which writes were refused was the crash; later passes run clean.
        if env.server.count(|r| r.code == 500) > 0 {
            env.server.clear_faults();
        }
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
    }
    let writes = env.server.count(|r| r.is_write() && r.code < 300);
    (end_state(&env, name), writes)
}

#[tokio::test]
async fn crash_at_every_write_converges_to_the_same_end_state() {
    for (example, name, approve_at) in [
        ("blog-kyverno-auto.yaml", "kyverno-rollout-auto", None),
        (
            "blog-kyverno-manual.yaml",
            "kyverno-prog-rollout-man",
            Some(8),
        ),
        (
            "docs-payment-processor.yaml",
            "core-payment-processor-ci",
            None,
        ),
    ] {
        let (reference, writes) = crash_scenario(example, name, None, approve_at).await;
        assert!(writes > 5, "{example}: {writes} writes");
        for k in 0..writes {
            let (state, _) = crash_scenario(example, name, Some(k), approve_at).await;
            assert_eq!(state, reference, "{example}: crash after write {k}");
        }
    }
}

#[tokio::test]
async fn interleaved_passes_never_advance_twice() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    for _ in 0..30 {
        let before = stages_with_current_version(&env, "kyverno-rollout-auto");
        let (a, b) = tokio::join!(env.pass(), env.pass());
        let after = stages_with_current_version(&env, "kyverno-rollout-auto");
        assert!(
            after.difference(&before).count() <= 1,
            "two stages promoted in one round"
        );
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
        let advanced = [&a, &b]
            .iter()
            .filter(|r| {
                r.promotions[0].summary.starts_with("promoted")
                    && r.promotions[0].conflict.is_none()
            })
            .count();
        assert!(advanced <= 1, "{a:?} {b:?}");
        let stages = env
            .promotion("kyverno-rollout-auto")
            .unwrap()
            .status
            .unwrap_or_default()
            .stages
            .unwrap_or_default();
        let mut names: Vec<_> = stages.iter().map(|s| s.name.clone()).collect();
        let len = names.len();
        names.dedup();
        assert_eq!(names.len(), len, "a stage recorded twice: {stages:?}");
    }
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("production")
    );
}

#[tokio::test]
async fn deletion_removes_profiles_then_the_finalizer() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    for _ in 0..8 {
        env.tick().await;
    }
    assert!(env.profiles().len() >= 2);
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.delete("kyverno-rollout-auto", &Default::default())
        .await
        .unwrap();
    for _ in 0..5 {
        env.tick().await;
    }
    assert!(
        env.promotion("kyverno-rollout-auto").is_none(),
        "finalizer removed once the profiles were gone"
    );
    assert!(env.profiles().is_empty());
}

#[tokio::test]
async fn preserve_on_delete_really_preserves() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.json_patch(
        "kyverno-rollout-auto",
        json!([{"op": "add", "path": "/spec/preserveClusterProfilesOnDelete", "value": true}]),
    )
    .await;
    for _ in 0..8 {
        env.tick().await;
    }
    let before = env.profiles().len();
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.delete("kyverno-rollout-auto", &Default::default())
        .await
        .unwrap();
    for _ in 0..3 {
        env.tick().await;
    }
    assert!(env.promotion("kyverno-rollout-auto").is_none());
    let after = env.profiles();
    assert_eq!(after.len(), before, "garbage collection kept them");
    assert!(after.iter().all(|p| {
        p.metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .is_empty()
    }));
}

#[tokio::test]
async fn one_bad_promotion_does_not_stop_the_others() {
    let env = Env::new(BLOG_FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let mut bad = env.promotion("kyverno-rollout-auto").unwrap();
    bad.metadata = kube::core::ObjectMeta {
        name: Some("a-promotion-whose-name-is-far-too-long-for-a-label".into()),
        ..Default::default()
    };
    bad.spec.stages[0].name = "development-stage".into();
    env.apply_promotion(&bad);
    let report = env.tick().await;
    let bad_report = report
        .promotions
        .iter()
        .find(|p| p.name.starts_with("a-promotion"))
        .unwrap();
    assert_eq!(bad_report.phase, Phase::Blocked);
    assert!(
        bad_report
            .summary
            .contains("a label value allows at most 63")
    );
    run_until_complete(&env, "kyverno-rollout-auto", 40).await;
    assert!(
        env.profiles()
            .iter()
            .all(|p| !p.metadata.name.clone().unwrap().starts_with("a-promotion"))
    );
}

/// Stands in for the health-check engine: the checks pass once the test says the Job completed.
struct ScriptedHealth(std::sync::atomic::AtomicBool);

impl promoter::pass::HealthEvaluator for ScriptedHealth {
    fn evaluate<'a>(
        &'a self,
        _: &'a promoter::api::ClusterPromotion,
        _: &'a str,
        _: &'a promoter::pass::World,
    ) -> futures::future::BoxFuture<'a, promoter::pass::HealthVerdict> {
        let passed = self.0.load(std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            if passed {
                promoter::pass::HealthVerdict::Passed
            } else {
                promoter::pass::HealthVerdict::Failing(
                    "cluster staging/s1: check job-complete: Job default/verify is not Complete"
                        .into(),
                )
            }
        })
    }
}

/// Upstream's FV test "Deploy ClusterPromotion with multiple stages" (reference §5), re-expressed.
#[tokio::test]
async fn upstream_fv_scenario() {
    let env = Env::new(&[
        ("staging", "s1", "staging"),
        ("production", "p1", "production"),
    ])
    .await;
    let p: promoter::api::ClusterPromotion = serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "fv"},
        "spec": {
            "profileSpec": {
                "tier": 90,
                "helmCharts": [{"repositoryURL": "https://charts.bitnami.com/bitnami", "repositoryName": "bitnami",
                                "chartName": "bitnami/contour", "chartVersion": "12.1.0", "releaseName": "contour",
                                "releaseNamespace": "contour", "helmChartAction": "Install"}],
                "policyRefs": [{"kind": "ConfigMap", "namespace": "default", "name": "missing", "optional": true}]
            },
            "stages": [
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}},
                 "trigger": {"auto": {"delay": "2m",
                    "preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "default", "name": "verification-job"}],
                    "postDelayHealthChecks": [{"name": "job-complete", "featureID": "Resources", "group": "batch",
                        "version": "v1", "kind": "Job", "namespace": "default",
                        "script": "function evaluate() return {healthy = obj.status.succeeded == 1} end"}]}}},
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "production"}}}
            ]
        }
    }))
    .unwrap();
    env.apply_promotion(&p);
    let health = ScriptedHealth(std::sync::atomic::AtomicBool::new(false));
    let tick = || async {
        let r = env.pass_with(&health).await;
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
        r
    };
    tick().await;
    let profiles = env.profiles();
    assert_eq!(profiles.len(), 1, "exactly one ClusterProfile first");
    let cp = &profiles[0];
    assert_eq!(cp.spec.fields["tier"], 90);
    assert_eq!(
        cp.spec.fields["helmCharts"],
        p.spec.profile_spec.as_ref().unwrap().0["helmCharts"]
    );
    // As the API server stored the promotion: the CRD's defaults (tier, deploymentType, ...) filled.
    let stored = env
        .server
        .store()
        .get(&promoter::fake::cluster_promotion_type(), "", "fv")
        .unwrap();
    assert_eq!(
        cp.spec.fields["policyRefs"],
        stored["spec"]["profileSpec"]["policyRefs"]
    );
    assert_eq!(
        cp.spec.fields["clusterSelector"],
        json!({"matchLabels": {"env": "staging"}})
    );
    assert!(
        cp.spec.fields.get("validateHealths").is_none(),
        "checks are not appended to the profile (Q3)"
    );
    // The delay: no second profile for a while.
    tick().await;
    tick().await;
    assert_eq!(env.profiles().len(), 1);
    let mut saw_verification = false;
    for _ in 0..6 {
        tick().await;
        if let Some(pv) = env.profile("preverification-fv-staging") {
            let labels = pv.metadata.labels.unwrap();
            assert_eq!(labels["config.projectsveltos.io/promotionname"], "fv");
            assert_eq!(
                labels["config.projectsveltos.io/promotion-verification"],
                "true"
            );
            saw_verification = true;
        }
    }
    assert!(saw_verification);
    assert!(
        env.profile("fv-production").is_none(),
        "failing checks hold the promotion"
    );
    assert_eq!(
        env.description("fv", "staging").unwrap().split(" (").next(),
        Some("Awaiting Health Checks to Pass")
    );
    health.0.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..5 {
        tick().await;
    }
    assert!(
        env.profile("preverification-fv-staging").is_none(),
        "deleted after promotion"
    );
    assert_eq!(
        env.profile("fv-production").unwrap().spec.fields["clusterSelector"],
        json!({"matchLabels": {"env": "production"}})
    );
    let stages = env.promotion("fv").unwrap().status.unwrap().stages.unwrap();
    assert_eq!(stages.len(), 2);
    assert!(
        stages
            .iter()
            .all(|s| s.last_successful_applied_time.is_some())
    );
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.delete("fv", &Default::default()).await.unwrap();
    for _ in 0..4 {
        tick().await;
    }
    assert!(env.profiles().is_empty());
    assert!(env.promotion("fv").is_none());
}
