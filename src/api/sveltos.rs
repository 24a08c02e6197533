//! What Sveltos itself owns and promoter reads or writes: ClusterProfile and ClusterSummary.
//! Only the fields promoter uses are typed; everything else is kept as it came.

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const PROMOTION_NAME_LABEL: &str = "config.projectsveltos.io/promotionname";
pub const PROMOTION_VERIFICATION_LABEL: &str = "config.projectsveltos.io/promotion-verification";
pub const STAGE_NAME_ANNOTATION: &str = "config.projectsveltos.io/stagename";
pub const CLUSTER_PROFILE_NAME_LABEL: &str = "projectsveltos.io/cluster-profile-name";
pub const CLUSTER_NAME_LABEL: &str = "projectsveltos.io/cluster-name";
pub const CLUSTER_TYPE_LABEL: &str = "projectsveltos.io/cluster-type";
pub const SERVICE_ACCOUNT_NAME_LABEL: &str = "projectsveltos.io/serviceaccount-name";
pub const SERVICE_ACCOUNT_NAMESPACE_LABEL: &str = "projectsveltos.io/serviceaccount-namespace";

/// ClusterProfile: `spec` is a pass-through object (the profileSpec plus `clusterSelector`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "config.projectsveltos.io",
    version = "v1beta1",
    kind = "ClusterProfile",
    plural = "clusterprofiles",
    status = "ClusterProfileStatus",
    schema = "disabled"
)]
pub struct ClusterProfileSpec {
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matching_clusters: Option<Vec<Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "config.projectsveltos.io",
    version = "v1beta1",
    kind = "ClusterSummary",
    plural = "clustersummaries",
    namespaced,
    status = "ClusterSummaryStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummarySpec {
    #[serde(default)]
    pub cluster_namespace: String,
    #[serde(default)]
    pub cluster_name: String,
    /// `Capi` or `Sveltos`.
    #[serde(default)]
    pub cluster_type: String,
    #[serde(default)]
    pub cluster_profile_spec: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummaryStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_summaries: Option<Vec<FeatureSummary>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureSummary {
    /// `Resources`, `Helm` or `Kustomize`.
    #[serde(rename = "featureID")]
    pub feature_id: String,
    /// `Provisioning`, `Provisioned`, `Failed`, `FailedNonRetriable`, `Removing`, `AgentRemoving`, `Removed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
