use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use clap::{Parser, Subcommand, ValueEnum};
use promoter::client::ClientArgs;
use promoter::logging::{self, LogFormat};
use promoter::pass::{PassOptions, PassReport, run_pass};
use promoter::sim::run::parse_offset;
use promoter::sim::{
    Fleet, ScriptedApproval, ScriptedFailure, ScriptedUpdate, SimOptions, SimReport, SimWorld,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// promoter: progressive, multi-stage rollouts of Sveltos ClusterPromotions, one pass at a time.
#[derive(Parser, Debug)]
#[command(name = "promoter", version = env!("PROMOTER_VERSION"), about, long_about = None)]
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
    /// kubectl-style verbosity: 0 warnings, 1–3 info, 4–5 debug, 6+ trace (overrides --log-level).
    #[arg(short = 'v', long = "v", global = true, value_name = "LEVEL")]
    verbosity: Option<u8>,
    #[command(flatten)]
    client: ClientArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// Options shared by `simulate` and `plan`.
#[derive(Clone, Debug, clap::Args)]
struct SimArgs {
    /// Time between two passes (the CronJob schedule).
    #[arg(long, default_value = "1m")]
    tick: String,
    /// Give up after this much simulated time.
    #[arg(long, default_value = "30d")]
    until: String,
    /// Approve a manual stage at an offset from the start: `[PROMOTION/]STAGE@OFFSET`.
    #[arg(long, value_name = "STAGE@OFFSET")]
    approve: Vec<String>,
    /// Time zone of promotion windows without a `CRON_TZ=` prefix (IANA name).
    #[arg(long, default_value = "UTC")]
    timezone: String,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Output,
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
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
        #[command(flatten)]
        push: PushArgs,
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
    ///   promoter simulate examples/blog-kyverno-auto.yaml --fleet examples/fleets/blog-lab.yaml
    ///   promoter simulate examples/blog-kyverno-manual.yaml --approve staging@1h
    ///   promoter simulate examples/blog-kyverno-failure.yaml --fail dev-1
    ///   promoter simulate examples/blog-kyverno-auto.yaml --update examples/blog-kyverno-update.yaml@1d
    #[command(verbatim_doc_comment)]
    Simulate {
        /// ClusterPromotion manifests (YAML, several documents allowed).
        #[arg(required = true)]
        manifests: Vec<PathBuf>,
        /// Fleet file: `Fleet` and/or `SveltosCluster` documents (default: derived from the selectors).
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// Clusters per stage when the fleet is derived.
        #[arg(long, default_value_t = 2)]
        clusters_per_stage: usize,
        /// Simulated start time, RFC 3339 (default: now, to the minute).
        #[arg(long)]
        start: Option<String>,
        /// Make a cluster's deployments fail from an offset on: `CLUSTER[@OFFSET]`.
        #[arg(long, value_name = "CLUSTER[@OFFSET]")]
        fail: Vec<String>,
        /// Apply a new revision of the promotions at an offset: `FILE@OFFSET`.
        #[arg(long, value_name = "FILE@OFFSET")]
        update: Vec<String>,
        #[command(flatten)]
        sim: SimArgs,
    },
    /// Predict, from the live state of a real cluster, when each remaining stage of a promotion completes.
    ///
    /// Reads the promotion, its ClusterProfiles and ClusterSummaries and the cluster inventory, loads
    /// them into the simulator, and simulates forward assuming deployments succeed after --deploy-time.
    /// Exit codes as for simulate.
    ///
    /// Example: promoter plan kyverno-rollout-auto --approve staging@0s
    #[command(verbatim_doc_comment)]
    Plan {
        /// The ClusterPromotion.
        name: String,
        /// Time for a cluster to reach Provisioned after a change.
        #[arg(long, default_value = "2m")]
        deploy_time: String,
        #[command(flatten)]
        sim: SimArgs,
    },
    /// One line per ClusterPromotion: current stage, phase, age of the phase, message.
    ///
    /// Phases: Progressing, Soaking until T, Awaiting approval, Window closed until T, Checks failing,
    /// Running checks, Blocked, Failed, Paused, Deleting, Complete.
    /// With --exit-code and NAME, the exit status tells CI where the rollout is:
    /// 0 complete; 3 progressing or waiting (soak, window, checks, paused); 4 awaiting approval;
    /// 5 failed or blocked; 1 could not run (not found, API unreachable).
    ///
    /// Examples:
    ///   promoter status
    ///   promoter status kyverno-rollout-auto -o wide
    ///   promoter status kyverno-rollout-auto --exit-code && echo "in production"
    #[command(verbatim_doc_comment)]
    Status {
        /// One ClusterPromotion (default: all).
        name: Option<String>,
        /// Only ClusterPromotions whose labels match this selector (e.g. `team=payments`).
        #[arg(long, short = 'l')]
        selector: Option<String>,
        #[arg(long, short = 'o', value_enum, default_value = "table")]
        output: StatusOutput,
        /// Table output without the header line.
        #[arg(long)]
        no_headers: bool,
        /// Exit status by phase (needs NAME).
        #[arg(long, requires = "name")]
        exit_code: bool,
        /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
        #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
        timezone: String,
    },
    /// Explain a ClusterPromotion: per stage and cluster, what is deployed, why it waits, until when,
    /// and what the next pass will do.
    ///
    /// Example: promoter explain kyverno-rollout-auto
    Explain {
        name: String,
        /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
        #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
        timezone: String,
    },
    /// Approve a manual stage: sets `approved: true` and records who, when and for which revision.
    ///
    /// A later change of the profileSpec voids the approval. Default stage: the current one.
    ///
    /// Example: promoter approve kyverno-prog-rollout-man --stage staging
    Approve {
        name: String,
        #[arg(long)]
        stage: Option<String>,
        /// A note recorded next to the authenticated identity (a ticket, a reason).
        #[arg(long)]
        by: Option<String>,
    },
    /// Pause a ClusterPromotion: every pass leaves it alone until it is resumed.
    Pause {
        name: String,
        /// A note recorded next to the authenticated identity (a ticket, a reason).
        #[arg(long)]
        by: Option<String>,
    },
    /// Resume a paused ClusterPromotion.
    Resume { name: String },
    /// Check manifests offline, before they are applied, with file, document and field path.
    ///
    /// Errors (exit 2): what the API server would reject or prune, generated names that are too long or
    /// invalid, durations, cron expressions, Lua that does not compile, CEL that does not parse, and with
    /// --fleet, clusters selected by two stages. Warnings (exit 0): selectors that can overlap, clusters in
    /// no stage, DryRun and OneTime sync modes, a trigger on the last stage. Notes preview windows.
    ///
    /// Examples:
    ///   promoter lint examples/*.yaml
    ///   promoter lint my-promotion.yaml --fleet fleet.yaml
    #[command(verbatim_doc_comment)]
    Lint {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A fleet (Fleet and SveltosCluster documents) to check stage membership against.
        #[arg(long)]
        fleet: Option<PathBuf>,
        /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
        #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
        timezone: String,
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Check what a pass needs from this cluster: CRDs served, the identity's permissions (one
    /// SelfSubjectAccessReview per verb a pass uses), the CronJob's last success, the Sveltos version,
    /// and whether that Sveltos advances ClusterPromotions itself.
    ///
    /// Exit codes: 0 nothing failed (warnings allowed); 2 a check failed; 1 could not run.
    ///
    /// Example: promoter doctor --as system:serviceaccount:promoter-system:promoter
    #[command(verbatim_doc_comment)]
    Doctor {
        #[arg(long, default_value = "promoter-system")]
        cronjob_namespace: String,
        #[arg(long, default_value = "promoter")]
        cronjob_name: String,
        /// Where Sveltos' addon-controller runs.
        #[arg(long, default_value = "projectsveltos")]
        sveltos_namespace: String,
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Print shell completions (bash, zsh, fish, …).
    ///
    /// Example: promoter completions bash > /etc/bash_completion.d/promoter
    Completions { shell: clap_complete::Shell },
    /// Print the ClusterPromotion CRD (generated from promoter's types) as YAML.
    ///
    /// Example: promoter crd | kubectl apply -f -
    Crd,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StatusOutput {
    Table,
    Wide,
    Json,
    Yaml,
    /// `clusterpromotion.config.projectsveltos.io/NAME`, one per line (as `kubectl get -o name`).
    Name,
}

struct StatusView {
    selector: Option<String>,
    output: StatusOutput,
    no_headers: bool,
    exit_code: bool,
}

/// A closed pipe (`promoter simulate -o json | head`) ends the process quietly, as for other Unix
/// tools, instead of a panic in `println!` (Rust ignores SIGPIPE by default).
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

async fn status(
    name: Option<String>,
    client: ClientArgs,
    view: StatusView,
    tz: String,
) -> anyhow::Result<ExitCode> {
    use promoter::ops::inspect::{age, exit_code as code_of, status_row};
    let StatusView {
        selector,
        output,
        no_headers,
        exit_code,
    } = view;
    let tz = timezone(&tz)?;
    if let Some(s) = &selector {
        promoter::labels::parse_selector(s).map_err(|e| anyhow::anyhow!("--selector: {e}"))?;
    }
    let client = promoter::client::client(&client).await?;
    let observation = promoter::pass::observe::observe(&client, selector.as_deref()).await?;
    let now = Utc::now();
    let rows: Vec<_> = observation
        .promotions
        .iter()
        .filter(|p| name.is_none() || p.metadata.name == name)
        .map(|p| status_row(p, &observation.world, now, tz))
        .collect();
    if let Some(n) = &name
        && rows.is_empty()
    {
        anyhow::bail!(not_found(n));
    }
    match output {
        // One NAME gives one object; all promotions give a list, as kubectl does.
        StatusOutput::Json => match (&name, rows.first()) {
            (Some(_), Some(row)) => println!("{}", serde_json::to_string_pretty(row)?),
            _ => println!("{}", serde_json::to_string_pretty(&rows)?),
        },
        StatusOutput::Yaml => match (&name, rows.first()) {
            (Some(_), Some(row)) => print!("{}", serde_saphyr::to_string(row)?),
            _ => print!("{}", serde_saphyr::to_string(&rows)?),
        },
        StatusOutput::Name => {
            for r in &rows {
                println!("clusterpromotion.config.projectsveltos.io/{}", r.name);
            }
        }
        StatusOutput::Table | StatusOutput::Wide => {
            let wide = output == StatusOutput::Wide;
            let mut lines = vec![vec![
                "NAME".to_string(),
                "STAGE".into(),
                "PHASE".into(),
                "AGE".into(),
                "MESSAGE".into(),
            ]];
            if wide {
                lines[0].push("NEXT PASS".into());
            }
            for r in &rows {
                let mut line = vec![
                    r.name.clone(),
                    format!("{} {}", r.stage, r.position),
                    r.phase.clone(),
                    age(r.since, now),
                    r.message.clone(),
                ];
                if wide {
                    line.push(if r.next_actions.is_empty() {
                        "-".into()
                    } else {
                        r.next_actions.join("; ")
                    });
                }
                lines.push(line);
            }
            if no_headers {
                lines.remove(0);
            }
            let widths: Vec<usize> = (0..lines.first().map_or(0, Vec::len))
                .map(|i| {
                    lines
                        .iter()
                        .map(|l| l[i].chars().count())
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            for l in &lines {
                let cells: Vec<String> = l
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if i + 1 == l.len() {
                            c.clone()
                        } else {
                            format!("{c:<w$}", w = widths[i])
                        }
                    })
                    .collect();
                println!("{}", cells.join("  "));
            }
        }
    }
    Ok(match (exit_code, rows.first()) {
        (true, Some(r)) => ExitCode::from(code_of(r.kind)),
        _ => ExitCode::SUCCESS,
    })
}

fn lint(
    files: Vec<PathBuf>,
    fleet: Option<PathBuf>,
    tz: String,
    output: Output,
) -> anyhow::Result<ExitCode> {
    use promoter::ops::lint::{Severity, lint};
    let tz = timezone(&tz)?;
    let fleet = match &fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
            Some(Fleet::parse(&text, &path.display().to_string()).map_err(|e| anyhow::anyhow!(e))?)
        }
        None => None,
    };
    let diagnostics = lint(&files, fleet.as_ref(), tz, Utc::now());
    let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&diagnostics)?),
        Output::Text => {
            for d in &diagnostics {
                println!("{d}");
            }
            println!(
                "{errors} errors, {warnings} warnings in {} files",
                files.len()
            );
        }
    }
    Ok(if errors > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

async fn explain(name: String, client: ClientArgs, tz: String) -> anyhow::Result<ExitCode> {
    let tz = timezone(&tz)?;
    let client = promoter::client::client(&client).await?;
    let mut observation = promoter::pass::observe::observe(&client, None).await?;
    if let Some(bad) = observation.undecodable.iter().find(|b| b.name == name) {
        anyhow::bail!("ClusterPromotion {name} cannot be read: {}", bad.error);
    }
    let p = observation
        .promotions
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
        .cloned()
        .ok_or_else(|| anyhow::anyhow!(not_found(&name)))?;
    if observation.world.clusters.is_empty() {
        observation.world.clusters = promoter::pass::observe::inventory(&client).await?;
    }
    promoter::ops::explain::load_summaries(&client, &p, &mut observation.world).await?;
    print!(
        "{}",
        promoter::ops::explain::render(&p, &observation.world, Utc::now(), tz)
    );
    Ok(ExitCode::SUCCESS)
}

fn print_doctor(
    checks: &[promoter::ops::doctor::Check],
    output: Output,
) -> anyhow::Result<ExitCode> {
    use promoter::ops::doctor::Verdict;
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(checks)?),
        Output::Text => {
            for c in checks {
                let mark = match c.verdict {
                    Verdict::Ok => "ok  ",
                    Verdict::Warning => "warn",
                    Verdict::Failed => "FAIL",
                    Verdict::Skipped => "skip",
                };
                println!("[{mark}] {}: {}", c.name, c.detail);
            }
        }
    }
    Ok(if checks.iter().any(|c| c.verdict == Verdict::Failed) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
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

/// kubectl's text for a missing object.
fn not_found(name: &str) -> String {
    format!(
        "Error from server (NotFound): clusterpromotions.config.projectsveltos.io {name:?} not found"
    )
}

fn timezone(name: &str) -> anyhow::Result<Tz> {
    promoter::zone::parse(name).map_err(|e| anyhow::anyhow!("--timezone: {e}"))
}

fn minute_now() -> DateTime<Utc> {
    let now = Utc::now();
    now - chrono::Duration::seconds(now.timestamp() % 60)
        - chrono::Duration::nanoseconds(now.timestamp_subsec_nanos() as i64)
}

async fn step(
    client: ClientArgs,
    dry_run: bool,
    selector: Option<String>,
    tz: Option<String>,
    output: Output,
    push: PushArgs,
) -> anyhow::Result<ExitCode> {
    let default_tz = match tz {
        Some(tz) => timezone(&tz)?,
        None => promoter::zone::from_tz_env(),
    };
    if let Some(s) = &selector {
        promoter::labels::parse_selector(s).map_err(|e| anyhow::anyhow!("--selector: {e}"))?;
    }
    let client = promoter::client::client(&client).await?;
    let opts = PassOptions {
        dry_run,
        selector,
        default_tz,
        now: Utc::now(),
    };
    let engine = promoter::health::HealthEngine::new(client.clone(), opts.now);
    let health = promoter::metrics::CountingEvaluator::new(&engine);
    let (started, before) = (
        std::time::Instant::now(),
        promoter::client::RequestCount::now(),
    );
    let result = run_pass(&client, &health, &opts).await;
    if let Some(url) = &push.pushgateway_url {
        let metrics = promoter::metrics::PassMetrics::new(
            result.as_ref().ok(),
            Utc::now(),
            started.elapsed(),
            promoter::client::RequestCount::now().since(before),
            health.count(),
        );
        let group = promoter::metrics::group_url(url, "promoter", &push.pushgateway_instance);
        if let Err(e) = promoter::metrics::push(&group, metrics.prometheus_text()).await {
            tracing::warn!("pushing metrics to the Pushgateway failed: {e}");
        }
    }
    let report = result?;
    print_report(&report, output)?;
    Ok(if report.errors() > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn sim_options(
    sim: &SimArgs,
    start: DateTime<Utc>,
    failures: Vec<ScriptedFailure>,
    updates: Vec<ScriptedUpdate>,
) -> anyhow::Result<SimOptions> {
    Ok(SimOptions {
        start,
        tick: parse_offset(&sim.tick).map_err(|e| anyhow::anyhow!("--tick: {e}"))?,
        until: parse_offset(&sim.until).map_err(|e| anyhow::anyhow!("--until: {e}"))?,
        approvals: sim
            .approve
            .iter()
            .map(|s| ScriptedApproval::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!(e))?,
        failures,
        updates,
        default_tz: timezone(&sim.timezone)?,
        progress: true,
    })
}

fn print_sim(report: &SimReport, output: Output) -> anyhow::Result<ExitCode> {
    match output {
        Output::Text => print!("{}", report.render_text()),
        Output::Json => println!("{}", serde_json::to_string_pretty(report)?),
    }
    Ok(if report.promotions.iter().all(|p| p.complete) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

#[allow(clippy::too_many_arguments)]
async fn simulate(
    manifests: Vec<PathBuf>,
    fleet: Option<PathBuf>,
    clusters_per_stage: usize,
    start: Option<String>,
    fail: Vec<String>,
    update: Vec<String>,
    sim: SimArgs,
) -> anyhow::Result<ExitCode> {
    let (docs, errors) = promoter::manifest::load_files(&manifests);
    if let Some(e) = errors.first() {
        anyhow::bail!("{e}");
    }
    // A manifest describes desired state: whatever status it carries is not the simulation's.
    let promotions: Vec<_> = docs
        .iter()
        .filter_map(|d| d.promotion().cloned())
        .map(|mut p| {
            p.status = None;
            p.metadata.uid = None;
            p
        })
        .collect();
    if promotions.is_empty() {
        anyhow::bail!("no ClusterPromotion in {manifests:?}");
    }
    let fleet = match &fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
            Fleet::parse(&text, &path.display().to_string()).map_err(|e| anyhow::anyhow!(e))?
        }
        None => Fleet::derive(&promotions, clusters_per_stage),
    };
    let start = match &start {
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map_err(|e| anyhow::anyhow!("--start {s:?}: {e}"))?
            .with_timezone(&Utc),
        None => minute_now(),
    };
    let failures = fail
        .iter()
        .map(|s| ScriptedFailure::parse(s))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--fail: {e}"))?;
    let mut updates = Vec::new();
    for u in &update {
        let (file, at) = u
            .rsplit_once('@')
            .ok_or_else(|| anyhow::anyhow!("--update {u:?}: expected FILE@OFFSET"))?;
        let docs = promoter::manifest::load_file(std::path::Path::new(file))?;
        let promotions = docs.iter().filter_map(|d| d.promotion().cloned()).collect();
        updates.push(ScriptedUpdate {
            promotions,
            at: parse_offset(at).map_err(|e| anyhow::anyhow!("--update: {e}"))?,
        });
    }
    let opts = sim_options(&sim, start, failures, updates)?;
    let report = promoter::sim::simulate(
        SimWorld {
            promotions,
            fleet,
            objects: Vec::new(),
        },
        promoter::sim::SimHealth::FleetObjects,
        &opts,
    )
    .await?;
    print_sim(&report, sim.output)
}

async fn plan(
    name: String,
    client: ClientArgs,
    deploy_time: String,
    sim: SimArgs,
) -> anyhow::Result<ExitCode> {
    let opts = sim_options(&sim, minute_now(), Vec::new(), Vec::new())?;
    let client = promoter::client::client(&client).await?;
    let mut world = promoter::sim::plan::load_live(&client, &name).await?;
    world.fleet.default_deploy_time = Some(
        promoter::api::GoDuration::parse(&deploy_time)
            .map_err(|e| anyhow::anyhow!("--deploy-time: {e}"))?,
    );
    let report = promoter::sim::simulate(
        world,
        promoter::sim::SimHealth::Evaluator(&promoter::sim::AssumeHealthy),
        &opts,
    )
    .await?;
    print_sim(&report, sim.output)
}

/// Counts allocations so that a health-check worker (this binary, started again) can bound each
/// evaluation's memory; outside a worker the count has no limit.
#[global_allocator]
static ALLOC: promoter::health::limits::CountingAlloc = promoter::health::limits::CountingAlloc;

fn main() -> ExitCode {
    if let Some(code) = promoter::health::worker::serve_if_asked() {
        return code;
    }
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; a usage error exits 1 (2 means "a promotion is
            // in error" for `step`).
            let code = if e.use_stderr() { 1 } else { 0 };
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
    let client = cli.client;
    let result = runtime.block_on(async {
        match cli.command {
            Command::Step {
                dry_run,
                selector,
                timezone,
                output,
                push,
            } => step(client, dry_run, selector, timezone, output, push).await,
            Command::Simulate {
                manifests,
                fleet,
                clusters_per_stage,
                start,
                fail,
                update,
                sim,
            } => {
                simulate(
                    manifests,
                    fleet,
                    clusters_per_stage,
                    start,
                    fail,
                    update,
                    sim,
                )
                .await
            }
            Command::Plan {
                name,
                deploy_time,
                sim,
            } => plan(name, client, deploy_time, sim).await,
            Command::Status {
                name,
                selector,
                output,
                no_headers,
                exit_code,
                timezone,
            } => {
                let view = StatusView {
                    selector,
                    output,
                    no_headers,
                    exit_code,
                };
                status(name, client, view, timezone).await
            }
            Command::Explain { name, timezone } => explain(name, client, timezone).await,
            Command::Approve { name, stage, by } => {
                let client = promoter::client::client(&client).await?;
                let who = promoter::ops::identity::whoami(&client).await;
                let by = promoter::ops::identity::recorded_by(who.as_deref(), by.as_deref());
                let msg = promoter::ops::control::approve(
                    &client,
                    &name,
                    stage.as_deref(),
                    &by,
                    Utc::now(),
                )
                .await?;
                println!("{msg}");
                Ok(ExitCode::SUCCESS)
            }
            Command::Pause { name, by } => {
                let client = promoter::client::client(&client).await?;
                let who = promoter::ops::identity::whoami(&client).await;
                let by = promoter::ops::identity::recorded_by(who.as_deref(), by.as_deref());
                println!(
                    "{}",
                    promoter::ops::control::set_paused(&client, &name, true, &by, Utc::now())
                        .await?
                );
                Ok(ExitCode::SUCCESS)
            }
            Command::Resume { name } => {
                let client = promoter::client::client(&client).await?;
                println!(
                    "{}",
                    promoter::ops::control::set_paused(&client, &name, false, "", Utc::now())
                        .await?
                );
                Ok(ExitCode::SUCCESS)
            }
            Command::Lint {
                files,
                fleet,
                timezone: tz,
                output,
            } => lint(files, fleet, tz, output),
            Command::Doctor {
                cronjob_namespace,
                cronjob_name,
                sveltos_namespace,
                output,
            } => {
                let client = promoter::client::client(&client).await?;
                let options = promoter::ops::doctor::Options {
                    cronjob_namespace,
                    cronjob_name,
                    sveltos_namespace,
                    now: Utc::now(),
                };
                let checks = promoter::ops::doctor::doctor(&client, &options).await;
                print_doctor(&checks, output)
            }
            Command::Completions { shell } => {
                use clap::CommandFactory;
                clap_complete::generate(
                    shell,
                    &mut Cli::command(),
                    "promoter",
                    &mut std::io::stdout(),
                );
                Ok(ExitCode::SUCCESS)
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
            eprintln!("{}", promoter::cli_error::render(&e));
            ExitCode::from(1)
        }
    }
}
