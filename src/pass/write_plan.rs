//! The writes of one decision, as data: the exact requests `act` sends, in order, and how each
//! answer is judged. Pure (no I/O): `act` sends them through kube; the model checker (`promoter-model`)
//! applies them to the fake API server's store one at a time.
//!
//! A plan is built from the decision and the world the pass observed ([`plan`]). Each
//! [`PlannedWrite`] becomes a concrete [`Request`] only when it is its turn
//! ([`PlannedWrite::request`]), from the promotion as the previous write of the pass returned it:
//! the record patch tests that object's resourceVersion, the status PUT carries it, the finalizer
//! patch replaces its list. Profile and revision writes are complete when planned (their
//! preconditions are the observed profile's resourceVersion or UID). Each answer is judged by
//! [`PlannedWrite::judge`]: go on, skip (nothing needed doing after all), or stop this promotion's
//! writes (another writer was first, the promotion is gone, the answer was lost, or an error).
//!
//! The order is `act`'s (see there): the decision's `actions`, the status, then `after_status`.

use super::decision::{Action, Decision, RecordOp};
use super::profiles::{preverification_name, profile_name};
use super::world::World;
use crate::annotations::outbox::{self, OUTBOX};
use crate::annotations::redeploy;
use crate::annotations::{
    COMPLETED, DEADLINE_CLOCK, FAILED, HISTORY, REDEPLOY, REVISION_SWEEP, ROLLBACK, approval_key,
    grant_key,
};
use crate::api::promotion::FINALIZER;
use crate::api::{ClusterProfile, ClusterPromotion, ClusterPromotionStatus, PromotionRevision};
use serde_json::{Value, json};

/// Where a write stands relative to the status write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    BeforeStatus,
    Status,
    /// Only what the status write decided: a failure here is retried by the next pass from the
    /// recorded status.
    AfterStatus,
}

/// One write of a plan, before it is its turn.
#[derive(Clone, Debug)]
pub struct PlannedWrite {
    pub when: When,
    /// What the write does, one line (`act`'s report).
    pub what: String,
    pub kind: WriteKind,
}

#[derive(Clone, Debug)]
pub enum WriteKind {
    /// The promotion's finalizers with or without promoter's, as a merge patch carrying the
    /// resourceVersion of the promotion as last returned. A 404 on removal: already gone.
    Finalizer { add: bool },
    /// promoter's records: one JSON patch whose first operation tests the resourceVersion.
    Records(Vec<RecordOp>),
    /// PUT on `/status` with the resourceVersion of the promotion as last returned.
    Status(Box<ClusterPromotionStatus>),
    /// A generated profile that was not observed.
    CreateProfile(Box<ClusterProfile>),
    /// An observed profile, updated (it carries the observed resourceVersion). A 404: deleted
    /// since observed, a conflict like any other.
    ReplaceProfile(Box<ClusterProfile>),
    /// Only the object the pass judged (UID precondition); a 404: already gone.
    DeleteProfile { name: String, uid: Option<String> },
    /// A merge patch of an observed profile's owner references (with its resourceVersion); a 404:
    /// nothing left to disown.
    DisownProfile { name: String, patch: Value },
    /// A content-addressed PromotionRevision: looked up first, created when absent; one that
    /// exists (or a 409) is the same revision, stored by an earlier or a concurrent pass.
    StoreRevision(Box<PromotionRevision>),
    /// Nothing to send after all (a profile to disown that was not observed).
    Nothing,
}

/// A request to the API server, complete.
#[derive(Clone, Debug)]
pub enum Request {
    /// A merge patch of the ClusterPromotion.
    MergePatchPromotion {
        name: String,
        patch: Value,
    },
    /// A JSON patch of the ClusterPromotion (an array of operations).
    JsonPatchPromotion {
        name: String,
        patch: Value,
    },
    /// PUT of the ClusterPromotion's `/status`.
    ReplacePromotionStatus {
        name: String,
        body: Box<ClusterPromotion>,
    },
    CreateProfile {
        body: Box<ClusterProfile>,
    },
    ReplaceProfile {
        name: String,
        body: Box<ClusterProfile>,
    },
    DeleteProfile {
        name: String,
        uid: Option<String>,
    },
    MergePatchProfile {
        name: String,
        patch: Value,
    },
    /// A GET of the revision, then (absent) a create: answered [`Answer::Present`] when found.
    StoreRevision {
        body: Box<PromotionRevision>,
    },
}

