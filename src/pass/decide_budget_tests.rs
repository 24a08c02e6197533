//! The failure budget (`promoter.dev/failure-budget`, `pass::budget`), rule by rule: what counts
//! as failing, the budget spent per run, and what a stage over its budget does. Played with the
//! same helpers as the rest of the decision's tests.

use super::*;
use crate::annotations::{BUDGETED, budgeted};
use crate::settings::{FAILURE_BUDGET, PROGRESS_DEADLINE};

fn annotate(p: &mut ClusterPromotion, key: &str, value: &str) {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
}

/// dev (one cluster), then production (`n` clusters `prod/prod01`…); production soaks `soak`.
fn fleet_of(n: usize) -> World {
    let mut clusters = vec![cluster("dev", "dev01")];
    clusters.extend((1..=n).map(|i| cluster("prod", &format!("prod{i:02}"))));
    World {
        clusters,
        ..Default::default()
    }
}

fn two_stages(soak: Option<&str>) -> Value {
    let trigger = match soak {
        Some(d) => json!({"auto": {"delay": d}}),
        None => json!({"auto": {}}),
    };
    json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": trigger}
    ])
}

/// Every summary of `profile` in `status`, those of `clusters` in `other`.
fn summarize_but(w: &mut World, profile: &str, status: &str, clusters: &[&str], other: &str) {
    let mut all = summaries_for(w, profile, status);
    let odd = summaries_for(w, profile, other);
    for cs in all.iter_mut() {
        if clusters.contains(&cs.spec.cluster_name.as_str()) {
            *cs = odd
                .iter()
                .find(|o| o.spec.cluster_name == cs.spec.cluster_name)
                .unwrap()
                .clone();
        }
    }
    w.summaries
        .insert(profile.into(), all.into_iter().collect());
    // As the pass lists them (with the inventory).
    w.summaries_listed.insert(profile.into());
}

/// Runs passes from minute `min` until stage production is reached; returns the next minute.
fn to_production(p: &mut ClusterPromotion, w: &mut World, min: i64) -> i64 {
    let mut m = min;
    while p
        .status
        .as_ref()
        .and_then(|s| s.current_stage_name.as_deref())
        != Some("production")
    {
        run(p, w, m);
        if w.profiles.contains_key("kyverno-dev") {
            summarize(w, "kyverno-dev", "Provisioned");
        }
        m += 1;
        assert!(m < min + 10, "production is reached");
    }
    m
}

