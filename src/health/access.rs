//! Reaching a managed cluster from the management cluster, as libsveltos' clusterproxy does:
//!
//! * SveltosCluster: the Secret `spec.kubeconfigName` (default `<cluster>-sveltos-kubeconfig`) in the
//!   cluster's namespace, key `spec.kubeconfigKeyName`; without a key name, the only key, else the
//!   first of `re-kubeconfig`, `kubeconfig`, `value` present, else the first key in sorted order
//!   (upstream takes an arbitrary one).
//! * Cluster API Cluster: the Secret `<cluster>-kubeconfig`, key `value`.
//! * Pull-mode clusters cannot be reached: their agent pulls; the checks wait, saying why.

use crate::pass::{ClusterKind, InventoryCluster};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use std::time::Duration;

/// Per-request timeouts towards a managed cluster: a dead cluster must not hang the pass.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting to a managed cluster: a black-holed address costs at most this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub fn secret_and_key(c: &InventoryCluster) -> (String, Option<String>) {
    match c.kind {
        ClusterKind::Sveltos => (
            c.kubeconfig_secret
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("{}-sveltos-kubeconfig", c.name)),
            c.kubeconfig_key.clone().filter(|k| !k.is_empty()),
        ),
        ClusterKind::Capi => (format!("{}-kubeconfig", c.name), Some("value".into())),
    }
}

/// The deterministic choice among a Secret's keys when none is named.
pub fn choose_key<'a>(keys: impl Iterator<Item = &'a String>) -> Option<String> {
    let mut keys: Vec<&String> = keys.collect();
    keys.sort();
    if keys.len() == 1 {
        return Some(keys[0].clone());
    }
    ["re-kubeconfig", "kubeconfig", "value"]
        .iter()
        .find(|k| keys.iter().any(|x| x == *k))
        .map(|k| k.to_string())
        .or_else(|| keys.first().map(|k| k.to_string()))
}

/// A client for the managed cluster, or the reason it cannot be reached.
pub async fn client_for(mgmt: &kube::Client, c: &InventoryCluster) -> Result<kube::Client, String> {
    if c.pull_mode {
        return Err("is in pull mode: its agent pulls its configuration, so promoter cannot reach it to run health checks".into());
    }
    let (name, key) = secret_and_key(c);
    let secrets: Api<Secret> = Api::namespaced(mgmt.clone(), &c.namespace);
    let secret = match secrets.get(&name).await {
        Ok(s) => s,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Err(format!(
                "kubeconfig Secret {}/{name} not found",
                c.namespace
            ));
        }
        Err(e) => {
            return Err(format!(
                "reading kubeconfig Secret {}/{name}: {}",
                c.namespace,
                crate::cli_error::line(&e)
            ));
        }
    };
    let data = secret.data.unwrap_or_default();
    let key = key
        .or_else(|| choose_key(data.keys()))
        .ok_or_else(|| format!("kubeconfig Secret {}/{name} is empty", c.namespace))?;
    let bytes = data.get(&key).ok_or_else(|| {
        format!(
            "kubeconfig Secret {}/{name} has no key {key:?}",
            c.namespace
        )
    })?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| {
        format!(
            "kubeconfig in {}/{name} key {key:?} is not text",
            c.namespace
        )
    })?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(text).map_err(|e| {
        format!(
            "kubeconfig in {}/{name} key {key:?} is invalid: {e}",
            c.namespace
        )
    })?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| {
            format!(
                "kubeconfig in {}/{name} key {key:?} is unusable: {e}",
                c.namespace
            )
        })?;
    config.default_retry = false;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(CLUSTER_TIMEOUT);
    config.write_timeout = Some(CLUSTER_TIMEOUT);
    crate::client::managed(config)
        .map_err(|e| format!("building a client from {}/{name}: {e}", c.namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_choice_is_deterministic() {
        let k = |v: &[&str]| choose_key(v.iter().map(|s| s.to_string()).collect::<Vec<_>>().iter());
        assert_eq!(k(&["only"]).as_deref(), Some("only"));
        assert_eq!(
            k(&["value", "kubeconfig", "re-kubeconfig"]).as_deref(),
            Some("re-kubeconfig")
        );
        assert_eq!(k(&["value", "kubeconfig"]).as_deref(), Some("kubeconfig"));
        assert_eq!(k(&["b", "a"]).as_deref(), Some("a"));
        assert_eq!(k(&[]), None);
    }
}
