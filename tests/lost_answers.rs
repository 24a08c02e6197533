//! A lost answer converges to the calm run's state. Whole rollouts (automatic, a manual approval,
//! a failed revision rolled back, a freeze and its bypass) run through the fake API server and the
//! simulated Sveltos, with notifications to a receiver on loopback; the answer of the k-th write
//! of the run (a record patch, the status, a profile, an Event, a PromotionRevision, the
//! notification outbox) is lost, after the server applied the write or before, and the following
//! passes must end where the run without a fault ends: the same status and records (times of the
//! same events, not of the passes that repaired them), the same profiles and revisions, each
//! Event once, each notification under one key.
//!
//! Times are compared as a lost answer may change them ([`compare`]): later by as much as the run
//! took longer, in the same order, and what one status write stamped at one instant still one
//! instant; a time of the pass that repaired a lost write beside the time of the event it shows
//! is a difference.
//!
//! `PROMOTER_CAMPAIGN=1` loses every write's answer, both ways, in every rollout; without it
//! (CI), a sample of each rollout: every write of the pass that ends it, its answer lost after
//! the server applied it (where a lost completion record left the status incomplete for good),
//! and its middle write lost before.

mod common;

use chrono::{DateTime, Duration, Utc};
use common::{ALL_HEALTHY, DEV_STAGING_PROD as FLEET, Env};
use promoter::annotations::{self, Run};
use promoter::api::ClusterPromotion;
use promoter::fake::webhook::WebhookReceiver;
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
use promoter::notify::Location;
use promoter::pass::{PassLimits, PassOptions, run_pass_with};
use regex::Regex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The rollouts whose every write loses its answer in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rollout {
    /// The blog's automatic rollout, dev → staging → production.
    Auto,
    /// The blog's rollout whose staging waits for an approval, given when it waits.
    Manual,
    /// A completed rollout, then a revision that fails on staging: its progress deadline passes
    /// and every reached stage rolls back (examples/rollback-on-deadline.yaml).
    RolledBack,
    /// A freeze created while dev soaks holds staging; a bypass lets the rollout through.
    FrozenBypassed,
}

impl Rollout {
    fn example(self) -> &'static str {
        match self {
            Rollout::Auto | Rollout::FrozenBypassed => "blog-kyverno-auto.yaml",
            Rollout::Manual => "blog-kyverno-manual.yaml",
            Rollout::RolledBack => "rollback-on-deadline.yaml",
        }
    }
}

/// Notifications of every transition to one webhook on `receiver`.
fn notify_to(env: &Env, receiver: &WebhookReceiver) {
    common::notification_rules(
        env,
        &format!(
            "receivers:\n- name: hook\n  type: webhook\n  url: {}\nrules:\n- receivers: [hook]\n",
            receiver.url("/hook")
        ),
    );
}

fn complete(p: &ClusterPromotion) -> bool {
    let run = p.status.as_ref().and_then(Run::of);
    run.is_some() && annotations::completed(p) == run
}

fn rolled_back(p: &ClusterPromotion) -> bool {
    annotations::rollback(p).is_some_and(|r| r.completed_at.is_some())
}

/// Whether the rollout is where it ends: complete, or (`revised`: after its new revision) rolled
/// back.
fn ended(rollout: Rollout, p: &ClusterPromotion, revised: bool) -> bool {
    match rollout {
        Rollout::RolledBack => revised && rolled_back(p),
        _ => complete(p),
    }
}

