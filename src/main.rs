use chrono_tz::Tz;
use clap::{Parser, Subcommand, ValueEnum};
use promoter::client::ClientArgs;
use promoter::logging::{self, LogFormat};
use promoter::pass::{ChecksNotEvaluated, PassOptions, PassReport, run_pass};
use std::process::ExitCode;

/// promoter: progressive, multi-stage rollouts of Sveltos ClusterPromotions, one pass at a time.
#[derive(Parser, Debug)]
#[command(name = "promoter", version, about, long_about = None)]
struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "human",
        env = "PROMOTER_LOG_FORMAT"
    )]
    log_format: LogFormat,
    /// Log level or filter (`info`, `promoter=debug`); RUST_LOG takes precedence.
    #[arg(
        long,
        global = true,
        default_value = "warn",
        env = "PROMOTER_LOG_LEVEL"
    )]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Perform exactly one reconciliation pass over all ClusterPromotions, print what it did, and exit.
    ///
    /// Reads the kubeconfig as kubectl does. Exit codes: 0 the pass ran; 1 the pass could not run
    /// (API unreachable, unauthorized, bad flags); 2 the pass ran but at least one promotion is in
    /// error (invalid, failing deployment, or a write that failed).
    ///
    /// Examples:
    ///   promoter step
    ///   promoter step --dry-run --selector team=payments
    ///   promoter step --timezone Europe/Berlin -o json
    #[command(verbatim_doc_comment)]
    Step {
        #[command(flatten)]
        client: ClientArgs,
        /// Decide and print the actions, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Only ClusterPromotions whose labels match this selector (e.g. `team=payments,tier!=canary`).
        #[arg(long, short = 'l')]
        selector: Option<String>,
        /// Time zone of promotion windows without a `CRON_TZ=` prefix (IANA name).
        #[arg(long, default_value = "UTC", env = "TZ")]
        timezone: String,
        /// Output format of the summary.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Run whole rollouts on a simulated fleet and a virtual clock, and print their timeline and ETA.
    ///
    /// The same pass as `promoter step` runs, through kube's client, against an in-process fake API
    /// server; a simulated Sveltos addon-controller deploys each generated ClusterProfile to its
    /// matching clusters (honouring maxUpdate), and the clock jumps over quiet stretches.
    /// Without --fleet, a few clusters per stage are derived from the stage selectors.
    /// Exit codes: 0 every promotion completed; 2 some stopped (the output says where and why);
    /// 1 the simulation could not run (bad manifest or flag).
    ///
    /// Examples:
    ///   promoter simulate examples/blog-kyverno-auto.yaml
    ///   promoter simulate examples/blog-kyverno-manual.yaml --approve staging@1h
    ///   promoter simulate examples/blog-kyverno-failure.yaml --fail dev-1
    ///   promoter simulate my-promotion.yaml --fleet fleet.yaml --start 2026-03-02T08:00:00Z -o json
    #[command(verbatim_doc_comment)]
    Simulate {
        /// ClusterPromotion manifests (YAML, several documents allowed).
        #[arg(required = true)]
        manifests: Vec<std::path::PathBuf>,
        /// Fleet file: `Fleet` and/or `SveltosCluster` documents (default: derived from the selectors).
        #[arg(long)]
        fleet: Option<std::path::PathBuf>,
        /// Clusters per stage when the fleet is derived.
        #[arg(long, default_value_t = 2)]
        clusters_per_stage: usize,
        /// Simulated start time, RFC 3339 (default: now, to the minute).
        #[arg(long)]
        start: Option<String>,
        /// Time between two passes (the CronJob schedule).
        #[arg(long, default_value = "1m")]
        tick: String,
        /// Give up after this much simulated time.
        #[arg(long, default_value = "30d")]
        until: String,
        /// Approve a manual stage at an offset from the start: `[PROMOTION/]STAGE@OFFSET`.
        #[arg(long, value_name = "STAGE@OFFSET")]
        approve: Vec<String>,
        /// Make a cluster's deployments fail from an offset on: `CLUSTER[@OFFSET]`.
        #[arg(long, value_name = "CLUSTER[@OFFSET]")]
        fail: Vec<String>,
        /// Time zone of promotion windows without a `CRON_TZ=` prefix (IANA name).
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Print the ClusterPromotion CRD (generated from promoter's types) as YAML.
    ///
    /// Example: promoter crd | kubectl apply -f -
    Crd,
}

fn print_report(report: &PassReport, output: Output) -> anyhow::Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(report)?),
        Output::Text => {
            if report.promotions.is_empty() {
                println!("no ClusterPromotions");
            }
            for p in &report.promotions {
                println!("{}: {}", p.name, p.summary);
                let verb = if report.dry_run { "would" } else { "did" };
                for a in &p.actions {
                    println!("  {verb}: {a}");
                }
                if let Some(c) = &p.conflict {
                    println!("  skipped: {c}");
                }
                if let Some(e) = &p.error {
                    println!("  error: {e}");
                }
            }
        }
    }
    Ok(())
}

