//! Issue 26, notifications, end to end: real passes (`run_pass_with`) against the fake API server
//! and the simulated Sveltos, sending to a real HTTP receiver on loopback that records every
//! request, with faults injected on both sides (500s, slow and missing answers, connection resets
//! before and after the receiver got the request; crashes after every write of a pass, concurrent
//! passes). What must hold: every transition is delivered to every receiver, duplicates only
//! with the same idempotency key, a dead receiver holds up neither the pass past its deadline nor
//! any other promotion, and nothing older than `maxAge` is sent.
//!
//! `PROMOTER_CAMPAIGN=1` crashes after every write instead of about eight per scenario.

mod common;

use base64::Engine;
use chrono::Duration;
use common::{ALL_HEALTHY, Env};
use promoter::annotations::outbox::{self, OUTBOX};
use promoter::api::ClusterPromotion;
use promoter::fake::webhook::{Fault, Received, WebhookReceiver};
use promoter::fake::{FaultAction, FaultRule, RequestMatcher, secret_type};
use promoter::notify::Location;
use promoter::pass::{PassLimits, PassOptions, PassReport, run_pass_with};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

use common::SEED_FLEET as FLEET;

const PASS_USERS: [&str; 2] = ["pass-a", "pass-b"];
const MANUAL: &str = "kyverno-prog-rollout-man";

/// The four kinds of receiver on one loopback server, every rule sending everything; the URLs
/// and a token in the Secret (the CloudEvents one written in the ConfigMap).
fn settings(env: &Env, r: &WebhookReceiver, extra: &str) {
    let config = format!(
        "receivers:
- name: hook
  type: webhook
  urlFrom: {{key: hook-url}}
  headersFrom: {{Authorization: token}}
- name: slack
  type: slack
  urlFrom: {{key: slack-url}}
- name: teams
  type: teams
  urlFrom: {{key: teams-url}}
- name: events
  type: cloudevents
  url: {}
rules:
- receivers: [hook, slack, teams, events]
{extra}",
        r.url("/events")
    );
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    common::notification_rules(env, &config);
    env.server
        .store()
        .seed(
            &secret_type(),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "promoter-notifications", "namespace": "promoter-system"},
                "data": {"hook-url": b64(&r.url("/hook")), "slack-url": b64(&r.url("/slack")),
                         "teams-url": b64(&r.url("/teams")), "token": b64("Bearer s3cr3t")}}),
        )
        .unwrap();
}

fn options(env: &Env) -> PassOptions {
    PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: Some(Location::default_location()),
    }
}

async fn pass(env: &Env, client: &kube::Client, limits: PassLimits) -> PassReport {
    run_pass_with(client, &ALL_HEALTHY, &options(env), &limits)
        .await
        .unwrap()
}

fn outbox_of(env: &Env, name: &str) -> Vec<outbox::Entry> {
    env.promotion(name)
        .map(|p| outbox::read(&p).unwrap())
        .unwrap_or_default()
}

/// Approves the manual stage a promotion waits at, once its status says it waits, as a person
/// would (through the store: no fault applies to it).
fn approve_if_waiting(env: &Env, name: &str) {
    let Some(p) = env.promotion(name) else {
        return;
    };
    let current = p.status.as_ref().and_then(|s| s.current_stage_name.clone());
    let Some(current) = current else {
        return;
    };
    let waiting = env
        .description(name, &current)
        .is_some_and(|d| d.starts_with("Paused: Awaiting Manual Approval"));
    for (i, s) in p.spec.stages.iter().enumerate() {
        let manual = s.trigger.as_ref().and_then(|t| t.manual.as_ref());
        if waiting && current == s.name && manual.is_some_and(|m| !m.is_approved()) {
            env.store_json_patch(
                name,
                json!([{"op": "add", "path": format!("/spec/stages/{i}/trigger/manual/approved"), "value": true}]),
            );
        }
    }
}

fn complete(env: &Env, name: &str) -> bool {
    env.promotion(name).is_some_and(|p| {
        let run = p.status.as_ref().and_then(promoter::annotations::Run::of);
        run.is_some() && promoter::annotations::completed(&p) == run
    })
}

/// The webhook bodies the receiver accepted at `path`.
fn bodies(received: &[Received], path: &str) -> Vec<Value> {
    received
        .iter()
        .filter(|r| r.path == path && r.accepted)
        .map(Received::json)
        .collect()
}

