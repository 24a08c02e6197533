//! Property tests of the parsers that read user input: Go durations, cron expressions, label
//! selectors and label syntax, manifests and listed objects. None may panic or wrap on any input,
//! and each agrees with an independent model. A small count runs in CI; a campaign runs with
//! `PROMOTER_FUZZ_CASES=<n> cargo test --release --test parser_properties`.

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use promoter::api::GoDuration;
use promoter::labels::{
    dns1123_subdomain_error, label_value_error, parse_selector, qualified_name_error,
    to_selector_string,
};
use promoter::window::CronSchedule;
use proptest::prelude::*;
use regex::Regex;
use std::sync::LazyLock;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROMOTER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// The API server's regular expressions (k8s.io/apimachinery pkg/util/validation, kubernetes
// commit 03014f486c86dbe8a7fbe275fe14250854aab219), the oracle for the hand-written checks.
static QUALIFIED_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap());
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").unwrap());
static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").unwrap()
});

fn subdomain_ok(s: &str) -> bool {
    s.len() <= 253 && SUBDOMAIN.is_match(s)
}

fn qualified_ok(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    let (prefix, name) = match parts[..] {
        [n] => (None, n),
        [p, n] => (Some(p), n),
        _ => return false,
    };
    prefix.is_none_or(|p| !p.is_empty() && subdomain_ok(p))
        && name.len() <= 63
        && QUALIFIED_NAME.is_match(name)
}

/// Text that is mostly label syntax, with the characters that break it.
fn label_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9._/-]{0,70}",
        "[a-z0-9.-]{0,300}",
        "[a-z0-9]{1,10}(\\.[a-z0-9-]{1,10}){0,3}/[A-Za-z0-9._-]{0,66}",
        any::<String>(),
    ]
}

const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn durations_never_panic(s in prop_oneof![
        "[-+]?([0-9]{0,25}(\\.[0-9]{0,40})?(ns|us|µs|μs|ms|s|m|h|d|x|)){1,4}",
        any::<String>(),
    ]) {
        let _ = GoDuration::parse(&s);
    }

    /// Segments with at most six fraction digits in s, m or h: Go's float64 scaling is exact there,
    /// so the result is plain integer arithmetic, and anything beyond 2^63-1 ns is rejected.
    #[test]
    fn durations_add_up_exactly(
        neg in any::<bool>(),
        segments in prop::collection::vec((0u64..10_000_000_000, prop::option::of(0u32..1_000_000), 5usize..8), 1..4),
    ) {
        let mut text = String::from(if neg { "-" } else { "" });
        let mut total: u128 = 0;
        for (int, frac, unit) in &segments {
            let (u, scale) = UNITS[*unit];
            text.push_str(&int.to_string());
            let mut value = u128::from(*int) * u128::from(scale);
            if let Some(f) = frac {
                let digits = format!("{f:06}");
                text.push('.');
                text.push_str(&digits);
                value += u128::from(*f) * u128::from(scale) / 1_000_000;
            }
            text.push_str(u);
            total += value;
        }
        let limit: u128 = if neg { 1 << 63 } else { (1 << 63) - 1 };
        let parsed = GoDuration::parse(&text);
        if total > limit {
            prop_assert!(parsed.is_err(), "{text} overflows and must be rejected");
        } else {
            let d = parsed.unwrap();
            prop_assert_eq!(d.as_str(), text.as_str());
            let want = if neg { 0 } else { total };
            prop_assert_eq!(d.to_std().as_nanos(), want, "{}", text);
        }
    }

    #[test]
    fn cron_never_panics_and_next_is_later_and_matches_again(
        fields in prop::collection::vec(prop_oneof![
            Just("*".to_string()),
            "[0-9]{1,2}",
            "[0-9]{1,2}-[0-9]{1,2}",
            "(\\*|[0-9]{1,2})/[0-9]{1,20}",
            "[0-9]{1,2}(,[0-9]{1,2}){1,3}",
            "(mon|tue|jan|feb|sun|MON)",
            any::<String>(),
        ], 5),
        minutes in 0i64..(10 * 366 * 24 * 60),
    ) {
        let expr = fields.join(" ");
        let t = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::minutes(minutes);
        if let Ok(s) = CronSchedule::parse(&expr, Tz::UTC)
            && let Some(next) = s.next_after(t)
        {
            prop_assert!(next > t, "{expr}: {next} after {t}");
            // The occurrence found is an occurrence: searching from just before it finds it.
            prop_assert_eq!(s.next_after(next - chrono::Duration::seconds(1)), Some(next));
            prop_assert!(s.last_at_or_before(next) == Some(next), "{}", expr);
        }
    }

    #[test]
    fn label_syntax_matches_the_api_servers_regexes(s in label_text()) {
        prop_assert_eq!(qualified_name_error(&s).is_none(), qualified_ok(&s), "key {:?}", s);
        prop_assert_eq!(
            label_value_error(&s).is_none(),
            s.len() <= 63 && LABEL_VALUE.is_match(&s),
            "value {:?}", s
        );
        prop_assert_eq!(dns1123_subdomain_error(&s).is_none(), subdomain_ok(&s), "subdomain {:?}", s);
    }

    #[test]
    fn selectors_never_panic_and_valid_ones_round_trip(
        s in prop_oneof![
            "[a-z!=(), <>]{0,40}",
            "([a-z]{1,5}(=|!=|==)[a-z]{0,5},){0,3}[a-z]{1,5}( in | notin )\\(([a-z]{1,3},){0,2}[a-z]{1,3}\\)",
            any::<String>(),
        ],
    ) {
        if let Ok(reqs) = parse_selector(&s) {
            let text = to_selector_string(&reqs);
            prop_assert_eq!(parse_selector(&text).unwrap(), reqs, "{} -> {}", s, text);
        }
    }

    /// Any JSON in a listed ClusterPromotion: decoding never panics, and fails with a field path.
    #[test]
    fn listed_objects_never_panic(v in json_value(), at in 0usize..6) {
        let mut doc = serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"stages": [{"name": "dev", "trigger": {"auto": {"delay": "5m"}}}]},
            "status": {"stages": [{"name": "dev"}]}
        });
        let pointer = [
            "/spec/stages/0/trigger/auto/delay",
            "/spec/stages/0/clusterSelector",
            "/spec/stages/0/trigger",
            "/spec/profileSpec",
            "/status/stages/0/lastStatusCheckTime",
            "/spec/stages/0/name",
        ][at];
        *doc.pointer_mut(pointer).unwrap_or(&mut serde_json::Value::Null) = v.clone();
        if let Some((parent, key)) = pointer.rsplit_once('/')
            && let Some(serde_json::Value::Object(m)) = doc.pointer_mut(parent)
        {
            m.insert(key.to_string(), v);
        }
        let _ = promoter::pass::observe::decode::<promoter::api::ClusterPromotion>(&doc);
        let _ = promoter::manifest::load_str(&serde_json::to_string(&doc).unwrap(), "fuzz.yaml");
    }

    #[test]
    fn manifests_never_panic(s in prop_oneof![
        any::<String>(),
        "(apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\n)?(metadata: \\{name: [a-z]{1,5}\\}\n)?(spec: \\{stages: \\[\\{name: [a-z.]{0,5}\\}\\]\\}\n)?(---\n)?[ -~\n]{0,40}",
    ]) {
        let _ = promoter::manifest::load_str(&s, "fuzz.yaml");
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        "[-+0-9.a-z µ]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
