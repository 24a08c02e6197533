//! `promoter plan NAME`: the live state of one promotion (its status, generated profiles, their
//! ClusterSummaries, its stored revisions, and the inventory) loaded into a simulation, to predict when each remaining
//! stage completes. Deployments are assumed to succeed after the default deploy time; Cluster API
//! clusters are simulated as SveltosClusters.

use super::fleet::Fleet;
use super::run::SimWorld;
use crate::api::sveltos::{CLUSTER_PROFILE_NAME_LABEL, PROMOTION_NAME_LABEL};
use crate::api::{ClusterProfile, ClusterPromotion, ClusterSummary, PromotionRevision};
use crate::fake::{cluster_profile_type, cluster_summary_type, promotion_revision_type};
use crate::pass::observe::inventory;
use anyhow::Context as _;
use kube::api::{Api, ListParams};

pub async fn load_live(client: &kube::Client, name: &str) -> anyhow::Result<SimWorld> {
    let promotion = Api::<ClusterPromotion>::all(client.clone())
        .get(name)
        .await
        .with_context(|| format!("reading ClusterPromotion {name}"))?;
    let profiles = Api::<ClusterProfile>::all(client.clone())
        .list(&ListParams::default().labels(&format!("{PROMOTION_NAME_LABEL}={name}")))
        .await
        .context("listing its ClusterProfiles")?
        .items;
    let mut objects = Vec::new();
    let names: Vec<String> = profiles
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    if !names.is_empty() {
        let sel = format!("{CLUSTER_PROFILE_NAME_LABEL} in ({})", names.join(","));
        // Untyped: the simulator needs them whole (the typed ClusterSummary keeps only what a pass reads).
        let resource = kube::discovery::ApiResource::erase::<ClusterSummary>(&());
        let summaries = Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource)
            .list(&ListParams::default().labels(&sel))
            .await
            .context("listing ClusterSummaries")?
            .items;
        for cs in summaries {
            objects.push((cluster_summary_type(), serde_json::to_value(cs)?));
        }
    }
    for p in profiles {
        objects.insert(0, (cluster_profile_type(), serde_json::to_value(p)?));
    }
    // Its stored revisions: what a rollback in progress restores (without them the plan said
    // the revision "is gone"). None without promoter's own CRDs.
    match Api::<PromotionRevision>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            for r in list.items.into_iter().filter(|r| r.spec.promotion == name) {
                objects.push((promotion_revision_type(), serde_json::to_value(r)?));
            }
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(anyhow::Error::new(e).context("listing PromotionRevisions")),
    }
    Ok(SimWorld {
        promotions: vec![promotion],
        fleet: Fleet::of_inventory(inventory(client).await?),
        objects,
    })
}
