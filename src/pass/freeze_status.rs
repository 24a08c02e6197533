//! The status of each PromotionFreeze (phase Scheduled, Active, Expired or Invalid, and a message),
//! written by the pass only when it changes, so that `kubectl get promotionfreezes` says where each
//! one stands and an invalid one says why it holds nothing (with a Warning Event, once). A merge
//! patch of `/status` guarded by the resourceVersion read: a concurrent pass makes it a conflict,
//! and the next pass writes it if it still differs.

use super::decision::Reason;
use super::events;
use crate::api::{FreezePhase, PromotionFreeze};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// What the pass wrote: one line per freeze whose status changed.
pub async fn write(
    client: &kube::Client,
    freezes: &[PromotionFreeze],
    now: DateTime<Utc>,
) -> Vec<String> {
    let api: Api<PromotionFreeze> = Api::all(client.clone());
    let mut done = Vec::new();
    for f in freezes {
        let evaluated = crate::freeze::evaluate(f, now);
        let desired = evaluated.status();
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
                if evaluated.phase == FreezePhase::Invalid && !was_invalid {
                    let regarding = ObjectReference {
                        api_version: Some("promoter.dev/v1alpha1".into()),
                        kind: Some("PromotionFreeze".into()),
                        name: Some(name.clone()),
                        uid: f.metadata.uid.clone(),
                        ..Default::default()
                    };
                    let note = Reason::InvalidFreeze.note(format!(
                        "PromotionFreeze {name} holds nothing: {}",
                        evaluated.message
                    ));
                    events::emit_regarding(client, &regarding, &[note], "PromotionFreeze", now)
                        .await;
                }
            }
            Err(e) => {
                tracing::warn!(freeze = %name, error = %e, "could not write the freeze's status; the next pass tries again")
            }
        }
    }
    done
}
