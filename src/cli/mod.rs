//! The `promoter` command line: global flags and dispatch here, one file per command family, one
//! printer ([`output`]) for tables and `-o` formats.
//!
//! Where flags go: a command's flags live in its family's `…Args` struct (`step.rs`: `StepArgs`,
//! `control.rs`: `ApproveArgs`/`PauseArgs`, …); flags of every command in `Cli` (or `ClientArgs` for
//! the API connection).

mod control;
mod dashboard;
mod doctor;
mod freeze;
mod inspect;
mod jsonpath;
mod lint;
pub mod output;
mod plugin;
mod reference;
mod sim;
mod step;
mod streams;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use clap::{Parser, Subcommand};
use promoter::client::ClientArgs;
use promoter::logging::{self, LogFormat};
use std::process::ExitCode;

/// The `--help` block of the flags every subcommand takes.
const GLOBAL: &str = promoter::client::GLOBAL_OPTIONS;

/// promoter: progressive, multi-stage rollouts of Sveltos ClusterPromotions, one pass at a time.
#[derive(Parser, Debug)]
#[command(name = "promoter", version = env!("PROMOTER_VERSION"), about, long_about = None)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "human",
        env = "PROMOTER_LOG_FORMAT",
        help_heading = GLOBAL
    )]
    log_format: LogFormat,
    /// Log level or filter (`info`, `promoter=debug`); RUST_LOG takes precedence.
    #[arg(
        long,
        global = true,
        default_value = "warn",
        env = "PROMOTER_LOG_LEVEL",
        help_heading = GLOBAL
    )]
    log_level: String,
    /// kubectl-style verbosity: 0 warnings, 1–3 info, 4–5 debug, 6+ trace (overrides --log-level).
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "LEVEL",
        help_heading = GLOBAL
    )]
    verbosity: Option<u8>,
    #[command(flatten)]
    client: ClientArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Step(step::StepArgs),
    Simulate(sim::SimulateArgs),
    Plan(sim::PlanArgs),
    Status(inspect::StatusArgs),
    Explain(inspect::ExplainArgs),
    Approve(control::ApproveArgs),
    Pause(control::PauseArgs),
    Resume(control::ResumeArgs),
    Abort(control::AbortArgs),
    Rollback(control::RollbackArgs),
    Freeze(freeze::FreezeArgs),
    Dashboard(dashboard::DashboardArgs),
    Lint(lint::LintArgs),
    Doctor(doctor::DoctorArgs),
    /// Print shell completions (bash, zsh, fish, …).
    ///
    /// Example: promoter completions bash > /etc/bash_completion.d/promoter
    Completions {
        /// The shell: bash, elvish, fish, powershell or zsh.
        shell: clap_complete::Shell,
    },
    Crd(CrdArgs),
    #[command(hide = true)]
    Reference(reference::ReferenceArgs),
}

