//! postDelayHealthChecks, evaluated by promoter itself against every cluster of a stage, in a
//! sandbox, changing nothing on the clusters (upstream appends them to the ClusterProfile, which
//! redeploys the stage).

pub mod access;
pub mod cel;
pub mod check;
pub mod limits;
pub mod lua;
pub mod metrics;
pub mod pool;
pub mod worker;

use crate::api::{ClusterPromotion, ValidateHealth};
use crate::client::retry;
use crate::pass::deployment::matching_clusters;
use crate::pass::{HealthEvaluator, HealthRequest, HealthVerdict, InventoryCluster, World};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Clusters checked at once, over the whole pass (shared fairly by the stages being checked). A
/// cluster check is a few round trips; at 200 ms each, 128 at once check 1,000 clusters in seconds.
pub const CONCURRENCY: usize = 128;
/// All checks of one cluster: an unreachable or black-holed cluster costs at most this.
pub const PER_CLUSTER: Duration = Duration::from_secs(15);
/// All health checks of a pass, all promotions together. The CronJob and the Lambda end a pass at
/// 50 s; observing and writing need the rest.
pub const BUDGET: Duration = Duration::from_secs(25);

pub struct HealthEngine {
    mgmt: kube::Client,
    now: DateTime<Utc>,
    pub concurrency: usize,
    pub per_cluster: Duration,
    /// The pass-wide health-check budget.
    pub budget: Duration,
    pool: Arc<pool::Pool>,
}

/// What a cluster check needs, owned, so that each check runs as a task of its own (a check that
/// does CPU work between its awaits cannot hold up the pass's deadline).
#[derive(Clone)]
struct Checker {
    mgmt: kube::Client,
    now: DateTime<Utc>,
    pool: Arc<pool::Pool>,
    per_cluster: Duration,
}

impl Checker {
    async fn check_cluster(
        &self,
        c: &InventoryCluster,
        checks: &[ValidateHealth],
    ) -> Result<(), String> {
        let t0 = std::time::Instant::now();
        let client = access::client_for(&self.mgmt, c)
            .await
            .map_err(|e| format!("cannot be checked: {e}"))?;
        tracing::debug!(cluster = %c, elapsed = ?t0.elapsed(), "client ready");
        let target = check::Target {
            mgmt: &self.mgmt,
            cluster: &client,
            cluster_namespace: &c.namespace,
            now: self.now,
            pool: &self.pool,
        };
        for hc in checks {
            check::run(&target, hc)
                .await
                .map_err(|e| format!("check {}: {e}", hc.name))?;
            tracing::debug!(cluster = %c, check = %hc.name, elapsed = ?t0.elapsed(), "check done");
        }
        Ok(())
    }

    /// One cluster's checks, bounded by `per_cluster`; `None` when the pass deadline may have cut
    /// its reads' retries short (a failure then is not a verdict: the next pass checks again).
    async fn run(
        self,
        c: InventoryCluster,
        checks: Arc<Vec<ValidateHealth>>,
    ) -> Option<Result<(), String>> {
        let r = match tokio::time::timeout(self.per_cluster, self.check_cluster(&c, &checks)).await
        {
            Ok(r) => r,
            Err(_) => Err(format!(
                "did not answer within {} s",
                self.per_cluster.as_secs()
            )),
        };
        if let Err(e) = &r
            && near_pass_deadline()
        {
            tracing::debug!(cluster = %c, error = %e, "check failed as the pass deadline came; not a verdict");
            return None;
        }
        Some(r)
    }
}

/// Whether the retry layer may have stopped retrying a read because of the pass deadline: it does
/// not start a backoff that would end past it, and a backoff is at most `MAX_BACKOFF`.
fn near_pass_deadline() -> bool {
    retry::deadline().is_some_and(|d| Instant::now() + retry::MAX_BACKOFF >= d)
}

/// The first promotion served in a pass: it moves by one every minute, so that over successive
/// passes every promotion is first in turn (the pass is stateless; its time is the rotation).
pub fn rotation(now: DateTime<Utc>, promotions: usize) -> usize {
    if promotions == 0 {
        return 0;
    }
    (now.timestamp().div_euclid(60) as u64 % promotions as u64) as usize
}

