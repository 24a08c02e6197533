//! Issue 14: the gates under crashes, concurrent passes and network faults, judged by a safety
//! oracle that the fake API server runs after every single write it applies (its store still
//! locked, so every intermediate state is seen):
//!
//! * no stage's profile gets a revision before the previous stage ran that revision on every
//!   selected cluster, and not before that stage's delay had passed since;
//! * no approval is reused (each pass of a manual stage uses one approval given by a person);
//! * no approval is lost (an approval given and not used is still `approved` or held as a grant);
//! * no double advance (within a run the current stage moves one stage at a time, forwards);
//! * a stage with a promotion window is passed only while the window is open, by a brute-force,
//!   minute-by-minute evaluation with another cron library (`model/src/reference.rs`), not
//!   promoter's own `window`;
//! * a pass that began after a person paused the promotion changes none of its profiles and not
//!   its current stage;
//! * a stage is recorded as having missed its progress deadline only once the deadline has passed
//!   since the oracle first saw the stage reached, and a halted miss changes no profile after it;
//! * a run a person has read as complete (the last stage current, "Successfully provisioned")
//!   never reads as waiting, awaiting, delayed or at an earlier stage again.
//!
//! CI runs a seeded, bounded set. `PROMOTER_CAMPAIGN=1` (optionally `PROMOTER_CAMPAIGN_SEEDS=n`)
//! runs a larger campaign and prints its figures.

mod common;
mod oracle;

use oracle::{HUMAN, Oracle, halted_run};

use chrono::Duration;
use common::Env;
use promoter::annotations::{self, Run};
use promoter::api::ClusterPromotion;
use promoter::fake::{FaultAction, FaultRule, RequestMatcher, Store};
use promoter::pass::{PassOptions, run_pass};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

use common::SEED_FLEET as FLEET;

const PASS_USERS: [&str; 3] = ["pass-a", "pass-b", "pass-c"];

// ---------------------------------------------------------------------------------------------
// The world

struct Lab {
    env: Env,
    oracle: Arc<Mutex<Oracle>>,
    passes: Vec<kube::Client>,
    human: kube::Client,
}

impl Lab {
    async fn new() -> Lab {
        let env = Env::new(FLEET).await;
        let oracle = Arc::new(Mutex::new(Oracle::default()));
        let (o, clock) = (oracle.clone(), env.now.clone());
        env.server
            .on_write(Arc::new(move |store: &Store, user: &str| {
                let now = *clock.lock().unwrap();
                o.lock().unwrap().check(store, user, now);
            }));
        let mut passes = Vec::new();
        for u in PASS_USERS {
            passes.push(common::client_as(&env, u, 400).await);
        }
        let human = common::client_as(&env, HUMAN, 5000).await;
        Lab {
            env,
            oracle,
            passes,
            human,
        }
    }

