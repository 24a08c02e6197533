//! Issue 18: Kubernetes Events for every transition of a pass and every action of a person, as a
//! real API server stores and serves them, through kube's client against the fake API server.

mod common;

use chrono::Duration;
use common::{Env, Scripted, events_of};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
use promoter::ops::control::{Actor, approve, set_paused};
use promoter::ops::identity::{recorded_by, whoami};
use promoter::pass::HealthVerdict;
use std::sync::Mutex;

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("staging", "staging01", "staging"),
    ("prod", "prod01", "prod"),
];

fn reasons(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.reason.as_deref().unwrap())
        .collect()
}

/// What `alice` (authenticated by the API server) does, with her reason.
async fn actor(env: &Env, user: &str, reason: &str) -> (kube::Client, Actor) {
    let client = env.server.client_as(user).await.unwrap();
    let who = whoami(&client).await;
    let actor = Actor::new(&recorded_by(who.as_deref(), None), Some(reason)).unwrap();
    (client, actor)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_transition_and_every_action_is_one_event() {
    let env = Env::new(FLEET).await;
    let name = "kyverno-prog-rollout-man";
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..12 {
        env.tick().await;
    }
    let events = events_of(&env, name).await;
    assert_eq!(
        reasons(&events),
        [
            "StageProvisioning",
            "StageProvisioned",
            "StageProvisioning",
            "StageProvisioned",
            "AwaitingApproval"
        ]
    );
    let notes: Vec<&str> = events.iter().map(|e| e.note.as_deref().unwrap()).collect();
    assert_eq!(
        notes,
        [
            "Provisioning stage dev",
            "Stage dev provisioned",
            "Provisioning stage staging",
            "Stage staging provisioned",
            "Stage staging awaits manual approval"
        ],
        "upstream's texts"
    );
    // Quiet: passes that change nothing record nothing.
    for _ in 0..3 {
        env.tick().await;
    }
    assert_eq!(events_of(&env, name).await.len(), 5);

    let (alice, by_alice) = actor(&env, "alice", "CAB-42 signed off").await;
    approve(&alice, name, None, &by_alice, env.now())
        .await
        .unwrap();
    let p = env.promotion(name).unwrap();
    let revision = p
        .status
        .as_ref()
        .unwrap()
        .profile_spec_hash
        .clone()
        .unwrap();
    let record = &p.metadata.annotations.as_ref().unwrap()["promoter.dev/approval.staging"];
    assert!(
        record.contains(r#""by":"alice""#) && record.contains(r#""reason":"CAB-42 signed off""#),
        "{record}"
    );
    let (bob, by_bob) = actor(&env, "bob", "change freeze").await;
    set_paused(&bob, name, true, &by_bob, env.now())
        .await
        .unwrap();
    let record = &env.promotion(name).unwrap().metadata.annotations.unwrap()["promoter.dev/paused"];
    assert!(record.contains(r#""reason":"change freeze""#), "{record}");
    // Pausing again changes nothing and records nothing.
    let again = set_paused(&bob, name, true, &by_bob, env.now())
        .await
        .unwrap();
    assert!(again.starts_with(&format!("{name} is already paused by bob since ")));
    for _ in 0..3 {
        env.tick().await;
    }
    assert_eq!(env.current_stage(name).as_deref(), Some("staging"));
    let (carol, by_carol) = actor(&env, "carol", "freeze over").await;
    set_paused(&carol, name, false, &by_carol, env.now())
        .await
        .unwrap();
    for _ in 0..10 {
        env.tick().await;
    }
    let events = events_of(&env, name).await;
    assert_eq!(
        reasons(&events[5..]),
        [
            "Approved",
            "Paused",
            "Resumed",
            "StageProvisioning",
            "StageProvisioned",
            "RolloutComplete"
        ]
    );
    let note = |i: usize| events[i].note.clone().unwrap();
    assert_eq!(
        note(5),
        format!(
            "Stage staging approved by alice for revision {}: CAB-42 signed off",
            promoter::api::revision_id(&revision)
        )
    );
    assert_eq!(note(6), "Paused by bob: change freeze");
    assert!(
        note(7).starts_with("Resumed by carol (paused by bob since ")
            && note(7).ends_with("): freeze over"),
        "{}",
        note(7)
    );
    assert_eq!(
        note(10),
        "ClusterPromotion kyverno-prog-rollout-man complete: stage production provisioned"
    );
    let uid = env.promotion(name).unwrap().metadata.uid;
    for e in &events {
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(
            e.reporting_controller.as_deref(),
            Some("promoter.dev/promoter")
        );
        let regarding = e.regarding.as_ref().unwrap();
        assert_eq!(regarding.kind.as_deref(), Some("ClusterPromotion"));
        assert_eq!(regarding.uid, uid);
        assert!(e.event_time.is_some());
    }
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e.action.as_deref().unwrap())
        .collect();
    assert_eq!(&actions[5..8], ["Approve", "Pause", "Resume"]);
    assert!(actions[..5].iter().all(|a| *a == "ClusterPromotion"));
    // Who wrote them: the pass, and each person as themselves.
    let creators: Vec<String> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events" && r.verb == "create")
        .map(|r| r.user)
        .collect();
    assert!(creators.iter().any(|u| u == "alice") && creators.iter().any(|u| u == "carol"));
    for _ in 0..3 {
        env.tick().await;
    }
    assert_eq!(
        events_of(&env, name).await.len(),
        events.len(),
        "quiet once complete"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_checks_and_their_recovery_are_one_event_each() {
    let env = Env::new(FLEET).await;
    let name = "cert-manager-rollout-auto";
    env.apply_example("docs-cert-manager.yaml");
    let checks = Scripted(Mutex::new(HealthVerdict::Failing(
        "cluster dev/dev01: check cert-manager-resources-health: Missing Secret".into(),
    )));
    let tick = || async {
        env.pass_with(&checks).await;
        env.addon.reconcile(&env.server, env.now());
        env.advance(Duration::minutes(1));
    };
    for _ in 0..8 {
        tick().await;
    }
    let events = events_of(&env, name).await;
    assert_eq!(
        reasons(&events),
        ["StageProvisioning", "StageProvisioned", "ChecksFailing"]
    );
    assert_eq!(events[2].type_.as_deref(), Some("Warning"));
    assert!(
        events[2]
            .note
            .as_deref()
            .unwrap()
            .ends_with("Missing Secret")
    );
    *checks.0.lock().unwrap() = HealthVerdict::Passed;
    tick().await;
    let events = events_of(&env, name).await;
    assert_eq!(
        reasons(&events[3..]),
        ["ChecksPassing", "StageProvisioning"]
    );
    assert_eq!(
        events[3].note.as_deref(),
        Some("Stage dev: health checks pass again")
    );
}

/// Issue 14 (d): `pause` and `resume` are JSON patches guarded by the resourceVersion they read, and
/// retried when the promotion changed in between; a pause recorded concurrently is never
/// overwritten, and a concurrent write is kept.
#[tokio::test(flavor = "multi_thread")]
async fn pause_and_resume_are_guarded_against_a_concurrent_write() {
    let env = Env::new(FLEET).await;
    let name = "kyverno-prog-rollout-man";
    env.apply_example("blog-kyverno-manual.yaml");
    env.tick().await;
    let (alice, by_alice) = actor(&env, "alice", "release freeze").await;
    let patches = |env: &Env| {
        env.server
            .count(|r| r.resource == "clusterpromotions" && r.verb == "patch" && r.user == "alice")
    };
    // Alice's PATCH is held after her read; meanwhile bob pauses (with kubectl, say).
    let held = || {
        FaultRule::nth(
            RequestMatcher::verbs(&["patch"])
                .resource("clusterpromotions")
                .user("alice"),
            1,
            FaultAction::Hang(std::time::Duration::from_millis(400)),
        )
    };
    env.server.inject(held());
    let pausing = tokio::spawn({
        let (alice, by_alice, now) = (alice.clone(), by_alice.clone(), env.now());
        async move { set_paused(&alice, name, true, &by_alice, now).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let bob = r#"{"by":"bob","at":"2026-02-16T06:00:30Z","reason":"incident 7"}"#;
    env.store_json_patch(
        name,
        serde_json::json!([{"op": "add", "path": "/metadata/annotations", "value": {"promoter.dev/paused": bob}}]),
    );
    let out = pausing.await.unwrap().unwrap();
    assert_eq!(
        out,
        format!("{name} is already paused by bob since 2026-02-16T06:00:30Z")
    );
    let annotations = env.promotion(name).unwrap().metadata.annotations.unwrap();
    assert_eq!(
        annotations["promoter.dev/paused"], bob,
        "bob's pause is kept"
    );
    assert_eq!(
        patches(&env),
        1,
        "the held patch was refused, and not retried blindly"
    );

    // Resume: a label added concurrently is kept, and the pause is gone after one retry.
    env.server.clear_faults();
    env.server.inject(held());
    let resuming = tokio::spawn({
        let (alice, by_alice, now) = (alice.clone(), by_alice.clone(), env.now());
        async move { set_paused(&alice, name, false, &by_alice, now).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    env.store_json_patch(
        name,
        serde_json::json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "platform"}}]),
    );
    let said = resuming.await.unwrap().unwrap();
    assert!(
        said.starts_with(&format!("resumed {name}: paused by ")),
        "resume says whose pause it lifted: {said}"
    );
    let p = env.promotion(name).unwrap();
    assert!(
        !p.metadata
            .annotations
            .unwrap()
            .contains_key("promoter.dev/paused")
    );
    assert_eq!(p.metadata.labels.unwrap()["team"], "platform");
    assert_eq!(patches(&env), 3);
    let events = events_of(&env, name).await;
    assert_eq!(events.last().unwrap().reason.as_deref(), Some("Resumed"));
    assert_eq!(
        events.last().unwrap().note.as_deref(),
        Some("Resumed by alice (paused by bob since 2026-02-16T06:00:30Z): release freeze")
    );
    assert!(
        !reasons(&events).contains(&"Paused"),
        "nothing was paused by alice"
    );
}

/// `--reason` through the binary: recorded in the annotation and the Event; a reason too long to
/// record is refused before anything is written.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_records_the_reason() {
    let env = Env::new(FLEET).await;
    let name = "kyverno-prog-rollout-man";
    env.apply_example("blog-kyverno-manual.yaml");
    env.tick().await;
    let long = "x".repeat(513);
    let (code, _, err) = common::promoter(&env, &["pause", name, "--reason", &long]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--reason is 513 bytes long"), "{err}");
    assert!(env.promotion(name).unwrap().metadata.annotations.is_none());
    let (code, out, err) = common::promoter(
        &env,
        &[
            "pause",
            name,
            "--reason",
            "INC-7: kyverno webhook timeouts",
            "--by",
            "on-call",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("paused {name}")), "{out}");
    let record = &env.promotion(name).unwrap().metadata.annotations.unwrap()["promoter.dev/paused"];
    assert!(
        record.contains(r#""by":"admin (on-call)""#)
            && record.contains(r#""reason":"INC-7: kyverno webhook timeouts""#),
        "{record}"
    );
    let (code, _, err) = common::promoter(&env, &["resume", name, "--reason", "fixed"]);
    assert_eq!(code, 0, "{err}");
    let events = events_of(&env, name).await;
    let notes: Vec<&str> = events
        .iter()
        .filter(|e| e.action.as_deref() != Some("ClusterPromotion"))
        .map(|e| e.note.as_deref().unwrap())
        .collect();
    assert_eq!(
        notes[0],
        "Paused by admin (on-call): INC-7: kyverno webhook timeouts"
    );
    assert!(
        notes[1].starts_with("Resumed by admin (paused by admin (on-call) since ")
            && notes[1].ends_with("): fixed"),
        "{notes:?}"
    );
}

/// What `kubectl describe clusterpromotion NAME` and `kubectl get events --field-selector
/// involvedObject.name=NAME` read: core/v1 Events, although promoter writes events.k8s.io/v1 ones
/// (one resource on a real API server).
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_describe_and_get_events_show_promoters_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    let env = Env::new(FLEET).await;
    let name = "kyverno-prog-rollout-man";
    env.apply_example("blog-kyverno-manual.yaml");
    env.apply_example("blog-kyverno-auto.yaml");
    for _ in 0..12 {
        env.tick().await;
    }
    let (alice, by_alice) = actor(&env, "alice", "CAB-42").await;
    approve(&alice, name, None, &by_alice, env.now())
        .await
        .unwrap();
    let uid = env.promotion(name).unwrap().metadata.uid.unwrap();
    let written = events_of(&env, name).await;
    assert_eq!(written.len(), 6);

    // kubectl describe: client-go's `Events("").Search`, in every namespace since the object is
    // cluster-scoped: GET /api/v1/events?fieldSelector=involvedObject.kind=…,involvedObject.name=…,
    // involvedObject.namespace=,involvedObject.uid=…
    let all: Api<CoreEvent> = Api::all(env.client.clone());
    let selector = format!(
        "involvedObject.kind=ClusterPromotion,involvedObject.name={name},involvedObject.namespace=,involvedObject.uid={uid}"
    );
    let mut described = all
        .list(&ListParams::default().fields(&selector).limit(500))
        .await
        .unwrap()
        .items;
    described.sort_by_key(|e| {
        e.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    assert_eq!(described.len(), written.len());
    for (core, ev) in described.iter().zip(&written) {
        assert_eq!(core.metadata.name, ev.metadata.name);
        assert_eq!(core.involved_object.name.as_deref(), Some(name));
        assert_eq!(
            core.involved_object.kind.as_deref(),
            Some("ClusterPromotion")
        );
        assert_eq!(core.involved_object.uid.as_deref(), Some(uid.as_str()));
        assert_eq!(core.message, ev.note, "note → message");
        assert_eq!(core.reason, ev.reason);
        assert_eq!(core.type_, ev.type_);
        assert_eq!(core.action, ev.action);
        assert_eq!(
            core.event_time, ev.event_time,
            "describe's AGE when firstTimestamp is unset"
        );
        assert!(core.first_timestamp.is_none() && core.count.is_none());
        assert_eq!(
            core.reporting_component.as_deref(),
            Some("promoter.dev/promoter"),
            "describe's FROM"
        );
    }
    assert_eq!(
        described[0].message.as_deref(),
        Some("Provisioning stage dev")
    );
    assert_eq!(described[5].reason.as_deref(), Some("Approved"));

    // kubectl get events --field-selector involvedObject.name=NAME (namespace default).
    let default: Api<CoreEvent> = Api::namespaced(env.client.clone(), "default");
    let got = default
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items;
    assert_eq!(got.len(), written.len(), "only this promotion's");
    let everything = default.list(&ListParams::default()).await.unwrap().items;
    assert!(
        everything.len() > got.len(),
        "the other promotion has Events too"
    );
    let by_reason = |s: &str| {
        let api = default.clone();
        let s = s.to_string();
        async move {
            api.list(&ListParams::default().fields(&s))
                .await
                .unwrap()
                .items
                .len()
        }
    };
    assert_eq!(
        by_reason(&format!(
            "involvedObject.name={name},reason=StageProvisioning"
        ))
        .await,
        2
    );
    assert_eq!(
        by_reason(&format!("involvedObject.name=={name},type!=Normal")).await,
        0
    );
    assert_eq!(
        by_reason("source=promoter.dev/promoter").await,
        everything.len()
    );
    assert_eq!(by_reason("involvedObject.uid=nope").await, 0);
    // The events.k8s.io/v1 spellings, on that API only.
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let n = events
        .list(&ListParams::default().fields(&format!(
            "regarding.name={name},reportingController=promoter.dev/promoter"
        )))
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(n, written.len());
    for (api_err, label) in [
        (
            events
                .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
                .await
                .unwrap_err(),
            "involvedObject.name",
        ),
        (
            default
                .list(&ListParams::default().fields("note=x"))
                .await
                .unwrap_err(),
            "note",
        ),
    ] {
        match api_err {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 400);
                assert_eq!(s.message, format!("field label not supported: {label}"));
            }
            e => panic!("{e}"),
        }
    }
}

/// An Event written through core/v1 (client-go's legacy recorder, kubectl) is read through
/// events.k8s.io/v1 with its fields mapped, and is one object: deleting it through either API
/// deletes it.
#[tokio::test]
async fn a_core_event_is_an_events_api_event() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource};
    let env = Env::new(&[]).await;
    let core: Api<CoreEvent> = Api::namespaced(env.client.clone(), "default");
    let created = core
        .create(
            &Default::default(),
            &CoreEvent {
                metadata: kube::core::ObjectMeta {
                    name: Some("p.1".into()),
                    ..Default::default()
                },
                source: Some(EventSource {
                    component: Some("addon-controller".into()),
                    host: None,
                }),
                count: Some(3),
                ..common::sveltos_event("Stage dev provisioned")
            },
        )
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let e = events.get("p.1").await.unwrap();
    assert_eq!(e.regarding.unwrap().name.as_deref(), Some("p"));
    assert_eq!(e.note.as_deref(), Some("Stage dev provisioned"));
    assert_eq!(e.deprecated_count, Some(3));
    assert_eq!(
        e.deprecated_source.unwrap().component.as_deref(),
        Some("addon-controller")
    );
    assert_eq!(
        e.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(
        core.list(&ListParams::default().fields("source=addon-controller"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    events.delete("p.1", &Default::default()).await.unwrap();
    assert!(
        core.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
