//! Issue 24, rule by rule: the progress deadline, the failure policy (halt, rollback in reverse or
//! all at once), abort, the hold of a rolled-back revision, freezes and their bypass, the revision
//! history. Played with the same helpers as the rest of the decision's tests.

use super::*;
use crate::annotations::{
    ABORTED, Aborted, FAILED, FREEZE_BYPASS, Failed, HISTORY, History, RETRY, ROLLBACK, Record,
    Retry, Rollback, aborted, failed, rollback,
};
use crate::api::{PromotionFreeze, PromotionFreezeSpec, revision_id};
use crate::pass::FAILED_DEADLINE;
use crate::pass::decision::Reason;
use crate::settings::{FAILURE_POLICY, PROGRESS_DEADLINE, REVISION_HISTORY_LIMIT, ROLLBACK_ORDER};

fn annotate(p: &mut ClusterPromotion, key: &str, value: &str) {
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(key.into(), value.into());
}

fn unannotate(p: &mut ClusterPromotion, key: &str) {
    if let Some(a) = p.metadata.annotations.as_mut() {
        a.remove(key);
    }
}

/// Three automatic stages, no soak: dev, staging, production.
fn auto_stages() -> Value {
    json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ])
}

fn new_revision(p: &mut ClusterPromotion, version: &str) {
    let spec = p.spec.profile_spec.as_mut().unwrap();
    spec.0["helmCharts"][0]["chartVersion"] = json!(version);
}

fn version_of(w: &World, profile: &str) -> String {
    w.profiles[profile].spec.fields["helmCharts"][0]["chartVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

fn events(d: &Decision) -> Vec<&str> {
    d.events.iter().map(|e| e.reason.as_str()).collect()
}

/// The Events' reasons with the stage each is about.
fn staged_events(d: &Decision) -> Vec<(&str, &str)> {
    d.events
        .iter()
        .map(|e| (e.reason.as_str(), e.stage.as_deref().unwrap_or_default()))
        .collect()
}

/// A promotion whose first revision (chart 3.5.2) completed on all three stages, with `policy`
/// annotations; returns the minute after completion.
fn completed(annotations: &[(&str, &str)]) -> (ClusterPromotion, World, i64) {
    let mut p = promotion(auto_stages());
    for (k, v) in annotations {
        annotate(&mut p, k, v);
    }
    let mut w = fleet();
    let (min, d) = run_to(&mut p, &mut w, 0, "production");
    assert_eq!(d.phase, Phase::Complete);
    assert!(is_complete(&p));
    (p, w, min + 1)
}

/// Stages' summaries say Provisioned except for `stuck`, whose clusters never deploy.
fn sveltos(w: &mut World, stuck: &[&str]) {
    for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
        if !stuck.contains(&name.as_str()) {
            summarize(w, &name, "Provisioned");
        }
    }
}

#[test]
fn a_deadline_says_when_it_falls_and_halts_the_stage_that_misses_it() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, PROGRESS_DEADLINE, "10m, production=none");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let d = run(&mut p, &mut w, 5);
    assert_eq!(d.phase, Phase::Progressing);
    assert!(
        d.summary
            .ends_with("(progress deadline 2026-02-16T06:10:00Z)"),
        "{}",
        d.summary
    );
    assert_eq!(d.next_check, Some(t(10)));
    // Quiet while it waits: the summary is not in the status.
    assert!(!run(&mut p, &mut w, 6).writes());
    let d = run(&mut p, &mut w, 10);
    assert_eq!(d.phase, Phase::Failed);
    assert_eq!(events(&d), ["ProgressDeadlineExceeded"]);
    assert!(
        d.summary.contains("progress deadline 10m exceeded"),
        "{}",
        d.summary
    );
    assert!(d.summary.ends_with("halted"), "{}", d.summary);
    let f = failed(&p).expect("the miss is recorded");
    assert_eq!((f.stage.as_str(), f.deadline.as_str()), ("dev", "10m"));
    assert!(description(&p, "dev").starts_with(FAILED_DEADLINE));
    // Halted: nothing is written, even once the stage deploys late.
    assert!(!run(&mut p, &mut w, 11).writes());
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 12);
    assert_eq!(d.phase, Phase::Failed);
    assert!(!d.writes(), "{:?}", d.actions);
    assert!(!w.profiles.contains_key("kyverno-staging"));
    // `promoter resume`: the stage gets a fresh deadline from the resume, and goes on.
    let mut f = failed(&p).unwrap();
    f.resumed = Some(Record {
        by: "alice".into(),
        at: Timestamp::new(t(13)).to_string(),
        revision: None,
        reason: None,
    });
    annotate(&mut p, FAILED, &serde_json::to_string(&f).unwrap());
    let d = run(&mut p, &mut w, 14);
    assert_eq!(d.summary, "promoted dev -> staging");
}

#[test]
fn the_soak_window_and_approval_never_count_against_the_deadline() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "1h"}}},
        {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}, "trigger": {"manual": {}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, 8);
    // Soaking from minute 8 to 68: past 10m, but a soak is not progress.
    let d = run(&mut p, &mut w, 40);
    assert_eq!(d.phase, Phase::Soaking, "{}", d.summary);
    let d = run(&mut p, &mut w, 68);
    assert_eq!(d.summary, "promoted dev -> staging");
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, 69);
    // Waiting for an approval for hours is not a missed deadline.
    let d = run(&mut p, &mut w, 600);
    assert_eq!(d.phase, Phase::AwaitingApproval);
    assert!(failed(&p).is_none());
}

#[test]
fn failing_checks_after_the_deadline_fail_the_stage_but_checks_not_evaluated_do_not() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"postDelayHealthChecks": [{"name": "ok", "group": "", "version": "v1", "kind": "Pod"}]}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, 1);
    let not_evaluated =
        HealthResults::from([("dev".into(), HealthVerdict::NotEvaluated("budget".into()))]);
    let d = decide(&p, &w, &not_evaluated, &ctx(30));
    assert_eq!(d.phase, Phase::RunningChecks);
    assert!(failed_in(&d).is_none());
    let failing = HealthResults::from([("dev".into(), HealthVerdict::Failing("pod x".into()))]);
    let d = decide(&p, &w, &failing, &ctx(30));
    assert_eq!(d.phase, Phase::Failed);
    assert!(failed_in(&d).is_some_and(|f| f.why.contains("health checks failing: pod x")));
    // The first look, before the checks are run, decides nothing yet.
    let d = decide(&p, &w, &HealthResults::new(), &ctx(30));
    assert_eq!(d.needs_health.as_deref(), Some("dev"));
    assert!(failed_in(&d).is_none());
}

fn failed_in(d: &Decision) -> Option<Failed> {
    d.actions.iter().find_map(|a| match a {
        Action::Record(ops) => ops.iter().find_map(|op| match op {
            RecordOp::Failed(f) => Some(f.clone()),
            _ => None,
        }),
        _ => None,
    })
}

/// Revision 3.5.2 completed; 9.9.9 reaches staging, whose clusters never deploy it.
fn stuck_in_staging(order: &str) -> (ClusterPromotion, World, i64) {
    let (mut p, mut w, min) = completed(&[
        (PROGRESS_DEADLINE, "10m"),
        (FAILURE_POLICY, "rollback"),
        (ROLLBACK_ORDER, order),
    ]);
    let good = History::of(&p);
    assert_eq!(good.0.len(), 1, "the completed revision is in the history");
    assert!(good.0[0].completed_at.is_some());
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.summary, "promoted dev -> staging");
    // staging gets 9.9.9 but never deploys it: Sveltos copies the spec, and stays Provisioning.
    assert_eq!(version_of(&w, "kyverno-staging"), "9.9.9");
    summarize(&mut w, "kyverno-staging", "Provisioning");
    run(&mut p, &mut w, min + 2);
    (p, w, min + 2)
}

#[test]
fn a_missed_deadline_rolls_back_in_reverse_stage_by_stage_then_holds() {
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert_eq!(
        events(&d),
        ["ProgressDeadlineExceeded", "RollbackStarted"],
        "{:?}",
        d.events
    );
    let r = rollback(&p).expect("the rollback is recorded");
    assert_eq!(r.cause, crate::annotations::Cause::ProgressDeadline);
    assert!(History::of(&p).rolled_back(&r.from.revision).is_some());
    // staging first, after the status write; dev waits; production was never reached.
    assert!(
        d.after_status
            .iter()
            .any(|a| matches!(a, Action::Apply(x) if x.name == "kyverno-staging"))
    );
    assert!(d.actions.iter().all(|a| !matches!(a, Action::Apply(_))));
    assert_eq!(version_of(&w, "kyverno-staging"), "3.5.2");
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    assert_eq!(version_of(&w, "kyverno-production"), "3.5.2");
    assert!(description(&p, "dev").starts_with("Waiting to roll back to revision"));
    assert!(description(&p, "staging").starts_with("Rolling back to revision"));
    // Not in the pass that applied it, and not before staging's clusters run it.
    let d = run(&mut p, &mut w, min + 11);
    assert_eq!(d.phase, Phase::RollingBack);
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, min + 12);
    assert_eq!(staged_events(&d), [("StageRolledBack", "staging")]);
    assert_eq!(version_of(&w, "kyverno-dev"), "3.5.2");
    assert!(d.summary.contains("stage dev"), "{}", d.summary);
    run(&mut p, &mut w, min + 13);
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, min + 14);
    assert_eq!(d.phase, Phase::RolledBack);
    // Each stage's Event once, about that stage.
    assert_eq!(
        staged_events(&d),
        [("StageRolledBack", "dev"), ("RolledBack", "staging")]
    );
    assert!(rollback(&p).unwrap().completed_at.is_some());
    assert!(description(&p, "staging").starts_with("Rolled back to revision"));
    // Holds, quietly; a cluster that drifts later does not re-open the rollback. A steady pass
    // does not need the stored revision (issue 30: it read it every pass).
    assert!(!run(&mut p, &mut w, min + 15).writes());
    let mut without = w.clone();
    without.revisions.clear();
    let d = decide(&p, &without, &HealthResults::new(), &ctx(min + 15));
    assert_eq!(
        (d.phase, d.needs_revision.clone()),
        (Phase::RolledBack, None)
    );
    assert!(!d.writes());
    summarize(&mut w, "kyverno-dev", "Provisioning");
    let d = run(&mut p, &mut w, min + 16);
    assert_eq!(d.phase, Phase::RolledBack);
    assert!(!d.writes());
}

/// Issue 45: the pass that finds every target rolled back records the rollback's completion in
/// its record patch, then writes the status that says so. When that status is not written (its
/// answer lost, reset before the server read it, a kill in between), the next pass used to hold
/// on the record and leave the last target "Rolling back", its Events lost. It writes the status
/// the completing pass would have written, at its time, with the Events it owed.
#[test]
fn a_rollback_completed_without_its_status_is_shown_as_the_completing_pass_would_have() {
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    run(&mut p, &mut w, min + 10);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, min + 12);
    run(&mut p, &mut w, min + 13);
    sveltos(&mut w, &[]);
    let completing = decide(&p, &w, &HealthResults::new(), &ctx(min + 14));
    assert_eq!(completing.phase, Phase::RolledBack);
    let lost = Decision {
        status: None,
        after_status: Vec::new(),
        ..completing.clone()
    };
    apply(&mut p, &mut w, &lost);
    assert!(rollback(&p).unwrap().completed_at.is_some());
    assert!(description(&p, "dev").starts_with("Rolling back to revision"));
    let d = run(&mut p, &mut w, min + 15);
    assert_eq!(d.phase, Phase::RolledBack, "{}", d.summary);
    assert_eq!(p.status, completing.status);
    assert_eq!(staged_events(&d), staged_events(&completing));
    assert!(d.events.iter().all(|e| e.owed), "{:?}", d.events);
    assert_eq!(
        d.events.iter().map(|e| &e.message).collect::<Vec<_>>(),
        completing
            .events
            .iter()
            .map(|e| &e.message)
            .collect::<Vec<_>>()
    );
    assert!(!run(&mut p, &mut w, min + 16).writes());
}

/// Issue 31: the pass that records a missed deadline and starts the rollback listed only the
/// current stage's ClusterSummaries (the rollback was not recorded when it observed); the other
/// targets' summaries were not read, and the pass said "ClusterSummary … does not exist yet" of
/// them. It says only what it observed.
#[test]
fn a_rollback_says_only_what_it_read_of_the_summaries() {
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    // As the observation of this pass lists them: staging's only.
    for profile in ["kyverno-dev", "kyverno-production"] {
        w.summaries.remove(profile);
        w.summaries_listed.remove(profile);
    }
    w.summaries_listed.insert("kyverno-staging".into());
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(!d.summary.contains("does not exist"), "{}", d.summary);
    assert!(
        d.summary.contains(
            "the ClusterSummaries of ClusterProfile kyverno-production were not read in this pass"
        ),
        "{}",
        d.summary
    );
    // Listed, and none there: that is what it says.
    w.summaries_listed.insert("kyverno-production".into());
    let d = run(&mut p, &mut w, min + 11);
    assert!(
        d.summary
            .contains("ClusterSummary kyverno-production-sveltos-prod01 does not exist yet."),
        "{}",
        d.summary
    );
}

