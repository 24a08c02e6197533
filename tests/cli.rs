//! The real `promoter` binary against the fake API server on loopback, through a kubeconfig file.

mod common;

use common::{Env, promoter, rand_suffix};
use std::process::Command;

#[tokio::test(flavor = "multi_thread")]
async fn step_runs_one_pass_and_reports() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    // Dry run: the plan is printed, nothing is written.
    let (code, out, err) = promoter(&env, &["step", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("kyverno-rollout-auto: started: provisioning stage dev"),
        "{out}"
    );
    assert!(
        out.contains("would: apply ClusterProfile kyverno-rollout-auto-dev"),
        "{out}"
    );
    assert_eq!(env.server.writes(), 0);
    let (code, out, _) = promoter(&env, &["step", "-o", "json"]);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["promotions"][0]["phase"], "Progressing");
    assert!(env.profile("kyverno-rollout-auto-dev").is_some());
    // A selector that matches nothing.
    let (code, out, _) = promoter(&env, &["step", "--selector", "team=nobody"]);
    assert_eq!((code, out.trim()), (0, "no ClusterPromotions"));
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_mean_something_to_ci() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let mut bad = env.promotion("kyverno-rollout-auto").unwrap();
    bad.metadata = kube::core::ObjectMeta {
        name: Some("bad".into()),
        ..Default::default()
    };
    bad.spec.stages[0].trigger = serde_json::from_value(
        serde_json::json!({"auto": {"promotionWindow": {"from": "nope", "to": "* * * * *"}}}),
    )
    .unwrap();
    env.apply_promotion(&bad);
    let (code, out, _) = promoter(&env, &["step"]);
    assert_eq!(
        code, 0,
        "the pass did its work; a promotion in error waits for a person: {out}"
    );
    let (code, out, _) = promoter(&env, &["step", "--fail-on", "promotions"]);
    assert_eq!(code, 2, "a promotion in error, for a CI gate: {out}");
    assert!(
        out.contains("bad: blocked: spec.stages[0].trigger.auto.promotionWindow.from"),
        "{out}"
    );
    let (code, _, err) = promoter(&env, &["step", "--timezone", "Mars/Olympus"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown time zone"), "{err}");
    let (code, _, err) = promoter(&env, &["step", "--selector", "a in b"]);
    assert_eq!(code, 1, "{err}");
    drop(env);
}

#[test]
fn unreachable_api_exits_1() {
    let dir = std::env::temp_dir().join(format!("promoter-unreachable-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: x\n    user: u\ncurrent-context: x\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["step", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    // kubectl's line, naming the server (README: errors are one line, as kubectl prints them).
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        format!(
            "The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?"
        )
    );
}

#[test]
fn crd_and_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .arg("crd")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("name: clusterpromotions.config.projectsveltos.io")
    );
    let help = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["step", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--dry-run",
        "--selector",
        "--timezone",
        "--kubeconfig",
        "--context",
        "Exit codes: 0",
    ] {
        assert!(help.contains(needle), "step --help lacks {needle}");
    }
}

/// The CronJob's pod log is one format: with `--log-format json`, `step` prints one JSON line per
/// promotion and one for the pass, and nothing else; stderr's log lines are JSON too.
#[tokio::test(flavor = "multi_thread")]
async fn json_logging_makes_the_report_json_lines() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.apply_example("blog-kyverno-manual.yaml");
    let (code, out, err) = promoter(
        &env,
        &["--log-format", "json", "step", "--log-level", "info"],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    let first = &lines[0];
    assert_eq!(first["message"], "promotion");
    assert_eq!(first["level"], "INFO");
    assert!(
        first["promotion"].is_string() && first["stage"] == "dev",
        "{first}"
    );
    assert_eq!(first["phase"], "Progressing");
    assert!(first["actions"].as_array().is_some_and(|a| !a.is_empty()));
    assert!(first.get("nextCheck").is_some() && first.get("timestamp").is_some());
    let pass = &lines[2];
    assert_eq!(
        (&pass["message"], &pass["promotions"], &pass["inError"]),
        (
            &serde_json::json!("pass"),
            &serde_json::json!(2),
            &serde_json::json!(0)
        )
    );
    for l in err.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(l).is_ok(), "{l}");
    }
}