fn named(p: &ClusterPromotion, stage: &str) -> Vec<String> {
    budgeted(p)
        .map(|b| {
            b.of_stage(stage)
                .iter()
                .map(|c| c.cluster.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn spent_events(d: &Decision) -> Vec<String> {
    d.events
        .iter()
        .filter(|e| e.reason == "FailureBudgetSpent")
        .map(|e| e.message.clone())
        .collect()
}

#[test]
fn twenty_clusters_at_ten_percent_pass_with_two_failing_and_hold_with_three() {
    for (failing, passes) in [(2, true), (3, false)] {
        let mut p = promotion(two_stages(None));
        annotate(&mut p, FAILURE_BUDGET, "production=10%");
        let mut w = fleet_of(20);
        let m = to_production(&mut p, &mut w, 0);
        let broken: Vec<String> = (1..=failing).map(|i| format!("prod{i:02}")).collect();
        let broken: Vec<&str> = broken.iter().map(String::as_str).collect();
        summarize_but(
            &mut w,
            "kyverno-production",
            "Provisioned",
            &broken,
            "Failed",
        );
        let d = run(&mut p, &mut w, m);
        if passes {
            assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
            assert_eq!(named(&p, "production"), ["prod/prod01", "prod/prod02"]);
            let spent = spent_events(&d);
            assert_eq!(spent.len(), 1, "{:?}", d.events);
            assert!(
                spent[0].starts_with(
                    "Stage production: 2 of the failure budget 10% (2 of 20 clusters) spent: prod/prod01 (cluster prod/prod01: feature Helm Failed: values don't meet the specifications); prod/prod02 ("
                ),
                "{}",
                spent[0]
            );
            assert!(
                d.events
                    .iter()
                    .any(|e| e.reason == "FailureBudgetSpent" && e.warning)
            );
            // Quiet afterwards: announced once.
            let d = run(&mut p, &mut w, m + 1);
            assert!(spent_events(&d).is_empty());
            assert!(!d.writes(), "{:?}", d.actions);
        } else {
            assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
            assert!(
                d.summary.contains(
                    "3 clusters failing, more than the failure budget of 10% (2 of 20 clusters): prod/prod01"
                ),
                "{}",
                d.summary
            );
            assert!(
                named(&p, "production").is_empty(),
                "over budget, nothing is spent"
            );
            assert!(spent_events(&d).is_empty());
            assert_eq!(
                p.status.as_ref().unwrap().current_stage_name.as_deref(),
                Some("production")
            );
        }
    }
}

#[test]
fn without_a_budget_one_failing_cluster_holds_as_upstream_and_nothing_is_recorded() {
    let mut p = promotion(two_stages(None));
    let mut w = fleet_of(20);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod07"],
        "Failed",
    );
    let d = run(&mut p, &mut w, m);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    assert!(
        d.summary
            .starts_with("stage production: deployment failed: cluster prod/prod"),
        "{}",
        d.summary
    );
    assert!(budgeted(&p).is_none());
    // `0` is the same as absent.
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "0");
    let mut w = fleet_of(20);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod07"],
        "Failed",
    );
    assert_eq!(run(&mut p, &mut w, m).phase, Phase::Failed);
    assert!(budgeted(&p).is_none());
}

/// What counts as failing: a Failed feature at once, a cluster not ready (unreachable) at once, a
/// cluster still deploying only once the stage's progress deadline has fallen.
#[test]
fn failing_is_a_failed_feature_an_unreachable_cluster_or_deploying_past_the_deadline() {
    // Unreachable.
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "1");
    let mut w = fleet_of(3);
    let m = to_production(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-production", "Provisioned");
    w.clusters
        .iter_mut()
        .find(|c| c.name == "prod02")
        .unwrap()
        .ready = false;
    let d = run(&mut p, &mut w, m);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(named(&p, "production"), ["prod/prod02"]);
    assert!(
        spent_events(&d)[0].ends_with("prod/prod02 (unreachable: not ready in the inventory)"),
        "{:?}",
        spent_events(&d)
    );

    // Deploying: waits until the deadline, then counts.
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "1");
    annotate(&mut p, PROGRESS_DEADLINE, "production=10m");
    let mut w = fleet_of(3);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod03"],
        "Provisioning",
    );
    let d = run(&mut p, &mut w, m);
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert!(
        d.summary
            .contains("ClusterSummary kyverno-production-sveltos-prod03 is not yet provisioned."),
        "{}",
        d.summary
    );
    assert!(budgeted(&p).is_none());
    let d = run(&mut p, &mut w, m + 10);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(named(&p, "production"), ["prod/prod03"]);
    assert!(
        spent_events(&d)[0].contains("prod/prod03 (not deployed by the progress deadline: "),
        "{:?}",
        spent_events(&d)
    );
    assert!(
        crate::annotations::failed(&p).is_none(),
        "the deadline is met"
    );
}

/// Beyond the budget at the deadline, the failure policy acts as without a budget.
#[test]
fn over_budget_at_the_deadline_the_stage_fails_as_without_a_budget() {
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "1");
    annotate(&mut p, PROGRESS_DEADLINE, "production=10m");
    let mut w = fleet_of(3);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod02", "prod03"],
        "Provisioning",
    );
    let d = run(&mut p, &mut w, m + 10);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    let f = crate::annotations::failed(&p).expect("the miss is recorded");
    assert!(
        f.why
            .contains("2 clusters failing, more than the failure budget of 1 (1 of 3 clusters)"),
        "{}",
        f.why
    );
}

/// The budget spent once in a run is not spent again: a counted cluster that goes back to
/// deploying stays counted until it runs the revision, so a second cluster failing meanwhile is
/// beyond a budget of one (two clusters outside the revision).
#[test]
fn a_counted_cluster_still_outside_the_revision_keeps_its_share_of_the_budget() {
    let mut p = promotion(two_stages(Some("30m")));
    annotate(&mut p, FAILURE_BUDGET, "production=1");
    let mut w = fleet_of(2);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod01"],
        "Failed",
    );
    let d = run(&mut p, &mut w, m);
    assert_eq!(d.phase, Phase::Soaking, "{}", d.summary);
    assert_eq!(named(&p, "production"), ["prod/prod01"]);
    // prod01 is redeployed (deploying, not failing); prod02 fails.
    let mut all = summaries_for(&w, "kyverno-production", "Provisioning");
    let failed = summaries_for(&w, "kyverno-production", "Failed");
    all[1] = failed[1].clone();
    w.summaries
        .insert("kyverno-production".into(), all.into_iter().collect());
    let d = run(&mut p, &mut w, m + 1);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    assert!(
        d.summary
            .contains("2 clusters failing, more than the failure budget of 1 (1 of 2 clusters)"),
        "{}",
        d.summary
    );
    // Both run the revision again: the stage passes once its soak is over, and nothing is named.
    summarize(&mut w, "kyverno-production", "Provisioned");
    let d = run(&mut p, &mut w, m + 2);
    assert!(named(&p, "production").is_empty(), "{:?}", budgeted(&p));
    assert!(
        !p.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(BUDGETED)
    );
    assert_eq!(d.phase, Phase::Soaking, "{}", d.summary);
}

