//! The notification settings: which transitions of which promotions go to which receivers.
//!
//! A ConfigMap holds the rules (key `config.yaml`), a Secret of the same name the URLs and tokens,
//! both in promoter's namespace (default `promoter-system/promoter-notifications`). No ConfigMap:
//! notifications are off. Neither can fail a pass: a problem is a warning and visible in `doctor`.

use super::transition::Transition;
use crate::labels::{LabelSelector, Requirement, matches_all};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// The ConfigMap key holding the settings.
pub const CONFIG_KEY: &str = "config.yaml";
pub const DEFAULT_NAMESPACE: &str = "promoter-system";
pub const DEFAULT_NAME: &str = "promoter-notifications";
/// `--notifications` / `PROMOTER_NOTIFICATIONS` when not given.
pub const DEFAULT_LOCATION: &str = "promoter-system/promoter-notifications";
/// A transition older than this is not sent (unless `maxAge` says otherwise).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(3600);
const MAX_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// One send waits at most this long (unless the receiver's `timeout` says less).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the ConfigMap and the Secret are: `NAMESPACE/NAME` (both have that name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub namespace: String,
    pub name: String,
}

impl Location {
    /// `NAMESPACE/NAME`, or `none` (notifications off).
    pub fn parse(text: &str) -> Result<Option<Location>, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        let invalid =
            || format!("{text:?}: expected NAMESPACE/NAME (e.g. {DEFAULT_LOCATION}) or none");
        let (namespace, name) = text.split_once('/').ok_or_else(invalid)?;
        if crate::labels::dns1123_subdomain_error(name).is_some()
            || crate::labels::dns1123_subdomain_error(namespace).is_some()
        {
            return Err(invalid());
        }
        Ok(Some(Location {
            namespace: namespace.into(),
            name: name.into(),
        }))
    }

    pub fn default_location() -> Location {
        Location {
            namespace: DEFAULT_NAMESPACE.into(),
            name: DEFAULT_NAME.into(),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The kind of receiver, which decides the body sent (see `body`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// promoter's own JSON body.
    Webhook,
    /// A Slack incoming webhook (`text` and blocks).
    Slack,
    /// A Microsoft Teams Workflows webhook (an Adaptive Card).
    Teams,
    /// CloudEvents 1.0, structured mode over HTTP.
    CloudEvents,
}

impl Kind {
    const NAMES: [(&'static str, Kind); 4] = [
        ("webhook", Kind::Webhook),
        ("slack", Kind::Slack),
        ("teams", Kind::Teams),
        ("cloudevents", Kind::CloudEvents),
    ];

    pub fn as_str(self) -> &'static str {
        Kind::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("webhook", |(n, _)| n)
    }
}

/// Where a receiver's URL comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlSource {
    /// Written in the ConfigMap (a URL that is no secret, e.g. an in-cluster service).
    Inline(String),
    /// A key of the Secret.
    Secret(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receiver {
    pub name: String,
    pub kind: Kind,
    pub url: UrlSource,
    /// Header name and the Secret key of its value.
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub receivers: Vec<String>,
    /// None: every transition.
    pub transitions: Option<BTreeSet<Transition>>,
    /// None: every promotion.
    pub selector: Option<Vec<Requirement>>,
}

/// Valid settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub receivers: Vec<Receiver>,
    pub rules: Vec<Rule>,
    pub max_age: Duration,
}

/// What is wrong in the settings, at a field path (`receivers[0].urlFrom.key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// `Problem`s as one line.
pub fn describe(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

// The document as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    receivers: Vec<ReceiverDoc>,
    #[serde(default)]
    rules: Vec<RuleDoc>,
    #[serde(default)]
    max_age: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReceiverDoc {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    url_from: Option<KeyRef>,
    #[serde(default)]
    headers_from: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRef {
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleDoc {
    receivers: Vec<String>,
    #[serde(default)]
    transitions: Option<Vec<String>>,
    #[serde(default)]
    promotion_selector: Option<LabelSelector>,
}

/// A field path as `serde_path_to_error` gives it, in the `a[0].b` form.
fn path_of(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            serde_path_to_error::Segment::Enum { variant } => out.push_str(variant),
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

/// A Secret key name (`ValidateSecret`'s `IsConfigMapKey`): letters, digits, `-`, `_`, `.`.
fn secret_key_error(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && key != "."
        && key != "..";
    (!ok).then(|| format!("{key:?} is not a valid Secret key (letters, digits, '-', '_' or '.')"))
}

/// An http(s) URL a request can be sent to, or why not.
pub fn check_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.trim().parse().map_err(|e| format!("not a URL: {e}"))?;
    match (uri.scheme_str(), uri.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(uri),
        _ => Err("not an http or https URL with a host".into()),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    crate::api::flag_duration::parse(text)?
        .to_std()
        .map_err(|e| format!("{text:?}: {e}"))
}

impl Config {
    /// Parses and checks `config.yaml`; every problem at its field path.
    pub fn parse(text: &str) -> Result<Config, Vec<Problem>> {
        let value: Value = match serde_saphyr::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                return Err(vec![Problem {
                    path: String::new(),
                    message: format!(
                        "invalid YAML: {}",
                        e.to_string().lines().next().unwrap_or_default()
                    ),
                }]);
            }
        };
        Config::from_value(&value)
    }

    /// [`Config::parse`] of a document already read as YAML or JSON.
    pub fn from_value(value: &Value) -> Result<Config, Vec<Problem>> {
        // An empty document is empty settings (nothing is sent).
        let value = if value.is_null() {
            serde_json::json!({})
        } else {
            value.clone()
        };
        let doc: Document = serde_path_to_error::deserialize(value).map_err(|e| {
            vec![Problem {
                path: path_of(e.path()),
                message: e.inner().to_string(),
            }]
        })?;
        let mut problems = Vec::new();
        let mut problem = |path: String, message: String| problems.push(Problem { path, message });
        let mut receivers = Vec::new();
        let mut names = BTreeSet::new();
        for (i, r) in doc.receivers.iter().enumerate() {
            let at = |field: &str| format!("receivers[{i}].{field}");
            if r.name.trim().is_empty() {
                problem(at("name"), "Required value".into());
            } else if !names.insert(r.name.clone()) {
                problem(at("name"), format!("Duplicate value: {:?}", r.name));
            }
            let kind = Kind::NAMES
                .iter()
                .find(|(n, _)| *n == r.kind)
                .map(|(_, k)| *k);
            if kind.is_none() {
                problem(
                    at("type"),
                    format!(
                        "Unsupported value: {:?}: supported values: \"webhook\", \"slack\", \"teams\", \"cloudevents\"",
                        r.kind
                    ),
                );
            }
            let url = match (&r.url, &r.url_from) {
                (Some(u), None) => match check_url(u) {
                    Ok(_) => Some(UrlSource::Inline(u.trim().to_string())),
                    Err(e) => {
                        problem(at("url"), e);
                        None
                    }
                },
                (None, Some(k)) => match secret_key_error(&k.key) {
                    None => Some(UrlSource::Secret(k.key.clone())),
                    Some(e) => {
                        problem(at("urlFrom.key"), e);
                        None
                    }
                },
                (Some(_), Some(_)) => {
                    problem(at("url"), "url and urlFrom are exclusive: give one".into());
                    None
                }
                (None, None) => {
                    problem(
                        at("urlFrom"),
                        "Required value: the URL, from a key of the Secret (urlFrom) or as url"
                            .into(),
                    );
                    None
                }
            };
            if !r.headers_from.is_empty()
                && !matches!(kind, Some(Kind::Webhook | Kind::CloudEvents))
            {
                problem(
                    at("headersFrom"),
                    format!(
                        "only webhook and cloudevents receivers send headers, not {}",
                        r.kind
                    ),
                );
            }
            let mut headers = Vec::new();
            for (header, key) in &r.headers_from {
                if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                    problem(
                        format!("receivers[{i}].headersFrom.{header}"),
                        format!("{header:?} is not a valid HTTP header name"),
                    );
                } else if let Some(e) = secret_key_error(key) {
                    problem(format!("receivers[{i}].headersFrom.{header}"), e);
                } else {
                    headers.push((header.clone(), key.clone()));
                }
            }
            let timeout = match r.timeout.as_deref().map(duration) {
                None => DEFAULT_TIMEOUT,
                Some(Ok(d)) if !d.is_zero() && d <= MAX_TIMEOUT => d,
                Some(Ok(_)) => {
                    problem(at("timeout"), "must be more than 0 and at most 10s".into());
                    DEFAULT_TIMEOUT
                }
                Some(Err(e)) => {
                    problem(at("timeout"), e);
                    DEFAULT_TIMEOUT
                }
            };
            if let (Some(kind), Some(url)) = (kind, url) {
                receivers.push(Receiver {
                    name: r.name.clone(),
                    kind,
                    url,
                    headers,
                    timeout,
                });
            }
        }
        let mut rules = Vec::new();
        for (i, r) in doc.rules.iter().enumerate() {
            if r.receivers.is_empty() {
                problem(
                    format!("rules[{i}].receivers"),
                    "Required value: at least one receiver".into(),
                );
            }
            for (j, name) in r.receivers.iter().enumerate() {
                if !names.contains(name) {
                    problem(
                        format!("rules[{i}].receivers[{j}]"),
                        format!("Not found: no receiver is named {name:?}"),
                    );
                }
            }
            let mut transitions = BTreeSet::new();
            for (j, t) in r.transitions.iter().flatten().enumerate() {
                match Transition::parse(t) {
                    Some(t) => {
                        transitions.insert(t);
                    }
                    None => problem(
                        format!("rules[{i}].transitions[{j}]"),
                        format!(
                            "Unsupported value: {t:?}: supported values: {}",
                            Transition::ALL
                                .iter()
                                .map(|t| format!("{:?}", t.as_str()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                }
            }
            let selector = match &r.promotion_selector {
                None => None,
                Some(s) => match s.requirements() {
                    Ok(reqs) => Some(reqs),
                    Err(e) => {
                        problem(format!("rules[{i}].promotionSelector"), e.to_string());
                        None
                    }
                },
            };
            rules.push(Rule {
                receivers: r.receivers.clone(),
                transitions: r.transitions.as_ref().map(|_| transitions),
                selector,
            });
        }
        let max_age = match doc.max_age.as_deref().map(duration) {
            None => DEFAULT_MAX_AGE,
            Some(Ok(d)) if !d.is_zero() && d <= MAX_MAX_AGE => d,
            Some(Ok(_)) => {
                problem("maxAge".into(), "must be more than 0 and at most 7d".into());
                DEFAULT_MAX_AGE
            }
            Some(Err(e)) => {
                problem("maxAge".into(), e);
                DEFAULT_MAX_AGE
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Config {
            receivers,
            rules,
            max_age,
        })
    }

    pub fn receiver(&self, name: &str) -> Option<&Receiver> {
        self.receivers.iter().find(|r| r.name == name)
    }

    /// The receivers a transition of a promotion with these labels goes to (every rule that
    /// selects both).
    pub fn routes(&self, labels: &BTreeMap<String, String>, t: Transition) -> BTreeSet<String> {
        self.rules
            .iter()
            .filter(|r| r.transitions.as_ref().is_none_or(|ts| ts.contains(&t)))
            .filter(|r| r.selector.as_ref().is_none_or(|s| matches_all(s, labels)))
            .flat_map(|r| r.receivers.iter().cloned())
            .filter(|name| self.receiver(name).is_some())
            .collect()
    }

    /// Whether some rule could send a transition of a promotion with these labels.
    pub fn wants(&self, labels: &BTreeMap<String, String>, t: Transition) -> bool {
        !self.routes(labels, t).is_empty()
    }

    /// The Secret keys each receiver reads: (receiver, key).
    pub fn secret_keys(&self) -> Vec<(&str, &str)> {
        self.receivers
            .iter()
            .flat_map(|r| {
                let url = match &r.url {
                    UrlSource::Secret(k) => Some((r.name.as_str(), k.as_str())),
                    UrlSource::Inline(_) => None,
                };
                url.into_iter()
                    .chain(r.headers.iter().map(|(_, k)| (r.name.as_str(), k.as_str())))
            })
            .collect()
    }
}

/// A receiver ready to send to: its URL and headers read from the Secret.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub name: String,
    pub kind: Kind,
    pub uri: http::Uri,
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub timeout: Duration,
}

/// Each receiver's endpoint, or why it cannot be sent to (a Secret key missing, a URL that is
/// not one). `secret` is the Secret's data (None: there is no Secret), named `secret_name` in
/// errors.
pub fn resolve(
    config: &Config,
    secret: Option<&BTreeMap<String, Vec<u8>>>,
    secret_name: &str,
) -> BTreeMap<String, Result<Endpoint, String>> {
    let value = |key: &str| -> Result<String, String> {
        let data = secret.ok_or_else(|| format!("Secret {secret_name} not found"))?;
        let bytes = data
            .get(key)
            .ok_or_else(|| format!("Secret {secret_name} has no key {key:?}"))?;
        String::from_utf8(bytes.clone())
            .map(|s| s.trim().to_string())
            .map_err(|_| format!("key {key:?} of Secret {secret_name} is not UTF-8 text"))
    };
    config
        .receivers
        .iter()
        .map(|r| {
            let endpoint = (|| {
                let url = match &r.url {
                    UrlSource::Inline(u) => u.clone(),
                    UrlSource::Secret(k) => value(k)?,
                };
                let uri = check_url(&url).map_err(|e| match &r.url {
                    // The URL is a secret: never in a message.
                    UrlSource::Secret(k) => format!("key {k:?} of Secret {secret_name}: {e}"),
                    UrlSource::Inline(_) => format!("url: {e}"),
                })?;
                let mut headers = Vec::new();
                for (name, key) in &r.headers {
                    let v = value(key)?;
                    let name = http::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name}: {e}"))?;
                    let mut v = http::HeaderValue::from_str(&v).map_err(|_| {
                        format!("key {key:?} of Secret {secret_name} is not a valid header value")
                    })?;
                    v.set_sensitive(true);
                    headers.push((name, v));
                }
                Ok(Endpoint {
                    name: r.name.clone(),
                    kind: r.kind,
                    uri,
                    headers,
                    timeout: r.timeout,
                })
            })();
            (r.name.clone(), endpoint)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
receivers:
- name: platform-slack
  type: slack
  urlFrom: {key: slack-url}
- name: audit
  type: cloudevents
  url: http://audit.tools.svc:8080/events
  headersFrom: {Authorization: token}
  timeout: 2s
rules:
- receivers: [platform-slack]
  transitions: [StageCompleted, AwaitingApproval, Failed, RolledBack, RolloutCompleted]
  promotionSelector: {matchLabels: {team: payments}}
- receivers: [audit]
maxAge: 30m
"#;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_documented_example_parses_and_routes() {
        let c = Config::parse(EXAMPLE).unwrap();
        assert_eq!(c.max_age, Duration::from_secs(1800));
        assert_eq!(c.receivers[0].kind, Kind::Slack);
        assert_eq!(c.receivers[0].timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.receivers[1].timeout, Duration::from_secs(2));
        let payments = labels(&[("team", "payments")]);
        assert_eq!(
            c.routes(&payments, Transition::StageCompleted),
            BTreeSet::from(["audit".to_string(), "platform-slack".to_string()])
        );
        assert_eq!(
            c.routes(&payments, Transition::StageStarted),
            BTreeSet::from(["audit".to_string()])
        );
        assert_eq!(
            c.routes(&labels(&[("team", "web")]), Transition::Failed),
            BTreeSet::from(["audit".to_string()])
        );
        assert_eq!(
            c.secret_keys(),
            vec![("platform-slack", "slack-url"), ("audit", "token")]
        );
        let empty = Config::parse("").unwrap();
        assert!(empty.routes(&payments, Transition::Failed).is_empty());
        assert_eq!(empty.max_age, DEFAULT_MAX_AGE);
    }

    #[test]
    fn every_problem_is_named_at_its_path() {
        let text = r#"
receivers:
- name: a
  type: pager
  urlFrom: {key: "bad key"}
- name: a
  type: slack
  url: ftp://x
  headersFrom: {Authorization: token}
- name: b
  type: webhook
  timeout: 1m
rules:
- receivers: [a, nobody]
  transitions: [StageCompleted, Exploded]
  promotionSelector: {matchExpressions: [{key: team, operator: Near}]}
maxAge: soon
"#;
        let problems = Config::parse(text).unwrap_err();
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "receivers[0].type",
                "receivers[0].urlFrom.key",
                "receivers[1].name",
                "receivers[1].url",
                "receivers[1].headersFrom",
                "receivers[2].urlFrom",
                "receivers[2].timeout",
                "rules[0].receivers[1]",
                "rules[0].transitions[1]",
                "rules[0].promotionSelector",
                "maxAge",
            ],
            "{problems:#?}"
        );
        assert!(problems[0].message.contains("\"pager\""), "{}", problems[0]);
        let unknown =
            Config::parse("receivers:\n- name: a\n  type: slack\n  uri: x\n").unwrap_err();
        assert_eq!(unknown[0].path, "receivers[0].uri");
        assert!(
            unknown[0].message.contains("unknown field `uri`"),
            "{unknown:?}"
        );
        assert!(
            Config::parse("receivers: [").unwrap_err()[0]
                .message
                .starts_with("invalid YAML")
        );
    }

    #[test]
    fn locations() {
        assert_eq!(Location::parse("none").unwrap(), None);
        assert_eq!(
            Location::parse(DEFAULT_LOCATION).unwrap(),
            Some(Location::default_location())
        );
        for bad in ["promoter-notifications", "a/b/c", "/x", "A/b"] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Location::default_location().to_string(), DEFAULT_LOCATION);
    }

    #[test]
    fn endpoints_come_from_the_secret_and_never_show_it() {
        let c = Config::parse(EXAMPLE).unwrap();
        let secret = BTreeMap::from([
            (
                "slack-url".to_string(),
                b"https://hooks.slack.com/services/T/B/XYZ\n".to_vec(),
            ),
            ("token".to_string(), b"Bearer s3cr3t".to_vec()),
        ]);
        let e = resolve(&c, Some(&secret), "promoter-system/promoter-notifications");
        let slack = e["platform-slack"].as_ref().unwrap();
        assert_eq!(slack.uri.host(), Some("hooks.slack.com"));
        let audit = e["audit"].as_ref().unwrap();
        assert_eq!(audit.headers[0].0.as_str(), "authorization");
        assert!(audit.headers[0].1.is_sensitive());
        let none = resolve(&c, None, "ns/s");
        assert_eq!(
            none["platform-slack"].as_ref().unwrap_err(),
            "Secret ns/s not found"
        );
        let wrong = BTreeMap::from([("slack-url".to_string(), b"not a url".to_vec())]);
        let e = resolve(&c, Some(&wrong), "ns/s");
        let err = e["platform-slack"].as_ref().unwrap_err();
        assert!(
            err.starts_with("key \"slack-url\" of Secret ns/s:") && !err.contains("not a url"),
            "{err}"
        );
        assert_eq!(
            e["audit"].as_ref().unwrap_err(),
            "Secret ns/s has no key \"token\""
        );
    }
}
