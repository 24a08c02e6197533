//! Counterexamples as readable traces: the steps from the initial state, each with what it changed
//! (the fields of the promotions, profiles and summaries that the gates are about), replayed from
//! the steps alone, so that a trace is also a regression test ([`replay`]).

use super::ghost;
use super::setup::{Bounds, promotion_name};
use super::state::{Pass, State, Step, Work, promotion};
use promoter::annotations;
use promoter::fake::{cluster_profile_type, cluster_summary_type, sveltos_cluster_type};
use promoter::pass::stage_status::description_text;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What a trace shows of a state, one line per field.
fn view(s: &State, bounds: &Bounds) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("clock".into(), format!("epoch {}", s.epoch));
    for i in 0..bounds.promotions {
        let name = promotion_name(i);
        let Some(m) = promotion(&s.store, i) else {
            continue;
        };
        let p = &m.p;
        let chart = p
            .spec
            .profile_spec
            .as_ref()
            .and_then(|ps| {
                ps.0.get("helmCharts")
                    .and_then(|h| h.pointer("/0/chartVersion"))
                    .cloned()
            })
            .unwrap_or(Value::Null);
        let stages: Vec<String> = p
            .spec
            .stages
            .iter()
            .map(|st| {
                let sel = st
                    .cluster_selector
                    .as_ref()
                    .and_then(|c| c.match_labels.as_ref())
                    .and_then(|m| m.get("env").cloned())
                    .unwrap_or_default();
                let approved = match st.manual_approval() {
                    Some(true) => " approved",
                    _ => "",
                };
                format!("{}[{sel}]{approved}", st.name)
            })
            .collect();
        out.insert(
            format!("{name} spec"),
            format!("chart {chart}, stages {}", stages.join(" ")),
        );
        for (key, value) in p.metadata.annotations.iter().flatten() {
            if key.starts_with("promoter.dev/") {
                out.insert(format!("{name} {key}"), value.clone());
            }
        }
        if let Some(st) = &p.status {
            let run = annotations::Run::of(st)
                .map(|r| {
                    format!(
                        "revision {}, stages {}, since {}",
                        short(&r.revision),
                        short(&r.stages),
                        r.since
                    )
                })
                .unwrap_or_else(|| "none".into());
            out.insert(
                format!("{name} status"),
                format!(
                    "run {run}; current {}",
                    st.current_stage_name.clone().unwrap_or_default()
                ),
            );
            for e in st.stages.iter().flatten() {
                out.insert(
                    format!("{name} status.{}", e.name),
                    format!(
                        "{}{}",
                        e.current_status_description
                            .as_deref()
                            .map(description_text)
                            .unwrap_or_default(),
                        e.failure_message
                            .as_deref()
                            .map(|f| format!("; failure: {f}"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
        out.insert(
            format!("{name} ghost"),
            format!("{:?}", s.ghost.promotions[i].approval),
        );
    }
    for cp in s.store.stored(&cluster_profile_type()) {
        let name = cp
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let env = cp
            .pointer("/spec/clusterSelector/matchLabels/env")
            .unwrap_or(&Value::Null);
        // Which clusters that is: with `clusters=2` a stage selects two, and a trace of a stage
        // passed on one of them reads only with both named.
        let cluster_rt = sveltos_cluster_type();
        let clusters: Vec<&str> = s
            .store
            .stored(&cluster_rt)
            .filter(|c| c.pointer("/metadata/labels/env") == Some(env))
            .filter_map(|c| c.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        out.insert(
            format!("profile {name}"),
            format!(
                "chart {}, selects {env} (clusters {})",
                cp.pointer("/spec/helmCharts/0/chartVersion")
                    .unwrap_or(&Value::Null),
                clusters.join(", ")
            ),
        );
    }
    for cs in s.store.stored(&cluster_summary_type()) {
        let name = cs
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let statuses: Vec<&str> = cs
            .pointer("/status/featureSummaries")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f["status"].as_str())
            .collect();
        out.insert(
            format!("summary {name}"),
            format!(
                "chart {}, {}",
                cs.pointer("/spec/clusterProfileSpec/helmCharts/0/chartVersion")
                    .unwrap_or(&Value::Null),
                statuses.join(",")
            ),
        );
    }
    for (n, p) in s.passes.iter().enumerate() {
        out.insert(
            format!("pass {n}"),
            match p {
                Pass::Idle => "idle".into(),
                Pass::Observing { now, .. } => format!("observing (its clock: epoch {now})"),
                Pass::Acting(a) => format!(
                    "acting on {} (its clock: epoch {now}){}",
                    a.decisions[a.index].promotion,
                    match &a.work {
                        Work::Prepare => " before its writes".to_string(),
                        Work::Writing { writes, at, .. } => format!(
                            ", next: {}",
                            writes.get(*at).map(|w| w.what.as_str()).unwrap_or("-")
                        ),
                    },
                    now = a.now
                ),
            },
        );
    }
    out
}

fn short(hash: &str) -> String {
    hash.chars().take(8).collect()
}

/// Replays `steps` from the initial state: the states, and the violations of each step.
pub fn replay(bounds: &Bounds, steps: &[Step]) -> anyhow::Result<Vec<(Step, State, Vec<String>)>> {
    let mut s = State::initial(bounds)?;
    let mut out = Vec::new();
    for step in steps {
        let Some(mut next) = s
            .apply(*step, bounds)
            .map_err(|e| anyhow::anyhow!("{}: {}", step.describe(), e.0))?
        else {
            anyhow::bail!(
                "{} changes nothing: the trace does not replay",
                step.describe()
            );
        };
        let violations = ghost::update(&s, *step, &mut next, bounds);
        out.push((*step, next.clone(), violations));
        s = next;
    }
    Ok(out)
}

/// The trace as text: each step, the fields it changed, and the invariants it broke.
pub fn render(bounds: &Bounds, steps: &[Step]) -> String {
    let mut text = String::new();
    let Ok(init) = State::initial(bounds) else {
        return "the initial state cannot be built".into();
    };
    let mut before = view(&init, bounds);
    match replay(bounds, steps) {
        Ok(states) => {
            for (n, (step, state, violations)) in states.iter().enumerate() {
                let _ = writeln!(text, "{:>3}. {}", n + 1, step.describe());
                let after = view(state, bounds);
                for (k, v) in &after {
                    if before.get(k) != Some(v) {
                        let _ = writeln!(text, "       {k}: {v}");
                    }
                }
                for k in before.keys().filter(|k| !after.contains_key(*k)) {
                    let _ = writeln!(text, "       {k}: (gone)");
                }
                for v in violations {
                    let _ = writeln!(text, "     ! {v}");
                }
                before = after;
            }
        }
        Err(e) => {
            let _ = writeln!(text, "(replay failed: {e})");
        }
    }
    text
}

/// The steps as Rust, for a regression test.
pub fn as_rust(steps: &[Step]) -> String {
    steps
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}
