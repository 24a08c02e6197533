//! Operating rollouts: `status`, `explain`, `approve`, `pause`/`resume`, `abort`, `rollback`,
//! `freeze`, `lint`, `doctor`.

pub mod control;
pub mod crd_schema;
pub mod doctor;
pub mod explain;
pub mod freeze;
pub mod identity;
pub mod inspect;
pub mod lint;
pub mod load;
pub mod rollback;
pub mod stages;
pub mod yaml_spans;