#[test]
fn all_at_once_rolls_every_reached_stage_back_in_one_pass() {
    let (mut p, mut w, min) = stuck_in_staging("all-at-once");
    let d = run(&mut p, &mut w, min + 10);
    let applied: Vec<&str> = d
        .after_status
        .iter()
        .filter_map(|a| match a {
            Action::Apply(x) => Some(x.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(applied, ["kyverno-dev", "kyverno-staging"]);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, min + 12);
    assert_eq!(d.phase, Phase::RolledBack, "{}", d.summary);
}

#[test]
fn without_a_completed_revision_a_rollback_policy_halts() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    annotate(&mut p, FAILURE_POLICY, "rollback");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let d = run(&mut p, &mut w, 10);
    assert_eq!(d.phase, Phase::Failed);
    assert!(
        d.summary
            .ends_with("no completed revision to roll back to: halted"),
        "{}",
        d.summary
    );
    assert!(rollback(&p).is_none());
}

#[test]
fn a_rolled_back_revision_is_held_until_a_person_retries_it() {
    let (mut p, mut w, min) = stuck_in_staging("all-at-once");
    run(&mut p, &mut w, min + 10);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, min + 12).phase, Phase::RolledBack);
    let bad = p.status.clone().unwrap().profile_spec_hash.unwrap();
    // A fix: a new revision rolls out from stage 1; the records of the old run go.
    new_revision(&mut p, "9.9.10");
    let d = run(&mut p, &mut w, min + 13);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    assert!(rollback(&p).is_none() && failed(&p).is_none());
    // Reverting to the rolled-back revision (a GitOps revert) is held: nothing is applied.
    new_revision(&mut p, "9.9.9");
    let d = run(&mut p, &mut w, min + 14);
    assert_eq!(d.phase, Phase::RolledBack, "{}", d.summary);
    assert!(d.summary.starts_with("Held: revision"), "{}", d.summary);
    assert!(d.after_status.is_empty() && d.actions.is_empty());
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.10");
    // `promoter resume` names it: it rolls out again, once.
    annotate(
        &mut p,
        RETRY,
        &serde_json::to_string(&Retry {
            revision: bad.clone(),
            by: "alice".into(),
            at: Timestamp::new(t(min + 15)),
            reason: None,
        })
        .unwrap(),
    );
    let d = run(&mut p, &mut w, min + 15);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    assert!(
        crate::annotations::retry(&p).is_none(),
        "consumed by the restart"
    );
}

#[test]
fn resume_of_a_rolled_back_run_starts_it_again_from_stage_one() {
    let (mut p, mut w, min) = stuck_in_staging("all-at-once");
    run(&mut p, &mut w, min + 10);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, min + 12);
    let run_before = Run::of(p.status.as_ref().unwrap()).unwrap();
    annotate(
        &mut p,
        RETRY,
        &serde_json::to_string(&Retry {
            revision: run_before.revision.clone(),
            by: "alice".into(),
            at: Timestamp::new(t(min + 20)),
            reason: Some("fixed the clusters".into()),
        })
        .unwrap(),
    );
    let d = run(&mut p, &mut w, min + 20);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    let run_after = Run::of(p.status.as_ref().unwrap()).unwrap();
    assert_eq!(run_after.revision, run_before.revision);
    assert_ne!(run_after, run_before, "a new run of the same revision");
    assert!(rollback(&p).is_none() && crate::annotations::retry(&p).is_none());
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    assert_eq!(version_of(&w, "kyverno-staging"), "3.5.2");
}

#[test]
fn a_manual_rollback_of_a_completed_run_restores_every_stage_from_the_top() {
    let (mut p, mut w, min) = completed(&[]);
    let first = Run::of(p.status.as_ref().unwrap()).unwrap().revision;
    new_revision(&mut p, "9.9.9");
    let (min, _) = run_to(&mut p, &mut w, min, "production");
    assert!(is_complete(&p));
    let run_now = Run::of(p.status.as_ref().unwrap()).unwrap();
    // What `promoter rollback` writes.
    annotate(
        &mut p,
        ROLLBACK,
        &serde_json::to_string(&Rollback {
            from: run_now.clone(),
            to: first.clone(),
            order: crate::settings::RollbackOrder::Reverse,
            cause: crate::annotations::Cause::Manual,
            by: "alice".into(),
            at: Timestamp::new(t(min + 1)),
            reason: Some("CVE in 9.9.9".into()),
            completed_at: None,
            kept: None,
            missed: None,
        })
        .unwrap(),
    );
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::RollingBack);
    assert_eq!(events(&d), ["RollbackStarted"]);
    assert_eq!(version_of(&w, "kyverno-production"), "3.5.2");
    assert_eq!(version_of(&w, "kyverno-staging"), "9.9.9");
    let entry = History::of(&p);
    let rb = entry
        .rolled_back(&run_now.revision)
        .expect("history says so");
    assert_eq!(rb.to, revision_id(&first));
    for m in 2..12 {
        sveltos(&mut w, &[]);
        if run(&mut p, &mut w, min + m).phase == Phase::RolledBack {
            for s in ["dev", "staging", "production"] {
                assert_eq!(version_of(&w, &format!("kyverno-{s}")), "3.5.2");
            }
            return;
        }
    }
    panic!("never rolled back: {:?}", p.status);
}

#[test]
fn a_rollback_whose_stored_revision_is_gone_says_so_and_writes_no_profile() {
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    w.revisions.clear();
    // Read by the pass, and absent.
    let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 10));
    let name = d.needs_revision.clone().expect("asks for the revision");
    w.revisions.insert(name.clone(), None);
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary
            .contains(&format!("PromotionRevision {name} is gone")),
        "{}",
        d.summary
    );
    assert!(
        d.after_status
            .iter()
            .all(|a| !matches!(a, Action::Apply(_)))
    );
    // Said once: a Warning Event when it blocks, none while it stays blocked.
    assert_eq!(
        events(&d),
        ["ProgressDeadlineExceeded", "Blocked"],
        "{:?}",
        d.events
    );
    let d = run(&mut p, &mut w, min + 11);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(d.events.is_empty(), "{:?}", d.events);
}

#[test]
fn abort_holds_the_run_where_it_is_and_a_new_revision_clears_it() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let r = Run::of(p.status.as_ref().unwrap()).unwrap();
    annotate(
        &mut p,
        ABORTED,
        &serde_json::to_string(&Aborted {
            run: r,
            by: "bob".into(),
            at: Timestamp::new(t(1)),
            reason: Some("incident 42".into()),
        })
        .unwrap(),
    );
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.phase, Phase::Aborted);
    assert!(description(&p, "dev").starts_with("Aborted by bob"));
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 3);
    assert!(!d.writes(), "held: {:?}", d.actions);
    assert!(!w.profiles.contains_key("kyverno-staging"));
    new_revision(&mut p, "9.9.9");
    let d = run(&mut p, &mut w, 4);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    assert!(aborted(&p).is_none());
}

fn freeze(
    name: &str,
    selector: Option<Value>,
    start: Option<i64>,
    end: Option<i64>,
) -> PromotionFreeze {
    let mut f = PromotionFreeze::new(
        name,
        PromotionFreezeSpec {
            reason: "holiday change freeze".into(),
            promotion_selector: selector.map(|s| serde_json::from_value(s).unwrap()),
            start: start.map(|m| Timestamp::new(t(m))),
            end: end.map(|m| Timestamp::new(t(m))),
            unreadable: None,
        },
    );
    f.metadata.uid = Some(format!("uid-{name}"));
    f
}

#[test]
fn a_freeze_lets_the_current_stage_finish_and_holds_the_next() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    w.freezes = vec![freeze("holidays", None, Some(1), Some(30))];
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
    assert_eq!(events(&d), ["StageProvisioned", "Frozen"]);
    assert_eq!(d.next_check, Some(t(30)));
    assert!(description(&p, "dev").starts_with("Frozen: freeze holidays"));
    assert!(!w.profiles.contains_key("kyverno-staging"));
    assert!(!run(&mut p, &mut w, 3).writes(), "quiet while frozen");
    // A freeze that does not select it holds nothing.
    w.freezes = vec![freeze(
        "prod-only",
        Some(json!({"matchLabels": {"tier": "prod"}})),
        None,
        None,
    )];
    let d = run(&mut p, &mut w, 4);
    assert_eq!(d.summary, "promoted dev -> staging");
}

#[test]
fn a_freeze_holds_a_new_revision_and_the_first_start_but_not_completion() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    w.freezes = vec![freeze("stop-the-line", None, None, None)];
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Frozen);
    assert!(
        p.status.is_none() && w.profiles.is_empty(),
        "nothing starts"
    );
    w.freezes.clear();
    let (min, _) = run_to(&mut p, &mut w, 1, "production");
    // The last stage completes under a freeze: completing starts nothing.
    assert!(is_complete(&p));
    w.freezes = vec![freeze("stop-the-line", None, None, None)];
    new_revision(&mut p, "9.9.9");
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::Frozen);
    assert!(d.after_status.is_empty());
    assert_eq!(version_of(&w, "kyverno-dev"), "3.5.2");
    assert!(description(&p, "production").starts_with("Frozen: freeze stop-the-line"));
}

/// Issue 45: a stage start recorded in the status before a freeze whose profile write was lost
/// before the server applied it is held by the freeze, as a new start is: the next pass used to
/// write the profile during the freeze (the campaign's freeze at 30 %: dev's profile created at
/// minute 3, the freeze active from minute 2).
#[test]
fn a_recorded_start_whose_profile_was_never_applied_waits_for_a_freeze() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    assert_eq!(
        p.status.as_ref().unwrap().current_stage_name.as_deref(),
        Some("dev")
    );
    // The profile write's answer lost before the server applied it.
    w.profiles.remove("kyverno-dev");
    w.freezes = vec![freeze("holidays", None, Some(1), Some(30))];
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
    assert!(!w.profiles.contains_key("kyverno-dev"), "{:?}", d.actions);
    assert!(
        description(&p, "dev").starts_with("Frozen: freeze holidays: holiday change freeze")
            && description(&p, "dev").contains(
                "the start of stage dev (recorded; its ClusterProfile not yet applied) waits"
            ),
        "{}",
        description(&p, "dev")
    );
    assert_eq!(events(&d), ["Frozen"]);
    assert!(!run(&mut p, &mut w, 3).writes(), "quiet while frozen");
    // The freeze over, the start is applied.
    w.freezes.clear();
    let d = run(&mut p, &mut w, 31);
    assert!(w.profiles.contains_key("kyverno-dev"), "{}", d.summary);
}

/// A stage found deployed in this run whose profile someone deletes during a freeze is repaired
/// as a reached stage's is (its clusters keep what they were given): it is no start held by the
/// freeze, and its status does not say so.
#[test]
fn a_deployed_stage_whose_profile_is_deleted_during_a_freeze_is_repaired() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    assert_eq!(run(&mut p, &mut w, 3).summary, "promoted dev -> staging");
    summarize(&mut w, "kyverno-staging", "Provisioned");
    assert_eq!(run(&mut p, &mut w, 4).phase, Phase::AwaitingApproval);
    w.freezes = vec![freeze("holidays", None, Some(5), Some(30))];
    w.profiles.remove("kyverno-staging");
    let d = run(&mut p, &mut w, 6);
    assert!(
        w.profiles.contains_key("kyverno-staging"),
        "{:?}",
        d.actions
    );
    assert!(
        !description(&p, "staging").contains("not yet applied"),
        "{}",
        description(&p, "staging")
    );
}

/// Issue 30 §2: a bypass whose author the API server did not authenticate (hand-written with
/// `kubectl annotate`: no `user`, or a `by` that is not its `user`) does not let a stage start
/// during a freeze, and the status says why. It used to: any `by` text was taken on trust.
#[test]
fn a_bypass_without_an_authenticated_identity_is_refused() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    w.freezes = vec![freeze("holidays", None, None, None)];
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, 1).phase, Phase::Frozen);
    let until = Timestamp::new(t(60)).to_string();
    for (record, why) in [
        (
            json!({"by": "mallory", "reason": "hotfix", "until": until}),
            "it does not name the identity the API server authenticated (user)",
        ),
        (
            json!({"by": "alice", "user": "mallory", "reason": "hotfix", "until": until}),
            "its by \"alice\" is not its authenticated user \"mallory\"",
        ),
    ] {
        annotate(&mut p, FREEZE_BYPASS, &record.to_string());
        let d = run(&mut p, &mut w, 2);
        assert_eq!(d.phase, Phase::Frozen, "{record}");
        assert!(
            !events(&d).contains(&"FreezeBypassed"),
            "{record}: {:?}",
            events(&d)
        );
        let text = description(&p, "dev");
        assert!(
            text.contains(&format!("promoter.dev/freeze-bypass is ignored: {why}")),
            "{text}"
        );
    }
    // What `promoter freeze bypass` records: the authenticated user, with the operator's note.
    let record =
        json!({"by": "alice (INC-7)", "user": "alice", "reason": "hotfix", "until": until});
    annotate(&mut p, FREEZE_BYPASS, &record.to_string());
    assert_eq!(run(&mut p, &mut w, 3).summary, "promoted dev -> staging");
}

