//! Stored revisions (`PromotionRevision`): a pass reads only the one a rollback restores, when the
//! decision asks for it (`Decision::needs_revision`), never in a steady pass; and it sweeps those
//! the history forgot when a sweep is due (`promoter.dev/revision-sweep`, set by the record patch
//! whose history forgets them), so that a pass killed before deleting one never leaks it.
//!
//! The sweep lists the promotion's revisions by their `promoter.dev/promotion` label (one page),
//! deletes those that belong to this promotion and that nothing names (neither the history's kept
//! revisions, nor the current run's revision, nor a recorded rollback's target), at most
//! [`SWEEP_PER_PASS`] per pass, each only as the object listed (UID precondition), and then, once
//! nothing is left, removes the marker with a patch that tests its value. Revisions carry an owner
//! reference to their promotion, so the garbage collector takes whatever is left when it goes.

use super::decision::{Decision, RecordOp};
use super::world::World;
use crate::annotations::revision_sweep::{REVISION_SWEEP, forgets};
use crate::annotations::{History, Run, rollback, sweep_due};
use crate::api::promotion_revision::PROMOTION_LABEL;
use crate::api::{ClusterPromotion, PromotionRevision, Timestamp, revision_name};
use chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use std::collections::BTreeSet;

/// Revisions deleted by one pass's sweep of one promotion, at most.
pub const SWEEP_PER_PASS: usize = 20;
/// Revisions listed by one sweep (one page): more than a history keeps (50, the current run and a
/// rollback's target), so every full page has something to delete.
const SWEEP_PAGE: u32 = 100;

/// Reads the stored revision `name` into the world (`None` when it is absent, which the rollback
/// reports).
pub async fn fetch(client: &kube::Client, world: &mut World, name: &str) -> kube::Result<()> {
    let api: Api<PromotionRevision> = Api::all(client.clone());
    let got = api.get_opt(name).await?;
    world.revisions.insert(name.to_string(), got);
    Ok(())
}

/// Writes `history` in the decision's record patch and, when it forgets a revision the observed
/// history kept (and revisions are stored at all), marks a sweep due in the same patch.
pub fn record_history(
    p: &ClusterPromotion,
    world: &World,
    history: History,
    now: DateTime<Utc>,
    d: &mut Decision,
) {
    if !world.own_crds_missing && forgets(&History::of(p), &history) {
        d.record(RecordOp::SweepDue(Timestamp::new(now).to_string()));
    }
    d.record(RecordOp::History(history));
}

/// A restart supersedes the observed run. A pass that completed it stores its revision before
/// the record patch that names it in the history; when that patch was refused (a new spec came
/// first), the revision is stored and named by nothing. That can only be so when the observed run
/// is at its last stage and not recorded complete: then a sweep is marked due in the restart's
/// record patch (the sweep spares whatever the history still names).
pub fn superseded(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, d: &mut Decision) {
    let Some(status) = p.status.as_ref() else {
        return;
    };
    let at_last = p
        .spec
        .stages
        .last()
        .is_some_and(|s| status.current_stage_name.as_deref() == Some(s.name.as_str()));
    let recorded = Run::of(status).is_some_and(|run| {
        History::of(p)
            .entry(&run.revision)
            .is_some_and(|e| e.completed_at.is_some())
    });
    if at_last && !recorded && !world.own_crds_missing && sweep_due(p).is_none() {
        d.record(RecordOp::SweepDue(Timestamp::new(now).to_string()));
    }
}

/// What one sweep does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// The revisions to delete: name and UID (the object listed, nothing else).
    pub delete: Vec<(String, Option<String>)>,
    /// Nothing is left once these are deleted: the marker goes.
    pub done: bool,
}

/// The sweep of `p`'s revisions `listed` (one page of its label; `complete`: there was no more):
/// pure.
pub fn sweep(p: &ClusterPromotion, listed: &[PromotionRevision], complete: bool) -> Sweep {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let uid = p.metadata.uid.as_deref();
    let run = p.status.as_ref().and_then(Run::of);
    let history = History::of(p);
    let mut kept: BTreeSet<&str> = history.kept_revisions();
    kept.extend(run.as_ref().map(|r| r.revision.as_str()));
    let target = rollback(p).map(|r| r.to);
    kept.extend(target.as_deref());
    let kept_names: BTreeSet<String> = kept.iter().map(|r| revision_name(name, r)).collect();
    let ours = |r: &&PromotionRevision| {
        r.spec.promotion == name
            && r.metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.kind == "ClusterPromotion")
                .all(|o| Some(o.uid.as_str()) == uid)
    };
    let forgotten: Vec<(String, Option<String>)> = listed
        .iter()
        .filter(ours)
        .filter_map(|r| Some((r.metadata.name.clone()?, r.metadata.uid.clone())))
        .filter(|(n, _)| !kept_names.contains(n))
        .collect();
    Sweep {
        done: complete && forgotten.len() <= SWEEP_PER_PASS,
        delete: forgotten.into_iter().take(SWEEP_PER_PASS).collect(),
    }
}