/// A transition as the webhook body names it.
fn what(body: &Value) -> (String, String, String) {
    let s = |k: &str| body[k].as_str().unwrap_or_default().to_string();
    (s("transition"), s("stage"), s("message"))
}

/// Duplicates only with the same key: each transition (transition, stage, and promotion,
/// revision and message) was sent under exactly one key, and every request with a key carried
/// the same body.
fn one_key_per_transition(received: &[Received]) -> BTreeMap<(String, String, String), String> {
    let mut keys: BTreeMap<(String, String, String), String> = BTreeMap::new();
    let mut body_of: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for r in received.iter().filter(|r| r.path == "/hook") {
        let b = r.json();
        let key = b["key"].as_str().unwrap().to_string();
        assert_eq!(r.headers["idempotency-key"], key);
        let mut w = what(&b);
        // A revision has its own transitions (a second run starts stage 1 again, same text).
        w.2 = format!(
            "{} {}: {}",
            b["promotion"].as_str().unwrap(),
            b["revision"].as_str().unwrap_or_default(),
            w.2
        );
        let previous = keys.insert(w.clone(), key.clone());
        assert!(
            previous.is_none_or(|k| k == key),
            "{w:?} was sent under two keys"
        );
        let first = body_of.entry(key.clone()).or_insert_with(|| r.body.clone());
        assert_eq!(*first, r.body, "a resend of {key} changed its body");
    }
    keys
}

/// Every key in `keys` was accepted at each of `paths`, and nothing else.
fn every_key_delivered(
    received: &[Received],
    keys: &BTreeMap<(String, String, String), String>,
    paths: &[&str],
    context: &str,
) {
    let want: BTreeSet<String> = keys.values().cloned().collect();
    for path in paths {
        let delivered: BTreeSet<String> = received
            .iter()
            .filter(|r| r.path == *path && r.accepted)
            .map(|r| r.headers["idempotency-key"].clone())
            .collect();
        assert_eq!(delivered, want, "{context}: {path}");
    }
}

