//! Which Events a pass decides: machine-readable reasons, upstream's texts, and each transition
//! exactly once (a pass that writes nothing emits nothing).

use super::*;

fn reasons(d: &Decision) -> Vec<&str> {
    d.events.iter().map(|e| e.reason.as_str()).collect()
}

/// Runs the pass at `min` with `health`, checking the quiet rule on every decision.
fn step(p: &mut ClusterPromotion, w: &mut World, min: i64, health: &HealthResults) -> Decision {
    let d = decide(p, w, health, &ctx(min));
    if !d.events.is_empty() {
        assert!(
            d.status.is_some(),
            "an Event without a status change: {d:#?}"
        );
    }
    apply(p, w, &d);
    d
}

#[test]
fn a_rollout_has_one_reasoned_event_per_transition_with_upstream_texts() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    let none = HealthResults::new();
    let d = step(&mut p, &mut w, 0, &none);
    assert_eq!(reasons(&d), ["StageProvisioning"]);
    assert_eq!(d.events[0].message, "Provisioning stage dev");
    assert!(
        step(&mut p, &mut w, 1, &none).events.is_empty(),
        "deploying"
    );
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = step(&mut p, &mut w, 2, &none);
    assert_eq!(reasons(&d), ["StageProvisioned"]);
    assert_eq!(d.events[0].message, "Stage dev provisioned");
    let d = step(&mut p, &mut w, 4, &none);
    assert_eq!(reasons(&d), ["StageProvisioning"]);
    assert_eq!(d.events[0].message, "Provisioning stage staging");
    summarize(&mut w, "kyverno-staging", "Provisioned");
    let d = step(&mut p, &mut w, 5, &none);
    assert_eq!(reasons(&d), ["StageProvisioned", "AwaitingApproval"]);
    for min in 6..9 {
        assert!(step(&mut p, &mut w, min, &none).events.is_empty());
    }
    set_approved(&mut p, 1, Some(true));
    let d = step(&mut p, &mut w, 9, &none);
    assert_eq!(reasons(&d), ["StageProvisioning"]);
    summarize(&mut w, "kyverno-production", "Provisioned");
    let d = step(&mut p, &mut w, 10, &none);
    assert_eq!(reasons(&d), ["StageProvisioned", "RolloutComplete"]);
    assert_eq!(
        d.events[1].message,
        "ClusterPromotion kyverno complete: stage production provisioned"
    );
    assert!(d.events.iter().all(|e| !e.warning));
    for min in 11..14 {
        let d = step(&mut p, &mut w, min, &none);
        assert!(!d.writes() && d.events.is_empty(), "{d:#?}");
    }
}

#[test]
fn failing_checks_and_their_recovery_are_announced_once_each() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"postDelayHealthChecks": [{"name": "c", "featureID": "Helm"}]}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    let verdict = |v: HealthVerdict| HealthResults::from([("dev".to_string(), v)]);
    let failing = |m: &str| verdict(HealthVerdict::Failing(m.into()));
    step(&mut p, &mut w, 0, &HealthResults::new());
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = step(
        &mut p,
        &mut w,
        1,
        &failing("cluster dev/dev01: check c: not ready"),
    );
    assert_eq!(reasons(&d), ["StageProvisioned", "ChecksFailing"]);
    assert!(d.events[1].warning);
    assert_eq!(
        d.events[1].message,
        "Stage dev: health checks failing: cluster dev/dev01: check c: not ready"
    );
    // Still failing, another message: the status changes, no new Event.
    let d = step(
        &mut p,
        &mut w,
        2,
        &failing("cluster dev/dev01: check c: 1/3 ready"),
    );
    assert!(d.status.is_some() && d.events.is_empty(), "{d:#?}");
    assert!(
        step(
            &mut p,
            &mut w,
            3,
            &failing("cluster dev/dev01: check c: 1/3 ready")
        )
        .events
        .is_empty()
    );
    // Not evaluated (the engine was down) is no recovery, and ends the failing episode.
    let d = step(
        &mut p,
        &mut w,
        4,
        &verdict(HealthVerdict::NotEvaluated("timeout".into())),
    );
    assert!(d.events.is_empty());
    let d = step(
        &mut p,
        &mut w,
        5,
        &failing("cluster dev/dev01: check c: not ready"),
    );
    assert_eq!(reasons(&d), ["ChecksFailing"]);
    let d = step(&mut p, &mut w, 6, &verdict(HealthVerdict::Passed));
    assert_eq!(reasons(&d), ["ChecksPassing", "StageProvisioning"]);
    assert_eq!(d.events[0].message, "Stage dev: health checks pass again");
    assert!(!d.events[0].warning);
}

#[test]
fn checks_passing_at_the_first_look_is_no_recovery() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"manual": {"postDelayHealthChecks": [{"name": "c", "featureID": "Helm"}]}}},
        {"name": "prod"}
    ]));
    let mut w = fleet();
    step(&mut p, &mut w, 0, &HealthResults::new());
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let passed = HealthResults::from([("dev".to_string(), HealthVerdict::Passed)]);
    let d = step(&mut p, &mut w, 1, &passed);
    assert_eq!(reasons(&d), ["StageProvisioned", "AwaitingApproval"]);
}

#[test]
fn a_window_opening_is_announced_when_it_lets_the_stage_go() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"promotionWindow": {"from": "0 7 * * *", "to": "0 8 * * *"}}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    let none = HealthResults::new();
    step(&mut p, &mut w, 0, &none);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    assert_eq!(
        reasons(&step(&mut p, &mut w, 1, &none)),
        ["StageProvisioned"]
    );
    for min in [2, 30, 59] {
        assert!(step(&mut p, &mut w, min, &none).events.is_empty());
    }
    let d = step(&mut p, &mut w, 60, &none);
    assert_eq!(reasons(&d), ["WindowOpened", "StageProvisioning"]);
    assert_eq!(d.events[0].message, "Stage dev: promotion window open");
    assert_eq!(d.events[1].message, "Provisioning stage prod");
}

#[test]
fn a_blocked_promotion_warns_once() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    step(&mut p, &mut w, 0, &HealthResults::new());
    p.spec.stages[0].cluster_selector =
        serde_json::from_value(json!({"matchExpressions": [{"key": "env", "operator": "Bogus"}]}))
            .unwrap();
    let d = step(&mut p, &mut w, 1, &HealthResults::new());
    assert_eq!(reasons(&d), ["Blocked"]);
    assert!(d.events[0].warning);
    assert!(
        step(&mut p, &mut w, 2, &HealthResults::new())
            .events
            .is_empty()
    );
}
