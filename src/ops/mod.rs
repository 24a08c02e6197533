//! Operating rollouts: `status`, `explain`, `approve`, `pause`/`resume`, `lint`, `doctor`.

pub mod control;
pub mod crd_schema;
pub mod doctor;
pub mod explain;
pub mod identity;
pub mod inspect;
pub mod lint;
pub mod suggest;
pub mod yaml_spans;
