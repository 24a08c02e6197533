//! A state of the model, and its steps: what each actor may do next, and what it does.
//!
//! A state is the API server's store (the fake API server's own [`Store`], cloned), the clock, the
//! passes in flight, what is left of the bounded adversity, and the ghost (what the invariants
//! remember, see `ghost`). A pass is promoter's: it lists with the real decoding
//! ([`observe::decode`]) and world construction ([`observe::world_from_listed`]), decides with the
//! real [`decide`], and writes its real write plan ([`write_plan`]) one request per step,
//! each applied by the store's own code (resourceVersion preconditions, JSON-patch `test`,
//! conflicts), and judged as `act` judges answers.

use super::memo;
use super::setup::{self, Bounds, Observe, STAGES, SpecChange, at};
use super::sveltos;
use promoter::annotations;
use promoter::annotations::History;
use promoter::api::PromotionFreeze;
use promoter::api::revision_name;
use promoter::api::sveltos::{CLUSTER_PROFILE_NAME_LABEL, PROMOTION_NAME_LABEL};
use promoter::api::{ClusterProfile, ClusterPromotion, ClusterSummary, SveltosCluster};
use promoter::fake::store::{DeleteOptions, PatchType};
use promoter::fake::{
    Store, cluster_profile_type, cluster_promotion_type, cluster_summary_type,
    promotion_freeze_type, promotion_revision_type, sveltos_cluster_type,
};
use promoter::ops::control::{Actor, abort_ops, approval_ops, guarded, pause_ops, resume_ops};
use promoter::ops::freeze::{NewFreeze, bypass_ops, bypass_record, freeze_object};
use promoter::ops::rollback::{RollbackRequest, Targets, rollback_ops, targets};
use promoter::pass::decide::watched_profiles;
use promoter::pass::observe::{self, world_from_listed};
use promoter::pass::write_plan::{self, Answer, PlannedWrite, Request, Verdict};
use promoter::pass::{Action, Context, Decision, HealthResults, World, decide, ownership};
use serde_json::{Value, json};
use std::sync::Arc;

/// What is left of the bounded adversity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Budget {
    pub crashes: u8,
    pub lost_answers: u8,
    pub spec_changes: u8,
    pub revokes: u8,
    pub pauses: u8,
    pub aborts: u8,
    pub failures: u8,
    pub lags: u8,
    pub rollbacks: u8,
    pub freezes: u8,
    pub bypasses: u8,
    /// Late ticks left (see [`Bounds::late`]; 0 when unbounded).
    pub late: u8,
}

impl Budget {
    pub fn of(b: &Bounds) -> Budget {
        Budget {
            crashes: b.crashes,
            lost_answers: b.lost_answers,
            spec_changes: b.spec_changes,
            revokes: b.revokes,
            pauses: b.pauses,
            aborts: b.aborts,
            failures: b.failures,
            lags: b.lags,
            rollbacks: b.rollbacks,
            freezes: b.freezes,
            bypasses: b.bypasses,
            late: b.late.unwrap_or(0),
        }
    }
}

/// Whether a write's answer is lost, and whether the server applied it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lost {
    No,
    Applied,
    NotApplied,
}

/// One step of one actor. Promotions and stages are indices (stages by their name in [`STAGES`],
/// whatever their order in the spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Pass `n` lists (all at once, or the next list), and decides once it has listed everything.
    Observe(u8),
    /// Pass `n` reads generated profiles it is about to create but did not list, and decides
    /// again if one exists (`ownership::fetch_unlisted`).
    Prepare(u8),
    /// Pass `n` sends its next write and gets the answer.
    Write(u8),
    /// Pass `n` sends its next write, the server applies it, the answer is lost.
    WriteLost(u8),
    /// Pass `n` sends its next write, the server never applies it, and the answer is lost: the
    /// connection reset before the server read the request, or a 504 whose write was not
    /// committed. The pass gets the same `Answer::Unknown` as for [`Step::WriteLost`] and cannot
    /// tell the two apart; only a pass that takes a lost answer for a write made goes on from
    /// a world that does not have it. Both draw on [`Bounds::lost_answers`].
    WriteDropped(u8),
    /// Pass `n`'s process dies.
    Crash(u8),
    /// The person approves: `kubectl patch … approved: true`, or `promoter approve` (`command`).
    Approve {
        promotion: u8,
        stage: u8,
        command: bool,
    },
    /// The person removes an approval by hand.
    Revoke {
        promotion: u8,
        stage: u8,
    },
    Pause(u8),
    Resume(u8),
    /// `promoter abort`: the current run holds where it is.
    Abort(u8),
    /// The person changes the spec.
    Change {
        promotion: u8,
        change: SpecChange,
    },
    /// Sveltos deploys the stage's profile (or removes the summaries of a profile that is gone).
    Deploy {
        promotion: u8,
        stage: u8,
    },
    /// Sveltos fails to deploy the stage's profile.
    Fail {
        promotion: u8,
        stage: u8,
    },
    /// Sveltos' profile controller copies the stage's profile's new spec onto its summaries, and
    /// the ClusterSummary controller has not deployed it yet: each summary is in sync with the
    /// profile and still shows the previous spec's `Provisioned` (with that spec's hashes), as a
    /// busy controller or a status computed from the previous spec and landing late shows it.
    Lag {
        promotion: u8,
        stage: u8,
    },
    /// Sveltos reconciles the stage's profile on one cluster only (an index into
    /// [`setup::all_clusters`]): with `clusters=2`, the stage of two clusters is deployed, failed or
    /// lagged this way, one cluster at a time, instead of by [`Step::Deploy`], [`Step::Fail`]
    /// and [`Step::Lag`].
    OnCluster {
        promotion: u8,
        stage: u8,
        cluster: u8,
        outcome: sveltos::Outcome,
    },
    /// `promoter rollback` of the current run: to the last good revision, or `--to-revision`
    /// the first completed one the history lists (`to_revision`).
    Rollback {
        promotion: u8,
        to_revision: bool,
    },
    /// `promoter freeze create f --selector tier=prod`, until deleted or (`expiring`) until a
    /// time within the step.
    Freeze {
        expiring: bool,
    },
    /// `promoter freeze delete f`.
    Unfreeze,
    /// `promoter freeze bypass`, until a time within the step.
    Bypass(u8),
    /// The clock moves one step.
    Tick,
}

