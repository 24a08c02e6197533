//! The model's world: its promotions, clusters and clock, and the bounds of what its actors may do.
//!
//! Every promotion has the same three stages, one per gate kind that waits on something other than
//! a deployment: `dev` soaks (a delay), `staging` waits for a manual approval (`automaticReset`,
//! the default), `prod` waits for its promotion window. Each stage selects one cluster (`qa` is
//! there for a selector change to move `staging` onto); with [`Bounds::clusters`] 2, `dev` (or
//! the stage [`Bounds::two_clusters_in`] names) selects two ([`SECOND_CLUSTERS`]), each deployed
//! by a reconcile of its own.
//!
//! Time moves in steps of [`STEP`] (a tick). A step is longer than every delay, so a soak started
//! in one step is over in the next, and the window (`0 * * * *` to `30 * * * *`) is open in even
//! steps and closed in odd ones: every tick crosses a delay end and a window edge.

use chrono::{DateTime, Duration, TimeZone, Utc};
use promoter::fake::{Store, cluster_promotion_type, register_sveltos, sveltos_cluster_type};
use promoter::sim::sveltos_cluster;
use serde_json::{Value, json};
use std::cell::Cell;
use std::sync::Arc;

/// The names of the stages, in their initial order.
pub const STAGES: [&str; 3] = ["dev", "staging", "prod"];

/// The clusters: (name, `env` label).
pub const CLUSTERS: [(&str, &str); 4] = [
    ("dev", "dev"),
    ("staging", "staging"),
    ("qa", "qa"),
    ("prod", "prod"),
];

/// The second cluster of each stage (by [`STAGES`]) with [`Bounds::clusters`] 2, the one of
/// [`Bounds::two_clusters_in`] only (labelled as the stage's first, so the stage's selector
/// matches both).
pub const SECOND_CLUSTERS: [(&str, &str); 3] = [
    ("dev-b", "dev"),
    ("staging-b", "staging"),
    ("prod-b", "prod"),
];

/// Every cluster the model may have (name, `env` label; cluster indices point into it): what a
/// check of every summary a profile may have looks at.
pub fn all_clusters() -> impl Iterator<Item = (&'static str, &'static str)> {
    CLUSTERS.into_iter().chain(SECOND_CLUSTERS)
}

/// The name of cluster `index` (into [`all_clusters`]).
pub fn cluster_name(index: u8) -> Option<&'static str> {
    all_clusters().nth(index as usize).map(|(name, _)| name)
}

/// The clusters of `bounds`: [`CLUSTERS`], and the second cluster of
/// [`Bounds::two_clusters_in`] with `clusters=2`.
pub fn clusters(bounds: &Bounds) -> Vec<(&'static str, &'static str)> {
    let mut out = CLUSTERS.to_vec();
    if bounds.clusters > 1
        && let Some(second) = SECOND_CLUSTERS.get(bounds.two_clusters_in)
    {
        out.push(*second);
    }
    out
}

/// The clusters (indices into [`all_clusters`]) Sveltos deploys `stage`'s profile on one by one
/// (one step per cluster): every cluster of the bounds for [`Bounds::two_clusters_in`] with
/// `clusters=2` (those the stage does not select too: a selector change may move it, and a
/// reconcile there removes its summary; a step that changes nothing is no edge); none
/// otherwise (a stage of one cluster is deployed by one reconcile of its profile, as before).
pub fn clusters_one_by_one(bounds: &Bounds, stage: usize) -> Vec<u8> {
    if bounds.clusters < 2 || stage != bounds.two_clusters_in {
        return Vec::new();
    }
    let present = clusters(bounds);
    all_clusters()
        .enumerate()
        .filter(|(_, c)| present.contains(c))
        .map(|(k, _)| k as u8)
        .collect()
}

/// The failure budget `bounds` gives the stage named `stage` (see [`Bounds::budget`]).
pub fn budget_of(bounds: &Bounds, stage: &str) -> usize {
    if STAGES[bounds.two_clusters_in] == stage {
        bounds.budget as usize
    } else {
        0
    }
}

/// The namespace of the clusters.
pub const CLUSTER_NAMESPACE: &str = "fleet";

/// The chart versions of the revisions a spec change moves between.
pub const REVISIONS: [&str; 2] = ["1.0.0", "2.0.0"];

