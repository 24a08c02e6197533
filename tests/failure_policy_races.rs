//! Issue 24 against races and the commands' edges (found by an independent review; each failed on
//! the code as reviewed): a concurrent pass whose view predates a rollback never undoes it
//! (the book's invariants: "while a rollback of the current run is recorded, no profile changes to anything but
//! the revision rolled back to"); a rollback whose stored revision is gone is redirected as the
//! status says; `promoter resume` after an abort continues the rollback.

mod common;

use common::{DEV_STAGING_PROD, Env, completed_before_a_break};
use promoter::annotations::{self, Cause, ROLLBACK, Rollback, Run};
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
use promoter::pass::{ChecksNotEvaluated, PassOptions, run_pass};
use promoter::settings::RollbackOrder;
use serde_json::json;
use std::sync::{Arc, Mutex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_concurrent_pass_never_undoes_a_rollback() {
    let mut env = Env::new(DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let good = Run::of(env.promotion(&name).unwrap().status.as_ref().unwrap())
        .unwrap()
        .revision;
    // 3.6.0 reaches staging, whose cluster never deploys it.
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    for _ in 0..20 {
        env.tick().await;
        if env.chart_version(&format!("{name}-staging")).as_deref() == Some("3.6.0") {
            break;
        }
    }
    assert_eq!(
        env.chart_version(&format!("{name}-staging")).as_deref(),
        Some("3.6.0")
    );
    let run = Run::of(env.promotion(&name).unwrap().status.as_ref().unwrap()).unwrap();

    // The oracle: while a rollback of the current run is recorded, staging only changes to 3.5.2.
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let (v, n) = (violations.clone(), name.clone());
    let last = Arc::new(Mutex::new(Some("3.6.0".to_string())));
    env.server.on_write(Arc::new(move |store, user| {
        let Ok(pv) = store.get(&promoter::fake::cluster_promotion_type(), "", &n) else {
            return;
        };
        let p: promoter::api::ClusterPromotion = serde_json::from_value(pv).unwrap();
        let version = store
            .get(
                &promoter::fake::cluster_profile_type(),
                "",
                &format!("{n}-staging"),
            )
            .ok()
            .and_then(|cp| {
                cp["spec"]["helmCharts"][0]["chartVersion"]
                    .as_str()
                    .map(String::from)
            });
        let mut last = last.lock().unwrap();
        let run = p.status.as_ref().and_then(Run::of);
        let rolling = annotations::rollback(&p).is_some_and(|r| Some(&r.from) == run.as_ref());
        if rolling && version != *last && version.as_deref() != Some("3.5.2") {
            v.lock().unwrap().push(format!(
                "{user}: staging changed to {version:?} during the rollback"
            ));
        }
        *last = version;
    }));

    // Pass B lists the promotions, then its list of profiles hangs.
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["list"])
            .resource("clusterprofiles")
            .user("pass-b"),
        1,
        FaultAction::Hang(std::time::Duration::from_millis(1500)),
    ));
    let client_b = env.server.client_as("pass-b").await.unwrap();
    let opts = PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: None,
    };
    let b = tokio::spawn(async move { run_pass(&client_b, &ChecksNotEvaluated, &opts).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Meanwhile: `promoter rollback` (what it records), and pass A applies 3.5.2 to staging.
    let record = Rollback {
        from: run,
        to: good,
        order: RollbackOrder::Reverse,
        cause: Cause::Manual,
        by: "alice".into(),
        at: promoter::api::Timestamp::new(env.now()),
        reason: Some("INC-7".into()),
        completed_at: None,
        kept: None,
        missed: None,
    };
    env.store_json_patch(
        &name,
        json!([{"op": "add", "path": format!("/metadata/annotations/{}", ROLLBACK.replace('/', "~1")),
                "value": serde_json::to_string(&record).unwrap()}]),
    );
    env.pass().await;
    assert_eq!(
        env.chart_version(&format!("{name}-staging")).as_deref(),
        Some("3.5.2"),
        "pass A starts the rollback at staging"
    );
    let report = b.await.unwrap().unwrap();
    let v = violations.lock().unwrap().clone();
    assert!(
        v.is_empty(),
        "{v:?}; pass B: {}",
        serde_json::to_string(&report).unwrap()
    );
    assert_eq!(
        env.chart_version(&format!("{name}-staging")).as_deref(),
        Some("3.5.2")
    );
}

/// The pass says, when the revision a rollback restores is gone: "`promoter rollback
/// --to-revision` another revision, or change the spec". Doing so redirects the recorded
/// rollback, and the passes carry it through (the command used to refuse while a rollback of the
/// run was recorded: the hint led nowhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_a_gone_revision_can_be_redirected_as_the_status_says() {
    use promoter::api::{PromotionRevision, revision_id, revision_name};
    use promoter::ops::control::Actor;
    use promoter::ops::rollback::{RollbackRequest, request_rollback};
    let env = Env::new(DEV_STAGING_PROD).await;
    let name = env.apply_example("rollback-on-deadline.yaml")[0].clone();
    let mut revisions = Vec::new();
    for v in ["3.5.1", "3.5.2", "3.5.3"] {
        let mut p = env.promotion(&name).unwrap();
        p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!(v);
        env.apply_promotion(&p);
        env.tick().await;
        let mut ticks = 0;
        while !annotations::is_complete(&env.promotion(&name).unwrap()) {
            env.tick().await;
            ticks += 1;
            assert!(ticks < 40, "{v} never completed");
        }
        revisions.push(
            Run::of(env.promotion(&name).unwrap().status.as_ref().unwrap())
                .unwrap()
                .revision,
        );
    }
    let actor = Actor::new("alice", Some("INC-7")).unwrap();
    let said = request_rollback(
        &env.client,
        &name,
        &RollbackRequest::default(),
        &actor,
        env.now(),
    )
    .await
    .unwrap();
    assert!(said.contains(&revision_id(&revisions[1])), "{said}");
    // 3.5.2's stored revision goes (by hand, or a bug): the pass says what to do.
    let api: kube::Api<PromotionRevision> = kube::Api::all(env.client.clone());
    api.delete(&revision_name(&name, &revisions[1]), &Default::default())
        .await
        .unwrap();
    let report = env.tick().await;
    let summary = &report.promotions[0].summary;
    assert!(
        summary.contains("is gone; `promoter rollback --to-revision` another revision"),
        "{summary}"
    );
    // Doing what it says.
    let wanted = revision_id(&revisions[0]);
    let request = RollbackRequest {
        to_revision: Some(wanted.clone()),
        order: None,
    };
    let out = request_rollback(&env.client, &name, &request, &actor, env.now()).await;
    assert!(
        out.is_ok(),
        "`promoter rollback --to-revision {wanted}` refused: {:#}",
        out.unwrap_err()
    );
    // And the passes carry the redirected rollback through.
    let mut ticks = 0;
    while annotations::rollback(&env.promotion(&name).unwrap())
        .and_then(|r| r.completed_at)
        .is_none()
    {
        env.tick().await;
        ticks += 1;
        assert!(ticks < 40, "the redirected rollback never finished");
    }
    for stage in ["dev", "staging", "production"] {
        assert_eq!(
            env.chart_version(&format!("{name}-{stage}")).as_deref(),
            Some("3.5.1"),
            "{stage}"
        );
    }
}

