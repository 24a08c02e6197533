//! One bad ClusterPromotion never stops the others: each bad input is stored next to a good
//! promotion, and the pass (end to end through the fake API server) completes the good one and
//! writes a clear error into the bad one's status.

mod common;

use common::Env;
use promoter::fake::cluster_promotion_type;
use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
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
        assert_eq!(b.phase, Phase::Blocked, "{b:?}");
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
    // The binary: the pass ran, one promotion is in error (exit 2 for a CI gate on the rollouts);
    // no response body on stderr.
    let (code, stdout, stderr) = common::promoter(&env, &["step", "--fail-on", "promotions"]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("bad: cannot read this ClusterPromotion"),
        "{stdout}"
    );
    assert!(!stderr.contains("\"items\""), "{stderr}");
    assert!(!stderr.contains("kyverno.github.io"), "{stderr}");
}

/// The status write of an undecodable promotion refused because another writer got there first
/// (409) or the promotion went away (404) is a conflict, left to the next pass; any other refusal
/// is an error of this pass. Either way the next pass writes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_status_write_of_an_undecodable_promotion_is_a_conflict_or_an_error() {
    for (code, conflict) in [(409, true), (404, true), (500, false)] {
        let env = Env::new(FLEET).await;
        let mut bad = good();
        bad["metadata"]["name"] = json!("bad");
        bad["spec"]["stages"][0]["trigger"]["auto"]["delay"] = json!("1d");
        seed(&env, bad);
        env.server.inject(FaultRule::nth(
            RequestMatcher::verbs(&["patch"])
                .resource("clusterpromotions")
                .subresource("status")
                .name("bad"),
            1,
            FaultAction::Status(code),
        ));
        let report = env.tick().await;
        let b = report.promotions.iter().find(|p| p.name == "bad").unwrap();
        assert_eq!(
            (b.conflict.is_some(), b.error.is_some()),
            (conflict, !conflict),
            "{code}: {b:?}"
        );
        assert!(b.actions.is_empty(), "{code}: {b:?}");
        assert!(failure_messages(&raw(&env, "bad")).is_empty(), "{code}");
        let report = env.tick().await;
        let b = report.promotions.iter().find(|p| p.name == "bad").unwrap();
        assert_eq!(b.actions, ["write status"], "{code}: {b:?}");
        assert!(b.conflict.is_none() && b.error.is_none(), "{code}: {b:?}");
        assert_eq!(failure_messages(&raw(&env, "bad")).len(), 1, "{code}");
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus: mutation tables applied to a promotion like the good one, each run in its own world
// next to the good promotion.

/// What the API server (the upstream CRD) and promoter make of a mutated promotion.
#[derive(Clone, Debug)]
enum Expect {
    /// The CRD accepts it, promoter cannot use it: its status names this (a substring of a stage's
    /// failureMessage); `promoter lint` reports an error too.
    Error(&'static str),
    /// The CRD rejects it (type, enum, required field, CEL rule, list-map key): `promoter lint`
    /// reports an error, and stored anyway (written before a CRD upgrade), the pass isolates it.
    CrdRejects(&'static str),
    /// The status carries a time the API server stored (before its CRD validated it) but that is
    /// not RFC 3339; lint does not look at status. The first pass reports it in the status and
    /// removes the time in the same write (a real API server refuses a status write that keeps it
    /// in the atomic `status.stages`); from then on the promotion rolls out like the good one.
    Repaired(&'static str),
    /// Valid, even if unusual: it completes like the good one, and lint reports no error.
    Completes,
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Sets the value at a JSON pointer, creating missing objects on the way.
    Set(&'static str, Value),
    Remove(&'static str),
}

#[derive(Clone, Debug)]
struct Case {
    label: String,
    mutations: Vec<Mutation>,
    expect: Expect,
}

fn set(doc: &mut Value, pointer: &str, value: Value) {
    let mut cur = doc;
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if let Ok(idx) = part.parse::<usize>()
            && cur.is_array()
        {
            let arr = cur.as_array_mut().unwrap();
            while arr.len() <= idx {
                arr.push(json!({}));
            }
            if last {
                arr[idx] = value;
                return;
            }
            cur = &mut arr[idx];
        } else {
            if !cur.is_object() {
                *cur = json!({});
            }
            let obj = cur.as_object_mut().unwrap();
            if last {
                obj.insert(part.to_string(), value);
                return;
            }
            cur = obj.entry(part.to_string()).or_insert_with(|| json!({}));
        }
    }
}

fn remove(doc: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.remove(key);
        }
        Some(Value::Array(a)) => {
            a.remove(key.parse::<usize>().unwrap());
        }
        _ => {}
    }
}

/// The promotion every case mutates: like the good one, with its own release.
fn candidate() -> Value {
    let mut v = good();
    v["metadata"]["name"] = json!("bad");
    v["spec"]["profileSpec"]["helmCharts"][0]["releaseName"] = json!("other");
    v["spec"]["profileSpec"]["helmCharts"][0]["releaseNamespace"] = json!("other");
    v["spec"]["stages"][0]["trigger"] = json!({"auto": {}});
    v
}

fn case(label: impl Into<String>, mutations: Vec<Mutation>, expect: Expect) -> Case {
    Case {
        label: label.into(),
        mutations,
        expect,
    }
}

const AUTO_DELAY: &str = "/spec/stages/0/trigger/auto/delay";
const MANUAL: &str = "/spec/stages/0/trigger";

/// Durations the CRD stores (plain strings) and Go's `time.ParseDuration` rejects.
const BAD_DURATIONS: &[&str] = &[
    "5 minutes",
    "1d",
    "5x",
    "10 m",
    "",
    "5",
    "m",
    ".s",
    "-",
    "+",
    "-.s",
    "1h 30m",
    " 5m",
    "5m ",
    "\t5m",
    "5m\n",
    "5M",
    "5S",
    "5H",
    "1w",
    "1y",
    "PT5M",
    "5min",
    "5sec",
    "5mins",
    "1_000s",
    "1,5s",
    "1e3s",
    "0x10s",
    "+-5s",
    "--5s",
    "5mm",
    "1.5.5s",
    "5m-1s",
    "∞",
    "NaN",
    "５m",
    "5ｍ",
    "9223372036854775808ns",
    "-9223372036854775809ns",
    "2562048h",
    "2562047h47m16.854775808s",
    "18446744073709551616ns",
    "99999999999999999999s",
    "0.0",
    "00",
    "1hh",
    "ms5",
    "s",
];

/// Durations Go accepts that promoter must take too (short, so that the case completes quickly).
const GOOD_DURATIONS: &[&str] = &[
    "0",
    "-0",
    "+0",
    "-5m",
    "1s",
    "500ms",
    ".5s",
    "1.s",
    "1µs",
    "1μs",
    "2ns",
    "0.0000001h",
    "1.00000000000000000000000000001s",
    "1m0s",
    "0h0m30s",
    "-9223372036854775808ns",
];

/// Cron expressions the CRD stores (non-empty strings) and robfig's ParseStandard rejects.
const BAD_CRONS: &[&str] = &[
    "* * * *",
    "* * * * * *",
    "60 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 0 *",
    "* * * 13 *",
    "* * * * 7",
    "5-1 * * * *",
    "*/0 * * * *",
    "x * * * *",
    "@fortnightly",
    "@reboot",
    "CRON_TZ=Mars/Base * * * * *",
    "CRON_TZ= * * * * *",
    "CRON_TZ=UTC",
    "@every 5x",
    "@every",
    "*/-1 * * * *",
    "*/18446744073709551616 * * * *",
    "4294967296 * * * *",
    "1-2-3 * * * *",
    "*/ * * * *",
    "/5 * * * *",
    "1,,2 * * * *",
    "* * * JANUARY *",
    "* * * * MONDAY",
    "* * * * sun-mon-tue",
    " ",
    "\t",
];

/// Label keys the API server rejects (IsQualifiedName).
fn bad_keys() -> Vec<String> {
    let mut v: Vec<String> = [
        "env ",
        " env",
        "a/b/c",
        "/env",
        "env/",
        "Example.com/env",
        "-env",
        "env-",
        "env.",
        "_env",
        "e nv",
        "ünï",
        "env:1",
        "env=1",
        "env,1",
        "",
        "a..b/env",
        "env!",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(64));
    v.push(format!("{}/env", "a".repeat(254)));
    v
}

/// Label values the API server rejects (IsValidLabelValue).
fn bad_values() -> Vec<String> {
    let mut v: Vec<String> = [
        "dev ", " dev", "-dev", "dev-", ".dev", "dev.", "d v", "dév", "dev/x", "dev:x", "dev,x",
        "dev!",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(64));
    v
}

/// Stage names whose generated ClusterProfile name is not a valid name or label value.
fn bad_stage_names() -> Vec<String> {
    let mut v: Vec<String> = [
        "Dev", "DEV", "dev_1", "dev.", ".dev", "dev-", "d e v", "dév", "", "a..b", "dev/x",
        "dev:x", "dev!", "a.-b", "a-.b", "dev\n", "😀",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(60)); // bad-aaaa… is 64 characters
    v.push("a".repeat(300));
    v
}

fn corpus() -> Vec<Case> {
    use Expect::*;
    use Mutation::*;
    let mut out = Vec::new();
    for d in BAD_DURATIONS {
        out.push(case(
            format!("auto delay {d:?}"),
            vec![Set(AUTO_DELAY, json!(d))],
            Error("spec.stages[0].trigger.auto.delay: invalid duration"),
        ));
        out.push(case(
            format!("manual delay {d:?}"),
            vec![Set(
                MANUAL,
                json!({"manual": {"approved": true, "delay": d}}),
            )],
            Error("spec.stages[0].trigger.manual.delay: invalid duration"),
        ));
    }
    for d in GOOD_DURATIONS {
        out.push(case(
            format!("auto delay {d:?}"),
            vec![Set(AUTO_DELAY, json!(d))],
            Completes,
        ));
    }
    for v in [
        json!(5),
        json!(true),
        json!({"m": 5}),
        json!(["5m"]),
        json!(1.5),
    ] {
        out.push(case(
            format!("delay of JSON type {v}"),
            vec![Set(AUTO_DELAY, v)],
            CrdRejects("spec.stages[0].trigger.auto.delay: invalid type"),
        ));
    }
    for c in BAD_CRONS {
        for (bound, other) in [("from", "to"), ("to", "from")] {
            out.push(case(
                format!("window {bound} {c:?}"),
                vec![Set(
                    "/spec/stages/0/trigger/auto/promotionWindow",
                    json!({bound: c, other: "* * * * *"}),
                )],
                Error("spec.stages[0].trigger.auto.promotionWindow"),
            ));
        }
    }
    out.push(case(
        "window from empty",
        vec![Set(
            "/spec/stages/0/trigger/auto/promotionWindow",
            json!({"from": "", "to": "* * * * *"}),
        )],
        CrdRejects("spec.stages[0].trigger.auto.promotionWindow.from: must not be empty"),
    ));
    out.push(case(
        "window without to",
        vec![Set(
            "/spec/stages/0/trigger/auto/promotionWindow",
            json!({"from": "* * * * *"}),
        )],
        CrdRejects("missing field `to`"),
    ));
    out.push(case(
        "window from a number",
        vec![Set(
            "/spec/stages/0/trigger/auto/promotionWindow",
            json!({"from": 5, "to": "* * * * *"}),
        )],
        CrdRejects("promotionWindow.from: invalid type"),
    ));
    for k in bad_keys() {
        out.push(case(
            format!("matchLabels key {k:?}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchLabels": {k.clone(): "dev"}}),
            )],
            Error("spec.stages[0].clusterSelector.matchLabels: Invalid value"),
        ));
        out.push(case(
            format!("matchExpressions key {k:?}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchExpressions": [{"key": k, "operator": "Exists"}]}),
            )],
            Error("spec.stages[0].clusterSelector.matchExpressions[0].key: Invalid value"),
        ));
    }
    for v in bad_values() {
        out.push(case(
            format!("matchLabels value {v:?}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchLabels": {"env": v.clone()}}),
            )],
            Error("spec.stages[0].clusterSelector.matchLabels: Invalid value"),
        ));
        out.push(case(
            format!("matchExpressions value {v:?}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", v]}]}),
            )],
            Error("spec.stages[0].clusterSelector.matchExpressions[0].values[1]: Invalid value"),
        ));
    }
    for op in ["Equals", "in", "exists", "Gt", "Lt", "", "NotEquals", "In "] {
        out.push(case(
            format!("operator {op:?}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchExpressions": [{"key": "env", "operator": op, "values": ["dev"]}]}),
            )],
            Error("spec.stages[0].clusterSelector.matchExpressions[0]: unknown operator"),
        ));
    }
    for (op, values) in [
        ("In", json!([])),
        ("NotIn", json!([])),
        ("In", Value::Null),
        ("Exists", json!(["dev"])),
        ("DoesNotExist", json!(["dev"])),
    ] {
        let mut e = json!({"key": "env", "operator": op});
        if !values.is_null() {
            e["values"] = values.clone();
        }
        out.push(case(
            format!("operator {op} with values {values}"),
            vec![Set(
                "/spec/stages/0/clusterSelector",
                json!({"matchExpressions": [e]}),
            )],
            Error("spec.stages[0].clusterSelector.matchExpressions[0]: operator"),
        ));
    }
    for (label, sel, why) in [
        (
            "matchLabels value a number",
            json!({"matchLabels": {"env": 5}}),
            "invalid type",
        ),
        (
            "matchExpressions without key",
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            "missing field `key`",
        ),
        (
            "matchExpressions without operator",
            json!({"matchExpressions": [{"key": "env"}]}),
            "missing field `operator`",
        ),
        (
            "values a string",
            json!({"matchExpressions": [{"key": "env", "operator": "In", "values": "dev"}]}),
            "invalid type",
        ),
        (
            "matchLabels a list",
            json!({"matchLabels": ["env"]}),
            "invalid type",
        ),
        ("clusterSelector a string", json!("env=dev"), "invalid type"),
    ] {
        out.push(case(
            label,
            vec![Set("/spec/stages/0/clusterSelector", sel)],
            CrdRejects(why),
        ));
    }
    for sel in [
        json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "x.y_z-1"]}]}),
        json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod", ""]}]}),
        json!({"matchLabels": {"env": "dev"}, "matchExpressions": [{"key": "example.com/team", "operator": "DoesNotExist"}]}),
        json!({"matchExpressions": [{"key": "env", "operator": "Exists"}, {"key": "env", "operator": "NotIn", "values": ["prod"]}]}),
    ] {
        out.push(case(
            format!("valid selector {sel}"),
            vec![Set("/spec/stages/0/clusterSelector", sel)],
            Completes,
        ));
    }
    for n in bad_stage_names() {
        out.push(case(
            format!("stage name {n:?}"),
            vec![Set("/spec/stages/0/name", json!(n))],
            Error("spec.stages[0].name: generated ClusterProfile name"),
        ));
    }
    for n in [
        "eu.prod",
        "kyverno.v3",
        "v1.2.3",
        "a-b.c-d",
        "0",
        "x",
        "dev-1.eu-west-1",
        "-dev",
    ] {
        out.push(case(
            format!("stage name {n:?}"),
            vec![Set("/spec/stages/0/name", json!(n))],
            Completes,
        ));
    }
    for n in ["bad.v3", "bad.eu.prod", "b", "0bad"] {
        out.push(case(
            format!("promotion name {n:?}"),
            vec![Set("/metadata/name", json!(n))],
            Completes,
        ));
    }
    let long = "a".repeat(60);
    out.push(case(
        "promotion name of 60 characters",
        vec![Set("/metadata/name", json!(long))],
        Error("spec.stages[0].name: generated ClusterProfile name"),
    ));
    out.push(case(
        "preverification name too long",
        vec![
            // preverification-<45>-dev is 65 characters; <45>-dev is 49.
            Set("/metadata/name", json!("a".repeat(45))),
            Set(
                "/spec/stages/0/trigger/auto/preHealthCheckDeployment",
                json!([{"kind": "ConfigMap", "namespace": "default", "name": "check"}]),
            ),
        ],
        Error("generated ClusterProfile name \"preverification-"),
    ));
    for (label, mutations, why) in [
        (
            "empty trigger",
            vec![Set(MANUAL, json!({}))],
            "A trigger must have either",
        ),
        (
            "both triggers",
            vec![Set(MANUAL, json!({"auto": {}, "manual": {}}))],
            "A trigger must have either",
        ),
        (
            "approved a string",
            vec![Set(MANUAL, json!({"manual": {"approved": "yes"}}))],
            "invalid type",
        ),
        (
            "automaticReset a string",
            vec![Set(MANUAL, json!({"manual": {"automaticReset": "no"}}))],
            "invalid type",
        ),
        (
            "no stages",
            vec![Set("/spec/stages", json!([]))],
            "at least one stage",
        ),
        (
            "stages missing",
            vec![Remove("/spec/stages")],
            "missing field `stages`",
        ),
        (
            "stages an object",
            vec![Set("/spec/stages", json!({"name": "dev"}))],
            "invalid type",
        ),
        (
            "duplicate stage names",
            vec![Set("/spec/stages/1/name", json!("dev"))],
            "duplicate stage name",
        ),
        (
            "stage without name",
            vec![Remove("/spec/stages/0/name")],
            "missing field `name`",
        ),
        (
            "stage name a number",
            vec![Set("/spec/stages/0/name", json!(1))],
            "invalid type",
        ),
        (
            "preserve a string",
            vec![Set("/spec/preserveClusterProfilesOnDelete", json!("yes"))],
            "invalid type",
        ),
        (
            "preHealthCheckDeployment an object",
            vec![Set(
                "/spec/stages/0/trigger/auto/preHealthCheckDeployment",
                json!({"kind": "ConfigMap"}),
            )],
            "invalid type",
        ),
        (
            "postDelayHealthChecks an object",
            vec![Set(
                "/spec/stages/0/trigger/auto/postDelayHealthChecks",
                json!({"name": "x"}),
            )],
            "invalid type",
        ),
        (
            "spec missing",
            vec![Remove("/spec")],
            "missing field `spec`",
        ),
    ] {
        out.push(case(label, mutations, CrdRejects(why)));
    }
    const TIMES: &[&str] = &[
        "yesterday",
        "2026-02-16",
        "2026-02-16T06:00:00",
        "2026-02-16T06:00:00 Z",
        "1771221600",
        "",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-02-16T25:00:00Z",
        "2026-02-16T06:00Z",
    ];
    for t in TIMES {
        out.push(case(
            format!("status.lastPromotionTime {t:?}"),
            vec![
                Set("/status/currentStageName", json!("dev")),
                Set("/status/lastPromotionTime", json!(t)),
            ],
            Repaired("status.lastPromotionTime: invalid time"),
        ));
        for field in ["lastUpdateReconciledTime", "lastSuccessfulAppliedTime"] {
            out.push(case(
                format!("status.stages[0].{field} {t:?}"),
                vec![
                    Set("/status/currentStageName", json!("dev")),
                    Set("/status/stages", json!([{"name": "dev", field: t}])),
                ],
                Repaired("invalid time"),
            ));
        }
    }
    // A mistyped promoter.dev/ key is an error with the key it is a typo of; a key outside the
    // prefix is none of promoter's business; a hand-written `paused=false` pauses nothing.
    for (annotations, expect) in [
        (
            json!({"promoter.dev/progres-deadline": "2h"}),
            Error(
                "metadata.annotations[promoter.dev/progres-deadline]: Unsupported key: promoter knows the settings \"promoter.dev/progress-deadline\", \"promoter.dev/failure-policy\", \"promoter.dev/rollback-order\", \"promoter.dev/rollback-deadline\", \"promoter.dev/revision-history-limit\", \"promoter.dev/allow-empty-stages\", \"promoter.dev/failure-budget\" and its own records; did you mean \"promoter.dev/progress-deadline\"?",
            ),
        ),
        (
            json!({"promoter.dev/grant-dev": "x"}),
            Error("metadata.annotations[promoter.dev/grant-dev]: Unsupported key"),
        ),
        (json!({"example.com/progres-deadline": "2h"}), Completes),
        (json!({"promoter.dev/paused": "false"}), Completes),
        (json!({"promoter.dev/paused": "No"}), Completes),
    ] {
        out.push(case(
            format!("annotations {annotations}"),
            vec![Set("/metadata/annotations", annotations)],
            expect,
        ));
    }
    out
}

