//! `promoter rollback`: records a rollback of the current run to a completed revision, for the
//! next pass to carry out stage by stage (`promoter.dev/rollback`, with the run's history entry
//! marked rolled back in the same guarded patch, so the revision is never promoted again without
//! a person).

use super::control::{Actor, Changed, guarded_patch, retrying, set_annotations};
use crate::annotations::{
    Cause, History, HistoryEntry, ROLLBACK, Rollback, RolledBack, Run, encode, rollback,
};
use crate::api::{ClusterPromotion, PromotionRevision, Timestamp, revision_name};
use crate::pass::decision::Reason;
use crate::pass::events;
use crate::settings::{RollbackOrder, Settings};
use chrono::{DateTime, Utc};
use kube::api::Api;

/// What `promoter rollback` was asked for.
#[derive(Clone, Debug, Default)]
pub struct RollbackRequest {
    /// `--to-revision`: an ID (`1a2b3c4d5e`), a revision hash or a PromotionRevision's name
    /// (`<promotion>-r1a2b3c4d5e`); default: the last known good.
    pub to_revision: Option<String>,
    /// `--order`; default: the promotion's `promoter.dev/rollback-order`.
    pub order: Option<RollbackOrder>,
}

enum Outcome {
    /// A rollback of this run to this revision is already recorded.
    Recorded(Rollback),
    Written(Box<ClusterPromotion>, Rollback, String),
    /// The recorded rollback's order changed (from the order before).
    Reordered(Box<ClusterPromotion>, Rollback, RollbackOrder),
}

/// Records a rollback of `name`'s current run; an Event `RollbackRequested`. Refuses when nothing
/// has started or when there is no completed revision to roll back to; one to the same revision
/// is already done (not an error), another one redirects it; `--order all-at-once` speeds a
/// reverse one up (see [`targets`]).
pub async fn request_rollback(
    client: &kube::Client,
    name: &str,
    request: &RollbackRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    let outcome = retrying(name, "recording the rollback", || {
        once(&api, &revisions, name, request, actor, now)
    })
    .await?;
    Ok(match outcome {
        Outcome::Recorded(r) => format!(
            "{name} is already rolling back to revision {} (requested by {} at {}); nothing to do",
            crate::api::revision_id(&r.to),
            r.by,
            r.at
        ),
        Outcome::Written(updated, r, from_id) => {
            let to = crate::api::revision_id(&r.to);
            let note = actor.note(format!(
                "Rollback of revision {from_id} to revision {to} ({}) requested by {}",
                r.order.as_str(),
                actor.by
            ));
            events::emit_action(client, &updated, Reason::RollbackRequested, note, now).await;
            format!(
                "requested the rollback of {name} from revision {from_id} to revision {to} ({}): the next pass starts it",
                r.order.as_str()
            )
        }
        Outcome::Reordered(updated, r, was) => {
            let to = crate::api::revision_id(&r.to);
            let note = actor.note(format!(
                "Rollback to revision {to} changed from {} to {} by {}",
                was.as_str(),
                r.order.as_str(),
                actor.by
            ));
            events::emit_action(client, &updated, Reason::RollbackRequested, note, now).await;
            format!(
                "changed the order of {name}'s rollback to revision {to} from {} to {}: the next pass restores every remaining stage at once",
                was.as_str(),
                r.order.as_str()
            )
        }
    })
}

/// What `promoter rollback` would write: the promotion as read, the record and its guarded patch.
#[derive(Clone, Debug)]
pub struct RollbackPlan {
    pub promotion: ClusterPromotion,
    pub record: Rollback,
    /// The id of the run's revision, rolled back.
    pub from_id: String,
    pub to: HistoryEntry,
    pub ops: Vec<serde_json::Value>,
}

/// A rollback to write, the one already recorded, or its new order.
#[derive(Clone, Debug)]
pub enum Planned {
    Recorded(Box<Rollback>),
    Write(Box<RollbackPlan>),
    Reorder(Box<ReorderPlan>),
}

/// What `promoter rollback --order` writes while a rollback of the run is recorded: the record
/// with its new order (nothing else: who asked first and when, and the history, stay).
#[derive(Clone, Debug)]
pub struct ReorderPlan {
    pub promotion: ClusterPromotion,
    pub record: Rollback,
    /// The order recorded before.
    pub was: RollbackOrder,
    pub ops: Vec<serde_json::Value>,
}

/// Reads `name` and says what a rollback would write, writing nothing (the dashboard's
/// confirmation; `promoter rollback` writes what this says).
pub async fn plan(
    client: &kube::Client,
    name: &str,
    request: &RollbackRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Planned> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let revisions: Api<PromotionRevision> = Api::all(client.clone());
    planned(&api, &revisions, name, request, actor, now).await
}

