//! `status`, `explain`, `approve`, `pause`/`resume` and `completions`, through the real binary.
//! (The environment's clock is virtual; these commands read the real one, so times are not asserted.)

mod common;

use common::{Env, promoter};
use promoter::annotations;

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

async fn at_staging_awaiting_approval() -> Env {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..12 {
        env.tick().await;
    }
    assert_eq!(
        env.current_stage("kyverno-prog-rollout-man").as_deref(),
        Some("staging")
    );
    env
}

#[tokio::test(flavor = "multi_thread")]
async fn status_lines_and_exit_codes() {
    let env = at_staging_awaiting_approval().await;
    env.apply_example("docs-payment-processor.yaml");
    let (code, out, err) = promoter(&env, &["status"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("PHASE") && lines[0].contains("MESSAGE"),
        "{out}"
    );
    let manual = lines
        .iter()
        .find(|l| l.starts_with("kyverno-prog-rollout-man"))
        .unwrap();
    assert!(
        manual.contains("staging 2/3") && manual.contains("AwaitingApproval"),
        "{manual}"
    );
    assert!(out.contains("core-payment-processor-ci"));
    let (code, _, _) = promoter(&env, &["status", "kyverno-prog-rollout-man", "--exit-code"]);
    assert_eq!(code, 4, "awaiting approval");
    let (code, out, _) = promoter(&env, &["status", "kyverno-prog-rollout-man", "-o", "json"]);
    assert_eq!(code, 0);
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["phase"], "AwaitingApproval", "one NAME, one object");
    assert_eq!(
        (row["stageNumber"].as_u64(), row["stageCount"].as_u64()),
        (Some(2), Some(3))
    );
    let (_, wide, _) = promoter(&env, &["status", "-o", "wide"]);
    assert!(wide.contains("PREDICTED NEXT PASS"), "{wide}");
    let (code, _, err) = promoter(&env, &["status", "nope", "--exit-code"]);
    assert_eq!(code, 1);
    assert!(err.contains("clusterpromotions.config.projectsveltos.io \"nope\" not found"));
    // Approve through the CLI; the pass promotes; then it completes.
    let (code, out, err) = promoter(
        &env,
        &["approve", "kyverno-prog-rollout-man", "--by", "CAB-42"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("approved stage staging of kyverno-prog-rollout-man for revision "),
        "{out}"
    );
    let p = env.promotion("kyverno-prog-rollout-man").unwrap();
    let record = p.metadata.annotations.as_ref().unwrap()["promoter.dev/approval.staging"].clone();
    // The authenticated identity (SelfSubjectReview), not $USER (alice here), with the note.
    assert!(record.contains(r#""by":"admin (CAB-42)""#), "{record}");
    // Approved but no pass yet: the observed state is still "awaiting approval" (said to be
    // approved); the promotion the next pass would make is only a prediction.
    let (code, out, _) = promoter(
        &env,
        &[
            "status",
            "kyverno-prog-rollout-man",
            "-o",
            "json",
            "--exit-code",
        ],
    );
    assert_eq!(code, 4, "{out}");
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["phase"], "AwaitingApproval", "{out}");
    assert!(
        row["message"]
            .as_str()
            .unwrap()
            .contains("approved by admin (CAB-42)"),
        "{out}"
    );
    assert_eq!(
        row["prediction"]["summary"],
        "promoted staging -> production"
    );
    let (_, explain, _) = promoter(&env, &["explain", "kyverno-prog-rollout-man"]);
    assert!(
        explain.contains("ClusterPromotion kyverno-prog-rollout-man: AwaitingApproval")
            && explain.contains(
                "Prediction (if nothing changes before the next pass): Progressing, promoted staging -> production"
            ),
        "{explain}"
    );
    for _ in 0..10 {
        env.tick().await;
    }
    let (code, _, _) = promoter(&env, &["status", "kyverno-prog-rollout-man", "--exit-code"]);
    assert_eq!(code, 0, "complete");
    // Approving a stage without a manual trigger is refused.
    let (code, _, err) = promoter(
        &env,
        &["approve", "kyverno-prog-rollout-man", "--stage", "dev"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("has no manual trigger"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_rollout_exits_5_and_explain_says_why() {
    let mut env = Env::new(FLEET).await;
    env.addon
        .failing
        .insert("dev/dev01".into(), common::start_time());
    env.apply_example("blog-kyverno-failure.yaml");
    for _ in 0..4 {
        env.tick().await;
    }
    let (code, out, _) = promoter(&env, &["status", "kyverno-rollout-auto", "--exit-code"]);
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("Failed"));
    let (code, out, err) = promoter(&env, &["explain", "kyverno-rollout-auto"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "ClusterPromotion kyverno-rollout-auto: Failed (stage dev 1/3)",
        "Stage 1/3 dev (trigger: auto)",
        "ClusterProfile kyverno-rollout-auto-dev: applied, current revision",
        "failure: ClusterSummary kyverno-rollout-auto-dev-sveltos-dev01 is not yet provisioned.",
        "dev/dev01 (ready): kyverno-rollout-auto-dev-sveltos-dev01: Helm Failed (deployment failed (simulated)) [not provisioned]",
        "Stage 2/3 staging (trigger: auto)",
        "ClusterProfile kyverno-rollout-auto-staging: not created",
        "delay: 2m",
        "Next pass will: change nothing",
    ] {
        assert!(out.contains(needle), "explain lacks {needle:?}:\n{out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_leaves_a_promotion_alone_until_resumed() {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.tick().await;
    let (code, out, _) = promoter(&env, &["pause", "kyverno-rollout-auto"]);
    assert_eq!(code, 0);
    assert!(out.contains("paused kyverno-rollout-auto"));
    for _ in 0..10 {
        env.tick().await;
    }
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("dev"),
        "no progress while paused"
    );
    assert!(
        env.description("kyverno-rollout-auto", "dev")
            .unwrap()
            .starts_with("Paused: promotion paused by admin since ")
    );
    let (code, out, _) = promoter(&env, &["status", "kyverno-rollout-auto", "--exit-code"]);
    assert_eq!(code, 3);
    assert!(out.contains("Paused"));
    let (_, explain, _) = promoter(&env, &["explain", "kyverno-rollout-auto"]);
    assert!(explain.contains("paused by admin"), "{explain}");
    // Resume says what it lifted: whose pause, since when (a dry run first, which writes nothing).
    let (code, out, _) = promoter(&env, &["resume", "kyverno-rollout-auto", "--dry-run"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("would resume kyverno-rollout-auto: paused by admin since ")
            && out.trim_end().ends_with("; nothing written"),
        "{out}"
    );
    assert!(annotations::paused(&env.promotion("kyverno-rollout-auto").unwrap()).is_some());
    let (code, out, _) = promoter(&env, &["resume", "kyverno-rollout-auto"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("resumed kyverno-rollout-auto: paused by admin since "),
        "{out}"
    );
    for _ in 0..15 {
        env.tick().await;
    }
    assert_eq!(
        env.current_stage("kyverno-rollout-auto").as_deref(),
        Some("production")
    );
}

#[test]
fn completions_and_version() {
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("simulate"),
            "{shell}"
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("promoter "));
}

/// `approve` racing the minute's pass: the first guarded patch is refused as a conflict; approve
/// reads again and succeeds instead of asking the person to retry.
#[tokio::test(flavor = "multi_thread")]
async fn approve_retries_when_the_pass_wrote_first() {
    use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
    let env = Env::new(&[("dev", "dev01", "dev"), ("staging", "st01", "staging")]).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..8 {
        env.tick().await;
    }
    env.server.clear_requests();
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
        1,
        FaultAction::Status(409),
    ));
    let (code, out, err) = promoter(&env, &["approve", "kyverno-prog-rollout-man"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("approved stage staging"), "{out}");
    assert_eq!(
        env.server
            .count(|r| r.verb == "patch" && r.resource == "clusterpromotions"),
        2,
        "one refused patch, one that went through"
    );
    assert!(
        env.promotion("kyverno-prog-rollout-man")
            .unwrap()
            .spec
            .stages[1]
            .manual_approval()
            .unwrap_or(false)
    );
}

/// A second `approve` of the same stage and revision writes nothing and emits no second Event;
/// a stage that does not exist or has no manual trigger is refused naming the stages that do.
#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_approve_changes_nothing_and_errors_name_the_manual_stages() {
    let env = Env::new(&[("dev", "dev01", "dev"), ("staging", "st01", "staging")]).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..8 {
        env.tick().await;
    }
    let (code, out, err) = promoter(&env, &["approve", "kyverno-prog-rollout-man"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("approved stage staging"), "{out}");
    env.server.clear_requests();
    let (code, out, err) = promoter(&env, &["approve", "kyverno-prog-rollout-man"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("stage staging of kyverno-prog-rollout-man is already approved by")
            && out.contains("nothing changed"),
        "{out}"
    );
    assert_eq!(
        env.server
            .count(|r| r.verb != "get" && r.verb != "list" && r.resource != "selfsubjectreviews"),
        0,
        "a repeated approve writes nothing (no patch, no Event); it asks who acts, as every command"
    );
    let (code, _, err) = promoter(
        &env,
        &["approve", "kyverno-prog-rollout-man", "--stage", "stagin"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("has no stage \"stagin\"")
            && err.contains("stages with a manual trigger: staging"),
        "{err}"
    );
    let (code, _, err) = promoter(
        &env,
        &["approve", "kyverno-prog-rollout-man", "--stage", "dev"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("has no manual trigger")
            && err.contains("stages with a manual trigger: staging"),
        "{err}"
    );
}

/// Before any pass, `status` says so (it does not tell the first pass's decision as the present);
/// the CronJob's last success tells whether passes run at all.
#[tokio::test(flavor = "multi_thread")]
async fn status_is_observed_and_names_the_last_pass() {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let (code, out, err) = promoter(
        &env,
        &[
            "status",
            "kyverno-rollout-auto",
            "--exit-code",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 3, "{err}");
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["phase"], "Pending", "{out}");
    assert_eq!(row["stageNumber"], 0);
    assert_eq!(row["prediction"]["phase"], "Progressing");
    assert!(
        row["prediction"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("started"),
        "{out}"
    );
    assert!(row.get("lastPass").is_none(), "no CronJob here: {out}");
    env.tick().await;
    let (_, out, _) = promoter(&env, &["status", "--no-headers"]);
    assert!(
        out.contains("dev 1/3") && out.contains("Progressing"),
        "{out}"
    );
    // No CronJob (a pass run by hand, from CI or Lambda): what is known is the last change a
    // pass recorded in the status, and that a quiet pass leaves no record (issue 31).
    let (_, out, _) = promoter(&env, &["explain", "kyverno-rollout-auto"]);
    assert!(
        out.contains("last pass: no CronJob read (--cronjob none, not found or not readable); the last status change a pass recorded: "),
        "{out}"
    );
    assert!(
        out.contains("a pass that changes nothing writes nothing"),
        "{out}"
    );
    let (_, out, _) = promoter(&env, &["status", "kyverno-rollout-auto", "-o", "json"]);
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(row["lastRecordedWrite"].is_string(), "{out}");
    let (_, wide, _) = promoter(&env, &["status", "-o", "wide", "--no-headers"]);
    assert!(wide.contains(" wrote "), "{wide}");
    // A CronJob whose last success is an hour old: a warning, and the time in JSON.
    let cronjobs =
        promoter::fake::ResourceType::builtin("batch", "v1", "CronJob", "cronjobs", true);
    env.server.register(cronjobs.clone());
    let hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    env.server
        .store()
        .seed(
            &cronjobs,
            serde_json::json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "promoter", "namespace": "promoter-system"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "promoter", "image": "promoter"}]}}}}},
                "status": {"lastSuccessfulTime": hour_ago, "lastScheduleTime": hour_ago}}),
        )
        .unwrap();
    let (code, out, err) = promoter(&env, &["status", "kyverno-rollout-auto", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("CronJob promoter-system/promoter last succeeded 1h"),
        "{err}"
    );
    assert!(
        err.contains("; a pass recorded a status change at ")
            && err.contains("if passes run elsewhere (Lambda, CI), --cronjob none"),
        "{err}"
    );
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["lastPass"]["lastSuccessfulTime"], hour_ago.as_str());
    let (_, wide, _) = promoter(&env, &["status", "-o", "wide", "--cronjob", "none"]);
    assert!(wide.contains("LAST PASS"), "{wide}");
}

/// `status NAME --watch`: reprints on change, exits 0 once complete; `--timeout` ends a wait that
/// does not settle with the phase's code.
#[tokio::test(flavor = "multi_thread")]
async fn status_watch_follows_a_rollout_to_the_end() {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let dir = std::env::temp_dir().join(format!("promoter-watch-{}", common::rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, env.server.kubeconfig_yaml("admin")).unwrap();
    let watch = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Nothing runs a pass: the timeout ends the watch, with "still progressing".
    let out = watch(&[
        "status",
        "kyverno-rollout-auto",
        "-w",
        "--timeout",
        "1s",
        "--poll-interval",
        "100ms",
    ])
    .wait_with_output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("timed out after 1s"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let mut child = watch(&[
        "status",
        "kyverno-rollout-auto",
        "--watch",
        "--timeout",
        "60s",
        "--poll-interval",
        "50ms",
    ]);
    // The lines as they come; the first pass runs once the watch has shown the start.
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let first = (0..2)
        .map(|_| rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap())
        .collect::<Vec<_>>();
    for _ in 0..40 {
        env.tick().await;
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
        if env
            .description("kyverno-rollout-auto", "production")
            .is_some_and(|d| d.starts_with("Successfully provisioned"))
        {
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    let lines: Vec<String> = first.into_iter().chain(rx.try_iter()).collect();
    let stdout = lines.join("\n");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(lines[0].starts_with("NAME"), "{stdout}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("NAME")).count(), 1);
    assert!(lines[1].contains("Pending"), "{stdout}");
    assert!(stdout.contains("Soaking"), "{stdout}");
    assert!(lines.last().unwrap().contains("production 3/3"), "{stdout}");
    assert!(lines.last().unwrap().contains("Complete"), "{stdout}");
    // As kubectl get -w: every line's columns under the header's, though the stage, phase and
    // times change width from line to line.
    let header = &lines[0];
    for column in ["STAGE", "PHASE", "NEXT", "AGE", "MESSAGE"] {
        // After the gap: "AGE" is in "STAGE" too.
        let at = header.find(&format!("  {column}")).unwrap() + 2;
        for l in &lines[1..] {
            assert!(
                l.get(..at).is_some_and(|s| s.ends_with("  ")) && !l[at..].starts_with(' '),
                "{column} not aligned:\n{stdout}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--request-timeout` as kubectl takes it (seconds, or a duration: `30s`, `1m`, `1d` in the one
/// grammar of every flag; `0` for none), before or after the subcommand.
#[tokio::test(flavor = "multi_thread")]
async fn request_timeout_takes_every_duration_form() {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    for t in ["1m", "30s", "1d", "1h30m", "1.5h", "30", "0"] {
        let (code, out, err) = promoter(&env, &["status", "--request-timeout", t]);
        assert_eq!(code, 0, "{t}: {err}");
        assert!(out.contains("kyverno-rollout-auto"), "{t}: {out}");
    }
    let (code, _, err) = promoter(&env, &["--request-timeout", "5x", "status"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--request-timeout: invalid duration \"5x\""),
        "{err}"
    );
}

/// A promotion or stage name that does not exist: kubectl's NotFound line and the existing name it
/// is a typo of; nothing is suggested for a name that is not a typo of any.
#[tokio::test(flavor = "multi_thread")]
async fn misspelt_names_get_a_did_you_mean() {
    let env = at_staging_awaiting_approval().await;
    let typo = "kyverno-prog-rollot-man";
    for args in [
        vec!["status", typo],
        vec!["explain", typo],
        vec!["approve", typo],
        vec!["pause", typo],
        vec!["resume", typo],
        vec!["step", typo, "--dry-run"],
    ] {
        let (code, _, err) = promoter(&env, &args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(
            err.trim(),
            format!(
                "Error from server (NotFound): clusterpromotions.config.projectsveltos.io \"{typo}\" not found; did you mean \"kyverno-prog-rollout-man\"?"
            ),
            "{args:?}"
        );
    }
    let (code, _, err) = promoter(
        &env,
        &["approve", "kyverno-prog-rollout-man", "--stage", "stagin"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"kyverno-prog-rollout-man has no stage "stagin"; did you mean "staging"?"#),
        "{err}"
    );
    let (code, _, err) = promoter(
        &env,
        &["plan", "kyverno-prog-rollout-man", "--approve", "stagin@2h"],
    );
    assert_eq!(code, 1);
    assert!(err.contains(r#"; did you mean "staging"?"#), "{err}");
    for args in [
        vec!["status", "nothing-like-it"],
        vec!["approve", "nothing-like-it"],
    ] {
        let (code, _, err) = promoter(&env, &args);
        assert_eq!(code, 1);
        assert!(
            err.contains("not found") && !err.contains("did you mean"),
            "{args:?}: {err}"
        );
    }
}
