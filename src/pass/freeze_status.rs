//! The status of each PromotionFreeze (phase Scheduled, Active, Expired or Invalid, and a message),
//! written by the pass only when it changes, so that `kubectl get promotionfreezes` says where each
//! one stands and an invalid one says why it holds nothing, an unreadable one why it holds (each
//! with a Warning Event, once). While a freeze is active its status also keeps the promotions it
//! selected when it became active (`held`, written once, by the pass that saw it become active,
//! from every promotion it listed), which it holds whatever their labels become. A merge patch of
//! `/status` guarded by the resourceVersion read: a concurrent pass makes it a conflict, and the
//! next pass writes it if it still differs.

use super::decision::Reason;
use super::events;
use crate::api::{FreezePhase, PromotionFreeze};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;

/// How the status message of a freeze that cannot be read begins (`freeze::evaluate`).
const UNREADABLE: &str = "cannot be read";

/// What the pass wrote: one line per freeze whose status changed.
/// `promotions`: the labels of every promotion, by name, when the pass listed them all (no
/// `--selector`); a freeze that becomes active records those it selects.
pub async fn write(
    client: &kube::Client,
    freezes: &[PromotionFreeze],
    promotions: Option<&BTreeMap<String, BTreeMap<String, String>>>,
    now: DateTime<Utc>,
) -> Vec<String> {
    // Untyped: the answer is the freeze as stored, which may not decode (an unreadable one).
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<PromotionFreeze>(&()));
    let mut done = Vec::new();
    for f in freezes {
        let evaluated = crate::freeze::evaluate(f, now);
        let selected = promotions.map(|all| {
            all.iter()
                .filter(|(_, labels)| evaluated.selects(labels))
                .map(|(name, _)| name.clone())
                .collect()
        });
        let desired = evaluated.status(selected);
        if f.status.as_ref() == Some(&desired) {
            continue;
        }
        let name = evaluated.name.to_string();
        let patch = json!({
            "metadata": {"resourceVersion": f.metadata.resource_version},
            "status": desired,
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                done.push(format!(
                    "PromotionFreeze {name}: {} ({})",
                    evaluated.phase.as_str(),
                    evaluated.message
                ));
                let was_invalid = f
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p == FreezePhase::Invalid);
                let was_unreadable = f
                    .status
                    .as_ref()
                    .and_then(|s| s.message.as_deref())
                    .is_some_and(|m| m.starts_with(UNREADABLE));
                let note = if evaluated.unreadable().is_some() && !was_unreadable {
                    Some(Reason::UnreadableFreeze.note(format!(
                        "PromotionFreeze {name} holds every promotion it may select: {}",
                        evaluated.message
                    )))
                } else if evaluated.phase == FreezePhase::Invalid && !was_invalid {
                    Some(Reason::InvalidFreeze.note(format!(
                        "PromotionFreeze {name} holds nothing: {}",
                        evaluated.message
                    )))
                } else {
                    None
                };
                if let Some(note) = note {
                    let regarding = ObjectReference {
                        api_version: Some("promoter.dev/v1alpha1".into()),
                        kind: Some("PromotionFreeze".into()),
                        name: Some(name.clone()),
                        uid: f.metadata.uid.clone(),
                        ..Default::default()
                    };
                    events::emit_regarding(client, &regarding, &[note], "PromotionFreeze", now)
                        .await;
                }
            }
            Err(e) => {
                tracing::warn!(freeze = %name, error = %crate::cli_error::line_with_hint(&e), "could not write the freeze's status; the next pass tries again")
            }
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{FakeApiServer, ResourceType, promotion_freeze_type};
    use serde_json::Value;

    fn now() -> DateTime<Utc> {
        "2026-12-25T00:00:00Z".parse().unwrap()
    }

    fn freeze(name: &str, spec: Value, status: Option<Value>) -> Value {
        let mut f = json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
            "metadata": {"name": name, "uid": format!("u-{name}")}, "spec": spec});
        if let Some(s) = status {
            f["status"] = s;
        }
        f
    }

    /// A selector the CRD refuses today (stored before it did, as `tests/failure_policy.rs` does).
    fn typo() -> Value {
        json!({"reason": "stop", "promotionSelector": {"matchExpressions": [
            {"key": "tier", "operator": "Inn", "values": ["prod"]}]}})
    }

    /// A server holding these freezes (unvalidated: an invalid one may be stored), and the
    /// freezes as a pass reads them.
    async fn serving(freezes: &[Value]) -> (FakeApiServer, kube::Client, Vec<PromotionFreeze>) {
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        for f in freezes {
            server
                .store()
                .seed_unvalidated(&promotion_freeze_type(), f.clone())
                .unwrap();
        }
        let client = server.client().await.unwrap();
        let read = read(&client).await;
        (server, client, read)
    }

    async fn read(client: &kube::Client) -> Vec<PromotionFreeze> {
        let api: Api<PromotionFreeze> = Api::all(client.clone());
        let mut items = api.list(&Default::default()).await.unwrap().items;
        items.sort_by_key(|f| f.metadata.name.clone());
        items
    }

    fn stored(server: &FakeApiServer, name: &str) -> Value {
        server
            .store()
            .get(&promotion_freeze_type(), "", name)
            .unwrap()
    }

    /// Every Event recorded.
    fn events(server: &FakeApiServer) -> Vec<Value> {
        let rt = ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true);
        server.store().all(&rt)
    }

    /// Each Event as (the name it is about, its reason), sorted.
    fn said(server: &FakeApiServer) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = events(server)
            .iter()
            .map(|e| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                (text(&e["regarding"]["name"]), text(&e["reason"]))
            })
            .collect();
        out.sort();
        out
    }

    /// Each freeze's status is written when it differs (an Active one with the promotions it
    /// selects), said in one line each, and only the invalid one is a Warning Event, about the
    /// freeze itself; a pass that finds them written writes and says nothing.
    #[tokio::test]
    async fn a_changed_status_is_written_and_said_and_an_invalid_freeze_is_a_warning_on_itself() {
        let (server, client, freezes) = serving(&[
            freeze(
                "holidays",
                json!({"reason": "CAB-9", "promotionSelector": {"matchLabels": {"tier": "prod"}}}),
                None,
            ),
            freeze(
                "later",
                json!({"reason": "x", "start": "2027-01-01T00:00:00Z"}),
                None,
            ),
            freeze("typo", typo(), None),
        ])
        .await;
        let promotions: BTreeMap<String, BTreeMap<String, String>> = [
            (
                "a".to_string(),
                [("tier".to_string(), "prod".to_string())].into(),
            ),
            (
                "b".to_string(),
                [("tier".to_string(), "dev".to_string())].into(),
            ),
        ]
        .into();
        let lines = write(&client, &freezes, Some(&promotions), now()).await;
        assert_eq!(lines.len(), 3, "{lines:?}");
        for (line, start) in lines.iter().zip([
            "PromotionFreeze holidays: Active (",
            "PromotionFreeze later: Scheduled (",
            "PromotionFreeze typo: Invalid (",
        ]) {
            assert!(line.starts_with(start), "{line}");
        }
        let holidays = stored(&server, "holidays");
        assert_eq!(holidays["status"]["phase"], "Active", "{holidays:#}");
        assert_eq!(holidays["status"]["held"], json!(["a"]), "{holidays:#}");
        assert_eq!(stored(&server, "later")["status"]["phase"], "Scheduled");
        let typo = stored(&server, "typo");
        assert_eq!(typo["status"]["phase"], "Invalid", "{typo:#}");
        assert!(
            typo["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Inn")),
            "{typo:#}"
        );
        let events = events(&server);
        assert_eq!(events.len(), 1, "{events:#?}");
        assert_eq!(events[0]["reason"], "InvalidFreeze");
        assert_eq!(events[0]["type"], "Warning");
        assert_eq!(
            events[0]["regarding"],
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                   "name": "typo", "uid": "u-typo"})
        );
        // Written: the next pass writes nothing and says nothing.
        let versions = |server: &FakeApiServer| -> Vec<Value> {
            ["holidays", "later", "typo"]
                .iter()
                .map(|n| stored(server, n)["metadata"]["resourceVersion"].clone())
                .collect()
        };
        let before = versions(&server);
        let freezes = read(&client).await;
        assert!(
            write(&client, &freezes, Some(&promotions), now())
                .await
                .is_empty()
        );
        assert_eq!(versions(&server), before);
        assert_eq!(said(&server).len(), 1);
    }

    /// The Warning is sent when a freeze becomes invalid or unreadable, once: not when one that
    /// already was has its message rewritten.
    #[tokio::test]
    async fn a_warning_is_sent_when_a_freeze_becomes_invalid_or_unreadable_not_while_it_stays_so() {
        let (server, client, mut freezes) = serving(&[
            freeze("broken", json!({"reason": "INC-9"}), None),
            // Was valid and active; its selector was edited into a typo.
            freeze(
                "edited",
                typo(),
                Some(json!({"phase": "Active", "message": "until lifted"})),
            ),
            freeze(
                "still-broken",
                json!({"reason": "INC-8"}),
                Some(json!({"phase": "Active", "message": "cannot be read (an older reason)"})),
            ),
            freeze(
                "typo",
                typo(),
                Some(json!({"phase": "Invalid", "message": "an older message"})),
            ),
        ])
        .await;
        // As observe reads a freeze it cannot decode.
        for f in &mut freezes {
            if f.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("broken"))
            {
                f.spec.unreadable = Some("spec.end: invalid time \"next tuesday\"".into());
            }
        }
        let lines = write(&client, &freezes, None, now()).await;
        assert_eq!(lines.len(), 4, "every message changed: {lines:?}");
        assert!(
            stored(&server, "still-broken")["status"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("cannot be read (spec.end: ")),
        );
        assert_eq!(stored(&server, "edited")["status"]["phase"], "Invalid");
        assert_eq!(
            said(&server),
            [
                ("broken".to_string(), "UnreadableFreeze".to_string()),
                ("edited".to_string(), "InvalidFreeze".to_string()),
            ]
        );
    }
}
