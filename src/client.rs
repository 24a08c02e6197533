//! A kube client configured as kubectl would be: `--kubeconfig`, then `KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account; `--context` picks a context.

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClientArgs {
    /// Path to the kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, global = true, env = "PROMOTER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

pub async fn client(args: &ClientArgs) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
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
    from_config(config)
}

/// A client with promoter's connection policy, whatever the configuration came from.
pub fn from_config(mut config: kube::Config) -> anyhow::Result<kube::Client> {
    // A pass runs every minute: fail fast and let the next pass retry, instead of kube's default of
    // up to 15 retries with exponential backoff on 429/503/504.
    config.default_retry = false;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(30));
    config.write_timeout = Some(Duration::from_secs(30));
    Ok(kube::Client::try_from(config)?)
}
