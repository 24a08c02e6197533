//! Issue 45: whole rollouts over a faulty network, each pass the real `promoter step` process as
//! the shipped CronJob starts it, through the fault-injecting TLS proxy of `tests/net` (resets
//! before the server and mid-body, stalls past the request timeout, cut-off bodies, 500/503/429
//! with Retry-After, 504 after a commit, slow answers), with the simulated Sveltos moving between
//! passes and a clock the test controls.
//!
//! Four rollouts (automatic; a manual approval; a failure rolled back; a freeze), each calm and
//! with 10 % and 30 % of the requests faulted (seeded: the same seed meets the same faults), and
//! for each:
//!
//! * the gates held, judged after every single write by the oracle of `tests/gates.rs`
//!   (`tests/oracle`): no stage gets a revision before the stage below ran it everywhere and its
//!   delay passed, no approval reused or lost, no stage started during a freeze, a rollback in
//!   order;
//! * no write blindly sent again after the server applied it and its answer was lost (no later
//!   request with the same method, target and body; a create under the name its body gives, such
//!   as an Event named after its transition, is stored once whatever is sent again);
//! * the final state equals the calm run's, times masked (the times of the same events differ by
//!   the passes the faults cost): status, promoter's records, profiles, the Events by reason, the
//!   PromotionRevisions;
//! * passes after the rollout settled write nothing (settled as its status shows it, not only as
//!   promoter's record says: a completion recorded by a pass whose status write was lost is shown
//!   by the next pass, which is part of the rollout);
//! * every pass ends with an exit code the book documents (0, 1, 2), none by a signal.
//!
//! The binary reads the virtual clock through libfaketime (Debian's `faketime` package, which
//! `.ci/run` installs): each pass starts at the minute the test's world is at, as a CronJob's pass
//! starts at its minute. Time is scaled down in one place only: `--request-timeout 500ms` (a stall
//! costs half a second, not 30 s) and `--deadline 10s`.
//!
//! CI runs one seed per rollout and rate. `PROMOTER_CAMPAIGN=1` runs `PROMOTER_CAMPAIGN_SEEDS`
//! seeds (default 10) of each and prints the figures BENCHMARKS.md reports;
//! `PROMOTER_CAMPAIGN_TRACE=1` prints every pass's faults, report and log, to follow a seed.

mod common;
mod net;
mod oracle;

use chrono::Duration;
use common::Env;
use futures::StreamExt;
use net::{Fault, Proxy};
use oracle::{HUMAN, Oracle};
use promoter::annotations::{self, Run};
use promoter::api::ClusterPromotion;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};

const FLEET: &[(&str, &str, &str)] = common::DEV_STAGING_PROD;
/// The passes' user (the oracle tells a pass's writes from a person's by the `pass` prefix).
const PASS: &str = "pass-a";
/// Where Debian's faketime package puts the library (the thread-safe build).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
/// A rollout that has not settled after this many passes failed the campaign.
const MAX_PASSES: usize = 150;
/// Rollouts run at once (each in a world of its own).
const CONCURRENT_RUNS: usize = 4;
/// Passes after the rollout settled, which must write nothing.
const STEADY_PASSES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rollout {
    /// The blog's automatic rollout: dev, staging, production, 2 minutes of soak each.
    Auto,
    /// The blog's manual rollout: a person approves staging when it waits.
    Manual,
    /// A completed revision, then one that fails on staging: its 5-minute progress deadline
    /// passes and every reached stage is rolled back.
    RolledBack,
    /// The automatic rollout with a freeze of every promotion from its 3rd minute to its 10th.
    Frozen,
}

impl Rollout {
    fn example(self) -> &'static str {
        match self {
            Rollout::Auto | Rollout::Frozen => "blog-kyverno-auto.yaml",
            Rollout::Manual => "blog-kyverno-manual.yaml",
            Rollout::RolledBack => "rollback-on-deadline.yaml",
        }
    }
}

