//! `promoter lint`: offline checks of manifests before they are applied, with file, document and
//! field path. Errors are what would be rejected or never work; warnings are legal but likely
//! unintended; notes preview what promotion windows will do.

use super::crd_schema::{self, SchemaError};
use super::yaml_spans::{self, DocSpans};
use crate::api::{ClusterPromotion, ValidateHealth};
use crate::health::{cel, lua};
use crate::pass::profiles::preverification_name;
use crate::sim::Fleet;
use crate::sim::fleet::labels_satisfying;
use crate::validation::{check_generated_name, name_violations, schema_violations};
use crate::window::{PromotionWindow, WindowState};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use serde_json::Value;
use serde_path_to_error::Segment;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    pub file: String,
    pub document: Option<usize>,
    /// Where `path` (or its nearest parent) is in the file, 1-based.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub path: String,
    pub severity: Severity,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl Diagnostic {
    /// `file:line:column: document N: error: path: message`, its label in colour when `colour`.
    pub fn render(&self, colour: bool) -> String {
        let sev = crate::logging::label(
            match self.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Note => "note",
            },
            colour,
        );
        let mut out = String::new();
        let _ = self.write(&mut out, &sev);
        out
    }

    fn write(&self, f: &mut impl fmt::Write, sev: &str) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        match self.document {
            Some(d) => write!(f, ": document {d}: {sev}: ")?,
            None => write!(f, ": {sev}: ")?,
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
            line: None,
            column: None,
            path: path.into(),
            severity,
            message: message.into(),
        });
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
    reported: &[String],
    fleet: Option<&Fleet>,
    tz: Tz,
    now: DateTime<Utc>,
) {
    // The CRD rules the schema cannot say (CEL) and promoter's own; a field the schema already
    // refused is not reported twice.
    // Generated names are only worth checking from a valid promotion name.
    let names = if reported.iter().any(|r| related(r, "metadata.name")) {
        Vec::new()
    } else {
        name_violations(p)
    };
    for v in schema_violations(&p.spec).iter().chain(&names) {
        if !reported.iter().any(|r| related(r, &v.path)) {
            sink.push(Severity::Error, v.path.clone(), v.message.clone());
        }
    }
    // promoter's settings annotations: what would block the promotion, and what never triggers.
    for e in crate::settings::parse(p).1 {
        sink.push(Severity::Error, e.path(), e.message);
    }
    for e in crate::known_keys::problems(p) {
        sink.push(Severity::Error, e.path(), e.message);
    }
    for w in crate::settings::warnings(p)
        .into_iter()
        .chain(crate::known_keys::warnings(p))
    {
        sink.push(Severity::Warning, w.path(), w.message);
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
            empty_stage(sink, p, i, "empty: selects no cluster".into());
        } else if let Some(fleet) = fleet
            && !fleet
                .clusters
                .iter()
                .any(|c| selector.selects(&c.labels).unwrap_or(false))
        {
            let labels: Vec<&BTreeMap<String, String>> =
                fleet.clusters.iter().map(|c| &c.labels).collect();
            empty_stage(
                sink,
                p,
                i,
                crate::pass::empty_stage::message_of(
                    &stage.name,
                    &selector,
                    labels,
                    fleet.source(),
                ),
            );
        }
        let Some(trigger) = &stage.trigger else {
            continue;
        };
        if i == last {
            sink.push(
                Severity::Warning,
                format!("{base}.trigger"),
                "a trigger on the last stage still holds the rollout's completion (as upstream): its soak, window or approval comes after the last deployment; remove the trigger for the rollout to complete when the last stage is deployed",
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

/// Stage `index` selects no cluster (`why`): the rollout holds there (an error), unless
/// `promoter.dev/allow-empty-stages` lets it pass empty (a note).
fn empty_stage(sink: &mut Sink, p: &ClusterPromotion, index: usize, why: String) {
    let stage = &p.spec.stages[index].name;
    let path = format!("spec.stages[{index}].clusterSelector");
    if crate::settings::Settings::of(p)
        .allow_empty_stages
        .allowed(stage)
    {
        sink.push(
            Severity::Note,
            path,
            format!(
                "selects no cluster; passes empty, as upstream's, since {} allows it",
                crate::settings::ALLOW_EMPTY_STAGES
            ),
        );
        return;
    }
    let message = if why.starts_with("stage ") {
        format!("the rollout would hold at this stage: {why}")
    } else {
        format!(
            "{why}, so the rollout holds at this stage; correct the selector, or let the stage pass \
             empty as Sveltos does with the annotation {}: \"{stage}=true\"",
            crate::settings::ALLOW_EMPTY_STAGES
        )
    };
    sink.push(Severity::Error, path, message);
}

/// Whether two field paths are the same field or one contains the other.
fn related(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    };
    within(a, b) || within(b, a)
}

/// The typed ClusterPromotion, and every field it cannot be read from (a duration such as `5x`
/// passes the schema, a string, but not the type): each failing field is left out (a missing one
/// is read as empty) and the rest read again, so that one bad field hides neither the others nor
/// the checks of the rest.
fn parse_leniently(raw: &Value) -> (Option<ClusterPromotion>, Vec<(String, String)>) {
    let mut value = raw.clone();
    let mut errors: Vec<(String, String)> = Vec::new();
    // Bounded: each round repairs one field.
    for _ in 0..64 {
        let e = match serde_path_to_error::deserialize::<_, ClusterPromotion>(&value) {
            Ok(p) => return (Some(p), errors),
            Err(e) => e,
        };
        let mut segments: Vec<Segment> = e.path().iter().cloned().collect();
        let message = e.into_inner().to_string();
        // serde names a missing field at its parent; the API server names the field itself.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
            .map(str::to_string);
        if let Some(field) = &missing {
            segments.push(Segment::Map { key: field.clone() });
        }
        let path = field_path(&segments);
        if errors.iter().any(|(p, _)| *p == path) {
            // The repair did not help (a missing field that is not a string): stop here.
            return (None, errors);
        }
        errors.push((
            path,
            if missing.is_some() {
                "Required value".into()
            } else {
                message
            },
        ));
        let Some((Segment::Map { key }, parents)) = segments.split_last() else {
            return (None, errors);
        };
        let Some(Value::Object(parent)) = node_mut(&mut value, parents) else {
            return (None, errors);
        };
        if missing.is_some() {
            parent.insert(key.clone(), Value::String(String::new()));
        } else {
            parent.remove(key.as_str());
        }
    }
    (None, errors)
}

/// `spec.stages[1].name`, as the API server and the CRD schema errors write paths.
fn field_path(segments: &[Segment]) -> String {
    let mut path = String::new();
    for s in segments {
        match s {
            Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Segment::Enum { variant } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(variant);
            }
            Segment::Unknown => path.push_str(".?"),
        }
    }
    path
}

fn node_mut<'a>(value: &'a mut Value, segments: &[Segment]) -> Option<&'a mut Value> {
    segments.iter().try_fold(value, |node, s| match (s, node) {
        (Segment::Map { key }, Value::Object(m)) => m.get_mut(key),
        (Segment::Seq { index }, Value::Array(items)) => items.get_mut(*index),
        _ => None,
    })
}

