//! Whole passes (`run_pass_for`) against the in-process fake API server: what `pass_body` decides,
//! writes, defers and reports, without an integration target's build. A fleet of three ready
//! clusters (dev, staging, prod) and the blog's automatic rollout.

use super::*;
use crate::annotations::outbox::{self, Entry, OUTBOX};
use crate::api::Timestamp;
use crate::fake::webhook::WebhookReceiver;
use crate::fake::{
    FakeApiServer, FaultAction, FaultRule, RequestMatcher, ResourceType, cluster_profile_type,
    cluster_promotion_type, promotion_freeze_type, sveltos_cluster_type,
};
use serde_json::{Value, json};

fn start() -> DateTime<Utc> {
    "2026-02-16T06:00:00Z".parse().unwrap()
}

struct Fleet {
    server: FakeApiServer,
    client: kube::Client,
}

async fn fleet() -> Fleet {
    let server = FakeApiServer::start_with_sveltos().await.unwrap();
    for (ns, name, env) in [
        ("dev", "dev01", "dev"),
        ("staging", "staging", "staging"),
        ("prod", "prod", "prod"),
    ] {
        server
            .store()
            .seed(
                &sveltos_cluster_type(),
                crate::sim::sveltos_cluster(ns, name, &[("env", env)]),
            )
            .unwrap();
    }
    let client = server.client().await.unwrap();
    Fleet { server, client }
}

/// The blog's automatic rollout as `name`, as JSON (to add annotations or break it).
fn rollout(name: &str) -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-auto.yaml");
    let mut p = crate::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone();
    p.metadata.name = Some(name.into());
    serde_json::to_value(p).unwrap()
}

/// A promotion promoter cannot decode (a delay in days).
fn undecodable(name: &str) -> Value {
    let mut p = rollout(name);
    p["spec"]["stages"][0]["trigger"]["auto"]["delay"] = json!("1d");
    p
}

fn opts(dry_run: bool) -> PassOptions {
    PassOptions {
        dry_run,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: start(),
        notifications: None,
    }
}

fn names(r: &PassReport) -> Vec<&str> {
    let mut names: Vec<&str> = r.promotions.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    names
}

fn report<'a>(r: &'a PassReport, name: &str) -> &'a PromotionReport {
    r.promotions
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} not in {r:?}"))
}

impl Fleet {
    fn add(&self, p: Value) {
        self.server
            .store()
            .seed(&cluster_promotion_type(), p)
            .unwrap();
    }

    fn stored(&self, name: &str) -> ClusterPromotion {
        let v = self
            .server
            .store()
            .get(&cluster_promotion_type(), "", name)
            .unwrap();
        serde_json::from_value(v).unwrap()
    }

    async fn pass(
        &self,
        opts: &PassOptions,
        limits: &PassLimits,
        only: Option<&str>,
    ) -> PassReport {
        run_pass_for(&self.client, &ChecksNotEvaluated, opts, limits, only)
            .await
            .unwrap()
    }

    /// Writes of any kind to `resource` so far.
    fn writes_to(&self, resource: &str) -> usize {
        self.server.count(|r| {
            r.resource == resource
                && ["create", "update", "patch", "delete"].contains(&r.verb.as_str())
        })
    }
}

#[tokio::test]
async fn every_promotion_is_decided_written_and_numbered_by_its_stage() {
    let f = fleet().await;
    f.add(rollout("a"));
    f.add(rollout("b"));
    let r = f.pass(&opts(false), &PassLimits::default(), None).await;
    assert_eq!(names(&r), ["a", "b"]);
    for name in ["a", "b"] {
        let p = report(&r, name);
        assert_eq!((p.stage.as_deref(), p.stage_index), (Some("dev"), Some(1)));
        assert!(
            p.error.is_none() && p.conflict.is_none() && p.deferred.is_none(),
            "{p:?}"
        );
        assert!(p.actions.iter().any(|a| a == "wrote status"), "{p:?}");
        let stored = f.stored(name).status.and_then(|s| s.current_stage_name);
        assert_eq!(stored.as_deref(), Some("dev"), "{name}");
    }
}

