//! The failure budget's invariants (the book's invariants, "Failure budget"), checked on every
//! step with `budget=N` ([`Bounds::budget`]), from the world and the writing pass's own listing:
//!
//! * **Bounded and named when it passes.** A pass that passes a stage with a budget listed at most
//!   the budget of its clusters outside the run's revision (no summary in sync with the stage's
//!   profile of the run, every feature `Provisioned` with the hash of that spec), and each of them
//!   is named in the run's record (`promoter.dev/budgeted`) it passes with. (That the world ran
//!   the revision on all but the budget of the stage's clusters since its profile got it, `ghost`
//!   checks as it checks a stage without a budget ran it everywhere.)
//! * **Named only when failing.** A cluster a pass names against a stage's budget for the first
//!   time in a run was failing in its listing: a feature `Failed` or `FailedNonRetriable` (the
//!   model's clusters are always ready; a progress deadline may make a cluster still deploying
//!   fail, so with deadlines this is not judged).
//! * **Named until it runs the revision or leaves the stage.** Within a run, a cluster named
//!   against a stage's budget is dropped from the record only by a pass that listed it running
//!   the stage's revision, or that no longer finds it in the stage; nobody else drops it.
//! * **Spent per run, once.** A pass never holds a stage over its budget ("more than the failure
//!   budget") while at most the budget of its clusters can count against it in the run the
//!   decision is for: failing in the listing, or named in that run's record. A record of an
//!   earlier run, or a cluster counted twice, does not spend it again ([`decided`]).
//!
//! The world's side of the budget is the run's record: the status, `explain`, Events and
//! notifications are made from it (their own tests say so).