/// Print the CRDs (generated from promoter's types) as YAML: ClusterPromotion, then promoter's own
/// PromotionFreeze and PromotionRevision (`promoter.dev`).
///
/// Example: promoter crd | kubectl apply -f -
#[derive(clap::Args, Debug)]
struct CrdArgs {
    /// Only this CRD.
    #[arg(long, value_enum, conflicts_with = "own")]
    only: Option<CrdName>,
    /// Only promoter's own CRDs (PromotionFreeze, PromotionRevision), for where Sveltos serves
    /// ClusterPromotion already.
    #[arg(long)]
    own: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum CrdName {
    Clusterpromotion,
    Promotionfreeze,
    Promotionrevision,
}

impl CrdArgs {
    fn crds(&self) -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>{
        use promoter::crd;
        match (self.only, self.own) {
            (Some(CrdName::Clusterpromotion), _) => vec![crd::cluster_promotion_crd()],
            (Some(CrdName::Promotionfreeze), _) => vec![crd::promotion_freeze_crd()],
            (Some(CrdName::Promotionrevision), _) => vec![crd::promotion_revision_crd()],
            (None, true) => crd::own_crds(),
            (None, false) => crd::all_crds(),
        }
    }
}

/// Parses the command line, runs the command, and maps its outcome to the exit status.
///
/// SIGPIPE stays ignored (Rust's default): a reset connection is a failed request, never the end of
/// the process; a closed stdout is handled where stdout is written ([`streams`]).
pub fn main() -> ExitCode {
    match plugin::Invocation::of(std::env::args_os().next().as_ref()) {
        plugin::Invocation::Completion => return plugin::complete(std::env::args_os().skip(1)),
        plugin::Invocation::Plugin => promoter::invocation::set_plugin(),
        plugin::Invocation::Promoter => {}
    }
    let mut command = plugin::command();
    let parsed = command
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|mut m| {
            use clap::FromArgMatches;
            Cli::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut command))
        });
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; a usage error exits 1 (2 means "a promotion is
            // in error" for `step`).
            use promoter::exit_codes::{CANNOT_RUN, SUCCESS};
            let code = if e.use_stderr() { CANNOT_RUN } else { SUCCESS };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let level = match cli.verbosity {
        None => cli.log_level.clone(),
        Some(0) => "warn".into(),
        Some(1..=3) => "info".into(),
        Some(4..=5) => "debug".into(),
        Some(_) => "trace".into(),
    };
    logging::init(cli.log_format, &level);
    large_buffers_mapped();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            streams::err(&promoter::logging::labelled(
                &format!("error: starting the async runtime: {e}"),
                promoter::logging::Stream::Stderr,
            ));
            return ExitCode::from(promoter::exit_codes::CANNOT_RUN);
        }
    };
    match runtime.block_on(dispatch(cli.command, &cli.client, cli.log_format)) {
        Ok(code) => code,
        Err(e) => {
            streams::err(&promoter::logging::labelled(
                &promoter::cli_error::render(&e),
                promoter::logging::Stream::Stderr,
            ));
            ExitCode::from(promoter::exit_codes::CANNOT_RUN)
        }
    }
}

async fn dispatch(
    command: Command,
    client: &ClientArgs,
    log_format: LogFormat,
) -> anyhow::Result<ExitCode> {
    match command {
        Command::Step(args) => {
            promoter::roles::set_pass_process();
            step::run(args, client, log_format).await
        }
        Command::Simulate(args) => sim::simulate(args).await,
        Command::Plan(args) => sim::plan(args, client).await,
        Command::Status(args) => inspect::status(args, client).await,
        Command::Explain(args) => inspect::explain(args, client).await,
        Command::Approve(args) => control::approve(args, client).await,
        Command::Pause(args) => control::pause(args, client).await,
        Command::Resume(args) => control::resume(args, client).await,
        Command::Abort(args) => control::abort(args, client).await,
        Command::Rollback(args) => control::rollback(args, client).await,
        Command::Freeze(args) => freeze::run(args, client).await,
        Command::Dashboard(args) => dashboard::run(args, client).await,
        Command::Lint(args) => lint::run(args, client).await,
        Command::Doctor(args) => doctor::run(args, client).await,
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(
                shell,
                &mut plugin::command(),
                plugin::completion_bin_name(),
                &mut script,
            );
            streams::out(&String::from_utf8_lossy(&script))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Crd(args) => {
            streams::out(&promoter::crd::crds_yaml(&args.crds())?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Reference(args) => reference::run(args),
    }
}

/// kubectl's text for a missing object, with the existing name it is a typo of, if any.
fn not_found<'a>(name: &str, existing: impl IntoIterator<Item = &'a str>) -> String {
    format!(
        "Error from server (NotFound): clusterpromotions.config.projectsveltos.io {name:?} not found{}",
        promoter::suggest::did_you_mean(name, existing)
    )
}

/// The names of the ClusterPromotions, for a "did you mean"; none when they cannot be listed.
async fn promotion_names(client: &kube::Client) -> Vec<String> {
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(client.clone());
    match api.list(&Default::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect(),
        Err(e) => {
            tracing::debug!(
                "listing ClusterPromotions for a suggestion: {}",
                promoter::cli_error::line(&e)
            );
            Vec::new()
        }
    }
}

/// The API server's NotFound for the promotion `name` becomes kubectl's line with a "did you
/// mean"; any other error is returned as it is.
async fn suggesting(e: anyhow::Error, client: &kube::Client, name: &str) -> anyhow::Error {
    let missing = format!("{name:?} not found");
    let is_missing = e.chain().any(|c| {
        matches!(c.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(s)) if s.code == 404 && s.message.contains(&missing))
    });
    if !is_missing {
        return e;
    }
    let names = promotion_names(client).await;
    anyhow::anyhow!(not_found(name, names.iter().map(String::as_str)))
}

