//! The API types promoter reads and writes, with upstream's exact JSON names, and promoter's own
//! `promoter.dev/v1alpha1` kinds (`PromotionFreeze`, `PromotionRevision`).

pub mod duration;
pub mod flag_duration;
pub mod health;
pub mod inventory;
pub mod profile_spec;
pub mod promotion;
pub mod promotion_freeze;
pub mod promotion_revision;
pub mod schema;
pub mod sveltos;
pub mod time;

pub use duration::GoDuration;
pub use health::{CelRule, LabelFilter, PolicyRef, ValidateHealth};
pub use inventory::{CapiClusterFacts, SveltosCluster, SveltosClusterSpec, SveltosClusterStatus};
pub use profile_spec::{HelmChart, KustomizationRef, MaxUpdate, ProfileSpec};
pub use promotion::{
    AutoTrigger, ClusterPromotion, ClusterPromotionSpec, ClusterPromotionStatus, ManualTrigger,
    Stage, StageStatus, TimeWindow, Trigger,
};
pub use promotion_freeze::{
    FreezePhase, PromotionFreeze, PromotionFreezeSpec, PromotionFreezeStatus,
};
pub use promotion_revision::{
    PromotionRevision, PromotionRevisionSpec, StageHashes, revision_id, revision_name,
};
pub use sveltos::{
    ClusterProfile, ClusterProfileSpec, ClusterProfileStatus, ClusterSummary, ClusterSummarySpec,
    ClusterSummaryStatus, FeatureSummary,
};
pub use time::Timestamp;

/// promoter's own API group and version (`PromotionFreeze`, `PromotionRevision`).
pub const OWN_GROUP: &str = "promoter.dev";
pub const OWN_VERSION: &str = "v1alpha1";
