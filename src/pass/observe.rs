//! Observe: a handful of list calls that read the world. Their number does not grow with the number
//! of promotions: ClusterSummaries are listed only for the profiles still being checked (a long list
//! of names is split into a few label-selector chunks), and the inventory only when some promotion
//! is in progress.

use super::decide::watched_profiles;
use super::summaries::{Listed, ProfileSummaries};
use super::world::{ExcludedCluster, InventoryCluster, World};
use crate::api::inventory::{CAPI_GROUP, ClusterKind};
use crate::api::sveltos::{CLUSTER_PROFILE_NAME_LABEL, PROMOTION_NAME_LABEL};
use crate::api::{
    CapiClusterFacts, ClusterProfile, ClusterPromotion, ClusterSummary, PromotionFreeze,
    SveltosCluster,
};
use anyhow::Context as _;
use kube::Resource;
use kube::api::{DynamicObject, ListParams};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Profile names per ClusterSummary list call; keeps the label selector well below URL limits.
const NAMES_PER_LIST: usize = 100;
const PAGE: u32 = 2000;

pub struct Observation {
    pub promotions: Vec<ClusterPromotion>,
    /// ClusterPromotions the API server stored but promoter cannot read (a `delay` of `"1d"`, a
    /// malformed status timestamp: the CRD types them as plain strings). Each is an error in its own
    /// status; the others go on.
    pub undecodable: Vec<Undecodable>,
    pub world: World,
}

/// A listed object that does not decode into promoter's types, kept as the API server returned it.
#[derive(Clone, Debug)]
pub struct Undecodable {
    pub name: String,
    pub raw: Value,
    /// `<field path>: <why>`, e.g. `spec.stages[0].trigger.auto.delay: invalid duration "1d"`.
    pub error: String,
}

/// Longest decode error kept: serde messages can quote input, and a status must stay small.
const MAX_ERROR: usize = 512;

/// Decodes one listed object, naming the field path on failure.
pub fn decode<K: DeserializeOwned>(raw: &Value) -> Result<K, String> {
    serde_path_to_error::deserialize::<_, K>(raw).map_err(|e| {
        let path = e.path().to_string();
        let mut msg = if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        };
        if msg.len() > MAX_ERROR {
            let mut cut = MAX_ERROR;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
            msg.push('…');
        }
        msg
    })
}

fn object_name(raw: &Value) -> String {
    raw.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Lists `K` untyped and decodes each object on its own, so that one object promoter cannot
/// understand does not fail the whole list. Each keeps no `metadata.managedFields`: nothing reads
/// them, they are most of a listed promotion's or profile's memory (thousands of them a pass), and
/// an update that sends none keeps the server's (kube-apiserver's field manager then takes the live
/// object's: `decodeLiveOrNew`, kubernetes/kubernetes
/// staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/fieldmanager.go, commit
/// 1c9cf914f2f951313b8e9f7c321f5bd50b5e3d9f).
pub(crate) async fn list_decoded<K>(
    client: &kube::Client,
    params: ListParams,
) -> anyhow::Result<(Vec<K>, Vec<Undecodable>)>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned,
{
    list_tolerant(
        client,
        &K::url_path(&(), None),
        params,
        |(good, bad): &mut (Vec<K>, Vec<Undecodable>), item: Result<Value, Unreadable>| {
            match item {
                Ok(raw) => match decode::<K>(&raw) {
                    Ok(mut k) => {
                        k.meta_mut().managed_fields = None;
                        good.push(k)
                    }
                    Err(error) => bad.push(Undecodable {
                        name: object_name(&raw),
                        raw,
                        error,
                    }),
                },
                // Not even JSON: named, with nothing to repair from.
                Err(u) => bad.push(Undecodable {
                    name: u.name.rsplit('/').next().unwrap_or_default().to_string(),
                    raw: Value::Null,
                    error: u.error,
                }),
            }
        },
    )
    .await
}

/// The labels of each listed ClusterPromotion, decoded or not, by name.
pub(crate) fn promotion_labels<'a>(
    promotions: &'a [ClusterPromotion],
    undecodable: &'a [Undecodable],
) -> impl Iterator<Item = (String, BTreeMap<String, String>)> + 'a {
    let labels = |v: &Value| {
        serde_json::from_value::<BTreeMap<String, String>>(v.clone()).unwrap_or_default()
    };
    promotions
        .iter()
        .filter_map(|p| {
            Some((
                p.metadata.name.clone()?,
                p.metadata.labels.clone().unwrap_or_default(),
            ))
        })
        .chain(undecodable.iter().map(move |u| {
            (
                u.name.clone(),
                labels(u.raw.pointer("/metadata/labels").unwrap_or(&Value::Null)),
            )
        }))
}

/// A generated profile that does not decode is still seen (by name, labels and owners), so that
/// the pass repairs it instead of trying to create it again.
pub(crate) fn lenient_profile(bad: &Undecodable) -> Option<ClusterProfile> {
    let metadata = serde_json::from_value(bad.raw.get("metadata")?.clone()).ok()?;
    let fields = match bad.raw.get("spec") {
        Some(Value::Object(m)) => m.clone(),
        _ => Default::default(),
    };
    let mut cp = ClusterProfile::new("", crate::api::ClusterProfileSpec { fields });
    cp.metadata = metadata;
    Some(cp)
}

/// A read that failed, shared between the promotions it holds back: its [`Display`] and source
/// are the error's own, so that [`crate::cli_error`] renders it (one line, with its hint) as it
/// would the error itself.
#[derive(Clone, Debug)]
pub struct ReadError(std::sync::Arc<anyhow::Error>);

impl ReadError {
    fn new(e: anyhow::Error) -> Self {
        ReadError(std::sync::Arc::new(e))
    }

    /// kubectl's one line, with its hint: what a report and a log say.
    pub fn line(&self) -> String {
        crate::cli_error::line_with_hint(self)
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let inner: &(dyn std::error::Error + 'static) = (*self.0).as_ref();
        inner.source()
    }
}

/// Reads of a pass that still failed after their retries. Each promotion that needed one is not
/// decided in this pass and says so in its report; the others go on. Each text is the failure's
/// one line (kubectl's, with the hint), naming what was read.
#[derive(Clone, Debug, Default)]
pub struct Unread {
    /// Listing the generated ClusterProfiles failed: every promotion needs them.
    pub profiles: Option<String>,
    /// ClusterSummaries that could not be listed, by profile name.
    pub summaries: BTreeMap<String, String>,
    /// The cluster inventory (SveltosClusters, Cluster API Clusters) could not be read: every
    /// promotion with a stage in progress needs it.
    pub inventory: Option<String>,
    /// The PromotionFreezes could not be listed: no promotion may start a stage without knowing
    /// whether a freeze holds it, so none is decided (a freeze fails closed).
    pub freezes: Option<String>,
    /// The first of these failures itself, for the commands that need the whole world (`status`,
    /// `explain`): their error, with its hint.
    pub cause: Option<ReadError>,
}

impl Unread {
    pub fn is_empty(&self) -> bool {
        self.profiles.is_none()
            && self.summaries.is_empty()
            && self.inventory.is_none()
            && self.freezes.is_none()
    }

    /// Records a failure; the first is kept as the cause.
    fn failed(&mut self, e: anyhow::Error) -> String {
        let e = ReadError::new(e);
        let line = e.line();
        self.cause.get_or_insert(e);
        line
    }

