//! A stage that selects no cluster never passes silently (`empty_stage`): it holds the rollout,
//! Blocked, unless `promoter.dev/allow-empty-stages` lets it pass as upstream's does.

use super::*;
use crate::pass::phase::EMPTY_STAGE;
use crate::settings::{ALLOW_EMPTY_STAGES, PROGRESS_DEADLINE};

fn annotate(p: &mut ClusterPromotion, key: &str, value: &str) {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
}

fn stages(staging: Value) -> Value {
    json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "staging", "clusterSelector": staging},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ])
}

/// Passes from `from` on, Sveltos deploying every profile between them, until the decision
/// writes nothing twice in a row (settled); the last decision and the minute after it.
fn settle(p: &mut ClusterPromotion, w: &mut World, from: i64) -> (i64, Decision) {
    let mut quiet = 0;
    for min in from..from + 40 {
        let d = run(p, w, min);
        let names: Vec<String> = w
            .profiles
            .iter()
            .filter(|(_, cp)| cp.spec.fields.contains_key("clusterSelector"))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            summarize(w, &name, "Provisioned");
        }
        quiet = if d.writes() { 0 } else { quiet + 1 };
        if quiet == 2 {
            return (min + 1, d);
        }
    }
    panic!("never settled: {:?}", p.status);
}

#[test]
fn a_stage_that_selects_nothing_holds_the_rollout_unless_allowed() {
    struct Case {
        what: &'static str,
        staging: Value,
        allow: Option<&'static str>,
        /// The stage it ends at, and whether it is held there as empty.
        at: &'static str,
        held: bool,
    }
    let typo = json!({"matchLabels": {"env": "stagin"}});
    let cases = [
        Case {
            what: "a typo'd selector holds",
            staging: typo.clone(),
            allow: None,
            at: "staging",
            held: true,
        },
        Case {
            what: "allowed for that stage: passes as upstream",
            staging: typo.clone(),
            allow: Some("staging=true"),
            at: "production",
            held: false,
        },
        Case {
            what: "allowed for every stage",
            staging: typo.clone(),
            allow: Some("true"),
            at: "production",
            held: false,
        },
        Case {
            what: "allowed but for this stage",
            staging: typo.clone(),
            allow: Some("true, staging=false"),
            at: "staging",
            held: true,
        },
        Case {
            what: "explicitly not allowed",
            staging: typo.clone(),
            allow: Some("false"),
            at: "staging",
            held: true,
        },
        Case {
            what: "allowed for another stage only",
            staging: typo,
            allow: Some("production=true"),
            at: "staging",
            held: true,
        },
        Case {
            what: "an empty selector (an approval step without clusters) holds",
            staging: json!({}),
            allow: None,
            at: "staging",
            held: true,
        },
        Case {
            what: "an empty selector allowed",
            staging: json!({}),
            allow: Some("staging=true"),
            at: "production",
            held: false,
        },
        Case {
            what: "a selector that selects a cluster",
            staging: json!({"matchLabels": {"env": "staging"}}),
            allow: None,
            at: "production",
            held: false,
        },
    ];
    for c in cases {
        let mut p = promotion(stages(c.staging.clone()));
        if let Some(v) = c.allow {
            annotate(&mut p, ALLOW_EMPTY_STAGES, v);
        }
        let mut w = fleet();
        let (_, d) = settle(&mut p, &mut w, 0);
        let status = p.status.clone().unwrap();
        assert_eq!(
            status.current_stage_name.as_deref(),
            Some(c.at),
            "{}: {}",
            c.what,
            d.summary
        );
        assert_eq!(
            d.empty_stage.as_deref(),
            c.held.then_some("staging"),
            "{}",
            c.what
        );
        if c.held {
            assert_eq!(d.phase, Phase::Blocked, "{}", c.what);
            assert_eq!(
                description(&p, "staging").split(" (20").next(),
                Some(EMPTY_STAGE)
            );
            assert!(
                !w.profiles.contains_key("kyverno-production"),
                "{}: production never gets what no earlier stage ran",
                c.what
            );
        } else {
            assert_eq!(d.phase, Phase::Complete, "{}: {}", c.what, d.summary);
        }
    }
}

