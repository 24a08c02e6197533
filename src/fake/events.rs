//! Events as the real API server keeps them: one resource, stored as core/v1 Events and served as
//! core/v1 (`/api/v1/.../events`) and as events.k8s.io/v1 (`/apis/events.k8s.io/v1/.../events`),
//! so that an Event written through one API is read through the other (what `kubectl describe` and
//! `kubectl get events` do with the Events that controllers write through events.k8s.io).
//!
//! The field mapping is kubernetes/kubernetes `pkg/apis/events/v1/conversion.go`
//! (`Convert_v1_Event_To_core_Event` and back: regarding ↔ involvedObject, note ↔ message,
//! deprecatedSource ↔ source, deprecatedFirstTimestamp/LastTimestamp/Count ↔
//! firstTimestamp/lastTimestamp/count; the internal `ReportingController` is core/v1's
//! `reportingComponent`). The selectable fields are `ToSelectableFields` of
//! `pkg/registry/core/event/strategy.go` (`source` falls back to the reporting controller), and the
//! events.k8s.io/v1 field labels are mapped onto them by `AddFieldLabelConversionsForEvent` of
//! `pkg/apis/events/v1/conversion.go` (`regarding.name` → `involvedObject.name`, …).

use super::api_error::ApiError;
use super::resource_type::ResourceType;
use serde_json::{Map, Value, json};

