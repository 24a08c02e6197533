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
    colour_on(Stream::Stderr)
}

/// Where a command writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether what goes to `stream` may have colour: it is a terminal, and `NO_COLOR` is not set.
pub fn colour_on(stream: Stream) -> bool {
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `error`, `warning` or `note` as a diagnostic's label, in colour when `colour` (bold red,
/// bold yellow, bold cyan, as compilers print them).
pub fn label(word: &str, colour: bool) -> String {
    let code = match word {
        "error" => "1;31",
        "warning" => "1;33",
        "note" => "1;36",
        _ => return word.to_string(),
    };
    if colour {
        format!("\x1b[{code}m{word}\x1b[0m")
    } else {
        word.to_string()
    }
}

/// A message for `stream` that begins with `error: ` or `warning: `, its label in colour where
/// `stream` may have colour.
pub fn labelled(text: &str, stream: Stream) -> String {
    for word in ["error", "warning"] {
        if let Some(rest) = text.strip_prefix(word).and_then(|r| r.strip_prefix(": ")) {
            return format!("{}: {rest}", label(word, colour_on(stream)));
        }
    }
    text.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_coloured_only_when_asked() {
        assert_eq!(label("error", false), "error");
        assert_eq!(label("error", true), "\x1b[1;31merror\x1b[0m");
        assert_eq!(label("warning", true), "\x1b[1;33mwarning\x1b[0m");
        assert_eq!(label("hint", true), "hint");
        // Tests do not run on a terminal: nothing is coloured.
        assert_eq!(labelled("error: boom", Stream::Stderr), "error: boom");
        assert_eq!(
            labelled("Error from server (NotFound): x", Stream::Stderr),
            "Error from server (NotFound): x"
        );
    }
}
