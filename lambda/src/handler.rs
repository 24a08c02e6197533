//! One invocation = one reconciliation pass, as `promoter step` does it.
//!
//! An EventBridge (or EventBridge Scheduler) event runs a normal pass. A direct invocation may send
//! `{"dryRun": true, "selector": "team=payments", "timezone": "Europe/Berlin"}`; every field is
//! optional and an unknown one is an error rather than silently ignored. The pass summary is the
//! response; a pass that could not run, or a write that failed, goes through the runtime's error
//! path, so that the function's Errors metric and alarms see it.

use crate::cluster::{self, Env};
use chrono::Utc;
use chrono_tz::Tz;
use lambda_runtime::Diagnostic;
use promoter::pass::{PassLimits, PassOptions, PassReport, run_pass_with};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime};

/// Time kept back before the invocation's deadline to report a pass that overran, instead of
/// being killed without a word.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    #[serde(default)]
    pub dry_run: bool,
    pub selector: Option<String>,
    pub timezone: Option<String>,
}

/// What an invocation asks for.
pub fn parse_event(event: &Value) -> Result<Request, String> {
    match event {
        Value::Null => Ok(Request::default()),
        // EventBridge rules send their event envelope; it carries nothing for promoter.
        Value::Object(map) if map.contains_key("detail-type") => Ok(Request::default()),
        Value::Object(_) => Request::deserialize(event).map_err(|e| {
            format!("invalid invocation payload: {e} (expected an EventBridge event, or an object with dryRun, selector, timezone)")
        }),
        other => Err(format!(
            "invalid invocation payload: expected a JSON object, got {other}"
        )),
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub promotions: usize,
    /// Promotions for which something was written (or, in a dry run, would be).
    pub changed: usize,
    /// Promotions in error: invalid, failing deployment, or a failed write.
    pub in_error: usize,
    /// Promotions decided but not acted on: the pass deadline came first.
    pub deferred: usize,
    /// Promotions not decided: a read they need failed after its retries (also in error).
    pub undecided: usize,
    pub duration_ms: u128,
}

#[derive(Debug, Serialize)]
pub struct Response {
    pub summary: Summary,
    pub pass: PassReport,
}

fn diagnostic(error_type: &str, message: impl std::fmt::Display) -> Diagnostic {
    Diagnostic {
        error_type: error_type.to_string(),
        error_message: message.to_string(),
    }
}

/// Runs one pass for `event`; `deadline` is the invocation's.
pub async fn handle(
    event: Value,
    deadline: Option<SystemTime>,
    env: Env<'_>,
) -> Result<Response, Diagnostic> {
    let started = Instant::now();
    let request = parse_event(&event).map_err(|e| diagnostic("InvalidEvent", e))?;
    let tz_name = request
        .timezone
        .clone()
        .or_else(|| env("PROMOTER_TIMEZONE").filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "UTC".into());
    let default_tz: Tz = tz_name
        .parse()
        .map_err(|_| diagnostic("InvalidEvent", format!("unknown time zone {tz_name:?}")))?;
    if let Some(s) = &request.selector {
        promoter::labels::parse_selector(s)
            .map_err(|e| diagnostic("InvalidEvent", format!("selector {s:?}: {e}")))?;
    }
    let client = cluster::client(env, SystemTime::now())
        .await
        .map_err(|e| diagnostic("ClusterConfigError", format!("{e:#}")))?;
    let notifications = match env("PROMOTER_NOTIFICATIONS").filter(|v| !v.is_empty()) {
        Some(v) => promoter::notify::Location::parse(&v).map_err(|e| {
            diagnostic(
                "InvalidConfiguration",
                format!("PROMOTER_NOTIFICATIONS: {e}"),
            )
        })?,
        None => Some(promoter::notify::Location::default_location()),
    };
    let opts = PassOptions {
        dry_run: request.dry_run,
        selector: request.selector,
        default_tz,
        now: Utc::now(),
        notifications,
    };
    let engine = promoter::health::HealthEngine::new(client.clone(), opts.now);
    let health = promoter::metrics::CountingEvaluator::new(&engine);
    let requests_before = promoter::client::RequestCount::now();
    let budget = deadline
        .and_then(|d| d.duration_since(SystemTime::now()).ok())
        .map(|left| left.saturating_sub(DEADLINE_MARGIN));
    // The pass itself stops between promotions at PROMOTER_DEADLINE (default 40 s), or earlier if
    // the invocation ends earlier; the timeout below is only the backstop.
    let own = match env("PROMOTER_DEADLINE").filter(|v| !v.is_empty()) {
        Some(v) => promoter::pass::parse_deadline(&v)
            .map_err(|e| diagnostic("InvalidConfiguration", format!("PROMOTER_DEADLINE: {e}")))?,
        None => promoter::pass::DEFAULT_DEADLINE,
    };
    let shard = env("PROMOTER_SHARD")
        .filter(|v| !v.is_empty())
        .map(|v| v.parse::<promoter::pass::shard::Shard>())
        .transpose()
        .map_err(|e| diagnostic("InvalidConfiguration", format!("PROMOTER_SHARD: {e}")))?;
    let pass_deadline = tokio::time::Instant::now()
        + budget.map_or(own, |b| own.min(b.saturating_sub(DEADLINE_MARGIN)));
    let limits = PassLimits {
        deadline: Some(pass_deadline),
        shard,
    };
    let pass = run_pass_with(&client, &health, &opts, &limits);
    let timed_out = |left: Duration, why: String| {
        diagnostic(
            "Timeout",
            format!(
                "the pass did not finish within the invocation's time ({} s left){why}; writes made so far are kept and the next pass continues",
                left.as_secs()
            ),
        )
    };
    let report = match budget {
        Some(budget) => tokio::time::timeout(budget, pass)
            .await
            .map_err(|_| timed_out(budget, String::new())),
        None => Ok(pass.await),
    }
    .and_then(|r| {
        r.map_err(|e| {
            // It could not even list its promotions before its deadline.
            if tokio::time::Instant::now() >= pass_deadline {
                timed_out(budget.unwrap_or(own), format!(": {e:#}"))
            } else {
                diagnostic("PassFailed", format!("{e:#}"))
            }
        })
    });
    // One CloudWatch Embedded Metric Format line per invocation, whatever its outcome: Lambda
    // ships stdout to CloudWatch Logs, which turns it into metrics without an agent.
    let metrics = promoter::metrics::PassMetrics::new(
        report.as_ref().ok(),
        Utc::now(),
        started.elapsed(),
        promoter::client::RequestCount::now().since(requests_before),
        health.count(),
    );
    println!(
        "{}",
        metrics.emf_line(&env("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|| "promoter".into()))
    );
    let report = report?;

    let summary = Summary {
        promotions: report.promotions.len(),
        changed: report
            .promotions
            .iter()
            .filter(|p| !p.actions.is_empty())
            .count(),
        in_error: report.errors(),
        deferred: report.deferred(),
        undecided: report.undecided(),
        duration_ms: started.elapsed().as_millis(),
    };
    // A read the deadline cut short is the invocation running out of time, not the API server
    // failing: alarms on `Timeout` must see it (the message still names each promotion).
    let out_of_time = tokio::time::Instant::now() >= pass_deadline;
    if let Some((kind, message)) = failure(&report, out_of_time) {
        // The summary would be lost with the error: log it.
        tracing::error!(summary = ?summary, "pass finished with promotions in error");
        return Err(diagnostic(kind, message));
    }
    tracing::info!(
        promotions = summary.promotions,
        changed = summary.changed,
        in_error = summary.in_error,
        deferred = summary.deferred,
        undecided = summary.undecided,
        duration_ms = summary.duration_ms as u64,
        dry_run = report.dry_run,
        "pass finished"
    );
    Ok(Response {
        summary,
        pass: report,
    })
}

/// Why an invocation that ran its pass still fails, if it does: a write that failed
/// (`WriteFailed`) or, with no write failed, a read a promotion needed (`ReadFailed`: it was not
/// decided; the next scheduled pass reads again), or `Timeout` when the pass deadline had passed
/// (`out_of_time`: the deadline is what stopped the read). Each names every promotion.
fn failure(
    report: &promoter::pass::PassReport,
    out_of_time: bool,
) -> Option<(&'static str, String)> {
    let named = |undecided: bool| -> Vec<String> {
        report
            .promotions
            .iter()
            .filter(|p| p.undecided.is_some() == undecided)
            .filter_map(|p| p.error.as_ref().map(|e| format!("{}: {e}", p.name)))
            .collect()
    };
    let (writes, reads) = (named(false), named(true));
    let total = report.promotions.len();
    let not_decided = |reads: &[String]| {
        format!(
            "{} of {total} ClusterPromotions were not decided (a read failed after its retries): {}",
            reads.len(),
            reads.join("; ")
        )
    };
    match (writes.is_empty(), reads.is_empty()) {
        (true, true) => None,
        (true, false) if out_of_time => Some((
            "Timeout",
            format!(
                "the pass deadline passed while reading; {}",
                not_decided(&reads)
            ),
        )),
        (true, false) => Some(("ReadFailed", not_decided(&reads))),
        (false, reads_ok) => {
            let mut message = format!(
                "{} of {total} ClusterPromotions could not be updated: {}",
                writes.len(),
                writes.join("; ")
            );
            if !reads_ok {
                message = format!("{message}; {}", not_decided(&reads));
            }
            Some(("WriteFailed", message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn promotion(
        name: &str,
        error: Option<&str>,
        undecided: bool,
    ) -> promoter::pass::PromotionReport {
        promoter::pass::PromotionReport {
            error: error.map(String::from),
            undecided: undecided.then(|| "listing ClusterSummaries failed".to_string()),
            ..promoter::pass::PromotionReport::new(name, promoter::pass::Phase::Progressing)
        }
    }

    #[test]
    fn a_failed_read_is_not_called_a_failed_write() {
        let report = |promotions| PassReport {
            time: Utc::now(),
            dry_run: false,
            promotions,
            invalid_freezes: Vec::new(),
        };
        let fine = promotion("fine", None, false);
        let unread = promotion("unread", Some("not decided in this pass: 503"), true);
        let refused = promotion("refused", Some("patching status: 422"), false);
        assert_eq!(failure(&report(vec![fine.clone()]), false), None);
        assert_eq!(failure(&report(vec![fine.clone()]), true), None);
        let (kind, text) = failure(&report(vec![fine.clone(), unread.clone()]), false).unwrap();
        assert_eq!(kind, "ReadFailed");
        assert!(
            text.starts_with("1 of 2 ClusterPromotions were not decided"),
            "{text}"
        );
        assert!(
            text.contains("unread: not decided in this pass: 503"),
            "{text}"
        );
        // The deadline stopped the read: the invocation ran out of time.
        let (kind, late) = failure(&report(vec![fine.clone(), unread.clone()]), true).unwrap();
        assert_eq!(kind, "Timeout");
        assert_eq!(
            late,
            format!("the pass deadline passed while reading; {text}")
        );
        // A failed write is said first, whatever the clock.
        for out_of_time in [false, true] {
            let (kind, text) = failure(
                &report(vec![fine.clone(), unread.clone(), refused.clone()]),
                out_of_time,
            )
            .unwrap();
            assert_eq!(kind, "WriteFailed");
            assert!(text.starts_with("1 of 3 ClusterPromotions could not be updated: refused: patching status: 422; 1 of 3 ClusterPromotions were not decided"), "{text}");
        }
    }

    #[test]
    fn scheduled_events_run_a_normal_pass() {
        let event = json!({
            "version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
            "detail-type": "Scheduled Event", "source": "aws.events",
            "account": "123456789012", "time": "2026-11-22T06:00:00Z", "region": "eu-west-1",
            "resources": ["arn:aws:events:eu-west-1:123456789012:rule/promoter-every-minute"],
            "detail": {}
        });
        assert_eq!(parse_event(&event), Ok(Request::default()));
        assert_eq!(parse_event(&Value::Null), Ok(Request::default()));
        assert_eq!(parse_event(&json!({})), Ok(Request::default()));
    }

    #[test]
    fn direct_invocations_may_ask_for_a_dry_run_and_a_selector() {
        let r = parse_event(&json!({"dryRun": true, "selector": "team=payments"})).unwrap();
        assert!(r.dry_run);
        assert_eq!(r.selector.as_deref(), Some("team=payments"));
    }

    #[test]
    fn unknown_payloads_are_refused_by_name() {
        let err = parse_event(&json!({"dry_run": true})).unwrap_err();
        assert!(err.contains("dry_run"), "{err}");
        let err = parse_event(&json!("go")).unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
    }

    #[tokio::test]
    async fn bad_requests_fail_before_touching_the_cluster() {
        let env = |_: &str| None;
        let err = handle(json!({"timezone": "Mars/Olympus"}), None, &env)
            .await
            .unwrap_err();
        assert_eq!(err.error_type, "InvalidEvent");
        let err = handle(json!({"selector": "a in ("}), None, &env)
            .await
            .unwrap_err();
        assert_eq!(err.error_type, "InvalidEvent");
        let err = handle(json!({}), None, &env).await.unwrap_err();
        assert_eq!(err.error_type, "ClusterConfigError");
        assert!(err.error_message.contains("PROMOTER_KUBECONFIG"), "{err:?}");
    }
}