/// Design: "Abort during a rollback holds it where it is; resume continues it." A `promoter
/// resume` that lifts the abort only lifts it (it used to write `promoter.dev/retry` as well, and
/// the next pass abandoned the rollback and rolled the bad revision out again from stage 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_an_abort_continues_the_rollback() {
    use promoter::ops::control::{Actor, abort, resume};
    use promoter::ops::rollback::{RollbackRequest, request_rollback};
    let mut env = Env::new(DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    for _ in 0..20 {
        env.tick().await;
        if env.chart_version(&format!("{name}-staging")).as_deref() == Some("3.6.0") {
            break;
        }
    }
    let actor = Actor::new("alice", Some("INC-7")).unwrap();
    request_rollback(
        &env.client,
        &name,
        &RollbackRequest::default(),
        &actor,
        env.now(),
    )
    .await
    .unwrap();
    env.tick().await;
    assert_eq!(
        env.chart_version(&format!("{name}-staging")).as_deref(),
        Some("3.5.2")
    );
    abort(&env.client, &name, &actor, env.now()).await.unwrap();
    env.tick().await;
    let said = resume(&env.client, &name, Default::default(), &actor, env.now())
        .await
        .unwrap();
    let report = env.tick().await;
    let p = env.promotion(&name).unwrap();
    assert!(
        annotations::rollback(&p).is_some(),
        "resume said {said:?}; the rollback was abandoned: {}",
        serde_json::to_string(&report.promotions[0]).unwrap()
    );
    assert_eq!(
        env.chart_version(&format!("{name}-staging")).as_deref(),
        Some("3.5.2")
    );
}