    async fn pass(&self, i: usize) {
        let opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: chrono_tz::Tz::UTC,
            now: self.env.now(),
            notifications: None,
        };
        let _ = run_pass(&self.passes[i], &common::ALL_HEALTHY, &opts).await;
    }

    /// The passes of a tick begin: a pause on record now was observed by each of them.
    fn passes_begin(&self) {
        let mut o = self.oracle.lock().unwrap();
        o.passes_began = o.writes;
    }

    /// `promoter pause`'s record, or `resume` removing it.
    async fn pause(&self, name: &str, paused: bool) {
        let value = paused.then(|| {
            json!({"by": HUMAN, "at": promoter::api::Timestamp::new(self.env.now()).to_string()})
                .to_string()
        });
        self.annotate(name, "promoter.dev/paused", value).await;
    }

    /// A person sets (or, with None, removes) one annotation of the promotion.
    async fn annotate(&self, name: &str, key: &str, value: Option<String>) {
        let api: kube::Api<ClusterPromotion> = kube::Api::all(self.human.clone());
        let patch = json!({"metadata": {"annotations": {key: value}}});
        let _ = api
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await;
    }

    /// Sveltos reacts (directly on the store: the oracle looks at the result too), the clock moves.
    fn world_moves(&self) {
        self.env.addon.reconcile(&self.env.server, self.env.now());
        let now = self.env.now();
        let store = self.env.server.store();
        self.oracle.lock().unwrap().check(&store, "sveltos", now);
        drop(store);
        self.env.advance(Duration::minutes(1));
    }

    async fn human_patch(&self, name: &str, patch: Value) {
        let api: kube::Api<ClusterPromotion> = kube::Api::all(self.human.clone());
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        let _ = api
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::<()>::Json(p),
            )
            .await;
    }

    async fn approve(&self, name: &str, stage: usize) {
        self.human_patch(
            name,
            json!([{"op": "add", "path": format!("/spec/stages/{stage}/trigger/manual/approved"), "value": true}]),
        )
        .await;
    }

    async fn new_revision(&self, name: &str, tag: usize) {
        self.human_patch(
            name,
            json!([{"op": "add", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": format!("9.{tag}.0")}]),
        )
        .await;
    }

    fn complete(&self, name: &str) -> bool {
        self.env.promotion(name).is_some_and(|p| {
            let run = p.status.as_ref().and_then(Run::of);
            run.is_some() && annotations::completed(&p) == run
        })
    }

    /// Every stage's profile carries the promotion's current profileSpec.
    fn all_stages_current(&self, name: &str) -> bool {
        let p = self.env.promotion(name).unwrap();
        let spec = serde_json::to_value(&p.spec.profile_spec).unwrap();
        p.spec.stages.iter().all(|s| {
            self.env
                .profile(&format!("{name}-{}", s.name))
                .is_some_and(|cp| {
                    spec.as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| cp.spec.fields.get(k) == Some(v))
                })
        })
    }

    /// The chart version of the promotion's spec.
    fn version(&self, name: &str) -> String {
        let p = self.env.promotion(name).unwrap();
        p.spec.profile_spec.unwrap().0["helmCharts"][0]["chartVersion"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The current run's rollback is recorded complete.
    fn rolled_back(&self, name: &str) -> bool {
        self.env.promotion(name).is_some_and(|p| {
            let run = p.status.as_ref().and_then(Run::of);
            annotations::rollback(&p)
                .is_some_and(|r| Some(&r.from) == run.as_ref() && r.completed_at.is_some())
        })
    }

    /// The current run missed a deadline and halted: no rollback of it, not resumed.
    fn halted(&self, name: &str) -> bool {
        self.env
            .promotion(name)
            .is_some_and(|p| halted_run(&p, p.status.as_ref().and_then(Run::of).as_ref()))
    }

    /// The current run's rollback missed its own deadline (it holds for a person).
    fn rollback_failed(&self, name: &str) -> bool {
        self.env.promotion(name).is_some_and(|p| {
            let run = p.status.as_ref().and_then(Run::of);
            annotations::rollback(&p)
                .is_some_and(|r| Some(&r.from) == run.as_ref() && r.missed.is_some())
        })
    }

    /// Every stage's profile carries this chart version.
    fn all_stages_at(&self, name: &str, version: &str) -> bool {
        let p = self.env.promotion(name).unwrap();
        p.spec.stages.iter().all(|s| {
            self.env
                .chart_version(&format!("{name}-{}", s.name))
                .as_deref()
                == Some(version)
        })
    }

    async fn freeze(&self, freeze: &str, selector: Option<(&str, &str)>) {
        let api: kube::Api<promoter::api::PromotionFreeze> = kube::Api::all(self.human.clone());
        let f = promoter::api::PromotionFreeze::new(
            freeze,
            promoter::api::PromotionFreezeSpec {
                reason: "stop the line".into(),
                promotion_selector: selector
                    .map(|(k, v)| serde_json::from_value(json!({"matchLabels": {k: v}})).unwrap()),
                start: None,
                end: None,
                unreadable: None,
            },
        );
        api.create(&Default::default(), &f).await.unwrap();
    }

    async fn unfreeze(&self, freeze: &str) {
        let api: kube::Api<promoter::api::PromotionFreeze> = kube::Api::all(self.human.clone());
        api.delete(freeze, &Default::default()).await.unwrap();
    }

    /// What `promoter freeze bypass` writes: who, why, until when.
    async fn bypass(&self, name: &str) {
        let until = promoter::api::Timestamp::new(self.env.now() + Duration::hours(4));
        let record =
            json!({"by": HUMAN, "user": HUMAN, "reason": "hotfix", "until": until.to_string()})
                .to_string();
        self.annotate(name, "promoter.dev/freeze-bypass", Some(record))
            .await;
    }

    fn violations(&self) -> Vec<String> {
        self.oracle.lock().unwrap().violations.clone()
    }
}

fn manual_stages(p: &ClusterPromotion) -> Vec<usize> {
    p.spec
        .stages
        .iter()
        .enumerate()
        .filter(|(_, s)| s.trigger.as_ref().is_some_and(|t| t.manual.is_some()))
        .map(|(i, _)| i)
        .collect()
}

/// What happens in one scenario.
#[derive(Clone, Debug, Default)]
struct Plan {
    example: &'static str,
    /// Faults on the passes' requests, injected before the first pass.
    faults: Vec<FaultRule>,
    /// Every pass dies after this many writes (a crash loop).
    crash_loop: Option<usize>,
    /// A new revision by hand at this tick.
    revision_at: Option<usize>,
    /// Concurrent passes per tick.
    passes: usize,
    /// Seeded interleaving: approvals and spec changes land mid-pass, at random moments.
    chaos: Option<u64>,
    ticks: usize,
    /// Issue 24: a cluster (`namespace/name`) whose deployments of specs containing this text fail.
    failing: Option<(&'static str, &'static str)>,
    /// The scenario ends rolled back (the revision missed its deadline), not complete.
    rolls_back: bool,
    /// A freeze of every promotion, created and deleted by a person at these ticks.
    freeze: Option<(usize, usize)>,
    /// A person bypasses the freeze for the promotion at this tick.
    bypass_at: Option<usize>,
    /// Sveltos as unkind as the real one can be (issue 30): its status a minute behind its spec,
    /// a status computed from the previous spec landing after a new one, and its clock this many
    /// seconds ahead of the API server's.
    unkind_sveltos: Option<i64>,
    /// Issue 45: Sveltos answers within the same second as a real one can: every deployment takes
    /// no time (its spec copy, `Provisioning` and `Provisioned` in the second of promoter's write),
    /// a status of the previous spec may land after a new one, and a rollback redeploys what a
    /// cluster ran before at once.
    fast_sveltos: bool,
    /// Issue 30: the freeze selects promotions labelled so (the promotion carries the label from
    /// the start), and a person relabels the promotion out of it at this tick.
    freeze_selector: Option<(&'static str, &'static str)>,
    relabel_at: Option<usize>,
    /// A person pauses the promotion and resumes it at these ticks.
    pause: Option<(usize, usize)>,
    /// The first stage's promotion window (`from`, `to`: cron, UTC).
    window: Option<(&'static str, &'static str)>,
    /// Issue 30: from the new revision on, `failing`'s cluster fails every deployment, the good
    /// revision's too: the rollback cannot finish, misses its own deadline and holds. The
    /// scenario ends there.
    rollback_fails: bool,
    /// Issue 49: the promotion's `promoter.dev/failure-budget`.
    budget: Option<&'static str>,
    /// The promotion's failure policy is `halt` (the default) instead of the example's rollback:
    /// the miss holds the run where it is. The scenario runs `HELD_TICKS` past the halt, so the
    /// oracle sees the passes that follow it.
    halts: bool,
}

/// Ticks a halted scenario goes on after the halt is recorded.
const HELD_TICKS: usize = 8;

#[derive(Debug)]
struct Outcome {
    complete: bool,
    current: bool,
    writes: usize,
    violations: Vec<String>,
    ticks: usize,
    /// A scenario that rolls back: whether the failed stage's failureMessage says it missed its
    /// deadline, and how many `ProgressDeadlineExceeded` Events there are.
    miss: Option<(bool, usize)>,
}

/// A small seeded generator.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

async fn scenario(plan: &Plan) -> Outcome {
    let mut lab = Lab::new().await;
    if let Some(skew) = plan.unkind_sveltos {
        lab.env.addon.status_lag = Duration::minutes(1);
        lab.env.addon.late_writes = true;
        lab.env.addon.clock_skew = Duration::seconds(skew);
    }
    if plan.fast_sveltos {
        lab.env.addon.default_deploy_time = Duration::zero();
        lab.env.addon.late_writes = true;
        lab.env.addon.cached_redeploys = true;
    }
    if let Some((cluster, text)) = plan.failing {
        lab.env
            .addon
            .failing
            .insert(cluster.into(), common::start_time());
        lab.env
            .addon
            .failing_only
            .insert(cluster.into(), text.into());
    }
    let names = lab.env.apply_example(plan.example);
    let name = names[0].clone();
    if let Some((k, v)) = plan.freeze_selector {
        lab.env.store_json_patch(
            &name,
            json!([{"op": "add", "path": "/metadata/labels", "value": {k: v}}]),
        );
    }
    if let Some(budget) = plan.budget {
        let op = match lab
            .env
            .promotion(&name)
            .and_then(|p| p.metadata.annotations)
        {
            Some(_) => {
                json!({"op": "add", "path": "/metadata/annotations/promoter.dev~1failure-budget", "value": budget})
            }
            None => {
                json!({"op": "add", "path": "/metadata/annotations", "value": {"promoter.dev/failure-budget": budget}})
            }
        };
        lab.env.store_json_patch(&name, json!([op]));
    }
    if plan.halts {
        lab.env.store_json_patch(
            &name,
            json!([{"op": "replace", "path": "/metadata/annotations/promoter.dev~1failure-policy", "value": "halt"}]),
        );
    }
    if let Some((from, to)) = plan.window {
        lab.env.store_json_patch(
            &name,
            json!([{"op": "add", "path": "/spec/stages/0/trigger/auto/promotionWindow", "value": {"from": from, "to": to}}]),
        );
    }
    let first_version = lab.version(&name);
    for f in &plan.faults {
        lab.env.server.inject(f.clone());
    }
    let mut rng = Rng(plan.chaos.unwrap_or(0));
    let mut revisions = 0;
    let mut tick = 0;
    let mut quiet_after_revision = plan.revision_at.is_none();
    let mut halted_at = None;
    while tick < plan.ticks {
        if let Some((from, to)) = plan.freeze {
            if tick == from {
                lab.freeze("stop-the-line", plan.freeze_selector).await;
            }
            if tick == to {
                lab.unfreeze("stop-the-line").await;
            }
        }
        if Some(tick) == plan.bypass_at {
            lab.bypass(&name).await;
        }
        if let Some((from, to)) = plan.pause {
            if tick == from {
                lab.pause(&name, true).await;
            }
            if tick == to {
                lab.pause(&name, false).await;
            }
        }
        if Some(tick) == plan.relabel_at
            && let Some((k, _)) = plan.freeze_selector
        {
            lab.human_patch(
                &name,
                json!([{"op": "add", "path": format!("/metadata/labels/{k}"), "value": "elsewhere"}]),
            )
            .await;
        }
        // A scenario that rolls back changes the spec once the first revision completed (there
        // is nothing to roll back to before that), however long crashes made it take.
        let due = if plan.rolls_back {
            revisions == 0 && plan.revision_at.is_some_and(|t| tick >= t) && lab.complete(&name)
        } else {
            Some(tick) == plan.revision_at
        };
        if due {
            revisions += 1;
            lab.new_revision(&name, revisions).await;
            quiet_after_revision = true;
            if plan.rollback_fails
                && let Some((cluster, _)) = plan.failing
            {
                lab.env.addon.failing_only.remove(cluster);
                lab.env.addon.failing.insert(cluster.into(), lab.env.now());
            }
        }
        // A person approves a manual stage whenever the promotion waits for it.
        let p = lab.env.promotion(&name).unwrap();
        let current = p.status.as_ref().and_then(|s| s.current_stage_name.clone());
        for i in manual_stages(&p) {
            let waiting = current.as_deref() == Some(p.spec.stages[i].name.as_str())
                && p.spec.stages[i].manual_approval() != Some(true);
            if waiting && plan.chaos.is_none() {
                lab.approve(&name, i).await;
            }
        }
        if let Some(k) = plan.crash_loop {
            lab.env.server.inject(FaultRule::after(
                RequestMatcher::writes().user(PASS_USERS[0]),
                k,
                FaultAction::ResetBefore,
            ));
        }
        lab.passes_begin();
        if plan.passes <= 1 && plan.chaos.is_none() {
            lab.pass(0).await;
        } else {
            // Concurrent passes, with approvals, pre-approvals and spec changes landing mid-pass.
            let chaos = async {
                if plan.chaos.is_some() {
                    for _ in 0..2 {
                        tokio::time::sleep(std::time::Duration::from_millis(rng.below(15))).await;
                        match rng.below(8) {
                            0..=4 => {
                                for i in manual_stages(&p) {
                                    lab.approve(&name, i).await;
                                }
                            }
                            5 if revisions < 3 && tick < plan.ticks / 2 => {
                                revisions += 1;
                                lab.new_revision(&name, revisions).await;
                            }
                            _ => {}
                        }
                    }
                }
            };
            let n = plan.passes.max(1);
            let passes = futures::future::join_all((0..n).map(|i| lab.pass(i)));
            tokio::join!(passes, chaos);
        }
        if plan.crash_loop.is_some() {
            // The crash-loop rule is per pass (the plan's other faults stay as they are).
            lab.env.server.clear_faults();
        }
        lab.world_moves();
        tick += 1;
        if plan.halts {
            if lab.halted(&name) {
                let since = *halted_at.get_or_insert(tick);
                if tick >= since + HELD_TICKS {
                    break;
                }
            }
        } else if plan.rollback_fails {
            if lab.rollback_failed(&name) {
                break;
            }
        } else if plan.rolls_back {
            if lab.rolled_back(&name) && lab.all_stages_at(&name, &first_version) {
                break;
            }
        } else if quiet_after_revision && lab.complete(&name) && lab.all_stages_current(&name) {
            break;
        }
    }
    // Late answers and late writes land now; then the oracle's last word.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Issue 33: one more tick of passes after the rollout completed (the oracle: a run read as
    // complete stays complete).
    if !plan.rolls_back && lab.complete(&name) {
        lab.passes_begin();
        futures::future::join_all((0..plan.passes.max(1)).map(|i| lab.pass(i))).await;
        lab.world_moves();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (complete, current) = if plan.halts {
        // Held where the miss found it: the new revision on dev and on the failing staging, the
        // good one still on production, nothing rolled back.
        let new_version = lab.version(&name);
        let at = |stage: &str| lab.env.chart_version(&format!("{name}-{stage}"));
        (
            lab.halted(&name),
            at("dev").as_ref() == Some(&new_version)
                && at("staging").as_ref() == Some(&new_version)
                && at("production") == Some(first_version.clone()),
        )
    } else if plan.rollback_fails {
        // Held for a person: staging went back (its turn came), dev never did.
        (
            lab.rollback_failed(&name),
            lab.env.chart_version(&format!("{name}-staging")) == Some(first_version.clone())
                && lab.env.chart_version(&format!("{name}-dev")) != Some(first_version.clone()),
        )
    } else if plan.rolls_back {
        (
            lab.rolled_back(&name),
            lab.all_stages_at(&name, &first_version),
        )
    } else {
        (lab.complete(&name), lab.all_stages_current(&name))
    };
    let miss = if plan.rolls_back {
        let p = lab.env.promotion(&name).unwrap();
        // The miss, or (a rollback that failed there too) the rollback's miss, then it.
        let shown = annotations::failed(&p).is_some_and(|f| {
            let miss = f.message();
            let start = promoter::bounded_text::prefix(&miss, 60);
            p.status
                .iter()
                .flat_map(|s| s.stages.iter().flatten())
                .any(|e| {
                    e.name == f.stage
                        && e.failure_message
                            .as_deref()
                            .is_some_and(|m| m.contains(start))
                })
        });
        let events = common::events_of(&lab.env, &name)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("ProgressDeadlineExceeded"))
            .count();
        Some((shown, events))
    } else {
        None
    };
    Outcome {
        miss,
        complete,
        current,
        writes: lab
            .env
            .server
            .count(|r| r.is_write() && r.code < 300 && r.user.starts_with("pass")),
        violations: lab.violations(),
        ticks: tick,
    }
}

/// Issue 49: dev's failure budget of one, its cluster dev02 failing every deployment: dev passes
/// within its budget with dev02 named in the run's record, the rollout completes, and the new
/// revision starts with the whole budget (dev02 fails it too); with a crash after every write, the
/// oracle judging the budget after each (bounded and named when a stage passes, named only while
/// failing, named until it runs the revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_budget_is_bounded_named_and_spent_per_run_under_crashes() {
    let plan = Plan {
        example: "blog-kyverno-auto.yaml",
        failing: Some(("dev/dev02", "kyverno")),
        budget: Some("dev=1"),
        revision_at: Some(12),
        ticks: 120,
        ..Default::default()
    };
    let reference = scenario(&plan).await;
    assert_safe_and_done("failure budget", &reference);
    let runs = crash_after_each_write(&plan, reference.writes, 8, "failure budget").await;
    assert!(runs > 1);
}

/// Every seed example that is meant to complete.
fn seed_examples() -> Vec<&'static str> {
    vec![
        "blog-kyverno-auto.yaml",
        "blog-kyverno-manual.yaml",
        "docs-cert-manager.yaml",
        "docs-kyverno-auto.yaml",
        "docs-kyverno-manual.yaml",
        "docs-payment-processor.yaml",
        "pr-kyverno-auto.yaml",
    ]
}

fn campaign() -> bool {
    std::env::var("PROMOTER_CAMPAIGN").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn assert_safe_and_done(what: &str, o: &Outcome) {
    assert!(o.violations.is_empty(), "{what}: {:#?}", o.violations);
    // Issue 30: the cause of a rollback reaches the status whatever write a pass died after, and
    // its Event is emitted at most once (none when the pass died between its status write and
    // its Events: documented).
    if let Some((shown, events)) = o.miss {
        assert!(
            shown && events <= 1,
            "{what}: failureMessage shows the miss: {shown}, ProgressDeadlineExceeded Events: {events}"
        );
    }
    assert!(
        o.complete && o.current,
        "{what}: not converged after {} ticks: {o:?}",
        o.ticks
    );
}

// ---------------------------------------------------------------------------------------------
// Crashes

/// Runs `plan` with the first pass crashing right after its k-th write, for k spread over the
/// `writes` of its fault-free run (CI: about `points` of them; the campaign: every one). Returns how
/// many crashed runs it made.
async fn crash_after_each_write(plan: &Plan, writes: usize, points: usize, what: &str) -> usize {
    let step = if campaign() { 1 } else { 1 + writes / points };
    let mut runs = 0;
    for k in (1..=writes).step_by(step) {
        let mut crashed = plan.clone();
        crashed.faults = vec![FaultRule::nth(
            RequestMatcher::writes().user(PASS_USERS[0]),
            k,
            FaultAction::ResetAfter,
        )];
        let o = scenario(&crashed).await;
        assert_safe_and_done(&format!("{what}, crash after write {k}"), &o);
        runs += 1;
    }
    runs
}

/// Crash after the k-th write, for every k, in every seed scenario and in the manual ones with a
/// new revision after the approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_every_write_in_every_seed_scenario() {
    let mut plans: Vec<Plan> = seed_examples()
        .into_iter()
        .map(|example| Plan {
            example,
            ticks: 80,
            ..Default::default()
        })
        .collect();
    for example in ["blog-kyverno-manual.yaml", "docs-kyverno-manual.yaml"] {
        plans.push(Plan {
            example,
            revision_at: Some(14),
            ticks: 120,
            ..Default::default()
        });
    }
    let mut runs = 0;
    for plan in &plans {
        let reference = scenario(plan).await;
        assert_safe_and_done(plan.example, &reference);
        runs += crash_after_each_write(plan, reference.writes, 8, plan.example).await;
    }
    eprintln!(
        "crash_after_every_write: {} scenarios, {runs} crashed runs, 0 violations",
        plans.len()
    );
}

/// Two crashes in one scenario, one before the write is applied and one after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_crashes_converge() {
    let plan = Plan {
        example: "blog-kyverno-manual.yaml",
        revision_at: Some(12),
        ticks: 120,
        ..Default::default()
    };
    let writes = scenario(&plan).await.writes;
    let mut rng = Rng(7);
    let rounds = if campaign() { 60 } else { 8 };
    for _ in 0..rounds {
        let a = 1 + rng.below(writes as u64) as usize;
        let b = 1 + rng.below(writes as u64) as usize;
        let mut crashed = plan.clone();
        crashed.faults = vec![
            FaultRule::nth(
                RequestMatcher::writes().user(PASS_USERS[0]),
                a,
                FaultAction::ResetAfter,
            ),
            FaultRule::nth(
                RequestMatcher::writes().user(PASS_USERS[0]),
                b,
                FaultAction::ResetBefore,
            ),
        ];
        let o = scenario(&crashed).await;
        assert_safe_and_done(&format!("crashes after write {a} and before write {b}"), &o);
    }
}

