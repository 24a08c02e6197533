//! The soak: a provisioned stage waits `delay` from its lastSuccessfulAppliedTime.

use super::{GatedStage, Wait};
use crate::api::{ClusterPromotionStatus, Timestamp};
use crate::pass::decision::{Decision, Phase};
use crate::pass::stage_status::{entry, set_description};

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    _: &mut Decision,
) -> Option<Wait> {
    let delay = s.gates()?.delay?;
    let now = s.ctx.now;
    let e = entry(status, &s.stage.name);
    let since = e.last_successful_applied_time?;
    let ready_at = Timestamp::new(since.as_datetime() + delay.to_chrono());
    if now >= ready_at.as_datetime() {
        return None;
    }
    set_description(
        e,
        &format!("Delayed: Waiting for Time Window: {ready_at}"),
        now,
    );
    let summary = format!("stage {}: soaking until {ready_at}", s.stage.name);
    Some(Wait::new(Phase::Waiting, summary, None).until(Some(ready_at.as_datetime())))
}