/// Checks one document; whether it was one promoter checks (the others are named in a note, so
/// that a file of other kinds never passes silently).
fn lint_document(
    sink: &mut Sink,
    raw: &Value,
    fleet: Option<&Fleet>,
    tz: Tz,
    now: DateTime<Utc>,
) -> bool {
    let api_version = raw.get("apiVersion").and_then(Value::as_str);
    let kind = raw.get("kind").and_then(Value::as_str);
    if notification_settings(raw).is_some() {
        // promoter's notification settings, on their own (`config.yaml`) or in their ConfigMap:
        // see `lint_settings`.
        return true;
    }
    if raw.is_null() {
        // An empty document (`---` at the end).
        return false;
    }
    let (Some(api_version), Some(kind)) = (api_version, kind) else {
        // As kubectl: every object needs both to be sent anywhere.
        let missing = if api_version.is_none() {
            "apiVersion"
        } else {
            "kind"
        };
        sink.push(
            Severity::Error,
            missing,
            "Required value: the object cannot be decoded without it",
        );
        return true;
    };
    if api_version.starts_with("promoter.dev/")
        && let Some(schema) = crd_schema::own_kind(kind)
    {
        lint_own_kind(sink, raw, kind, schema);
        return true;
    }
    if api_version.starts_with("promoter.dev/") && kind == "Fleet" {
        sink.push(
            Severity::Note,
            "",
            "not checked: a Fleet is what `simulate --fleet` and `lint --fleet` read: give it with --fleet",
        );
        return false;
    }
    // Other kinds (a ConfigMap a policyRef names, a fleet's clusters) are not promoter's to check.
    if kind != "ClusterPromotion" || !api_version.starts_with("config.projectsveltos.io/") {
        let name = raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(|n| format!(" {n}"))
            .unwrap_or_default();
        sink.push(
            Severity::Note,
            "",
            format!(
                "not checked: {api_version} {kind}{name} is not what promoter checks (ClusterPromotions, {}, its notification settings)",
                crate::crd::own_crds()
                    .iter()
                    .map(|c| format!("{}s", c.spec.names.kind))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        return false;
    }
    let mut schema_errors: Vec<SchemaError> = match crd_schema::cluster_promotion() {
        Ok(schema) => schema.validate(raw),
        Err(e) => vec![SchemaError {
            path: String::new(),
            message: format!("cannot check against the CRD: {e}"),
        }],
    };
    match crd_schema::rule_errors(raw) {
        Ok(errors) => schema_errors.extend(errors),
        Err(e) => schema_errors.push(SchemaError {
            path: String::new(),
            message: format!("cannot check the CRD's validation rules: {e}"),
        }),
    }
    let mut reported: Vec<String> = Vec::new();
    for e in schema_errors {
        sink.push(Severity::Error, e.path.clone(), e.message);
        reported.push(e.path);
    }
    let (promotion, decode_errors) = parse_leniently(raw);
    for (path, message) in decode_errors {
        if !reported.iter().any(|r| related(r, &path)) {
            sink.push(Severity::Error, path.clone(), message);
            reported.push(path);
        }
    }
    if let Some(p) = promotion {
        lint_promotion(sink, &p, &reported, fleet, tz, now);
    }
    true
}

/// A `PromotionFreeze` or `PromotionRevision`: its CRD's schema as the API server checks it, and
/// for a freeze what would make it Invalid (a selector that does not parse, an end not after its
/// start).
fn lint_own_kind(
    sink: &mut Sink,
    raw: &Value,
    kind: &str,
    schema: Result<&crd_schema::CrdSchema, String>,
) {
    let mut errors = match schema {
        Ok(schema) => schema.validate(raw),
        Err(e) => vec![SchemaError {
            path: String::new(),
            message: format!("cannot check against the CRD: {e}"),
        }],
    };
    match crd_schema::own_rule_errors(kind, raw) {
        Ok(rules) => errors.extend(rules),
        Err(e) => errors.push(SchemaError {
            path: String::new(),
            message: format!("cannot check the CRD's validation rules: {e}"),
        }),
    }
    let reported: Vec<String> = errors.iter().map(|e| e.path.clone()).collect();
    for e in errors {
        sink.push(Severity::Error, e.path, e.message);
    }
    if kind == "PromotionFreeze"
        && let Ok(f) = serde_json::from_value::<crate::api::PromotionFreeze>(raw.clone())
    {
        for v in crate::freeze::problems(&f.spec) {
            if !reported.iter().any(|r| related(r, &v.path)) {
                sink.push(Severity::Error, v.path, v.message);
            }
        }
    }
}

/// A field path as the YAML spans name it: an annotation's `metadata.annotations[key]` is the
/// key `metadata.annotations.key` of the mapping.
fn spans_path(path: &str) -> String {
    match path.split_once('[') {
        Some((map, rest))
            if rest.ends_with(']') && !rest.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            format!("{map}.{}", &rest[..rest.len() - 1])
        }
        _ => path.to_string(),
    }
}

/// Line and column of each diagnostic's field (or its nearest parent) in its document.
fn locate(spans: &DocSpans, diagnostics: &mut [Diagnostic]) {
    for d in diagnostics.iter_mut().filter(|d| d.line.is_none()) {
        let path = spans_path(&d.path);
        let value = spans
            .scalars
            .get(&path)
            // A field or key that should not be there: point at the key, not its value.
            .filter(|_| {
                !d.message.starts_with("unknown field") && !d.message.starts_with("Unsupported key")
            })
            .copied();
        if let Some((line, column)) = value.or_else(|| spans.find(&path)) {
            d.line = Some(line);
            d.column = Some(column);
        }
    }
}

pub fn lint(
    paths: &[PathBuf],
    fleet: Option<&Fleet>,
    tz: Tz,
    now: DateTime<Utc>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for path in paths {
        let file = path.display().to_string();
        let file_error = |message: String, at: Option<(usize, usize)>| Diagnostic {
            file: file.clone(),
            document: None,
            line: at.map(|a| a.0),
            column: at.map(|a| a.1),
            path: String::new(),
            severity: Severity::Error,
            message,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                out.push(file_error(format!("cannot read: {e}"), None));
                continue;
            }
        };
        let docs: Vec<Value> = match serde_saphyr::from_multiple(&text) {
            Ok(d) => d,
            Err(e) => {
                let at = e
                    .location()
                    .map(|l| (l.line() as usize, l.column() as usize));
                out.push(file_error(
                    format!("invalid YAML: {}", yaml_message(&e.to_string())),
                    at,
                ));
                continue;
            }
        };
        let spans = yaml_spans::positions(&text);
        let mut checked = 0;
        for (i, raw) in docs.iter().enumerate() {
            let first = out.len();
            let mut sink = Sink {
                file: &file,
                document: Some(i + 1),
                out: &mut out,
            };
            checked += usize::from(lint_document(&mut sink, raw, fleet, tz, now));
            lint_settings(&mut sink, raw, spans.get(i));
            if let Some(doc) = spans.get(i) {
                locate(doc, &mut out[first..]);
            }
            // In the order of the file, as a reader goes through it.
            out[first..].sort_by_key(|d| (d.line, d.column));
        }
        if checked == 0 {
            out.push(Diagnostic {
                severity: Severity::Warning,
                ..file_error(
                    "nothing checked: the file holds no ClusterPromotion, none of promoter's own kinds and no notification settings".into(),
                    None,
                )
            });
        }
    }
    out
}