/// Every pass dies after 1, 2 or 3 writes: the rollout still completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loops_still_complete() {
    for example in ["blog-kyverno-manual.yaml", "docs-payment-processor.yaml"] {
        for k in 1..=3 {
            let o = scenario(&Plan {
                example,
                crash_loop: Some(k),
                ticks: 200,
                ..Default::default()
            })
            .await;
            assert_safe_and_done(&format!("{example}: every pass dies after {k} writes"), &o);
        }
    }
}

/// Issue 30 §3: Sveltos as unkind as the real one (its status a minute behind its spec, the
/// previous spec's `Provisioned` landing after a new spec, its clock 2 s ahead of or behind the API
/// server's), and a new revision while stage 1 still deploys the first: no stage is passed before
/// its clusters run the revision (the oracle judges by the hashes Sveltos computes for their
/// spec), every rollout completes; one of them with a crash after every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unkind_sveltos_never_lets_a_stage_pass_early() {
    let plan = |example, skew| Plan {
        example,
        revision_at: Some(2),
        ticks: 150,
        unkind_sveltos: Some(skew),
        ..Default::default()
    };
    for skew in [2, -2] {
        for example in seed_examples() {
            let o = scenario(&plan(example, skew)).await;
            assert_safe_and_done(&format!("{example}, unkind Sveltos ({skew} s)"), &o);
        }
    }
    let auto = plan("blog-kyverno-auto.yaml", 2);
    let o = scenario(&auto).await;
    let runs = crash_after_each_write(&auto, o.writes, 8, "unkind Sveltos").await;
    assert!(runs > 1);
}