#[test]
fn a_bypass_lets_one_promotion_through_and_says_so() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    w.freezes = vec![freeze("holidays", None, None, None)];
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, 1).phase, Phase::Frozen);
    // Expired, or for another freeze: still held, and the status says why.
    let bypass = |until: i64, freeze: Option<&str>| {
        json!({"by": "carol", "user": "carol", "at": Timestamp::new(t(1)).to_string(), "reason": "hotfix CVE",
               "until": Timestamp::new(t(until)).to_string(), "freeze": freeze})
        .to_string()
    };
    annotate(&mut p, FREEZE_BYPASS, &bypass(2, None));
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.phase, Phase::Frozen);
    assert!(
        description(&p, "dev").contains("the bypass by carol expired"),
        "{}",
        description(&p, "dev")
    );
    annotate(&mut p, FREEZE_BYPASS, &bypass(60, Some("other")));
    assert_eq!(run(&mut p, &mut w, 4).phase, Phase::Frozen);
    annotate(&mut p, FREEZE_BYPASS, r#"{"by": "carol", "user": "carol"}"#);
    run(&mut p, &mut w, 5);
    assert!(
        description(&p, "dev").contains("does not say why"),
        "{}",
        description(&p, "dev")
    );
    annotate(&mut p, FREEZE_BYPASS, &bypass(60, Some("holidays")));
    let d = run(&mut p, &mut w, 6);
    assert_eq!(d.summary, "promoted dev -> staging");
    assert_eq!(events(&d), ["FreezeBypassed", "StageProvisioning"]);
    assert!(
        description(&p, "staging").contains("(freeze holidays bypassed by carol until"),
        "{}",
        description(&p, "staging")
    );
    unannotate(&mut p, FREEZE_BYPASS);
}

#[test]
fn the_history_is_bounded_and_revisions_it_forgets_are_deleted() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, REVISION_HISTORY_LIMIT, "2");
    let mut w = fleet();
    let mut min = 0;
    let mut stored = Vec::new();
    for v in ["1.0.0", "2.0.0", "3.0.0"] {
        new_revision(&mut p, v);
        let (m, d) = run_to(&mut p, &mut w, min, "production");
        min = m + 1;
        stored.extend(d.actions.iter().filter_map(|a| match a {
            Action::StoreRevision(r) => r.metadata.name.clone(),
            _ => None,
        }));
        if v == "3.0.0" {
            // The completing pass marks the sweep in its record patch; its sweep deleted 1.0.0.
            assert!(d.actions.iter().any(|a| matches!(a, Action::Record(ops)
                if ops.iter().any(|o| matches!(o, RecordOp::SweepDue(_))))));
            assert_eq!(w.revisions.get(&stored[0]), Some(&None));
            assert!(matches!(w.revisions.get(&stored[1]), Some(Some(_))));
            assert!(crate::annotations::sweep_due(&p).is_none(), "done");
        } else {
            assert!(
                crate::annotations::sweep_due(&p).is_none(),
                "nothing forgotten"
            );
        }
    }
    let h = History::of(&p);
    assert_eq!(h.0.len(), 2);
    assert!(p.metadata.annotations.as_ref().unwrap()[HISTORY].len() < 1024);
}

/// promoter's CRDs not served (observe saw promoter.dev answer 404): completions keep their
/// history but store and delete no revision; a rollback policy, which needs them, blocks.
#[test]
fn without_promoters_crds_the_history_is_kept_and_a_rollback_policy_blocks() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, REVISION_HISTORY_LIMIT, "1");
    let mut w = fleet();
    w.own_crds_missing = true;
    let mut min = 0;
    for v in ["1.0.0", "2.0.0"] {
        new_revision(&mut p, v);
        let (m, d) = run_to(&mut p, &mut w, min, "production");
        min = m + 1;
        assert_eq!(d.phase, Phase::Complete);
        assert!(
            !d.actions
                .iter()
                .chain(&d.after_status)
                .any(|a| matches!(a, Action::StoreRevision(_))),
            "{:?}",
            d.actions
        );
        assert!(
            crate::annotations::sweep_due(&p).is_none(),
            "no sweep without the CRDs"
        );
    }
    assert_eq!(History::of(&p).0.len(), 1);
    let mut guarded = promotion(auto_stages());
    annotate(&mut guarded, FAILURE_POLICY, "rollback");
    let mut w = fleet();
    w.own_crds_missing = true;
    let d = run(&mut guarded, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary.contains("PromotionRevision CRD") && d.summary.contains("promoter crd --own"),
        "{}",
        d.summary
    );
    assert!(w.profiles.is_empty());
    w.own_crds_missing = false;
    assert_ne!(run(&mut guarded, &mut w, 1).phase, Phase::Blocked);
}

#[test]
fn bad_settings_block_the_promotion_with_the_annotation_as_path() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, FAILURE_POLICY, "rolback");
    let mut w = fleet();
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary.contains(
            "metadata.annotations[promoter.dev/failure-policy]: Unsupported value: \"rolback\""
        ),
        "{}",
        d.summary
    );
    assert!(w.profiles.is_empty());
}

#[test]
fn event_reasons_of_the_failure_policy_are_warnings_where_someone_must_look() {
    for (r, warning) in [
        (Reason::ProgressDeadlineExceeded, true),
        (Reason::RollbackStarted, true),
        (Reason::RolledBack, true),
        (Reason::StageRolledBack, false),
        (Reason::Frozen, false),
        (Reason::FreezeBypassed, false),
    ] {
        assert_eq!(r.warning(), warning, "{}", r.as_str());
    }
}

/// Issue 24: "Bad input (…, negative deadline, …) is a clear error on that object alone; every
/// other promotion goes on." A deadline the grammar accepts but that overflows chrono's calendar
/// (`start + D` in `deadline::due`) panicked the decision, and with it the whole pass (review).
#[test]
fn a_huge_deadline_is_an_error_on_the_promotion_not_a_panic() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, PROGRESS_DEADLINE, "300000y");
    let mut w = fleet();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&mut p, &mut w, 0);
        run(&mut p, &mut w, 1)
    }));
    let Ok(d) = outcome else {
        panic!("the decision panicked on a progress deadline of 300000y");
    };
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary.contains(
            "metadata.annotations[promoter.dev/progress-deadline]: Invalid value: \"300000y\": \
             must be at most 365d"
        ),
        "{}",
        d.summary
    );
    assert!(w.profiles.is_empty());
}

// Found by an independent review of issue 24; each failed on the code as reviewed.

fn provision_all(w: &mut World) {
    for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
        summarize(w, &name, "Provisioned");
    }
}

/// 9.0.0 reaches production (never completes there), then 9.9.9 restarts at dev and never
/// deploys: staging and production are left on 9.0.0, a revision the run did not reach.
fn leftover_above(order: &str) -> (ClusterPromotion, World, i64) {
    let (mut p, mut w, min) = completed(&[
        (PROGRESS_DEADLINE, "10m"),
        (FAILURE_POLICY, "rollback"),
        (ROLLBACK_ORDER, order),
    ]);
    new_revision(&mut p, "9.0.0");
    run(&mut p, &mut w, min);
    provision_all(&mut w);
    assert_eq!(
        run(&mut p, &mut w, min + 1).summary,
        "promoted dev -> staging"
    );
    provision_all(&mut w);
    assert_eq!(
        run(&mut p, &mut w, min + 2).summary,
        "promoted staging -> production"
    );
    assert_eq!(version_of(&w, "kyverno-production"), "9.0.0");
    // production's clusters run 9.0.0 (its summaries say so); it never completes: 9.9.9 comes.
    provision_all(&mut w);
    new_revision(&mut p, "9.9.9");
    let d = run(&mut p, &mut w, min + 3);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    assert_eq!(version_of(&w, "kyverno-staging"), "9.0.0");
    (p, w, min + 3)
}

/// The book's invariants: "in reverse order a stage's profile goes back only once every higher stage runs the
/// revision rolled back to on every matching cluster". A target the run never reached (a stage an
/// earlier unfinished run left on another revision) stays a target once its profile holds the
/// stored revision, until its clusters run it (it used to drop out at once, and the next lower
/// stage went back before it).
#[test]
fn reverse_waits_for_a_higher_target_the_run_did_not_reach() {
    let (mut p, mut w, min) = leftover_above("reverse");
    let d = run(&mut p, &mut w, min + 13);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(rollback(&p).is_some());
    // Highest target first: production gets 3.5.2, nothing else moves.
    assert_eq!(version_of(&w, "kyverno-production"), "3.5.2");
    assert_eq!(version_of(&w, "kyverno-staging"), "9.0.0");
    // production's clusters still run 9.0.0 (no new summary): staging must wait.
    let d = run(&mut p, &mut w, min + 14);
    assert_eq!(
        version_of(&w, "kyverno-staging"),
        "9.0.0",
        "staging rolled back before production's clusters run 3.5.2: {}",
        d.summary
    );
}

/// The book's invariants: "all at once, the rollback is done only when every target is", a target the run never
/// reached included (it used to count as done as soon as its profile held the revision).
#[test]
fn all_at_once_is_not_done_before_every_target_runs_the_revision() {
    let (mut p, mut w, min) = leftover_above("all-at-once");
    run(&mut p, &mut w, min + 13);
    // dev is provisioned with 3.5.2 (a summary for its new spec); staging and production not.
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = run(&mut p, &mut w, min + 14);
    assert_ne!(
        d.phase,
        Phase::RolledBack,
        "rolled back while staging and production clusters still run 9.0.0: {}",
        d.summary
    );
}