impl Step {
    /// The pass this step belongs to.
    pub fn pass(self) -> Option<u8> {
        match self {
            Step::Observe(n)
            | Step::Prepare(n)
            | Step::Write(n)
            | Step::WriteLost(n)
            | Step::WriteDropped(n)
            | Step::Crash(n) => Some(n),
            _ => None,
        }
    }

    pub fn describe(self) -> String {
        let p = |i: u8| setup::promotion_name(i as usize);
        let s = |i: u8| STAGES.get(i as usize).copied().unwrap_or("?");
        match self {
            Step::Observe(n) => format!("pass {n}: observe"),
            Step::Prepare(n) => format!("pass {n}: read unlisted profiles"),
            Step::Write(n) => format!("pass {n}: write"),
            Step::WriteLost(n) => format!("pass {n}: write, answer lost"),
            Step::WriteDropped(n) => format!("pass {n}: write not applied, answer lost"),
            Step::Crash(n) => format!("pass {n}: process killed"),
            Step::Approve {
                promotion,
                stage,
                command,
            } => format!(
                "person: {} {}/{}",
                if command {
                    "promoter approve"
                } else {
                    "kubectl patch approved=true"
                },
                p(promotion),
                s(stage)
            ),
            Step::Revoke { promotion, stage } => {
                format!(
                    "person: revokes the approval of {}/{}",
                    p(promotion),
                    s(stage)
                )
            }
            Step::Pause(i) => format!("person: promoter pause {}", p(i)),
            Step::Resume(i) => format!("person: promoter resume {}", p(i)),
            Step::Abort(i) => format!("person: promoter abort {}", p(i)),
            Step::Change { promotion, change } => {
                format!("person: spec change {change:?} of {}", p(promotion))
            }
            Step::Deploy { promotion, stage } => {
                format!("sveltos: deploys {}-{}", p(promotion), s(stage))
            }
            Step::Fail { promotion, stage } => {
                format!("sveltos: fails to deploy {}-{}", p(promotion), s(stage))
            }
            Step::Lag { promotion, stage } => format!(
                "sveltos: copies the spec of {}-{}, its previous Provisioned still shown",
                p(promotion),
                s(stage)
            ),
            Step::OnCluster {
                promotion,
                stage,
                cluster,
                outcome,
            } => {
                let what = match outcome {
                    sveltos::Outcome::Deployed => "deploys",
                    sveltos::Outcome::Retrying => "retries its failed deployment of",
                    sveltos::Outcome::Failed => "fails to deploy",
                    sveltos::Outcome::SpecOnly => "copies the spec of",
                };
                let on = setup::cluster_name(cluster).unwrap_or("?");
                format!(
                    "sveltos: {what} {}-{} on cluster {on}",
                    p(promotion),
                    s(stage)
                )
            }
            Step::Rollback {
                promotion,
                to_revision,
            } => format!(
                "person: promoter rollback {}{}",
                p(promotion),
                if to_revision {
                    " --to-revision <first completed>"
                } else {
                    ""
                }
            ),
            Step::Freeze { expiring } => format!(
                "person: promoter freeze create {FREEZE} --selector tier=prod{}",
                if expiring { " --end <now+15m>" } else { "" }
            ),
            Step::Unfreeze => format!("person: promoter freeze delete {FREEZE}"),
            Step::Bypass(i) => format!("person: promoter freeze bypass {} --until <now+15m>", p(i)),
            Step::Tick => "clock: +30m".into(),
        }
    }
}

/// Objects as a pass listed them: the stored objects themselves, shared with the store (a list
/// copies no object, and each is decoded once, see `memo::decoded`).
pub type Objects = Arc<Vec<Arc<Value>>>;

/// What a pass listed.
#[derive(Clone, Debug, Default)]
pub struct Listed {
    pub promotions: Objects,
    pub profiles: Option<Objects>,
}

/// A pass that has decided and is writing.
#[derive(Clone, Debug)]
pub struct Acting {
    /// The epoch it observed at (its clock).
    pub now: u32,
    /// What it listed (profiles, then promotions; summaries).
    pub promotions: Objects,
    pub profiles: Objects,
    pub summaries: Objects,
    /// Profiles read just before acting (`Prepare`).
    pub fetched: Objects,
    pub world: Arc<World>,
    pub decoded: Arc<Vec<ClusterPromotion>>,
    pub decisions: Arc<Vec<Decision>>,
    /// The promotion being acted on.
    pub index: usize,
    pub work: Work,
}

#[derive(Clone, Debug)]
pub enum Work {
    /// About to read the profiles it would create but did not list.
    Prepare,
    Writing {
        writes: Arc<Vec<PlannedWrite>>,
        at: usize,
        /// The promotion as observed, or as its last write of it returned it.
        current: Arc<ClusterPromotion>,
        current_json: Arc<Value>,
    },
}

#[derive(Clone, Debug)]
pub enum Pass {
    Idle,
    Observing { now: u32, listed: Arc<Listed> },
    Acting(Arc<Acting>),
}

#[derive(Clone)]
pub struct State {
    pub store: Store,
    pub epoch: u32,
    pub passes: Vec<Pass>,
    pub budget: Budget,
    /// Shared with the state it came from until a step changes it (most do not: it is cloned
    /// for every candidate step, and its fingerprint text is kept per distinct ghost).
    pub ghost: Arc<super::ghost::Ghost>,
}

