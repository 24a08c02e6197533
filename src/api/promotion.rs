//! `ClusterPromotion` (`config.projectsveltos.io/v1beta1`), field for field as upstream.

use super::duration::GoDuration;
use super::health::{PolicyRef, ValidateHealth};
use super::profile_spec::ProfileSpec;
use super::time::Timestamp;
use crate::labels::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "config.projectsveltos.io";
pub const VERSION: &str = "v1beta1";
pub const FINALIZER: &str = "config.projectsveltos.io/clusterpromotion";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "config.projectsveltos.io",
    version = "v1beta1",
    kind = "ClusterPromotion",
    plural = "clusterpromotions",
    singular = "clusterpromotion",
    status = "ClusterPromotionStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPromotionSpec {
    /// The configuration rolled out, shared by every stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_spec: Option<ProfileSpec>,
    /// The ordered stages of the rollout.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub stages: Vec<Stage>,
    /// Keep the generated ClusterProfiles when the ClusterPromotion is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_cluster_profiles_on_delete: Option<bool>,
}

impl ClusterPromotionSpec {
    /// The stage named `name` (names are unique: the CRD's list-map key).
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
}

/// Exactly one of `manual` and `auto` (enforced by the CRD's CEL rule, and checked again by promoter).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "message": "A trigger must have either a 'manual' or 'auto' field, but not both.",
    "rule": "has(self.manual) != has(self.auto)"
}]))]
pub struct Trigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual: Option<ManualTrigger>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoTrigger>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoTrigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_health_check_deployment: Option<Vec<PolicyRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_delay_health_checks: Option<Vec<ValidateHealth>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_window: Option<TimeWindow>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManualTrigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_health_check_deployment: Option<Vec<PolicyRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_delay_health_checks: Option<Vec<ValidateHealth>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// Defaults to true in the CRD; kept optional so that a manifest round-trips unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub automatic_reset: Option<bool>,
}

impl ManualTrigger {
    pub fn automatic_reset(&self) -> bool {
        self.automatic_reset.unwrap_or(true)
    }
    pub fn is_approved(&self) -> bool {
        self.approved.unwrap_or(false)
    }
}

/// A promotion window: two five-field cron expressions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimeWindow {
    #[schemars(length(min = 1))]
    pub from: String,
    #[schemars(length(min = 1))]
    pub to: String,
}

/// The gate configuration common to both trigger kinds.
#[derive(Clone, Copy, Debug)]
pub struct Gates<'a> {
    pub delay: Option<&'a GoDuration>,
    pub pre_health_check_deployment: &'a [PolicyRef],
    pub post_delay_health_checks: &'a [ValidateHealth],
}

impl Stage {
    /// The `approved` field of a manual trigger (None for an auto trigger, or when unset).
    pub fn manual_approval(&self) -> Option<bool> {
        self.trigger.as_ref()?.manual.as_ref()?.approved
    }
}

impl Trigger {
    pub fn gates(&self) -> Option<Gates<'_>> {
        if let Some(a) = &self.auto {
            return Some(Gates {
                delay: a.delay.as_ref(),
                pre_health_check_deployment: a
                    .pre_health_check_deployment
                    .as_deref()
                    .unwrap_or_default(),
                post_delay_health_checks: a.post_delay_health_checks.as_deref().unwrap_or_default(),
            });
        }
        self.manual.as_ref().map(|m| Gates {
            delay: m.delay.as_ref(),
            pre_health_check_deployment: m
                .pre_health_check_deployment
                .as_deref()
                .unwrap_or_default(),
            post_delay_health_checks: m.post_delay_health_checks.as_deref().unwrap_or_default(),
        })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPromotionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageStatus>>,
    /// sha256 of the normalised profileSpec, base64 in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub profile_spec_hash: Option<String>,
    /// sha256 of the stages' names and selectors, base64 in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub stages_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_promotion_time: Option<Timestamp>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_reconciled_time: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_applied_time: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status_check_time: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_status_description: Option<String>,
}
