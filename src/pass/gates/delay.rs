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
    let Some(ready_at) = since.as_datetime().checked_add_signed(delay.to_chrono()) else {
        // Only with a status edited near the end of the calendar: an error, not a panic.
        let why = format!(
            "stage {}: its soak (delay {delay}) from {since} ends beyond the calendar",
            s.stage.name
        );
        return Some(Wait::new(Phase::Blocked, why.clone(), Some(why)));
    };
    let ready_at = Timestamp::new(ready_at);
    if now >= ready_at.as_datetime() {
        return None;
    }
    set_description(
        e,
        &format!("Delayed: Waiting for Time Window: {ready_at}"),
        now,
    );
    let summary = format!("stage {}: soaking until {ready_at}", s.stage.name);
    Some(Wait::new(Phase::Soaking, summary, None).until(Some(ready_at.as_datetime()), "soak ends"))
}
