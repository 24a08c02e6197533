//! `metadata.managedFields` as the API server stamps it, for what promoter reads from it: which
//! manager last changed which part of an object, through the main resource or the `status`
//! subresource, and when, by the API server's own clock.
//!
//! The real field manager (kubernetes/kubernetes, commit 121460defea7874f50c64bb8de51018a86c6eef3,
//! `staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/managedfieldsupdater.go` and
//! `fieldmanager.go`'s `BuildManagerIdentifier`):
//!
//! * keeps one entry per (manager, operation, apiVersion, subresource); the manager is the request's
//!   `fieldManager`, else the User-Agent up to its first `/`; a create is an `Update`;
//! * an operation that changes fields takes them: they join the writer's set and leave every other
//!   entry's set (an entry left with nothing is dropped), and only then is the writer's `time` set,
//!   to the server's `time.Now().UTC()`, written with second precision (`metav1.Time`); a write
//!   that changes nothing changes no entry (and is not persisted at all);
//! * a write to `/status` changes only `status`, a write to the main resource everything but it.
//!
//! Approximation: field sets are kept two levels deep (`f:spec` → `f:clusterProfileSpec`, `f:status`
//! → `f:featureSummaries`, `f:metadata` → `f:labels`) instead of down to every leaf, so ownership
//! moves by those subtrees; which entry holds `spec` or `status` and when it last changed them is
//! exact. Client-sent `managedFields` are ignored (the server's are kept).

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Metadata the field manager never tracks (`StripMeta`).
const UNTRACKED_META: [&str; 9] = [
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "generation",
    "resourceVersion",
    "managedFields",
    "selfLink",
];

/// A field path, at most two levels deep: (`spec`, `clusterProfileSpec`), (`data`, ``).
type Path = (String, String);

/// Who writes: the field manager and the operation (`Update`, or `Apply` for server-side apply).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    pub manager: String,
    pub operation: &'static str,
}

impl Writer {
    pub fn update(manager: &str) -> Self {
        Writer {
            manager: manager.to_string(),
            operation: "Update",
        }
    }
}

/// The manager kube-apiserver derives from a User-Agent: its part before the first `/`
/// (`prefixFromUserAgent`).
pub fn manager_from_user_agent(user_agent: &str) -> String {
    user_agent
        .split('/')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn paths_of(obj: &Value, top: &str, out: &mut BTreeSet<Path>) {
    match obj.get(top) {
        Some(Value::Object(m)) if top == "metadata" => {
            for k in m.keys().filter(|k| !UNTRACKED_META.contains(&k.as_str())) {
                out.insert((top.into(), k.clone()));
            }
        }
        Some(Value::Object(m)) if !m.is_empty() => {
            for k in m.keys() {
                out.insert((top.into(), k.clone()));
            }
        }
        Some(_) => {
            out.insert((top.into(), String::new()));
        }
        None => {}
    }
}

fn value_at<'a>(obj: &'a Value, path: &Path) -> Option<&'a Value> {
    let top = obj.get(&path.0)?;
    if path.1.is_empty() {
        Some(top)
    } else {
        top.get(&path.1)
    }
}

/// The tracked paths whose value this write changes, among the top-level fields it may change:
/// those it sets (all of them on a create), and those it removes.
fn changed(
    old: Option<&Value>,
    new: &Value,
    status_write: bool,
) -> (BTreeSet<Path>, BTreeSet<Path>) {
    let tops: Vec<String> = if status_write {
        vec!["status".into()]
    } else {
        let mut keys: BTreeSet<String> = BTreeSet::new();
        for obj in [Some(new), old].into_iter().flatten() {
            if let Some(m) = obj.as_object() {
                keys.extend(
                    m.keys()
                        .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind"))
                        .cloned(),
                );
            }
        }
        keys.into_iter().collect()
    };
    let mut candidates = BTreeSet::new();
    for top in &tops {
        paths_of(new, top, &mut candidates);
        if let Some(old) = old {
            paths_of(old, top, &mut candidates);
        }
    }
    candidates
        .into_iter()
        .filter(|p| value_at(new, p) != old.and_then(|o| value_at(o, p)))
        .partition(|p| value_at(new, p).is_some())
}

fn fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for (top, sub) in paths {
        let entry = root.entry(format!("f:{top}")).or_insert_with(|| json!({}));
        if !sub.is_empty()
            && let Some(m) = entry.as_object_mut()
        {
            m.insert(format!("f:{sub}"), json!({}));
        }
    }
    Value::Object(root)
}

fn paths_in(fields: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    for (top, sub) in fields.as_object().into_iter().flatten() {
        let top = top.strip_prefix("f:").unwrap_or(top).to_string();
        let subs: Vec<String> = sub
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.strip_prefix("f:").unwrap_or(k).to_string())
            .collect();
        if subs.is_empty() {
            out.insert((top.clone(), String::new()));
        }
        for s in subs {
            out.insert((top.clone(), s));
        }
    }
    out
}

/// Whether `path` is covered by `owned` (a top-level path owns everything under it).
fn covers(owned: &BTreeSet<Path>, path: &Path) -> bool {
    owned.contains(path) || owned.contains(&(path.0.clone(), String::new()))
}