/// `promoter step NAME`: only that promotion is decided and reported, undecodable ones included.
#[tokio::test]
async fn a_pass_for_one_promotion_decides_and_reports_only_it() {
    let f = fleet().await;
    f.add(rollout("a"));
    f.add(rollout("b"));
    f.add(undecodable("bad"));
    let r = f
        .pass(&opts(false), &PassLimits::default(), Some("a"))
        .await;
    assert_eq!(names(&r), ["a"]);
    assert!(f.stored("b").status.is_none());
    let r = f
        .pass(&opts(false), &PassLimits::default(), Some("bad"))
        .await;
    assert_eq!(names(&r), ["bad"]);
}

/// The deadline passes while the pass reads (the freezes' list hangs past it and is given up): the
/// promotion that cannot be read is deferred, not reported as written, and nothing is written.
/// On tokio's paused clock (it moves only when every task waits), so the reads before the hung
/// list take no time on the pass's clock however busy the machine is.
#[tokio::test(start_paused = true)]
async fn past_the_deadline_an_undecodable_promotion_is_deferred_and_nothing_written() {
    let f = fleet().await;
    f.add(rollout("a"));
    f.add(undecodable("bad"));
    f.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["list"]).resource("promotionfreezes"),
        1,
        FaultAction::Hang(std::time::Duration::from_secs(60)),
    ));
    f.server.clear_requests();
    let limits = PassLimits {
        deadline: Some(tokio::time::Instant::now() + std::time::Duration::from_secs(5)),
        shard: None,
    };
    let r = f.pass(&opts(false), &limits, None).await;
    let bad = report(&r, "bad");
    assert!(
        bad.deferred
            .as_deref()
            .unwrap_or_default()
            .contains("deadline"),
        "{bad:?}"
    );
    assert!(
        bad.actions.is_empty() && bad.conflict.is_none() && bad.error.is_none(),
        "{bad:?}"
    );
    assert!(
        bad.summary
            .starts_with("cannot read this ClusterPromotion: spec.stages[0].trigger.auto.delay"),
        "{bad:?}"
    );
    assert!(report(&r, "a").undecided.is_some(), "{r:?}");
    assert_eq!(f.server.writes(), 0);
}

/// A dry run lists what it would write and writes nothing: no status, no revision sweep. The pass
/// after it does both.
#[tokio::test]
async fn a_dry_run_writes_nothing_and_the_pass_after_it_writes_and_sweeps() {
    let f = fleet().await;
    let mut a = rollout("a");
    a["metadata"]["annotations"] =
        json!({crate::annotations::REVISION_SWEEP: "2026-02-16T05:00:00Z"});
    f.add(a);
    f.server.clear_requests();
    let r = f.pass(&opts(true), &PassLimits::default(), None).await;
    let a = report(&r, "a");
    assert!(a.actions.iter().any(|x| x == "write status"), "{a:?}");
    assert!(!a.actions.iter().any(|x| x.contains("sweep")), "{a:?}");
    assert_eq!(f.server.writes(), 0);

    let r = f.pass(&opts(false), &PassLimits::default(), None).await;
    let a = report(&r, "a");
    assert!(a.actions.iter().any(|x| x == "wrote status"), "{a:?}");
    assert!(
        a.actions.iter().any(|x| x == "the revision sweep is done"),
        "{a:?}"
    );
}

/// The freezes' status is written by the first shard's pass only, never by a dry run nor by
/// `promoter step NAME`.
#[tokio::test]
async fn only_the_first_shard_writes_the_freezes_status() {
    let f = fleet().await;
    f.add(rollout("a"));
    f.server
        .store()
        .seed(
            &promotion_freeze_type(),
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                   "metadata": {"name": "holidays"}, "spec": {"reason": "CAB-1"}}),
        )
        .unwrap();
    let sharded = |index| PassLimits {
        deadline: None,
        shard: Some(shard::Shard { index, count: 2 }),
    };
    f.pass(&opts(true), &PassLimits::default(), None).await;
    f.pass(&opts(false), &PassLimits::default(), Some("a"))
        .await;
    f.pass(&opts(false), &sharded(1), None).await;
    assert_eq!(f.writes_to("promotionfreezes"), 0);
    f.pass(&opts(false), &sharded(0), None).await;
    assert_eq!(f.writes_to("promotionfreezes"), 1);
}

