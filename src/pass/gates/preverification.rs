//! The preHealthCheckDeployment: a stage's verification policies, deployed by a profile of their
//! own to the stage's clusters, must be deployed before the stage's health checks run.

use super::{GatedStage, Wait};
use crate::api::ClusterPromotionStatus;
use crate::pass::decision::{Decision, Phase};
use crate::pass::deployment;
use crate::pass::profile_writes::{Observed, ensure};
use crate::pass::profiles::preverification_profile;
use crate::pass::stage_status::{entry, set_description};

pub fn check(
    s: &GatedStage,
    status: &mut ClusterPromotionStatus,
    d: &mut Decision,
) -> Option<Wait> {
    let pv = preverification_profile(s.p, s.stage)?;
    let pv_name = pv.name.clone();
    let text = match ensure(s.p, s.world, d, pv) {
        Observed::Applied(cp) => {
            let check = deployment::check(
                s.p,
                cp,
                &s.stage.cluster_selector.clone().unwrap_or_default(),
                s.world,
            );
            (!check.done).then_some(check.message)
        }
        Observed::Applying => Some(format!(
            "ClusterProfile {pv_name} was applied in this pass."
        )),
        Observed::Deleting => Some(format!("ClusterProfile {pv_name} is being deleted.")),
    }?;
    set_description(
        entry(status, &s.stage.name),
        "Running Post-Promotion Health Checks",
        s.ctx.now,
    );
    let summary = format!(
        "stage {}: deploying preHealthCheckDeployment: {text}",
        s.stage.name
    );
    Some(
        Wait::new(
            Phase::RunningChecks,
            summary,
            Some(format!("preHealthCheckDeployment: {text}")),
        )
        .incomplete(),
    )
}
