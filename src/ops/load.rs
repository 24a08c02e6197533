//! What `status` and `explain` read from the cluster before they compute anything: one place, so
//! that the CLI and the dashboard show the same world.

use crate::api::ClusterPromotion;
use crate::pass::World;
use crate::pass::observe::Observation;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// What `status` reads: the promotions (those `selector` picks), what their decisions need, and
/// the stored revisions their decisions at `now` ask for.
pub async fn status_world(
    client: &kube::Client,
    selector: Option<&str>,
    now: DateTime<Utc>,
    tz: Tz,
) -> anyhow::Result<Observation> {
    let mut observation = crate::pass::observe::observe(client, selector).await?;
    revisions_asked_for(
        client,
        &observation.promotions,
        &mut observation.world,
        now,
        tz,
    )
    .await;
    Ok(observation)
}

/// What `explain` adds for one promotion to what `observe` read: the inventory (a world with no
/// promotion in progress has none), the ClusterSummaries of every profile of the promotion (they
/// replace `world`'s), the stored revisions its history names, and the one its decision asks for.
pub async fn explain_world(
    client: &kube::Client,
    p: &ClusterPromotion,
    world: &mut World,
    now: DateTime<Utc>,
    tz: Tz,
) -> anyhow::Result<()> {
    if world.clusters.is_empty() {
        world.clusters = crate::pass::observe::inventory(client).await?;
    }
    super::explain::load_summaries(client, p, world).await?;
    super::explain::load_revisions(client, p, world).await;
    revisions_asked_for(client, std::slice::from_ref(p), world, now, tz).await;
    Ok(())
}

/// Reads the stored revision each promotion's decision asks for (`Decision::needs_revision`: a
/// rollback in progress, or a finished one whose profiles need repair), as the pass does before
/// it decides again, so that what the next pass would do is predicted from it. A steady status
/// reads none. A revision that cannot be read is left out; the prediction then says it would
/// read it.
pub async fn revisions_asked_for(
    client: &kube::Client,
    promotions: &[ClusterPromotion],
    world: &mut World,
    now: DateTime<Utc>,
    tz: Tz,
) {
    for p in promotions {
        // Only a rollback of the current run asks for one (`pass::rollback::plan`): a status of
        // other promotions is not decided twice.
        let run = p.status.as_ref().and_then(crate::annotations::Run::of);
        if crate::annotations::rollback(p).is_none_or(|r| Some(&r.from) != run.as_ref()) {
            continue;
        }
        let Some(name) = super::inspect::decision(p, world, now, tz).needs_revision else {
            continue;
        };
        if let Err(e) = crate::pass::revisions::fetch(client, world, &name).await {
            tracing::debug!(revision = %name, error = %crate::cli_error::line(&e), "could not read the revision a rollback restores");
        }
    }
}