/// What a person or the world does before a pass, decided from what the promotion shows (never
/// from the tick: a run that a lost answer delayed meets the same events at the same point);
/// `done` says the person's one move (an approval, a new revision) was made.
fn world_moves(env: &mut Env, rollout: Rollout, name: &str, done: &mut bool) {
    let p = env.promotion(name).unwrap();
    let current = p.status.as_ref().and_then(|s| s.current_stage_name.clone());
    let description = current
        .as_deref()
        .and_then(|c| env.description(name, c))
        .unwrap_or_default();
    match rollout {
        Rollout::Auto => {}
        Rollout::Manual => {
            // Once: a status that still says it waits after the approval was consumed (its
            // status write lost) does not make the person approve again.
            if !*done && description.starts_with("Paused: Awaiting Manual Approval") {
                env.store_json_patch(
                    name,
                    json!([{"op": "add", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]),
                );
                *done = true;
            }
        }
        Rollout::RolledBack => {
            if !*done && complete(&p) {
                env.store_json_patch(
                    name,
                    json!([{"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "3.6.0"}]),
                );
                env.addon
                    .failing
                    .insert("staging/staging".into(), env.now());
                env.addon
                    .failing_only
                    .insert("staging/staging".into(), "3.6.0".into());
                *done = true;
            }
        }
        Rollout::FrozenBypassed => {
            let freezes = promoter::fake::promotion_freeze_type();
            let frozen = env.server.store().get(&freezes, "", "holidays").is_ok();
            if !frozen && current.as_deref() == Some("dev") && description.contains("Waiting") {
                env.server
                    .store()
                    .seed(
                        &freezes,
                        json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                            "metadata": {"name": "holidays"},
                            "spec": {"reason": "Holiday change freeze (CAB-9)"}}),
                    )
                    .unwrap();
            }
            if description.starts_with("Frozen")
                && !annotations::has(&p, annotations::FREEZE_BYPASS)
            {
                let until = promoter::api::Timestamp::new(env.now() + Duration::hours(2));
                let bypass = json!({"by": "alice", "user": "alice", "reason": "CVE hotfix",
                    "at": promoter::api::Timestamp::new(env.now()), "until": until});
                env.store_json_patch(
                    name,
                    json!([{"op": "add", "path": "/metadata/annotations/promoter.dev~1freeze-bypass",
                        "value": bypass.to_string()}]),
                );
            }
        }
    }
}

/// A run: its final state, how many writes the passes made, how many passes it took, and the
/// writes of the pass that ended the rollout (completed it, or found it rolled back).
struct Outcome {
    state: Value,
    writes: usize,
    passes: usize,
    last_writes: Vec<usize>,
}

/// One rollout, the answer of the `fault.0`-th write (1-based) of its passes lost as `fault.1`
/// says; then passes until one writes nothing.
async fn run(rollout: Rollout, fault: Option<(usize, FaultAction)>) -> Outcome {
    let mut env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    notify_to(&env, &receiver);
    let name = env.apply_example(rollout.example())[0].clone();
    if rollout == Rollout::FrozenBypassed {
        env.store_json_patch(
            &name,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"tier": "prod"}}]),
        );
    }
    // A commit that lands after its answer lands before the next pass.
    let mut settle = std::time::Duration::ZERO;
    if let Some((k, action)) = &fault {
        if let FaultAction::LateCommit(d) = action {
            settle = *d * 2;
        }
        env.server
            .inject(FaultRule::nth(RequestMatcher::writes(), *k, action.clone()));
    }
    let opts = |env: &Env| PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: Some(Location::default_location()),
    };
    let mut done = false;
    let mut passes = 0;
    let mut last_writes = Vec::new();
    loop {
        world_moves(&mut env, rollout, &name, &mut done);
        let was = ended(rollout, &env.promotion(&name).unwrap(), done);
        let before = env.server.count(|r| r.is_write());
        run_pass_with(
            &env.client,
            &ALL_HEALTHY,
            &opts(&env),
            &PassLimits::default(),
        )
        .await
        .unwrap();
        tokio::time::sleep(settle).await;
        passes += 1;
        let writes = env.server.count(|r| r.is_write());
        if !was && last_writes.is_empty() && ended(rollout, &env.promotion(&name).unwrap(), done) {
            last_writes = (before + 1..=writes).collect();
        }
        if was && writes == before {
            break;
        }
        assert!(
            passes < 150,
            "{rollout:?}, {fault:?}: no steady pass after {passes} passes: {:#?}",
            env.promotion(&name).and_then(|p| p.status)
        );
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
    }
    Outcome {
        state: final_state(&env, &name, &receiver).await,
        writes: env.server.count(|r| r.is_write()),
        passes,
        last_writes,
    }
}

/// Every RFC 3339 time in a text.
fn times() -> Regex {
    Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap()
}