/// `warning: TEXT` on stderr, the label in colour on a terminal.
fn warning(text: &str) {
    streams::err(&promoter::logging::labelled(
        &format!("warning: {text}"),
        promoter::logging::Stream::Stderr,
    ));
}

fn timezone(name: &str) -> anyhow::Result<Tz> {
    promoter::zone::parse(name).map_err(|e| anyhow::anyhow!("--timezone: {e}"))
}

fn check_selector(selector: Option<&str>) -> anyhow::Result<()> {
    if let Some(s) = selector {
        promoter::labels::parse_selector(s).map_err(|e| anyhow::anyhow!("--selector: {e}"))?;
    }
    Ok(())
}

fn minute_now() -> DateTime<Utc> {
    let now = Utc::now();
    now - chrono::Duration::seconds(now.timestamp() % 60)
        - chrono::Duration::nanoseconds(now.timestamp_subsec_nanos() as i64)
}

/// A pass holds a page of a list (megabytes of text) at a time, among many small allocations that
/// live until the decision. musl's allocator (the release binary's) maps each large buffer on its
/// own and unmaps it when freed; glibc's raises its mapping threshold after the first such free and
/// then takes the next pages from the heap, where the small allocations made in between keep the
/// memory from going back: peak RSS then grows with the pages read, not with what is kept. A
/// fixed threshold (its default, 128 KiB) keeps glibc's as musl's (mallopt(3), `M_MMAP_THRESHOLD`).
fn large_buffers_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    /// Issue 46 §5: every subcommand's `--help` puts the global flags in their own block after
    /// its own, describes every argument, and shows at least one example.
    #[test]
    fn every_subcommand_help_describes_each_argument_and_has_an_example() {
        use clap::CommandFactory;
        let mut root = super::Cli::command();
        root.build();
        let mut problems = Vec::new();
        let mut commands: Vec<(String, clap::Command)> = root
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .map(|c| (c.get_name().to_string(), c.clone()))
            .collect();
        while let Some((path, c)) = commands.pop() {
            commands.extend(
                c.get_subcommands()
                    .filter(|s| s.get_name() != "help")
                    .map(|s| (format!("{path} {}", s.get_name()), s.clone())),
            );
            if c.has_subcommands() {
                continue;
            }
            let help = c.clone().render_long_help().to_string();
            if !help.contains("Example") {
                problems.push(format!("{path}: no example"));
            }
            for arg in c.get_arguments() {
                let name = arg.get_id().as_str();
                if ["help", "version"].contains(&name) {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    problems.push(format!("{path}: {name} is not described"));
                }
                let global = arg.is_global_set();
                let heading = arg.get_help_heading();
                if global && heading != Some(super::GLOBAL) {
                    problems.push(format!("{path}: global {name} is under {heading:?}"));
                }
                if !global && heading == Some(super::GLOBAL) {
                    problems.push(format!("{path}: {name} is under the global heading"));
                }
            }
            // The command's own options first, the global ones after them.
            let own = help.find("\nOptions:\n");
            let global = help.find(&format!("\n{}:\n", super::GLOBAL));
            if let (Some(own), Some(global)) = (own, global)
                && own > global
            {
                problems.push(format!("{path}: global options before its own"));
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
