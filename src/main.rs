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