/// A stage to check: its checks and its clusters, sorted by name.
struct Job<'a> {
    checks: Arc<Vec<ValidateHealth>>,
    clusters: Vec<&'a InventoryCluster>,
}

impl HealthEngine {
    pub fn new(mgmt: kube::Client, now: DateTime<Utc>) -> Self {
        HealthEngine {
            mgmt,
            now,
            concurrency: CONCURRENCY,
            per_cluster: PER_CLUSTER,
            budget: BUDGET,
            pool: Arc::new(pool::Pool::new(None, pool::default_workers())),
        }
    }

    /// Evaluations run in workers started from `program` (a promoter binary) instead of this
    /// program (tests run from a test harness).
    pub fn worker_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.pool = Arc::new(pool::Pool::new(
            Some(program.into()),
            pool::default_workers(),
        ));
        self
    }

    /// Whether evaluations run in worker processes, with hard limits.
    pub async fn isolated(&self) -> bool {
        self.pool.isolated().await
    }

    /// The checks of `stage` and the clusters they run on: the stage's active clusters, those
    /// counted against its failure budget excepted (`pass::budget`).
    fn job<'a>(
        p: &ClusterPromotion,
        stage: &str,
        world: &'a World,
        now: DateTime<Utc>,
    ) -> Result<Job<'a>, HealthVerdict> {
        let Some(stage) = p.spec.stages.iter().find(|s| s.name == stage) else {
            return Err(HealthVerdict::NotEvaluated(format!(
                "stage {stage} not found"
            )));
        };
        let checks = stage
            .trigger
            .as_ref()
            .and_then(|t| t.gates())
            .map(|g| g.post_delay_health_checks.to_vec())
            .unwrap_or_default();
        let selector = stage.cluster_selector.clone().unwrap_or_default();
        let budgeted = crate::pass::budget::skipped_by_checks(p, stage, world, now);
        let mut clusters: Vec<&InventoryCluster> = matching_clusters(&selector, world)
            .into_iter()
            .filter(|c| !c.paused && !budgeted.contains(&c.to_string()))
            .collect();
        clusters.sort_by_key(|c| c.to_string());
        Ok(Job {
            checks: Arc::new(checks),
            clusters,
        })
    }

    /// Every requested stage's checks, sharing [`BUDGET`] and [`CONCURRENCY`]: a free slot goes to
    /// the stage with the fewest clusters in progress (ties: the rotation order), so a stage whose
    /// clusters hang holds at most its share of the slots, and a stage not finished when the budget
    /// is spent is "not evaluated (budget)", never failing.
    async fn evaluate_fairly(
        &self,
        requests: &[HealthRequest<'_>],
        world: &World,
    ) -> Vec<HealthVerdict> {
        // Under a pass deadline, the checks end by it too, and each check task carries it: a
        // spawned task does not inherit the task-local the retry layer reads, and its reads would
        // be retried past the deadline.
        let pass_deadline = retry::deadline();
        let budget_end = Instant::now() + self.budget;
        let deadline = pass_deadline.map_or(budget_end, |d| d.min(budget_end));
        let jobs: Vec<Result<Job<'_>, HealthVerdict>> = requests
            .iter()
            .map(|r| Self::job(r.promotion, &r.stage, world, self.now))
            .collect();
        let n = jobs.len();
        let first = rotation(self.now, n);
        let order: Vec<usize> = (0..n).map(|k| (first + k) % n).collect();
        let mut results: Vec<Vec<Option<Result<(), String>>>> = jobs
            .iter()
            .map(|j| vec![None; j.as_ref().map(|j| j.clusters.len()).unwrap_or(0)])
            .collect();
        let mut next = vec![0usize; n];
        let mut in_flight = vec![0usize; n];
        let checker = Checker {
            mgmt: self.mgmt.clone(),
            now: self.now,
            pool: self.pool.clone(),
            per_cluster: self.per_cluster,
        };
        let mut running = JoinSet::new();
        let mut tasks: HashMap<tokio::task::Id, (usize, usize)> = HashMap::new();
        // `timeout_at` polls its future first: without this check, a steady stream of results would
        // carry the loop past the deadline.
        while Instant::now() < deadline {
            while running.len() < self.concurrency.max(1) {
                let pick = order
                    .iter()
                    .copied()
                    .filter(|&i| next[i] < results[i].len())
                    .min_by_key(|&i| in_flight[i]);
                let Some(i) = pick else { break };
                let Ok(job) = &jobs[i] else { break };
                let k = next[i];
                next[i] += 1;
                in_flight[i] += 1;
                let task = checker
                    .clone()
                    .run(job.clusters[k].clone(), job.checks.clone());
                let handle = match pass_deadline {
                    Some(d) => running.spawn(retry::within_deadline(d, task)),
                    None => running.spawn(task),
                };
                tasks.insert(handle.id(), (i, k));
            }
            if running.is_empty() {
                break;
            }
            match tokio::time::timeout_at(deadline, running.join_next_with_id()).await {
                Ok(Some(done)) => {
                    let (id, r) = match done {
                        Ok((id, r)) => (id, r),
                        Err(e) => (e.id(), Some(Err(format!("the check failed: {e}")))),
                    };
                    if let Some((i, k)) = tasks.remove(&id) {
                        results[i][k] = r;
                        in_flight[i] -= 1;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        // The budget is spent: what is still running is not evaluated.
        running.abort_all();
        jobs.into_iter()
            .zip(results)
            .map(|(job, results)| match job {
                Err(v) => v,
                Ok(job) => self.verdict(&job, results),
            })
            .collect()
    }

    fn verdict(&self, job: &Job<'_>, results: Vec<Option<Result<(), String>>>) -> HealthVerdict {
        let mut failing = Vec::new();
        let mut not_reached = Vec::new();
        for (c, r) in job.clusters.iter().zip(results) {
            match r {
                Some(Ok(())) => {}
                Some(Err(e)) => failing.push(format!("cluster {c}: {e}")),
                None => not_reached.push(c.to_string()),
            }
        }
        let names = |v: &[String]| {
            let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 5 {
                s.push_str(", …");
            }
            s
        };
        if let Some(first) = failing.first() {
            let mut m = limits::truncate(first, limits::VERDICT_LIMIT);
            if failing.len() > 1 {
                m.push_str(&format!(
                    " (and {} more clusters failing)",
                    failing.len() - 1
                ));
            }
            return HealthVerdict::Failing(m);
        }
        if !not_reached.is_empty() && near_pass_deadline() {
            return HealthVerdict::NotEvaluated(format!(
                "pass deadline: {} of {} clusters not checked before the pass deadline ({}); the next pass checks them again",
                not_reached.len(),
                job.clusters.len(),
                names(&not_reached)
            ));
        }
        if !not_reached.is_empty() {
            return HealthVerdict::NotEvaluated(format!(
                "budget: {} of {} clusters not checked within the pass's health-check budget of {} s, shared by all promotions ({}); the next pass checks them again",
                not_reached.len(),
                job.clusters.len(),
                self.budget.as_secs(),
                names(&not_reached)
            ));
        }
        HealthVerdict::Passed
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
            let request = [HealthRequest {
                promotion: p,
                stage: stage.to_string(),
            }];
            self.evaluate_fairly(&request, world)
                .await
                .pop()
                .unwrap_or_else(|| HealthVerdict::NotEvaluated("no verdict".into()))
        })
    }

    fn evaluate_all<'a>(
        &'a self,
        requests: &'a [HealthRequest<'a>],
        world: &'a World,
    ) -> BoxFuture<'a, Vec<HealthVerdict>> {
        Box::pin(self.evaluate_fairly(requests, world))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_first_promotion_served_moves_every_minute() {
        let t = |h, m, s| Utc.with_ymd_and_hms(2026, 3, 1, h, m, s).unwrap();
        let firsts: Vec<usize> = (0..6).map(|m| rotation(t(10, m, 30), 3)).collect();
        // Every promotion is first in turn, one per minute; seconds do not matter.
        assert_eq!(
            firsts[0..3]
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        assert_eq!(firsts[0..3], firsts[3..6]);
        assert_eq!(rotation(t(10, 0, 0), 3), rotation(t(10, 0, 59), 3));
        assert_eq!(rotation(t(10, 0, 0), 0), 0);
        assert_eq!(rotation(t(10, 0, 0), 1), 0);
    }
}
