//! A pass over a flaky network, through the fake API server and kube's real client with promoter's
//! connection policy: reads retried, writes sent once, a read that still fails holds back only the
//! promotions that need it, a pass deadline stops between promotions, shards split promotions.

mod common;

use common::Env;
use promoter::api::ClusterPromotion;
use promoter::fake::managed::cert_manager_cluster;
use promoter::fake::secret_type;
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
use promoter::pass::shard::Shard;
use promoter::pass::{
    ChecksNotEvaluated, HealthEvaluator, HealthVerdict, PassLimits, PassOptions, PassReport,
    PromotionReport, World, run_pass_with,
};
use serde_json::json;
use std::time::Duration;

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

/// The blog's automatic rollout under another name.
fn promotion(name: &str) -> ClusterPromotion {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-auto.yaml");
    let mut p = promoter::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone();
    p.metadata.name = Some(name.into());
    p
}

/// `n` copies of the blog's automatic rollout, `<prefix>-<i>`; their names.
fn apply_rollouts(env: &Env, prefix: &str, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        env.apply_promotion(&promotion(name));
    }
    names
}

async fn pass(env: &Env, client: &kube::Client, limits: PassLimits) -> PassReport {
    let opts = PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: None,
    };
    run_pass_with(client, &ChecksNotEvaluated, &opts, &limits)
        .await
        .expect("the pass runs")
}

fn report<'a>(r: &'a PassReport, name: &str) -> &'a PromotionReport {
    r.promotions
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} not in {r:?}"))
}

/// The metrics a CronJob pushes (or the Lambda prints) for this pass.
fn metrics_of(r: &PassReport) -> promoter::metrics::PassMetrics {
    promoter::metrics::PassMetrics::new(
        Some(r),
        r.time,
        Duration::from_secs(1),
        Default::default(),
        Default::default(),
    )
}

fn lists(resource: &str) -> RequestMatcher {
    RequestMatcher::verbs(&["list"]).resource(resource)
}

/// A client whose requests time out after `ms` (slow and hung answers).
async fn client_with_timeout(env: &Env, ms: u64) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&env.server.kubeconfig_yaml("promoter")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    promoter::client::from_config_with_timeout(config, Duration::from_millis(ms)).unwrap()
}

/// Before: the first failed list ended the pass for every promotion (exit 1), and the 503 below
/// was not retried.
#[tokio::test(flavor = "multi_thread")]
async fn reads_are_retried_and_a_write_goes_out_once() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion("a"));
    let client = client_with_timeout(&env, 300).await;
    let s = &env.server;
    s.inject(FaultRule::nth(
        lists("clusterpromotions"),
        1,
        FaultAction::Status(503),
    ));
    s.inject(FaultRule::nth(
        lists("clusterpromotions"),
        1,
        FaultAction::ResetBefore,
    ));
    s.inject(FaultRule::nth(
        lists("clusterprofiles"),
        1,
        FaultAction::Status(409),
    ));
    // Headers at once, the body in pieces 400 ms apart: past the 300 ms timeout, midway.
    s.inject(FaultRule::nth(
        lists("sveltosclusters"),
        1,
        FaultAction::SlowBody(Duration::from_millis(400)),
    ));
    s.inject(FaultRule::nth(
        RequestMatcher::verbs(&["discovery"]),
        1,
        FaultAction::Hang(Duration::from_millis(500)),
    ));
    // The first write's answer is lost after it was applied: never sent again.
    s.inject(FaultRule::nth(
        RequestMatcher::writes(),
        1,
        FaultAction::ResetAfter,
    ));
    s.clear_requests();
    let r = pass(&env, &client, PassLimits::default()).await;
    let a = report(&r, "a");
    assert!(a.error.is_none(), "{a:?}");
    assert!(
        a.conflict
            .as_deref()
            .unwrap_or_default()
            .contains("answer was lost"),
        "a lost answer is left to the next pass, not an error: {a:?}"
    );
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "clusterpromotions"),
        3
    );
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "clusterprofiles"),
        2
    );
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "sveltosclusters"),
        2
    );
    assert_eq!(
        s.writes(),
        1,
        "the write whose answer was lost is not replayed"
    );
    // The next pass reads what happened and goes on.
    s.clear_faults();
    let r = pass(&env, &client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
    assert!(env.promotion("a").unwrap().status.is_some());
}