/// The promotion, its profiles, revisions, Events and delivered notifications, with every time
/// replaced by its rank among the distinct times of the whole.
async fn final_state(env: &Env, name: &str, receiver: &WebhookReceiver) -> Value {
    let p = env.promotion(name).unwrap();
    // promoter's records, their JSON values parsed so that their times are compared alike.
    let records: BTreeMap<String, Value> = p
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("promoter.dev/"))
        .map(|(k, v)| {
            let mut parsed = serde_json::from_str(&v).unwrap_or(Value::String(v));
            // A digest of the rolled-back profiles' identities (their UIDs among them): whether
            // there is one, not its value.
            if let Some(kept) = parsed.get_mut("kept") {
                *kept = json!("<digest>");
            }
            (k, parsed)
        })
        .collect();
    let mut profiles: Vec<Value> = env
        .profiles()
        .into_iter()
        .map(|cp| {
            json!({"name": cp.metadata.name, "spec": cp.spec.fields, "labels": cp.metadata.labels,
                "annotations": cp.metadata.annotations,
                "owners": cp.metadata.owner_references.map(|o| o.len())})
        })
        .collect();
    profiles.sort_by_key(|v| v["name"].to_string());
    let mut events: Vec<Value> = common::events_of(env, name)
        .await
        .into_iter()
        .map(|e| json!([e.type_, e.reason, e.note]))
        .collect();
    events.sort_by_key(Value::to_string);
    // Each notification under one key: the keys of each transition, and the transitions.
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in receiver.received().iter().filter(|r| r.accepted) {
        let b = r.json();
        let what = format!("{} {} {}", b["transition"], b["stage"], b["message"]);
        keys.entry(what)
            .or_default()
            .insert(b["key"].as_str().unwrap_or_default().into());
    }
    let notifications: Vec<Value> = keys
        .into_iter()
        .map(|(what, keys)| json!([what, keys.len()]))
        .collect();
    let state = json!({
        "finalizers": p.metadata.finalizers,
        "spec": p.spec,
        "status": p.status,
        "records": records,
        "profiles": profiles,
        "revisions": env.revision_names().await,
        "events": events,
        "notifications": notifications,
    });
    state
}

/// Every time in `v`, by JSON path: a field that is a time by its path, each time in a text by
/// `#n`, its n-th, but a description's last one by its path (the time of the status write that
/// set it).
fn times_of(v: &Value, at: &str, out: &mut Vec<(String, DateTime<Utc>)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                times_of(x, &format!("{at}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                times_of(x, &format!("{at}[{i}]"), out);
            }
        }
        Value::String(text) => {
            let found: Vec<&str> = times().find_iter(text).map(|m| m.as_str()).collect();
            for (i, t) in found.iter().enumerate() {
                let written = at.ends_with(".currentStatusDescription") && i + 1 == found.len();
                let path = if written || (found.len() == 1 && t.len() == text.len()) {
                    at.to_string()
                } else {
                    format!("{at}#{i}")
                };
                let time = DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
                out.push((path, time));
            }
        }
        _ => {}
    }
}

/// `v` with every time replaced by `<t>`.
fn without_times(v: &Value) -> Value {
    serde_json::from_str(&times().replace_all(&v.to_string(), "<t>")).unwrap()
}

/// The stage entry of a time that a status write stamps, if it is one.
fn stamped_entry(path: &str) -> Option<&str> {
    [
        ".lastSuccessfulAppliedTime",
        ".lastStatusCheckTime",
        ".currentStatusDescription",
    ]
    .iter()
    .find_map(|f| path.strip_suffix(f))
    .filter(|e| e.starts_with(".status.stages["))
}

/// How the final state of a run with a lost answer differs from the calm run's, one line each.
/// The same objects, fields and texts; times may come later by as much as the run took longer
/// (a lost answer delays what follows it by a pass, and what waited for a delay waits from
/// then), never earlier, and keep their order; times a stage entry was stamped with at one
/// instant in the calm run (by one status write) are one instant here too: a time of the pass
/// that repaired a lost write beside the time of the event it shows is a difference.
fn compare(calm: &Outcome, got: &Outcome) -> Vec<String> {
    let mut out = Vec::new();
    differences(
        &without_times(&calm.state),
        &without_times(&got.state),
        "",
        &mut out,
    );
    let (mut c, mut g) = (Vec::new(), Vec::new());
    times_of(&calm.state, "", &mut c);
    times_of(&got.state, "", &mut g);
    // The times both have (a field one of them lacks is a difference above).
    let theirs: BTreeMap<String, DateTime<Utc>> = g.into_iter().collect();
    let (c, g): (Vec<_>, Vec<_>) = c
        .into_iter()
        .filter_map(|(path, a)| {
            let b = *theirs.get(&path)?;
            Some(((path.clone(), a), (path, b)))
        })
        .unzip();
    let slack = Duration::minutes(got.passes.saturating_sub(calm.passes) as i64 + 1);
    for ((path, a), (_, b)) in c.iter().zip(&g) {
        if *b < *a || *b - *a > slack {
            out.push(format!("{path}: calm {a}, got {b} (at most {slack} later)"));
        }
    }
    for i in 0..c.len() {
        for j in 0..c.len() {
            let (pi, pj) = (&c[i].0, &c[j].0);
            if c[i].1 < c[j].1 && g[i].1 > g[j].1 {
                out.push(format!(
                    "{pi} before {pj} in the calm run, after it here ({} > {})",
                    g[i].1, g[j].1
                ));
            }
            if i < j
                && c[i].1 == c[j].1
                && g[i].1 != g[j].1
                && stamped_entry(pi).is_some()
                && stamped_entry(pi) == stamped_entry(pj)
            {
                out.push(format!(
                    "{pi} and {pj} were stamped at one instant in the calm run, here at {} and {}",
                    g[i].1, g[j].1
                ));
            }
        }
    }
    out
}