/// Issue 45: a Sveltos that answers within the same second as promoter's write, forward (a new
/// revision while stage 1 deploys the first) and back (the rollback): no stage is passed before
/// its clusters run the revision (the oracle judges by the hashes Sveltos computes for their spec),
/// every rollout completes or rolls back; the rollback with a crash after every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sveltos_answering_in_the_second_of_the_write_never_lets_a_stage_pass_early() {
    let examples = if campaign() {
        seed_examples()
    } else {
        vec!["blog-kyverno-manual.yaml", "docs-payment-processor.yaml"]
    };
    for example in examples {
        let o = scenario(&Plan {
            example,
            revision_at: Some(2),
            ticks: 150,
            fast_sveltos: true,
            ..Default::default()
        })
        .await;
        assert_safe_and_done(&format!("{example}, Sveltos answering at once"), &o);
    }
    let plan = Plan {
        fast_sveltos: true,
        ..rollback_plan()
    };
    let o = scenario(&plan).await;
    assert_safe_and_done("rollback, Sveltos answering at once", &o);
    let runs =
        crash_after_each_write(&plan, o.writes, 8, "rollback, Sveltos answering at once").await;
    assert!(runs > 1);
}

// ---------------------------------------------------------------------------------------------
// Issue 24: a revision that misses its deadline rolls back; a freeze; both under crashes