async fn planned(
    api: &Api<ClusterPromotion>,
    revisions: &Api<PromotionRevision>,
    name: &str,
    request: &RollbackRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Planned> {
    let p = api.get(name).await?;
    let candidates = match targets(&p, request).map_err(|e| anyhow::anyhow!(e))? {
        Targets::Recorded(existing) => return Ok(Planned::Recorded(existing)),
        Targets::Reorder { record, was } => {
            let ops = set_annotations(&p, &[(ROLLBACK, encode(&*record))]);
            return Ok(Planned::Reorder(Box::new(ReorderPlan {
                promotion: p,
                record: *record,
                was,
                ops,
            })));
        }
        Targets::Candidates(c) => c,
    };
    let mut target = None;
    for entry in &candidates {
        if stored(revisions, name, entry).await? {
            target = Some(entry);
            break;
        }
    }
    let target = match (target, &request.to_revision) {
        (Some(t), _) => t.clone(),
        (None, Some(_)) => {
            let entry = &candidates[0];
            anyhow::bail!(
                "cannot roll back to revision {}: PromotionRevision {} is gone",
                entry.id,
                revision_name(name, &entry.revision)
            );
        }
        (None, None) => anyhow::bail!("{name} has no completed revision to roll back to"),
    };
    let (record, ops) = rollback_ops(&p, &target, request, actor, now)
        .ok_or_else(|| anyhow::anyhow!("{name} has not started; there is nothing to roll back"))?;
    let from_id = crate::api::revision_id(&record.from.revision);
    Ok(Planned::Write(Box::new(RollbackPlan {
        promotion: p,
        record,
        from_id,
        to: target,
        ops,
    })))
}

async fn once(
    api: &Api<ClusterPromotion>,
    revisions: &Api<PromotionRevision>,
    name: &str,
    request: &RollbackRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<Result<Outcome, Changed>> {
    let plan = match planned(api, revisions, name, request, actor, now).await? {
        Planned::Recorded(r) => return Ok(Ok(Outcome::Recorded(*r))),
        Planned::Reorder(plan) => {
            let ReorderPlan {
                promotion,
                record,
                was,
                ops,
            } = *plan;
            return Ok(guarded_patch(api, &promotion, ops)
                .await?
                .map(|updated| Outcome::Reordered(Box::new(updated), record, was)));
        }
        Planned::Write(plan) => plan,
    };
    let RollbackPlan {
        promotion,
        record,
        from_id,
        ops,
        ..
    } = *plan;
    Ok(guarded_patch(api, &promotion, ops)
        .await?
        .map(|updated| Outcome::Written(Box::new(updated), record, from_id)))
}

/// What `promoter rollback` may roll `p` (as read) back to.
#[derive(Clone, Debug)]
pub enum Targets {
    /// A rollback of the current run to the revision asked for is recorded already.
    Recorded(Box<Rollback>),
    /// It is, in reverse order, and `--order all-at-once` asks to speed it up: the record with
    /// its new order (`was`: the order before).
    Reorder {
        record: Box<Rollback>,
        was: RollbackOrder,
    },
    /// The revisions to roll back to, best first, of which the first whose PromotionRevision is
    /// stored is the target (`--to-revision`: exactly the one named, which must be stored).
    Candidates(Vec<HistoryEntry>),
}

/// The revisions `promoter rollback` may roll `p` back to (pure; which of them are stored is the
/// caller's read). Refuses when nothing has started, when the revision named is unknown, current
/// or never completed, and when there is no completed revision at all.
pub fn targets(p: &ClusterPromotion, request: &RollbackRequest) -> Result<Targets, String> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let Some(run) = p.status.as_ref().and_then(Run::of) else {
        return Err(format!(
            "{name} has not started; there is nothing to roll back"
        ));
    };
    let history = History::of(p);
    if let Some(existing) = rollback(p).filter(|r| r.from == run) {
        let same = match &request.to_revision {
            None => true,
            Some(wanted) => history
                .find(name, wanted)
                .is_some_and(|e| e.revision == existing.to),
        };
        if same {
            return match request.order {
                Some(order) if order != existing.order => reorder(name, existing, order),
                _ => Ok(Targets::Recorded(Box::new(existing))),
            };
        }
        // Another revision named: the rollback is redirected (its stored revision may be gone,
        // and the status tells the user to do this). The record is replaced in one guarded
        // patch, so a pass applies either the old target or the new one, never a mix.
    }
    if let Some(wanted) = &request.to_revision {
        let Some(entry) = history.find(name, wanted) else {
            let ids = history.0.iter().map(|e| e.id.as_str());
            return Err(format!(
                "{name} has no revision {wanted:?} in its history; {} (an ID, its hash or its \
                 PromotionRevision's name is accepted){}",
                history.known_ids(&run.revision),
                crate::suggest::did_you_mean(wanted, ids)
            ));
        };
        if entry.revision == run.revision {
            return Err(format!(
                "revision {} is the current one of {name}; name an earlier one",
                entry.id
            ));
        }
        if entry.completed_at.is_none() {
            return Err(format!(
                "revision {} of {name} never completed its rollout; only a completed revision can be rolled back to",
                entry.id
            ));
        }
        return Ok(Targets::Candidates(vec![entry.clone()]));
    }
    let candidates: Vec<HistoryEntry> = history.candidates(&run.revision).cloned().collect();
    if candidates.is_empty() {
        return Err(format!("{name} has no completed revision to roll back to"));
    }
    Ok(Targets::Candidates(candidates))
}

/// `--order` naming another order than the rollback of the run recorded. A reverse rollback under
/// way may go all at once: every stage still goes to the same known-good revision, only sooner
/// (an operator at 3 a.m. wants exactly that, and the redirect path already takes `--order`).
/// The other way round is refused: all-at-once has written (or will on the next pass) every
/// stage's profile, and a reverse order cannot take that back; nor does a finished rollback have
/// an order left to change. The record keeps who asked first and when (its deadline's start).
fn reorder(name: &str, existing: Rollback, order: RollbackOrder) -> Result<Targets, String> {
    let to = crate::api::revision_id(&existing.to);
    if let Some(done) = existing.completed_at {
        return Err(format!(
            "{name} rolled back to revision {to} {} (completed at {done}); --order {} changes nothing now",
            existing.order.as_str(),
            order.as_str()
        ));
    }
    if existing.order == RollbackOrder::AllAtOnce {
        return Err(format!(
            "{name} is already rolling back to revision {to} {} (requested by {} at {}): every stage's profile is being restored at once, so it cannot become {}; `{} abort {name}` holds it where it is",
            existing.order.as_str(),
            existing.by,
            existing.at,
            order.as_str(),
            crate::invocation::command()
        ));
    }
    let was = existing.order;
    Ok(Targets::Reorder {
        record: Box::new(Rollback { order, ..existing }),
        was,
    })
}

/// What `promoter rollback` writes to `p` as read to roll its current run back to `target` (pure;
/// [`guarded`](super::control::guarded) when sent): the rollback record and the run's history
/// entry marked rolled back. None when nothing has started.
pub fn rollback_ops(
    p: &ClusterPromotion,
    target: &HistoryEntry,
    request: &RollbackRequest,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Option<(Rollback, Vec<serde_json::Value>)> {
    let run = p.status.as_ref().and_then(Run::of)?;
    let mut history = History::of(p);
    let settings = Settings::of(p);
    let at = Timestamp::new(now);
    let record = Rollback {
        from: run.clone(),
        to: target.revision.clone(),
        order: request.order.unwrap_or(settings.rollback_order),
        cause: Cause::Manual,
        by: actor.by.clone(),
        at,
        reason: actor.reason.clone(),
        completed_at: None,
        kept: None,
        missed: None,
    };
    history.record_rollback(
        &run.revision,
        run.started_at(),
        RolledBack {
            at,
            cause: Cause::Manual,
            by: actor.by.clone(),
            to: target.id.clone(),
        },
        settings.revision_history_limit,
    );
    let ops = set_annotations(
        p,
        &[
            (ROLLBACK, encode(&record)),
            (crate::annotations::HISTORY, history.to_annotation()),
        ],
    );
    Some((record, ops))
}

/// Whether the revision's PromotionRevision object exists (and is this promotion's revision).
async fn stored(
    revisions: &Api<PromotionRevision>,
    name: &str,
    entry: &HistoryEntry,
) -> anyhow::Result<bool> {
    let object = revision_name(name, &entry.revision);
    let found = revisions.get_opt(&object).await.map_err(|e| {
        anyhow::Error::new(e).context(format!("reading PromotionRevision {object}"))
    })?;
    Ok(found.is_some_and(|r| r.spec.revision == entry.revision && r.spec.promotion == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(order: RollbackOrder, completed: bool) -> Rollback {
        let at = Timestamp::parse("2026-02-16T08:00:00Z").unwrap();
        Rollback {
            from: Run {
                revision: "bmV3".into(),
                stages: "c3RhZ2Vz".into(),
                since: "2026-02-16T07:00:00Z".into(),
            },
            to: "b2xk".into(),
            order,
            cause: Cause::Manual,
            by: "alice".into(),
            at,
            reason: None,
            completed_at: completed.then_some(at),
            kept: None,
            missed: None,
        }
    }

    /// Issue 31: `--order` while a rollback is recorded: reverse may go all at once (only that
    /// changes); all at once cannot go back to reverse, and a finished rollback has no order
    /// left to change (both refused, saying the rollback, its order and what to do).
    #[test]
    fn an_order_asked_for_a_recorded_rollback() {
        use RollbackOrder::{AllAtOnce, Reverse};
        match reorder("p", recorded(Reverse, false), AllAtOnce) {
            Ok(Targets::Reorder { record, was }) => {
                assert_eq!(was, Reverse);
                assert_eq!(*record, recorded(AllAtOnce, false));
            }
            other => panic!("{other:?}"),
        }
        let err = reorder("p", recorded(AllAtOnce, false), Reverse).unwrap_err();
        assert!(
            err.starts_with("p is already rolling back to revision ")
                && err.contains(" all-at-once (requested by alice at 2026-02-16T08:00:00Z)")
                && err.contains("cannot become reverse")
                && err.ends_with(" abort p` holds it where it is"),
            "{err}"
        );
        let err = reorder("p", recorded(Reverse, true), AllAtOnce).unwrap_err();
        assert!(
            err.contains("reverse (completed at 2026-02-16T08:00:00Z); --order all-at-once changes nothing now"),
            "{err}"
        );
    }
}
