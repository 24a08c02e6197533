//! The deployment hashes Sveltos reported for a stage's generated profile when a revision completed
//! its whole rollout, stored with that revision (`PromotionRevision.spec.featureHashes`), so that
//! a rollback to it is judged by content: a summary whose every feature carries one
//! of them is `Provisioned` for that spec ([`super::summaries::Summary::provisioned`]), whether
//! promoter wrote it while Sveltos was busy or not, and whatever second Sveltos answered in.
//!
//! Each stage keeps the distinct first [`HASH_PREFIX`](crate::annotations::redeploy::HASH_PREFIX) characters of its summaries' hashes per
//! feature (at most [`MAX_BEFORE`] in all, else none), keyed by the `promoter.dev/spec-hash` of the
//! profile they are about: a few dozen bytes per stage where a chart is not templated per cluster,
//! nothing where it is. Per stage is enough, not per cluster: a feature's hash digests what it
//! deploys (the feature's list as written, its values instantiated for the cluster and the content
//! they reference, the profile-level fields every hash shares: `helmHash`, `resourcesHash`,
//! `getClusterProfileSpecHash`, projectsveltos/addon-controller `controllers/handlers_*.go`, commit
//! 60c6358035778386ccb9599f4944d2f5a0ec8926), so a hash some cluster of the stage reported for the
//! spec is, on any cluster showing it, a deployment of that spec's content as written; it cannot be
//! a status about another spec's content unless that content is the same.

use super::deployment::WriteRecord;
use super::profiles::{SPEC_HASH_ANNOTATION, profile_name};
use super::summaries::Provisioned;
use super::world::World;
use crate::annotations::redeploy::{Before, MAX_BEFORE};
use crate::annotations::{self, Run};
use crate::api::{ClusterProfile, ClusterPromotion, StageHashes, revision_name};
use crate::sveltos::redeploy::bit;
use std::collections::BTreeMap;

fn spec_hash(profile: &ClusterProfile) -> Option<&String> {
    profile
        .metadata
        .annotations
        .as_ref()?
        .get(SPEC_HASH_ANNOTATION)
}

/// The hashes of one stage's profile, from its listed summaries: those of every summary in sync
/// with it whose `Provisioned` is about its spec (the completion rule); None when its summaries
/// were not read, when none is, or when they are more than [`MAX_BEFORE`].
fn of_stage(p: &ClusterPromotion, world: &World, profile: &ClusterProfile) -> Option<StageHashes> {
    let spec = spec_hash(profile)?.clone();
    let summaries = world.summaries.get(profile.metadata.name.as_deref()?)?;
    let record = WriteRecord::of(p, profile);
    let freshness = WriteRecord::freshness(record.as_ref());
    let comparison = summaries.comparison(&profile.spec.fields);
    let mut hashes = Before::default();
    for s in summaries.iter() {
        let about_spec = comparison.differs(s).is_none()
            && s.provisioned(comparison.content(s), freshness, None, world.now) == Provisioned::Yes;
        if about_spec {
            for f in s.features.iter() {
                hashes.extend(bit(&f.id), f.hash);
            }
        }
    }
    if hashes.is_empty() || hashes.len() > MAX_BEFORE {
        return None;
    }
    let features = hashes.by_feature();
    Some(StageHashes { spec, features })
}

/// The generated profile of each stage of `p` (not being deleted).
fn stage_profiles<'w>(
    p: &ClusterPromotion,
    world: &'w World,
) -> impl Iterator<Item = (String, &'w ClusterProfile)> {
    let name = p.metadata.name.clone().unwrap_or_default();
    p.spec.stages.iter().filter_map(move |stage| {
        world
            .profiles
            .get(&profile_name(&name, &stage.name))
            .filter(|cp| cp.metadata.deletion_timestamp.is_none())
            .map(|cp| (stage.name.clone(), cp))
    })
}

/// What a revision completing now stores: per stage, the hashes its profile's summaries carry.
pub fn of_run(p: &ClusterPromotion, world: &World) -> BTreeMap<String, StageHashes> {
    stage_profiles(p, world)
        .filter_map(|(stage, cp)| Some((stage, of_stage(p, world, cp)?)))
        .collect()
}

