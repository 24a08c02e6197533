//! Sveltos in the model: for one generated profile at a time, the addon-controller deploys it on
//! every ready cluster its selector matches (each ClusterSummary in sync with the profile and every
//! feature `Provisioned`), or fails to (`Failed`); the summaries of a profile that is gone, and of
//! clusters it no longer selects, are removed. One reconcile is one step, so deployments of
//! different profiles interleave with everything else. With `clusters=2` the profile of the stage
//! of two clusters is reconciled per cluster ([`reconcile`]'s `only`), as Sveltos does: one
//! ClusterSummary per (profile, cluster) (its `spec.clusterNamespace`/`clusterName`), each
//! reconciled on its own by the ClusterSummary controller (projectsveltos/addon-controller,
//! `controllers/clustersummary_controller.go`), so one cluster may run the new revision while the
//! other runs the old one or has failed. Summaries are written as the simulated addon-controller
//! (`sim::addon`) writes them (with its feature hashes), with fixed times. With the `lags` bound, a
//! reconcile may copy the new spec only ([`Outcome::SpecOnly`]): the summary then shows the
//! previous spec's `Provisioned` and hashes, as a busy controller, or a status of the previous
//! spec landing late, shows it.

use super::memo::{ArcMemo, normal_form as normal_form_of};
use super::setup::fixed_time;
use promoter::fake::store::DeleteOptions;
use promoter::fake::{Store, cluster_profile_type, cluster_summary_type, sveltos_cluster_type};
use promoter::labels::LabelSelector;
use promoter::sim::addon::labels;
use promoter::sim::addon::{feature_summaries, summary_object, write_summary};
use serde_json::{Map, Value, json};
use std::cell::RefCell;
use std::sync::Arc;

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// What Sveltos makes of a profile: the summaries' spec, their statuses (deployed, failing), and
/// the clusters it selects.
struct Desired {
    spec: Arc<Map<String, Value>>,
    normal: Value,
    provisioned: Value,
    failed: Value,
    retrying: Value,
    clusters: Vec<(String, String)>,
}

thread_local! {
    static DESIRED: RefCell<ArcMemo<Value, Arc<Desired>>> = RefCell::default();
}

fn desired(store: &Store, arc: &Arc<Value>) -> Arc<Desired> {
    DESIRED.with(|m| {
        m.borrow_mut().get(arc, 0, |profile| {
            let spec = normal_form_of(arc);
            let selector: LabelSelector = serde_json::from_value(
                profile
                    .pointer("/spec/clusterSelector")
                    .cloned()
                    .unwrap_or(json!({})),
            )
            .unwrap_or_default();
            // The clusters never change in the model.
            let clusters = store
                .stored(&sveltos_cluster_type())
                .filter(|c| {
                    selector.selects(&labels(c)).unwrap_or(false)
                        && c.pointer("/status/ready") == Some(&Value::Bool(true))
                        && c.pointer("/metadata/deletionTimestamp").is_none()
                })
                .map(|c| (text(c, "/metadata/namespace"), text(c, "/metadata/name")))
                .collect();
            Arc::new(Desired {
                normal: Value::Object((*spec).clone()),
                provisioned: feature_summaries(&spec, "Provisioned", None, Some(fixed_time())),
                failed: feature_summaries(
                    &spec,
                    "Failed",
                    Some("deployment failed (model)"),
                    Some(fixed_time()),
                ),
                retrying: feature_summaries(&spec, "Provisioning", None, Some(fixed_time())),
                spec,
                clusters,
            })
        })
    })
}

/// What one reconcile of a profile does on the clusters it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Deployed: each summary in sync with the profile, every feature `Provisioned`.
    Deployed,
    /// Failed: each summary in sync, every feature `Failed`.
    Failed,
    /// Sveltos retries a failed deployment: a summary in sync whose features failed goes back to
    /// `Provisioning` with the spec's hashes, no failure (the reconcile that queues a deployment
    /// writes it, as `sim::addon` does after projectsveltos/addon-controller's
    /// `proceedDeployingFeature`, controllers/clustersummary_deployer.go); nothing else changes.
    /// A cluster counted against a failure budget may so go back to deploying.
    Retrying,
    /// Only the profile controller got to it: the summaries that exist get the new spec and keep
    /// the status of the previous one (its features, hashes and `Provisioned`); nothing is
    /// created or removed.
    SpecOnly,
}

