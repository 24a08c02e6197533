//! The invariants (README, "Invariants (the gates)"), checked on every step of the model, and the
//! ghost state they need: what happened before that the objects no longer show.
//!
//! * **Progressive.** A stage's profile gets a content (the profile's spec without its selector)
//!   only when a status has recorded the stage as reached with that content, and (for every stage
//!   after the first) only once the stage before ran that content on every cluster it selects, a
//!   tick earlier when it has a delay. "Ran" is judged by content, as Sveltos shows it: the
//!   summary's spec is the profile's and every feature is `Provisioned` with the hash Sveltos
//!   computes for that spec (a `Provisioned` left from the previous spec, shown while the new spec
//!   is not deployed yet, does not count: README, "Stage completion"). A status moves at most one stage forward within a run, never
//!   back, and passes a stage only once it ran the run's content everywhere (a tick earlier with a
//!   delay), a window only while the passing pass's clock is inside it.
//! * **An approval is used once, for one run, never lost.** The ghost follows the person's
//!   approval of `staging`: given (`approved: true` by the person), consumed into a grant for the
//!   current run (only by a pass, only for the revision a `promoter approve` record names), used
//!   when the stage is passed in that run (a stage is passed only with such a grant), given back
//!   from a grant superseded before use (only to a run of the same revision), void when the run it
//!   was consumed for is superseded by another revision, withdrawn when `promoter approve` gave it
//!   to another revision. Any other removal by a pass is a lost approval.
//! * **Completion** is never re-opened within a run, and a new run starts only for a spec that
//!   differs from the run's.

use super::memo;
use super::setup::{Bounds, CLUSTER_NAMESPACE, CLUSTERS, STAGES, promotion_name};
use super::state::{Pass, State, Step, promotion};
use promoter::annotations::{self, Run};
use promoter::api::{ClusterPromotion, Stage};
use promoter::fake::{Store, cluster_profile_type, cluster_summary_type, sveltos_cluster_type};
use promoter::labels::LabelSelector;
use promoter::sim::addon::labels;
use promoter::sim::feature_hash::feature_hash;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

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
    /// `<stage>/<content>` that ran on every selected cluster, and whether a tick passed since.
    pub deployed: BTreeMap<String, bool>,
    /// `<stage>/<content>` a status recorded as reached.
    pub recorded: BTreeSet<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ghost {
    pub promotions: Vec<PromotionGhost>,
}

impl Ghost {
    pub fn initial(_: &State, bounds: &Bounds) -> Ghost {
        Ghost {
            promotions: vec![PromotionGhost::default(); bounds.promotions],
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
            || CLUSTERS.iter().any(|(cluster, _)| {
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
fn ran_everywhere(store: &Store, index: usize, stage: &Stage) -> Option<u64> {
    let name = profile_name(index, &stage.name);
    let cp = store.peek(&cluster_profile_type(), "", &name)?;
    let normal = Value::Object((*memo::normal_form(cp)).clone());
    let selector: LabelSelector = stage.cluster_selector.clone().unwrap_or_default();
    let cs_rt = cluster_summary_type();
    let everywhere = store
        .stored(&sveltos_cluster_type())
        .filter(|c| {
            selector.selects(&labels(c)).unwrap_or(false)
                && c.pointer("/status/ready") == Some(&Value::Bool(true))
        })
        .all(|c| {
            let cluster = c
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            store
                .peek(
                    &cs_rt,
                    CLUSTER_NAMESPACE,
                    &format!("{name}-sveltos-{cluster}"),
                )
                .is_some_and(|cs| {
                    cs.pointer("/spec/clusterProfileSpec") == Some(&normal)
                        && cs
                            .pointer("/status/featureSummaries")
                            .and_then(Value::as_array)
                            .is_some_and(|f| {
                                !f.is_empty()
                                    && f.iter().all(|x| {
                                        x["status"] == "Provisioned"
                                            && x["featureID"].as_str().is_some_and(|id| {
                                                normal.as_object().is_some_and(|spec| {
                                                    x["hash"] == feature_hash(spec, id).as_str()
                                                })
                                            })
                                    })
                            })
                })
        });
    everywhere.then(|| memo::profile_content(cp))
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
            | Step::Change { .. } => Actor::Person,
            _ => Actor::Other,
        },
    }
}

/// Updates `post`'s ghost for the step from `pre`, and returns every invariant the step broke.
pub fn update(pre: &State, step: Step, post: &mut State, bounds: &Bounds) -> Vec<String> {
    let mut out = Vec::new();
    let who = actor(pre, step);
    if step == Step::Tick {
        for g in &mut post.ghost.promotions {
            for earlier in g.deployed.values_mut() {
                *earlier = true;
            }
        }
    }
    held(pre, step, post, &mut out);
    for i in 0..bounds.promotions {
        if !touched(&pre.store, &post.store, i) {
            continue;
        }
        let (Some(a), Some(b)) = (promotion(&pre.store, i), promotion(&post.store, i)) else {
            out.push(format!("{}: not readable", promotion_name(i)));
            continue;
        };
        let mut g = post.ghost.promotions[i].clone();
        check_promotion(&mut out, i, &a, &b, pre, post, step, who, &mut g);
        post.ghost.promotions[i] = g;
    }
    out
}

/// A pass that observed its promotion paused, or its current run aborted, changes neither what a
/// stage's profile carries nor the current stage (README: passes leave a paused promotion alone;
/// an aborted run holds where it is, with no profile writes).
fn held(pre: &State, step: Step, post: &State, out: &mut Vec<String>) {
    let (Step::Write(n) | Step::WriteLost(n)) = step else {
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
        // A new revision restarts an aborted run (README): held only for the run's own spec.
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

#[allow(clippy::too_many_arguments)]
fn check_promotion(
    out: &mut Vec<String>,
    i: usize,
    ma: &memo::Promotion,
    mb: &memo::Promotion,
    pre: &State,
    post: &State,
    step: Step,
    who: Actor,
    g: &mut PromotionGhost,
) {
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
    if sa != sb
        && let Some(c) = position(b, &cb)
    {
        let reached = if complete_b {
            b.spec.stages.len() - 1
        } else {
            c
        };
        for stage in &b.spec.stages[..=reached.min(b.spec.stages.len() - 1)] {
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
                } else {
                    out.push(format!("{name}: completed at stage {cb}, not the last"));
                }
            }
        }
        (Some(x), Some(y)) => {
            if (x.revision.as_str(), x.stages.as_str())
                == (mb.revision.clone().as_str(), mb.stages.clone().as_str())
            {
                out.push(format!(
                    "{name}: a new run started for the spec of the run it superseded"
                ));
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
            None => out.push(format!(
                "{name}: stage {stage} passed before it ran the run's revision on every cluster"
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
        if stage == STAGES[1] {
            match (&g.approval.grant, &ra) {
                (Some(grant), Some(run)) if grant == run => g.approval.grant = None,
                (grant, _) => out.push(format!(
                    "{name}: stage {stage} passed without an approval consumed for this run (grant {grant:?})"
                )),
            }
        }
    }

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
        if !g.recorded.contains(&key(&stage.name, c)) {
            out.push(format!(
                "{name}: profile {}-{} got a revision before a status recorded the stage as reached",
                name, stage.name
            ));
        }
        if j > 0 {
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
    // What runs everywhere now.
    for stage in &b.spec.stages {
        if let Some(c) = ran_everywhere(&post.store, i, stage) {
            g.deployed.entry(key(&stage.name, c)).or_insert(false);
        }
    }
}