/// The guarded rollout completes 3.5.2; 9.1.0 then fails on staging, misses staging's 30 m
/// deadline, and every reached stage rolls back to 3.5.2, the highest first.
fn rollback_plan() -> Plan {
    Plan {
        example: "rollback-on-deadline.yaml",
        revision_at: Some(14),
        failing: Some(("staging/staging", "9.1.0")),
        rolls_back: true,
        ticks: 120,
        ..Default::default()
    }
}

/// Crash after the k-th write of the rollback scenario, for every k (CI: about ten of them), and
/// passes that die after 1, 2 or 3 writes every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_survives_a_crash_after_every_write() {
    let plan = rollback_plan();
    let reference = scenario(&plan).await;
    assert_safe_and_done("rollback", &reference);
    let runs = crash_after_each_write(&plan, reference.writes, 10, "rollback").await;
    for k in 1..=3 {
        let o = scenario(&Plan {
            crash_loop: Some(k),
            ticks: 240,
            ..plan.clone()
        })
        .await;
        assert_safe_and_done(&format!("rollback, every pass dies after {k} writes"), &o);
    }
    eprintln!(
        "rollback: {} writes, {runs} crashed runs, 3 crash loops, 0 violations",
        reference.writes
    );
}

/// Two and three concurrent passes with network faults, through the whole rollback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_with_concurrent_passes_and_faults() {
    let seeds = if campaign() { 20 } else { 2 };
    for seed in 0..seeds {
        for passes in [2, 3] {
            let o = scenario(&Plan {
                passes,
                faults: network_faults(seed, 0.08),
                ticks: 160,
                ..rollback_plan()
            })
            .await;
            assert_safe_and_done(&format!("rollback, seed {seed}, {passes} passes"), &o);
        }
    }
}