#[test]
fn a_budget_never_passes_a_stage_the_revision_runs_nowhere() {
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "100%");
    let mut w = fleet_of(2);
    let m = to_production(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-production", "Failed");
    let d = run(&mut p, &mut w, m);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    assert!(
        d.summary
            .contains("No matching cluster runs the revision: prod/prod01"),
        "{}",
        d.summary
    );
}

/// A new revision starts with the whole budget; a cluster that failed the previous run counts as
/// deployed only once it runs the new revision, and counts against the new run's budget while it
/// fails.
#[test]
fn a_new_revision_starts_with_the_whole_budget() {
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "production=10%");
    let mut w = fleet_of(20);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod01", "prod02"],
        "Failed",
    );
    assert_eq!(run(&mut p, &mut w, m).phase, Phase::Complete);
    assert_eq!(named(&p, "production"), ["prod/prod01", "prod/prod02"]);
    // A new revision: the restart drops the record.
    let spec = p.spec.profile_spec.as_mut().unwrap();
    spec.0["helmCharts"][0]["chartVersion"] = json!("3.5.3");
    let d = run(&mut p, &mut w, m + 1);
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert!(
        budgeted(&p).is_none(),
        "a new run starts with the whole budget"
    );
    // Stage dev on its way; production keeps the old revision meanwhile, and its budgeted
    // clusters of the old run are not named by the new run.
    let m = to_production(&mut p, &mut w, m + 2);
    // prod01 still fails; two others fail in this run: three, beyond the new run's budget.
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod01", "prod05", "prod06"],
        "Failed",
    );
    assert_eq!(run(&mut p, &mut w, m).phase, Phase::Failed);
    // prod01 recovers with the new revision: two, within it.
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod05", "prod06"],
        "Failed",
    );
    let d = run(&mut p, &mut w, m + 1);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(named(&p, "production"), ["prod/prod05", "prod/prod06"]);
}

/// A stage promoted past keeps naming its budgeted clusters until each runs the revision or
/// leaves the stage.
#[test]
fn budgeted_clusters_stay_named_until_they_run_the_revision_or_leave_the_stage() {
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "2");
    let mut w = fleet_of(4);
    let m = to_production(&mut p, &mut w, 0);
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod01", "prod02"],
        "Failed",
    );
    assert_eq!(run(&mut p, &mut w, m).phase, Phase::Complete);
    assert_eq!(named(&p, "production"), ["prod/prod01", "prod/prod02"]);
    // Still failing: still named, nothing written.
    assert!(!run(&mut p, &mut w, m + 1).writes());
    // prod01 runs the revision; prod02 leaves the stage.
    summarize_but(
        &mut w,
        "kyverno-production",
        "Provisioned",
        &["prod02"],
        "Failed",
    );
    w.clusters.retain(|c| c.name != "prod02");
    run(&mut p, &mut w, m + 2);
    assert!(budgeted(&p).is_none(), "{:?}", budgeted(&p));
}

/// A stage promoted past keeps naming its budgeted clusters while the rollout goes on.
#[test]
fn a_stage_promoted_past_keeps_naming_its_budgeted_clusters() {
    let mut p = promotion(two_stages(None));
    annotate(&mut p, FAILURE_BUDGET, "dev=1");
    let mut w = fleet_of(2);
    w.clusters.push(cluster("dev", "dev02"));
    run(&mut p, &mut w, 0);
    summarize_but(&mut w, "kyverno-dev", "Provisioned", &["dev01"], "Failed");
    let d = run(&mut p, &mut w, 1);
    assert_eq!(named(&p, "dev"), ["dev/dev01"], "{:?}", d.actions);
    assert_eq!(
        p.status.as_ref().unwrap().current_stage_name.as_deref(),
        Some("production")
    );
    // Production deploys: dev01 still fails, and is still named.
    run(&mut p, &mut w, 2);
    assert_eq!(named(&p, "dev"), ["dev/dev01"]);
    summarize(&mut w, "kyverno-production", "Provisioned");
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(named(&p, "dev"), ["dev/dev01"]);
    assert!(!run(&mut p, &mut w, 4).writes());
    assert_eq!(named(&p, "dev"), ["dev/dev01"]);
}
