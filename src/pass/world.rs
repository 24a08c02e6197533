//! What a pass observed, shared by the decisions of all promotions: the generated profiles, the
//! ClusterSummaries of the stages being checked, and the cluster inventory.

use crate::api::sveltos::PROMOTION_NAME_LABEL;
use crate::api::{ClusterProfile, ClusterSummary};
use std::collections::BTreeMap;
use std::fmt;

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

/// A managed cluster, from a SveltosCluster or a Cluster API Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryCluster {
    pub kind: ClusterKind,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// SveltosCluster `status.ready`; CAPI: control plane initialized.
    pub ready: bool,
    pub paused: bool,
    pub pull_mode: bool,
    /// SveltosCluster `spec.kubeconfigName` and `spec.kubeconfigKeyName` (health checks).
    pub kubeconfig_secret: Option<String>,
    pub kubeconfig_key: Option<String>,
}

impl fmt::Display for InventoryCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Debug, Default)]
pub struct World {
    /// Profiles labelled `config.projectsveltos.io/promotionname`, by name.
    pub profiles: BTreeMap<String, ClusterProfile>,
    /// ClusterSummaries by the value of their `projectsveltos.io/cluster-profile-name` label.
    pub summaries: BTreeMap<String, Vec<ClusterSummary>>,
    pub clusters: Vec<InventoryCluster>,
}

impl World {
    /// The profiles carrying this promotion's label.
    pub fn profiles_of<'a>(
        &'a self,
        promotion: &'a str,
    ) -> impl Iterator<Item = &'a ClusterProfile> + 'a {
        self.profiles.values().filter(move |p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(PROMOTION_NAME_LABEL))
                .is_some_and(|v| v == promotion)
        })
    }
}