/// Before: a failed ClusterSummary or inventory list ended the pass, for every promotion.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_that_still_fails_holds_back_only_the_promotions_that_need_it() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion("done"));
    for _ in 0..30 {
        env.tick().await;
    }
    let done = env.promotion("done").unwrap();
    assert!(
        promoter::pass::observe::Unread {
            inventory: Some("x".into()),
            ..Default::default()
        }
        .missing_for(&done)
        .is_none(),
        "a complete promotion needs no ClusterSummaries nor inventory: {:?}",
        done.status
    );
    env.apply_promotion(&promotion("busy"));
    env.tick().await;
    for (what, matcher, action) in [
        (
            "ClusterSummaries",
            lists("clustersummaries"),
            FaultAction::Status(500),
        ),
        (
            "inventory",
            lists("sveltosclusters"),
            FaultAction::ResetBefore,
        ),
    ] {
        env.server.inject(FaultRule::after(matcher, 0, action));
        env.server.clear_requests();
        let r = pass(&env, &env.client, PassLimits::default()).await;
        let busy = report(&r, "busy");
        let error = busy.error.clone().unwrap_or_default();
        assert!(
            error.contains("not decided in this pass") && error.contains(what),
            "{what}: {busy:?}"
        );
        assert!(busy.actions.is_empty(), "{busy:?}");
        assert!(
            busy.undecided.as_deref().unwrap_or_default().contains(what),
            "{busy:?}"
        );
        assert_eq!((r.undecided(), r.deferred()), (1, 0), "{what}");
        let text = metrics_of(&r).prometheus_text();
        for line in [
            "promoter_promotions_undecided 1",
            "promoter_promotions_deferred 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        let d = report(&r, "done");
        assert!(d.error.is_none() && d.conflict.is_none(), "{what}: {d:?}");
        assert_eq!(env.server.writes(), 0, "{what}");
        assert!(
            env.server.count(|r| r.code >= 500 || r.code == 499) >= 5,
            "{what}: retried before giving up"
        );
        env.server.clear_faults();
    }
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
}

