//! The writes of generated ClusterProfiles a decision plans: apply a profile unless it is applied
//! as it should be, delete one that is present, either before the status write or (`*_after`) only
//! once the status write recorded what they follow from (invariant 1 of `decide`).

use super::decision::{Action, Decision, RecordOp};
use super::deployment::{WriteRecord, matching_clusters};
use super::known_hashes;
use super::profiles::{DesiredProfile, SPEC_HASH_ANNOTATION};
use super::summaries::ProfileSummaries;
use super::world::World;
use crate::annotations::redeploy::{Before, Redeploy};
use crate::api::{ClusterProfile, ClusterPromotion};
use crate::labels::LabelSelector;
use crate::sveltos::normal_form::normalize;
use crate::sveltos::redeploy::{Expect, bit, expected};

/// A generated profile, as observed against what it should be.
pub enum Observed<'a> {
    Applied(&'a ClusterProfile),
    /// Missing or different: an `Apply` was planned.
    Applying,
    /// Being deleted by someone: it can be recreated only once it is gone.
    Deleting,
}

/// Plans an `Apply` of `desired` unless the observed profile is applied as it should be; a spec
/// change of an existing profile is recorded first ([`record_redeploy`]).
pub fn ensure<'w>(
    p: &ClusterPromotion,
    world: &'w World,
    d: &mut Decision,
    desired: DesiredProfile,
) -> Observed<'w> {
    match world.profiles.get(&desired.name) {
        Some(o) if o.metadata.deletion_timestamp.is_some() => Observed::Deleting,
        Some(o) if desired.is_applied(o) => Observed::Applied(o),
        observed => {
            if let Some(o) = observed {
                record_redeploy(p, world, d, o, &desired);
            }
            d.actions.push(Action::Apply(Box::new(desired)));
            Observed::Applying
        }
    }
}

/// The union of two expectations.
fn either(a: Expect, b: Expect) -> Expect {
    match (a, b) {
        (Expect::Unknown, _) | (_, Expect::Unknown) => Expect::Unknown,
        (Expect::Nothing, x) | (x, Expect::Nothing) => x,
        (Expect::Features(x), Expect::Features(y)) => Expect::Features(x | y),
    }
}

