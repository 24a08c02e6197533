//! An in-process fake Kubernetes API server, served over HTTP on loopback so that tests (and the
//! simulator) go through kube's real client.
//!
//! It implements what promoter relies on as the real API server does: resources by
//! group/version/plural, discovery, get/list (label and field selectors, `limit`/`continue`, continue
//! tokens that expire when the storage is compacted), create,
//! update with optimistic concurrency, merge and JSON patch (the `json-patch` crate), delete with
//! finalizers and owner-reference garbage collection, the status subresource, and the same status
//! codes and `Status` bodies. Requests are logged and counted; faults can be injected; an
//! [`Authorizer`] decides access.
//!
//! Custom resources registered from CRD documents ([`Store::register_crd`]; the Sveltos types from
//! upstream's CRDs vendored in `src/fake/crds/`) get the apiextensions semantics of
//! [`schema`]: unknown fields pruned, defaults filled at every depth, structural validation, list-type
//! uniqueness and `x-kubernetes-validations` CEL rules, with the real 422 texts and causes, on
//! create, update, patch and status writes (and seeded fixtures). Every kind's metadata is validated
//! as `ValidateObjectMeta` does ([`meta`]: names, generateName, labels, annotations), and
//! events.k8s.io/v1 Events as `ValidateEventCreate` does. core/v1 and events.k8s.io/v1 Events are
//! one resource, as on a real server ([`events`]): written through either API, read through both,
//! with the real field selectors (`involvedObject.name`, `regarding.name`, `type!=Normal`, …). A
//! main-resource write ignores `status`, a `/status` write ignores everything else, and
//! `generation` moves only with the spec (and when a deletion starts).
//!
//! Every write is stamped in `managedFields` as the real field manager stamps it: per manager
//! (`fieldManager`, else the User-Agent's first word), operation and subresource, at the server's
//! clock, only when it changes something ([`managed_fields`]).
//!
//! Watches are served as the real server's watch cache serves them ([`watch`]: bookmarks,
//! `sendInitialEvents`, 410 on a compacted or too old `resourceVersion`).
//!
//! Known differences from a real server: no admission webhooks; server-side apply is
//! approximated by a merge patch (conflicts between managers are not detected), and field sets are
//! kept two levels deep rather than to the leaves; foreground deletion behaves
//! as background; namespaces need not exist; `resourceVersion` on a list is always "the latest";
//! types registered without a CRD ([`ResourceType::custom`], built-ins) have no schema, so their
//! bodies are stored as given apart from metadata validation; CEL rules run on cel-interpreter (not
//! cel-go) without cost limits and with Kubernetes' CEL libraries absent; validation ratcheting is
//! approximated (unchanged subtrees, correlated through object properties and map lists, are not
//! re-validated); Event updates are not validated as `ValidateEventUpdate` does; generated names take
//! 5 characters from the real alphabet but deterministically.

pub mod api_error;
mod control;
pub mod events;
pub mod field;
mod http;
pub mod managed;
pub mod managed_fields;
pub mod meta;
mod own_kinds;
pub mod patch;
pub mod rbac;
pub mod resource_type;
pub mod schema;
pub mod store;
pub mod watch;
pub mod webhook;

pub use api_error::ApiError;
pub use control::{
    AllowAll, Attributes, Authorizer, FaultAction, FaultRule, RequestMatcher, RequestRecord,
};
pub use own_kinds::{promotion_freeze_type, promotion_revision_type};
pub use resource_type::ResourceType;
pub use store::{Clock, Store};

use anyhow::Context;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use tokio::net::TcpListener;

/// Serves HTTP/1 on 127.0.0.1, on a free port, answering every request with `handle`, until the
/// returned task is aborted. `what` names the server in errors.
pub async fn serve_loopback<F, Fut, E, B>(
    what: &str,
    handle: F,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)>
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<hyper::Response<B>, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .with_context(|| format!("binding {what} to loopback"))?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                // A client that goes away mid-request is not an error of the server.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
    Ok((addr, task))
}

/// A kubeconfig for an API server that is not there: a loopback port nothing listens on.
pub fn unreachable_kubeconfig_yaml() -> anyhow::Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\n"
    ))
}

pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) log: Mutex<Vec<RequestRecord>>,
    pub(crate) faults: Mutex<Vec<FaultRule>>,
    pub(crate) authorizer: RwLock<Arc<dyn Authorizer>>,
    /// The groups each user is in, as the authenticator knows them ([`FakeApiServer::set_groups`]).
    pub(crate) groups: RwLock<std::collections::BTreeMap<String, Vec<String>>>,
    /// Called after every applied write, with the store still locked, and the writer's user.
    pub(crate) write_hooks: Mutex<Vec<WriteHook>>,
}

