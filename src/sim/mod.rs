//! The simulated world promoter runs against with no cluster: a fleet of SveltosClusters, a
//! simulated Sveltos addon-controller over the fake API server, and a virtual clock.

pub mod addon;
pub mod fleet;
pub mod plan;
pub mod run;
pub mod timeline;

pub use addon::{AddonController, sveltos_cluster};
pub use fleet::{Fleet, FleetCluster};
pub use run::{
    ScriptedApproval, ScriptedFailure, ScriptedUpdate, SimOptions, SimReport, SimWorld, simulate,
};
