//! A stage whose clusterSelector selects no cluster of the inventory.
//!
//! Upstream passes such a stage at once: its deployment check lists the ClusterSummaries of the
//! stage's profile and, finding none, says "No matching clusters found for ClusterProfile ….
//! Deployment considered complete." (projectsveltos/addon-controller v1.13.0, commit
//! 0e80ac88272abdf7308e3c0516bd0fb53cc5fc58, `controllers/profile_utils.go`,
//! `allClusterSummariesDeployed`, called by `checkCurrentStageDeployment` in
//! `controllers/clusterpromotion_controller.go`; reference Q2). A typo in a selector (`env:
//! stagin`) then sends a revision past a stage no cluster ran, to the next one.
//!
//! promoter holds the rollout at such a stage instead: the promotion is `Blocked` there, its
//! status naming the selector and the labels of the inventory nearest to it, with a `Blocked`
//! Event when the hold begins, until a cluster the selector selects joins (the stage then deploys
//! and goes on) or the selector is corrected (a new run). A stage meant to be empty for a while
//! (prepared before its clusters exist, or an approval step without clusters) passes as upstream's
//! does when `promoter.dev/allow-empty-stages` allows it ([`crate::settings`]). Only what the
//! inventory holds counts: a stage whose every cluster is paused still selects them (they are
//! skipped and named, as before).

use crate::labels::LabelSelector;
use crate::settings::ALLOW_EMPTY_STAGES;
use std::collections::BTreeMap;

/// How many labels the message names at most.
const NAMED: usize = 5;

/// The selector as a person reads it (`env=stagin`, `tier in (a,b)`), or what an empty one is.
pub fn selector_text(selector: &LabelSelector) -> String {
    if selector.is_empty() {
        return "an empty clusterSelector (which selects no cluster in Sveltos)".into();
    }
    match selector.requirements() {
        Ok(reqs) => format!(
            "clusterSelector {}",
            crate::labels::to_selector_string(&reqs)
        ),
        Err(e) => format!("an invalid clusterSelector ({e})"),
    }
}

/// The labels of the inventory nearest to what `selector` asks for, each `key=value (n
/// clusters)`: for each label the selector requires, the inventory's label within a typo's reach
/// of it (`env=staging` for `env=stagin`, `env=dev` for `evn=dev`), else the values its key has;
/// when nothing is near, the inventory's most common labels.
pub fn nearest_labels<'a>(
    selector: &LabelSelector,
    inventory: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Vec<String> {
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for labels in inventory {
        for (k, v) in labels {
            *counts.entry((k.clone(), v.clone())).or_default() += 1;
        }
    }
    let pairs: Vec<String> = counts.keys().map(|(k, v)| format!("{k}={v}")).collect();
    let keys: Vec<&str> = counts.keys().map(|(k, _)| k.as_str()).collect();
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        wanted.push((k.clone(), Some(v.clone())));
    }
    for e in selector.match_expressions.iter().flatten() {
        match e.operator.as_str() {
            "In" => {
                for v in e.values.iter().flatten() {
                    wanted.push((e.key.clone(), Some(v.clone())));
                }
            }
            "Exists" => wanted.push((e.key.clone(), None)),
            _ => {}
        }
    }
    let mut out: Vec<(String, String)> = Vec::new();
    let add = |out: &mut Vec<(String, String)>, k: &str, v: &str| {
        let pair = (k.to_string(), v.to_string());
        if !out.contains(&pair) {
            out.push(pair);
        }
    };
    for (key, value) in &wanted {
        // A label the inventory has as asked (another of the selector's labels is the one off).
        if let Some(v) = value
            .as_ref()
            .filter(|v| counts.contains_key(&(key.clone(), (*v).clone())))
        {
            add(&mut out, key, v);
            continue;
        }
        let near = value.as_ref().and_then(|v| {
            crate::suggest::closest(&format!("{key}={v}"), pairs.iter().map(String::as_str))
        });
        if let Some((k, v)) = near.and_then(|p| p.split_once('=')) {
            add(&mut out, k, v);
            continue;
        }
        // The key as written, else the key it is a typo of: its values.
        let key = if keys.contains(&key.as_str()) {
            Some(key.as_str())
        } else {
            crate::suggest::closest(key, keys.iter().copied())
        };
        if let Some(key) = key {
            for (k, v) in counts.keys().filter(|(k, _)| k == key) {
                add(&mut out, k, v);
            }
        }
    }
    if out.is_empty() {
        let mut common: Vec<(&(String, String), &usize)> = counts.iter().collect();
        common.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for ((k, v), _) in common {
            add(&mut out, k, v);
        }
    }
    out.into_iter()
        .take(NAMED)
        .map(|(k, v)| {
            let n = counts.get(&(k.clone(), v.clone())).copied().unwrap_or(0);
            format!("{k}={v} ({n} cluster{})", if n == 1 { "" } else { "s" })
        })
        .collect()
}