/// A check of the whole state after each applied write (see [`FakeApiServer::on_write`]).
pub type WriteHook = Arc<dyn Fn(&Store, &str) + Send + Sync>;

/// A running fake API server; it stops when dropped.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The user the default client authenticates as (its bearer token is the user name).
pub const ADMIN: &str = "admin";

impl FakeApiServer {
    /// Starts an empty server (no resource types) on 127.0.0.1 with a free port.
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new(Arc::new(chrono::Utc::now))),
            log: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            authorizer: RwLock::new(Arc::new(AllowAll)),
            groups: RwLock::new(Default::default()),
            write_hooks: Mutex::new(Vec::new()),
        });
        // Watches can resume from any revision from now on (within the history kept).
        shared
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .journal();
        let served = shared.clone();
        let (addr, task) = serve_loopback("the fake API server", move |req| {
            http::handle(served.clone(), req)
        })
        .await?;
        Ok(FakeApiServer { shared, addr, task })
    }

    /// Starts a server that serves the types promoter reads and writes: ClusterPromotion,
    /// ClusterProfile, ClusterSummary, SveltosCluster, Secret, ConfigMap, Namespace and Events,
    /// and promoter's own PromotionFreeze and PromotionRevision. The Sveltos types are registered
    /// from upstream's CRDs (vendored in `src/fake/crds/`), promoter's from the CRDs generated
    /// from its types, so they are pruned, defaulted and validated as a real server does.
    pub async fn start_with_sveltos() -> anyhow::Result<Self> {
        let server = Self::start_with_sveltos_only().await?;
        own_kinds::register_own_crds(&mut server.store())
            .map_err(|e| anyhow::anyhow!("registering promoter's own CRDs: {e}"))?;
        Ok(server)
    }

    /// A cluster where Sveltos is installed and promoter's own CRDs are not (`promoter crd --own`
    /// not applied): `promoter.dev` is not served at all, as on a real server.
    pub async fn start_with_sveltos_only() -> anyhow::Result<Self> {
        let server = Self::start().await?;
        register_sveltos_only(&mut server.store())?;
        Ok(server)
    }

    /// Serves a custom resource from its CRD (YAML), replacing any earlier registration of it.
    pub fn register_crd_yaml(&self, yaml: &str) -> Result<ResourceType, String> {
        self.store().register_crd_yaml(yaml)
    }

    pub fn register(&self, rt: ResourceType) {
        self.store().register(rt);
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Direct access to the objects, bypassing HTTP (fixtures and assertions).
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.shared.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The storage is compacted now (kube-apiserver does it every 5 minutes): list continue tokens
    /// issued before are expired, answered 410 Expired ([`Store::compact`]).
    pub fn compact(&self) {
        self.store().compact();
    }

    pub fn set_clock(&self, clock: Clock) {
        self.store().set_clock(clock);
    }

    /// A kubeconfig that reaches this server, authenticating as `user`.
    pub fn kubeconfig_yaml(&self, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: {user}\n  user:\n    token: {user}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: {user}\ncurrent-context: fake\n",
            self.url()
        )
    }

    /// A kube client for this server, authenticating as `user`, with promoter's connection policy
    /// (reads retried, writes sent once: [`crate::client::retry`]).
    pub async fn client_as(&self, user: &str) -> anyhow::Result<kube::Client> {
        crate::client::from_config(self.config_as(user).await?)
    }

    /// kube's client as it comes, without promoter's policy (kube's own retries of 429/503/504
    /// included): tests of the fake server itself.
    pub async fn plain_client_as(&self, user: &str) -> anyhow::Result<kube::Client> {
        Ok(kube::Client::try_from(self.config_as(user).await?)?)
    }

    async fn config_as(&self, user: &str) -> anyhow::Result<kube::Config> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml(user))?;
        Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)
    }

    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.client_as(ADMIN).await
    }

    /// The admin's client for watch requests (`client::for_watches`).
    pub async fn watch_client(&self) -> anyhow::Result<kube::Client> {
        crate::client::for_watches(self.config_as(ADMIN).await?)
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn clear_requests(&self) {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    pub fn count(&self, pred: impl Fn(&RequestRecord) -> bool) -> usize {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|r| pred(r))
            .count()
    }

    pub fn writes(&self) -> usize {
        self.count(RequestRecord::is_write)
    }

    pub fn inject(&self, fault: FaultRule) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fault);
    }

    pub fn clear_faults(&self) {
        self.shared
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Runs `hook` after every write applied through HTTP, before any other request is served: a
    /// safety oracle sees each intermediate state. Writes made directly on the store are not seen.
    pub fn on_write(&self, hook: WriteHook) {
        self.shared
            .write_hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
    }

    /// The groups `user` authenticates with (besides `system:authenticated`), as an identity
    /// provider would put them in its token.
    pub fn set_groups(&self, user: &str, groups: &[&str]) {
        self.shared
            .groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(user.into(), groups.iter().map(|g| g.to_string()).collect());
    }

    pub fn set_authorizer(&self, authorizer: Arc<dyn Authorizer>) {
        *self
            .shared
            .authorizer
            .write()
            .unwrap_or_else(|p| p.into_inner()) = authorizer;
    }
}

