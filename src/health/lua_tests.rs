use super::*;
use serde_json::json;
use std::time::Instant;

fn eval(script: &str, obj: Option<&Value>) -> Result<Outcome, String> {
    evaluate(script, obj, &BTreeMap::new(), Arc::new(BTreeMap::new()))
}

const DEPLOYMENT_CHECK: &str = r#"
function evaluate()
  local hs = {healthy = false, message = "available replicas not matching requested replicas"}
  if obj.status and obj.status.availableReplicas ~= nil and obj.status.availableReplicas == obj.spec.replicas then
    hs.healthy = true
  end
  return hs
end
"#;

#[test]
fn seed_003_deployment_check() {
    let ready = json!({"spec": {"replicas": 3}, "status": {"availableReplicas": 3}});
    let not_ready = json!({"spec": {"replicas": 3}, "status": {"availableReplicas": 1}});
    assert_eq!(
        eval(DEPLOYMENT_CHECK, Some(&ready)).unwrap(),
        Outcome {
            healthy: true,
            message: "available replicas not matching requested replicas".into()
        }
    );
    assert!(!eval(DEPLOYMENT_CHECK, Some(&not_ready)).unwrap().healthy);
    assert!(
        !eval(DEPLOYMENT_CHECK, Some(&json!({"spec": {"replicas": 3}})))
            .unwrap()
            .healthy
    );
}

const ISSUER_CHECK: &str = r#"
function evaluate()
  hs = {}
  hs.status = "Degraded"
  hs.message = "Missing Secret or ClusterIssuer not ready"
  local secret = getResource("v1", "Secret", "cert-manager", "cloudflare-api-token")
  local issuerReady = false
  if obj.status and obj.status.conditions then
    for _, cond in ipairs(obj.status.conditions) do
      if cond.type == "Ready" and cond.status == "True" then
        issuerReady = true
        break
      end
    end
  end
  if secret and issuerReady then
    hs.status = "Healthy"
    hs.message = "ClusterIssuer and Secret are ready"
  end
  return hs
end
"#;

#[test]
fn seed_003_issuer_check_with_four_argument_get_resource() {
    let refs = resource_refs(ISSUER_CHECK);
    assert_eq!(
        refs,
        vec![ResourceRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: "cert-manager".into(),
            name: "cloudflare-api-token".into()
        }]
    );
    let issuer = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let with_secret = Arc::new(BTreeMap::from([(
        refs[0].clone(),
        json!({"kind": "Secret", "data": {}}),
    )]));
    let ok = evaluate(
        ISSUER_CHECK,
        Some(&issuer),
        &BTreeMap::new(),
        with_secret.clone(),
    )
    .unwrap();
    assert_eq!(
        ok,
        Outcome {
            healthy: true,
            message: "ClusterIssuer and Secret are ready".into()
        }
    );
    let no_secret = evaluate(
        ISSUER_CHECK,
        Some(&issuer),
        &BTreeMap::new(),
        Arc::new(BTreeMap::new()),
    )
    .unwrap();
    assert!(!no_secret.healthy);
    assert_eq!(
        no_secret.message,
        "Missing Secret or ClusterIssuer not ready"
    );
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    assert!(
        !evaluate(
            ISSUER_CHECK,
            Some(&not_ready),
            &BTreeMap::new(),
            with_secret
        )
        .unwrap()
        .healthy
    );
    // Only literal calls are fetched.
    assert!(
        resource_refs("getResource(kind, 'Secret', 'a', 'b') getResource(\"v1\", \"X\", \"n\")")
            .is_empty()
    );
}

#[test]
fn helpers_behave_as_upstream() {
    let obj = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"note": "x"}}, "spec": {"n": 2, "list": [1, 2]}});
    let script = r#"
      local json = require("json")
      local strings = require("strings")
      function evaluate()
        local checks = {
          getLabel(obj, "app") == "web",
          getLabel(obj, "missing") == nil,
          getAnnotation(obj, "note") == "x",
          json.decode(json.encode(obj.spec)).n == 2,
          #json.decode('{"a":[1,2,3]}').a == 3,
          strings.contains("kyverno-latest", "latest"),
          strings.hasPrefix("v1.2.3", "v1"),
          strings.hasSuffix("a.yaml", ".yaml"),
          strings.split("a,b,c", ",")[2] == "b",
          strings.trim("--x--", "-") == "x",
          strings.trim("  y ") == "y",
          strings.toLower("ABC") == "abc" and strings.toUpper("abc") == "ABC",
          strings.replace("a-a-a", "a", "b", 2) == "b-b-a",
          strings.replace("a-a-a", "a", "b") == "b-b-b",
          base64Decode(base64Encode("hello")) == "hello",
          base64Encode("hello") == "aGVsbG8=",
          getResource({web = 1}, "web") == 1,
          type(os.time()) == "number",
        }
        for i, ok in ipairs(checks) do
          if not ok then return {healthy = false, message = "check " .. i .. " failed"} end
        end
        return {healthy = true, message = "all helpers ok"}
      end
    "#;
    assert_eq!(
        eval(script, Some(&obj)).unwrap(),
        Outcome {
            healthy: true,
            message: "all helpers ok".into()
        }
    );
    let metrics = BTreeMap::from([("error_rate".to_string(), 0.02)]);
    let m = evaluate(
        "function evaluate() return {healthy = obj == nil and metrics.error_rate < 0.05} end",
        None,
        &metrics,
        Arc::new(BTreeMap::new()),
    );
    assert!(m.unwrap().healthy, "metric-only checks run with obj nil");
}

