//! `promoter step`: one reconciliation pass.

use super::output::{Format, Human, Printer, Render, formats};
use super::{check_selector, not_found, promotion_names, timezone};
use chrono::Utc;
use promoter::client::ClientArgs;
use promoter::logging::LogFormat;
use promoter::pass::shard::Shard;
use promoter::pass::{PassLimits, PassOptions, PassReport, run_pass_for};
use serde_json::{Map, Value, json};
use std::process::ExitCode;

/// Perform exactly one reconciliation pass over all ClusterPromotions, print what it did, and exit.
///
/// Reads the kubeconfig as kubectl does. Exit codes: 0 the pass did its work (promotions that
/// fail, are blocked or rolled back are reported, and wait for a person, not for the stepper);
/// 1 the pass could not run (API unreachable, unauthorized, bad flags); 2 the pass ran but could
/// not do its work for some promotion (a read or write that failed after its retries), or, with
/// `--fail-on promotions`, some promotion is in error (failing, failed, blocked, rolling back or
/// rolled back).
///
/// Examples:
///   promoter step
///   promoter step kyverno-rollout-auto --dry-run
///   promoter step --dry-run --selector team=payments
///   promoter step --timezone Europe/Berlin -o json
///   promoter step --fail-on promotions        # a CI gate: exit 2 while a promotion is in error
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct StepArgs {
    /// Only this ClusterPromotion (default: all).
    name: Option<String>,
    /// Decide and print the actions, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only ClusterPromotions whose labels match this selector (e.g. `team=payments,tier!=canary`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// Time zone of promotion windows without a `CRON_TZ=` prefix (IANA name). Default: the
    /// process's `TZ` (as the CronJob sets it; `:UTC` and zoneinfo paths accepted), else UTC.
    #[arg(long, env = "PROMOTER_TIMEZONE")]
    timezone: Option<String>,
    /// Output format of the summary.
    #[arg(long, short = 'o', default_value = "text", value_parser = formats(&["text", "json", "yaml", "jsonpath"]))]
    output: Format,
    /// End the pass cleanly after this long (`40s`, `1m`, or seconds): reads are not retried past
    /// it, and no promotion's writes start after it; promotions not reached are reported as
    /// deferred. Keep it below the CronJob's activeDeadlineSeconds.
    #[arg(long, env = "PROMOTER_DEADLINE", default_value = "40s", value_name = "DURATION",
          value_parser = promoter::pass::parse_deadline)]
    deadline: std::time::Duration,
    /// Only the promotions of this shard, `INDEX/COUNT` (0-based, e.g. `1/3`): several steppers
    /// split the promotions by a stable hash of their names (64-bit FNV-1a), without overlap.
    #[arg(long, env = "PROMOTER_SHARD", value_name = "INDEX/COUNT")]
    shard: Option<Shard>,
    /// Where the notification settings are: the ConfigMap (rules, key `config.yaml`) and the
    /// Secret (URLs and tokens) of this name in this namespace, or `none`. Without that
    /// ConfigMap, nothing is notified.
    #[arg(long, env = "PROMOTER_NOTIFICATIONS", value_name = "NAMESPACE/NAME|none",
          default_value = promoter::notify::config::DEFAULT_LOCATION,
          value_parser = notifications_at)]
    notifications: NotificationsAt,
    /// What exit code 2 stands for: `pass` (default; what the CronJob runs), a read or write of
    /// the pass failed, so the stepper needs attention; `promotions`, that too or any promotion
    /// is in error (failing, failed, blocked, rolling back, rolled back), for a CI job that gates on
    /// the rollouts.
    #[arg(long, env = "PROMOTER_FAIL_ON", value_enum, default_value_t = FailOn::Pass)]
    fail_on: FailOn,
    #[command(flatten)]
    push: PushArgs,
}

/// `--fail-on`: what makes `promoter step` exit 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// The pass could not do its work for some promotion.
    Pass,
    /// That, or some promotion is in error.
    Promotions,
}