/// Why the model could not take a step it should be able to take (not an invariant violation: a
/// fault of the model, or promoter state it cannot decode).
#[derive(Debug)]
pub struct ModelError(pub String);

type Res<T> = Result<T, ModelError>;

fn err<T>(what: impl Into<String>) -> Res<T> {
    Err(ModelError(what.into()))
}

pub fn promotion_value(store: &Store, index: usize) -> Option<&Arc<Value>> {
    store.peek(&cluster_promotion_type(), "", &setup::promotion_name(index))
}

/// Promotion `index` as stored, decoded.
pub fn promotion(store: &Store, index: usize) -> Option<Arc<memo::Promotion>> {
    memo::promotion(promotion_value(store, index)?)
}

/// The index in the spec of the stage named `STAGES[stage]`.
pub fn stage_index(p: &ClusterPromotion, stage: u8) -> Option<usize> {
    let name = STAGES.get(stage as usize)?;
    p.spec.stages.iter().position(|s| s.name == *name)
}

impl State {
    pub fn initial(bounds: &Bounds) -> anyhow::Result<State> {
        let store = setup::initial_store(bounds)?;
        let mut s = State {
            store,
            epoch: 0,
            passes: vec![Pass::Idle; bounds.passes],
            budget: Budget::of(bounds),
            ghost: Default::default(),
        };
        s.ghost = Arc::new(super::ghost::Ghost::initial(&s, bounds));
        Ok(s)
    }

    /// Every step an actor could take now (some may change nothing; [`State::apply`] says).
    pub fn candidates(&self, bounds: &Bounds) -> Vec<Step> {
        let mut out = Vec::new();
        for (n, pass) in self.passes.iter().enumerate() {
            let n = n as u8;
            match pass {
                Pass::Idle => out.push(Step::Observe(n)),
                Pass::Observing { .. } => out.push(Step::Observe(n)),
                Pass::Acting(a) => match a.work {
                    Work::Prepare => out.push(Step::Prepare(n)),
                    Work::Writing { .. } => {
                        out.push(Step::Write(n));
                        if self.budget.lost_answers > 0 {
                            out.push(Step::WriteLost(n));
                            out.push(Step::WriteDropped(n));
                        }
                    }
                },
            }
            if !matches!(pass, Pass::Idle) && self.budget.crashes > 0 {
                out.push(Step::Crash(n));
            }
        }
        for i in 0..bounds.promotions as u8 {
            for stage in 0..STAGES.len() as u8 {
                let one_by_one = setup::clusters_one_by_one(bounds, stage as usize);
                if !one_by_one.is_empty() {
                    for cluster in one_by_one {
                        let on = |outcome| Step::OnCluster {
                            promotion: i,
                            stage,
                            cluster,
                            outcome,
                        };
                        out.push(on(sveltos::Outcome::Deployed));
                        if self.budget.failures > 0 {
                            out.push(on(sveltos::Outcome::Failed));
                        }
                        if self.budget.lags > 0 {
                            out.push(on(sveltos::Outcome::SpecOnly));
                        }
                        // A failed cluster retried: explored where a failure budget makes it
                        // matter (a cluster counted against it that goes back to deploying
                        // stays counted); elsewhere it is one more way to wait.
                        if bounds.budget > 0 {
                            out.push(on(sveltos::Outcome::Retrying));
                        }
                    }
                    continue;
                }
                out.push(Step::Deploy {
                    promotion: i,
                    stage,
                });
                if self.budget.failures > 0 {
                    out.push(Step::Fail {
                        promotion: i,
                        stage,
                    });
                }
                if self.budget.lags > 0 {
                    out.push(Step::Lag {
                        promotion: i,
                        stage,
                    });
                }
            }
            // Only `staging` has a manual trigger.
            out.push(Step::Approve {
                promotion: i,
                stage: 1,
                command: false,
            });
            if bounds.approve_command {
                out.push(Step::Approve {
                    promotion: i,
                    stage: 1,
                    command: true,
                });
            }
            if self.budget.revokes > 0 {
                out.push(Step::Revoke {
                    promotion: i,
                    stage: 1,
                });
            }
            if self.budget.pauses > 0 {
                out.push(Step::Pause(i));
            }
            if self.budget.aborts > 0 {
                out.push(Step::Abort(i));
            }
            out.push(Step::Resume(i));
            if self.budget.spec_changes > 0 {
                for change in &bounds.changes {
                    out.push(Step::Change {
                        promotion: i,
                        change: *change,
                    });
                }
            }
        }
        for i in 0..bounds.promotions as u8 {
            if self.budget.rollbacks > 0 {
                for to_revision in [false, true] {
                    out.push(Step::Rollback {
                        promotion: i,
                        to_revision,
                    });
                }
            }
            if self.budget.bypasses > 0 {
                out.push(Step::Bypass(i));
            }
        }
        if self.budget.freezes > 0 {
            out.push(Step::Freeze { expiring: false });
            out.push(Step::Freeze { expiring: true });
        }
        if bounds.freezes > 0 {
            out.push(Step::Unfreeze);
        }
        // Sveltos reconciles a copied spec within the grace (see `sveltos::lagging`). A pass's
        // list calls are one instant of the clock: it stamps what it lists with the time it read
        // before its first list (`PassOptions.now`), and its lists take milliseconds to seconds
        // (bounded by the pass deadline), not a step (crate doc, "The clock and a pass's lists").
        let listing = self
            .passes
            .iter()
            .any(|p| matches!(p, Pass::Observing { .. }));
        if (bounds.lags == 0 || !sveltos::lagging(&self.store))
            && !listing
            && (self.budget.late > 0 || !self.late(bounds))
        {
            out.push(Step::Tick);
        }
        out
    }

