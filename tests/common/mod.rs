//! A test world: the fake API server with a fleet, the simulated addon-controller, and a clock the
//! test controls. Each `tick` runs one promoter pass and then lets "Sveltos" react.

#![allow(dead_code)]

use chrono::{DateTime, Duration, TimeZone, Utc};
use promoter::api::{ClusterProfile, ClusterPromotion};
use promoter::fake::{
    FakeApiServer, cluster_profile_type, cluster_promotion_type, sveltos_cluster_type,
};
use promoter::health::HealthEngine;
use promoter::pass::{
    ChecksNotEvaluated, HealthEvaluator, HealthVerdict, PassOptions, PassReport, World, run_pass,
};
use promoter::sim::{AddonController, sveltos_cluster};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub struct Env {
    pub server: FakeApiServer,
    pub client: kube::Client,
    pub addon: AddonController,
    pub now: Arc<Mutex<DateTime<Utc>>>,
}

/// The ClusterPromotions of a file of `examples/`.
pub fn example(file: &str) -> Vec<ClusterPromotion> {
    let docs = promoter::manifest::load_file(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file),
    )
    .unwrap();
    docs.iter().filter_map(|d| d.promotion().cloned()).collect()
}

/// A fleet of `examples/fleets/`.
pub fn example_fleet(file: &str) -> promoter::sim::Fleet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/fleets")
        .join(file);
    promoter::sim::Fleet::parse(&std::fs::read_to_string(&path).unwrap(), file).unwrap()
}

pub fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap()
}

impl Env {
    /// A fleet of ready SveltosClusters `(namespace, name, env label)`.
    pub async fn new(clusters: &[(&str, &str, &str)]) -> Env {
        Env::on(FakeApiServer::start_with_sveltos().await.unwrap(), clusters).await
    }

    /// The blog's lab with one cluster per stage: `dev/dev01`, `staging/stg`, `prod/prod`.
    pub async fn lab() -> Env {
        Env::new(&[
            ("dev", "dev01", "dev"),
            ("staging", "stg", "staging"),
            ("prod", "prod", "prod"),
        ])
        .await
    }

    /// The same, on a server that does not serve promoter's own CRDs.
    pub async fn without_own_crds(clusters: &[(&str, &str, &str)]) -> Env {
        Env::on(
            FakeApiServer::start_with_sveltos_only().await.unwrap(),
            clusters,
        )
        .await
    }

