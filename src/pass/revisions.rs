//! Stored revisions (`PromotionRevision`), read on demand: a pass reads only the one a rollback
//! restores, when the decision asks for it (`Decision::needs_revision`), never in a steady pass.

use super::world::World;
use crate::api::PromotionRevision;
use kube::api::Api;

/// Reads the stored revision `name` into the world (`None` when it is absent, which the rollback
/// reports).
pub async fn fetch(client: &kube::Client, world: &mut World, name: &str) -> kube::Result<()> {
    let api: Api<PromotionRevision> = Api::all(client.clone());
    let got = api.get_opt(name).await?;
    world.revisions.insert(name.to_string(), got);
    Ok(())
}

/// For `status` and `explain`: reads the revisions that the promotions' rollbacks in progress
/// restore, so that what the next pass would do is predicted from them (a revision that cannot be
/// read is left out; the prediction then says it would read it).
pub async fn fetch_for_rollbacks(
    client: &kube::Client,
    promotions: &[crate::api::ClusterPromotion],
    world: &mut World,
) {
    for p in promotions {
        let run = p.status.as_ref().and_then(crate::annotations::Run::of);
        let Some(r) = crate::annotations::rollback(p)
            .filter(|r| Some(&r.from) == run.as_ref() && r.completed_at.is_none())
        else {
            continue;
        };
        let name = crate::api::revision_name(p.metadata.name.as_deref().unwrap_or_default(), &r.to);
        if let Err(e) = fetch(client, world, &name).await {
            tracing::debug!(revision = %name, error = %e, "could not read the revision a rollback restores");
        }
    }
}