fn campaign() -> bool {
    std::env::var("PROMOTER_CAMPAIGN").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The differences of two final states, one line each (the whole states are long).
fn differences(want: &Value, got: &Value, at: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
                let (x, y) = (a.get(k), b.get(k));
                differences(
                    x.unwrap_or(&Value::Null),
                    y.unwrap_or(&Value::Null),
                    &format!("{at}.{k}"),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if at == ".events" || at == ".notifications" => {
            for x in a.iter().filter(|x| !b.contains(x)) {
                out.push(format!("{at}: missing {x}"));
            }
            for y in b.iter().filter(|y| !a.contains(y)) {
                out.push(format!("{at}: extra {y}"));
            }
            if a.len() != b.len() && out.is_empty() {
                out.push(format!("{at}: {} calm, {} got", a.len(), b.len()));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}[{i}]"), out);
            }
        }
        _ if want != got => out.push(format!("{at}: calm {want}, got {got}")),
        _ => {}
    }
}

/// Loses the answer of each write of `rollout` in turn (`every`: every write, applied and not;
/// else a sample: each write of the pass that ends the rollout, applied, and the middle write of
/// the rollout, not applied), and compares each final state with the calm run's.
async fn lose_each(rollout: Rollout, every: bool) {
    let started = std::time::Instant::now();
    let calm = run(rollout, None).await;
    assert!(calm.writes > 10, "{rollout:?}: {} writes", calm.writes);
    assert!(!calm.last_writes.is_empty(), "{rollout:?}: never ended");
    let both = [FaultAction::ResetAfter, FaultAction::ResetBefore];
    let mut faults: Vec<(usize, FaultAction)> = Vec::new();
    if every {
        for k in 1..=calm.writes {
            faults.extend(both.iter().map(|a| (k, a.clone())));
        }
    } else {
        faults.extend(
            calm.last_writes
                .iter()
                .map(|&k| (k, FaultAction::ResetAfter)),
        );
        faults.push((calm.writes / 2, FaultAction::ResetBefore));
    }
    let mut failures = Vec::new();
    for (k, action) in &faults {
        let got = run(rollout, Some((*k, action.clone()))).await;
        let diff = compare(&calm, &got);
        if !diff.is_empty() {
            failures.push(format!(
                "{rollout:?}: the answer of write {k} lost ({action:?}):\n  {}",
                diff.join("\n  ")
            ));
        }
    }
    eprintln!(
        "{rollout:?}: {} writes, {} passes calm; {} runs with a lost answer in {:.0?}",
        calm.writes,
        calm.passes,
        faults.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The known case first: the answer to the record patch that records the completion is lost
/// after the server applied it (also in the automatic rollout's sample), or the server commits
/// it only after answering 504. The last
/// stage's lastSuccessfulAppliedTime was missing or the time it was found provisioned, its
/// description stamped by the next pass, and the RolloutComplete Event never recorded: the next
/// pass trusted the record and wrote nothing more (issue 45).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_the_completion_record_still_completes_the_status() {
    let calm = run(Rollout::Auto, None).await;
    // The pass that completes writes the revision, then the record patch, then the status.
    let k = calm.last_writes[1];
    let applied = campaign().then_some(FaultAction::ResetAfter);
    let late_commit = FaultAction::LateCommit(std::time::Duration::from_millis(20));
    for action in applied.into_iter().chain([late_commit]) {
        let got = run(Rollout::Auto, Some((k, action.clone()))).await;
        let diff = compare(&calm, &got);
        assert!(
            diff.is_empty(),
            "write {k}, {action:?}:\n{}",
            diff.join("\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_in_an_automatic_rollout_converges_to_the_calm_state() {
    lose_each(Rollout::Auto, campaign()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_in_a_manual_rollout_converges_to_the_calm_state() {
    lose_each(Rollout::Manual, campaign()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_in_a_rollback_converges_to_the_calm_state() {
    lose_each(Rollout::RolledBack, campaign()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_under_a_freeze_and_its_bypass_converges_to_the_calm_state() {
    lose_each(Rollout::FrozenBypassed, campaign()).await;
}
