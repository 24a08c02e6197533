//! Kubernetes label selectors: the `LabelSelector` API type and the string form of list calls,
//! reduced to one list of requirements so that the decision and the fake API server match labels
//! the same way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// `metav1.LabelSelector` as Sveltos embeds it in `clusterSelector` (atomic map type).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "matchExpressions[{index}]: unknown operator {operator:?} (want In, NotIn, Exists or DoesNotExist)"
    )]
    UnknownOperator { index: usize, operator: String },
    #[error("matchExpressions[{index}]: operator {operator} needs {need} values")]
    Values {
        index: usize,
        operator: String,
        need: &'static str,
    },
    #[error("invalid label selector {0:?}")]
    Syntax(String),
    /// A key or value the API server would reject: such a selector can never match anything.
    #[error("{path}: Invalid value: {value:?}: {why}")]
    Invalid {
        path: String,
        value: String,
        why: String,
    },
}

// Label syntax as the API server validates it: k8s.io/apimachinery `pkg/util/validation`
// (IsQualifiedName, IsValidLabelValue, IsDNS1123Subdomain) and `pkg/apis/meta/v1/validation`
// (ValidateLabelSelector), kubernetes/kubernetes commits 03014f486c86dbe8a7fbe275fe14250854aab219
// and 046d201c45cebd19eb1fc4612426761c64802825. libsveltos matches clusters through
// `metav1.LabelSelectorAsSelector`, whose `labels.NewRequirement` applies the same key and value
// rules, so a selector that breaks them selects nothing upstream either.

const NAME_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: the name part of a qualified name, and a non-empty
/// label value.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (IsDNS1123Subdomain checks only the total length).
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// IsDNS1123Subdomain: at most 253 characters, dot-separated DNS-1123 labels (lowercase).
pub fn dns1123_subdomain_error(s: &str) -> Option<String> {
    if s.len() > SUBDOMAIN_MAX {
        return Some(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !s.split('.').all(is_dns1123_label) {
        return Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into());
    }
    None
}

/// IsQualifiedName: `[prefix/]name`, prefix a DNS-1123 subdomain, name at most 63 characters.
pub fn qualified_name_error(key: &str) -> Option<String> {
    let name = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Some("prefix part must be non-empty".into());
            }
            if let Some(e) = dns1123_subdomain_error(prefix) {
                return Some(format!("prefix part {e}"));
            }
            name
        }
        _ => {
            return Some("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into());
        }
    };
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > NAME_MAX {
        return Some(format!(
            "name part must be no more than {NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        return Some("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into());
    }
    None
}