    /// Why `p` cannot be decided from this observation, if a read it needs failed.
    pub fn missing_for(&self, p: &ClusterPromotion) -> Option<String> {
        if let Some(e) = self.profiles.as_ref().or(self.freezes.as_ref()) {
            return Some(e.clone());
        }
        let watched = watched_profiles(p);
        if watched.is_empty() {
            return None;
        }
        if let Some(e) = watched.iter().find_map(|w| self.summaries.get(w)) {
            return Some(e.clone());
        }
        self.inventory.clone()
    }
}

/// Everything, or an error: for `status` and `explain`, which show the whole world.
pub async fn observe(client: &kube::Client, selector: Option<&str>) -> anyhow::Result<Observation> {
    let (observation, unread) = observe_pass(client, selector, None).await?;
    match unread.cause {
        Some(e) => Err(anyhow::Error::new(e)),
        None => Ok(observation),
    }
}

/// What a pass reads: the (selected, and in `shard`) promotions, and what their decisions need.
/// Only listing the promotions is fatal; a later read that fails is in [`Unread`], and only the
/// promotions that need it are held back.
pub async fn observe_pass(
    client: &kube::Client,
    selector: Option<&str>,
    shard: Option<super::shard::Shard>,
) -> anyhow::Result<(Observation, Unread)> {
    let mut params = ListParams::default();
    if let Some(s) = selector {
        params = params.labels(s);
    }
    // Profiles before promotions. A pass writes a promotion's records and status before the
    // profiles that status decides, so a profile listed first is never newer than the promotion
    // listed after it; a profile changed after this list makes any write of it here a conflict.
    // The other way round, a pass that read a promotion before a concurrent pass's rollback (or
    // restart) could read that pass's new profiles and "repair" them back to the revision of the
    // status it read, with their fresh resourceVersions (tests/failure_policy_races.rs,
    // a_stale_concurrent_pass_never_undoes_a_rollback).
    let profiles =
        list_decoded::<ClusterProfile>(client, ListParams::default().labels(PROMOTION_NAME_LABEL))
            .await;
    let (mut promotions, mut undecodable) = list_decoded::<ClusterPromotion>(client, params)
        .await
        .context("listing ClusterPromotions")?;
    let all_promotions = selector
        .is_none()
        .then(|| promotion_labels(&promotions, &undecodable).collect());
    if let Some(shard) = shard {
        promotions.retain(|p| shard.owns(p.metadata.name.as_deref().unwrap_or_default()));
        undecodable.retain(|u| shard.owns(&u.name));
    }
    for bad in &undecodable {
        tracing::error!(promotion = %bad.name, error = %bad.error, "cannot read this ClusterPromotion; its status says why");
    }
    let mut world = World {
        all_promotions,
        ..World::default()
    };
    let mut unread = Unread::default();
    let done = |promotions, undecodable, world, unread| {
        Ok((
            Observation {
                promotions,
                undecodable,
                world,
            },
            unread,
        ))
    };
    if promotions.is_empty() {
        return done(promotions, undecodable, world, unread);
    }
    match profiles {
        Ok((mut profiles, bad_profiles)) => {
            for bad in &bad_profiles {
                tracing::warn!(profile = %bad.name, error = %bad.error, "cannot read this ClusterProfile; it is rewritten from its promotion");
                profiles.extend(lenient_profile(bad));
            }
            world.profiles = profiles
                .into_iter()
                .filter_map(|p| Some((p.metadata.name.clone()?, p)))
                .collect();
        }
        Err(e) => {
            let e = unread.failed(e.context("listing generated ClusterProfiles"));
            // Said per promotion by the pass, as the error of a command by `status`/`explain`.
            tracing::debug!(error = %e, "no promotion is decided in this pass");
            unread.profiles = Some(e);
            return done(promotions, undecodable, world, unread);
        }
    }
    let mut watched: Vec<String> = promotions.iter().flat_map(watched_profiles).collect();
    watched.sort();
    watched.dedup();
    // The freezes are read beside the summaries and the inventory (each list's pages one after
    // the other); what failed is taken in this order, the first being the cause. The inventory
    // is read after the summaries: a cluster that joins a stage in between is then one without a
    // summary (not deployed), never one the stage passes without.
    let in_progress = async {
        if watched.is_empty() {
            return None;
        }
        let summaries = summaries_tolerant(client, &watched).await;
        Some((summaries, inventory_with_exclusions(client).await))
    };
    let (listed_freezes, in_progress) = futures::join!(freezes(client), in_progress);
    match listed_freezes {
        Ok(Some(f)) => world.freezes = f,
        Ok(None) => world.own_crds_missing = true,
        Err(e) => {
            let e = unread.failed(e);
            tracing::debug!(error = %e, "no promotion is decided in this pass (a freeze fails closed)");
            unread.freezes = Some(e);
        }
    }
    let Some(((summaries, failed), inventory)) = in_progress else {
        return done(promotions, undecodable, world, unread);
    };
    world.summaries = summaries;
    world.summaries_listed = watched
        .into_iter()
        .filter(|w| !failed.contains_key(w))
        .collect();
    for (profile, e) in failed {
        let line = match &unread.cause {
            Some(_) => e.line(),
            None => {
                let line = e.line();
                unread.cause = Some(e);
                line
            }
        };
        unread.summaries.insert(profile, line);
    }
    match inventory {
        Ok((clusters, excluded)) => {
            world.clusters = clusters;
            world.excluded = excluded;
        }
        Err(e) => {
            let e = unread.failed(e.context("reading the cluster inventory"));
            tracing::debug!(
                error = %e,
                "promotions in progress are not decided in this pass"
            );
            unread.inventory = Some(e);
        }
    }
    done(promotions, undecodable, world, unread)
}

/// The PromotionFreezes; `None` when promoter.dev's CRDs are not served (nothing can be frozen
/// then, and no revision can be stored). One that does not decode is kept as far as it can be
/// read, marked unreadable ([`lenient_freeze`]): it holds, failing closed, and says why.
pub async fn freezes(client: &kube::Client) -> anyhow::Result<Option<Vec<PromotionFreeze>>> {
    let listed = list_tolerant(
        client,
        &PromotionFreeze::url_path(&(), None),
        ListParams::default(),
        |out: &mut Vec<PromotionFreeze>, item: Result<Value, Unreadable>| match item {
            Ok(raw) => match lenient_freeze(&raw) {
                Some(f) => {
                    if let Some(why) = &f.spec.unreadable {
                        tracing::error!(freeze = %object_name(&raw), error = %why, "cannot read this PromotionFreeze; it holds every promotion it may select until it is fixed or deleted");
                    }
                    out.push(f);
                }
                None => {
                    tracing::error!(error = "no metadata.name", "skipping a listed PromotionFreeze that has no name")
                }
            },
            Err(u) => {
                tracing::error!(freeze = %u.name, error = %u.error, "skipping a listed PromotionFreeze that is not JSON")
            }
        },
    )
    .await;
    match listed {
        Ok(f) => Ok(Some(f)),
        // A group nobody serves is Go's plain-text 404, which kube reports with the code only.
        Err(e)
            if e.downcast_ref::<kube::Error>()
                .is_some_and(|k| matches!(k, kube::Error::Api(s) if s.code == 404)) =>
        {
            tracing::debug!("PromotionFreezes are not served (promoter crd --own installs them)");
            Ok(None)
        }
        Err(e) => Err(e.context("listing PromotionFreezes")),
    }
}

/// A listed PromotionFreeze as promoter reads it: decoded; or, when it does not decode (another
/// tool wrote it, an older CRD without promoter's schema), kept as far as each part can be read,
/// with `spec.unreadable` saying what could not: an unreadable selector selects every promotion,
/// an unreadable start or end leaves it unbounded, an unreadable status is none (the pass
/// rewrites it). None: not even its name can be read.
pub fn lenient_freeze(raw: &Value) -> Option<PromotionFreeze> {
    if let Ok(f) = decode::<PromotionFreeze>(raw) {
        return Some(f);
    }
    let metadata: kube::core::ObjectMeta =
        serde_json::from_value(raw.get("metadata")?.clone()).ok()?;
    metadata.name.as_ref()?;
    let status = raw
        .get("status")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    let spec_raw = raw.get("spec").cloned().unwrap_or(Value::Null);
    let spec = match decode::<crate::api::PromotionFreezeSpec>(&spec_raw) {
        // Only the status was unreadable: the freeze itself is fine.
        Ok(spec) => spec,
        Err(why) => {
            let field = |name: &str| spec_raw.get(name).cloned().unwrap_or(Value::Null);
            crate::api::PromotionFreezeSpec {
                reason: field("reason").as_str().unwrap_or_default().to_string(),
                promotion_selector: serde_json::from_value(field("promotionSelector"))
                    .ok()
                    .flatten(),
                start: serde_json::from_value(field("start")).ok().flatten(),
                end: serde_json::from_value(field("end")).ok().flatten(),
                unreadable: Some(format!("spec.{why}")),
            }
        }
    };
    let mut f = PromotionFreeze::new(metadata.name.as_deref().unwrap_or_default(), spec);
    f.metadata = metadata;
    f.status = status;
    Some(f)
}

/// A listed ClusterSummary, under the profile it belongs to (its label).
pub fn add_summary(by_profile: &mut BTreeMap<String, ProfileSummaries>, cs: ClusterSummary) {
    if let Some(profile) = cs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_PROFILE_NAME_LABEL))
        .cloned()
    {
        by_profile.entry(profile).or_default().push(cs);
    }
}

