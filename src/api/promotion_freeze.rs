//! `PromotionFreeze` (`promoter.dev/v1alpha1`, cluster-scoped): one object that stops every
//! ClusterPromotion its selector picks from starting a new stage, for a time range or until it is
//! deleted. Read by the pass; evaluated by [`crate::freeze`].

use super::time::Timestamp;
use crate::labels::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest `spec.reason`, in bytes (the CRD says characters; `freeze create` checks bytes, as
/// the reason goes into Events whose notes are limited in bytes).
pub const REASON_MAX: usize = 512;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "promoter.dev",
    version = "v1alpha1",
    kind = "PromotionFreeze",
    plural = "promotionfreezes",
    singular = "promotionfreeze",
    shortname = "pfreeze",
    category = "promoter",
    status = "PromotionFreezeStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct PromotionFreezeSpec {
    /// Why nothing may start: shown in the status of every promotion the freeze holds.
    #[schemars(length(min = 1, max = 512))]
    pub reason: String,
    /// The ClusterPromotions held, by their labels; absent or empty holds every promotion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_selector: Option<LabelSelector>,
    /// When the freeze starts (RFC 3339); absent: from its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Timestamp>,
    /// When the freeze ends (RFC 3339); absent: until the object is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Timestamp>,
    /// Never stored: set when promoter cannot decode what is stored (`pass::observe::freezes`),
    /// with why. Such a freeze holds every promotion it may select (fail closed): the fields it
    /// could read are kept, an unreadable selector selects every promotion, an unreadable start
    /// or end leaves it active.
    #[serde(skip)]
    #[schemars(skip)]
    pub unreadable: Option<String>,
}

/// Where a freeze stands; written by the pass only when it changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionFreezeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<FreezePhase>,
    /// Why it is Invalid; what it holds when Active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The promotions it selected when it became active (as the pass that saw it become active
    /// observed them, for the generation in `observedGeneration`): they stay held while it is
    /// active, whatever their labels become, until a bypass is recorded or it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Vec<String>>,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum FreezePhase {
    /// Its start is in the future.
    Scheduled,
    /// It holds the promotions it selects.
    Active,
    /// Its end has passed; it holds nothing (kept until deleted, as a record).
    Expired,
    /// Its selector does not parse or its end is not after its start: it holds nothing.
    Invalid,
}

impl FreezePhase {
    pub fn as_str(self) -> &'static str {
        match self {
            FreezePhase::Scheduled => "Scheduled",
            FreezePhase::Active => "Active",
            FreezePhase::Expired => "Expired",
            FreezePhase::Invalid => "Invalid",
        }
    }
}

impl std::fmt::Display for FreezePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
