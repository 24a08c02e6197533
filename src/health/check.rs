//! One `ValidateHealth` against one managed cluster. `Err` carries why it is not healthy, naming the
//! resource; upstream's texts where it has them.

use super::pool::{Pool, Problem, Verdict};
use super::worker::Request;
use super::{lua, metrics};
use crate::api::ValidateHealth;
use chrono::{DateTime, Utc};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use std::collections::BTreeMap;

/// The jobCheck timeout when unset (upstream's default).
const DEFAULT_JOB_TIMEOUT: chrono::Duration = chrono::Duration::minutes(5);

pub struct Target<'a> {
    pub mgmt: &'a kube::Client,
    pub cluster: &'a kube::Client,
    /// The managed cluster's namespace in the management cluster (jobRef's default namespace).
    pub cluster_namespace: &'a str,
    pub now: DateTime<Utc>,
    /// Where scripts and rules are evaluated (worker processes, with hard limits).
    pub pool: &'a Pool,
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The served resource of a kind, and whether it is namespaced.
async fn resolve(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<(kube::discovery::ApiResource, bool), String> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, caps)) => Ok((resource, caps.scope == kube::discovery::Scope::Namespaced)),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(format!(
            "kind {kind} ({}) is not served by the cluster",
            gv(group, version)
        )),
        Err(kube::Error::Discovery(e)) => Err(format!(
            "kind {kind} ({}) is not served by the cluster: {e}",
            gv(group, version)
        )),
        Err(e) => Err(format!(
            "discovering kind {kind} ({}): {}",
            gv(group, version),
            crate::cli_error::line(&e)
        )),
    }
}

