//! Whether a ClusterPromotion can be processed as written: schema and name rules, selectors,
//! promotion windows, generated names (their length, their owner) and clusters selected by more
//! than one stage, promoter's settings annotations. Checked before planning; a promotion with problems is blocked and says why.

use super::decision::Context;
use super::ownership;
use super::profiles::{preverification_name, preverification_profile};
use super::world::World;
use crate::api::ClusterPromotion;
use crate::api::inventory::ClusterKind;
use crate::validation::{check_generated_name, name_violations, schema_violations};
use crate::window::PromotionWindow;

/// What is wrong with a promotion that stops it from being processed, each with its field path.
pub fn problems(p: &ClusterPromotion, world: &World, ctx: &Context) -> Vec<String> {
    let mut out: Vec<String> = schema_violations(&p.spec)
        .iter()
        .chain(&name_violations(p))
        .map(ToString::to_string)
        .collect();
    // promoter's own settings (progress deadline, failure policy, …) are annotations.
    out.extend(crate::settings::problems(p));
    // A `promoter.dev/` key promoter does not know: a typo of a setting is not silently ignored.
    out.extend(
        crate::known_keys::problems(p)
            .iter()
            .map(ToString::to_string),
    );
    if world.own_crds_missing
        && crate::settings::Settings::of(p).failure_policy
            == crate::settings::FailurePolicy::Rollback
    {
        out.push(format!(
            "metadata.annotations[{}]: rollback needs the stored revisions, and this cluster does not serve promoter's PromotionRevision CRD (install promoter's CRDs: promoter crd --own | kubectl apply -f -)",
            crate::settings::FAILURE_POLICY
        ));
    }
    let name = p.metadata.name.as_deref().unwrap_or_default();
    for (i, stage) in p.spec.stages.iter().enumerate() {
        if let Err(e) = stage
            .cluster_selector
            .clone()
            .unwrap_or_default()
            .requirements()
        {
            out.push(format!("spec.stages[{i}].clusterSelector.{e}"));
        }
        if preverification_profile(p, stage).is_some()
            && let Err(why) = check_generated_name(&preverification_name(name, &stage.name))
        {
            out.push(format!(
                "spec.stages[{i}].name: generated ClusterProfile name {:?} {why}",
                preverification_name(name, &stage.name)
            ));
        }
        if let Some(w) = stage
            .trigger
            .as_ref()
            .and_then(|t| t.auto.as_ref())
            .and_then(|a| a.promotion_window.as_ref())
            && let Err(e) = PromotionWindow::parse(&w.from, &w.to, ctx.default_tz)
        {
            out.push(format!("spec.stages[{i}].trigger.auto.{e}"));
        }
    }
    if let Some(ps) = &p.spec.profile_spec {
        let checks = [
            ps.helm_charts().err(),
            ps.policy_refs().err(),
            ps.kustomization_refs().err(),
            ps.validate_healths().err(),
            ps.max_update().err(),
        ];
        out.extend(checks.into_iter().flatten().map(|e| format!("spec.{e}")));
    }
    out.extend(ownership::problems(p, world));
    // A cluster in two stages would receive two conflicting ClusterProfiles (upstream Q11).
    let matchers: Vec<(&str, crate::labels::Matcher)> = p
        .spec
        .stages
        .iter()
        .filter_map(|s| {
            Some((
                s.name.as_str(),
                s.cluster_selector
                    .clone()
                    .unwrap_or_default()
                    .matcher()
                    .ok()?,
            ))
        })
        .collect();
    for (labels, ids) in world.label_sets() {
        let stages: Vec<&str> = matchers
            .iter()
            .filter(|(_, m)| m.matches(&labels))
            .map(|(n, _)| *n)
            .collect();
        if stages.len() < 2 {
            continue;
        }
        for c in ids.iter().map(|i| &world.clusters[*i]) {
            out.push(format!(
                "cluster {c} ({}Cluster) is selected by more than one stage: {}",
                if c.kind == ClusterKind::Capi {
                    "CAPI "
                } else {
                    "Sveltos"
                },
                stages
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ));
        }
    }
    out
}
