//! `promoter simulate` and `promoter plan`: whole rollouts on a simulated fleet and a virtual clock.

use super::output::{Format, Human, Printer, Render, formats};
use super::{minute_now, timezone};
use chrono::{DateTime, Utc};
use promoter::api::flag_duration;
use promoter::client::ClientArgs;
use promoter::sim::{
    Fleet, ScriptedApproval, ScriptedFailure, ScriptedFreeze, ScriptedUpdate, SimOptions,
    SimReport, SimWorld,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options shared by `simulate` and `plan`.
#[derive(Clone, Debug, clap::Args)]
pub struct SimArgs {
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
    /// Place a freeze of every promotion on the timeline: `FROM..[TO][=REASON]` (offsets from the
    /// start; open-ended without TO), e.g. `1d..2d=holidays`.
    #[arg(long, value_name = "FROM..TO")]
    freeze: Vec<String>,
    /// Run the simulated Sveltos with its clock this far ahead of the API server's (`-2s`: behind).
    /// Sveltos stamps `lastAppliedTime` with its own clock; promoter never compares it with the API
    /// server's times, so a rollout takes as long whatever the skew.
    #[arg(
        long,
        value_name = "[-]DURATION",
        default_value = "0s",
        allow_hyphen_values = true
    )]
    sveltos_clock_skew: String,
    /// Output format.
    #[arg(long, short = 'o', default_value = "text", value_parser = formats(&["text", "json", "yaml", "jsonpath"]))]
    output: Format,
}

/// A duration that may be negative: `-` then the flags' duration grammar.
fn signed_duration(s: &str) -> Result<chrono::Duration, String> {
    match s.trim().strip_prefix('-') {
        Some(rest) => flag_duration::parse(rest).map(|d| -d),
        None => flag_duration::parse(s.trim_start_matches('+')),
    }
}

/// Run whole rollouts on a simulated fleet and a virtual clock, and print their timeline and ETA.
///
/// The same pass as `promoter step` runs, through kube's client, against an in-process fake API
/// server; a simulated Sveltos addon-controller deploys each generated ClusterProfile to its
/// matching clusters (honouring maxUpdate), and the clock jumps over quiet stretches.
/// PromotionFreezes among the manifests are created before the first pass.
/// Without --fleet, a few clusters per stage are derived from the stage selectors.
/// Exit codes: 0 every promotion completed; 2 some stopped (the output says where and why);
/// 1 the simulation could not run (bad manifest or flag).
///
/// Examples:
///   promoter simulate examples/blog-kyverno-auto.yaml --fleet examples/fleets/blog-lab.yaml
///   promoter simulate examples/blog-kyverno-manual.yaml --approve staging@1h
///   promoter simulate examples/blog-kyverno-failure.yaml --fail dev-1
///   promoter simulate examples/blog-kyverno-auto.yaml --update examples/blog-kyverno-update.yaml@1d
///   promoter simulate examples/blog-kyverno-auto.yaml --freeze 10m..1d=holidays
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct SimulateArgs {
    /// ClusterPromotion manifests (YAML, several documents allowed).
    #[arg(required = true)]
    manifests: Vec<PathBuf>,
    /// Fleet file: `Fleet` and/or `SveltosCluster` documents (default: derived from the selectors).
    #[arg(long)]
    fleet: Option<PathBuf>,
    /// Clusters per stage when the fleet is derived.
    #[arg(long, default_value_t = 2)]
    clusters_per_stage: usize,
    /// Simulated start time, RFC 3339 (default: now, to the minute). The environment variable
    /// pins it for outputs that must not change from run to run (the book's examples).
    #[arg(long, env = "PROMOTER_SIMULATE_START", value_name = "TIME")]
    start: Option<String>,
    /// Make a cluster's deployments fail from an offset on: `CLUSTER[@OFFSET][:TEXT]` (with TEXT,
    /// only deployments whose spec contains it, e.g. `staging@1d:3.6.0`).
    #[arg(long, value_name = "CLUSTER[@OFFSET][:TEXT]")]
    fail: Vec<String>,
    /// Apply a new revision of the promotions at an offset: `FILE@OFFSET`.
    #[arg(long, value_name = "FILE@OFFSET")]
    update: Vec<String>,
    /// Serve the simulation in the dashboard instead of printing it: a web page plays the
    /// virtual clock (play, pause, speed, next pass) and takes actions (approve, …).
    #[arg(long)]
    dashboard: bool,
    /// With --dashboard: virtual seconds per real second (0: start paused).
    #[arg(long, default_value_t = 60.0, requires = "dashboard")]
    speed: f64,
    #[command(flatten)]
    serve: super::dashboard::ServeArgs,
    #[command(flatten)]
    sim: SimArgs,
}

/// Predict, from the live state of a real cluster, when each remaining stage of a promotion completes.
///
/// Reads the promotion, its ClusterProfiles and ClusterSummaries and the cluster inventory, loads
/// them into the simulator, and simulates forward assuming deployments succeed after --deploy-time.
/// Exit codes as for simulate.
///
/// Example: promoter plan kyverno-rollout-auto --approve staging@0s
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct PlanArgs {
    /// The ClusterPromotion.
    name: String,
    /// Time for a cluster to reach Provisioned after a change.
    #[arg(long, default_value = "2m")]
    deploy_time: String,
    #[command(flatten)]
    sim: SimArgs,
}

