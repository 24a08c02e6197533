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
//! * `promoter.dev/allow-empty-stages`: whether a stage whose clusterSelector selects no cluster
//!   of the inventory passes (upstream's behaviour) instead of holding the rollout (`true` or
//!   `false` for every stage, or the per-stage list of `progress-deadline`: `eu-west=true`,
//!   `true, production=false`). Default false: see [`crate::pass::empty_stage`].
//! * `promoter.dev/failure-budget`: how many of a stage's clusters may be failing while the stage
//!   still passes: a number (`2`) or a share of the stage's clusters (`10%`, rounded down) for
//!   every stage, or the per-stage list of `progress-deadline`: `production=1%`, `1, dev=0`.
//!   Default 0: every matching cluster must run the revision, as upstream's stages do. What counts
//!   as failing, and how the budget is spent per run: [`crate::pass::budget`].
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
pub const ALLOW_EMPTY_STAGES: &str = "promoter.dev/allow-empty-stages";
pub const FAILURE_BUDGET: &str = "promoter.dev/failure-budget";

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
pub const SETTINGS: [Setting; 7] = [
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
    Setting {
        key: ALLOW_EMPTY_STAGES,
        what: "whether a stage whose clusterSelector selects no cluster passes, as upstream's does, instead of holding the rollout as Blocked",
        values: "`true` or `false` for every stage, or a comma-separated list of `stage=true|false` with an optional bare default (`eu-west=true`, `true, production=false`)",
        default: "`false`",
    },
    Setting {
        key: FAILURE_BUDGET,
        what: "how many of a stage's clusters may be failing (a feature Failed, unreachable, or not deployed by the stage's progress deadline) while the stage still passes; they are named until they run the revision, and a new revision starts with the whole budget",
        values: "a number of clusters (`2`) or a share of the stage's clusters, rounded down (`10%`), for every stage, or a comma-separated list of `stage=budget` with an optional bare default (`production=1%`, `1, dev=0`)",
        default: "`0`",
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

/// A per-stage setting as written: one value for every stage, or a comma-separated list of
/// `stage=value` with an optional bare default (`30m, production=6h`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PerStage<T> {
    default: Option<T>,
    stages: BTreeMap<String, T>,
}

impl<T> PerStage<T> {
    /// Reads `value`, each value with `one`; every error, not only the first. `empty` is the
    /// message for an empty value.
    fn parse(
        value: &str,
        stages: &[&str],
        empty: &str,
        one: impl Fn(&str) -> Result<T, String>,
    ) -> Result<PerStage<T>, Vec<String>> {
        let mut out = PerStage {
            default: None,
            stages: BTreeMap::new(),
        };
        if value.is_empty() {
            return Err(vec![format!("Invalid value: \"\": {empty}")]);
        }
        let mut errors = Vec::new();
        let mut has_default = false;
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
                    match one(text.trim()) {
                        Ok(v) => {
                            out.stages.insert(stage.to_string(), v);
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
                    match one(item) {
                        Ok(v) => out.default = Some(v),
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

    /// The value of `stage`: its own, else the default.
    fn for_stage(&self, stage: &str) -> Option<&T> {
        self.stages.get(stage).or(self.default.as_ref())
    }
}

/// `promoter.dev/allow-empty-stages`, read: the stages that pass when they select no cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmptyStages(PerStage<bool>);

impl EmptyStages {
    /// Whether `stage` passes when it selects no cluster (default: it holds the rollout).
    pub fn allowed(&self, stage: &str) -> bool {
        self.0.for_stage(stage).copied().unwrap_or(false)
    }
}

/// One stage's failure budget as written: a number of clusters, or a share of the stage's
/// clusters in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Clusters(u32),
    Percent(u32),
}

impl Budget {
    /// How many of `clusters` clusters the budget allows to fail: a share is rounded down (10% of
    /// 19 clusters is 1), so that a budget never allows more than it says.
    pub fn allows(self, clusters: usize) -> usize {
        match self {
            Budget::Clusters(n) => n as usize,
            Budget::Percent(pct) => clusters.saturating_mul(pct as usize) / 100,
        }
    }

    /// Whether it allows no failing cluster whatever the stage's size.
    pub fn is_zero(self) -> bool {
        matches!(self, Budget::Clusters(0) | Budget::Percent(0))
    }

    /// As written: `2`, `10%`.
    pub fn text(self) -> String {
        match self {
            Budget::Clusters(n) => n.to_string(),
            Budget::Percent(p) => format!("{p}%"),
        }
    }

    fn parse(text: &str) -> Result<Budget, String> {
        let bad = || {
            format!(
                "Invalid value: {text:?}: must be a number of clusters (2) or a share of the stage's clusters (10%)"
            )
        };
        if text.starts_with('-') {
            return Err(format!("Invalid value: {text:?}: must not be negative"));
        }
        match text.strip_suffix('%') {
            Some(pct) => match pct.trim().parse::<u32>() {
                Ok(p) if p > 100 => Err(format!("Invalid value: {text:?}: must be at most 100%")),
                Ok(p) => Ok(Budget::Percent(p)),
                Err(_) => Err(bad()),
            },
            None => text.parse::<u32>().map(Budget::Clusters).map_err(|_| bad()),
        }
    }
}

/// `promoter.dev/failure-budget`, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureBudgets(PerStage<Budget>);

impl Default for FailureBudgets {
    fn default() -> Self {
        FailureBudgets(PerStage {
            default: None,
            stages: BTreeMap::new(),
        })
    }
}

impl FailureBudgets {
    /// The budget of `stage`: its own, else the default, else none (`0`).
    pub fn for_stage(&self, stage: &str) -> Budget {
        self.0
            .for_stage(stage)
            .copied()
            .unwrap_or(Budget::Clusters(0))
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
    pub allow_empty_stages: EmptyStages,
    pub failure_budget: FailureBudgets,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            progress_deadline: ProgressDeadlines::default(),
            failure_policy: FailurePolicy::Halt,
            rollback_order: RollbackOrder::Reverse,
            revision_history_limit: DEFAULT_HISTORY_LIMIT,
            rollback_deadline: deadline(DEFAULT_ROLLBACK_DEADLINE).ok().flatten(),
            allow_empty_stages: EmptyStages::default(),
            failure_budget: FailureBudgets::default(),
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
    if let Some(v) = get(ALLOW_EMPTY_STAGES) {
        let one = |text: &str| match text {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(unsupported(other, ["true", "false"])),
        };
        match PerStage::parse(
            v,
            &stages,
            "must be true, false, or a comma-separated list of stage=true|false with an optional default",
            one,
        ) {
            Ok(p) => settings.allow_empty_stages = EmptyStages(p),
            Err(messages) => {
                for m in messages {
                    error(ALLOW_EMPTY_STAGES, m);
                }
            }
        }
    }
    if let Some(v) = get(FAILURE_BUDGET) {
        match PerStage::parse(
            v,
            &stages,
            "must be a number of clusters, a share (10%), or a comma-separated list of stage=budget with an optional default",
            Budget::parse,
        ) {
            Ok(p) => settings.failure_budget = FailureBudgets(p),
            Err(messages) => {
                for m in messages {
                    error(FAILURE_BUDGET, m);
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
/// person can trigger; a failure budget on a stage without a progress deadline (a cluster that
/// never finishes deploying then never counts against it: the stage waits for it).
pub fn warnings(p: &ClusterPromotion) -> Vec<SettingError> {
    let (settings, _) = parse(p);
    let mut out = Vec::new();
    let undated: Vec<&str> = p
        .spec
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .filter(|s| {
            !settings.failure_budget.for_stage(s).is_zero() && settings.deadline_for(s).is_none()
        })
        .collect();
    if !undated.is_empty() {
        out.push(SettingError {
            annotation: FAILURE_BUDGET.into(),
            message: format!(
                "stage{} {} ha{} a failure budget but no {PROGRESS_DEADLINE}: a cluster that never finishes deploying does not count against the budget, and the stage waits for it",
                if undated.len() == 1 { "" } else { "s" },
                undated.join(", "),
                if undated.len() == 1 { "s" } else { "ve" },
            ),
        });
    }
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
    let read = PerStage::parse(
        value,
        stages,
        "must be a duration, none, or a comma-separated list of stage=duration with an optional default",
        deadline,
    )?;
    Ok(ProgressDeadlines {
        default: read.default.flatten(),
        stages: read.stages,
    })
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
        assert_eq!(SETTINGS.len(), 7);
        assert_eq!(
            Settings::default().failure_budget.for_stage("production"),
            Budget::Clusters(0),
            "absent, no cluster may fail"
        );
        assert!(SETTINGS.iter().any(|s| s.key == ROLLBACK_DEADLINE));
    }

    #[test]
    fn allow_empty_stages_grammar() {
        let allowed = |v: &str| {
            let s = Settings::of(&promotion(&[(ALLOW_EMPTY_STAGES, v)]));
            ["dev", "staging", "production"].map(|st| s.allow_empty_stages.allowed(st))
        };
        let table: &[(&str, [bool; 3])] = &[
            ("true", [true, true, true]),
            ("false", [false, false, false]),
            ("staging=true", [false, true, false]),
            ("true, production=false", [true, true, false]),
            (" dev = true , staging=true", [true, true, false]),
        ];
        for (value, want) in table {
            assert_eq!(allowed(value), *want, "{value}");
            assert!(problems(&promotion(&[(ALLOW_EMPTY_STAGES, value)])).is_empty());
        }
        assert!(
            !Settings::default().allow_empty_stages.allowed("dev"),
            "absent, an empty stage holds the rollout"
        );
        for (v, want) in [
            (
                "yes",
                &[
                    r#"metadata.annotations[promoter.dev/allow-empty-stages]: Unsupported value: "yes": supported values: "true", "false""#,
                ][..],
            ),
            (
                "stagin=true",
                &[
                    r#"metadata.annotations[promoter.dev/allow-empty-stages]: Unsupported value: "stagin": supported values: "dev", "staging", "production""#,
                ],
            ),
            (
                "true, false",
                &[
                    r#"metadata.annotations[promoter.dev/allow-empty-stages]: Invalid value: "false": a second default (only one entry may omit stage=)"#,
                ],
            ),
            (
                "",
                &[
                    r#"metadata.annotations[promoter.dev/allow-empty-stages]: Invalid value: "": must be true, false, or a comma-separated list of stage=true|false with an optional default"#,
                ],
            ),
        ] {
            assert_eq!(
                problems(&promotion(&[(ALLOW_EMPTY_STAGES, v)])),
                want,
                "{v}"
            );
            assert_eq!(
                Settings::of(&promotion(&[(ALLOW_EMPTY_STAGES, v)])),
                Settings::default()
            );
        }
    }

    #[test]
    fn failure_budget_grammar() {
        let allows = |v: &str, clusters: usize| {
            let s = Settings::of(&promotion(&[(FAILURE_BUDGET, v)]));
            ["dev", "staging", "production"]
                .map(|st| s.failure_budget.for_stage(st).allows(clusters))
        };
        let table: &[(&str, usize, [usize; 3])] = &[
            ("0", 20, [0, 0, 0]),
            ("2", 20, [2, 2, 2]),
            ("production=10%", 20, [0, 0, 2]),
            ("production=10%", 19, [0, 0, 1]),
            ("production=1%", 2000, [0, 0, 20]),
            ("production=1%", 99, [0, 0, 0]),
            ("1, dev=0", 5, [0, 1, 1]),
            (" 50% , staging = 3 ", 3, [1, 3, 1]),
            ("100%", 4, [4, 4, 4]),
        ];
        for (value, clusters, want) in table {
            assert_eq!(allows(value, *clusters), *want, "{value} of {clusters}");
            assert!(problems(&promotion(&[(FAILURE_BUDGET, value)])).is_empty());
        }
        assert_eq!(
            Settings::of(&promotion(&[(FAILURE_BUDGET, "production=10%")]))
                .failure_budget
                .for_stage("production")
                .text(),
            "10%"
        );
        for (v, want) in [
            (
                "-1",
                r#"metadata.annotations[promoter.dev/failure-budget]: Invalid value: "-1": must not be negative"#,
            ),
            (
                "101%",
                r#"metadata.annotations[promoter.dev/failure-budget]: Invalid value: "101%": must be at most 100%"#,
            ),
            (
                "1.5%",
                r#"metadata.annotations[promoter.dev/failure-budget]: Invalid value: "1.5%": must be a number of clusters (2) or a share of the stage's clusters (10%)"#,
            ),
            (
                "prod=1",
                r#"metadata.annotations[promoter.dev/failure-budget]: Unsupported value: "prod": supported values: "dev", "staging", "production""#,
            ),
        ] {
            assert_eq!(problems(&promotion(&[(FAILURE_BUDGET, v)])), [want], "{v}");
            assert_eq!(
                Settings::of(&promotion(&[(FAILURE_BUDGET, v)])),
                Settings::default(),
                "a bad value is no budget"
            );
        }
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
        let budget_only = promotion(&[(FAILURE_BUDGET, "production=1")]);
        assert_eq!(
            warnings(&budget_only)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "metadata.annotations[promoter.dev/failure-budget]: stage production has a failure budget but no promoter.dev/progress-deadline: a cluster that never finishes deploying does not count against the budget, and the stage waits for it"
            ]
        );
        assert!(
            warnings(&promotion(&[
                (FAILURE_BUDGET, "production=1"),
                (PROGRESS_DEADLINE, "production=2h")
            ]))
            .is_empty()
        );
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
