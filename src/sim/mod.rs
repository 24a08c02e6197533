//! The simulated world promoter runs against with no cluster: a fleet of SveltosClusters and a
//! simulated Sveltos addon-controller over the fake API server.

pub mod addon;

pub use addon::{AddonController, sveltos_cluster};
