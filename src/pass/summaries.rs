//! ClusterSummaries reduced, as they are read, to what the decision and `explain` use: which
//! cluster, which spec it carries, when that spec was written, and the feature statuses.
//!
//! In sync is judged as Sveltos judges it: the summary's whole `clusterProfileSpec` equals the
//! profile's spec, both in the normal form in which they are really stored
//! ([`crate::sveltos::normal_form`]). The specs of a profile's summaries are nearly always the same
//! text, so each distinct text is parsed and normalised once (memoised by the text itself, so that
//! a collision cannot mistake one spec for another), each distinct normal form is kept once per
//! profile, and a summary keeps only its index; a check compares each distinct normal form with the
//! profile once, not each summary.

use crate::annotations::redeploy::{Before, HashPrefix, prefix};
use crate::api::ClusterSummary;
use crate::api::inventory::ClusterKind;
use crate::sveltos::normal_form::{differing_fields, normalize};
use crate::sveltos::redeploy::bit;
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The profile lists whose content a feature deploys: a summary carrying one must report that
/// feature (upstream's provisioned check).
pub const COMPARED: [(&str, &str); 3] = [
    ("helmCharts", "Helm"),
    ("policyRefs", "Resources"),
    ("kustomizationRefs", "Kustomize"),
];

/// How many distinct normal forms are looked for before a new one is simply added (more only
/// costs memory, never correctness).
const DISTINCT_LOOKUP: usize = 8;

/// How long a summary that Sveltos has written no status for since its spec changed is distrusted
/// when promoter cannot know whether the change is redeployed ([`Freshness::Unknown`]: a change
/// that depends on content promoter does not read, or a profile written without a
/// `promoter.dev/redeploy` record). Sveltos moves a feature whose hash changed to `Provisioning`
/// as soon as it reconciles the new spec; a change that touches no hash is never redeployed and
/// writes no status at all (`proceedDeployingFeature` skips the update when the feature is
/// `Provisioned` with the same hash; projectsveltos/addon-controller
/// `controllers/clustersummary_deployer.go`, commit 60c6358035778386ccb9599f4944d2f5a0ec8926), so
/// nothing tells the two apart but time. After this long (promoter's clock against the API server's
/// time of the spec write: a skew of seconds does not matter at this size), the `Provisioned` is
/// taken as current.
pub const STALE_PROVISIONED_GRACE: chrono::Duration = chrono::Duration::minutes(10);

/// One feature of a ClusterSummary. The ids and statuses are shared strings: tens of thousands of
/// summaries say `Helm` and `Provisioned`.
#[derive(Clone, Debug, PartialEq)]
pub struct Feature {
    pub id: Arc<str>,
    pub status: Option<Arc<str>>,
    pub failure_message: Option<Box<str>>,
    /// The start of the hash of what the feature deploys (`featureSummaries[].hash`).
    pub hash: Option<HashPrefix>,
}

/// One ClusterSummary.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub name: Box<str>,
    /// None: a `clusterType` promoter does not know, which no inventory cluster matches.
    pub kind: Option<ClusterKind>,
    pub cluster_namespace: Arc<str>,
    pub cluster_name: Box<str>,
    /// Index of its spec's normal form among the profile's distinct ones; [`UNREADABLE`] when its
    /// spec could not be read.
    spec: u32,
    /// When its spec was last written (seconds since the epoch, the API server's clock), from
    /// `metadata.managedFields`; None when the server keeps no managed fields.
    pub spec_written: Option<i64>,
    /// When a status write last changed its features (the API server's clock, `managedFields` of
    /// the `status` subresource).
    pub status_written: Option<i64>,
    pub features: Box<[Feature]>,
}

const UNREADABLE: u32 = u32::MAX;

/// What promoter knows of the spec change a summary went through last: from the
/// `promoter.dev/redeploy` record of the profile write (see [`crate::annotations::redeploy`]).
///
/// `unsettled`: when promoter wrote the spec, a summary showed no status of the spec before it (one
/// missing, out of sync, without a hash, or with a status not known to be about its spec:
/// `profile_writes::settled`), so Sveltos may have written that spec's status, with a hash
/// promoter never saw, between the pass's list and its write. Such a hash is not evidence of the
/// new spec: only a status written strictly after the spec is (the API server's two times), else
/// the grace; or a hash stored for exactly the new spec (`known`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness<'a> {
    /// Nothing recorded for the profile's current spec, or a change promoter cannot predict.
    Unknown { unsettled: bool },
    /// The change touched no feature's hash: Sveltos redeploys nothing, and the `Provisioned` it
    /// shows stays true.
    Nothing,
    /// These features (bits of [`crate::sveltos::redeploy::FEATURES`]) are redeployed; `before`:
    /// the hashes they carried when promoter wrote the spec, when known.
    Redeploy {
        features: u8,
        before: Option<&'a Before>,
        unsettled: bool,
    },
}

impl Freshness<'_> {
    /// No record: nothing known.
    pub const UNKNOWN: Self = Freshness::Unknown { unsettled: false };
}

/// Whether a summary's features say its current spec is deployed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provisioned {
    Yes,
    No,
    /// Every feature `Provisioned`, but not (yet) known to be for the summary's current spec.
    Stale(Stale),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stale {
    /// A feature promoter expects Sveltos to redeploy still carries the hash it had before the
    /// spec was written: its `Provisioned` is about the previous spec. Held until Sveltos
    /// redeploys it, however long.
    OldHash,
    /// Sveltos has written no status since the spec (both times by the API server's clock) and
    /// promoter cannot know whether it will: counted as current from `grace_ends` (seconds since
    /// the epoch) unless it does.
    NoStatusSince { grace_ends: i64 },
    /// The spec was written while a summary showed no status of the spec before it (`unsettled`),
    /// and no status was written strictly after it: the `Provisioned` may be that spec's. Counted
    /// as current from `grace_ends` unless Sveltos writes a status.
    Unsettled { grace_ends: i64 },
}