#[test]
fn hostile_scripts_fail_cleanly_and_quickly() {
    let obj = json!({});
    let cases: &[(&str, &str)] = &[
        (
            "function evaluate() while true do end end",
            "instruction budget",
        ),
        (
            "function evaluate() local t = {} for i = 1, 1e9 do t[i] = i end end",
            "",
        ),
        (
            "function evaluate() return {healthy = string.rep('x', 1e9) ~= nil} end",
            "memory limit",
        ),
        (
            "function evaluate() os.execute('rm -rf /') return {healthy = true} end",
            "execute",
        ),
        (
            "function evaluate() io.open('/etc/passwd') return {healthy = true} end",
            "io",
        ),
        (
            "local x = require('os') function evaluate() return {healthy = true} end",
            "not available",
        ),
        (
            "local x = require('socket.core') function evaluate() return {healthy = true} end",
            "not available",
        ),
        (
            "function evaluate() return dofile('/etc/passwd') end",
            "dofile",
        ),
        ("function evaluate() return load('return 1')() end", "load"),
        ("function evaluate() return debug.getinfo(1) end", "debug"),
        (
            "function evaluate() return package.loadlib('x', 'y') end",
            "package",
        ),
        (
            "hs = {healthy = true}",
            "does not define a function evaluate()",
        ),
        (
            "function evaluate() return true end",
            "returned a boolean, not a table",
        ),
        (
            "function evaluate() return {healthy = 'yes'} end",
            "not a boolean",
        ),
        ("function evaluate( return", "script error"),
    ];
    for (script, expected) in cases {
        let started = Instant::now();
        let err = eval(script, Some(&obj)).expect_err(script);
        assert!(err.contains(expected), "{script}: {err}");
        assert!(
            started.elapsed().as_millis() < 2_000,
            "{script} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_missing_healthy_field_is_unhealthy() {
    let out = eval(
        "function evaluate() return {message = 'no verdict'} end",
        None,
    )
    .unwrap();
    assert_eq!(
        out,
        Outcome {
            healthy: false,
            message: "no verdict".into()
        }
    );
}

#[test]
fn a_reused_sandbox_isolates_evaluations() {
    // Counts in a global: with a fresh environment per evaluation it is 1 every time.
    let script = r#"
calls = (calls or 0) + 1
function evaluate()
  seen = (seen or 0) + 1
  return {healthy = calls == 1 and seen == 1, message = obj.metadata.name}
end
"#;
    let evaluator = Evaluator::new(script, &BTreeMap::new(), Arc::new(BTreeMap::new())).unwrap();
    for name in ["a", "b", "c"] {
        let out = evaluator
            .evaluate(Some(&json!({"metadata": {"name": name}})))
            .unwrap();
        assert!(out.healthy, "globals leaked into evaluation of {name}");
        assert_eq!(out.message, name);
    }
    // The sandbox's own functions serve every evaluation.
    let script = "local json = require('json')\nfunction evaluate() return {healthy = json.decode('[1]')[1] == 1 and getLabel(obj, 'a') == 'b'} end";
    let evaluator = Evaluator::new(script, &BTreeMap::new(), Arc::new(BTreeMap::new())).unwrap();
    for _ in 0..3 {
        let obj = json!({"metadata": {"labels": {"a": "b"}}});
        assert!(evaluator.evaluate(Some(&obj)).unwrap().healthy);
    }
}

#[test]
fn a_reused_sandbox_gives_each_evaluation_the_whole_budget() {
    // 30–60 % of the instruction budget per evaluation (2 to 4 VM instructions an iteration): five
    // in a row pass only if the budget is reset for each.
    let iterations = INSTRUCTION_BUDGET * 6 / 10 / 4;
    let script = format!(
        "function evaluate()\n  local n = 0\n  for i = 1, {iterations} do n = n + 1 end\n  return {{healthy = true}}\nend"
    );
    let evaluator = Evaluator::new(&script, &BTreeMap::new(), Arc::new(BTreeMap::new())).unwrap();
    for round in 0..5 {
        assert!(
            evaluator.evaluate(None).is_ok(),
            "evaluation {round} ran out of budget"
        );
    }
    let err = Evaluator::new(
        "function evaluate(",
        &BTreeMap::new(),
        Arc::new(BTreeMap::new()),
    )
    .err()
    .unwrap();
    assert!(err.starts_with("script error:"), "{err}");
}
