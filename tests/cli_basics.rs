//! Unix and kubectl habits of the real binary: usage errors exit 1, a closed pipe is quiet, `TZ`
//! values from containers never break a command, no colour codes off a terminal, `--version` names
//! the commit.

mod common;

use common::{Env, rand_suffix};
use std::io::Read;
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_promoter"))
}

#[test]
fn usage_errors_exit_1_help_and_version_exit_0() {
    let out = bin().args(["step", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a usage error is not exit 2");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = bin().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with("promoter 0.") && version.contains("(commit "),
        "{version}"
    );
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let mut child = bin()
        .args([
            "simulate",
            "examples/blog-kyverno-auto.yaml",
            "--fleet",
            "examples/fleets/blog-lab.yaml",
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c 1`: read one byte and close the pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    stdout.read_exact(&mut one).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "no panic exit");
}

#[tokio::test(flavor = "multi_thread")]
async fn container_tz_values_and_no_colour() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let dir = std::env::temp_dir().join(format!("promoter-tz-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, env.server.kubeconfig_yaml("admin")).unwrap();
    for tz in [
        ":UTC",
        "UTC0",
        ":/etc/localtime",
        "/usr/share/zoneinfo/Europe/Berlin",
        "CET-1CEST,M3.5.0,M10.5.0/3",
    ] {
        for args in [
            &["step", "--dry-run", "--log-level", "info"][..],
            &["status"][..],
            &["explain", "kyverno-rollout-auto"][..],
        ] {
            let out = bin()
                .args(args)
                .env("KUBECONFIG", &kubeconfig)
                .env("TZ", tz)
                .env_remove("PROMOTER_TIMEZONE")
                .env_remove("NO_COLOR")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "TZ={tz} {args:?}: {err}");
            assert!(
                !err.contains('\u{1b}'),
                "no ANSI codes off a terminal: {err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
