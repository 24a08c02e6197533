//! Shared subtypes of Sveltos: libsveltos `ValidateHealth` and addon-controller `PolicyRef`.
//!
//! Every field is optional on the Rust side and unknown fields are kept in `extra`, so a check or a
//! reference written by a newer Sveltos passes through promoter unchanged.

use super::schema::{POLICY_REF, VALIDATE_HEALTH, vendored_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidateHealth {
    pub name: String,
    #[serde(rename = "featureID", default, skip_serializing_if = "Option::is_none")]
    pub feature_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_filters: Option<Vec<LabelFilter>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(
        rename = "evaluateCEL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub evaluate_cel: Option<Vec<CelRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_check: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_source: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_queries: Option<Vec<Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
vendored_schema!(ValidateHealth, "ValidateHealth", VALIDATE_HEALTH);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelFilter {
    pub key: String,
    pub operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CelRule {
    pub name: String,
    pub rule: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<i64>,
    #[serde(rename = "remoteURL", default, skip_serializing_if = "Option::is_none")]
    pub remote_url: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
vendored_schema!(PolicyRef, "PolicyRef", POLICY_REF);
