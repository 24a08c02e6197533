//! Per-promotion settings: `promoter.dev/` annotations on the ClusterPromotion (the upstream CRD
//! prunes unknown spec fields; annotations survive, travel with the manifest and `kubectl
//! annotate` edits them). Absent, every setting has today's behaviour, so upstream manifests are
//! unchanged.
//!
//! * `promoter.dev/progress-deadline`: `2h` for every stage, or a comma-separated list of
//!   `stage=duration` with an optional bare default (`30m, production=6h`, `1h, dev=none`).
//!   Durations in the flag grammar of every command, at most 365 days; `none` (or `0`) is no
//!   deadline. Default: none.
//! * `promoter.dev/failure-policy`: `halt` (default) or `rollback`.
//! * `promoter.dev/rollback-order`: `reverse` (default) or `all-at-once`.
//! * `promoter.dev/revision-history-limit`: completed revisions kept, 1..=50 (default 10).
//! * `promoter.dev/rollback-deadline`: how long a rollback may take, from its first pass to every
//!   target rolled back (pauses and aborts excluded), in the same grammar as a deadline; `none`
//!   waits for ever. Default 1h: a rollback deploys a revision that deployed before, and one that
//!   cannot finish (the good revision fails too) must reach a person rather than wait unseen.
//!
//! A bad value blocks the promotion (like an invalid promotion window), with the annotation as the
//! field path and kube-apiserver's wording; `lint` reports the same text.
//!
//! [`crate::known_keys`] lists these keys with promoter's records: any other `promoter.dev/` key is
//! an error too.

use crate::api::ClusterPromotion;
use crate::api::flag_duration::parse as parse_duration;
use chrono::Duration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub const PROGRESS_DEADLINE: &str = "promoter.dev/progress-deadline";
pub const FAILURE_POLICY: &str = "promoter.dev/failure-policy";
pub const ROLLBACK_ORDER: &str = "promoter.dev/rollback-order";
pub const REVISION_HISTORY_LIMIT: &str = "promoter.dev/revision-history-limit";
pub const ROLLBACK_DEADLINE: &str = "promoter.dev/rollback-deadline";

/// One per-promotion setting: its key, what it sets, the values it takes, and what holds where
/// it is absent. `crd`'s description of ClusterPromotion, `explain` and the book's reference
/// (`promoter reference`) say these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub key: &'static str,
    /// What it sets.
    pub what: &'static str,
    /// The values it takes (markdown).
    pub values: &'static str,
    /// What holds where it is absent.
    pub default: &'static str,
}

impl Setting {
    /// `what (values; default d)`: one line for a description.
    pub fn summary(&self) -> String {
        format!("{} ({}; default {})", self.what, self.values, self.default)
    }
}

/// Every per-promotion setting.
pub const SETTINGS: [Setting; 5] = [
    Setting {
        key: PROGRESS_DEADLINE,
        what: "how long each stage may take to complete",
        values: "a duration for every stage (`2h`), or a comma-separated list of `stage=duration` with an optional bare default (`30m, production=6h`, `1h, dev=none`); durations as every flag takes them (`30s`, `10m`, `1.5h`, `1d`), at most 365 days; `none` or `0` is no deadline",
        default: "none",
    },
    Setting {
        key: FAILURE_POLICY,
        what: "what a missed progress deadline does: the run holds, or every reached stage goes back to the last revision that completed the whole rollout",
        values: "`halt` or `rollback`",
        default: "`halt`",
    },
    Setting {
        key: ROLLBACK_ORDER,
        what: "how a rollback restores the stages: the highest stage first, each deployed everywhere before the next lower one, or every stage at once",
        values: "`reverse` or `all-at-once`",
        default: "`reverse`",
    },
    Setting {
        key: REVISION_HISTORY_LIMIT,
        what: "completed revisions kept for rollbacks",
        values: "an integer from 1 to 50",
        default: "10",
    },
    Setting {
        key: ROLLBACK_DEADLINE,
        what: "how long a rollback may take, from its first pass until every target is rolled back (pauses and aborts excluded), before it holds for a person",
        values: "a duration, as for a progress deadline, or `none`",
        default: "`1h`",
    },
];

