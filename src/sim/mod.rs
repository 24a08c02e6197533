//! The simulated world promoter runs against with no cluster: a fleet of SveltosClusters, a
//! simulated Sveltos addon-controller over the fake API server, and a virtual clock.

pub mod addon;
pub mod feature_hash;
pub mod fleet;
pub mod managed;
pub mod plan;
pub mod run;
pub mod scale;
pub mod timeline;

pub use addon::{AddonController, sveltos_cluster};
pub use fleet::{Fleet, FleetCluster};
pub use run::{
    AssumeHealthy, ScriptedApproval, ScriptedFailure, ScriptedFreeze, ScriptedUpdate, SimHealth,
    SimOptions, SimReport, SimWorld, Simulation, Step, simulate,
};