/// The profiles whose summaries the pass has not read, which [`of_run`] needs.
pub fn unread(p: &ClusterPromotion, world: &World) -> Vec<String> {
    stage_profiles(p, world)
        .filter_map(|(_, cp)| cp.metadata.name.clone())
        .filter(|name| !world.summaries_known(name))
        .collect()
}

/// Hashes Sveltos reported for one profile spec, and the revision that stored them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    pub hashes: Before,
    /// The id users see (`revision 1a2b3c4d5e`).
    pub revision: String,
}

/// The hashes Sveltos reported for exactly the spec `profile` carries, stored with the revision a
/// rollback of the current run restores (the one stored revision a pass reads; `explain`, which
/// reads every revision of the history, judges by the same one).
pub fn of(p: &ClusterPromotion, world: &World, profile: &ClusterProfile) -> Option<Known> {
    let spec = spec_hash(profile)?;
    let name = p.metadata.name.as_deref()?;
    let run = p.status.as_ref().and_then(Run::of)?;
    let target = annotations::rollback(p).filter(|r| r.from == run)?.to;
    let r = world
        .revisions
        .get(&revision_name(name, &target))?
        .as_ref()
        .filter(|r| r.spec.promotion == name && r.spec.revision == target)?;
    let stage = r.spec.feature_hashes.values().find(|s| &s.spec == spec)?;
    let hashes = Before::from_by_feature(&stage.features);
    (!hashes.is_empty()).then(|| Known {
        hashes,
        revision: r.id(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::redeploy::prefix;
    use crate::api::{ClusterSummary, ClusterSummarySpec, ClusterSummaryStatus, FeatureSummary};
    use crate::api::{PromotionRevision, Timestamp};
    use crate::pass::profiles::main_profile;
    use serde_json::json;

    fn promotion(name: &str) -> ClusterPromotion {
        serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": name, "uid": "u"},
            "spec": {"profileSpec": {"helmCharts": [{"chartName": "a", "chartVersion": "1"}]},
                     "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}]}
        }))
        .unwrap()
    }

    /// A summary of `profile` on `cluster`, carrying `spec`, its Helm feature `status` with `hash`.
    fn summary(
        profile: &ClusterProfile,
        cluster: &str,
        status: &str,
        hash: &str,
    ) -> ClusterSummary {
        let name = profile.metadata.name.clone().unwrap();
        let mut cs = ClusterSummary::new(
            &format!("{name}-sveltos-{cluster}"),
            ClusterSummarySpec {
                cluster_namespace: "fleet".into(),
                cluster_name: cluster.into(),
                cluster_type: "Sveltos".into(),
                cluster_profile_spec: profile.spec.fields.clone().into(),
            },
        );
        cs.status = Some(ClusterSummaryStatus {
            feature_summaries: Some(vec![FeatureSummary {
                feature_id: "Helm".into(),
                status: Some(status.into()),
                hash: Some(hash.into()),
                ..Default::default()
            }]),
        });
        cs
    }

    fn world(p: &ClusterPromotion) -> World {
        let mut w = World::default();
        for stage in &p.spec.stages {
            let cp = main_profile(p, stage).to_object();
            w.profiles.insert(cp.metadata.name.clone().unwrap(), cp);
        }
        w
    }

    /// What a completing pass stores: per stage, the distinct hashes of the summaries that run
    /// the profile's spec (not one out of sync, not one still deploying); none for a stage whose
    /// summaries were not read (they are asked for) or are too many to keep.
    #[test]
    fn a_stage_keeps_the_distinct_hashes_of_its_summaries_that_run_its_spec() {
        let p = promotion("app");
        let mut w = world(&p);
        let dev = w.profiles["app-dev"].clone();
        let mut stale = summary(&dev, "c3", "Provisioned", "STALExxxxxxxxxxx=");
        stale.spec.cluster_profile_spec =
            json!({"helmCharts": [{"chartName": "a", "chartVersion": "0"}]})
                .as_object()
                .cloned()
                .unwrap()
                .into();
        w.summaries.insert(
            "app-dev".into(),
            [
                summary(&dev, "c1", "Provisioned", "GOODxxxxxxxxxxxx="),
                summary(&dev, "c2", "Provisioned", "GOODxxxxxxxxxxxx="),
                stale,
                summary(&dev, "c4", "Provisioning", "BUSYxxxxxxxxxxxx="),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(unread(&p, &w), ["app-prod"]);
        let stored = of_run(&p, &w);
        assert_eq!(stored.keys().collect::<Vec<_>>(), ["dev"]);
        assert_eq!(
            stored["dev"].features,
            BTreeMap::from([("Helm".to_string(), vec!["GOODxxxxxxxx".to_string()])])
        );
        // Templated per cluster: more distinct hashes than kept, none kept.
        let prod = w.profiles["app-prod"].clone();
        w.summaries.insert(
            "app-prod".into(),
            (0..=MAX_BEFORE)
                .map(|i| {
                    summary(
                        &prod,
                        &format!("p{i}"),
                        "Provisioned",
                        &format!("{i:04}xxxxxxxxxxxx="),
                    )
                })
                .collect(),
        );
        assert!(unread(&p, &w).is_empty());
        assert_eq!(of_run(&p, &w).keys().collect::<Vec<_>>(), ["dev"]);
    }

    /// The hashes used are those stored for exactly the spec the profile carries, with the
    /// revision a rollback of the current run restores (the one the pass reads).
    #[test]
    fn the_hashes_of_the_spec_a_profile_carries_from_the_revision_a_rollback_restores() {
        let mut p = promotion("app");
        let mut w = world(&p);
        let dev = w.profiles["app-dev"].clone();
        w.summaries.insert(
            "app-dev".into(),
            [summary(&dev, "c1", "Provisioned", "GOODxxxxxxxxxxxx=")]
                .into_iter()
                .collect(),
        );
        let at = Timestamp::parse("2026-01-01T00:00:00Z").unwrap();
        let mut rev = PromotionRevision::of(&p, "r1", "s", None, at);
        rev.spec.feature_hashes = of_run(&p, &w);
        let name = revision_name("app", "r1");
        w.revisions.insert(name.clone(), Some(rev.clone()));
        let mut want = Before::default();
        want.insert(bit("Helm"), prefix("GOODxxxxxxxx").unwrap());
        let known = Some(Known {
            hashes: want,
            revision: rev.id(),
        });
        // No run, then a run without a rollback: nothing is restored.
        assert_eq!(of(&p, &w, &dev), None);
        p.status = Some(
            serde_json::from_value(json!({"profileSpecHash": "r2", "stagesHash": "s",
                "stages": [{"name": "dev", "lastUpdateReconciledTime": "2026-01-02T00:00:00Z"}]}))
            .unwrap(),
        );
        assert_eq!(of(&p, &w, &dev), None);
        let run = p.status.as_ref().and_then(Run::of).unwrap();
        let rollback = |from: &Run| {
            json!({"from": from, "to": "r1", "order": "reverse", "cause": "Manual", "by": "me",
                   "at": "2026-01-02T00:01:00Z"})
            .to_string()
        };
        p.metadata
            .annotations
            .get_or_insert_default()
            .insert(annotations::ROLLBACK.into(), rollback(&run));
        assert_eq!(of(&p, &w, &dev), known);
        // Another spec on the profile (another revision's), another promotion, a rollback of
        // another run, a stored object of another revision under the name.
        let mut other = dev.clone();
        other
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(SPEC_HASH_ANNOTATION.into(), "another".into());
        assert_eq!(of(&p, &w, &other), None);
        let mut elsewhere = p.clone();
        elsewhere.metadata.name = Some("elsewhere".into());
        assert_eq!(of(&elsewhere, &w, &dev), None);
        let mut stale = p.clone();
        let earlier = Run {
            revision: "r0".into(),
            ..run.clone()
        };
        stale
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(annotations::ROLLBACK.into(), rollback(&earlier));
        assert_eq!(of(&stale, &w, &dev), None);
        let mut edited = rev.clone();
        edited.spec.revision = "r9".into();
        w.revisions.insert(name, Some(edited));
        assert_eq!(of(&p, &w, &dev), None);
    }
}
