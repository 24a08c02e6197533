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
    BUDGETED, COMPLETED, DEADLINE_CLOCK, FAILED, HISTORY, REDEPLOY, REVISION_SWEEP, ROLLBACK,
    approval_key, grant_key,
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

    /// Whether a lost answer to this write is followed by reading the promotion back
    /// ([`Self::after_lost_answer`]): the status write's, whose Events and what the status decided
    /// would otherwise be lost with it when the server applied it.
    pub fn reads_back_after_a_lost_answer(&self) -> bool {
        matches!(self.kind, WriteKind::Status(_))
    }

    /// After a lost answer (`lost`, its verdict), what the promotion read back shows of this
    /// write (`read`; None: it could not be read). The status write landed when the stored status
    /// is the one it carried and the resourceVersion moved on from the one it was sent with: it
    /// is done, and the rest of the pass goes on from the promotion as read (what the status
    /// decided, its Events). Judged by content, not by who wrote it: a concurrent pass that wrote
    /// the same status decided the same transition, whose Events are then named alike
    /// (`events::transition_event_name`) and stored once. Anything else stays a lost answer: the
    /// next pass reads what happened.
    pub fn after_lost_answer(
        &self,
        sent_on: &ClusterPromotion,
        read: Option<ClusterPromotion>,
        lost: Verdict,
    ) -> Verdict {
        let WriteKind::Status(status) = &self.kind else {
            return lost;
        };
        match read {
            Some(read)
                if read.metadata.resource_version != sent_on.metadata.resource_version
                    && read.status.as_ref() == Some(&**status) =>
            {
                Verdict::Done(self.what.clone(), Some(Box::new(read)))
            }
            _ => lost,
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
                RecordOp::Budgeted(b) if b.is_empty() => {
                    "dropping the clusters counted against the failure budgets".into()
                }
                RecordOp::Budgeted(_) => {
                    "recording the clusters counted against the failure budgets".into()
                }
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
            RecordOp::Budgeted(b) if b.is_empty() => remove(&mut out, BUDGETED),
            RecordOp::Budgeted(b) => out.push(set(BUDGETED, to_json(b))),
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

    fn run() -> crate::annotations::Run {
        crate::annotations::Run {
            revision: "h1".into(),
            stages: "s1".into(),
            since: "2026-02-16T06:00:00Z".into(),
        }
    }

    fn approval_record() -> crate::annotations::Record {
        crate::annotations::Record {
            by: "ann".into(),
            at: "2026-02-16T05:00:00Z".into(),
            revision: Some("h1".into()),
            reason: None,
        }
    }

    fn at(text: &str) -> crate::api::Timestamp {
        crate::api::Timestamp::parse(text).unwrap()
    }

    fn rollback_record(completed: bool) -> crate::annotations::Rollback {
        let mut r: crate::annotations::Rollback = serde_json::from_value(json!({
            "from": run(), "to": "h0", "order": "reverse", "cause": "ProgressDeadline",
            "by": "promoter", "at": "2026-02-16T08:00:00Z"}))
        .unwrap();
        if completed {
            r.completed_at = Some(at("2026-02-16T08:30:00Z"));
        }
        r
    }

    fn every_record_op() -> Vec<RecordOp> {
        use crate::annotations::{DeadlineClock, Failed, Grant, History, HistoryEntry, Subject};
        use crate::pass::decision::Hold;
        let entry = |confirmed: bool| -> outbox::Entry {
            let mut e: outbox::Entry = serde_json::from_value(json!({
                "key": "k", "transition": "StageStarted", "reason": "StageProvisioning",
                "message": "m", "at": "2026-02-16T06:00:00Z", "status": "s"}))
            .unwrap();
            e.confirmed = confirmed;
            e
        };
        vec![
            RecordOp::ConsumeApproval {
                index: 1,
                stage: "dev".into(),
                grant: Grant {
                    run: run(),
                    approval: Some(approval_record()),
                },
            },
            RecordOp::RestoreApproval {
                index: 0,
                stage: "prod".into(),
                approval: Some(approval_record()),
            },
            RecordOp::ForgetApprovalRecord { stage: "qa".into() },
            RecordOp::Complete(run()),
            RecordOp::ReviseApprovalRecord {
                stage: "eu".into(),
                record: approval_record(),
            },
            RecordOp::WithdrawApproval {
                index: 2,
                stage: "us".into(),
            },
            RecordOp::History(History(vec![HistoryEntry::new("h1", None)])),
            RecordOp::SweepDue("tok".into()),
            RecordOp::Failed(Failed {
                run: run(),
                stage: "dev".into(),
                at: at("2026-02-16T07:00:00Z"),
                why: "w".into(),
                deadline: "2h".into(),
                resumed: None,
                due: None,
            }),
            RecordOp::Rollback(rollback_record(false)),
            RecordOp::Rollback(rollback_record(true)),
            RecordOp::Clock(DeadlineClock::new(&run(), &Subject::Stage("dev".into()))),
            RecordOp::Clock(DeadlineClock::new(&run(), &Subject::Rollback("h0".into()))),
            RecordOp::Drop(Hold::Retry),
            RecordOp::Outbox(vec![entry(true)]),
            RecordOp::Outbox(vec![entry(false), entry(false), entry(true)]),
        ]
    }

    /// Every record goes to its own annotation as the record's JSON; a `remove` only of an
    /// annotation the promotion carries (a JSON patch removing a missing path is refused whole).
    #[test]
    fn every_record_is_written_to_its_annotation_and_removed_only_when_there() {
        let ops = every_record_op();
        // The record an op carries, as JSON text (serialized here, not by `to_json`).
        let text = |op: &RecordOp| -> String {
            match op {
                RecordOp::ConsumeApproval { grant, .. } => serde_json::to_string(grant),
                RecordOp::History(h) => Ok(h.to_annotation()),
                RecordOp::Failed(f) => serde_json::to_string(f),
                RecordOp::Rollback(r) => serde_json::to_string(r),
                RecordOp::Clock(c) => serde_json::to_string(c),
                RecordOp::Outbox(entries) => Ok(outbox::encode(entries)),
                other => panic!("no record: {other:?}"),
            }
            .unwrap()
        };
        let record_text = serde_json::to_string(&approval_record()).unwrap();
        let run_text = serde_json::to_string(&run()).unwrap();
        let add = |path: &str, value: String| json!({"op": "add", "path": path, "value": value});
        let remove = |path: &str| json!({"op": "remove", "path": path});
        let test = |path: &str, value: Value| json!({"op": "test", "path": path, "value": value});
        let written = |carried: bool| {
            let mut out = vec![test("/metadata/resourceVersion", json!("7"))];
            out.extend([
                test("/spec/stages/1/name", json!("dev")),
                test("/spec/stages/1/trigger/manual/approved", json!(true)),
                remove("/spec/stages/1/trigger/manual/approved"),
            ]);
            if carried {
                out.push(remove("/metadata/annotations/promoter.dev~1approval.dev"));
            }
            out.extend([
                add(
                    "/metadata/annotations/promoter.dev~1grant.dev",
                    text(&ops[0]),
                ),
                test("/spec/stages/0/name", json!("prod")),
                json!({"op": "add", "path": "/spec/stages/0/trigger/manual/approved", "value": true}),
                add(
                    "/metadata/annotations/promoter.dev~1approval.prod",
                    record_text.clone(),
                ),
            ]);
            if carried {
                out.push(remove("/metadata/annotations/promoter.dev~1grant.prod"));
                out.push(remove("/metadata/annotations/promoter.dev~1approval.qa"));
            }
            out.extend([
                add(
                    "/metadata/annotations/promoter.dev~1completed",
                    run_text.clone(),
                ),
                add(
                    "/metadata/annotations/promoter.dev~1approval.eu",
                    record_text.clone(),
                ),
                test("/spec/stages/2/name", json!("us")),
                test("/spec/stages/2/trigger/manual/approved", json!(true)),
                remove("/spec/stages/2/trigger/manual/approved"),
            ]);
            if carried {
                out.push(remove("/metadata/annotations/promoter.dev~1approval.us"));
            }
            out.extend([
                add("/metadata/annotations/promoter.dev~1history", text(&ops[6])),
                add(
                    "/metadata/annotations/promoter.dev~1revision-sweep",
                    "tok".into(),
                ),
                add("/metadata/annotations/promoter.dev~1failed", text(&ops[8])),
                add(
                    "/metadata/annotations/promoter.dev~1rollback",
                    text(&ops[9]),
                ),
                add(
                    "/metadata/annotations/promoter.dev~1rollback",
                    text(&ops[10]),
                ),
                add(
                    "/metadata/annotations/promoter.dev~1deadline-clock",
                    text(&ops[11]),
                ),
                add(
                    "/metadata/annotations/promoter.dev~1deadline-clock",
                    text(&ops[12]),
                ),
            ]);
            if carried {
                out.push(remove("/metadata/annotations/promoter.dev~1retry"));
            }
            out.extend([
                add("/metadata/annotations/promoter.dev~1outbox", text(&ops[14])),
                add("/metadata/annotations/promoter.dev~1outbox", text(&ops[15])),
            ]);
            out
        };
        let mut carrying = promotion("7");
        carrying.metadata.annotations = Some(
            [
                "promoter.dev/approval.dev",
                "promoter.dev/grant.prod",
                "promoter.dev/approval.qa",
                "promoter.dev/approval.us",
                "promoter.dev/retry",
                "promoter.dev/unrelated",
            ]
            .into_iter()
            .map(|k| (k.to_string(), "x".to_string()))
            .collect(),
        );
        assert_eq!(record_patch(&carrying, &ops), written(true));
        let mut bare = written(false);
        bare.insert(
            1,
            json!({"op": "add", "path": "/metadata/annotations", "value": {}}),
        );
        assert_eq!(record_patch(&promotion("7"), &ops), bare);
        // A restored approval without a `promoter approve` record: `approved` only.
        let restore = RecordOp::RestoreApproval {
            index: 0,
            stage: "prod".into(),
            approval: None,
        };
        assert_eq!(
            record_patch(&carrying, &[restore])[1..],
            [
                test("/spec/stages/0/name", json!("prod")),
                json!({"op": "add", "path": "/spec/stages/0/trigger/manual/approved", "value": true}),
                remove("/metadata/annotations/promoter.dev~1grant.prod"),
            ]
        );
    }

    /// What each write says it does (`act`'s report, `promoter plan`, the conflict messages).
    #[test]
    fn every_write_says_what_it_does() {
        let lines: Vec<String> = every_record_op()
            .into_iter()
            .map(|op| describe(&Action::Record(vec![op])))
            .collect();
        assert_eq!(
            lines,
            [
                "consuming the approval of stage dev",
                "giving back the unused approval of stage prod",
                "dropping the revoked approval record of stage qa",
                "recording completion",
                "carrying the approval of stage eu over to the taken-over run",
                "withdrawing the approval of stage us given to an earlier revision",
                "recording the revision history",
                "recording that revisions the history forgot are to be deleted",
                "recording that stage dev missed its progress deadline",
                &format!(
                    "recording a rollback to revision {}",
                    crate::api::revision_id("h0")
                ),
                "recording the rollback's completion",
                "recording the deadline clock of stage dev",
                "recording the deadline clock of the rollback",
                "dropping promoter.dev/retry",
                "updating the notification outbox",
                "recording 2 transitions to notify",
            ]
        );
        assert_eq!(
            describe(&Action::Record(every_record_op()[..2].to_vec())),
            "consuming the approval of stage dev, giving back the unused approval of stage prod"
        );
        let staged: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "uid": "u-p"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}
        }))
        .unwrap();
        let p = super::super::profiles::main_profile(&staged, &staged.spec.stages[0]);
        let revision =
            PromotionRevision::of(&promotion("7"), "h", "s", None, at("2026-01-01T00:00:00Z"));
        let name = revision.metadata.name.clone().unwrap();
        assert_eq!(
            [
                Action::AddFinalizer,
                Action::RemoveFinalizer,
                Action::Apply(Box::new(p)),
                Action::Delete { name: "p-x".into() },
                Action::Disown { name: "p-y".into() },
                Action::StoreRevision(Box::new(revision)),
            ]
            .iter()
            .map(describe)
            .collect::<Vec<_>>(),
            [
                "adding the finalizer".to_string(),
                "removing the finalizer".into(),
                "applying ClusterProfile p-dev".into(),
                "deleting ClusterProfile p-x".into(),
                "removing the owner reference of ClusterProfile p-y".into(),
                format!("storing PromotionRevision {name}"),
            ]
        );
    }

    /// The finalizer patch replaces the list, so it keeps every other finalizer, adds promoter's
    /// once, and carries the resourceVersion of the promotion as last returned.
    #[test]
    fn the_finalizer_patch_keeps_other_finalizers() {
        let mut current = promotion("5");
        current.metadata.finalizers = Some(vec![
            "other.example/keep".into(),
            FINALIZER.into(),
            "z.example/keep".into(),
        ]);
        let patch = |add: bool, current: &ClusterPromotion| {
            let write = PlannedWrite {
                when: When::BeforeStatus,
                what: "w".into(),
                kind: WriteKind::Finalizer { add },
            };
            match write.request(current) {
                Some(Request::MergePatchPromotion { name, patch }) => {
                    assert_eq!(name, "p");
                    patch
                }
                other => panic!("a merge patch of the promotion: {other:?}"),
            }
        };
        assert_eq!(
            patch(true, &current),
            json!({"metadata": {"finalizers": ["other.example/keep", "z.example/keep", FINALIZER], "resourceVersion": "5"}})
        );
        assert_eq!(
            patch(false, &current),
            json!({"metadata": {"finalizers": ["other.example/keep", "z.example/keep"], "resourceVersion": "5"}})
        );
        current.metadata.finalizers = None;
        assert_eq!(
            patch(true, &current),
            json!({"metadata": {"finalizers": [FINALIZER], "resourceVersion": "5"}})
        );
    }

    /// A profile write is made from what the pass observed: an observed profile is replaced
    /// (with its resourceVersion), deleted by its UID, disowned of this promotion's owner
    /// reference only; one not observed is created, deleted unconditionally, or not disowned.
    #[test]
    fn profile_writes_are_made_from_the_observed_profiles() {
        let staged: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "uid": "u-p"},
            "spec": {"profileSpec": {"tier": 5}, "stages": [
                {"name": "dev", "clusterSelector": {}}, {"name": "prod", "clusterSelector": {}}]}
        }))
        .unwrap();
        let observed: ClusterProfile = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": "p-dev", "uid": "u-dev", "resourceVersion": "3",
                "ownerReferences": [
                    {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "p", "uid": "u-p"},
                    {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "q", "uid": "u-q"},
                    {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "name": "p", "uid": "u-a"}]},
            "spec": {"tier": 1}
        }))
        .unwrap();
        let world = World::new(
            [("p-dev".to_string(), observed)].into(),
            Default::default(),
            Default::default(),
        );
        let desired = |i: usize| {
            Box::new(super::super::profiles::main_profile(
                &staged,
                &staged.spec.stages[i],
            ))
        };
        let mut d = Decision::new("p");
        d.actions = vec![
            Action::Apply(desired(0)),
            Action::Apply(desired(1)),
            Action::Delete {
                name: "p-dev".into(),
            },
            Action::Disown {
                name: "p-dev".into(),
            },
            Action::Disown {
                name: "p-prod".into(),
            },
        ];
        let writes = plan(&d, &world);
        let requests: Vec<Option<Request>> =
            writes.iter().map(|w| w.request(&promotion("9"))).collect();
        let Some(Request::ReplaceProfile { name, body }) = &requests[0] else {
            panic!("a replace: {:?}", requests[0])
        };
        assert_eq!(name, "p-dev");
        assert_eq!(body.metadata.resource_version.as_deref(), Some("3"));
        assert_eq!(body.spec.fields["tier"], json!(5));
        let Some(Request::CreateProfile { body }) = &requests[1] else {
            panic!("a create: {:?}", requests[1])
        };
        assert_eq!(body.metadata.name.as_deref(), Some("p-prod"));
        assert_eq!(body.metadata.resource_version, None);
        assert!(matches!(
            &requests[2],
            Some(Request::DeleteProfile { name, uid: Some(uid) }) if name == "p-dev" && uid == "u-dev"
        ));
        let Some(Request::MergePatchProfile { name, patch }) = &requests[3] else {
            panic!("a merge patch: {:?}", requests[3])
        };
        assert_eq!(name, "p-dev");
        assert_eq!(
            patch,
            &json!({"metadata": {"resourceVersion": "3", "ownerReferences": [
                {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "q", "uid": "u-q"},
                {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "name": "p", "uid": "u-a"}]}})
        );
        assert!(matches!(writes[4].kind, WriteKind::Nothing));
        assert!(requests[4].is_none());
    }

    /// After a lost answer, only the status write is read back, and it is done only when the
    /// promotion read back carries its status under a newer resourceVersion.
    #[test]
    fn a_lost_status_write_is_done_only_when_the_promotion_read_back_carries_it() {
        let status = ClusterPromotionStatus {
            current_stage_name: Some("dev".into()),
            ..Default::default()
        };
        let write = PlannedWrite {
            when: When::Status,
            what: "wrote status".into(),
            kind: WriteKind::Status(Box::new(status.clone())),
        };
        assert!(write.reads_back_after_a_lost_answer());
        let sent_on = promotion("7");
        let lost = || write.judge("p", Answer::Unknown("reset".into()));
        let read = |rv: &str, status: Option<&ClusterPromotionStatus>| {
            let mut p = promotion(rv);
            p.status = status.cloned();
            Some(p)
        };
        let done = |v: Verdict| matches!(v, Verdict::Done(line, Some(p)) if line == "wrote status" && p.metadata.resource_version.as_deref() == Some("8"));
        assert!(done(write.after_lost_answer(
            &sent_on,
            read("8", Some(&status)),
            lost()
        )));
        let other = ClusterPromotionStatus::default();
        for (read, why) in [
            (read("8", Some(&other)), "another status"),
            (read("8", None), "no status"),
            (
                read("7", Some(&status)),
                "the resourceVersion it was sent with",
            ),
            (None, "not read"),
        ] {
            assert!(
                matches!(write.after_lost_answer(&sent_on, read, lost()), Verdict::Conflict(t) if t.contains("the answer was lost")),
                "{why}"
            );
        }
        let records = PlannedWrite {
            when: When::BeforeStatus,
            what: "w".into(),
            kind: WriteKind::Records(vec![]),
        };
        assert!(!records.reads_back_after_a_lost_answer());
        let lost = records.judge("p", Answer::Unknown("reset".into()));
        assert!(matches!(
            records.after_lost_answer(&sent_on, read("8", Some(&status)), lost),
            Verdict::Conflict(_)
        ));
    }

    /// How each kind of write takes each answer: what a 404 and a 409 mean depends on what was
    /// written; a 422 is a lost race only for the guarded record patch.
    #[test]
    fn every_kind_of_write_judges_every_answer() {
        let revision =
            PromotionRevision::of(&promotion("7"), "h", "s", None, at("2026-01-01T00:00:00Z"));
        let profile = || Box::new(ClusterProfile::new("x", Default::default()));
        let kinds: [(&str, When, WriteKind); 9] = [
            (
                "add",
                When::BeforeStatus,
                WriteKind::Finalizer { add: true },
            ),
            (
                "remove",
                When::AfterStatus,
                WriteKind::Finalizer { add: false },
            ),
            ("records", When::BeforeStatus, WriteKind::Records(vec![])),
            ("status", When::Status, WriteKind::Status(Box::default())),
            (
                "create",
                When::BeforeStatus,
                WriteKind::CreateProfile(profile()),
            ),
            (
                "replace",
                When::BeforeStatus,
                WriteKind::ReplaceProfile(profile()),
            ),
            (
                "delete",
                When::AfterStatus,
                WriteKind::DeleteProfile {
                    name: "x".into(),
                    uid: None,
                },
            ),
            (
                "disown",
                When::BeforeStatus,
                WriteKind::DisownProfile {
                    name: "x".into(),
                    patch: json!({}),
                },
            ),
            (
                "revision",
                When::BeforeStatus,
                WriteKind::StoreRevision(Box::new(revision)),
            ),
        ];
        // The kind of verdict, and for a conflict which one.
        let verdict = |v: Verdict| -> &'static str {
            match v {
                Verdict::Done(line, _) if line == "w" => "done",
                Verdict::Skipped => "skipped",
                Verdict::NotStored(_) => "not stored",
                Verdict::Conflict(t) if t.ends_with("status not written") => "changed",
                Verdict::Conflict(t) if t.ends_with("another writer was first") => "first",
                Verdict::Conflict(t) if t.contains("the promotion is gone") => "gone",
                Verdict::Conflict(t) if t.contains("the answer was lost (e)") => "lost",
                Verdict::Error(t) if t.ends_with(": e") => "error",
                other => panic!("unexpected {other:?}"),
            }
        };
        let answers = || {
            [
                Answer::Written(None),
                Answer::Present,
                refused(404, false),
                refused(409, false),
                refused(422, true),
                refused(422, false),
                refused(500, false),
                Answer::Unknown("e".into()),
                Answer::Failed("e".into()),
            ]
        };
        let table: Vec<(&str, Vec<&str>)> = kinds
            .into_iter()
            .map(|(label, when, kind)| {
                let write = PlannedWrite {
                    when,
                    what: "w".into(),
                    kind,
                };
                let verdicts = answers()
                    .into_iter()
                    .map(|a| {
                        let a = match a {
                            Answer::Refused {
                                code, not_applied, ..
                            } => Answer::Refused {
                                code,
                                not_applied,
                                text: "e".into(),
                            },
                            a => a,
                        };
                        verdict(write.judge("p", a))
                    })
                    .collect();
                (label, verdicts)
            })
            .collect();
        //          written  present    404           409        422 test  422      500      lost    failed
        let expected: [(&str, [&str; 9]); 9] = [
            (
                "add",
                [
                    "done", "skipped", "gone", "first", "error", "error", "error", "lost", "error",
                ],
            ),
            (
                "remove",
                [
                    "done", "skipped", "skipped", "first", "error", "error", "error", "lost",
                    "error",
                ],
            ),
            (
                "records",
                [
                    "done", "skipped", "gone", "first", "first", "error", "error", "lost", "error",
                ],
            ),
            (
                "status",
                [
                    "done", "skipped", "gone", "changed", "error", "error", "error", "lost",
                    "error",
                ],
            ),
            (
                "create",
                [
                    "done", "skipped", "error", "first", "error", "error", "error", "lost", "error",
                ],
            ),
            (
                "replace",
                [
                    "done", "skipped", "first", "first", "error", "error", "error", "lost", "error",
                ],
            ),
            (
                "delete",
                [
                    "done", "skipped", "skipped", "first", "error", "error", "error", "lost",
                    "error",
                ],
            ),
            (
                "disown",
                [
                    "done", "skipped", "skipped", "first", "error", "error", "error", "lost",
                    "error",
                ],
            ),
            (
                "revision",
                [
                    "done",
                    "skipped",
                    "not stored",
                    "skipped",
                    "error",
                    "error",
                    "error",
                    "lost",
                    "error",
                ],
            ),
        ];
        assert_eq!(
            table,
            expected
                .iter()
                .map(|(l, v)| (*l, v.to_vec()))
                .collect::<Vec<_>>()
        );
        // The error of the status write names it, whatever the write's line.
        let status = PlannedWrite {
            when: When::Status,
            what: "w".into(),
            kind: WriteKind::Status(Box::default()),
        };
        assert!(matches!(
            status.judge("p", refused(500, false)),
            Verdict::Error(t) if t == "ClusterPromotion p: writing status: status 500"
        ));
    }
}