    /// The state after `step`, or `None` when the step changes nothing (or cannot be taken). The
    /// ghost is not updated here (see `ghost::update`).
    pub fn apply(&self, step: Step, bounds: &Bounds) -> Res<Option<State>> {
        setup::set_api_epoch(bounds, self.epoch);
        super::ghost::decided_clear();
        let mut next = self.clone();
        let changed = match step {
            Step::Observe(n) => next.observe(n as usize, bounds)?,
            Step::Prepare(n) => next.prepare(n as usize)?,
            Step::Write(n) => next.write(n as usize, Lost::No)?,
            Step::WriteLost(n) => next.write(n as usize, Lost::Applied)?,
            Step::WriteDropped(n) => next.write(n as usize, Lost::NotApplied)?,
            Step::Crash(n) => {
                next.passes[n as usize] = Pass::Idle;
                next.budget.crashes -= 1;
                true
            }
            Step::Approve {
                promotion,
                stage,
                command,
            } => next.approve(promotion as usize, stage, command)?,
            Step::Revoke { promotion, stage } => {
                let changed = next.revoke(promotion as usize, stage)?;
                if changed {
                    next.budget.revokes -= 1;
                }
                changed
            }
            Step::Pause(i) => {
                let changed = next.pause(i as usize, true)?;
                if changed {
                    next.budget.pauses -= 1;
                }
                changed
            }
            Step::Resume(i) => next.pause(i as usize, false)?,
            Step::Abort(i) => {
                let changed = next.abort(i as usize)?;
                if changed {
                    next.budget.aborts -= 1;
                }
                changed
            }
            Step::Change { promotion, change } => {
                let changed = next.change(promotion as usize, change)?;
                if changed {
                    next.budget.spec_changes -= 1;
                }
                changed
            }
            Step::Deploy { promotion, stage } => {
                next.sveltos(promotion, stage, sveltos::Outcome::Deployed, None)
            }
            Step::OnCluster {
                promotion,
                stage,
                cluster,
                outcome,
            } => {
                let on = setup::cluster_name(cluster);
                if on.is_none() {
                    return err("no such cluster");
                }
                let changed = next.sveltos(promotion, stage, outcome, on);
                if changed {
                    match outcome {
                        sveltos::Outcome::Deployed | sveltos::Outcome::Retrying => {}
                        sveltos::Outcome::Failed => next.budget.failures -= 1,
                        sveltos::Outcome::SpecOnly => next.budget.lags -= 1,
                    }
                }
                changed
            }
            Step::Fail { promotion, stage } => {
                let changed = next.sveltos(promotion, stage, sveltos::Outcome::Failed, None);
                if changed {
                    next.budget.failures -= 1;
                }
                changed
            }
            Step::Lag { promotion, stage } => {
                let changed = next.sveltos(promotion, stage, sveltos::Outcome::SpecOnly, None);
                if changed {
                    next.budget.lags -= 1;
                }
                changed
            }
            Step::Rollback {
                promotion,
                to_revision,
            } => {
                let changed = next.rollback(promotion as usize, to_revision)?;
                if changed {
                    next.budget.rollbacks -= 1;
                }
                changed
            }
            Step::Freeze { expiring } => {
                let changed = next.freeze(expiring)?;
                if changed {
                    next.budget.freezes -= 1;
                }
                changed
            }
            Step::Unfreeze => next
                .store
                .delete(
                    &promotion_freeze_type(),
                    "",
                    FREEZE,
                    &DeleteOptions::default(),
                )
                .is_ok(),
            Step::Bypass(i) => {
                let changed = next.bypass(i as usize)?;
                if changed {
                    next.budget.bypasses -= 1;
                }
                changed
            }
            Step::Tick => {
                if self.late(bounds) {
                    next.budget.late = next.budget.late.saturating_sub(1);
                }
                next.epoch += 1;
                true
            }
        };
        Ok(changed.then_some(next))
    }

    // -----------------------------------------------------------------------------------------
    // Passes

    fn observe(&mut self, n: usize, bounds: &Bounds) -> Res<bool> {
        let (now, mut listed) = match &self.passes[n] {
            Pass::Idle => (self.epoch, Listed::default()),
            Pass::Observing { now, listed } => (*now, (**listed).clone()),
            Pass::Acting(_) => return err("observe while acting"),
        };
        // Profiles, then promotions: the order `observe_pass` lists them in (a profile read is
        // never newer than the status read after it).
        if listed.profiles.is_none() {
            listed.profiles = Some(Arc::new(self.list_profiles()));
            if bounds.observe == Observe::ListByList {
                self.passes[n] = Pass::Observing {
                    now,
                    listed: Arc::new(listed),
                };
                return Ok(true);
            }
        }
        listed.promotions = Arc::new(
            self.store
                .stored(&cluster_promotion_type())
                .cloned()
                .collect(),
        );
        let acting = self.decide(now, listed)?;
        self.passes[n] = acting;
        Ok(true)
    }

    fn list_profiles(&self) -> Vec<Arc<Value>> {
        self.store
            .stored(&cluster_profile_type())
            .filter(|p| {
                p.pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .is_some_and(|l| l.contains_key(PROMOTION_NAME_LABEL))
            })
            .cloned()
            .collect()
    }

