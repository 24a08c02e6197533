//! What `status` and `explain` read from the cluster before they compute anything: one place, so
//! that the CLI and the dashboard show the same world.

use crate::api::ClusterPromotion;
use crate::pass::World;
use crate::pass::observe::Observation;

/// What `status` reads: the promotions (those `selector` picks), what their decisions need, and
/// the stored revisions of rollbacks in progress.
pub async fn status_world(
    client: &kube::Client,
    selector: Option<&str>,
) -> anyhow::Result<Observation> {
    let mut observation = crate::pass::observe::observe(client, selector).await?;
    crate::pass::revisions::fetch_for_rollbacks(
        client,
        &observation.promotions,
        &mut observation.world,
    )
    .await;
    Ok(observation)
}

/// What `explain` adds for one promotion to what `observe` read: the inventory (a world with no
/// promotion in progress has none), the ClusterSummaries of every profile of the promotion (they
/// replace `world`'s), the stored revisions its history names, and a rollback's revision.
pub async fn explain_world(
    client: &kube::Client,
    p: &ClusterPromotion,
    world: &mut World,
) -> anyhow::Result<()> {
    if world.clusters.is_empty() {
        world.clusters = crate::pass::observe::inventory(client).await?;
    }
    super::explain::load_summaries(client, p, world).await?;
    super::explain::load_revisions(client, p, world).await;
    crate::pass::revisions::fetch_for_rollbacks(client, std::slice::from_ref(p), world).await;
    Ok(())
}