    async fn on(server: FakeApiServer, clusters: &[(&str, &str, &str)]) -> Env {
        let now = Arc::new(Mutex::new(start_time()));
        let clock = now.clone();
        server.set_clock(Arc::new(move || *clock.lock().unwrap()));
        for (ns, name, env) in clusters {
            server
                .store()
                .seed(
                    &sveltos_cluster_type(),
                    sveltos_cluster(ns, name, &[("env", env)]),
                )
                .unwrap();
        }
        let client = server.client().await.unwrap();
        Env {
            server,
            client,
            addon: AddonController::default(),
            now,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap()
    }

    /// The health-check engine as `promoter step` runs it: evaluations in workers started from
    /// the real binary.
    pub fn health_engine(&self) -> HealthEngine {
        HealthEngine::new(self.client.clone(), self.now())
            .worker_program(env!("CARGO_BIN_EXE_promoter"))
    }

    pub fn advance(&self, d: Duration) {
        *self.now.lock().unwrap() += d;
    }

    /// Creates (or replaces the spec of) every ClusterPromotion in an example file.
    pub fn apply_example(&self, file: &str) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file);
        let docs = promoter::manifest::load_file(&path).unwrap();
        let mut names = Vec::new();
        for doc in docs {
            if let Some(p) = doc.promotion() {
                names.push(p.metadata.name.clone().unwrap());
                self.apply_promotion(p);
            }
        }
        names
    }

    pub fn apply_promotion(&self, p: &ClusterPromotion) {
        let rt = cluster_promotion_type();
        let mut store = self.server.store();
        let name = p.metadata.name.clone().unwrap();
        let body = serde_json::to_value(p).unwrap();
        match store.get(&rt, "", &name) {
            Ok(current) => {
                let mut next = current.clone();
                next["spec"] = body["spec"].clone();
                store.update(&rt, "", &name, next, false).unwrap();
            }
            Err(_) => {
                store.create(&rt, "", body).unwrap();
            }
        }
    }

    pub async fn pass(&self) -> PassReport {
        self.pass_with(&ChecksNotEvaluated).await
    }

    pub async fn pass_with(&self, health: &dyn HealthEvaluator) -> PassReport {
        let opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: chrono_tz::Tz::UTC,
            now: self.now(),
            notifications: None,
        };
        run_pass(&self.client, health, &opts).await.unwrap()
    }

    /// One minute of the world: a promoter pass, then Sveltos reacts, then the clock moves.
    pub async fn tick(&self) -> PassReport {
        let report = self.pass().await;
        self.addon.reconcile(&self.server, self.now());
        self.advance(Duration::minutes(1));
        report
    }

    pub fn promotion(&self, name: &str) -> Option<ClusterPromotion> {
        let v = self
            .server
            .store()
            .get(&cluster_promotion_type(), "", name)
            .ok()?;
        serde_json::from_value(v).ok()
    }

    pub fn profiles(&self) -> Vec<ClusterProfile> {
        self.server
            .store()
            .all(&cluster_profile_type())
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect()
    }

    /// The stored PromotionRevisions' names, sorted (read through the API, as `kubectl get prev`).
    pub async fn revision_names(&self) -> Vec<String> {
        let api: kube::Api<promoter::api::PromotionRevision> = kube::Api::all(self.client.clone());
        let mut names: Vec<String> = api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        names.sort();
        names
    }

    pub fn profile(&self, name: &str) -> Option<ClusterProfile> {
        self.profiles()
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }

    pub fn chart_version(&self, profile: &str) -> Option<String> {
        self.profile(profile)?
            .spec
            .fields
            .get("helmCharts")?
            .get(0)?
            .get("chartVersion")?
            .as_str()
            .map(String::from)
    }

    pub fn current_stage(&self, name: &str) -> Option<String> {
        self.promotion(name)?.status?.current_stage_name
    }

    pub fn description(&self, name: &str, stage: &str) -> Option<String> {
        let status = self.promotion(name)?.status?;
        status
            .stages?
            .into_iter()
            .find(|s| s.name == stage)?
            .current_status_description
    }

    /// Patches the promotion directly in the store: a user's edit, unaffected by injected faults.
    pub fn store_json_patch(&self, name: &str, patch: Value) {
        let rt = cluster_promotion_type();
        let mut store = self.server.store();
        let current = store.get(&rt, "", name).unwrap();
        let patched = promoter::fake::patch::json_patch(&current, &patch).unwrap();
        store.update(&rt, "", name, patched, false).unwrap();
    }

    /// Patches the promotion as `kubectl patch --type=json` would (through the API).
    pub async fn json_patch(&self, name: &str, patch: Value) {
        let api: kube::Api<ClusterPromotion> = kube::Api::all(self.client.clone());
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(p),
        )
        .await
        .unwrap();
    }
}

/// A client of the environment's API server authenticating as `user`, with promoter's own
/// connection policy (writes never replayed, reads retried; kube's default client replays any
/// verb on 429/503/504, which promoter never does) and a request timeout.
pub async fn client_as(env: &Env, user: &str, timeout_ms: u64) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&env.server.kubeconfig_yaml(user)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    promoter::client::from_config_with_timeout(config, std::time::Duration::from_millis(timeout_ms))
        .unwrap()
}

/// Health checks whose verdict the test sets (and may change between passes).
pub struct Scripted(pub Mutex<HealthVerdict>);

/// One ready cluster for every environment label the seed examples select.
pub const SEED_FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
    ("production", "production", "production"),
    ("development", "development", "development"),
    ("uat", "uat", "uat"),
];

/// Every stage's checks pass.
pub static ALL_HEALTHY: Scripted = Scripted(Mutex::new(HealthVerdict::Passed));

