//! The actions of the page, each the command's own code: `approve`, `pause`, `resume`, `abort`,
//! `rollback`, `freeze create|delete|bypass` in `ops` (the same guarded patch, identity record and
//! Event as the CLI). Each is asked for twice: a preview, computed by the command's own pure part
//! on the promotion as read now, which the page shows as the confirmation ("what will change"), and
//! the action, which is carried out only when the preview is still the same (otherwise the page
//! gets the new preview to confirm).

use crate::annotations::Run;
use crate::api::{ClusterPromotion, revision_id};
use crate::ops::control::{
    Actor, abort_ops, approval_ops, guarded, pause_ops, resume_ops, stage_to_approve,
};
use crate::ops::freeze::{NewFreeze, bypass_ops, bypass_record, freeze_object, time_or_duration};
use crate::ops::rollback::{Planned, RollbackRequest};
use crate::settings::RollbackOrder;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the page asks for.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    Approve {
        promotion: String,
        stage: String,
    },
    Pause {
        promotion: String,
    },
    Resume {
        promotion: String,
    },
    Abort {
        promotion: String,
    },
    Rollback {
        promotion: String,
        #[serde(default, rename = "toRevision")]
        to_revision: Option<String>,
        #[serde(default)]
        order: Option<String>,
    },
    FreezeCreate {
        name: String,
        /// The freeze's own reason (the request's `reason` is the actor's).
        #[serde(rename = "freezeReason")]
        reason: String,
        #[serde(default)]
        selector: Option<String>,
        #[serde(default)]
        start: Option<String>,
        #[serde(default)]
        end: Option<String>,
    },
    FreezeDelete {
        name: String,
    },
    Bypass {
        promotion: String,
        #[serde(default)]
        freeze: Option<String>,
        until: String,
    },
}

/// An action with who asks and why (the commands' `--reason` and `--by`), and, when carried out,
/// the fingerprint of the preview that was confirmed.
#[derive(Clone, Debug, Deserialize)]
pub struct Request {
    #[serde(flatten)]
    pub action: Action,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub by: Option<String>,
    #[serde(default)]
    pub fingerprint: Option<String>,
}

/// The confirmation: what the command would do, now.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    pub title: String,
    /// One sentence each: what it does, and what the command refuses or says about it.
    pub summary: Vec<String>,
    /// The writes, one line each (the JSON patch's operations in words, the object created or
    /// deleted), and the Event.
    pub changes: Vec<String>,
    /// Who the write records (the identity the API server authenticated).
    pub identity: String,
    /// Whether the command needs `--reason`.
    pub reason_required: bool,
    /// Whether there is nothing to write (the command would say so and change nothing).
    pub nothing: bool,
    /// What must still hold when it is carried out.
    pub fingerprint: String,
    /// The rollback's choices (`--to-revision`), newest first: id and completion.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<(String, String)>,
}

fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `/spec/stages/1/trigger/manual/approved` as `spec.stages[1].trigger.manual.approved`;
/// an annotation's path as its key.
fn path_words(path: &str) -> String {
    if let Some(key) = path.strip_prefix("/metadata/annotations/") {
        return format!("annotation {}", key.replace("~1", "/").replace("~0", "~"));
    }
    let mut out = String::new();
    for part in path.trim_start_matches('/').split('/') {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&part.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

fn value_words(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    const MAX: usize = 600;
    if text.len() > MAX {
        let mut cut = MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}… ({} bytes)", &text[..cut], text.len())
    } else {
        text
    }
}

/// A JSON patch of the commands, in words, one line per operation.
pub fn describe_patch(ops: &[Value]) -> Vec<String> {
    ops.iter()
        .flat_map(|op| {
            let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
            let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
            let value = op.get("value").cloned().unwrap_or(Value::Null);
            match (kind, path) {
                ("test", "/metadata/resourceVersion") => vec![format!(
                    "only if the promotion is unchanged since it was read (resourceVersion {}); a concurrent write makes the command read it again",
                    value_words(&value)
                )],
                ("test", p) => vec![format!("only if {} is still {}", path_words(p), value_words(&value))],
                ("add", "/metadata/annotations") => value
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("set annotation {k} to {}", value_words(v)))
                            .collect()
                    })
                    .unwrap_or_default(),
                ("add" | "replace", p) => {
                    vec![format!("set {} to {}", path_words(p), value_words(&value))]
                }
                ("remove", p) => vec![format!("remove {}", path_words(p))],
                (k, p) => vec![format!("{k} {}", path_words(p))],
            }
        })
        .collect()
}

