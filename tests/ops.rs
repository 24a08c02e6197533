//! `status`, `explain`, `approve`, `pause`/`resume` and `completions`, through the real binary.
//! (The environment's clock is virtual; these commands read the real one, so times are not asserted.)

mod common;

use common::{Env, promoter};

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
        manual.contains("staging 2/3") && manual.contains("Awaiting approval"),
        "{manual}"
    );
    assert!(out.contains("core-payment-processor-ci"));
    let (code, _, _) = promoter(&env, &["status", "kyverno-prog-rollout-man", "--exit-code"]);
    assert_eq!(code, 4, "awaiting approval");
    let (code, out, _) = promoter(&env, &["status", "kyverno-prog-rollout-man", "-o", "json"]);
    assert_eq!(code, 0);
    let row: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(row["phase"], "Awaiting approval", "one NAME, one object");
    let (_, wide, _) = promoter(&env, &["status", "-o", "wide"]);
    assert!(wide.contains("NEXT PASS"));
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
    promoter(&env, &["resume", "kyverno-rollout-auto"]);
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
