//! What `status` and `explain` read from the cluster before they compute anything: one place, so
//! that the CLI and the dashboard show the same world.

use crate::api::sveltos::PROMOTION_NAME_LABEL;
use crate::api::{ClusterProfile, ClusterPromotion};
use crate::pass::World;
use crate::pass::observe::{Observation, list_decoded};
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use kube::api::ListParams;
use std::collections::BTreeSet;

/// Promotion names per label-selected list of their profiles (as `observe` chunks summaries).
const NAMES_PER_LIST: usize = 100;

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

/// [`status_world`] again for the named promotions only, into `observation` (a whole
/// [`status_world`] read before): each one's ClusterPromotion, generated profiles and
/// ClusterSummaries replace what `observation` had of it (a promotion gone is removed), read as
/// `observe` reads them but selected by name and label, so that nothing of the other promotions
/// is read. The rest of the world (the other promotions, the freezes, the inventory) is left as
/// read: a change to it is a whole [`status_world`] again.
pub async fn status_world_of(
    client: &kube::Client,
    observation: &mut Observation,
    names: &BTreeSet<String>,
    now: DateTime<Utc>,
    tz: Tz,
) -> anyhow::Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let names: Vec<&String> = names.iter().collect();
    // Profiles before promotions, as `observe` reads them.
    let mut profiles = Vec::new();
    for chunk in names.chunks(NAMES_PER_LIST) {
        let chunk: Vec<&str> = chunk.iter().map(|n| n.as_str()).collect();
        let selector = format!("{PROMOTION_NAME_LABEL} in ({})", chunk.join(","));
        let (good, bad) =
            list_decoded::<ClusterProfile>(client, ListParams::default().labels(&selector))
                .await
                .context("listing generated ClusterProfiles")?;
        profiles.extend(good);
        profiles.extend(bad.iter().filter_map(crate::pass::observe::lenient_profile));
    }
    let mut promotions = Vec::new();
    let mut undecodable = Vec::new();
    for name in &names {
        let params = ListParams::default().fields(&format!("metadata.name={name}"));
        let (good, bad) = list_decoded::<ClusterPromotion>(client, params)
            .await
            .context("listing ClusterPromotions")?;
        promotions.extend(good);
        undecodable.extend(bad);
    }
    let named = |n: Option<&str>| n.is_some_and(|n| names.iter().any(|m| *m == n));
    let world = &mut observation.world;
    // What the world had of these promotions: their profiles, and the summaries of those.
    let mut stale: BTreeSet<String> = world
        .profiles
        .iter()
        .filter(|(_, p)| {
            named(
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(PROMOTION_NAME_LABEL))
                    .map(String::as_str),
            )
        })
        .map(|(n, _)| n.clone())
        .collect();
    stale.extend(
        observation
            .promotions
            .iter()
            .filter(|p| named(p.metadata.name.as_deref()))
            .flat_map(crate::pass::decide::watched_profiles),
    );
    for profile in &stale {
        world.profiles.remove(profile);
        world.summaries.remove(profile);
        world.summaries_listed.remove(profile);
    }
    world.profiles.extend(
        profiles
            .into_iter()
            .filter_map(|p| Some((p.metadata.name.clone()?, p))),
    );
    let mut watched: Vec<String> = promotions
        .iter()
        .flat_map(crate::pass::decide::watched_profiles)
        .collect();
    watched.sort();
    watched.dedup();
    if !watched.is_empty() {
        // None was in progress when the world was read: it has no inventory yet.
        if world.clusters.is_empty() {
            let (clusters, excluded) = crate::pass::observe::inventory_with_exclusions(client)
                .await
                .context("reading the cluster inventory")?;
            world.clusters = clusters;
            world.excluded = excluded;
        }
        let summaries = crate::pass::observe::summaries_of(client, &watched).await?;
        world.summaries.extend(summaries);
        world.summaries_listed.extend(watched);
    }
    if let Some(all) = &mut world.all_promotions {
        all.retain(|n, _| !named(Some(n)));
        all.extend(crate::pass::observe::promotion_labels(
            &promotions,
            &undecodable,
        ));
    }
    // Its index of profiles by promotion is built again on next use.
    world.cache = Default::default();
    observation
        .promotions
        .retain(|p| !named(p.metadata.name.as_deref()));
    observation.undecodable.retain(|u| !named(Some(&u.name)));
    revisions_asked_for(client, &promotions, &mut observation.world, now, tz).await;
    for p in promotions {
        let at = observation
            .promotions
            .partition_point(|q| q.metadata.name < p.metadata.name);
        observation.promotions.insert(at, p);
    }
    for u in undecodable {
        let at = observation.undecodable.partition_point(|q| q.name < u.name);
        observation.undecodable.insert(at, u);
    }
    Ok(())
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