/// Issue 30: the good revision fails on staging too; the rollback misses its own deadline (1h) and
/// holds for a person, with a crash after every write (CI: about six of them): once the miss is
/// recorded no profile changes but a repair (the oracle), and dev never goes back (its turn never
/// came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_that_cannot_finish_holds_under_crashes() {
    let plan = Plan {
        rollback_fails: true,
        ticks: 200,
        ..rollback_plan()
    };
    let reference = scenario(&plan).await;
    assert_safe_and_done("failed rollback", &reference);
    crash_after_each_write(&plan, reference.writes, 6, "failed rollback").await;
}

/// The default policy: 9.1.0 misses staging's deadline and the run halts where it is (dev and
/// staging on 9.1.0, production on 3.5.2), with a crash after every write (CI: about four of them)
/// and passes going on after the halt: no pass changes a profile after the miss (the oracle), and
/// the miss reaches the status once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_halted_miss_changes_no_profile_under_crashes() {
    let plan = Plan {
        halts: true,
        ticks: 200,
        ..rollback_plan()
    };
    let reference = scenario(&plan).await;
    assert_safe_and_done("halted miss", &reference);
    crash_after_each_write(&plan, reference.writes, 4, "halted miss").await;
}

/// A freeze from the second minute to the twentieth, with crashes: no stage starts while it holds
/// (the oracle), the rollout completes after it; a bypass lets it through early, on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freezes_hold_under_crashes_and_a_bypass_is_on_record() {
    let frozen = Plan {
        example: "blog-kyverno-auto.yaml",
        freeze: Some((2, 20)),
        ticks: 80,
        ..Default::default()
    };
    let reference = scenario(&frozen).await;
    assert_safe_and_done("freeze", &reference);
    assert!(reference.ticks > 20, "completed only after the freeze");
    let bypassed = scenario(&Plan {
        freeze: Some((2, 60)),
        bypass_at: Some(8),
        ..frozen.clone()
    })
    .await;
    assert_safe_and_done("freeze with a bypass", &bypassed);
    assert!(
        bypassed.ticks < 60,
        "the bypass let it through before the freeze ended"
    );
    crash_after_each_write(&frozen, reference.writes, 6, "freeze").await;
    // Issue 30: relabelled out of the freeze's selector while it is active, the promotion stays
    // held until the freeze ends (it used to escape at once, with no record), under crashes too.
    let relabelled = Plan {
        freeze_selector: Some(("tier", "prod")),
        relabel_at: Some(6),
        ..frozen.clone()
    };
    let o = scenario(&relabelled).await;
    assert_safe_and_done("relabelled during a freeze", &o);
    assert!(
        o.ticks > 20,
        "held until the freeze ended: {} ticks",
        o.ticks
    );
    crash_after_each_write(&relabelled, o.writes, 4, "relabelled during a freeze").await;
    let o = scenario(&Plan {
        passes: 2,
        chaos: Some(24),
        faults: network_faults(24, 0.08),
        ..frozen
    })
    .await;
    assert!(o.violations.is_empty(), "{:#?}", o.violations);
}

/// A window on the first stage and a pause mid-rollout, with crashes and with concurrent passes
/// under network faults: the first stage is passed only inside its window (judged minute by
/// minute by the reference), and no pass that began after the pause changes a profile or the
/// current stage; the rollout completes after the resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_and_pauses_hold_under_crashes() {
    let plan = Plan {
        example: "docs-kyverno-auto.yaml",
        // Open ten minutes of every half hour (the delay is 5m; the start is on the hour).
        window: Some(("20,50 * * * *", "30,0 * * * *")),
        pause: Some((16, 26)),
        revision_at: Some(30),
        ticks: 120,
        ..Default::default()
    };
    let reference = scenario(&plan).await;
    assert_safe_and_done("window and pause", &reference);
    crash_after_each_write(&plan, reference.writes, 4, "window and pause").await;
    let o = scenario(&Plan {
        passes: 2,
        faults: network_faults(31, 0.08),
        ..plan
    })
    .await;
    assert_safe_and_done("window and pause, concurrent passes with faults", &o);
}

