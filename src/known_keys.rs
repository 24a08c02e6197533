//! The one list of every `promoter.dev/` annotation key a ClusterPromotion may carry: the settings
//! ([`crate::settings`]) and promoter's records ([`crate::annotations`]). Any other key in
//! promoter's prefix (`promoter.dev/progres-deadline`) is an error in the promotion's status (it is
//! blocked, as for a bad setting) and in `lint`, with the known key it is a typo of; `explain` says
//! what each present key is. Keys outside `promoter.dev/` are never promoter's business. A new
//! setting or record is added to [`KNOWN_KEYS`].
//!
//! `promoter.dev/paused` is a record `promoter pause` writes (who, since when); a value written by
//! hand is explained: `false` (or `no`, `off`, `0`, empty) is no pause, anything else pauses "by
//! hand", and `lint` warns about both.

use crate::api::ClusterPromotion;
use crate::settings::{
    ALLOW_EMPTY_STAGES, FAILURE_BUDGET, FAILURE_POLICY, PROGRESS_DEADLINE, REVISION_HISTORY_LIMIT,
    ROLLBACK_DEADLINE, ROLLBACK_ORDER, SettingError,
};
use serde::Serialize;

/// promoter's annotation prefix.
pub const PREFIX: &str = "promoter.dev/";

/// Who writes a `promoter.dev/` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum KeyKind {
    /// A person, in the manifest or with `kubectl annotate`: a setting, validated here.
    Setting,
    /// promoter's commands or passes: a record of what happened.
    Record,
}

/// One `promoter.dev/` key a ClusterPromotion may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKey {
    /// The key, or for a per-stage key its prefix (`promoter.dev/approval.`).
    pub key: &'static str,
    /// `<key><stage>`: one per stage.
    pub per_stage: bool,
    pub kind: KeyKind,
    /// What it is, for `explain`.
    pub about: &'static str,
}

const fn setting(key: &'static str, about: &'static str) -> KnownKey {
    KnownKey {
        key,
        per_stage: false,
        kind: KeyKind::Setting,
        about,
    }
}

const fn record(key: &'static str, about: &'static str) -> KnownKey {
    KnownKey {
        key,
        per_stage: false,
        kind: KeyKind::Record,
        about,
    }
}

const fn per_stage(key: &'static str, about: &'static str) -> KnownKey {
    KnownKey {
        per_stage: true,
        ..record(key, about)
    }
}

/// Every `promoter.dev/` key of a ClusterPromotion: the settings above and the records of
/// [`crate::annotations`]. The only list: lint, the pass and `explain` read it.
pub const KNOWN_KEYS: &[KnownKey] = &[
    setting(PROGRESS_DEADLINE, "progress deadline per stage"),
    setting(
        FAILURE_POLICY,
        "what a missed deadline does: halt or rollback",
    ),
    setting(ROLLBACK_ORDER, "how a rollback restores the stages"),
    setting(
        ROLLBACK_DEADLINE,
        "how long a rollback may take before it holds for a person",
    ),
    setting(REVISION_HISTORY_LIMIT, "completed revisions kept"),
    setting(
        ALLOW_EMPTY_STAGES,
        "which stages pass when they select no cluster (upstream's behaviour)",
    ),
    setting(
        FAILURE_BUDGET,
        "how many of a stage's clusters may be failing while it still passes",
    ),
    record(
        crate::annotations::PAUSED,
        "promoter pause: who paused it, since when",
    ),
    per_stage(
        crate::annotations::APPROVAL_PREFIX,
        "promoter approve: who approved the stage, for which revision",
    ),
    per_stage(
        crate::annotations::GRANT_PREFIX,
        "an approval of the stage consumed for one run",
    ),
    record(
        crate::annotations::COMPLETED,
        "the run whose rollout completed",
    ),
    record(crate::annotations::HISTORY, "the revision history"),
    record(
        crate::annotations::REVISION_SWEEP,
        "stored revisions the history forgot, still to be deleted",
    ),
    record(
        crate::annotations::FAILED,
        "a missed progress deadline of the current run",
    ),
    record(
        crate::annotations::ROLLBACK,
        "a rollback of the current run",
    ),
    record(
        crate::annotations::ABORTED,
        "promoter abort of the current run",
    ),
    record(
        crate::annotations::RETRY,
        "promoter resume of a rolled-back revision",
    ),
    record(
        crate::annotations::BUDGETED,
        "the clusters counted against their stage's failure budget in the current run",
    ),
    record(
        crate::annotations::DEADLINE_CLOCK,
        "what the passes saw of the running deadline",
    ),
    record(crate::annotations::FREEZE_BYPASS, "promoter freeze bypass"),
    record(
        crate::annotations::REDEPLOY,
        "what Sveltos redeploys after promoter changed a generated profile",
    ),
    record(
        crate::annotations::outbox::OUTBOX,
        "transitions still to be notified",
    ),
];