/// One rollout's run, and what it measured.
#[derive(Debug, Default)]
struct Outcome {
    passes: usize,
    nonzero: usize,
    longest: std::time::Duration,
    requests: usize,
    faults: usize,
    resets: usize,
    lost_answers: usize,
    final_state: Value,
    /// What broke a rule, each with the seed and pass.
    violations: Vec<String>,
}

struct World {
    env: Env,
    proxy: Proxy,
    oracle: Arc<Mutex<Oracle>>,
    human: kube::Client,
    dir: std::path::PathBuf,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl World {
    async fn new() -> World {
        let env = Env::new(FLEET).await;
        let oracle = Arc::new(Mutex::new(Oracle::default()));
        let (o, clock) = (oracle.clone(), env.now.clone());
        env.server.on_write(Arc::new(move |store, user| {
            let now = *clock.lock().unwrap();
            o.lock().unwrap().check(store, user, now);
        }));
        let proxy = Proxy::with_timing(
            &env.server.url(),
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(5),
        )
        .await;
        let dir = std::env::temp_dir().join(format!(
            "promoter-campaign-{}-{}",
            std::process::id(),
            common::rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("kubeconfig"), proxy.kubeconfig_yaml(PASS)).unwrap();
        let human = common::client_as(&env, HUMAN, 5000).await;
        World {
            env,
            proxy,
            oracle,
            human,
            dir,
        }
    }

    /// One pass: `promoter step` as the CronJob runs it, at the world's minute, through the proxy.
    async fn pass(&self, run: &mut Outcome, what: &str) {
        {
            let mut o = self.oracle.lock().unwrap();
            o.passes_began = o.writes;
        }
        self.proxy.next_epoch();
        let mut cmd = net::step_as_the_cronjob_runs_it(&self.dir.join("kubeconfig"));
        cmd.args(["--request-timeout", "500ms", "--deadline", "10s"])
            .env("LD_PRELOAD", LIBFAKETIME)
            .env(
                "FAKETIME",
                self.env.now().format("@%Y-%m-%d %H:%M:%S").to_string(),
            )
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        let started = std::time::Instant::now();
        let out = cmd.output().await.expect("promoter step runs");
        let took = started.elapsed();
        if trace() {
            let epoch = self.proxy.log();
            let faults: Vec<String> = epoch
                .iter()
                .filter(|r| r.fault.is_some() && r.epoch == epoch.last().map_or(0, |l| l.epoch))
                .map(|r| format!("{:?} {} {}", r.fault, r.method, r.target))
                .collect();
            eprintln!(
                "{what}, pass {} at {}: {:?} in {took:?}; faults: {faults:#?}\n{}{}",
                run.passes + 1,
                self.env.now(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        run.passes += 1;
        run.longest = run.longest.max(took);
        if out.status.code() != Some(0) {
            run.nonzero += 1;
        }
        if !matches!(out.status.code(), Some(0..=2)) {
            run.violations.push(format!(
                "{what}, pass {}: ended with {:?} (signal {:?}): {}",
                run.passes,
                out.status.code(),
                out.status.signal(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }

    /// Sveltos reacts (directly on the store: the oracle looks at the result too), the clock moves.
    fn world_moves(&self) {
        let now = self.env.now();
        self.env.addon.reconcile(&self.env.server, now);
        let store = self.env.server.store();
        self.oracle.lock().unwrap().check(&store, "sveltos", now);
        drop(store);
        self.env.advance(Duration::minutes(1));
    }

    fn promotion(&self, name: &str) -> ClusterPromotion {
        self.env.promotion(name).expect("the promotion")
    }

    async fn human_patch(&self, name: &str, patch: Value) {
        let api: kube::Api<ClusterPromotion> = kube::Api::all(self.human.clone());
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(p),
        )
        .await
        .expect("a person's patch");
    }

    /// A person approves every manual stage the promotion waits at, once (`approved` names the
    /// stages approved): a status that still says the stage waits after its approval was consumed
    /// (the pass's answer lost) does not make the person approve again. An approval given then
    /// would be a second one, which promoter keeps for the next revision (approving a stage that
    /// has passed approves it ahead for the next one), and the final state would differ from the
    /// calm run's by the person's doing.
    async fn approve_waiting(&self, name: &str, approved: &mut Vec<String>) {
        let p = self.promotion(name);
        let current = p.status.as_ref().and_then(|s| s.current_stage_name.clone());
        for (i, stage) in p.spec.stages.iter().enumerate() {
            let waiting = current.as_deref() == Some(stage.name.as_str())
                && stage.trigger.as_ref().is_some_and(|t| t.manual.is_some())
                && stage.manual_approval() != Some(true)
                && !approved.contains(&stage.name);
            if waiting {
                approved.push(stage.name.clone());
                self.human_patch(
                    name,
                    json!([{"op": "add", "path": format!("/spec/stages/{i}/trigger/manual/approved"), "value": true}]),
                )
                .await;
            }
        }
    }

    async fn freeze(&self, on: bool) {
        let api: kube::Api<promoter::api::PromotionFreeze> = kube::Api::all(self.human.clone());
        if on {
            let f = promoter::api::PromotionFreeze::new(
                "stop-the-line",
                promoter::api::PromotionFreezeSpec {
                    reason: "stop the line".into(),
                    promotion_selector: None,
                    start: None,
                    end: None,
                    unreadable: None,
                },
            );
            api.create(&Default::default(), &f).await.expect("a freeze");
        } else {
            api.delete("stop-the-line", &Default::default())
                .await
                .expect("the freeze deleted");
        }
    }

    /// Recorded complete: what the person of the rollback scenario waits for.
    fn complete(&self, name: &str) -> bool {
        let p = self.promotion(name);
        let run = p.status.as_ref().and_then(Run::of);
        run.is_some() && annotations::completed(&p) == run
    }

    /// Complete as the status shows it too: the last stage current and passed ("Successfully
    /// provisioned"). A completion recorded by a pass whose status write was lost is shown by the
    /// next pass; until then the rollout has not settled.
    fn shown_complete(&self, name: &str) -> bool {
        let p = self.promotion(name);
        let last = p.spec.stages.last().map(|s| s.name.clone());
        let status = p.status.unwrap_or_default();
        self.complete(name)
            && status.current_stage_name == last
            && status.stages.iter().flatten().any(|e| {
                Some(&e.name) == last.as_ref()
                    && e.last_successful_applied_time.is_some()
                    && e.current_status_description
                        .as_deref()
                        .is_some_and(|d| d.starts_with(promoter::pass::completion::PASSED))
            })
    }

    fn all_stages_at(&self, name: &str, version: &str) -> bool {
        self.promotion(name).spec.stages.iter().all(|s| {
            self.env
                .chart_version(&format!("{name}-{}", s.name))
                .as_deref()
                == Some(version)
        })
    }

    fn version(&self, name: &str) -> String {
        self.promotion(name).spec.profile_spec.unwrap().0["helmCharts"][0]["chartVersion"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Recorded rolled back, and shown so: no stage still says it rolls back or waits to.
    fn rolled_back(&self, name: &str) -> bool {
        let p = self.promotion(name);
        let run = p.status.as_ref().and_then(Run::of);
        let shown = p
            .status
            .iter()
            .flat_map(|s| s.stages.iter().flatten())
            .all(|e| {
                !e.current_status_description.as_deref().is_some_and(|d| {
                    d.starts_with(promoter::pass::phase::ROLLING_BACK)
                        || d.starts_with(promoter::pass::phase::WAITING)
                })
            });
        shown
            && annotations::rollback(&p)
                .is_some_and(|r| Some(&r.from) == run.as_ref() && r.completed_at.is_some())
    }

    fn pass_writes(&self) -> usize {
        self.env
            .server
            .count(|r| r.is_write() && r.user == PASS && r.code < 300)
    }
}

/// Times, wherever they appear in a text (RFC 3339, as the API server and promoter write them).
fn mask_times(text: &str) -> String {
    static TIME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
            .unwrap()
    });
    TIME.replace_all(text, "<time>").into_owned()
}

/// `v` with every time masked, and texts that hold JSON (promoter's records) read as JSON.
fn masked(v: &Value) -> Value {
    match v {
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) => masked(&inner),
            _ => Value::String(mask_times(s)),
        },
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), masked(v))).collect()),
        other => other.clone(),
    }
}

/// A record with the digest of the rolled-back profiles' identities (`kept`: their UIDs among
/// them) masked: the fake API server numbers UIDs in the order it creates objects, and a faulted
/// pass that created the PromotionRevision or an Event but not yet the profile shifts every later
/// number. Whether a digest is kept is compared, not its value.
fn without_identities(record: String) -> String {
    match serde_json::from_str::<Value>(&record) {
        Ok(mut v) if v.get("kept").is_some() => {
            v["kept"] = json!("<digest>");
            v.to_string()
        }
        _ => record,
    }
}

/// What a rollout ends with, times masked: the status, promoter's records, the approvals, each
/// stage's chart version, the Events by reason and type, the PromotionRevisions.
async fn final_state(w: &World, name: &str) -> Value {
    let p = w.promotion(name);
    let records: BTreeMap<String, String> = p
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("promoter.dev/"))
        .map(|(k, v)| (k, without_identities(v)))
        .collect();
    let approvals: Vec<Option<bool>> = p.spec.stages.iter().map(|s| s.manual_approval()).collect();
    let profiles: BTreeMap<String, Option<String>> = p
        .spec
        .stages
        .iter()
        .map(|s| {
            let profile = format!("{name}-{}", s.name);
            let version = w.env.chart_version(&profile);
            (profile, version)
        })
        .collect();
    let mut events: BTreeMap<String, usize> = BTreeMap::new();
    for e in common::events_of(&w.env, name).await {
        let key = format!(
            "{} {}",
            e.type_.as_deref().unwrap_or_default(),
            e.reason.as_deref().unwrap_or_default()
        );
        *events.entry(key).or_default() += 1;
    }
    masked(&json!({
        "status": serde_json::to_value(&p.status).unwrap(),
        "records": records,
        "approvals": approvals,
        "profiles": profiles,
        "events": events,
        "revisions": w.env.revision_names().await,
    }))
}

/// The differences between two final states, one line each (empty: equal).
fn differences(path: &str, calm: &Value, faulted: &Value, out: &mut Vec<String>) {
    match (calm, faulted) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                differences(&format!("{path}/{k}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}/{i}"), x, y, out);
            }
        }
        (x, y) if x != y => out.push(format!("{path}: calm {x}, faulted {y}")),
        _ => {}
    }
}

