//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the API server applies them to
//! custom resources (strategic merge patch is not supported for CRs, there as here), with the
//! `json-patch` crate. Status codes as kube-apiserver's patch handler
//! (kubernetes/kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`, v1.33):
//! a patch that does not decode is a 400 `BadRequest`, one that does not apply (a failed `test`, a
//! missing path) a 422.

use serde_json::Value;

pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed (400 Bad Request).
    #[error("{0}")]
    Malformed(String),
    /// The patch could not be applied, e.g. a failed `test` (422 Unprocessable Entity).
    #[error("{0}")]
    Failed(String),
}

/// Applies an RFC 6902 patch; all or nothing.
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Malformed(format!("invalid JSON patch: {e}")))?;
    let mut out = doc.clone();
    json_patch::patch(&mut out, &ops).map_err(|e| PatchError::Failed(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386_examples() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(
            &mut doc,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            doc,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
    }

    #[test]
    fn json_patch_operations() {
        let doc = json!({"spec": {"stages": [{"name": "a", "trigger": {"manual": {"approved": true}}}, {"name": "b"}]}});
        let out = json_patch(
            &doc,
            &json!([
                {"op": "test", "path": "/spec/stages/0/name", "value": "a"},
                {"op": "remove", "path": "/spec/stages/0/trigger/manual/approved"},
                {"op": "add", "path": "/spec/stages/-", "value": {"name": "c"}},
                {"op": "replace", "path": "/spec/stages/1/name", "value": "B"},
                {"op": "copy", "from": "/spec/stages/2", "path": "/spec/copy"},
                {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
                {"op": "add", "path": "/metadata~1x", "value": 1}
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"spec": {"stages": [{"name": "a", "trigger": {"manual": {}}}, {"name": "B"}, {"name": "c"}],
                   "moved": {"name": "c"}}, "metadata/x": 1})
        );
    }

    #[test]
    fn json_patch_failures() {
        let doc = json!({"a": [1]});
        assert!(matches!(
            json_patch(&doc, &json!([{"op": "test", "path": "/a/0", "value": 2}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&doc, &json!([{"op": "remove", "path": "/b"}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&doc, &json!([{"op": "replace", "path": "/b", "value": 1}])),
            Err(PatchError::Failed(_))
        ));
        assert!(matches!(
            json_patch(&doc, &json!({"op": "add"})),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            json_patch(&doc, &json!([{"op": "frob", "path": "/a"}])),
            Err(PatchError::Malformed(_))
        ));
    }
}