/// Whether a summary shows the spec of its profile with the status of another spec (a
/// [`Outcome::SpecOnly`] not reconciled yet). The book's stage completion assumes Sveltos reconciles
/// a copied spec within the grace, so the model's clock does not move past one (the tick is longer
/// than the grace).
pub fn lagging(store: &Store) -> bool {
    let cs_rt = cluster_summary_type();
    store.stored(&cluster_profile_type()).any(|profile| {
        if profile.pointer("/metadata/deletionTimestamp").is_some() {
            return false;
        }
        let d = desired(store, profile);
        let name = text(profile, "/metadata/name");
        d.clusters.iter().any(|(ns, cluster_name)| {
            store
                .peek(&cs_rt, ns, &format!("{name}-sveltos-{cluster_name}"))
                .is_some_and(|cs| {
                    cs.pointer("/spec/clusterProfileSpec") == Some(&d.normal)
                        && cs.get("status").is_some_and(|s| {
                            *s != d.provisioned && *s != d.failed && *s != d.retrying
                        })
                })
        })
    })
}

/// Whether a deployment of the profile `name` would change what its clusters show (it has not
/// run its spec everywhere it selects yet).
pub fn pending(store: &Store, name: &str) -> bool {
    let mut after = store.clone();
    reconcile(&mut after, name, Outcome::Deployed, None);
    after.revision() != store.revision()
}

/// One reconcile of the profile `name`: deployed everywhere it selects, failing there, or its
/// spec copied ahead of the deployment; with `only`, on that one cluster (its summary created,
/// deployed, failed or removed), the other clusters as they were.
pub fn reconcile(store: &mut Store, name: &str, outcome: Outcome, only: Option<&str>) {
    let cs_rt = cluster_summary_type();
    let mut wanted: Vec<(String, String)> = Vec::new();
    if let Some(profile) = store.peek(&cluster_profile_type(), "", name).cloned()
        && profile.pointer("/metadata/deletionTimestamp").is_none()
    {
        let d = desired(store, &profile);
        for (ns, cluster_name) in &d.clusters {
            if only.is_some_and(|c| c != cluster_name) {
                continue;
            }
            let cs_name = format!("{name}-sveltos-{cluster_name}");
            let existing = store.peek(&cs_rt, ns, &cs_name).cloned();
            wanted.push((ns.clone(), cs_name));
            let in_sync = existing
                .as_ref()
                .is_some_and(|cs| cs.pointer("/spec/clusterProfileSpec") == Some(&d.normal));
            let status = match (outcome, &existing) {
                (Outcome::Deployed, _) => d.provisioned.clone(),
                (Outcome::Failed, _) => d.failed.clone(),
                (Outcome::Retrying, Some(cs))
                    if in_sync && cs.get("status").is_some_and(|s| *s == d.failed) =>
                {
                    d.retrying.clone()
                }
                (Outcome::Retrying, _) => continue,
                (Outcome::SpecOnly, Some(cs)) if !in_sync => match cs.get("status") {
                    Some(s) => s.clone(),
                    None => continue,
                },
                (Outcome::SpecOnly, _) => continue,
            };
            // Already so: Sveltos writes nothing.
            if in_sync && existing.as_ref().and_then(|cs| cs.get("status")) == Some(&status) {
                continue;
            }
            let object = summary_object(&profile, ns, cluster_name, &d.spec);
            write_summary(store, object, existing.map(|e| (*e).clone()), status);
        }
    }
    if matches!(outcome, Outcome::SpecOnly | Outcome::Retrying) {
        return;
    }
    let stale: Vec<(String, String)> = store
        .stored(&cs_rt)
        .filter(|cs| {
            cs.pointer("/metadata/labels")
                .and_then(|l| l.get(promoter::api::sveltos::CLUSTER_PROFILE_NAME_LABEL))
                .is_some_and(|p| p == name)
        })
        .filter(|cs| only.is_none_or(|c| text(cs, "/spec/clusterName") == c))
        .map(|cs| (text(cs, "/metadata/namespace"), text(cs, "/metadata/name")))
        .filter(|key| !wanted.contains(key))
        .collect();
    for (ns, cs) in stale {
        let _ = store.delete(&cs_rt, &ns, &cs, &DeleteOptions::default());
    }
}