impl Summary {
    /// Upstream's check (every feature `Provisioned`, one present for each kind of content the
    /// summary carries), and whether that `Provisioned` is about the summary's current spec:
    ///
    /// * every feature carries a hash Sveltos reported for this very spec before (`known`: stored
    ///   with a revision that completed, [`super::known_hashes`]): it is, however and whenever the
    ///   spec was written (content, no clock);
    /// * a change that redeploys nothing ([`Freshness::Nothing`]): it is;
    /// * a change that redeploys features whose hashes before the write are known: it is not while
    ///   one of them still carries one of those hashes; it is when none does and the write was
    ///   settled (content, no clock);
    /// * otherwise: when a status write changed the features at or after the spec write, both times
    ///   stamped by the API server (`managedFields`; second precision, so equal counts), strictly
    ///   after it when the write was unsettled; else [`Stale::NoStatusSince`] or
    ///   [`Stale::Unsettled`], taken as current once [`STALE_PROVISIONED_GRACE`] has passed.
    ///
    /// Why content comes first, from Sveltos' source (projectsveltos/addon-controller, commit
    /// 60c6358035778386ccb9599f4944d2f5a0ec8926; projectsveltos/libsveltos, commit
    /// fe4f45b; kubernetes-sigs/cluster-api `util/patch/patch.go`, commit
    /// 0c1ff6ac646550df3f4fa2198c0cc56278f67ac7, the helper addon-controller v1.14 uses):
    ///
    /// * every status the ClusterSummary controller writes carries, per feature, the hash it
    ///   computed from the spec its reconcile read (`deployFeature`/`proceedDeployingFeature`,
    ///   `controllers/clustersummary_deployer.go`), and the deployer drops the result of a request
    ///   superseded while it ran (`storeResult`, `lib/deployer/worker.go`): a feature's hash names
    ///   the spec its status is about;
    /// * that status is sent when the reconcile ends, by the patch helper's `Close`
    ///   (`pkg/scope/clustersummary.go`): a JSON merge patch of the status subresource without a
    ///   resourceVersion (`patchStatus`), so a status computed from an older spec lands after the
    ///   new spec was copied (a late write), and nothing discards it;
    /// * `managedFields` times are seconds, and a summary's resourceVersion is its last write's:
    ///   nothing the API server keeps orders a status write before or after a spec write of the same
    ///   second, and "after" is no proof (the late write).
    ///
    /// So where a hash cannot tell, the times decide only as far as they can, and what truly cannot
    /// be known waits for the grace. Sveltos' own `lastAppliedTime` (its node's clock) is never
    /// compared with the API server's.
    pub fn provisioned(
        &self,
        content: [bool; 3],
        freshness: Freshness,
        known: Option<&Before>,
        now: Option<DateTime<Utc>>,
    ) -> Provisioned {
        let all = self
            .features
            .iter()
            .all(|f| f.status.as_deref() == Some("Provisioned"))
            && self.covers(content);
        if !all {
            return Provisioned::No;
        }
        match self.current(freshness, known, now) {
            Ok(()) => Provisioned::Yes,
            Err(stale) => Provisioned::Stale(stale),
        }
    }

    /// Whether it reports a feature for each kind of content its spec has.
    fn covers(&self, content: [bool; 3]) -> bool {
        COMPARED
            .iter()
            .zip(content)
            .all(|((_, feature), has)| !has || self.features.iter().any(|f| &*f.id == *feature))
    }

    /// Whether it reports every kind of content its spec has, each feature with its hash: what
    /// any later status about the same spec will carry is then in sight.
    pub fn reports_hashes(&self, content: [bool; 3]) -> bool {
        !self.features.is_empty()
            && self.covers(content)
            && self.features.iter().all(|f| f.hash.is_some())
    }

    /// Whether the status it shows, whatever it says (`Provisioned`, `Provisioning`, `Failed`), is
    /// about its current spec, by the rules of [`Self::provisioned`]; else why not yet.
    pub fn current(
        &self,
        freshness: Freshness,
        known: Option<&Before>,
        now: Option<DateTime<Utc>>,
    ) -> Result<(), Stale> {
        if known.is_some_and(|k| self.carries(k)) {
            return Ok(());
        }
        let (by_content, unsettled) = match freshness {
            Freshness::Nothing => return Ok(()),
            Freshness::Redeploy {
                features,
                before: Some(before),
                unsettled,
            } => {
                let expected = self.features.iter().filter(|f| features & bit(&f.id) != 0);
                let mut known = true;
                for f in expected {
                    match &f.hash {
                        Some(h) if before.contains(bit(&f.id), h) => return Err(Stale::OldHash),
                        Some(_) => {}
                        None => known = false,
                    }
                }
                (known && !unsettled, unsettled)
            }
            Freshness::Redeploy { unsettled, .. } | Freshness::Unknown { unsettled } => {
                (false, unsettled)
            }
        };
        if by_content {
            return Ok(());
        }
        let Some(written) = self.spec_written else {
            return Ok(());
        };
        // Second precision: a status of the same second may precede the spec write, which
        // matters only when a status of the previous spec may have landed just before it.
        let after = |t: i64| if unsettled { t > written } else { t >= written };
        if self.status_written.is_some_and(after) {
            return Ok(());
        }
        let grace_ends = written + STALE_PROVISIONED_GRACE.num_seconds();
        if now.is_some_and(|n| n.timestamp() >= grace_ends) {
            Ok(())
        } else if unsettled {
            Err(Stale::Unsettled { grace_ends })
        } else {
            Err(Stale::NoStatusSince { grace_ends })
        }
    }

    /// Whether every feature carries one of these hashes (and there is a feature).
    pub fn carries(&self, hashes: &Before) -> bool {
        !self.features.is_empty()
            && self.features.iter().all(|f| {
                f.hash
                    .as_ref()
                    .is_some_and(|h| hashes.contains(bit(&f.id), h))
            })
    }

    /// A feature reported `Failed` or `FailedNonRetriable`: the cluster and Sveltos' message.
    pub fn failure(&self) -> Option<String> {
        self.features
            .iter()
            .find(|f| matches!(f.status.as_deref(), Some("Failed" | "FailedNonRetriable")))
            .map(|f| {
                format!(
                    "cluster {}/{}: feature {} {}: {}",
                    self.cluster_namespace,
                    self.cluster_name,
                    f.id,
                    f.status.as_deref().unwrap_or_default(),
                    f.failure_message.as_deref().unwrap_or("no failure message")
                )
            })
    }
}

fn cluster_key(kind: ClusterKind, namespace: &str, name: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (kind, namespace, name).hash(&mut h);
    h.finish()
}

fn has_content(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        _ => true,
    }
}

/// One distinct spec of a profile's summaries, in normal form.
#[derive(Clone, Debug, Default)]
struct SpecFacts {
    normal: Map<String, Value>,
    /// Per [`COMPARED`] list: whether it has content.
    content: [bool; 3],
}