/// Stamps `new` (about to be stored over `old`, or created when `old` is None) with the managed
/// fields the real server would give it: `old`'s entries, with the fields this write sets moved
/// to `writer`'s entry for `subresource` ("" or "status"), whose time becomes `time`, and the
/// fields it removes dropped from every entry. Returns whether the write changed any tracked field.
pub fn stamp(
    new: &mut Value,
    old: Option<&Value>,
    writer: &Writer,
    api_version: &str,
    subresource: &str,
    time: &str,
) -> bool {
    let mut entries: Vec<Value> = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (taken, removed) = changed(old, new, subresource == "status");
    if !taken.is_empty() || !removed.is_empty() {
        let is_writer = |e: &Value| {
            e["manager"] == writer.manager.as_str()
                && e["operation"] == writer.operation
                && e["apiVersion"] == api_version
                && e.get("subresource").and_then(Value::as_str).unwrap_or("") == subresource
        };
        let mut kept = Vec::with_capacity(entries.len() + 1);
        let mut own: Option<(Value, BTreeSet<Path>)> = None;
        for e in entries {
            let set = paths_in(&e["fieldsV1"]);
            // A removed field is nobody's; a field this write sets is the writer's alone.
            let left: BTreeSet<Path> = set
                .into_iter()
                .filter(|p| !covers(&removed, p))
                .filter(|p| is_writer(&e) || !covers(&taken, p))
                .collect();
            if is_writer(&e) {
                own = Some((e, left));
                continue;
            }
            if left.is_empty() {
                continue;
            }
            let mut e = e;
            e["fieldsV1"] = fields_v1(&left);
            kept.push(e);
        }
        let (mut entry, mut own) = own.unwrap_or_else(|| {
            let mut e = json!({"manager": writer.manager, "operation": writer.operation,
                               "apiVersion": api_version, "fieldsType": "FieldsV1"});
            if !subresource.is_empty() {
                e["subresource"] = json!(subresource);
            }
            (e, BTreeSet::new())
        });
        own.extend(taken.iter().cloned());
        // Only an operation that took fields moves its manager's time.
        if !taken.is_empty() {
            entry["time"] = json!(time);
        }
        if !own.is_empty() {
            entry["fieldsV1"] = fields_v1(&own);
            kept.push(entry);
        }
        entries = kept;
    }
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(entries));
        }
    }
    !taken.is_empty() || !removed.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(obj: &'a Value, manager: &str, subresource: &str) -> Option<&'a Value> {
        obj["metadata"]["managedFields"]
            .as_array()?
            .iter()
            .find(|e| {
                e["manager"] == manager
                    && e.get("subresource").and_then(Value::as_str).unwrap_or("") == subresource
            })
    }

    #[test]
    fn a_create_owns_what_it_sets_and_a_status_write_gets_its_own_entry() {
        let w = Writer::update("manager");
        let mut created = json!({"metadata": {"name": "a", "labels": {"x": "1"}, "resourceVersion": "3"},
                                 "spec": {"clusterProfileSpec": {"tier": 100}}});
        assert!(stamp(
            &mut created,
            None,
            &w,
            "v1",
            "",
            "2026-01-01T00:00:00Z"
        ));
        let main = entry(&created, "manager", "").unwrap();
        assert_eq!(main["time"], "2026-01-01T00:00:00Z");
        assert_eq!(
            main["fieldsV1"],
            json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:clusterProfileSpec": {}}})
        );
        let mut with_status = created.clone();
        with_status["status"] = json!({"featureSummaries": [{"featureID": "Helm"}]});
        assert!(stamp(
            &mut with_status,
            Some(&created),
            &w,
            "v1",
            "status",
            "2026-01-01T00:00:07Z"
        ));
        let status = entry(&with_status, "manager", "status").unwrap();
        assert_eq!(status["time"], "2026-01-01T00:00:07Z");
        assert_eq!(
            status["fieldsV1"],
            json!({"f:status": {"f:featureSummaries": {}}})
        );
        // The main entry keeps its own time.
        assert_eq!(
            entry(&with_status, "manager", "").unwrap()["time"],
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_write_that_changes_nothing_keeps_every_time_and_another_manager_takes_fields() {
        let mut obj = json!({"metadata": {"name": "a"}, "spec": {"a": 1, "b": 2}});
        stamp(&mut obj, None, &Writer::update("one"), "v1", "", "T1");
        let mut same = obj.clone();
        assert!(!stamp(
            &mut same,
            Some(&obj),
            &Writer::update("two"),
            "v1",
            "",
            "T2"
        ));
        assert_eq!(same, obj);
        let mut next = obj.clone();
        next["spec"]["a"] = json!(3);
        assert!(stamp(
            &mut next,
            Some(&obj),
            &Writer::update("two"),
            "v1",
            "",
            "T3"
        ));
        assert_eq!(
            entry(&next, "one", "").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:b": {}}})
        );
        assert_eq!(
            entry(&next, "two", "").unwrap()["fieldsV1"],
            json!({"f:spec": {"f:a": {}}})
        );
        assert_eq!(entry(&next, "two", "").unwrap()["time"], "T3");
        // Taking the last field drops the entry.
        let mut last = next.clone();
        last["spec"]["b"] = json!(4);
        stamp(
            &mut last,
            Some(&next),
            &Writer::update("two"),
            "v1",
            "",
            "T4",
        );
        assert!(entry(&last, "one", "").is_none());
    }

    #[test]
    fn the_manager_is_the_user_agent_up_to_its_first_slash() {
        assert_eq!(
            manager_from_user_agent("manager/v0.0.0 (linux/amd64) kubernetes/$Format"),
            "manager"
        );
        assert_eq!(manager_from_user_agent("kubectl"), "kubectl");
    }
}