/// The delay of `dev`: shorter than a step.
pub const DELAY: &str = "5m";

/// The progress deadline of every stage when the promotion carries one ([`Bounds::policy`]):
/// shorter than a step, so a stage reached in one step and not complete (deployed, soaked) by the
/// next has missed it; with the soak of `dev` (5m) it still falls within the step.
pub const PROGRESS_DEADLINE: &str = "10m";

/// What a promotion does when a stage misses its progress deadline (`promoter.dev/failure-policy`
/// and `promoter.dev/rollback-order`); `None`: it carries no deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    None,
    Halt,
    Reverse,
    AllAtOnce,
}

/// The label of promotion `index` a freeze selects (`tier=prod` holds `p0` only).
pub fn tier(index: usize) -> &'static str {
    if index == 0 { "prod" } else { "dev" }
}

/// One tick of the clock.
pub fn step() -> Duration {
    Duration::minutes(30)
}

/// The longest time the decision compares a timestamp with "now" for (the delay; summaries carry
/// no times of their own here): timestamps older than this are only ever "long ago".
pub fn horizon() -> Duration {
    Duration::minutes(10)
}

/// The model's time at epoch 0 (a full hour: the window is open).
pub fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0)
        .single()
        .unwrap_or_default()
}

/// The time at `epoch`.
pub fn at(epoch: u32) -> DateTime<Utc> {
    base() + step() * epoch as i32
}

/// What the store stamps (unless [`Bounds::api_clock`]), and what the person and Sveltos write as
/// their times (approvals, `lastAppliedTime`): constant, long before the clock starts, so that
/// only promoter's own timestamps move with the clock.
pub fn fixed_time() -> DateTime<Utc> {
    base() - Duration::days(1)
}

/// The changes a person may make to a promotion's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpecChange {
    /// A new revision: the chart version moves to the other one.
    Revision,
    /// `staging` and `prod` swap places (a new stages hash, the same revision).
    Reorder,
    /// `staging` selects the other cluster (`staging` or `qa`; a new stages hash).
    Selector,
}

/// Whether observing is one step or two (the profiles, then the promotions, summaries, clusters
/// and freezes: another actor but the clock can come between them, see the crate doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observe {
    Atomic,
    ListByList,
}

/// Where the exploration starts (see `start`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The store as a person creates it: the clusters and the promotions.
    Fresh,
    /// After the first revision's rollout completed, by one scripted path (`start::completed`):
    /// every interleaving of what follows (a new revision, its deadlines, rollbacks, freezes) is
    /// explored, the first rollout's own interleavings are not (the bounds from `Fresh` have
    /// them).
    Completed,
}