/// A ClusterSummary as a list page is decoded: only what [`ProfileSummaries`] keeps, borrowed
/// from the page's text where it can be, every other field skipped unread (no object tree per
/// summary: a fleet's pages are tens of thousands of them, each mostly `managedFields` and the
/// copy of the profile's spec). Decoding fails on the fields it reads as decoding the whole
/// [`ClusterSummary`] would (the same types, the same required fields).
#[derive(Deserialize)]
pub struct Listed<'a> {
    #[serde(borrow)]
    pub metadata: ListedMeta<'a>,
    #[serde(borrow)]
    spec: ListedSpec<'a>,
    #[serde(borrow, default)]
    status: Option<ListedStatus<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListedMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub labels: Option<ListedLabels<'a>>,
    #[serde(borrow, default)]
    managed_fields: Option<Vec<Managed<'a>>>,
}

/// The one label a listed summary is filed under.
#[derive(Deserialize, Default)]
pub struct ListedLabels<'a> {
    #[serde(borrow, default, rename = "projectsveltos.io/cluster-profile-name")]
    pub profile: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListedSpec<'a> {
    #[serde(borrow, default)]
    cluster_namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    cluster_name: Cow<'a, str>,
    #[serde(borrow, default)]
    cluster_type: Cow<'a, str>,
    #[serde(borrow, default)]
    cluster_profile_spec: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct ListedStatus<'a> {
    #[serde(borrow, default, rename = "featureSummaries")]
    features: Option<Vec<ListedFeature<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedFeature<'a> {
    #[serde(borrow, rename = "featureID")]
    id: Cow<'a, str>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    failure_message: Option<String>,
    #[serde(default)]
    hash: Option<String>,
}

/// One `managedFields` entry, as far as promoter reads it: which part of the object the write was
/// to, when (the API server's clock), and whether its writer owns `spec` or the features.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Managed<'a> {
    #[serde(borrow, default)]
    subresource: Option<Cow<'a, str>>,
    #[serde(default)]
    time: Option<Time>,
    #[serde(default, rename = "fieldsV1")]
    fields: Option<FieldSets>,
}

#[derive(Deserialize, Default)]
struct FieldSets {
    #[serde(default, rename = "f:spec")]
    spec: Option<IgnoredAny>,
    #[serde(default, rename = "f:status")]
    status: Option<StatusSets>,
}

#[derive(Deserialize, Default)]
struct StatusSets {
    #[serde(default, rename = "f:featureSummaries")]
    features: Option<IgnoredAny>,
}

impl<'a> Managed<'a> {
    fn of(m: &'a ManagedFieldsEntry) -> Self {
        Managed {
            subresource: m.subresource.as_deref().map(Cow::Borrowed),
            time: m.time.clone(),
            fields: m
                .fields_v1
                .as_ref()
                .and_then(|f| FieldSets::deserialize(&f.0).ok()),
        }
    }

    fn owns_spec(&self) -> bool {
        self.subresource.as_deref().unwrap_or_default().is_empty()
            && self.fields.as_ref().is_some_and(|f| f.spec.is_some())
    }

    fn owns_features(&self) -> bool {
        self.subresource.as_deref() == Some("status")
            && self
                .fields
                .as_ref()
                .and_then(|f| f.status.as_ref())
                .is_some_and(|s| s.features.is_some())
    }
}

impl<'a> Listed<'a> {
    /// A whole ClusterSummary (the model checker's, tests'), seen as a list page's would be.
    pub fn of(cs: &'a ClusterSummary) -> Self {
        let labels = cs.metadata.labels.as_ref().map(|l| ListedLabels {
            profile: l
                .get(crate::api::sveltos::CLUSTER_PROFILE_NAME_LABEL)
                .map(|p| Cow::Borrowed(p.as_str())),
        });
        Listed {
            metadata: ListedMeta {
                name: cs.metadata.name.as_deref().map(Cow::Borrowed),
                labels,
                managed_fields: cs
                    .metadata
                    .managed_fields
                    .as_ref()
                    .map(|m| m.iter().map(Managed::of).collect()),
            },
            spec: ListedSpec {
                cluster_namespace: Cow::Borrowed(&cs.spec.cluster_namespace),
                cluster_name: Cow::Borrowed(&cs.spec.cluster_name),
                cluster_type: Cow::Borrowed(&cs.spec.cluster_type),
                cluster_profile_spec: Some(cs.spec.cluster_profile_spec.as_raw()),
            },
            status: cs.status.as_ref().map(|s| ListedStatus {
                features: s.feature_summaries.as_ref().map(|f| {
                    f.iter()
                        .map(|f| ListedFeature {
                            id: Cow::Borrowed(&f.feature_id),
                            status: f.status.clone(),
                            failure_message: f.failure_message.clone(),
                            hash: f.hash.clone(),
                        })
                        .collect()
                }),
            }),
        }
    }

    /// The newest `managedFields` time of the entries that `keep`.
    fn written(&self, keep: impl Fn(&Managed<'a>) -> bool) -> Option<i64> {
        self.metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| keep(m))
            .filter_map(|m| m.time.as_ref().map(|t| t.0.as_second()))
            .max()
    }

    /// The newest time at which a writer of the main resource wrote `spec`.
    pub fn spec_written(&self) -> Option<i64> {
        self.written(Managed::owns_spec)
    }

    /// The newest time at which a write of the `status` subresource changed what its writer owns
    /// of the features.
    pub fn status_written(&self) -> Option<i64> {
        self.written(Managed::owns_features)
    }

    /// The profile it belongs to (its label).
    pub fn profile(&self) -> Option<&str> {
        self.metadata.labels.as_ref()?.profile.as_deref()
    }
}

/// The newest time at which a writer of the main resource wrote `spec`.
pub fn spec_written(cs: &ClusterSummary) -> Option<i64> {
    Listed::of(cs).spec_written()
}

/// The newest time at which a write of the `status` subresource changed what its writer owns of
/// the features.
pub fn status_written(cs: &ClusterSummary) -> Option<i64> {
    Listed::of(cs).status_written()
}

/// The ClusterSummaries of one profile.
#[derive(Clone, Debug, Default)]
pub struct ProfileSummaries {
    items: Vec<Summary>,
    /// Distinct normal forms of the summaries' specs.
    specs: Vec<SpecFacts>,
    /// Spec text → index in `specs`.
    memo: HashMap<Box<str>, u32>,
    /// Hash of (cluster kind, namespace, name) → index in `items` of the first summary with that
    /// hash; looked up with borrowed strings, so that a check allocates nothing per cluster.
    by_cluster: HashMap<u64, u32>,
    /// Indices of summaries whose hash was already taken (another cluster, or a second summary of
    /// the same cluster): scanned after the map, and empty in practice.
    overflow: Vec<u32>,
    /// Shared copies of the strings that repeat across summaries.
    strings: HashSet<Arc<str>>,
    /// Summaries that could not be read, by name, with why (counted as not in sync).
    pub unreadable: Vec<String>,
}

