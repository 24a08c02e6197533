//! ClusterSummaries reduced, as they are read, to what the decision and `explain` use: which
//! cluster, the three lists compared with the profile, and the feature statuses. The lists of a
//! profile's summaries are nearly always identical, so each distinct value is kept once per profile
//! and compared with the profile once per check, exactly (`==`), not per summary.

use super::world::ClusterKind;
use crate::api::{ClusterSummary, FeatureSummary};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

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

/// One ClusterSummary.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub name: String,
    pub cluster_type: String,
    pub cluster_namespace: String,
    pub cluster_name: String,
    /// Per compared field: the index of its value among the profile's distinct values, or None
    /// when empty or absent.
    lists: [Option<u32>; 3],
    pub features: Vec<FeatureSummary>,
}

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
                    list.is_none() || self.features.iter().any(|f| f.feature_id == *feature)
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
                    f.feature_id,
                    f.status.as_deref().unwrap_or_default(),
                    f.failure_message.as_deref().unwrap_or("no failure message")
                )
            })
    }
}

fn cluster_key(cluster_type: &str, namespace: &str, name: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (cluster_type, namespace, name).hash(&mut h);
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
    /// Hash of (cluster type, namespace, name) → indices in `items`, in list order. Looked up with
    /// borrowed strings, so that a check allocates nothing per cluster.
    by_cluster: HashMap<u64, Vec<usize>>,
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
    pub fn push(&mut self, mut cs: ClusterSummary) {
        let mut lists = [None; 3];
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
            lists[i] = u32::try_from(idx).ok();
        }
        let summary = Summary {
            name: cs.metadata.name.unwrap_or_default(),
            cluster_type: cs.spec.cluster_type,
            cluster_namespace: cs.spec.cluster_namespace,
            cluster_name: cs.spec.cluster_name,
            lists,
            features: cs
                .status
                .and_then(|s| s.feature_summaries)
                .unwrap_or_default(),
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
        let key = cluster_key(&s.cluster_type, &s.cluster_namespace, &s.cluster_name);
        self.by_cluster
            .entry(key)
            .or_default()
            .push(self.items.len());
        self.items.push(s);
    }

    /// The summary of one cluster.
    pub fn find(&self, kind: ClusterKind, namespace: &str, name: &str) -> Option<&Summary> {
        let cluster_type = kind.cluster_type();
        self.by_cluster
            .get(&cluster_key(cluster_type, namespace, name))?
            .iter()
            .map(|i| &self.items[*i])
            .find(|s| {
                s.cluster_type == cluster_type
                    && s.cluster_namespace == namespace
                    && s.cluster_name == name
            })
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
            None => self.profile_empty[field],
            Some(idx) => self.equal[field]
                .get(idx as usize)
                .copied()
                .unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterSummarySpec, ClusterSummaryStatus};
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
        s.retain(|x| x.cluster_name != "b");
        assert_eq!(s.len(), 2);
        assert!(s.find(ClusterKind::Sveltos, "fleet", "b").is_none());
        assert_eq!(
            s.find(ClusterKind::Sveltos, "fleet", "c")
                .unwrap()
                .cluster_name,
            "c"
        );
    }
}