/// The world a pass makes of what it listed, as [`observe_pass`] builds it, without HTTP (the
/// model checker observes this way): the generated profiles by name, the ClusterSummaries by
/// profile, the SveltosClusters as the inventory (no Cluster API). Which summaries to list is the
/// caller's: [`watched_profiles`] of the promotions.
pub fn world_from_listed(
    profiles: Vec<ClusterProfile>,
    summaries: Vec<ClusterSummary>,
    clusters: &[SveltosCluster],
) -> World {
    let mut by_profile = BTreeMap::new();
    for cs in summaries {
        add_summary(&mut by_profile, cs);
    }
    let mut inventory = Inventory::default();
    for c in clusters {
        inventory.place_sveltos(c);
    }
    let mut world = World::new(
        profiles
            .into_iter()
            .filter_map(|p| Some((p.metadata.name.clone()?, p)))
            .collect(),
        by_profile,
        inventory.clusters,
    );
    world.excluded = inventory.excluded;
    world
}

/// The ClusterSummaries of these profiles, by profile, in a few label-selector chunks; each page
/// is reduced to what the decision uses before the next is read.
pub async fn summaries_of(
    client: &kube::Client,
    profiles: &[String],
) -> anyhow::Result<BTreeMap<String, ProfileSummaries>> {
    let (out, failed) = summaries_tolerant(client, profiles).await;
    match failed.into_values().next() {
        Some(e) => Err(anyhow::Error::new(e)),
        None => Ok(out),
    }
}

/// [`summaries_of`], chunk by chunk: a chunk that cannot be read (after its retries) names each of
/// its profiles in the second map, and nothing partial of it is kept.
async fn summaries_tolerant(
    client: &kube::Client,
    profiles: &[String],
) -> (
    BTreeMap<String, ProfileSummaries>,
    BTreeMap<String, ReadError>,
) {
    let mut out: BTreeMap<String, ProfileSummaries> = BTreeMap::new();
    let mut failed: BTreeMap<String, ReadError> = BTreeMap::new();
    let url = ClusterSummary::url_path(&(), None);
    for chunk in profiles.chunks(NAMES_PER_LIST) {
        let sel = format!("{CLUSTER_PROFILE_NAME_LABEL} in ({})", chunk.join(","));
        let listed = list_pages(
            client,
            &url,
            ListParams::default().labels(&sel),
            |part: &mut BTreeMap<String, ProfileSummaries>, raw: &RawValue| {
                match serde_json::from_str::<Listed>(raw.get()) {
                    Ok(cs) => {
                        if let Some(profile) = cs.profile() {
                            match part.get_mut(profile) {
                                Some(p) => p.push_listed(cs),
                                None => {
                                    let profile = profile.to_string();
                                    part.entry(profile).or_default().push_listed(cs)
                                }
                            }
                        }
                    }
                    // Its cluster then has no readable summary: not in sync, and named in the log.
                    Err(e) => {
                        let u = unreadable(raw, &url, &e);
                        if let Some(profile) = u.label(CLUSTER_PROFILE_NAME_LABEL) {
                            part.entry(profile)
                                .or_default()
                                .unreadable
                                .push(format!("{}: {}", u.name, u.error));
                        }
                    }
                }
            },
        )
        .await;
        match listed {
            Ok(part) => out.extend(part),
            Err(e) => {
                let e = ReadError::new(e.context("listing ClusterSummaries"));
                tracing::debug!(profiles = chunk.len(), error = %e.line(), "the promotions of these profiles are not decided in this pass");
                for p in chunk {
                    failed.insert(p.clone(), e.clone());
                }
            }
        }
    }
    (out, failed)
}

/// A page of a list, its items left as text (borrowed from the page's), each decoded on its own.
#[derive(Deserialize)]
struct Page<'a> {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(borrow, default)]
    items: Vec<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

/// A page being fetched on a task of its own, so that its transfer and decompression go on while
/// the page before it is decoded (a body is read only as fast as it is polled). It runs within the
/// pass's deadline, and is abandoned when the list is (dropped: aborted).
struct Fetch(tokio::task::JoinHandle<kube::Result<String>>);

impl Fetch {
    fn start(client: &kube::Client, request: http::Request<Vec<u8>>) -> Self {
        use tracing::Instrument as _;
        let client = client.clone();
        let deadline = crate::client::retry::deadline();
        let fetch = async move {
            let text = page_text(&client, request);
            match deadline {
                Some(d) => crate::client::retry::within_deadline(d, text).await,
                None => text.await,
            }
        };
        Fetch(tokio::spawn(fetch.instrument(tracing::Span::current())))
    }

    async fn text(&mut self) -> anyhow::Result<kube::Result<String>> {
        (&mut self.0).await.context("reading a list page")
    }
}

impl Drop for Fetch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A page's text, as kube's `Client::request_text` reads it (an error status is the API server's
/// `Status`, or one made of its text), in the one buffer the body was read into: kube's copies
/// that buffer into a `Vec` (kube-client 5.0.0 src/client/mod.rs, `request_text`), two copies of
/// a page at once, a pass's largest allocation.
async fn page_text(client: &kube::Client, request: http::Request<Vec<u8>>) -> kube::Result<String> {
    use http_body_util::BodyExt as _;
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let code = response.status();
    // One chunk: the reads' retry layer has read the whole body into one buffer
    // (`crate::client::retry`), which this takes over without copying it.
    let body = response.into_body().collect().await?.to_bytes();
    let text = String::from_utf8(Vec::from(body)).map_err(kube::Error::FromUtf8)?;
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_str::<kube::core::Status>(&text).unwrap_or_else(|_| {
            kube::core::Status::failure(text.trim(), "Failed to parse error data")
                .with_code(code.as_u16())
        });
        tracing::debug!("Unsuccessful: {status:?}");
        return Err(kube::Error::Api(status.boxed()));
    }
    Ok(text)
}