/// The book's invariants: "no stage starts (an advance or a restart) while an active PromotionFreeze selects the
/// promotion, unless its promoter.dev/freeze-bypass names who, why and until when". `promoter
/// resume` of a rolled-back run writes `retry`; the restart it asks for is a stage start, held by
/// the freeze like any other (it used to restart stage 1 without asking the freeze).
#[test]
fn resume_of_a_rolled_back_run_waits_for_a_freeze() {
    let (mut p, mut w, min) = completed(&[
        (PROGRESS_DEADLINE, "10m"),
        (FAILURE_POLICY, "rollback"),
        (ROLLBACK_ORDER, "all-at-once"),
    ]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    // dev never deploys 9.9.9: missed deadline, rolled back.
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    run(&mut p, &mut w, min + 11);
    provision_all(&mut w);
    assert_eq!(run(&mut p, &mut w, min + 12).phase, Phase::RolledBack);
    assert_eq!(version_of(&w, "kyverno-dev"), "3.5.2");
    w.freezes = vec![freeze("stop-the-line", None, None, None)];
    let bad = p.status.clone().unwrap().profile_spec_hash.unwrap();
    annotate(
        &mut p,
        RETRY,
        &serde_json::to_string(&Retry {
            revision: bad,
            by: "alice".into(),
            at: Timestamp::new(t(min + 20)),
            reason: None,
        })
        .unwrap(),
    );
    let d = run(&mut p, &mut w, min + 20);
    assert_eq!(
        version_of(&w, "kyverno-dev"),
        "3.5.2",
        "stage 1 restarted during a freeze without a bypass: {}",
        d.summary
    );
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
}

/// The book's invariants: "A rolled-back revision is never promoted again without a person: the history marks
/// it". The history remembers rolled-back revisions beyond `revision-history-limit` (it used to
/// forget the older ones, and a revert to one rolled out unasked).
#[test]
fn a_rolled_back_revision_beyond_the_history_limit_is_still_held() {
    let (mut p, mut w, mut min) = completed(&[
        (PROGRESS_DEADLINE, "10m"),
        (FAILURE_POLICY, "rollback"),
        (ROLLBACK_ORDER, "all-at-once"),
        (REVISION_HISTORY_LIMIT, "1"),
    ]);
    let mut bad = Vec::new();
    for v in ["9.9.9", "9.9.8"] {
        new_revision(&mut p, v);
        run(&mut p, &mut w, min);
        // dev never deploys it: rolled back.
        run(&mut p, &mut w, min + 10);
        run(&mut p, &mut w, min + 11);
        provision_all(&mut w);
        assert_eq!(run(&mut p, &mut w, min + 12).phase, Phase::RolledBack);
        bad.push(p.status.clone().unwrap().profile_spec_hash.unwrap());
        min += 20;
    }
    assert!(History::of(&p).rolled_back(&bad[1]).is_some());
    // A GitOps revert to the first bad revision.
    new_revision(&mut p, "9.9.9");
    let d = run(&mut p, &mut w, min);
    assert_eq!(
        d.phase,
        Phase::RolledBack,
        "a rolled-back revision rolled out again without `promoter resume`: {}",
        d.summary
    );
}

/// `promoter abort` holds the run; `promoter resume` lifts the abort. The time the run was held
/// counts against the current stage's progress deadline (only a resumed *failure* restarts the
/// count, `deadline::due`): the pass right after the resume finds the deadline missed and rolls
/// back, although the stage had minutes left when it was aborted.
#[test]
fn time_held_by_an_abort_does_not_count_against_the_deadline() {
    use crate::annotations::{ABORTED, Aborted, Run};
    let (mut p, mut w, min) =
        completed(&[(PROGRESS_DEADLINE, "10m"), (FAILURE_POLICY, "rollback")]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    let r = Run::of(p.status.as_ref().unwrap()).unwrap();
    annotate(
        &mut p,
        ABORTED,
        &serde_json::to_string(&Aborted {
            run: r,
            by: "bob".into(),
            at: Timestamp::new(t(min + 2)),
            reason: Some("incident 42".into()),
        })
        .unwrap(),
    );
    assert_eq!(run(&mut p, &mut w, min + 2).phase, Phase::Aborted);
    // An hour later, `promoter resume` removes the abort.
    p.metadata.annotations.as_mut().unwrap().remove(ABORTED);
    let d = run(&mut p, &mut w, min + 62);
    assert_eq!(
        d.phase,
        Phase::Progressing,
        "resumed after an abort, the stage is failed at once: {}",
        d.summary
    );
}

/// A pause holds the run like an abort: the passes that see it paused record when the hold began
/// (once: later paused passes are quiet), the first pass that sees it resumed adds the time up,
/// and the deadline moves by exactly that much.
#[test]
fn time_held_by_a_pause_does_not_count_and_paused_passes_stay_quiet() {
    use crate::annotations::{DEADLINE_CLOCK, PAUSED};
    let (mut p, mut w, min) = completed(&[(PROGRESS_DEADLINE, "10m")]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    annotate(
        &mut p,
        PAUSED,
        r#"{"by":"bob","at":"2026-02-16T08:00:00Z"}"#,
    );
    let d = run(&mut p, &mut w, min + 3);
    assert_eq!(d.phase, Phase::Paused);
    assert!(
        annotations(&p).contains_key(DEADLINE_CLOCK),
        "the hold is on record"
    );
    assert!(
        !run(&mut p, &mut w, min + 4).writes(),
        "paused passes stay quiet"
    );
    unannotate(&mut p, PAUSED);
    // 30 minutes held: due at min + 10 + 30.
    let d = run(&mut p, &mut w, min + 33);
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert_eq!(d.next_check, Some(t(min + 40)), "{}", d.summary);
    assert!(
        !run(&mut p, &mut w, min + 34).writes(),
        "the hold is added up once"
    );
    let d = run(&mut p, &mut w, min + 40);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    // A promotion without a deadline records nothing while paused.
    let (mut q, mut w, min) = completed(&[]);
    new_revision(&mut q, "9.9.9");
    run(&mut q, &mut w, min);
    annotate(&mut q, PAUSED, "bob");
    run(&mut q, &mut w, min + 1);
    assert!(!annotations(&q).contains_key(DEADLINE_CLOCK));
}

fn annotations(p: &ClusterPromotion) -> std::collections::BTreeMap<String, String> {
    p.metadata.annotations.clone().unwrap_or_default()
}

/// The book's invariants: "a pass killed after any write leaves a state the next pass completes". At completion
/// the revisions the history forgets are deleted after the status write, computed from the
/// history *before* the record patch; a pass killed after its record patch leaves the forgotten
/// PromotionRevision behind for good (no later pass deletes it, nothing lists them).
#[test]
fn a_revision_the_history_forgot_is_deleted_even_after_a_crash() {
    let mut p = promotion(auto_stages());
    annotate(&mut p, REVISION_HISTORY_LIMIT, "1");
    let mut w = fleet();
    let (min, _) = run_to(&mut p, &mut w, 0, "production");
    let first = crate::api::revision_name(
        "kyverno",
        &p.status.clone().unwrap().profile_spec_hash.unwrap(),
    );
    assert!(matches!(w.revisions.get(&first), Some(Some(_))));
    new_revision(&mut p, "9.9.9");
    let mut m = min + 1;
    // Run until the completing pass, which dies right after its record patch.
    loop {
        let d = decide(&p, &w, &HealthResults::new(), &ctx(m));
        let completes = d.actions.iter().any(|a| {
            matches!(a, Action::Record(ops) if ops.iter().any(|o| matches!(o, RecordOp::Complete(_))))
        });
        if completes {
            let mut killed = d.clone();
            killed.status = None;
            killed.after_status.clear();
            apply(&mut p, &mut w, &killed);
            break;
        }
        apply(&mut p, &mut w, &d);
        provision_all(&mut w);
        m += 1;
        assert!(m < min + 60, "never completed");
    }
    for k in 1..5 {
        run(&mut p, &mut w, m + k);
    }
    assert!(
        !matches!(w.revisions.get(&first), Some(Some(_))),
        "PromotionRevision {first} is beyond the history limit and never deleted"
    );
}

/// A stage that completed within its deadline (deployed, checks passing) and then waits for an
/// approval (or a window, or a freeze) for hours is failed, and rolled back, by the first check
/// that fails later: the deadline is never "met", it keeps counting from the stage's start.
/// Issue 24: "a stage that has not completed ... within a deadline is marked failed".
#[test]
fn a_stage_that_completed_in_time_is_not_failed_by_a_later_flaky_check() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"postDelayHealthChecks": [{"name": "ok", "group": "", "version": "v1", "kind": "Pod"}]}}},
        {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}},
         "trigger": {"manual": {"postDelayHealthChecks": [{"name": "ok", "group": "", "version": "v1", "kind": "Pod"}]}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    let mut w = fleet();
    let passed = HealthResults::from([
        ("dev".into(), HealthVerdict::Passed),
        ("staging".into(), HealthVerdict::Passed),
    ]);
    let step = |p: &mut ClusterPromotion, w: &mut World, h: &HealthResults, m: i64| {
        let d = decide(p, w, h, &ctx(m));
        apply(p, w, &d);
        provision_all(w);
        d
    };
    for m in 0..4 {
        step(&mut p, &mut w, &passed, m);
    }
    // staging deployed and healthy within minutes: it awaits its approval.
    let d = step(&mut p, &mut w, &passed, 4);
    assert_eq!(d.phase, Phase::AwaitingApproval, "{}", d.summary);
    let d = step(&mut p, &mut w, &passed, 300);
    assert_eq!(d.phase, Phase::AwaitingApproval, "{}", d.summary);
    // Five hours later one check fails once.
    let flaky = HealthResults::from([(
        "staging".into(),
        HealthVerdict::Failing("pod x restarting".into()),
    )]);
    let d = step(&mut p, &mut w, &flaky, 301);
    assert_ne!(
        d.phase,
        Phase::Failed,
        "a stage that completed in 4 minutes missed its 10m deadline: {}",
        d.summary
    );
    assert_eq!(
        d.phase,
        Phase::ChecksFailing,
        "it waits for its checks: {}",
        d.summary
    );
    assert!(failed(&p).is_none());
    // Nor does a cluster that drifts later.
    summarize(&mut w, "kyverno-staging", "Provisioning");
    let d = decide(&p, &w, &passed, &ctx(302));
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert!(failed_in(&d).is_none(), "{}", d.summary);
}

/// A pass killed right after the record patch that starts a rollback (records `failed`,
/// `rollback` and the history, before the status PUT): the next pass carries the rollback out,
/// but the failed stage's failureMessage never says why (design: "failureMessage of the failed
/// stage keeps the cause") and no ProgressDeadlineExceeded Event is ever recorded.
#[test]
fn the_cause_of_a_rollback_reaches_the_status_after_a_crash() {
    for policy in ["rollback", "halt"] {
        let (mut p, mut w, min) =
            completed(&[(PROGRESS_DEADLINE, "10m"), (FAILURE_POLICY, policy)]);
        new_revision(&mut p, "9.9.9");
        run(&mut p, &mut w, min);
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 10));
        let unharmed = d.clone();
        let mut killed = d.clone();
        killed.status = None;
        killed.after_status.clear();
        apply(&mut p, &mut w, &killed);
        let d = run(&mut p, &mut w, min + 11);
        let want = if policy == "rollback" {
            Phase::RollingBack
        } else {
            Phase::Failed
        };
        assert_eq!(d.phase, want, "{policy}: {}", d.summary);
        let why = stage_status(&p, "dev")
            .failure_message
            .clone()
            .unwrap_or_default();
        let reasons: Vec<&str> = d.events.iter().map(|e| e.reason.as_str()).collect();
        assert!(
            why.starts_with("progress deadline 10m exceeded at 2026-"),
            "{policy}: failureMessage {why:?}, events {reasons:?}"
        );
        // The same text and Event as a pass that did not die.
        let first = |d: &Decision| d.events[0].clone();
        assert_eq!(
            first(&d).reason,
            "ProgressDeadlineExceeded",
            "{policy}: {reasons:?}"
        );
        assert_eq!(first(&d).message, first(&unharmed).message);
        assert_eq!(
            first(&d).stage.as_deref(),
            Some("dev"),
            "{policy}: the owed Event is about the stage that missed its deadline"
        );
        assert!(
            first(&d).owed,
            "notified by the record patch that recorded it, not again"
        );
        assert!(
            crate::pass::notifications::transitions(&d)
                .iter()
                .all(|n| n.reason != "ProgressDeadlineExceeded")
        );
        if policy == "halt" {
            // Held as the pass that recorded the miss would have written it: at its time, not
            // at the time of the pass that showed it (issue 45).
            assert_eq!(p.status, unharmed.status, "{policy}");
        }
        // Once.
        let d = run(&mut p, &mut w, min + 12);
        assert!(
            d.events
                .iter()
                .all(|e| e.reason != "ProgressDeadlineExceeded"),
            "{policy}: {:?}",
            d.events
        );
    }
}

/// Issue 30: every recorded text is bounded, whatever Sveltos' messages contain. A feature that
/// fails with a message of 1 MiB used to be copied whole into the stage's failureMessage, the
/// missed deadline's `why` and the rollback's `reason`: the record patch then exceeded the API
/// server's 256 KiB of annotations and was refused, every pass, and the promotion never rolled
/// back.
#[test]
fn sveltos_messages_of_any_size_leave_every_recorded_text_bounded() {
    use crate::bounded_text::RECORDED_TEXT_MAX;
    let (mut p, mut w, min) =
        completed(&[(PROGRESS_DEADLINE, "10m"), (FAILURE_POLICY, "rollback")]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    let huge = "values don't meet the specifications: ".to_string() + &"x".repeat(1 << 20);
    let mut failing = summaries_for(&w, "kyverno-dev", "Failed");
    for cs in &mut failing {
        for f in cs
            .status
            .as_mut()
            .unwrap()
            .feature_summaries
            .as_mut()
            .unwrap()
        {
            f.failure_message = Some(huge.clone());
        }
    }
    w.summaries
        .insert("kyverno-dev".into(), failing.into_iter().collect());
    for m in 1..=10 {
        let d = run(&mut p, &mut w, min + m);
        assert!(
            d.summary.len() <= RECORDED_TEXT_MAX + 64,
            "{}",
            d.summary.len()
        );
        for e in &d.events {
            assert!(
                e.message.len() <= 2 * RECORDED_TEXT_MAX,
                "{}: {}",
                e.reason,
                e.message.len()
            );
        }
    }
    assert_eq!(
        rollback(&p).map(|r| r.cause),
        Some(crate::annotations::Cause::ProgressDeadline)
    );
    assert!(failed(&p).unwrap().why.len() <= RECORDED_TEXT_MAX);
    assert!(rollback(&p).unwrap().reason.unwrap().len() <= RECORDED_TEXT_MAX);
    for (k, v) in annotations(&p) {
        assert!(v.len() <= 4 * RECORDED_TEXT_MAX, "{k}: {} bytes", v.len());
    }
    for s in p.status.as_ref().unwrap().stages.iter().flatten() {
        for text in [&s.failure_message, &s.current_status_description] {
            assert!(
                text.as_ref().is_none_or(|t| t.len() <= RECORDED_TEXT_MAX),
                "{}: {:?}",
                s.name,
                text.as_ref().map(String::len)
            );
        }
    }
}

/// Issue 30: a rollback that cannot finish (here staging's clusters never run the good revision
/// either) has a deadline of its own (default 1h, from its first pass): past it the promotion
/// says so (phase RollbackFailed, a Warning Event, a notification) and holds for a person; no
/// other profile changes, and passes are quiet. It used to wait for ever, RollingBack.
#[test]
fn a_rollback_that_cannot_finish_misses_its_own_deadline_and_holds_for_a_person() {
    use crate::annotations::DEADLINE_CLOCK;
    use crate::pass::rollback::ROLLBACK_FAILED;
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    let start = min + 10;
    assert_eq!(run(&mut p, &mut w, start).phase, Phase::RollingBack);
    assert_eq!(version_of(&w, "kyverno-staging"), "3.5.2");
    let d = run(&mut p, &mut w, start + 59);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(
        d.summary.ends_with(&format!(
            "(rollback deadline {})",
            Timestamp::new(t(start + 60))
        )),
        "{}",
        d.summary
    );
    assert_eq!(d.next_check, Some(t(start + 60)));
    let d = run(&mut p, &mut w, start + 60);
    assert_eq!(d.phase, Phase::RollbackFailed, "{}", d.summary);
    assert_eq!(events(&d), ["RollbackDeadlineExceeded"]);
    assert!(d.events[0].warning && d.events[0].recorded);
    let miss = rollback(&p).unwrap().missed.expect("the miss is recorded");
    assert_eq!(
        (miss.stage.as_str(), miss.deadline.as_str()),
        ("staging", "1h")
    );
    assert!(description(&p, "staging").starts_with(ROLLBACK_FAILED));
    assert!(
        stage_status(&p, "staging")
            .failure_message
            .as_deref()
            .is_some_and(|m| m.starts_with("rollback deadline 1h exceeded at 2026-")),
        "{:?}",
        stage_status(&p, "staging")
    );
    assert!(
        crate::pass::notifications::transitions(&d)
            .iter()
            .any(|n| n.transition == crate::notify::Transition::RollbackFailed)
    );
    // Holds: dev never goes back (its turn never came), nothing is written, nothing is read.
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
    let d = run(&mut p, &mut w, start + 61);
    assert_eq!(d.phase, Phase::RollbackFailed);
    assert!(!d.writes(), "{:?}", d.actions);
    let mut bare = w.clone();
    bare.revisions.clear();
    let d = decide(&p, &bare, &HealthResults::new(), &ctx(start + 62));
    assert_eq!((d.phase, d.needs_revision), (Phase::RollbackFailed, None));
    // `promoter resume`: the miss and the clock go; a new deadline from the next pass.
    let mut r = rollback(&p).unwrap();
    r.missed = None;
    annotate(&mut p, ROLLBACK, &serde_json::to_string(&r).unwrap());
    unannotate(&mut p, DEADLINE_CLOCK);
    let d = run(&mut p, &mut w, start + 200);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert_eq!(d.next_check, Some(t(start + 260)));
    assert!(d.events.is_empty(), "{:?}", d.events);
    // The good revision finally deploys: the rollback finishes as usual.
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, start + 201);
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, start + 202);
    assert_eq!(d.phase, Phase::RolledBack, "{}", d.summary);
}

