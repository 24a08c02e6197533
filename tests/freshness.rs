//! Issue 30 §3: a stage is complete when every matching ClusterSummary is Provisioned *for its
//! current spec*, decided from facts that share one clock or from content, never by comparing
//! Sveltos' `lastAppliedTime` (its node's clock) with `managedFields` (the API server's).
//!
//! The simulated Sveltos hashes each feature as the real one does (a change it does not hash is
//! never redeployed and writes no status), lags the spec with its status, may land a status
//! computed from the previous spec after the new one (a late write), and runs on a clock of its own.
//! The oracle here is the ground truth the simulation knows: a summary is deployed for its spec
//! when every feature is `Provisioned` with that spec's hash.

mod common;

use chrono::Duration;
use common::Env;
use promoter::api::ClusterPromotion;
use promoter::fake::{cluster_profile_type, cluster_summary_type, sveltos_cluster_type};
use promoter::labels::LabelSelector;
use promoter::pass::Phase;
use promoter::sim::feature_hash::feature_hash;
use promoter::sveltos::normal_form::normalize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("prod", "prod01", "prod"),
];

fn chart(version: &str) -> Value {
    json!({"repositoryURL": "https://charts.example/", "repositoryName": "ex", "chartName": "ex/app",
           "chartVersion": version, "releaseName": "app", "releaseNamespace": "app"})
}

fn promotion(profile_spec: Value) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "app"},
        "spec": {
            "profileSpec": profile_spec,
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {}}},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"auto": {}}},
            ]
        }
    }))
    .unwrap()
}

fn complete(env: &Env) -> bool {
    let Some(p) = env.promotion("app") else {
        return false;
    };
    let run = p.status.as_ref().and_then(promoter::annotations::Run::of);
    run.is_some() && promoter::annotations::completed(&p) == run
}

/// Ticks until the rollout is recorded complete (the tick that completed it counts), checking the
/// oracle after every pass.
async fn ticks_to_complete(env: &Env, limit: usize) -> Option<usize> {
    for i in 1..=limit {
        let report = env.pass().await;
        assert_deployed_before_passed(env);
        if report
            .promotions
            .iter()
            .any(|p| p.name == "app" && p.phase == Phase::Complete)
            || complete(env)
        {
            return Some(i);
        }
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
    }
    None
}