/// IsValidLabelValue: empty, or at most 63 characters of `[-A-Za-z0-9_.]`, alphanumeric at both ends.
pub fn label_value_error(value: &str) -> Option<String> {
    if value.len() > NAME_MAX {
        return Some(format!("must be no more than {NAME_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        return Some("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into());
    }
    None
}

fn check_key(path: String, key: &str) -> Result<(), SelectorError> {
    match qualified_name_error(key) {
        Some(why) => Err(SelectorError::Invalid {
            path,
            value: key.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

fn check_value(path: String, value: &str) -> Result<(), SelectorError> {
    match label_value_error(value) {
        Some(why) => Err(SelectorError::Invalid {
            path,
            value: value.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

impl Requirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    /// Whether a label of value `value` (`None`: absent) satisfies this requirement; for callers
    /// that hold labels in another shape (JSON objects) than a map.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match &self.op {
            Op::In(vals) => value.is_some_and(|v| vals.iter().any(|x| x == v)),
            Op::NotIn(vals) => value.is_none_or(|v| !vals.iter().any(|x| x == v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Op::Lt(n) => value
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.key;
        match &self.op {
            Op::In(v) if v.len() == 1 => write!(f, "{k}={}", v[0]),
            Op::In(v) => write!(f, "{k} in ({})", v.join(",")),
            Op::NotIn(v) if v.len() == 1 => write!(f, "{k}!={}", v[0]),
            Op::NotIn(v) => write!(f, "{k} notin ({})", v.join(",")),
            Op::Exists => write!(f, "{k}"),
            Op::DoesNotExist => write!(f, "!{k}"),
            Op::Gt(n) => write!(f, "{k}>{n}"),
            Op::Lt(n) => write!(f, "{k}<{n}"),
        }
    }
}

/// All requirements must hold; an empty list matches everything (Kubernetes semantics).
pub fn matches_all(reqs: &[Requirement], labels: &BTreeMap<String, String>) -> bool {
    reqs.iter().all(|r| r.matches(labels))
}

/// The string form used in `?labelSelector=`.
pub fn to_selector_string(reqs: &[Requirement]) -> String {
    reqs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.match_expressions.as_ref().is_none_or(Vec::is_empty)
    }

    pub fn requirements(&self) -> Result<Vec<Requirement>, SelectorError> {
        let mut out = Vec::new();
        for (k, v) in self.match_labels.iter().flatten() {
            check_key("matchLabels".into(), k)?;
            check_value("matchLabels".into(), v)?;
            out.push(Requirement {
                key: k.clone(),
                op: Op::In(vec![v.clone()]),
            });
        }
        for (index, e) in self.match_expressions.iter().flatten().enumerate() {
            let values = e.values.clone().unwrap_or_default();
            check_key(format!("matchExpressions[{index}].key"), &e.key)?;
            for (j, v) in values.iter().enumerate() {
                check_value(format!("matchExpressions[{index}].values[{j}]"), v)?;
            }
            let op = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(SelectorError::Values {
                        index,
                        operator: e.operator.clone(),
                        need: "one or more",
                    });
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(SelectorError::Values {
                        index,
                        operator: e.operator.clone(),
                        need: "no",
                    });
                }
                "In" => Op::In(values),
                "NotIn" => Op::NotIn(values),
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(SelectorError::UnknownOperator {
                        index,
                        operator: other.to_string(),
                    });
                }
            };
            out.push(Requirement {
                key: e.key.clone(),
                op,
            });
        }
        Ok(out)
    }

    /// Sveltos semantics: an empty `clusterSelector` selects no cluster at all.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
        Ok(self.matcher()?.matches(labels))
    }

    /// The selector compiled once, for matching many label sets.
    pub fn matcher(&self) -> Result<Matcher, SelectorError> {
        Ok(Matcher {
            requirements: if self.is_empty() {
                None
            } else {
                Some(self.requirements()?)
            },
        })
    }
}

/// A compiled `clusterSelector` (Sveltos semantics: empty selects nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matcher {
    requirements: Option<Vec<Requirement>>,
}

impl Matcher {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .as_ref()
            .is_some_and(|r| matches_all(r, labels))
    }
}

/// Parses the string form (`a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3`).
pub fn parse_selector(s: &str) -> Result<Vec<Requirement>, SelectorError> {
    let err = || SelectorError::Syntax(s.to_string());
    let mut out = Vec::new();
    for term in split_terms(s) {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        let (key, op) = if let Some(k) = term.strip_prefix('!') {
            (k.trim(), Op::DoesNotExist)
        } else if let Some((k, rest)) = split_set_op(term, " notin ") {
            (k, Op::NotIn(parse_set(rest).ok_or_else(err)?))
        } else if let Some((k, rest)) = split_set_op(term, " in ") {
            (k, Op::In(parse_set(rest).ok_or_else(err)?))
        } else if let Some((k, v)) = term.split_once("!=") {
            (k.trim(), Op::NotIn(vec![v.trim().to_string()]))
        } else if let Some((k, v)) = term.split_once("==") {
            (k.trim(), Op::In(vec![v.trim().to_string()]))
        } else if let Some((k, v)) = term.split_once('=') {
            (k.trim(), Op::In(vec![v.trim().to_string()]))
        } else if let Some((k, v)) = term.split_once('>') {
            (k.trim(), Op::Gt(v.trim().parse().map_err(|_| err())?))
        } else if let Some((k, v)) = term.split_once('<') {
            (k.trim(), Op::Lt(v.trim().parse().map_err(|_| err())?))
        } else {
            (term, Op::Exists)
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(err());
        }
        check_key("key".into(), key)?;
        if let Op::In(vals) | Op::NotIn(vals) = &op {
            for v in vals {
                check_value("value".into(), v)?;
            }
        }
        out.push(Requirement {
            key: key.to_string(),
            op,
        });
    }
    Ok(out)
}

/// Splits on commas that are not inside a `( … )` set.
fn split_terms(s: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

fn split_set_op<'a>(term: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let idx = term.find(op)?;
    Some((term[..idx].trim(), term[idx + op.len()..].trim()))
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

/// A label map from pairs, for tests.
#[cfg(test)]
pub(crate) fn label_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        label_map(pairs)
    }

    #[test]
    fn parses_and_matches_string_selectors() {
        let l = labels(&[("env", "prod"), ("tier", "3"), ("team", "a")]);
        let table: &[(&str, bool)] = &[
            ("env=prod", true),
            ("env==prod", true),
            ("env!=prod", false),
            ("env in (dev, prod)", true),
            ("env notin (dev,prod)", false),
            ("region notin (eu)", true),
            ("team", true),
            ("!team", false),
            ("!region", true),
            ("tier>2", true),
            ("tier<2", false),
            ("env=prod,team=a", true),
            ("env=prod,team=b", false),
            ("", true),
        ];
        for (sel, want) in table {
            let reqs = parse_selector(sel).unwrap();
            assert_eq!(matches_all(&reqs, &l), *want, "{sel}");
        }
        assert!(parse_selector("env in dev").is_err());
        assert!(parse_selector("tier>x").is_err());
    }

    #[test]
    fn keys_and_values_as_the_api_server_validates_them() {
        let sixty_three = "a".repeat(63);
        let sixty_four = "a".repeat(64);
        let long_prefix = format!("{}/a", "a.".repeat(127));
        for good in [
            "env",
            "Env",
            "a_b.c-d",
            "example.com/env",
            "projectsveltos.io/cluster-profile-name",
            "1a",
            sixty_three.as_str(),
        ] {
            assert_eq!(qualified_name_error(good), None, "{good}");
        }
        for bad in [
            "",
            "env ",
            " env",
            "a/b/c",
            "/a",
            "a/",
            "Example.com/a",
            "-a",
            "a-",
            "a b",
            "ünï",
            "a:b",
            sixty_four.as_str(),
            long_prefix.as_str(),
        ] {
            assert!(qualified_name_error(bad).is_some(), "{bad:?}");
        }
        for good in ["", "prod", "eu.prod", "A_1", sixty_three.as_str()] {
            assert_eq!(label_value_error(good), None, "{good}");
        }
        for bad in ["a b", "-a", "a.", "é", "a/b", sixty_four.as_str()] {
            assert!(label_value_error(bad).is_some(), "{bad:?}");
        }
        assert_eq!(dns1123_subdomain_error("eu.prod-1"), None);
        for bad in ["Eu", "a..b", ".a", "a.", "a_b", ""] {
            assert!(dns1123_subdomain_error(bad).is_some(), "{bad:?}");
        }
        // An invalid selector is an error, never a selector that silently matches nothing.
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["ok", "not ok"]}]
        }))
        .unwrap();
        assert_eq!(
            sel.matcher().unwrap_err().to_string(),
            "matchExpressions[0].values[1]: Invalid value: \"not ok\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        );
        let sel: LabelSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"a/b/c": "x"}})).unwrap();
        assert!(
            sel.requirements()
                .unwrap_err()
                .to_string()
                .starts_with("matchLabels: Invalid value: \"a/b/c\"")
        );
        assert!(parse_selector("a/b/c=x").is_err());
        assert!(parse_selector("env=not ok").is_err());
    }

    #[test]
    fn string_form_round_trips() {
        let s = "a=b,c!=d,e in (x,y),f notin (z,w),g,!h";
        assert_eq!(to_selector_string(&parse_selector(s).unwrap()), s);
    }

    #[test]
    fn label_selector_semantics() {
        let sel: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert!(
            sel.selects(&labels(&[("env", "prod"), ("region", "eu")]))
                .unwrap()
        );
        assert!(
            !sel.selects(&labels(&[("env", "prod"), ("region", "ap")]))
                .unwrap()
        );
        assert!(
            !sel.selects(&labels(&[
                ("env", "prod"),
                ("region", "eu"),
                ("canary", "")
            ]))
            .unwrap()
        );
        // Sveltos: an empty selector selects nothing.
        assert!(
            !LabelSelector::default()
                .selects(&labels(&[("env", "prod")]))
                .unwrap()
        );
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Equals".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(matches!(
            bad.requirements(),
            Err(SelectorError::UnknownOperator { .. })
        ));
    }
}