/// What the held stage says, once: the selector, the inventory's nearest labels and the two ways
/// on, a `Blocked` Event when the hold begins and none after; a pass that learns nothing new
/// writes nothing.
#[test]
fn a_held_empty_stage_says_why_once() {
    let mut p = promotion(stages(json!({"matchLabels": {"env": "stagin"}})));
    let mut w = fleet();
    let mut events = Vec::new();
    for min in 0..6 {
        let d = run(&mut p, &mut w, min);
        events.extend(
            d.events
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone())),
        );
        summarize(&mut w, "kyverno-dev", "Provisioned");
    }
    let message = "stage staging selects no cluster: clusterSelector env=stagin: none of the 3 \
                   clusters of the inventory matches (nearest labels: env=staging (1 cluster)); \
                   correct the selector, or let the stage pass empty as Sveltos does with the \
                   annotation promoter.dev/allow-empty-stages: \"staging=true\"";
    assert_eq!(
        stage_status(&p, "staging").failure_message.as_deref(),
        Some(message)
    );
    let blocked: Vec<&(String, String)> = events.iter().filter(|(r, _)| r == "Blocked").collect();
    assert_eq!(
        blocked,
        [&(
            "Blocked".to_string(),
            format!("ClusterPromotion kyverno is blocked: {message}")
        )]
    );
    let d = run(&mut p, &mut w, 7);
    assert!(!d.writes(), "{d:?}");
    assert_eq!(d.summary, format!("blocked: {message}"));
    assert_eq!(crate::pass::phase::recorded(&p), Phase::Blocked);
}

/// The hold ends by itself when a cluster the selector selects joins (a stage prepared before its
/// clusters exist): the stage deploys there and the rollout goes on.
#[test]
fn a_cluster_joining_an_empty_stage_lets_it_go_on() {
    let mut p = promotion(stages(json!({"matchLabels": {"env": "qa"}})));
    let mut w = fleet();
    let (min, d) = settle(&mut p, &mut w, 0);
    assert_eq!(d.empty_stage.as_deref(), Some("staging"));
    w.clusters.push(cluster("qa", "qa01"));
    let (_, d) = settle(&mut p, &mut w, min);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert!(
        stage_status(&p, "staging")
            .last_successful_applied_time
            .is_some()
    );
}

/// Clusters that are all paused are still selected (skipped and named, as before): not empty.
/// The first stage and the last one hold as any other.
#[test]
fn paused_clusters_are_selected_and_the_first_and_last_stages_hold_too() {
    let mut p = promotion(stages(json!({"matchLabels": {"env": "staging"}})));
    let mut w = fleet();
    w.clusters[1].paused = true;
    let (_, d) = settle(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);

    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "devv"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    let (_, d) = settle(&mut p, &mut w, 0);
    assert_eq!(
        (d.phase, d.empty_stage.as_deref()),
        (Phase::Blocked, Some("dev"))
    );
    assert!(
        w.profiles.contains_key("kyverno-dev"),
        "its profile is applied"
    );

    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "production"}}}
    ]));
    let mut w = fleet();
    let (_, d) = settle(&mut p, &mut w, 0);
    assert_eq!(
        (d.phase, d.empty_stage.as_deref()),
        (Phase::Blocked, Some("production"))
    );
    assert!(
        !is_complete(&p),
        "never complete through an empty last stage"
    );
}

/// A progress deadline keeps running while an empty stage holds: a stage that cannot complete
/// misses it, and the failure policy acts.
#[test]
fn an_empty_stage_misses_its_progress_deadline() {
    let mut p = promotion(stages(json!({"matchLabels": {"env": "stagin"}})));
    annotate(&mut p, PROGRESS_DEADLINE, "staging=10m");
    let mut w = fleet();
    let (min, d) = settle(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(d.summary.contains("(progress deadline "), "{}", d.summary);
    let (_, d) = settle(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    assert!(d.summary.contains("selects no cluster"), "{}", d.summary);
}