fn changes(p: &ClusterPromotion, ops: Vec<Value>, event: &str) -> Vec<String> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let mut out = vec![format!("JSON patch of ClusterPromotion {name}:")];
    out.extend(
        describe_patch(&guarded(p, ops))
            .into_iter()
            .map(|l| format!("  {l}")),
    );
    out.push(format!("an Event {event} about {name} (namespace default)"));
    out
}

fn order(text: Option<&str>) -> anyhow::Result<Option<RollbackOrder>> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => RollbackOrder::parse(t)
            .map(Some)
            .ok_or_else(|| anyhow::anyhow!("order {t:?}: expected \"reverse\" or \"all-at-once\"")),
    }
}

fn new_freeze(
    name: &str,
    reason: &str,
    selector: Option<&str>,
    start: Option<&str>,
    end: Option<&str>,
    now: DateTime<Utc>,
) -> anyhow::Result<NewFreeze> {
    let some = |t: Option<&str>| t.map(str::trim).filter(|t| !t.is_empty()).map(String::from);
    let start_at = some(start)
        .map(|s| time_or_duration("start", &s, now))
        .transpose()?;
    let end_at = some(end)
        .map(|e| time_or_duration("end", &e, start_at.unwrap_or(now)))
        .transpose()?;
    Ok(NewFreeze {
        name: name.trim().to_string(),
        reason: reason.to_string(),
        selector: some(selector),
        start: start_at,
        end: end_at,
    })
}

