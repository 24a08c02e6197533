//! The writes of generated ClusterProfiles a decision plans: apply a profile unless it is applied
//! as it should be, delete one that is present, either before the status write or (`*_after`) only
//! once the status write recorded what they follow from (invariant 1 of `decide`).

use super::decision::{Action, Decision};
use super::profiles::DesiredProfile;
use super::world::World;
use crate::api::ClusterProfile;

/// A generated profile, as observed against what it should be.
pub enum Observed<'a> {
    Applied(&'a ClusterProfile),
    /// Missing or different: an `Apply` was planned.
    Applying,
    /// Being deleted by someone: it can be recreated only once it is gone.
    Deleting,
}

/// Plans an `Apply` of `desired` unless the observed profile is applied as it should be.
pub fn ensure<'w>(world: &'w World, d: &mut Decision, desired: DesiredProfile) -> Observed<'w> {
    match world.profiles.get(&desired.name) {
        Some(o) if o.metadata.deletion_timestamp.is_some() => Observed::Deleting,
        Some(o) if desired.is_applied(o) => Observed::Applied(o),
        _ => {
            d.actions.push(Action::Apply(Box::new(desired)));
            Observed::Applying
        }
    }
}

pub fn delete_if_present(world: &World, d: &mut Decision, name: String) {
    if world
        .profiles
        .get(&name)
        .is_some_and(|cp| cp.metadata.deletion_timestamp.is_none())
    {
        d.actions.push(Action::Delete { name });
    }
}

/// Like [`ensure`], for a profile the status write decides: applied after it.
pub fn ensure_after(world: &World, d: &mut Decision, desired: DesiredProfile) {
    let before = d.actions.len();
    let _ = ensure(world, d, desired);
    let planned: Vec<Action> = d.actions.drain(before..).collect();
    d.after_status.extend(planned);
}

/// Like [`delete_if_present`], for a deletion the status write decides.
pub fn delete_after(world: &World, d: &mut Decision, name: String) {
    let before = d.actions.len();
    delete_if_present(world, d, name);
    let planned: Vec<Action> = d.actions.drain(before..).collect();
    d.after_status.extend(planned);
}

pub fn is_deleting(world: &World, name: &str) -> bool {
    world
        .profiles
        .get(name)
        .is_some_and(|cp| cp.metadata.deletion_timestamp.is_some())
}
