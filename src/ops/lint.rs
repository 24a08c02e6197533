//! `promoter lint`: offline checks of manifests before they are applied, with file, document and
//! field path. Errors are what would be rejected or never work; warnings are legal but likely
//! unintended; notes preview what promotion windows will do.

use crate::api::{ClusterPromotion, ValidateHealth};
use crate::health::{cel, lua};
use crate::manifest::{Document, load_file};
use crate::pass::profiles::preverification_name;
use crate::sim::Fleet;
use crate::sim::fleet::labels_satisfying;
use crate::validation::{check_generated_name, name_violations, schema_violations};
use crate::window::{PromotionWindow, WindowState};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub document: Option<usize>,
    pub path: String,
    pub severity: Severity,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        };
        match self.document {
            Some(d) => write!(f, "{}: document {d}: {sev}: ", self.file)?,
            None => write!(f, "{}: {sev}: ", self.file)?,
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

struct Sink<'a> {
    file: &'a str,
    document: Option<usize>,
    out: &'a mut Vec<Diagnostic>,
}

impl Sink<'_> {
    fn push(&mut self, severity: Severity, path: impl Into<String>, message: impl Into<String>) {
        self.out.push(Diagnostic {
            file: self.file.into(),
            document: self.document,
            path: path.into(),
            severity,
            message: message.into(),
        });
    }
}