pub const DEFAULT_HISTORY_LIMIT: usize = 10;
pub const MAX_HISTORY_LIMIT: usize = 50;
/// The longest progress deadline, in days: a year is beyond any rollout, and the grammar accepts
/// durations (`300000y`) that overflow the calendar when added to a stage's start.
pub const MAX_DEADLINE_DAYS: i64 = 365;
/// A rollback's deadline when `promoter.dev/rollback-deadline` is absent.
pub const DEFAULT_ROLLBACK_DEADLINE: &str = "1h";

/// What happens when a stage misses its progress deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// The run holds (phase Failed) until the spec changes or `promoter resume`.
    #[default]
    Halt,
    /// Every reached stage goes back to the last known good revision.
    Rollback,
}

/// In which order a rollback restores the reached stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RollbackOrder {
    /// The highest reached stage first; each completes before the next lower one starts.
    #[default]
    Reverse,
    /// Every reached stage at once.
    AllAtOnce,
}

impl FailurePolicy {
    pub const VALUES: [&'static str; 2] = ["halt", "rollback"];
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Halt => "halt",
            FailurePolicy::Rollback => "rollback",
        }
    }
}

impl RollbackOrder {
    pub const VALUES: [&'static str; 2] = ["reverse", "all-at-once"];
    pub fn as_str(self) -> &'static str {
        match self {
            RollbackOrder::Reverse => "reverse",
            RollbackOrder::AllAtOnce => "all-at-once",
        }
    }
    /// `reverse` or `all-at-once`; None for anything else.
    pub fn parse(s: &str) -> Option<RollbackOrder> {
        match s {
            "reverse" => Some(RollbackOrder::Reverse),
            "all-at-once" => Some(RollbackOrder::AllAtOnce),
            _ => None,
        }
    }
}

/// One stage's progress deadline: how long after the stage was reached (and its soak) it must be
/// complete, and the text it was written as (`2h`), for status texts and the `failed` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub after: Duration,
    pub text: String,
}

/// `promoter.dev/progress-deadline`, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgressDeadlines {
    /// The bare default; None: no deadline.
    default: Option<Deadline>,
    /// Per stage overrides; a None value is `stage=none`.
    stages: BTreeMap<String, Option<Deadline>>,
}

impl ProgressDeadlines {
    /// The deadline of `stage`: its override, else the default; None: no deadline.
    pub fn for_stage(&self, stage: &str) -> Option<&Deadline> {
        match self.stages.get(stage) {
            Some(d) => d.as_ref(),
            None => self.default.as_ref(),
        }
    }

    /// Whether any stage has a deadline.
    pub fn any(&self) -> bool {
        self.default.is_some() || self.stages.values().any(Option::is_some)
    }
}

/// Every setting, each with its default where the annotation is absent or invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub progress_deadline: ProgressDeadlines,
    pub failure_policy: FailurePolicy,
    pub rollback_order: RollbackOrder,
    pub revision_history_limit: usize,
    /// How long a rollback may take; None: no deadline (`none`).
    pub rollback_deadline: Option<Deadline>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            progress_deadline: ProgressDeadlines::default(),
            failure_policy: FailurePolicy::Halt,
            rollback_order: RollbackOrder::Reverse,
            revision_history_limit: DEFAULT_HISTORY_LIMIT,
            rollback_deadline: deadline(DEFAULT_ROLLBACK_DEADLINE).ok().flatten(),
        }
    }
}

impl Settings {
    /// The settings of `p`; an invalid annotation counts as absent (see [`problems`], which the
    /// planner blocks on before it reads these).
    pub fn of(p: &ClusterPromotion) -> Settings {
        parse(p).0
    }

    /// The progress deadline of `stage`; None: the stage has none.
    pub fn deadline_for(&self, stage: &str) -> Option<&Deadline> {
        self.progress_deadline.for_stage(stage)
    }
}

/// A bad setting: the annotation, and what is wrong in kube-apiserver's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    pub annotation: String,
    pub message: String,
}

impl SettingError {
    /// `metadata.annotations[promoter.dev/failure-policy]`, the field path of the annotation.
    pub fn path(&self) -> String {
        format!("metadata.annotations[{}]", self.annotation)
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path(), self.message)
    }
}