/// Runs a promotion to completion (approving when it waits) and on until its outbox is empty.
async fn roll_out(env: &Env, name: &str, client: &kube::Client, max: usize) -> Vec<PassReport> {
    let mut reports = Vec::new();
    for _ in 0..max {
        approve_if_waiting(env, name);
        reports.push(pass(env, client, PassLimits::default()).await);
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
        if complete(env, name) && outbox_of(env, name).is_empty() {
            return reports;
        }
    }
    panic!(
        "{name} not complete with an empty outbox after {max} passes: {:?}",
        outbox_of(env, name)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_transition_is_sent_once_to_every_kind_of_receiver() {
    let env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    settings(&env, &receiver, "");
    env.apply_example("blog-kyverno-manual.yaml");
    let reports = roll_out(&env, MANUAL, &env.client, 40).await;
    let received = receiver.received();
    let hook = bodies(&received, "/hook");
    let got: Vec<(String, String)> = hook.iter().map(|b| (what(b).0, what(b).1)).collect();
    let want: Vec<(String, String)> = [
        ("StageStarted", "dev"),
        ("StageCompleted", "dev"),
        ("StageStarted", "staging"),
        ("StageCompleted", "staging"),
        ("AwaitingApproval", "staging"),
        ("Approved", "staging"),
        ("StageStarted", "production"),
        ("StageCompleted", "production"),
        ("RolloutCompleted", "production"),
    ]
    .iter()
    .map(|(t, s)| (t.to_string(), s.to_string()))
    .collect();
    assert_eq!(got, want, "in the order they happened");
    // Every Event of a transition was notified, with its text.
    let events = common::events_of(&env, MANUAL).await;
    let notified: BTreeSet<String> = hook.iter().map(|b| what(b).2).collect();
    for e in &events {
        let reason = e.reason.as_deref().unwrap_or_default();
        if promoter::pass::notifications::transition(reason).is_some() {
            assert!(
                notified.contains(e.note.as_deref().unwrap_or_default()),
                "Event {reason} {:?} not notified",
                e.note
            );
        }
    }
    // No fault: each request once, every body the same transition under the same key.
    let keys = one_key_per_transition(&received);
    assert_eq!(keys.len(), want.len());
    assert_eq!(
        received.iter().filter(|r| r.path == "/hook").count(),
        want.len()
    );
    let key_set: BTreeSet<&String> = keys.values().collect();
    for b in &hook {
        assert_eq!(b["promotion"], MANUAL);
        assert!(b["at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(b["revision"].as_str().unwrap().len(), 10);
    }
    let hook_headers = &received.iter().find(|r| r.path == "/hook").unwrap().headers;
    assert_eq!(hook_headers["authorization"], "Bearer s3cr3t");
    // The other kinds got the same transitions, under the same keys.
    let slack = bodies(&received, "/slack");
    assert_eq!(slack.len(), want.len());
    assert!(
        slack[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("kyverno-prog-rollout-man: Provisioning stage dev")
    );
    assert_eq!(slack[0]["blocks"][0]["type"], "section");
    let teams = bodies(&received, "/teams");
    assert_eq!(teams.len(), want.len());
    assert_eq!(
        teams[0]["attachments"][0]["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let events_received: Vec<&Received> = received.iter().filter(|r| r.path == "/events").collect();
    assert_eq!(events_received.len(), want.len());
    for r in &events_received {
        assert_eq!(r.headers["content-type"], "application/cloudevents+json");
        let ce = r.json();
        assert!(key_set.contains(&ce["id"].as_str().unwrap().to_string()));
        assert_eq!(ce["source"], format!("promoter/{MANUAL}"));
        assert!(ce["type"].as_str().unwrap().starts_with("dev.promoter."));
    }
    // The pass reports what it sent; nothing is left pending.
    let sent: usize = reports.iter().map(|r| r.notifications().sent).sum();
    assert_eq!(sent, 4 * want.len());
    assert!(reports.iter().all(|r| r.notifications().failed == 0));
    assert!(outbox_of(&env, MANUAL).is_empty());
    assert!(
        !env.promotion(MANUAL)
            .unwrap()
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(OUTBOX)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_sends_are_visible_and_retried_with_the_same_key() {
    let env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    settings(&env, &receiver, "");
    env.apply_example("blog-kyverno-manual.yaml");
    receiver.inject("/hook", Fault::Status(500), Some(2));
    receiver.inject("/slack", Fault::ResetAfter, Some(1));
    receiver.inject("/teams", Fault::ResetBefore, Some(1));
    let first = pass(&env, &env.client, PassLimits::default()).await;
    let n = first.promotions[0].notifications.unwrap();
    assert_eq!((n.sent, n.failed, n.pending), (1, 3, 1), "{n:?}");
    // The failures are recorded with the entry, for status and explain.
    let entries = outbox_of(&env, MANUAL);
    assert_eq!(entries.len(), 1);
    assert!(entries[0].confirmed);
    let to = entries[0].to.as_ref().unwrap();
    assert_eq!(to.keys().collect::<Vec<_>>(), ["hook", "slack", "teams"]);
    assert_eq!(to["hook"].attempts, 1);
    assert!(
        to["hook"]
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("HTTP 500")
    );
    let text = promoter::metrics::PassMetrics::new(
        Some(&first),
        chrono::Utc::now(),
        std::time::Duration::ZERO,
        Default::default(),
        Default::default(),
    )
    .prometheus_text();
    for line in [
        "promoter_notifications_sent 1",
        "promoter_notifications_failed 3",
        "promoter_notifications_pending 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // status and explain show it, with the last error of each receiver.
    let (code, out, err) = common::promoter(&env, &["status", MANUAL, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let row: Value = serde_json::from_str(&out).unwrap();
    let pending = &row["notifications"][0];
    assert_eq!(pending["transition"], "StageStarted");
    assert_eq!(pending["key"], entries[0].key.as_str());
    assert_eq!(pending["receivers"]["hook"]["attempts"], 1);
    assert!(
        pending["receivers"]["hook"]["lastError"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 500")
    );
    assert!(
        err.contains(&format!(
            "warning: {MANUAL}: 1 notification not delivered yet (hook: HTTP 500"
        )),
        "{err}"
    );
    let (_, text, _) = common::promoter(&env, &["explain", MANUAL]);
    assert!(
        text.contains("Notifications not yet delivered (1):"),
        "{text}"
    );
    assert!(
        text.contains("    to hook: 1 attempt, last error: HTTP 500"),
        "{text}"
    );
    env.addon.reconcile(&env.server, env.now());
    env.advance(Duration::minutes(1));
    roll_out(&env, MANUAL, &env.client, 40).await;
    let received = receiver.received();
    let keys = one_key_per_transition(&received);
    // Every transition was delivered to every receiver in the end, the slack one received twice
    // (its first answer was lost) under one key.
    every_key_delivered(
        &received,
        &keys,
        &["/hook", "/slack", "/teams", "/events"],
        "",
    );
    let first_key = &entries[0].key;
    let slack_first: Vec<&Received> = received
        .iter()
        .filter(|r| r.path == "/slack" && &r.headers["idempotency-key"] == first_key)
        .collect();
    assert_eq!(slack_first.len(), 2, "sent again after the lost answer");
    assert_eq!(slack_first[0].body, slack_first[1].body);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_receiver_holds_up_neither_the_pass_nor_another_promotion() {
    let env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    // Team a's receiver never answers; team b's works.
    let config = format!(
        "receivers:
- {{name: dead, type: webhook, url: '{}', timeout: 1s}}
- {{name: alive, type: webhook, url: '{}'}}
rules:
- receivers: [dead]
  promotionSelector: {{matchLabels: {{team: a}}}}
- receivers: [alive]
  promotionSelector: {{matchLabels: {{team: b}}}}
",
        receiver.url("/dead"),
        receiver.url("/alive")
    );
    common::notification_rules(&env, &config);
    receiver.inject(
        "/dead",
        Fault::Slow(std::time::Duration::from_secs(60)),
        None,
    );
    for (name, team) in [("a", "a"), ("b", "b")] {
        let mut p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": name, "labels": {"team": team}},
            "spec": {"profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": "x", "namespace": "default"}]},
                     "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}]}
        }))
        .unwrap();
        p.metadata.namespace = None;
        env.apply_promotion(&p);
    }
    // The sends end 2 s before the pass deadline; the dead receiver's one send gives up after
    // its 1 s timeout. Room enough for a loaded machine to reach the sending.
    let deadline = std::time::Duration::from_secs(6);
    let started = std::time::Instant::now();
    let r = pass(
        &env,
        &env.client,
        PassLimits {
            deadline: Some(tokio::time::Instant::now() + deadline),
            shard: None,
        },
    )
    .await;
    let took = started.elapsed();
    assert!(
        took < deadline,
        "the pass ended within its deadline: {took:?}"
    );
    for p in &r.promotions {
        assert!(p.error.is_none() && p.deferred.is_none(), "{p:?}");
        assert!(p.actions.iter().any(|a| a == "wrote status"), "{p:?}");
    }
    let (a, b) = (&r.promotions[0], &r.promotions[1]);
    assert_eq!(a.notifications.unwrap().failed, 1, "{a:?}");
    assert_eq!(b.notifications.unwrap().sent, 1, "{b:?}");
    let alive: Vec<Value> = bodies(&receiver.received(), "/alive");
    assert_eq!(alive.len(), 1);
    assert_eq!(alive[0]["promotion"], "b");
    let entry = &outbox_of(&env, "a")[0];
    let delivery = &entry.to.as_ref().unwrap()["dead"];
    assert_eq!(delivery.attempts, 1);
    assert!(
        delivery
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("no answer within"),
        "{delivery:?}"
    );
    assert!(outbox_of(&env, "b").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_older_than_max_age_is_sent() {
    let env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    settings(&env, &receiver, "maxAge: 3m\n");
    env.apply_example("blog-kyverno-manual.yaml");
    for path in ["/hook", "/slack", "/teams", "/events"] {
        receiver.inject(path, Fault::Status(503), None);
    }
    let mut dropped = 0;
    for _ in 0..6 {
        let r = pass(&env, &env.client, PassLimits::default()).await;
        dropped += r.notifications().dropped;
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
    }
    assert!(dropped > 0, "transitions older than 3m were given up");
    receiver.clear_faults();
    receiver.clear();
    let sent_at = env.now();
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert!(r.notifications().sent > 0);
    for b in bodies(&receiver.received(), "/hook") {
        let at = chrono::DateTime::parse_from_rfc3339(b["at"].as_str().unwrap()).unwrap();
        assert!(
            sent_at - at.with_timezone(&chrono::Utc) <= Duration::minutes(3),
            "{b} sent at {sent_at}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Crashes and concurrent passes

/// What a run delivered: each transition with its key, and how many writes the passes made.
struct Delivered {
    keys: BTreeMap<(String, String, String), String>,
    writes: usize,
}

#[derive(Clone, Default)]
struct Plan {
    example: &'static str,
    faults: Vec<FaultRule>,
    receiver_faults: Vec<(Fault, usize)>,
    passes: usize,
    /// Once the rollout completed, a new revision that fails on staging: the progress deadline
    /// passes, and the promotion rolls back (examples/rollback-on-deadline.yaml's settings).
    failing_revision: bool,
}

/// One rollout under `plan`, then quiet passes until every outbox is empty. The crashed pass is
/// `pass-a`'s; the passes of a tick share its clock, as two steppers started by one schedule.
async fn scenario(plan: &Plan) -> Delivered {
    let mut env = Env::new(FLEET).await;
    let receiver = WebhookReceiver::start().await.unwrap();
    settings(&env, &receiver, "");
    let names = env.apply_example(plan.example);
    let mut clients = Vec::new();
    for u in PASS_USERS {
        clients.push(common::client_as(&env, u, 400).await);
    }
    for f in &plan.faults {
        env.server.inject(f.clone());
    }
    for (i, (fault, times)) in plan.receiver_faults.iter().enumerate() {
        let path = ["/hook", "/slack", "/teams", "/events"][i % 4];
        receiver.inject(path, fault.clone(), Some(*times));
    }
    let rolled_back = |env: &Env, n: &str| {
        env.promotion(n)
            .and_then(|p| promoter::annotations::rollback(&p))
            .is_some_and(|r| r.completed_at.is_some())
    };
    let mut revised = false;
    let done = |env: &Env, revised: bool| {
        names.iter().all(|n| {
            let finished = if plan.failing_revision {
                revised && rolled_back(env, n)
            } else {
                complete(env, n)
            };
            finished && outbox_of(env, n).is_empty()
        })
    };
    for tick in 0..120 {
        for n in &names {
            approve_if_waiting(&env, n);
        }
        if plan.failing_revision && !revised && complete(&env, &names[0]) {
            env.store_json_patch(
                &names[0],
                json!([{"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "9.9.9"}]),
            );
            env.addon
                .failing
                .insert("staging/staging".into(), env.now());
            env.addon
                .failing_only
                .insert("staging/staging".into(), "9.9.9".into());
            revised = true;
        }
        let n = plan.passes.max(1);
        futures::future::join_all(
            clients[..n]
                .iter()
                .map(|c| pass(&env, c, PassLimits::default())),
        )
        .await;
        if tick == 60 {
            // Whatever the faults were meant to do, they have done it: converge.
            env.server.clear_faults();
        }
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
        if done(&env, revised) {
            break;
        }
    }
    // Late answers land.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        done(&env, revised),
        "{}: not converged: {:?}",
        plan.example,
        names.iter().map(|n| outbox_of(&env, n)).collect::<Vec<_>>()
    );
    let received = receiver.received();
    let keys = one_key_per_transition(&received);
    // Every transition reached every receiver, under its key.
    every_key_delivered(
        &received,
        &keys,
        &["/hook", "/slack", "/teams"],
        plan.example,
    );
    Delivered {
        keys,
        writes: env
            .server
            .count(|r| r.is_write() && r.code < 300 && r.user == PASS_USERS[0]),
    }
}

fn campaign() -> bool {
    std::env::var("PROMOTER_CAMPAIGN").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The transitions delivered, their texts without times (a crash makes a pass a minute later,
/// and a deadline's text says when it fell).
fn transitions(d: &Delivered) -> BTreeSet<(String, String, String)> {
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").unwrap();
    d.keys
        .keys()
        .map(|(t, s, m)| {
            (
                t.clone(),
                s.clone(),
                time.replace_all(m, "<time>").into_owned(),
            )
        })
        .collect()
}

/// A crash after (or before) every write of a pass, in turn: every transition of the rollout is
/// still delivered, each under one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_after_any_write_lose_no_transition_and_duplicate_only_by_key() {
    for (example, failing_revision) in [
        ("blog-kyverno-manual.yaml", false),
        ("docs-payment-processor.yaml", false),
        ("rollback-on-deadline.yaml", true),
    ] {
        let plan = Plan {
            example,
            passes: 1,
            failing_revision,
            ..Default::default()
        };
        let reference = scenario(&plan).await;
        let want = transitions(&reference);
        assert!(want.len() >= 8, "{want:?}");
        let step = if campaign() {
            1
        } else {
            1 + reference.writes / 8
        };
        let mut runs = 0;
        for (i, k) in (1..=reference.writes).step_by(step).enumerate() {
            // CI: after and before the write in turn; the campaign: both at every write.
            let actions = match (campaign(), i % 2) {
                (true, _) => vec![FaultAction::ResetAfter, FaultAction::ResetBefore],
                (false, 0) => vec![FaultAction::ResetAfter],
                (false, _) => vec![FaultAction::ResetBefore],
            };
            for action in actions {
                let crashed = Plan {
                    faults: vec![FaultRule::nth(
                        RequestMatcher::writes().user(PASS_USERS[0]),
                        k,
                        action.clone(),
                    )],
                    ..plan.clone()
                };
                let got = scenario(&crashed).await;
                assert_eq!(
                    transitions(&got),
                    want,
                    "{example}: {action:?} at write {k}"
                );
                runs += 1;
            }
        }
        eprintln!(
            "{example}: {} writes, {runs} crashed runs, every transition delivered once per key",
            reference.writes
        );
    }
}

/// Two passes at once, with network faults towards the API server and a receiver that fails,
/// resets and loses answers: still every transition, duplicates only by key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_passes_and_faulty_receivers_lose_nothing() {
    let seeds = if campaign() { 20 } else { 2 };
    let want = transitions(
        &scenario(&Plan {
            example: "blog-kyverno-manual.yaml",
            passes: 1,
            ..Default::default()
        })
        .await,
    );
    for seed in 0..seeds {
        let mut faults = Vec::new();
        for (i, user) in PASS_USERS.iter().enumerate() {
            let s = seed * 31 + i as u64 * 7;
            let w = || RequestMatcher::writes().user(user);
            faults.push(FaultRule::random(
                w(),
                0.08,
                s + 1,
                FaultAction::ResetBefore,
            ));
            faults.push(FaultRule::random(w(), 0.08, s + 2, FaultAction::ResetAfter));
            faults.push(FaultRule::random(
                RequestMatcher::any().user(user),
                0.08,
                s + 3,
                FaultAction::Hang(std::time::Duration::from_millis(1 + s % 20)),
            ));
        }
        let got = scenario(&Plan {
            example: "blog-kyverno-manual.yaml",
            passes: 2,
            faults,
            receiver_faults: vec![
                (Fault::Status(500), 2),
                (Fault::ResetAfter, 2),
                (Fault::ResetBefore, 1),
                (Fault::Status(429), 1),
            ],
            failing_revision: false,
        })
        .await;
        assert_eq!(transitions(&got), want, "seed {seed}");
    }
}

/// Issue 45: with notifications off (no ConfigMap), a pass whose read of the settings failed
/// records its transitions in the outbox, unrouted, to send once the settings can be read; read
/// then, they say notifications are off, and nothing ever removed the outbox: the rollout ended
/// with an entry the calm run never had (the network campaign, seed 0x450008 at 30 %).
#[tokio::test(flavor = "multi_thread")]
async fn an_outbox_recorded_while_the_settings_could_not_be_read_is_dropped_when_they_are_off() {
    let env = Env::new(FLEET).await;
    let name = env.apply_example("blog-kyverno-auto.yaml")[0].clone();
    // Every retry of the read refused, in the first pass only.
    env.server.inject(FaultRule::after(
        RequestMatcher::verbs(&["get"]).resource("configmaps"),
        0,
        FaultAction::Status(503),
    ));
    pass(&env, &env.client, PassLimits::default()).await;
    env.server.clear_faults();
    assert!(
        !outbox_of(&env, &name).is_empty(),
        "the first pass's transitions recorded, unrouted"
    );
    for _ in 0..3 {
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
        pass(&env, &env.client, PassLimits::default()).await;
    }
    assert_eq!(outbox_of(&env, &name), []);
}