/// The exit code of a pass that ran: a promotion held for a person is the rollout's state, not
/// the stepper's failure (under a CronJob with `backoffLimit: 0`, it would fail every Job while a
/// rollout waits, and every "stepper not succeeding" signal would fire).
pub fn exit_code(report: &PassReport, fail_on: FailOn) -> u8 {
    let failed = match fail_on {
        FailOn::Pass => report.promotions.iter().any(|p| p.error.is_some()),
        FailOn::Promotions => report.errors() > 0,
    };
    use promoter::exit_codes::{ATTENTION, SUCCESS};
    if failed { ATTENTION } else { SUCCESS }
}

/// Where the pass's metrics go (a CronJob pod lives a second: nothing could scrape it).
#[derive(Clone, Debug, clap::Args)]
struct PushArgs {
    /// Push the pass's metrics to this Prometheus Pushgateway (`http://pushgateway:9091`),
    /// replacing the previous push of the same group. A failed push is a warning, never a failed pass.
    #[arg(long, env = "PROMOTER_PUSHGATEWAY_URL", value_name = "URL")]
    pushgateway_url: Option<String>,
    /// The `instance` of the pushed group (job `promoter`): one per deployment, stable across runs.
    #[arg(
        long,
        env = "PROMOTER_PUSHGATEWAY_INSTANCE",
        default_value = "promoter",
        value_name = "NAME"
    )]
    pushgateway_instance: String,
}

/// `--notifications`: where the settings are, or none.
#[derive(Clone, Debug)]
pub(super) struct NotificationsAt(pub(super) Option<promoter::notify::Location>);

pub(super) fn notifications_at(text: &str) -> Result<NotificationsAt, String> {
    promoter::notify::Location::parse(text).map(NotificationsAt)
}

pub async fn run(
    args: StepArgs,
    client: &ClientArgs,
    log_format: LogFormat,
) -> anyhow::Result<ExitCode> {
    // The deadline counts from the start of the process's work, connecting included.
    let deadline = tokio::time::Instant::now() + args.deadline;
    let default_tz = match &args.timezone {
        Some(tz) => timezone(tz)?,
        None => promoter::zone::from_tz_env(),
    };
    check_selector(args.selector.as_deref())?;
    let client = promoter::client::client(client).await?;
    let opts = PassOptions {
        dry_run: args.dry_run,
        selector: args.selector,
        default_tz,
        now: Utc::now(),
        notifications: args.notifications.0,
    };
    let engine = promoter::health::HealthEngine::new(client.clone(), opts.now);
    let health = promoter::metrics::CountingEvaluator::new(&engine);
    let (started, before) = (
        std::time::Instant::now(),
        promoter::client::RequestCount::now(),
    );
    let limits = PassLimits {
        deadline: Some(deadline),
        shard: args.shard,
    };
    let result = run_pass_for(&client, &health, &opts, &limits, args.name.as_deref()).await;
    if let Some(url) = &args.push.pushgateway_url {
        let metrics = promoter::metrics::PassMetrics::new(
            result.as_ref().ok(),
            Utc::now(),
            started.elapsed(),
            promoter::client::RequestCount::now().since(before),
            health.count(),
        );
        let group = promoter::metrics::group_url(url, "promoter", &args.push.pushgateway_instance);
        if let Err(e) = promoter::metrics::push(&group, metrics.prometheus_text()).await {
            tracing::warn!("pushing metrics to the Pushgateway failed: {e}");
        }
    }
    let report = result?;
    if let Some(name) = &args.name
        && report.promotions.is_empty()
    {
        let names = promotion_names(&client).await;
        anyhow::bail!(not_found(name, names.iter().map(String::as_str)));
    }
    if log_format == LogFormat::Json && args.output == Format::Text {
        // The CronJob's pod log is one format: the report as log lines, like the logs on stderr.
        super::streams::out(&json_lines(&report, started.elapsed()))?;
    } else {
        Printer::new(args.output).print(&Report(&report))?;
    }
    Ok(ExitCode::from(exit_code(&report, args.fail_on)))
}

