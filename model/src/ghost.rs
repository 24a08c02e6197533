//! The invariants (the book, docs/src/contributors/invariants.md), checked on every step of the model, and the
//! ghost state they need: what happened before that the objects no longer show.
//!
//! * **Progressive.** A stage's profile gets a content (the profile's spec without its selector)
//!   only when a status of the current run has recorded the stage as reached with that content
//!   (a rollback's content is judged by the incident checks instead), and (for every stage
//!   after the first) only once the stage before ran that content on every cluster it selects, a
//!   tick earlier when it has a delay. "Ran" is judged by content, as Sveltos shows it: the
//!   summary's spec is the profile's and every feature is `Provisioned` with the hash Sveltos
//!   computes for that spec (a `Provisioned` left from the previous spec, shown while the new spec
//!   is not deployed yet, does not count: the book's invariants, "Stage completion"). A status moves at most one stage forward within a run, never
//!   back, and passes a stage only once it ran the run's content everywhere (a tick earlier with a
//!   delay), a window only while the passing pass's clock is inside it.
//! * **An approval is used once, for one run, never lost.** The ghost follows the person's
//!   approval of `staging`: given (`approved: true` by the person), consumed into a grant for the
//!   current run (only by a pass, only for the revision a `promoter approve` record names), used
//!   when the stage is passed in that run (a stage is passed only with such a grant), given back
//!   from a grant superseded before use (only to a run of the same revision), void when the run it
//!   was consumed for is superseded by another revision, withdrawn when `promoter approve` gave it
//!   to another revision. Any other removal by a pass is a lost approval.
//! * **Completion**, as the world shows it (the status a person reads and what the clusters run,
//!   not promoter's completion record): a run reads complete (its last stage current,
//!   `Successfully provisioned`) only while every stage's profile carries the run's revision, each
//!   having run it on every cluster it selects; once read complete, no later status of that run
//!   reads a stage on its way or another stage. promoter's record is checked too: never dropped
//!   within a run, set only at the last stage. A new run starts only for a spec that differs from
//!   the run's. A status that reads a run complete shows its last stage deployed at the time a
//!   pass found it deployed, or the completing pass's when none did before it (its
//!   lastSuccessfulAppliedTime), whichever pass writes it: the
//!   completing pass's status write may be lost after its record patch, and the next pass then
//!   writes what it would have.
//! * **No stage waits for the grace when Sveltos has answered** (with [`Bounds::api_clock`]: with
//!   the store's fixed time, long ago, every grace is over). A pass's decision that a stage waits
//!   only for the freshness grace (`Decision::grace`) while every summary it listed of the stage's
//!   profile runs that profile's spec (in sync, every feature `Provisioned` with the hash of that
//!   spec) is a violation, unless nothing promoter can read tells that answer from a late status
//!   of the spec before: the stage's profile got its spec from a pass whose listing showed a
//!   summary of it not (yet) about the spec it carried ([`PromotionGhost::blind`]), and not from
//!   a rollback (whose revision stored the hashes Sveltos reported for it).

use super::memo;
use super::setup::{
    Bounds, CLUSTER_NAMESPACE, STAGES, all_clusters, budget_of, fixed_time, promotion_name, tier,
};
use super::state::{Acting, FREEZE, Pass, State, Step, Work, person, promotion};
use chrono::{DateTime, Utc};
use promoter::annotations::redeploy::prefix;
use promoter::annotations::{self, Run};
use promoter::api::{ClusterPromotion, Stage};
use promoter::fake::promotion_freeze_type;
use promoter::fake::{Store, cluster_profile_type, cluster_summary_type};
use promoter::labels::LabelSelector;
use promoter::ops::control::resume_ops;
use promoter::pass::deployment::matching_clusters;
use promoter::pass::summaries::ProfileSummaries;
use promoter::pass::{Decision, World};
use promoter::sim::addon::labels;
use promoter::sim::feature_hash::feature_hash;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{LazyLock, Mutex};

/// What the approval of an approval token allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Binding {
    /// Given by hand (or a pre-approval): the next revision that reaches the stage.
    Any,
    /// For this revision only (`promoter approve`, or given back from a grant).
    Revision(String),
}

