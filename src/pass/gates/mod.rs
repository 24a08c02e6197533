//! The gates a provisioned stage passes before the next stage starts, in upstream's order: the
//! soak ([`delay`]), the preHealthCheckDeployment ([`preverification`]), the postDelayHealthChecks
//! ([`health`]), then promoter's [`freeze`] (a PromotionFreeze holds the next stage), the
//! promotion window ([`window`]) and manual approval ([`approval`]). A stage is *complete* once it
//! is past the health checks: the progress deadline (`pass::deadline`) counts only the waits before
//! that ([`Progress::Incomplete`]), and is met once a complete stage waits at a later gate
//! ([`Progress::Complete`]).
//!
//! A gate is one module with one [`Gate`] function: it looks at the stage and either lets it pass
//! (`None`, with what passing means: an Event such as "window open", a consumed approval) or says
//! why it waits ([`Wait`]), having set the stage's description. The planner runs [`GATES`] in
//! order and stops at the first that waits; a new gate is one more module and one more entry.

pub mod approval;
pub mod delay;
pub mod freeze;
pub mod health;
pub mod preverification;
pub mod window;

use super::decision::{Context, Decision, HealthResults, Phase};
use super::world::World;
use crate::annotations::Run;
use crate::api::promotion::Gates;
use crate::api::{ClusterPromotion, ClusterPromotionStatus, Stage, Trigger};
use chrono::{DateTime, Utc};

/// A stage provisioned in the current run, at its gates, and what it is decided from.
pub struct GatedStage<'a> {
    pub p: &'a ClusterPromotion,
    pub stage: &'a Stage,
    /// The stage's index in `spec.stages`.
    pub index: usize,
    pub world: &'a World,
    pub health: &'a HealthResults,
    pub ctx: &'a Context,
    /// The run this pass continues.
    pub run: Option<&'a Run>,
    /// The `profileSpecHash` of a status taken over in this pass (see `takeover`).
    pub adopted_from: Option<&'a str>,
}

impl GatedStage<'_> {
    fn trigger(&self) -> Option<&Trigger> {
        self.stage.trigger.as_ref()
    }

    /// The configuration both trigger kinds share (none without a trigger).
    fn gates(&self) -> Option<Gates<'_>> {
        self.trigger()?.gates()
    }
}

/// A gate: `None` when the stage passes it; it may change the stage's status entry and add Events,
/// records and actions to the decision either way.
pub type Gate = fn(&GatedStage, &mut ClusterPromotionStatus, &mut Decision) -> Option<Wait>;

/// Every gate, in the order a stage passes them.
pub const GATES: [Gate; 6] = [
    delay::check,
    preverification::check,
    health::check,
    freeze::check,
    window::check,
    approval::check,
];

/// Why a provisioned stage is not promoted in this pass.
pub struct Wait {
    pub phase: Phase,
    pub summary: String,
    /// The stage's failureMessage while it waits.
    pub failure: Option<String>,
    /// When waiting on time: the moment the wait ends.
    pub next_check: Option<DateTime<Utc>>,
    /// What happens then, in words (`soak ends`).
    pub next_check_for: &'static str,
    /// Where the waiting stage stands against its progress deadline.
    pub progress: Progress,
}

/// Where a waiting stage stands against its progress deadline (`pass::deadline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Not complete, and the wait counts: its preHealthCheckDeployment is not deployed, or its
    /// checks fail.
    Incomplete,
    /// Not complete, and the wait does not count: a soak, checks not evaluated yet.
    Excluded,
    /// Complete (deployed, past its checks), waiting at a later gate (a freeze, a window, an
    /// approval): its deadline is met, and nothing later fails it.
    Complete,
}

impl Wait {
    fn new(phase: Phase, summary: String, failure: Option<String>) -> Self {
        Wait {
            phase,
            summary,
            failure,
            next_check: None,
            next_check_for: "",
            progress: Progress::Excluded,
        }
    }

    /// A wait that counts against the stage's progress deadline.
    fn incomplete(self) -> Self {
        Wait {
            progress: Progress::Incomplete,
            ..self
        }
    }

    /// A wait of a complete stage at a later gate.
    fn complete(self) -> Self {
        Wait {
            progress: Progress::Complete,
            ..self
        }
    }

    fn until(self, next_check: Option<DateTime<Utc>>, next_check_for: &'static str) -> Self {
        Wait {
            next_check,
            next_check_for,
            ..self
        }
    }
}
