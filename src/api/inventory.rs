//! The cluster inventory: libsveltos `SveltosCluster` (typed) and Cluster API `Cluster`, read as a
//! dynamic object because its served version (v1beta1 or v1beta2) depends on the installation.

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The inventory a managed cluster comes from: a SveltosCluster or a Cluster API Cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClusterKind {
    Sveltos,
    Capi,
}

impl ClusterKind {
    /// The value of ClusterSummary `spec.clusterType`.
    pub fn cluster_type(self) -> &'static str {
        match self {
            ClusterKind::Sveltos => "Sveltos",
            ClusterKind::Capi => "Capi",
        }
    }
    /// The infix of ClusterSummary names (`<profile>-sveltos-<cluster>`).
    pub fn summary_infix(self) -> &'static str {
        match self {
            ClusterKind::Sveltos => "sveltos",
            ClusterKind::Capi => "capi",
        }
    }
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "lib.projectsveltos.io",
    version = "v1beta1",
    kind = "SveltosCluster",
    plural = "sveltosclusters",
    namespaced,
    status = "SveltosClusterStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct SveltosClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_key_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SveltosClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

pub const CAPI_GROUP: &str = "cluster.x-k8s.io";

/// The facts promoter needs from a Cluster API `Cluster`, read from either served version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapiClusterFacts {
    pub paused: bool,
    pub control_plane_initialized: bool,
}

impl CapiClusterFacts {
    /// `spec.paused`; v1beta2 `status.initialization.controlPlaneInitialized`, or v1beta1
    /// `status.controlPlaneReady` or a true `ControlPlaneInitialized` condition.
    pub fn from_object(obj: &Value) -> Self {
        let paused = obj
            .pointer("/spec/paused")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let v1beta2 = obj
            .pointer("/status/initialization/controlPlaneInitialized")
            .and_then(Value::as_bool);
        let v1beta1_ready = obj
            .pointer("/status/controlPlaneReady")
            .and_then(Value::as_bool);
        let condition = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True");
        CapiClusterFacts {
            paused,
            control_plane_initialized: v1beta2.unwrap_or(false)
                || v1beta1_ready.unwrap_or(false)
                || condition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capi_facts_from_both_versions() {
        let v2 = json!({"spec": {"paused": true}, "status": {"initialization": {"controlPlaneInitialized": true}}});
        assert_eq!(
            CapiClusterFacts::from_object(&v2),
            CapiClusterFacts {
                paused: true,
                control_plane_initialized: true
            }
        );
        let v1 = json!({"status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}});
        assert!(CapiClusterFacts::from_object(&v1).control_plane_initialized);
        assert!(!CapiClusterFacts::from_object(&json!({})).control_plane_initialized);
    }
}
