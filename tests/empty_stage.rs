//! A stage that selects no cluster, end to end: the pass holds the rollout there (Blocked), and
//! `status`, `explain`, `step -o json` and the Events say which stage and why; the annotation
//! `promoter.dev/allow-empty-stages` lets it pass as upstream's does.

mod common;

use common::Env;
use promoter::api::ClusterPromotion;
use promoter::pass::Phase;

const NAME: &str = "kyverno-rollout-auto";

/// The blog's automated rollout with a typo in staging's selector.
fn typo() -> ClusterPromotion {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-auto.yaml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("env: staging", "env: stagin");
    let docs = promoter::manifest::load_str(&text, "typo.yaml").unwrap();
    docs[0].promotion().unwrap().clone()
}

async fn lab() -> Env {
    Env::new(&[
        ("dev", "dev01", "dev"),
        ("staging", "staging", "staging"),
        ("prod", "prod", "prod"),
    ])
    .await
}

const MESSAGE: &str = "stage staging selects no cluster: clusterSelector env=stagin: none of the 3 clusters of the inventory matches (nearest labels: env=staging (1 cluster)); correct the selector, or let the stage pass empty as Sveltos does with the annotation promoter.dev/allow-empty-stages: \"staging=true\"";

#[tokio::test(flavor = "multi_thread")]
async fn a_typo_in_a_selector_holds_the_rollout_and_every_tool_says_so() {
    let env = lab().await;
    env.apply_promotion(&typo());
    let mut last = None;
    for _ in 0..15 {
        last = Some(env.tick().await);
    }
    let report = last.unwrap();
    let r = report.promotions.iter().find(|r| r.name == NAME).unwrap();
    assert_eq!(r.phase, Phase::Blocked, "{}", r.summary);
    assert_eq!(r.empty_stage.as_deref(), Some("staging"));
    assert_eq!(r.summary, format!("blocked: {MESSAGE}"));
    assert_eq!(env.current_stage(NAME).as_deref(), Some("staging"));
    assert!(
        env.profile(&format!("{NAME}-production")).is_none(),
        "production never gets what no earlier stage ran"
    );
    // The Event, once.
    let blocked: Vec<String> = common::events_of(&env, NAME)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Blocked"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(
        blocked,
        [format!("ClusterPromotion {NAME} is blocked: {MESSAGE}")]
    );
    // status
    let (code, out, err) = common::promoter(&env, &["status", NAME, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = if status.is_array() {
        status[0].clone()
    } else {
        status
    };
    assert_eq!(row["phase"], "Blocked", "{row}");
    assert_eq!(row["message"], MESSAGE, "{row}");
    let (code, out, _) = common::promoter(&env, &["status", NAME, "--exit-code"]);
    assert_eq!(code, 5, "held for a person: {out}");
    // explain: the stage, and the policy.
    let (code, out, err) = common::promoter(&env, &["explain", NAME]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "  selects no cluster: holds the rollout when reached: {MESSAGE}"
        )),
        "{out}"
    );
    // step -o json
    let (code, out, err) = common::promoter(&env, &["step", "--dry-run", "-o", "json"]);
    assert_eq!(code, 0, "{err}{out}");
    let step: serde_json::Value = serde_json::from_str(&out).unwrap();
    let p = step["promotions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == NAME)
        .unwrap();
    assert_eq!(p["emptyStage"], "staging", "{p}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_annotation_lets_an_empty_stage_pass_as_upstreams() {
    let env = lab().await;
    let mut p = typo();
    p.metadata.annotations = Some(
        [(
            "promoter.dev/allow-empty-stages".to_string(),
            "staging=true".to_string(),
        )]
        .into(),
    );
    env.apply_promotion(&p);
    let mut last = None;
    for _ in 0..25 {
        last = Some(env.tick().await);
    }
    let report = last.unwrap();
    let r = report.promotions.iter().find(|r| r.name == NAME).unwrap();
    assert_eq!(r.phase, Phase::Complete, "{}", r.summary);
    assert!(
        env.description(NAME, "staging")
            .is_some_and(|d| d.starts_with("Successfully provisioned")),
        "{:?}",
        env.description(NAME, "staging")
    );
}
