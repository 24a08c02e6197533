//! The planner's branches that the rollout tests above reach only on their happy side, one test
//! per mutant of `planner.rs` that survived the mutation campaign (docs/src/contributors/mutation-testing.md): each
//! was seen failing with its mutant applied by hand.

use super::*;
use crate::pass::phase::BLOCKED;
use crate::settings::FAILURE_POLICY;

fn annotate(p: &mut ClusterPromotion, key: &str, value: &str) {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
}

/// A problem found mid-rollout blocks the stage the rollout is at: the error goes on its entry,
/// and the status keeps saying where the rollout stands (not stage 1).
#[test]
fn a_promotion_blocked_mid_rollout_says_so_on_its_current_stage() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    let (min, d) = run_to(&mut p, &mut w, 0, "staging");
    assert_eq!(d.phase, Phase::AwaitingApproval);
    annotate(&mut p, FAILURE_POLICY, "rolback");
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::Blocked, "{}", d.summary);
    assert_eq!(d.stage.as_deref(), Some("staging"));
    assert_eq!(
        p.status.as_ref().unwrap().current_stage_name.as_deref(),
        Some("staging")
    );
    assert!(
        stage_status(&p, "staging")
            .failure_message
            .as_deref()
            .is_some_and(|m| m.contains("Unsupported value: \"rolback\"")),
        "{:?}",
        stage_status(&p, "staging").failure_message
    );
    assert!(description(&p, "staging").starts_with(BLOCKED));
    assert_eq!(stage_status(&p, "dev").failure_message, None);
    assert_eq!(d.events.len(), 1, "{:?}", d.events);
    assert_eq!(d.events[0].stage.as_deref(), Some("staging"));
}

/// The stages a run has passed keep their profiles while a later stage waits, and so does every
/// stage of a complete run: a profile deleted or edited by hand is put back, and a leftover
/// preverification profile of a passed stage is removed.
#[test]
fn passed_stages_keep_their_profiles_while_a_later_stage_waits_and_once_complete() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    let (min, d) = run_to(&mut p, &mut w, 0, "staging");
    assert_eq!(d.phase, Phase::AwaitingApproval);
    let kept = w.profiles["kyverno-dev"].clone();
    w.profiles.remove("kyverno-dev");
    let mut leftover = kept.clone();
    leftover.metadata.name = Some("preverification-kyverno-dev".into());
    w.profiles
        .insert("preverification-kyverno-dev".into(), leftover);
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::AwaitingApproval, "{}", d.summary);
    assert!(
        d.actions
            .iter()
            .any(|a| matches!(a, Action::Apply(x) if x.name == "kyverno-dev")),
        "{:?}",
        d.actions
    );
    assert!(
        d.actions
            .iter()
            .chain(&d.after_status)
            .any(|a| matches!(a, Action::Delete { name } if name == "preverification-kyverno-dev")),
        "{:?}",
        d.actions
    );
    assert_eq!(w.profiles["kyverno-dev"].spec, kept.spec);
    assert!(!w.profiles.contains_key("preverification-kyverno-dev"));
    // Complete: the last stage's profile and the earlier ones are repaired alike.
    set_approved(&mut p, 1, Some(true));
    let (min, d) = run_to(&mut p, &mut w, min + 2, "production");
    assert_eq!(d.phase, Phase::Complete);
    assert!(is_complete(&p));
    for name in ["kyverno-dev", "kyverno-production"] {
        let kept = w.profiles[name].clone();
        w.profiles
            .get_mut(name)
            .unwrap()
            .spec
            .fields
            .insert("syncMode".into(), json!("DryRun"));
        let d = run(&mut p, &mut w, min + 1);
        assert_eq!(d.phase, Phase::Complete, "{name}: {}", d.summary);
        assert!(
            d.actions
                .iter()
                .any(|a| matches!(a, Action::Apply(x) if x.name == name)),
            "{name}: {:?}",
            d.actions
        );
        assert_eq!(w.profiles[name].spec, kept.spec, "{name}");
    }
}

