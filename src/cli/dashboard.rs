//! `promoter dashboard` and `promoter simulate … --dashboard`: the web view of every pipeline.

use super::inspect::DeploymentArgs;
use super::timezone;
use promoter::client::ClientArgs;
use promoter::dashboard::{Options, hub::WallClock};
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// Serve a live web view of every ClusterPromotion: stages, clusters, gates, freezes, history,
/// Events, and the actions (approve, pause, resume, abort, rollback, freezes), on this machine.
///
/// The page talks to the cluster with your kubeconfig identity (as `kubectl proxy` does): what
/// you may do there, it may do; an action the API server refuses shows its reason. Open the URL
/// printed at start (it carries this session's token). Every action is the CLI command's own
/// (the same guarded write, identity record and Event), after a confirmation that names exactly
/// what will change.
///
/// Examples:
///   promoter dashboard
///   kubectl promoter dashboard --port 8080 --read-only
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DashboardArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Time between two computations of every row at the new time, from the world the
    /// dashboard's watches keep (a change they see is read at once, alone; one computation
    /// serves every open page).
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    refresh: String,
    #[command(flatten)]
    deployment: DeploymentArgs,
}

/// Where and how the dashboard is served (`dashboard`, `simulate --dashboard`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The address to listen on. Anything but loopback lets others reach the page: anyone with
    /// its URL acts with your identity.
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    /// The port (0: any free one).
    #[arg(long, default_value_t = 3180)]
    port: u16,
    /// Show everything, offer no action (and accept none).
    #[arg(long)]
    read_only: bool,
    /// Another name the page is reached by (a tunnel's), accepted as the Host (repeatable).
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,
}

impl ServeArgs {
    pub fn options(&self, source: &str) -> Options {
        let mut o = Options::new(source);
        o.address = self.address;
        o.port = self.port;
        o.read_only = self.read_only;
        o.allow_hosts = self.allow_host.clone();
        o
    }
}

/// Prints where the dashboard is, then serves until interrupted.
pub async fn announce_and_serve(dashboard: promoter::dashboard::Dashboard, what: &str) {
    if !dashboard.addr.ip().is_loopback() {
        super::warning(&format!(
            "serving on {}, not only on this machine: anyone who has the URL acts with your identity",
            dashboard.addr
        ));
    }
    // Its reader gone, the dashboard still serves: the URL was read, or is in the browser.
    let _ = super::streams::out(&format!(
        "{what} at {}\n(the URL carries this session's token; press Ctrl-C to stop)\n",
        dashboard.login_url
    ));
    dashboard.wait().await;
}

pub async fn run(args: DashboardArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let tz = timezone(&args.deployment.timezone)?;
    let refresh = promoter::api::flag_duration::parse(&args.refresh)
        .map_err(|e| anyhow::anyhow!("--refresh: {e}"))?
        .to_std()
        .unwrap_or_default()
        .max(std::time::Duration::from_millis(500));
    // The one parser of `--cronjob` (status, explain, doctor).
    let cronjob = args.deployment.cronjob.cronjob.0.clone();
    let (kube, watches) = promoter::client::client_and_watches(client).await?;
    let mut options = args.serve.options("cluster");
    options.refresh = Some(refresh);
    options.watches = Some(promoter::dashboard::Watches(watches));
    options.tz = tz;
    options.cronjob = cronjob;
    let dashboard = promoter::dashboard::start(kube, Arc::new(WallClock), None, options).await?;
    announce_and_serve(dashboard, "promoter dashboard").await;
    Ok(ExitCode::SUCCESS)
}
