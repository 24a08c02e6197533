//! Operating rollouts: `status`, `explain`, `approve`, `pause`/`resume`, `lint`.

pub mod control;
pub mod explain;
pub mod inspect;
pub mod lint;