#[derive(serde::Serialize)]
#[serde(transparent)]
struct Report<'a>(&'a PassReport);

impl Render for Report<'_> {
    fn human(&self, _wide: bool) -> Human {
        let report = self.0;
        let mut out = String::new();
        if report.promotions.is_empty() {
            out.push_str("no ClusterPromotions\n");
        }
        let verb = if report.dry_run { "would" } else { "did" };
        for p in &report.promotions {
            out.push_str(&format!("{}: {}\n", p.name, p.summary));
            for a in &p.actions {
                out.push_str(&format!("  {verb}: {a}\n"));
            }
            if let Some(c) = &p.conflict {
                out.push_str(&format!("  skipped: {c}\n"));
            }
            if let Some(d) = &p.deferred {
                out.push_str(&format!("  deferred: {d}\n"));
            }
            if let Some(e) = &p.error {
                out.push_str(&format!("  error: {e}\n"));
            }
            if let Some(n) = &p.notifications {
                out.push_str(&format!(
                    "  notifications: {} sent, {} failed, {} dropped, {} pending\n",
                    n.sent, n.failed, n.dropped, n.pending
                ));
            }
        }
        for f in &report.invalid_freezes {
            out.push_str(&format!(
                "PromotionFreeze {}: Invalid, holds nothing: {}\n",
                f.name, f.message
            ));
        }
        Human::Text(out)
    }
}

/// `--log-format json` with the text report: one JSON line per promotion (stage, phase, actions,
/// next check, error) and one for the pass, shaped as the `tracing` JSON lines on stderr
/// (`timestamp`, `level`, `message`, the fields, `target`).
fn json_lines(report: &PassReport, took: std::time::Duration) -> String {
    let line = |level: &str, message: &str, fields: Map<String, Value>| {
        let mut m = Map::new();
        m.insert(
            "timestamp".into(),
            json!(Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
        );
        m.insert("level".into(), json!(level));
        m.insert("message".into(), json!(message));
        m.extend(fields);
        m.insert("target".into(), json!("promoter::step"));
        format!("{}\n", Value::Object(m))
    };
    let mut out = String::new();
    for p in &report.promotions {
        let fields = match serde_json::to_value(p) {
            Ok(Value::Object(mut m)) => {
                // `promotion`, not `name`: the key other log lines use for it.
                if let Some(name) = m.remove("name") {
                    m.insert("promotion".into(), name);
                }
                m
            }
            _ => Map::new(),
        };
        let level = if p.in_error() { "ERROR" } else { "INFO" };
        out.push_str(&line(level, "promotion", fields));
    }
    for f in &report.invalid_freezes {
        let mut fields = Map::new();
        fields.insert("freeze".into(), json!(f.name));
        fields.insert("error".into(), json!(f.message));
        out.push_str(&line(
            "WARN",
            "PromotionFreeze Invalid, holds nothing",
            fields,
        ));
    }
    let count = |f: &dyn Fn(&promoter::pass::PromotionReport) -> bool| {
        report.promotions.iter().filter(|p| f(p)).count()
    };
    let mut summary = Map::new();
    summary.insert("dryRun".into(), json!(report.dry_run));
    summary.insert("promotions".into(), json!(report.promotions.len()));
    summary.insert("changed".into(), json!(count(&|p| !p.actions.is_empty())));
    summary.insert("inError".into(), json!(report.errors()));
    summary.insert("deferred".into(), json!(report.deferred()));
    summary.insert("undecided".into(), json!(report.undecided()));
    summary.insert("notifications".into(), json!(report.notifications()));
    summary.insert("durationMs".into(), json!(took.as_millis() as u64));
    let level = if report.errors() > 0 { "ERROR" } else { "INFO" };
    out.push_str(&line(level, "pass", summary));
    out
}