/// Ground truth: every cluster the stage selects has a summary of `profile` carrying its spec,
/// and every feature `Provisioned` with that spec's hash (one per kind of content).
fn truly_deployed(env: &Env, profile: &str, env_label: &str) -> Result<(), String> {
    let store = env.server.store();
    let Ok(cp) = store.get(&cluster_profile_type(), "", profile) else {
        return Err(format!("{profile} does not exist"));
    };
    let spec = normalize(&cp["spec"].as_object().cloned().unwrap_or_default());
    let selector: LabelSelector =
        serde_json::from_value(json!({"matchLabels": {"env": env_label}})).unwrap();
    for c in store.all(&sveltos_cluster_type()) {
        let labels: BTreeMap<String, String> =
            serde_json::from_value(c["metadata"]["labels"].clone()).unwrap_or_default();
        if !selector.selects(&labels).unwrap() {
            continue;
        }
        let (ns, name) = (
            c["metadata"]["namespace"].as_str().unwrap(),
            c["metadata"]["name"].as_str().unwrap(),
        );
        let cs = store
            .get(
                &cluster_summary_type(),
                ns,
                &format!("{profile}-sveltos-{name}"),
            )
            .map_err(|_| format!("{profile} has no summary on {name}"))?;
        let cs_spec: Map<String, Value> = cs["spec"]["clusterProfileSpec"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if cs_spec != spec {
            return Err(format!("{name}: not in sync"));
        }
        let features = cs["status"]["featureSummaries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if features.is_empty() {
            return Err(format!("{name}: no features"));
        }
        for f in features {
            let id = f["featureID"].as_str().unwrap_or_default();
            if f["status"] != "Provisioned" || f["hash"] != feature_hash(&spec, id).as_str() {
                return Err(format!(
                    "{name}: feature {id} is {} with the hash of another spec",
                    f["status"]
                ));
            }
        }
    }
    Ok(())
}

/// Right after a pass (before Sveltos moves again): a stage the current run counts as provisioned,
/// or has passed, runs the current revision on every cluster.
fn assert_deployed_before_passed(env: &Env) {
    let p = env.promotion("app").unwrap();
    let status = p.status.clone().unwrap_or_default();
    let current = status.current_stage_name.clone().unwrap_or_default();
    let run_complete = complete(env);
    for (i, stage) in p.spec.stages.iter().enumerate() {
        let entry = status
            .stages
            .iter()
            .flatten()
            .find(|s| s.name == stage.name);
        let provisioned = entry.is_some_and(|e| e.last_successful_applied_time.is_some());
        let passed = p
            .spec
            .stages
            .iter()
            .position(|s| s.name == current)
            .is_some_and(|c| c > i);
        if provisioned || passed || (run_complete && stage.name == current) {
            let label = if stage.name == "dev" { "dev" } else { "prod" };
            if let Err(e) = truly_deployed(env, &format!("app-{}", stage.name), label) {
                panic!(
                    "at {}: stage {} counted as provisioned while {e}",
                    env.now(),
                    stage.name
                );
            }
        }
    }
}

async fn env_with(f: impl FnOnce(&mut promoter::sim::AddonController)) -> Env {
    let mut env = Env::new(FLEET).await;
    f(&mut env.addon);
    env
}

/// Fast deployments (done within the reconcile that writes the spec) on a Sveltos whose clock is
/// 2 s behind or ahead of the API server's: the rollout takes exactly as many passes as with no
/// skew. (Before: every `lastAppliedTime` 2 s behind looked older than the spec, and each stage
/// waited out the 10-minute grace.)
#[tokio::test]
async fn a_skewed_sveltos_clock_does_not_slow_a_rollout() {
    let mut paces = Vec::new();
    for skew in [0, -2, 2] {
        let env = env_with(|a| {
            a.default_deploy_time = Duration::zero();
            a.clock_skew = Duration::seconds(skew);
        })
        .await;
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.0.0")]})));
        let first = ticks_to_complete(&env, 30).await;
        // And a new revision, redeployed on every cluster.
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.1.0")]})));
        let second = ticks_to_complete(&env, 30).await;
        paces.push((skew, first, second));
    }
    let (_, first, second) = paces[0];
    assert!(first.is_some() && second.is_some(), "{paces:?}");
    for p in &paces {
        assert_eq!((p.1, p.2), (first, second), "skew {} s: {paces:?}", p.0);
    }
}

/// A revision that changes only what Sveltos does not hash (`maxUpdate`, `stopMatchingBehavior`,
/// `dependsOn`, `extraLabels`) is never redeployed, and Sveltos writes no status for it: the
/// stages complete at once, not after the grace.
#[tokio::test]
async fn a_change_sveltos_does_not_redeploy_does_not_hold_a_stage() {
    for (field, value) in [
        ("maxUpdate", json!("50%")),
        ("stopMatchingBehavior", json!("LeavePolicies")),
        ("dependsOn", json!(["base"])),
        ("extraLabels", json!({"team": "a"})),
    ] {
        let env = env_with(|a| a.default_deploy_time = Duration::minutes(2)).await;
        let base = json!({"helmCharts": [chart("1.0.0")]});
        env.apply_promotion(&promotion(base.clone()));
        let first = ticks_to_complete(&env, 30).await.unwrap();
        let mut revised = base.clone();
        revised[field] = value;
        env.apply_promotion(&promotion(revised));
        let hashes = |env: &Env| -> Vec<Value> {
            env.server
                .store()
                .all(&cluster_summary_type())
                .iter()
                .map(|cs| cs["status"]["featureSummaries"].clone())
                .collect()
        };
        let before = hashes(&env);
        let second = ticks_to_complete(&env, 30).await;
        assert!(
            second.is_some_and(|s| s < first),
            "{field}: a change Sveltos does not redeploy took {second:?} passes (the first rollout {first})"
        );
        assert_eq!(hashes(&env), before, "{field}: Sveltos redeployed nothing");
    }
}

/// A stage whose clusters still deploy the previous revision when the next one is written: the
/// reconcile of the previous spec lands its `Provisioned` (the previous hashes) after the new spec,
/// and Sveltos gets to the new spec only minutes later. That `Provisioned` never completes the
/// stage, whatever Sveltos' clock says.
#[tokio::test]
async fn a_late_provisioned_of_the_previous_revision_never_completes_a_stage() {
    for skew in [0, -2, 2] {
        let env = env_with(|a| {
            a.default_deploy_time = Duration::minutes(3);
            a.status_lag = Duration::minutes(2);
            a.late_writes = true;
            a.clock_skew = Duration::seconds(skew);
        })
        .await;
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.0.0")]})));
        // dev deploys 1.0.0 …
        for _ in 0..4 {
            env.tick().await;
        }
        // … when 1.1.0 comes.
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.1.0")]})));
        assert!(
            ticks_to_complete(&env, 40).await.is_some(),
            "skew {skew} s: never completed"
        );
    }
}

/// The same at a stage promoter did not watch when it wrote it: prod still deploys the previous
/// revision (slowly) when the new one reaches it.
#[tokio::test]
async fn a_late_provisioned_at_the_next_stage_never_completes_it() {
    for skew in [0, -2, 2] {
        let env = env_with(|a| {
            a.default_deploy_time = Duration::minutes(1);
            a.deploy_time
                .insert("prod/prod01".into(), Duration::minutes(20));
            a.status_lag = Duration::minutes(2);
            a.late_writes = true;
            a.clock_skew = Duration::seconds(skew);
        })
        .await;
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.0.0")]})));
        // Until prod deploys 1.0.0 …
        for _ in 0..30 {
            env.tick().await;
            if env.current_stage("app").as_deref() == Some("prod") {
                break;
            }
        }
        env.tick().await;
        // … and 1.1.0 goes out, reaching prod while it still deploys 1.0.0.
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.1.0")]})));
        assert!(
            ticks_to_complete(&env, 60).await.is_some(),
            "skew {skew} s: never completed"
        );
    }
}

/// `promoter explain` says what Sveltos redeploys for the spec promoter wrote, and why a cluster's
/// `Provisioned` does not count yet.
#[tokio::test(flavor = "multi_thread")]
async fn explain_says_what_is_redeployed_and_why_a_provisioned_does_not_count() {
    let env = env_with(|a| {
        a.default_deploy_time = Duration::minutes(3);
        a.status_lag = Duration::minutes(2);
        a.late_writes = true;
    })
    .await;
    env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.0.0")]})));
    for _ in 0..4 {
        env.tick().await;
    }
    env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.1.0")]})));
    // The pass that writes 1.1.0, then Sveltos' late write of 1.0.0. dev was still deploying
    // 1.0.0 when 1.1.0 was written, its hash shown: the late write carries it.
    env.tick().await;
    env.pass().await;
    let (code, out, err) = common::promoter(&env, &["explain", "app"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("redeploy: Helm for the spec promoter wrote; a feature counts once its hash is not the one it had before the write"),
        "{out}"
    );
    assert!(
        out.contains("[not yet: Sveltos has not redeployed it for its current spec yet]"),
        "{out}"
    );
    // A change Sveltos does not redeploy.
    assert!(ticks_to_complete(&env, 30).await.is_some());
    let mut revised = json!({"helmCharts": [chart("1.1.0")]});
    revised["maxUpdate"] = json!("50%");
    env.apply_promotion(&promotion(revised));
    env.tick().await;
    let (_, out, _) = common::promoter(&env, &["explain", "app"]);
    assert!(
        out.contains("redeploy: nothing: the last spec change touches no deployment hash"),
        "{out}"
    );
    // A revision written while dev's summary shows no status of its spec yet (Sveltos copied
    // 1.2.0 and has not got to it): unsettled, and explain says what that means.
    env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.2.0")]})));
    env.tick().await;
    env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.3.0")]})));
    env.tick().await;
    let (_, out, _) = common::promoter(&env, &["explain", "app"]);
    assert!(
        out.contains("redeploy: Helm for the spec promoter wrote; when promoter wrote it a summary showed no status of the spec before it yet, so a feature counts once Sveltos wrote a status strictly after the spec (API server times), or 10 minutes after the spec write"),
        "{out}"
    );
}

/// Issue 45: a rollback whose Sveltos answers within the same second (its spec copy, the
/// `Provisioning` and the `Provisioned` of the good revision all stamped in the second of
/// promoter's profile write: it redeploys what the clusters ran before at once) rolls every stage
/// back within two passes of that stage's summaries running the good revision, never after the
/// grace. staging was failing when its rollback was written, so the write is unsettled: only
/// content (the hashes Sveltos reported for that revision when it completed) can tell.
#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_answered_within_the_same_second_never_waits_for_the_grace() {
    let mut env = Env::new(common::DEV_STAGING_PROD).await;
    env.addon.default_deploy_time = Duration::zero();
    env.addon.cached_redeploys = true;
    let name =
        common::completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let mut p: ClusterPromotion = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    // The stages the 3.6.0 run reached (production still runs 3.5.2).
    let stages = [("dev", "dev"), ("staging", "staging")];
    // Per stage: the pass after which its summaries first ran 3.5.2 again (its profile carrying
    // it), and the pass whose status says it rolled back.
    let mut ran: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rolled: BTreeMap<&str, usize> = BTreeMap::new();
    let mut rolling = false;
    for pass in 1..=120 {
        let report = env.pass().await;
        let phase = report
            .promotions
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.phase);
        rolling |= phase == Some(Phase::RollingBack);
        for (stage, _) in stages {
            let said = env
                .description(&name, stage)
                .is_some_and(|d| d.starts_with("Rolled back to revision"));
            if rolling && said {
                rolled.entry(stage).or_insert(pass);
            }
        }
        if phase == Some(Phase::RolledBack) {
            break;
        }
        env.addon.reconcile(&env.server, env.now());
        for (stage, label) in stages {
            let profile = format!("{name}-{stage}");
            if rolling
                && env.chart_version(&profile).as_deref() == Some("3.5.2")
                && truly_deployed(&env, &profile, label).is_ok()
            {
                ran.entry(stage).or_insert(pass);
            }
        }
        env.advance(Duration::minutes(1));
    }
    for (stage, _) in stages {
        let (Some(r), Some(b)) = (ran.get(stage), rolled.get(stage)) else {
            panic!("{stage}: ran 3.5.2 after pass {ran:?}, rolled back in pass {rolled:?}");
        };
        assert!(
            *b <= r + 2,
            "{stage}: ran 3.5.2 after pass {r}, said rolled back only in pass {b} ({})",
            env.description(&name, stage).unwrap_or_default()
        );
    }
    // What the revision stored, and what `explain` says of it.
    let (code, out, err) = common::promoter(&env, &["explain", &name]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "a summary whose features carry the hashes Sveltos reported for this spec when revision"
        ),
        "{out}"
    );
}