impl FromIterator<ClusterSummary> for ProfileSummaries {
    fn from_iter<I: IntoIterator<Item = ClusterSummary>>(iter: I) -> Self {
        let mut out = ProfileSummaries::default();
        for cs in iter {
            out.push(cs);
        }
        out
    }
}

impl ProfileSummaries {
    fn shared(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strings.get(s) {
            return a.clone();
        }
        let a: Arc<str> = s.into();
        self.strings.insert(a.clone());
        a
    }

    /// The index of this spec text's normal form, parsing and normalising only a text not seen
    /// before.
    fn spec_index(&mut self, text: &str) -> u32 {
        if let Some(i) = self.memo.get(text) {
            return *i;
        }
        let Ok(map) = serde_json::from_str::<Map<String, Value>>(text) else {
            return UNREADABLE;
        };
        let normal = normalize(&map);
        let found = self
            .specs
            .iter()
            .enumerate()
            .rev()
            .take(DISTINCT_LOOKUP)
            .find(|(_, s)| s.normal == normal)
            .map(|(i, _)| i);
        let idx = found.unwrap_or_else(|| {
            let content = COMPARED.map(|(field, _)| has_content(normal.get(field)));
            self.specs.push(SpecFacts { normal, content });
            self.specs.len() - 1
        });
        let idx = u32::try_from(idx).unwrap_or(UNREADABLE);
        self.memo.insert(text.into(), idx);
        idx
    }

    pub fn push(&mut self, cs: ClusterSummary) {
        self.push_listed(Listed::of(&cs));
    }

    /// Keeps what the decision reads of one listed summary.
    pub fn push_listed(&mut self, cs: Listed) {
        let spec = self.spec_index(cs.spec.cluster_profile_spec.map_or("{}", RawValue::get));
        let (spec_written, status_written) = (cs.spec_written(), cs.status_written());
        let features = cs
            .status
            .and_then(|s| s.features)
            .unwrap_or_default()
            .into_iter()
            .map(|f| Feature {
                id: self.shared(&f.id),
                status: f.status.map(|s| self.shared(&s)),
                failure_message: f.failure_message.map(String::into_boxed_str),
                hash: f.hash.as_deref().and_then(prefix),
            })
            .collect();
        let kind = [ClusterKind::Sveltos, ClusterKind::Capi]
            .into_iter()
            .find(|k| k.cluster_type() == cs.spec.cluster_type);
        let summary = Summary {
            name: cs.metadata.name.as_deref().unwrap_or_default().into(),
            kind,
            cluster_namespace: self.shared(&cs.spec.cluster_namespace),
            cluster_name: cs.spec.cluster_name.as_ref().into(),
            spec,
            spec_written,
            status_written,
            features,
        };
        // Sveltos makes one summary per profile and cluster; should there be two, the first wins,
        // as a scan in list order would find it.
        self.index(summary);
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Summary> {
        self.items.iter()
    }

    fn index(&mut self, s: Summary) {
        let position = u32::try_from(self.items.len()).unwrap_or(u32::MAX);
        if let Some(kind) = s.kind {
            let key = cluster_key(kind, &s.cluster_namespace, &s.cluster_name);
            match self.by_cluster.entry(key) {
                Entry::Vacant(v) => {
                    v.insert(position);
                }
                Entry::Occupied(_) => self.overflow.push(position),
            }
        }
        self.items.push(s);
    }

    /// The summary of one cluster.
    pub fn find(&self, kind: ClusterKind, namespace: &str, name: &str) -> Option<&Summary> {
        let is = |s: &&Summary| {
            s.kind == Some(kind) && &*s.cluster_namespace == namespace && &*s.cluster_name == name
        };
        self.by_cluster
            .get(&cluster_key(kind, namespace, name))
            .into_iter()
            .chain(&self.overflow)
            .filter_map(|i| self.items.get(*i as usize))
            .find(is)
    }

    /// Each distinct normal form compared with the profile's spec (normalised here, once per
    /// check); then [`Comparison::differs`] is a lookup.
    pub fn comparison(&self, profile_spec: &Map<String, Value>) -> Comparison {
        // `normalize` is idempotent: a profile spec equal to one of the summaries' normal forms is
        // its own normal form, so it need not be normalised again (a map comparison is far cheaper
        // than the schema walk). Without summaries there is nothing to compare it with.
        let known = self.specs.iter().find(|s| s.normal == *profile_spec);
        let owned;
        let theirs = match known {
            Some(s) => &s.normal,
            None if self.specs.is_empty() => profile_spec,
            None => {
                owned = normalize(profile_spec);
                &owned
            }
        };
        let differs = self
            .specs
            .iter()
            .map(|s| {
                differing_fields(&s.normal, theirs)
                    .first()
                    .map(|f| f.to_string())
            })
            .collect();
        Comparison {
            differs,
            content: self.specs.iter().map(|s| s.content).collect(),
        }
    }

    /// A summary's spec, in normal form (None when it could not be read).
    pub fn spec_of(&self, s: &Summary) -> Option<&Map<String, Value>> {
        self.specs.get(s.spec as usize).map(|f| &f.normal)
    }

    /// The content flags of a summary's spec (for [`Summary::provisioned`]).
    pub fn content(&self, s: &Summary) -> [bool; 3] {
        self.specs
            .get(s.spec as usize)
            .map(|f| f.content)
            .unwrap_or_default()
    }

    /// Keeps the summaries for which `keep` is true (tests: a cluster whose summary is missing).
    pub fn retain(&mut self, keep: impl Fn(&Summary) -> bool) {
        let items = std::mem::take(&mut self.items);
        self.by_cluster.clear();
        self.overflow.clear();
        for s in items.into_iter().filter(|s| keep(s)) {
            self.index(s);
        }
    }
}

/// A profile's spec compared with its summaries' distinct normal forms.
pub struct Comparison {
    /// Per distinct normal form: the first top-level field that differs.
    differs: Vec<Option<String>>,
    content: Vec<[bool; 3]>,
}

impl Comparison {
    /// The first top-level field of the summary's spec that differs from the profile's (the
    /// three lists upstream compares first), or `spec` when it could not be read; None in sync.
    pub fn differs(&self, s: &Summary) -> Option<&str> {
        match self.differs.get(s.spec as usize) {
            Some(d) => d.as_deref(),
            None => Some("spec"),
        }
    }