/// Runs `rollout` to its end with `rate` of the requests faulted (seeded), then the steady passes.
async fn run(rollout: Rollout, rate: f64, seed: u64) -> Outcome {
    let mut w = World::new().await;
    let mut run = Outcome::default();
    let what = format!("{rollout:?} at {:.0} %, seed {seed}", rate * 100.0);
    if rollout == Rollout::RolledBack {
        w.env
            .addon
            .failing
            .insert("staging/staging".into(), common::start_time());
        w.env
            .addon
            .failing_only
            .insert("staging/staging".into(), "9.1.0".into());
    }
    let name = w.env.apply_example(rollout.example())[0].clone();
    if rollout == Rollout::RolledBack {
        w.env.store_json_patch(
            &name,
            json!([{"op": "replace", "path": "/metadata/annotations/promoter.dev~1progress-deadline", "value": "5m"}]),
        );
    }
    let first_version = w.version(&name);
    if rate > 0.0 {
        w.proxy.set_plan(net::seeded(seed, rate, &Fault::ALL));
    }
    let mut revised = false;
    let mut approved = Vec::new();
    let mut settled = false;
    for minute in 0..MAX_PASSES {
        match rollout {
            Rollout::Manual => w.approve_waiting(&name, &mut approved).await,
            Rollout::Frozen if minute == 2 => w.freeze(true).await,
            Rollout::Frozen if minute == 9 => w.freeze(false).await,
            Rollout::RolledBack if !revised && w.complete(&name) => {
                w.human_patch(
                    &name,
                    json!([{"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "9.1.0"}]),
                )
                .await;
                revised = true;
            }
            _ => {}
        }
        w.pass(&mut run, &what).await;
        w.world_moves();
        settled = match rollout {
            Rollout::RolledBack => {
                revised && w.rolled_back(&name) && w.all_stages_at(&name, &first_version)
            }
            _ => w.shown_complete(&name) && w.all_stages_at(&name, &first_version),
        };
        if settled {
            break;
        }
    }
    if !settled {
        run.violations.push(format!(
            "{what}: not settled after {MAX_PASSES} passes: {:?}",
            w.promotion(&name).status
        ));
    }
    // Late answers land, then the steady passes: nothing to do, nothing written.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let before = w.pass_writes();
    let first_steady = w.proxy.log().last().map_or(0, |r| r.epoch) + 1;
    for _ in 0..STEADY_PASSES {
        w.pass(&mut run, &what).await;
        w.world_moves();
    }
    let steady = w.pass_writes() - before;
    if steady > 0 {
        let writes: Vec<String> = w
            .proxy
            .log()
            .iter()
            .filter(|r| r.epoch >= first_steady && r.is_write())
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.method,
                    r.target,
                    String::from_utf8_lossy(&r.body[..r.body.len().min(400)])
                )
            })
            .collect();
        run.violations.push(format!(
            "{what}: the {STEADY_PASSES} passes after it settled wrote {steady} times: {writes:#?}"
        ));
    }
    w.proxy.clear_plan();
    run.violations.extend(
        w.oracle
            .lock()
            .unwrap()
            .violations
            .iter()
            .map(|v| format!("{what}: {v}")),
    );
    let log = w.proxy.log();
    for (i, lost) in log.iter().enumerate() {
        if !lost.lost_answer_of_an_applied_write() || named_create(lost) {
            continue;
        }
        if let Some(again) = log[i + 1..]
            .iter()
            .find(|r| r.method == lost.method && r.target == lost.target && r.body == lost.body)
        {
            run.violations.push(format!(
                "{what}: {} {} sent again (epoch {}) after its answer was lost (epoch {}, {:?})",
                again.method, again.target, again.epoch, lost.epoch, lost.fault
            ));
        }
    }
    run.requests = log.len();
    run.faults = log.iter().filter(|r| r.fault.is_some()).count();
    run.resets = log
        .iter()
        .filter(|r| r.fault.is_some_and(Fault::resets))
        .count();
    run.lost_answers = log
        .iter()
        .filter(|r| r.lost_answer_of_an_applied_write())
        .count();
    run.final_state = final_state(&w, &name).await;
    // The steady passes are not part of the rollout's count.
    run.passes -= STEADY_PASSES;
    run
}

