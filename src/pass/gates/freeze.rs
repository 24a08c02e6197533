//! A freeze (`PromotionFreeze`, see `crate::freeze`): while an Active freeze selects the promotion,
//! nothing new starts. The current stage still deploys, soaks and passes its checks; this gate
//! then holds it before the next stage (a promotion window or an approval is looked at only once the
//! freeze lets it go, so no approval is consumed during a freeze). The last stage is not held:
//! completing a rollout starts nothing. A restart (a new revision's stage 1) is held the same way
//! by the planner ([`state`]). A bypass (`promoter freeze bypass`: who, why, until when) lets one
//! promotion through; the stage it starts says so, with a `FreezeBypassed` Event.

use super::{GatedStage, Wait};
use crate::annotations::{self, FreezeBypass};
use crate::api::{ClusterPromotion, ClusterPromotionStatus};
use crate::freeze::{Freezes, bypass_allows};
use crate::pass::decision::{Decision, Phase, Reason};
use crate::pass::stage_status::{description_text, entry, set_description};
use crate::pass::world::World;
use chrono::{DateTime, Utc};

/// A freeze that holds a promotion now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub freeze: String,
    pub reason: String,
    /// `until <end>` or `until lifted`.
    pub until: String,
    /// When a freeze that selects the promotion starts or ends next.
    pub next_change: Option<DateTime<Utc>>,
    /// What happens then: `freeze ends` (one that holds it), or `freeze starts`.
    pub next_change_for: &'static str,
    /// Why a bypass recorded on the promotion does not let it through (expired, another freeze,
    /// or not a valid record).
    pub bypass: Option<String>,
}

/// Whether freezes hold a promotion now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FreezeCheck {
    Clear,
    Held(Held),
    /// Every freeze that holds it is bypassed by this record.
    Bypassed {
        freeze: String,
        bypass: FreezeBypass,
    },
}

/// The freezes that hold `p` at `now`, and whether its bypass lets it through.
pub fn state(p: &ClusterPromotion, world: &World, now: DateTime<Utc>) -> FreezeCheck {
    if world.freezes.is_empty() {
        return FreezeCheck::Clear;
    }
    let freezes = Freezes::new(&world.freezes, now);
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let holding = freezes.holding(name, &labels);
    let Some(first) = holding.first() else {
        return FreezeCheck::Clear;
    };
    let next_change = freezes.next_change_for(name, &labels);
    let next_change_for = if holding.iter().any(|f| f.next_change == next_change) {
        "freeze ends"
    } else {
        "freeze starts"
    };
    let held = |f: &crate::freeze::Evaluated, bypass: Option<String>| {
        FreezeCheck::Held(Held {
            freeze: f.name.to_string(),
            reason: f.reason().to_string(),
            until: f.until(),
            next_change,
            next_change_for,
            bypass,
        })
    };
    match annotations::freeze_bypass(p) {
        None => held(first, None),
        Some(Err(why)) => held(first, Some(why)),
        Some(Ok(b)) => match holding.iter().find(|f| !bypass_allows(&b, f.name, now)) {
            Some(f) => {
                let why = if b.until.as_datetime() <= now {
                    format!("the bypass by {} expired at {}", b.by, b.until)
                } else {
                    format!(
                        "the bypass by {} is for freeze {}",
                        b.by,
                        b.freeze.as_deref().unwrap_or_default()
                    )
                };
                held(f, Some(why))
            }
            None => FreezeCheck::Bypassed {
                freeze: first.name.to_string(),
                bypass: b,
            },
        },
    }
}

/// How a stage's description begins while a freeze holds the promotion.
pub use super::super::phase::FROZEN;

/// `Frozen: freeze <f>: <reason> (until …); <what> waits`, that the held stage also awaits its
/// approval (`awaits`: a person is needed whatever the freeze does), and what the bypass lacks.
pub fn description(h: &Held, what: &str, awaits: Option<&str>) -> String {
    let mut text = format!(
        "{FROZEN} freeze {}: {} ({}); {what} waits",
        h.freeze, h.reason, h.until
    );
    if let Some(stage) = awaits {
        text.push_str(&awaits_approval(stage));
    }
    if let Some(b) = &h.bypass {
        text.push_str(&format!(" ({b})"));
    }
    text
}

/// What a frozen stage's description says when the stage also awaits its approval.
pub fn awaits_approval(stage: &str) -> String {
    format!(", and stage {stage} awaits approval")
}

/// Whether a stage's description (without its time) already said that `stage` awaits approval:
/// upstream's own text, or a freeze's that said so.
pub fn said_awaits_approval(description: &str, stage: &str) -> bool {
    description == super::approval::AWAITING
        || (description.starts_with(FROZEN) && description.contains(&awaits_approval(stage)))
}

/// Sets the held stage's description, with a `Frozen` Event when the hold begins. `awaits`: the
/// held stage also awaits its approval (it is the stage itself), said in the description and,
/// when nothing said it before, in an `AwaitingApproval` Event: a person is needed, and an
/// approval given during the freeze lets the stage through when it ends.
pub fn hold(
    stage: &str,
    h: &Held,
    what: &str,
    awaits: Option<&str>,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
    now: DateTime<Utc>,
) {
    let e = entry(status, stage);
    let was = e
        .current_status_description
        .as_deref()
        .map(description_text)
        .unwrap_or_default()
        .to_string();
    set_description(e, &description(h, what, awaits), now);
    let also = awaits.map(awaits_approval).unwrap_or_default();
    if !was.starts_with(FROZEN) {
        d.event(
            Reason::Frozen,
            Some(stage),
            format!(
                "Stage {stage}: {what} held by freeze {}: {} ({}){also}",
                h.freeze, h.reason, h.until
            ),
        );
    }
    if let Some(s) = awaits
        && !said_awaits_approval(&was, s)
    {
        d.event(
            Reason::AwaitingApproval,
            Some(s),
            format!(
                "Stage {s} awaits manual approval (frozen: {what} is held by freeze {} {}; an approval given now lets it through when the freeze ends)",
                h.freeze, h.until
            ),
        );
    }
}

/// The `FreezeBypassed` Event of a stage started under a bypass, and the note its description gets.
pub fn bypassed(stage: &str, freeze: &str, b: &FreezeBypass, d: &mut Decision) -> String {
    d.event(
        Reason::FreezeBypassed,
        Some(stage),
        format!(
            "Stage {stage} started during freeze {freeze} under the bypass by {} until {}: {}",
            b.by, b.until, b.reason
        ),
    );
    format!("(freeze {freeze} bypassed by {} until {})", b.by, b.until)
}

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) -> Option<Wait> {
    let next = s.p.spec.stages.get(s.index + 1)?;
    let FreezeCheck::Held(h) = state(s.p, s.world, s.ctx.now) else {
        return None;
    };
    let what = format!("stage {}", next.name);
    let awaits = super::approval::pending(s, status).then_some(s.stage.name.as_str());
    hold(&s.stage.name, &h, &what, awaits, status, d, s.ctx.now);
    let summary = format!(
        "stage {} done; {what} held by freeze {}: {} ({}){}",
        s.stage.name,
        h.freeze,
        h.reason,
        h.until,
        awaits.map(awaits_approval).unwrap_or_default()
    );
    Some(
        Wait::new(Phase::Frozen, summary, None)
            .until(h.next_change, h.next_change_for)
            .complete(),
    )
}
