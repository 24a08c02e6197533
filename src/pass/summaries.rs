//! ClusterSummaries reduced, as they are read, to what the decision and `explain` use: which
//! cluster, the three lists compared with the profile, and the feature statuses. The lists of a
//! profile's summaries are nearly always identical, so each distinct value is kept once per profile
//! and compared with the profile once per check, exactly (`==`), not per summary.

use super::world::ClusterKind;
use crate::api::ClusterSummary;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The profile fields whose copy in a ClusterSummary must equal the profile's, with the feature
/// that deploys each kind of content.
pub const COMPARED: [(&str, &str); 3] = [
    ("helmCharts", "Helm"),
    ("policyRefs", "Resources"),
    ("kustomizationRefs", "Kustomize"),
];

/// How many distinct values of a field are looked for before a new one is simply added (more only
/// costs memory, never correctness).
const DISTINCT_LOOKUP: usize = 8;

/// One feature of a ClusterSummary. The ids and statuses are shared strings: tens of thousands of
/// summaries say `Helm` and `Provisioned`.
#[derive(Clone, Debug, PartialEq)]
pub struct Feature {
    pub id: Arc<str>,
    pub status: Option<Arc<str>>,
    pub failure_message: Option<Box<str>>,
}

/// One ClusterSummary.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub name: Box<str>,
    /// None: a `clusterType` promoter does not know, which no inventory cluster matches.
    pub kind: Option<ClusterKind>,
    pub cluster_namespace: Arc<str>,
    pub cluster_name: Box<str>,
    /// Per compared field: the index of its value among the profile's distinct values, or
    /// [`EMPTY`] when empty or absent.
    lists: [u32; 3],
    pub features: Box<[Feature]>,
}

const EMPTY: u32 = u32::MAX;

