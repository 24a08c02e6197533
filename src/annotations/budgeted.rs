//! `promoter.dev/budgeted`: the clusters counted against their stage's failure budget in the
//! current run (see [`crate::pass::budget`] for the rule). Written by the pass in its guarded
//! record patch, as a whole; it names its run, so a record of another run is void (a new run
//! drops it: a new revision starts with every stage's whole budget). A value that does not parse
//! is absent.

use super::keys::{Run, annotation};
use crate::api::ClusterPromotion;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const BUDGETED: &str = "promoter.dev/budgeted";

/// The longest reason kept per cluster: the record holds one per budgeted cluster, and the
/// annotations of an object share 256 KiB.
pub const WHY_MAX: usize = 160;

/// `promoter.dev/budgeted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgeted {
    pub run: Run,
    /// By stage: its clusters counted against its budget, sorted by cluster.
    pub stages: BTreeMap<String, Vec<BudgetedCluster>>,
}

/// One cluster counted against its stage's budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetedCluster {
    /// `namespace/name`, as every message names a cluster.
    pub cluster: String,
    /// Why it counted when it was first counted in this run: a feature failed, unreachable, not
    /// deployed by the deadline (bounded by [`WHY_MAX`]; kept as first written, so that the record
    /// changes only when a cluster enters or leaves it).
    pub why: String,
}

impl Budgeted {
    /// The clusters of `stage` counted against its budget.
    pub fn of_stage(&self, stage: &str) -> &[BudgetedCluster] {
        self.stages
            .get(stage)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Whether it names no cluster.
    pub fn is_empty(&self) -> bool {
        self.stages.values().all(Vec::is_empty)
    }
}

/// The record, whatever run it is about.
pub fn budgeted(p: &ClusterPromotion) -> Option<Budgeted> {
    serde_json::from_str(&annotation(p, BUDGETED)?).ok()
}

/// The record of `run`, or an empty one: a record of another run is void.
pub fn budgeted_in(p: &ClusterPromotion, run: &Run) -> Budgeted {
    budgeted(p)
        .filter(|b| b.run == *run)
        .unwrap_or_else(|| Budgeted {
            run: run.clone(),
            stages: BTreeMap::new(),
        })
}

/// The record of the run `p`'s status records, if that run counted any cluster.
pub fn budgeted_now(p: &ClusterPromotion) -> Option<Budgeted> {
    let run = Run::of(p.status.as_ref()?)?;
    budgeted(p).filter(|b| b.run == run && !b.is_empty())
}