/// A deadline that passes while the first promotion writes: its writes finish, the second's do not
/// start, and the report says so (not an error).
#[tokio::test(flavor = "multi_thread")]
async fn the_deadline_stops_between_promotions_never_inside_one() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion("a"));
    env.apply_promotion(&promotion("b"));
    env.server.inject(FaultRule::nth(
        RequestMatcher::writes(),
        1,
        FaultAction::Hang(Duration::from_millis(600)),
    ));
    env.server.clear_requests();
    let limits = PassLimits {
        deadline: Some(tokio::time::Instant::now() + Duration::from_millis(300)),
        shard: None,
    };
    let r = pass(&env, &env.client, limits).await;
    let (first, second) = (&r.promotions[0], &r.promotions[1]);
    assert!(
        first.error.is_none() && first.deferred.is_none(),
        "{first:?}"
    );
    assert!(
        first.actions.iter().any(|a| a == "wrote status"),
        "the first promotion's writes all went out: {first:?}"
    );
    assert!(
        second
            .deferred
            .as_deref()
            .unwrap_or_default()
            .contains("deadline"),
        "{second:?}"
    );
    assert!(
        second.actions.is_empty() && !second.in_error(),
        "{second:?}"
    );
    assert!(env.promotion(&second.name).unwrap().status.is_none());
    assert_eq!((r.deferred(), r.undecided()), (1, 0));
    let text = metrics_of(&r).prometheus_text();
    assert!(
        text.lines().any(|l| l == "promoter_promotions_deferred 1"),
        "{text}"
    );
    let emf: serde_json::Value =
        serde_json::from_str(&metrics_of(&r).emf_line("promoter")).unwrap();
    assert_eq!(
        (&emf["PromotionsDeferred"], &emf["PromotionsUndecided"]),
        (&json!(1.0), &json!(0.0))
    );
    assert!(
        env.profile(&format!("{}-dev", second.name)).is_none(),
        "nothing of the second promotion was written"
    );
    // The next pass, with time, does the rest.
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0);
    assert!(env.promotion(&second.name).unwrap().status.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn shards_split_the_promotions_without_overlap() {
    let env = Env::new(FLEET).await;
    let names = apply_rollouts(&env, "rollout", 8);
    let only = |shard| PassLimits {
        deadline: None,
        shard: Some(shard),
    };
    let mut seen = Vec::new();
    for index in 0..3 {
        let shard = Shard { index, count: 3 };
        let r = pass(&env, &env.client, only(shard)).await;
        for p in &r.promotions {
            assert!(shard.owns(&p.name));
            seen.push(p.name.clone());
        }
    }
    seen.sort();
    assert_eq!(seen, names, "each promotion in exactly one shard");
    // Each shard read the ClusterSummaries of its own promotions only.
    env.server.clear_requests();
    let shard = Shard { index: 0, count: 3 };
    pass(&env, &env.client, only(shard)).await;
    let selectors: Vec<String> = env
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "clustersummaries")
        .map(|r| r.query.clone())
        .collect();
    assert!(!selectors.is_empty());
    for n in &names {
        let mentioned = selectors.iter().any(|q| q.contains(&format!("{n}-dev")));
        assert_eq!(mentioned, shard.owns(n), "{n}: {selectors:?}");
    }
}

/// The fake's late commit: the client sees 504 at once, the write lands afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn late_commits_land_after_their_answer() {
    let env = Env::new(FLEET).await;
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["create"]),
        1,
        FaultAction::LateCommit(Duration::from_millis(200)),
    ));
    let api: kube::Api<ClusterPromotion> = kube::Api::all(env.client.clone());
    let e = api
        .create(&Default::default(), &promotion("late"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 504),
        "{e:?}"
    );
    assert!(env.promotion("late").is_none());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        env.promotion("late").is_some(),
        "committed after the answer"
    );
}

// Health checks: the managed cluster's reads are retried like the management cluster's.

/// The Sveltos docs' cert-manager check, and the inventory of `env`.
async fn cert_manager_check(env: &Env) -> (ClusterPromotion, World) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/docs-cert-manager.yaml");
    let p = promoter::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone();
    let world = World {
        clusters: promoter::pass::observe::inventory(&env.client)
            .await
            .unwrap(),
        ..World::default()
    };
    (p, world)
}