/// Where the person's approval of `staging` is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// In `approved: true`.
    pub flag: Option<Binding>,
    /// Consumed for this run, not used yet.
    pub grant: Option<Run>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PromotionGhost {
    pub approval: Tokens,
    /// `<stage>/<content>` that ran on every selected cluster since the stage's profile last got
    /// that content, and whether a tick passed since.
    pub deployed: BTreeMap<String, bool>,
    /// `<stage>/<content>` a status of the current run recorded as reached (cleared by a new
    /// run).
    pub recorded: BTreeSet<String>,
    /// The revisions every stage ran on all its clusters at once (as the world showed it: the
    /// last completed last), with the content each stage ran: what a rollback may restore.
    pub good: Vec<(String, BTreeMap<String, u64>)>,
    /// Revisions a rollback moved a stage away from, not given back by a person since
    /// (`resume` that says it redeploys them).
    pub rolled_back: BTreeSet<String>,
    /// The run whose status showed a stage failed by its progress deadline, not resumed since.
    pub missed: Option<Run>,
    /// The run a rollback was asked for: by `promoter rollback`, or by a miss under the failure
    /// policy `rollback`. No profile goes back to an earlier revision otherwise.
    pub rollback_asked: Option<Run>,
    /// The revision a person's `resume` rolls out again after its rollback (a new run of the
    /// same spec may start once for it); taken by the next run, whatever its spec.
    pub retry: Option<String>,
    /// The run the status showed complete ([`reads_complete`]), while it is the status' run.
    pub read_complete: Option<Run>,
    /// The stages whose profile's spec was written, not by a rollback, by a pass whose listing
    /// showed a summary of that profile missing, out of sync, or with a status about another spec
    /// than the one it carried (hashes not those of its spec): a status of the spec before, with
    /// a hash the pass never saw, may still come, so the grace is the only rule left (kept only
    /// with [`Bounds::api_clock`], the bound where a grace can be waited for).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub blind: BTreeSet<String>,
    /// When the last stage of the current run was passed: the clock of the pass whose record
    /// patch recorded the completion (cleared by a new run). A timestamp, so that the fingerprint
    /// names it as it names the status's times (`canon`).
    pub completed_at: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ghost {
    pub promotions: Vec<PromotionGhost>,
    /// Per pass: a freeze was created after it read the freezes (it takes effect from the next
    /// pass, the book's invariants).
    pub fresh_freeze: Vec<bool>,
}

impl Ghost {
    pub fn initial(_: &State, bounds: &Bounds) -> Ghost {
        Ghost {
            promotions: vec![PromotionGhost::default(); bounds.promotions],
            fresh_freeze: vec![false; bounds.passes],
        }
    }
}

fn key(stage: &str, content: u64) -> String {
    format!("{stage}/{content:016x}")
}

fn profile_name(index: usize, stage: &str) -> String {
    format!("{}-{stage}", promotion_name(index))
}

/// The content of the stored profile of a stage.
fn stored_content(store: &Store, index: usize, stage: &str) -> Option<u64> {
    let cp = store.peek(&cluster_profile_type(), "", &profile_name(index, stage))?;
    Some(memo::profile_content(cp))
}

/// Whether a step changed any object of promotion `index`: itself, its profiles, their summaries.
fn touched(pre: &Store, post: &Store, index: usize) -> bool {
    if pre.shares_objects(post) {
        return false;
    }
    let same = |rt: &promoter::fake::ResourceType, ns: &str, name: &str| match (
        pre.peek(rt, ns, name),
        post.peek(rt, ns, name),
    ) {
        (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    if !same(
        &promoter::fake::cluster_promotion_type(),
        "",
        &promotion_name(index),
    ) {
        return true;
    }
    STAGES.iter().any(|stage| {
        let name = profile_name(index, stage);
        !same(&cluster_profile_type(), "", &name)
            || all_clusters().any(|(cluster, _)| {
                !same(
                    &cluster_summary_type(),
                    CLUSTER_NAMESPACE,
                    &format!("{name}-sveltos-{cluster}"),
                )
            })
    })
}

/// The content the stage's profile runs on every ready cluster the stage selects: each has a
/// summary in sync with the profile, every feature `Provisioned` with the hash of that spec.
pub fn ran_everywhere(store: &Store, index: usize, stage: &Stage) -> Option<u64> {
    outside(store, index, stage, |_| true)
        .filter(|(_, out)| out.is_empty())
        .map(|(c, _)| c)
}

/// The content of the stage's stored profile, and the ready clusters the stage selects that do
/// not run it (no summary in sync with the profile with every feature `Provisioned` with the
/// hash of that spec), of those `consider` keeps (the others are not looked at once one is
/// outside: [`ran_everywhere`] stops at the first).
pub fn outside(
    store: &Store,
    index: usize,
    stage: &Stage,
    consider: impl Fn(&[String]) -> bool,
) -> Option<(u64, Vec<String>)> {
    let name = profile_name(index, &stage.name);
    let cp = store.peek(&cluster_profile_type(), "", &name)?;
    let cs_rt = cluster_summary_type();
    let mut out = Vec::new();
    for cluster in selected_clusters(store, stage).iter() {
        let runs_it = store
            .peek(
                &cs_rt,
                CLUSTER_NAMESPACE,
                &format!("{name}-sveltos-{cluster}"),
            )
            .is_some_and(|cs| memo::per_pair(cp, cs, runs));
        if !runs_it {
            out.push(cluster.clone());
            if !consider(&out) {
                break;
            }
        }
    }
    Some((memo::profile_content(cp), out))
}

/// The ready clusters `stage` selects (by name: every cluster is in [`CLUSTER_NAMESPACE`]).
pub fn selected_clusters(store: &Store, stage: &Stage) -> std::sync::Arc<Vec<String>> {
    let selector: LabelSelector = stage.cluster_selector.clone().unwrap_or_default();
    memo::selected(store, &selector, |c| {
        selector.selects(&labels(c)).unwrap_or(false)
            && c.pointer("/status/ready") == Some(&Value::Bool(true))
    })
}

/// Whether summary `cs` runs profile `cp`: in sync with its spec (in Sveltos' normal form), every
/// feature `Provisioned` with the hash of that spec.
pub fn runs(cp: &std::sync::Arc<Value>, cs: &Value) -> bool {
    let normal = memo::normal_form(cp);
    cs.pointer("/spec/clusterProfileSpec")
        .and_then(Value::as_object)
        == Some(&*normal)
        && cs
            .pointer("/status/featureSummaries")
            .and_then(Value::as_array)
            .is_some_and(|f| {
                !f.is_empty()
                    && f.iter().all(|x| {
                        x["status"] == "Provisioned"
                            && x["featureID"]
                                .as_str()
                                .is_some_and(|id| x["hash"] == feature_hash(&normal, id).as_str())
                    })
            })
}

fn approved(p: &ClusterPromotion) -> bool {
    p.spec
        .stages
        .iter()
        .find(|s| s.name == STAGES[1])
        .and_then(|s| s.manual_approval())
        .unwrap_or(false)
}

fn position(p: &ClusterPromotion, stage: &str) -> Option<usize> {
    p.spec.stages.iter().position(|s| s.name == stage)
}

/// Who took a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Actor {
    /// A pass, with the epoch of its clock.
    Pass(u32),
    Person,
    Other,
}

fn actor(pre: &State, step: Step) -> Actor {
    match step.pass() {
        Some(n) => Actor::Pass(match &pre.passes[n as usize] {
            Pass::Acting(a) => a.now,
            Pass::Observing { now, .. } => *now,
            Pass::Idle => pre.epoch,
        }),
        None => match step {
            Step::Approve { .. }
            | Step::Revoke { .. }
            | Step::Pause(_)
            | Step::Resume(_)
            | Step::Abort(_)
            | Step::Change { .. }
            | Step::Rollback { .. }
            | Step::Freeze { .. }
            | Step::Unfreeze
            | Step::Bypass(_) => Actor::Person,
            _ => Actor::Other,
        },
    }
}

/// Updates `post`'s ghost for the step from `pre`, and returns every invariant the step broke.
pub fn update(pre: &State, step: Step, post: &mut State, bounds: &Bounds) -> Vec<String> {
    let mut out = Vec::new();
    let who = actor(pre, step);
    if step == Step::Tick
        && post
            .ghost
            .promotions
            .iter()
            .any(|g| g.deployed.values().any(|earlier| !earlier))
    {
        for g in &mut std::sync::Arc::make_mut(&mut post.ghost).promotions {
            for earlier in g.deployed.values_mut() {
                *earlier = true;
            }
        }
    }
    freezes_read(pre, step, post);
    held(pre, step, post, &mut out);
    grace_waits(post, &mut out);
    super::budget::held_over(bounds, &mut out);
    for i in 0..bounds.promotions {
        if !touched(&pre.store, &post.store, i) {
            continue;
        }
        let (Some(a), Some(b)) = (promotion(&pre.store, i), promotion(&post.store, i)) else {
            out.push(format!("{}: not readable", promotion_name(i)));
            continue;
        };
        let mut g = post.ghost.promotions[i].clone();
        let cx = PromotionStep {
            i,
            ma: &a,
            mb: &b,
            pre,
            post,
            step,
            who,
            api_clock: bounds.api_clock,
            bounds,
        };
        check_promotion(&cx, &mut g, &mut out);
        // Copied only when it changed: the ghost is shared between states (`State::ghost`).
        if post.ghost.promotions[i] != g {
            std::sync::Arc::make_mut(&mut post.ghost).promotions[i] = g;
        }
    }
    out
}

/// Whether the summaries `world` lists of profile `name` show, on every ready, unpaused cluster
/// its `selector` matches, a status about the spec each carries: in sync with the profile, every
/// feature with the hash Sveltos computes for that spec (and `Provisioned`, with `provisioned`).
fn shown(world: &World, name: &str, selector: &LabelSelector, provisioned: bool) -> bool {
    let Some(profile) = world.profiles.get(name) else {
        return false;
    };
    let none = ProfileSummaries::default();
    let summaries = world.summaries.get(name).unwrap_or(&none);
    let comparison = summaries.comparison(&profile.spec.fields);
    matching_clusters(selector, world)
        .iter()
        .filter(|c| c.ready && !c.paused)
        .all(|c| {
            summaries
                .find(c.kind, &c.namespace, &c.name)
                .is_some_and(|s| {
                    let Some(spec) = summaries.spec_of(s) else {
                        return false;
                    };
                    comparison.differs(s).is_none()
                        && !s.features.is_empty()
                        && s.features.iter().all(|f| {
                            (!provisioned || f.status.as_deref() == Some("Provisioned"))
                                && f.hash.is_some()
                                && f.hash == prefix(&feature_hash(spec, &f.id))
                        })
                })
        })
}

/// Whether pass `a` listed stage `stage`'s profile `profile` with content `want` running on
/// `cluster`: the summary it listed in sync with it, every feature `Provisioned` with the hash of
/// that spec (as [`runs`] judges the store).
pub fn runs_listed(a: &Acting, profile: &str, cluster: &str, want: u64) -> bool {
    let named = |v: &&std::sync::Arc<Value>, n: &str| {
        v.pointer("/metadata/name").and_then(Value::as_str) == Some(n)
    };
    let Some(cp) = a
        .profiles
        .iter()
        .chain(a.fetched.iter())
        .find(|v| named(v, profile))
        .filter(|cp| memo::profile_content(cp) == want)
    else {
        return false;
    };
    let summary = format!("{profile}-sveltos-{cluster}");
    a.summaries
        .iter()
        .find(|cs| named(cs, &summary))
        .is_some_and(|cs| memo::per_pair(cp, cs, runs))
}

/// The ready clusters of `stage` (as the store has them: the model's clusters never change) that
/// pass `a` did not list running its profile `profile` with content `want`.
pub fn outside_listed(
    a: &Acting,
    store: &Store,
    stage: &Stage,
    profile: &str,
    want: u64,
) -> Vec<String> {
    selected_clusters(store, stage)
        .iter()
        .filter(|c| !runs_listed(a, profile, c, want))
        .cloned()
        .collect()
}

/// Whether the pass taking `step` (a write of profile `name`) decided it from a listing that
/// showed a summary of that profile not about the spec it carried (see [`PromotionGhost::blind`]).
fn written_blind(pre: &State, step: Step, name: &str) -> bool {
    let Some(Pass::Acting(a)) = step.pass().and_then(|n| pre.passes.get(n as usize)) else {
        return false;
    };
    let Some(observed) = a.world.profiles.get(name) else {
        // Created: Sveltos shows nothing of an earlier spec.
        return false;
    };
    let selector: LabelSelector = observed
        .spec
        .fields
        .get("clusterSelector")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    !shown(&a.world, name, &selector, false)
}

thread_local! {
    /// The stages the decisions of the step being applied said wait only for the freshness grace
    /// while the listing they were made from showed every summary running the stage's profile's
    /// spec: (promotion, stage, the decision's summary). Filled by [`decided`], taken by
    /// [`update`] (the same thread applies a step and then updates its ghost).
    static WAITING_ANSWERED: std::cell::RefCell<Vec<(String, String, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Forgets what an earlier step's decisions left (a step that changed nothing is not judged).
pub fn decided_clear() {
    WAITING_ANSWERED.with(|w| w.borrow_mut().clear());
    super::budget::decided_clear();
}

/// Every decision a pass makes (when it observes, and again after it reads more): the stages it
/// says wait only for the grace (`Decision::grace`) although every summary `world` lists of them
/// runs their profile's spec.
pub fn decided(world: &World, p: &ClusterPromotion, d: &Decision) {
    super::budget::decided(world, p, d);
    let name = p.metadata.name.clone().unwrap_or_default();
    for stage in &d.grace {
        let Some(st) = p.spec.stages.iter().find(|s| s.name == *stage) else {
            continue;
        };
        let selector = st.cluster_selector.clone().unwrap_or_default();
        if shown(world, &format!("{name}-{stage}"), &selector, true) {
            WAITING_ANSWERED.with(|w| {
                w.borrow_mut()
                    .push((name.clone(), stage.clone(), d.summary.clone()))
            });
        }
    }
}

/// "No stage waits for the grace when Sveltos has answered": a decision of this step that did
/// ([`decided`]) is a violation unless the stage's spec was written blind
/// ([`PromotionGhost::blind`]).
fn grace_waits(post: &State, out: &mut Vec<String>) {
    for (name, stage, summary) in WAITING_ANSWERED.with(|w| std::mem::take(&mut *w.borrow_mut())) {
        let Some(i) = (0..post.ghost.promotions.len()).find(|i| promotion_name(*i) == name) else {
            continue;
        };
        if !post.ghost.promotions[i].blind.contains(&stage) {
            out.push(format!(
                "{name}: stage {stage} waits for the freshness grace though Sveltos answered: every summary runs its profile's spec ({summary})"
            ));
        }
    }
}

/// A pass that observed its promotion paused, or its current run aborted, changes neither what a
/// stage's profile carries nor the current stage (the book: passes leave a paused promotion alone;
/// an aborted run holds where it is, with no profile writes).
fn held(pre: &State, step: Step, post: &State, out: &mut Vec<String>) {
    let (Step::Write(n) | Step::WriteLost(n) | Step::WriteDropped(n)) = step else {
        return;
    };
    let Pass::Acting(a) = &pre.passes[n as usize] else {
        return;
    };
    let observed = &a.decoded[a.index];
    let run = observed.status.as_ref().and_then(Run::of);
    let why = if annotations::paused(observed).is_some() {
        "paused"
    } else if annotations::aborted(observed).is_some_and(|x| {
        // A new revision restarts an aborted run (the book, docs/src/operating/control.md): held only for the run's own spec.
        Some(&x.run) == run.as_ref()
            && x.run.revision == promoter::hash::revision_hash(observed)
            && x.run.stages == promoter::hash::stages_hash(&observed.spec.stages)
    }) {
        "aborted"
    } else {
        return;
    };
    let name = observed.metadata.name.clone().unwrap_or_default();
    let Some(i) = (0..pre.ghost.promotions.len()).find(|i| promotion_name(*i) == name) else {
        return;
    };
    let current = |s: &State| {
        promotion(&s.store, i).and_then(|m| {
            m.p.status
                .as_ref()
                .and_then(|st| st.current_stage_name.clone())
        })
    };
    if current(pre) != current(post) {
        out.push(format!(
            "{name}: a pass that observed it {why} moved its current stage"
        ));
    }
    for stage in STAGES {
        if stored_content(&pre.store, i, stage) != stored_content(&post.store, i, stage) {
            out.push(format!(
                "{name}: a pass that observed it {why} changed profile {name}-{stage}"
            ));
        }
    }
}

/// One step as the checks of one promotion see it: the promotion before and after it (decoded),
/// the states around it, the step and who took it.
#[derive(Clone, Copy)]
struct PromotionStep<'a> {
    /// The promotion's index.
    i: usize,
    ma: &'a memo::Promotion,
    mb: &'a memo::Promotion,
    pre: &'a State,
    post: &'a State,
    step: Step,
    who: Actor,
    /// [`Bounds::api_clock`].
    api_clock: bool,
    bounds: &'a Bounds,
}

fn check_promotion(cx: &PromotionStep, g: &mut PromotionGhost, out: &mut Vec<String>) {
    let PromotionStep {
        i,
        ma,
        mb,
        pre,
        post,
        step,
        who,
        api_clock,
        bounds,
    } = *cx;
    let (a, b) = (&ma.p, &mb.p);
    let name = promotion_name(i);
    let (sa, sb) = (
        a.status.clone().unwrap_or_default(),
        b.status.clone().unwrap_or_default(),
    );
    let (ra, rb) = (Run::of(&sa), Run::of(&sb));
    let (ca, cb) = (
        sa.current_stage_name.clone().unwrap_or_default(),
        sb.current_stage_name.clone().unwrap_or_default(),
    );
    let (complete_a, complete_b) = (annotations::is_complete(a), annotations::is_complete(b));

    // Statuses are written by passes only, and a status write is refused unless the promotion is
    // as the pass observed it: `b`'s spec is the one the pass decided from.
    if sa != sb && !matches!(who, Actor::Pass(_)) {
        out.push(format!("{name}: the status changed by a step of {step:?}"));
    }
    // A new run records afresh: what an earlier run recorded as reached (before a revert, a
    // rollback and its resume) says nothing of when this run may write a stage's profile.
    if rb != ra && !g.recorded.is_empty() {
        g.recorded.clear();
    }
    if rb != ra && g.completed_at.is_some() {
        g.completed_at = None;
    }
    if sa != sb
        && let Some(c) = position(b, &cb)
    {
        for stage in &b.spec.stages[..=c] {
            g.recorded.insert(key(
                &stage.name,
                mb.contents.get(&stage.name).copied().unwrap_or_default(),
            ));
        }
    }

    // The run, and the stage passed in it.
    let mut passed: Option<String> = None;
    match (&ra, &rb) {
        (Some(x), Some(y)) if x == y => {
            if ca != cb {
                match (position(b, &ca), position(b, &cb)) {
                    (Some(p), Some(q)) if q == p + 1 => passed = Some(ca.clone()),
                    (p, q) => out.push(format!(
                        "{name}: within one run the current stage moved from {ca} ({p:?}) to {cb} ({q:?})"
                    )),
                }
            }
            if complete_a && !complete_b {
                out.push(format!("{name}: the completion of run {x:?} was re-opened"));
            }
            if !complete_a && complete_b {
                if position(b, &cb).is_some_and(|c| c + 1 == b.spec.stages.len()) {
                    passed = Some(cb.clone());
                    // The time a pass found the last stage deployed in this run (passing it
                    // redeploys nothing), the completing pass's when none did before it.
                    if let Actor::Pass(now) = who {
                        let deployed = sa
                            .stages
                            .iter()
                            .flatten()
                            .find(|e| e.name == cb)
                            .and_then(|e| e.last_successful_applied_time);
                        g.completed_at = Some(
                            deployed
                                .unwrap_or(promoter::api::Timestamp::new(super::setup::at(now)))
                                .to_string(),
                        );
                    }
                } else {
                    out.push(format!("{name}: completed at stage {cb}, not the last"));
                }
            }
        }
        (Some(x), Some(y)) => {
            // A resume gives its revision back to the next run only: when a spec change comes
            // first, that run is of another spec, and the revision is rolled back again (promoter
            // drops its `promoter.dev/retry` record with the run it was for).
            let retry = g.retry.take();
            if (x.revision.as_str(), x.stages.as_str())
                == (mb.revision.clone().as_str(), mb.stages.clone().as_str())
                && retry.as_ref() != Some(&x.revision)
            {
                out.push(format!(
                    "{name}: a new run started for the spec of the run it superseded"
                ));
            }
            if let Some(r) = retry.filter(|r| *r != mb.revision) {
                g.rolled_back.insert(r);
            }
            if (y.revision.as_str(), y.stages.as_str())
                != (mb.revision.clone().as_str(), mb.stages.clone().as_str())
            {
                out.push(format!("{name}: a new run started for another spec"));
            }
        }
        (Some(_), None) => out.push(format!("{name}: the run was removed from the status")),
        _ => {}
    }
    if let Some(stage) = &passed
        && let Some(j) = position(b, stage)
    {
        let st = &b.spec.stages[j];
        let want = mb.contents.get(&st.name).copied().unwrap_or_default();
        match g.deployed.get(&key(stage, want)) {
            None if budget_of(bounds, stage) == 0 => out.push(format!(
                "{name}: stage {stage} passed before it ran the run's revision on every cluster"
            )),
            None => out.push(format!(
                "{name}: stage {stage} passed before it ran the run's revision on every cluster but its failure budget ({})",
                budget_of(bounds, stage)
            )),
            Some(false)
                if st
                    .trigger
                    .as_ref()
                    .and_then(|t| t.gates())
                    .and_then(|g| g.delay)
                    .is_some() =>
            {
                out.push(format!(
                    "{name}: stage {stage} passed before its delay since it ran everywhere"
                ))
            }
            _ => {}
        }
        if let Some(w) = st
            .trigger
            .as_ref()
            .and_then(|t| t.auto.as_ref())
            .and_then(|a| a.promotion_window.as_ref())
        {
            // Judged by the minute-by-minute reference, not the gate's own window evaluation.
            let open = match who {
                Actor::Pass(now) => {
                    super::reference::window_open(&w.from, &w.to, super::setup::at(now))
                }
                _ => false,
            };
            if !open {
                out.push(format!(
                    "{name}: stage {stage} passed outside its promotion window"
                ));
            }
        }
    }

    if sa != sb {
        completion(cx, g, out);
    }
    super::budget::check(
        &super::budget::BudgetStep {
            i,
            a: ma,
            b: mb,
            pre,
            post,
            step,
            bounds,
            passed: passed.as_deref(),
            contents_of: &|r: &str| {
                learn_contents(i, ma);
                learn_contents(i, mb);
                contents_of(i, r)
            },
        },
        out,
    );

    // The approval of `staging`.
    let (flag_a, flag_b) = (approved(a), approved(b));
    let grant_b = annotations::grant(b, STAGES[1]);
    let grant_a = annotations::grant(a, STAGES[1]);
    match (flag_a, flag_b, who) {
        (false, true, Actor::Person) => {
            let command = matches!(step, Step::Approve { command: true, .. });
            g.approval.flag = Some(
                match annotations::approval(b, STAGES[1]).and_then(|r| r.revision) {
                    Some(r) if command => Binding::Revision(r),
                    _ => Binding::Any,
                },
            );
        }
        (false, true, Actor::Pass(_)) => match g.approval.grant.take() {
            Some(run) if run.revision == mb.revision.clone() => {
                g.approval.flag = Some(Binding::Revision(run.revision))
            }
            Some(run) => out.push(format!(
                "{name}: an approval consumed for revision {} was given back to revision {}",
                run.revision,
                mb.revision.clone()
            )),
            None => out.push(format!(
                "{name}: a pass approved {} without an unused grant to give back",
                STAGES[1]
            )),
        },
        (true, false, Actor::Person) => g.approval.flag = None,
        (true, false, Actor::Pass(_)) => {
            let binding = g.approval.flag.take();
            if grant_b.is_some() && grant_b != grant_a {
                let run = grant_b.clone().map(|x| x.run);
                if run != ra {
                    out.push(format!(
                        "{name}: an approval was consumed for run {run:?}, not the current {ra:?}"
                    ));
                }
                if let (Some(Binding::Revision(r)), Some(run)) = (&binding, &run)
                    && *r != run.revision
                {
                    out.push(format!(
                        "{name}: an approval given for revision {r} was consumed for revision {}",
                        run.revision
                    ));
                }
                if g.approval.grant.is_some() {
                    out.push(format!(
                        "{name}: an approval consumed while another one was pending"
                    ));
                }
                g.approval.grant = run;
            } else {
                let stale = matches!(&binding, Some(Binding::Revision(r)) if Some(r) != sb.profile_spec_hash.as_ref());
                if !stale {
                    out.push(format!(
                        "{name}: a pass removed the approval of {} ({binding:?}) without consuming it: lost",
                        STAGES[1]
                    ));
                }
            }
        }
        _ => {}
    }
    // Passing `staging` uses the grant its run consumed. Judged after this step's own
    // consumption above: when `staging` is the last stage (`stages=dev+staging`), the record
    // patch that consumes its approval also records the completion, which passes it.
    if let Some(stage) = passed.as_deref().filter(|s| *s == STAGES[1]) {
        match (&g.approval.grant, &ra) {
            (Some(grant), Some(run)) if grant == run => g.approval.grant = None,
            (grant, _) => out.push(format!(
                "{name}: stage {stage} passed without an approval consumed for this run (grant {grant:?})"
            )),
        }
    }
    // A new run voids a grant consumed for the run it superseded.
    if rb.is_some()
        && rb != ra
        && let Some(run) = g.approval.grant.take()
        && Some(&run) != rb.as_ref()
        && rb.as_ref().is_some_and(|y| y.revision == run.revision)
        && !flag_b
    {
        out.push(format!(
            "{name}: an unused approval consumed for a run superseded by the same revision was not given back: lost"
        ));
    }
    if g.approval.flag.is_some() != flag_b {
        out.push(format!(
            "{name}: approved is {flag_b} but the ghost says {:?}",
            g.approval.flag
        ));
    }
    if let Some(run) = &g.approval.grant
        && grant_b.as_ref().map(|x| &x.run) != Some(run)
    {
        out.push(format!(
            "{name}: the grant of an unused approval was removed or replaced: lost"
        ));
    }

    // Profiles get a content only once it is recorded, after the stage before ran it.
    for (j, stage) in b.spec.stages.iter().enumerate() {
        let before = stored_content(&pre.store, i, &stage.name);
        let after = stored_content(&post.store, i, &stage.name);
        let Some(c) = after.filter(|c| Some(*c) != before) else {
            continue;
        };
        // The profile gets `c` anew: what ran of `c` before (an earlier run, before a rollback
        // or a revert) no longer counts; it counts again once the world shows it running
        // everywhere (below), with its delay from then.
        g.deployed.remove(&key(&stage.name, c));
        // A profile that had another content and gets one that is not the run's revision is a
        // rollback: `incident` judges it (asked for, to the last good revision, in order).
        learn_contents(i, mb);
        let rollback = before.is_some()
            && rb
                .as_ref()
                .and_then(|r| contents_of(i, &r.revision))
                .is_none_or(|contents| contents.get(&stage.name) != Some(&c));
        // Judged against this run's records, but for a rollback's content (`incident` judges
        // it: asked for, the last good revision, in order) and the write of a pass whose run a
        // concurrent pass's new run superseded after the pass's status write (the next pass
        // writes the current run's revision over it, as `incident` says).
        let superseded = writer_run(pre, step).is_some_and(|r| Some(r) != rb);
        if api_clock {
            let blind = !rollback && written_blind(pre, step, &profile_name(i, &stage.name));
            if blind != g.blind.contains(&stage.name) {
                if blind {
                    g.blind.insert(stage.name.clone());
                } else {
                    g.blind.remove(&stage.name);
                }
            }
        }
        if !rollback && !superseded && !g.recorded.contains(&key(&stage.name, c)) {
            out.push(format!(
                "{name}: profile {}-{} got a revision before a status recorded the stage as reached",
                name, stage.name
            ));
        }
        if j > 0 && !rollback {
            let prev = &b.spec.stages[j - 1];
            let delay = prev
                .trigger
                .as_ref()
                .and_then(|t| t.gates())
                .and_then(|x| x.delay)
                .is_some();
            match g.deployed.get(&key(&prev.name, c)) {
                None => out.push(format!(
                    "{name}: profile {name}-{} got a revision stage {} never ran everywhere",
                    stage.name, prev.name
                )),
                Some(false) if delay => out.push(format!(
                    "{name}: profile {name}-{} got a revision before the delay of stage {} since it ran everywhere",
                    stage.name, prev.name
                )),
                _ => {}
            }
        }
    }
    // What runs everywhere now, or everywhere but on at most the stage's failure budget of its
    // clusters: that is when the stage may pass, and its delay begins (which clusters a pass
    // counts against the budget, and that it names them, `budget` judges).
    let mut everywhere = BTreeMap::new();
    for stage in &b.spec.stages {
        let allowed = budget_of(bounds, &stage.name);
        if let Some((c, outside)) = outside(&post.store, i, stage, |out| out.len() <= allowed)
            && outside.len() <= allowed
        {
            g.deployed.entry(key(&stage.name, c)).or_insert(false);
            everywhere.insert(stage.name.clone(), c);
        }
    }
    incident(cx, g, out);
    // Every stage runs the spec's revision on all its clusters (but at most its failure budget of
    // them: a revision completed within its budgets completed): a good revision.
    if everywhere == mb.contents {
        g.good.retain(|(r, _)| *r != mb.revision);
        g.good.push((mb.revision.clone(), everywhere));
    }
}

/// The run of the status the pass taking `step` last saw of its promotion: as it observed it, or
/// as its own last write of it returned it.
fn writer_run(pre: &State, step: Step) -> Option<Run> {
    let Pass::Acting(a) = pre.passes.get(step.pass()? as usize)? else {
        return None;
    };
    let Work::Writing { current, .. } = &a.work else {
        return None;
    };
    current.status.as_ref().and_then(Run::of)
}

/// Upstream's text of a stage passed (reference, 3.10: "advancing"); on the last stage it says
/// the rollout is complete (the book, docs/src/operating/status.md, "What the status says").
const PASSED: &str = "Successfully provisioned";

/// The beginnings of the texts that say a stage is on its way, not passed (the book, docs/src/operating/status.md, "What the
/// status says"): provisioning, provisioned, soaking, checks running or failing, awaiting
/// approval, window closed, a deployment failing or failed.
const ON_ITS_WAY: [&str; 10] = [
    "Clusters are being provisioned",
    "All matching clusters are successfully deployed",
    "No matching clusters found",
    "Delayed:",
    "Running Post-Promotion",
    "Awaiting",
    "Paused: Awaiting",
    "Window Closed:",
    "Deployment Fail",
    "Failed:",
];

/// What a person reads of a promotion's progress: the current stage, and the description of its
/// first entry (the one upstream writes).
fn reading(p: &ClusterPromotion) -> (&str, &str) {
    let Some(status) = p.status.as_ref() else {
        return ("", "");
    };
    let current = status.current_stage_name.as_deref().unwrap_or_default();
    let text = status
        .stages
        .iter()
        .flatten()
        .find(|e| e.name == current)
        .and_then(|e| e.current_status_description.as_deref())
        .unwrap_or_default();
    (current, text)
}

/// Whether the status a person reads shows the rollout complete: the spec's last stage is the
/// current one and says [`PASSED`], for the spec's stages. Not promoter's completion record.
pub fn reads_complete(p: &ClusterPromotion) -> bool {
    let (current, text) = reading(p);
    p.spec.stages.last().is_some_and(|l| l.name == current) && text.starts_with(PASSED)
}

/// Completion as the world shows it, on a status write (issue 33 §1: independent of promoter's
/// completion record): the status reads complete only while every stage's profile carries the
/// run's revision, each having run it on every cluster it selects; once a run has read complete,
/// no later status of that run reads a stage on its way or another stage, whatever pauses,
/// resumes, aborts or blocked passes come between.
fn completion(cx: &PromotionStep, g: &mut PromotionGhost, out: &mut Vec<String>) {
    let (i, mb) = (cx.i, cx.mb);
    let b = &mb.p;
    let run = b.status.as_ref().and_then(Run::of);
    if g.read_complete.is_some() && g.read_complete != run {
        g.read_complete = None;
    }
    // A status of a run of other stages (held for a person) says nothing of this spec's last.
    let Some(run) = run.filter(|r| r.stages == mb.stages) else {
        return;
    };
    let name = promotion_name(i);
    if reads_complete(b) {
        learn_contents(i, mb);
        let Some(contents) = contents_of(i, &run.revision) else {
            out.push(format!(
                "{name}: the status reads complete for revision {} no spec had",
                run.revision
            ));
            return;
        };
        for stage in &b.spec.stages {
            let want = contents.get(&stage.name).copied();
            if stored_content(&cx.post.store, i, &stage.name) != want {
                out.push(format!(
                    "{name}: the status reads complete while profile {name}-{} does not carry the run's revision",
                    stage.name
                ));
            } else if !want.is_some_and(|c| g.deployed.contains_key(&key(&stage.name, c))) {
                out.push(format!(
                    "{name}: the status reads complete before stage {} ran the run's revision on every cluster",
                    stage.name
                ));
            }
        }
        // As the pass that passed the last stage writes it: the stage's deployment at the time a
        // pass found it deployed (that pass's time when none did before it), whichever pass writes
        // the status that shows it (the completing pass's own status write may be lost after its
        // record patch).
        let last = b.spec.stages.last().map(|s| s.name.as_str());
        let passed_at = b
            .status
            .iter()
            .flat_map(|s| s.stages.iter().flatten())
            .find(|e| Some(e.name.as_str()) == last)
            .and_then(|e| e.last_successful_applied_time)
            .map(|t| t.to_string());
        if let Some(at) = &g.completed_at
            && passed_at.as_ref() != Some(at)
        {
            out.push(format!(
                "{name}: the status reads run {} complete with stage {}'s lastSuccessfulAppliedTime {passed_at:?}, not {at}, the time a pass found it deployed (or passed it, when none did before)",
                run.revision,
                last.unwrap_or_default()
            ));
        }
        g.read_complete = Some(run);
        return;
    }
    if g.read_complete.as_ref() == Some(&run) {
        let (current, text) = reading(b);
        let last = b.spec.stages.last().map(|s| s.name.as_str());
        if Some(current) != last || ON_ITS_WAY.iter().any(|w| text.starts_with(w)) {
            out.push(format!(
                "{name}: run {} read complete, now reads stage {current}: {text:?}",
                run.revision
            ));
        }
    }
}

/// The content each stage's profile gets from a revision of a promotion, by (promotion,
/// revision hash): a function of the spec, learnt from every stored spec the checks read (a run's
/// revision was a stored spec's before its status recorded it).
type Contents = BTreeMap<String, u64>;

static REVISION_CONTENTS: LazyLock<Mutex<HashMap<(usize, String), Contents>>> =
    LazyLock::new(Mutex::default);

fn learn_contents(index: usize, m: &memo::Promotion) {
    let mut map = REVISION_CONTENTS.lock().unwrap_or_else(|p| p.into_inner());
    map.entry((index, m.revision.clone()))
        .or_insert_with(|| m.contents.clone());
}

/// The content each stage's profile gets from `revision` of promotion `index`.
fn contents_of(index: usize, revision: &str) -> Option<BTreeMap<String, u64>> {
    let map = REVISION_CONTENTS.lock().unwrap_or_else(|p| p.into_inner());
    map.get(&(index, revision.to_string())).cloned()
}

/// Keeps [`Ghost::fresh_freeze`]: a pass reads the freezes with its last list.
fn freezes_read(pre: &State, step: Step, post: &mut State) {
    let mut fresh = post.ghost.fresh_freeze.clone();
    fresh.resize(post.passes.len(), false);
    let created = matches!(step, Step::Freeze { .. })
        && pre
            .store
            .peek(&promotion_freeze_type(), "", FREEZE)
            .is_none();
    for (n, pass) in post.passes.iter().enumerate() {
        if matches!(pass, Pass::Idle)
            || (step == Step::Observe(n as u8) && !matches!(pass, Pass::Observing { .. }))
        {
            fresh[n] = false;
        } else if created {
            fresh[n] = true;
        }
    }
    if fresh != post.ghost.fresh_freeze {
        std::sync::Arc::make_mut(&mut post.ghost).fresh_freeze = fresh;
    }
}

/// Whether freeze `f` holds promotion `index` at `now`, judged from its stored object (start,
/// end, selector over the promotion's labels), and no valid bypass is recorded on the promotion
/// (the book's invariants: with the authenticated `user`, `by` that user, a reason, an `until` ahead, for this
/// freeze or any).
fn frozen(store: &Store, index: usize, now: DateTime<Utc>) -> bool {
    let Some(f) = store.peek(&promotion_freeze_type(), "", FREEZE) else {
        return false;
    };
    let time = |pointer: &str| {
        f.pointer(pointer)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    if time("/spec/start").is_some_and(|s| now < s) || time("/spec/end").is_some_and(|e| now >= e) {
        return false;
    }
    let selector: LabelSelector = f
        .pointer("/spec/promotionSelector")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    let labels: BTreeMap<String, String> = BTreeMap::from([("tier".into(), tier(index).into())]);
    if !selector.selects(&labels).unwrap_or(true) {
        return false;
    }
    let bypass: Option<Value> = store
        .peek(
            &promoter::fake::cluster_promotion_type(),
            "",
            &promotion_name(index),
        )
        .and_then(|p| {
            p.pointer("/metadata/annotations/promoter.dev~1freeze-bypass")
                .cloned()
        })
        .and_then(|v| v.as_str().and_then(|t| serde_json::from_str(t).ok()));
    let valid = bypass.is_some_and(|b| {
        let text = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
        !text("user").is_empty()
            && text("by").starts_with(text("user"))
            && !text("reason").is_empty()
            && (b.get("freeze").is_none() || text("freeze") == FREEZE)
            && DateTime::parse_from_rfc3339(text("until")).is_ok_and(|u| u > now)
    });
    !valid
}

/// The incident path's invariants (the book's invariants: a rollback never skips a stage's completion, a
/// rolled-back revision is never promoted again without a person, a freeze is never bypassed
/// without a record, a missed deadline is final for the run), judged from what the world shows:
/// which content each profile gets, what runs everywhere, the status a person reads.
fn incident(cx: &PromotionStep, g: &mut PromotionGhost, out: &mut Vec<String>) {
    let (i, ma, mb, step, who) = (cx.i, cx.ma, cx.mb, cx.step, cx.who);
    let (pre, post) = (cx.pre, cx.post);
    let name = promotion_name(i);
    learn_contents(i, ma);
    learn_contents(i, mb);
    let b = &mb.p;
    let run_a = ma.p.status.as_ref().and_then(Run::of);
    let run_b = b.status.as_ref().and_then(Run::of);
    // The person's `resume`: it gives a rolled-back revision back when it says it redeploys it
    // (what the person confirms with `--yes`), and lifts a miss.
    if step == Step::Resume(i as u8) {
        let r = resume_ops(&ma.p, &person(), fixed_time());
        if r.redeploys.is_some() {
            g.retry = Some(ma.revision.clone());
            g.rolled_back.remove(&ma.revision);
            if let Some(run) = &run_a {
                g.rolled_back.remove(&run.revision);
            }
        }
        g.missed = None;
    }
    // A miss is final for its run: a new run (a new spec) forgets it.
    if g.missed.is_some() && g.missed != run_b {
        g.missed = None;
    }
    // So is a rollback asked for: it allows going back in its run only (the states where a new
    // run still carried it differed from those without it in nothing a check reads).
    if g.rollback_asked.is_some() && g.rollback_asked != run_b {
        g.rollback_asked = None;
    }
    // A stage the status a person reads newly shows failed by its progress deadline.
    let misses = |m: &memo::Promotion| -> BTreeSet<String> {
        m.p.status
            .iter()
            .flat_map(|s| s.stages.iter().flatten())
            .filter_map(|st| st.failure_message.clone())
            .filter(|m| m.starts_with("progress deadline"))
            .collect()
    };
    let shows_miss = !misses(mb).is_subset(&misses(ma));
    let missed_before = g.missed.is_some() && g.missed == run_a;
    if missed_before
        && run_a == run_b
        && let Actor::Pass(_) = who
    {
        let current = |m: &memo::Promotion| {
            m.p.status
                .as_ref()
                .and_then(|s| s.current_stage_name.clone())
        };
        if current(ma) != current(mb) {
            out.push(format!(
                "{name}: the run that missed its progress deadline moved on from {:?} to {:?} without a person",
                current(ma),
                current(mb)
            ));
        }
    }
    if shows_miss && run_b.is_some() && g.missed.is_none() && !matches!(step, Step::Resume(_)) {
        g.missed = run_b.clone();
    }
    let annotation = |key: &str| {
        b.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    if shows_miss && annotation(promoter::settings::FAILURE_POLICY).as_deref() == Some("rollback") {
        g.rollback_asked = run_b.clone();
    }
    if let Step::Rollback { promotion, .. } = step
        && promotion as usize == i
    {
        g.rollback_asked = run_a.clone();
    }
    let order_reverse =
        annotation(promoter::settings::ROLLBACK_ORDER).is_none_or(|o| o != "all-at-once");
    for (j, stage) in b.spec.stages.iter().enumerate() {
        let before = stored_content(&pre.store, i, &stage.name);
        let Some(c) = stored_content(&post.store, i, &stage.name).filter(|c| Some(*c) != before)
        else {
            continue;
        };
        // Forward: the content of the revision of the run the status records.
        let run_revision = run_b
            .as_ref()
            .map(|r| r.revision.as_str())
            .unwrap_or_default();
        let forward = contents_of(i, run_revision)
            .is_some_and(|contents| contents.get(&stage.name) == Some(&c));
        if forward {
            if g.rolled_back.contains(run_revision) {
                out.push(format!(
                    "{name}: profile {name}-{} got rolled-back revision {run_revision} again without a person",
                    stage.name
                ));
            }
            if missed_before && run_a == run_b {
                out.push(format!(
                    "{name}: profile {name}-{} got the revision of a run that missed its progress deadline",
                    stage.name
                ));
            }
            if let (Some(n), Actor::Pass(now)) = (step.pass(), who)
                && !pre
                    .ghost
                    .fresh_freeze
                    .get(n as usize)
                    .copied()
                    .unwrap_or(false)
                && frozen(&post.store, i, super::setup::at(now))
            {
                out.push(format!(
                    "{name}: stage {} started under freeze {FREEZE} without a valid bypass",
                    stage.name
                ));
            }
            continue;
        }
        // Any other content of a profile that had one is a rollback, asked for this run, to the
        // last good revision other than the run's. (A profile created with the revision of a run
        // a concurrent pass superseded after this pass's status write is not: the next pass
        // writes the run's revision over it.)
        if before.is_none() {
            continue;
        }
        if g.rollback_asked.is_none() || g.rollback_asked != run_b {
            out.push(format!(
                "{name}: profile {name}-{} went back to an earlier revision without a rollback asked for the run",
                stage.name
            ));
        }
        let from = run_b
            .as_ref()
            .map(|r| r.revision.clone())
            .unwrap_or_default();
        let Some((_, target)) = g.good.iter().rev().find(|(r, _)| *r != from) else {
            out.push(format!(
                "{name}: profile {name}-{} got a revision that never completed (no good revision to roll back to)",
                stage.name
            ));
            continue;
        };
        if target.get(&stage.name) != Some(&c) {
            out.push(format!(
                "{name}: profile {name}-{} rolled back to another revision than the last good one",
                stage.name
            ));
        }
        // A person's `resume` that said it redeploys the revision may come while the rollback's
        // profile writes are still under way: it gave the revision back already.
        if g.retry.as_ref() != Some(&from) {
            g.rolled_back.insert(from);
        }
        if order_reverse {
            for higher in &b.spec.stages[j + 1..] {
                if stored_content(&post.store, i, &higher.name).is_some()
                    && ran_everywhere(&post.store, i, higher) != target.get(&higher.name).copied()
                {
                    out.push(format!(
                        "{name}: reverse rollback changed profile {name}-{} while stage {} did not run the good revision everywhere",
                        stage.name, higher.name
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::{Policy, promotion_object};
    use serde_json::json;

    /// p0 as the model creates it, its status at stage `current` saying `text`.
    fn reading_as(current: &str, text: &str) -> ClusterPromotion {
        let mut v = promotion_object(0, Policy::None, None);
        v["status"] = json!({
            "currentStageName": current,
            "stages": STAGES.iter().map(|s| json!({
                "name": s,
                "currentStatusDescription": if *s == current { text } else { "Successfully provisioned (2026-02-16T06:00:00Z)" },
            })).collect::<Vec<_>>(),
        });
        serde_json::from_value(v).unwrap_or_else(|e| panic!("p0 decodes: {e}"))
    }

    #[test]
    fn only_the_last_stage_saying_successfully_provisioned_reads_complete() {
        let done = "Successfully provisioned (2026-02-16T07:00:00Z)";
        assert!(reads_complete(&reading_as("prod", done)));
        assert!(!reads_complete(&reading_as("staging", done)));
        for held in [
            "Paused: promotion paused by person since 2026-02-15T06:00:00Z (2026-02-16T07:00:00Z)",
            "Aborted by person (2026-02-16T07:00:00Z)",
            "Window Closed: Waiting for Next Schedule (2026-02-16T08:00:00Z). (2026-02-16T07:30:00Z)",
        ] {
            assert!(!reads_complete(&reading_as("prod", held)), "{held}");
        }
    }

    /// A person's pause, an abort, a block or a rollback hold a completed run; they do not say a
    /// stage is on its way (the checks allow them after completion). Awaiting approval does.
    #[test]
    fn holds_are_not_on_its_way_waiting_is() {
        let on_its_way = |t: &str| ON_ITS_WAY.iter().any(|w| t.starts_with(w));
        for held in [
            "Paused: promotion paused by person",
            "Aborted by person",
            "Blocked: the ClusterPromotion cannot be processed (see failureMessage)",
            "Rolling back to revision ea540a206c",
            PASSED,
        ] {
            assert!(!on_its_way(held), "{held}");
        }
        for waiting in [
            "Paused: Awaiting Manual Approval",
            "Delayed: Waiting for Time Window: 2026-02-16T06:05:00Z",
            "Window Closed: Waiting for Next Schedule (2026-02-16T08:00:00Z).",
            "Clusters are being provisioned",
            "All matching clusters are successfully deployed.",
            "Running Post-Promotion Health Checks",
            "Awaiting Health Checks to Pass",
        ] {
            assert!(on_its_way(waiting), "{waiting}");
        }
    }
}