    pub fn content(&self, s: &Summary) -> [bool; 3] {
        self.content
            .get(s.spec as usize)
            .copied()
            .unwrap_or_default()
    }
}

/// Upstream's text for a summary that is not in sync (its typo included), and the analogous text
/// for the fields upstream does not compare.
pub fn not_in_sync_text(field: &str, cs_name: &str) -> String {
    match field {
        "helmCharts" => format!("ClusterSummary HelmCharts {cs_name} is not in sync."),
        "policyRefs" => format!("ClusterSummary PolicyRefs {cs_name} is not in sync."),
        "kustomizationRefs" => format!("ClusterSummaryKustomizationRefs {cs_name} is not in sync."),
        other => {
            let mut c = other.chars();
            let title: String = c
                .next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default();
            format!("ClusterSummary {title} {cs_name} is not in sync.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterSummarySpec, ClusterSummaryStatus, FeatureSummary};
    use serde_json::json;

    fn summary(cluster: &str, spec: Value, features: &[(&str, &str)]) -> ClusterSummary {
        let mut cs = ClusterSummary::new(
            &format!("p-sveltos-{cluster}"),
            ClusterSummarySpec {
                cluster_namespace: "fleet".into(),
                cluster_name: cluster.into(),
                cluster_type: "Sveltos".into(),
                cluster_profile_spec: spec.as_object().cloned().unwrap_or_default().into(),
            },
        );
        cs.status = Some(ClusterSummaryStatus {
            feature_summaries: Some(
                features
                    .iter()
                    .map(|(id, status)| FeatureSummary {
                        feature_id: id.to_string(),
                        status: Some(status.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
        });
        cs
    }

    /// The API server's stamps: the spec written at `spec_at`, the features' last status write
    /// at `status_at`; Sveltos' own clock wrote `lastAppliedTime` 2 s behind the latter (never
    /// looked at); the features' hashes.
    fn stamp(cs: &mut ClusterSummary, spec_at: &str, status_at: &str, hashes: &[&str]) {
        cs.metadata.managed_fields = serde_json::from_value(json!([
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": spec_at, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}, "f:spec": {"f:clusterProfileSpec": {}}}},
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": status_at, "subresource": "status", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:featureSummaries": {}}}},
            // Another manager's status write (not of the features) moves nothing.
            {"manager": "other", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": "2030-01-01T00:00:00Z", "subresource": "status", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:dependencies": {}}}}
        ]))
        .unwrap();
        let applied =
            DateTime::parse_from_rfc3339(status_at).unwrap() - chrono::Duration::seconds(2);
        for (f, hash) in cs
            .status
            .as_mut()
            .unwrap()
            .feature_summaries
            .as_mut()
            .unwrap()
            .iter_mut()
            .zip(hashes)
        {
            f.last_applied_time = Some(applied.to_rfc3339());
            f.hash = Some(hash.to_string());
        }
    }

    /// Helm's hash before a change and Sveltos' hash for the changed spec.
    const OLD: &str = "OLDHASHxxxxxAAAA=";
    const NEW: &str = "NEWHASHxxxxxBBBB=";

    /// A spec with Helm charts and policies: two kinds of content, two features.
    fn helm_and_resources() -> Value {
        json!({"helmCharts": [{"chartName": "a"}], "policyRefs": [{"name": "p"}]})
    }

    /// The hashes promoter knew before a change of the Helm charts: Helm's, [`OLD`].
    fn helm_before() -> Before {
        let mut before = Before::default();
        before.insert(bit("Helm"), prefix(OLD).unwrap());
        before
    }

    /// A change that redeploys Helm, with the hashes known before it (`before`) or none, written
    /// while a summary showed no status of the spec before (`unsettled`) or not.
    fn helm_redeploy(before: Option<&Before>, unsettled: bool) -> Freshness<'_> {
        Freshness::Redeploy {
            features: bit("Helm"),
            before,
            unsettled,
        }
    }

    #[test]
    fn identical_specs_are_normalised_once_and_compared_whole() {
        let charts = json!({"helmCharts": [{"chartName": "kyverno", "chartVersion": "3.5.2"}]});
        let summaries: ProfileSummaries = (0..500)
            .map(|i| summary(&format!("c{i}"), charts.clone(), &[("Helm", "Provisioned")]))
            .chain([summary(
                "old",
                json!({"helmCharts": [{"chartName": "kyverno", "chartVersion": "3.5.1"}]}),
                &[("Helm", "Provisioned")],
            )])
            .chain([summary(
                "patched",
                json!({"helmCharts": [{"chartName": "kyverno", "chartVersion": "3.5.2"}],
                       "patches": [{"patch": "x"}]}),
                &[("Helm", "Provisioned")],
            )])
            .collect();
        assert_eq!(summaries.len(), 502);
        assert_eq!(
            summaries.specs.len(),
            3,
            "one normal form per distinct spec"
        );
        assert_eq!(summaries.memo.len(), 3, "one parse per distinct text");
        let cmp = summaries.comparison(charts.as_object().unwrap());
        let c7 = summaries.find(ClusterKind::Sveltos, "fleet", "c7").unwrap();
        assert_eq!(cmp.differs(c7), None);
        assert_eq!(cmp.content(c7), [true, false, false], "helmCharts only");
        let old = summaries
            .find(ClusterKind::Sveltos, "fleet", "old")
            .unwrap();
        assert_eq!(cmp.differs(old), Some("helmCharts"));
        let patched = summaries
            .find(ClusterKind::Sveltos, "fleet", "patched")
            .unwrap();
        assert_eq!(
            cmp.differs(patched),
            Some("patches"),
            "not only the three lists"
        );
        assert_eq!(
            not_in_sync_text("patches", "x"),
            "ClusterSummary Patches x is not in sync."
        );
        assert!(summaries.find(ClusterKind::Capi, "fleet", "c7").is_none());
    }

    #[test]
    fn stored_form_and_verbatim_profile_are_in_sync() {
        // What Sveltos stores for a chart with options, a duration and an empty values.
        let profile = json!({"helmCharts": [{"repositoryURL": "u", "releaseName": "r", "releaseNamespace": "n",
            "chartName": "c", "chartVersion": "1", "values": "", "options": {"timeout": "10m"}}]});
        let stored = normalize(profile.as_object().unwrap());
        assert_eq!(stored["helmCharts"][0]["options"]["timeout"], "10m0s");
        let summaries: ProfileSummaries = [summary(
            "a",
            Value::Object(stored),
            &[("Helm", "Provisioned")],
        )]
        .into_iter()
        .collect();
        let s = summaries.iter().next().unwrap();
        assert_eq!(
            summaries
                .comparison(profile.as_object().unwrap())
                .differs(s),
            None
        );
    }

    #[test]
    fn an_unreadable_spec_is_never_in_sync() {
        let mut cs = summary("a", json!({}), &[]);
        cs.spec.cluster_profile_spec = serde_json::from_str("[1]").unwrap();
        let summaries: ProfileSummaries = [cs].into_iter().collect();
        let s = summaries.iter().next().unwrap();
        assert_eq!(summaries.comparison(&Map::new()).differs(s), Some("spec"));
    }

    #[test]
    fn provisioned_needs_every_feature_and_one_per_kind_of_content() {
        let spec = json!({"helmCharts": [{"chartName": "a"}], "policyRefs": [{"name": "b"}]});
        let only_helm: ProfileSummaries = [summary("a", spec.clone(), &[("Helm", "Provisioned")])]
            .into_iter()
            .collect();
        let s = only_helm.iter().next().unwrap();
        assert_eq!(only_helm.content(s), [true, true, false]);
        assert_eq!(
            s.provisioned(only_helm.content(s), Freshness::UNKNOWN, None, None),
            Provisioned::No
        );
        let both: ProfileSummaries = [summary(
            "a",
            spec.clone(),
            &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
        )]
        .into_iter()
        .collect();
        let s = both.iter().next().unwrap();
        assert_eq!(
            s.provisioned(both.content(s), Freshness::UNKNOWN, None, None),
            Provisioned::Yes
        );
        let failing: ProfileSummaries = [summary(
            "a",
            spec,
            &[("Helm", "Provisioned"), ("Resources", "FailedNonRetriable")],
        )]
        .into_iter()
        .collect();
        let s = failing.iter().next().unwrap();
        assert_eq!(
            s.provisioned(failing.content(s), Freshness::UNKNOWN, None, None),
            Provisioned::No
        );
        assert_eq!(
            s.failure().as_deref(),
            Some("cluster fleet/a: feature Resources FailedNonRetriable: no failure message")
        );
    }

    /// The rule, case by case: content where promoter knows the hashes before its write, else the
    /// API server's two times, else the grace; never Sveltos' `lastAppliedTime`.
    #[test]
    fn a_provisioned_counts_for_the_current_spec_by_content_or_one_clock() {
        let spec = helm_and_resources();
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let (old, new) = (OLD, NEW);
        let before = helm_before();
        let redeploy = helm_redeploy(Some(&before), false);
        let by_time = helm_redeploy(None, false);
        // Written while a summary showed no status of the spec before: a new hash is no evidence.
        let busy = helm_redeploy(Some(&before), true);
        let busy_unknown = Freshness::Unknown { unsettled: true };
        let spec_at = "2026-11-23T10:00:05Z";
        let soon = Some(t("2026-11-23T10:01:00Z"));
        let later = Some(t("2026-11-23T10:10:05Z"));
        let stale_until = Provisioned::Stale(Stale::NoStatusSince {
            grace_ends: t("2026-11-23T10:10:05Z").timestamp(),
        });
        let busy_until = Provisioned::Stale(Stale::Unsettled {
            grace_ends: t("2026-11-23T10:10:05Z").timestamp(),
        });
        // (status written at, Helm's hash, freshness, now, expected)
        type Case<'a> = (
            &'a str,
            &'a str,
            Freshness<'a>,
            Option<DateTime<Utc>>,
            Provisioned,
        );
        let cases: Vec<Case> = vec![
            // A change Sveltos does not redeploy: the old Provisioned stands, whenever written.
            (
                "2026-11-23T09:00:00Z",
                old,
                Freshness::Nothing,
                soon,
                Provisioned::Yes,
            ),
            // Hashes known: content decides, against a late write and after the grace too …
            (
                "2026-11-23T10:00:09Z",
                old,
                redeploy,
                soon,
                Provisioned::Stale(Stale::OldHash),
            ),
            (
                "2026-11-23T10:00:09Z",
                old,
                redeploy,
                later,
                Provisioned::Stale(Stale::OldHash),
            ),
            // … and a redeployed hash counts even when the spec's time moved after the status
            // (a metadata write by the same manager).
            (
                "2026-11-23T10:00:01Z",
                new,
                redeploy,
                soon,
                Provisioned::Yes,
            ),
            // Hashes not known: a status written at or after the spec (same second counts) …
            ("2026-11-23T10:00:05Z", old, by_time, soon, Provisioned::Yes),
            (
                "2026-11-23T10:00:06Z",
                old,
                Freshness::UNKNOWN,
                soon,
                Provisioned::Yes,
            ),
            // … else stale until the grace, then taken as current.
            ("2026-11-23T10:00:04Z", new, by_time, soon, stale_until),
            (
                "2026-11-23T10:00:04Z",
                new,
                Freshness::UNKNOWN,
                soon,
                stale_until,
            ),
            (
                "2026-11-23T10:00:04Z",
                new,
                Freshness::UNKNOWN,
                later,
                Provisioned::Yes,
            ),
            // Unsettled: an old hash still holds; a new one counts only with a status strictly
            // after the spec (the previous spec's status may have landed in the same second) …
            (
                "2026-11-23T10:00:09Z",
                old,
                busy,
                soon,
                Provisioned::Stale(Stale::OldHash),
            ),
            ("2026-11-23T10:00:05Z", new, busy, soon, busy_until),
            ("2026-11-23T10:00:01Z", new, busy, soon, busy_until),
            ("2026-11-23T10:00:06Z", new, busy, soon, Provisioned::Yes),
            ("2026-11-23T10:00:05Z", new, busy_unknown, soon, busy_until),
            (
                "2026-11-23T10:00:06Z",
                new,
                busy_unknown,
                soon,
                Provisioned::Yes,
            ),
            // … else the grace, as for any change promoter cannot judge.
            ("2026-11-23T10:00:05Z", new, busy, later, Provisioned::Yes),
            // A change that redeploys nothing is not judged by hashes at all.
            (
                "2026-11-23T10:00:01Z",
                new,
                Freshness::Nothing,
                soon,
                Provisioned::Yes,
            ),
        ];
        for (i, (status_at, hash, freshness, now, want)) in cases.into_iter().enumerate() {
            let mut cs = summary(
                "a",
                spec.clone(),
                &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
            );
            // Resources keeps its old hash: it is not expected to change.
            stamp(&mut cs, spec_at, status_at, &[hash, old]);
            let all: ProfileSummaries = [cs].into_iter().collect();
            let s = all.iter().next().unwrap();
            assert_eq!(s.spec_written, Some(t(spec_at).timestamp()));
            assert_eq!(s.status_written, Some(t(status_at).timestamp()), "case {i}");
            assert_eq!(
                s.provisioned(all.content(s), freshness, None, now),
                want,
                "case {i}"
            );
        }
        // A feature without a hash falls back to the times.
        let mut cs = summary("a", spec.clone(), &[("Helm", "Provisioned")]);
        stamp(&mut cs, spec_at, "2026-11-23T10:00:04Z", &[]);
        let all: ProfileSummaries = [cs].into_iter().collect();
        let s = all.iter().next().unwrap();
        let content = [true, false, false];
        assert_eq!(s.provisioned(content, redeploy, None, soon), stale_until);
        // Without managed fields nothing can be judged by time.
        let bare: ProfileSummaries = [summary("a", spec.clone(), &[("Helm", "Provisioned")])]
            .into_iter()
            .collect();
        let s = bare.iter().next().unwrap();
        assert_eq!(
            s.provisioned(content, Freshness::UNKNOWN, None, soon),
            Provisioned::Yes
        );
        // Not all Provisioned: no, whatever is known.
        let failing: ProfileSummaries = [summary("a", spec, &[("Helm", "Provisioning")])]
            .into_iter()
            .collect();
        let s = failing.iter().next().unwrap();
        assert_eq!(
            s.provisioned(content, Freshness::Nothing, None, soon),
            Provisioned::No
        );
    }

    /// A summary decoded from a list page's text keeps what the whole object would: the same
    /// facts, the spec written and the status written from the managed fields, escaped strings
    /// read as such; a field of the wrong type fails both.
    #[test]
    fn a_listed_summary_keeps_what_the_whole_object_does() {
        let mut cs = summary(
            "c\\u0031",
            json!({"helmCharts": [{"releaseName": "r"}], "tier": 100}),
            &[("Helm", "Provisioned"), ("Resources", "Failed")],
        );
        stamp(
            &mut cs,
            "2026-11-20T10:00:00Z",
            "2026-11-20T10:05:00Z",
            &["aGFzaA==", "b3RoZXI="],
        );
        if let Some(f) = cs
            .status
            .as_mut()
            .and_then(|s| s.feature_summaries.as_mut())
        {
            f[1].failure_message = Some("it \"failed\"".into());
        }
        let mut text = serde_json::to_value(&cs).unwrap();
        text["metadata"]["labels"] =
            json!({"projectsveltos.io/cluster-profile-name": "p\\u002ddev"});
        text["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ClusterProfile", "name": "p", "uid": "u"}]);
        let text = text.to_string().replace("\\\\u", "\\u");
        let whole: ClusterSummary = serde_json::from_str(&text).unwrap();
        let listed: Listed = serde_json::from_str(&text).unwrap();
        assert_eq!(listed.profile(), Some("p-dev"));
        assert_eq!(listed.spec_written(), spec_written(&whole));
        assert_eq!(listed.status_written(), status_written(&whole));
        assert!(listed.spec_written().is_some() && listed.status_written().is_some());
        let (mut a, mut b) = (ProfileSummaries::default(), ProfileSummaries::default());
        a.push(whole);
        b.push_listed(listed);
        let (a, b): (Vec<_>, Vec<_>) = (a.iter().collect(), b.iter().collect());
        assert_eq!(a, b);
        assert_eq!(&*a[0].cluster_name, "c1");
        assert!(a[0].failure().is_some_and(|f| f.contains("it \"failed\"")));

