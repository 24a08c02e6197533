//! Observe: a handful of list calls that read the world. Their number does not grow with the number
//! of promotions: ClusterSummaries are listed only for the profiles still being checked (a long list
//! of names is split into a few label-selector chunks), and the inventory only when some promotion
//! is in progress.

use super::decide::watched_profiles;
use super::summaries::ProfileSummaries;
use super::world::{ClusterKind, InventoryCluster, World};
use crate::api::inventory::CAPI_GROUP;
use crate::api::sveltos::{CLUSTER_PROFILE_NAME_LABEL, PROMOTION_NAME_LABEL};
use crate::api::{
    CapiClusterFacts, ClusterProfile, ClusterPromotion, ClusterSummary, SveltosCluster,
};
use anyhow::Context as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ObjectList;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// Profile names per ClusterSummary list call; keeps the label selector well below URL limits.
const NAMES_PER_LIST: usize = 100;
const PAGE: u32 = 2000;

pub struct Observation {
    pub promotions: Vec<ClusterPromotion>,
    pub world: World,
}

/// Lists page by page, handing each page to `each` so that a caller can reduce it before the next.
async fn list_pages<K>(
    api: &Api<K>,
    params: ListParams,
    mut each: impl FnMut(Vec<K>),
) -> kube::Result<()>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.limit(PAGE);
    loop {
        let page: ObjectList<K> = api.list(&params).await?;
        each(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(()),
        }
    }
}

async fn list_all<K>(api: &Api<K>, params: ListParams) -> kube::Result<Vec<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    list_pages(api, params, |page| items.extend(page)).await?;
    Ok(items)
}

pub async fn observe(client: &kube::Client, selector: Option<&str>) -> anyhow::Result<Observation> {
    let mut params = ListParams::default();
    if let Some(s) = selector {
        params = params.labels(s);
    }
    let promotions = list_all(&Api::<ClusterPromotion>::all(client.clone()), params)
        .await
        .context("listing ClusterPromotions")?;
    let mut world = World::default();
    if promotions.is_empty() {
        return Ok(Observation { promotions, world });
    }
    let profiles = list_all(
        &Api::<ClusterProfile>::all(client.clone()),
        ListParams::default().labels(PROMOTION_NAME_LABEL),
    )
    .await
    .context("listing generated ClusterProfiles")?;
    world.profiles = profiles
        .into_iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, p)))
        .collect();

    let mut watched: Vec<String> = promotions.iter().flat_map(watched_profiles).collect();
    watched.sort();
    watched.dedup();
    if watched.is_empty() {
        return Ok(Observation { promotions, world });
    }
    let summaries = summaries_of(client, &watched).await?;
    world.summaries = summaries;
    world.clusters = inventory(client).await?;
    Ok(Observation { promotions, world })
}

/// The ClusterSummaries of these profiles, by profile, in a few label-selector chunks; each page
/// is reduced to what the decision uses before the next is read.
pub async fn summaries_of(
    client: &kube::Client,
    profiles: &[String],
) -> anyhow::Result<BTreeMap<String, ProfileSummaries>> {
    let api = Api::<ClusterSummary>::all(client.clone());
    let mut out: BTreeMap<String, ProfileSummaries> = BTreeMap::new();
    for chunk in profiles.chunks(NAMES_PER_LIST) {
        let sel = format!("{CLUSTER_PROFILE_NAME_LABEL} in ({})", chunk.join(","));
        list_pages(&api, ListParams::default().labels(&sel), |page| {
            for cs in page {
                if let Some(profile) = cs
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(CLUSTER_PROFILE_NAME_LABEL))
                    .cloned()
                {
                    out.entry(profile).or_default().push(cs);
                }
            }
        })
        .await
        .context("listing ClusterSummaries")?;
    }
    Ok(out)
}

/// SveltosClusters and, when Cluster API is installed, CAPI Clusters (in its served version).
pub async fn inventory(client: &kube::Client) -> anyhow::Result<Vec<InventoryCluster>> {
    let sveltos = list_all(
        &Api::<SveltosCluster>::all(client.clone()),
        ListParams::default(),
    )
    .await
    .context("listing SveltosClusters")?;
    let mut clusters: Vec<InventoryCluster> = sveltos
        .into_iter()
        .map(|c| InventoryCluster {
            kind: ClusterKind::Sveltos,
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
            labels: c.metadata.labels.clone().unwrap_or_default(),
            ready: c.status.as_ref().and_then(|s| s.ready).unwrap_or(false),
            paused: c.spec.paused.unwrap_or(false),
            pull_mode: c.spec.pull_mode.unwrap_or(false),
            kubeconfig_secret: c.spec.kubeconfig_name.clone(),
            kubeconfig_key: c.spec.kubeconfig_key_name.clone(),
        })
        .collect();
    let group = match kube::discovery::group(client, CAPI_GROUP).await {
        Ok(g) => g,
        // No Cluster API in this management cluster: no CAPI clusters.
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
            return Ok(clusters);
        }
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(clusters),
        Err(e) => return Err(e).context("discovering the Cluster API group"),
    };
    if let Some((resource, _)) = group.recommended_kind("Cluster") {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        for c in list_all(&api, ListParams::default())
            .await
            .context("listing Cluster API Clusters")?
        {
            let facts = CapiClusterFacts::from_object(&c.data);
            clusters.push(InventoryCluster {
                kind: ClusterKind::Capi,
                namespace: c.metadata.namespace.clone().unwrap_or_default(),
                name: c.metadata.name.clone().unwrap_or_default(),
                labels: c.metadata.labels.clone().unwrap_or_default(),
                ready: facts.control_plane_initialized,
                paused: facts.paused,
                pull_mode: false,
                kubeconfig_secret: None,
                kubeconfig_key: None,
            });
        }
    }
    Ok(clusters)
}