/// An object of a list that could not be decoded.
pub struct Unreadable {
    pub name: String,
    pub error: String,
    labels: BTreeMap<String, String>,
}

impl Unreadable {
    fn label(&self, key: &str) -> Option<String> {
        self.labels.get(key).cloned()
    }
}

#[derive(Deserialize, Default)]
struct MetaOnly {
    #[serde(default)]
    metadata: MetaNames,
}

#[derive(Deserialize, Default)]
struct MetaNames {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Lists page by page and decodes each object on its own: one object that does not decode (a
/// field of the wrong type written by another tool) is named in the log and handed over as
/// [`Unreadable`], and never fails the list. `each` folds the objects into a state that starts
/// from its default, and starts again from it if the list is read again ([`expired`]).
async fn list_tolerant<K: DeserializeOwned, S: Default>(
    client: &kube::Client,
    url: &str,
    params: ListParams,
    mut each: impl FnMut(&mut S, Result<K, Unreadable>),
) -> anyhow::Result<S> {
    list_pages(
        client,
        url,
        params,
        |state: &mut S, raw: &RawValue| match serde_json::from_str::<K>(raw.get()) {
            Ok(obj) => each(state, Ok(obj)),
            Err(e) => each(state, Err(unreadable(raw, url, &e))),
        },
    )
    .await
}

/// A listed object that does not decode, named (and its labels kept) as far as its metadata
/// can be read, and logged.
fn unreadable(raw: &RawValue, url: &str, e: &serde_json::Error) -> Unreadable {
    let meta = serde_json::from_str::<MetaOnly>(raw.get()).unwrap_or_default();
    let name = format!(
        "{}/{}",
        meta.metadata.namespace.unwrap_or_default(),
        meta.metadata.name.unwrap_or_default()
    );
    tracing::warn!(object = %name, url, error = %e, "skipping an object that cannot be decoded");
    Unreadable {
        name,
        error: e.to_string(),
        labels: meta.metadata.labels.unwrap_or_default(),
    }
}

/// Lists page by page, handing each object's text to `each`. The next page is requested as soon
/// as a page's continue token is read, before its objects are decoded, so that the API server
/// serves one while promoter decodes the other; at most two pages are held at once. A list whose
/// continue token expired is read again from the beginning, once, with `each`'s state started
/// again from its default.
async fn list_pages<S: Default>(
    client: &kube::Client,
    url: &str,
    params: ListParams,
    mut each: impl FnMut(&mut S, &RawValue),
) -> anyhow::Result<S> {
    let first = params.limit(PAGE);
    let mut params = first.clone();
    let mut state = S::default();
    let mut restarted = false;
    let request = kube::core::Request::new(url);
    let fetch = |params: &ListParams| -> anyhow::Result<Fetch> {
        let req = request.list(params).context("building a list request")?;
        Ok(Fetch::start(client, req))
    };
    let mut next = fetch(&params)?;
    loop {
        let text = match next.text().await? {
            Ok(text) => text,
            Err(e) if expired(&e) && params.continue_token.is_some() => {
                if restarted || past_deadline() {
                    return Err(anyhow::Error::new(e).context(if restarted {
                        "the list was read again from the beginning after its continue token expired, and expired again"
                    } else {
                        "its continue token expired, and the pass deadline leaves no time to read it again"
                    }));
                }
                tracing::warn!(url, error = %e, "the list's continue token expired (the API server's storage was compacted); listing again from the beginning");
                restarted = true;
                state = S::default();
                params = first.clone();
                next = fetch(&params)?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let page: Page = serde_json::from_str(&text)
            .map_err(kube::Error::SerdeError)
            .context("reading a list page")?;
        let more = match page.metadata.continue_ {
            Some(token) if !token.is_empty() => {
                params = params.continue_token(&token);
                next = fetch(&params)?;
                true
            }
            _ => false,
        };
        for raw in page.items {
            each(&mut state, raw);
        }
        if !more {
            return Ok(state);
        }
    }
}

/// A paginated list whose continue token the API server no longer serves: etcd compacted the
/// revision the list reads at (every 5 minutes, or after a storage restart), answered 410 with
/// reason `Expired` (kubernetes/apiserver pkg/storage/etcd3/errors.go `interpretListError`, commit
/// 24a394e5). client-go's `ListPager` then lists again from the beginning, once
/// (kubernetes/client-go tools/pager/pager.go, commit 32ce75a7; it does so unpaginated, promoter
/// keeps its pages so that each is reduced before the next is read). The Status' inconsistent
/// continuation is not used: it could mix two states of the fleet in one decision.
fn expired(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.reason == "Expired")
}

fn past_deadline() -> bool {
    crate::client::retry::deadline().is_some_and(|d| tokio::time::Instant::now() >= d)
}

/// The addon-controller's `--capi-onboard-annotation`, when it is configured with one: CAPI
/// clusters without that annotation are not onboarded by Sveltos.
pub const CAPI_ONBOARD_ANNOTATION_ENV: &str = "PROMOTER_CAPI_ONBOARD_ANNOTATION";

/// The onboarding annotation from the environment `var` reads (a parameter: tests cannot set the
/// process's own environment safely); an empty value configures none.
fn capi_onboard_annotation(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    var(CAPI_ONBOARD_ANNOTATION_ENV).filter(|v| !v.is_empty())
}

/// The clusters Sveltos serves (see [`inventory_with_exclusions`]).
pub async fn inventory(client: &kube::Client) -> anyhow::Result<Vec<InventoryCluster>> {
    Ok(inventory_with_exclusions(client).await?.0)
}

/// SveltosClusters and, when Cluster API is installed, CAPI Clusters (in its served version), each
/// decoded on its own; and the clusters Sveltos leaves out (see [`ExcludedCluster`]).
pub async fn inventory_with_exclusions(
    client: &kube::Client,
) -> anyhow::Result<(Vec<InventoryCluster>, Vec<ExcludedCluster>)> {
    let mut inventory: Inventory = list_tolerant(
        client,
        &SveltosCluster::url_path(&(), None),
        ListParams::default(),
        |inv: &mut Inventory, item: Result<SveltosCluster, Unreadable>| match item {
            Ok(c) => inv.place_sveltos(&c),
            // Kept as a cluster that is not ready: it blocks the stages that select it, by name,
            // rather than silently dropping out of them.
            Err(u) => {
                let (namespace, name) = u.name.split_once('/').unwrap_or(("", &u.name));
                inv.place(
                    InventoryCluster {
                        kind: ClusterKind::Sveltos,
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        labels: u.labels.clone(),
                        ready: false,
                        paused: false,
                        pull_mode: false,
                        kubeconfig_secret: None,
                        kubeconfig_key: None,
                    },
                    false,
                    None,
                )
            }
        },
    )
    .await
    .context("listing SveltosClusters")?;
    // kube's `discovery::group` (kube-client 5.0.0 src/discovery/oneshot.rs) reads `/apis`, then
    // `/apis/{group}/{version}` for each version listed there (`ApiGroup::query_apis`).
    let group = match kube::discovery::group(client, CAPI_GROUP).await {
        Ok(g) => g,
        // No Cluster API in this management cluster: no CAPI clusters.
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
            return Ok((inventory.clusters, inventory.excluded));
        }
        // A version `/apis` listed is gone by the time it is read (the CRD just removed): no
        // CAPI clusters either. Any other error (a 403) is not taken for an absent Cluster API.
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return Ok((inventory.clusters, inventory.excluded));
        }
        Err(e) => return Err(e).context("discovering the Cluster API group"),
    };
    let onboard = capi_onboard_annotation(|k| std::env::var(k).ok());
    if let Some((resource, _)) = group.recommended_kind("Cluster") {
        let url = DynamicObject::url_path(&resource, None);
        let capi: Inventory = list_tolerant(
            client,
            &url,
            ListParams::default(),
            |inv: &mut Inventory, item: Result<DynamicObject, Unreadable>| {
                let Ok(c) = item else { return };
                capi_cluster(&c, onboard.as_deref(), inv);
            },
        )
        .await
        .context("listing Cluster API Clusters")?;
        inventory.clusters.extend(capi.clusters);
        inventory.excluded.extend(capi.excluded);
    }
    Ok((inventory.clusters, inventory.excluded))
}

/// The clusters Sveltos serves and those it leaves out, as a list is read.
#[derive(Default)]
struct Inventory {
    clusters: Vec<InventoryCluster>,
    excluded: Vec<ExcludedCluster>,
}

impl Inventory {
    fn place_sveltos(&mut self, c: &SveltosCluster) {
        self.place(
            InventoryCluster {
                kind: ClusterKind::Sveltos,
                namespace: c.metadata.namespace.clone().unwrap_or_default(),
                name: c.metadata.name.clone().unwrap_or_default(),
                labels: c.metadata.labels.clone().unwrap_or_default(),
                ready: c.status.as_ref().and_then(|s| s.ready).unwrap_or(false),
                paused: c.spec.paused.unwrap_or(false),
                pull_mode: c.spec.pull_mode.unwrap_or(false),
                kubeconfig_secret: c.spec.kubeconfig_name.clone(),
                kubeconfig_key: c.spec.kubeconfig_key_name.clone(),
            },
            c.metadata.deletion_timestamp.is_some(),
            None,
        )
    }