/// The rollback's deadline is a setting; `none` waits for ever, and time held by an abort does
/// not count against it.
#[test]
fn the_rollback_deadline_is_a_setting_and_holds_do_not_count() {
    use crate::annotations::{ABORTED, Aborted};
    use crate::settings::ROLLBACK_DEADLINE;
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    annotate(&mut p, ROLLBACK_DEADLINE, "none");
    run(&mut p, &mut w, min + 10);
    let d = run(&mut p, &mut w, min + 10 + 24 * 60);
    assert_eq!(
        (d.phase, d.next_check),
        (Phase::RollingBack, None),
        "{}",
        d.summary
    );
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    annotate(&mut p, ROLLBACK_DEADLINE, "30m");
    let start = min + 10;
    run(&mut p, &mut w, start);
    let r = Run::of(p.status.as_ref().unwrap()).unwrap();
    annotate(
        &mut p,
        ABORTED,
        &serde_json::to_string(&Aborted {
            run: r,
            by: "bob".into(),
            at: Timestamp::new(t(start + 5)),
            reason: None,
        })
        .unwrap(),
    );
    assert_eq!(run(&mut p, &mut w, start + 5).phase, Phase::Aborted);
    unannotate(&mut p, ABORTED);
    // Held 60 minutes: due at start + 30 + 60.
    let d = run(&mut p, &mut w, start + 65);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert_eq!(d.next_check, Some(t(start + 90)));
    assert_eq!(run(&mut p, &mut w, start + 90).phase, Phase::RollbackFailed);
    // A bad value blocks the promotion, naming the annotation.
    let mut q = promotion(auto_stages());
    annotate(&mut q, ROLLBACK_DEADLINE, "soon");
    let d = run(&mut q, &mut fleet(), 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary.contains(
            "metadata.annotations[promoter.dev/rollback-deadline]: Invalid value: \"soon\""
        ),
        "{}",
        d.summary
    );
}

/// Issue 30: a promotion the freeze held when it became active (its status' `held`) stays held
/// when relabelled out of the freeze's selector, until a bypass or the freeze's end; it used to
/// escape at once, without a record.
#[test]
fn relabelling_does_not_escape_an_active_freeze() {
    let mut p = promotion(auto_stages());
    p.metadata.labels = Some([("tier".to_string(), "prod".to_string())].into());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let mut f = freeze(
        "prod-freeze",
        Some(json!({"matchLabels": {"tier": "prod"}})),
        None,
        Some(30),
    );
    let e = crate::freeze::evaluate(&f, t(1));
    f.status = Some(e.status(Some(vec!["kyverno".into()])));
    w.freezes = vec![f];
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, 2).phase, Phase::Frozen);
    p.metadata.labels = Some([("tier".to_string(), "dev".to_string())].into());
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.phase, Phase::Frozen, "relabelled out: {}", d.summary);
    assert!(!w.profiles.contains_key("kyverno-staging"));
    assert_eq!(d.next_check, Some(t(30)), "it says when the freeze ends");
    // The freeze ends: it goes on.
    let d = run(&mut p, &mut w, 30);
    assert_eq!(d.summary, "promoted dev -> staging");
}

/// Issue 31, the walk: "(Restart)" on a first rollout. A first start held (by a freeze, or a
/// promotion blocked on its first pass by a bad `promoter.dev/` value) and then let go is still
/// a first rollout: its Event restarts nothing.
#[test]
fn a_first_rollout_held_at_its_start_restarts_nothing() {
    let start_event = |d: &Decision| {
        d.events
            .iter()
            .find(|e| e.reason == "StageProvisioning")
            .map(|e| e.message.clone())
    };
    // Frozen at its first start.
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    w.freezes = vec![freeze("holidays", None, None, Some(5))];
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
    let d = run(&mut p, &mut w, 6);
    assert_eq!(
        start_event(&d).as_deref(),
        Some("Provisioning stage dev"),
        "{:?}",
        d.events
    );
    // Blocked on its first pass, then fixed.
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    annotate(&mut p, PROGRESS_DEADLINE, "soon");
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked, "{}", d.summary);
    unannotate(&mut p, PROGRESS_DEADLINE);
    let d = run(&mut p, &mut w, 1);
    assert_eq!(
        start_event(&d).as_deref(),
        Some("Provisioning stage dev"),
        "{:?}",
        d.events
    );
}

/// Pauses `p` (as `promoter pause` records it) and runs a pass at `min`: the deadline clock's
/// record before and after it.
fn paused_pass(
    p: &mut ClusterPromotion,
    w: &mut World,
    min: i64,
) -> (Option<String>, Option<String>) {
    use crate::annotations::{DEADLINE_CLOCK, PAUSED};
    let before = annotations(p).get(DEADLINE_CLOCK).cloned();
    annotate(p, PAUSED, r#"{"by":"bob","at":"2026-02-16T08:00:00Z"}"#);
    let d = run(p, w, min);
    assert_eq!(d.phase, Phase::Paused, "{}", d.summary);
    (before, annotations(p).get(DEADLINE_CLOCK).cloned())
}

/// Issue 33 (mutation campaign, `deadline::running`): a pause starts counting held time only on a
/// deadline that still runs. A halted miss, a finished rollback and a rollback without a deadline
/// have none: a paused pass records no hold for them (it used to go unguarded: each of these
/// conditions could be dropped and no test noticed).
#[test]
fn a_pause_records_a_hold_only_on_a_deadline_that_still_runs() {
    // A stage that missed its deadline and halted: the miss is final for the run.
    let mut p = promotion(auto_stages());
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    assert_eq!(run(&mut p, &mut w, 10).phase, Phase::Failed);
    let (before, after) = paused_pass(&mut p, &mut w, 11);
    assert_eq!((before, after), (None, None), "a halted run holds no clock");

    // A rollback that finished: its deadline is done.
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    run(&mut p, &mut w, min + 10);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, min + 12);
    run(&mut p, &mut w, min + 13);
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, min + 14).phase, Phase::RolledBack);
    let (before, after) = paused_pass(&mut p, &mut w, min + 15);
    assert_eq!(after, before, "a finished rollback's clock is left alone");

    // A rollback in progress with `promoter.dev/rollback-deadline: none`.
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    annotate(&mut p, crate::settings::ROLLBACK_DEADLINE, "none");
    assert_eq!(run(&mut p, &mut w, min + 10).phase, Phase::RollingBack);
    let (before, after) = paused_pass(&mut p, &mut w, min + 11);
    assert_eq!(
        after, before,
        "a rollback without a deadline holds no clock"
    );
    // With the default deadline the same pause is on record.
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    assert_eq!(run(&mut p, &mut w, min + 10).phase, Phase::RollingBack);
    let (before, after) = paused_pass(&mut p, &mut w, min + 11);
    assert_ne!(
        after, before,
        "the running rollback deadline records the hold"
    );
}

/// Issue 33 (mutation campaign, `deadline::stage_clock` and `running`): `promoter resume` of a
/// missed deadline gives that stage, and only that stage, a new deadline from the first pass that
/// sees the resume; time paused after the resume does not count against it; and `status`/`explain`
/// predict the same deadline the pass keeps.
#[test]
fn a_resumed_miss_restarts_only_that_stages_deadline_and_pauses_do_not_count() {
    use crate::pass::deadline::predicted_due;
    let predicted = |p: &ClusterPromotion, stage: &str, min: i64| {
        let spec = p.spec.stage(stage).unwrap();
        let entry = p
            .status
            .as_ref()
            .unwrap()
            .stages
            .iter()
            .flatten()
            .find(|s| s.name == stage);
        predicted_due(p, spec, entry.unwrap(), t(min))
    };
    let mut p = promotion(auto_stages());
    annotate(&mut p, PROGRESS_DEADLINE, "10m");
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    assert_eq!(predicted(&p, "dev", 5), Some(t(10)));
    assert_eq!(run(&mut p, &mut w, 10).phase, Phase::Failed);
    let mut f = failed(&p).unwrap();
    f.resumed = Some(Record {
        by: "alice".into(),
        at: Timestamp::new(t(13)).to_string(),
        revision: None,
        reason: None,
    });
    annotate(&mut p, FAILED, &serde_json::to_string(&f).unwrap());
    // Before any pass saw the resume, `explain` counts from the next pass, as the pass will.
    assert_eq!(predicted(&p, "dev", 14), Some(t(24)));
    let d = run(&mut p, &mut w, 14);
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert_eq!(d.next_check, Some(t(24)), "{}", d.summary);
    // Paused from 16 to 36: twenty minutes held, due at 44.
    paused_pass(&mut p, &mut w, 16);
    unannotate(&mut p, crate::annotations::PAUSED);
    let d = run(&mut p, &mut w, 36);
    assert_eq!(d.phase, Phase::Progressing, "{}", d.summary);
    assert_eq!(d.next_check, Some(t(44)), "{}", d.summary);
    assert_eq!(predicted(&p, "dev", 37), Some(t(44)));
    // dev deploys; staging starts at 40 and counts from its own start, not from a later pass.
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 40);
    assert_eq!(d.summary, "promoted dev -> staging");
    summarize(&mut w, "kyverno-staging", "Provisioning");
    let d = run(&mut p, &mut w, 46);
    assert_eq!(d.next_check, Some(t(50)), "{}", d.summary);
    assert_eq!(predicted(&p, "staging", 47), Some(t(50)));
    let d = run(&mut p, &mut w, 50);
    assert_eq!(d.phase, Phase::Failed, "{}", d.summary);
    assert_eq!(failed(&p).unwrap().stage, "staging");
}

/// Issue 33 (mutation campaign, `deadline::predicted_rollback_due`): the rollback deadline that
/// `explain` shows is the one the pass keeps, pauses included.
#[test]
fn explain_predicts_the_rollback_deadline_the_pass_keeps() {
    use crate::pass::deadline::predicted_rollback_due;
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    annotate(&mut p, crate::settings::ROLLBACK_DEADLINE, "30m");
    let start = min + 10;
    // Before the rollback there is none to predict.
    assert_eq!(predicted_rollback_due(&p, t(start)), None);
    let d = run(&mut p, &mut w, start);
    assert_eq!(d.phase, Phase::RollingBack);
    assert_eq!(d.next_check, Some(t(start + 30)));
    assert_eq!(
        predicted_rollback_due(&p, t(start + 1)),
        Some(t(start + 30))
    );
    paused_pass(&mut p, &mut w, start + 5);
    unannotate(&mut p, crate::annotations::PAUSED);
    // Held from start+5; the prediction at start+65 adds the hour as the next pass will.
    assert_eq!(
        predicted_rollback_due(&p, t(start + 65)),
        Some(t(start + 90))
    );
    let d = run(&mut p, &mut w, start + 65);
    assert_eq!(d.next_check, Some(t(start + 90)), "{}", d.summary);
    assert_eq!(run(&mut p, &mut w, start + 90).phase, Phase::RollbackFailed);
    assert_eq!(
        predicted_rollback_due(&p, t(start + 91)),
        None,
        "missed: nothing to predict"
    );
}

// Mutation campaign (docs/src/contributors/mutation-testing.md): what the tests of `rollback.rs` did not pin.

