//! What the API server (the CRD's schema and CEL rules) would reject in a ClusterPromotion, plus
//! the generated-name rules promoter needs; shared by manifest loading, the stepper and lint.

use crate::api::{ClusterPromotion, ClusterPromotionSpec};
use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Field path from the object root, e.g. `spec.stages[1].trigger`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The CRD's own rules: at least one stage, unique stage names, a trigger with exactly one of
/// `manual`/`auto`, non-empty window bounds.
pub fn schema_violations(spec: &ClusterPromotionSpec) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |path: String, message: &str| {
        out.push(Violation {
            path,
            message: message.to_string(),
        })
    };
    if spec.stages.is_empty() {
        v("spec.stages".into(), "at least one stage is required");
    }
    let mut seen = BTreeSet::new();
    for (i, stage) in spec.stages.iter().enumerate() {
        if !seen.insert(stage.name.as_str()) {
            v(
                format!("spec.stages[{i}].name"),
                &format!("duplicate stage name {:?}", stage.name),
            );
        }
        if let Some(t) = &stage.trigger {
            if t.manual.is_some() == t.auto.is_some() {
                v(
                    format!("spec.stages[{i}].trigger"),
                    "A trigger must have either a 'manual' or 'auto' field, but not both.",
                );
            }
            if let Some(w) = t.auto.as_ref().and_then(|a| a.promotion_window.as_ref()) {
                if w.from.is_empty() {
                    v(
                        format!("spec.stages[{i}].trigger.auto.promotionWindow.from"),
                        "must not be empty",
                    );
                }
                if w.to.is_empty() {
                    v(
                        format!("spec.stages[{i}].trigger.auto.promotionWindow.to"),
                        "must not be empty",
                    );
                }
            }
        }
    }
    out
}

/// Generated names must be valid ClusterProfile names (DNS-1123 subdomains: dots allowed) and valid
/// label values (at most 63 characters) because Sveltos puts the profile name in the
/// `projectsveltos.io/cluster-profile-name` label (upstream Q13).
pub fn name_violations(promotion: &ClusterPromotion) -> Vec<Violation> {
    let name = promotion.metadata.name.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for (i, stage) in promotion.spec.stages.iter().enumerate() {
        let profile = format!("{name}-{}", stage.name);
        if let Err(why) = check_generated_name(&profile) {
            out.push(Violation {
                path: format!("spec.stages[{i}].name"),
                message: format!("generated ClusterProfile name {profile:?} {why}"),
            });
        }
    }
    out
}

/// A generated ClusterProfile name: a DNS-1123 subdomain (the object name) that is also a valid
/// label value (so at most 63 characters).
pub fn check_generated_name(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!(
            "is {} characters long; a label value allows at most 63",
            s.len()
        ));
    }
    if s.is_empty() || crate::labels::dns1123_subdomain_error(s).is_some() {
        return Err("is not a valid ClusterProfile name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, with a letter or digit on both sides of every '.'".into());
    }
    Ok(())
}

/// A label value as the API server validates it (empty allowed).
pub fn check_label_value(s: &str) -> Result<(), String> {
    match crate::labels::label_value_error(s) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> ClusterPromotionSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn crd_rules() {
        let table = [
            (
                json!({"stages": []}),
                vec!["spec.stages: at least one stage is required"],
            ),
            (
                json!({"stages": [{"name": "a"}, {"name": "a"}]}),
                vec!["spec.stages[1].name: duplicate stage name \"a\""],
            ),
            (
                json!({"stages": [{"name": "a", "trigger": {}}]}),
                vec![
                    "spec.stages[0].trigger: A trigger must have either a 'manual' or 'auto' field, but not both.",
                ],
            ),
            (
                json!({"stages": [{"name": "a", "trigger": {"manual": {}, "auto": {}}}]}),
                vec![
                    "spec.stages[0].trigger: A trigger must have either a 'manual' or 'auto' field, but not both.",
                ],
            ),
            (
                json!({"stages": [{"name": "a", "trigger": {"auto": {"promotionWindow": {"from": "", "to": "* * * * *"}}}}]}),
                vec!["spec.stages[0].trigger.auto.promotionWindow.from: must not be empty"],
            ),
            (
                json!({"stages": [{"name": "a", "trigger": {"manual": {"approved": true}}}, {"name": "b"}]}),
                vec![],
            ),
        ];
        for (input, want) in table {
            let got: Vec<String> = schema_violations(&spec(input.clone()))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got, want, "{input}");
        }
    }

    #[test]
    fn generated_names() {
        assert!(check_generated_name("kyverno-rollout-auto-dev").is_ok());
        assert!(check_generated_name(&"a".repeat(63)).is_ok());
        // Dots are valid in ClusterProfile names and label values (upstream accepts them).
        assert!(check_generated_name("kyverno.v3-eu.prod").is_ok());
        assert!(
            check_generated_name(&"a".repeat(64))
                .unwrap_err()
                .contains("64 characters")
        );
        for bad in ["Prod", "-a", "a_b", "a..b", "a.-b", "a-", "", "a b", "é"] {
            assert!(check_generated_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_label_value("A_b.c").is_ok());
        assert!(check_label_value("").is_ok());
        let p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "x".repeat(60)}, "spec": {"stages": [{"name": "prod"}, {"name": "ok"}]}
        }))
        .unwrap();
        let v = name_violations(&p);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].path, "spec.stages[0].name");
    }
}
