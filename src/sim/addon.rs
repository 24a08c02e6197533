//! A simulated Sveltos addon-controller over the fake API server's store, as unkind as the real one
//! (projectsveltos/addon-controller, commit 60c6358035778386ccb9599f4944d2f5a0ec8926):
//!
//! * for every ClusterProfile it keeps a ClusterSummary per matching, ready cluster that is not
//!   being deleted (the summaries of deleting clusters are removed, as libsveltos' matching leaves
//!   such clusters out), `maxUpdate` clusters at a time (the others keep their previous spec and
//!   its `Provisioned`);
//! * the summary's spec is the profile's spec re-encoded as Sveltos' Go types encode it and
//!   defaulted as the API server defaults it ([`normalize`]), never the profile's bytes;
//! * the spec is written first (the profile controller's `Update`) and the status only after
//!   [`AddonController::status_lag`] (the ClusterSummary controller getting to it): in between,
//!   the summary shows the new spec with the previous statuses. The API server stamps both writes
//!   in `managedFields`, by its clock;
//! * each feature carries its deployment hash ([`feature_hash`]: its content plus the
//!   profile-level fields Sveltos includes). A feature whose hash changed goes `Provisioning`,
//!   then after the deploy time `Provisioned`, with `lastAppliedTime` by the controller's own
//!   clock ([`AddonController::clock_skew`] from the API server's); a feature whose hash did not
//!   change is left alone, and a spec change that changes no hash writes no status at all
//!   (`proceedDeployingFeature` skips the update when the feature is `Provisioned` with the same
//!   hash, `controllers/clustersummary_deployer.go`);
//! * with [`AddonController::late_writes`], a summary still deploying its previous spec when the new
//!   one is written gets one more status write computed from the previous spec (its hashes,
//!   `Provisioned`) after the spec write: the reconcile that read the old spec ends after the new
//!   one landed, and its status patch carries no resourceVersion (cluster-api's patch helper,
//!   `util/patch/patch.go` `patchStatus`: a merge patch without optimistic lock);
//! * a feature whose hash changed is written `Provisioning` with its new hash first (one reconcile
//!   queues the deployment), then `Provisioned` (the next one reads its result), even when the
//!   deployment takes no time: both writes then land in the second of the spec copy, as a real
//!   Sveltos that deploys a chart or a policy without waiting answers;
//! * with [`AddonController::cached_redeploys`], a deployment of hashes a summary already ran (a
//!   rollback, a revert) takes no time: Sveltos does not wait for a chart it has cached or a policy
//!   to become ready, so a rollback's spec copy, `Provisioning` and `Provisioned` land in the same
//!   second;
//! * failing clusters report `Failed`; a deleted profile loses its summaries and then Sveltos'
//!   finalizer (the add-ons are withdrawn);
//! * with [`AddonController::oss_promotion_controller`], it also plays open-source Sveltos v1.14+'s
//!   ClusterPromotion controller, which on delete with `preserveClusterProfilesOnDelete` removes
//!   the finalizer `config.projectsveltos.io/clusterpromotion` at once (the fake server's garbage
//!   collector then deletes whatever the promotion still owns).
//!
//! Its own bookkeeping lives in an annotation of each summary, so it is as stateless as promoter.

use super::feature_hash::feature_hash;
use crate::api::MaxUpdate;
use crate::api::ProfileSpec;
use crate::api::sveltos::{CLUSTER_NAME_LABEL, CLUSTER_PROFILE_NAME_LABEL, CLUSTER_TYPE_LABEL};
use crate::fake::store::DeleteOptions;
use crate::fake::{
    FakeApiServer, Store, cluster_profile_type, cluster_promotion_type, cluster_summary_type,
    sveltos_cluster_type,
};
use crate::labels::LabelSelector;
use crate::sveltos::normal_form::normalize;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Sveltos' finalizer on ClusterProfiles.
pub const PROFILE_FINALIZER: &str = "clusterprofilefinalizer.projectsveltos.io";
const SINCE_ANNOTATION: &str = "sim.promoter.dev/deploying-since";
/// The hashes a summary has reported `Provisioned` (the simulation's memory of what each cluster
/// ran, for [`AddonController::cached_redeploys`]).
const RAN_ANNOTATION: &str = "sim.promoter.dev/ran";
/// The field manager of Sveltos' writes: its binary is `manager`, and the API server takes the
/// User-Agent's first word.
pub const SVELTOS_MANAGER: &str = "manager";

