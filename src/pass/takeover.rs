//! Taking over a rollout whose status another writer recorded: upstream's Go controller (before a
//! platform moves to promoter) or an earlier promoter (whose `profileSpecHash` was upstream's
//! order-insensitive hash, before revisions counted list order and tenant labels).
//!
//! Neither status holds promoter's revision hash, so comparing hashes alone would restart every
//! such rollout at stage 1 once: a completed rollout re-opened, production waiting again for a
//! revision it already runs. Instead, the status is taken over, as if promoter had written it, when
//! it provably describes the current spec:
//!
//! * its stages hash is the one its writer computes for the current stages (promoter's own
//!   [`stages_hash`], or upstream's bit-identical [`upstream_stages_hash`]); an earlier promoter's
//!   profile hash must also be [`profile_spec_hash`] of the current spec;
//! * its stage entries are exactly the spec's stages up to the current one, in order;
//! * every one of those stages' generated profiles exists, belongs to the promotion and already
//!   carries what promoter would generate for it now: the same spec in Sveltos' stored normal form
//!   (upstream wrote it through Go types) and the same tenant labels.
//!
//! So a takeover never changes what any cluster runs, and the stages it counts as passed were
//! passed with exactly the revision promoter now rolls out. Anything else (a spec edited since, a
//! profile changed by hand, a reordered list) restarts from stage 1, as a new revision would.

use super::profiles::{main_profile, owned_by, profile_name};
use super::world::World;
use crate::api::sveltos::{SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL};
use crate::api::{ClusterPromotion, ClusterPromotionStatus, Stage};
use crate::hash::{profile_spec_hash, stages_hash, upstream_stages_hash};
use crate::sveltos::normal_form::normalize;

/// Who wrote the status promoter takes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// Sveltos' own ClusterPromotion controller.
    Upstream,
    /// promoter before revisions counted list order and tenant labels.
    EarlierPromoter,
}

impl Writer {
    pub fn describe(self) -> &'static str {
        match self {
            Writer::Upstream => "Sveltos' ClusterPromotion controller",
            Writer::EarlierPromoter => "an earlier promoter version",
        }
    }
}

/// The writer of `status`, when promoter may take its rollout over unchanged.
pub fn adoptable(
    p: &ClusterPromotion,
    status: &ClusterPromotionStatus,
    world: &World,
) -> Option<Writer> {
    let stages = &p.spec.stages;
    let stored_stages = status.stages_hash.as_deref()?;
    let stored_spec = status.profile_spec_hash.as_deref()?;
    let writer = if stored_stages == stages_hash(stages)
        && stored_spec == profile_spec_hash(p.spec.profile_spec.as_ref())
    {
        Writer::EarlierPromoter
    } else if stored_stages == upstream_stages_hash(stages) {
        Writer::Upstream
    } else {
        return None;
    };
    let current = status.current_stage_name.as_deref()?;
    let idx = stages.iter().position(|s| s.name == current)?;
    let entries: Vec<&str> = status
        .stages
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    let reached: Vec<&str> = stages[..=idx].iter().map(|s| s.name.as_str()).collect();
    if entries != reached {
        return None;
    }
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let carries_revision = |stage: &Stage| {
        let desired = main_profile(p, stage);
        let Some(observed) = world.profiles.get(&profile_name(name, &stage.name)) else {
            return false;
        };
        let labels = observed.metadata.labels.clone().unwrap_or_default();
        observed.metadata.deletion_timestamp.is_none()
            && owned_by(observed, name)
            && [SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL]
                .iter()
                .all(|k| labels.get(*k) == desired.labels.get(*k))
            && normalize(&desired.spec) == normalize(&observed.spec.fields)
    };
    stages[..=idx]
        .iter()
        .all(carries_revision)
        .then_some(writer)
}
