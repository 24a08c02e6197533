//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the API server applies them to
//! custom resources (strategic merge patch is not supported for CRs, there as here).

use serde_json::Value;

pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
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

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| PatchError::Malformed(format!("invalid JSON pointer {path:?}")))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn parent_and_key<'a>(
    doc: &'a mut Value,
    tokens: &[String],
    path: &str,
) -> Result<(&'a mut Value, String), PatchError> {
    let Some((last, parents)) = tokens.split_last() else {
        return Err(PatchError::Failed(format!(
            "path {path:?} addresses the whole document"
        )));
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Failed(format!("doc is missing path: {path:?}")))?;
    }
    Ok((cur, last.clone()))
}

fn get<'a>(doc: &'a Value, path: &str) -> Result<&'a Value, PatchError> {
    let mut cur = doc;
    for t in split_pointer(path)? {
        cur = match cur {
            Value::Object(m) => m.get(&t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Failed(format!("doc is missing path: {path:?}")))?;
    }
    Ok(cur)
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let tokens = split_pointer(path)?;
    let (parent, key) = parent_and_key(doc, &tokens, path)?;
    let missing = || PatchError::Failed(format!("doc is missing path: {path:?}"));
    match parent {
        Value::Object(m) => m.remove(&key).ok_or_else(missing),
        Value::Array(a) => {
            let i = key
                .parse::<usize>()
                .ok()
                .filter(|i| *i < a.len())
                .ok_or_else(missing)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

fn add(doc: &mut Value, path: &str, value: Value, replace: bool) -> Result<(), PatchError> {
    let tokens = split_pointer(path)?;
    if tokens.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, key) = parent_and_key(doc, &tokens, path)?;
    let missing = || PatchError::Failed(format!("doc is missing path: {path:?}"));
    match parent {
        Value::Object(m) => {
            if replace && !m.contains_key(&key) {
                return Err(missing());
            }
            m.insert(key, value);
        }
        Value::Array(a) => {
            if replace {
                let slot = key
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get_mut(i))
                    .ok_or_else(missing)?;
                *slot = value;
            } else if key == "-" {
                a.push(value);
            } else {
                let i = key
                    .parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(missing)?;
                a.insert(i, value);
            }
        }
        _ => return Err(missing()),
    }
    Ok(())
}

/// Applies an RFC 6902 patch; all or nothing.
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = patch.as_array().ok_or_else(|| {
        PatchError::Malformed("a JSON patch must be an array of operations".into())
    })?;
    let mut out = doc.clone();
    for op in ops {
        let field = |name: &str| {
            op.get(name).and_then(Value::as_str).ok_or_else(|| {
                PatchError::Malformed(format!("operation {op} has no string {name:?}"))
            })
        };
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| PatchError::Malformed(format!("operation {op} has no value")))
        };
        let path = field("path")?;
        match field("op")? {
            "add" => add(&mut out, path, value()?, false)?,
            "replace" => add(&mut out, path, value()?, true)?,
            "remove" => {
                remove(&mut out, path)?;
            }
            "move" => {
                let v = remove(&mut out, field("from")?)?;
                add(&mut out, path, v, false)?;
            }
            "copy" => {
                let v = get(&out, field("from")?)?.clone();
                add(&mut out, path, v, false)?;
            }
            "test" => {
                let want = value()?;
                let have = get(&out, path)?;
                if *have != want {
                    return Err(PatchError::Failed(format!("testing value {path} failed")));
                }
            }
            other => {
                return Err(PatchError::Malformed(format!(
                    "unknown JSON patch operation {other:?}"
                )));
            }
        }
    }
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