/// A create of an object under the name its body gives (an Event named after the transition it
/// announces): sent again, the API server stores it once and answers 409 AlreadyExists, so it is
/// idempotent, not a blind resend.
fn named_create(r: &net::Record) -> bool {
    r.method == "POST"
        && serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| {
            b["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
        })
}

/// `PROMOTER_CAMPAIGN_TRACE=1`: every pass's faults, report and log on stderr (to follow a seed).
fn trace() -> bool {
    std::env::var("PROMOTER_CAMPAIGN_TRACE").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn campaign() -> bool {
    std::env::var("PROMOTER_CAMPAIGN").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn seeds() -> Vec<u64> {
    let n = if campaign() {
        std::env::var("PROMOTER_CAMPAIGN_SEEDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10)
    } else {
        1
    };
    (0..n).map(|i| 0x45_0000 + i).collect()
}

/// The calm run of `rollout`, then each seed at 10 % and 30 %: every rule checked, the figures
/// printed (one line per rate).
async fn campaign_of(rollout: Rollout) {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: `apt-get install faketime` (.ci/run installs it)"
    );
    // The runs wait far more than they compute (stalls, backoffs, slow answers): several at once,
    // each its own world, proxy and clock.
    let mut runs: Vec<(f64, u64)> = vec![(0.0, 0)];
    for rate in [0.1, 0.3] {
        runs.extend(seeds().into_iter().map(|seed| (rate, seed)));
    }
    let mut done: Vec<Outcome> = futures::stream::iter(runs.clone())
        .map(|(rate, seed)| run(rollout, rate, seed))
        .buffered(CONCURRENT_RUNS)
        .collect()
        .await;
    let calm = done.remove(0);
    let mut faulted = runs[1..].iter().copied().zip(done);
    assert!(
        calm.violations.is_empty(),
        "{rollout:?}, calm: {:#?}",
        calm.violations
    );
    assert_eq!(calm.nonzero, 0, "{rollout:?}: a calm pass failed");
    let mut violations = Vec::new();
    for rate in [0.1, 0.3] {
        let mut figures = Vec::new();
        for (seed, r) in faulted
            .by_ref()
            .take(seeds().len())
            .map(|((_, seed), r)| (seed, r))
        {
            violations.extend(r.violations.iter().cloned());
            let mut diff = Vec::new();
            differences("", &calm.final_state, &r.final_state, &mut diff);
            violations.extend(diff.into_iter().map(|d| {
                format!(
                    "{rollout:?} at {:.0} %, seed {seed}: final state differs from the calm run's: {d}",
                    rate * 100.0
                )
            }));
            figures.push(r);
        }
        let n = figures.len() as f64;
        let ratio: f64 = figures
            .iter()
            .map(|r| r.passes as f64 / calm.passes as f64)
            .sum::<f64>()
            / n;
        let worst = figures
            .iter()
            .map(|r| r.passes as f64 / calm.passes as f64)
            .fold(0.0, f64::max);
        let passes: usize = figures.iter().map(|r| r.passes + STEADY_PASSES).sum();
        let nonzero: usize = figures.iter().map(|r| r.nonzero).sum();
        let longest = figures.iter().map(|r| r.longest).max().unwrap_or_default();
        let sum = |f: fn(&Outcome) -> usize| figures.iter().map(f).sum::<usize>();
        eprintln!(
            "campaign {rollout:?} {:>2.0} %: {} seeds, calm {} passes, passes to settle / calm {ratio:.2} (worst {worst:.2}), \
             non-zero exits {nonzero}/{passes} ({:.0} %), longest pass {:.2} s, requests {}, faulted {}, resets {}, lost answers {}, deaths by signal 0",
            rate * 100.0,
            figures.len(),
            calm.passes,
            100.0 * nonzero as f64 / passes.max(1) as f64,
            longest.as_secs_f64(),
            sum(|r| r.requests),
            sum(|r| r.faults),
            sum(|r| r.resets),
            sum(|r| r.lost_answers),
        );
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_rollout_over_a_faulty_network() {
    campaign_of(Rollout::Auto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_approval_over_a_faulty_network() {
    campaign_of(Rollout::Manual).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_over_a_faulty_network() {
    campaign_of(Rollout::RolledBack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_over_a_faulty_network() {
    campaign_of(Rollout::Frozen).await;
}