/// promoter's notification settings in a document: the document itself when it is the settings
/// file (no apiVersion and kind, and a `receivers`, `rules` or `maxAge`), or the `config.yaml` of
/// a ConfigMap named `promoter-notifications` or whose `config.yaml` is such settings. The text,
/// and the path of the field holding it (`""` for the document).
fn notification_settings(raw: &Value) -> Option<(String, &'static str)> {
    let settings_keys = |v: &Value| {
        v.as_object().is_some_and(|m| {
            ["receivers", "rules", "maxAge"]
                .iter()
                .any(|k| m.contains_key(*k))
        })
    };
    if raw.get("apiVersion").is_none() && raw.get("kind").is_none() && settings_keys(raw) {
        return Some((String::new(), ""));
    }
    if raw.get("apiVersion")? != "v1" || raw.get("kind")? != "ConfigMap" {
        return None;
    }
    let text = raw.pointer("/data/config.yaml")?.as_str()?;
    let named = raw.pointer("/metadata/name").and_then(Value::as_str)
        == Some(crate::notify::config::DEFAULT_NAME);
    let parsed: Option<Value> = serde_saphyr::from_str(text).ok();
    (named || parsed.as_ref().is_some_and(settings_keys))
        .then(|| (text.to_string(), "data.config.yaml"))
}