/// (core/v1 field, events.k8s.io/v1 field); every other field has the same name in both.
const RENAMED: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// A field and the value it has when unset.
type Always = (&'static str, fn() -> Value);

/// Fields each version always writes (Go structs and `metav1.Time` without `omitempty` effect):
/// an empty object, `null` or an empty string, as a real server's JSON has them.
const CORE_ALWAYS: [Always; 7] = [
    ("involvedObject", || json!({})),
    ("source", || json!({})),
    ("firstTimestamp", || Value::Null),
    ("lastTimestamp", || Value::Null),
    ("eventTime", || Value::Null),
    ("reportingComponent", || json!("")),
    ("reportingInstance", || json!("")),
];
const EVENTS_ALWAYS: [Always; 5] = [
    ("regarding", || json!({})),
    ("deprecatedSource", || json!({})),
    ("deprecatedFirstTimestamp", || Value::Null),
    ("deprecatedLastTimestamp", || Value::Null),
    ("eventTime", || Value::Null),
];

/// Both Event resources.
pub fn is_event(rt: &ResourceType) -> bool {
    rt.kind == "Event" && (rt.group.is_empty() || rt.group == "events.k8s.io")
}

fn is_events_api(rt: &ResourceType) -> bool {
    rt.kind == "Event" && rt.group == "events.k8s.io"
}

/// Where a resource's objects are stored: events.k8s.io Events with the core/v1 ones.
pub fn storage(rt: &ResourceType) -> (&str, &str) {
    if is_events_api(rt) {
        ("", "events")
    } else {
        (rt.group.as_str(), rt.plural.as_str())
    }
}

fn convert(obj: &Value, to_events_api: bool, always: &[Always]) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMED.iter().find_map(|(core, events)| {
            if to_events_api {
                (k == core).then_some(*events)
            } else {
                (k == events).then_some(*core)
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    for (k, default) in always {
        out.entry(k.to_string()).or_insert_with(default);
    }
    if to_events_api {
        out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    } else {
        out.insert("apiVersion".into(), json!("v1"));
    }
    out.insert("kind".into(), json!("Event"));
    Value::Object(out)
}

/// An object of `rt` as it is stored.
pub fn to_storage(rt: &ResourceType, obj: Value) -> Value {
    if is_events_api(rt) {
        convert(&obj, false, &CORE_ALWAYS)
    } else if is_event(rt) {
        with_defaults(obj, &CORE_ALWAYS)
    } else {
        obj
    }
}

/// A core/v1 Event as the server writes it back: the fields it always has.
fn with_defaults(mut obj: Value, always: &[Always]) -> Value {
    if let Some(m) = obj.as_object_mut() {
        for (k, default) in always {
            m.entry(k.to_string()).or_insert_with(default);
        }
    }
    obj
}

/// A stored object as `rt` serves it.
pub fn from_storage(rt: &ResourceType, obj: Value) -> Value {
    if is_events_api(rt) {
        convert(&obj, true, &EVENTS_ALWAYS)
    } else {
        obj
    }
}

/// The core/v1 field label a selector names, for Events; `None` for other kinds (which select on
/// `metadata.name` and `metadata.namespace` only).
pub fn field_label(rt: &ResourceType, label: &str) -> Option<Result<&'static str, ApiError>> {
    if !is_event(rt) {
        return None;
    }
    const CORE: [&str; 13] = [
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
        "metadata.namespace",
        "metadata.name",
    ];
    let mapped = if is_events_api(rt) {
        match label {
            "reportingController" => Some("reportingComponent"),
            l if l.starts_with("regarding.") => {
                let core = format!("involvedObject.{}", &l["regarding.".len()..]);
                CORE.iter().find(|c| **c == core).copied()
            }
            l if l.starts_with("involvedObject.") || l == "reportingComponent" => None,
            l => CORE.iter().find(|c| **c == l).copied(),
        }
    } else {
        CORE.iter().find(|c| **c == label).copied()
    };
    Some(mapped.ok_or_else(|| ApiError::bad_request(format!("field label not supported: {label}"))))
}

/// The value of a selectable field (a core/v1 label from [`field_label`]) of a stored Event.
pub fn field_value(stored: &Value, label: &str) -> String {
    let text = |p: &str| {
        stored
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match label {
        "source" => {
            let component = text("/source/component");
            if component.is_empty() {
                text("/reportingComponent")
            } else {
                component
            }
        }
        l => text(&format!("/{}", l.replace('.', "/"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_api() -> ResourceType {
        ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true)
    }
    fn core() -> ResourceType {
        ResourceType::builtin("", "v1", "Event", "events", true)
    }

    #[test]
    fn an_events_api_event_reads_as_core_and_back() {
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "p-abcde", "namespace": "default"},
            "eventTime": "2026-02-16T06:00:00.000000Z", "action": "ClusterPromotion",
            "reason": "StageProvisioned", "note": "Stage dev provisioned", "type": "Normal",
            "reportingController": "promoter.dev/promoter", "reportingInstance": "promoter",
            "regarding": {"kind": "ClusterPromotion", "name": "p", "uid": "u"}
        });
        let stored = to_storage(&events_api(), written.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "Stage dev provisioned");
        assert_eq!(stored["reportingComponent"], "promoter.dev/promoter");
        assert_eq!(stored["source"], json!({}));
        assert!(stored["firstTimestamp"].is_null() && stored.get("note").is_none());
        let back = from_storage(&events_api(), stored.clone());
        for (k, v) in written.as_object().unwrap() {
            assert_eq!(&back[k], v, "{k}");
        }
        assert_eq!(from_storage(&core(), stored.clone()), stored);
        assert_eq!(field_value(&stored, "involvedObject.name"), "p");
        assert_eq!(field_value(&stored, "source"), "promoter.dev/promoter");
        assert_eq!(field_value(&stored, "involvedObject.namespace"), "");
    }

    #[test]
    fn field_labels_are_the_real_ones_per_api() {
        let ok = |rt: &ResourceType, l: &str| field_label(rt, l).unwrap().ok();
        assert_eq!(
            ok(&core(), "involvedObject.name"),
            Some("involvedObject.name")
        );
        assert_eq!(
            ok(&events_api(), "regarding.name"),
            Some("involvedObject.name")
        );
        assert_eq!(
            ok(&events_api(), "reportingController"),
            Some("reportingComponent")
        );
        assert_eq!(ok(&events_api(), "involvedObject.name"), None);
        assert_eq!(ok(&core(), "regarding.name"), None);
        assert_eq!(ok(&core(), "note"), None);
        let err = field_label(&core(), "message").unwrap().unwrap_err();
        assert_eq!(err.message, "field label not supported: message");
        assert!(field_label(&crate::fake::secret_type(), "x").is_none());
    }
}
