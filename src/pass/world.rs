//! What a pass observed, shared by the decisions of all promotions: the generated profiles, the
//! ClusterSummaries of the stages being checked, and the cluster inventory.

use super::summaries::ProfileSummaries;
use crate::api::inventory::ClusterKind;
use crate::api::sveltos::PROMOTION_NAME_LABEL;
use crate::api::{ClusterProfile, PromotionFreeze, PromotionRevision};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};

/// A managed cluster, from a SveltosCluster or a Cluster API Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InventoryCluster {
    pub kind: ClusterKind,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// SveltosCluster `status.ready`; CAPI: control plane initialized.
    pub ready: bool,
    pub paused: bool,
    pub pull_mode: bool,
    /// SveltosCluster `spec.kubeconfigName` and `spec.kubeconfigKeyName` (health checks).
    pub kubeconfig_secret: Option<String>,
    pub kubeconfig_key: Option<String>,
}

impl fmt::Display for InventoryCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A cluster of the inventory that Sveltos does not serve, so that no stage waits for it
/// (libsveltos `lib/clusterproxy/cluster_utils.go`, `getMatchingCAPIClusters` and
/// `getMatchingSveltosClusters`, commit fe4f45bd59468b6b648f859ae621ff492fec762a: a cluster with a
/// `deletionTimestamp` never matches, and Sveltos removes its ClusterSummaries; a CAPI cluster
/// without the onboarding annotation, when the addon-controller is configured with one, is not
/// onboarded). `explain` names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExcludedCluster {
    pub cluster: InventoryCluster,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct World {
    /// Profiles labelled `config.projectsveltos.io/promotionname`, by name.
    pub profiles: BTreeMap<String, ClusterProfile>,
    /// ClusterSummaries, reduced, by the value of their `projectsveltos.io/cluster-profile-name` label.
    pub summaries: BTreeMap<String, ProfileSummaries>,
    /// The profiles whose ClusterSummaries were listed (a profile listed without any is absent
    /// from `summaries`; one not listed may have some).
    pub summaries_listed: BTreeSet<String>,
    pub clusters: Vec<InventoryCluster>,
    /// Generated ClusterProfile names claimed by more than one promotion, with their claimants,
    /// the owner first (`ownership::claims`).
    pub claims: BTreeMap<String, Vec<String>>,
    /// Clusters left out of every stage, as Sveltos leaves them out.
    pub excluded: Vec<ExcludedCluster>,
    /// When the world was observed (the pass's clock): judges how old a summary's spec is.
    pub now: Option<DateTime<Utc>>,
    /// The PromotionFreezes (none when promoter.dev's CRD is not installed).
    pub freezes: Vec<PromotionFreeze>,
    /// Stored revisions a rollback needs, read on demand, by name; `None`: read, and absent.
    pub revisions: BTreeMap<String, Option<PromotionRevision>>,
    /// promoter's own CRDs (`promoter crd --own`) are not served: no freeze exists, no revision
    /// can be stored, so a rollback policy cannot be kept.
    pub own_crds_missing: bool,
    /// The labels of every ClusterPromotion, by name, when the pass listed them all (no
    /// `--selector`; every shard's): a freeze that becomes active records those it selects.
    pub all_promotions: Option<BTreeMap<String, BTreeMap<String, String>>>,
    /// A cache (leave it at its default): built on first use, since every decision of a pass reads
    /// the same world; rebuilt when profiles or clusters are added or removed (tests do that).
    pub cache: IndexCache,
}

impl Clone for World {
    fn clone(&self) -> Self {
        World {
            claims: self.claims.clone(),
            excluded: self.excluded.clone(),
            now: self.now,
            freezes: self.freezes.clone(),
            revisions: self.revisions.clone(),
            own_crds_missing: self.own_crds_missing,
            summaries_listed: self.summaries_listed.clone(),
            all_promotions: self.all_promotions.clone(),
            ..World::new(
                self.profiles.clone(),
                self.summaries.clone(),
                self.clusters.clone(),
            )
        }
    }
}

/// The index, keyed by (number of profiles, number of clusters).
type Cached = Option<((usize, usize), Arc<Index>)>;

#[derive(Debug, Default)]
pub struct IndexCache(Mutex<Cached>);