/// The bounds of the exploration.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// How many promotions (1 or 2).
    pub promotions: usize,
    /// The stages of the first promotion and of the second (indices into [`STAGES`], in that
    /// order; every one by default). Fewer keep a bound of two promotions small where they add
    /// nothing of their own: a stage's gate is the same with one promotion or two, while one pass
    /// deciding and writing both, their profiles and summaries in one world and the clusters they
    /// share are there with a stage each.
    pub stages: [Vec<usize>; 2],
    /// How many passes may run at the same time.
    pub passes: usize,
    /// How many clusters [`Bounds::two_clusters_in`] selects (1 or 2). With 2, Sveltos
    /// reconciles its profile per cluster (one step per (profile, cluster)), so one cluster may
    /// run the new revision while the other still runs the old one, or has failed.
    pub clusters: u8,
    /// The stage (an index into [`STAGES`]) of two clusters with `clusters=2`: `dev` by default,
    /// the first, so that a pass counting it done on one cluster shows soonest (its soak ends
    /// within the next step, and `staging`'s profile follows); `staging` for a reverse rollback
    /// that must wait for every cluster of a higher stage.
    pub two_clusters_in: usize,
    pub observe: Observe,
    /// Processes killed (at any step of a pass).
    pub crashes: u8,
    /// Writes whose answer the pass never gets, applied by the server (`Step::WriteLost`) or
    /// not (`Step::WriteDropped`).
    pub lost_answers: u8,
    /// Spec changes, of the kinds in `changes`.
    pub spec_changes: u8,
    pub changes: Vec<SpecChange>,
    /// Approvals withdrawn by hand.
    pub revokes: u8,
    /// `promoter pause`s (resume is unbounded).
    pub pauses: u8,
    /// `promoter abort`s of the current run (resume is unbounded).
    pub aborts: u8,
    /// Deployments Sveltos fails (a later deployment succeeds).
    pub failures: u8,
    /// Reconciles in which Sveltos copies a new spec onto the summaries before it deploys it
    /// (they show the previous spec's `Provisioned`; stage completion must not count it).
    pub lags: u8,
    /// Whether the API server stamps `managedFields` with the model's clock (every write of one
    /// epoch in the same second). Without it every store time is one fixed time, long ago, so a
    /// summary's status never looks older than its spec: the fallback of stage completion on the
    /// API server's times is then not explored (it multiplies the states), only its unit tests
    /// and `tests/freshness.rs` cover it.
    pub api_clock: bool,
    /// Whether the person also approves with `promoter approve` (with its record), besides
    /// `kubectl patch … approved: true`.
    pub approve_command: bool,
    /// Progress deadlines and what a miss does (the automatic rollback in either order).
    pub policy: Policy,
    /// The stage (an index into [`STAGES`]) that alone has the progress deadline, or `None`:
    /// every stage has it (`promoter.dev/progress-deadline: staging=10m` or `10m`).
    pub deadline_stage: Option<usize>,
    /// Ticks of the clock while Sveltos has not deployed the profile of a stage with a deadline
    /// (`deadline_stage`, else any stage), each of which may make a stage miss its deadline;
    /// `None`: unbounded. A bound of the incident path: every resumed run may miss again
    /// otherwise, and the revision history grows with every miss.
    pub late: Option<u8>,
    /// `promoter rollback` (to the last good revision, or `--to-revision` the oldest completed
    /// one); `resume` is unbounded.
    pub rollbacks: u8,
    /// `promoter freeze create` (a freeze of `tier=prod` until deleted, or one ending within the
    /// step: it expires by the clock); `freeze delete` is unbounded.
    pub freezes: u8,
    /// `promoter freeze bypass` (until within the step: it expires by the clock).
    pub bypasses: u8,
    /// The failure budget of the stage of [`Bounds::two_clusters_in`]
    /// (`promoter.dev/failure-budget: <stage>=<n>`; no annotation with 0, upstream's behaviour):
    /// how many of its clusters may be failing while it still passes. With `clusters=2` and
    /// `failures=2`, one of the two may fail and the stage still passes, both may not.
    pub budget: u8,
    /// Where the exploration starts.
    pub start: Start,
    /// Give up beyond this many states (an error, not a pass).
    pub max_states: usize,
    /// Explore only the states within this many steps of the start: every invariant of a step
    /// is checked on them, but not liveness and quiescence (they need the whole graph); `None`:
    /// every state.
    pub max_depth: Option<usize>,
}

impl Bounds {
    /// The bound CI checks (`cargo test`, debug): one promotion of three stages, one pass at a
    /// time, one crash, one new revision; about 108,000 states (107,915 on 2026-11-28, with the
    /// completing pass's read of every stage's summaries), see
    /// docs/src/contributors/benchmarks.md.
    pub fn ci() -> Bounds {
        Bounds {
            promotions: 1,
            stages: [vec![0, 1, 2], vec![0, 1, 2]],
            passes: 1,
            clusters: 1,
            two_clusters_in: 0,
            observe: Observe::Atomic,
            crashes: 1,
            lost_answers: 0,
            spec_changes: 1,
            changes: vec![SpecChange::Revision],
            revokes: 0,
            pauses: 0,
            aborts: 0,
            failures: 0,
            lags: 0,
            api_clock: false,
            approve_command: false,
            policy: Policy::None,
            deadline_stage: None,
            late: None,
            rollbacks: 0,
            freezes: 0,
            bypasses: 0,
            budget: 0,
            start: Start::Fresh,
            max_states: 20_000_000,
            max_depth: None,
        }
    }

    /// A larger bound, on demand: `ci` and one lost answer (about 141,000 states before a lost
    /// answer could be of a write not applied; optimised, see docs/src/contributors/benchmarks.md). Concurrent passes,
    /// more promotions and the other actors are there by overrides (see [`Bounds::parse`]).
    pub fn large() -> Bounds {
        Bounds {
            lost_answers: 1,
            ..Bounds::ci()
        }
    }