/// An older served ClusterProfile CRD drops a field promoter writes: the stage is deployed without
/// it (nothing rewritten), and once passed its failureMessage says so, with one Warning Event;
/// later passes say nothing again; once the CRD keeps the field, the note goes. Other text in a
/// passed stage's failureMessage is left alone, except on the completed stage, where it is cleared.
#[test]
fn a_field_the_served_crd_drops_is_noted_once_on_each_passed_stage() {
    let note = |profile: &str| {
        format!(
            "The served ClusterProfile CRD is older than promoter's schema and dropped \
             spec.driftExclusions from ClusterProfile {profile}; Sveltos deploys without it."
        )
    };
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "2m"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"manual": {}}}
    ]));
    p.spec.profile_spec.as_mut().unwrap().0.insert(
        "driftExclusions".into(),
        json!([{"paths": ["/spec/replicas"]}]),
    );
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let served = w.profiles["kyverno-dev"].clone();
    let prune = |w: &mut World, name: &str| {
        w.profiles
            .get_mut(name)
            .unwrap()
            .spec
            .fields
            .remove("driftExclusions");
        summarize(w, name, "Provisioned");
    };
    prune(&mut w, "kyverno-dev");
    assert_eq!(run(&mut p, &mut w, 1).phase, Phase::Soaking);
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.summary, "promoted dev -> production");
    assert_eq!(stage_status(&p, "dev").failure_message, None);
    summarize(&mut w, "kyverno-production", "Provisioned");
    let d = run(&mut p, &mut w, 4);
    assert_eq!(d.phase, Phase::AwaitingApproval);
    assert!(
        !d.actions
            .iter()
            .chain(&d.after_status)
            .any(|a| matches!(a, Action::Apply(x) if x.name == "kyverno-dev")),
        "a pruned field is not rewritten: {:?}",
        d.actions
    );
    assert_eq!(
        stage_status(&p, "dev").failure_message,
        Some(note("kyverno-dev"))
    );
    let pruned: Vec<_> = d
        .events
        .iter()
        .filter(|e| e.reason == "FieldsPruned")
        .collect();
    assert_eq!(pruned.len(), 1, "{:?}", d.events);
    assert!(pruned[0].warning);
    assert_eq!(pruned[0].stage.as_deref(), Some("dev"));
    assert_eq!(
        pruned[0].message,
        format!("Stage dev: {}", note("kyverno-dev"))
    );
    assert!(!run(&mut p, &mut w, 5).writes(), "said once");
    // The CRD is upgraded and keeps the field: the note goes, without an Event.
    w.profiles.insert("kyverno-dev".into(), served);
    let d = run(&mut p, &mut w, 6);
    assert_eq!(stage_status(&p, "dev").failure_message, None);
    assert!(d.events.is_empty(), "{:?}", d.events);
    // Text another writer left on a passed stage is not promoter's to clear.
    let other = Some("kept by upstream".to_string());
    let entries = p.status.as_mut().unwrap().stages.as_mut().unwrap();
    entries[0].failure_message = other.clone();
    assert!(!run(&mut p, &mut w, 7).writes());
    assert_eq!(stage_status(&p, "dev").failure_message, other);
    // The completed stage: its own note, and no other text.
    set_approved(&mut p, 1, Some(true));
    assert_eq!(run(&mut p, &mut w, 8).phase, Phase::Complete);
    prune(&mut w, "kyverno-production");
    let d = run(&mut p, &mut w, 9);
    assert_eq!(d.phase, Phase::Complete);
    assert_eq!(
        stage_status(&p, "production").failure_message,
        Some(note("kyverno-production"))
    );
    assert_eq!(
        d.events
            .iter()
            .map(|e| e.reason.as_str())
            .collect::<Vec<_>>(),
        ["FieldsPruned"]
    );
    let entries = p.status.as_mut().unwrap().stages.as_mut().unwrap();
    entries[1].failure_message = other.clone();
    w.profiles
        .get_mut("kyverno-production")
        .unwrap()
        .spec
        .fields
        .insert(
            "driftExclusions".into(),
            json!([{"paths": ["/spec/replicas"]}]),
        );
    run(&mut p, &mut w, 10);
    assert_eq!(stage_status(&p, "production").failure_message, None);
    assert_eq!(stage_status(&p, "dev").failure_message, other);
}