/// The answer to a request, as far as judging it goes.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Written; a ClusterPromotion write returns the object as stored.
    Written(Option<Box<ClusterPromotion>>),
    /// The revision to store was there already.
    Present,
    /// An API status: its code, whether it is a JSON patch that did not apply
    /// ([`crate::guard::patch_not_applied`]), and the error as text.
    Refused {
        code: u16,
        not_applied: bool,
        text: String,
    },
    /// The outcome is not known: the answer was lost (connection reset, timeout) or the server
    /// timed out (504: the write may still be committed). Never replayed: the next pass reads what
    /// happened and decides again.
    Unknown(String),
    /// Any other error (the request could not be encoded or sent).
    Failed(String),
}

/// What an answer means for the rest of the promotion's writes.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Written: the line for the report, and the promotion as now stored when this wrote it.
    Done(String, Option<Box<ClusterPromotion>>),
    /// Nothing needed doing after all (already gone, already stored).
    Skipped,
    /// Not written, and the rest goes on: a PromotionRevision whose create answered 404, so
    /// PromotionRevisions are not served (a half install: PromotionFreeze's CRD alone). The
    /// history is optional (as without promoter's CRDs at all); the line, for the report and a
    /// warning, says the revision is not stored and what installs the CRD.
    NotStored(String),
    /// Another writer was first, the promotion is gone, or the answer was lost: the rest of this
    /// promotion waits for the next pass (not an error).
    Conflict(String),
    /// An error that stops this promotion's writes, with context.
    Error(String),
}

/// The writes of `d`, in order, against the `world` the pass observed.
pub fn plan(d: &Decision, world: &World) -> Vec<PlannedWrite> {
    let mut out: Vec<PlannedWrite> = d
        .actions
        .iter()
        .map(|a| planned(a, When::BeforeStatus, &d.promotion, world))
        .collect();
    if let Some(status) = &d.status {
        out.push(PlannedWrite {
            when: When::Status,
            what: "wrote status".into(),
            kind: WriteKind::Status(Box::new(status.clone())),
        });
    }
    out.extend(
        d.after_status
            .iter()
            .map(|a| planned(a, When::AfterStatus, &d.promotion, world)),
    );
    out
}

fn planned(action: &Action, when: When, promotion: &str, world: &World) -> PlannedWrite {
    let kind = match action {
        Action::AddFinalizer => WriteKind::Finalizer { add: true },
        Action::RemoveFinalizer => WriteKind::Finalizer { add: false },
        Action::Record(ops) => WriteKind::Records(ops.clone()),
        Action::StoreRevision(r) => WriteKind::StoreRevision(r.clone()),
        Action::Apply(desired) => match world.profiles.get(&desired.name) {
            Some(observed) => WriteKind::ReplaceProfile(Box::new(desired.merged_into(observed))),
            None => WriteKind::CreateProfile(Box::new(desired.to_object())),
        },
        Action::Delete { name } => WriteKind::DeleteProfile {
            name: name.clone(),
            // Only the object the pass judged: if it was deleted and created again since (by
            // someone else, or for another promotion), the UID precondition makes this a 409.
            uid: world
                .profiles
                .get(name)
                .and_then(|cp| cp.metadata.uid.clone()),
        },
        Action::Disown { name } => match world.profiles.get(name) {
            Some(observed) => {
                let refs: Vec<Value> = observed
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .filter(|r| !(r.kind == "ClusterPromotion" && r.name == promotion))
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .collect();
                WriteKind::DisownProfile {
                    name: name.clone(),
                    patch: json!({"metadata": {"ownerReferences": refs, "resourceVersion": observed.metadata.resource_version}}),
                }
            }
            None => WriteKind::Nothing,
        },
    };
    PlannedWrite {
        when,
        what: describe(action),
        kind,
    }
}

fn finalizers_without(p: &ClusterPromotion) -> Vec<String> {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect()
}

impl PlannedWrite {
    /// Whether this writes the ClusterPromotion itself (a 404 then means it is gone).
    fn writes_promotion(&self) -> bool {
        matches!(
            self.kind,
            WriteKind::Finalizer { .. } | WriteKind::Records(_) | WriteKind::Status(_)
        )
    }

