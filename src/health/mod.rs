//! postDelayHealthChecks, evaluated by promoter itself against every cluster of a stage, in a
//! sandbox, changing nothing on the clusters (upstream appends them to the ClusterProfile, which
//! redeploys the stage).

pub mod access;
pub mod cel;
pub mod check;
pub mod lua;
pub mod metrics;

use crate::api::ClusterPromotion;
use crate::pass::deployment::matching_clusters;
use crate::pass::{HealthEvaluator, HealthVerdict, InventoryCluster, World};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::{StreamExt, stream};
use std::time::Duration;

/// Clusters checked at once.
pub const CONCURRENCY: usize = 8;
/// All checks of one cluster.
pub const PER_CLUSTER: Duration = Duration::from_secs(20);
/// All checks of a stage, in one pass.
pub const PER_PASS: Duration = Duration::from_secs(40);

pub struct HealthEngine {
    mgmt: kube::Client,
    now: DateTime<Utc>,
    pub concurrency: usize,
    pub per_cluster: Duration,
    pub per_pass: Duration,
}

impl HealthEngine {
    pub fn new(mgmt: kube::Client, now: DateTime<Utc>) -> Self {
        HealthEngine {
            mgmt,
            now,
            concurrency: CONCURRENCY,
            per_cluster: PER_CLUSTER,
            per_pass: PER_PASS,
        }
    }

    async fn check_cluster(
        &self,
        c: &InventoryCluster,
        checks: &[crate::api::ValidateHealth],
    ) -> Result<(), String> {
        let client = access::client_for(&self.mgmt, c)
            .await
            .map_err(|e| format!("cannot be checked: {e}"))?;
        let target = check::Target {
            mgmt: &self.mgmt,
            cluster: &client,
            cluster_namespace: &c.namespace,
            now: self.now,
        };
        for hc in checks {
            check::run(&target, hc)
                .await
                .map_err(|e| format!("check {}: {e}", hc.name))?;
        }
        Ok(())
    }
}

impl HealthEvaluator for HealthEngine {
    fn evaluate<'a>(
        &'a self,
        p: &'a ClusterPromotion,
        stage: &'a str,
        world: &'a World,
    ) -> BoxFuture<'a, HealthVerdict> {
        Box::pin(async move {
            let Some(stage) = p.spec.stages.iter().find(|s| s.name == stage) else {
                return HealthVerdict::NotEvaluated(format!("stage {stage} not found"));
            };
            let checks = stage
                .trigger
                .as_ref()
                .and_then(|t| t.gates())
                .map(|g| g.post_delay_health_checks.to_vec())
                .unwrap_or_default();
            let selector = stage.cluster_selector.clone().unwrap_or_default();
            let clusters: Vec<&InventoryCluster> = matching_clusters(&selector, world)
                .into_iter()
                .filter(|c| !c.paused)
                .collect();
            let mut runs: Vec<BoxFuture<'_, (String, Result<(), String>)>> = Vec::new();
            for c in &clusters {
                let (c, checks) = (*c, &checks);
                runs.push(Box::pin(async move {
                    let result =
                        match tokio::time::timeout(self.per_cluster, self.check_cluster(c, checks))
                            .await
                        {
                            Ok(r) => r,
                            Err(_) => Err(format!("did not answer within {:?}", self.per_cluster)),
                        };
                    (c.to_string(), result)
                }));
            }
            let all = stream::iter(runs)
                .buffer_unordered(self.concurrency)
                .collect::<Vec<_>>();
            let Ok(mut results) = tokio::time::timeout(self.per_pass, all).await else {
                return HealthVerdict::Failing(format!(
                    "the health checks did not finish within {:?}",
                    self.per_pass
                ));
            };
            results.sort_by(|a, b| a.0.cmp(&b.0));
            match results
                .into_iter()
                .find_map(|(c, r)| r.err().map(|e| format!("cluster {c}: {e}")))
            {
                Some(message) => HealthVerdict::Failing(message),
                None => HealthVerdict::Passed,
            }
        })
    }
}