#[derive(Clone, Debug)]
pub struct AddonController {
    /// Time from a summary's (re)deployment to `Provisioned`, per cluster (`namespace/name`).
    pub deploy_time: BTreeMap<String, Duration>,
    pub default_deploy_time: Duration,
    /// Clusters whose deployments fail, from the given time on.
    pub failing: BTreeMap<String, DateTime<Utc>>,
    /// For a failing cluster: only the deployments whose spec (as JSON text) contains this text
    /// fail (a revision that breaks on that cluster); the others deploy.
    pub failing_only: BTreeMap<String, String>,
    /// Time from a summary's spec update to the controller's first status write for it; until
    /// then the summary shows the new spec with the previous statuses.
    pub status_lag: Duration,
    /// The controller's clock minus the API server's (`lastAppliedTime` is stamped by the
    /// controller's node, `managedFields` by the API server's).
    pub clock_skew: Duration,
    /// A summary still deploying its previous spec when a new one is written gets a late status
    /// write from the previous spec (see the module docs).
    pub late_writes: bool,
    /// Play open-source Sveltos v1.14+'s ClusterPromotion controller next to promoter.
    pub oss_promotion_controller: bool,
    /// A deployment whose every feature hash the summary reported `Provisioned` before (a rollback,
    /// a revert) takes no time, whatever the cluster's deploy time (see the module docs).
    pub cached_redeploys: bool,
}

impl Default for AddonController {
    fn default() -> Self {
        AddonController {
            deploy_time: BTreeMap::new(),
            default_deploy_time: Duration::minutes(1),
            failing: BTreeMap::new(),
            failing_only: BTreeMap::new(),
            status_lag: Duration::zero(),
            clock_skew: Duration::zero(),
            late_writes: false,
            oss_promotion_controller: false,
            cached_redeploys: false,
        }
    }
}