    /// The last list calls (summaries of the watched profiles, the inventory), then the decisions.
    fn decide(&self, now: u32, listed: Listed) -> Res<Pass> {
        let decoded: Vec<ClusterPromotion> = listed
            .promotions
            .iter()
            .map(memo::decoded::<ClusterPromotion>)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError(format!("a promotion does not decode: {e}")))?;
        let profiles_listed = listed.profiles.clone().unwrap_or_default();
        let profiles: Vec<ClusterProfile> = profiles_listed
            .iter()
            .map(memo::decoded::<ClusterProfile>)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError(format!("a profile does not decode: {e}")))?;
        let mut watched: Vec<String> = decoded.iter().flat_map(watched_profiles).collect();
        watched.sort();
        watched.dedup();
        // As `observe_pass`: without a watched profile, neither summaries nor the inventory.
        let (summaries, clusters) = if watched.is_empty() || decoded.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            (
                summaries_of(&self.store, &watched),
                self.store
                    .stored(&sveltos_cluster_type())
                    .cloned()
                    .collect(),
            )
        };
        let typed_summaries: Vec<ClusterSummary> = summaries
            .iter()
            .map(memo::decoded::<ClusterSummary>)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError(format!("a summary does not decode: {e}")))?;
        let typed_clusters: Vec<SveltosCluster> = clusters
            .iter()
            .map(memo::decoded::<SveltosCluster>)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError(format!("a cluster does not decode: {e}")))?;
        let mut world = world_from_listed(profiles, typed_summaries, &typed_clusters);
        // As `observe_pass`: the watched profiles' summaries were listed, none or some.
        if !watched.is_empty() && !decoded.is_empty() {
            world.summaries_listed = watched.iter().cloned().collect();
        }
        world.freezes = self
            .store
            .stored(&promotion_freeze_type())
            .map(memo::decoded::<PromotionFreeze>)
            .collect::<Result<_, _>>()
            .map_err(|e| ModelError(format!("a freeze does not decode: {e}")))?;
        // As `pass_body`.
        world.claims = ownership::claims(&decoded);
        world.now = Some(at(now));
        let ctx = context(now);
        let decisions: Vec<Decision> = decoded
            .iter()
            .map(|p| decide(p, &world, &HealthResults::new(), &ctx))
            .collect();
        for (p, d) in decoded.iter().zip(&decisions) {
            super::ghost::decided(&world, p, d);
        }

        let mut acting = Acting {
            now,
            promotions: listed.promotions,
            profiles: profiles_listed,
            summaries: Arc::new(summaries),
            fetched: Arc::default(),
            world: Arc::new(world),
            decoded: Arc::new(decoded),
            decisions: Arc::new(decisions),
            index: 0,
            work: Work::Prepare,
        };
        Ok(if acting.start(0) {
            Pass::Acting(Arc::new(acting))
        } else {
            Pass::Idle
        })
    }

    fn prepare(&mut self, n: usize) -> Res<bool> {
        let Pass::Acting(a) = &self.passes[n] else {
            return err("prepare while not acting");
        };
        let mut a = (**a).clone();
        let d = &a.decisions[a.index];
        let mut world = (*a.world).clone();
        let mut found = false;
        for name in unlisted(d, &world) {
            if let Some(v) = self.store.peek(&cluster_profile_type(), "", &name) {
                let cp: ClusterProfile =
                    memo::decoded(v).map_err(|e| ModelError(format!("profile {name}: {e}")))?;
                world.profiles.insert(name, cp);
                Arc::make_mut(&mut a.fetched).push(v.clone());
                found = true;
            }
        }
        let p = &a.decoded[a.index];
        let mut again = found.then(|| decide(p, &world, &HealthResults::new(), &context(a.now)));
        // As `pass_body`: a rollback reads the one revision it restores, then is decided again.
        let wanted = again
            .as_ref()
            .unwrap_or(&a.decisions[a.index])
            .needs_revision
            .clone();
        if let Some(name) = wanted {
            let stored = self
                .store
                .peek(&promotion_revision_type(), "", &name)
                .map(|v| observe::decode(v))
                .transpose()
                .map_err(|e| ModelError(format!("revision {name}: {e}")))?;
            if let Some(v) = self.store.peek(&promotion_revision_type(), "", &name) {
                Arc::make_mut(&mut a.fetched).push(v.clone());
            }
            world.revisions.insert(name, stored);
            again = Some(decide(p, &world, &HealthResults::new(), &context(a.now)));
        }
        // As `pass_body`: a profile whose spec changes has its summaries read (the hashes they
        // carry go into the `promoter.dev/redeploy` record), then is decided again. The summaries
        // read replace what the pass listed of those profiles, as `pass_body`'s `extend` does with
        // `observe::summaries_of`'s map (a profile none of whose summaries is read keeps its own).
        let needs = again
            .as_ref()
            .unwrap_or(&a.decisions[a.index])
            .needs_summaries
            .clone();
        if !needs.is_empty() {
            let listed = summaries_of(&self.store, &needs);
            let mut read = std::collections::BTreeMap::new();
            for v in &listed {
                let cs: ClusterSummary =
                    memo::decoded(v).map_err(|e| ModelError(format!("a summary: {e}")))?;
                observe::add_summary(&mut read, cs);
            }
            world.summaries.extend(read);
            Arc::make_mut(&mut a.fetched).extend(listed);
            world.summaries_listed.extend(needs);
            again = Some(decide(p, &world, &HealthResults::new(), &context(a.now)));
        }
        if let Some(again) = again {
            super::ghost::decided(&world, p, &again);
            let mut decisions = (*a.decisions).clone();
            decisions[a.index] = again;
            a.decisions = Arc::new(decisions);
            a.world = Arc::new(world);
        }
        let index = a.index;
        self.passes[n] = if a.plan(index) || a.start(index + 1) {
            Pass::Acting(Arc::new(a))
        } else {
            Pass::Idle
        };
        Ok(true)
    }

    fn write(&mut self, n: usize, lost: Lost) -> Res<bool> {
        let Pass::Acting(a) = &self.passes[n] else {
            return err("write while not acting");
        };
        let mut a = (**a).clone();
        let Work::Writing {
            writes,
            at,
            current,
            current_json,
        } = &a.work
        else {
            return err("write while preparing");
        };
        let (writes, at, mut current, mut current_json) =
            (writes.clone(), *at, current.clone(), current_json.clone());
        let w = &writes[at];
        let name = a.decisions[a.index].promotion.clone();
        let Some(request) = w.request(&current) else {
            return err("a write with nothing to send is skipped when planned");
        };
        let verdict = match lost {
            Lost::No => w.judge(&name, send(&mut self.store, &request)?),
            Lost::Applied => {
                if !matches!(send(&mut self.store, &request)?, Answer::Written(_)) {
                    // A lost answer to a refused write is the refusal's own outcome.
                    return Ok(false);
                }
                self.budget.lost_answers -= 1;
                self.after_lost_answer(w, &name, &current)?
            }
            // The store is left as it is: the request never reached it.
            Lost::NotApplied => {
                self.budget.lost_answers -= 1;
                self.after_lost_answer(w, &name, &current)?
            }
        };
        let go_on = match verdict {
            Verdict::Done(_, updated) => {
                if let Some(u) = updated {
                    current_json =
                        Arc::new(serde_json::to_value(&*u).map_err(|e| ModelError(e.to_string()))?);
                    current = Arc::new(*u);
                }
                true
            }
            // A revision the store does not serve: the rest goes on, as in `act`.
            Verdict::Skipped | Verdict::NotStored(_) => true,
            Verdict::Conflict(_) => false,
            Verdict::Error(e) => return err(format!("a write failed with an error: {e}")),
        };
        let next_at = if go_on {
            skip_nothing(&writes, at + 1)
        } else {
            writes.len()
        };
        self.passes[n] = if next_at < writes.len() {
            a.work = Work::Writing {
                writes,
                at: next_at,
                current,
                current_json,
            };
            Pass::Acting(Arc::new(a))
        } else if a.start(a.index + 1) {
            Pass::Acting(Arc::new(a))
        } else {
            Pass::Idle
        };
        Ok(true)
    }

    /// The verdict on a lost answer, as `act` reaches it: the write judged unknown, then, for a
    /// write `act` reads the promotion back after, judged again from the promotion as stored.
    /// The read follows the lost answer in the same step: a write of another actor between
    /// them is not modelled (it would only make the read show another status, which `act`
    /// takes for a lost answer, as it does without reading).
    fn after_lost_answer(
        &self,
        w: &PlannedWrite,
        name: &str,
        current: &ClusterPromotion,
    ) -> Res<Verdict> {
        let lost = w.judge(name, Answer::Unknown("connection reset (model)".into()));
        if !w.reads_back_after_a_lost_answer() {
            return Ok(lost);
        }
        let read = self
            .store
            .peek(&cluster_promotion_type(), "", name)
            .map(|v| observe::decode(v))
            .transpose()
            .map_err(|e| ModelError(format!("promotion {name} read back: {e}")))?;
        Ok(w.after_lost_answer(current, read, lost))
    }

    // -----------------------------------------------------------------------------------------
    // The person

    fn json_patch(&mut self, index: usize, ops: Vec<Value>) -> Res<bool> {
        let before = self.store.revision();
        match self.store.patch(
            &cluster_promotion_type(),
            "",
            &setup::promotion_name(index),
            PatchType::Json,
            &Value::Array(ops),
            false,
        ) {
            Ok(_) => Ok(self.store.revision() != before),
            // A `test` that does not hold: nothing to do.
            Err(e)
                if e.code == 422 && e.message.starts_with(promoter::guard::PATCH_NOT_APPLIED) =>
            {
                Ok(false)
            }
            Err(e) => err(format!(
                "a person's patch of {} failed: {} {}",
                setup::promotion_name(index),
                e.code,
                e.message
            )),
        }
    }

    fn approve(&mut self, index: usize, stage: u8, command: bool) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        let p = &m.p;
        let Some(i) = stage_index(p, stage) else {
            return Ok(false);
        };
        let manual = p.spec.stages[i]
            .trigger
            .as_ref()
            .and_then(|t| t.manual.as_ref());
        if manual.is_none_or(|m| m.is_approved()) {
            return Ok(false);
        }
        let ops = if command {
            // A command that refuses writes nothing.
            match approval_ops(
                p,
                Some(&p.spec.stages[i].name),
                &person(),
                setup::fixed_time(),
            ) {
                Ok((_, _, _, ops)) => guarded(p, ops),
                Err(_) => return Ok(false),
            }
        } else {
            vec![
                json!({"op": "test", "path": format!("/spec/stages/{i}/name"), "value": p.spec.stages[i].name}),
                json!({"op": "add", "path": format!("/spec/stages/{i}/trigger/manual/approved"), "value": true}),
            ]
        };
        self.json_patch(index, ops)
    }

    fn revoke(&mut self, index: usize, stage: u8) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        let p = &m.p;
        let Some(i) = stage_index(p, stage) else {
            return Ok(false);
        };
        if !p.spec.stages[i].manual_approval().unwrap_or(false) {
            return Ok(false);
        }
        self.json_patch(
            index,
            vec![
                json!({"op": "test", "path": format!("/spec/stages/{i}/name"), "value": p.spec.stages[i].name}),
                json!({"op": "remove", "path": format!("/spec/stages/{i}/trigger/manual/approved")}),
            ],
        )
    }

    fn pause(&mut self, index: usize, pause: bool) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        let ops = if pause {
            match pause_ops(&m.p, &person(), setup::fixed_time()) {
                Ok(ops) => ops,
                Err(_) => return Ok(false),
            }
        } else {
            // The model's person confirms what resume redeploys (`--yes`).
            let promoter::ops::control::Resumption { ops, lifted, .. } =
                resume_ops(&m.p, &person(), setup::fixed_time());
            if lifted.is_empty() {
                return Ok(false);
            }
            ops
        };
        self.json_patch(index, guarded(&m.p, ops))
    }

    fn abort(&mut self, index: usize) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        // Refused (nothing runs) or aborted already: nothing written.
        match abort_ops(&m.p, &person(), setup::fixed_time()) {
            Ok(Ok(ops)) => self.json_patch(index, guarded(&m.p, ops)),
            _ => Ok(false),
        }
    }

    /// `promoter rollback` as `ops::rollback::planned` decides it (the first candidate whose
    /// PromotionRevision is stored), its guarded patch written; a refusal writes nothing.
    fn rollback(&mut self, index: usize, to_revision: bool) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        let p = &m.p;
        let name = setup::promotion_name(index);
        let request = RollbackRequest {
            to_revision: if to_revision {
                match History::of(p).0.iter().find(|e| e.completed_at.is_some()) {
                    Some(e) => Some(e.id.clone()),
                    None => return Ok(false),
                }
            } else {
                None
            },
            order: None,
        };
        let Ok(Targets::Candidates(candidates)) = targets(p, &request) else {
            return Ok(false);
        };
        let revisions = promotion_revision_type();
        let Some(target) = candidates.iter().find(|e| {
            self.store
                .peek(&revisions, "", &revision_name(&name, &e.revision))
                .is_some_and(|r| {
                    r.pointer("/spec/revision").and_then(Value::as_str) == Some(&e.revision)
                        && r.pointer("/spec/promotion").and_then(Value::as_str) == Some(&name)
                })
        }) else {
            return Ok(false);
        };
        let Some((_, ops)) = rollback_ops(p, target, &request, &person(), setup::fixed_time())
        else {
            return Ok(false);
        };
        self.json_patch(index, guarded(p, ops))
    }

    /// `promoter freeze create`, with the model's clock as the command's.
    fn freeze(&mut self, expiring: bool) -> Res<bool> {
        if self
            .store
            .peek(&promotion_freeze_type(), "", FREEZE)
            .is_some()
        {
            return Ok(false);
        }
        let now = at(self.epoch);
        let new = NewFreeze {
            name: FREEZE.into(),
            reason: "incident".into(),
            selector: Some("tier=prod".into()),
            start: None,
            end: expiring.then(|| now + chrono::Duration::minutes(15)),
        };
        let object = freeze_object(&new, &person(), now).map_err(ModelError)?;
        match self
            .store
            .create(&promotion_freeze_type(), "", value(&object)?)
        {
            Ok(_) => Ok(true),
            Err(e) => err(format!(
                "creating freeze {FREEZE}: {} {}",
                e.code, e.message
            )),
        }
    }

    /// `promoter freeze bypass --reason … --until <now+15m>`, with the model's clock.
    fn bypass(&mut self, index: usize) -> Res<bool> {
        let Some(m) = promotion(&self.store, index) else {
            return Ok(false);
        };
        let now = at(self.epoch);
        let actor = Actor {
            reason: Some("hotfix".into()),
            ..person()
        };
        let record = bypass_record(None, now + chrono::Duration::minutes(15), &actor, now)
            .map_err(ModelError)?;
        self.json_patch(index, guarded(&m.p, bypass_ops(&m.p, &record)))
    }

    fn change(&mut self, index: usize, change: SpecChange) -> Res<bool> {
        let Some(p) = promotion_value(&self.store, index) else {
            return Ok(false);
        };
        let ops = setup::change_patch(p, change);
        if ops.is_empty() {
            return Ok(false);
        }
        self.json_patch(index, ops)
    }

    // -----------------------------------------------------------------------------------------
    // Sveltos

    /// One reconcile of a stage's profile by Sveltos, on every cluster it selects or `only` one.
    fn sveltos(
        &mut self,
        promotion: u8,
        stage: u8,
        outcome: sveltos::Outcome,
        only: Option<&str>,
    ) -> bool {
        let before = self.store.revision();
        let name = format!(
            "{}-{}",
            setup::promotion_name(promotion as usize),
            STAGES[stage as usize]
        );
        sveltos::reconcile(&mut self.store, &name, outcome, only);
        self.store.revision() != before
    }

    /// Whether every promotion is complete for its current spec, as the world shows it (not
    /// promoter's completion record): its status reads complete (`ghost::reads_complete`) for a
    /// run of its current revision and stages, it is not paused, and every stage's profile
    /// carries that revision and runs it on every cluster the stage selects.
    pub fn complete(&self, bounds: &Bounds) -> bool {
        (0..bounds.promotions).all(|i| {
            promotion(&self.store, i).is_some_and(|m| {
                let status = m.p.status.as_ref();
                super::ghost::reads_complete(&m.p)
                    && annotations::paused(&m.p).is_none()
                    && status.and_then(|s| s.profile_spec_hash.as_deref()) == Some(&m.revision)
                    && status.and_then(|s| s.stages_hash.as_deref()) == Some(&m.stages)
                    && m.p.spec.stages.iter().all(|stage| {
                        super::ghost::ran_everywhere(&self.store, i, stage)
                            == m.contents.get(&stage.name).copied()
                    })
            })
        })
    }

    /// Whether a tick now is late (see [`Bounds::late`]): the bound is set and Sveltos has a
    /// deployment to make for a stage with a progress deadline.
    pub fn late(&self, bounds: &Bounds) -> bool {
        bounds.late.is_some()
            && (0..bounds.promotions).any(|i| {
                STAGES.iter().enumerate().any(|(j, stage)| {
                    bounds.deadline_stage.is_none_or(|d| d == j)
                        && sveltos::pending(
                            &self.store,
                            &format!("{}-{stage}", setup::promotion_name(i)),
                        )
                })
            })
    }

    /// Whether no pass is in flight.
    pub fn quiet(&self) -> bool {
        self.passes.iter().all(|p| matches!(p, Pass::Idle))
    }
}

