//! `promoter.dev/revision-sweep`: a sweep of the promotion's stored revisions is due. Set in the
//! guarded record patch whose history forgets a revision it kept (a completion beyond
//! `revision-history-limit`, a lowered limit), so that a pass killed before it deleted the
//! forgotten `PromotionRevision` leaves the sweep on record: a later pass lists the promotion's
//! revisions (by their `promoter.dev/promotion` label), deletes those nothing names, a bounded
//! number per pass, and removes the marker with a patch that tests its value (so a newer marker,
//! set meanwhile, stays). A steady pass finds no marker and reads nothing. Its value is an opaque
//! token (the time of the pass that set it).

use super::history::History;
use super::keys::annotation;
use crate::api::ClusterPromotion;

/// The annotation.
pub const REVISION_SWEEP: &str = "promoter.dev/revision-sweep";

/// The token of the sweep due on `p`, if one is.
pub fn sweep_due(p: &ClusterPromotion) -> Option<String> {
    annotation(p, REVISION_SWEEP)
}

/// Whether writing `after` over `before` forgets a revision whose PromotionRevision `before`
/// kept.
pub fn forgets(before: &History, after: &History) -> bool {
    let kept = after.kept_revisions();
    before.kept_revisions().iter().any(|r| !kept.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;

    #[test]
    fn only_a_history_that_drops_a_kept_revision_forgets() {
        let at = |m: u32| Timestamp::parse(&format!("2026-02-16T06:{m:02}:00Z")).unwrap();
        let mut before = History::default();
        before.record_completion("h1", Some(at(0)), at(1), 2);
        before.record_completion("h2", Some(at(2)), at(3), 2);
        let mut after = before.clone();
        assert!(!forgets(&before, &after));
        after.record_completion("h3", Some(at(4)), at(5), 3);
        assert!(!forgets(&before, &after), "within the limit");
        after.record_completion("h4", Some(at(6)), at(7), 2);
        assert!(forgets(&before, &after), "h1 and h2 pushed out");
    }
}