fn meta_str(v: &Value, field: &str) -> String {
    v.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// An object's labels (`metadata.labels`), as strings.
pub fn labels(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The features of a summary carrying `spec`: one per kind of content, and those `also` names
/// (reported before and still reconciled: Sveltos keeps a feature whose content is gone).
fn feature_ids(spec: &Map<String, Value>, also: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (field, feature) in [
        ("helmCharts", "Helm"),
        ("policyRefs", "Resources"),
        ("kustomizationRefs", "Kustomize"),
    ] {
        let has = spec
            .get(field)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if has || also.iter().any(|a| a == feature) {
            out.push(feature.to_string());
        }
    }
    out
}

fn features(
    spec: &Map<String, Value>,
    status: &str,
    failure: Option<&str>,
    applied: Option<DateTime<Utc>>,
) -> Value {
    Value::Array(
        feature_ids(spec, &[])
            .iter()
            .map(|id| feature(spec, id, status, failure, applied))
            .collect(),
    )
}

fn feature(
    spec: &Map<String, Value>,
    id: &str,
    status: &str,
    failure: Option<&str>,
    applied: Option<DateTime<Utc>>,
) -> Value {
    let mut f = json!({"featureID": id, "hash": feature_hash(spec, id), "status": status});
    if let Some(msg) = failure {
        f["failureMessage"] = json!(msg);
    }
    if let Some(t) = applied {
        f["lastAppliedTime"] = json!(rfc3339(t));
    }
    f
}

fn all_provisioned(cs: &Value) -> bool {
    cs.pointer("/status/featureSummaries")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty() && f.iter().all(|x| x["status"] == "Provisioned"))
}

impl AddonController {
    fn deploy_time_of(&self, cluster: &str) -> Duration {
        self.deploy_time
            .get(cluster)
            .copied()
            .unwrap_or(self.default_deploy_time)
    }

    /// One reconciliation of every profile at `now`.
    pub fn reconcile(&self, server: &FakeApiServer, now: DateTime<Utc>) {
        let mut store = server.store();
        self.reconcile_store(&mut store, now);
    }

    pub fn reconcile_store(&self, store: &mut Store, now: DateTime<Utc>) {
        store.with_manager(SVELTOS_MANAGER, |store| {
            self.reconcile_as_sveltos(store, now)
        });
    }

    fn reconcile_as_sveltos(&self, store: &mut Store, now: DateTime<Utc>) {
        if self.oss_promotion_controller {
            release_preserved_promotions(store);
        }
        let (cp_rt, cs_rt, sc_rt) = (
            cluster_profile_type(),
            cluster_summary_type(),
            sveltos_cluster_type(),
        );
        let clusters = store.all(&sc_rt);
        let profiles = store.all(&cp_rt);
        let mut wanted: Vec<(String, String)> = Vec::new();
        for profile in &profiles {
            let name = meta_str(profile, "name");
            if profile.pointer("/metadata/deletionTimestamp").is_some() {
                // Withdraw: summaries go, then Sveltos releases the profile.
                let mut p = profile.clone();
                p["metadata"]["finalizers"] = json!(
                    profile
                        .pointer("/metadata/finalizers")
                        .and_then(Value::as_array)
                        .map(|f| f
                            .iter()
                            .filter(|x| *x != PROFILE_FINALIZER)
                            .cloned()
                            .collect::<Vec<_>>())
                        .unwrap_or_default()
                );
                let _ = store.update(&cp_rt, "", &name, p, false);
                continue;
            }
            if !profile
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == PROFILE_FINALIZER))
            {
                let mut p = profile.clone();
                let mut f = profile
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                f.push(json!(PROFILE_FINALIZER));
                p["metadata"]["finalizers"] = json!(f);
                let _ = store.update(&cp_rt, "", &name, p, false);
            }
            let raw: Map<String, Value> = profile
                .get("spec")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            // What Sveltos' Go types and the API server make of the profile's spec.
            let spec = normalize(&raw);
            let selector: LabelSelector =
                serde_json::from_value(raw.get("clusterSelector").cloned().unwrap_or(json!({})))
                    .unwrap_or_default();
            let mut matching: Vec<&Value> = clusters
                .iter()
                .filter(|c| selector.selects(&labels(c)).unwrap_or(false))
                .filter(|c| c.pointer("/status/ready") == Some(&Value::Bool(true)))
                // libsveltos: "Only existing cluster can match".
                .filter(|c| c.pointer("/metadata/deletionTimestamp").is_none())
                .collect();
            matching.sort_by_key(|c| (meta_str(c, "namespace"), meta_str(c, "name")));
            let max_update = ProfileSpec(raw.clone()).max_update().ok().flatten();
            let batch = max_update
                .as_ref()
                .map(|m: &MaxUpdate| m.of(matching.len()))
                .unwrap_or(usize::MAX);
            let mut in_flight = 0;
            for cluster in matching {
                let (ns, cluster_name) =
                    (meta_str(cluster, "namespace"), meta_str(cluster, "name"));
                let cs_name = format!("{name}-sveltos-{cluster_name}");
                wanted.push((ns.clone(), cs_name.clone()));
                let paused = cluster.pointer("/spec/paused") == Some(&Value::Bool(true));
                let existing = store.get(&cs_rt, &ns, &cs_name).ok();
                let in_sync = existing
                    .as_ref()
                    .and_then(|cs| cs.pointer("/spec/clusterProfileSpec"))
                    == Some(&Value::Object(spec.clone()));
                let deployed = existing.as_ref().is_some_and(all_provisioned);
                if paused || (!(in_sync && deployed) && in_flight >= batch) {
                    // Paused clusters, and clusters beyond the maxUpdate batch, wait with the
                    // spec and statuses they have.
                    continue;
                }
                let target = Target {
                    profile,
                    namespace: &ns,
                    cluster: &cluster_name,
                    spec: &spec,
                };
                let written = self.reconcile_summary(store, &target, existing, now);
                if !(in_sync && written.as_ref().is_some_and(all_provisioned)) {
                    in_flight += 1;
                }
            }
        }
        // Summaries of profiles that are gone, or of clusters that no longer match.
        for cs in store.all(&cs_rt) {
            let key = (meta_str(&cs, "namespace"), meta_str(&cs, "name"));
            if !wanted.contains(&key) {
                let _ = store.delete(&cs_rt, &key.0, &key.1, &DeleteOptions::default());
            }
        }
    }
}