fn lint_errors(label: &str, obj: &Value) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!(
        "promoter-bad-input-{}-{}",
        std::process::id(),
        common::rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("case.yaml");
    // JSON is YAML: the document is exactly the object the case stores.
    std::fs::write(&path, serde_json::to_string(obj).unwrap()).unwrap();
    let out = promoter::ops::lint::lint(
        std::slice::from_ref(&path),
        None,
        chrono_tz::Tz::UTC,
        common::start_time(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = label;
    out.into_iter()
        .filter(|d| d.severity == promoter::ops::lint::Severity::Error)
        .map(|d| d.to_string())
        .collect()
}

/// Runs one case; `Err` describes how it failed.
async fn run_case(c: Case) -> Result<(), String> {
    let mut obj = candidate();
    for m in &c.mutations {
        match m {
            Mutation::Set(p, v) => set(&mut obj, p, v.clone()),
            Mutation::Remove(p) => remove(&mut obj, p),
        }
    }
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let lint = lint_errors(&c.label, &obj);
    match (&c.expect, lint.is_empty()) {
        (Expect::Error(_) | Expect::CrdRejects(_), true) => {
            return Err("promoter lint reports no error".into());
        }
        (Expect::Completes, false) => return Err(format!("promoter lint reports {lint:?}")),
        _ => {}
    }
    let env = Env::new(FLEET).await;
    seed(&env, good());
    // What the CRD rejects can only be stored from before a CRD upgrade (never validated since);
    // everything else must pass the served CRD as a real API server checks it. A status time
    // that is not RFC 3339 is refused too (`format: date-time`), so it also comes from before.
    let stored = if matches!(c.expect, Expect::CrdRejects(_) | Expect::Repaired(_)) {
        env.server
            .store()
            .seed_unvalidated(&cluster_promotion_type(), obj.clone())
    } else {
        env.server
            .store()
            .seed(&cluster_promotion_type(), obj.clone())
    };
    stored.map_err(|e| format!("the fake API server does not store it: {}", e.message))?;
    let has_stage = obj
        .pointer("/spec/stages/0/name")
        .is_some_and(Value::is_string);
    let mut good_done = false;
    let mut bad_done = false;
    for tick in 0..12 {
        let report = env.tick().await;
        let b = report
            .promotions
            .iter()
            .find(|p| p.name == name)
            .ok_or("the bad promotion is missing from the report")?;
        match &c.expect {
            Expect::Repaired(why) if tick == 0 => {
                if b.phase != Phase::Blocked || !b.summary.contains(why) {
                    return Err(format!("tick 0: phase {:?}: {}", b.phase, b.summary));
                }
                let messages = failure_messages(&raw(&env, &name));
                if !messages
                    .iter()
                    .any(|m| m.contains(why) && m.contains("promoter removed the unreadable"))
                {
                    return Err(format!("status failureMessages {messages:?} lack {why:?}"));
                }
            }
            Expect::Repaired(_) => {
                if b.phase == Phase::Blocked {
                    return Err(format!("tick {tick}: still in error: {}", b.summary));
                }
                bad_done |= b.phase == Phase::Complete;
            }
            Expect::Error(why) | Expect::CrdRejects(why) => {
                if b.phase != Phase::Blocked {
                    return Err(format!("tick {tick}: phase {:?}: {}", b.phase, b.summary));
                }
                if !b.summary.contains(why) {
                    return Err(format!(
                        "tick {tick}: summary {:?} lacks {why:?}",
                        b.summary
                    ));
                }
                if tick == 0 && has_stage {
                    let messages = failure_messages(&raw(&env, &name));
                    if !messages.iter().any(|m| m.contains(why)) {
                        return Err(format!("status failureMessages {messages:?} lack {why:?}"));
                    }
                }
            }
            Expect::Completes => bad_done |= b.phase == Phase::Complete,
        }
        good_done |= report
            .promotions
            .iter()
            .any(|p| p.name == "good" && p.phase == Phase::Complete);
        let want_bad = matches!(c.expect, Expect::Completes | Expect::Repaired(_));
        if good_done && (bad_done || !want_bad) && tick > 0 {
            return Ok(());
        }
    }
    Err(format!(
        "not done after 12 passes (good complete: {good_done}, bad complete: {bad_done})"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_of_bad_inputs_each_next_to_a_good_promotion() {
    use futures::StreamExt;
    let cases = corpus();
    assert!(cases.len() >= 300, "{} cases", cases.len());
    // PROMOTER_CORPUS_FILTER=<text> runs only the cases whose label contains it.
    let filter = std::env::var("PROMOTER_CORPUS_FILTER").unwrap_or_default();
    let cases: Vec<Case> = cases
        .into_iter()
        .filter(|c| c.label.contains(&filter))
        .collect();
    let started = std::time::Instant::now();
    let results: Vec<(String, Result<(), String>)> = futures::stream::iter(cases)
        .map(|c| async move {
            let label = c.label.clone();
            let expect = format!("{:?}", c.expect);
            let r = match tokio::spawn(run_case(c)).await {
                Ok(r) => r,
                Err(e) => Err(format!("panicked: {e}")),
            };
            (format!("{label} ({expect})"), r)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(l, r)| r.as_ref().err().map(|e| format!("{l}: {e}")))
        .collect();
    eprintln!(
        "{} cases, {} failed, {:?}",
        results.len(),
        failures.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Name ownership.

fn profile_raw(env: &Env, name: &str) -> Option<Value> {
    env.server
        .store()
        .get(&promoter::fake::cluster_profile_type(), "", name)
        .ok()
}

fn promotion_with(name: &str, stage: &str, env_label: &str) -> Value {
    let mut v = good();
    v["metadata"]["name"] = json!(name);
    v["spec"]["stages"] = json!([
        {"name": stage, "clusterSelector": {"matchLabels": {"env": env_label}}}
    ]);
    v
}

#[tokio::test]
async fn a_generated_name_claimed_twice_goes_to_the_older_promotion() {
    let env = Env::new(FLEET).await;
    // `a-b` + stage `c` and `a` + stage `b-c` both generate `a-b-c`; `a-b` is older.
    seed(&env, promotion_with("a-b", "c", "prod"));
    env.advance(chrono::Duration::minutes(1));
    seed(&env, promotion_with("a", "b-c", "dev"));
    seed(&env, good());
    let mut selectors = Vec::new();
    for _ in 0..8 {
        let report = env.tick().await;
        let a = report.promotions.iter().find(|p| p.name == "a").unwrap();
        assert_eq!(a.phase, Phase::Blocked, "{a:?}");
        assert!(a.conflict.is_none(), "{a:?}");
        if let Some(p) = profile_raw(&env, "a-b-c") {
            selectors.push(p["spec"]["clusterSelector"].clone());
            assert_eq!(
                p["metadata"]["labels"]["config.projectsveltos.io/promotionname"],
                "a-b"
            );
        }
    }
    assert!(
        selectors
            .iter()
            .all(|s| *s == json!({"matchLabels": {"env": "prod"}})),
        "the profile never flips between the two fleets: {selectors:?}"
    );
    assert_eq!(
        env.promotion("a-b")
            .unwrap()
            .status
            .unwrap()
            .current_stage_name
            .as_deref(),
        Some("c")
    );
    let report = env.pass().await;
    for n in ["a-b", "good"] {
        assert_eq!(
            report
                .promotions
                .iter()
                .find(|p| p.name == n)
                .unwrap()
                .phase,
            Phase::Complete,
            "{n}"
        );
    }
    let messages = failure_messages(&raw(&env, "a"));
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("the generated ClusterProfile name \"a-b-c\" is also generated by ClusterPromotion \"a-b\""),
        "{messages:?}"
    );
}

fn seed_profile(env: &Env, meta: Value) {
    env.server
        .store()
        .seed(
            &promoter::fake::cluster_profile_type(),
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                   "metadata": meta,
                   "spec": {"clusterSelector": {"matchLabels": {"env": "legacy"}}}}),
        )
        .unwrap();
}

#[tokio::test]
async fn a_hand_written_profile_with_the_generated_name_is_adopted() {
    let env = Env::new(FLEET).await;
    seed_profile(&env, json!({"name": "good-prod"}));
    seed(&env, good());
    let mut done = false;
    for _ in 0..12 {
        let report = env.tick().await;
        let g = &report.promotions[0];
        assert!(g.conflict.is_none() && g.error.is_none(), "{g:?}");
        if g.phase == Phase::Complete {
            done = true;
            break;
        }
    }
    assert!(done);
    let p = profile_raw(&env, "good-prod").unwrap();
    assert_eq!(
        p["spec"]["clusterSelector"],
        json!({"matchLabels": {"env": "prod"}})
    );
    assert_eq!(
        p["metadata"]["labels"]["config.projectsveltos.io/promotionname"],
        "good"
    );
    assert_eq!(p["metadata"]["ownerReferences"][0]["name"], "good");
}

#[tokio::test]
async fn a_profile_owned_by_someone_else_is_refused_with_a_clear_status() {
    for (label, meta, owner) in [
        (
            "another promotion's label",
            json!({"name": "good-prod", "labels": {"config.projectsveltos.io/promotionname": "other"}}),
            "ClusterPromotion \"other\"",
        ),
        (
            "another owner",
            json!({"name": "good-prod", "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1",
                   "kind": "Application", "name": "platform", "uid": "u1"}]}),
            "Application \"platform\"",
        ),
    ] {
        let env = Env::new(FLEET).await;
        seed_profile(&env, meta);
        seed(&env, good());
        let before = profile_raw(&env, "good-prod").unwrap();
        // A labelled profile is seen at once; an unlabelled one when the stage would create it
        // (fetched then: listing every ClusterProfile would cost every pass).
        let mut blocked = false;
        for _ in 0..10 {
            let report = env.tick().await;
            let g = &report.promotions[0];
            assert!(g.conflict.is_none() && g.error.is_none(), "{label}: {g:?}");
            assert!(!blocked || g.phase == Phase::Blocked, "{label}: {g:?}");
            blocked |= g.phase == Phase::Blocked;
        }
        assert!(blocked, "{label}");
        // Untouched by promoter (the simulated Sveltos adds its finalizer).
        let after = profile_raw(&env, "good-prod").unwrap();
        for field in ["/spec", "/metadata/labels", "/metadata/ownerReferences"] {
            assert_eq!(
                after.pointer(field),
                before.pointer(field),
                "{label}: {field}"
            );
        }
        let messages = failure_messages(&raw(&env, "good"));
        assert!(
            messages.iter().any(|m| m.contains(&format!(
                "ClusterProfile \"good-prod\" already exists and belongs to {owner}"
            ))),
            "{label}: {messages:?}"
        );
    }
}