/// Why `stage` holds the rollout: its selector, how many clusters the inventory has, the nearest
/// labels, and the two ways on. `inventory`: every cluster's labels.
pub fn message<'a>(
    stage: &str,
    selector: &LabelSelector,
    inventory: impl IntoIterator<Item = &'a BTreeMap<String, String>> + Clone,
) -> String {
    message_of(stage, selector, inventory, "the inventory")
}

/// [`message`] about the clusters of `source` (`the inventory`, `the fleet`).
pub fn message_of<'a>(
    stage: &str,
    selector: &LabelSelector,
    inventory: impl IntoIterator<Item = &'a BTreeMap<String, String>> + Clone,
    source: &str,
) -> String {
    let clusters = inventory.clone().into_iter().count();
    let nearest = nearest_labels(selector, inventory);
    let what = if clusters == 0 {
        format!("{source} has no cluster")
    } else if nearest.is_empty() {
        format!("none of the {clusters} clusters of {source} matches")
    } else {
        format!(
            "none of the {clusters} clusters of {source} matches (nearest labels: {})",
            nearest.join(", ")
        )
    };
    format!(
        "stage {stage} selects no cluster: {}: {what}; correct the selector, or let the stage \
         pass empty as Sveltos does with the annotation {ALLOW_EMPTY_STAGES}: \"{stage}=true\"",
        selector_text(selector)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_nearest_labels_are_what_the_selector_was_meant_to_say() {
        let inventory = [
            labels(&[("env", "dev")]),
            labels(&[("env", "dev")]),
            labels(&[("env", "staging")]),
            labels(&[("env", "prod"), ("region", "eu")]),
            labels(&[("type", "mgmt")]),
        ];
        let table: &[(serde_json::Value, &[&str])] = &[
            // A typo of a value.
            (
                json!({"matchLabels": {"env": "stagin"}}),
                &["env=staging (1 cluster)"],
            ),
            // A typo of a key.
            (
                json!({"matchLabels": {"evn": "dev"}}),
                &["env=dev (2 clusters)"],
            ),
            // A value of the key nothing is near: the values the key has.
            (
                json!({"matchLabels": {"env": "production"}}),
                &[
                    "env=dev (2 clusters)",
                    "env=prod (1 cluster)",
                    "env=staging (1 cluster)",
                ],
            ),
            // Two labels, one of them wrong.
            (
                json!({"matchLabels": {"env": "prod", "region": "us"}}),
                &["env=prod (1 cluster)", "region=eu (1 cluster)"],
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["qa", "stagng"]}]}),
                &[
                    "env=dev (2 clusters)",
                    "env=prod (1 cluster)",
                    "env=staging (1 cluster)",
                ],
            ),
            // Nothing near: the most common labels.
            (
                json!({"matchLabels": {"team": "payments"}}),
                &[
                    "env=dev (2 clusters)",
                    "env=prod (1 cluster)",
                    "env=staging (1 cluster)",
                    "region=eu (1 cluster)",
                    "type=mgmt (1 cluster)",
                ],
            ),
            // An empty selector asks for nothing: the most common labels.
            (
                json!({}),
                &[
                    "env=dev (2 clusters)",
                    "env=prod (1 cluster)",
                    "env=staging (1 cluster)",
                    "region=eu (1 cluster)",
                    "type=mgmt (1 cluster)",
                ],
            ),
        ];
        for (sel, want) in table {
            assert_eq!(
                nearest_labels(&selector(sel.clone()), &inventory),
                *want,
                "{sel}"
            );
        }
        assert!(nearest_labels(&selector(json!({"matchLabels": {"env": "x"}})), &[]).is_empty());
    }

    #[test]
    fn the_message_names_the_stage_the_selector_the_inventory_and_the_ways_on() {
        let inventory = [labels(&[("env", "staging")]), labels(&[("env", "dev")])];
        assert_eq!(
            message(
                "staging",
                &selector(json!({"matchLabels": {"env": "stagin"}})),
                &inventory
            ),
            "stage staging selects no cluster: clusterSelector env=stagin: none of the 2 clusters \
             of the inventory matches (nearest labels: env=staging (1 cluster)); correct the \
             selector, or let the stage pass empty as Sveltos does with the annotation \
             promoter.dev/allow-empty-stages: \"staging=true\""
        );
        assert_eq!(
            message("gate", &selector(json!({})), &[]),
            "stage gate selects no cluster: an empty clusterSelector (which selects no cluster in \
             Sveltos): the inventory has no cluster; correct the selector, or let the stage pass \
             empty as Sveltos does with the annotation promoter.dev/allow-empty-stages: \"gate=true\""
        );
    }
}
