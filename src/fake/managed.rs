//! Managed clusters for tests and benchmarks of health checks: fake API servers (or any URL)
//! reached through kubeconfig Secrets in the (fake) management cluster, as promoter reaches real
//! ones ([`crate::health::access`]).

use super::{ApiError, FakeApiServer, ResourceType, secret_type};
use base64::Engine;
use serde_json::{Value, json};

/// The user managed clusters' kubeconfigs authenticate as.
pub const USER: &str = "promoter";

/// A self-signed CA, as every real kubeconfig carries one: without it, kube's client loads the
/// platform's whole trust store for each cluster (CPU that a debug build under a parallel test run
/// does not have to spare). The servers it is used with speak plain HTTP.
pub const TEST_CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpVENDQVMrZ0F3SUJBZ0lVSEo0NmRYOG1XSDNKVUt6NWpiQ0FTTnJIRjZRd0NnWUlLb1pJemowRUF3SXcKR2pFWU1CWUdBMVVFQXd3UFptRnJaUzFqYkhWemRHVnlMV05oTUI0WERUSTJNVEV5TXpFNE16WTBOVm9YRFRNMgpNVEV5TURFNE16WTBOVm93R2pFWU1CWUdBMVVFQXd3UFptRnJaUzFqYkhWemRHVnlMV05oTUZrd0V3WUhLb1pJCnpqMENBUVlJS29aSXpqMERBUWNEUWdBRTdMMCtPSC9uVEtnem1WM2hKYjB5ZUpraU9tQmFvMWNjNWxuZ0xiSnkKb2dhcFFJREJYTnBjUDREVmlSakY1UXNDZE5vUHBTdnBTdUQ0eTN4RVgwVlgvS05UTUZFd0hRWURWUjBPQkJZRQpGTW4rUGR0TGdyRng1bjVpNnFwWVZjUlZFaFlvTUI4R0ExVWRJd1FZTUJhQUZNbitQZHRMZ3JGeDVuNWk2cXBZClZjUlZFaFlvTUE4R0ExVWRFd0VCL3dRRk1BTUJBZjh3Q2dZSUtvWkl6ajBFQXdJRFNBQXdSUUloQVBLRnFScDYKNEMrUFFUdktkQjdwOURKeXRtZHZmMUE3RmF1MS9yU0V2TUViQWlBVGpYb1YyZzRZaENrUHdzWnhiaFUvSFVRZQpFQkZibkFRVXVWeWkyb0dTSGc9PQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";

/// A kubeconfig for the API server at `url` (a bearer token, and [`TEST_CA`]).
pub fn kubeconfig_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n    certificate-authority-data: {TEST_CA}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    )
}

/// The Secret through which promoter reaches SveltosCluster `namespace/name`: Sveltos' default
/// name `<name>-sveltos-kubeconfig`, the kubeconfig under the key `kubeconfig`.
pub fn kubeconfig_secret(namespace: &str, name: &str, kubeconfig: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": format!("{name}-sveltos-kubeconfig"), "namespace": namespace},
           "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}})
}

impl FakeApiServer {
    /// Stores [`kubeconfig_secret`] in this (management) server.
    pub fn seed_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        kubeconfig: &str,
    ) -> Result<Value, ApiError> {
        self.store().seed(
            &secret_type(),
            kubeconfig_secret(namespace, name, kubeconfig),
        )
    }
}

/// apps/v1 Deployments.
pub fn deployment_type() -> ResourceType {
    ResourceType::builtin("apps", "v1", "Deployment", "deployments", true)
}

/// cert-manager's ClusterIssuers, which the Sveltos docs' health check reads
/// (`examples/docs-cert-manager.yaml`).
pub fn cluster_issuer_type() -> ResourceType {
    ResourceType::custom(
        "cert-manager.io",
        "v1",
        "ClusterIssuer",
        "clusterissuers",
        false,
    )
}

/// The ClusterIssuer `cloudflare-issuer` that check reads, Ready or not.
pub fn cluster_issuer(ready: bool) -> (ResourceType, Value) {
    (
        cluster_issuer_type(),
        json!({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": "cloudflare-issuer"},
               "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}),
    )
}

/// The Secret `cert-manager/cloudflare-api-token` that check reads.
pub fn cloudflare_token_secret() -> (ResourceType, Value) {
    (
        secret_type(),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cloudflare-api-token", "namespace": "cert-manager"}, "data": {"api-token": "eA=="}}),
    )
}

/// A fake managed cluster serving `types` and holding `objects`, reached from `mgmt` as each
/// SveltosCluster `namespace/<name>` of `names` (through its kubeconfig Secret, as [`USER`]).
pub async fn managed_cluster(
    mgmt: &FakeApiServer,
    namespace: &str,
    names: &[&str],
    types: &[ResourceType],
    objects: Vec<(ResourceType, Value)>,
) -> anyhow::Result<FakeApiServer> {
    let cluster = FakeApiServer::start().await?;
    for rt in types {
        cluster.register(rt.clone());
    }
    for (rt, obj) in objects {
        cluster
            .store()
            .seed(&rt, obj)
            .map_err(|e| anyhow::anyhow!("seeding the managed cluster: {e}"))?;
    }
    for name in names {
        mgmt.seed_kubeconfig(namespace, name, &cluster.kubeconfig_yaml(USER))
            .map_err(|e| anyhow::anyhow!("seeding the kubeconfig of {namespace}/{name}: {e}"))?;
    }
    Ok(cluster)
}

/// A managed cluster on which the Sveltos docs' cert-manager check passes (a Ready ClusterIssuer
/// and the token Secret), reached as SveltosCluster `namespace/name`.
pub async fn cert_manager_cluster(
    mgmt: &FakeApiServer,
    namespace: &str,
    name: &str,
) -> anyhow::Result<FakeApiServer> {
    managed_cluster(
        mgmt,
        namespace,
        &[name],
        &[secret_type(), cluster_issuer_type()],
        vec![cluster_issuer(true), cloudflare_token_secret()],
    )
    .await
}
