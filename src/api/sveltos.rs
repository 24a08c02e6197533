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
    /// The copy of the profile's spec, kept as its JSON text: a fleet has one summary per cluster
    /// and profile, nearly all with the same text, so it is parsed and normalised once per distinct
    /// text (`pass::summaries`), not once per summary. (No `flatten` in this struct: serde cannot
    /// hand a raw value through a flattened struct.)
    #[serde(default)]
    pub cluster_profile_spec: SpecText,
}

/// A JSON object kept as text.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SpecText(Box<serde_json::value::RawValue>);

impl SpecText {
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    pub fn as_raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }

    /// The parsed object; anything else (which the API server would not have stored) is empty.
    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }
}

impl Default for SpecText {
    fn default() -> Self {
        Map::new().into()
    }
}

impl PartialEq for SpecText {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl From<Map<String, Value>> for SpecText {
    fn from(m: Map<String, Value>) -> Self {
        let text = serde_json::to_string(&m).unwrap_or_else(|_| "{}".into());
        match serde_json::value::RawValue::from_string(text) {
            Ok(raw) => SpecText(raw),
            // Unreachable: serde_json's own output is valid JSON.
            Err(_) => SpecText(serde_json::value::RawValue::NULL.to_owned()),
        }
    }
}

/// Only the feature statuses (the rest of a ClusterSummary's status is not read).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSummaryStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_summaries: Option<Vec<FeatureSummary>>,
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
    /// The hash of what the feature deploys (Go's `[]byte`, so base64), written with every status
    /// of the feature: the content its status is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// When the feature last reached `Provisioned` (or `Failed`/`Removed`), by the addon-controller's
    /// own clock: never compared with the API server's times (see `pass::summaries`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_time: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cluster_summary_keeps_its_spec_as_text_and_the_feature_statuses() {
        // As kube parses a list response: from the text.
        let text = json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "p-dev-sveltos-c1", "namespace": "dev"},
            "spec": {"clusterNamespace": "dev", "clusterName": "c1", "clusterType": "Sveltos",
                     "clusterProfileSpec": {"helmCharts": [{"releaseName": "r"}], "policyRefs": [], "tier": 100}},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned", "hash": "aGFzaA==",
                                             "lastAppliedTime": "2026-11-23T10:00:00Z"}],
                       "helmReleaseSummaries": [{"releaseName": "r"}]}
        })
        .to_string();
        let cs: ClusterSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(
            Value::Object(cs.spec.cluster_profile_spec.to_map()),
            json!({"helmCharts": [{"releaseName": "r"}], "policyRefs": [], "tier": 100})
        );
        let f = &cs.status.unwrap().feature_summaries.unwrap()[0];
        assert_eq!(f.status.as_deref(), Some("Provisioned"));
        assert_eq!(f.last_applied_time.as_deref(), Some("2026-11-23T10:00:00Z"));
        for spec in [r#"{}"#, r#"{"clusterProfileSpec": null}"#] {
            let s: ClusterSummarySpec = serde_json::from_str(spec).unwrap();
            assert!(s.cluster_profile_spec.to_map().is_empty());
        }
    }
}
