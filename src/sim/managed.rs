//! Simulated managed clusters for health checks: each fleet cluster gets its own fake API server
//! holding the objects the fleet file lists, and a kubeconfig Secret in the simulated management
//! cluster, so that promoter's real health-check engine reaches it as it would a real one.

use super::fleet::Fleet;
use crate::fake::{FakeApiServer, ResourceType};
use base64::Engine;
use serde_json::{Value, json};

/// Kinds every simulated cluster serves, whatever its objects.
fn common_types() -> Vec<ResourceType> {
    vec![
        crate::fake::secret_type(),
        ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true),
        ResourceType::builtin("", "v1", "Pod", "pods", true),
        ResourceType::builtin("apps", "v1", "Deployment", "deployments", true),
        ResourceType::builtin("apps", "v1", "StatefulSet", "statefulsets", true),
        ResourceType::builtin("apps", "v1", "DaemonSet", "daemonsets", true),
        ResourceType::builtin("batch", "v1", "Job", "jobs", true),
    ]
}

/// The resource type of an object the fleet lists: a common kind, or one derived from the object
/// (plural = lowercase kind + "s"; namespaced when it has a namespace).
fn type_of(obj: &Value) -> Option<ResourceType> {
    let api_version = obj["apiVersion"].as_str()?;
    let kind = obj["kind"].as_str()?;
    if let Some(t) = common_types()
        .into_iter()
        .find(|t| t.api_version() == api_version && t.kind == kind)
    {
        return Some(t);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let namespaced = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    Some(ResourceType::custom(
        group,
        version,
        kind,
        &format!("{}s", kind.to_lowercase()),
        namespaced,
    ))
}

/// Starts one server per fleet cluster and records its kubeconfig Secret in the management server.
pub async fn start(fleet: &Fleet, mgmt: &FakeApiServer) -> anyhow::Result<Vec<FakeApiServer>> {
    let mut servers = Vec::new();
    for c in &fleet.clusters {
        let server = FakeApiServer::start().await?;
        for t in common_types() {
            server.register(t);
        }
        for obj in &c.objects {
            let t = type_of(obj).ok_or_else(|| {
                anyhow::anyhow!("cluster {}: an object without apiVersion or kind", c.key())
            })?;
            if server
                .store()
                .resource(&t.group, &t.version, &t.plural)
                .is_none()
            {
                server.register(t.clone());
            }
            server
                .store()
                .seed(&t, obj.clone())
                .map_err(|e| anyhow::anyhow!("cluster {}: {}", c.key(), e.message))?;
        }
        let kubeconfig =
            base64::engine::general_purpose::STANDARD.encode(server.kubeconfig_yaml("promoter"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{}-sveltos-kubeconfig", c.name), "namespace": c.namespace},
            "data": {"kubeconfig": kubeconfig}});
        mgmt.store()
            .seed(&crate::fake::secret_type(), secret)
            .map_err(|e| anyhow::anyhow!("cluster {}: {}", c.key(), e.message))?;
        servers.push(server);
    }
    Ok(servers)
}