pub(crate) fn quoted(values: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    values
        .into_iter()
        .map(|v| format!("{:?}", v.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn unsupported(got: &str, supported: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    format!(
        "Unsupported value: {got:?}: supported values: {}",
        quoted(supported)
    )
}

/// The settings of `p` (defaults where an annotation is absent or invalid) and every error.
pub fn parse(p: &ClusterPromotion) -> (Settings, Vec<SettingError>) {
    let mut settings = Settings::default();
    let mut errors = Vec::new();
    let annotations = p.metadata.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key)).map(|v| v.trim());
    let stages: Vec<&str> = p.spec.stages.iter().map(|s| s.name.as_str()).collect();
    let mut error = |annotation: &str, message: String| {
        errors.push(SettingError {
            annotation: annotation.to_string(),
            message,
        })
    };

    if let Some(v) = get(FAILURE_POLICY) {
        match v {
            "halt" => settings.failure_policy = FailurePolicy::Halt,
            "rollback" => settings.failure_policy = FailurePolicy::Rollback,
            other => error(FAILURE_POLICY, unsupported(other, FailurePolicy::VALUES)),
        }
    }
    if let Some(v) = get(ROLLBACK_ORDER) {
        match RollbackOrder::parse(v) {
            Some(o) => settings.rollback_order = o,
            None => error(ROLLBACK_ORDER, unsupported(v, RollbackOrder::VALUES)),
        }
    }
    if let Some(v) = get(REVISION_HISTORY_LIMIT) {
        match v.parse::<i64>() {
            Err(_) => error(
                REVISION_HISTORY_LIMIT,
                format!("Invalid value: {v:?}: must be an integer"),
            ),
            Ok(n) if n < 1 || n > MAX_HISTORY_LIMIT as i64 => error(
                REVISION_HISTORY_LIMIT,
                format!("Invalid value: {n}: must be between 1 and {MAX_HISTORY_LIMIT}, inclusive"),
            ),
            Ok(n) => settings.revision_history_limit = n as usize,
        }
    }
    if let Some(v) = get(ROLLBACK_DEADLINE) {
        match deadline(v) {
            Ok(d) => settings.rollback_deadline = d,
            Err(e) => error(ROLLBACK_DEADLINE, e),
        }
    }
    if let Some(v) = get(PROGRESS_DEADLINE) {
        match progress_deadlines(v, &stages) {
            Ok(d) => settings.progress_deadline = d,
            Err(messages) => {
                for m in messages {
                    error(PROGRESS_DEADLINE, m);
                }
            }
        }
    }
    (settings, errors)
}

/// What stops the promotion from being processed, each `<path>: <message>` (the planner's
/// blocked texts).
pub fn problems(p: &ClusterPromotion) -> Vec<String> {
    parse(p).1.iter().map(ToString::to_string).collect()
}

/// Legal settings that are likely unintended (for `lint`): a rollback policy that nothing but a
/// person can trigger.
pub fn warnings(p: &ClusterPromotion) -> Vec<SettingError> {
    let (settings, _) = parse(p);
    let mut out = Vec::new();
    if settings.failure_policy == FailurePolicy::Rollback && !settings.progress_deadline.any() {
        out.push(SettingError {
            annotation: FAILURE_POLICY.into(),
            message: format!(
                "rollback without a {PROGRESS_DEADLINE} never triggers on its own; `promoter rollback` still works"
            ),
        });
    }
    out
}

/// One duration of the grammar, `none` or `0` for no deadline.
fn deadline(text: &str) -> Result<Option<Deadline>, String> {
    if text == "none" {
        return Ok(None);
    }
    if text.starts_with('-') {
        return Err(format!("Invalid value: {text:?}: must not be negative"));
    }
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Ok(None),
        Ok(d) if d > Duration::days(MAX_DEADLINE_DAYS) => Err(format!(
            "Invalid value: {text:?}: must be at most {MAX_DEADLINE_DAYS}d"
        )),
        Ok(after) => Ok(Some(Deadline {
            after,
            text: text.to_string(),
        })),
        Err(_) => Err(format!(
            "Invalid value: {text:?}: must be a duration (30s, 10m, 1.5h, 1d) or none"
        )),
    }
}

