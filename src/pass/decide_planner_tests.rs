//! The planner's branches that the rollout tests above reach only on their happy side, one test
//! per mutant of `planner.rs` that survived the mutation campaign (MUTANTS.md, s41-mutplan): each
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
