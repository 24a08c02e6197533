//! One reconciliation pass: observe the cluster, decide per promotion (pure), act idempotently.

pub mod decide;
pub mod deployment;
pub mod profiles;
pub mod stage_status;
pub mod world;

pub use decide::{Action, Context, Decision, HealthResults, HealthVerdict, Phase, decide};
pub use world::{ClusterKind, InventoryCluster, World};
