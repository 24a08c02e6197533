//! Issue 24 end to end against the fake API server and the simulated Sveltos: the passes that
//! `promoter step` runs (on a virtual clock), and the real binary for `status`, `explain`,
//! `freeze` and `resume`: a stage that misses its
//! progress deadline rolls every reached stage back to the last revision that completed, the
//! promotion holds, and a person's `resume` rolls the revision out again; a freeze stops new stages
//! across many promotions in one pass, a bypass is on record, removing the freeze resumes them.

mod common;

use common::{DEV_STAGING_PROD, Env, completed_before_a_break, events_of, promoter};
use promoter::annotations::{self, History, Run};
use promoter::api::ClusterPromotion;
use serde_json::{Value, json};

/// One minute: the pass `promoter step` runs, at the virtual clock's time; Sveltos reacts; the
/// clock moves. Returns step's exit code for that pass and its JSON report.
async fn step(env: &Env) -> (i32, Value) {
    let report = env.pass().await;
    env.addon.reconcile(&env.server, env.now());
    env.advance(chrono::Duration::minutes(1));
    let code = if report.errors() > 0 { 2 } else { 0 };
    (code, serde_json::to_value(&report).unwrap())
}

fn phase(report: &Value, name: &str) -> String {
    report["promotions"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .map(|p| p["phase"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

fn version(env: &Env, name: &str, stage: &str) -> Option<String> {
    env.chart_version(&format!("{name}-{stage}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missed_deadline_rolls_back_every_reached_stage_then_holds_until_resumed() {
    let mut env = Env::new(DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let good = Run::of(env.promotion(&name).unwrap().status.as_ref().unwrap()).unwrap();
    // 3.6.0 breaks on staging.
    let mut p: ClusterPromotion = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    let mut rolled_back = None;
    let mut saw_rolling_back = false;
    for _ in 0..80 {
        let (code, report) = step(&env).await;
        match phase(&report, &name).as_str() {
            "RollingBack" => {
                saw_rolling_back = true;
                assert_eq!(code, 2, "a rollback is an error for CI");
                // Never the bad revision on a stage above one that went back.
                if version(&env, &name, "staging").as_deref() == Some("3.6.0") {
                    assert_eq!(version(&env, &name, "dev").as_deref(), Some("3.6.0"));
                }
            }
            "RolledBack" => {
                rolled_back = Some(code);
                break;
            }
            _ => {}
        }
    }
    assert!(saw_rolling_back);
    assert_eq!(rolled_back, Some(2), "rolled back");
    for stage in ["dev", "staging", "production"] {
        assert_eq!(
            version(&env, &name, stage).as_deref(),
            Some("3.5.2"),
            "{stage}"
        );
    }
    let history = History::of(&env.promotion(&name).unwrap());
    assert!(history.0[0].rolled_back.is_some());
    assert_eq!(history.0[1].revision, good.revision);
    // Holds: quiet, and status/explain say why. A steady RolledBack pass costs what any steady
    // pass costs: three lists (promotions, profiles, freezes), no read of the stored revision
    // (issue 30: it used to read its PromotionRevision every pass), no write.
    step(&env).await;
    env.server.clear_requests();
    let (code, report) = step(&env).await;
    assert_eq!((code, phase(&report, &name).as_str()), (2, "RolledBack"));
    assert_eq!(env.server.writes(), 0, "{:#?}", env.server.requests());
    let requests: Vec<String> = env
        .server
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.verb, r.resource))
        .collect();
    assert_eq!(
        requests,
        [
            "list clusterprofiles",
            "list clusterpromotions",
            "list promotionfreezes"
        ],
        "a steady RolledBack pass"
    );
    // A target's profile edited by hand: the next pass reads the stored revision and repairs it;
    // then passes are steady again.
    let staging = format!("{name}-staging");
    let mut cp = env.profile(&staging).unwrap();
    cp.spec.fields["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    let api: kube::Api<promoter::api::ClusterProfile> = kube::Api::all(env.client.clone());
    api.replace(&staging, &Default::default(), &cp)
        .await
        .unwrap();
    step(&env).await;
    assert_eq!(
        version(&env, &name, "staging").as_deref(),
        Some("3.5.2"),
        "repaired"
    );
    step(&env).await;
    env.server.clear_requests();
    let (_, report) = step(&env).await;
    assert_eq!(phase(&report, &name), "RolledBack");
    assert_eq!(
        env.server.count(|_| true),
        3,
        "{:#?}",
        env.server.requests()
    );
    let (code, _, _) = promoter(&env, &["status", &name, "--exit-code"]);
    assert_eq!(code, 5);
    let (_, out, _) = promoter(&env, &["status", &name, "-o", "json"]);
    let row: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["phase"], "RolledBack");
    let (code, text, err) = promoter(&env, &["explain", &name]);
    assert_eq!(code, 0, "{err}");
    for expected in [
        "on failure: rollback (reverse); rollback deadline: 1h",
        "rolled back to revision",
        "Rolled back to revision",
        "progress deadline 30m exceeded",
    ] {
        assert!(
            text.contains(expected),
            "explain lacks {expected:?}:\n{text}"
        );
    }
    assert!(
        !text.contains("not stored"),
        "revisions are stored:\n{text}"
    );
    let reasons: Vec<String> = events_of(&env, &name)
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for r in [
        "ProgressDeadlineExceeded",
        "RollbackStarted",
        "StageRolledBack",
        "RolledBack",
    ] {
        assert!(reasons.iter().any(|x| x == r), "no {r} Event: {reasons:?}");
    }
    // A person resumes: 3.6.0 rolls out again from stage 1 (and fails again on staging).
    let (code, out, err) = promoter(
        &env,
        &["resume", &name, "--reason", "staging fixed", "--yes"],
    );
    assert_eq!(code, 0, "{out}{err}");
    step(&env).await;
    step(&env).await;
    assert_eq!(version(&env, &name, "dev").as_deref(), Some("3.6.0"));
    assert_eq!(version(&env, &name, "staging").as_deref(), Some("3.5.2"));
    assert!(annotations::rollback(&env.promotion(&name).unwrap()).is_none());
}

/// Twenty promotions soaking in dev; a freeze of those labelled tier=prod holds all fifteen of them
/// in one pass while the five others go on; a bypass lets one through, on record; deleting the
/// freeze lets the rest go.
#[tokio::test(flavor = "multi_thread")]
async fn a_freeze_holds_many_promotions_in_one_pass_a_bypass_is_recorded_removal_resumes() {
    let env = Env::new(DEV_STAGING_PROD).await;
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-auto.yaml");
    let docs = promoter::manifest::load_file(&path).unwrap();
    let template = docs.iter().find_map(|d| d.promotion()).unwrap().clone();
    let names: Vec<String> = (0..20).map(|i| format!("app-{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        let mut p = template.clone();
        p.metadata = kube::core::ObjectMeta {
            name: Some(n.clone()),
            labels: Some(
                [(
                    "tier".to_string(),
                    if i < 15 { "prod" } else { "dev" }.to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        };
        env.apply_promotion(&p);
    }
    // Everyone deployed in dev and soaking (2 m).
    for _ in 0..4 {
        step(&env).await;
    }
    let (code, out, err) = promoter(
        &env,
        &[
            "freeze",
            "create",
            "holidays",
            "--reason",
            "Holiday change freeze (CAB-9)",
            "--selector",
            "tier=prod",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    env.advance(chrono::Duration::minutes(3));
    env.server.clear_requests();
    let (_, report) = step(&env).await;
    let phases: Vec<String> = names.iter().map(|n| phase(&report, n)).collect();
    assert!(phases[..15].iter().all(|p| p == "Frozen"), "{phases:?}");
    assert!(
        phases[15..].iter().all(|p| p == "Progressing"),
        "{phases:?}"
    );
    for n in &names[..15] {
        assert!(
            env.profile(&format!("{n}-staging")).is_none(),
            "{n} started staging"
        );
        assert!(
            env.description(n, "dev")
                .is_some_and(|d| d.starts_with("Frozen: freeze holidays")),
            "{n}: {:?}",
            env.description(n, "dev")
        );
    }
    for n in &names[15..] {
        assert!(env.profile(&format!("{n}-staging")).is_some());
    }
    // The freeze's status says it is active, once.
    let freeze = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "holidays")
        .unwrap();
    assert_eq!(freeze["status"]["phase"], "Active");
    // Quiet while frozen: nothing written for the held promotions.
    env.server.clear_requests();
    step(&env).await;
    assert!(
        env.server
            .requests()
            .iter()
            .filter(|r| r.is_write())
            .all(|r| names[15..].iter().any(|n| r.path.contains(n.as_str()))
                || r.path.contains("events")),
        "{:#?}",
        env.server.requests()
    );
    // A bypass for app-03, on record.
    let (code, out, err) = promoter(
        &env,
        &[
            "freeze",
            "bypass",
            "app-03",
            "--reason",
            "CVE hotfix",
            "--until",
            "2h",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (_, report) = step(&env).await;
    assert_eq!(phase(&report, "app-03"), "Progressing");
    assert_eq!(phase(&report, "app-04"), "Frozen");
    assert!(
        env.description("app-03", "staging")
            .is_some_and(|d| d.contains("freeze holidays bypassed by")),
        "{:?}",
        env.description("app-03", "staging")
    );
    let reasons: Vec<String> = events_of(&env, "app-03")
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.iter().any(|r| r == "FreezeBypassGranted"),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r == "FreezeBypassed"), "{reasons:?}");
    // Lifting the freeze lets every other one go in the next pass.
    let (code, out, err) = promoter(&env, &["freeze", "delete", "holidays"]);
    assert_eq!(code, 0, "{out}{err}");
    step(&env).await;
    for n in &names {
        assert!(
            env.profile(&format!("{n}-staging")).is_some(),
            "{n} resumed"
        );
    }
}

/// A freeze whose selector does not parse (the CRD's schema lets any operator through) holds
/// nothing: its status says why, once, with a Warning Event on it, and every promotion goes on.
#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_freeze_is_an_error_on_itself_alone() {
    let env = Env::new(DEV_STAGING_PROD).await;
    let name = env.apply_example("blog-kyverno-auto.yaml")[0].clone();
    // Stored before the CRD refused an unknown operator (unvalidated, as such an object is read).
    env.server
        .store()
        .seed_unvalidated(
            &promoter::fake::promotion_freeze_type(),
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                   "metadata": {"name": "typo"},
                   "spec": {"reason": "stop", "promotionSelector": {"matchExpressions": [
                       {"key": "tier", "operator": "Inn", "values": ["prod"]}]}}}),
        )
        .unwrap();
    for _ in 0..3 {
        step(&env).await;
    }
    let freeze = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "typo")
        .unwrap();
    assert_eq!(freeze["status"]["phase"], "Invalid", "{freeze:#}");
    assert!(
        freeze["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.promotionSelector") && m.contains("Inn")),
        "{freeze:#}"
    );
    // Written once: a later pass leaves it as it is.
    let rv = freeze["metadata"]["resourceVersion"].clone();
    step(&env).await;
    let again = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "typo")
        .unwrap();
    assert_eq!(again["metadata"]["resourceVersion"], rv);
    let warnings: Vec<_> = env
        .server
        .store()
        .all(&promoter::fake::ResourceType::builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
        ))
        .into_iter()
        .filter(|e| e["reason"] == "InvalidFreeze" && e["regarding"]["name"] == "typo")
        .collect();
    assert_eq!(warnings.len(), 1, "one InvalidFreeze Event");
    for _ in 0..10 {
        if env.profile(&format!("{name}-staging")).is_some() {
            break;
        }
        step(&env).await;
    }
    assert!(
        env.profile(&format!("{name}-staging")).is_some(),
        "the promotion went on"
    );
    let (code, out, _) = promoter(&env, &["doctor"]);
    assert_eq!(code, 2, "doctor fails for an invalid freeze:\n{out}");
    assert!(out.contains("typo"), "{out}");
}

/// A cluster where Sveltos is installed and promoter's own CRDs are not (`promoter crd --own` not
/// applied; a real server answers promoter.dev's paths with a plain-text 404): rollouts under the
/// default policy complete as they did before freezes and revisions existed, their history is
/// recorded and nothing is in error; a promotion asking for rollback, which needs stored
/// revisions, says in its own status what to install, and changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn without_promoters_crds_rollouts_complete_and_a_rollback_policy_says_what_to_install() {
    let env = Env::without_own_crds(DEV_STAGING_PROD).await;
    let plain = env.apply_example("blog-kyverno-auto.yaml")[0].clone();
    let guarded = env.apply_example("rollback-on-deadline.yaml")[0].clone();
    let mut ticks = 0;
    while !annotations::is_complete(&env.promotion(&plain).unwrap()) {
        let (_, report) = step(&env).await;
        let plain_report = report["promotions"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == plain.as_str()))
            .cloned()
            .unwrap_or_default();
        assert!(plain_report.get("error").is_none(), "{plain_report:#}");
        assert_ne!(phase(&report, &plain), "Blocked", "{report:#}");
        assert_eq!(phase(&report, &guarded), "Blocked", "{report:#}");
        ticks += 1;
        assert!(ticks < 40, "the rollout never completed: {report:#}");
    }
    let done = env.promotion(&plain).unwrap();
    assert_eq!(History::of(&done).0.len(), 1, "the history is recorded");
    let status = serde_json::to_value(env.promotion(&guarded).unwrap()).unwrap();
    let said = status
        .pointer("/status/stages/0/failureMessage")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    assert!(
        said.contains("metadata.annotations[promoter.dev/failure-policy]")
            && said.contains("PromotionRevision")
            && said.contains("promoter crd --own"),
        "{status:#}"
    );
    assert!(
        !env.profiles().iter().any(|p| p
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .starts_with(&guarded)),
        "a blocked promotion deploys nothing"
    );
}

/// `promoter crd --only PromotionFreeze` installs the freeze CRD alone (doctor warns about the
/// other). observe sees PromotionFreezes served, so completions store a PromotionRevision; its
/// create answered 404 and was an error before the record patch: the rollout never recorded its
/// completion, every pass after failed the same way (review). Completion does not depend on the
/// optional history object (as with both CRDs missing), and the pass says the revision was not
/// stored and what installs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_completes_with_only_the_freeze_crd_installed() {
    let env = Env::without_own_crds(DEV_STAGING_PROD).await;
    for crd in promoter::crd::own_crds() {
        if crd.metadata.name.as_deref() == Some("promotionfreezes.promoter.dev") {
            env.server
                .store()
                .register_crd(&serde_json::to_value(crd).unwrap())
                .unwrap();
        }
    }
    let name = env.apply_example("rollback-on-deadline.yaml")[0].clone();
    // The rollback policy is blocked without revisions; halt is the default.
    env.store_json_patch(
        &name,
        json!([{"op": "remove", "path": "/metadata/annotations"}]),
    );
    let mut last = None;
    for _ in 0..40 {
        let report = env.tick().await;
        last = Some(serde_json::to_string(&report.promotions[0]).unwrap());
        if annotations::is_complete(&env.promotion(&name).unwrap()) {
            let last = last.unwrap_or_default();
            assert!(
                last.contains("not stored") && last.contains("promoter crd --own"),
                "the completing pass says the revision was not stored: {last}"
            );
            let (code, text, err) = promoter(&env, &["explain", &name]);
            assert_eq!(code, 0, "{err}");
            let id = History::of(&env.promotion(&name).unwrap()).0[0].id.clone();
            assert!(
                text.contains(&format!(
                    "warning: revision {id} not stored (no PromotionRevision): a rollback cannot restore it"
                )) && text.contains("crd --own | kubectl apply -f -")
                    && text.contains(", not stored"),
                "{text}"
            );
            return;
        }
    }
    panic!("never completed; last pass: {}", last.unwrap_or_default());
}