#[derive(Debug, Default)]
pub struct Index {
    /// Profile names by the promotion label.
    profiles_by_promotion: BTreeMap<String, Vec<String>>,
    /// Cluster indices grouped by identical label sets: fleets have few distinct sets, so
    /// selectors are matched once per set rather than once per cluster.
    label_groups: Vec<(BTreeMap<String, String>, Vec<usize>)>,
}

impl World {
    pub fn new(
        profiles: BTreeMap<String, ClusterProfile>,
        summaries: BTreeMap<String, ProfileSummaries>,
        clusters: Vec<InventoryCluster>,
    ) -> Self {
        World {
            profiles,
            summaries_listed: BTreeSet::new(),
            summaries,
            clusters,
            claims: BTreeMap::new(),
            excluded: Vec::new(),
            now: None,
            freezes: Vec::new(),
            revisions: BTreeMap::new(),
            own_crds_missing: false,
            all_promotions: None,
            cache: IndexCache::default(),
        }
    }

    /// Whether the pass listed the ClusterSummaries of `profile` (so a profile without any has
    /// none).
    pub fn summaries_known(&self, profile: &str) -> bool {
        self.summaries_listed.contains(profile) || self.summaries.contains_key(profile)
    }

    fn index(&self) -> Arc<Index> {
        let key = (self.profiles.len(), self.clusters.len());
        let mut cache = self.cache.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, index)) = cache.as_ref()
            && *k == key
        {
            return index.clone();
        }
        let mut profiles_by_promotion: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, p) in &self.profiles {
            if let Some(promotion) = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(PROMOTION_NAME_LABEL))
            {
                profiles_by_promotion
                    .entry(promotion.clone())
                    .or_default()
                    .push(name.clone());
            }
        }
        let mut groups: BTreeMap<&BTreeMap<String, String>, Vec<usize>> = BTreeMap::new();
        for (i, c) in self.clusters.iter().enumerate() {
            groups.entry(&c.labels).or_default().push(i);
        }
        let label_groups = groups
            .into_iter()
            .map(|(l, ids)| (l.clone(), ids))
            .collect();
        let index = Arc::new(Index {
            profiles_by_promotion,
            label_groups,
        });
        *cache = Some((key, index.clone()));
        index
    }

    /// The profiles carrying this promotion's label.
    pub fn profiles_of<'a>(
        &'a self,
        promotion: &str,
    ) -> impl Iterator<Item = &'a ClusterProfile> + 'a {
        let names = self
            .index()
            .profiles_by_promotion
            .get(promotion)
            .cloned()
            .unwrap_or_default();
        names.into_iter().filter_map(|n| self.profiles.get(&n))
    }

    /// The clusters whose labels satisfy `matches`, evaluated once per distinct label set, in
    /// (kind, namespace, name) order.
    pub fn clusters_where(
        &self,
        matches: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Vec<&InventoryCluster> {
        let index = self.index();
        let mut out: Vec<&InventoryCluster> = index
            .label_groups
            .iter()
            .filter(|(labels, _)| matches(labels))
            .flat_map(|(_, ids)| ids.iter().map(|i| &self.clusters[*i]))
            .collect();
        out.sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
        out
    }

    /// The distinct label sets of the inventory, with the indices of their clusters.
    pub fn label_sets(&self) -> Vec<(BTreeMap<String, String>, Vec<usize>)> {
        self.index().label_groups.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(name: &str, promotion: &str) -> ClusterProfile {
        serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": name, "labels": {PROMOTION_NAME_LABEL: promotion}},
            "spec": {}
        }))
        .unwrap()
    }

    fn cluster(name: &str, env: &str) -> InventoryCluster {
        InventoryCluster {
            kind: ClusterKind::Sveltos,
            namespace: "fleet".into(),
            name: name.into(),
            labels: [("env".to_string(), env.to_string())].into(),
            ready: true,
            paused: false,
            pull_mode: false,
            kubeconfig_secret: None,
            kubeconfig_key: None,
        }
    }

    /// A clone carries everything observed (a decision may be re-taken on a clone with one
    /// thing changed), and an index of its own.
    #[test]
    fn a_clone_is_the_same_world() {
        let mut w = World::new(
            [("p-dev".to_string(), profile("p-dev", "p"))].into(),
            [("p-dev".to_string(), ProfileSummaries::default())].into(),
            vec![cluster("a", "dev")],
        );
        w.claims = [("p-x".to_string(), vec!["p".to_string(), "q".to_string()])].into();
        w.excluded = vec![ExcludedCluster {
            cluster: cluster("b", "dev"),
            why: "being deleted".into(),
        }];
        w.now = Some(DateTime::from_timestamp(1_771_221_600, 0).unwrap());
        let freeze = PromotionFreeze::new("f", Default::default());
        let name = |f: &PromotionFreeze| f.metadata.name.clone();
        w.freezes = vec![freeze.clone()];
        w.revisions = [("r".to_string(), None)].into();
        w.own_crds_missing = true;
        w.summaries_listed = ["p-prod".to_string()].into();
        w.all_promotions = Some([("p".to_string(), BTreeMap::new())].into());
        assert_eq!(w.profiles_of("p").count(), 1);
        let c = w.clone();
        assert_eq!(c.profiles.keys().collect::<Vec<_>>(), ["p-dev"]);
        assert_eq!(c.summaries.keys().collect::<Vec<_>>(), ["p-dev"]);
        assert_eq!(c.clusters, w.clusters);
        assert_eq!(c.claims, w.claims);
        assert_eq!(c.excluded, w.excluded);
        assert_eq!(c.now, w.now);
        assert_eq!(
            c.freezes.iter().map(name).collect::<Vec<_>>(),
            [name(&freeze)]
        );
        assert_eq!(c.revisions.keys().collect::<Vec<_>>(), ["r"]);
        assert!(c.own_crds_missing);
        assert_eq!(c.summaries_listed, w.summaries_listed);
        assert_eq!(c.all_promotions, w.all_promotions);
        assert_eq!(c.profiles_of("p").count(), 1);
    }

    /// Summaries are known for a profile listed without any, and for one that has some.
    #[test]
    fn summaries_are_known_when_listed_or_present() {
        let mut w = World::default();
        w.summaries_listed.insert("listed".into());
        w.summaries
            .insert("present".into(), ProfileSummaries::default());
        assert!(w.summaries_known("listed"));
        assert!(w.summaries_known("present"));
        assert!(!w.summaries_known("other"));
    }

    /// The index follows profiles and clusters added or removed after it was first built.
    #[test]
    fn the_index_is_rebuilt_when_profiles_or_clusters_change() {
        let mut w = World::new(
            [("p-dev".to_string(), profile("p-dev", "p"))].into(),
            Default::default(),
            vec![
                cluster("b", "dev"),
                cluster("a", "prod"),
                cluster("c", "dev"),
            ],
        );
        let names = |w: &World, promotion: &str| -> Vec<String> {
            w.profiles_of(promotion)
                .filter_map(|cp| cp.metadata.name.clone())
                .collect()
        };
        let dev = |w: &World| -> Vec<String> {
            w.clusters_where(|l| l.get("env").is_some_and(|e| e == "dev"))
                .into_iter()
                .map(|c| c.to_string())
                .collect()
        };
        assert_eq!(names(&w, "p"), ["p-dev"]);
        assert!(names(&w, "q").is_empty());
        assert_eq!(dev(&w), ["fleet/b", "fleet/c"]);
        assert_eq!(
            w.label_sets(),
            [
                ([("env".to_string(), "dev".to_string())].into(), vec![0, 2]),
                ([("env".to_string(), "prod".to_string())].into(), vec![1]),
            ]
        );
        w.profiles.insert("p-prod".into(), profile("p-prod", "p"));
        w.profiles.insert("q-dev".into(), profile("q-dev", "q"));
        w.clusters.push(cluster("d", "dev"));
        assert_eq!(names(&w, "p"), ["p-dev", "p-prod"]);
        assert_eq!(names(&w, "q"), ["q-dev"]);
        assert_eq!(dev(&w), ["fleet/b", "fleet/c", "fleet/d"]);
        w.profiles.remove("p-dev");
        w.clusters.remove(0);
        assert_eq!(names(&w, "p"), ["p-prod"]);
        assert_eq!(dev(&w), ["fleet/c", "fleet/d"]);
    }
}