/// A profile to create that exists but was not listed (no promotion's label) is read first and
/// decided with: never created blindly over it.
#[tokio::test]
async fn a_profile_that_exists_unlisted_is_read_before_it_is_written() {
    let f = fleet().await;
    f.add(rollout("a"));
    f.server
        .store()
        .seed(
            &cluster_profile_type(),
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                   "metadata": {"name": "a-dev"}, "spec": {}}),
        )
        .unwrap();
    f.server.clear_requests();
    let r = f.pass(&opts(false), &PassLimits::default(), None).await;
    assert_eq!(
        f.server.count(|r| r.verb == "get"
            && r.resource == "clusterprofiles"
            && r.name.as_deref() == Some("a-dev")),
        1
    );
    let a = report(&r, "a");
    assert!(a.conflict.is_none(), "not a create that lost to it: {a:?}");
}

/// Notifications are sent in the pass that records them, from the promotion as written, and
/// the report counts them, a transition too old to send among them (dropped). A dry run sends
/// none.
#[tokio::test]
async fn a_pass_sends_what_it_records_and_counts_what_it_drops() {
    let f = fleet().await;
    let receiver = WebhookReceiver::start().await.unwrap();
    let location = notify::Location::default_location();
    let config = format!(
        "receivers:\n- {{name: hook, type: webhook, url: '{}'}}\nrules:\n- receivers: [hook]\nmaxAge: 1h\n",
        receiver.url("/hook")
    );
    f.server
        .store()
        .seed(
            &ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": location.name, "namespace": location.namespace},
                   "data": {notify::config::CONFIG_KEY: config}}),
        )
        .unwrap();
    // Recorded two hours ago with the status as it still is: too old to send now.
    let old = Entry {
        key: "old".into(),
        transition: "StageStarted".into(),
        reason: "StageProvisioning".into(),
        stage: Some("dev".into()),
        message: "Provisioning stage dev".into(),
        at: Timestamp::new(start() - chrono::Duration::hours(2)),
        revision: None,
        status: outbox::status_token(None),
        confirmed: true,
        to: Some([("hook".to_string(), Default::default())].into()),
    };
    let mut a = rollout("a");
    a["metadata"]["annotations"] = json!({OUTBOX: outbox::encode(&[old])});
    f.add(a);
    let with = |dry_run| PassOptions {
        notifications: Some(location.clone()),
        ..opts(dry_run)
    };
    let r = f.pass(&with(true), &PassLimits::default(), None).await;
    assert!(receiver.received().is_empty());
    let counts = report(&r, "a").notifications;
    assert_eq!(
        counts.map(|c| (c.sent, c.dropped)),
        Some((0, 1)),
        "what it would drop"
    );

    let r = f.pass(&with(false), &PassLimits::default(), None).await;
    let counts = report(&r, "a").notifications.unwrap_or_default();
    assert_eq!((counts.sent, counts.dropped), (1, 1), "{counts:?}");
    assert_eq!(receiver.received().len(), 1);
}

/// `decide_all` and `decide_all_until` (the library's entry points; no pass calls them): one
/// decision per promotion, in order.
#[tokio::test]
async fn every_promotion_has_its_decision_in_order() {
    let promotions: Vec<ClusterPromotion> = ["b", "a"]
        .iter()
        .map(|n| serde_json::from_value(rollout(n)).unwrap())
        .collect();
    let world = World::default();
    let ctx = Context {
        now: start(),
        default_tz: chrono_tz::Tz::UTC,
    };
    let all = decide_all(&promotions, &world, &ChecksNotEvaluated, &ctx).await;
    let named: Vec<&str> = all.iter().map(|d| d.promotion.as_str()).collect();
    assert_eq!(named, ["b", "a"]);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
    let until = decide_all_until(
        &promotions,
        &world,
        &ChecksNotEvaluated,
        &ctx,
        Some(deadline),
    )
    .await;
    assert_eq!(until, all);
}

/// Health checks that take a moment (they wait on a timer once) and fail; counts how many began
/// and how many finished.
#[derive(Default)]
struct SlowFailingChecks {
    began: std::sync::atomic::AtomicUsize,
    finished: std::sync::atomic::AtomicUsize,
}

impl HealthEvaluator for SlowFailingChecks {
    fn evaluate<'a>(
        &'a self,
        _promotion: &'a ClusterPromotion,
        _stage: &'a str,
        _world: &'a World,
    ) -> BoxFuture<'a, HealthVerdict> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            self.began.fetch_add(1, SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            self.finished.fetch_add(1, SeqCst);
            HealthVerdict::Failing("cert-manager: Degraded".into())
        })
    }
}

