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