/// The known key `key` is (a per-stage key by its prefix); None for a key promoter does not know
/// or one outside its prefix.
pub fn known_key(key: &str) -> Option<&'static KnownKey> {
    KNOWN_KEYS.iter().find(|k| {
        if k.per_stage {
            key.strip_prefix(k.key)
                .is_some_and(|stage| !stage.is_empty())
        } else {
            key == k.key
        }
    })
}

/// The error of a `promoter.dev/` key promoter does not know, with the known key it is closest
/// to (a per-stage key as `<prefix><stage>` of a stage of `p`).
fn unknown_key(key: &str, stages: &[&str]) -> String {
    let mut candidates: Vec<String> = Vec::new();
    for k in KNOWN_KEYS {
        if k.per_stage {
            candidates.extend(stages.iter().map(|s| format!("{}{s}", k.key)));
        } else {
            candidates.push(k.key.to_string());
        }
    }
    let suggestion = crate::suggest::did_you_mean(key, candidates.iter().map(String::as_str));
    let settings: Vec<&str> = KNOWN_KEYS
        .iter()
        .filter(|k| k.kind == KeyKind::Setting)
        .map(|k| k.key)
        .collect();
    format!(
        "Unsupported key: promoter knows the settings {} and its own records{suggestion}",
        crate::settings::quoted(settings)
    )
}

/// Every `promoter.dev/` key of `p` promoter does not know, as a setting error (what blocks the
/// promotion; `lint` reports the same).
pub fn problems(p: &ClusterPromotion) -> Vec<SettingError> {
    let stages: Vec<&str> = p.spec.stages.iter().map(|s| s.name.as_str()).collect();
    p.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(PREFIX) && known_key(key).is_none())
        .map(|(key, _)| SettingError {
            annotation: key.clone(),
            message: unknown_key(key, &stages),
        })
        .collect()
}

/// Legal but likely unintended (for `lint`): a `paused` value not written by `promoter pause`.
pub fn warnings(p: &ClusterPromotion) -> Vec<SettingError> {
    let Some(value) = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::annotations::PAUSED))
    else {
        return Vec::new();
    };
    if crate::annotations::paused_record(value).is_some() {
        return Vec::new();
    }
    let message = if crate::annotations::not_a_pause(value) {
        format!(
            "{value:?} does not pause: a pause is the record `promoter pause` writes; remove the annotation"
        )
    } else {
        format!(
            "{value:?} pauses by hand, without who and since when: `promoter pause` writes that record"
        )
    };
    vec![SettingError {
        annotation: crate::annotations::PAUSED.into(),
        message,
    }]
}

/// Each `promoter.dev/` key of `p`: what it is, or why it is wrong (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PresentKey {
    pub key: String,
    pub kind: Option<KeyKind>,
    pub about: String,
}