/// With a pass deadline far ahead, the health checks get until a little before it (the writes'
/// reserve), not an instant: checks that take a moment finish and their verdict is the stage's.
#[tokio::test]
async fn health_checks_run_to_their_verdict_when_the_deadline_is_far() {
    use std::sync::atomic::Ordering::SeqCst;
    let f = fleet().await;
    let now = std::sync::Arc::new(std::sync::Mutex::new(start()));
    let clock = now.clone();
    f.server
        .set_clock(std::sync::Arc::new(move || *clock.lock().unwrap()));
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/docs-cert-manager.yaml");
    let p = crate::manifest::load_file(&path).unwrap()[0]
        .promotion()
        .unwrap()
        .clone();
    f.add(serde_json::to_value(&p).unwrap());
    let addon = crate::sim::AddonController::default();
    let checks = SlowFailingChecks::default();
    let limits = PassLimits {
        deadline: Some(tokio::time::Instant::now() + std::time::Duration::from_secs(600)),
        shard: None,
    };
    for _ in 0..10 {
        let at = *now.lock().unwrap();
        let pass_opts = PassOptions {
            now: at,
            ..opts(false)
        };
        let r = run_pass_for(&f.client, &checks, &pass_opts, &limits, None)
            .await
            .unwrap();
        if checks.began.load(SeqCst) > 0 {
            let c = report(&r, "cert-manager-rollout-auto");
            assert_eq!(c.phase, Phase::ChecksFailing, "the checks' verdict: {c:?}");
            break;
        }
        addon.reconcile(&f.server, at);
        *now.lock().unwrap() += chrono::Duration::minutes(1);
    }
    assert!(
        checks.began.load(SeqCst) > 0,
        "the stage came to its checks"
    );
    assert_eq!(checks.finished.load(SeqCst), checks.began.load(SeqCst));
}

/// A new run rewrites the next stage's profile once the first stage completes again. That
/// stage's ClusterSummaries were not read by the pass (only the current stage's are), so they
/// are read before the profile is written (what Sveltos will redeploy goes into the record).
#[tokio::test]
async fn a_profile_rewritten_by_a_new_run_has_its_summaries_read_first() {
    let f = fleet().await;
    let now = std::sync::Arc::new(std::sync::Mutex::new(start()));
    let clock = now.clone();
    f.server
        .set_clock(std::sync::Arc::new(move || *clock.lock().unwrap()));
    f.add(rollout("a"));
    let addon = crate::sim::AddonController::default();
    let stage = || f.stored("a").status.and_then(|s| s.current_stage_name);
    let tick = async || {
        let at = *now.lock().unwrap();
        let r = f
            .pass(
                &PassOptions {
                    now: at,
                    ..opts(false)
                },
                &PassLimits::default(),
                None,
            )
            .await;
        assert_eq!(r.errors(), 0, "{r:?}");
        addon.reconcile(&f.server, at);
        *now.lock().unwrap() += chrono::Duration::minutes(1);
    };
    for _ in 0..20 {
        if stage().as_deref() == Some("staging") {
            break;
        }
        tick().await;
    }
    assert_eq!(stage().as_deref(), Some("staging"));
    {
        let rt = cluster_promotion_type();
        let mut store = f.server.store();
        let mut next = store.get(&rt, "", "a").unwrap();
        next["spec"]["profileSpec"]["helmCharts"][0]["chartVersion"] = json!("3.6.0");
        store.update(&rt, "", "a", next, false).unwrap();
    }
    let staging = |verb: &'static str| {
        f.server.count(move |r| {
            r.verb == verb
                && r.resource
                    == if verb == "list" {
                        "clustersummaries"
                    } else {
                        "clusterprofiles"
                    }
                && (r.name.as_deref() == Some("a-staging") || r.query.contains("a-staging"))
        })
    };
    for _ in 0..20 {
        f.server.clear_requests();
        tick().await;
        if staging("update") > 0 {
            assert_eq!(staging("list"), 1, "{:?}", f.server.requests());
            return;
        }
    }
    panic!("the new run never rewrote a-staging");
}