/// A revision rolled back does not come back by a revert of the spec (a GitOps revert of the fix):
/// it waits for a person (`promoter resume` writes the retry), and then rolls out from stage 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_revision_comes_back_only_when_a_person_asks() {
    let mut lab = Lab::new().await;
    lab.env
        .addon
        .failing
        .insert("staging/staging".into(), common::start_time());
    lab.env
        .addon
        .failing_only
        .insert("staging/staging".into(), "9.1.0".into());
    let name = lab.env.apply_example("rollback-on-deadline.yaml")[0].clone();
    let mut ticks = 0;
    let mut revised = false;
    while !lab.rolled_back(&name) {
        if !revised && lab.complete(&name) {
            lab.new_revision(&name, 1).await;
            revised = true;
        }
        lab.pass(0).await;
        lab.world_moves();
        ticks += 1;
        assert!(ticks < 200, "never rolled back");
    }
    // The fix (back to 3.5.2), then the revert to the rolled-back 9.1.0.
    let bad = lab.env.promotion(&name).unwrap();
    let mut good = bad.clone();
    good.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.5.2");
    lab.env.apply_promotion(&good);
    for _ in 0..20 {
        lab.pass(0).await;
        lab.world_moves();
    }
    assert!(lab.complete(&name), "the fix rolled out");
    lab.env.apply_promotion(&bad);
    for _ in 0..20 {
        lab.pass(0).await;
        lab.world_moves();
    }
    assert_eq!(
        lab.env.chart_version(&format!("{name}-dev")).as_deref(),
        Some("3.5.2"),
        "held: nobody asked for 9.1.0 again"
    );
    let revision = promoter::hash::revision_hash(&bad);
    let retry = json!({"revision": revision, "by": HUMAN, "at": promoter::api::Timestamp::new(lab.env.now()).to_string()})
        .to_string();
    let api: kube::Api<ClusterPromotion> = kube::Api::all(lab.human.clone());
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"metadata": {"annotations": {"promoter.dev/retry": retry}}}),
        ),
    )
    .await
    .unwrap();
    for _ in 0..5 {
        lab.pass(0).await;
        lab.world_moves();
    }
    assert_eq!(
        lab.env.chart_version(&format!("{name}-dev")).as_deref(),
        Some("9.1.0"),
        "a person asked: it rolls out again"
    );
    assert!(lab.violations().is_empty(), "{:#?}", lab.violations());
}

// ---------------------------------------------------------------------------------------------
// Concurrency and network faults

fn network_faults(seed: u64, p: f64) -> Vec<FaultRule> {
    let mut out = Vec::new();
    for (i, user) in PASS_USERS.iter().enumerate() {
        let s = seed.wrapping_mul(31).wrapping_add(i as u64 * 7);
        let w = || RequestMatcher::writes().user(user);
        out.push(FaultRule::random(w(), p, s + 1, FaultAction::ResetBefore));
        out.push(FaultRule::random(w(), p, s + 2, FaultAction::ResetAfter));
        out.push(FaultRule::random(
            w(),
            p,
            s + 3,
            FaultAction::AnswerAfter(std::time::Duration::from_millis(600)),
        ));
        // Applied late: after the client's 400 ms timeout, and after what others did meanwhile.
        out.push(FaultRule::random(
            w(),
            p,
            s + 4,
            FaultAction::Hang(std::time::Duration::from_millis(450)),
        ));
        out.push(FaultRule::random(
            RequestMatcher::any().user(user),
            p,
            s + 5,
            FaultAction::Hang(std::time::Duration::from_millis(1 + s % 20)),
        ));
    }
    out
}

/// Two and three concurrent passes with seeded random delays and network faults, approvals and
/// spec changes landing mid-pass. Safety always; the rollout completes once the chaos stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_passes_with_faults_and_changes_mid_pass() {
    let seeds = if campaign() {
        std::env::var("PROMOTER_CAMPAIGN_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(40)
    } else {
        2
    };
    let (mut runs, mut interleavings) = (0, 0);
    for seed in 0..seeds {
        for (passes, example) in [
            (2, "blog-kyverno-manual.yaml"),
            (3, "docs-kyverno-manual.yaml"),
            (2, "docs-payment-processor.yaml"),
        ] {
            let o = scenario(&Plan {
                example,
                passes,
                chaos: Some(seed * 1000 + passes as u64),
                faults: network_faults(seed, 0.08),
                ticks: 40,
                ..Default::default()
            })
            .await;
            assert!(
                o.violations.is_empty(),
                "seed {seed}, {passes} passes, {example}: {:#?}",
                o.violations
            );
            runs += 1;
            interleavings += o.ticks;
        }
    }
    eprintln!(
        "concurrent campaign: {runs} runs, {interleavings} rounds of concurrent passes, 0 violations"
    );
}

// ---------------------------------------------------------------------------------------------
// Targeted races (problems 1, 2, 6, 9 of issue 14)

async fn at_staging_awaiting_approval(lab: &Lab, name: &str) {
    for _ in 0..40 {
        lab.pass(0).await;
        lab.world_moves();
        let p = lab.env.promotion(name).unwrap();
        let s = p.status.unwrap_or_default();
        if s.current_stage_name.as_deref() == Some("staging")
            && s.stages.iter().flatten().any(|x| {
                x.name == "staging"
                    && x.current_status_description
                        .as_deref()
                        .is_some_and(|d| d.starts_with("Paused: Awaiting Manual Approval"))
            })
        {
            return;
        }
    }
    panic!("never waited at staging");
}

