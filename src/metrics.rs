//! The figures of one pass, for a process that lives a second every minute and so has no
//! `/metrics` to scrape: pushed to a Prometheus Pushgateway (the Prometheus advice for batch jobs),
//! or printed as one CloudWatch Embedded Metric Format line (the Lambda function).
//!
//! Names follow Prometheus conventions (`promoter_` prefix, base units, `_seconds`, no `_total` on
//! gauges that describe one pass). Cardinality is bounded by the number of promotions: labels are
//! promotion, stage and phase names, never cluster names.

use crate::api::ClusterPromotion;
use crate::client::RequestCount;
use crate::pass::{HealthEvaluator, HealthVerdict, PassReport, Phase, World};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Every phase a promotion can be in, in the order the one-hot gauges list them: the names
/// `status` shows (`Pending` never comes from a pass).
pub const PHASES: [Phase; 18] = Phase::ALL;

pub fn phase_name(p: Phase) -> &'static str {
    p.as_str()
}

/// Health-check verdicts of a pass: one per stage whose postDelayHealthChecks were evaluated
/// (against all of its clusters), and how many of those were failing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthCount {
    pub evaluations: u64,
    pub failures: u64,
}

/// Counts the verdicts of the evaluator it wraps.
pub struct CountingEvaluator<'a> {
    inner: &'a dyn HealthEvaluator,
    evaluations: AtomicU64,
    failures: AtomicU64,
}

impl<'a> CountingEvaluator<'a> {
    pub fn new(inner: &'a dyn HealthEvaluator) -> Self {
        CountingEvaluator {
            inner,
            evaluations: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    pub fn count(&self) -> HealthCount {
        HealthCount {
            evaluations: self.evaluations.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }
}

impl HealthEvaluator for CountingEvaluator<'_> {
    fn evaluate<'a>(
        &'a self,
        promotion: &'a ClusterPromotion,
        stage: &'a str,
        world: &'a World,
    ) -> BoxFuture<'a, HealthVerdict> {
        Box::pin(async move {
            let verdict = self.inner.evaluate(promotion, stage, world).await;
            self.evaluations.fetch_add(1, Ordering::Relaxed);
            if matches!(verdict, HealthVerdict::Failing(_)) {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
            verdict
        })
    }

    /// Forwarded as a whole, so that the engine's fair, pass-wide budget still applies.
    fn evaluate_all<'a>(
        &'a self,
        requests: &'a [crate::pass::HealthRequest<'a>],
        world: &'a World,
    ) -> BoxFuture<'a, Vec<HealthVerdict>> {
        Box::pin(async move {
            let verdicts = self.inner.evaluate_all(requests, world).await;
            for v in &verdicts {
                self.evaluations.fetch_add(1, Ordering::Relaxed);
                if matches!(v, HealthVerdict::Failing(_)) {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            verdicts
        })
    }
}

/// What one pass did.
#[derive(Clone, Debug)]
pub struct PassMetrics {
    pub time: DateTime<Utc>,
    /// The pass ran (it may still have promotions in error); false when it could not run at all.
    pub succeeded: bool,
    pub duration: Duration,
    pub requests: RequestCount,
    pub health: HealthCount,
    /// (promotion, phase, stage index, last promotion time, in error)
    pub promotions: Vec<PromotionMetrics>,
    /// Notifications of the pass, over all promotions.
    pub notifications: crate::notify::delivery::Counts,
}

#[derive(Clone, Debug)]
pub struct PromotionMetrics {
    pub name: String,
    pub phase: Phase,
    pub stage_index: Option<usize>,
    pub last_promotion_time: Option<DateTime<Utc>>,
    pub in_error: bool,
    /// Decided but not acted on: the pass deadline came first.
    pub deferred: bool,
    /// Not decided: a read it needs failed after its retries.
    pub undecided: bool,
    /// The stage that holds it because it selects no cluster.
    pub empty_stage: Option<String>,
    /// By stage, its clusters counted against its failure budget in the current run.
    pub budgeted: BTreeMap<String, usize>,
}