    /// `ci`, `large`, or either followed by `,key=value` overrides (`promotions`,
    /// `stages=dev+staging+prod` and `second_stages=…` (the first and second promotion's stages),
    /// `passes`,
    /// `clusters` (1 or 2), `clusters_in=dev|staging|prod` (the stage of two clusters),
    /// `observe=atomic|lists`, `crashes`, `lost`, `spec_changes`, `changes=revision+reorder+selector`,
    /// `revokes`, `pauses`, `aborts`, `failures`, `lags`, `api_clock=true|false`,
    /// `approve_command=true|false`, `policy=none|halt|reverse|all-at-once`,
    /// `deadline_on=all|dev|staging|prod`, `late`, `rollbacks`,
    /// `freezes`, `bypasses`, `budget` (the failure budget of the stage of two clusters),
    /// `start=fresh|completed`, `max_states`, `max_depth`).
    pub fn parse(text: &str) -> Result<Bounds, String> {
        let mut parts = text.split(',').map(str::trim).filter(|p| !p.is_empty());
        let mut b = match parts.next() {
            Some("ci") | None => Bounds::ci(),
            Some("large") => Bounds::large(),
            Some(other) => return Err(format!("{other:?}: expected ci or large")),
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected key=value"))?;
            let number = || value.parse::<u8>().map_err(|e| format!("{key}: {e}"));
            match key {
                "promotions" => b.promotions = number()?.clamp(1, 2) as usize,
                "stages" | "second_stages" => {
                    let mut stages = value
                        .split('+')
                        .map(|s| {
                            STAGES.iter().position(|x| *x == s).ok_or_else(|| {
                                format!("{key}: {s:?}: dev, staging or prod, joined by +")
                            })
                        })
                        .collect::<Result<Vec<usize>, _>>()?;
                    stages.sort();
                    stages.dedup();
                    b.stages[usize::from(key == "second_stages")] = stages;
                }
                "passes" => b.passes = number()?.max(1) as usize,
                "clusters" => b.clusters = number()?.clamp(1, 2),
                "clusters_in" => {
                    b.two_clusters_in = STAGES
                        .iter()
                        .position(|s| *s == value)
                        .ok_or_else(|| format!("clusters_in: {value:?}: dev, staging or prod"))?
                }
                "observe" => {
                    b.observe = match value {
                        "atomic" => Observe::Atomic,
                        "lists" => Observe::ListByList,
                        _ => return Err(format!("observe: {value:?}: atomic or lists")),
                    }
                }
                "crashes" => b.crashes = number()?,
                "lost" => b.lost_answers = number()?,
                "spec_changes" => b.spec_changes = number()?,
                "changes" => {
                    b.changes = value
                        .split('+')
                        .filter(|c| !c.is_empty())
                        .map(|c| match c {
                            "revision" => Ok(SpecChange::Revision),
                            "reorder" => Ok(SpecChange::Reorder),
                            "selector" => Ok(SpecChange::Selector),
                            _ => Err(format!("changes: {c:?}")),
                        })
                        .collect::<Result<_, _>>()?
                }
                "revokes" => b.revokes = number()?,
                "pauses" => b.pauses = number()?,
                "aborts" => b.aborts = number()?,
                "failures" => b.failures = number()?,
                "lags" => b.lags = number()?,
                "api_clock" => b.api_clock = value == "true",
                "approve_command" => b.approve_command = value == "true",
                "policy" => {
                    b.policy = match value {
                        "none" => Policy::None,
                        "halt" => Policy::Halt,
                        "reverse" => Policy::Reverse,
                        "all-at-once" => Policy::AllAtOnce,
                        _ => {
                            return Err(format!(
                                "policy: {value:?}: none, halt, reverse or all-at-once"
                            ));
                        }
                    }
                }
                "deadline_on" => {
                    b.deadline_stage = match value {
                        "all" => None,
                        _ => Some(STAGES.iter().position(|s| *s == value).ok_or_else(|| {
                            format!("deadline_on: {value:?}: all, dev, staging or prod")
                        })?),
                    }
                }
                "late" => b.late = Some(number()?),
                "rollbacks" => b.rollbacks = number()?,
                "freezes" => b.freezes = number()?,
                "bypasses" => b.bypasses = number()?,
                "budget" => b.budget = number()?,
                "start" => {
                    b.start = match value {
                        "fresh" => Start::Fresh,
                        "completed" => Start::Completed,
                        _ => return Err(format!("start: {value:?}: fresh or completed")),
                    }
                }
                "max_depth" => {
                    b.max_depth = Some(value.parse().map_err(|e| format!("{key}: {e}"))?)
                }
                "max_states" => b.max_states = value.parse().map_err(|e| format!("{key}: {e}"))?,
                _ => return Err(format!("{key:?}: unknown bound")),
            }
        }
        Ok(b)
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} promotions ({}) ({} clusters in {}), {} passes ({} observe), crashes {}, lost answers {}, spec changes {} ({:?}), revokes {}, pauses {}, aborts {}, failures {}, lags {}, api clock {}, approve command {}, deadline policy {:?} on {} (late ticks {}), rollbacks {}, freezes {}, bypasses {}, failure budget {} in {}, start {:?}",
            self.promotions,
            self.stages[..self.promotions]
                .iter()
                .map(|s| s.iter().map(|&i| STAGES[i]).collect::<Vec<_>>().join("+"))
                .collect::<Vec<_>>()
                .join("; "),
            self.clusters,
            STAGES[self.two_clusters_in],
            self.passes,
            match self.observe {
                Observe::Atomic => "atomic",
                Observe::ListByList => "list-by-list",
            },
            self.crashes,
            self.lost_answers,
            self.spec_changes,
            self.changes,
            self.revokes,
            self.pauses,
            self.aborts,
            self.failures,
            self.lags,
            self.api_clock,
            self.approve_command,
            self.policy,
            self.deadline_stage.map_or("every stage", |i| STAGES[i]),
            self.late.map_or("unbounded".to_string(), |n| n.to_string()),
            self.rollbacks,
            self.freezes,
            self.bypasses,
            self.budget,
            STAGES[self.two_clusters_in],
            self.start
        )
    }
}

