//! A kube client configured as kubectl would be: `--kubeconfig`, then `KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account; `--context` picks a context.

pub mod retry;
pub mod unreachable;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
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
    let (config, timeout) = config(args).await?;
    connect(config, timeout, false)
}

/// [`client`], and a client for watches ([`for_watches`]) of the same configuration.
pub async fn client_and_watches(args: &ClientArgs) -> anyhow::Result<(kube::Client, kube::Client)> {
    let (config, timeout) = config(args).await?;
    Ok((
        connect(config.clone(), timeout, false)?,
        connect(config, timeout, true)?,
    ))
}

/// How long a watch request asks to last (`timeoutSeconds`; kube's default).
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(290);

/// The configuration, and `--request-timeout`.
async fn config(args: &ClientArgs) -> anyhow::Result<(kube::Config, Option<Duration>)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match kubeconfig(args.kubeconfig.as_deref())? {
        Some(kubeconfig) => kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| match e {
                KubeconfigError::LoadContext(name) => {
                    anyhow::anyhow!("context {name:?} does not exist")
                }
                e => anyhow::Error::new(e).context("the kubeconfig"),
            })?,
        None => {
            if let Some(context) = &args.context {
                anyhow::bail!(
                    "context {context:?} does not exist (no kubeconfig: {})",
                    NO_FILE
                );
            }
            if std::env::var_os("KUBERNETES_SERVICE_HOST").is_none() {
                anyhow::bail!("no kubeconfig: {}", NO_FILE);
            }
            kube::Config::incluster().context("the in-cluster service account")?
        }
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
    Ok((config, timeout))
}

/// Where kubectl looks when neither `--kubeconfig` nor KUBECONFIG names a file.
const NO_FILE: &str = "~/.kube/config does not exist, KUBECONFIG is unset, and this is not a pod (--kubeconfig names a file)";

/// The kubeconfig as kubectl finds it: `--kubeconfig`, else the files KUBECONFIG lists (merged;
/// missing ones skipped, as kubectl skips them), else `~/.kube/config`; None: none of these, the
/// in-cluster service account next. Each problem is one line naming the file.
fn kubeconfig(flag: Option<&std::path::Path>) -> anyhow::Result<Option<Kubeconfig>> {
    if let Some(path) = flag {
        if !path.exists() {
            anyhow::bail!(
                "the kubeconfig {} (--kubeconfig) does not exist",
                path.display()
            );
        }
        return read_kubeconfig(path).map(Some);
    }
    let listed: Vec<PathBuf> = std::env::var_os("KUBECONFIG")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        let present: Vec<&PathBuf> = listed.iter().filter(|p| p.exists()).collect();
        if present.is_empty() {
            let names: Vec<String> = listed.iter().map(|p| p.display().to_string()).collect();
            anyhow::bail!(
                "the kubeconfig {} (KUBECONFIG) does not exist",
                names.join(", ")
            );
        }
        let mut merged = Kubeconfig::default();
        for path in present {
            merged = merged.merge(read_kubeconfig(path)?).with_context(|| {
                format!("merging the kubeconfig {} (KUBECONFIG)", path.display())
            })?;
        }
        return Ok(Some(merged));
    }
    match std::env::home_dir().map(|h| h.join(".kube").join("config")) {
        Some(path) if path.exists() => read_kubeconfig(&path).map(Some),
        _ => Ok(None),
    }
}

/// One kubeconfig file; an error names it, and for YAML that does not parse, where (kube's text
/// goes on with a drawing of the line, over several lines).
fn read_kubeconfig(path: &std::path::Path) -> anyhow::Result<Kubeconfig> {
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(io, _) => {
            anyhow::anyhow!("the kubeconfig {} cannot be read: {io}", path.display())
        }
        e => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            let what = first
                .trim_start_matches("failed to parse kubeconfig YAML: ")
                .trim_start_matches("error: ");
            anyhow::anyhow!("the kubeconfig {} is not valid: {what}", path.display())
        }
    })
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
    connect(config, None, false)
}

/// [`from_config`] for watch requests: a watch may go quiet for all of its `timeoutSeconds`
/// ([`WATCH_TIMEOUT`]: the server sends nothing while nothing changes, bookmarks aside), so its
/// read timeout is that much longer than a request's; every other timeout is a request's.
pub fn for_watches(config: kube::Config) -> anyhow::Result<kube::Client> {
    connect(config, None, true)
}

/// [`from_config`] with `timeout` per request (`--request-timeout`; tests of slow answers).
pub fn from_config_with_timeout(
    config: kube::Config,
    timeout: Duration,
) -> anyhow::Result<kube::Client> {
    connect(config, Some(timeout), false)
}

/// `timeout`: `--request-timeout`, replacing the read and write timeouts (and capping the connect
/// timeout). `watches`: the client makes watch requests, whose read timeout is longer by
/// [`WATCH_TIMEOUT`].
fn connect(
    mut config: kube::Config,
    timeout: Option<Duration>,
    watches: bool,
) -> anyhow::Result<kube::Client> {
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
    config.read_timeout = request.map(|t| if watches { t + WATCH_TIMEOUT } else { t });
    config.write_timeout = request;
    let named = named(&config);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&named)
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
    let named = named(&config);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&named)
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&retry::RetryReadsLayer)
        .build())
}

/// The innermost layer of a client's stack: its connect failures name the server
/// ([`unreachable`]).
fn named<S>(
    config: &kube::Config,
) -> impl tower::Layer<S, Service = unreachable::Named<S>> + use<S> {
    let server: std::sync::Arc<str> = unreachable::server_of(&config.cluster_url).into();
    tower::layer::layer_fn(move |inner| unreachable::Named {
        inner,
        server: server.clone(),
    })
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