use super::ghost::{outside_listed, runs_listed};
use super::memo;
use super::setup::{Bounds, CLUSTER_NAMESPACE, Policy, budget_of, promotion_name};
use super::state::{Acting, Pass, State, Step};
use promoter::annotations::{Run, budgeted};
use promoter::api::ClusterPromotion;
use promoter::pass::deployment::matching_clusters;
use promoter::pass::{Decision, World};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The clusters (by name: all are in [`CLUSTER_NAMESPACE`]) the record of `run` names against
/// `stage`'s budget; none for a record of another run (void).
pub fn named(p: &ClusterPromotion, run: Option<&Run>, stage: &str) -> BTreeSet<String> {
    budgeted(p)
        .filter(|b| Some(&b.run) == run)
        .map(|b| {
            b.of_stage(stage)
                .iter()
                .map(|c| {
                    c.cluster
                        .strip_prefix(&format!("{CLUSTER_NAMESPACE}/"))
                        .unwrap_or(&c.cluster)
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The pass taking `step` (a write), as it decided.
fn writer(pre: &State, step: Step) -> Option<&Acting> {
    match step {
        Step::Write(n) | Step::WriteLost(n) | Step::WriteDropped(n) => {
            match pre.passes.get(n as usize)? {
                Pass::Acting(a) => Some(a),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether the summary `a` listed of `profile` on `cluster` reports a feature `Failed` or
/// `FailedNonRetriable` (of whatever spec it is about).
fn failing_listed(a: &Acting, profile: &str, cluster: &str) -> bool {
    let summary = format!("{profile}-sveltos-{cluster}");
    a.summaries.iter().any(|cs| {
        cs.pointer("/metadata/name").and_then(|v| v.as_str()) == Some(summary.as_str())
            && cs
                .pointer("/status/featureSummaries")
                .and_then(|f| f.as_array())
                .is_some_and(|f| {
                    f.iter()
                        .any(|x| x["status"] == "Failed" || x["status"] == "FailedNonRetriable")
                })
    })
}

/// One step as the budget's checks see it.
pub struct BudgetStep<'a> {
    pub i: usize,
    pub a: &'a memo::Promotion,
    pub b: &'a memo::Promotion,
    pub pre: &'a State,
    pub post: &'a State,
    pub step: Step,
    pub bounds: &'a Bounds,
    /// The stage this step passed, if any.
    pub passed: Option<&'a str>,
    /// The content of each stage's profile in a revision (see `ghost::contents_of`).
    pub contents_of: &'a dyn Fn(&str) -> Option<std::collections::BTreeMap<String, u64>>,
}

/// Every invariant of the budget this step broke.
pub fn check(cx: &BudgetStep, out: &mut Vec<String>) {
    if cx.bounds.budget == 0 {
        return;
    }
    let name = promotion_name(cx.i);
    let (pa, pb) = (&cx.a.p, &cx.b.p);
    let writer = writer(cx.pre, cx.step);
    let run_b = pb.status.as_ref().and_then(Run::of);
    // Bounded and named when it passes.
    if let (Some(stage), Some(w)) = (cx.passed, writer)
        && let Some(st) = pb.spec.stages.iter().find(|s| s.name == stage)
        && budget_of(cx.bounds, stage) > 0
    {
        let want = cx.b.contents.get(stage).copied().unwrap_or_default();
        let profile = format!("{name}-{stage}");
        let outside = outside_listed(w, &cx.post.store, st, &profile, want);
        let allowed = budget_of(cx.bounds, stage);
        if outside.len() > allowed {
            out.push(format!(
                "{name}: stage {stage} passed with {} clusters outside the run's revision as the pass listed them ({}), more than its failure budget of {allowed}",
                outside.len(),
                outside.join(", ")
            ));
        }
        let named_b = named(pb, run_b.as_ref(), stage);
        for x in outside.iter().filter(|x| !named_b.contains(*x)) {
            out.push(format!(
                "{name}: stage {stage} passed with cluster {x} outside the run's revision and not named against its failure budget"
            ));
        }
    }
    let (record_a, record_b) = (budgeted(pa), budgeted(pb));
    if record_a == record_b {
        return;
    }
    // The run the writer goes on with: the one its decision's status is of (or the one it
    // observed); a person's step goes on with the status' run.
    let going_on = match writer {
        Some(w) => {
            let d = &w.decisions[w.index];
            d.status
                .as_ref()
                .or(w.decoded[w.index].status.as_ref())
                .and_then(Run::of)
        }
        None => run_b.clone(),
    };
    for st in &pb.spec.stages {
        let stage = st.name.as_str();
        let profile = format!("{name}-{stage}");
        // Named until it runs the revision or leaves the stage.
        if let Some(ra) = record_a.as_ref().map(|r| &r.run)
            && going_on.as_ref() == Some(ra)
        {
            let before = named(pa, Some(ra), stage);
            let after = named(pb, Some(ra), stage);
            let want = (cx.contents_of)(&ra.revision).and_then(|c| c.get(stage).copied());
            let still_in = super::ghost::selected_clusters(&cx.post.store, st);
            for x in before.difference(&after) {
                let ran = match (writer, want) {
                    (Some(w), Some(want)) => runs_listed(w, &profile, x, want),
                    _ => false,
                };
                if !ran && still_in.contains(x) {
                    out.push(format!(
                        "{name}: cluster {x} counted against stage {stage}'s failure budget in run {} is no longer named, though {} listed it running the revision and it is still in the stage (by {:?})",
                        ra.revision,
                        if writer.is_some() { "the pass had not" } else { "no pass" },
                        cx.step
                    ));
                }
            }
        }
        // Named only when failing.
        if let Some(rb) = record_b.as_ref().map(|r| &r.run) {
            let before = named(pa, Some(rb), stage);
            let after = named(pb, Some(rb), stage);
            for x in after.difference(&before) {
                let failing = match writer {
                    Some(w) => failing_listed(w, &profile, x) || cx.bounds.policy != Policy::None,
                    None => false,
                };
                if !failing {
                    out.push(format!(
                        "{name}: cluster {x} named against stage {stage}'s failure budget though {} (by {:?})",
                        if writer.is_some() {
                            "the pass did not list it failing"
                        } else {
                            "no pass named it"
                        },
                        cx.step
                    ));
                }
            }
        }
    }
}

thread_local! {
    /// The stages the decisions of the step being applied held over their failure budget, with
    /// how many of their clusters can count against it: (promotion, stage, count, the decision's
    /// summary). Filled by [`decided`], taken by [`held_over`].
    static HELD_OVER: RefCell<Vec<(String, String, usize, String)>> = const { RefCell::new(Vec::new()) };
}

/// The beginning of what a stage held over its budget says (`pass::budget`).
const OVER: &str = "more than the failure budget";

/// Every decision a pass makes: the stages it holds over their failure budget, and how many of
/// their clusters can count against it in the decision's run (failing in `world`, or named in
/// that run's record; every cluster of the stage when the promotion has a progress deadline).
pub fn decided(world: &World, p: &ClusterPromotion, d: &Decision) {
    // A status left as observed was judged when it was written.
    let Some(status) = d.status.as_ref() else {
        return;
    };
    let run = Run::of(status);
    let name = p.metadata.name.clone().unwrap_or_default();
    let deadlines = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(promoter::settings::PROGRESS_DEADLINE));
    let current = status.current_stage_name.as_deref();
    for entry in status.stages.iter().flatten() {
        if Some(entry.name.as_str()) != current {
            continue;
        }
        let held = [&entry.current_status_description, &entry.failure_message]
            .iter()
            .any(|t| t.as_deref().is_some_and(|t| t.contains(OVER)));
        let Some(st) = p.spec.stages.iter().find(|s| s.name == entry.name) else {
            continue;
        };
        if !held {
            continue;
        }
        let profile = format!("{name}-{}", st.name);
        let recorded = named(p, run.as_ref(), &st.name);
        let selector = st.cluster_selector.clone().unwrap_or_default();
        let summaries = world.summaries.get(&profile);
        let count = matching_clusters(&selector, world)
            .iter()
            .filter(|c| !c.paused)
            .filter(|c| {
                deadlines
                    || !c.ready
                    || recorded.contains(&c.name)
                    || summaries
                        .and_then(|s| s.find(c.kind, &c.namespace, &c.name))
                        .is_some_and(|s| {
                            s.features.iter().any(|f| {
                                matches!(f.status.as_deref(), Some("Failed" | "FailedNonRetriable"))
                            })
                        })
            })
            .count();
        HELD_OVER.with(|h| {
            h.borrow_mut()
                .push((name.clone(), st.name.clone(), count, d.summary.clone()))
        });
    }
}

/// Forgets what an earlier step's decisions left.
pub fn decided_clear() {
    HELD_OVER.with(|h| h.borrow_mut().clear());
}

/// "Spent per run, once": a decision of this step that held a stage over its budget while at most
/// the budget of its clusters could count against it ([`decided`]).
pub fn held_over(bounds: &Bounds, out: &mut Vec<String>) {
    for (name, stage, count, summary) in HELD_OVER.with(|h| std::mem::take(&mut *h.borrow_mut())) {
        let allowed = budget_of(bounds, &stage);
        if count <= allowed {
            out.push(format!(
                "{name}: stage {stage} held over its failure budget of {allowed} though only {count} of its clusters can count against it in the run (failing, or named in the run's record): the budget spent twice ({summary})"
            ));
        }
    }
}