pub fn promotion_name(index: usize) -> String {
    format!("p{index}")
}

/// The uid of promotion `index` (promotions are never deleted and created again here).
pub fn promotion_uid(index: usize) -> String {
    format!("00000000-0000-4000-8000-00000000aa{index:02}")
}

fn selector(env: &str) -> Value {
    json!({"matchLabels": {"env": env}})
}

/// The `promoter.dev/` settings of a promotion under `policy` (the book, docs/src/operating/failure-policy.md): a
/// progress deadline on every stage (or on `stage` only), what a miss does, and no deadline of
/// the rollback's own (its
/// default, 1h, is two steps: the fingerprint names times older than the horizon only by rank, so
/// it could not tell 30m from 60m).
pub fn settings(policy: Policy, stage: Option<usize>) -> Value {
    use promoter::settings::{
        FAILURE_POLICY, PROGRESS_DEADLINE as KEY, ROLLBACK_DEADLINE, ROLLBACK_ORDER,
    };
    let (failure, order) = match policy {
        Policy::None => return json!({}),
        Policy::Halt => ("halt", None),
        Policy::Reverse => ("rollback", Some("reverse")),
        Policy::AllAtOnce => ("rollback", Some("all-at-once")),
    };
    let deadline = match stage {
        Some(i) => format!("{}={PROGRESS_DEADLINE}", STAGES[i]),
        None => PROGRESS_DEADLINE.to_string(),
    };
    let mut a = json!({KEY: deadline, FAILURE_POLICY: failure, ROLLBACK_DEADLINE: "none"});
    if let Some(order) = order {
        a[ROLLBACK_ORDER] = json!(order);
    }
    a
}

/// Promotion `index` as a person creates it.
pub fn promotion_object(index: usize, policy: Policy, deadline_stage: Option<usize>) -> Value {
    let mut p = json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": promotion_name(index), "uid": promotion_uid(index),
                     "labels": {"tier": tier(index)}, "annotations": settings(policy, deadline_stage)},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "helmCharts": [{
                    "repositoryURL": "https://kyverno.github.io/kyverno/",
                    "repositoryName": "kyverno",
                    "chartName": "kyverno/kyverno",
                    "chartVersion": REVISIONS[0],
                    "releaseName": "kyverno",
                    "releaseNamespace": "kyverno",
                    "helmChartAction": "Install"
                }]
            },
            "stages": [
                {"name": STAGES[0], "clusterSelector": selector("dev"),
                 "trigger": {"auto": {"delay": DELAY}}},
                {"name": STAGES[1], "clusterSelector": selector("staging"),
                 "trigger": {"manual": {"approved": false}}},
                {"name": STAGES[2], "clusterSelector": selector("prod"),
                 "trigger": {"auto": {"promotionWindow": {"from": "0 * * * *", "to": "30 * * * *"}}}}
            ]
        }
    });
    if policy == Policy::None
        && let Some(m) = p.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("annotations");
    }
    p
}