/// What `action` would do now, by the command's own pure part on the objects as read.
pub async fn preview(
    client: &kube::Client,
    action: &Action,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Preview> {
    let api: kube::Api<ClusterPromotion> = kube::Api::all(client.clone());
    let base = |title: String, fingerprint: String| Preview {
        title,
        summary: Vec::new(),
        changes: Vec::new(),
        identity: actor.by.clone(),
        reason_required: false,
        nothing: false,
        fingerprint: digest(&fingerprint),
        revisions: Vec::new(),
    };
    Ok(match action {
        Action::Approve { promotion, stage } => {
            let p = api.get(promotion).await?;
            stage_to_approve(&p, Some(stage)).map_err(|e| anyhow::anyhow!(e))?;
            let (stage, pre, record, ops) = approval_ops(&p, Some(stage), actor, now)?;
            let revision = record.revision.as_deref().map(revision_id);
            let what = match (&revision, pre) {
                (_, true) => format!(
                    "Pre-approve stage {stage} of {promotion} for the next revision (the current run has passed it)"
                ),
                (Some(r), false) => {
                    format!("Approve stage {stage} of {promotion} for revision {r}")
                }
                (None, false) => {
                    format!("Approve stage {stage} of {promotion} (it has not started)")
                }
            };
            let mut preview = base(
                format!("Approve {stage}?"),
                format!("approve {promotion} {stage} {pre} {:?}", record.revision),
            );
            preview.summary = vec![
                what,
                "The next pass lets the stage through once it has deployed and passed its checks; a later change of the profileSpec voids the approval.".into(),
            ];
            preview.changes = changes(&p, ops, "Approved");
            preview
        }
        Action::Pause { promotion } => {
            let p = api.get(promotion).await?;
            let mut preview = base(format!("Pause {promotion}?"), format!("pause {promotion}"));
            match pause_ops(&p, actor, now) {
                Err(r) => {
                    preview.nothing = true;
                    preview.summary = vec![format!(
                        "{promotion} is already paused by {} since {}",
                        r.by, r.at
                    )];
                }
                Ok(ops) => {
                    preview.summary = vec![format!(
                        "Every pass leaves {promotion} alone (even its deletion) until it is resumed."
                    )];
                    preview.changes = changes(&p, ops, "Paused");
                }
            }
            preview
        }
        Action::Resume { promotion } => {
            let p = api.get(promotion).await?;
            let crate::ops::control::Resumption {
                ops,
                lifted,
                redeploys,
            } = resume_ops(&p, actor, now);
            let mut preview = base(
                format!("Resume {promotion}?"),
                format!("resume {promotion} {}", lifted.join("; ")),
            );
            if lifted.is_empty() {
                preview.nothing = true;
                preview.summary = vec![format!(
                    "{promotion} is not paused, aborted, halted by a missed deadline or rolled back; nothing to resume"
                )];
            } else {
                preview.summary = std::iter::once("Lifts:".to_string())
                    .chain(lifted.iter().map(|l| format!("• {l}")))
                    .chain(redeploys.map(|r| {
                        format!("Redeploys revision {r}, which was rolled back: confirming this is the command's --yes.")
                    }))
                    .collect();
                preview.changes = changes(&p, ops, "Resumed");
            }
            preview
        }
        Action::Abort { promotion } => {
            let p = api.get(promotion).await?;
            let stage = p
                .status
                .as_ref()
                .and_then(|s| s.current_stage_name.clone())
                .unwrap_or_default();
            let run = p.status.as_ref().and_then(Run::of);
            let mut preview = base(
                format!("Abort {promotion}?"),
                format!(
                    "abort {promotion} {:?} {stage}",
                    run.as_ref().map(|r| &r.revision)
                ),
            );
            match abort_ops(&p, actor, now)? {
                Err(a) => {
                    preview.nothing = true;
                    preview.summary = vec![format!(
                        "{promotion}'s current run is already aborted by {} at {}",
                        a.by, a.at
                    )];
                }
                Ok(ops) => {
                    preview.summary = vec![format!(
                        "Holds the current run of {promotion}{} at stage {stage}: no profile is written until `resume` or a new revision; nothing deployed changes.",
                        run.map(|r| format!(" (revision {})", revision_id(&r.revision)))
                            .unwrap_or_default()
                    )];
                    preview.changes = changes(&p, ops, "Aborted");
                }
            }
            preview
        }
        Action::Rollback {
            promotion,
            to_revision,
            order: wanted,
        } => {
            let request = RollbackRequest {
                to_revision: to_revision.clone().filter(|t| !t.is_empty()),
                order: order(wanted.as_deref())?,
            };
            let planned =
                crate::ops::rollback::plan(client, promotion, &request, actor, now).await?;
            let p = api.get(promotion).await?;
            let current = p
                .status
                .as_ref()
                .and_then(Run::of)
                .map(|r| r.revision)
                .unwrap_or_default();
            let revisions = crate::annotations::History::of(&p)
                .candidates(&current)
                .map(|e| {
                    (
                        e.id.clone(),
                        e.completed_at.map(|t| t.to_string()).unwrap_or_default(),
                    )
                })
                .collect();
            match planned {
                Planned::Recorded(r) => {
                    let mut preview = base(
                        format!("Roll back {promotion}?"),
                        format!("rollback {promotion} recorded {}", r.to),
                    );
                    preview.nothing = true;
                    preview.summary = vec![format!(
                        "{promotion} is already rolling back to revision {} (requested by {} at {}); nothing to do",
                        revision_id(&r.to),
                        r.by,
                        r.at
                    )];
                    preview.revisions = revisions;
                    preview
                }
                Planned::Reorder(plan) => {
                    let to = revision_id(&plan.record.to);
                    let mut preview = base(
                        format!("Roll back {promotion} all at once?"),
                        format!(
                            "rollback {promotion} reorder {} {}",
                            plan.record.to,
                            plan.record.order.as_str()
                        ),
                    );
                    preview.summary = vec![format!(
                        "{promotion} is rolling back to revision {to} ({}, requested by {} at {}): the next pass restores every remaining stage at once ({}).",
                        plan.was.as_str(),
                        plan.record.by,
                        plan.record.at,
                        plan.record.order.as_str()
                    )];
                    preview.changes = changes(&plan.promotion, plan.ops, "RollbackRequested");
                    preview.revisions = revisions;
                    preview
                }
                Planned::Write(plan) => {
                    let mut preview = base(
                        format!("Roll back {promotion} to revision {}?", plan.to.id),
                        format!(
                            "rollback {promotion} {} {} {}",
                            plan.from_id,
                            plan.to.id,
                            plan.record.order.as_str()
                        ),
                    );
                    preview.summary = vec![
                        format!(
                            "Rolls {promotion} back from revision {} to revision {} ({}): the next pass restores every reached stage, then the promotion holds until its spec changes or `resume`.",
                            plan.from_id,
                            plan.to.id,
                            plan.record.order.as_str()
                        ),
                        format!(
                            "Revision {} is marked rolled back: it never rolls out again unless someone resumes it.",
                            plan.from_id
                        ),
                    ];
                    preview.changes = changes(&plan.promotion, plan.ops, "RollbackRequested");
                    preview.revisions = revisions;
                    preview
                }
            }
        }
        Action::FreezeCreate {
            name,
            reason,
            selector,
            start,
            end,
        } => {
            let new = new_freeze(
                name,
                reason,
                selector.as_deref(),
                start.as_deref(),
                end.as_deref(),
                now,
            )?;
            let object = freeze_object(&new, actor, now).map_err(|e| anyhow::anyhow!(e))?;
            let evaluated = crate::freeze::evaluate(&object, now);
            let promotions = api.list(&Default::default()).await?.items;
            let selects: Vec<String> = promotions
                .iter()
                .filter(|p| evaluated.selects(&p.metadata.labels.clone().unwrap_or_default()))
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            let mut spec = serde_json::to_value(&object.spec)?;
            let mut preview = base(
                format!("Create freeze {}?", new.name),
                format!("freeze-create {} {spec} {start:?} {end:?}", new.name),
            );
            if let Some(m) = spec.as_object_mut() {
                m.remove("reason");
            }
            preview.summary = vec![
                format!(
                    "While it is active, no promotion it selects starts a new stage; stages in progress finish, rollbacks are not held. {}",
                    evaluated.message
                ),
                format!(
                    "Selects now: {}",
                    if selects.is_empty() {
                        "none".to_string()
                    } else {
                        selects.join(", ")
                    }
                ),
            ];
            preview.changes = vec![
                format!(
                    "create PromotionFreeze {} (promoter.dev/v1alpha1) with reason {:?} and {}",
                    new.name, object.spec.reason, spec
                ),
                format!(
                    "annotation promoter.dev/created-by: {}",
                    object
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(crate::annotations::CREATED_BY))
                        .cloned()
                        .unwrap_or_default()
                ),
            ];
            preview
        }
        Action::FreezeDelete { name } => {
            // As the pass reads them: one that cannot be decoded is shown and deleted too.
            let all = crate::ops::freeze::all_freezes(client).await?;
            crate::ops::freeze::check_freeze_exists(client, &all, name).await?;
            let Some(f) = all
                .iter()
                .find(|f| f.metadata.name.as_deref() == Some(name))
            else {
                anyhow::bail!("freeze {name} is gone");
            };
            let evaluated = crate::freeze::evaluate(f, now);
            let promotions = api.list(&Default::default()).await?.items;
            let holds: Vec<String> = promotions
                .iter()
                .filter(|p| {
                    evaluated.holds(
                        p.metadata.name.as_deref().unwrap_or_default(),
                        &p.metadata.labels.clone().unwrap_or_default(),
                    )
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            let mut preview = base(
                format!("Delete freeze {name}?"),
                format!("freeze-delete {name}"),
            );
            preview.summary = vec![format!(
                "The promotions it holds start new stages again from the next pass. It holds now: {}",
                if holds.is_empty() {
                    "none".to_string()
                } else {
                    holds.join(", ")
                }
            )];
            preview.changes = vec![format!(
                "delete PromotionFreeze {name} ({})",
                evaluated.reason()
            )];
            preview
        }
        Action::Bypass {
            promotion,
            freeze,
            until,
        } => {
            let freeze = freeze.as_deref().map(str::trim).filter(|f| !f.is_empty());
            let until_at = time_or_duration("until", until, now)?;
            let p = api.get(promotion).await?;
            if let Some(f) = freeze {
                let all = crate::ops::freeze::all_freezes(client).await?;
                crate::ops::freeze::check_freeze_exists(client, &all, f).await?;
            }
            let mut preview = base(
                format!("Bypass freezes for {promotion}?"),
                format!("bypass {promotion} {freeze:?} {until}"),
            );
            preview.reason_required = true;
            // The record needs the reason; it is shown with the one typed below.
            let shown = Actor {
                reason: Some(
                    actor
                        .reason
                        .clone()
                        .unwrap_or_else(|| "(the reason below)".into()),
                ),
                ..actor.clone()
            };
            let record =
                bypass_record(freeze, until_at, &shown, now).map_err(|e| anyhow::anyhow!(e))?;
            preview.summary = vec![format!(
                "{promotion} may start new stages during {} until {}; recorded with who, why and until when.",
                freeze
                    .map(|f| format!("freeze {f}"))
                    .unwrap_or_else(|| "any freeze".into()),
                record.until
            )];
            let ops = bypass_ops(&p, &record);
            preview.changes = changes(&p, ops, "FreezeBypassGranted");
            preview
        }
    })
}

/// Carries `action` out with the command's own function, as the CLI would; its one line.
pub async fn perform(
    client: &kube::Client,
    action: &Action,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    use crate::ops::{control, freeze, rollback};
    match action {
        Action::Approve { promotion, stage } => {
            control::approve(client, promotion, Some(stage), actor, now).await
        }
        Action::Pause { promotion } => {
            control::set_paused(client, promotion, true, actor, now).await
        }
        // Carried out only when the confirmed preview, which names a revision it redeploys, is
        // still the same: that confirmation is the command's `--yes`.
        Action::Resume { promotion } => {
            let options = control::ResumeOptions {
                yes: true,
                dry_run: false,
            };
            control::resume(client, promotion, options, actor, now).await
        }
        Action::Abort { promotion } => control::abort(client, promotion, actor, now).await,
        Action::Rollback {
            promotion,
            to_revision,
            order: wanted,
        } => {
            let request = RollbackRequest {
                to_revision: to_revision.clone().filter(|t| !t.is_empty()),
                order: order(wanted.as_deref())?,
            };
            rollback::request_rollback(client, promotion, &request, actor, now).await
        }
        Action::FreezeCreate {
            name,
            reason,
            selector,
            start,
            end,
        } => {
            let new = new_freeze(
                name,
                reason,
                selector.as_deref(),
                start.as_deref(),
                end.as_deref(),
                now,
            )?;
            freeze::create(client, &new, actor, now).await
        }
        Action::FreezeDelete { name } => freeze::delete(client, name).await,
        Action::Bypass {
            promotion,
            freeze: which,
            until,
        } => {
            let which = which.as_deref().map(str::trim).filter(|f| !f.is_empty());
            let until_at = time_or_duration("until", until, now)?;
            freeze::bypass(client, promotion, which, until_at, actor, now).await
        }
    }
}

impl Action {
    /// The promotion the action writes, if it writes one.
    pub fn promotion(&self) -> Option<&str> {
        match self {
            Action::Approve { promotion, .. }
            | Action::Pause { promotion }
            | Action::Resume { promotion }
            | Action::Abort { promotion }
            | Action::Rollback { promotion, .. }
            | Action::Bypass { promotion, .. } => Some(promotion),
            Action::FreezeCreate { .. } | Action::FreezeDelete { .. } => None,
        }
    }

    /// Whether it changes the PromotionFreezes.
    pub fn freezes(&self) -> bool {
        matches!(
            self,
            Action::FreezeCreate { .. } | Action::FreezeDelete { .. }
        )
    }
}

/// The reason and note that go with `action`, as the CLI's flags would pass them: `freeze
/// create` takes its reason in the freeze, not in the actor.
pub fn actor_inputs(request: &Request) -> (Option<&str>, Option<&str>) {
    let reason = match request.action {
        Action::FreezeCreate { .. } | Action::FreezeDelete { .. } => None,
        _ => request.reason.as_deref(),
    };
    (request.by.as_deref(), reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_in_words() {
        let ops = vec![
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"}),
            json!({"op": "test", "path": "/spec/stages/1/name", "value": "staging"}),
            json!({"op": "add", "path": "/spec/stages/1/trigger/manual/approved", "value": true}),
            json!({"op": "add", "path": "/metadata/annotations/promoter.dev~1approval.staging", "value": "{\"by\":\"alice\"}"}),
            json!({"op": "remove", "path": "/metadata/annotations/promoter.dev~1paused"}),
            json!({"op": "add", "path": "/metadata/annotations", "value": {"promoter.dev/paused": "x"}}),
        ];
        assert_eq!(
            describe_patch(&ops),
            [
                "only if the promotion is unchanged since it was read (resourceVersion 42); a concurrent write makes the command read it again",
                "only if spec.stages[1].name is still staging",
                "set spec.stages[1].trigger.manual.approved to true",
                "set annotation promoter.dev/approval.staging to {\"by\":\"alice\"}",
                "remove annotation promoter.dev/paused",
                "set annotation promoter.dev/paused to x",
            ]
        );
        let long =
            json!({"op": "add", "path": "/metadata/annotations/a", "value": "é".repeat(400)});
        assert!(describe_patch(&[long])[0].ends_with("… (800 bytes)"));
    }

    #[test]
    fn requests_as_the_page_sends_them() {
        let r: Request = serde_json::from_value(json!({
            "action": "approve", "promotion": "p", "stage": "staging", "reason": "CAB-1"}))
        .unwrap();
        assert_eq!(
            r.action,
            Action::Approve {
                promotion: "p".into(),
                stage: "staging".into()
            }
        );
        assert_eq!(actor_inputs(&r), (None, Some("CAB-1")));
        let r: Request = serde_json::from_value(json!({
            "action": "rollback", "promotion": "p", "toRevision": "1a2b3c4d5e", "order": "all-at-once"}))
        .unwrap();
        assert!(
            matches!(r.action, Action::Rollback { ref to_revision, .. } if to_revision.as_deref() == Some("1a2b3c4d5e"))
        );
        let r: Request = serde_json::from_value(json!({
            "action": "freeze-create", "name": "f", "freezeReason": "holidays", "reason": "x"}))
        .unwrap();
        assert_eq!(actor_inputs(&r), (None, None));
        assert!(serde_json::from_value::<Request>(json!({"action": "delete-everything"})).is_err());
    }
}