pub fn present(p: &ClusterPromotion) -> Vec<PresentKey> {
    let stages: Vec<&str> = p.spec.stages.iter().map(|s| s.name.as_str()).collect();
    p.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(PREFIX))
        .map(|(key, _)| match known_key(key) {
            Some(k) => PresentKey {
                key: key.clone(),
                kind: Some(k.kind),
                about: k.about.to_string(),
            },
            None => PresentKey {
                key: key.clone(),
                kind: None,
                about: unknown_key(key, &stages),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion(annotations: &[(&str, &str)]) -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": annotations.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()},
            "spec": {"stages": [{"name": "dev"}, {"name": "production"}]}
        }))
        .unwrap()
    }

    /// Every `promoter.dev/` key the settings and the records write is in the list: a new one
    /// added without it would block every promotion carrying it.
    #[test]
    fn every_key_promoter_writes_on_a_promotion_is_known() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let re = regex::Regex::new(r#""(promoter\.dev/[a-z0-9.-]+)""#).unwrap();
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.join("annotations"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.push(dir.join("settings.rs"));
        let mut seen = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for c in re.captures_iter(&text) {
                let key = &c[1];
                // On a PromotionFreeze, not a promotion.
                if key == crate::annotations::CREATED_BY {
                    continue;
                }
                seen += 1;
                let as_written = if key.ends_with('.') {
                    format!("{key}dev")
                } else {
                    key.to_string()
                };
                assert!(
                    known_key(&as_written).is_some(),
                    "{}: {key} is not in KNOWN_KEYS",
                    file.display()
                );
            }
        }
        assert!(seen >= 15, "{seen}");
    }

    #[test]
    fn unknown_keys_in_the_prefix_only_with_the_closest_known_key() {
        let p = promotion(&[
            ("promoter.dev/progres-deadline", "2h"),
            ("promoter.dev/approval.dev", "{}"),
            ("promoter.dev/aproval.production", "{}"),
            ("promoter.dev/approval.", "{}"),
            ("promoter.dev/something-else", "x"),
            ("example.com/progres-deadline", "2h"),
            ("promoter.dev/paused", "false"),
        ]);
        let errors: Vec<(String, String)> = problems(&p)
            .into_iter()
            .map(|e| (e.annotation, e.message))
            .collect();
        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "promoter.dev/approval.",
                "promoter.dev/aproval.production",
                "promoter.dev/progres-deadline",
                "promoter.dev/something-else"
            ]
        );
        assert!(
            errors[1]
                .1
                .ends_with("; did you mean \"promoter.dev/approval.production\"?")
        );
        assert!(
            errors[2]
                .1
                .ends_with("; did you mean \"promoter.dev/progress-deadline\"?")
        );
        assert!(!errors[3].1.contains("did you mean"), "{}", errors[3].1);
        let present = present(&p);
        assert_eq!(present.len(), 6, "{present:?}");
        assert_eq!(
            present
                .iter()
                .find(|k| k.key == "promoter.dev/approval.dev")
                .unwrap()
                .kind,
            Some(KeyKind::Record)
        );
    }

    #[test]
    fn a_hand_written_pause_is_explained() {
        use crate::annotations::paused;
        let record = r#"{"by":"alice","at":"2026-02-16T06:00:00Z"}"#;
        assert_eq!(
            paused(&promotion(&[("promoter.dev/paused", record)]))
                .unwrap()
                .by,
            "alice"
        );
        assert!(warnings(&promotion(&[("promoter.dev/paused", record)])).is_empty());
        for no in ["false", "False", "no", "off", "0", ""] {
            let p = promotion(&[("promoter.dev/paused", no)]);
            assert_eq!(paused(&p), None, "{no:?}");
            assert!(warnings(&p)[0].message.contains("does not pause"), "{no:?}");
        }
        let p = promotion(&[("promoter.dev/paused", "true")]);
        assert_eq!(
            paused(&p).unwrap().by,
            "hand (promoter.dev/paused=\"true\", not written by `promoter pause`)"
        );
        assert!(warnings(&p)[0].message.contains("pauses by hand"));
    }
}
