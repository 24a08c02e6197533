//! Unix and kubectl habits of the real binary: usage errors exit 1, a closed pipe is quiet, `TZ`
//! values from containers never break a command, no colour codes off a terminal, `--version` names
//! the commit.

mod common;

use common::{Env, rand_suffix};
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
    // `| true`: the reader is gone before the report is written (simulating takes a while), so
    // the write meets a closed pipe whatever the size of the report.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // Not ended by SIGPIPE (README: a closed stdout ends a command quietly, with its own exit
    // code): SIGPIPE's default action would also end a pass on a reset connection.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), None, "ended by a signal: {err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
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

fn kubeconfig_of(server: &promoter::fake::FakeApiServer) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("promoter-kc-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml("admin")).unwrap();
    kubeconfig
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin()
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("TZ")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_conventions_on_status() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.apply_example("blog-kyverno-manual.yaml");
    let kc = kubeconfig_of(&env.server);
    let kc = kc.to_str().unwrap();
    // Global flags before the subcommand, as with kubectl.
    let (code, out, err) = run(&["--kubeconfig", kc, "status", "-o", "name"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "clusterpromotion.config.projectsveltos.io/kyverno-prog-rollout-man",
            "clusterpromotion.config.projectsveltos.io/kyverno-rollout-auto"
        ]
    );
    let (code, out, _) = run(&["status", "--kubeconfig", kc, "--no-headers"]);
    assert_eq!(code, 0);
    assert!(!out.contains("NAME"), "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
    // -l selects by label; nothing matches this one.
    let (code, out, _) = run(&[
        "status",
        "--kubeconfig",
        kc,
        "-l",
        "team=nobody",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v, serde_json::json!({"kind": "List", "items": []}));
    // kubectl's jsonpath templates, on lists and on one object.
    let (code, out, err) = run(&[
        "status",
        "--kubeconfig",
        kc,
        "-o",
        "jsonpath={.items[*].name}",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "kyverno-prog-rollout-man kyverno-rollout-auto");
    let (_, out, _) = run(&[
        "status",
        "--kubeconfig",
        kc,
        "-o",
        r#"jsonpath={range .items[*]}{.name}={.phase}{"\n"}{end}"#,
    ]);
    assert_eq!(
        out,
        "kyverno-prog-rollout-man=Pending\nkyverno-rollout-auto=Pending\n"
    );
    let (_, out, _) = run(&[
        "status",
        "kyverno-rollout-auto",
        "--kubeconfig",
        kc,
        "-o",
        "jsonpath={.prediction.phase}",
    ]);
    assert_eq!(out, "Progressing");
    let (code, _, err) = run(&["status", "--kubeconfig", kc, "-o", "jsonpath={.items[*"]);
    assert_eq!(code, 1, "a bad template is a usage error");
    assert!(err.contains("unclosed"), "{err}");
    // step NAME decides one promotion; its JSON is camelCase; every read command takes jsonpath.
    let (code, out, err) = run(&[
        "step",
        "kyverno-rollout-auto",
        "--dry-run",
        "--kubeconfig",
        kc,
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["dryRun"], true, "{out}");
    assert!(v.get("dry_run").is_none() && v["promotions"][0].get("next_check").is_none());
    assert_eq!(v["promotions"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(v["promotions"][0]["name"], "kyverno-rollout-auto");
    let (code, _, err) = run(&["step", "nope", "--dry-run", "--kubeconfig", kc]);
    assert_eq!(code, 1);
    assert!(err.contains("\"nope\" not found"), "{err}");
    let (code, out, err) = run(&[
        "explain",
        "kyverno-rollout-auto",
        "--kubeconfig",
        kc,
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["phase"], "Pending", "{out}");
    assert_eq!(v["stages"][0]["name"], "dev");
    assert_eq!(v["stages"][0]["profileState"], "notCreated");
    assert_eq!(v["prediction"]["phase"], "Progressing");
    let (_, out, _) = run(&[
        "explain",
        "kyverno-rollout-auto",
        "--kubeconfig",
        kc,
        "-o",
        "jsonpath={.stages[*].trigger}",
    ]);
    assert_eq!(out, "auto auto auto");
    let (code, out, _) = run(&[
        "lint",
        "examples/blog-kyverno-auto.yaml",
        "-o",
        "jsonpath={.errors}",
    ]);
    assert_eq!((code, out.as_str()), (0, "0"));
    // One NAME, one object.
    let (code, out, _) = run(&[
        "--kubeconfig",
        kc,
        "status",
        "kyverno-rollout-auto",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.is_object(), "{out}");
    // kubectl's one-line not-found error.
    let (code, out, err) = run(&["--kubeconfig", kc, "status", "nope"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): clusterpromotions.config.projectsveltos.io \"nope\" not found"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_crd_gets_a_hint_and_errors_are_not_debug_dumps() {
    // An API server that serves no ClusterPromotion CRD.
    let server = promoter::fake::FakeApiServer::start().await.unwrap();
    let kc = kubeconfig_of(&server);
    let (code, _, err) = run(&["step", "--kubeconfig", kc.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.starts_with("Error from server (NotFound): "), "{err}");
    assert!(err.contains("promoter crd | kubectl apply -f -"), "{err}");
    assert!(!err.contains("Status {"), "no Rust debug dump: {err}");
    assert!(!err.contains("kube_client"), "no extra log line: {err}");
}