pub fn cluster_promotion_type() -> ResourceType {
    ResourceType::custom(
        "config.projectsveltos.io",
        "v1beta1",
        "ClusterPromotion",
        "clusterpromotions",
        false,
    )
}
/// core/v1 Secrets (kubeconfigs of managed clusters).
pub fn secret_type() -> ResourceType {
    ResourceType::builtin("", "v1", "Secret", "secrets", true)
}

pub fn cluster_profile_type() -> ResourceType {
    ResourceType::custom(
        "config.projectsveltos.io",
        "v1beta1",
        "ClusterProfile",
        "clusterprofiles",
        false,
    )
}
pub fn cluster_summary_type() -> ResourceType {
    ResourceType::custom(
        "config.projectsveltos.io",
        "v1beta1",
        "ClusterSummary",
        "clustersummaries",
        true,
    )
}
pub fn sveltos_cluster_type() -> ResourceType {
    ResourceType::custom(
        "lib.projectsveltos.io",
        "v1beta1",
        "SveltosCluster",
        "sveltosclusters",
        true,
    )
}
/// Cluster API `Cluster`, served only when a test or fleet asks for it (absent CRD = no CAPI).
pub fn capi_cluster_type() -> ResourceType {
    ResourceType::custom("cluster.x-k8s.io", "v1beta1", "Cluster", "clusters", true)
}

/// Registers what [`FakeApiServer::start_with_sveltos`] serves in a store of its own (the model
/// checker's, which applies requests without HTTP).
pub fn register_sveltos(store: &mut Store) -> anyhow::Result<()> {
    register_sveltos_only(store)?;
    own_kinds::register_own_crds(store)
        .map_err(|e| anyhow::anyhow!("registering promoter's own CRDs: {e}"))
}

/// Sveltos' types, from its vendored CRDs (without promoter's own).
fn register_sveltos_only(store: &mut Store) -> anyhow::Result<()> {
    for rt in sveltos_types() {
        store.register(rt);
    }
    let compiled = SVELTOS_COMPILED
        .as_ref()
        .map_err(|e| anyhow::anyhow!("registering a vendored CRD: {e}"))?;
    for (rt, schema) in compiled {
        store.register_compiled(rt.clone(), schema.clone());
    }
    Ok(())
}

/// Sveltos' vendored CRDs (530 kB of YAML), read and compiled once per process: every server a
/// test starts registers them (hundreds per test binary), and a compiled schema is immutable.
static SVELTOS_COMPILED: std::sync::LazyLock<Result<Vec<store::CompiledCrd>, String>> =
    std::sync::LazyLock::new(|| {
        schema::SVELTOS_CRDS
            .iter()
            .map(|yaml| {
                let crd: serde_json::Value =
                    serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
                store::compile_crd(&crd)
            })
            .collect()
    });

pub fn sveltos_types() -> Vec<ResourceType> {
    vec![
        cluster_promotion_type(),
        cluster_profile_type(),
        cluster_summary_type(),
        sveltos_cluster_type(),
        ResourceType::builtin("", "v1", "Namespace", "namespaces", false),
        secret_type(),
        ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true),
        ResourceType::builtin("", "v1", "Event", "events", true),
        ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true),
    ]
}

#[cfg(test)]
mod compiled_once_tests {
    use super::*;

    fn registered() -> Store {
        let mut store = Store::new(Arc::new(chrono::Utc::now));
        register_sveltos(&mut store).unwrap();
        store
    }

    #[test]
    fn every_server_shares_the_crds_compiled_once_and_a_new_crd_is_its_own() {
        let (mut a, b) = (registered(), registered());
        for rt in [cluster_promotion_type(), own_kinds::promotion_freeze_type()] {
            let (sa, sb) = (a.schema(&rt).unwrap(), b.schema(&rt).unwrap());
            assert!(Arc::ptr_eq(&sa, &sb), "{} compiled twice", rt.kind);
        }
        // A CRD registered by hand (a CRD upgrade in a test) replaces one store's schema only.
        a.register_crd_yaml(schema::SVELTOS_CRDS[0]).unwrap();
        let rt = cluster_promotion_type();
        assert!(!Arc::ptr_eq(
            &a.schema(&rt).unwrap(),
            &b.schema(&rt).unwrap()
        ));
        assert!(Arc::ptr_eq(
            &registered().schema(&rt).unwrap(),
            &b.schema(&rt).unwrap()
        ));
    }
}
