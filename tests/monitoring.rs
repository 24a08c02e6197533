//! The shipped monitoring files (cronjob/monitoring/) parse, and every series and field they name
//! is one that promoter or kube-state-metrics really produces.

use promoter::client::RequestCount;
use promoter::metrics::{HealthCount, PassMetrics, PromotionMetrics};
use promoter::pass::Phase;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn yaml(file: &str) -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cronjob/monitoring")
            .join(file),
    )
    .unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// The metric names promoter pushes (from a pass with one promotion, which has every family).
fn pushed_names() -> BTreeSet<String> {
    let m = PassMetrics {
        time: chrono::Utc::now(),
        succeeded: true,
        duration: std::time::Duration::from_secs(1),
        requests: RequestCount::default(),
        health: HealthCount::default(),
        promotions: vec![PromotionMetrics {
            name: "p".into(),
            phase: Phase::Complete,
            stage_index: Some(1),
            last_promotion_time: Some(chrono::Utc::now()),
            in_error: false,
            deferred: false,
            undecided: false,
            empty_stage: Some("s".into()),
            budgeted: Default::default(),
        }],
        notifications: Default::default(),
    };
    m.prometheus_text()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(String::from)
        .collect()
}

/// Series of kube-state-metrics' standard CronJob collector that the rules use.
const KSM: [&str; 1] = ["kube_cronjob_status_last_successful_time"];

fn identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_braces = 0;
    for c in expr.chars() {
        match c {
            '{' => in_braces += 1,
            '}' => in_braces -= 1,
            _ => {}
        }
        if in_braces == 0 && (c.is_ascii_alphanumeric() || c == '_') {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn every_alert_names_series_that_exist() {
    let rule = yaml("prometheusrule.yaml");
    assert_eq!(rule["kind"], "PrometheusRule");
    let pushed = pushed_names();
    let mut alerts = BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap();
            alerts.insert(r["alert"].as_str().unwrap().to_string());
            let series: Vec<String> = identifiers(expr)
                .into_iter()
                .filter(|i| i.starts_with("promoter_") || i.starts_with("kube_"))
                .collect();
            assert!(!series.is_empty(), "{expr}");
            for s in series {
                assert!(
                    pushed.contains(&s) || KSM.contains(&s.as_str()),
                    "{expr}: {s} is not produced"
                );
            }
            // Phase values in selectors (`phase="A"`, `phase=~"A|B"`) are phases promoter pushes.
            for (i, _) in expr.match_indices("phase=") {
                let rest = &expr[i + "phase=".len()..];
                let quoted = rest.trim_start_matches('~').trim_start_matches('"');
                let values = quoted.split('"').next().unwrap_or_default();
                for phase in values.split('|') {
                    assert!(
                        promoter::metrics::PHASES
                            .iter()
                            .any(|p| promoter::metrics::phase_name(*p) == phase),
                        "{expr}: no phase {phase}"
                    );
                }
            }
        }
    }
    for needed in [
        "PromoterStepperNotSucceeding",
        "PromoterCronJobNotSucceeding",
        "ClusterPromotionFailedOrBlocked",
        "ClusterPromotionAwaitingApproval",
        "ClusterPromotionRolledBack",
        "ClusterPromotionRollbackFailed",
    ] {
        assert!(alerts.contains(needed), "{needed}");
    }
}

#[test]
fn kube_state_metrics_paths_are_status_fields() {
    let crs = yaml("kube-state-metrics-clusterpromotion.yaml");
    let crd = serde_json::to_value(promoter::crd::cluster_promotion_crd()).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let resolve = |start: &Value, path: &[Value]| -> Value {
        let mut node = start.clone();
        for part in path {
            let field = part.as_str().unwrap();
            if field == "metadata" {
                return Value::Bool(true);
            }
            node = node["properties"][field].clone();
            assert!(!node.is_null(), "no field {field} in {path:?}");
        }
        node
    };
    for resource in crs["spec"]["resources"].as_array().unwrap() {
        assert_eq!(resource["groupVersionKind"]["kind"], "ClusterPromotion");
        for m in resource["metrics"].as_array().unwrap() {
            let each = &m["each"];
            let kind = each["type"].as_str().unwrap().to_lowercase();
            let body = &each[&kind];
            if let Some(path) = body["path"].as_array() {
                let node = resolve(schema, path);
                if let Some(value) = body["valueFrom"].as_array() {
                    resolve(&node["items"], value);
                }
                if let Some(labels) = body["labelsFromPath"].as_object() {
                    for p in labels.values() {
                        resolve(&node["items"], p.as_array().unwrap());
                    }
                }
            } else if let Some(labels) = body["labelsFromPath"].as_object() {
                for p in labels.values() {
                    resolve(schema, p.as_array().unwrap());
                }
            }
        }
    }
}

/// An alert says whether the stepper is down or a rollout needs a person (label `cause`): the
/// stepper's alerts name only series of the pass itself (a held promotion never fails a pass, so
/// it cannot fire them); the rollouts' only the per-promotion phase, and together they cover every
/// phase that waits for a person (but `Aborted`, which a person just did).
#[test]
fn alerts_tell_a_down_stepper_from_a_rollout_that_needs_a_person() {
    let rule = yaml("prometheusrule.yaml");
    let mut covered = BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            let alert = r["alert"].as_str().unwrap();
            let expr = r["expr"].as_str().unwrap();
            let series = identifiers(expr);
            match r["labels"]["cause"].as_str() {
                Some("stepper") => {
                    assert_eq!(group["name"], "promoter.stepper", "{alert}");
                    assert!(
                        series.iter().all(|s| !s.starts_with("promoter_promotion")),
                        "{alert}: a stepper alert on a promotion's state: {expr}"
                    );
                }
                Some("rollout") => {
                    assert_eq!(group["name"], "promoter.rollouts", "{alert}");
                    assert!(
                        series.contains(&"promoter_promotion_phase".to_string()),
                        "{expr}"
                    );
                    let values = expr
                        .split("phase=")
                        .nth(1)
                        .unwrap()
                        .trim_start_matches('~')
                        .trim_start_matches('"');
                    let values = values.split('"').next().unwrap_or_default();
                    covered.extend(values.split('|').map(String::from));
                }
                other => panic!("{alert}: cause {other:?}, not stepper or rollout"),
            }
        }
    }
    for p in promoter::pass::phase::Phase::ALL {
        if p.exit_code() == 5 && p != Phase::Aborted {
            assert!(covered.contains(p.as_str()), "no rollout alert for {p}");
        }
    }
}
