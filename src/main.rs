use clap::{Parser, Subcommand};
use promoter::logging::{self, LogFormat};
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
        default_value = "info",
        env = "PROMOTER_LOG_LEVEL"
    )]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the ClusterPromotion CRD (generated from promoter's types) as YAML.
    ///
    /// Example: promoter crd | kubectl apply -f -
    Crd,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format, &cli.log_level);
    let result = match cli.command {
        Command::Crd => promoter::crd::cluster_promotion_crd_yaml().map(|yaml| print!("{yaml}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