fn gv(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// The objects named by literal four-argument `getResource` calls; absent ones are left out.
async fn prefetch(
    client: &kube::Client,
    script: &str,
) -> Result<BTreeMap<lua::ResourceRef, Value>, String> {
    let mut out = BTreeMap::new();
    for r in lua::resource_refs(script) {
        let (group, version) = split_api_version(&r.api_version);
        let Ok((resource, namespaced)) = resolve(client, group, version, &r.kind).await else {
            continue;
        };
        let api: Api<DynamicObject> = if r.namespace.is_empty() || !namespaced {
            Api::all_with(client.clone(), &resource)
        } else {
            Api::namespaced_with(client.clone(), &r.namespace, &resource)
        };
        match api.get_opt(&r.name).await {
            Ok(Some(obj)) => {
                out.insert(r, serde_json::to_value(obj).map_err(|e| e.to_string())?);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(format!(
                    "getResource {} {} {}/{}: {}",
                    r.api_version,
                    r.kind,
                    r.namespace,
                    r.name,
                    crate::cli_error::line(&e)
                ));
            }
        }
    }
    Ok(out)
}

fn label_selector(check: &ValidateHealth) -> Result<String, String> {
    let mut terms = Vec::new();
    for f in check.label_filters.iter().flatten() {
        let value = f.value.clone().unwrap_or_default();
        terms.push(match f.operation.as_str() {
            "Equal" => format!("{}={value}", f.key),
            "Different" => format!("{}!={value}", f.key),
            "Has" => f.key.clone(),
            "DoesNotHave" => format!("!{}", f.key),
            other => return Err(format!("labelFilters: unknown operation {other:?}")),
        });
    }
    Ok(terms.join(","))
}

pub async fn run(t: &Target<'_>, check: &ValidateHealth) -> Result<(), String> {
    if let Some(job) = &check.job_check {
        return job_check(t, job).await;
    }
    let metric_values = match &check.metric_source {
        Some(source) => {
            metrics::query_all(
                t.cluster,
                source,
                check.metric_queries.as_deref().unwrap_or_default(),
            )
            .await?
        }
        None => BTreeMap::new(),
    };
    let rules: Vec<(String, String)> = check
        .evaluate_cel
        .iter()
        .flatten()
        .map(|r| (r.name.clone(), r.rule.clone()))
        .collect();
    let resources = match &check.script {
        Some(script) => prefetch(t.cluster, script).await?,
        None => BTreeMap::new(),
    };
    let kind = check.kind.clone().unwrap_or_default();
    let mut request = Request {
        script: check.script.clone(),
        rules,
        metrics: metric_values,
        resources: resources.into_iter().collect(),
        objects: Vec::new(),
    };
    if kind.is_empty() {
        // A metric-only check: the script runs once, with no object.
        if check.script.is_none() {
            return Err("a check without kind needs a script".into());
        }
        request.rules.clear();
        request.objects.push(None);
        return match t.pool.run(request).await {
            Verdict::Healthy => Ok(()),
            Verdict::Invalid(e) => Err(e),
            Verdict::Object { problem, .. } => Err(match problem {
                Problem::Unhealthy(m) => format!("not healthy: {m}"),
                Problem::NoRuleTrue => "not healthy: no evaluateCEL rule is true".into(),
                Problem::Error(e) => e,
            }),
        };
    }
    let (group, version) = (
        check.group.clone().unwrap_or_default(),
        check.version.clone().unwrap_or_default(),
    );
    let (resource, namespaced) = resolve(t.cluster, &group, &version, &kind).await?;
    // A namespace on a cluster-scoped kind (the Sveltos docs' ClusterIssuer check) is ignored.
    let api: Api<DynamicObject> = match check
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty() && namespaced)
    {
        Some(ns) => Api::namespaced_with(t.cluster.clone(), ns, &resource),
        None => Api::all_with(t.cluster.clone(), &resource),
    };
    let selector = label_selector(check)?;
    let objects = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("listing {kind}: {}", crate::cli_error::line(&e)))?
        .items;
    if objects.is_empty() {
        // A script or rule that does not compile is the better explanation.
        if (request.script.is_some() || !request.rules.is_empty())
            && let Verdict::Invalid(e) = t.pool.run(request).await
        {
            return Err(e);
        }
        return Err(format!(
            "validateHealth: {} did not fetch any resource",
            check.name
        ));
    }
    if request.script.is_none() && request.rules.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = objects
        .iter()
        .map(|obj| {
            format!(
                "{kind} {}/{}",
                obj.metadata.namespace.clone().unwrap_or_default(),
                obj.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    for obj in objects {
        request
            .objects
            .push(Some(serde_json::to_value(&obj).map_err(|e| e.to_string())?));
    }
    // One request, so one interpreter, for all the objects of this check on this cluster.
    match t.pool.run(request).await {
        Verdict::Healthy => Ok(()),
        Verdict::Invalid(e) => Err(e),
        Verdict::Object { index, problem } => {
            let id = ids.get(index).map(String::as_str).unwrap_or("?");
            Err(match problem {
                Problem::Unhealthy(m) => format!("resource {id} is not healthy: {m}"),
                Problem::NoRuleTrue => {
                    format!("resource {id} is not healthy: no evaluateCEL rule is true")
                }
                Problem::Error(e) => format!("resource {id}: {e}"),
            })
        }
    }
}

/// The Job described by `jobRef` must be Complete before its timeout; Failed or late is unhealthy.
async fn job_check(t: &Target<'_>, job_check: &Value) -> Result<(), String> {
    let r = &job_check["jobRef"];
    let (kind, name) = (
        r["kind"].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default(),
    );
    let ns = r["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(t.cluster_namespace);
    let texts: Vec<String> = match kind {
        "ConfigMap" => Api::<ConfigMap>::namespaced(t.mgmt.clone(), ns)
            .get(name)
            .await
            .map_err(|e| {
                format!(
                    "jobRef ConfigMap {ns}/{name}: {}",
                    crate::cli_error::line(&e)
                )
            })?
            .data
            .unwrap_or_default()
            .into_values()
            .collect(),
        "Secret" => Api::<Secret>::namespaced(t.mgmt.clone(), ns)
            .get(name)
            .await
            .map_err(|e| format!("jobRef Secret {ns}/{name}: {}", crate::cli_error::line(&e)))?
            .data
            .unwrap_or_default()
            .into_values()
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .collect(),
        other => {
            return Err(format!(
                "jobRef kind {other:?} is neither ConfigMap nor Secret"
            ));
        }
    };
    let manifest = texts
        .iter()
        .flat_map(|t| serde_saphyr::from_multiple::<Value>(t).unwrap_or_default())
        .find(|d| d["kind"] == "Job")
        .ok_or_else(|| format!("jobRef {kind} {ns}/{name} holds no Job manifest"))?;
    let job_name = manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let job_ns = manifest
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let timeout = job_check["timeout"]
        .as_str()
        .map(|s| {
            crate::api::GoDuration::parse(s)
                .map(|d| d.to_chrono())
                .map_err(|e| format!("jobCheck.timeout: {e}"))
        })
        .transpose()?
        .unwrap_or(DEFAULT_JOB_TIMEOUT);
    let job = Api::<Job>::namespaced(t.cluster.clone(), &job_ns)
        .get_opt(&job_name)
        .await
        .map_err(|e| format!("reading Job {job_ns}/{job_name}: {}", crate::cli_error::line(&e)))?
        .ok_or_else(|| format!("Job {job_ns}/{job_name} does not exist (deploy it, e.g. with preHealthCheckDeployment)"))?;
    let status = job.status.clone().unwrap_or_default();
    let condition = |t: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if condition("Complete") {
        return Ok(());
    }
    if condition("Failed") {
        return Err(format!("Job {job_ns}/{job_name} failed"));
    }
    let started = status
        .start_time
        .or(job.metadata.creation_timestamp)
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.0.as_second(), 0));
    if started.is_some_and(|s| t.now - s > timeout) {
        return Err(format!(
            "Job {job_ns}/{job_name} did not complete within {}s",
            timeout.num_seconds()
        ));
    }
    Err(format!("Job {job_ns}/{job_name} is not Complete yet"))
}