/// Problem 2: a slower pass that observed before a faster one consumed the approval cannot remove
/// the approval a person gives for the next revision meanwhile.
#[tokio::test]
async fn issue14_p2_a_late_pass_does_not_remove_a_fresh_approval() {
    let lab = Lab::new().await;
    let name = "kyverno-prog-rollout-man";
    lab.env.apply_example("blog-kyverno-manual.yaml");
    at_staging_awaiting_approval(&lab, name).await;
    lab.approve(name, 1).await;
    // The slow pass: its writes are held until the fast pass, a new revision and its approval are
    // done.
    lab.env.server.inject(FaultRule::after(
        RequestMatcher::writes().user(PASS_USERS[1]),
        0,
        FaultAction::Hang(std::time::Duration::from_millis(300)),
    ));
    let slow = lab.pass(1);
    let rest = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        lab.pass(0).await; // promotes staging -> production
        lab.new_revision(name, 1).await;
        lab.approve(name, 1).await; // pre-approval for the new revision
    };
    tokio::join!(slow, rest);
    lab.env.server.clear_faults();
    let p = lab.env.promotion(name).unwrap();
    assert_eq!(
        p.spec.stages[1].manual_approval(),
        Some(true),
        "the fresh approval survived"
    );
    assert!(lab.violations().is_empty(), "{:#?}", lab.violations());
}

/// Problem 6: the approval is revoked while the pass evaluates its gates: the pass's guarded write
/// is refused and production never receives the profile.
#[tokio::test]
async fn issue14_p6_revoked_mid_pass_means_nothing_reaches_production() {
    let lab = Lab::new().await;
    let name = "kyverno-prog-rollout-man";
    lab.env.apply_example("blog-kyverno-manual.yaml");
    at_staging_awaiting_approval(&lab, name).await;
    lab.approve(name, 1).await;
    // The pass's first write waits, as if its health checks took long; meanwhile the person
    // revokes the approval.
    lab.env.server.inject(FaultRule::nth(
        RequestMatcher::writes().user(PASS_USERS[0]),
        1,
        FaultAction::Hang(std::time::Duration::from_millis(200)),
    ));
    let revoke = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        lab.human_patch(
            name,
            json!([{"op": "remove", "path": "/spec/stages/1/trigger/manual/approved"}]),
        )
        .await;
    };
    tokio::join!(lab.pass(0), revoke);
    lab.env.server.clear_faults();
    assert!(
        lab.env.profile(&format!("{name}-production")).is_none(),
        "production got the profile of a revoked approval"
    );
    assert_eq!(
        lab.env.current_stage(name).as_deref(),
        Some("staging"),
        "nothing recorded"
    );
    assert!(lab.violations().is_empty(), "{:#?}", lab.violations());
}

/// Problem 1, end to end: the pass promoting past staging is killed right after its status write;
/// the next revision must wait for a new approval at staging.
#[tokio::test]
async fn issue14_p1_killed_after_the_status_write_the_approval_is_not_reused() {
    let name = "kyverno-prog-rollout-man";
    // Which of the promoting pass's writes is the status write (the pass is deterministic).
    let probe = Lab::new().await;
    probe.env.apply_example("blog-kyverno-manual.yaml");
    at_staging_awaiting_approval(&probe, name).await;
    probe.approve(name, 1).await;
    probe.env.server.clear_requests();
    probe.pass(0).await;
    let writes: Vec<_> = probe
        .env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.is_write() && r.user == PASS_USERS[0])
        .collect();
    let k = 1 + writes
        .iter()
        .position(|r| r.subresource.as_deref() == Some("status"))
        .unwrap();

    let lab = Lab::new().await;
    lab.env.apply_example("blog-kyverno-manual.yaml");
    at_staging_awaiting_approval(&lab, name).await;
    lab.approve(name, 1).await;
    lab.env.server.inject(FaultRule::after(
        RequestMatcher::writes().user(PASS_USERS[0]),
        k,
        FaultAction::ResetBefore,
    ));
    lab.pass(0).await;
    lab.env.server.clear_faults();
    assert_eq!(lab.env.current_stage(name).as_deref(), Some("production"));
    lab.new_revision(name, 1).await;
    for _ in 0..40 {
        lab.pass(0).await;
        lab.world_moves();
    }
    assert_eq!(lab.env.current_stage(name).as_deref(), Some("staging"));
    assert_ne!(
        lab.env
            .chart_version(&format!("{name}-production"))
            .as_deref(),
        Some("9.1.0"),
        "the new revision reached production without an approval"
    );
    assert!(lab.violations().is_empty(), "{:#?}", lab.violations());
}

/// Problem 9: a slower pass that finds the finalizer already removed (the promotion gone) is not
/// an error.
#[tokio::test]
async fn issue14_p9_finalizer_already_removed_is_not_an_error() {
    let lab = Lab::new().await;
    let name = "kyverno-rollout-auto";
    lab.env.apply_example("blog-kyverno-auto.yaml");
    for _ in 0..3 {
        lab.pass(0).await;
        lab.world_moves();
    }
    let api: kube::Api<ClusterPromotion> = kube::Api::all(lab.human.clone());
    api.delete(name, &Default::default()).await.unwrap();
    while !lab.env.profiles().is_empty() {
        lab.pass(0).await;
        lab.world_moves();
    }
    assert!(lab.env.promotion(name).is_some());
    // The next pass removes the finalizer; the slow one observed first and writes last.
    lab.env.server.inject(FaultRule::nth(
        RequestMatcher::writes().user(PASS_USERS[1]),
        1,
        FaultAction::Hang(std::time::Duration::from_millis(200)),
    ));
    let opts = PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: lab.env.now(),
        notifications: None,
    };
    let slow = run_pass(&lab.passes[1], &common::ALL_HEALTHY, &opts);
    let fast = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        lab.pass(0).await;
    };
    let (report, ()) = tokio::join!(slow, fast);
    let report = report.unwrap();
    assert!(lab.env.promotion(name).is_none());
    assert_eq!(report.errors(), 0, "{report:?}");
}