/// Issue 30: a pass killed right after the record patch that records the missed deadline and
/// starts the rollback (before its status write): the next pass still shows the failed stage's
/// failureMessage and emits the `ProgressDeadlineExceeded` Event, once (they used to be lost: the
/// next pass only carried the rollback out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cause_of_a_rollback_survives_a_crash_after_its_record_patch() {
    let mut env = Env::new(DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    let opts = |dry_run| PassOptions {
        dry_run,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: None,
    };
    let mut crashed = false;
    for _ in 0..80 {
        // The pass that will record the miss dies right after its first write to the promotion
        // (the record patch): its answer is lost.
        let plan = run_pass(&env.client, &ChecksNotEvaluated, &opts(true))
            .await
            .unwrap();
        if !crashed
            && plan.promotions[0]
                .actions
                .iter()
                .any(|a| a.contains("missed its progress deadline"))
        {
            env.server.inject(FaultRule::nth(
                RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
                1,
                FaultAction::ResetAfter,
            ));
            env.tick().await;
            env.server.clear_faults();
            crashed = true;
            let p = env.promotion(&name).unwrap();
            assert!(
                annotations::rollback(&p).is_some(),
                "the record patch landed"
            );
            assert!(
                !p.status.unwrap().stages.unwrap().iter().any(|s| s
                    .failure_message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("progress deadline"))),
                "the status write did not happen"
            );
            continue;
        }
        env.tick().await;
        if crashed
            && annotations::rollback(&env.promotion(&name).unwrap())
                .is_some_and(|r| r.completed_at.is_some())
        {
            break;
        }
    }
    assert!(crashed, "the deadline was never missed");
    let p = env.promotion(&name).unwrap();
    let staging = p
        .status
        .unwrap()
        .stages
        .unwrap()
        .into_iter()
        .find(|s| s.name == "staging")
        .unwrap();
    assert!(
        staging
            .failure_message
            .as_deref()
            .is_some_and(|m| m.starts_with("progress deadline 30m exceeded at ")),
        "{staging:?}"
    );
    let misses = common::events_of(&env, &name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ProgressDeadlineExceeded"))
        .count();
    assert_eq!(misses, 1, "the Event of the miss, once");
}