    /// The request, made from the promotion as the pass's last write of it returned it (or as
    /// observed); `None` when there is nothing to send.
    pub fn request(&self, current: &ClusterPromotion) -> Option<Request> {
        let name = current.metadata.name.clone().unwrap_or_default();
        Some(match &self.kind {
            WriteKind::Finalizer { add } => {
                let mut finalizers = finalizers_without(current);
                if *add {
                    finalizers.push(FINALIZER.into());
                }
                // The resourceVersion makes the list replacement safe against concurrent writers.
                Request::MergePatchPromotion {
                    name,
                    patch: json!({"metadata": {"finalizers": finalizers, "resourceVersion": current.metadata.resource_version}}),
                }
            }
            WriteKind::Records(ops) => Request::JsonPatchPromotion {
                name,
                patch: Value::Array(record_patch(current, ops)),
            },
            WriteKind::Status(status) => {
                // PUT on /status carries the resourceVersion: a concurrent pass makes this a 409.
                let mut body = current.clone();
                body.status = Some((**status).clone());
                Request::ReplacePromotionStatus {
                    name,
                    body: Box::new(body),
                }
            }
            WriteKind::CreateProfile(body) => Request::CreateProfile { body: body.clone() },
            WriteKind::ReplaceProfile(body) => Request::ReplaceProfile {
                name: body.metadata.name.clone().unwrap_or_default(),
                body: body.clone(),
            },
            WriteKind::DeleteProfile { name, uid } => Request::DeleteProfile {
                name: name.clone(),
                uid: uid.clone(),
            },
            WriteKind::DisownProfile { name, patch } => Request::MergePatchProfile {
                name: name.clone(),
                patch: patch.clone(),
            },
            WriteKind::StoreRevision(body) => Request::StoreRevision { body: body.clone() },
            WriteKind::Nothing => return None,
        })
    }

    /// What `answer` means for the promotion `name`'s remaining writes.
    pub fn judge(&self, name: &str, answer: Answer) -> Verdict {
        match answer {
            Answer::Written(updated) => Verdict::Done(self.what.clone(), updated),
            Answer::Present => Verdict::Skipped,
            Answer::Refused { code: 404, .. } if self.skips_when_gone() => Verdict::Skipped,
            Answer::Refused { code: 409, .. }
                if matches!(self.kind, WriteKind::StoreRevision(_)) =>
            {
                Verdict::Skipped
            }
            // The GET before found nothing and the create has no other reason for a 404.
            Answer::Refused { code: 404, .. }
                if matches!(self.kind, WriteKind::StoreRevision(_)) =>
            {
                Verdict::NotStored(self.not_stored())
            }
            Answer::Refused { code: 409, .. } if self.when == When::Status => Verdict::Conflict(
                format!("ClusterPromotion {name} changed during the pass; status not written"),
            ),
            // Deleted since observed (another pass, a user): the next pass creates it again from
            // what it reads, like a conflict.
            Answer::Refused { code: 404, .. }
                if matches!(self.kind, WriteKind::ReplaceProfile(_)) =>
            {
                self.conflict(name)
            }
            // A `test` failed: the promotion changed since it was observed; the next pass decides
            // again from what it finds. Any other 422 (an invalid result) is an error, since
            // deciding again would only repeat it.
            Answer::Refused {
                code: 422,
                not_applied: true,
                ..
            } if matches!(self.kind, WriteKind::Records(_)) => self.conflict(name),
            Answer::Refused { code: 409, .. } => self.conflict(name),
            Answer::Refused { code: 404, .. } if self.writes_promotion() => {
                Verdict::Conflict(format!(
                    "ClusterPromotion {name}: {}: the promotion is gone (deleted by another pass or a user)",
                    self.doing()
                ))
            }
            Answer::Unknown(e) => Verdict::Conflict(format!(
                "ClusterPromotion {name}: {}: the answer was lost ({e}); not sent again, the next pass reads what happened",
                self.doing()
            )),
            Answer::Refused { text, .. } | Answer::Failed(text) => {
                Verdict::Error(match self.when {
                    When::BeforeStatus => format!("ClusterPromotion {name}: {}: {text}", self.what),
                    When::Status => format!("ClusterPromotion {name}: writing status: {text}"),
                    When::AfterStatus => format!(
                        "ClusterPromotion {name}: {} (after recording the status; the next pass retries): {text}",
                        self.what
                    ),
                })
            }
        }
    }