/// `2h`, `30m, production=6h`, `1h, dev=none`: every error, not only the first.
fn progress_deadlines(value: &str, stages: &[&str]) -> Result<ProgressDeadlines, Vec<String>> {
    let mut out = ProgressDeadlines::default();
    let mut errors = Vec::new();
    let mut has_default = false;
    if value.is_empty() {
        return Err(vec![
            "Invalid value: \"\": must be a duration, none, or a comma-separated list of stage=duration with an optional default".into(),
        ]);
    }
    for item in value.split(',').map(str::trim) {
        if item.is_empty() {
            errors.push(format!("Invalid value: {value:?}: an empty entry"));
            continue;
        }
        match item.split_once('=') {
            Some((stage, text)) => {
                let stage = stage.trim();
                if !stages.contains(&stage) {
                    errors.push(unsupported(stage, stages));
                    continue;
                }
                if out.stages.contains_key(stage) {
                    errors.push(format!("Duplicate value: {stage:?}"));
                    continue;
                }
                match deadline(text.trim()) {
                    Ok(d) => {
                        out.stages.insert(stage.to_string(), d);
                    }
                    Err(e) => errors.push(e),
                }
            }
            None => {
                if has_default {
                    errors.push(format!(
                        "Invalid value: {item:?}: a second default (only one entry may omit stage=)"
                    ));
                    continue;
                }
                has_default = true;
                match deadline(item) {
                    Ok(d) => out.default = d,
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion(annotations: &[(&str, &str)]) -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": annotations.iter().cloned().collect::<BTreeMap<_, _>>()},
            "spec": {"stages": [{"name": "dev"}, {"name": "staging"}, {"name": "production"}]}
        }))
        .unwrap()
    }

    fn deadlines(value: &str) -> Vec<(&'static str, Option<i64>)> {
        let s = Settings::of(&promotion(&[(PROGRESS_DEADLINE, value)]));
        ["dev", "staging", "production"]
            .into_iter()
            .map(|st| (st, s.deadline_for(st).map(|d| d.after.num_minutes())))
            .collect()
    }

    #[test]
    fn absent_annotations_are_todays_behaviour() {
        let (s, errors) = parse(&promotion(&[]));
        assert_eq!(s, Settings::default());
        assert!(errors.is_empty());
        assert_eq!(s.deadline_for("dev"), None);
        assert_eq!(s.failure_policy, FailurePolicy::Halt);
        assert_eq!(s.rollback_order, RollbackOrder::Reverse);
        assert_eq!(s.revision_history_limit, 10);
        assert_eq!(
            s.rollback_deadline.map(|d| (d.after, d.text)),
            Some((Duration::hours(1), "1h".to_string())),
            "a rollback has a deadline of its own by default"
        );
    }

    #[test]
    fn rollback_deadline_grammar() {
        let of = |v: &str| Settings::of(&promotion(&[(ROLLBACK_DEADLINE, v)])).rollback_deadline;
        assert_eq!(of("45m").map(|d| d.after), Some(Duration::minutes(45)));
        assert_eq!(of("none"), None);
        assert_eq!(of("0"), None);
        for (v, want) in [
            (
                "-1h",
                r#"metadata.annotations[promoter.dev/rollback-deadline]: Invalid value: "-1h": must not be negative"#,
            ),
            (
                "soon",
                r#"metadata.annotations[promoter.dev/rollback-deadline]: Invalid value: "soon": must be a duration (30s, 10m, 1.5h, 1d) or none"#,
            ),
            (
                "dev=1h",
                r#"metadata.annotations[promoter.dev/rollback-deadline]: Invalid value: "dev=1h": must be a duration (30s, 10m, 1.5h, 1d) or none"#,
            ),
        ] {
            assert_eq!(
                problems(&promotion(&[(ROLLBACK_DEADLINE, v)])),
                [want],
                "{v}"
            );
        }
        assert_eq!(SETTINGS.len(), 5);
        assert!(SETTINGS.iter().any(|s| s.key == ROLLBACK_DEADLINE));
    }

    #[test]
    fn progress_deadline_grammar() {
        let table: &[(&str, [Option<i64>; 3])] = &[
            ("2h", [Some(120), Some(120), Some(120)]),
            ("30m, production=6h", [Some(30), Some(30), Some(360)]),
            ("1h, dev=none", [None, Some(60), Some(60)]),
            ("staging=1.5h", [None, Some(90), None]),
            ("none", [None, None, None]),
            ("0", [None, None, None]),
            ("1d,dev=0", [None, Some(1440), Some(1440)]),
            (" production = 90m ", [None, None, Some(90)]),
            // The cap, inclusive.
            ("365d", [Some(525_600), Some(525_600), Some(525_600)]),
        ];
        for (value, want) in table {
            let got: Vec<Option<i64>> = deadlines(value).into_iter().map(|(_, d)| d).collect();
            assert_eq!(got, want, "{value}");
            assert!(problems(&promotion(&[(PROGRESS_DEADLINE, value)])).is_empty());
        }
        let s = Settings::of(&promotion(&[(PROGRESS_DEADLINE, "30m, production=6h")]));
        assert_eq!(s.deadline_for("production").unwrap().text, "6h");
        assert_eq!(s.deadline_for("dev").unwrap().text, "30m");
    }

    #[test]
    fn bad_values_name_the_annotation_in_the_api_servers_words() {
        let table: &[(&str, &str, &[&str])] = &[
            (
                FAILURE_POLICY,
                "rolback",
                &[
                    r#"metadata.annotations[promoter.dev/failure-policy]: Unsupported value: "rolback": supported values: "halt", "rollback""#,
                ],
            ),
            (
                ROLLBACK_ORDER,
                "forward",
                &[
                    r#"metadata.annotations[promoter.dev/rollback-order]: Unsupported value: "forward": supported values: "reverse", "all-at-once""#,
                ],
            ),
            (
                REVISION_HISTORY_LIMIT,
                "0",
                &[
                    "metadata.annotations[promoter.dev/revision-history-limit]: Invalid value: 0: must be between 1 and 50, inclusive",
                ],
            ),
            (
                REVISION_HISTORY_LIMIT,
                "ten",
                &[
                    r#"metadata.annotations[promoter.dev/revision-history-limit]: Invalid value: "ten": must be an integer"#,
                ],
            ),
            (
                PROGRESS_DEADLINE,
                "-5m",
                &[
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "-5m": must not be negative"#,
                ],
            ),
            (
                PROGRESS_DEADLINE,
                "300000y, dev=366d",
                &[
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "300000y": must be at most 365d"#,
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "366d": must be at most 365d"#,
                ],
            ),
            (
                PROGRESS_DEADLINE,
                "5x, prod=1h",
                &[
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "5x": must be a duration (30s, 10m, 1.5h, 1d) or none"#,
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Unsupported value: "prod": supported values: "dev", "staging", "production""#,
                ],
            ),
            (
                PROGRESS_DEADLINE,
                "1h, 2h, dev=1m, dev=2m,",
                &[
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "2h": a second default (only one entry may omit stage=)"#,
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Duplicate value: "dev""#,
                    r#"metadata.annotations[promoter.dev/progress-deadline]: Invalid value: "1h, 2h, dev=1m, dev=2m,": an empty entry"#,
                ],
            ),
        ];
        for (key, value, want) in table {
            let p = promotion(&[(key, value)]);
            assert_eq!(problems(&p), *want, "{key}={value}");
            // An invalid setting reads as absent.
            assert_eq!(Settings::of(&p), Settings::default(), "{key}={value}");
        }
    }

    #[test]
    fn valid_policies_and_the_rollback_without_deadline_warning() {
        let p = promotion(&[
            (FAILURE_POLICY, "rollback"),
            (ROLLBACK_ORDER, "all-at-once"),
            (REVISION_HISTORY_LIMIT, "50"),
        ]);
        let (s, errors) = parse(&p);
        assert!(errors.is_empty());
        assert_eq!(s.failure_policy, FailurePolicy::Rollback);
        assert_eq!(s.rollback_order, RollbackOrder::AllAtOnce);
        assert_eq!(s.revision_history_limit, 50);
        let w = warnings(&p);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].annotation, FAILURE_POLICY);
        let with_deadline =
            promotion(&[(FAILURE_POLICY, "rollback"), (PROGRESS_DEADLINE, "dev=1h")]);
        assert!(warnings(&with_deadline).is_empty());
        let none_anywhere = promotion(&[(FAILURE_POLICY, "rollback"), (PROGRESS_DEADLINE, "none")]);
        assert_eq!(warnings(&none_anywhere).len(), 1);
    }

    #[test]
    fn policy_names_round_trip_through_json() {
        assert_eq!(
            serde_json::to_string(&RollbackOrder::AllAtOnce).unwrap(),
            "\"all-at-once\""
        );
        assert_eq!(
            serde_json::to_string(&FailurePolicy::Rollback).unwrap(),
            "\"rollback\""
        );
        for v in RollbackOrder::VALUES {
            assert_eq!(RollbackOrder::parse(v).unwrap().as_str(), v);
        }
        // `explain` prints the policy read from the annotation by these names.
        for v in FailurePolicy::VALUES {
            let s = Settings::of(&promotion(&[(FAILURE_POLICY, v)]));
            assert_eq!(s.failure_policy.as_str(), v);
        }
    }
}