/// Issue 30: a PromotionRevision the history forgot is deleted even when the pass that forgot it
/// dies right after any of its writes (it used to be deleted only by that pass, after its status
/// write, and leaked for good): with `revision-history-limit: 1`, a second completed revision
/// forgets the first, and whatever write the passes die after, once the rollout completes and a
/// few passes ran, the only stored revision of the promotion is the one the history names, and no
/// sweep is left due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_the_history_forgot_never_leaks_whatever_write_a_pass_dies_after() {
    use promoter::api::revision_name;
    async fn world(crash_after: Option<usize>) -> (usize, Vec<String>, Vec<String>, bool) {
        let env = Env::new(DEV_STAGING_PROD).await;
        let name = env.apply_example("rollback-on-deadline.yaml")[0].clone();
        env.store_json_patch(
            &name,
            json!([{"op": "add", "path": "/metadata/annotations/promoter.dev~1revision-history-limit", "value": "1"}]),
        );
        let mut ticks = 0;
        while !annotations::is_complete(&env.promotion(&name).unwrap()) {
            env.tick().await;
            ticks += 1;
            assert!(ticks < 40, "3.5.2 never completed");
        }
        let mut p = env.promotion(&name).unwrap();
        p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.5.3");
        env.apply_promotion(&p);
        env.server.clear_requests();
        if let Some(k) = crash_after {
            env.server.inject(FaultRule::nth(
                RequestMatcher::writes(),
                k,
                FaultAction::ResetAfter,
            ));
        }
        // The first pass restarts the rollout (until then the old run reads as complete).
        env.tick().await;
        let mut ticks = 0;
        while !annotations::is_complete(&env.promotion(&name).unwrap()) {
            env.tick().await;
            ticks += 1;
            assert!(ticks < 40, "3.5.3 never completed");
        }
        let writes = env.server.writes();
        env.server.clear_faults();
        for _ in 0..3 {
            env.tick().await;
        }
        let p = env.promotion(&name).unwrap();
        let named: Vec<String> = annotations::History::of(&p)
            .kept_revisions()
            .into_iter()
            .map(|r| revision_name(&name, r))
            .collect();
        let stored = env.revision_names().await;
        (writes, named, stored, annotations::sweep_due(&p).is_some())
    }
    let (writes, named, stored, due) = world(None).await;
    assert!(writes > 10, "the second rollout's writes: {writes}");
    assert_eq!(named.len(), 1);
    assert_eq!((&stored, due), (&named, false));
    for k in 1..=writes {
        let (_, named, stored, due) = world(Some(k)).await;
        assert_eq!(stored, named, "crash after write {k}: leaked");
        assert!(!due, "crash after write {k}: the sweep never finished");
    }
}

/// Issue 30: whatever Sveltos' failure messages contain (here 1 MiB on every failed feature),
/// every text promoter records is bounded: the promotion's annotations stay far below the API
/// server's 256 KiB, no pass fails to write, and the rollback goes through (a message copied whole
/// into `promoter.dev/failed` and `promoter.dev/rollback` made every record patch a 422).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_sveltos_messages_never_stop_a_rollback() {
    let mut env = Env::new(DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    let huge = format!("helm install failed: {}", "y".repeat(1 << 20));
    let mut rolled_back = false;
    for _ in 0..80 {
        let report = env.pass().await;
        for r in &report.promotions {
            let error = r.error.clone().unwrap_or_default();
            assert!(
                error.is_empty(),
                "{}",
                promoter::bounded_text::bounded(&error, 600)
            );
            assert!(r.summary.len() <= 4096, "{}", r.summary.len());
        }
        env.addon.reconcile(&env.server, env.now());
        // Sveltos says why at length.
        let summaries = promoter::fake::cluster_summary_type();
        let mut store = env.server.store();
        for mut cs in store.all(&summaries) {
            let Some(features) = cs
                .pointer_mut("/status/featureSummaries")
                .and_then(|f| f.as_array_mut())
            else {
                continue;
            };
            let mut changed = false;
            for f in features.iter_mut().filter(|f| f["status"] == "Failed") {
                f["failureMessage"] = json!(huge);
                changed = true;
            }
            if changed {
                let ns = cs["metadata"]["namespace"].as_str().unwrap().to_string();
                let n = cs["metadata"]["name"].as_str().unwrap().to_string();
                store.update(&summaries, &ns, &n, cs, true).unwrap();
            }
        }
        drop(store);
        env.advance(chrono::Duration::minutes(1));
        let p = env.promotion(&name).unwrap();
        let annotations: usize = p
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len())
            .sum();
        assert!(annotations < 32 * 1024, "annotations: {annotations} bytes");
        let status = serde_json::to_string(&p.status).unwrap().len();
        assert!(status < 16 * 1024, "status: {status} bytes");
        if annotations::rollback(&p).is_some_and(|r| r.completed_at.is_some()) {
            rolled_back = true;
            break;
        }
    }
    assert!(rolled_back, "the rollback went through");
    let p = env.promotion(&name).unwrap();
    assert!(
        annotations::failed(&p)
            .unwrap()
            .why
            .contains("helm install failed: yyy")
    );
}