/// A rollback is announced once (`RollbackStarted`, from the pass that starts it), whichever of
/// its texts its stages show afterwards: all `Rolling back` (one target, or all at once), all
/// `Waiting` (in reverse, the active target a stage the run did not reach), or `Rollback failed`
/// (resumed after missing its own deadline). Each text alone used to be unpinned.
#[test]
fn a_rollback_is_announced_once_whatever_its_stages_show() {
    use crate::annotations::DEADLINE_CLOCK;
    use crate::pass::rollback::{ROLLBACK_FAILED, ROLLING_BACK, WAITING};
    // 9.9.9 never deploys on dev, the only stage it reached.
    let (mut p, mut w, min) =
        completed(&[(PROGRESS_DEADLINE, "10m"), (FAILURE_POLICY, "rollback")]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    summarize(&mut w, "kyverno-dev", "Provisioning");
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(
        events(&d),
        ["ProgressDeadlineExceeded", "RollbackStarted"],
        "{}",
        d.summary
    );
    // dev gets 3.5.2 back but its clusters never run it: every stage shows `Rolling back`.
    let d = run(&mut p, &mut w, min + 11);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(description(&p, "dev").starts_with(ROLLING_BACK));
    assert!(d.events.is_empty(), "{:?}", d.events);
    // Its own deadline (1h from its first pass) passes: `Rollback failed`, then resumed.
    let d = run(&mut p, &mut w, min + 70);
    assert_eq!(d.phase, Phase::RollbackFailed, "{}", d.summary);
    assert!(description(&p, "dev").starts_with(ROLLBACK_FAILED));
    let mut r = rollback(&p).unwrap();
    r.missed = None;
    annotate(&mut p, ROLLBACK, &serde_json::to_string(&r).unwrap());
    unannotate(&mut p, DEADLINE_CLOCK);
    let d = run(&mut p, &mut w, min + 80);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(d.events.is_empty(), "{:?}", d.events);

    // Reverse, production first (a stage the run did not reach): dev, the only stage the run
    // reached, shows `Waiting`.
    let (mut p, mut w, min) = leftover_above("reverse");
    let d = run(&mut p, &mut w, min + 13);
    assert_eq!(events(&d), ["ProgressDeadlineExceeded", "RollbackStarted"]);
    let d = run(&mut p, &mut w, min + 14);
    assert!(description(&p, "dev").starts_with(WAITING));
    assert!(d.events.is_empty(), "{:?}", d.events);
}

/// The targets of a rollback: a stage the run reached, whatever its profile (one deleted by hand is
/// re-created with the revision rolled back to), and a stage the run did not reach only while it
/// has a profile; one without stays as it is (no profile is created for a stage the run never
/// deployed).
#[test]
fn a_rollback_recreates_a_reached_stage_and_leaves_an_unreached_one_without_profile_alone() {
    let (mut p, mut w, min) = stuck_in_staging("all-at-once");
    w.profiles.remove("kyverno-dev");
    w.profiles.remove("kyverno-production");
    let d = run(&mut p, &mut w, min + 10);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert_eq!(version_of(&w, "kyverno-dev"), "3.5.2");
    assert_eq!(version_of(&w, "kyverno-staging"), "3.5.2");
    assert!(
        !w.profiles.contains_key("kyverno-production"),
        "a profile created for a stage the run never reached: {:?}",
        d.after_status
    );
    // What the active target waits for: its profile to get the revision (not yet a deployment).
    assert!(
        d.summary.contains(
            "stage staging: applying the revision to ClusterProfile kyverno-staging (0/2 stages done)"
        ),
        "{}",
        d.summary
    );
}

/// A rolled-back promotion repairs a profile edited by hand back to the revision rolled back to;
/// once every target holds it again, that is recorded (`kept`), and later passes are steady again:
/// they write nothing and need not read the stored revision.
#[test]
fn a_rolled_back_promotion_repairs_a_hand_edit_then_is_steady_again() {
    let (mut p, mut w, min) = stuck_in_staging("all-at-once");
    run(&mut p, &mut w, min + 10);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    assert_eq!(run(&mut p, &mut w, min + 12).phase, Phase::RolledBack);
    let steady = |p: &ClusterPromotion, w: &World, min: i64| {
        let mut without = w.clone();
        without.revisions.clear();
        decide(p, &without, &HealthResults::new(), &ctx(min))
    };
    let d = steady(&p, &w, min + 13);
    assert_eq!((d.phase, d.needs_revision), (Phase::RolledBack, None));
    // Someone edits dev's profile (the API server moves its generation).
    let cp = w.profiles.get_mut("kyverno-dev").unwrap();
    cp.spec.fields["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    cp.metadata.generation = Some(cp.metadata.generation.unwrap_or(1) + 1);
    let d = run(&mut p, &mut w, min + 13);
    assert_eq!(d.phase, Phase::RolledBack, "{}", d.summary);
    assert_eq!(version_of(&w, "kyverno-dev"), "3.5.2");
    let kept = rollback(&p).unwrap().kept;
    run(&mut p, &mut w, min + 14);
    assert_ne!(
        rollback(&p).unwrap().kept,
        kept,
        "the repaired profiles are recorded"
    );
    let d = steady(&p, &w, min + 15);
    assert_eq!(
        (d.phase, d.needs_revision.clone()),
        (Phase::RolledBack, None),
        "{}",
        d.summary
    );
    assert!(!d.writes(), "{:?}", d.actions);
    // production is a target the run never reached (its profile is the completed revision's):
    // an edit of it is repaired as well.
    let cp = w.profiles.get_mut("kyverno-production").unwrap();
    cp.spec.fields["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    cp.metadata.generation = Some(cp.metadata.generation.unwrap_or(1) + 1);
    run(&mut p, &mut w, min + 16);
    assert_eq!(version_of(&w, "kyverno-production"), "3.5.2");
}

/// A rollback that missed its own deadline holds for a person: a later pass that finds a target's
/// profile changed (here an annotation added by hand) looks again, and misses nothing new: no
/// second `RollbackDeadlineExceeded`, the recorded miss kept as it was.
#[test]
fn a_failed_rollback_that_sees_a_profile_change_misses_nothing_new() {
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    run(&mut p, &mut w, min + 10);
    assert_eq!(run(&mut p, &mut w, min + 70).phase, Phase::RollbackFailed);
    let miss = rollback(&p).unwrap().missed;
    w.profiles
        .get_mut("kyverno-staging")
        .unwrap()
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("example.com/note".into(), "looked at".into());
    let d = run(&mut p, &mut w, min + 80);
    assert_eq!(d.phase, Phase::RollbackFailed, "{}", d.summary);
    assert!(d.events.is_empty(), "{:?}", d.events);
    assert_eq!(rollback(&p).unwrap().missed, miss);
    assert_eq!(version_of(&w, "kyverno-dev"), "9.9.9");
}

/// A rollback that misses its own deadline records what its stage waited for: the deployment when
/// the stage's profile holds the revision, else the profile itself (here one stuck being deleted).
#[test]
fn a_missed_rollback_deadline_says_what_its_stage_waited_for() {
    for deleting in [false, true] {
        let (mut p, mut w, min) = stuck_in_staging("reverse");
        run(&mut p, &mut w, min + 10);
        if deleting {
            being_deleted(&mut w, "kyverno-staging");
        }
        let d = run(&mut p, &mut w, min + 70);
        assert_eq!(d.phase, Phase::RollbackFailed, "{}", d.summary);
        let miss = rollback(&p).unwrap().missed.unwrap();
        let why = if deleting {
            "the revision was not applied to ClusterProfile kyverno-staging"
        } else {
            // Sveltos still runs 9.9.9 there.
            "ClusterSummary HelmCharts kyverno-staging-sveltos-stg01 is not in sync."
        };
        assert_eq!(miss.why, why, "deleting: {deleting}");
        assert!(d.summary.contains(why), "{}", d.summary);
    }
}

/// The failureMessage of a rollback that missed its own deadline goes on the stage it waited for
/// (not the current one), replaces an earlier Sveltos failure, keeps an earlier progress miss
/// after it, and stays as it is on later passes.
#[test]
fn a_failed_rollback_says_why_on_the_stage_it_waited_for() {
    let failure = |p: &ClusterPromotion, stage: &str| {
        stage_status(p, stage)
            .failure_message
            .clone()
            .unwrap_or_default()
    };
    // staging missed its progress deadline, then the rollback its own.
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    run(&mut p, &mut w, min + 10);
    assert_eq!(run(&mut p, &mut w, min + 70).phase, Phase::RollbackFailed);
    let message = failure(&p, "staging");
    assert!(
        message.starts_with("rollback deadline 1h exceeded at ")
            && message.contains("; earlier: progress deadline 10m exceeded"),
        "{message}"
    );
    // A later pass that looks again (a target's profile changed) keeps it as it is.
    w.profiles
        .get_mut("kyverno-staging")
        .unwrap()
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("example.com/note".into(), "looked at".into());
    assert_eq!(run(&mut p, &mut w, min + 80).phase, Phase::RollbackFailed);
    assert_eq!(failure(&p, "staging"), message);

    // staging rolled back; dev (below the current stage) never runs the revision.
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    run(&mut p, &mut w, min + 10);
    run(&mut p, &mut w, min + 11);
    sveltos(&mut w, &[]);
    run(&mut p, &mut w, min + 12);
    assert!(description(&p, "staging").starts_with("Rolled back to revision"));
    assert_eq!(run(&mut p, &mut w, min + 70).phase, Phase::RollbackFailed);
    assert!(
        failure(&p, "dev").starts_with("rollback deadline 1h exceeded at "),
        "{:?}",
        stage_status(&p, "dev")
    );
    assert!(description(&p, "dev").starts_with(crate::pass::rollback::ROLLBACK_FAILED));
    assert!(description(&p, "staging").starts_with("Rolled back to revision"));

    // production, a target the run did not reach, never runs the revision: the current stage
    // (dev) says why; production gets no status entry.
    let (mut p, mut w, min) = leftover_above("reverse");
    run(&mut p, &mut w, min + 13);
    assert_eq!(run(&mut p, &mut w, min + 73).phase, Phase::RollbackFailed);
    assert!(
        failure(&p, "dev").starts_with("rollback deadline 1h exceeded at "),
        "{:?}",
        stage_status(&p, "dev")
    );
    let stages = p.status.as_ref().unwrap().stages.as_ref().unwrap();
    assert!(stages.iter().all(|s| s.name == "dev"), "{stages:?}");

    // `promoter rollback` of a run whose staging deployment fails (a failureMessage of its own).
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    summarize(&mut w, "kyverno-staging", "Failed");
    assert_eq!(run(&mut p, &mut w, min).phase, Phase::Failing);
    assert_eq!(
        failure(&p, "staging"),
        "ClusterSummary kyverno-staging-sveltos-stg01 is not yet provisioned."
    );
    let first = History::of(&p).0[0].revision.clone();
    let from = Run::of(p.status.as_ref().unwrap()).unwrap();
    annotate(
        &mut p,
        ROLLBACK,
        &serde_json::to_string(&Rollback {
            from,
            to: first,
            order: crate::settings::RollbackOrder::Reverse,
            cause: crate::annotations::Cause::Manual,
            by: "alice".into(),
            at: Timestamp::new(t(min + 1)),
            reason: None,
            completed_at: None,
            kept: None,
            missed: None,
        })
        .unwrap(),
    );
    assert_eq!(run(&mut p, &mut w, min + 1).phase, Phase::RollingBack);
    assert_eq!(run(&mut p, &mut w, min + 61).phase, Phase::RollbackFailed);
    let message = failure(&p, "staging");
    assert!(
        message.starts_with("rollback deadline 1h exceeded at ") && !message.contains("earlier"),
        "{message}"
    );
}

// Mutation campaign: `gates/freeze.rs`.

/// The freeze gate names the stage it holds (the next one) and never holds the last stage:
/// completing a rollout starts nothing.
#[test]
fn a_freeze_holds_the_next_stage_by_name_and_never_the_last_one() {
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    w.freezes = vec![freeze("holidays", None, Some(1), None)];
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
    assert!(
        d.summary
            .starts_with("stage dev done; stage staging held by freeze holidays"),
        "{}",
        d.summary
    );
    assert!(
        description(&p, "dev").contains("; stage staging waits"),
        "{}",
        description(&p, "dev")
    );
    w.freezes.clear();
    assert_eq!(run(&mut p, &mut w, 3).summary, "promoted dev -> staging");
    sveltos(&mut w, &[]);
    assert_eq!(
        run(&mut p, &mut w, 4).summary,
        "promoted staging -> production"
    );
    w.freezes = vec![freeze("holidays", None, Some(4), None)];
    sveltos(&mut w, &[]);
    let d = run(&mut p, &mut w, 5);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert!(is_complete(&p));
}

// Mutation campaign: `revisions.rs`.

/// The pass that completes a run stores its revision before its record patch; when that patch is
/// refused (a new spec came first), the stored revision is named by nothing. The restart marks a
/// sweep, which deletes it; the completed revision the history names stays.
#[test]
fn a_restart_over_a_refused_completion_sweeps_the_revision_it_stored() {
    let (mut p, mut w, min) = completed(&[]);
    let good = crate::api::revision_name(
        "kyverno",
        &p.status.clone().unwrap().profile_spec_hash.unwrap(),
    );
    new_revision(&mut p, "9.9.9");
    let mut m = min;
    let orphan = loop {
        let d = decide(&p, &w, &HealthResults::new(), &ctx(m));
        let stored = d.actions.iter().find_map(|a| match a {
            Action::StoreRevision(r) => Some(r.clone()),
            _ => None,
        });
        if let Some(r) = stored {
            // Only the revision is stored: the record patch and the status write are refused.
            let name = r.metadata.name.clone().unwrap();
            w.revisions.insert(name.clone(), Some(*r));
            break name;
        }
        apply(&mut p, &mut w, &d);
        provision_all(&mut w);
        m += 1;
        assert!(m < min + 60, "never completed");
    };
    assert!(!is_complete(&p), "the completion was never recorded");
    new_revision(&mut p, "10.0.0");
    let d = run(&mut p, &mut w, m + 1);
    assert!(
        d.actions.iter().any(|a| matches!(a, Action::Record(ops)
            if ops.iter().any(|o| matches!(o, RecordOp::SweepDue(_))))),
        "the restart marks a sweep"
    );
    assert_eq!(w.revisions.get(&orphan), Some(&None), "{orphan} is deleted");
    assert!(
        matches!(w.revisions.get(&good), Some(Some(_))),
        "{good} stays"
    );
    assert!(crate::annotations::sweep_due(&p).is_none(), "done");
}

/// What `status` and `explain` read before they predict a pass: the stored revision the decision
/// asks for, as the pass reads it (a rollback in progress; absent: recorded as read and absent),
/// nothing for a rollback of an earlier run or a steady rolled-back promotion, and again the
/// revision once a profile of a rolled-back promotion was edited by hand, so that `status`
/// predicts the repair the next pass makes, not a read of the revision.
#[tokio::test]
async fn status_reads_the_revision_its_decision_asks_for_and_no_other() {
    use crate::api::{PromotionRevision, revision_name};
    use crate::ops::load::revisions_asked_for;
    use kube::api::{Api, PostParams};
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    assert_eq!(run(&mut p, &mut w, min + 10).phase, Phase::RollingBack);
    let r = rollback(&p).unwrap();
    let name = revision_name("kyverno", &r.to);
    let stored = w.revisions[&name].clone().unwrap();
    let server = crate::fake::FakeApiServer::start_with_sveltos()
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    revisions
        .create(&PostParams::default(), &stored)
        .await
        .unwrap();
    let reads = || server.count(|r| r.resource == "promotionrevisions" && r.verb == "get");
    // What `status` reads of `w` for promotion `p` at minute `m`: the world without the stored
    // revisions (no pass lists them), and then the revision its decision asks for.
    let status_reads = async |p: &ClusterPromotion, w: &World, m: i64| {
        let mut seen = w.clone();
        seen.revisions.clear();
        revisions_asked_for(&client, std::slice::from_ref(p), &mut seen, t(m), Tz::UTC).await;
        seen
    };
    let seen = status_reads(&p, &w, min + 10).await;
    let got = seen.revisions.get(&name).cloned().flatten();
    assert_eq!(got.map(|r| r.spec), Some(stored.spec.clone()));
    assert_eq!(reads(), 1);
    // Read and absent.
    revisions.delete(&name, &Default::default()).await.unwrap();
    let seen = status_reads(&p, &w, min + 10).await;
    assert_eq!(seen.revisions.get(&name), Some(&None));
    revisions
        .create(&PostParams::default(), &stored)
        .await
        .unwrap();
    // A rollback of an earlier run is void: nothing to read.
    let mut earlier = p.clone();
    let mut void = r.clone();
    void.from.since = "2026-01-01T00:00:00Z".into();
    annotate(&mut earlier, ROLLBACK, &crate::annotations::encode(&void));
    server.clear_requests();
    let seen = status_reads(&earlier, &w, min + 10).await;
    assert!(seen.revisions.is_empty());
    // Rolled back: a steady status reads nothing.
    let mut k = 11;
    while rollback(&p).unwrap().kept.is_none() {
        assert!(k < 20, "the rollback finishes and records what it keeps");
        sveltos(&mut w, &[]);
        run(&mut p, &mut w, min + k);
        k += 1;
    }
    assert!(rollback(&p).unwrap().completed_at.is_some());
    let seen = status_reads(&p, &w, min + k).await;
    assert!(seen.revisions.is_empty());
    assert_eq!(reads(), 0);
    // Someone edits dev's profile: the next pass repairs it from the stored revision, and
    // `status` reads that revision to say so.
    let cp = w.profiles.get_mut("kyverno-dev").unwrap();
    cp.spec.fields["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    cp.metadata.generation = Some(cp.metadata.generation.unwrap_or(1) + 1);
    let seen = status_reads(&p, &w, min + k).await;
    assert_eq!(reads(), 1);
    let said = crate::ops::inspect::prediction(&p, &seen, t(min + k), Tz::UTC);
    assert_eq!(said.phase, Phase::RolledBack, "{}", said.summary);
    assert!(
        !said
            .summary
            .contains("reading its stored PromotionRevision"),
        "{}",
        said.summary
    );
    assert!(
        said.actions.iter().any(|a| a.contains("kyverno-dev")),
        "the repair of dev's profile is predicted: {:?}",
        said.actions
    );
}

/// A fake API server holding `p` (its sweep marked due) and its stored revisions: the one its
/// history keeps and `orphans` that nothing names.
async fn swept(
    orphans: usize,
) -> (
    crate::fake::FakeApiServer,
    kube::Client,
    ClusterPromotion,
    String,
    Vec<String>,
) {
    use crate::api::PromotionRevision;
    use kube::api::{Api, PostParams};
    let (mut p, w, _) = completed(&[]);
    annotate(&mut p, crate::annotations::REVISION_SWEEP, "token-1");
    let server = crate::fake::FakeApiServer::start_with_sveltos()
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    let mut stored = p.clone();
    stored.status = None;
    stored.metadata.finalizers = None;
    // Only its annotations matter here; upstream's CRD wants a chart's names.
    let chart = &mut stored.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0];
    chart["chartName"] = json!("kyverno/kyverno");
    chart["repositoryName"] = json!("kyverno");
    Api::<ClusterPromotion>::all(client.clone())
        .create(&PostParams::default(), &stored)
        .await
        .unwrap();
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    let (good, kept) = w.revisions.iter().next().unwrap();
    revisions
        .create(&PostParams::default(), kept.as_ref().unwrap())
        .await
        .unwrap();
    let mut names = Vec::new();
    for i in 0..orphans {
        let at = crate::api::Timestamp::new(t(i as i64));
        let r = PromotionRevision::of(&p, &format!("forgotten-{i}"), "stages", None, at);
        names.push(r.metadata.name.clone().unwrap());
        revisions.create(&PostParams::default(), &r).await.unwrap();
    }
    names.sort();
    (server, client, p, good.clone(), names)
}

fn stored_revisions(server: &crate::fake::FakeApiServer) -> Vec<String> {
    let store = server.store();
    let rt = crate::fake::promotion_revision_type();
    let mut names: Vec<String> = store
        .all(&rt)
        .iter()
        .filter_map(|r| r["metadata"]["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn marker(server: &crate::fake::FakeApiServer) -> Option<String> {
    let store = server.store();
    let p = store
        .get(&crate::fake::cluster_promotion_type(), "", "kyverno")
        .unwrap();
    p["metadata"]["annotations"][crate::annotations::REVISION_SWEEP]
        .as_str()
        .map(String::from)
}

/// A due sweep deletes what the history forgot, at most `SWEEP_PER_PASS` per pass, says so in
/// the pass's report, and removes its marker only once nothing is left.
#[tokio::test]
async fn a_due_sweep_deletes_what_the_history_forgot_page_by_page_then_clears_its_marker() {
    use crate::pass::revisions::{SWEEP_PER_PASS, sweep_if_due};
    let (server, client, p, good, orphans) = swept(SWEEP_PER_PASS + 1).await;
    let done = "the revision sweep is done".to_string();
    let deleted = |n: &str| format!("deleted PromotionRevision {n} (the history forgot it)");
    let out = sweep_if_due(&client, &p).await;
    assert_eq!(out.len(), SWEEP_PER_PASS, "{out:?}");
    assert!(
        out.iter()
            .all(|l| l.starts_with("deleted PromotionRevision "))
    );
    assert!(!out.contains(&done));
    assert_eq!(stored_revisions(&server).len(), 2);
    assert_eq!(marker(&server).as_deref(), Some("token-1"), "one is left");
    let left: Vec<String> = stored_revisions(&server)
        .into_iter()
        .filter(|n| *n != good)
        .collect();
    assert!(orphans.contains(&left[0]));
    assert_eq!(sweep_if_due(&client, &p).await, [deleted(&left[0]), done]);
    assert_eq!(stored_revisions(&server), [good]);
    assert_eq!(marker(&server), None);
    // No marker: nothing is read.
    server.clear_requests();
    let mut quiet = p.clone();
    unannotate(&mut quiet, crate::annotations::REVISION_SWEEP);
    assert!(sweep_if_due(&client, &quiet).await.is_empty());
    assert!(server.requests().is_empty());
}

/// A delete that fails keeps the marker (the next pass sweeps again); one answered 404 (gone
/// already) does not.
#[tokio::test]
async fn a_sweep_whose_delete_fails_keeps_its_marker_and_a_gone_revision_is_no_failure() {
    use crate::fake::{FaultAction, FaultRule, RequestMatcher};
    use crate::pass::revisions::sweep_if_due;
    let deletes = || RequestMatcher::verbs(&["delete"]).resource("promotionrevisions");
    let (server, client, p, _, orphans) = swept(2).await;
    server.inject(FaultRule::nth(deletes(), 1, FaultAction::Status(500)));
    let out = sweep_if_due(&client, &p).await;
    assert_eq!(
        out,
        [format!(
            "deleted PromotionRevision {} (the history forgot it)",
            orphans[1]
        )]
    );
    assert_eq!(marker(&server).as_deref(), Some("token-1"));
    server.clear_faults();
    server.inject(FaultRule::nth(deletes(), 1, FaultAction::Status(404)));
    let out = sweep_if_due(&client, &p).await;
    assert_eq!(out, ["the revision sweep is done"]);
    assert_eq!(marker(&server), None);
}

/// A sweep deletes only the object it listed (UID precondition): a revision re-created under the
/// same name meanwhile stays, and so does the marker.
#[tokio::test(start_paused = true)]
async fn a_sweep_never_deletes_a_revision_recreated_after_its_list() {
    use crate::api::PromotionRevision;
    use crate::fake::{FaultAction, FaultRule, RequestMatcher};
    use crate::pass::revisions::sweep_if_due;
    use kube::api::{Api, PostParams};
    let (server, client, p, _, orphans) = swept(2).await;
    let (first, second) = (orphans[0].clone(), orphans[1].clone());
    let hold = RequestMatcher::verbs(&["delete"])
        .resource("promotionrevisions")
        .name(&second);
    server.inject(FaultRule::nth(
        hold,
        1,
        FaultAction::Hang(std::time::Duration::from_secs(30)),
    ));
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    let before = revisions.get(&second).await.unwrap();
    let sweeping = tokio::spawn({
        let (client, p) = (client.clone(), p.clone());
        async move { sweep_if_due(&client, &p).await }
    });
    let rt = crate::fake::promotion_revision_type();
    // Virtual time: at most 10 s of it, well within the held delete's 30 s.
    for _ in 0..10_000 {
        if server.store().peek(&rt, "", &first).is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    // Listed, its delete on the way: re-created under the same name.
    revisions
        .delete(&second, &Default::default())
        .await
        .unwrap();
    let mut again = before.clone();
    again.metadata.uid = None;
    again.metadata.resource_version = None;
    again.metadata.creation_timestamp = None;
    let again = revisions
        .create(&PostParams::default(), &again)
        .await
        .unwrap();
    assert_ne!(again.metadata.uid, before.metadata.uid);
    let out = sweeping.await.unwrap();
    assert_eq!(
        out,
        [format!(
            "deleted PromotionRevision {first} (the history forgot it)"
        )]
    );
    assert_eq!(
        revisions.get(&second).await.unwrap().metadata.uid,
        again.metadata.uid
    );
    assert_eq!(marker(&server).as_deref(), Some("token-1"));
}

// Mutation campaign: `decide.rs`.

/// The ClusterSummaries a pass lists for a promotion (`watched_profiles`): those of the current
/// stage's profile and its preverification profile (only if it has one); every stage's profile while a rollback of this
/// run is in progress; none for a finished rollout, a finished rollback or a promotion being
/// deleted. A list the decision does not read is only slower, but one it reads and did not list
/// judges a stage without its summaries, and a failed list holds the promotion back
/// (`Unread::missing_for`).
#[test]
fn a_pass_lists_the_summaries_of_the_current_stage_or_of_every_stage_it_rolls_back() {
    use crate::pass::decide::watched_profiles;
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let fresh = promotion(auto_stages());
    assert_eq!(
        watched_profiles(&fresh),
        names(&["kyverno-dev"]),
        "before any status: stage 1, which deploys nothing before its checks"
    );
    let mut stages = auto_stages();
    stages[0]["trigger"] = json!({"auto": {"preHealthCheckDeployment": [
        {"kind": "ConfigMap", "namespace": "default", "name": "job"}]}});
    assert_eq!(
        watched_profiles(&promotion(stages)),
        names(&["kyverno-dev", "preverification-kyverno-dev"]),
        "a stage that deploys its checks first"
    );
    let (mut p, mut w, min) = stuck_in_staging("reverse");
    let staging = names(&["kyverno-staging"]);
    assert_eq!(watched_profiles(&p), staging);
    let mut deleted = p.clone();
    deleted.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
    );
    assert_eq!(watched_profiles(&deleted), names(&[]));
    // A rollback recorded for an earlier run is void: the current stage only.
    let (done, _, _) = completed(&[]);
    let mut void = p.clone();
    let earlier = Rollback {
        from: Run::of(done.status.as_ref().unwrap()).unwrap(),
        to: "h".into(),
        order: crate::settings::RollbackOrder::Reverse,
        cause: crate::annotations::Cause::ProgressDeadline,
        by: "promoter".into(),
        at: crate::api::Timestamp::new(t(0)),
        reason: None,
        completed_at: None,
        kept: None,
        missed: None,
    };
    annotate(&mut void, ROLLBACK, &crate::annotations::encode(&earlier));
    assert_eq!(watched_profiles(&void), staging);
    assert_eq!(watched_profiles(&done), names(&[]), "complete");
    // The missed deadline rolls back: every stage it may restore.
    assert_eq!(run(&mut p, &mut w, min + 10).phase, Phase::RollingBack);
    let every = names(&["kyverno-dev", "kyverno-staging", "kyverno-production"]);
    assert_eq!(watched_profiles(&p), every);
    for k in 11..20 {
        sveltos(&mut w, &[]);
        run(&mut p, &mut w, min + k);
    }
    assert!(rollback(&p).unwrap().completed_at.is_some());
    assert_eq!(watched_profiles(&p), names(&[]), "rolled back");
}

/// Which failed read holds a promotion back (`Unread::missing_for`): the profiles or the freezes
/// hold every promotion (the profiles' failure first); the summaries only of a profile it watches;
/// the inventory only a promotion that watches a profile (a finished rollout reads none of it).
#[test]
fn a_failed_read_holds_back_only_the_promotions_that_need_it() {
    use crate::pass::observe::Unread;
    let fresh = promotion(auto_stages());
    let (done, _, _) = completed(&[]);
    let text = |t: &str| Some(t.to_string());
    let nothing = Unread::default();
    assert_eq!(nothing.missing_for(&fresh), None);

    let freezes = Unread {
        freezes: text("listing PromotionFreezes: forbidden"),
        ..Unread::default()
    };
    assert_eq!(
        freezes.missing_for(&done),
        text("listing PromotionFreezes: forbidden")
    );
    let profiles = Unread {
        profiles: text("listing ClusterProfiles: timed out"),
        ..freezes.clone()
    };
    assert_eq!(
        profiles.missing_for(&done),
        text("listing ClusterProfiles: timed out")
    );

    let summaries = Unread {
        summaries: std::collections::BTreeMap::from([
            (
                "kyverno-staging".to_string(),
                "staging's summaries: 500".to_string(),
            ),
            (
                "kyverno-dev".to_string(),
                "dev's summaries: 503".to_string(),
            ),
        ]),
        inventory: text("listing SveltosClusters: 500"),
        ..Unread::default()
    };
    assert_eq!(summaries.missing_for(&fresh), text("dev's summaries: 503"));
    assert_eq!(
        summaries.missing_for(&done),
        None,
        "a finished rollout reads nothing"
    );
    let inventory = Unread {
        inventory: text("listing SveltosClusters: 500"),
        ..Unread::default()
    };
    assert_eq!(
        inventory.missing_for(&fresh),
        text("listing SveltosClusters: 500")
    );
    assert_eq!(inventory.missing_for(&done), None);
}

/// A pass whose clock says `min`:`sec` (clocks of CronJob pods on different nodes disagree).
fn ctx_s(min: i64, sec: i64) -> Context {
    Context {
        now: t(min) + chrono::Duration::seconds(sec),
        default_tz: chrono_tz::Tz::UTC,
    }
}

fn run_s(p: &mut ClusterPromotion, w: &mut World, min: i64, sec: i64) -> Decision {
    let c = ctx_s(min, sec);
    w.now = Some(c.now);
    let d = decide(p, w, &HealthResults::new(), &c);
    apply(p, w, &d);
    d
}

/// s40b: whether the failed stage's entry shows a recorded miss was judged by comparing its
/// lastStatusCheckTime with the miss's `at`: two stamps of two passes' clocks. A pass dies after
/// the record patch of a miss whose rollback finds its stored revision gone; the next pass, whose
/// clock is 2 s behind, shows the miss and the Blocked text over it (lastStatusCheckTime 2 s
/// before the miss). Every later pass took the miss for unshown: it wrote the status again and
/// recorded the ProgressDeadlineExceeded Event and a notified Blocked Event a second time. Under
/// halt (nothing writes over the miss) and with clocks that agree, it was said once already.
#[test]
fn a_miss_is_shown_once_whatever_the_clock_of_the_pass_that_showed_it() {
    for skew in [-2i64, 1] {
        let (mut p, mut w, min) = stuck_in_staging("reverse");
        w.revisions.clear();
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 10));
        let name = d.needs_revision.clone().expect("asks for the revision");
        w.revisions.insert(name, None);
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 10));
        let mut killed = d.clone();
        killed.status = None;
        killed.after_status.clear();
        apply(&mut p, &mut w, &killed);
        let f = failed(&p).expect("the miss is recorded");
        let d = run_s(&mut p, &mut w, min + 10, skew);
        assert_eq!(d.phase, Phase::Blocked, "skew {skew}: {}", d.summary);
        let reasons: Vec<&str> = d.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["ProgressDeadlineExceeded", "Blocked"],
            "skew {skew}"
        );
        for m in 11..14 {
            let d = run_s(&mut p, &mut w, min + m, 0);
            assert_eq!(d.phase, Phase::Blocked, "skew {skew}: {}", d.summary);
            assert!(
                d.events.is_empty(),
                "skew {skew}, minute {m}: said again: {:?}",
                d.events
            );
            assert!(
                d.status.is_none(),
                "skew {skew}, minute {m}: status written again"
            );
        }
        assert!(
            stage_status(&p, &f.stage)
                .failure_message
                .as_deref()
                .is_some_and(|m| m.starts_with("cannot roll back to revision ")),
            "skew {skew}: {:?}",
            stage_status(&p, &f.stage).failure_message
        );
    }
    // Under halt, a pass 2 s behind the one that recorded the miss shows it once.
    let (mut p, mut w, min) = completed(&[(PROGRESS_DEADLINE, "10m"), (FAILURE_POLICY, "halt")]);
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 10));
    let mut killed = d.clone();
    killed.status = None;
    killed.after_status.clear();
    apply(&mut p, &mut w, &killed);
    let d = run_s(&mut p, &mut w, min + 10, -2);
    assert_eq!(d.events.len(), 1, "{:?}", d.events);
    assert_eq!(d.events[0].reason, "ProgressDeadlineExceeded");
    for m in 11..13 {
        let d = run_s(&mut p, &mut w, min + m, 0);
        assert!(d.events.is_empty(), "minute {m}: {:?}", d.events);
        assert!(d.status.is_none(), "minute {m}: status written again");
    }
}

