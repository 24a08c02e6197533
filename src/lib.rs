//! promoter: a stateless, one-pass implementation of Sveltos `ClusterPromotion`.
//!
//! Each pass observes the cluster, decides purely, acts idempotently, and exits.

pub mod annotations;
pub mod api;
pub mod bounded_text;
pub mod cli_error;
pub mod client;
pub mod crd;
pub mod dashboard;
pub mod exit_codes;
pub mod fake;
pub mod freeze;
pub mod guard;
pub mod hash;
pub mod health;
pub mod http_client;
pub mod invocation;
pub mod known_keys;
pub mod labels;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod notify;
pub mod ops;
pub mod pass;
pub mod reference;
pub mod roles;
pub mod settings;
pub mod sim;
pub mod suggest;
pub mod sveltos;
pub mod validation;
pub mod window;
pub mod zone;