impl HealthEvaluator for Scripted {
    fn evaluate<'a>(
        &'a self,
        _: &'a ClusterPromotion,
        _: &'a str,
        _: &'a World,
    ) -> futures::future::BoxFuture<'a, HealthVerdict> {
        let v = self.0.lock().unwrap().clone();
        Box::pin(async move { v })
    }
}

/// A core/v1 Event about ClusterPromotion `p`, as Sveltos' addon-controller records one.
pub fn sveltos_event(message: &str) -> k8s_openapi::api::core::v1::Event {
    k8s_openapi::api::core::v1::Event {
        involved_object: k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("ClusterPromotion".into()),
            name: Some("p".into()),
            ..Default::default()
        },
        reason: Some("Sveltos".into()),
        message: Some(message.into()),
        type_: Some("Normal".into()),
        ..Default::default()
    }
}

/// The Events about one promotion, in the order they were written.
pub async fn events_of(env: &Env, name: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    use k8s_openapi::api::events::v1::Event;
    let api: kube::Api<Event> = kube::Api::namespaced(env.client.clone(), "default");
    let mut out: Vec<Event> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    out.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    out
}

pub fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Runs the real `promoter` binary against the environment's API server; (exit code, stdout, stderr).
pub fn promoter(env: &Env, args: &[&str]) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "promoter-cli-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, env.server.kubeconfig_yaml("admin")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("TZ")
        .env("USER", "alice")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The `.yaml` files of a folder of this repository, sorted.
pub fn yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    out.sort();
    out
}

/// An executable of this name on the PATH (kubectl, helm, …), for tests that use one when present.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|p| p.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs a command that must succeed (its stderr otherwise), and returns its stdout.
pub fn succeeded(command: &mut std::process::Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Parses into the typed object and back: an unknown (misspelt) field would not survive.
pub fn round_trip<K: serde::de::DeserializeOwned + serde::Serialize>(raw: &Value, what: &str) -> K {
    let obj: K = serde_json::from_value(raw.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        &serde_json::to_value(&obj).unwrap(),
        raw,
        "{what} has fields its type does not know"
    );
    obj
}

/// The fleet of the failure-policy tests: two dev clusters, staging, prod (label `env`).
pub const DEV_STAGING_PROD: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

/// The notification settings at their default place (`promoter-system/promoter-notifications`),
/// with `config` as the ConfigMap's `config.yaml`.
pub fn notification_rules(env: &Env, config: &str) {
    let configmaps =
        promoter::fake::ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true);
    env.server
        .store()
        .seed(
            &configmaps,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "promoter-notifications", "namespace": "promoter-system"},
                "data": {"config.yaml": config}}),
        )
        .unwrap();
}

/// The first promotion of `example` rolled out to completion, on a fleet where staging fails every
/// later deployment whose spec contains `breaks` (a chart version that breaks there); its name.
pub async fn completed_before_a_break(env: &mut Env, example: &str, breaks: &str) -> String {
    env.addon
        .failing
        .insert("staging/staging".into(), start_time());
    env.addon
        .failing_only
        .insert("staging/staging".into(), breaks.into());
    let name = env.apply_example(example)[0].clone();
    let mut ticks = 0;
    while !promoter::annotations::is_complete(&env.promotion(&name).unwrap()) {
        env.tick().await;
        ticks += 1;
        assert!(ticks < 40, "{name} never completed");
    }
    name
}

/// Refreshes `dashboard` until a refresh makes no list request: from then on every collection it
/// reads is answered from its watches. Fails after 30 s.
pub async fn refresh_until_watched(env: &Env, dashboard: &promoter::dashboard::Dashboard) {
    refresh_until_watched_on(&env.server, dashboard).await
}

/// [`refresh_until_watched`], the dashboard serving `server`'s cluster.
pub async fn refresh_until_watched_on(
    server: &FakeApiServer,
    dashboard: &promoter::dashboard::Dashboard,
) {
    let lists = || {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == "list")
            .count()
    };
    let settled = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let before = lists();
        dashboard.hub.refresh().await;
        if lists() == before {
            return;
        }
        assert!(
            std::time::Instant::now() < settled,
            "the reads never came from the watches"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