impl Acting {
    /// Whether promotion `index`'s decision creates profiles the pass did not list (it reads them
    /// again before acting, and may decide again).
    pub fn needs_prepare(&self, index: usize) -> bool {
        needs_reads(&self.decisions[index], &self.world)
    }

    /// Moves to the first promotion from `index` on whose decision writes; `false` when none is
    /// left (the pass is over).
    fn start(&mut self, index: usize) -> bool {
        let mut i = index;
        while i < self.decisions.len() {
            let d = &self.decisions[i];
            if acts(d) {
                self.index = i;
                if !needs_reads(d, &self.world) {
                    if self.plan(i) {
                        return true;
                    }
                } else {
                    self.work = Work::Prepare;
                    return true;
                }
            }
            i += 1;
        }
        false
    }

    /// The write plan of promotion `index`; `false` when it sends nothing.
    fn plan(&mut self, index: usize) -> bool {
        let d = &self.decisions[index];
        if !d.writes() {
            return false;
        }
        let writes = write_plan::plan(d, &self.world);
        let at = skip_nothing(&writes, 0);
        if at >= writes.len() {
            return false;
        }
        let current = self.decoded[index].clone();
        let current_json = self.promotions[index].clone();
        self.index = index;
        self.work = Work::Writing {
            writes: Arc::new(writes),
            at,
            current: Arc::new(current),
            current_json,
        };
        true
    }
}