thread_local! {
    /// The epoch of the step being applied, when the API server's clock follows the model's
    /// ([`Bounds::api_clock`]; [`crate::state::State::apply`] sets it).
    static API_EPOCH: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The API server's clock while a step is applied: the model's clock with [`Bounds::api_clock`],
/// so that every write of one epoch carries the same second, as writes within one second do on a
/// real server (stage completion compares the `managedFields` times of a summary's spec and
/// status writes); else [`fixed_time`].
pub fn api_time() -> DateTime<Utc> {
    API_EPOCH.with(Cell::get).map(at).unwrap_or_else(fixed_time)
}

/// Sets the API server's clock for the steps applied next on this thread.
pub fn set_api_epoch(bounds: &Bounds, epoch: u32) {
    API_EPOCH.with(|e| e.set(bounds.api_clock.then_some(epoch)));
}

/// The store at the start: the clusters and the promotions, nothing else.
pub fn initial_store(bounds: &Bounds) -> anyhow::Result<Store> {
    set_api_epoch(bounds, 0);
    let mut store = Store::new(Arc::new(api_time));
    register_sveltos(&mut store)?;
    for (name, env) in clusters(bounds) {
        store
            .seed(
                &sveltos_cluster_type(),
                sveltos_cluster(CLUSTER_NAMESPACE, name, &[("env", env)]),
            )
            .map_err(|e| anyhow::anyhow!("seeding cluster {name}: {}", e.message))?;
    }
    for i in 0..bounds.promotions {
        let mut p = promotion_object(i, bounds.policy, bounds.deadline_stage);
        if let (Some(keep), Some(stages)) = (
            bounds.stages.get(i),
            p.pointer_mut("/spec/stages").and_then(Value::as_array_mut),
        ) && keep.len() < STAGES.len()
        {
            *stages = keep
                .iter()
                .filter_map(|&k| stages.get(k).cloned())
                .collect();
        }
        if bounds.budget > 0
            && let Some(m) = p.pointer_mut("/metadata").and_then(Value::as_object_mut)
        {
            let annotations = m.entry("annotations").or_insert_with(|| json!({}));
            annotations[promoter::settings::FAILURE_BUDGET] = json!(format!(
                "{}={}",
                STAGES[bounds.two_clusters_in], bounds.budget
            ));
        }
        store
            .seed(&cluster_promotion_type(), p)
            .map_err(|e| anyhow::anyhow!("seeding promotion {i}: {}", e.message))?;
    }
    Ok(store)
}

/// The JSON patch a person applies for `change` to the promotion as it is.
pub fn change_patch(p: &Value, change: SpecChange) -> Vec<Value> {
    let stages = p
        .pointer("/spec/stages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match change {
        SpecChange::Revision => {
            let now = p
                .pointer("/spec/profileSpec/helmCharts/0/chartVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let next = if now == REVISIONS[0] {
                REVISIONS[1]
            } else {
                REVISIONS[0]
            };
            vec![
                json!({"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": next}),
            ]
        }
        SpecChange::Reorder => {
            let mut swapped = stages;
            if swapped.len() == 3 {
                swapped.swap(1, 2);
            }
            vec![json!({"op": "replace", "path": "/spec/stages", "value": swapped})]
        }
        SpecChange::Selector => {
            let Some(i) = stages.iter().position(|s| s["name"] == STAGES[1]) else {
                return Vec::new();
            };
            let env = if stages[i].pointer("/clusterSelector/matchLabels/env")
                == Some(&json!("staging"))
            {
                "qa"
            } else {
                "staging"
            };
            vec![
                json!({"op": "replace", "path": format!("/spec/stages/{i}/clusterSelector"), "value": selector(env)}),
            ]
        }
    }
}
