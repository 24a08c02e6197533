//! Issue 31: the phase a decision reaches and the description it stores say the same thing, and
//! both say what is true: a failing deployment is `Failing` while its progress deadline is ahead
//! (Sveltos retries; the failure policy acts after it), `Failed` only where nothing but a person
//! will act; a provisioned stage that redeploys never claims failing health checks.

use super::*;
use crate::pass::phase::{DEPLOYMENT_FAILED, of_description};
use crate::settings::{FAILURE_POLICY, PROGRESS_DEADLINE};

fn annotate(p: &mut ClusterPromotion, key: &str, value: &str) {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
}

/// The stored description of `stage` without its timestamp.
fn text(p: &ClusterPromotion, stage: &str) -> String {
    crate::pass::stage_status::description_text(&description(p, stage)).to_string()
}

/// The phase `status` reads from what the decision stored equals the decision's own.
fn agrees(p: &ClusterPromotion, d: &Decision) {
    let stage = d.stage.as_deref().unwrap();
    let last = p.spec.stages.last().is_some_and(|s| s.name == stage);
    assert_eq!(
        of_description(&text(p, stage), last),
        d.phase,
        "{}: {}",
        text(p, stage),
        d.summary
    );
}

#[test]
fn a_failing_deployment_without_a_deadline_is_failed_and_says_nothing_will_act() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Failed");
    let d = run(&mut p, &mut w, 1);
    assert_eq!(d.phase, Phase::Failed);
    assert_eq!(text(&p, "dev"), DEPLOYMENT_FAILED);
    agrees(&p, &d);
}

#[test]
fn a_failing_deployment_before_its_deadline_is_failing_until_then() {
    for (policy, then) in [
        ("halt", "halt"),
        ("rollback", "halt (no completed revision to roll back to)"),
    ] {
        let mut p = promotion(three_stages());
        annotate(&mut p, PROGRESS_DEADLINE, "30m");
        annotate(&mut p, FAILURE_POLICY, policy);
        let mut w = fleet();
        run(&mut p, &mut w, 0);
        summarize(&mut w, "kyverno-dev", "Failed");
        let d = run(&mut p, &mut w, 1);
        assert_eq!(d.phase, Phase::Failing, "{policy}: {}", d.summary);
        assert_eq!(
            text(&p, "dev"),
            format!("Deployment Failing: retrying until 2026-02-16T06:30:00Z, then {then}")
        );
        assert!(
            d.summary.contains("deployment failing")
                && d.summary.contains(&format!(
                    "Sveltos retries until 2026-02-16T06:30:00Z, then {then}"
                )),
            "{}",
            d.summary
        );
        assert_eq!(d.next_check, Some(t(30)), "the pass that acts on it");
        agrees(&p, &d);
        for min in 2..30 {
            let d = run(&mut p, &mut w, min);
            assert!(!d.writes(), "failing, quietly: {d:#?}");
            assert_eq!(d.phase, Phase::Failing);
        }
        let d = run(&mut p, &mut w, 30);
        assert_eq!(d.phase, Phase::Failed, "{policy}: the deadline fell");
        agrees(&p, &d);
    }
}

#[test]
fn a_failing_deployment_under_a_rollback_policy_says_it_rolls_back() {
    let mut p = promotion(three_stages());
    p.spec.stages[1].trigger = None;
    annotate(&mut p, PROGRESS_DEADLINE, "30m");
    annotate(&mut p, FAILURE_POLICY, "rollback");
    let mut w = fleet();
    let (min, d) = run_to(&mut p, &mut w, 0, "production");
    assert_eq!(d.phase, Phase::Complete);
    new_revision(&mut p, "3.6.0");
    run(&mut p, &mut w, min + 1);
    summarize(&mut w, "kyverno-dev", "Failed");
    let d = run(&mut p, &mut w, min + 2);
    assert_eq!(d.phase, Phase::Failing, "{}", d.summary);
    assert!(
        text(&p, "dev").ends_with(", then rollback"),
        "{}",
        text(&p, "dev")
    );
    agrees(&p, &d);
}

#[test]
fn a_provisioned_stage_that_redeploys_or_fails_never_claims_failing_checks() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "1h"}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.phase, Phase::Soaking);
    agrees(&p, &d);
    // A cluster redeploys: upstream would say "Awaiting Health Checks to Pass"; there are none.
    summarize(&mut w, "kyverno-dev", "Provisioning");
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.phase, Phase::Progressing);
    assert_eq!(text(&p, "dev"), "Clusters are being provisioned");
    agrees(&p, &d);
    summarize(&mut w, "kyverno-dev", "Failed");
    let d = run(&mut p, &mut w, 4);
    assert_eq!(d.phase, Phase::Failed);
    assert_eq!(text(&p, "dev"), DEPLOYMENT_FAILED);
    agrees(&p, &d);
    // The failure clears while Sveltos redeploys: provisioning again, then the soak resumes.
    summarize(&mut w, "kyverno-dev", "Provisioning");
    let d = run(&mut p, &mut w, 5);
    assert_eq!(text(&p, "dev"), "Clusters are being provisioned");
    agrees(&p, &d);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = run(&mut p, &mut w, 6);
    assert_eq!(d.phase, Phase::Soaking);
    agrees(&p, &d);
}

/// Every phase a decision reaches on a stage is the one its stored description stands for.
#[test]
fn gates_store_what_their_phase_says() {
    let checks = json!([{"name": "c", "featureID": "Helm"}]);
    let cases = [
        (
            json!({"auto": {"postDelayHealthChecks": checks}}),
            HealthVerdict::Failing("x".into()),
            Phase::ChecksFailing,
        ),
        (
            json!({"auto": {"postDelayHealthChecks": checks}}),
            HealthVerdict::NotEvaluated("y".into()),
            Phase::RunningChecks,
        ),
        (
            json!({"auto": {"preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "d", "name": "j"}]}}),
            HealthVerdict::Passed,
            Phase::RunningChecks,
        ),
        (
            json!({"auto": {"promotionWindow": {"from": "0 7 * * *", "to": "0 8 * * *"}}}),
            HealthVerdict::Passed,
            Phase::WindowClosed,
        ),
        (
            json!({"manual": {}}),
            HealthVerdict::Passed,
            Phase::AwaitingApproval,
        ),
        (
            json!({"auto": {"delay": "1h"}}),
            HealthVerdict::Passed,
            Phase::Soaking,
        ),
    ];
    for (trigger, verdict, phase) in cases {
        let mut p = promotion(
            json!([{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": trigger}, {"name": "prod"}]),
        );
        let mut w = fleet();
        run(&mut p, &mut w, 0);
        summarize(&mut w, "kyverno-dev", "Provisioned");
        let health = HealthResults::from([("dev".to_string(), verdict.clone())]);
        let d = decide(&p, &w, &health, &ctx(1));
        apply(&mut p, &mut w, &d);
        assert_eq!(d.phase, phase, "{trigger}: {}", d.summary);
        agrees(&p, &d);
    }
}