/// Whether a pass does anything for decision `d`: it writes, or (as `pass_body`) it reads the
/// revision a rollback restores first and decides again, whatever the first decision wrote.
pub fn acts(d: &Decision) -> bool {
    d.writes() || d.needs_revision.is_some()
}

fn skip_nothing(writes: &[PlannedWrite], mut at: usize) -> usize {
    while at < writes.len() && matches!(writes[at].kind, write_plan::WriteKind::Nothing) {
        at += 1;
    }
    at
}

/// Whether the pass reads more before acting on `d`: profiles it would create but did not list,
/// or the revision a rollback restores.
/// The stored ClusterSummaries of these profiles (by their profile label), as a pass lists them.
fn summaries_of(store: &Store, profiles: &[String]) -> Vec<Arc<Value>> {
    store
        .stored(&cluster_summary_type())
        .filter(|cs| {
            cs.pointer("/metadata/labels")
                .and_then(|l| l.get(CLUSTER_PROFILE_NAME_LABEL))
                .and_then(Value::as_str)
                .is_some_and(|p| profiles.iter().any(|w| w == p))
        })
        .cloned()
        .collect()
}

fn needs_reads(d: &Decision, world: &World) -> bool {
    d.needs_revision.is_some() || !d.needs_summaries.is_empty() || !unlisted(d, world).is_empty()
}