    fn place(&mut self, c: InventoryCluster, deleting: bool, why_not: Option<String>) {
        if deleting {
            self.excluded.push(ExcludedCluster {
                cluster: c,
                why: "being deleted (Sveltos removes its ClusterSummaries)".into(),
            });
        } else if let Some(why) = why_not {
            self.excluded.push(ExcludedCluster { cluster: c, why });
        } else {
            self.clusters.push(c);
        }
    }
}

fn capi_cluster(c: &DynamicObject, onboard: Option<&str>, inv: &mut Inventory) {
    let facts = CapiClusterFacts::from_object(&c.data);
    let why_not = onboard
        .filter(|a| {
            !c.metadata
                .annotations
                .as_ref()
                .is_some_and(|m| m.contains_key(*a))
        })
        .map(|a| format!("not onboarded: no annotation {a} (the addon-controller's --capi-onboard-annotation)"));
    inv.place(
        InventoryCluster {
            kind: ClusterKind::Capi,
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
            labels: c.metadata.labels.clone().unwrap_or_default(),
            ready: facts.control_plane_initialized,
            paused: facts.paused,
            pull_mode: false,
            kubeconfig_secret: None,
            kubeconfig_key: None,
        },
        c.metadata.deletion_timestamp.is_some(),
        why_not,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
               "metadata": {"name": "holidays", "generation": 2}, "spec": spec, "status": status})
    }

    #[test]
    fn a_decode_error_names_its_field_and_is_cut_at_a_character() {
        // At the root there is no field to name.
        assert_eq!(
            decode::<BTreeMap<String, String>>(&json!([1])).unwrap_err(),
            "invalid type: sequence, expected a map"
        );
        let error =
            |text: &str| decode::<BTreeMap<String, u32>>(&json!({ "k": text })).unwrap_err();
        let overhead = error("").len();
        assert_eq!(error(""), "k: invalid type: string \"\", expected u32");
        // Exactly the limit: kept whole.
        let whole = error(&"x".repeat(MAX_ERROR - overhead));
        assert_eq!(whole.len(), MAX_ERROR);
        assert!(whole.ends_with("expected u32"), "{whole}");
        // Beyond it: cut before the character the limit falls in, and marked.
        let long = "é".repeat(MAX_ERROR);
        let cut = error(&long);
        // Each `é` is two bytes: the limit falls inside one when the prefix's length is odd.
        let prefix = "k: invalid type: string \"";
        let kept = MAX_ERROR - (MAX_ERROR - prefix.len()) % 2;
        assert_eq!(cut.len(), kept + '…'.len_utf8(), "{cut}");
        assert!(cut.starts_with(&format!("{prefix}éé")) && cut.ends_with("é…"));
    }

    #[test]
    fn a_profile_that_does_not_decode_is_seen_by_its_metadata_and_what_spec_it_has() {
        let bad = |raw: Value| Undecodable {
            name: "kyverno-dev".into(),
            raw,
            error: "spec.syncMode: invalid type".into(),
        };
        let cp = lenient_profile(&bad(json!({
            "metadata": {"name": "kyverno-dev", "labels": {PROMOTION_NAME_LABEL: "kyverno"}},
            "spec": {"syncMode": 7}
        })))
        .unwrap();
        assert_eq!(cp.metadata.name.as_deref(), Some("kyverno-dev"));
        assert_eq!(
            cp.metadata.labels.unwrap_or_default()[PROMOTION_NAME_LABEL],
            "kyverno"
        );
        assert_eq!(cp.spec.fields["syncMode"], 7);
        let listless = lenient_profile(&bad(json!({
            "metadata": {"name": "kyverno-dev"}, "spec": [1]
        })))
        .unwrap();
        assert!(listless.spec.fields.is_empty());
        assert!(lenient_profile(&bad(json!({"spec": {}}))).is_none());
    }

    /// A server holding a page of SveltosClusters and a few more; and how many.
    async fn two_pages_of_clusters() -> (crate::fake::FakeApiServer, usize) {
        let server = crate::fake::FakeApiServer::start_with_sveltos()
            .await
            .unwrap();
        let n = PAGE as usize + 5;
        {
            let mut store = server.store();
            for i in 0..n {
                store
                    .seed(
                        &crate::fake::sveltos_cluster_type(),
                        crate::sim::sveltos_cluster("bulk", &format!("c{i:04}"), &[]),
                    )
                    .unwrap();
            }
        }
        (server, n)
    }

    /// The inventory is read page by page, every page; a list whose continue token expired is
    /// read again from the beginning once, within the pass deadline; a second expiry, or any other
    /// failure of a later page, fails the list.
    #[tokio::test]
    async fn a_list_reads_every_page_and_starts_again_once_when_its_token_expires() {
        use crate::fake::{FaultAction, FaultRule, RequestMatcher};
        let (server, n) = two_pages_of_clusters().await;
        let client = server.client().await.unwrap();
        let lists = || RequestMatcher::verbs(&["list"]).resource("sveltosclusters");
        let listed = |code: Option<u16>| {
            server.count(|r| {
                r.verb == "list"
                    && r.resource == "sveltosclusters"
                    && code.is_none_or(|c| r.code == c)
            })
        };
        assert_eq!(inventory(&client).await.unwrap().len(), n);
        assert_eq!(listed(None), 2, "two pages");

        server.clear_requests();
        server.inject(FaultRule::nth(lists(), 2, FaultAction::Compact));
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
        let again = crate::client::retry::within_deadline(deadline, inventory(&client)).await;
        assert_eq!(again.unwrap().len(), n, "each cluster once");
        assert_eq!((listed(None), listed(Some(410))), (4, 1));

        server.clear_requests();
        server.inject(FaultRule::after(lists(), 1, FaultAction::Compact));
        let e = format!("{:#}", inventory(&client).await.unwrap_err());
        assert!(e.contains("expired again"), "{e}");
        assert_eq!(listed(Some(410)), 2);
        server.clear_faults();

        server.clear_requests();
        server.inject(FaultRule::nth(lists(), 2, FaultAction::Status(403)));
        assert!(inventory(&client).await.is_err());
        assert_eq!(
            listed(None),
            2,
            "a refused page is not a reason to list again"
        );
    }

    /// The next page is requested while the page before it is still being decoded: the API
    /// server's time and promoter's overlap instead of adding up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_page_is_requested_while_a_page_is_decoded() {
        let (server, n) = two_pages_of_clusters().await;
        let client = server.client().await.unwrap();
        let lists = || server.count(|r| r.verb == "list" && r.resource == "sveltosclusters");
        let mut decoded = 0;
        let mut overlapped = false;
        let listed = list_tolerant(
            &client,
            &SveltosCluster::url_path(&(), None),
            ListParams::default(),
            |_: &mut (), _: Result<Value, Unreadable>| {
                decoded += 1;
                if decoded > 1 {
                    return;
                }
                // While the first object is being decoded, the second page is asked for.
                let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while !overlapped && std::time::Instant::now() < until {
                    overlapped = lists() == 2;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            },
        )
        .await;
        assert!(listed.is_ok());
        assert_eq!((decoded, lists()), (n, 2));
        assert!(
            overlapped,
            "the second page was requested only after the first was decoded"
        );
    }

    /// The inventory is read after the summaries, never before: a cluster that joins a stage in
    /// between is then one without a summary (not deployed), never one a stage passes without.
    /// The summaries' list is held a while, so that an inventory read beside it would be served
    /// (and logged) first.
    #[tokio::test]
    async fn the_inventory_is_read_after_the_summaries() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        let promotion = json!({"apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion", "metadata": {"name": "p"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}});
        server
            .store()
            .seed(&crate::fake::cluster_promotion_type(), promotion)
            .unwrap();
        server
            .store()
            .seed(
                &crate::fake::sveltos_cluster_type(),
                crate::sim::sveltos_cluster("fleet", "c1", &[]),
            )
            .unwrap();
        let summaries = RequestMatcher::verbs(&["list"]).resource("clustersummaries");
        server.inject(FaultRule::nth(
            summaries,
            1,
            FaultAction::Hang(std::time::Duration::from_millis(300)),
        ));
        let client = server.client().await.unwrap();
        let (o, unread) = observe_pass(&client, None, None).await.unwrap();
        assert!(unread.is_empty(), "{unread:?}");
        assert_eq!(o.world.clusters.len(), 1);
        let lists: Vec<String> = server
            .requests()
            .into_iter()
            .filter(|r| r.verb == "list")
            .map(|r| r.resource)
            .collect();
        let last_summaries = lists.iter().rposition(|r| r == "clustersummaries");
        let first_inventory = lists.iter().position(|r| r == "sveltosclusters");
        assert!(
            matches!((last_summaries, first_inventory), (Some(s), Some(i)) if s < i),
            "{lists:?}"
        );
    }

    /// A last page with an explicit empty continue token (a proxy re-encoding the list) ends the
    /// list: it is not a token to continue from, which would read the list again from the start.
    #[tokio::test]
    async fn an_empty_continue_token_ends_the_list() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        for name in ["c1", "c2"] {
            server
                .store()
                .seed(
                    &crate::fake::sveltos_cluster_type(),
                    crate::sim::sveltos_cluster("fleet", name, &[]),
                )
                .unwrap();
        }
        let client = server.client().await.unwrap();
        let lists = RequestMatcher::verbs(&["list"]).resource("sveltosclusters");
        server.inject(FaultRule::nth(lists, 1, FaultAction::EmptyContinue));
        assert_eq!(
            inventory(&client).await.unwrap().len(),
            2,
            "each cluster once"
        );
        assert_eq!(
            server.count(|r| r.verb == "list" && r.resource == "sveltosclusters"),
            1
        );
    }

    /// A promotion promoter cannot decode is handed over by name with the field that failed; the
    /// others are observed, and the whole fleet's names and labels kept (a freeze's selector).
    #[tokio::test]
    async fn a_promotion_that_does_not_decode_is_named_and_the_others_observed() {
        let server = crate::fake::FakeApiServer::start_with_sveltos()
            .await
            .unwrap();
        let promotion = |name: &str, stage: Value| {
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                   "metadata": {"name": name, "labels": {"team": name}},
                   "spec": {"profileSpec": {}, "stages": [stage]}})
        };
        for p in [
            promotion("good", json!({"name": "dev", "clusterSelector": {}})),
            promotion(
                "bad",
                json!({"name": "dev", "clusterSelector": {}, "trigger": {"auto": {"delay": "1d"}}}),
            ),
        ] {
            server
                .store()
                .seed(&crate::fake::cluster_promotion_type(), p)
                .unwrap();
        }
        let client = server.client().await.unwrap();
        let (o, unread) = observe_pass(&client, None, None).await.unwrap();
        assert!(unread.is_empty(), "{unread:?}");
        let names: Vec<_> = o
            .promotions
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("good".to_string())]);
        assert_eq!(o.undecodable.len(), 1);
        assert_eq!(o.undecodable[0].name, "bad");
        assert!(
            o.undecodable[0]
                .error
                .starts_with("spec.stages[0].trigger.auto.delay"),
            "{}",
            o.undecodable[0].error
        );
        let all = o.world.all_promotions.unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["bad", "good"]);
        assert_eq!(all["bad"]["team"], "bad");
    }

    /// The `managedFields` of listed promotions and profiles are not kept: nothing reads them, they
    /// are most of each object's memory, and an update that sends none keeps the server's.
    #[tokio::test]
    async fn listed_promotions_and_profiles_keep_no_managed_fields() {
        let server = crate::fake::FakeApiServer::start_with_sveltos()
            .await
            .unwrap();
        let managed = json!([{"manager": "promoter", "operation": "Update",
                              "apiVersion": "config.projectsveltos.io/v1beta1",
                              "time": "2026-11-28T10:00:00Z", "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:spec": {"f:syncMode": {}}}}]);
        server
            .store()
            .seed(
                &crate::fake::cluster_promotion_type(),
                json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                       "metadata": {"name": "app", "managedFields": managed},
                       "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}}),
            )
            .unwrap();
        server
            .store()
            .seed(
                &crate::fake::cluster_profile_type(),
                json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                       "metadata": {"name": "app-dev", "labels": {PROMOTION_NAME_LABEL: "app"},
                                    "managedFields": managed},
                       "spec": {"syncMode": "Continuous"}}),
            )
            .unwrap();
        let client = server.client().await.unwrap();
        let (o, unread) = observe_pass(&client, None, None).await.unwrap();
        assert!(unread.is_empty(), "{unread:?}");
        assert_eq!(o.promotions.len(), 1);
        assert_eq!(o.promotions[0].metadata.managed_fields, None);
        let profile = &o.world.profiles["app-dev"];
        assert_eq!(profile.spec.fields["syncMode"], "Continuous");
        assert_eq!(profile.metadata.managed_fields, None);
    }

    /// The freezes as listed; none at all when promoter.dev is not served; any other failure to
    /// list them is an error (a freeze fails closed).
    #[tokio::test]
    async fn freezes_are_listed_none_when_not_served_and_an_error_otherwise() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        server
            .store()
            .seed(
                &crate::fake::promotion_freeze_type(),
                raw(json!({"reason": "CAB-1"}), Value::Null),
            )
            .unwrap();
        let client = server.client().await.unwrap();
        let listed = freezes(&client).await.unwrap().unwrap();
        let names: Vec<_> = listed.iter().map(|f| f.metadata.name.clone()).collect();
        assert_eq!(names, [Some("holidays".to_string())]);
        server.inject(FaultRule::nth(
            RequestMatcher::verbs(&["list"]).resource("promotionfreezes"),
            1,
            FaultAction::Status(403),
        ));
        assert!(freezes(&client).await.is_err(), "refused is not unserved");
        let without = FakeApiServer::start_with_sveltos_only().await.unwrap();
        let client = without.client().await.unwrap();
        assert!(freezes(&client).await.unwrap().is_none());
    }

    #[test]
    fn a_capi_cluster_is_served_once_onboarded_and_until_it_is_deleted() {
        let cluster = |annotations: Value, deleting: bool| {
            let mut c: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                "metadata": {"name": "prod01", "namespace": "fleet", "labels": {"env": "prod"},
                             "annotations": annotations},
                "spec": {"paused": true},
                "status": {"controlPlaneReady": true}
            }))
            .unwrap();
            if deleting {
                c.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ));
            }
            c
        };
        let placed = |c: DynamicObject, onboard: Option<&str>| {
            let mut inv = Inventory::default();
            capi_cluster(&c, onboard, &mut inv);
            (inv.clusters, inv.excluded)
        };
        let (served, excluded) = placed(cluster(json!({}), false), None);
        assert!(excluded.is_empty());
        let c = &served[0];
        assert_eq!(
            (
                c.kind,
                c.namespace.as_str(),
                c.name.as_str(),
                c.ready,
                c.paused
            ),
            (ClusterKind::Capi, "fleet", "prod01", true, true)
        );
        assert_eq!(c.labels["env"], "prod");
        let (served, _) = placed(cluster(json!({"onboard": ""}), false), Some("onboard"));
        assert_eq!(served.len(), 1, "onboarded");
        let (served, excluded) = placed(cluster(json!({"other": ""}), false), Some("onboard"));
        assert!(served.is_empty());
        assert!(
            excluded[0].why.contains("no annotation onboard"),
            "{}",
            excluded[0].why
        );
        let (served, excluded) = placed(cluster(json!({"onboard": ""}), true), Some("onboard"));
        assert!(served.is_empty());
        assert!(excluded[0].why.starts_with("being deleted"));
    }

    #[test]
    fn the_onboarding_annotation_is_the_one_configured_and_none_when_empty_or_absent() {
        let env = |value: Option<&'static str>| {
            move |k: &str| {
                assert_eq!(k, CAPI_ONBOARD_ANNOTATION_ENV);
                value.map(String::from)
            }
        };
        assert_eq!(
            capi_onboard_annotation(env(Some("sveltos.io/onboard"))).as_deref(),
            Some("sveltos.io/onboard")
        );
        assert_eq!(capi_onboard_annotation(env(Some(""))), None);
        assert_eq!(capi_onboard_annotation(env(None)), None);
    }

    /// Cluster API discovered, a version of it gone between `/apis` and its own discovery (404),
    /// or its discovery refused (403): CAPI clusters listed, none, or an error naming the
    /// discovery (not an inventory silently without them).
    #[tokio::test]
    async fn a_cluster_api_version_gone_is_no_capi_clusters_and_a_refused_discovery_an_error() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        server.register(crate::fake::capi_cluster_type());
        {
            let mut store = server.store();
            store
                .seed(
                    &crate::fake::sveltos_cluster_type(),
                    crate::sim::sveltos_cluster("fleet", "sveltos01", &[]),
                )
                .unwrap();
            store
                .seed(
                    &crate::fake::capi_cluster_type(),
                    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                           "metadata": {"name": "capi01", "namespace": "fleet"}, "spec": {},
                           "status": {"controlPlaneReady": true}}),
                )
                .unwrap();
        }
        let client = server.client().await.unwrap();
        // Served or left out (the environment may name an onboarding annotation): either way seen.
        let names = |(served, excluded): (Vec<InventoryCluster>, Vec<ExcludedCluster>)| {
            let mut all: Vec<String> = served.into_iter().map(|c| c.name).collect();
            all.extend(excluded.into_iter().map(|e| e.cluster.name));
            all.sort();
            all
        };
        let listed = inventory_with_exclusions(&client).await.unwrap();
        assert_eq!(names(listed), ["capi01", "sveltos01"]);

        let version = || RequestMatcher::discovery("cluster.x-k8s.io/v1beta1");
        server.inject(FaultRule::nth(version(), 1, FaultAction::Status(404)));
        let gone = inventory_with_exclusions(&client).await.unwrap();
        assert_eq!(names(gone), ["sveltos01"]);

        server.inject(FaultRule::nth(version(), 1, FaultAction::Status(403)));
        let e = format!(
            "{:#}",
            inventory_with_exclusions(&client).await.unwrap_err()
        );
        assert!(e.contains("discovering the Cluster API group"), "{e}");
    }

    /// Issue 30: a PromotionFreeze that does not decode is kept as far as it can be read, marked
    /// unreadable with why; an unreadable status alone is no problem of the freeze.
    #[test]
    fn a_freeze_that_does_not_decode_is_kept_as_far_as_it_can_be_read() {
        let good = raw(json!({"reason": "CAB-1"}), json!({"phase": "Active"}));
        let f = lenient_freeze(&good).unwrap();
        assert_eq!(
            (f.spec.unreadable, f.status.unwrap().phase),
            (None, Some(crate::api::FreezePhase::Active))
        );
        let bad_end = raw(
            json!({"reason": "CAB-1", "end": "next tuesday", "promotionSelector": {"matchLabels": {"tier": "prod"}}}),
            json!({}),
        );
        let f = lenient_freeze(&bad_end).unwrap();
        let why = f.spec.unreadable.clone().unwrap();
        assert!(
            why.starts_with("spec.end: invalid time \"next tuesday\""),
            "{why}"
        );
        assert_eq!(f.spec.end, None);
        assert_eq!(f.spec.reason, "CAB-1");
        assert!(
            f.spec.promotion_selector.is_some(),
            "the selector it could read"
        );
        assert_eq!(f.metadata.generation, Some(2));
        let bad_selector = raw(
            json!({"reason": 7, "promotionSelector": {"matchLabels": "prod"}}),
            Value::Null,
        );
        let f = lenient_freeze(&bad_selector).unwrap();
        assert!(f.spec.unreadable.is_some());
        assert_eq!(f.spec.promotion_selector, None, "every promotion");
        let bad_status = raw(json!({"reason": "CAB-1"}), json!({"phase": "Thawing"}));
        let f = lenient_freeze(&bad_status).unwrap();
        assert_eq!((f.spec.unreadable, f.status), (None, None));
        assert!(lenient_freeze(&json!({"metadata": {}, "spec": {}})).is_none());
    }

    /// A pass holds back only what a failed read touches: `is_empty` is false as soon as any one
    /// of the four reads failed (one condition each), true only when none did.
    #[test]
    fn unread_is_empty_only_when_no_read_failed() {
        assert!(Unread::default().is_empty());
        let failed = || Some("listing failed".to_string());
        let one_each = [
            Unread {
                profiles: failed(),
                ..Unread::default()
            },
            Unread {
                summaries: BTreeMap::from([("kyverno-dev".into(), "listing failed".into())]),
                ..Unread::default()
            },
            Unread {
                inventory: failed(),
                ..Unread::default()
            },
            Unread {
                freezes: failed(),
                ..Unread::default()
            },
        ];
        for u in one_each {
            assert!(!u.is_empty(), "{u:?}");
        }
    }

    /// A failed read kept in [`Unread`] reads as the error itself: the same text, the same
    /// source chain (so `cli_error` finds the API server's answer under promoter's context and
    /// gives its hint), and the first failure is the cause.
    #[test]
    fn a_read_error_reads_as_the_error_it_holds() {
        let forbidden = || {
            anyhow::Error::new(kube::Error::Api(
                kube::core::Status::failure(
                    "clusterprofiles.config.projectsveltos.io is forbidden: User \"promoter\" cannot list resource",
                    "Forbidden",
                )
                .with_code(403)
                .boxed(),
            ))
            .context("listing ClusterProfiles")
        };
        let e = ReadError::new(forbidden());
        assert_eq!(e.to_string(), "listing ClusterProfiles");
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(source, forbidden().source().map(|s| s.to_string()));
        assert!(source.is_some_and(|s| s.contains("forbidden")));
        let line = e.line();
        assert_eq!(line, crate::cli_error::line_with_hint(forbidden().as_ref()));
        assert!(
            line.contains("listing ClusterProfiles") && line.contains("forbidden"),
            "{line}"
        );

        let mut u = Unread::default();
        assert_eq!(u.failed(forbidden()), line);
        u.failed(anyhow::anyhow!("listing PromotionFreezes: timed out"));
        assert_eq!(
            u.cause.map(|c| c.to_string()).as_deref(),
            Some("listing ClusterProfiles"),
            "the first failure is the cause"
        );
    }

    fn summary(profile: &str, cluster: &str) -> Value {
        json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
               "metadata": {"name": format!("{profile}-sveltos-{cluster}"), "namespace": "fleet",
                            "labels": {CLUSTER_PROFILE_NAME_LABEL: profile}},
               "spec": {"clusterNamespace": "fleet", "clusterName": cluster, "clusterType": "Sveltos",
                        "clusterProfileSpec": {}}})
    }

    fn names_of(s: &ProfileSummaries) -> Vec<String> {
        s.iter().map(|cs| cs.name.to_string()).collect()
    }

    /// A pass lists the ClusterSummaries of the profiles its promotions watch, under the profile
    /// they belong to, and says which it listed; a list the API server refuses holds back the
    /// promotions that need it (named, with the first failure as the cause) and keeps nothing of
    /// it. `summaries_of` (what `explain` reads) is the same list, or its error.
    #[tokio::test]
    async fn summaries_are_listed_for_the_watched_profiles_or_hold_back_who_needs_them() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        {
            let mut store = server.store();
            store
            .seed(
                &crate::fake::cluster_promotion_type(),
                json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                       "metadata": {"name": "p"},
                       "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}}),
            )
            .unwrap();
            for (profile, cluster) in [("p-dev", "c1"), ("p-dev", "c2"), ("other-dev", "c1")] {
                store
                    .seed(
                        &crate::fake::cluster_summary_type(),
                        summary(profile, cluster),
                    )
                    .unwrap();
            }
            // Written before the CRD became stricter (a number where Sveltos' types now have a
            // string): listed, but it does not decode; its cluster has no readable summary,
            // named under the profile of its label.
            let mut odd = summary("p-dev", "c3");
            odd["spec"]["clusterName"] = json!(3);
            store
                .seed_unvalidated(&crate::fake::cluster_summary_type(), odd)
                .unwrap();
        }
        let client = server.client().await.unwrap();
        let (o, unread) = observe_pass(&client, None, None).await.unwrap();
        assert!(unread.is_empty(), "{unread:?}");
        let w = &o.world;
        assert_eq!(w.summaries.keys().collect::<Vec<_>>(), ["p-dev"]);
        assert_eq!(
            names_of(&w.summaries["p-dev"]),
            ["p-dev-sveltos-c1", "p-dev-sveltos-c2"]
        );
        assert_eq!(w.summaries_listed.iter().collect::<Vec<_>>(), ["p-dev"]);
        let unreadable = &w.summaries["p-dev"].unreadable;
        assert_eq!(unreadable.len(), 1, "{unreadable:?}");
        assert!(
            unreadable[0].starts_with("fleet/p-dev-sveltos-c3: invalid type"),
            "{unreadable:?}"
        );
        let listed = summaries_of(&client, &["p-dev".into(), "other-dev".into()])
            .await
            .unwrap();
        assert_eq!(listed.keys().collect::<Vec<_>>(), ["other-dev", "p-dev"]);
        assert_eq!(names_of(&listed["other-dev"]), ["other-dev-sveltos-c1"]);

        server.inject(FaultRule::after(
            RequestMatcher::verbs(&["list"]).resource("clustersummaries"),
            0,
            FaultAction::Status(403),
        ));
        let (o, unread) = observe_pass(&client, None, None).await.unwrap();
        assert!(o.world.summaries.is_empty() && o.world.summaries_listed.is_empty());
        let line = unread.summaries.get("p-dev").cloned().unwrap_or_default();
        assert!(
            line.contains("Forbidden") && line.contains("listing ClusterSummaries"),
            "{line}"
        );
        assert_eq!(unread.missing_for(&o.promotions[0]), Some(line.clone()));
        assert_eq!(unread.cause.map(|c| c.line()), Some(line));
        let refused = summaries_of(&client, &["p-dev".into()]).await.unwrap_err();
        assert!(
            refused.to_string().starts_with("listing ClusterSummaries"),
            "{refused}"
        );
    }

    /// The world the model checker builds from what it listed: profiles by name, summaries by
    /// profile, SveltosClusters as the inventory (a cluster being deleted left out, named).
    #[test]
    fn the_world_of_what_was_listed_has_its_profiles_summaries_and_clusters() {
        let profile: ClusterProfile = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": "p-dev"}, "spec": {}}))
        .unwrap();
        let summaries: Vec<ClusterSummary> = [summary("p-dev", "c1"), summary("p-dev", "c2")]
            .into_iter()
            .map(|s| serde_json::from_value(s).unwrap())
            .collect();
        let cluster = |name: &str, deleting: bool| -> SveltosCluster {
            let mut c = json!({"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
                               "metadata": {"name": name, "namespace": "fleet", "labels": {"env": "dev"}},
                               "spec": {}, "status": {"ready": true}});
            if deleting {
                c["metadata"]["deletionTimestamp"] = json!("2026-02-16T06:00:00Z");
            }
            serde_json::from_value(c).unwrap()
        };
        let w = world_from_listed(
            vec![profile],
            summaries,
            &[cluster("c1", false), cluster("c2", true)],
        );
        assert_eq!(w.profiles.keys().collect::<Vec<_>>(), ["p-dev"]);
        assert_eq!(
            names_of(&w.summaries["p-dev"]),
            ["p-dev-sveltos-c1", "p-dev-sveltos-c2"]
        );
        let clusters: Vec<_> = w
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.ready))
            .collect();
        assert_eq!(clusters, [("c1", true)]);
        assert_eq!(w.excluded.len(), 1);
        assert_eq!(w.excluded[0].cluster.name, "c2");
    }
}