impl PassMetrics {
    pub fn new(
        report: Option<&PassReport>,
        time: DateTime<Utc>,
        duration: Duration,
        requests: RequestCount,
        health: HealthCount,
    ) -> Self {
        let promotions = report
            .map(|r| {
                r.promotions
                    .iter()
                    .map(|p| PromotionMetrics {
                        name: p.name.clone(),
                        phase: p.phase,
                        stage_index: p.stage_index,
                        last_promotion_time: p.last_promotion_time,
                        in_error: p.in_error(),
                        deferred: p.deferred.is_some(),
                        undecided: p.undecided.is_some(),
                        empty_stage: p.empty_stage.clone(),
                        budgeted: p.budgeted.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        PassMetrics {
            time,
            succeeded: report.is_some(),
            duration,
            requests,
            health,
            promotions,
            notifications: report.map(PassReport::notifications).unwrap_or_default(),
        }
    }

    fn by_phase(&self) -> BTreeMap<&'static str, usize> {
        let mut out: BTreeMap<&'static str, usize> =
            PHASES.iter().map(|p| (phase_name(*p), 0)).collect();
        for p in &self.promotions {
            *out.entry(phase_name(p.phase)).or_default() += 1;
        }
        out
    }

    fn in_error(&self) -> usize {
        self.promotions.iter().filter(|p| p.in_error).count()
    }

    fn deferred(&self) -> usize {
        self.promotions.iter().filter(|p| p.deferred).count()
    }

    fn undecided(&self) -> usize {
        self.promotions.iter().filter(|p| p.undecided).count()
    }

    fn empty_stage(&self) -> usize {
        self.promotions
            .iter()
            .filter(|p| p.empty_stage.is_some())
            .count()
    }

    /// The Prometheus text exposition format (version 0.0.4), what a Pushgateway accepts.
    ///
    /// `promoter_last_success_timestamp_seconds` is present only when the pass ran: a push
    /// replaces the group, so a failed pass must not carry it (the alert then sees it age).
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let secs = |t: DateTime<Utc>| t.timestamp_millis() as f64 / 1000.0;
        if self.succeeded {
            gauge(
                "promoter_last_success_timestamp_seconds",
                "When the last pass that ran completed (Unix time).",
                &[(String::new(), secs(self.time))],
            );
        }
        gauge(
            "promoter_last_run_timestamp_seconds",
            "When the last pass ended, whether it ran or failed (Unix time).",
            &[(String::new(), secs(self.time))],
        );
        gauge(
            "promoter_pass_succeeded",
            "1 if the last pass ran, 0 if it could not run at all.",
            &[(String::new(), f64::from(u8::from(self.succeeded)))],
        );
        gauge(
            "promoter_pass_duration_seconds",
            "Wall time of the last pass.",
            &[(String::new(), self.duration.as_secs_f64())],
        );
        let phases: Vec<(String, f64)> = self
            .by_phase()
            .into_iter()
            .map(|(phase, n)| (format!("{{phase=\"{phase}\"}}"), n as f64))
            .collect();
        gauge(
            "promoter_promotions",
            "ClusterPromotions by phase after the last pass.",
            &phases,
        );
        gauge(
            "promoter_promotions_in_error",
            "ClusterPromotions in error after the last pass (invalid, failed, or a failed write).",
            &[(String::new(), self.in_error() as f64)],
        );
        gauge(
            "promoter_promotions_deferred",
            "ClusterPromotions the last pass decided but did not act on: its deadline came first (the next pass decides again).",
            &[(String::new(), self.deferred() as f64)],
        );
        gauge(
            "promoter_promotions_undecided",
            "ClusterPromotions the last pass did not decide: a read they need still failed after its retries (also in error).",
            &[(String::new(), self.undecided() as f64)],
        );
        gauge(
            "promoter_promotions_empty_stage",
            "ClusterPromotions held (Blocked) by a stage whose clusterSelector selects no cluster.",
            &[(String::new(), self.empty_stage() as f64)],
        );
        gauge(
            "promoter_pass_writes",
            "Write requests the last pass sent to the API server.",
            &[(String::new(), self.requests.writes as f64)],
        );
        gauge(
            "promoter_pass_requests",
            "Requests the last pass sent to the API server.",
            &[(String::new(), self.requests.requests as f64)],
        );
        gauge(
            "promoter_health_check_evaluations",
            "Stages whose health checks the last pass evaluated (on all their clusters).",
            &[(String::new(), self.health.evaluations as f64)],
        );
        gauge(
            "promoter_health_check_failures",
            "Of those, the stages whose checks were failing.",
            &[(String::new(), self.health.failures as f64)],
        );
        let n = &self.notifications;
        for (name, help, value) in [
            (
                "promoter_notifications_sent",
                "Notifications the last pass delivered (one per transition and receiver).",
                n.sent,
            ),
            (
                "promoter_notifications_failed",
                "Notifications the last pass failed to deliver (retried by the next passes).",
                n.failed,
            ),
            (
                "promoter_notifications_dropped",
                "Notifications the last pass gave up: older than maxAge, beyond the outbox's bound, or for a receiver no longer configured.",
                n.dropped,
            ),
            (
                "promoter_notifications_pending",
                "Transitions recorded and not yet delivered everywhere after the last pass.",
                n.pending,
            ),
        ] {
            gauge(name, help, &[(String::new(), value as f64)]);
        }
        let stage: Vec<(String, f64)> = self
            .promotions
            .iter()
            .filter_map(|p| Some((promotion_label(&p.name, None), p.stage_index? as f64)))
            .collect();
        gauge(
            "promoter_promotion_stage_index",
            "1-based index of each promotion's current stage.",
            &stage,
        );
        let onehot: Vec<(String, f64)> = self
            .promotions
            .iter()
            .flat_map(|p| {
                PHASES.iter().map(move |ph| {
                    (
                        promotion_label(&p.name, Some(phase_name(*ph))),
                        f64::from(u8::from(*ph == p.phase)),
                    )
                })
            })
            .collect();
        gauge(
            "promoter_promotion_phase",
            "1 for the phase each promotion is in, 0 for the others.",
            &onehot,
        );
        let last: Vec<(String, f64)> = self
            .promotions
            .iter()
            .filter_map(|p| Some((promotion_label(&p.name, None), secs(p.last_promotion_time?))))
            .collect();
        gauge(
            "promoter_promotion_last_promotion_timestamp_seconds",
            "When each promotion last started a stage (status.lastPromotionTime, Unix time).",
            &last,
        );
        let empty: Vec<(String, f64)> = self
            .promotions
            .iter()
            .filter_map(|p| {
                Some((
                    format!(
                        "{{promotion=\"{}\",stage=\"{}\"}}",
                        escape(&p.name),
                        escape(p.empty_stage.as_deref()?)
                    ),
                    1.0,
                ))
            })
            .collect();
        gauge(
            "promoter_promotion_empty_stage",
            "1 for each promotion held by a stage whose clusterSelector selects no cluster, labelled with that stage.",
            &empty,
        );
        let budgeted: Vec<(String, f64)> = self
            .promotions
            .iter()
            .flat_map(|p| {
                p.budgeted.iter().map(|(stage, n)| {
                    (
                        format!(
                            "{{promotion=\"{}\",stage=\"{}\"}}",
                            escape(&p.name),
                            escape(stage)
                        ),
                        *n as f64,
                    )
                })
            })
            .collect();
        gauge(
            "promoter_stage_budgeted_clusters",
            "Clusters of each stage counted against its failure budget in the current run (promoter.dev/failure-budget), while any are.",
            &budgeted,
        );
        out
    }

    /// One CloudWatch Embedded Metric Format line: the pass-level figures as metrics of the
    /// namespace `promoter` (no dimension per promotion: CloudWatch bills each one).
    /// Spec: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
    pub fn emf_line(&self, function: &str) -> String {
        let mut root = serde_json::Map::new();
        let mut metrics: Vec<serde_json::Value> = Vec::new();
        let mut put = |name: &str, unit: &str, value: f64| {
            metrics.push(serde_json::json!({"Name": name, "Unit": unit}));
            root.insert(name.to_string(), serde_json::json!(value));
        };
        put(
            "PassSucceeded",
            "Count",
            f64::from(u8::from(self.succeeded)),
        );
        put(
            "PassDuration",
            "Milliseconds",
            self.duration.as_secs_f64() * 1000.0,
        );
        put("Promotions", "Count", self.promotions.len() as f64);
        put("PromotionsInError", "Count", self.in_error() as f64);
        put("PromotionsDeferred", "Count", self.deferred() as f64);
        put("PromotionsUndecided", "Count", self.undecided() as f64);
        put("PromotionsEmptyStage", "Count", self.empty_stage() as f64);
        for (phase, n) in self.by_phase() {
            put(&format!("Promotions{phase}"), "Count", n as f64);
        }
        put("Requests", "Count", self.requests.requests as f64);
        put("Writes", "Count", self.requests.writes as f64);
        put(
            "HealthCheckEvaluations",
            "Count",
            self.health.evaluations as f64,
        );
        put("HealthCheckFailures", "Count", self.health.failures as f64);
        let n = &self.notifications;
        put("NotificationsSent", "Count", n.sent as f64);
        put("NotificationsFailed", "Count", n.failed as f64);
        put("NotificationsDropped", "Count", n.dropped as f64);
        put("NotificationsPending", "Count", n.pending as f64);
        root.insert("Function".into(), serde_json::json!(function));
        root.insert(
            "_aws".into(),
            serde_json::json!({
                "Timestamp": self.time.timestamp_millis(),
                "CloudWatchMetrics": [{
                    "Namespace": "promoter",
                    "Dimensions": [["Function"]],
                    "Metrics": metrics,
                }],
            }),
        );
        serde_json::Value::Object(root).to_string()
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn promotion_label(name: &str, phase: Option<&str>) -> String {
    match phase {
        Some(ph) => format!("{{promotion=\"{}\",phase=\"{ph}\"}}", escape(name)),
        None => format!("{{promotion=\"{}\"}}", escape(name)),
    }
}

/// The Pushgateway URL of a job's group: `<base>/metrics/job/<job>/instance/<instance>`, with
/// values that contain `/` base64url-encoded as the Pushgateway's URL scheme requires.
pub fn group_url(base: &str, job: &str, instance: &str) -> String {
    let part = |label: &str, value: &str| {
        if value.is_empty() || value.contains('/') {
            use base64::Engine;
            let enc = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value);
            // An empty value is encoded as a single `=` (Pushgateway README).
            format!(
                "{label}@base64/{}",
                if enc.is_empty() { "=".into() } else { enc }
            )
        } else {
            format!("{label}/{value}")
        }
    };
    format!(
        "{}/metrics/{}/{}",
        base.trim_end_matches('/'),
        part("job", job),
        part("instance", instance)
    )
}

/// Replaces the group's metrics with these (HTTP PUT). Errors are for a warning, never a failed
/// pass.
pub async fn push(url: &str, body: String) -> Result<(), String> {
    let client = crate::http_client::client()?;
    let request = http::Request::put(url)
        .header("content-type", "text/plain; version=0.0.4")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .map_err(|e| format!("{url}: {e}"))?;
    crate::http_client::send(&client, request, Duration::from_secs(5))
        .await
        .map_err(|e| format!("{url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn sample() -> PassMetrics {
        PassMetrics {
            time: Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap(),
            succeeded: true,
            duration: Duration::from_millis(1500),
            requests: RequestCount {
                requests: 7,
                writes: 2,
            },
            health: HealthCount {
                evaluations: 3,
                failures: 1,
            },
            promotions: vec![
                PromotionMetrics {
                    name: "kyverno".into(),
                    phase: Phase::AwaitingApproval,
                    stage_index: Some(2),
                    last_promotion_time: Some(
                        Utc.with_ymd_and_hms(2026, 11, 23, 11, 0, 0).unwrap(),
                    ),
                    in_error: false,
                    deferred: false,
                    undecided: false,
                    empty_stage: None,
                    budgeted: Default::default(),
                },
                PromotionMetrics {
                    name: "typo".into(),
                    phase: Phase::Blocked,
                    stage_index: Some(2),
                    last_promotion_time: None,
                    in_error: true,
                    deferred: false,
                    undecided: false,
                    empty_stage: Some("staging".into()),
                    budgeted: Default::default(),
                },
            ],
            notifications: crate::notify::delivery::Counts {
                pending: 1,
                sent: 3,
                failed: 1,
                dropped: 0,
            },
        }
    }

    #[test]
    fn exposition_text() {
        let text = sample().prometheus_text();
        for line in [
            "promoter_last_success_timestamp_seconds 1795435200",
            "promoter_pass_duration_seconds 1.5",
            "promoter_promotions{phase=\"AwaitingApproval\"} 1",
            "promoter_promotions{phase=\"Complete\"} 0",
            "promoter_pass_writes 2",
            "promoter_promotion_stage_index{promotion=\"kyverno\"} 2",
            "promoter_promotion_phase{promotion=\"kyverno\",phase=\"AwaitingApproval\"} 1",
            "promoter_promotion_phase{promotion=\"kyverno\",phase=\"Complete\"} 0",
            "promoter_promotion_last_promotion_timestamp_seconds{promotion=\"kyverno\"} 1795431600",
            "promoter_health_check_failures 1",
            "promoter_promotions_deferred 0",
            "promoter_promotions_undecided 0",
            "promoter_promotions_empty_stage 1",
            "promoter_promotion_empty_stage{promotion=\"typo\",stage=\"staging\"} 1",
            "promoter_notifications_sent 3",
            "promoter_notifications_failed 1",
            "promoter_notifications_dropped 0",
            "promoter_notifications_pending 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        let mut failed = sample();
        failed.succeeded = false;
        assert!(
            !failed
                .prometheus_text()
                .contains("promoter_last_success_timestamp_seconds")
        );
    }

    /// Checked against the EMF specification: a root `_aws` with an integer millisecond
    /// `Timestamp` and `CloudWatchMetrics` directives; each directive's `Namespace` (1–255
    /// characters), `Dimensions` (arrays of at most 30 root members, each a string), `Metrics` (at
    /// most 100, each `Name` a root member holding a number, `Unit` one of CloudWatch's units).
    #[test]
    fn emf_line_follows_the_specification() {
        const UNITS: [&str; 4] = ["Count", "Milliseconds", "Seconds", "None"];
        let line = sample().emf_line("promoter-prod");
        assert!(!line.contains('\n'), "one line");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let aws = &v["_aws"];
        assert!(aws["Timestamp"].as_i64().unwrap() > 1_700_000_000_000);
        let directives = aws["CloudWatchMetrics"].as_array().unwrap();
        assert_eq!(directives.len(), 1);
        for d in directives {
            let ns = d["Namespace"].as_str().unwrap();
            assert!((1..=255).contains(&ns.len()));
            for set in d["Dimensions"].as_array().unwrap() {
                let set = set.as_array().unwrap();
                assert!(set.len() <= 30);
                for dim in set {
                    assert!(v[dim.as_str().unwrap()].is_string(), "dimension {dim}");
                }
            }
            let metrics = d["Metrics"].as_array().unwrap();
            assert!(!metrics.is_empty() && metrics.len() <= 100);
            for m in metrics {
                let name = m["Name"].as_str().unwrap();
                assert!((1..=255).contains(&name.len()));
                assert!(v[name].is_number(), "{name} has no numeric root member");
                assert!(UNITS.contains(&m["Unit"].as_str().unwrap()));
            }
        }
        assert_eq!(v["PromotionsAwaitingApproval"], 1.0);
        assert_eq!(v["PromotionsEmptyStage"], 1.0);
        assert_eq!(v["Writes"], 2.0);
        assert_eq!(
            (&v["NotificationsSent"], &v["NotificationsPending"]),
            (&serde_json::json!(3.0), &serde_json::json!(1.0))
        );
        assert_eq!(v["Function"], "promoter-prod");
    }

    #[test]
    fn group_urls() {
        assert_eq!(
            group_url("http://gw:9091/", "promoter", "prod"),
            "http://gw:9091/metrics/job/promoter/instance/prod"
        );
        assert_eq!(
            group_url("http://gw:9091", "promoter", "a/b"),
            "http://gw:9091/metrics/job/promoter/instance@base64/YS9i"
        );
    }
}