/// Issue 46 §4: a freeze that holds a stage which also awaits its approval says both (the
/// description, the Frozen Event), and tells whoever waits for approvals at once (an
/// `AwaitingApproval` Event, so its notification): a person is needed whatever the freeze does,
/// and an approval given during the freeze lets the stage through when it ends. Once, not again
/// when the freeze ends and the approval gate holds the stage by itself.
#[test]
fn a_freeze_over_a_stage_awaiting_approval_says_both_and_asks_for_the_approval_once() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    assert_eq!(run(&mut p, &mut w, 3).summary, "promoted dev -> staging");
    w.freezes = vec![freeze("holidays", None, Some(4), Some(30))];
    summarize(&mut w, "kyverno-staging", "Provisioned");
    let d = run(&mut p, &mut w, 5);
    assert_eq!(d.phase, Phase::Frozen, "{}", d.summary);
    assert_eq!(
        description(&p, "staging"),
        "Frozen: freeze holidays: holiday change freeze (until 2026-02-16T06:30:00Z); stage production waits, and stage staging awaits approval (2026-02-16T06:05:00Z)"
    );
    assert_eq!(
        staged_events(&d),
        [
            ("StageProvisioned", "staging"),
            ("Frozen", "staging"),
            ("AwaitingApproval", "staging")
        ]
    );
    assert!(
        d.events[1]
            .message
            .ends_with(", and stage staging awaits approval"),
        "{}",
        d.events[1].message
    );
    assert_eq!(
        d.events[2].message,
        "Stage staging awaits manual approval (frozen: stage production is held by freeze holidays until 2026-02-16T06:30:00Z; an approval given now lets it through when the freeze ends)"
    );
    let notified: Vec<_> = crate::pass::notifications::transitions(&d)
        .into_iter()
        .map(|n| n.transition.as_str())
        .collect();
    assert_eq!(notified, ["StageCompleted", "Frozen", "AwaitingApproval"]);
    assert!(!run(&mut p, &mut w, 6).writes(), "quiet while frozen");
    // The freeze ends: the approval gate holds it, and says nothing new.
    let d = run(&mut p, &mut w, 30);
    assert_eq!(d.phase, Phase::AwaitingApproval);
    assert!(events(&d).is_empty(), "{:?}", events(&d));
    // An approval given during a freeze waits for its end, then lets the stage through.
    w.freezes = vec![freeze("holidays", None, Some(31), Some(40))];
    let d = run(&mut p, &mut w, 31);
    assert_eq!(d.phase, Phase::Frozen);
    assert_eq!(events(&d), ["Frozen"], "the approval was asked for already");
    set_approved(&mut p, 1, Some(true));
    let d = run(&mut p, &mut w, 32);
    assert_eq!(d.phase, Phase::Frozen);
    assert!(
        description(&p, "staging").contains("stage production waits (2026"),
        "approved: only the freeze holds it: {}",
        description(&p, "staging")
    );
    assert_eq!(
        run(&mut p, &mut w, 40).summary,
        "promoted staging -> production"
    );
}