/// The notification settings of a document, each problem at its line and column in the file
/// (inside a ConfigMap's `config.yaml` block too).
fn lint_settings(sink: &mut Sink, raw: &Value, spans: Option<&DocSpans>) {
    let Some((text, field)) = notification_settings(raw) else {
        return;
    };
    let problems = match field {
        "" => crate::notify::Config::from_value(raw).err(),
        _ => crate::notify::Config::parse(&text).err(),
    };
    // Where the embedded document starts: a block scalar (`|`) begins on the line after its key,
    // where its first line of text is; a quoted one cannot be mapped, its key is pointed at.
    let inner = (!field.is_empty()).then(|| {
        let key = spans.and_then(|s| s.fields.get(field).copied());
        let at = spans.and_then(|s| s.scalars.get(field).copied());
        let block = at.filter(|(line, _)| key.is_some_and(|(k, _)| k < *line));
        (key, block)
    });
    let inner_spans = inner.as_ref().map(|_| yaml_spans::positions(&text));
    for p in problems.into_iter().flatten() {
        let mut d = Diagnostic {
            file: sink.file.into(),
            document: sink.document,
            line: None,
            column: None,
            path: if field.is_empty() {
                p.path.clone()
            } else if p.path.is_empty() {
                "data[config.yaml]".to_string()
            } else {
                format!("data[config.yaml]: {}", p.path)
            },
            severity: Severity::Error,
            message: p.message.clone(),
        };
        if let Some((at, block)) = &inner {
            let within = inner_spans
                .as_ref()
                .and_then(|s| s.first())
                .and_then(|s| s.scalars.get(&p.path).copied().or_else(|| s.find(&p.path)));
            let (line, column) = match (block, within) {
                (Some((line, column)), Some((l, c))) => (line + l - 1, column + c - 1),
                _ => at.unwrap_or((0, 0)),
            };
            if line > 0 {
                d.line = Some(line);
                d.column = Some(column);
            }
        }
        sink.out.push(d);
    }
}

/// serde-saphyr's message without what the diagnostic says already (`error: line 9 column 22: `)
/// and without the snippet of the file it may add on further lines.
fn yaml_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim();
    let rest = first.strip_prefix("error: ").unwrap_or(first);
    match rest.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((position, text)) if position.contains(" column ") => text.to_string(),
        _ => rest.to_string(),
    }
}
