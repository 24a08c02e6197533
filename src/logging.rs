//! Log output through `tracing`: human-readable or JSON, level from `--log-level` or `RUST_LOG`.

use clap::ValueEnum;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// Logs go to stderr so that stdout stays the command's output (YAML, JSON, summaries).
pub fn init(format: LogFormat, level: &str) {
    // kube's client logs a failed connection at ERROR on its own; the command's error already says
    // it once, so kube_client speaks only when asked for by name.
    let directives = if level.contains("kube") {
        level.to_string()
    } else {
        format!("{level},kube_client=off")
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(directives));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour())
        .with_writer(std::io::stderr);
    // A second initialisation (tests) is harmless.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Colour only on a terminal, and never with `NO_COLOR` set (https://no-color.org).
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