/// The API server's second of minute `min` (what `managedFields` carry).
fn second_of(min: i64) -> String {
    t(min).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// [`stuck_in_staging`] where Sveltos reported the hash `good` on every stage's summaries when
/// 3.5.2 completed (stored with the revision, as the completing pass stores it), and 9.9.9's
/// deadline has passed: the rollback is recorded and staging's profile goes back to 3.5.2 while
/// staging was deploying 9.9.9 (an unsettled write).
fn rolling_back_with_hashes(good: &str) -> (ClusterPromotion, World, i64) {
    let (mut p, mut w, min) = completed(&[
        (PROGRESS_DEADLINE, "10m"),
        (FAILURE_POLICY, "rollback"),
        (ROLLBACK_ORDER, "reverse"),
    ]);
    for profile in ["kyverno-dev", "kyverno-staging", "kyverno-production"] {
        provision(&mut w, profile, good, &second_of(0), &second_of(1));
    }
    let hashes = crate::pass::known_hashes::of_run(&p, &w);
    assert_eq!(hashes.len(), 3, "{hashes:?}");
    for r in w.revisions.values_mut().flatten() {
        r.spec.feature_hashes = hashes.clone();
    }
    new_revision(&mut p, "9.9.9");
    run(&mut p, &mut w, min);
    provision(
        &mut w,
        "kyverno-dev",
        "BADxxxxxxxxxxxxxxxxxx=",
        &second_of(min),
        &second_of(min + 1),
    );
    run(&mut p, &mut w, min + 1);
    assert_eq!(version_of(&w, "kyverno-staging"), "9.9.9");
    summarize(&mut w, "kyverno-staging", "Provisioning");
    run(&mut p, &mut w, min + 2);
    let d = run(&mut p, &mut w, min + 12);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert_eq!(version_of(&w, "kyverno-staging"), "3.5.2");
    let recorded = crate::annotations::redeploy::redeploys(&p);
    assert!(recorded["kyverno-staging"].unsettled, "{recorded:?}");
    (p, w, min + 12)
}

/// Issue 45: staging's rollback was written while staging deployed 9.9.9, and Sveltos answers in
/// the second of the write (spec and status stamped alike): the hashes 3.5.2's revision stored
/// for staging say its summaries run 3.5.2, so staging is rolled back at the next pass; a hash
/// the revision did not store is judged as before (the grace after an unsettled write), and the
/// rollback's next check is when that grace ends.
#[test]
fn a_rollback_answered_in_the_second_of_its_write_is_judged_by_the_stored_hashes() {
    let good = "GOODxxxxxxxxxxxxxxxxx=";
    let (mut p, mut w, min) = rolling_back_with_hashes(good);
    provision(
        &mut w,
        "kyverno-staging",
        good,
        &second_of(min),
        &second_of(min),
    );
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(
        staged_events(&d),
        [("StageRolledBack", "staging")],
        "{}",
        d.summary
    );
    assert!(description(&p, "staging").starts_with("Rolled back to revision"));
    assert!(d.grace.is_empty());

    // The same answer with a hash the revision did not store: nothing tells it from a status of
    // 9.9.9 landing in that second.
    let (mut p, mut w, min) = rolling_back_with_hashes(good);
    let other = "OTHERxxxxxxxxxxxxxxxx=";
    provision(
        &mut w,
        "kyverno-staging",
        other,
        &second_of(min),
        &second_of(min),
    );
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::RollingBack, "{}", d.summary);
    assert!(
        d.summary
            .contains("showed no status of the spec before it yet"),
        "{}",
        d.summary
    );
    let grace_ends = t(min) + crate::pass::summaries::STALE_PROVISIONED_GRACE;
    assert_eq!(d.next_check, Some(grace_ends), "{}", d.summary);
    assert_eq!(d.grace, ["staging"]);
}

/// The revision a completing pass stores keeps, per stage, the hashes Sveltos reported for that
/// stage's profile: the pass lists only the last stage's summaries, so it asks for the others',
/// and decides again with them (as `pass_body` does).
#[test]
fn a_completing_pass_reads_every_stage_s_summaries_and_stores_their_hashes() {
    let good = "GOODxxxxxxxxxxxxxxxxx=";
    let mut p = promotion(auto_stages());
    let mut w = fleet();
    let mut min = 0;
    while p
        .status
        .as_ref()
        .and_then(|s| s.current_stage_name.as_deref())
        != Some("production")
    {
        run(&mut p, &mut w, min);
        for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
            provision(&mut w, &name, good, &second_of(min), &second_of(min));
        }
        min += 1;
        assert!(min < 30, "never reached production");
    }
    // As the completing pass lists them: production's only.
    let mut listed = w.clone();
    listed.now = Some(t(min));
    for profile in ["kyverno-dev", "kyverno-staging"] {
        listed.summaries.remove(profile);
        listed.summaries_listed.remove(profile);
    }
    let stored = |d: &Decision| {
        d.actions.iter().find_map(|a| match a {
            Action::StoreRevision(r) => Some(r.spec.feature_hashes.clone()),
            _ => None,
        })
    };
    let d = decide(&p, &listed, &HealthResults::new(), &ctx(min));
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(d.needs_summaries, ["kyverno-dev", "kyverno-staging"]);
    let partial = stored(&d).expect("the revision is stored");
    assert_eq!(partial.keys().collect::<Vec<_>>(), ["production"]);
    // Read, and decided again: every stage's hashes, each about its profile's spec.
    w.now = Some(t(min));
    let d = decide(&p, &w, &HealthResults::new(), &ctx(min));
    assert!(d.needs_summaries.is_empty());
    let all = stored(&d).expect("the revision is stored");
    assert_eq!(
        all.keys().collect::<Vec<_>>(),
        ["dev", "production", "staging"]
    );
    for (stage, hashes) in &all {
        let profile = &w.profiles[&format!("kyverno-{stage}")];
        assert_eq!(
            Some(&hashes.spec),
            profile
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::pass::profiles::SPEC_HASH_ANNOTATION)),
            "{stage}"
        );
        assert_eq!(
            hashes.features,
            std::collections::BTreeMap::from([(
                "Helm".to_string(),
                vec!["GOODxxxxxxxx".to_string()]
            )]),
            "{stage}"
        );
    }
}