/// Issue 45, forward: a revision written while dev still deploys (or fails) the previous one, every
/// summary already showing that revision's hash: the write is judged by content (the hashes the
/// pass saw are every hash a status of the previous revision can carry), so a Sveltos answering
/// in the second of the write completes dev at the next pass, not after the grace.
#[tokio::test]
async fn a_revision_written_while_the_previous_one_deploys_never_waits_for_the_grace() {
    for failing in [false, true] {
        let env = env_with(|a| a.default_deploy_time = Duration::zero()).await;
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.0.0")]})));
        assert!(ticks_to_complete(&env, 30).await.is_some());
        let mut env = env;
        // 1.1.0 deploys slowly on dev (or fails there) …
        env.addon.default_deploy_time = Duration::minutes(30);
        if failing {
            env.addon.failing.insert("dev/dev01".into(), env.now());
            env.addon
                .failing_only
                .insert("dev/dev01".into(), "1.1.0".into());
        }
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.1.0")]})));
        for _ in 0..3 {
            env.tick().await;
        }
        // … when 1.2.0 comes, which Sveltos deploys at once.
        env.addon.default_deploy_time = Duration::zero();
        env.addon.failing.clear();
        env.apply_promotion(&promotion(json!({"helmCharts": [chart("1.2.0")]})));
        let mut answered = None;
        for pass in 1..=20 {
            env.pass().await;
            assert_deployed_before_passed(&env);
            let done = env
                .promotion("app")
                .and_then(|p| p.status)
                .and_then(|s| s.stages)
                .and_then(|s| s.into_iter().find(|e| e.name == "dev"))
                .is_some_and(|e| e.last_successful_applied_time.is_some());
            if let Some(a) = answered
                && done
            {
                assert!(
                    pass <= a + 2,
                    "failing {failing}: Sveltos answered after pass {a}, dev done in pass {pass}"
                );
                break;
            }
            assert!(pass < 20, "failing {failing}: dev never done");
            env.addon.reconcile(&env.server, env.now());
            if answered.is_none()
                && env.chart_version("app-dev").as_deref() == Some("1.2.0")
                && truly_deployed(&env, "app-dev", "dev").is_ok()
            {
                answered = Some(pass);
            }
            env.advance(Duration::minutes(1));
        }
    }
}
