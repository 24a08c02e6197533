//! Loading manifests from files: multi-document YAML into typed objects, with errors that name the
//! file, the document and the field path.

use crate::api::ClusterPromotion;
use crate::validation::{Violation, schema_violations};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// One document of a manifest file.
#[derive(Debug, Clone)]
pub struct Document {
    pub source: String,
    /// 1-based, counting the non-empty documents of the file.
    pub index: usize,
    pub object: Object,
    /// The document as read, for lossless comparisons.
    pub raw: Value,
}

#[derive(Debug, Clone)]
pub enum Object {
    ClusterPromotion(Box<ClusterPromotion>),
    /// Anything else (a ConfigMap for a policyRef, a SveltosCluster of a fleet, …), kept as read.
    Other {
        api_version: String,
        kind: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub source: String,
    /// `None` when the file as a whole could not be read or parsed.
    pub document: Option<usize>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.document {
            Some(n) => write!(f, "{}: document {n}: {}", self.source, self.message),
            None => write!(f, "{}: {}", self.source, self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

pub fn load_file(path: &Path) -> Result<Vec<Document>, ManifestError> {
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        source: path.display().to_string(),
        document: None,
        message: format!("cannot read: {e}"),
    })?;
    load_str(&text, &path.display().to_string())
}

/// Loads every file; all errors are collected so that one run reports every broken document.
pub fn load_files(paths: &[PathBuf]) -> (Vec<Document>, Vec<ManifestError>) {
    let (mut docs, mut errors) = (Vec::new(), Vec::new());
    for p in paths {
        match load_file(p) {
            Ok(d) => docs.extend(d),
            Err(e) => errors.push(e),
        }
    }
    (docs, errors)
}

pub fn load_str(text: &str, source: &str) -> Result<Vec<Document>, ManifestError> {
    let values: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| ManifestError {
        source: source.to_string(),
        document: None,
        message: format!("invalid YAML: {e}"),
    })?;
    values
        .into_iter()
        .filter(|v| !v.is_null())
        .enumerate()
        .map(|(i, raw)| {
            let err = |message: String| ManifestError {
                source: source.to_string(),
                document: Some(i + 1),
                message,
            };
            let object = parse_object(&raw).map_err(err)?;
            Ok(Document {
                source: source.to_string(),
                index: i + 1,
                object,
                raw,
            })
        })
        .collect()
}

fn parse_object(raw: &Value) -> Result<Object, String> {
    let api_version = raw
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("apiVersion: missing")?;
    let kind = raw
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("kind: missing")?;
    if kind == "ClusterPromotion" && api_version.starts_with("config.projectsveltos.io/") {
        if api_version != "config.projectsveltos.io/v1beta1" {
            return Err(format!(
                "apiVersion: {api_version} is not served; use config.projectsveltos.io/v1beta1"
            ));
        }
        let promotion = parse_promotion(raw)?;
        let violations = schema_violations(&promotion.spec);
        if !violations.is_empty() {
            return Err(violations
                .iter()
                .map(Violation::to_string)
                .collect::<Vec<_>>()
                .join("; "));
        }
        return Ok(Object::ClusterPromotion(Box::new(promotion)));
    }
    Ok(Object::Other {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })
}

/// Deserialises with the failing field's path in the message (`spec.stages[1].trigger.auto.delay: …`).
pub fn parse_promotion(raw: &Value) -> Result<ClusterPromotion, String> {
    serde_path_to_error::deserialize::<_, ClusterPromotion>(raw).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}

impl Document {
    pub fn promotion(&self) -> Option<&ClusterPromotion> {
        match &self.object {
            Object::ClusterPromotion(p) => Some(p),
            Object::Other { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: p\nspec:\n  stages:\n  - name: dev\n";

    #[test]
    fn errors_name_file_document_and_field() {
        let text = format!(
            "{GOOD}---\napiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: q\nspec:\n  stages:\n  - name: dev\n  - name: prod\n    trigger:\n      auto:\n        delay: 5x\n"
        );
        let err = load_str(&text, "p.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.yaml: document 2: spec.stages[1].trigger.auto.delay: invalid duration \"5x\""
        );
    }

    #[test]
    fn crd_rules_are_enforced_on_load() {
        let text = GOOD.replace("  - name: dev\n", "  - name: dev\n    trigger: {}\n");
        let err = load_str(&text, "x.yaml").unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.stages[0].trigger: A trigger must have"),
            "{err}"
        );
    }

    #[test]
    fn other_kinds_and_empty_documents() {
        let text =
            format!("---\n{GOOD}---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n");
        let docs = load_str(&text, "m.yaml").unwrap();
        assert_eq!(docs.len(), 2);
        assert!(docs[0].promotion().is_some());
        assert!(matches!(&docs[1].object, Object::Other { kind, .. } if kind == "ConfigMap"));
        assert_eq!(docs[1].index, 2);
        let bad = load_str("kind: X\n", "k.yaml").unwrap_err();
        assert_eq!(bad.to_string(), "k.yaml: document 1: apiVersion: missing");
        assert!(
            load_str("a: [", "y.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("y.yaml: invalid YAML")
        );
    }
}
