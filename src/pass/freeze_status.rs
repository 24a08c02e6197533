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
