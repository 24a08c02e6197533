//! An invalid PromotionFreeze is refused at admission where its CRD can say so (kube-apiserver
//! enforces `enum`, `pattern` and `x-kubernetes-validations` CEL rules on every write, a
//! `date-time` string being a CEL timestamp), through kube's client against the fake API server
//! serving `promoter crd --own`; what it cannot refuse (a freeze stored before these rules) is
//! loud in `step`'s output; and the printer columns read well for a scheduled freeze.

mod common;

use common::Env;
use promoter::api::PromotionFreeze;
use serde_json::{Value, json};

/// The freeze as written, not through promoter's types (which would normalise its times to UTC).
fn freeze(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
        "metadata": {"name": name}, "spec": spec
    })
}

async fn create(env: &Env, f: &Value) -> Result<(), String> {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        env.client.clone(),
        &kube::api::ApiResource::erase::<PromotionFreeze>(&()),
    );
    let object: kube::api::DynamicObject =
        serde_json::from_value(f.clone()).map_err(|e| e.to_string())?;
    match api.create(&Default::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err(format!("{} {}", s.code, s.message)),
        Err(e) => Err(promoter::cli_error::line(&e)),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_schema_can_say_is_refused_at_admission() {
    let env = Env::new(&[]).await;
    let refused: &[(&str, Value, &str)] = &[
        (
            "near",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["prod"]}]}}),
            r#"spec.promotionSelector.matchExpressions[0].operator: Unsupported value: "Near": supported values: "In", "NotIn", "Exists", "DoesNotExist""#,
        ),
        (
            "backwards",
            json!({"reason": "x", "start": "2027-01-04T00:00:00Z", "end": "2026-12-20T00:00:00Z"}),
            "spec.end: Invalid value: \"object\": end must be after start",
        ),
        (
            "same-instant",
            json!({"reason": "x", "start": "2027-01-04T00:00:00Z", "end": "2027-01-04T01:00:00+01:00"}),
            "spec.end: Invalid value: \"object\": end must be after start",
        ),
        (
            "in-without-values",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": "tier", "operator": "In"}]}}),
            "spec.promotionSelector.matchExpressions[0].values: Invalid value: \"object\": must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            "exists-with-values",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]}}),
            "spec.promotionSelector.matchExpressions[0].values: Invalid value: \"object\": may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            "bad-key",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": "tier!", "operator": "Exists"}]}}),
            "spec.promotionSelector.matchExpressions[0].key: Invalid value: \"tier!\": spec.promotionSelector.matchExpressions[0].key in body should match",
        ),
        (
            "bad-label-value",
            json!({"reason": "x", "promotionSelector": {"matchLabels": {"tier": "prod us"}}}),
            "spec.promotionSelector.matchLabels.tier: Invalid value: \"prod us\"",
        ),
        (
            "too-many-requirements",
            json!({"reason": "x", "promotionSelector": {"matchExpressions":
                (0..=promoter::crd::MATCH_EXPRESSIONS_MAX).map(|i| json!({"key": format!("k{i}"), "operator": "Exists"})).collect::<Vec<_>>()}}),
            "spec.promotionSelector.matchExpressions: Too many: 65: must have at most 64 items",
        ),
        // Issue 31: a matchLabels key of the wrong syntax was accepted, then the freeze was
        // Invalid and held nothing.
        (
            "bad-label-key",
            json!({"reason": "x", "promotionSelector": {"matchLabels": {"bad key!": "prod"}}}),
            "spec.promotionSelector.matchLabels: Invalid value: \"object\": every key must be a label key:",
        ),
        (
            "long-label-prefix",
            json!({"reason": "x", "promotionSelector": {"matchLabels": {format!("{}/tier", "a".repeat(254)): "prod"}}}),
            "spec.promotionSelector.matchLabels: Invalid value: \"object\": every key must be a label key:",
        ),
        (
            "long-label-name",
            json!({"reason": "x", "promotionSelector": {"matchLabels": {"t".repeat(64): "prod"}}}),
            "spec.promotionSelector.matchLabels: Invalid value: \"object\": every key must be a label key:",
        ),
        (
            "too-many-labels",
            json!({"reason": "x", "promotionSelector": {"matchLabels":
                (0..=promoter::crd::MATCH_LABELS_MAX).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}}),
            "spec.promotionSelector.matchLabels: Too many: 65: must have at most 64 items",
        ),
        (
            "long-key-prefix",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": format!("{}/tier", "a".repeat(254)), "operator": "Exists"}]}}),
            "spec.promotionSelector.matchExpressions[0].key: Invalid value: \"object\": must be a label key:",
        ),
        (
            "long-key",
            json!({"reason": "x", "promotionSelector": {"matchExpressions": [{"key": format!("{}.example.com/tier", "a".repeat(310)), "operator": "Exists"}]}}),
            "spec.promotionSelector.matchExpressions[0].key: Too long: may not be more than 317 bytes",
        ),
    ];
    // Every case, then one verdict: each rule is seen failing on its own.
    let mut wrong = Vec::new();
    for (name, spec, want) in refused {
        match create(&env, &freeze(name, spec.clone())).await {
            Err(text) if text.starts_with("422 ") && text.contains(want) => {}
            Err(text) => wrong.push(format!("{name}: {text}\n  want: {want}")),
            Ok(()) => wrong.push(format!("{name}: accepted\n  want: {want}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for (name, spec) in [
        (
            "holidays",
            json!({"reason": "CAB-123", "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z",
                   "promotionSelector": {"matchLabels": {"example.com/tier": "prod", "app.kubernetes.io/name": "kyverno",
                                                         format!("{}/{}", "a".repeat(253), "t".repeat(63)): "", "Tier_2.x": "a"},
                     "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["infra", ""]},
                                          {"key": "canary", "operator": "DoesNotExist"}]}}),
        ),
        ("open-ended", json!({"reason": "incident"})),
        (
            "only-end",
            json!({"reason": "x", "end": "2027-01-04T00:00:00Z"}),
        ),
    ] {
        create(&env, &freeze(name, spec))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// A freeze the API server stored before these rules (or that a rule cannot catch) still holds
/// nothing: the pass marks it Invalid, and `step` says so on its own line, not only in the log.
#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_freeze_that_got_in_is_loud_in_step() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.server
        .store()
        .seed_unvalidated(
            &promoter::fake::promotion_freeze_type(),
            freeze(
                "backwards",
                json!({"reason": "holidays", "start": "2027-01-04T00:00:00Z", "end": "2026-12-20T00:00:00Z"}),
            ),
        )
        .unwrap();
    let (code, stdout, stderr) = common::promoter(&env, &["step"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.lines().any(|l| l
            == "PromotionFreeze backwards: Invalid, holds nothing: spec.end: Invalid value: \"2026-12-20T00:00:00Z\": must be after spec.start (2027-01-04T00:00:00Z)"),
        "{stdout}"
    );
    let (_, json_out, _) = common::promoter(&env, &["step", "-o", "json"]);
    let report: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(report["invalidFreezes"][0]["name"], "backwards", "{report}");
}

/// `kubectl get pfreeze`: a `date` column is printed as the age since that time, `<invalid>` for
/// one still ahead; the start and end are strings, as written, so a scheduled freeze reads well.
#[test]
fn printer_columns_read_well_for_a_scheduled_freeze() {
    let crd = promoter::crd::promotion_freeze_crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap();
    let of = |name: &str| {
        columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| (c.type_.clone(), c.json_path.clone()))
    };
    assert_eq!(of("Start"), Some(("string".into(), ".spec.start".into())));
    assert_eq!(of("End"), Some(("string".into(), ".spec.end".into())));
    assert_eq!(of("Phase"), Some(("string".into(), ".status.phase".into())));
    for c in &columns {
        if c.type_ == "date" {
            assert_eq!(c.json_path, ".metadata.creationTimestamp", "{}", c.name);
        }
    }
}

/// An empty selection reads as kubectl's: nothing on stdout (no lone header) and `No resources
/// found` on stderr, exit 0; json still prints the empty list.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_selection_says_no_resources_found() {
    let env = Env::new(&[]).await;
    for args in [
        &["status"][..],
        &["status", "-o", "wide"],
        &["freeze", "list"],
    ] {
        let (code, stdout, stderr) = common::promoter(&env, args);
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(
            stderr.lines().any(|l| l == "No resources found"),
            "{args:?}: {stderr}"
        );
    }
    let (code, stdout, stderr) = common::promoter(&env, &["freeze", "list", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), json!([]));
    assert!(!stderr.contains("No resources found"), "{stderr}");
}

/// kube-apiserver accepts a CRD only if each rule's estimated cost, times how often it may run,
/// fits its budget (k8s.io/apiextensions-apiserver cel_validation.go: the product of the
/// `maxItems`/`maxProperties` around the rule; unbounded: about a million for a small item). The
/// fake API server evaluates the rules but does not estimate their cost, so this checks what the
/// estimate needs of promoter's own CRDs: every rule runs a bounded number of times, and every
/// string a rule reads is bounded (`maxLength`) or a timestamp (`format: date-time`).
#[test]
fn every_rule_runs_a_bounded_number_of_times_over_bounded_values() {
    fn walk(node: &Value, path: &str, cardinality: Option<u64>, out: &mut Vec<String>) {
        let Some(map) = node.as_object() else {
            return;
        };
        if let Some(rules) = map
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            match cardinality {
                Some(n) if n <= 1000 => {}
                _ => out.push(format!("{path}: rules run {cardinality:?} times")),
            }
            for rule in rules {
                let text = rule["rule"].as_str().unwrap_or_default();
                for (field, schema) in map
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let read = text.contains(&format!("self.{field}"));
                    let bounded = schema.get("type") != Some(&json!("string"))
                        || schema.get("maxLength").is_some()
                        || schema.get("format") == Some(&json!("date-time"));
                    if read && !bounded {
                        out.push(format!("{path}.{field}: read by {text:?}, no maxLength"));
                    }
                }
                // A rule that iterates: only over a map's keys, `maxProperties` times per run
                // (kube-apiserver estimates a map key's size from the key type's MaxElements,
                // unset for a map's string keys: one regex per key).
                if text.contains(".all(") || text.contains(".exists(") {
                    let keys = map.get("maxProperties").and_then(Value::as_u64);
                    let is_map = map
                        .get("additionalProperties")
                        .is_some_and(Value::is_object);
                    match (is_map, keys, cardinality) {
                        (true, Some(k), Some(n))
                            if text.starts_with("self.all(k, ") && k * n <= 1000 => {}
                        _ => out.push(format!("{path}: {text}: iterates {keys:?} times per run")),
                    }
                }
            }
        }
        let times = |max: &str| {
            cardinality
                .zip(map.get(max).and_then(Value::as_u64))
                .map(|(a, b)| a * b)
        };
        for (name, child) in map
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            walk(child, &format!("{path}.{name}"), cardinality, out);
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{path}[]"), times("maxItems"), out);
        }
        if let Some(values) = map.get("additionalProperties").filter(|v| v.is_object()) {
            walk(values, &format!("{path}{{}}"), times("maxProperties"), out);
        }
    }
    let mut unbounded = Vec::new();
    let mut rules = 0;
    for crd in promoter::crd::own_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        rules += crd.to_string().matches("\"rule\"").count();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let name = crd["metadata"]["name"].as_str().unwrap();
            walk(
                &version["schema"]["openAPIV3Schema"],
                name,
                Some(1),
                &mut unbounded,
            );
        }
    }
    assert!(rules >= 3, "the freeze's rules are in its CRD");
    assert!(unbounded.is_empty(), "{}", unbounded.join("\n"));
}

/// `freeze create` writes the new freeze's status at once, as the pass would (its phase for
/// `kubectl get pfreeze`, and for an active one the promotions it holds from now on), so that the
/// columns read well before any pass ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_created_freeze_shows_its_phase_before_any_pass() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    for args in [
        &["freeze", "create", "incident", "--reason", "INC-1"][..],
        &[
            "freeze", "create", "later", "--reason", "r", "--start", "1h",
        ],
    ] {
        let (code, stdout, stderr) = common::promoter(&env, args);
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
    }
    let api: kube::Api<PromotionFreeze> = kube::Api::all(env.client.clone());
    let status = |name: &'static str| {
        let api = api.clone();
        async move { api.get(name).await.unwrap().status.unwrap_or_default() }
    };
    let active = status("incident").await;
    assert_eq!(
        active.phase.map(|p| p.as_str()),
        Some("Active"),
        "{active:?}"
    );
    assert_eq!(
        active.held,
        Some(vec!["kyverno-rollout-auto".to_string()]),
        "{active:?}"
    );
    let later = status("later").await;
    assert_eq!(
        later.phase.map(|p| p.as_str()),
        Some("Scheduled"),
        "{later:?}"
    );
    assert_eq!(later.held, None, "{later:?}");
}
