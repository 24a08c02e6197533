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
}

impl Requirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            Op::In(vals) => value.is_some_and(|v| vals.contains(v)),
            Op::NotIn(vals) => value.is_none_or(|v| !vals.contains(v)),
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
            out.push(Requirement {
                key: k.clone(),
                op: Op::In(vec![v.clone()]),
            });
        }
        for (index, e) in self.match_expressions.iter().flatten().enumerate() {
            let values = e.values.clone().unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
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
