//! `spec.profileSpec`: the configuration rolled out, copied into every generated ClusterProfile.
//!
//! Stored as the JSON object it is, so every field (including ones promoter does not model, and
//! ones upstream adds later) survives a read and a write unchanged; typed accessors parse the
//! fields promoter reads.

use super::health::{PolicyRef, ValidateHealth};
use super::schema::{PROFILE_SPEC, vendored_schema};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProfileSpec(pub Map<String, Value>);
vendored_schema!(ProfileSpec, "ProfileSpec", PROFILE_SPEC);

/// The fields of a ClusterProfile `spec` that a ClusterPromotion `profileSpec` does not have.
pub const NON_PROFILE_SPEC_FIELDS: [&str; 5] = [
    "clusterSelector",
    "clusterRefs",
    "setRefs",
    "extraLabels",
    "extraAnnotations",
];

#[derive(Debug, Clone, thiserror::Error)]
#[error("profileSpec.{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// A Helm release of `helmCharts`: the fields promoter reads; the rest stays in `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmChart {
    #[serde(rename = "repositoryURL", default)]
    pub repository_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    #[serde(default)]
    pub release_name: String,
    #[serde(default)]
    pub release_namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_chart_action: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KustomizationRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `maxUpdate`: a number of clusters or a percentage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MaxUpdate {
    Count(u64),
    Percent(u8),
}

impl MaxUpdate {
    /// How many of `total` clusters may be updated at once (at least one, as Sveltos rounds).
    pub fn of(&self, total: usize) -> usize {
        match self {
            MaxUpdate::Count(n) => (*n as usize).max(1),
            MaxUpdate::Percent(p) => ((total * *p as usize) / 100).max(1),
        }
    }
}

impl ProfileSpec {
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }

    fn list<T: DeserializeOwned>(&self, field: &str) -> Result<Vec<T>, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| FieldError {
                field: field.to_string(),
                message: e.to_string(),
            }),
        }
    }

    pub fn helm_charts(&self) -> Result<Vec<HelmChart>, FieldError> {
        self.list("helmCharts")
    }
    pub fn policy_refs(&self) -> Result<Vec<PolicyRef>, FieldError> {
        self.list("policyRefs")
    }
    pub fn kustomization_refs(&self) -> Result<Vec<KustomizationRef>, FieldError> {
        self.list("kustomizationRefs")
    }
    pub fn validate_healths(&self) -> Result<Vec<ValidateHealth>, FieldError> {
        self.list("validateHealths")
    }

    /// Defaults to `Continuous`, as the CRD does.
    pub fn sync_mode(&self) -> &str {
        self.0
            .get("syncMode")
            .and_then(Value::as_str)
            .unwrap_or("Continuous")
    }
    /// Defaults to 100, as the CRD does.
    pub fn tier(&self) -> i64 {
        self.0.get("tier").and_then(Value::as_i64).unwrap_or(100)
    }
    pub fn continue_on_conflict(&self) -> bool {
        self.0
            .get("continueOnConflict")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
    pub fn continue_on_error(&self) -> bool {
        self.0
            .get("continueOnError")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn max_update(&self) -> Result<Option<MaxUpdate>, FieldError> {
        let err = |v: &Value| FieldError {
            field: "maxUpdate".into(),
            message: format!("{v} is neither a number nor a percentage such as \"10%\""),
        };
        match self.0.get("maxUpdate") {
            None | Some(Value::Null) => Ok(None),
            Some(v @ Value::Number(n)) => n
                .as_u64()
                .map(|n| Some(MaxUpdate::Count(n)))
                .ok_or_else(|| err(v)),
            Some(v @ Value::String(s)) => {
                if let Some(p) = s.strip_suffix('%') {
                    p.parse::<u8>()
                        .ok()
                        .filter(|p| *p <= 100)
                        .map(|p| Some(MaxUpdate::Percent(p)))
                        .ok_or_else(|| err(v))
                } else {
                    s.parse::<u64>()
                        .map(|n| Some(MaxUpdate::Count(n)))
                        .map_err(|_| err(v))
                }
            }
            Some(v) => Err(err(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_access_with_crd_defaults() {
        let spec: ProfileSpec = serde_json::from_value(json!({
            "helmCharts": [{"repositoryURL": "https://x", "releaseName": "r", "releaseNamespace": "ns",
                            "chartVersion": "1.0", "values": "a: 1", "futureField": {"x": 1}}],
            "maxUpdate": "10%"
        }))
        .unwrap();
        let charts = spec.helm_charts().unwrap();
        assert_eq!(charts[0].chart_version.as_deref(), Some("1.0"));
        assert_eq!(charts[0].extra["futureField"], json!({"x": 1}));
        assert_eq!(spec.sync_mode(), "Continuous");
        assert_eq!(spec.tier(), 100);
        assert_eq!(spec.max_update().unwrap(), Some(MaxUpdate::Percent(10)));
        assert_eq!(MaxUpdate::Percent(10).of(5), 1);
        assert_eq!(MaxUpdate::Percent(50).of(10), 5);
        assert_eq!(MaxUpdate::Count(3).of(10), 3);
        assert!(spec.policy_refs().unwrap().is_empty());
    }

    #[test]
    fn bad_fields_name_themselves() {
        let spec: ProfileSpec =
            serde_json::from_value(json!({"helmCharts": "nope", "maxUpdate": "150%"})).unwrap();
        assert!(
            spec.helm_charts()
                .unwrap_err()
                .to_string()
                .starts_with("profileSpec.helmCharts:")
        );
        assert!(
            spec.max_update()
                .unwrap_err()
                .to_string()
                .contains("maxUpdate")
        );
    }
}