    /// The line of a revision not stored because PromotionRevisions are not served.
    fn not_stored(&self) -> String {
        let revision = match &self.kind {
            WriteKind::StoreRevision(r) => r.metadata.name.as_deref().unwrap_or_default(),
            _ => "",
        };
        format!(
            "PromotionRevision {revision} not stored: PromotionRevisions are not served (their CRD \
             is not installed), so a rollback to this revision cannot restore it; install it with \
             `promoter crd --own | kubectl apply -f -`"
        )
    }

    fn conflict(&self, name: &str) -> Verdict {
        Verdict::Conflict(format!(
            "ClusterPromotion {name}: {}: another writer was first",
            self.doing()
        ))
    }

    /// A 404 that means the write is not needed: the finalizer's removal (a faster pass removed
    /// it, and the promotion with it), a deletion, a disowning.
    fn skips_when_gone(&self) -> bool {
        matches!(
            self.kind,
            WriteKind::Finalizer { add: false }
                | WriteKind::DeleteProfile { .. }
                | WriteKind::DisownProfile { .. }
        )
    }

    fn doing(&self) -> String {
        match self.when {
            When::Status => "writing status".into(),
            _ => self.what.clone(),
        }
    }
}

pub(crate) fn describe(action: &Action) -> String {
    match action {
        Action::AddFinalizer => "adding the finalizer".into(),
        Action::RemoveFinalizer => "removing the finalizer".into(),
        Action::Apply(p) => format!("applying ClusterProfile {}", p.name),
        Action::Delete { name } => format!("deleting ClusterProfile {name}"),
        Action::Disown { name } => format!("removing the owner reference of ClusterProfile {name}"),
        Action::StoreRevision(r) => format!(
            "storing PromotionRevision {}",
            r.metadata.name.as_deref().unwrap_or_default()
        ),
        Action::Record(ops) => ops
            .iter()
            .map(|op| match op {
                RecordOp::ConsumeApproval { stage, .. } => {
                    format!("consuming the approval of stage {stage}")
                }
                RecordOp::RestoreApproval { stage, .. } => {
                    format!("giving back the unused approval of stage {stage}")
                }
                RecordOp::ForgetApprovalRecord { stage } => {
                    format!("dropping the revoked approval record of stage {stage}")
                }
                RecordOp::Complete(_) => "recording completion".into(),
                RecordOp::ReviseApprovalRecord { stage, .. } => {
                    format!("carrying the approval of stage {stage} over to the taken-over run")
                }
                RecordOp::WithdrawApproval { stage, .. } => {
                    format!(
                        "withdrawing the approval of stage {stage} given to an earlier revision"
                    )
                }
                RecordOp::History(_) => "recording the revision history".into(),
                RecordOp::SweepDue(_) => {
                    "recording that revisions the history forgot are to be deleted".into()
                }
                RecordOp::Failed(f) => {
                    format!(
                        "recording that stage {} missed its progress deadline",
                        f.stage
                    )
                }
                RecordOp::Rollback(r) if r.completed_at.is_some() => {
                    "recording the rollback's completion".into()
                }
                RecordOp::Rollback(r) => format!(
                    "recording a rollback to revision {}",
                    crate::api::revision_id(&r.to)
                ),
                RecordOp::Clock(c) => match &c.stage {
                    Some(stage) => format!("recording the deadline clock of stage {stage}"),
                    None => "recording the deadline clock of the rollback".into(),
                },
                RecordOp::Drop(hold) => format!("dropping {}", hold.key()),
                RecordOp::Redeploy { profile, .. } => {
                    format!("recording what Sveltos redeploys for ClusterProfile {profile}")
                }
                RecordOp::Outbox(entries) => {
                    match entries.iter().filter(|e| !e.confirmed).count() {
                        0 => "updating the notification outbox".into(),
                        1 => "recording 1 transition to notify".into(),
                        n => format!("recording {n} transitions to notify"),
                    }
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The JSON patch of promoter's records, guarded by the resourceVersion of `current` (what the pass
/// observed, or its own last write).
pub fn record_patch(current: &ClusterPromotion, ops: &[RecordOp]) -> Vec<Value> {
    let annotations = current.metadata.annotations.clone().unwrap_or_default();
    let mut out = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
        "value": current.metadata.resource_version})];
    if current.metadata.annotations.is_none() {
        out.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    let annotation = |key: &str| format!("/metadata/annotations/{}", escape(key));
    let set =
        |key: &str, value: String| json!({"op": "add", "path": annotation(key), "value": value});
    let remove = |out: &mut Vec<Value>, key: &str| {
        if annotations.contains_key(key) {
            out.push(json!({"op": "remove", "path": annotation(key)}));
        }
    };
    for op in ops {
        match op {
            RecordOp::ConsumeApproval {
                index,
                stage,
                grant,
            } => {
                let approved = format!("/spec/stages/{index}/trigger/manual/approved");
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "test", "path": approved, "value": true}));
                out.push(json!({"op": "remove", "path": approved}));
                remove(&mut out, &approval_key(stage));
                out.push(set(&grant_key(stage), to_json(grant)));
            }
            RecordOp::RestoreApproval {
                index,
                stage,
                approval,
            } => {
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "add", "path": format!("/spec/stages/{index}/trigger/manual/approved"), "value": true}));
                if let Some(r) = approval {
                    out.push(set(&approval_key(stage), to_json(r)));
                }
                remove(&mut out, &grant_key(stage));
            }
            RecordOp::ForgetApprovalRecord { stage } => remove(&mut out, &approval_key(stage)),
            RecordOp::Complete(run) => out.push(set(COMPLETED, to_json(run))),
            RecordOp::ReviseApprovalRecord { stage, record } => {
                out.push(set(&approval_key(stage), to_json(record)));
            }
            RecordOp::History(h) => out.push(set(HISTORY, h.to_annotation())),
            RecordOp::SweepDue(token) => out.push(set(REVISION_SWEEP, token.clone())),
            RecordOp::Failed(f) => out.push(set(FAILED, to_json(f))),
            RecordOp::Rollback(r) => out.push(set(ROLLBACK, to_json(r))),
            RecordOp::Clock(c) => out.push(set(DEADLINE_CLOCK, to_json(c))),
            RecordOp::Drop(hold) => remove(&mut out, hold.key()),
            RecordOp::Outbox(entries) if entries.is_empty() => remove(&mut out, OUTBOX),
            RecordOp::Outbox(entries) => out.push(set(OUTBOX, outbox::encode(entries))),
            RecordOp::WithdrawApproval { index, stage } => {
                let approved = format!("/spec/stages/{index}/trigger/manual/approved");
                out.push(json!({"op": "test", "path": format!("/spec/stages/{index}/name"), "value": stage}));
                out.push(json!({"op": "test", "path": approved, "value": true}));
                out.push(json!({"op": "remove", "path": approved}));
                remove(&mut out, &approval_key(stage));
            }
            // Written once below, all profiles together.
            RecordOp::Redeploy { .. } => {}
        }
    }
    let written: Vec<(String, redeploy::Redeploy)> = ops
        .iter()
        .filter_map(|op| match op {
            RecordOp::Redeploy { profile, record } => Some((profile.clone(), record.clone())),
            _ => None,
        })
        .collect();
    if !written.is_empty() {
        let promotion = current.metadata.name.as_deref().unwrap_or_default();
        let generated: Vec<String> = current
            .spec
            .stages
            .iter()
            .flat_map(|s| {
                [
                    profile_name(promotion, &s.name),
                    preverification_name(promotion, &s.name),
                ]
            })
            .collect();
        out.push(set(
            REDEPLOY,
            redeploy::merged(current, &written, &generated),
        ));
    }
    out
}