/// Sweeps `p`'s stored revisions when a sweep is due (`p` as this pass last wrote or read it);
/// what it did, one line each. Failures are warnings: the marker stays, the next pass sweeps.
pub async fn sweep_if_due(client: &kube::Client, p: &ClusterPromotion) -> Vec<String> {
    let Some(token) = sweep_due(p) else {
        return Vec::new();
    };
    let name = p.metadata.name.clone().unwrap_or_default();
    let api: Api<PromotionRevision> = Api::all(client.clone());
    let params = ListParams::default()
        .labels(&format!("{PROMOTION_LABEL}={name}"))
        .limit(SWEEP_PAGE);
    let listed = match api.list(&params).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(promotion = %name, error = %e, "listing the promotion's PromotionRevisions failed; the next pass sweeps them");
            return Vec::new();
        }
    };
    let complete = listed
        .metadata
        .continue_
        .as_deref()
        .is_none_or(str::is_empty);
    let plan = sweep(p, &listed.items, complete);
    let mut out = Vec::new();
    let mut failed = false;
    for (revision, uid) in &plan.delete {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(revision, &params).await {
            Ok(_) => out.push(format!(
                "deleted PromotionRevision {revision} (the history forgot it)"
            )),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                failed = true;
                tracing::warn!(promotion = %name, revision = %revision, error = %e, "deleting a PromotionRevision the history forgot failed; the next pass tries again");
            }
        }
    }
    if plan.done && !failed {
        let promotions: Api<ClusterPromotion> = Api::all(client.clone());
        let path = format!(
            "/metadata/annotations/{}",
            REVISION_SWEEP.replace('/', "~1")
        );
        let ops =
            json!([{"op": "test", "path": path, "value": token}, {"op": "remove", "path": path}]);
        let patch: Result<json_patch::Patch, _> = serde_json::from_value(ops);
        let sent = match patch {
            Ok(patch) => promotions
                .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map(drop),
            Err(e) => Err(kube::Error::SerdeError(e)),
        };
        match sent {
            Ok(()) => out.push("the revision sweep is done".into()),
            // A newer sweep was marked meanwhile (its `test` failed), or the promotion is gone.
            Err(e) if crate::guard::patch_not_applied(&e) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(promotion = %name, error = %e, "removing the revision sweep marker failed; the next pass sweeps again")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn kyverno() -> ClusterPromotion {
        serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "kyverno", "uid": "uid-1"},
            "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}
        }))
        .unwrap_or_else(|e| panic!("a valid promotion: {e}"))
    }

    fn stored(p: &ClusterPromotion, revision: &str) -> PromotionRevision {
        let at = Timestamp::new(Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap());
        PromotionRevision::of(p, revision, "stages", None, at)
    }

    fn names(s: &Sweep) -> Vec<&str> {
        s.delete.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The label is only what the list selects by: a revision is the promotion's own when its spec
    /// names it *and* it is owned by this very promotion (UID), not by an earlier one of the same
    /// name, nor labelled by hand onto another promotion's revision.
    #[test]
    fn a_sweep_deletes_only_revisions_this_promotion_owns() {
        let p = kyverno();
        let ours = stored(&p, "h1");
        let mut another = stored(&p, "h2");
        another.spec.promotion = "other".into();
        another.metadata.owner_references = None;
        let mut earlier = stored(&p, "h3");
        earlier.metadata.owner_references = Some(vec![OwnerReference {
            kind: "ClusterPromotion".into(),
            name: "kyverno".into(),
            uid: "uid-0".into(),
            ..Default::default()
        }]);
        let mut unowned = stored(&p, "h4");
        unowned.metadata.owner_references = None;
        let listed = [ours, another, earlier, unowned];
        let s = sweep(&p, &listed, true);
        assert_eq!(
            names(&s),
            [
                revision_name("kyverno", "h1"),
                revision_name("kyverno", "h4")
            ]
        );
        assert!(s.done);
    }

    /// The marker goes only once nothing is left: the list was complete and one pass deletes all
    /// it found.
    #[test]
    fn a_sweep_is_done_only_when_the_list_was_complete_and_nothing_is_left() {
        let p = kyverno();
        let one = [stored(&p, "h1")];
        assert!(sweep(&p, &one, true).done);
        let more = sweep(&p, &one, false);
        assert_eq!(more.delete.len(), 1);
        assert!(!more.done, "another page may hold more");
        assert_eq!(
            sweep(&p, &[], true),
            Sweep {
                delete: vec![],
                done: true
            }
        );
        let full: Vec<_> = (0..=SWEEP_PER_PASS)
            .map(|i| stored(&p, &format!("h{i}")))
            .collect();
        let s = sweep(&p, &full[..SWEEP_PER_PASS], true);
        assert_eq!((s.delete.len(), s.done), (SWEEP_PER_PASS, true));
        let s = sweep(&p, &full, true);
        assert_eq!(s.delete.len(), SWEEP_PER_PASS);
        assert!(!s.done, "one is left for the next pass");
    }
}
