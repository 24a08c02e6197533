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

use crate::api::ClusterSummary;
use crate::api::inventory::ClusterKind;
use crate::sveltos::normal_form::{differing_fields, normalize};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
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

/// How long a `Provisioned` older than the summary's spec is distrusted. Sveltos moves a feature
/// whose deployment hash changed to `Provisioning` as soon as it reconciles the new spec (its
/// ClusterSummary controller watches with `GenerationChangedPredicate`), and stamps
/// `lastAppliedTime` when the feature is `Provisioned` again. A spec change that touches no
/// feature's hash (`dependsOn`, `maxUpdate`, `stopMatchingBehavior`, …) is never redeployed and
/// writes no status at all (`proceedDeployingFeature` skips the status update when the hash is
/// the same; projectsveltos/addon-controller `controllers/clustersummary_deployer.go`, commit
/// 60c6358035778386ccb9599f4944d2f5a0ec8926), so its old `Provisioned` is current; nothing tells it
/// apart from a busy controller that has not reconciled yet except time. After this long, a
/// `Provisioned` that Sveltos did not move to `Provisioning` is taken as current.
pub const STALE_PROVISIONED_GRACE: chrono::Duration = chrono::Duration::minutes(10);

/// One feature of a ClusterSummary. The ids and statuses are shared strings: tens of thousands of
/// summaries say `Helm` and `Provisioned`.
#[derive(Clone, Debug, PartialEq)]
pub struct Feature {
    pub id: Arc<str>,
    pub status: Option<Arc<str>>,
    pub failure_message: Option<Box<str>>,
    /// `lastAppliedTime`, seconds since the epoch.
    pub last_applied: Option<i64>,
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
    /// When its spec was last written (seconds since the epoch), from `metadata.managedFields`;
    /// None when the server keeps no managed fields.
    pub spec_written: Option<i64>,
    pub features: Box<[Feature]>,
}

const UNREADABLE: u32 = u32::MAX;

/// Whether a summary's features say its current spec is deployed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provisioned {
    Yes,
    No,
    /// Every feature `Provisioned`, but at least one predates the summary's current spec and the
    /// grace has not passed: Sveltos has not redeployed yet.
    Stale,
}

fn seconds(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc).timestamp())
}

impl Summary {
    /// Upstream's check (every feature `Provisioned`, one present for each kind of content the
    /// summary carries) plus freshness: a feature's `lastAppliedTime` is not older than the
    /// summary's last spec write, or the spec was written longer than
    /// [`STALE_PROVISIONED_GRACE`] ago (see there why). Second precision on both sides: equal
    /// counts as fresh.
    pub fn provisioned(&self, content: [bool; 3], now: Option<DateTime<Utc>>) -> Provisioned {
        let all = self
            .features
            .iter()
            .all(|f| f.status.as_deref() == Some("Provisioned"))
            && COMPARED.iter().zip(content).all(|((_, feature), has)| {
                !has || self.features.iter().any(|f| &*f.id == *feature)
            });
        if !all {
            return Provisioned::No;
        }
        let Some(written) = self.spec_written else {
            return Provisioned::Yes;
        };
        let fresh = self
            .features
            .iter()
            .all(|f| f.last_applied.is_some_and(|t| t >= written));
        let settled =
            now.is_some_and(|n| n.timestamp() - written >= STALE_PROVISIONED_GRACE.num_seconds());
        if fresh || settled {
            Provisioned::Yes
        } else {
            Provisioned::Stale
        }
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

/// The newest time at which a writer other than the status subresource wrote `spec`.
fn spec_written(cs: &ClusterSummary) -> Option<i64> {
    cs.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().unwrap_or_default().is_empty())
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.get("f:spec").is_some())
        })
        .filter_map(|m| m.time.as_ref().map(|t| t.0.as_second()))
        .max()
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
        let spec = self.spec_index(cs.spec.cluster_profile_spec.as_str());
        let spec_written = spec_written(&cs);
        let features = cs
            .status
            .and_then(|s| s.feature_summaries)
            .unwrap_or_default()
            .into_iter()
            .map(|f| Feature {
                id: self.shared(&f.feature_id),
                status: f.status.map(|s| self.shared(&s)),
                failure_message: f.failure_message.map(String::into_boxed_str),
                last_applied: f.last_applied_time.as_deref().and_then(seconds),
            })
            .collect();
        let kind = [ClusterKind::Sveltos, ClusterKind::Capi]
            .into_iter()
            .find(|k| k.cluster_type() == cs.spec.cluster_type);
        let summary = Summary {
            name: cs.metadata.name.unwrap_or_default().into_boxed_str(),
            kind,
            cluster_namespace: self.shared(&cs.spec.cluster_namespace),
            cluster_name: cs.spec.cluster_name.into_boxed_str(),
            spec,
            spec_written,
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

    fn stamp(cs: &mut ClusterSummary, spec_at: &str, applied_at: &str) {
        cs.metadata.managed_fields = serde_json::from_value(json!([
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": spec_at, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:clusterProfileSpec": {}}}},
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": applied_at, "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}
        ]))
        .unwrap();
        for f in cs
            .status
            .as_mut()
            .unwrap()
            .feature_summaries
            .as_mut()
            .unwrap()
        {
            f.last_applied_time = Some(applied_at.into());
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
        assert_eq!(s.provisioned(only_helm.content(s), None), Provisioned::No);
        let both: ProfileSummaries = [summary(
            "a",
            spec.clone(),
            &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
        )]
        .into_iter()
        .collect();
        let s = both.iter().next().unwrap();
        assert_eq!(s.provisioned(both.content(s), None), Provisioned::Yes);
        let failing: ProfileSummaries = [summary(
            "a",
            spec,
            &[("Helm", "Provisioned"), ("Resources", "FailedNonRetriable")],
        )]
        .into_iter()
        .collect();
        let s = failing.iter().next().unwrap();
        assert_eq!(s.provisioned(failing.content(s), None), Provisioned::No);
        assert_eq!(
            s.failure().as_deref(),
            Some("cluster fleet/a: feature Resources FailedNonRetriable: no failure message")
        );
    }

    #[test]
    fn a_provisioned_older_than_the_spec_is_stale_until_the_grace_passes() {
        let spec = json!({"helmCharts": [{"chartName": "a"}]});
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let mut stale = summary("a", spec.clone(), &[("Helm", "Provisioned")]);
        stamp(&mut stale, "2026-11-23T10:00:05Z", "2026-11-23T10:00:00Z");
        let mut fresh = summary("b", spec, &[("Helm", "Provisioned")]);
        stamp(&mut fresh, "2026-11-23T10:00:05Z", "2026-11-23T10:00:05Z");
        let all: ProfileSummaries = [stale, fresh].into_iter().collect();
        let now = Some(t("2026-11-23T10:01:00Z"));
        let a = all.find(ClusterKind::Sveltos, "fleet", "a").unwrap();
        assert_eq!(a.spec_written, Some(t("2026-11-23T10:00:05Z").timestamp()));
        assert_eq!(a.provisioned(all.content(a), now), Provisioned::Stale);
        let later = Some(t("2026-11-23T10:10:05Z"));
        assert_eq!(a.provisioned(all.content(a), later), Provisioned::Yes);
        let b = all.find(ClusterKind::Sveltos, "fleet", "b").unwrap();
        assert_eq!(b.provisioned(all.content(b), now), Provisioned::Yes);
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
}