/// Fields of `raw` that the CRD's schema does not have: the API server would drop them silently.
fn pruned_fields(raw: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match raw {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in m {
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    match props.get(k) {
                        Some(s) => pruned_fields(v, s, &child, out),
                        None => out.push(child),
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, v) in m {
                    pruned_fields(v, ap, &format!("{path}.{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    pruned_fields(v, item_schema, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn check_health(sink: &mut Sink, path: &str, checks: &[ValidateHealth]) {
    for (i, c) in checks.iter().enumerate() {
        if let Some(script) = &c.script
            && let Err(e) = lua::syntax_check(script)
        {
            sink.push(
                Severity::Error,
                format!("{path}[{i}].script"),
                format!("Lua does not compile: {e}"),
            );
        }
        let rules: Vec<(String, String)> = c
            .evaluate_cel
            .iter()
            .flatten()
            .map(|r| (r.name.clone(), r.rule.clone()))
            .collect();
        if let Err(e) = cel::compile(&rules) {
            sink.push(Severity::Error, format!("{path}[{i}].evaluateCEL"), e);
        }
    }
}

fn lint_promotion(
    sink: &mut Sink,
    p: &ClusterPromotion,
    raw: &Value,
    schema: &Value,
    fleet: Option<&Fleet>,
    tz: Tz,
    now: DateTime<Utc>,
) {
    let mut pruned = Vec::new();
    pruned_fields(raw, schema, "", &mut pruned);
    for path in pruned
        .into_iter()
        .filter(|p| !p.starts_with("metadata.") && !p.starts_with("status"))
    {
        sink.push(
            Severity::Error,
            path,
            "unknown field: the API server would prune it",
        );
    }
    for v in schema_violations(&p.spec).iter().chain(&name_violations(p)) {
        sink.push(Severity::Error, v.path.clone(), v.message.clone());
    }
    let name = p.metadata.name.clone().unwrap_or_default();
    if let Some(ps) = &p.spec.profile_spec {
        for field in [
            "validateHealths",
            "preDeployChecks",
            "preDeleteChecks",
            "postDeleteChecks",
        ] {
            if let Some(Ok(checks)) = ps
                .get(field)
                .map(|v| serde_json::from_value::<Vec<ValidateHealth>>(v.clone()))
            {
                check_health(sink, &format!("spec.profileSpec.{field}"), &checks);
            }
        }
        match ps.sync_mode() {
            "DryRun" => sink.push(Severity::Warning, "spec.profileSpec.syncMode", "DryRun never reaches Provisioned: the rollout will never leave its first stage"),
            "OneTime" => sink.push(Severity::Warning, "spec.profileSpec.syncMode", "OneTime does not update existing ClusterSummaries: after a change, the first stage never gets back in sync"),
            _ => {}
        }
    }
    let last = p.spec.stages.len().saturating_sub(1);
    for (i, stage) in p.spec.stages.iter().enumerate() {
        let base = format!("spec.stages[{i}]");
        let selector = stage.cluster_selector.clone().unwrap_or_default();
        if let Err(e) = selector.requirements() {
            sink.push(
                Severity::Error,
                format!("{base}.clusterSelector"),
                e.to_string(),
            );
        } else if selector.is_empty() {
            sink.push(
                Severity::Warning,
                format!("{base}.clusterSelector"),
                "empty: selects no cluster, so the stage completes at once",
            );
        }
        let Some(trigger) = &stage.trigger else {
            continue;
        };
        if i == last {
            sink.push(
                Severity::Warning,
                format!("{base}.trigger"),
                "a trigger on the last stage still holds the rollout's completion (as upstream)",
            );
        }
        if let Some(gates) = trigger.gates() {
            check_health(
                sink,
                &format!(
                    "{base}.trigger.{}.postDelayHealthChecks",
                    if trigger.auto.is_some() {
                        "auto"
                    } else {
                        "manual"
                    }
                ),
                gates.post_delay_health_checks,
            );
            if !gates.pre_health_check_deployment.is_empty()
                && let Err(why) = check_generated_name(&preverification_name(&name, &stage.name))
            {
                sink.push(
                    Severity::Error,
                    format!("{base}.name"),
                    format!(
                        "generated ClusterProfile name {:?} {why}",
                        preverification_name(&name, &stage.name)
                    ),
                );
            }
        }
        if let Some(w) = trigger
            .auto
            .as_ref()
            .and_then(|a| a.promotion_window.as_ref())
        {
            match PromotionWindow::parse(&w.from, &w.to, tz) {
                Err(e) => {
                    let (field, message) = e
                        .split_once(": ")
                        .unwrap_or(("promotionWindow", e.as_str()));
                    sink.push(
                        Severity::Error,
                        format!("{base}.trigger.auto.{field}"),
                        message,
                    );
                }
                Ok(pw) => {
                    let preview = match pw.state(now) {
                        WindowState::Open { closes_at } => format!(
                            "open now; closes {}",
                            closes_at
                                .map(|t| t.to_rfc3339())
                                .unwrap_or_else(|| "never".into())
                        ),
                        WindowState::Closed { opens_at } => {
                            let open = opens_at
                                .map(|t| t.to_rfc3339())
                                .unwrap_or_else(|| "never (within five years)".into());
                            let close = opens_at
                                .and_then(|t| pw.to.next_after(t))
                                .map(|t| t.to_rfc3339())
                                .unwrap_or_else(|| "never".into());
                            format!("closed now; next opens {open}, closes {close}")
                        }
                    };
                    sink.push(
                        Severity::Note,
                        format!("{base}.trigger.auto.promotionWindow"),
                        preview,
                    );
                }
            }
        }
    }
    // Overlapping selectors: statically, a cluster labelled to match one stage that another selects too.
    for (i, a) in p.spec.stages.iter().enumerate() {
        for (j, b) in p.spec.stages.iter().enumerate().filter(|(j, _)| *j != i) {
            let Some(labels) = a.cluster_selector.as_ref().and_then(labels_satisfying) else {
                continue;
            };
            if j > i
                && b.cluster_selector
                    .clone()
                    .unwrap_or_default()
                    .selects(&labels)
                    .unwrap_or(false)
            {
                sink.push(
                    Severity::Warning,
                    format!("spec.stages[{j}].clusterSelector"),
                    format!("stages {:?} and {:?} can select the same cluster (e.g. one labelled {labels:?})", a.name, b.name),
                );
            }
        }
    }
    if let Some(fleet) = fleet {
        for c in &fleet.clusters {
            let stages: Vec<&str> = p
                .spec
                .stages
                .iter()
                .filter(|s| {
                    s.cluster_selector
                        .clone()
                        .unwrap_or_default()
                        .selects(&c.labels)
                        .unwrap_or(false)
                })
                .map(|s| s.name.as_str())
                .collect();
            match stages.len() {
                0 => sink.push(
                    Severity::Warning,
                    "spec.stages",
                    format!("cluster {} is in no stage", c.key()),
                ),
                1 => {}
                _ => sink.push(
                    Severity::Error,
                    "spec.stages",
                    format!(
                        "cluster {} is selected by stages {}",
                        c.key(),
                        stages.join(" and ")
                    ),
                ),
            }
        }
    }
}

pub fn lint(
    paths: &[PathBuf],
    fleet: Option<&Fleet>,
    tz: Tz,
    now: DateTime<Utc>,
) -> Vec<Diagnostic> {
    let schema = serde_json::to_value(crate::crd::cluster_promotion_crd())
        .ok()
        .and_then(|v| {
            v.pointer("/spec/versions/0/schema/openAPIV3Schema")
                .cloned()
        })
        .unwrap_or(Value::Null);
    let mut out = Vec::new();
    for path in paths {
        let file = path.display().to_string();
        let docs: Vec<Document> = match load_file(path) {
            Ok(d) => d,
            Err(e) => {
                out.push(Diagnostic {
                    file: file.clone(),
                    document: e.document,
                    path: String::new(),
                    severity: Severity::Error,
                    message: e.message,
                });
                continue;
            }
        };
        for doc in docs {
            if let Some(p) = doc.promotion() {
                let mut sink = Sink {
                    file: &file,
                    document: Some(doc.index),
                    out: &mut out,
                };
                lint_promotion(&mut sink, p, &doc.raw, &schema, fleet, tz, now);
            }
        }
    }
    out
}