/// The profiles the decision would create but the pass did not list (see
/// `ownership::fetch_unlisted`).
fn unlisted(d: &Decision, world: &World) -> Vec<String> {
    d.actions
        .iter()
        .chain(&d.after_status)
        .filter_map(|a| match a {
            Action::Apply(desired) if !world.profiles.contains_key(&desired.name) => {
                Some(desired.name.clone())
            }
            _ => None,
        })
        .collect()
}

pub fn context(epoch: u32) -> Context {
    Context {
        now: at(epoch),
        default_tz: chrono_tz::Tz::UTC,
    }
}

/// The name of the one freeze the model's person creates.
pub const FREEZE: &str = "f";

pub fn person() -> Actor {
    Actor {
        by: "person".into(),
        reason: None,
        identity: Some("person".into()),
    }
}

/// A request applied by the store, answered as the API server answers it.
pub fn send(store: &mut Store, request: &Request) -> Res<Answer> {
    let (promotions, profiles) = (cluster_promotion_type(), cluster_profile_type());
    let result = match request {
        Request::MergePatchPromotion { name, patch } => {
            store.patch(&promotions, "", name, PatchType::Merge, patch, false)
        }
        Request::JsonPatchPromotion { name, patch } => {
            store.patch(&promotions, "", name, PatchType::Json, patch, false)
        }
        Request::ReplacePromotionStatus { name, body } => {
            store.update(&promotions, "", name, value(&**body)?, true)
        }
        Request::CreateProfile { body } => store.create(&profiles, "", value(&**body)?),
        Request::ReplaceProfile { name, body } => {
            store.update(&profiles, "", name, value(&**body)?, false)
        }
        Request::DeleteProfile { name, uid } => store
            .delete(
                &profiles,
                "",
                name,
                &DeleteOptions {
                    precondition_uid: uid.clone(),
                    ..Default::default()
                },
            )
            .map(|(v, _)| v),
        Request::MergePatchProfile { name, patch } => {
            store.patch(&profiles, "", name, PatchType::Merge, patch, false)
        }
        Request::StoreRevision { body } => {
            let revisions = promotion_revision_type();
            let name = body.metadata.name.clone().unwrap_or_default();
            if store.peek(&revisions, "", &name).is_some() {
                return Ok(Answer::Present);
            }
            store.create(&revisions, "", value(&**body)?)
        }
    };
    let promotion_write = matches!(
        request,
        Request::MergePatchPromotion { .. }
            | Request::JsonPatchPromotion { .. }
            | Request::ReplacePromotionStatus { .. }
    );
    Ok(match result {
        Ok(v) if promotion_write => Answer::Written(Some(Box::new(
            observe::decode(&v).map_err(|e| ModelError(format!("a written promotion: {e}")))?,
        ))),
        Ok(_) => Answer::Written(None),
        Err(e) => Answer::Refused {
            code: e.code,
            not_applied: e.code == 422 && e.message.starts_with(promoter::guard::PATCH_NOT_APPLIED),
            text: format!("{} ({})", e.message, e.code),
        },
    })
}

/// A request body as kube's client sends it (as `serde_json` encodes it).
fn value<T: serde::Serialize>(body: &T) -> Res<Value> {
    serde_json::to_value(body).map_err(|e| ModelError(format!("encoding: {e}")))
}