async fn step(
    client: ClientArgs,
    dry_run: bool,
    selector: Option<String>,
    timezone: String,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let default_tz: Tz = timezone
        .parse()
        .map_err(|_| anyhow::anyhow!("--timezone: unknown time zone {timezone:?}"))?;
    if let Some(s) = &selector {
        promoter::labels::parse_selector(s).map_err(|e| anyhow::anyhow!("--selector: {e}"))?;
    }
    let client = promoter::client::client(&client).await?;
    let opts = PassOptions {
        dry_run,
        selector,
        default_tz,
        now: chrono::Utc::now(),
    };
    let report = run_pass(&client, &ChecksNotEvaluated, &opts).await?;
    print_report(&report, output)?;
    Ok(if report.errors() > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

struct SimulateArgs {
    manifests: Vec<std::path::PathBuf>,
    fleet: Option<std::path::PathBuf>,
    clusters_per_stage: usize,
    start: Option<String>,
    tick: String,
    until: String,
    approve: Vec<String>,
    fail: Vec<String>,
    timezone: String,
    output: Output,
}

async fn simulate(a: SimulateArgs) -> anyhow::Result<ExitCode> {
    use promoter::sim::{Fleet, ScriptedApproval, ScriptedFailure, SimOptions, run::parse_offset};
    let default_tz: Tz = a
        .timezone
        .parse()
        .map_err(|_| anyhow::anyhow!("--timezone: unknown time zone {:?}", a.timezone))?;
    let (docs, errors) = promoter::manifest::load_files(&a.manifests);
    if let Some(e) = errors.first() {
        anyhow::bail!("{e}");
    }
    let promotions: Vec<_> = docs.iter().filter_map(|d| d.promotion().cloned()).collect();
    if promotions.is_empty() {
        anyhow::bail!("no ClusterPromotion in {:?}", a.manifests);
    }
    let fleet = match &a.fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
            Fleet::parse(&text, &path.display().to_string()).map_err(|e| anyhow::anyhow!(e))?
        }
        None => Fleet::derive(&promotions, a.clusters_per_stage),
    };
    let start = match &a.start {
        Some(s) => chrono::DateTime::parse_from_rfc3339(s)
            .map_err(|e| anyhow::anyhow!("--start {s:?}: {e}"))?
            .with_timezone(&chrono::Utc),
        None => {
            let now = chrono::Utc::now();
            now - chrono::Duration::seconds(now.timestamp() % 60)
                - chrono::Duration::nanoseconds(now.timestamp_subsec_nanos() as i64)
        }
    };
    let opts = SimOptions {
        start,
        tick: parse_offset(&a.tick).map_err(|e| anyhow::anyhow!("--tick: {e}"))?,
        until: parse_offset(&a.until).map_err(|e| anyhow::anyhow!("--until: {e}"))?,
        approvals: a
            .approve
            .iter()
            .map(|s| ScriptedApproval::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!(e))?,
        failures: a
            .fail
            .iter()
            .map(|s| ScriptedFailure::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("--fail: {e}"))?,
        default_tz,
        progress: true,
    };
    let report = promoter::sim::simulate(promotions, fleet, &ChecksNotEvaluated, &opts).await?;
    match a.output {
        Output::Text => print!("{}", report.render_text()),
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(if report.promotions.iter().all(|p| p.complete) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, &cli.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Step {
                client,
                dry_run,
                selector,
                timezone,
                output,
            } => step(client, dry_run, selector, timezone, output).await,
            Command::Simulate {
                manifests,
                fleet,
                clusters_per_stage,
                start,
                tick,
                until,
                approve,
                fail,
                timezone,
                output,
            } => {
                simulate(SimulateArgs {
                    manifests,
                    fleet,
                    clusters_per_stage,
                    start,
                    tick,
                    until,
                    approve,
                    fail,
                    timezone,
                    output,
                })
                .await
            }
            Command::Crd => promoter::crd::cluster_promotion_crd_yaml().map(|yaml| {
                print!("{yaml}");
                ExitCode::SUCCESS
            }),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