/// A record as the annotation's JSON text.
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion(rv: &str) -> ClusterPromotion {
        let mut p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "resourceVersion": rv},
            "spec": {"profileSpec": {}, "stages": []}
        }))
        .unwrap();
        p.metadata.annotations = None;
        p
    }

    fn decision() -> Decision {
        let mut d = Decision::new("p");
        d.actions = vec![
            Action::AddFinalizer,
            Action::Record(vec![RecordOp::ForgetApprovalRecord { stage: "s".into() }]),
        ];
        d.status = Some(ClusterPromotionStatus::default());
        d.after_status = vec![Action::Delete {
            name: "gone".into(),
        }];
        d
    }

    fn refused(code: u16, not_applied: bool) -> Answer {
        Answer::Refused {
            code,
            not_applied,
            text: format!("status {code}"),
        }
    }

    #[test]
    fn the_plan_is_the_actions_then_the_status_then_what_the_status_decided() {
        let world = World::new(Default::default(), Default::default(), Default::default());
        let plan = plan(&decision(), &world);
        let whens: Vec<When> = plan.iter().map(|w| w.when).collect();
        assert_eq!(
            whens,
            [
                When::BeforeStatus,
                When::BeforeStatus,
                When::Status,
                When::AfterStatus
            ]
        );
        // Each promotion write is guarded by the promotion as the pass last saw it.
        let Some(Request::JsonPatchPromotion { patch, .. }) = plan[1].request(&promotion("7"))
        else {
            panic!("a JSON patch")
        };
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "7"})
        );
        let Some(Request::ReplacePromotionStatus { body, .. }) = plan[2].request(&promotion("8"))
        else {
            panic!("a status PUT")
        };
        assert_eq!(body.metadata.resource_version.as_deref(), Some("8"));
        // Not observed: no precondition, and a 404 is nothing to do.
        assert!(matches!(
            plan[3].request(&promotion("8")),
            Some(Request::DeleteProfile { uid: None, .. })
        ));
    }

    /// Issue 26: the outbox is written in the guarded record patch, before the status; an
    /// empty one removes the annotation (when there is one).
    #[test]
    fn the_outbox_is_in_the_guarded_record_patch_before_the_status() {
        let entry: crate::annotations::outbox::Entry = serde_json::from_value(json!({
            "key": "k", "transition": "StageStarted", "reason": "StageProvisioning",
            "message": "m", "at": "2026-02-16T06:00:00Z", "status": "s"}))
        .unwrap();
        let mut d = Decision::new("p");
        d.record(RecordOp::Outbox(vec![entry.clone()]));
        d.status = Some(ClusterPromotionStatus::default());
        let world = World::new(Default::default(), Default::default(), Default::default());
        let plan = plan(&d, &world);
        assert_eq!(
            plan.iter().map(|w| w.when).collect::<Vec<_>>(),
            [When::BeforeStatus, When::Status]
        );
        assert_eq!(plan[0].what, "recording 1 transition to notify");
        let Some(Request::JsonPatchPromotion { patch, .. }) = plan[0].request(&promotion("7"))
        else {
            panic!("a JSON patch")
        };
        assert_eq!(patch[0]["path"], "/metadata/resourceVersion");
        let last = &patch[patch.as_array().unwrap().len() - 1];
        assert_eq!(last["path"], "/metadata/annotations/promoter.dev~1outbox");
        assert_eq!(last["value"].as_str().unwrap(), outbox::encode(&[entry]));
        let mut with = promotion("7");
        with.metadata.annotations = Some([(OUTBOX.to_string(), "[]".to_string())].into());
        let ops = record_patch(&with, &[RecordOp::Outbox(vec![])]);
        assert_eq!(
            ops[1],
            json!({"op": "remove", "path": "/metadata/annotations/promoter.dev~1outbox"})
        );
        assert_eq!(
            record_patch(&promotion("7"), &[RecordOp::Outbox(vec![])]).len(),
            2
        );
    }

    /// The `promoter.dev/redeploy` entries of one record patch are written together, over the
    /// promotion's current ones, keeping only profiles it generates.
    #[test]
    fn redeploy_records_merge_and_drop_what_the_promotion_no_longer_generates() {
        use crate::annotations::redeploy::{Redeploy, redeploys};
        use crate::sveltos::redeploy::Expect;
        let mut current: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "resourceVersion": "7"},
            "spec": {"profileSpec": {}, "stages": [
                {"name": "a", "clusterSelector": {}}, {"name": "b", "clusterSelector": {}}]}
        }))
        .unwrap();
        let old = [
            ("p-a", Redeploy::new("x", &Expect::Unknown, None)),
            ("p-gone", Redeploy::new("y", &Expect::Unknown, None)),
            (
                "preverification-p-b",
                Redeploy::new("z", &Expect::Nothing, None),
            ),
        ];
        let map: std::collections::BTreeMap<&str, Redeploy> = old.into_iter().collect();
        current.metadata.annotations =
            Some([(REDEPLOY.to_string(), serde_json::to_string(&map).unwrap())].into());
        let ops = [
            RecordOp::Redeploy {
                profile: "p-a".into(),
                record: Redeploy::new("new-a", &Expect::Nothing, None),
            },
            RecordOp::Redeploy {
                profile: "p-b".into(),
                record: Redeploy::new("new-b", &Expect::Unknown, None),
            },
        ];
        let patch = record_patch(&current, &ops);
        assert_eq!(patch.len(), 2, "one test, one write: {patch:?}");
        assert_eq!(
            patch[1]["path"],
            "/metadata/annotations/promoter.dev~1redeploy"
        );
        let mut after = current.clone();
        after.metadata.annotations.as_mut().unwrap().insert(
            REDEPLOY.into(),
            patch[1]["value"].as_str().unwrap().to_string(),
        );
        let all = redeploys(&after);
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            ["p-a", "p-b", "preverification-p-b"]
        );
        assert_eq!(all["p-a"].spec, "new-a");
        assert_eq!(all["preverification-p-b"].spec, "z");
        assert_eq!(
            describe(&Action::Record(ops[..1].to_vec())),
            "recording what Sveltos redeploys for ClusterProfile p-a"
        );
    }

    #[test]
    fn answers_are_judged_as_act_always_has() {
        let world = World::new(Default::default(), Default::default(), Default::default());
        let plan = plan(&decision(), &world);
        let text = |v: Verdict| match v {
            Verdict::Conflict(t) => format!("conflict: {t}"),
            Verdict::Error(t) => format!("error: {t}"),
            Verdict::Skipped => "skipped".into(),
            Verdict::Done(line, _) => format!("done: {line}"),
            Verdict::NotStored(line) => format!("not stored: {line}"),
        };
        assert_eq!(
            text(plan[1].judge("p", refused(422, true))),
            "conflict: ClusterPromotion p: dropping the revoked approval record of stage s: another writer was first"
        );
        assert_eq!(
            text(plan[1].judge("p", refused(422, false))),
            "error: ClusterPromotion p: dropping the revoked approval record of stage s: status 422"
        );
        assert_eq!(
            text(plan[0].judge("p", refused(404, false))),
            "conflict: ClusterPromotion p: adding the finalizer: the promotion is gone (deleted by another pass or a user)"
        );
        assert_eq!(
            text(plan[2].judge("p", refused(409, false))),
            "conflict: ClusterPromotion p changed during the pass; status not written"
        );
        assert_eq!(
            text(plan[2].judge("p", Answer::Unknown("reset".into()))),
            "conflict: ClusterPromotion p: writing status: the answer was lost (reset); not sent again, the next pass reads what happened"
        );
        assert_eq!(text(plan[3].judge("p", refused(404, false))), "skipped");
        assert_eq!(
            text(plan[3].judge("p", refused(500, false))),
            "error: ClusterPromotion p: deleting ClusterProfile gone (after recording the status; the next pass retries): status 500"
        );
        assert_eq!(
            text(plan[2].judge("p", Answer::Written(None))),
            "done: wrote status"
        );
        // A revision: present or a 409 is the same revision stored; a 404 on the create is a
        // cluster that does not serve PromotionRevisions (the rest goes on); else an error.
        let revision = PromotionRevision::of(
            &promotion("7"),
            "h",
            "s",
            None,
            crate::api::Timestamp::parse("2026-01-01T00:00:00Z").unwrap(),
        );
        let name = revision.metadata.name.clone().unwrap();
        let mut d = Decision::new("p");
        d.actions = vec![Action::StoreRevision(Box::new(revision))];
        let store = &super::plan(&d, &world)[0];
        assert_eq!(text(store.judge("p", Answer::Present)), "skipped");
        assert_eq!(text(store.judge("p", refused(409, false))), "skipped");
        assert_eq!(
            text(store.judge("p", refused(404, false))),
            format!(
                "not stored: PromotionRevision {name} not stored: PromotionRevisions are not served \
                 (their CRD is not installed), so a rollback to this revision cannot restore it; \
                 install it with `promoter crd --own | kubectl apply -f -`"
            )
        );
        assert_eq!(
            text(store.judge("p", refused(500, false))),
            format!("error: ClusterPromotion p: storing PromotionRevision {name}: status 500")
        );
    }
}
