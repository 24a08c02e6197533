//! The command a person types to run promoter: `promoter`, or `kubectl promoter` when the binary
//! runs as the kubectl plugin `kubectl-promoter` (installed by krew, which puts no `promoter` on
//! the PATH). Hints in output name the command that works where they are read.

use std::sync::OnceLock;

static COMMAND: OnceLock<&'static str> = OnceLock::new();

/// The name under which the binary runs as a kubectl plugin.
pub const PLUGIN_BINARY: &str = "kubectl-promoter";
/// The executable kubectl (1.26+) runs to complete `kubectl promoter …` on the command line.
pub const PLUGIN_COMPLETION_BINARY: &str = "kubectl_complete-promoter";

/// Hints say `kubectl promoter …` from now on (called once, at start, by the plugin binary).
pub fn set_plugin() {
    let _ = COMMAND.set("kubectl promoter");
}

/// `promoter`, or `kubectl promoter` in the plugin.
pub fn command() -> &'static str {
    COMMAND.get().copied().unwrap_or("promoter")
}

/// Whether the binary runs as the kubectl plugin.
pub fn is_plugin() -> bool {
    COMMAND.get().is_some()
}