/// Before: one failed read of the kubeconfig Secret, or one failed discovery or list on the
/// cluster, failed the stage's verdict.
#[tokio::test(flavor = "multi_thread")]
async fn health_check_reads_are_retried() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let cluster = cert_manager_cluster(&env.server, "dev", "dev01")
        .await
        .unwrap();
    let (p, world) = cert_manager_check(&env).await;
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["get"]).resource("secrets"),
        1,
        FaultAction::Status(503),
    ));
    cluster.inject(FaultRule::nth(
        RequestMatcher::verbs(&["discovery"]),
        1,
        FaultAction::ResetBefore,
    ));
    cluster.inject(FaultRule::nth(
        RequestMatcher::any(),
        3,
        FaultAction::Status(500),
    ));
    let engine = env.health_engine();
    let v = engine.evaluate(&p, "dev", &world).await;
    assert_eq!(v, HealthVerdict::Passed);
    assert!(cluster.count(|r| r.code >= 499) >= 2, "faults were met");
    // What really fails still fails: the Secret is gone.
    env.server
        .store()
        .delete(
            &secret_type(),
            "dev",
            "dev01-sveltos-kubeconfig",
            &Default::default(),
        )
        .unwrap();
    match engine.evaluate(&p, "dev", &world).await {
        HealthVerdict::Failing(m) => assert!(m.contains("not found"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Before: the health-check tasks the engine spawns did not carry the pass deadline (a task-local
/// a spawned task does not inherit), so a managed cluster answering 503 was retried past it, and
/// its failure read as a failing check. Now its reads stop at the deadline, and a stage whose
/// checks the deadline cut short is "not evaluated", never failing.
#[tokio::test(flavor = "multi_thread")]
async fn health_check_reads_stop_at_the_pass_deadline() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let cluster = cert_manager_cluster(&env.server, "dev", "dev01")
        .await
        .unwrap();
    let (p, world) = cert_manager_check(&env).await;
    // The managed cluster is overloaded for good.
    cluster.inject(FaultRule::after(
        RequestMatcher::any(),
        0,
        FaultAction::Status(503),
    ));
    let engine = env.health_engine();
    // Under the 750 ms that the first four backoffs take at the least (50 + 100 + 200 + 400 ms), so
    // a read cannot reach its fifth attempt before the deadline, however fast the machine is.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(700);
    let v = promoter::client::retry::within_deadline(deadline, engine.evaluate(&p, "dev", &world))
        .await;
    // Judged by what was sent, not by when it arrived: an attempt the client starts just before
    // the deadline can reach a busy server just after it. That no attempt *starts* after the
    // deadline, and that one running at it is abandoned there, is proven on tokio's virtual clock
    // by `client::retry`'s unit tests; here, end to end through kube's client and the fake
    // cluster, the deadline cut the retries short and the verdict says why.
    let requests = cluster.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let tries = requests.iter().filter(|x| x.path == r.path).count();
        assert!(
            tries < promoter::client::retry::ATTEMPTS as usize,
            "{}: its retries stopped at the deadline, not after {tries} attempts",
            r.path
        );
    }
    match v {
        HealthVerdict::NotEvaluated(why) => assert!(why.contains("deadline"), "{why}"),
        other => panic!("cut short by the deadline, not a verdict: {other:?}"),
    }
}

/// `promoter step --shard` and `--deadline` (and their environment variables) as a CronJob runs it.
#[tokio::test(flavor = "multi_thread")]
async fn step_takes_a_shard_and_a_deadline() {
    let env = Env::new(FLEET).await;
    let names = apply_rollouts(&env, "team", 6);
    let mut seen = Vec::new();
    for shard in ["0/2", "1/2"] {
        let (code, out, err) = common::promoter(
            &env,
            &[
                "step",
                "--dry-run",
                "--shard",
                shard,
                "--deadline",
                "30s",
                "-o",
                "json",
            ],
        );
        assert_eq!(code, 0, "{out}{err}");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        for p in report["promotions"].as_array().unwrap() {
            let name = p["name"].as_str().unwrap().to_string();
            assert!(shard.parse::<Shard>().unwrap().owns(&name));
            seen.push(name);
        }
    }
    seen.sort();
    assert_eq!(seen, names);
    for (flag, value, why) in [
        ("--shard", "2/2", "below COUNT"),
        ("--deadline", "0s", "longer than zero"),
    ] {
        let (code, out, err) = common::promoter(&env, &["step", flag, value]);
        assert_ne!(code, 0, "{out}");
        assert!(err.contains(why), "{flag} {value}: {err}");
    }
}

// Expired list continue tokens: kube-apiserver answers a continuation whose revision etcd compacted
// away (every 5 minutes, or after a storage restart) with 410 Expired.

/// The fake answers as kube-apiserver does: 410, reason Expired, its text, and an inconsistent
/// continuation in the Status; a token that is not one is a 400.
#[tokio::test(flavor = "multi_thread")]
async fn the_fake_expires_continue_tokens_when_storage_is_compacted() {
    let env = Env::new(FLEET).await;
    let api: kube::Api<promoter::api::SveltosCluster> = kube::Api::all(env.client.clone());
    let page = |token: Option<&str>| {
        let mut params = kube::api::ListParams::default().limit(2);
        if let Some(t) = token {
            params = params.continue_token(t);
        }
        params
    };
    let first = api.list(&page(None)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    let second = api.list(&page(Some(&token))).await.unwrap();
    assert_eq!(second.items.len(), 2, "continued before any compaction");
    env.server.compact();
    match api.list(&page(Some(&token))).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"), "{s:?}");
            assert!(
                s.message
                    .starts_with("The provided continue parameter is too old"),
                "{s:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A new list works, and its token is fresh.
    let again = api.list(&page(None)).await.unwrap();
    let fresh = again.metadata.continue_.clone().unwrap();
    assert_eq!(api.list(&page(Some(&fresh))).await.unwrap().items.len(), 2);
    // The Status carries the inconsistent continuation: the rest of the list as it is now.
    let opts = |token: &str| promoter::fake::store::ListOptions {
        limit: Some(2),
        continue_token: Some(token.into()),
        ..Default::default()
    };
    let rt = promoter::fake::sveltos_cluster_type();
    let expired = env
        .server
        .store()
        .list(&rt, None, &opts(&token))
        .unwrap_err();
    let rest = expired
        .continue_token
        .clone()
        .expect("an inconsistent continuation");
    let rest = env.server.store().list(&rt, None, &opts(&rest)).unwrap();
    assert_eq!(rest["items"].as_array().unwrap().len(), 2, "{rest}");
    match api.list(&page(Some("not-a-token"))).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{s:?}");
            assert!(s.message.contains("invalid continue token"), "{s:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// More SveltosClusters than one page of promoter's lists, selected by no stage.
fn seed_clusters_beyond_a_page(env: &Env) {
    let mut store = env.server.store();
    for i in 0..2_100 {
        store
            .seed(
                &promoter::fake::sveltos_cluster_type(),
                promoter::sim::sveltos_cluster("bulk", &format!("c{i:04}"), &[("env", "bulk")]),
            )
            .unwrap();
    }
}

/// Before: a list whose continue token expired between its pages failed after its first page, and
/// every promotion that needed it waited for the next pass. Now it is listed again from the
/// beginning, once, as client-go's pager does; if that expires too, only the promotions that need
/// the list wait.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_whose_continue_token_expired_is_listed_again_once() {
    let env = Env::new(FLEET).await;
    env.apply_promotion(&promotion("done"));
    for _ in 0..30 {
        env.tick().await;
    }
    env.apply_promotion(&promotion("busy"));
    env.tick().await;
    seed_clusters_beyond_a_page(&env);

    // Compacted just before the second page: the list restarts, and the pass goes on.
    env.server.inject(FaultRule::nth(
        lists("sveltosclusters"),
        2,
        FaultAction::Compact,
    ));
    env.server.clear_requests();
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
    let s = &env.server;
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "sveltosclusters" && r.code == 410),
        1
    );
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "sveltosclusters"),
        4,
        "two pages, the second expired, then two pages again"
    );
    s.clear_faults();

    // Compacted before every page after the first: the restarted list expires too.
    s.inject(FaultRule::after(
        lists("sveltosclusters"),
        1,
        FaultAction::Compact,
    ));
    s.clear_requests();
    let r = pass(&env, &env.client, PassLimits::default()).await;
    let busy = report(&r, "busy");
    let error = busy.error.clone().unwrap_or_default();
    assert!(
        error.contains("not decided in this pass")
            && error.contains("inventory")
            && error.contains("continue"),
        "{busy:?}"
    );
    let d = report(&r, "done");
    assert!(d.error.is_none() && d.conflict.is_none(), "{d:?}");
    assert_eq!(s.writes(), 0);
    assert_eq!(
        s.count(|r| r.verb == "list" && r.resource == "sveltosclusters" && r.code == 410),
        2,
        "listed again once, not more"
    );
    s.clear_faults();
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
}

// A 422 on a record patch: only kube-apiserver's generic "patch does not apply" text is a lost race.

const MANUAL: &str = "kyverno-prog-rollout-man";

/// The blog's manual rollout, waiting for the staging approval, then approved by hand.
async fn approved_manual_rollout() -> Env {
    let env = Env::new(FLEET).await;
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-manual.yaml");
    let p = promoter::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone();
    env.apply_promotion(&p);
    for _ in 0..20 {
        env.tick().await;
    }
    assert_eq!(env.current_stage(MANUAL).as_deref(), Some("staging"));
    env.store_json_patch(
        MANUAL,
        json!([{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]),
    );
    env
}

fn approval_consumed(env: &Env) -> bool {
    env.promotion(MANUAL).unwrap().spec.stages[1]
        .manual_approval()
        .is_none()
}

/// The record patch that consumes an approval is refused as Invalid by the API server's own
/// validation (the annotations would pass their 256 KiB total): an error of this promotion, named,
/// never a lost race that the next pass would repeat forever.
#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_record_patch_is_an_error_not_a_lost_race() {
    let env = approved_manual_rollout().await;
    let annotations = env
        .promotion(MANUAL)
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    let used: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    let key = "example.com/notes";
    // 8 bytes below the limit: any record promoter adds goes over it.
    let filler = "x".repeat(262_144 - 8 - used - key.len());
    let mut all = annotations.clone();
    all.insert(key.to_string(), filler);
    env.store_json_patch(
        MANUAL,
        json!([{"op": "add", "path": "/metadata/annotations", "value": all}]),
    );
    env.server.clear_requests();
    let r = pass(&env, &env.client, PassLimits::default()).await;
    let m = report(&r, MANUAL);
    let error = m.error.clone().unwrap_or_default();
    assert!(
        m.conflict.is_none()
            && error.contains(&format!("ClusterPromotion {MANUAL}"))
            && error.contains("is invalid")
            && error.contains("metadata.annotations: Too long"),
        "{m:?}"
    );
    assert!(m.in_error(), "exit code 2: {m:?}");
    assert_eq!(
        env.server
            .count(|r| r.verb == "patch" && r.resource == "clusterpromotions" && r.code == 422),
        1
    );
    assert!(!approval_consumed(&env));
    // Once the annotation is gone, the approval is consumed.
    env.store_json_patch(
        MANUAL,
        json!([{"op": "remove", "path": "/metadata/annotations/example.com~1notes"}]),
    );
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
    assert!(approval_consumed(&env));
}

/// The same patch answered with kube-apiserver's generic 422 for a JSON patch that does not apply
/// (a `test` failed: someone wrote first) is a lost race: not an error, decided again next pass.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_patch_that_does_not_apply_is_a_lost_race() {
    let env = approved_manual_rollout().await;
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["patch"])
            .resource("clusterpromotions")
            .name(MANUAL),
        1,
        FaultAction::Answer(promoter::fake::ApiError::new(
            422,
            "Invalid",
            promoter::guard::PATCH_NOT_APPLIED,
        )),
    ));
    let r = pass(&env, &env.client, PassLimits::default()).await;
    let m = report(&r, MANUAL);
    assert!(m.error.is_none() && !m.in_error(), "{m:?}");
    assert!(
        m.conflict
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("ClusterPromotion {MANUAL}")),
        "{m:?}"
    );
    assert!(!approval_consumed(&env));
    let r = pass(&env, &env.client, PassLimits::default()).await;
    assert_eq!(r.errors(), 0, "{r:?}");
    assert!(approval_consumed(&env));
}
