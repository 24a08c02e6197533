//! A stage's failure budget on the fake world, end to end (real passes against the fake API server
//! and the simulated Sveltos): a 20-cluster production stage with `production=10%` passes with two
//! failing clusters, named in the status, `explain`, an Event and a notification, and holds with
//! three; a new revision starts with the whole budget.

mod common;

use common::Env;
use promoter::api::ClusterPromotion;
use promoter::fake::webhook::WebhookReceiver;
use promoter::notify::Location;
use promoter::pass::{ChecksNotEvaluated, PassOptions, Phase, run_pass};
use serde_json::{Value, json};

const NAME: &str = "kyverno-budget";

fn promotion(version: &str) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": NAME, "annotations": {"promoter.dev/failure-budget": "production=10%"}},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [{
                "repositoryURL": "https://kyverno.github.io/kyverno/", "repositoryName": "kyverno",
                "chartName": "kyverno/kyverno", "chartVersion": version,
                "releaseName": "kyverno-latest", "releaseNamespace": "kyverno", "helmChartAction": "Install"}]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {}}},
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"auto": {}}}
            ]
        }
    }))
    .unwrap()
}

/// dev01, and 20 production clusters `prod/prod01` … `prod/prod20`.
async fn fleet() -> Env {
    let names: Vec<String> = (1..=20).map(|i| format!("prod{i:02}")).collect();
    let mut clusters = vec![("dev", "dev01", "dev")];
    clusters.extend(names.iter().map(|n| ("prod", n.as_str(), "prod")));
    Env::new(&clusters).await
}

/// One minute of the world, with notifications.
async fn tick(env: &Env) -> promoter::pass::PassReport {
    let opts = PassOptions {
        dry_run: false,
        selector: None,
        default_tz: chrono_tz::Tz::UTC,
        now: env.now(),
        notifications: Some(Location::default_location()),
    };
    let report = run_pass(&env.client, &ChecksNotEvaluated, &opts)
        .await
        .unwrap();
    env.addon.reconcile(&env.server, env.now());
    env.advance(chrono::Duration::minutes(1));
    report
}

fn failing(env: &mut Env, clusters: &[&str], breaks: &str) {
    env.addon.failing.clear();
    env.addon.failing_only.clear();
    for c in clusters {
        let key = format!("prod/{c}");
        env.addon.failing.insert(key.clone(), common::start_time());
        env.addon.failing_only.insert(key, breaks.into());
    }
}

async fn until_settled(env: &Env) -> (Phase, String) {
    let mut last = (Phase::Pending, String::new());
    for _ in 0..12 {
        let report = tick(env).await;
        let r = report.promotions.iter().find(|r| r.name == NAME).unwrap();
        last = (r.phase, r.summary.clone());
        if matches!(r.phase, Phase::Complete | Phase::Failed) {
            break;
        }
    }
    last
}

fn status_json(env: &Env) -> Value {
    let (code, out, err) = common::promoter(env, &["status", NAME, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    if v.is_array() { v[0].clone() } else { v }
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_clusters_at_ten_percent_pass_with_two_failing_and_hold_with_three() {
    let mut env = fleet().await;
    let receiver = WebhookReceiver::start().await.unwrap();
    common::notification_rules(
        &env,
        &format!(
            "receivers:\n- name: hook\n  type: webhook\n  url: {}\nrules:\n- receivers: [hook]\n",
            receiver.url("/hook")
        ),
    );
    // Revision 3.5.2 breaks on prod01 and prod02.
    failing(&mut env, &["prod01", "prod02"], "3.5.2");
    env.apply_promotion(&promotion("3.5.2"));
    let (phase, summary) = until_settled(&env).await;
    assert_eq!(phase, Phase::Complete, "{summary}");

    // The status names both, with why.
    let row = status_json(&env);
    let named: Vec<(String, String)> = row["budgeted"]
        .as_array()
        .expect("budgeted clusters in status")
        .iter()
        .map(|b| {
            (
                b["stage"].as_str().unwrap().to_string(),
                b["cluster"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("production".to_string(), "prod/prod01".to_string()),
            ("production".to_string(), "prod/prod02".to_string())
        ]
    );
    let message = row["message"].as_str().unwrap();
    assert!(
        message.contains("counted against the failure budget: stage production: prod/prod01 (cluster prod/prod01: feature Helm Failed: deployment failed (simulated)); prod/prod02 ("),
        "{message}"
    );
    // explain.
    let (code, out, err) = common::promoter(&env, &["explain", NAME]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("  failure budget: 10% (2 of 20 clusters); counted in this run: 2\n"),
        "{out}"
    );
    assert!(
        out.contains("    prod/prod01 (counted against the failure budget until it runs the revision: cluster prod/prod01: feature Helm Failed"),
        "{out}"
    );
    // The Event, once.
    let spent: Vec<String> = common::events_of(&env, NAME)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailureBudgetSpent"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(spent.len(), 1, "{spent:?}");
    assert!(
        spent[0].starts_with(
            "Stage production: 2 of the failure budget 10% (2 of 20 clusters) spent: prod/prod01 ("
        ),
        "{}",
        spent[0]
    );
    // The notification.
    let notified: Vec<Value> = receiver
        .received()
        .iter()
        .filter(|r| r.path == "/hook" && r.accepted)
        .map(|r| r.json())
        .filter(|b| b["transition"] == "FailureBudgetSpent")
        .collect();
    assert_eq!(notified.len(), 1, "{notified:?}");
    assert_eq!(notified[0]["stage"], "production");
    assert_eq!(notified[0]["message"].as_str(), Some(spent[0].as_str()));

    // A new revision that breaks on three: it starts with the whole budget, and holds.
    failing(&mut env, &["prod01", "prod05", "prod06"], "3.5.3");
    env.apply_promotion(&promotion("3.5.3"));
    let (phase, summary) = until_settled(&env).await;
    assert_eq!(phase, Phase::Failed, "{summary}");
    assert!(
        summary.contains("3 clusters failing, more than the failure budget of 10% (2 of 20 clusters): prod/prod01"),
        "{summary}"
    );
    assert_eq!(env.current_stage(NAME).as_deref(), Some("production"));
    assert!(
        status_json(&env).get("budgeted").is_none(),
        "the new run counted nothing: the old run's clusters are not named"
    );

    // A revision that breaks on two others: a full budget again; prod01 runs it and is fine.
    failing(&mut env, &["prod05", "prod06"], "3.5.4");
    env.apply_promotion(&promotion("3.5.4"));
    let (phase, summary) = until_settled(&env).await;
    assert_eq!(phase, Phase::Complete, "{summary}");
    let clusters: Vec<String> = status_json(&env)["budgeted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["cluster"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(clusters, ["prod/prod05", "prod/prod06"]);
}
