//! One bad ClusterPromotion never stops the others: each bad input is stored next to a good
//! promotion, and the pass (end to end through the fake API server) completes the good one and
//! writes a clear error into the bad one's status.

mod common;

use common::Env;
use promoter::fake::cluster_promotion_type;
use promoter::pass::Phase;
use serde_json::{Value, json};

const FLEET: &[(&str, &str, &str)] = &[("dev", "dev1", "dev"), ("prod", "prod1", "prod")];

fn good() -> Value {
    json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "good"},
        "spec": {
            "profileSpec": {"helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/",
                "repositoryName": "kyverno", "chartName": "kyverno/kyverno", "chartVersion": "3.3.3",
                "releaseName": "kyverno", "releaseNamespace": "kyverno", "helmChartAction": "Install"}]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
                 "trigger": {"auto": {"delay": "1m"}}},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
            ]
        }
    })
}

/// Stores the object as the API server would have stored it (no validation beyond the CRD's).
fn seed(env: &Env, obj: Value) {
    env.server
        .store()
        .seed(&cluster_promotion_type(), obj)
        .unwrap();
}

fn raw(env: &Env, name: &str) -> Value {
    env.server
        .store()
        .get(&cluster_promotion_type(), "", name)
        .unwrap()
}

fn failure_messages(v: &Value) -> Vec<String> {
    v.pointer("/status/stages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("failureMessage")?.as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_delay_is_an_error_in_its_own_status_and_the_others_go_on() {
    let env = Env::new(FLEET).await;
    seed(&env, good());
    let mut bad = good();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["stages"][0]["trigger"]["auto"]["delay"] = json!("1d");
    seed(&env, bad);
    let mut done = false;
    for _ in 0..15 {
        let report = env.tick().await;
        let b = report.promotions.iter().find(|p| p.name == "bad").unwrap();
        assert_eq!(b.phase, Phase::Error, "{b:?}");
        if report
            .promotions
            .iter()
            .any(|p| p.name == "good" && p.phase == Phase::Complete)
        {
            done = true;
            break;
        }
    }
    assert!(done, "the good promotion completes");
    let b = raw(&env, "bad");
    assert_eq!(
        failure_messages(&b),
        [
            "cannot read this ClusterPromotion: spec.stages[0].trigger.auto.delay: invalid duration \"1d\""
        ]
    );
    assert!(
        b.pointer("/status/stages/0/currentStatusDescription")
            .and_then(Value::as_str)
            .unwrap()
            .starts_with("Blocked: ")
    );
    // Written once, then quiet.
    let writes = env
        .server
        .count(|r| r.name.as_deref() == Some("bad") && r.verb != "get" && r.verb != "list");
    assert_eq!(writes, 1);
    // The binary: the pass ran, one promotion is in error (exit 2); no response body on stderr.
    let (code, stdout, stderr) = common::promoter(&env, &["step"]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("bad: cannot read this ClusterPromotion"),
        "{stdout}"
    );
    assert!(!stderr.contains("\"items\""), "{stderr}");
    assert!(!stderr.contains("kyverno.github.io"), "{stderr}");
}
