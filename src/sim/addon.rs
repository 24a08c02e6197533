//! A simulated Sveltos addon-controller over the fake API server's store, as unkind as the real one:
//!
//! * for every ClusterProfile it keeps a ClusterSummary per matching, ready cluster that is not
//!   being deleted (the summaries of deleting clusters are removed, as libsveltos' matching leaves
//!   such clusters out), `maxUpdate` clusters at a time (the others keep their previous spec and
//!   its `Provisioned`);
//! * the summary's spec is the profile's spec re-encoded as Sveltos' Go types encode it and
//!   defaulted as the API server defaults it ([`normalize`]), never the profile's bytes;
//! * the spec is written first (stamped in `managedFields`, as the API server does) and the status
//!   only after [`AddonController::status_lag`]: in between, the summary shows the new spec with the
//!   previous `Provisioned` (the stale window of a busy addon-controller); then the features go
//!   `Provisioning` and, after the deploy time, `Provisioned` with a `lastAppliedTime`;
//! * failing clusters report `Failed`; a deleted profile loses its summaries and then Sveltos'
//!   finalizer (the add-ons are withdrawn);
//! * with [`AddonController::oss_promotion_controller`], it also plays open-source Sveltos v1.14+'s
//!   ClusterPromotion controller, which on delete with `preserveClusterProfilesOnDelete` removes
//!   the finalizer `config.projectsveltos.io/clusterpromotion` at once (the fake server's garbage
//!   collector then deletes whatever the promotion still owns).
//!
//! Its own bookkeeping lives in an annotation of each summary, so it is as stateless as promoter.

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
    /// Play open-source Sveltos v1.14+'s ClusterPromotion controller next to promoter.
    pub oss_promotion_controller: bool,
}

impl Default for AddonController {
    fn default() -> Self {
        AddonController {
            deploy_time: BTreeMap::new(),
            default_deploy_time: Duration::minutes(1),
            failing: BTreeMap::new(),
            failing_only: BTreeMap::new(),
            status_lag: Duration::zero(),
            oss_promotion_controller: false,
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

fn features(
    spec: &Map<String, Value>,
    status: &str,
    failure: Option<&str>,
    applied: Option<DateTime<Utc>>,
) -> Value {
    let mut out = Vec::new();
    for (field, feature) in [
        ("helmCharts", "Helm"),
        ("policyRefs", "Resources"),
        ("kustomizationRefs", "Kustomize"),
    ] {
        if spec
            .get(field)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            let mut f = json!({"featureID": feature, "status": status});
            if let Some(msg) = failure {
                f["failureMessage"] = json!(msg);
            }
            if let Some(t) = applied {
                f["lastAppliedTime"] = json!(rfc3339(t));
            }
            out.push(f);
        }
    }
    Value::Array(out)
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
                let key = format!("{ns}/{cluster_name}");
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
                let since = if in_sync {
                    existing
                        .as_ref()
                        .and_then(|cs| {
                            cs.pointer(&format!(
                                "/metadata/annotations/{}",
                                SINCE_ANNOTATION.replace('/', "~1")
                            ))
                        })
                        .and_then(Value::as_str)
                        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                        .map(|t| t.with_timezone(&Utc))
                        // Loaded from a live cluster: provisioned stays provisioned, the rest starts now.
                        .unwrap_or(if deployed {
                            DateTime::<Utc>::MIN_UTC
                        } else {
                            now
                        })
                } else {
                    // The deployment starts once the controller gets to the new spec.
                    now + self.status_lag
                };
                let spec_written = if in_sync {
                    existing
                        .as_ref()
                        .and_then(|cs| cs.pointer("/metadata/managedFields/0/time"))
                        .cloned()
                        .unwrap_or_else(|| json!(rfc3339(now)))
                } else {
                    json!(rfc3339(now))
                };
                let failing = self.failing.get(&key).is_some_and(|from| *from <= now)
                    && self.failing_only.get(&key).is_none_or(|text| {
                        serde_json::to_string(&spec).is_ok_and(|s| s.contains(text.as_str()))
                    });
                let done_at = since + self.deploy_time_of(&key);
                let status = if now < since {
                    // The controller has not reconciled the new spec yet: the previous statuses stay.
                    existing
                        .as_ref()
                        .and_then(|cs| cs.get("status").cloned())
                        .unwrap_or(json!({}))
                } else if failing {
                    // Stamped once, when the failure began: a status that changes every
                    // reconcile would keep the simulated world from ever being at rest.
                    let from = self.failing.get(&key).copied().unwrap_or(now).max(since);
                    json!({"featureSummaries": features(&spec, "Failed", Some("deployment failed (simulated)"), Some(from))})
                } else if now >= done_at {
                    let at = if since == DateTime::<Utc>::MIN_UTC {
                        None
                    } else {
                        Some(done_at)
                    };
                    let keep = existing
                        .as_ref()
                        .filter(|_| at.is_none())
                        .and_then(|cs| cs.get("status").cloned());
                    keep.unwrap_or_else(|| {
                        json!({"featureSummaries": features(&spec, "Provisioned", None, at.or(Some(now)))})
                    })
                } else {
                    json!({"featureSummaries": features(&spec, "Provisioning", None, None)})
                };
                if !(in_sync && all_provisioned(&json!({"status": status.clone()}))) {
                    in_flight += 1;
                }
                let mut object = summary_object(profile, &ns, &cluster_name, &spec, spec_written);
                object["metadata"]["annotations"] = json!({SINCE_ANNOTATION: rfc3339(since)});
                write_summary(store, object, existing, status);
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
/// spec in Sveltos' normal form), its spec write stamped at `spec_written` in `managedFields`, as
/// the API server records the controller's writes.
pub fn summary_object(
    profile: &Value,
    namespace: &str,
    cluster: &str,
    spec: &Map<String, Value>,
    spec_written: Value,
) -> Value {
    let name = meta_str(profile, "name");
    json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
        "metadata": {
            "name": format!("{name}-sveltos-{cluster}"), "namespace": namespace,
            "labels": {CLUSTER_PROFILE_NAME_LABEL: name, CLUSTER_NAME_LABEL: cluster, CLUSTER_TYPE_LABEL: "Sveltos"},
            "ownerReferences": [{"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                                 "name": name, "uid": meta_str(profile, "uid")}],
            "managedFields": [
                {"manager": "addon-controller", "operation": "Update",
                 "apiVersion": "config.projectsveltos.io/v1beta1", "time": spec_written,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:clusterProfileSpec": {}}}},
            ],
        },
        "spec": {"clusterNamespace": namespace, "clusterName": cluster, "clusterType": "Sveltos", "clusterProfileSpec": spec},
    })
}

/// Writes a summary as the controller does: its spec (creating it, or over `existing`), then its
/// status.
pub fn write_summary(store: &mut Store, object: Value, existing: Option<Value>, status: Value) {
    let cs_rt = cluster_summary_type();
    let (ns, name) = (meta_str(&object, "namespace"), meta_str(&object, "name"));
    let written = match existing {
        None => store.seed(&cs_rt, object),
        Some(current) => {
            let mut next = object;
            next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            store.update(&cs_rt, &ns, &name, next, false)
        }
    };
    if let Ok(mut with_status) = written {
        with_status["status"] = status;
        let _ = store.update(&cs_rt, &ns, &name, with_status, true);
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
