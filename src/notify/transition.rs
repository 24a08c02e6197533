//! The transitions a user can be notified of, as the rules name them. Each comes from the reason of
//! an Event the pass records (one source of truth: `pass::notifications` maps the reasons), or, for
//! `Approved`, from the pass consuming an approval.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transition {
    /// A stage's ClusterProfile was applied (`StageProvisioning`).
    StageStarted,
    /// Every matching cluster of the stage is deployed (`StageProvisioned`).
    StageCompleted,
    /// A manual stage waits for an approval (`AwaitingApproval`).
    AwaitingApproval,
    /// The pass let a manual stage through on its approval (the approval consumed).
    Approved,
    /// A stage's health checks started failing (`ChecksFailing`).
    ChecksFailing,
    /// A deployment failed, a progress deadline passed, or the promotion is blocked
    /// (`DeploymentFailed`, `ProgressDeadlineExceeded`, `Blocked`).
    Failed,
    /// A rollback started or ended (`RollbackStarted`, `RolledBack`).
    RolledBack,
    /// A rollback did not finish within its deadline and holds for a person
    /// (`RollbackDeadlineExceeded`).
    RollbackFailed,
    /// The last stage was promoted past (`RolloutComplete`).
    RolloutCompleted,
    /// A freeze holds the promotion (`Frozen`).
    Frozen,
    /// A stage started under a freeze bypass (`FreezeBypassed`).
    FreezeBypassed,
    /// Clusters of a stage were counted against its failure budget (`FailureBudgetSpent`).
    FailureBudgetSpent,
}

impl Transition {
    pub const ALL: [Transition; 12] = [
        Transition::StageStarted,
        Transition::StageCompleted,
        Transition::AwaitingApproval,
        Transition::Approved,
        Transition::ChecksFailing,
        Transition::Failed,
        Transition::RolledBack,
        Transition::RollbackFailed,
        Transition::RolloutCompleted,
        Transition::Frozen,
        Transition::FreezeBypassed,
        Transition::FailureBudgetSpent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Transition::StageStarted => "StageStarted",
            Transition::StageCompleted => "StageCompleted",
            Transition::AwaitingApproval => "AwaitingApproval",
            Transition::Approved => "Approved",
            Transition::ChecksFailing => "ChecksFailing",
            Transition::Failed => "Failed",
            Transition::RolledBack => "RolledBack",
            Transition::RollbackFailed => "RollbackFailed",
            Transition::RolloutCompleted => "RolloutCompleted",
            Transition::Frozen => "Frozen",
            Transition::FreezeBypassed => "FreezeBypassed",
            Transition::FailureBudgetSpent => "FailureBudgetSpent",
        }
    }

    pub fn parse(name: &str) -> Option<Transition> {
        Transition::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// What needs somebody's attention (a red message rather than a green or neutral one).
    pub fn attention(self) -> bool {
        matches!(
            self,
            Transition::Failed
                | Transition::ChecksFailing
                | Transition::RolledBack
                | Transition::RollbackFailed
                | Transition::AwaitingApproval
                | Transition::FailureBudgetSpent
        )
    }

    /// A short human title: `Stage completed`.
    pub fn title(self) -> &'static str {
        match self {
            Transition::StageStarted => "Stage started",
            Transition::StageCompleted => "Stage completed",
            Transition::AwaitingApproval => "Waiting for approval",
            Transition::Approved => "Approved",
            Transition::ChecksFailing => "Health checks failing",
            Transition::Failed => "Failed",
            Transition::RolledBack => "Rolled back",
            Transition::RollbackFailed => "Rollback failed",
            Transition::RolloutCompleted => "Rollout completed",
            Transition::Frozen => "Frozen",
            Transition::FreezeBypassed => "Freeze bypassed",
            Transition::FailureBudgetSpent => "Failure budget spent",
        }
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Transition::ALL {
            assert_eq!(Transition::parse(t.as_str()), Some(t));
            assert_eq!(t.to_string(), t.as_str());
        }
        assert_eq!(Transition::parse("stagecompleted"), None);
    }
}
