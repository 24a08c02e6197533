//! The promotion window (`trigger.auto.promotionWindow`): a stage is promoted past only while its
//! window is open.

use super::{GatedStage, Wait};
use crate::api::{ClusterPromotionStatus, Timestamp};
use crate::pass::decision::{Decision, Phase, Reason};
use crate::pass::events::window_was_closed;
use crate::pass::stage_status::{entry, set_description};
use crate::window::{PromotionWindow, WindowState};

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) -> Option<Wait> {
    let w = s.trigger()?.auto.as_ref()?.promotion_window.as_ref()?;
    let now = s.ctx.now;
    // Parse errors were reported before planning; an unparsable window never opens.
    let state = PromotionWindow::parse(&w.from, &w.to, s.ctx.default_tz)
        .map(|w| w.state(now))
        .unwrap_or(WindowState::Closed { opens_at: None });
    if let WindowState::Closed { opens_at } = state {
        let when = opens_at
            .map(|t| Timestamp::new(t).to_string())
            .unwrap_or_else(|| "never".into());
        set_description(
            entry(status, &s.stage.name),
            &format!("Window Closed: Waiting for Next Schedule ({when})."),
            now,
        );
        let summary = format!(
            "stage {}: promotion window closed until {when}",
            s.stage.name
        );
        return Some(
            Wait::new(Phase::WindowClosed, summary, None)
                .until(opens_at, "window opens")
                .complete(),
        );
    }
    if window_was_closed(s.p, &s.stage.name) {
        let text = format!("Stage {}: promotion window open", s.stage.name);
        d.event(Reason::WindowOpened, Some(&s.stage.name), text);
    }
    None
}
