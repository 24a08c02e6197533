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
    /// Only the lists the completion check compares: promoter reads ClusterSummaries, never writes
    /// them, and a fleet has one per cluster and profile, each with a full copy of the profile's
    /// spec; the rest is skipped while parsing.
    #[serde(default, deserialize_with = "compared_lists")]
    pub cluster_profile_spec: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ComparedLists {
    helm_charts: Option<Value>,
    policy_refs: Option<Value>,
    kustomization_refs: Option<Value>,
}

fn compared_lists<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    let lists = Option::<ComparedLists>::deserialize(d)?;
    let mut out = Map::new();
    if let Some(l) = lists {
        for (k, v) in [
            ("helmCharts", l.helm_charts),
            ("policyRefs", l.policy_refs),
            ("kustomizationRefs", l.kustomization_refs),
        ] {
            if let Some(v) = v {
                out.insert(k.to_string(), v);
            }
        }
    }
    Ok(out)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cluster_summary_keeps_only_what_the_completion_check_reads() {
        let cs: ClusterSummary = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": "p-dev-sveltos-c1", "namespace": "dev"},
            "spec": {"clusterNamespace": "dev", "clusterName": "c1", "clusterType": "Sveltos",
                     "clusterProfileSpec": {"helmCharts": [{"releaseName": "r"}], "policyRefs": [], "tier": 100,
                                            "validateHealths": [{"name": "big", "script": "..."}]}},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned", "hash": "aGFzaA=="}],
                       "helmReleaseSummaries": [{"releaseName": "r"}]}
        }))
        .unwrap();
        assert_eq!(
            Value::Object(cs.spec.cluster_profile_spec.clone()),
            json!({"helmCharts": [{"releaseName": "r"}], "policyRefs": []})
        );
        assert_eq!(
            cs.status.unwrap().feature_summaries.unwrap()[0]
                .status
                .as_deref(),
            Some("Provisioned")
        );
        for spec in [json!({}), json!({"clusterProfileSpec": null})] {
            let s: ClusterSummarySpec = serde_json::from_value(spec).unwrap();
            assert!(s.cluster_profile_spec.is_empty());
        }
    }
}
