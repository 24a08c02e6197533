//! The API types promoter reads and writes, with upstream's exact JSON names.

pub mod duration;
pub mod health;
pub mod inventory;
pub mod profile_spec;
pub mod promotion;
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
pub use sveltos::{
    ClusterProfile, ClusterProfileSpec, ClusterProfileStatus, ClusterSummary, ClusterSummarySpec,
    ClusterSummaryStatus, FeatureSummary,
};
pub use time::Timestamp;