/// The ClusterSummary Sveltos keeps for `profile` on one cluster, carrying `spec` (the profile's
/// spec in Sveltos' normal form) and the profile's annotations (`updateClusterSummary` copies them);
/// the API server stamps its `managedFields`.
pub fn summary_object(
    profile: &Value,
    namespace: &str,
    cluster: &str,
    spec: &Map<String, Value>,
) -> Value {
    let name = meta_str(profile, "name");
    let mut object = json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
        "metadata": {
            "name": format!("{name}-sveltos-{cluster}"), "namespace": namespace,
            "labels": {CLUSTER_PROFILE_NAME_LABEL: name, CLUSTER_NAME_LABEL: cluster, CLUSTER_TYPE_LABEL: "Sveltos"},
            "ownerReferences": [{"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                                 "name": name, "uid": meta_str(profile, "uid")}],
        },
        "spec": {"clusterNamespace": namespace, "clusterName": cluster, "clusterType": "Sveltos", "clusterProfileSpec": spec},
    });
    if let Some(a) = profile.pointer("/metadata/annotations") {
        object["metadata"]["annotations"] = a.clone();
    }
    object
}

/// Writes a summary's spec as Sveltos' profile controller does (creating it, or over `existing`);
/// the stored object, when written.
fn write_spec(store: &mut Store, object: Value, existing: Option<&Value>) -> Option<Value> {
    let cs_rt = cluster_summary_type();
    let (ns, name) = (meta_str(&object, "namespace"), meta_str(&object, "name"));
    store.with_manager(SVELTOS_MANAGER, |store| match existing {
        None => store.create(&cs_rt, &ns, object).ok(),
        Some(current) => {
            let mut next = object;
            // The simulation's own bookkeeping is not the profile controller's to drop.
            for key in [SINCE_ANNOTATION, RAN_ANNOTATION] {
                if let Some(v) = current.pointer(&annotation_pointer(key)) {
                    next["metadata"]["annotations"][key] = v.clone();
                }
            }
            next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            store.update(&cs_rt, &ns, &name, next, false).ok()
        }
    })
}

/// Writes a summary's status through the status subresource, as Sveltos' ClusterSummary controller
/// does; unchanged, nothing is written.
fn write_status(store: &mut Store, current: Value, status: Value) -> Option<Value> {
    if current.get("status") == Some(&status) {
        return Some(current);
    }
    let (ns, name) = (meta_str(&current, "namespace"), meta_str(&current, "name"));
    let mut next = current;
    next["status"] = status;
    store
        .with_manager(SVELTOS_MANAGER, |store| {
            store.update(&cluster_summary_type(), &ns, &name, next, true)
        })
        .ok()
}

/// Writes a summary as the controller does: its spec (creating it, or over `existing`), then its
/// status.
pub fn write_summary(store: &mut Store, object: Value, existing: Option<Value>, status: Value) {
    if let Some(written) = write_spec(store, object, existing.as_ref()) {
        let _ = write_status(store, written, status);
    }
}

fn annotation_pointer(key: &str) -> String {
    format!("/metadata/annotations/{}", key.replace('/', "~1"))
}

fn since_pointer() -> String {
    annotation_pointer(SINCE_ANNOTATION)
}