fn sim_options(
    sim: &SimArgs,
    start: DateTime<Utc>,
    failures: Vec<ScriptedFailure>,
    updates: Vec<ScriptedUpdate>,
) -> anyhow::Result<SimOptions> {
    Ok(SimOptions {
        start,
        tick: flag_duration::parse(&sim.tick).map_err(|e| anyhow::anyhow!("--tick: {e}"))?,
        until: flag_duration::parse(&sim.until).map_err(|e| anyhow::anyhow!("--until: {e}"))?,
        approvals: sim
            .approve
            .iter()
            .map(|s| ScriptedApproval::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!(e))?,
        failures,
        updates,
        freezes: sim
            .freeze
            .iter()
            .map(|s| ScriptedFreeze::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!(e))?,
        default_tz: timezone(&sim.timezone)?,
        sveltos_clock_skew: signed_duration(&sim.sveltos_clock_skew)
            .map_err(|e| anyhow::anyhow!("--sveltos-clock-skew: {e}"))?,
        progress: true,
    })
}

#[derive(serde::Serialize)]
#[serde(transparent)]
struct Report<'a>(&'a SimReport);

impl Render for Report<'_> {
    fn human(&self, _wide: bool) -> Human {
        Human::Text(self.0.render_text())
    }
}

fn print_sim(report: &SimReport, output: &Format) -> anyhow::Result<ExitCode> {
    Printer::new(output.clone()).print(&Report(report))?;
    Ok(if report.promotions.iter().all(|p| p.complete) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(promoter::exit_codes::ATTENTION)
    })
}

pub async fn simulate(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let SimulateArgs {
        manifests,
        fleet,
        clusters_per_stage,
        start,
        fail,
        update,
        dashboard,
        speed,
        serve,
        sim,
    } = args;
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
            at: flag_duration::parse(at).map_err(|e| anyhow::anyhow!("--update: {e}"))?,
        });
    }
    let opts = sim_options(&sim, start, failures, updates)?;
    let world = SimWorld {
        promotions,
        fleet,
        objects: freezes(&docs),
    };
    if dashboard {
        return serve_simulation(world, &opts, speed, &serve).await;
    }
    let report =
        promoter::sim::simulate(world, promoter::sim::SimHealth::FleetObjects, &opts).await?;
    print_sim(&report, &sim.output)
}

/// The PromotionFreezes among the manifests, created in the simulated cluster before the first
/// pass (a freeze's own `start` and `end` are times, not offsets: `--freeze` places one on the
/// virtual timeline).
fn freezes(
    docs: &[promoter::manifest::Document],
) -> Vec<(promoter::fake::ResourceType, serde_json::Value)> {
    docs.iter()
        .filter(|d| {
            matches!(&d.object, promoter::manifest::Object::Other { api_version, kind }
                if api_version == "promoter.dev/v1alpha1" && kind == "PromotionFreeze")
        })
        .map(|d| (promoter::fake::promotion_freeze_type(), d.raw.clone()))
        .collect()
}

/// `simulate --dashboard`: the same simulation, played on a clock the page controls.
async fn serve_simulation(
    world: SimWorld,
    opts: &SimOptions,
    speed: f64,
    serve: &super::dashboard::ServeArgs,
) -> anyhow::Result<ExitCode> {
    use promoter::dashboard::sim::SimClock;
    if !speed.is_finite() || speed < 0.0 {
        anyhow::bail!(
            "--speed {speed}: expected a number of virtual seconds per real second (0: paused)"
        );
    }
    let simulation =
        promoter::sim::Simulation::start(world, promoter::sim::SimHealth::FleetObjects, opts)
            .await?;
    let clock = std::sync::Arc::new(SimClock::new(opts.start, speed.max(1.0), speed > 0.0));
    let client = simulation.client().clone();
    let mut options = serve.options("simulated fleet");
    options.tz = opts.default_tz;
    let dashboard =
        promoter::dashboard::start(client, clock.clone(), Some((simulation, clock)), options)
            .await?;
    super::dashboard::announce_and_serve(dashboard, "simulation dashboard").await;
    Ok(ExitCode::SUCCESS)
}

pub async fn plan(args: PlanArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let PlanArgs {
        name,
        deploy_time,
        sim,
    } = args;
    let opts = sim_options(&sim, minute_now(), Vec::new(), Vec::new())?;
    let client = promoter::client::client(client).await?;
    let mut world = promoter::sim::plan::load_live(&client, &name).await?;
    // The flags' one duration grammar (`1d` too), carried as the Go duration the fleet holds.
    let deploy_time =
        flag_duration::parse(&deploy_time).map_err(|e| anyhow::anyhow!("--deploy-time: {e}"))?;
    world.fleet.default_deploy_time = Some(
        promoter::api::GoDuration::parse(&format!("{}s", deploy_time.num_seconds()))
            .map_err(|e| anyhow::anyhow!("--deploy-time: {e}"))?,
    );
    let report = promoter::sim::simulate(
        world,
        promoter::sim::SimHealth::Evaluator(&promoter::sim::AssumeHealthy),
        &opts,
    )
    .await?;
    print_sim(&report, &sim.output)
}