impl Summary {
    /// Every feature `Provisioned`, and one present for each kind of content the summary carries.
    pub fn is_provisioned(&self) -> bool {
        self.features
            .iter()
            .all(|f| f.status.as_deref() == Some("Provisioned"))
            && COMPARED
                .iter()
                .zip(&self.lists)
                .all(|((_, feature), list)| {
                    *list == EMPTY || self.features.iter().any(|f| &*f.id == *feature)
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

fn empty_or_missing(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// The ClusterSummaries of one profile.
#[derive(Clone, Debug, Default)]
pub struct ProfileSummaries {
    items: Vec<Summary>,
    /// Per compared field, its distinct non-empty values.
    distinct: [Vec<Value>; 3],
    /// Hash of (cluster kind, namespace, name) → index in `items` of the first summary with that
    /// hash; looked up with borrowed strings, so that a check allocates nothing per cluster.
    by_cluster: HashMap<u64, u32>,
    /// Indices of summaries whose hash was already taken (another cluster, or a second summary of
    /// the same cluster): scanned after the map, and empty in practice.
    overflow: Vec<u32>,
    /// Shared copies of the strings that repeat across summaries.
    strings: HashSet<Arc<str>>,
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

    pub fn push(&mut self, mut cs: ClusterSummary) {
        let mut lists = [EMPTY; 3];
        for (i, (field, _)) in COMPARED.iter().enumerate() {
            let value = cs.spec.cluster_profile_spec.remove(*field);
            if empty_or_missing(value.as_ref()) {
                continue;
            }
            let Some(value) = value else { continue };
            let known = &mut self.distinct[i];
            let found = known
                .iter()
                .enumerate()
                .rev()
                .take(DISTINCT_LOOKUP)
                .find(|(_, v)| **v == value)
                .map(|(idx, _)| idx);
            let idx = found.unwrap_or_else(|| {
                known.push(value);
                known.len() - 1
            });
            lists[i] = u32::try_from(idx).unwrap_or(EMPTY - 1);
        }
        let features = cs
            .status
            .and_then(|s| s.feature_summaries)
            .unwrap_or_default()
            .into_iter()
            .map(|f| Feature {
                id: self.shared(&f.feature_id),
                status: f.status.map(|s| self.shared(&s)),
                failure_message: f.failure_message.map(String::into_boxed_str),
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
            lists,
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

    /// For each compared field, whether each distinct value equals the profile's: computed once
    /// per check, then [`Self::in_sync`] is a lookup.
    pub fn comparison(&self, profile_spec: &serde_json::Map<String, Value>) -> Comparison {
        let mut equal: [Vec<bool>; 3] = Default::default();
        let mut profile_empty = [false; 3];
        for (i, (field, _)) in COMPARED.iter().enumerate() {
            let theirs = profile_spec.get(*field);
            profile_empty[i] = empty_or_missing(theirs);
            equal[i] = self.distinct[i].iter().map(|v| Some(v) == theirs).collect();
        }
        Comparison {
            equal,
            profile_empty,
        }
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

/// A profile's lists compared with its summaries' distinct values.
pub struct Comparison {
    equal: [Vec<bool>; 3],
    profile_empty: [bool; 3],
}

impl Comparison {
    /// Upstream compares with DeepEqual; an absent list and an empty one are the same here.
    pub fn in_sync(&self, s: &Summary, field: usize) -> bool {
        match s.lists[field] {
            EMPTY => self.profile_empty[field],
            idx => self.equal[field]
                .get(idx as usize)
                .copied()
                .unwrap_or(false),
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
                cluster_profile_spec: spec.as_object().cloned().unwrap_or_default(),
                ..Default::default()
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

    #[test]
    fn identical_lists_are_kept_once_and_compared_exactly() {
        let charts = json!({"helmCharts": [{"chartName": "kyverno", "chartVersion": "3.5.2"}]});
        let summaries: ProfileSummaries = (0..500)
            .map(|i| summary(&format!("c{i}"), charts.clone(), &[("Helm", "Provisioned")]))
            .chain([summary(
                "old",
                json!({"helmCharts": [{"chartName": "kyverno", "chartVersion": "3.5.1"}]}),
                &[("Helm", "Provisioned")],
            )])
            .collect();
        assert_eq!(summaries.len(), 501);
        assert_eq!(
            summaries.distinct[0].len(),
            2,
            "one copy per distinct value"
        );
        let cmp = summaries.comparison(charts.as_object().unwrap());
        let c7 = summaries.find(ClusterKind::Sveltos, "fleet", "c7").unwrap();
        assert!(cmp.in_sync(c7, 0));
        assert!(cmp.in_sync(c7, 1), "both without policyRefs");
        let old = summaries
            .find(ClusterKind::Sveltos, "fleet", "old")
            .unwrap();
        assert!(!cmp.in_sync(old, 0));
        assert!(summaries.find(ClusterKind::Capi, "fleet", "c7").is_none());
    }

    #[test]
    fn empty_and_absent_lists_are_the_same() {
        let summaries: ProfileSummaries = [summary("a", json!({"policyRefs": []}), &[])]
            .into_iter()
            .collect();
        let s = summaries.iter().next().unwrap();
        let cmp = summaries.comparison(json!({"helmCharts": null}).as_object().unwrap());
        assert!((0..3).all(|i| cmp.in_sync(s, i)));
        let cmp = summaries.comparison(json!({"policyRefs": [{"name": "x"}]}).as_object().unwrap());
        assert!(!cmp.in_sync(s, 1));
    }

    #[test]
    fn provisioned_needs_every_feature_and_one_per_kind_of_content() {
        let spec = json!({"helmCharts": [{"chartName": "a"}], "policyRefs": [{"name": "b"}]});
        let only_helm: ProfileSummaries = [summary("a", spec.clone(), &[("Helm", "Provisioned")])]
            .into_iter()
            .collect();
        assert!(!only_helm.iter().next().unwrap().is_provisioned());
        let both: ProfileSummaries = [summary(
            "a",
            spec.clone(),
            &[("Helm", "Provisioned"), ("Resources", "Provisioned")],
        )]
        .into_iter()
        .collect();
        assert!(both.iter().next().unwrap().is_provisioned());
        let failing: ProfileSummaries = [summary(
            "a",
            spec,
            &[("Helm", "Provisioned"), ("Resources", "FailedNonRetriable")],
        )]
        .into_iter()
        .collect();
        let s = failing.iter().next().unwrap();
        assert!(!s.is_provisioned());
        assert_eq!(
            s.failure().as_deref(),
            Some("cluster fleet/a: feature Resources FailedNonRetriable: no failure message")
        );
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