/// When the controller got (or gets) to a summary's current spec, from its bookkeeping.
fn since_of(cs: &Value) -> Option<DateTime<Utc>> {
    cs.pointer(&since_pointer())
        .and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Records the simulation's bookkeeping on a summary, as a manager of its own: Sveltos' entry in
/// `managedFields` (the time of its spec write) is left as the real controller leaves it.
fn write_since(store: &mut Store, current: Value, since: DateTime<Utc>) -> Option<Value> {
    write_bookkeeping(store, current, SINCE_ANNOTATION, json!(rfc3339(since)))
}

fn write_bookkeeping(store: &mut Store, current: Value, key: &str, value: Value) -> Option<Value> {
    let (ns, name) = (meta_str(&current, "namespace"), meta_str(&current, "name"));
    let mut next = current;
    if !next["metadata"]["annotations"].is_object() {
        next["metadata"]["annotations"] = json!({});
    }
    next["metadata"]["annotations"][key] = value;
    store
        .with_manager("promoter-simulation", |store| {
            store.update(&cluster_summary_type(), &ns, &name, next, false)
        })
        .ok()
}

/// The hashes a summary has reported `Provisioned` ([`RAN_ANNOTATION`]).
fn ran(cs: &Value) -> Vec<String> {
    cs.pointer(&annotation_pointer(RAN_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// Adds the hashes of the summary's `Provisioned` features to what it ran (written only when that
/// grows).
fn remember_ran(store: &mut Store, current: Value) -> Option<Value> {
    let mut hashes = ran(&current);
    let before = hashes.len();
    for f in status_features(&current) {
        if f["status"] == "Provisioned"
            && let Some(h) = f["hash"].as_str()
            && !hashes.iter().any(|x| x == h)
        {
            hashes.push(h.to_string());
        }
    }
    if hashes.len() == before {
        return Some(current);
    }
    hashes.sort();
    let text = serde_json::to_string(&hashes).unwrap_or_default();
    write_bookkeeping(store, current, RAN_ANNOTATION, json!(text))
}

/// The annotations Sveltos copies from a profile onto its summaries (without the simulation's own).
fn copied_annotations(v: &Value) -> Map<String, Value> {
    let mut a = v
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    a.remove(SINCE_ANNOTATION);
    a.remove(RAN_ANNOTATION);
    a
}

/// The spec of a summary whose deployment of it is under way: every feature of it reported with
/// its hash, not all `Provisioned` (Sveltos writes `Provisioning` with the hash before it deploys,
/// so only such a summary can have a deployment of that spec finish later).
fn deploying_its_spec(cs: &Value) -> Option<Map<String, Value>> {
    let spec: Map<String, Value> = cs
        .pointer("/spec/clusterProfileSpec")
        .and_then(Value::as_object)
        .cloned()?;
    let reported = status_features(cs);
    let under_way = feature_ids(&spec, &[]).iter().all(|id| {
        reported
            .iter()
            .any(|f| f["featureID"] == id.as_str() && f["hash"] == feature_hash(&spec, id).as_str())
    });
    (under_way && !all_provisioned(cs)).then_some(spec)
}

/// The profile and cluster one summary is for.
struct Target<'a> {
    profile: &'a Value,
    namespace: &'a str,
    cluster: &'a str,
    /// The profile's spec in Sveltos' normal form.
    spec: &'a Map<String, Value>,
}

fn status_features(cs: &Value) -> Vec<Value> {
    cs.pointer("/status/featureSummaries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

impl AddonController {
    /// One reconcile of one summary: the profile controller writes a new spec, then (once the
    /// ClusterSummary controller gets to it, [`Self::status_lag`] later) each feature is
    /// redeployed if its hash changed. The summary as stored afterwards.
    fn reconcile_summary(
        &self,
        store: &mut Store,
        t: &Target,
        existing: Option<Value>,
        now: DateTime<Utc>,
    ) -> Option<Value> {
        let key = format!("{}/{}", t.namespace, t.cluster);
        let own_clock = now + self.clock_skew;
        let in_sync = existing
            .as_ref()
            .and_then(|cs| cs.pointer("/spec/clusterProfileSpec"))
            == Some(&Value::Object(t.spec.clone()));
        let mut current = match existing {
            Some(cs) if in_sync && copied_annotations(&cs) == copied_annotations(t.profile) => cs,
            // The profile's annotations changed: copied, with the spec as it is.
            Some(cs) if in_sync => {
                let object = summary_object(t.profile, t.namespace, t.cluster, t.spec);
                write_spec(store, object, Some(&cs))?
            }
            previous => {
                let object = summary_object(t.profile, t.namespace, t.cluster, t.spec);
                let written = write_spec(store, object, previous.as_ref())?;
                // The controller gets to the new spec later.
                let mut written = write_since(store, written, now + self.status_lag)?;
                if let Some(old_spec) = previous
                    .as_ref()
                    .filter(|_| self.late_writes)
                    .and_then(deploying_its_spec)
                {
                    // A reconcile of the previous spec lands after the new spec: its deployment
                    // finished, and its status says so, with the previous spec's hashes.
                    let late = json!({"featureSummaries": features(&old_spec, "Provisioned", None, Some(own_clock))});
                    written = write_status(store, written, late)?;
                }
                written
            }
        };
        let since = match since_of(&current) {
            Some(s) => s,
            None => {
                // Loaded from a live cluster: what is provisioned stays so, the rest starts now.
                let since = if all_provisioned(&current) {
                    DateTime::<Utc>::MIN_UTC
                } else {
                    now
                };
                current = write_since(store, current, since)?;
                since
            }
        };
        if now < since {
            // The controller has not got to the new spec yet: the previous statuses stay.
            return Some(current);
        }
        let failing = self.failing.get(&key).is_some_and(|from| *from <= now)
            && self.failing_only.get(&key).is_none_or(|text| {
                serde_json::to_string(t.spec).is_ok_and(|s| s.contains(text.as_str()))
            });
        let before = status_features(&current);
        let ids: Vec<String> = before
            .iter()
            .filter_map(|f| f["featureID"].as_str().map(String::from))
            .collect();
        // What the summary ran before is redeployed at once (a cached chart, a policy).
        let cached = self.cached_redeploys && {
            let ran = ran(&current);
            let wanted = feature_ids(t.spec, &ids);
            !wanted.is_empty()
                && wanted
                    .iter()
                    .all(|id| ran.contains(&feature_hash(t.spec, id)))
        };
        let deploy_time = if cached {
            Duration::zero()
        } else {
            self.deploy_time_of(&key)
        };
        let done = now >= since + deploy_time;
        let after: Vec<Value> = feature_ids(t.spec, &ids)
            .iter()
            .map(|id| {
                let hash = feature_hash(t.spec, id);
                let was = before.iter().find(|f| f["featureID"] == id.as_str());
                if failing {
                    // Stamped once, when the failure began: a status that changes every
                    // reconcile would keep the simulated world from ever being at rest.
                    let from = self.failing.get(&key).copied().unwrap_or(now).max(since);
                    return feature(
                        t.spec,
                        id,
                        "Failed",
                        Some("deployment failed (simulated)"),
                        Some(from + self.clock_skew),
                    );
                }
                match was {
                    // Provisioned with the same hash: not redeployed, not even rewritten.
                    Some(f)
                        if f["status"] == "Provisioned"
                            && (f["hash"] == hash.as_str()
                                || since == DateTime::<Utc>::MIN_UTC) =>
                    {
                        f.clone()
                    }
                    _ if done => feature(t.spec, id, "Provisioned", None, Some(own_clock)),
                    _ => {
                        // Provisioning keeps the previous lastAppliedTime.
                        let mut f = feature(t.spec, id, "Provisioning", None, None);
                        if let Some(at) = was.and_then(|w| w.get("lastAppliedTime")) {
                            f["lastAppliedTime"] = at.clone();
                        }
                        f
                    }
                }
            })
            .collect();
        if after == before {
            return Some(current);
        }
        // The reconcile that queues a deployment writes its hash with `Provisioning`; the one that
        // reads its result writes `Provisioned` (`proceedDeployingFeature`,
        // controllers/clustersummary_deployer.go): two writes, in one second when it took none.
        let queued: Vec<Value> = after
            .iter()
            .map(|f| {
                let was = before.iter().find(|w| w["featureID"] == f["featureID"]);
                let seen = was.is_some_and(|w| {
                    w["hash"] == f["hash"]
                        && (w["status"] == "Provisioning" || w["status"] == "Provisioned")
                });
                if f["status"] != "Provisioned" || seen {
                    return f.clone();
                }
                let mut q = f.clone();
                q["status"] = json!("Provisioning");
                match was.and_then(|w| w.get("lastAppliedTime")) {
                    Some(at) => q["lastAppliedTime"] = at.clone(),
                    None => {
                        if let Some(m) = q.as_object_mut() {
                            m.remove("lastAppliedTime");
                        }
                    }
                }
                q
            })
            .collect();
        if queued != after && queued != before {
            current = write_status(store, current, json!({"featureSummaries": queued}))?;
        }
        let written = write_status(store, current, json!({"featureSummaries": after}))?;
        if self.cached_redeploys {
            return remember_ran(store, written);
        }
        Some(written)
    }
}

/// The `featureSummaries` of a summary carrying `spec`: one feature per kind of content, each in
/// `status`.
pub fn feature_summaries(
    spec: &Map<String, Value>,
    status: &str,
    failure: Option<&str>,
    applied: Option<DateTime<Utc>>,
) -> Value {
    json!({"featureSummaries": features(spec, status, failure, applied)})
}

pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Open-source Sveltos v1.14+'s ClusterPromotion controller on delete: with
/// `preserveClusterProfilesOnDelete` it removes the finalizer at once, without looking at the
/// profiles (projectsveltos/addon-controller `controllers/clusterpromotion_controller.go`).
fn release_preserved_promotions(store: &mut Store) {
    let rt = cluster_promotion_type();
    for p in store.all(&rt) {
        let preserve =
            p.pointer("/spec/preserveClusterProfilesOnDelete") == Some(&Value::Bool(true));
        if p.pointer("/metadata/deletionTimestamp").is_none() || !preserve {
            continue;
        }
        let mut next = p.clone();
        if let Some(f) = next
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            f.retain(|x| x != crate::api::promotion::FINALIZER);
        }
        let _ = store.update(&rt, "", &meta_str(&p, "name"), next, false);
    }
}

/// A SveltosCluster object for the fake server (ready unless told otherwise).
pub fn sveltos_cluster(namespace: &str, name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {},
        "status": {"ready": true}
    })
}

impl AddonController {
    /// The next time after `now` at which a reconcile would change something by itself: a
    /// deployment finishing, or a scripted failure starting. `None` when the world is at rest.
    pub fn next_change(&self, store: &Store, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut next: Option<DateTime<Utc>> =
            self.failing.values().filter(|t| **t > now).min().copied();
        for cs in store.all(&cluster_summary_type()) {
            let provisioning = cs
                .pointer("/status/featureSummaries")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x["status"] == "Provisioning"));
            let since = cs
                .pointer(&format!(
                    "/metadata/annotations/{}",
                    SINCE_ANNOTATION.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc));
            let cluster = format!(
                "{}/{}",
                cs.pointer("/spec/clusterNamespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                cs.pointer("/spec/clusterName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            if let Some(since) = since {
                // The controller getting to a new spec (status lag), then the deployment finishing.
                let lagging = since > now;
                let done = since + self.deploy_time_of(&cluster);
                for at in [
                    lagging.then_some(since),
                    (provisioning || lagging).then_some(done),
                ]
                .into_iter()
                .flatten()
                {
                    if at > now && next.is_none_or(|n| at < n) {
                        next = Some(at);
                    }
                }
            }
        }
        next
    }
}