/// The `promoter.dev/redeploy` record of writing `desired` over `observed`, added to the decision's
/// record patch (written before any profile): what Sveltos redeploys, from the profile's spec and
/// every spec its summaries carry to the new one ([`expected`]), and the hashes the redeployed
/// features carry on each summary that will redeploy them. A change Sveltos does not see (labels,
/// annotations only) records nothing. Summaries the pass did not list are asked for
/// ([`Decision::needs_summaries`]); without them, no hashes are kept.
fn record_redeploy(
    p: &ClusterPromotion,
    world: &World,
    d: &mut Decision,
    observed: &ClusterProfile,
    desired: &DesiredProfile,
) {
    let new = normalize(&desired.spec);
    let old = normalize(&observed.spec.fields);
    if old == new {
        return;
    }
    let mut expect = expected(&old, &new);
    let listed = world.summaries_known(&desired.name);
    let mut before = Before::default();
    let none = ProfileSummaries::default();
    // Not listed (the list failed): nothing is known of what Sveltos was doing.
    let unsettled = !listed
        || !settled(
            p,
            world,
            observed,
            world.summaries.get(&desired.name).unwrap_or(&none),
        );
    if let Some(summaries) = world.summaries.get(&desired.name) {
        // Per distinct spec (nearly always one), not per summary.
        let mut by_spec: Vec<(*const serde_json::Map<String, serde_json::Value>, Expect)> =
            Vec::new();
        for s in summaries.iter() {
            let Some(spec) = summaries.spec_of(s) else {
                expect = Expect::Unknown;
                continue;
            };
            let key = spec as *const _;
            let e = match by_spec.iter().find(|(k, _)| *k == key) {
                Some((_, e)) => e.clone(),
                None => {
                    let e = expected(spec, &new);
                    by_spec.push((key, e.clone()));
                    e
                }
            };
            if let Expect::Features(bits) = e {
                for f in s.features.iter().filter(|f| bits & bit(&f.id) != 0) {
                    before.extend(bit(&f.id), f.hash);
                }
            }
            expect = either(expect, e);
        }
    }
    if !listed && !d.needs_summaries.contains(&desired.name) {
        d.needs_summaries.push(desired.name.clone());
    }
    let spec = desired
        .annotations
        .get(SPEC_HASH_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    d.record(RecordOp::Redeploy {
        profile: desired.name.clone(),
        record: Redeploy::new(&spec, &expect, listed.then_some(&before)).unsettled(unsettled),
    });
}

/// Whether every summary of `observed` shows a status about the spec it carries, so that any status
/// of that spec Sveltos writes between the pass's list and its profile write carries hashes this
/// pass saw: a summary for every unpaused cluster the profile selects, each in sync with it,
/// reporting a feature for each kind of content with its hash, in a status judged current by
/// the completion rule with `observed`'s own record (content, else the API server's times: at or
/// after its spec), whatever it says (`Provisioned`, `Provisioning`, `Failed`: Sveltos writes a
/// deployment's hash with `Provisioning` before it deploys and with every status after,
/// `proceedDeployingFeature`, projectsveltos/addon-controller `controllers/clustersummary_deployer.go`,
/// commit 60c6358035778386ccb9599f4944d2f5a0ec8926, so a deployment it had started, failing or
/// not, is in the list). When not (a summary missing, out of sync, showing a status older than
/// its spec or a feature without a hash), Sveltos may write that spec's status, with a hash the
/// pass never saw, between the pass's list and its write.
fn settled(
    p: &ClusterPromotion,
    world: &World,
    observed: &ClusterProfile,
    summaries: &ProfileSummaries,
) -> bool {
    let record = WriteRecord::of(p, observed);
    let freshness = WriteRecord::freshness(record.as_ref());
    let known = known_hashes::of(p, world, observed);
    let known = known.as_ref().map(|k| &k.hashes);
    let comparison = summaries.comparison(&observed.spec.fields);
    let shown = summaries.iter().all(|s| {
        comparison.differs(s).is_none()
            && s.reports_hashes(comparison.content(s))
            && s.current(freshness, known, None).is_ok()
    });
    let selector: Option<LabelSelector> = match observed.spec.fields.get("clusterSelector") {
        Some(v) => serde_json::from_value(v.clone()).ok(),
        None => Some(LabelSelector::default()),
    };
    shown
        && selector.is_some_and(|selector| {
            matching_clusters(&selector, world)
                .iter()
                .filter(|c| !c.paused)
                .all(|c| summaries.find(c.kind, &c.namespace, &c.name).is_some())
        })
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

/// Like [`ensure`], for a profile the status write decides: applied after it (its record stays in
/// the record patch, before the status).
pub fn ensure_after(
    p: &ClusterPromotion,
    world: &World,
    d: &mut Decision,
    desired: DesiredProfile,
) {
    let before = d.actions.len();
    let _ = ensure(p, world, d, desired);
    let planned: Vec<Action> = d.actions.drain(before..).collect();
    for action in planned {
        match action {
            Action::Record(_) => d.actions.push(action),
            other => d.after_status.push(other),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The expectation of a write over summaries of several specs is the union of each one's.
    #[test]
    fn either_is_the_union_of_two_expectations() {
        let (helm, resources) = (bit("Helm"), bit("Resources"));
        assert_eq!(
            either(Expect::Features(helm), Expect::Features(resources)),
            Expect::Features(helm | resources)
        );
        assert_eq!(
            either(Expect::Nothing, Expect::Features(helm)),
            Expect::Features(helm)
        );
        assert_eq!(
            either(Expect::Features(helm), Expect::Unknown),
            Expect::Unknown
        );
    }
}