/// Issue 30: a PromotionFreeze promoter cannot decode (written past an older CRD without the
/// schema: an `end` that is no time) holds every promotion it may select (fail closed) and is
/// visible where people look: its own status, an `UnreadableFreeze` Event, the status of the
/// promotion it holds, `freeze list` and `doctor`. It used to be a log line, and held nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_freeze_holds_and_says_so_everywhere() {
    let env = Env::new(DEV_STAGING_PROD).await;
    let name = env.apply_example("blog-kyverno-auto.yaml")[0].clone();
    step(&env).await;
    env.server
        .store()
        .seed_unvalidated(
            &promoter::fake::promotion_freeze_type(),
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                   "metadata": {"name": "broken"},
                   "spec": {"reason": "INC-9", "end": "next tuesday"}}),
        )
        .unwrap();
    for _ in 0..12 {
        step(&env).await;
    }
    assert_eq!(
        env.current_stage(&name).as_deref(),
        Some("dev"),
        "held at dev"
    );
    let description = env.description(&name, "dev").unwrap_or_default();
    assert!(
        description.starts_with(
            "Frozen: freeze broken: it cannot be read (spec.end: invalid time \"next tuesday\""
        ),
        "{description}"
    );
    let freeze = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "broken")
        .unwrap();
    assert_eq!(freeze["status"]["phase"], "Active", "{freeze}");
    assert!(
        freeze["status"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("cannot be read (spec.end: ")),
        "{freeze}"
    );
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client.clone(), "default");
    let unreadable: Vec<_> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UnreadableFreeze"))
        .collect();
    assert_eq!(unreadable.len(), 1, "one Warning Event on the freeze");
    let (code, out, err) = promoter(&env, &["freeze", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("broken") && out.contains("cannot be read"),
        "{out}"
    );
    let (code, out, err) = promoter(&env, &["doctor"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("PromotionFreeze broken") && out.contains("cannot be read"),
        "{out}"
    );
    // Deleted: the rollout goes on.
    env.server
        .store()
        .delete(
            &promoter::fake::promotion_freeze_type(),
            "",
            "broken",
            &Default::default(),
        )
        .unwrap();
    for _ in 0..4 {
        step(&env).await;
    }
    assert_ne!(env.current_stage(&name).as_deref(), Some("dev"));
}