        let odd = text.replace("\"clusterName\":\"c\\u0031\"", "\"clusterName\":3");
        assert_ne!(odd, text);
        let e = serde_json::from_str::<Listed>(&odd)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.starts_with("invalid type")));
        assert!(serde_json::from_str::<ClusterSummary>(&odd).is_err());
    }

    #[test]
    fn retain_keeps_lookups_right() {
        let mut s: ProfileSummaries = ["a", "b", "c"]
            .iter()
            .map(|c| summary(c, json!({}), &[]))
            .collect();
        s.retain(|x| &*x.cluster_name != "b");
        assert_eq!(s.len(), 2);
        assert!(s.find(ClusterKind::Sveltos, "fleet", "b").is_none());
        let c = s.find(ClusterKind::Sveltos, "fleet", "c").unwrap();
        assert_eq!(&*c.cluster_name, "c");
    }

    /// Issue 45: hashes Sveltos reported for exactly this spec before (a stored revision's) decide
    /// by content, before everything else: a summary whose every feature carries one of them is
    /// provisioned for it whatever the write and the second; one that does not is judged as
    /// without them.
    #[test]
    fn a_hash_sveltos_reported_for_the_spec_counts_whatever_the_write_and_the_second() {
        let spec = helm_and_resources();
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let (old, new, other) = (OLD, NEW, "OTHERHASHxxxCCCC=");
        let (helm, resources) = (bit("Helm"), bit("Resources"));
        let before = helm_before();
        let mut known = Before::default();
        known.insert(helm, prefix(new).unwrap());
        known.insert(resources, prefix(old).unwrap());
        // The Helm hash `old` stored as Resources' only: a hash counts for its own feature.
        let mut crossed = Before::default();
        crossed.insert(resources, prefix(old).unwrap());
        crossed.insert(resources, prefix(new).unwrap());
        // `old` is also the revision's own Helm hash (the change did not touch its content).
        let mut both = known.clone();
        both.insert(helm, prefix(old).unwrap());
        let busy = helm_redeploy(Some(&before), true);
        let spec_at = "2026-11-23T10:00:05Z";
        let soon = Some(t("2026-11-23T10:01:00Z"));
        let busy_until = Provisioned::Stale(Stale::Unsettled {
            grace_ends: t("2026-11-23T10:10:05Z").timestamp(),
        });
        // (Helm's hash, Helm's status, known, expected); Resources carries `old`, Provisioned;
        // every status written in the second of the spec, after an unsettled write.
        let cases: Vec<(&str, &str, Option<&Before>, Provisioned)> = vec![
            (new, "Provisioned", Some(&known), Provisioned::Yes),
            (new, "Provisioned", None, busy_until),
            (other, "Provisioned", Some(&known), busy_until),
            (
                old,
                "Provisioned",
                Some(&known),
                Provisioned::Stale(Stale::OldHash),
            ),
            (old, "Provisioned", Some(&both), Provisioned::Yes),
            (new, "Provisioned", Some(&crossed), busy_until),
            (new, "Provisioning", Some(&known), Provisioned::No),
        ];
        for (i, (hash, status, known, want)) in cases.into_iter().enumerate() {
            let mut cs = summary(
                "a",
                spec.clone(),
                &[("Helm", status), ("Resources", "Provisioned")],
            );
            stamp(&mut cs, spec_at, spec_at, &[hash, old]);
            let all: ProfileSummaries = [cs].into_iter().collect();
            let s = all.iter().next().unwrap();
            assert_eq!(
                s.provisioned(all.content(s), busy, known, soon),
                want,
                "case {i}"
            );
        }
        // A feature without a hash is not known to be about the spec.
        let mut cs = summary(
            "a",
            spec,
            &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
        );
        stamp(&mut cs, spec_at, spec_at, &[new]);
        let all: ProfileSummaries = [cs].into_iter().collect();
        let s = all.iter().next().unwrap();
        assert!(!s.carries(&known));
        assert_eq!(
            s.provisioned(all.content(s), busy, Some(&known), soon),
            busy_until
        );
        assert!(
            !ProfileSummaries::default()
                .iter()
                .any(|s| s.carries(&known))
        );
    }

    /// Whether the status a summary shows is about its spec is judged whatever it says (what a
    /// write's settledness reads), by the same rules as a `Provisioned`; and whether it reports
    /// every kind of content with a hash.
    #[test]
    fn a_status_of_any_kind_is_judged_current_by_the_same_rules() {
        let spec = helm_and_resources();
        let (old, new) = (OLD, NEW);
        let before = helm_before();
        let redeploy = helm_redeploy(Some(&before), false);
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().timestamp();
        // (Helm's status, its hash, status time, freshness, current)
        type Case<'a> = (&'a str, &'a str, &'a str, Freshness<'a>, Result<(), Stale>);
        let cases: Vec<Case> = vec![
            (
                "Failed",
                new,
                "2026-11-23T10:00:05Z",
                Freshness::UNKNOWN,
                Ok(()),
            ),
            (
                "Provisioning",
                new,
                "2026-11-23T10:00:05Z",
                Freshness::UNKNOWN,
                Ok(()),
            ),
            (
                "Failed",
                old,
                "2026-11-23T10:00:09Z",
                redeploy,
                Err(Stale::OldHash),
            ),
            (
                "Provisioning",
                new,
                "2026-11-23T10:00:01Z",
                redeploy,
                Ok(()),
            ),
            (
                "Failed",
                new,
                "2026-11-23T10:00:04Z",
                Freshness::Nothing,
                Ok(()),
            ),
            (
                "Failed",
                new,
                "2026-11-23T10:00:04Z",
                Freshness::UNKNOWN,
                Err(Stale::NoStatusSince {
                    grace_ends: t("2026-11-23T10:10:05Z"),
                }),
            ),
        ];
        for (i, (status, hash, status_at, freshness, want)) in cases.into_iter().enumerate() {
            let mut cs = summary(
                "a",
                spec.clone(),
                &[("Helm", status), ("Resources", "Provisioned")],
            );
            stamp(&mut cs, "2026-11-23T10:00:05Z", status_at, &[hash, old]);
            let all: ProfileSummaries = [cs].into_iter().collect();
            let s = all.iter().next().unwrap();
            assert!(s.reports_hashes(all.content(s)), "case {i}");
            assert_eq!(s.current(freshness, None, None), want, "case {i}");
        }
        // A kind of content without its feature, a feature without a hash, no feature at all.
        for (features, hashes) in [
            (&[("Helm", "Provisioned")][..], &[new, old][..]),
            (
                &[("Helm", "Failed"), ("Resources", "Failed")][..],
                &[new][..],
            ),
            (&[][..], &[][..]),
        ] {
            let mut cs = summary("a", spec.clone(), features);
            stamp(
                &mut cs,
                "2026-11-23T10:00:05Z",
                "2026-11-23T10:00:05Z",
                hashes,
            );
            let all: ProfileSummaries = [cs].into_iter().collect();
            let s = all.iter().next().unwrap();
            assert!(!s.reports_hashes(all.content(s)), "{features:?}");
        }
    }

    /// Only the features a change redeploys are judged by their hashes: another feature without a
    /// hash leaves the judgement to content, not to the clock.
    #[test]
    fn a_feature_the_change_does_not_redeploy_is_not_judged() {
        let spec = helm_and_resources();
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let before = helm_before();
        let redeploy = helm_redeploy(Some(&before), false);
        let mut cs = summary(
            "a",
            spec,
            &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
        );
        // Helm redeployed (a new hash); Resources reports no hash; the status write is older than
        // the spec's (a metadata write of the same manager), so the clock would say stale.
        stamp(
            &mut cs,
            "2026-11-23T10:00:05Z",
            "2026-11-23T10:00:01Z",
            &[NEW],
        );
        let all: ProfileSummaries = [cs].into_iter().collect();
        let s = all.iter().next().unwrap();
        assert_eq!(s.features[1].hash, None);
        assert_eq!(
            s.provisioned(
                all.content(s),
                redeploy,
                None,
                Some(t("2026-11-23T10:01:00Z"))
            ),
            Provisioned::Yes
        );
    }

    /// The spec's time is a write of the main resource that owns `spec`: a label written later by
    /// another manager does not move it.
    #[test]
    fn a_metadata_write_is_not_a_spec_write() {
        let mut cs = summary("a", json!({}), &[("Helm", "Provisioned")]);
        stamp(&mut cs, "2026-11-23T10:00:05Z", "2026-11-23T10:00:06Z", &[]);
        let labels: ManagedFieldsEntry = serde_json::from_value(json!({
            "manager": "kubectl-label", "operation": "Update",
            "apiVersion": "config.projectsveltos.io/v1beta1", "time": "2026-11-23T11:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}
        }))
        .unwrap();
        cs.metadata
            .managed_fields
            .get_or_insert_default()
            .push(labels);
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().timestamp();
        assert_eq!(spec_written(&cs), Some(t("2026-11-23T10:00:05Z")));
        assert_eq!(status_written(&cs), Some(t("2026-11-23T10:00:06Z")));
    }

    /// A second summary of one cluster (the first wins) is kept aside; a cluster without a summary
    /// is not mistaken for it.
    #[test]
    fn a_cluster_without_a_summary_is_not_found_when_another_has_two() {
        let s: ProfileSummaries = [
            summary("a", json!({}), &[("Helm", "Provisioned")]),
            summary("a", json!({}), &[("Helm", "Provisioning")]),
        ]
        .into_iter()
        .collect();
        assert!(!s.is_empty() && ProfileSummaries::default().is_empty());
        let a = s.find(ClusterKind::Sveltos, "fleet", "a").unwrap();
        assert_eq!(a.features[0].status.as_deref(), Some("Provisioned"));
        assert!(s.find(ClusterKind::Sveltos, "fleet", "b").is_none());
        assert!(s.find(ClusterKind::Sveltos, "other", "a").is_none());
        assert!(s.find(ClusterKind::Capi, "fleet", "a").is_none());
    }
}
