//! A kube client configured as kubectl would be: `--kubeconfig`, then `KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account; `--context` picks a context.

pub mod retry;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The `--help` block of the flags every subcommand takes (these and the log flags).
pub const GLOBAL_OPTIONS: &str = "Global options";

#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClientArgs {
    /// Path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, global = true, env = "PROMOTER_KUBECONFIG", help_heading = GLOBAL_OPTIONS)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, help_heading = GLOBAL_OPTIONS)]
    pub context: Option<String>,
    /// Username to impersonate for the operation (as kubectl's --as).
    #[arg(long = "as", global = true, value_name = "USER", help_heading = GLOBAL_OPTIONS)]
    pub as_user: Option<String>,
    /// Group to impersonate (repeatable; as kubectl's --as-group).
    #[arg(long = "as-group", global = true, value_name = "GROUP", help_heading = GLOBAL_OPTIONS)]
    pub as_group: Vec<String>,
    /// Time to wait for one request, as kubectl's: seconds (`30`) or a duration (`30s`, `1m`,
    /// `1h30m`, `1d`); `0` for no timeout. Without it: 30 s.
    #[arg(long, global = true, value_name = "DURATION", help_heading = GLOBAL_OPTIONS)]
    pub request_timeout: Option<String>,
}

pub async fn client(args: &ClientArgs) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer()
            .await
            .context("no kubeconfig found and not running in a cluster")?,
    };
    // Impersonation as kubectl does it: Impersonate-User/-Group headers, set by kube's client.
    if let Some(user) = &args.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !args.as_group.is_empty() {
        config.auth_info.impersonate_groups = Some(args.as_group.clone());
    }
    let timeout = match args.request_timeout.as_deref() {
        None => None,
        Some(t) => Some(request_timeout(t).map_err(|e| anyhow::anyhow!("--request-timeout: {e}"))?),
    };
    connect(config, timeout)
}

/// kubectl's `--request-timeout` (client-go `clientcmd.ParseTimeout`): a whole number of seconds,
/// else a duration, here in the one grammar of promoter's flags (`api::flag_duration`, which
/// also takes Go's `1.5h`). Zero means no timeout.
pub fn request_timeout(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    crate::api::flag_duration::parse(text)?
        .to_std()
        .map_err(|e| format!("{text:?}: {e}"))
}

/// A client with promoter's connection policy, whatever the configuration came from.
pub fn from_config(config: kube::Config) -> anyhow::Result<kube::Client> {
    connect(config, None)
}

/// [`from_config`] with `timeout` per request (`--request-timeout`; tests of slow answers).
pub fn from_config_with_timeout(
    config: kube::Config,
    timeout: Duration,
) -> anyhow::Result<kube::Client> {
    connect(config, Some(timeout))
}

/// `timeout`: `--request-timeout`, replacing the read and write timeouts (and capping the connect
/// timeout).
fn connect(mut config: kube::Config, timeout: Option<Duration>) -> anyhow::Result<kube::Client> {
    // kube's default retries any verb on 429/503/504: writes are never replayed here, and reads
    // are retried by `retry::RetryReadsLayer` within the pass's deadline.
    config.default_retry = false;
    let connect = Duration::from_secs(10);
    // `--request-timeout 0`, as kubectl: requests wait as long as they take; connecting does not.
    let request = match timeout {
        None => Some(Duration::from_secs(30)),
        Some(t) if t.is_zero() => None,
        Some(t) => Some(t),
    };
    config.connect_timeout = Some(request.map_or(connect, |t| t.min(connect)));
    config.read_timeout = request;
    config.write_timeout = request;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::layer::layer_fn(Counted))
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&retry::RetryReadsLayer)
        .build())
}

/// A client for a managed cluster (health checks): its reads retried as the management cluster's,
/// its timeouts as `config` sets them, and not counted in [`RequestCount`] (the pass's requests to
/// the management cluster).
pub fn managed(mut config: kube::Config) -> kube::Result<kube::Client> {
    config.default_retry = false;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&retry::RetryReadsLayer)
        .build())
}

/// Requests sent by every client of this process, and how many were writes (metrics of a pass:
/// take the difference around it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCount {
    pub requests: u64,
    pub writes: u64,
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

impl RequestCount {
    pub fn now() -> Self {
        RequestCount {
            requests: REQUESTS.load(Ordering::Relaxed),
            writes: WRITES.load(Ordering::Relaxed),
        }
    }

    /// What was sent since `earlier`.
    pub fn since(self, earlier: RequestCount) -> RequestCount {
        RequestCount {
            requests: self.requests.saturating_sub(earlier.requests),
            writes: self.writes.saturating_sub(earlier.writes),
        }
    }
}

/// A tower service that counts the requests passing through it.
#[derive(Clone)]
struct Counted<S>(S);

impl<S, B> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        if req.method() != http::Method::GET {
            WRITES.fetch_add(1, Ordering::Relaxed);
        }
        self.0.call(req)
    }
}
