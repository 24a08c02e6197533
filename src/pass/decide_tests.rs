//! The state machine, rule by rule, including upstream's unit cases (reference §5) and one test per
//! deliberate difference of DESIGN.md.

use super::*;
use crate::annotations::{Run, is_complete};
use crate::api::inventory::ClusterKind;
use crate::api::{ClusterPromotionStatus, ClusterSummary, FeatureSummary, StageStatus, Timestamp};
use crate::hash::{revision_hash, stages_hash};
use crate::pass::decision::{HealthVerdict, RecordOp};
use crate::pass::world::InventoryCluster;
use chrono::TimeZone;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Value, json};

fn t(min: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap() + chrono::Duration::minutes(min)
}

fn ctx(min: i64) -> Context {
    Context {
        now: t(min),
        default_tz: Tz::UTC,
    }
}

fn promotion(stages: Value) -> ClusterPromotion {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
        "metadata": {"name": "kyverno", "uid": "uid-1", "finalizers": [FINALIZER]},
        "spec": {"profileSpec": {"syncMode": "Continuous", "helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/",
                 "releaseName": "kyverno-latest", "releaseNamespace": "kyverno", "chartVersion": "3.5.2"}]},
                 "stages": stages}
    }))
    .unwrap()
}

fn three_stages() -> Value {
    json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "2m"}}},
        {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}, "trigger": {"manual": {}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ])
}

fn cluster(env: &str, name: &str) -> InventoryCluster {
    InventoryCluster {
        kind: ClusterKind::Sveltos,
        namespace: env.into(),
        name: name.into(),
        labels: [("env".to_string(), env.to_string())].into(),
        ready: true,
        paused: false,
        pull_mode: false,
        kubeconfig_secret: None,
        kubeconfig_key: None,
    }
}

fn fleet() -> World {
    World {
        clusters: vec![
            cluster("dev", "dev01"),
            cluster("staging", "stg01"),
            cluster("prod", "prod01"),
        ],
        ..Default::default()
    }
}

/// Plays the actions of a decision onto the promotion and the world, as `act` would.
fn apply(p: &mut ClusterPromotion, world: &mut World, d: &Decision) {
    for a in d.actions.iter().chain(&d.after_status) {
        match a {
            Action::AddFinalizer => p
                .metadata
                .finalizers
                .get_or_insert_default()
                .push(FINALIZER.into()),
            Action::RemoveFinalizer => p.metadata.finalizers = None,
            Action::Apply(desired) => {
                let obj = match world.profiles.get(&desired.name) {
                    Some(o) => desired.merged_into(o),
                    None => desired.to_object(),
                };
                world.profiles.insert(desired.name.clone(), obj);
            }
            Action::Delete { name } => {
                world.profiles.remove(name);
            }
            Action::Disown { name } => {
                if let Some(cp) = world.profiles.get_mut(name) {
                    cp.metadata.owner_references = None;
                }
            }
            Action::Record(ops) => apply_records(p, ops),
            Action::StoreRevision(r) => {
                let name = r.metadata.name.clone().unwrap_or_default();
                world.revisions.insert(name, Some((**r).clone()));
            }
        }
    }
    if let Some(s) = &d.status {
        p.status = Some(s.clone());
    }
}

/// Plays promoter's record patch onto the promotion, as `act` would.
fn apply_records(p: &mut ClusterPromotion, ops: &[RecordOp]) {
    use crate::annotations::{COMPLETED, approval_key, grant_key};
    for op in ops {
        let a = p.metadata.annotations.get_or_insert_default();
        match op {
            RecordOp::ConsumeApproval {
                index,
                stage,
                grant,
            } => {
                a.remove(&approval_key(stage));
                a.insert(grant_key(stage), serde_json::to_string(grant).unwrap());
                set_approved(p, *index, None);
            }
            RecordOp::RestoreApproval {
                index,
                stage,
                approval,
            } => {
                a.remove(&grant_key(stage));
                if let Some(r) = approval {
                    a.insert(approval_key(stage), serde_json::to_string(r).unwrap());
                }
                set_approved(p, *index, Some(true));
            }
            RecordOp::ForgetApprovalRecord { stage } => {
                a.remove(&approval_key(stage));
            }
            RecordOp::Complete(run) => {
                a.insert(COMPLETED.into(), serde_json::to_string(run).unwrap());
            }
            RecordOp::ReviseApprovalRecord { stage, record } => {
                a.insert(approval_key(stage), serde_json::to_string(record).unwrap());
            }
            RecordOp::History(h) => {
                a.insert(crate::annotations::HISTORY.into(), h.to_annotation());
            }
            RecordOp::SweepDue(token) => {
                a.insert(crate::annotations::REVISION_SWEEP.into(), token.clone());
            }
            RecordOp::Failed(f) => {
                a.insert(
                    crate::annotations::FAILED.into(),
                    serde_json::to_string(f).unwrap(),
                );
            }
            RecordOp::Rollback(r) => {
                a.insert(
                    crate::annotations::ROLLBACK.into(),
                    serde_json::to_string(r).unwrap(),
                );
            }
            RecordOp::Clock(c) => {
                a.insert(
                    crate::annotations::DEADLINE_CLOCK.into(),
                    serde_json::to_string(c).unwrap(),
                );
            }
            RecordOp::Budgeted(b) if b.is_empty() => {
                a.remove(crate::annotations::BUDGETED);
            }
            RecordOp::Budgeted(b) => {
                a.insert(
                    crate::annotations::BUDGETED.into(),
                    serde_json::to_string(b).unwrap(),
                );
            }
            RecordOp::Drop(hold) => {
                a.remove(hold.key());
            }
            RecordOp::WithdrawApproval { index, stage } => {
                a.remove(&approval_key(stage));
                set_approved(p, *index, None);
            }
            RecordOp::Outbox(entries) if entries.is_empty() => {
                a.remove(crate::annotations::outbox::OUTBOX);
            }
            RecordOp::Outbox(entries) => {
                a.insert(
                    crate::annotations::outbox::OUTBOX.into(),
                    crate::annotations::outbox::encode(entries),
                );
            }
            RecordOp::Redeploy { profile, record } => {
                let mut all = crate::annotations::redeploy::redeploys(p);
                all.insert(profile.clone(), record.clone());
                p.metadata.annotations.get_or_insert_default().insert(
                    crate::annotations::REDEPLOY.into(),
                    serde_json::to_string(&all).unwrap(),
                );
            }
        }
    }
}

/// Sets (or clears) the manual approval of stage `index`.
fn set_approved(p: &mut ClusterPromotion, index: usize, approved: Option<bool>) {
    if let Some(manual) = p.spec.stages[index]
        .trigger
        .as_mut()
        .and_then(|t| t.manual.as_mut())
    {
        manual.approved = approved;
    }
}

/// dev deployed and soaked, staging deployed and awaiting its approval, which has just been given.
fn staging_approved() -> (ClusterPromotion, World) {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    run(&mut p, &mut w, 3);
    summarize(&mut w, "kyverno-staging", "Provisioned");
    set_approved(&mut p, 1, Some(true));
    (p, w)
}

/// Sveltos' part: ClusterSummaries for a profile's matching clusters, with the given feature status.
fn summarize(world: &mut World, profile: &str, feature_status: &str) {
    let out = summaries_for(world, profile, feature_status);
    world
        .summaries
        .insert(profile.into(), out.into_iter().collect());
}

fn summaries_for(world: &World, profile: &str, feature_status: &str) -> Vec<ClusterSummary> {
    let cp = world.profiles.get(profile).unwrap().clone();
    let selector: crate::labels::LabelSelector =
        serde_json::from_value(cp.spec.fields["clusterSelector"].clone()).unwrap();
    let mut out = Vec::new();
    for c in world
        .clusters
        .iter()
        .filter(|c| selector.selects(&c.labels).unwrap())
    {
        let mut cs = ClusterSummary::new(
            &format!("{profile}-sveltos-{}", c.name),
            crate::api::ClusterSummarySpec {
                cluster_namespace: c.namespace.clone(),
                cluster_name: c.name.clone(),
                cluster_type: "Sveltos".into(),
                cluster_profile_spec: cp.spec.fields.clone().into(),
            },
        );
        // One feature per kind of content, as the ClusterSummary controller reports them.
        let features = [("helmCharts", "Helm"), ("policyRefs", "Resources")]
            .iter()
            .filter(|(field, _)| {
                cp.spec
                    .fields
                    .get(*field)
                    .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            })
            .map(|(_, feature)| FeatureSummary {
                feature_id: feature.to_string(),
                status: Some(feature_status.into()),
                failure_message: (feature_status == "Failed")
                    .then(|| "values don't meet the specifications".into()),
                ..Default::default()
            })
            .collect();
        cs.status = Some(crate::api::ClusterSummaryStatus {
            feature_summaries: Some(features),
        });
        out.push(cs);
    }
    out
}

fn run(p: &mut ClusterPromotion, world: &mut World, min: i64) -> Decision {
    // As a pass observes it.
    world.now = Some(t(min));
    let d = decide(p, world, &HealthResults::new(), &ctx(min));
    apply(p, world, &d);
    sweep(p, world);
    d
}

/// The pass's sweep of stored revisions after the decision's writes, as `revisions::sweep_if_due`
/// does it.
fn sweep(p: &mut ClusterPromotion, world: &mut World) {
    use crate::annotations::REVISION_SWEEP;
    if crate::annotations::sweep_due(p).is_none() {
        return;
    }
    let listed: Vec<crate::api::PromotionRevision> =
        world.revisions.values().flatten().cloned().collect();
    let plan = crate::pass::revisions::sweep(p, &listed, true);
    for (name, _) in &plan.delete {
        world.revisions.insert(name.clone(), None);
    }
    if plan.done {
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(REVISION_SWEEP);
    }
}

fn stage_status<'a>(p: &'a ClusterPromotion, name: &str) -> &'a StageStatus {
    p.status
        .as_ref()
        .unwrap()
        .stages
        .as_ref()
        .unwrap()
        .iter()
        .find(|s| s.name == name)
        .unwrap()
}

fn description(p: &ClusterPromotion, name: &str) -> String {
    stage_status(p, name)
        .current_status_description
        .clone()
        .unwrap_or_default()
}

#[test]
fn first_pass_adds_finalizer_and_starts_stage_one() {
    let mut p = promotion(three_stages());
    p.metadata.finalizers = None;
    let mut w = fleet();
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.actions, [Action::AddFinalizer]);
    assert!(
        matches!(&d.after_status[..], [Action::Apply(x)] if x.name == "kyverno-dev"),
        "stage 1's profile follows the status write that records the run"
    );
    let s = p.status.as_ref().unwrap();
    assert_eq!(s.current_stage_name.as_deref(), Some("dev"));
    assert_eq!(s.stages.as_ref().unwrap().len(), 1);
    assert!(s.profile_spec_hash.is_some() && s.stages_hash.is_some());
    assert_eq!(s.last_promotion_time, Some(Timestamp::new(t(0))));
    assert_eq!(
        description(&p, "dev"),
        "Clusters are being provisioned (2026-02-16T06:00:00Z)"
    );
    assert_eq!(
        d.events[0].message, "Provisioning stage dev",
        "a first rollout restarts nothing"
    );
    assert_eq!(d.summary, "started: provisioning stage dev");
}

#[test]
fn full_auto_manual_rollout_with_upstream_texts() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    // Case 10: not in sync, then not provisioned, then deployed.
    let d = run(&mut p, &mut w, 1);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterSummary kyverno-dev-sveltos-dev01 does not exist yet.")
    );
    assert_eq!(d.phase, Phase::Progressing);
    let mut out = summaries_for(&w, "kyverno-dev", "Provisioning");
    let mut spec = out[0].spec.cluster_profile_spec.to_map();
    spec.insert("helmCharts".into(), json!([]));
    out[0].spec.cluster_profile_spec = spec.into();
    w.summaries
        .insert("kyverno-dev".into(), out.into_iter().collect());
    run(&mut p, &mut w, 2);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterSummary HelmCharts kyverno-dev-sveltos-dev01 is not in sync.")
    );
    summarize(&mut w, "kyverno-dev", "Provisioning");
    run(&mut p, &mut w, 3);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterSummary kyverno-dev-sveltos-dev01 is not yet provisioned.")
    );
    summarize(&mut w, "kyverno-dev", "Provisioned");
    // Case 12: provisioned now, delay 2m -> waits.
    let d = run(&mut p, &mut w, 4);
    assert_eq!(d.events[0].message, "Stage dev provisioned");
    assert_eq!(
        stage_status(&p, "dev").last_successful_applied_time,
        Some(Timestamp::new(t(4)))
    );
    assert_eq!(stage_status(&p, "dev").failure_message, None);
    assert_eq!(
        description(&p, "dev"),
        "Delayed: Waiting for Time Window: 2026-02-16T06:06:00Z (2026-02-16T06:04:00Z)"
    );
    assert_eq!(d.next_check, Some(t(6)));
    assert_eq!(d.phase, Phase::Soaking);
    // Quiet: nothing new to say, nothing written.
    let d = run(&mut p, &mut w, 5);
    assert!(!d.writes(), "{d:?}");
    // Case 11: dev -> staging after the delay.
    let d = run(&mut p, &mut w, 6);
    assert_eq!(d.summary, "promoted dev -> staging");
    assert!(
        d.after_status
            .iter()
            .any(|a| matches!(a, Action::Apply(x) if x.name == "kyverno-staging")),
        "the next stage's profile follows the status write"
    );
    assert!(!d.actions.iter().any(|a| matches!(a, Action::Apply(_))));
    assert_eq!(
        description(&p, "dev"),
        "Successfully provisioned (2026-02-16T06:06:00Z)"
    );
    assert_eq!(
        stage_status(&p, "dev").last_successful_applied_time,
        Some(Timestamp::new(t(4))),
        "the deployment's time stays (upstream overwrites it on advance); the promotion's is the description's"
    );
    assert_eq!(
        p.status.as_ref().unwrap().current_stage_name.as_deref(),
        Some("staging")
    );
    assert_eq!(
        stage_status(&p, "staging").last_update_reconciled_time,
        Some(Timestamp::new(t(6)))
    );
    assert_eq!(
        d.events.last().unwrap().message,
        "Provisioning stage staging"
    );
    // Never judged done in the pass that applied the profile: staging has no summaries yet anyway,
    // but even an instantly provisioned one is only seen in the next pass.
    summarize(&mut w, "kyverno-staging", "Provisioned");
    // Case 13: manual, not approved -> waits.
    let d = run(&mut p, &mut w, 7);
    assert_eq!(d.phase, Phase::AwaitingApproval);
    assert_eq!(
        description(&p, "staging"),
        "Paused: Awaiting Manual Approval (2026-02-16T06:07:00Z)"
    );
    assert_eq!(
        d.events.last().unwrap().message,
        "Stage staging awaits manual approval"
    );
    assert!(!run(&mut p, &mut w, 8).writes());
    // Approved -> promoted; the approval of that one stage is consumed before the status write.
    set_approved(&mut p, 1, Some(true));
    let d = run(&mut p, &mut w, 9);
    assert_eq!(d.summary, "promoted staging -> production");
    assert!(matches!(&d.actions[..], [Action::Record(ops)]
        if matches!(&ops[..], [RecordOp::ConsumeApproval { index: 1, stage, .. }] if stage == "staging")));
    summarize(&mut w, "kyverno-production", "Provisioned");
    let d = run(&mut p, &mut w, 10);
    assert_eq!(d.phase, Phase::Complete);
    assert_eq!(
        description(&p, "production"),
        "Successfully provisioned (2026-02-16T06:10:00Z)"
    );
    // Complete: every later pass is quiet.
    let d = run(&mut p, &mut w, 60);
    assert_eq!((d.phase, d.writes()), (Phase::Complete, false));
    assert_eq!(p.status.as_ref().unwrap().stages.as_ref().unwrap().len(), 3);
}

/// Upstream's behaviour, where `promoter.dev/allow-empty-stages` asks for it (see
/// `decide_empty_stage_tests.rs` for the hold without it).
#[test]
fn no_trigger_advances_at_once_and_zero_clusters_completes() {
    let mut p = promotion(json!([
        {"name": "a", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "b", "clusterSelector": {"matchLabels": {"env": "none"}}},
        {"name": "c"}
    ]));
    p.metadata.annotations = Some(
        [(
            crate::settings::ALLOW_EMPTY_STAGES.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-a", "Provisioned");
    assert_eq!(run(&mut p, &mut w, 1).summary, "promoted a -> b");
    // Zero matching clusters (Q2): complete, and the status says so.
    let d = run(&mut p, &mut w, 2);
    assert_eq!(d.summary, "promoted b -> c");
    assert_eq!(
        stage_status(&p, "b").current_status_description.as_deref(),
        Some("Successfully provisioned (2026-02-16T06:02:00Z)")
    );
    // An empty selector selects no cluster at all (Sveltos semantics).
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.phase, Phase::Complete);
}

#[test]
fn zero_matching_clusters_message() {
    let mut p = promotion(
        json!([{"name": "a", "clusterSelector": {"matchLabels": {"env": "none"}}, "trigger": {"auto": {"delay": "1h"}}}, {"name": "b"}]),
    );
    p.metadata.annotations = Some(
        [(
            crate::settings::ALLOW_EMPTY_STAGES.to_string(),
            "a=true".to_string(),
        )]
        .into(),
    );
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    run(&mut p, &mut w, 1);
    assert_eq!(
        stage_status(&p, "a").last_successful_applied_time,
        Some(Timestamp::new(t(1)))
    );
    assert!(
        description(&p, "a").starts_with("Delayed: Waiting for Time Window: 2026-02-16T07:01:00Z")
    );
    // (The provisioned text was replaced by the delay text in the same pass, as upstream.)
}

// Q2: the inventory, not the existing ClusterSummaries, decides what "every cluster" means.
#[test]
fn every_matching_cluster_needs_a_provisioned_summary() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    w.clusters.push(cluster("dev", "dev02"));
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    // dev02 joined after Sveltos made the summaries: its summary is missing, so dev is not done.
    w.summaries
        .get_mut("kyverno-dev")
        .unwrap()
        .retain(|cs| &*cs.cluster_name == "dev01");
    run(&mut p, &mut w, 1);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterSummary kyverno-dev-sveltos-dev02 does not exist yet.")
    );
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_none()
    );
    // Not ready: blocks, named.
    w.clusters[3].ready = false;
    run(&mut p, &mut w, 2);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("Clusters not ready: dev/dev02.")
    );
    // Paused: skipped, named.
    w.clusters[3].ready = true;
    w.clusters[3].paused = true;
    run(&mut p, &mut w, 3);
    assert_eq!(stage_status(&p, "dev").failure_message, None,);
    assert_eq!(
        stage_status(&p, "dev").last_successful_applied_time,
        Some(Timestamp::new(t(3)))
    );
}

#[test]
fn a_failed_deployment_halts_and_says_why() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Failed");
    let d = run(&mut p, &mut w, 1);
    assert_eq!(d.phase, Phase::Failed);
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterSummary kyverno-dev-sveltos-dev01 is not yet provisioned.")
    );
    assert!(
        d.summary
            .contains("feature Helm Failed: values don't meet the specifications"),
        "{}",
        d.summary
    );
    assert!(
        d.events
            .iter()
            .any(|e| e.warning && e.reason == "DeploymentFailed")
    );
    for min in 2..30 {
        let d = run(&mut p, &mut w, min);
        assert!(!d.writes(), "a halted rollout stays quiet");
        assert!(
            !w.profiles.contains_key("kyverno-staging"),
            "never reaches staging"
        );
    }
}

// Upstream unit cases 6 and 7, and restart semantics (§3.4).
#[test]
fn spec_change_restarts_at_stage_one_and_later_stages_keep_the_old_version() {
    let mut p = promotion(three_stages());
    p.spec.stages[1].trigger = None;
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    for (min, profile) in [
        (1, "kyverno-dev"),
        (4, "kyverno-staging"),
        (5, "kyverno-production"),
    ] {
        summarize(&mut w, profile, "Provisioned");
        run(&mut p, &mut w, min);
        run(&mut p, &mut w, min + 3);
    }
    assert_eq!(run(&mut p, &mut w, 20).phase, Phase::Complete);
    let old_prod = w.profiles["kyverno-production"].spec.fields["helmCharts"].clone();
    // A random stored hash means "changed".
    p.status.as_mut().unwrap().profile_spec_hash = Some("cmFuZG9t".into());
    let d = run(&mut p, &mut w, 21);
    assert_eq!(
        d.summary,
        "restarted (new revision): provisioning stage dev"
    );
    assert_eq!(
        p.status.as_ref().unwrap().stages.as_ref().unwrap().len(),
        1,
        "stage statuses reset"
    );
    assert!(
        !run(&mut p, &mut w, 22).summary.starts_with("restarted"),
        "after storing: unchanged"
    );
    // A new chart version restarts too; production keeps the old version until reached.
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.2");
    let d = run(&mut p, &mut w, 23);
    assert!(d.summary.starts_with("restarted"));
    assert_eq!(d.events[0].message, "Provisioning stage dev (Restart)");
    assert_eq!(
        w.profiles["kyverno-dev"].spec.fields["helmCharts"][0]["chartVersion"],
        "3.6.2"
    );
    assert_eq!(
        w.profiles["kyverno-production"].spec.fields["helmCharts"],
        old_prod
    );
    // Stage changes (selector) restart too; trigger changes do not.
    p.spec.stages[0].trigger = None;
    assert!(!run(&mut p, &mut w, 24).summary.starts_with("restarted"));
    p.spec.stages[0].cluster_selector =
        serde_json::from_value(json!({"matchLabels": {"env": "dev", "x": "y"}})).unwrap();
    assert!(run(&mut p, &mut w, 25).summary.starts_with("restarted"));
}

/// Someone deletes the profile `name` (a finalizer keeps it for now).
fn being_deleted(w: &mut World, name: &str) {
    w.profiles
        .get_mut(name)
        .unwrap()
        .metadata
        .deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Default::default(),
    ));
}

// Q1: the new hashes are recorded only together with the restart.
#[test]
fn restart_waits_for_a_profile_being_deleted_without_recording_hashes() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    being_deleted(&mut w, "kyverno-dev");
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("9");
    let before = p.status.clone();
    let d = run(&mut p, &mut w, 1);
    assert_eq!(d.status, None);
    assert_eq!(p.status, before);
    assert!(d.actions.is_empty());
}

// Q19: re-applying with an extra chart really updates the profile.
#[test]
fn profile_follows_profile_spec_and_repairs_drift() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    // A field the API server defaulted is not drift; a changed field promoter sets is.
    w.profiles
        .get_mut("kyverno-dev")
        .unwrap()
        .spec
        .fields
        .insert("tier".into(), json!(100));
    assert!(
        decide(&p, &w, &HealthResults::new(), &ctx(1))
            .actions
            .is_empty()
    );
    w.profiles
        .get_mut("kyverno-dev")
        .unwrap()
        .spec
        .fields
        .insert("syncMode".into(), json!("DryRun"));
    let d = run(&mut p, &mut w, 1);
    // The repair is recorded first: Sveltos redeploys what a syncMode change touches.
    assert!(
        matches!(&d.actions[0], Action::Record(ops) if matches!(&ops[..],
        [RecordOp::Redeploy { profile, record }] if profile == "kyverno-dev"
            && record.expect() == crate::sveltos::redeploy::Expect::Features(7)))
    );
    assert!(matches!(&d.actions[1], Action::Apply(x) if x.name == "kyverno-dev"));
    assert_eq!(
        w.profiles["kyverno-dev"].spec.fields["syncMode"],
        "Continuous"
    );
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterProfile kyverno-dev was applied in this pass.")
    );
}

// Q3 and Q4: checks are evaluated by promoter, never appended to the profile, and gate manual
// triggers exactly as auto ones.
#[test]
fn health_checks_gate_auto_and_manual_alike() {
    for trigger in [
        json!({"auto": {"postDelayHealthChecks": [{"name": "c", "featureID": "Helm"}]}}),
        json!({"manual": {"approved": true, "postDelayHealthChecks": [{"name": "c", "featureID": "Helm"}]}}),
    ] {
        let mut p = promotion(
            json!([{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": trigger}, {"name": "prod"}]),
        );
        let mut w = fleet();
        run(&mut p, &mut w, 0);
        assert!(
            !w.profiles["kyverno-dev"]
                .spec
                .fields
                .contains_key("validateHealths")
        );
        summarize(&mut w, "kyverno-dev", "Provisioned");
        let d = decide(&p, &w, &HealthResults::new(), &ctx(1));
        assert_eq!(d.needs_health.as_deref(), Some("dev"));
        let failing = HealthResults::from([(
            "dev".to_string(),
            HealthVerdict::Failing("cluster dev/dev01: check c: Deployment x not ready".into()),
        )]);
        let d = decide(&p, &w, &failing, &ctx(1));
        apply(&mut p, &mut w, &d);
        assert_eq!(
            description(&p, "dev"),
            "Awaiting Health Checks to Pass (2026-02-16T06:01:00Z)"
        );
        assert_eq!(
            stage_status(&p, "dev").failure_message.as_deref(),
            Some("cluster dev/dev01: check c: Deployment x not ready")
        );
        let passed = HealthResults::from([("dev".to_string(), HealthVerdict::Passed)]);
        let d = decide(&p, &w, &passed, &ctx(2));
        assert_eq!(d.summary, "promoted dev -> prod");
        // A deployment that regresses after provisioning blocks the manual trigger too.
        let mut p2 = p.clone();
        p2.status = d.status.clone().map(|mut s| {
            s.current_stage_name = Some("dev".into());
            s.stages.as_mut().unwrap().truncate(1);
            s.stages.as_mut().unwrap()[0].current_status_description = None;
            s
        });
        summarize(&mut w, "kyverno-dev", "Provisioning");
        let d = decide(&p2, &w, &passed, &ctx(3));
        assert_eq!(d.phase, Phase::Progressing);
        assert!(d.summary.contains("not yet provisioned"));
    }
}

#[test]
fn promotion_window_holds_until_it_opens() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"promotionWindow": {"from": "0 7 * * *", "to": "0 8 * * *"}}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = run(&mut p, &mut w, 1);
    assert_eq!(
        description(&p, "dev"),
        "Window Closed: Waiting for Next Schedule (2026-02-16T07:00:00Z). (2026-02-16T06:01:00Z)"
    );
    assert_eq!(d.next_check, Some(t(60)));
    assert!(!run(&mut p, &mut w, 30).writes());
    assert_eq!(run(&mut p, &mut w, 60).summary, "promoted dev -> prod");
}

#[test]
fn invalid_window_is_an_error_in_status_not_silence() {
    let mut p = promotion(json!([
        {"name": "dev", "trigger": {"auto": {"promotionWindow": {"from": "0 25 * * *", "to": "0 8 * * *"}}}},
        {"name": "prod"}
    ]));
    let mut w = fleet();
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    let msg = stage_status(&p, "dev").failure_message.clone().unwrap();
    assert_eq!(
        msg,
        "spec.stages[0].trigger.auto.promotionWindow.from: \"0 25 * * *\": hour: end of range (25) above maximum (23): 25"
    );
    assert!(
        d.actions.iter().all(|a| !matches!(a, Action::Apply(_))),
        "creates nothing"
    );
    assert!(p.status.as_ref().unwrap().profile_spec_hash.is_none());
    assert!(
        !run(&mut p, &mut w, 1).writes(),
        "the same error is not rewritten"
    );
}

// Q13: a generated name that is not a valid label value.
#[test]
fn invalid_generated_name_creates_nothing() {
    let mut p =
        promotion(json!([{"name": "a-very-long-stage-name-that-goes-on-and-on-and-on-and-on"}]));
    let mut w = fleet();
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(
        d.summary
            .contains("is 64 characters long; a label value allows at most 63"),
        "{}",
        d.summary
    );
    assert!(w.profiles.is_empty());
}

// Q11: a cluster selected by two stages.
#[test]
fn a_cluster_in_two_stages_is_an_error_naming_both() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    w.clusters.push(InventoryCluster {
        labels: [
            ("env".to_string(), "dev".to_string()),
            ("tier".into(), "x".into()),
        ]
        .into(),
        ..cluster("dev", "both")
    });
    p.spec.stages[2].cluster_selector = serde_json::from_value(
        json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
    )
    .unwrap();
    let d = run(&mut p, &mut w, 0);
    assert_eq!(d.phase, Phase::Blocked);
    assert!(d.summary.contains("cluster dev/both (SveltosCluster) is selected by more than one stage: \"dev\" and \"production\""), "{}", d.summary);
    assert!(d.events.iter().any(|e| e.warning));
}

// Q5: consuming touches only the approved stage; a pass killed after consuming (before the status
// write) leaves a grant that lets this run, and only this run, through.
#[test]
fn a_consumed_approval_is_a_grant_for_one_run() {
    let (mut p, mut w) = staging_approved();
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    let staging = |d: &Decision| {
        d.approved
            .iter()
            .map(|a| a.stage.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(staging(&d), ["staging"], "let through on its approval");
    // Killed after the record patch: the status is not written.
    let Some(Action::Record(ops)) = d.actions.first() else {
        panic!("{:?}", d.actions)
    };
    apply_records(&mut p, ops);
    assert_eq!(p.spec.stages[1].manual_approval(), None);
    let d = run(&mut p, &mut w, 5);
    assert_eq!(d.summary, "promoted staging -> production");
    assert!(
        !d.actions.iter().any(|a| matches!(a, Action::Record(_))),
        "nothing to consume again"
    );
    // The pass that really lets it through says so (the dead one's status write never happened).
    assert_eq!(staging(&d), ["staging"]);
    assert_eq!(d.stage.as_deref(), Some("production"));
    assert!(run(&mut p, &mut w, 6).approved.is_empty());
}
// Upstream case 14 and Q9.
#[test]
fn deletion_cleans_up_or_preserves() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    run(&mut p, &mut w, 3);
    assert_eq!(w.profiles.len(), 2);
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Default::default(),
    ));
    let mut preserve = p.clone();
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    assert_eq!(
        d.actions,
        vec![
            Action::Delete {
                name: "kyverno-dev".into()
            },
            Action::Delete {
                name: "kyverno-staging".into()
            }
        ]
    );
    assert_eq!(d.phase, Phase::Deleting);
    let mut w2 = w.clone();
    apply(&mut p, &mut w2, &d);
    assert_eq!(
        decide(&p, &w2, &HealthResults::new(), &ctx(5)).actions,
        vec![Action::RemoveFinalizer]
    );
    preserve.spec.preserve_cluster_profiles_on_delete = Some(true);
    let d = decide(&preserve, &w, &HealthResults::new(), &ctx(4));
    assert_eq!(
        d.actions,
        vec![
            Action::Disown {
                name: "kyverno-dev".into()
            },
            Action::Disown {
                name: "kyverno-staging".into()
            },
            Action::RemoveFinalizer
        ]
    );
}

#[test]
fn stale_profiles_of_removed_stages_are_deleted() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let mut stray = w.profiles["kyverno-dev"].clone();
    stray.metadata.name = Some("kyverno-old".into());
    w.profiles.insert("kyverno-old".into(), stray);
    let mut foreign = w.profiles["kyverno-dev"].clone();
    foreign.metadata.name = Some("kyverno-mine".into());
    // Not generated by promoter: no owner reference and no promoter.dev/promotion-uid marker.
    foreign.metadata.owner_references = None;
    foreign.metadata.annotations = None;
    w.profiles.insert("kyverno-mine".into(), foreign);
    let d = run(&mut p, &mut w, 1);
    assert!(
        d.actions.is_empty(),
        "nothing removed before the status write"
    );
    assert_eq!(
        d.after_status,
        vec![Action::Delete {
            name: "kyverno-old".into()
        }]
    );
}

#[test]
fn preverification_profile_must_deploy_before_promotion() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"delay": "1m", "preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "default", "name": "job"}]}}},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-dev", "Provisioned");
    run(&mut p, &mut w, 1);
    assert!(
        !w.profiles.contains_key("preverification-kyverno-dev"),
        "not before the delay"
    );
    run(&mut p, &mut w, 2);
    assert!(w.profiles.contains_key("preverification-kyverno-dev"));
    assert_eq!(
        description(&p, "dev"),
        "Running Post-Promotion Health Checks (2026-02-16T06:02:00Z)"
    );
    summarize(&mut w, "preverification-kyverno-dev", "Provisioned");
    let d = run(&mut p, &mut w, 3);
    assert_eq!(d.summary, "promoted dev -> prod");
    assert!(
        !w.profiles.contains_key("preverification-kyverno-dev"),
        "deleted when advancing"
    );
}

#[test]
fn last_stage_trigger_is_honoured() {
    let mut p = promotion(
        json!([{"name": "only", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "5m"}}}]),
    );
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    summarize(&mut w, "kyverno-only", "Provisioned");
    assert_eq!(run(&mut p, &mut w, 1).phase, Phase::Soaking);
    assert_eq!(run(&mut p, &mut w, 6).phase, Phase::Complete);
}

#[test]
fn nothing_panics_on_degenerate_input() {
    let mut p = promotion(json!([]));
    let w = fleet();
    assert_eq!(
        decide(&p, &w, &HealthResults::new(), &ctx(0)).phase,
        Phase::Blocked
    );
    p.spec.stages = serde_json::from_value(json!([{"name": "a"}, {"name": "a"}])).unwrap();
    p.status = Some(ClusterPromotionStatus {
        current_stage_name: Some("zzz".into()),
        ..Default::default()
    });
    assert_eq!(
        decide(&p, &w, &HealthResults::new(), &ctx(0)).phase,
        Phase::Blocked
    );
    p.spec.stages = serde_json::from_value(json!([{"name": "a"}])).unwrap();
    p.metadata.name = None;
    let _ = decide(&p, &w, &HealthResults::new(), &ctx(0));
}

/// Every kind of wait is quiet: a second pass that learns nothing new writes nothing.
#[test]
fn every_wait_is_quiet() {
    let checks = json!([{"name": "c", "featureID": "Helm"}]);
    let cases = [
        (
            json!({"auto": {"postDelayHealthChecks": checks}}),
            HealthVerdict::Failing("cluster dev/dev01: check c: not ready".into()),
        ),
        (
            json!({"auto": {"postDelayHealthChecks": checks}}),
            HealthVerdict::NotEvaluated("no engine".into()),
        ),
        (
            json!({"auto": {"preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "d", "name": "j"}]}}),
            HealthVerdict::Passed,
        ),
        (
            json!({"auto": {"promotionWindow": {"from": "0 7 * * *", "to": "0 8 * * *"}}}),
            HealthVerdict::Passed,
        ),
        (json!({"manual": {}}), HealthVerdict::Passed),
        (json!({"auto": {"delay": "1h"}}), HealthVerdict::Passed),
    ];
    for (trigger, verdict) in cases {
        let mut p = promotion(
            json!([{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": trigger}, {"name": "prod"}]),
        );
        let mut w = fleet();
        run(&mut p, &mut w, 0);
        summarize(&mut w, "kyverno-dev", "Provisioned");
        let health = HealthResults::from([("dev".to_string(), verdict.clone())]);
        for min in 1..4 {
            let d = decide(&p, &w, &health, &ctx(min));
            apply(&mut p, &mut w, &d);
        }
        let d = decide(&p, &w, &health, &ctx(5));
        assert!(!d.writes(), "{trigger} / {verdict:?}: {d:#?}");
        assert_ne!(d.phase, Phase::Progressing, "{trigger}: {}", d.summary);
    }
}

#[test]
fn a_paused_promotion_is_left_alone_and_says_so() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    p.metadata.annotations = Some(
        [(
            crate::annotations::PAUSED.to_string(),
            r#"{"by":"alice","at":"2026-02-16T06:00:30Z"}"#.to_string(),
        )]
        .into(),
    );
    summarize(&mut w, "kyverno-dev", "Provisioned");
    let d = run(&mut p, &mut w, 1);
    assert_eq!(d.phase, Phase::Paused);
    assert!(d.actions.is_empty());
    assert_eq!(
        description(&p, "dev"),
        "Paused: promotion paused by alice since 2026-02-16T06:00:30Z (2026-02-16T06:01:00Z)"
    );
    assert!(!run(&mut p, &mut w, 2).writes(), "said once");
    // Even deletion waits for resume.
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Default::default(),
    ));
    assert!(
        decide(&p, &w, &HealthResults::new(), &ctx(3))
            .actions
            .is_empty()
    );
    p.metadata.deletion_timestamp = None;
    p.metadata.annotations = None;
    assert_eq!(
        run(&mut p, &mut w, 4).phase,
        Phase::Soaking,
        "resumed: soaking"
    );
}

#[test]
fn an_approval_for_another_revision_is_ignored() {
    let (mut p, mut w) = staging_approved();
    let record =
        |rev: &str| format!(r#"{{"by":"bob","at":"2026-02-16T06:04:00Z","revision":"{rev}"}}"#);
    p.metadata.annotations =
        Some([(crate::annotations::approval_key("staging"), record("b2xk"))].into());
    let d = run(&mut p, &mut w, 4);
    assert_eq!(d.phase, Phase::AwaitingApproval);
    assert_eq!(
        stage_status(&p, "staging").failure_message.as_deref(),
        Some(
            format!(
                "the approval by bob at 2026-02-16T06:04:00Z was for revision {}, an earlier revision of the profileSpec, and was withdrawn; approve again",
                crate::api::revision_id("b2xk")
            )
            .as_str()
        )
    );
    // Withdrawn together with its record, so that a hand approval works again (issue 14 review).
    assert!(matches!(&d.actions[..], [Action::Record(ops)]
        if matches!(ops[..], [RecordOp::WithdrawApproval { index: 1, .. }])));
    assert_eq!(p.spec.stages[1].manual_approval(), None);
    assert_eq!(crate::annotations::approval(&p, "staging"), None);
    set_approved(&mut p, 1, Some(true));
    assert_eq!(
        decide(&p, &w, &HealthResults::new(), &ctx(5)).summary,
        "promoted staging -> production",
        "approved by hand after the withdrawal"
    );
    // Recorded for the current revision: it counts. Set by hand (no record): it counts too.
    let current = p
        .status
        .as_ref()
        .unwrap()
        .profile_spec_hash
        .clone()
        .unwrap();
    p.metadata.annotations = Some(
        [(
            crate::annotations::approval_key("staging"),
            record(&current),
        )]
        .into(),
    );
    assert_eq!(
        decide(&p, &w, &HealthResults::new(), &ctx(5)).summary,
        "promoted staging -> production"
    );
    p.metadata.annotations = None;
    assert_eq!(
        decide(&p, &w, &HealthResults::new(), &ctx(5)).summary,
        "promoted staging -> production"
    );
}

// ---- Issue 14: gates that hold. Each test failed before the fix. ----

/// The profileSpec's chart version: a new revision.
fn new_revision(p: &mut ClusterPromotion, version: &str) {
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!(version);
}

/// Runs passes (Sveltos provisioning every profile in between) until the promotion reaches `stage`
/// and waits there, or completes.
fn run_to(p: &mut ClusterPromotion, w: &mut World, from: i64, stage: &str) -> (i64, Decision) {
    for min in from..from + 60 {
        let d = run(p, w, min);
        for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
            summarize(w, &name, "Provisioned");
        }
        let here = p
            .status
            .as_ref()
            .and_then(|s| s.current_stage_name.as_deref())
            == Some(stage);
        if here && matches!(d.phase, Phase::AwaitingApproval | Phase::Complete) {
            return (min, d);
        }
    }
    panic!("never reached {stage}: {:?}", p.status);
}

/// Problem 1: the consumed approval must not let the next revision through, even when the pass
/// that consumed it was killed right after the status write (nothing after it ran).
#[test]
fn issue14_p1_a_consumed_approval_never_approves_the_next_revision() {
    let (mut p, mut w) = staging_approved();
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    assert_eq!(d.summary, "promoted staging -> production");
    // Killed after the status write: only `actions` and the status happened.
    let killed = Decision {
        after_status: Vec::new(),
        ..d
    };
    apply(&mut p, &mut w, &killed);
    new_revision(&mut p, "3.6.2");
    let (_, d) = run_to(&mut p, &mut w, 5, "staging");
    assert_eq!(d.phase, Phase::AwaitingApproval, "{}", d.summary);
}

/// Problem 1, last stage: its approval is consumed too, and never reused after completion.
#[test]
fn issue14_p1_last_stage_approval_is_consumed_once() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"manual": {}}}
    ]));
    let mut w = fleet();
    let (min, _) = run_to(&mut p, &mut w, 0, "production");
    set_approved(&mut p, 1, Some(true));
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::Complete);
    assert_eq!(p.spec.stages[1].manual_approval(), None);
    new_revision(&mut p, "3.6.2");
    let (_, d) = run_to(&mut p, &mut w, min + 2, "production");
    assert_eq!(d.phase, Phase::AwaitingApproval);
}

/// Problem 3: after one `promoter approve`, a hand approval at the next revision still works.
#[test]
fn issue14_p3_hand_approval_works_after_promoter_approve() {
    let (mut p, mut w) = staging_approved();
    let revision = p.status.as_ref().unwrap().profile_spec_hash.clone();
    let record = crate::annotations::Record {
        by: "bob".into(),
        at: "2026-02-16T06:03:30Z".into(),
        revision,
        reason: None,
    };
    p.metadata.annotations = Some(
        [(
            crate::annotations::approval_key("staging"),
            serde_json::to_string(&record).unwrap(),
        )]
        .into(),
    );
    assert_eq!(
        run(&mut p, &mut w, 4).summary,
        "promoted staging -> production"
    );
    assert_eq!(
        crate::annotations::approval(&p, "staging"),
        None,
        "consumed with it"
    );
    new_revision(&mut p, "3.6.2");
    let (min, _) = run_to(&mut p, &mut w, 5, "staging");
    set_approved(&mut p, 1, Some(true)); // kubectl patch
    assert_eq!(
        run(&mut p, &mut w, min + 1).summary,
        "promoted staging -> production"
    );
}

/// Problem 3: a record whose approval was revoked by hand is dropped.
#[test]
fn issue14_p3_revoked_approval_record_is_dropped() {
    let (mut p, w) = staging_approved();
    set_approved(&mut p, 1, None);
    p.metadata.annotations = Some(
        [(
            crate::annotations::approval_key("staging"),
            r#"{"by":"bob","at":"x","revision":"old"}"#.into(),
        )]
        .into(),
    );
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    assert_eq!(
        d.actions,
        [Action::Record(vec![RecordOp::ForgetApprovalRecord {
            stage: "staging".into()
        }])]
    );
}

/// Problem 4: approving an already-passed stage for the next release is kept, and used then.
#[test]
fn issue14_p4_pre_approval_is_kept_for_the_next_revision() {
    let (mut p, mut w) = staging_approved();
    let (min, _) = run_to(&mut p, &mut w, 4, "production");
    set_approved(&mut p, 1, Some(true)); // pre-approval of staging
    for m in min + 1..min + 5 {
        run(&mut p, &mut w, m);
        assert_eq!(p.spec.stages[1].manual_approval(), Some(true), "kept");
    }
    new_revision(&mut p, "3.6.2");
    let (_, d) = run_to(&mut p, &mut w, min + 5, "production");
    assert_eq!(
        d.phase,
        Phase::Complete,
        "the pre-approval let the new revision through"
    );
    assert_eq!(p.spec.stages[1].manual_approval(), None, "consumed by it");
}

/// Problem 5: a completed rollout stays complete through pause/resume and a blocked pass.
#[test]
fn issue14_p5_completion_is_recorded_not_read_from_text() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"manual": {}}}
    ]));
    let mut w = fleet();
    let (min, _) = run_to(&mut p, &mut w, 0, "production");
    set_approved(&mut p, 1, Some(true));
    assert_eq!(run(&mut p, &mut w, min + 1).phase, Phase::Complete);
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(crate::annotations::PAUSED.into(), "alice".into());
    assert_eq!(run(&mut p, &mut w, min + 2).phase, Phase::Paused);
    p.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(crate::annotations::PAUSED);
    let d = run(&mut p, &mut w, min + 3);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert_eq!(
        description(&p, "production"),
        format!("Successfully provisioned ({})", Timestamp::new(t(min + 3)))
    );
    assert!(!run(&mut p, &mut w, min + 4).writes());
}

/// Problem 5, upgrade: a rollout completed before completions were recorded is recognised once.
#[test]
fn issue14_p5_legacy_completion_is_adopted_once() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}, "trigger": {"manual": {}}}
    ]));
    let mut w = fleet();
    let (min, _) = run_to(&mut p, &mut w, 0, "production");
    set_approved(&mut p, 1, Some(true));
    run(&mut p, &mut w, min + 1);
    p.metadata.annotations = None; // as upstream leaves it
    let d = run(&mut p, &mut w, min + 2);
    assert_eq!(d.phase, Phase::Complete);
    // Recorded once, with its revision stored and added to the history (so it can be rolled
    // back to).
    assert!(
        matches!(&d.actions[..], [Action::StoreRevision(_), Action::Record(ops)]
            if matches!(ops[..], [RecordOp::History(_), RecordOp::Complete(_)]))
    );
    apply(&mut p, &mut w, &d);
    assert!(!run(&mut p, &mut w, min + 3).writes());
}

/// Problem 5: once promoter records completions, a record of another run means the current one
/// is not complete, whatever the last stage's status text says (a text pause/resume or an earlier
/// run left): the stage is judged again, here by summaries that failed.
#[test]
fn issue14_p5_a_record_of_another_run_is_no_legacy_completion() {
    let mut p = promotion(three_stages());
    set_approved(&mut p, 1, Some(true));
    let mut w = fleet();
    let (min, d) = run_to(&mut p, &mut w, 0, "production");
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    let mut other = crate::annotations::completed(&p).unwrap();
    other.revision = "another-revision".into();
    p.metadata.annotations.as_mut().unwrap().insert(
        crate::annotations::COMPLETED.into(),
        serde_json::to_string(&other).unwrap(),
    );
    assert!(description(&p, "production").starts_with("Successfully provisioned"));
    summarize(&mut w, "kyverno-production", "Failed");
    let d = run(&mut p, &mut w, min + 1);
    assert_ne!(d.phase, Phase::Complete, "{}", d.summary);
    assert_ne!(
        crate::annotations::completed(&p),
        Some(Run::of(p.status.as_ref().unwrap()).unwrap())
    );
}

/// The blog's three stages with `production` as given, staging approved, played up to the pass
/// that completes the rollout, whose record patch (and the revision before it) alone was written:
/// its status write did not land. Returns the minute of that pass and its decision.
fn completion_without_its_status(production: Value) -> (ClusterPromotion, World, i64, Decision) {
    let mut stages = three_stages();
    stages[2] = production;
    let mut p = promotion(stages);
    set_approved(&mut p, 1, Some(true));
    let mut w = fleet();
    let mut min = 0;
    let completing = loop {
        w.now = Some(t(min));
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min));
        if d.phase == Phase::Complete {
            break d;
        }
        apply(&mut p, &mut w, &d);
        for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
            summarize(&mut w, &name, "Provisioned");
        }
        min += 1;
        assert!(min < 60, "never completed: {:?}", p.status);
    };
    let lost = Decision {
        status: None,
        after_status: Vec::new(),
        ..completing.clone()
    };
    apply(&mut p, &mut w, &lost);
    assert!(is_complete(&p));
    (p, w, min, completing)
}

/// The pass that recorded the completion did not write the status that goes with it (the
/// answer to its record patch was lost and it stopped, its status write was reset before the
/// server read it, or it was killed in between): the next pass trusts the record, and writes the
/// status the completing pass would have written, at the time that pass recorded, with the
/// Events it owed (its notifications went with the record). It used to write "Successfully
/// provisioned" at its own time, without the last stage's lastSuccessfulAppliedTime when the
/// completing pass had also found the stage provisioned, and never wrote it again (issue 45).
#[test]
fn a_completion_recorded_without_its_status_is_shown_as_the_completing_pass_would_have() {
    for production in [
        json!({"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}),
        json!({"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}},
            "trigger": {"auto": {"delay": "2m"}}}),
    ] {
        let (mut p, mut w, min, completing) = completion_without_its_status(production.clone());
        w.now = Some(t(min + 1));
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 1));
        assert_eq!(d.phase, Phase::Complete, "{production}: {}", d.summary);
        assert_eq!(
            d.status, completing.status,
            "{production}: the status the completing pass would have written"
        );
        let said = |d: &Decision| -> Vec<(String, String)> {
            d.events
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone()))
                .collect()
        };
        assert_eq!(said(&d), said(&completing), "{production}");
        assert!(
            d.events.iter().all(|e| e.owed),
            "{production}: notified with the record already"
        );
        apply(&mut p, &mut w, &d);
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min + 2));
        assert!(!d.writes(), "{production}: steady: {d:?}");
    }
}

/// The same, with a pause before the next pass: the paused pass shows the completion (and owes
/// its Events) under its own description, so that the resume finds the completed run shown, with
/// the last stage passed at the time the completing pass recorded.
#[test]
fn a_completion_recorded_without_its_status_is_shown_by_a_paused_pass_too() {
    let (mut p, mut w, min, _) = completion_without_its_status(
        json!({"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}},
            "trigger": {"auto": {"delay": "2m"}}}),
    );
    // Found deployed before the completing pass: the time it keeps.
    let deployed = stage_status(&p, "production").last_successful_applied_time;
    assert!(deployed.is_some_and(|d| d < Timestamp::new(t(min))));
    p.metadata
        .annotations
        .get_or_insert_default()
        .insert(crate::annotations::PAUSED.into(), "alice".into());
    let d = run(&mut p, &mut w, min + 1);
    assert_eq!(d.phase, Phase::Paused);
    assert_eq!(
        d.events
            .iter()
            .map(|e| (e.reason.as_str(), e.owed))
            .collect::<Vec<_>>(),
        [("RolloutComplete", true)],
        "the stage was provisioned before: only the completion is owed"
    );
    p.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(crate::annotations::PAUSED);
    let d = run(&mut p, &mut w, min + 2);
    assert_eq!(d.phase, Phase::Complete);
    assert!(d.events.is_empty(), "{:?}", d.events);
    let e = stage_status(&p, "production");
    assert_eq!(e.last_successful_applied_time, deployed);
    assert_eq!(
        e.current_status_description.as_deref(),
        Some(format!("Successfully provisioned ({})", Timestamp::new(t(min + 2))).as_str())
    );
}

/// Problem 6: nothing that changes what a cluster runs precedes the status write.
#[test]
fn issue14_p6_next_stage_profile_and_preverification_follow_the_status_write() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
         "trigger": {"auto": {"preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "default", "name": "job"}]}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    let mut w = fleet();
    let mut promoted = None;
    for min in 0..10 {
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min));
        for a in &d.actions {
            assert!(
                !matches!(a, Action::Delete { .. })
                    && !matches!(a, Action::Apply(x) if x.name == "kyverno-production"),
                "before the status write: {a:?}"
            );
        }
        apply(&mut p, &mut w, &d);
        for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
            summarize(&mut w, &name, "Provisioned");
        }
        if d.summary.starts_with("promoted") {
            assert!(d.after_status.iter().any(
                |a| matches!(a, Action::Delete { name } if name == "preverification-kyverno-dev")
            ));
            promoted = Some(min);
        }
    }
    assert!(promoted.is_some());
}

/// Problem 6: a pass that dies after its first write every time still makes progress.
#[test]
fn issue14_p6_a_pass_dying_after_one_write_progresses() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    set_approved(&mut p, 1, Some(true));
    for min in 0..80 {
        let d = decide(&p, &w, &HealthResults::new(), &ctx(min));
        // Only the first write of the pass happens. Storing a revision that is stored already is
        // no write (the API server answers AlreadyExists).
        let first = d
            .actions
            .iter()
            .find(|a| !matches!(a, Action::StoreRevision(r) if w.revisions.get(r.metadata.name.as_deref().unwrap_or_default()).is_some_and(Option::is_some)))
            .cloned();
        let killed = match first {
            Some(a) => Decision {
                actions: vec![a],
                status: None,
                after_status: Vec::new(),
                ..d
            },
            None => Decision {
                after_status: d
                    .after_status
                    .iter()
                    .take(usize::from(d.status.is_none()))
                    .cloned()
                    .collect(),
                ..d
            },
        };
        apply(&mut p, &mut w, &killed);
        for name in w.profiles.keys().cloned().collect::<Vec<_>>() {
            summarize(&mut w, &name, "Provisioned");
        }
        if is_complete(&p) {
            return;
        }
    }
    panic!("no progress: {:?}", p.status);
}

/// Problem 7: reordering an order-significant list restarts at stage 1 and leaves the reached
/// stages' profiles as they were promoted.
#[test]
fn issue14_p7_reorder_is_a_new_revision_from_stage_one() {
    let mut p = promotion(json!([
        {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
        {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}}
    ]));
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"] = json!([
        {"repositoryURL": "https://a", "releaseName": "a", "releaseNamespace": "a"},
        {"repositoryURL": "https://b", "releaseName": "b", "releaseNamespace": "b"}
    ]);
    let mut w = fleet();
    run_to(&mut p, &mut w, 0, "production");
    let prod_before = w.profiles["kyverno-production"].spec.fields.clone();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"]
        .as_array_mut()
        .unwrap()
        .reverse();
    let d = run(&mut p, &mut w, 30);
    assert!(d.summary.starts_with("restarted"), "{}", d.summary);
    assert_eq!(w.profiles["kyverno-production"].spec.fields, prod_before);
    // Tenant labels too.
    run_to(&mut p, &mut w, 31, "production");
    p.metadata.labels = Some(
        [(
            crate::api::sveltos::SERVICE_ACCOUNT_NAME_LABEL.to_string(),
            "eng".to_string(),
        )]
        .into(),
    );
    let before = w.profiles["kyverno-production"].metadata.labels.clone();
    let d = run(&mut p, &mut w, 70);
    assert!(d.summary.starts_with("restarted"), "{}", d.summary);
    assert_eq!(w.profiles["kyverno-production"].metadata.labels, before);
}

/// A grant whose run is superseded before its promotion was recorded is given back when the new
/// run is of the same revision (here: a stage's selector changed, the profileSpec did not).
#[test]
fn issue14_unused_grant_is_given_back_to_a_run_of_the_same_revision() {
    let (mut p, mut w) = staging_approved();
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    let Some(Action::Record(ops)) = d.actions.first() else {
        panic!()
    };
    apply_records(&mut p, ops); // killed before the status write
    p.spec.stages[2].cluster_selector = serde_json::from_value(json!({"matchLabels": {"env": "prod"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]})).unwrap();
    let d = run(&mut p, &mut w, 5);
    assert!(d.summary.starts_with("restarted"));
    assert!(
        matches!(&d.actions[..], [Action::Record(ops)] if matches!(ops[..], [RecordOp::RestoreApproval { index: 1, .. }]))
    );
    assert_eq!(p.spec.stages[1].manual_approval(), Some(true));
    assert_eq!(crate::annotations::grant(&p, "staging"), None);
}

/// ... but never to a new revision: an approval consumed for revision H1 does not approve H2
/// (issue 14 review: the restore handed it back as `approved: true`).
#[test]
fn issue14_unused_grant_is_not_given_to_a_new_revision() {
    let (mut p, mut w) = staging_approved();
    let d = decide(&p, &w, &HealthResults::new(), &ctx(4));
    let Some(Action::Record(ops)) = d.actions.first() else {
        panic!()
    };
    apply_records(&mut p, ops); // killed before the status write
    new_revision(&mut p, "3.6.2");
    let d = run(&mut p, &mut w, 5);
    assert!(d.summary.starts_with("restarted"));
    // Nothing but what Sveltos redeploys for stage 1's new spec is recorded.
    assert!(
        !d.actions.iter().any(|a| matches!(a, Action::Record(ops)
            if ops.iter().any(|op| !matches!(op, RecordOp::Redeploy { .. })))),
        "{:?}",
        d.actions
    );
    assert_eq!(p.spec.stages[1].manual_approval(), None);
    let (_, d) = run_to(&mut p, &mut w, 6, "staging");
    assert_eq!(d.phase, Phase::AwaitingApproval, "{}", d.summary);
}

// ---- Taking over statuses another writer recorded (upgrade from an earlier promoter, or from
// Sveltos' own controller). Each failed before: the hash differed, so the rollout restarted. ----

/// Two charts out of upstream's sort order: the earlier promoter's (sorted) hash differs from the
/// revision hash.
fn out_of_sort_order() -> ClusterPromotion {
    let mut p = promotion(three_stages());
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"] = json!([
        {"repositoryURL": "https://b", "releaseName": "b", "releaseNamespace": "b"},
        {"repositoryURL": "https://a", "releaseName": "a", "releaseNamespace": "a"}
    ]);
    p
}

/// A completed rollout as the given writer left it: status hashes of that writer, no promoter
/// records.
fn completed_by(ps: &str, st: &str) -> (ClusterPromotion, World) {
    completed_as(promotion(three_stages()), ps, st)
}

fn completed_as(mut p: ClusterPromotion, ps: &str, st: &str) -> (ClusterPromotion, World) {
    set_approved(&mut p, 1, Some(true));
    let mut w = fleet();
    let (_, d) = run_to(&mut p, &mut w, 0, "production");
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    let status = p.status.as_mut().unwrap();
    status.profile_spec_hash = Some(ps.into());
    status.stages_hash = Some(st.into());
    p.metadata.annotations = None;
    (p, w)
}

#[test]
fn a_rollout_completed_by_an_earlier_promoter_stays_complete() {
    let p0 = out_of_sort_order();
    let legacy = crate::hash::profile_spec_hash(p0.spec.profile_spec.as_ref());
    assert_ne!(legacy, revision_hash(&p0));
    let st = stages_hash(&p0.spec.stages);
    let (mut p, mut w) = completed_as(p0, &legacy, &st);
    let d = run(&mut p, &mut w, 200);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert!(
        d.after_status.is_empty(),
        "nothing re-applied: {:?}",
        d.after_status
    );
    assert!(
        d.events
            .iter()
            .any(|e| e.message.contains("earlier promoter")),
        "{:?}",
        d.events
    );
    let status = p.status.clone().unwrap();
    assert_eq!(status.profile_spec_hash, Some(revision_hash(&p)));
    assert_eq!(crate::annotations::completed(&p), Run::of(&status));
    assert!(!run(&mut p, &mut w, 201).writes(), "quiet from then on");
}

#[test]
fn a_rollout_completed_by_upstream_stays_complete() {
    let p0 = promotion(three_stages());
    // The profile hash upstream wrote is not promoter's; only its stages hash can be recomputed.
    let (mut p, mut w) = completed_by(
        "733VG+o3aBR450lx7xW7VEDjNQr4syJT5pukWmJo3c4=",
        &crate::hash::upstream_stages_hash(&p0.spec.stages),
    );
    // Upstream wrote the profiles through Go types and without promoter's annotations.
    for cp in w.profiles.values_mut() {
        cp.spec.fields = crate::sveltos::normal_form::normalize(&cp.spec.fields);
        cp.metadata.annotations = Some(
            [(
                crate::api::sveltos::STAGE_NAME_ANNOTATION.to_string(),
                "x".to_string(),
            )]
            .into(),
        );
    }
    let d = run(&mut p, &mut w, 200);
    assert_eq!(d.phase, Phase::Complete, "{}", d.summary);
    assert!(d.events.iter().any(|e| e.message.contains("Sveltos")));
    assert_eq!(
        p.status.as_ref().unwrap().profile_spec_hash,
        Some(revision_hash(&p))
    );
    assert!(!run(&mut p, &mut w, 201).writes(), "quiet from then on");
}

#[test]
fn a_takeover_needs_every_reached_stage_to_run_the_current_spec() {
    let p0 = promotion(three_stages());
    let upstream = crate::hash::upstream_stages_hash(&p0.spec.stages);
    // Production still runs an older chart: the spec changed after upstream's last pass.
    let (mut p, mut w) = completed_by("x", &upstream);
    w.profiles
        .get_mut("kyverno-production")
        .unwrap()
        .spec
        .fields["helmCharts"][0]["chartVersion"] = json!("3.4.0");
    assert!(run(&mut p, &mut w, 200).summary.starts_with("restarted"));
    // A reorder the legacy hash cannot see is a new revision too.
    let mut two = promotion(three_stages());
    two.spec.profile_spec.as_mut().unwrap().0["helmCharts"] = json!([
        {"repositoryURL": "https://a", "releaseName": "a", "releaseNamespace": "a"},
        {"repositoryURL": "https://b", "releaseName": "b", "releaseNamespace": "b"}
    ]);
    set_approved(&mut two, 1, Some(true));
    let mut w = fleet();
    run_to(&mut two, &mut w, 0, "production");
    two.spec.profile_spec.as_mut().unwrap().0["helmCharts"]
        .as_array_mut()
        .unwrap()
        .reverse();
    let status = two.status.as_mut().unwrap();
    status.profile_spec_hash = Some(crate::hash::profile_spec_hash(
        two.spec.profile_spec.as_ref(),
    ));
    two.metadata.annotations = None;
    assert!(run(&mut two, &mut w, 200).summary.starts_with("restarted"));
    // A stage added at the end of a rollout promoter recorded is a new stages hash: a restart.
    let (mut p, mut w) = completed_by("x", "y");
    p.status.as_mut().unwrap().profile_spec_hash = Some(revision_hash(&p));
    p.status.as_mut().unwrap().stages_hash = Some(stages_hash(&p.spec.stages));
    p.spec.stages.push(
        serde_json::from_value(
            json!({"name": "dr", "clusterSelector": {"matchLabels": {"env": "dr"}}}),
        )
        .unwrap(),
    );
    assert!(run(&mut p, &mut w, 200).summary.starts_with("restarted"));
}

/// An approval `promoter approve` recorded for the earlier promoter's hash still approves the run
/// taken over, and its record follows the new hash.
#[test]
fn a_takeover_keeps_the_approval_given_for_that_run() {
    let mut p = out_of_sort_order();
    let mut w = fleet();
    let (_, d) = run_to(&mut p, &mut w, 0, "staging");
    assert_eq!(d.phase, Phase::AwaitingApproval);
    let legacy = crate::hash::profile_spec_hash(p.spec.profile_spec.as_ref());
    let status = p.status.as_mut().unwrap();
    status.profile_spec_hash = Some(legacy.clone());
    p.metadata.annotations = Some(
        [(
            crate::annotations::approval_key("staging"),
            format!(r#"{{"by":"bob","at":"2026-02-16T06:04:00Z","revision":"{legacy}"}}"#),
        )]
        .into(),
    );
    set_approved(&mut p, 1, Some(true));
    let d = run(&mut p, &mut w, 100);
    assert_ne!(legacy, revision_hash(&p));
    assert_eq!(d.summary, "promoted staging -> production");
    assert!(d.actions.iter().any(|a| matches!(a, Action::Record(ops)
        if ops.iter().any(|op| matches!(op, RecordOp::ReviseApprovalRecord { .. })))));
    assert_eq!(
        p.status.as_ref().unwrap().profile_spec_hash,
        Some(revision_hash(&p))
    );
}

#[path = "events_tests.rs"]
mod events_tests;

#[path = "decide_failure_tests.rs"]
mod failure_policy;

#[path = "decide_budget_tests.rs"]
mod failure_budget;

// Issue 30 §3: stage completion from content or one clock, with what promoter records when it
// writes a profile's spec.

/// Sveltos' part with what the API server stamps: `profile`'s summaries carrying its spec, every
/// feature `Provisioned` with `hash`, the spec written at `spec_at` and the features at `status_at`.
fn provision(world: &mut World, profile: &str, hash: &str, spec_at: &str, status_at: &str) {
    let out = provisioned(world, profile, hash, spec_at, status_at);
    world
        .summaries
        .insert(profile.into(), out.into_iter().collect());
}

/// The summaries [`provision`] lists, for a test to alter before listing them.
fn provisioned(
    world: &World,
    profile: &str,
    hash: &str,
    spec_at: &str,
    status_at: &str,
) -> Vec<ClusterSummary> {
    let mut out = summaries_for(world, profile, "Provisioned");
    for cs in &mut out {
        cs.metadata.managed_fields = serde_json::from_value(json!([
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": spec_at, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            {"manager": "manager", "operation": "Update", "apiVersion": "config.projectsveltos.io/v1beta1",
             "time": status_at, "subresource": "status", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:featureSummaries": {}}}}
        ]))
        .unwrap();
        for f in cs
            .status
            .as_mut()
            .unwrap()
            .feature_summaries
            .iter_mut()
            .flatten()
        {
            f.hash = Some(hash.into());
        }
    }
    out
}

fn redeploy_ops(d: &Decision) -> Vec<(String, crate::annotations::redeploy::Redeploy)> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Record(ops) => Some(ops),
            _ => None,
        })
        .flatten()
        .filter_map(|op| match op {
            RecordOp::Redeploy { profile, record } => Some((profile.clone(), record.clone())),
            _ => None,
        })
        .collect()
}

fn with_chart_version(p: &mut ClusterPromotion, v: &str) {
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!(v);
}

/// A new revision rewrites stage 1's profile: the record says Sveltos redeploys Helm and keeps the
/// hash the summaries carried. A late `Provisioned` with that hash (written after the new spec)
/// never completes the stage; the redeployed hash does, in the next pass.
#[test]
fn a_rewritten_stage_waits_for_the_redeployed_hash_not_a_late_provisioned() {
    use crate::sveltos::redeploy::{Expect, bit};
    let (old, new) = ("OLDxxxxxxxxxxxxxxxxx=", "NEWxxxxxxxxxxxxxxxxx=");
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        old,
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:30Z",
    );
    run(&mut p, &mut w, 1);
    with_chart_version(&mut p, "3.6.0");
    let d = run(&mut p, &mut w, 2);
    let recorded = redeploy_ops(&d);
    assert_eq!(
        recorded.len(),
        1,
        "{:?} {:?} {}",
        d.actions,
        d.after_status,
        d.summary
    );
    let (profile, record) = &recorded[0];
    assert_eq!(profile, "kyverno-dev");
    assert_eq!(record.expect(), Expect::Features(bit("Helm")));
    let before = record.before().expect("the summaries were listed");
    assert!(before.contains(
        bit("Helm"),
        &crate::annotations::redeploy::prefix(old).unwrap()
    ));
    assert!(d.needs_summaries.is_empty());
    assert!(!record.unsettled, "dev had finished the previous spec");
    // Sveltos writes the new spec; the reconcile of the old one lands after it (a late write).
    provision(
        &mut w,
        "kyverno-dev",
        old,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:02:20Z",
    );
    for min in 3..15 {
        let d = run(&mut p, &mut w, min);
        assert!(
            d.after_status.is_empty(),
            "promoted past dev at minute {min}"
        );
        assert!(
            stage_status(&p, "dev")
                .failure_message
                .as_deref()
                .is_some_and(
                    |m| m.contains("Sveltos has not redeployed it for its current spec yet")
                ),
            "{:?}",
            stage_status(&p, "dev")
        );
    }
    // Redeployed: counts at once, whatever the clocks.
    provision(
        &mut w,
        "kyverno-dev",
        new,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:02:09Z",
    );
    run(&mut p, &mut w, 15);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some()
    );
}

/// Sveltos had not copied the profile's spec to every cluster: dev01's summary carries an earlier
/// spec with a policyRef, dev02's one with a kustomizationRef. Writing a new chart version then
/// redeploys, per cluster, what differs from the spec that cluster runs: the record expects the
/// union (each spec's answer computed from that spec, never reused for another), and the write
/// is unsettled (a summary out of sync with the profile is not finished, however Provisioned).
#[test]
fn a_write_over_summaries_of_two_earlier_specs_expects_what_either_redeploys() {
    use crate::sveltos::redeploy::{Expect, bit};
    let mut p = promotion(three_stages());
    let mut w = fleet();
    w.clusters.push(cluster("dev", "dev02"));
    run(&mut p, &mut w, 0);
    let mut out = provisioned(
        &w,
        "kyverno-dev",
        "OLDxxxxxxxxxxxxxxxxx=",
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:30Z",
    );
    assert_eq!(out.len(), 2);
    let earlier = [
        (
            "policyRefs",
            json!([{"kind": "ConfigMap", "namespace": "default", "name": "extra"}]),
        ),
        (
            "kustomizationRefs",
            json!([{"kind": "GitRepository", "namespace": "flux-system", "name": "extra", "path": "./x"}]),
        ),
    ];
    for (cs, (field, value)) in out.iter_mut().zip(earlier) {
        let mut spec = w.profiles["kyverno-dev"].spec.fields.clone();
        spec.insert(field.into(), value);
        cs.spec.cluster_profile_spec = spec.into();
    }
    w.summaries
        .insert("kyverno-dev".into(), out.into_iter().collect());
    with_chart_version(&mut p, "3.6.0");
    let d = run(&mut p, &mut w, 1);
    let recorded = redeploy_ops(&d);
    assert_eq!(recorded.len(), 1, "{:?}", d.actions);
    let record = &recorded[0].1;
    assert_eq!(
        record.expect(),
        Expect::Features(bit("Helm") | bit("Resources") | bit("Kustomize"))
    );
    assert!(
        record.unsettled,
        "the summaries were out of sync with the profile"
    );
}

/// Sveltos shows dev Provisioned, but of an earlier chart version than the profile's (it has not
/// copied the profile's spec yet): a new revision written now is unsettled, since Sveltos may
/// still deploy the profile's spec and land hashes the record never saw.
#[test]
fn a_write_while_a_summary_runs_an_earlier_spec_is_unsettled_however_provisioned() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    let mut out = provisioned(
        &w,
        "kyverno-dev",
        "OLDxxxxxxxxxxxxxxxxx=",
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:30Z",
    );
    let mut spec = w.profiles["kyverno-dev"].spec.fields.clone();
    spec["helmCharts"][0]["chartVersion"] = json!("3.5.1");
    out[0].spec.cluster_profile_spec = spec.into();
    w.summaries
        .insert("kyverno-dev".into(), out.into_iter().collect());
    with_chart_version(&mut p, "3.6.0");
    let d = run(&mut p, &mut w, 1);
    let recorded = redeploy_ops(&d);
    assert_eq!(recorded.len(), 1, "{:?}", d.actions);
    assert!(
        recorded[0].1.unsettled,
        "dev ran 3.5.1, not the profile's 3.5.2"
    );
}

/// A profile with a chart and a policyRef whose chart version changes: Sveltos redeploys Helm
/// only, so the record keeps Helm's hash, not the Resources feature's (a hash kept for a feature
/// that is not redeployed would make its unchanged status look like a stale one).
#[test]
fn a_redeploy_record_keeps_the_hashes_of_the_redeployed_features_only() {
    use crate::annotations::redeploy::prefix;
    use crate::sveltos::redeploy::{Expect, bit};
    let old = "OLDxxxxxxxxxxxxxxxxx=";
    let mut p = promotion(three_stages());
    p.spec.profile_spec.as_mut().unwrap().0.insert(
        "policyRefs".into(),
        json!([{"kind": "ConfigMap", "namespace": "default", "name": "extra"}]),
    );
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        old,
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:30Z",
    );
    run(&mut p, &mut w, 1);
    with_chart_version(&mut p, "3.6.0");
    let d = run(&mut p, &mut w, 2);
    let recorded = redeploy_ops(&d);
    assert_eq!(recorded.len(), 1, "{:?}", d.actions);
    let record = &recorded[0].1;
    assert_eq!(record.expect(), Expect::Features(bit("Helm")));
    let before = record.before().expect("the summaries were listed");
    let old = prefix(old).unwrap();
    assert!(before.contains(bit("Helm"), &old));
    assert!(!before.contains(bit("Resources"), &old), "{before:?}");
}

/// A new revision written while Sveltos has not finished the previous one on dev (no summary yet):
/// the previous revision's deployment may land between the pass's list and its write, with a
/// hash the record cannot hold, and Sveltos may copy the new spec in that same second. The
/// record says the write was unsettled: a hash of that second is not trusted (until the grace),
/// a status strictly after the spec is.
#[test]
fn a_revision_written_while_sveltos_deploys_the_previous_one_trusts_no_status_of_that_second() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    run(&mut p, &mut w, 1);
    with_chart_version(&mut p, "3.6.0");
    // Listed: none yet.
    w.summaries.insert("kyverno-dev".into(), Default::default());
    let d = run(&mut p, &mut w, 2);
    let recorded = redeploy_ops(&d);
    assert_eq!(recorded.len(), 1, "{:?}", d.actions);
    assert!(d.needs_summaries.is_empty());
    assert!(recorded[0].1.unsettled);
    let prev = "PREVxxxxxxxxxxxxxxxx=";
    provision(
        &mut w,
        "kyverno-dev",
        prev,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:02:10Z",
    );
    for min in 3..12 {
        let d = run(&mut p, &mut w, min);
        assert!(
            d.after_status.is_empty(),
            "promoted past dev at minute {min}"
        );
        assert!(
            stage_status(&p, "dev")
                .failure_message
                .as_deref()
                .is_some_and(|m| m.contains("showed no status of the spec before it yet")
                    && m.contains("2026-02-16T06:12:10Z")),
            "{:?}",
            stage_status(&p, "dev")
        );
    }
    // Sveltos redeploys: a status a second after the spec counts at once.
    provision(
        &mut w,
        "kyverno-dev",
        "NEWxxxxxxxxxxxxxxxxx=",
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:02:11Z",
    );
    run(&mut p, &mut w, 12);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some()
    );
}

/// A revision that changes only what Sveltos does not hash is recorded as redeploying nothing: the
/// stage completes as soon as the summaries carry the new spec, with the status Sveltos wrote for
/// the previous one.
#[test]
fn a_change_sveltos_does_not_redeploy_completes_without_a_status_write() {
    use crate::sveltos::redeploy::Expect;
    let hash = "SAMExxxxxxxxxxxxxxxxx=";
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        hash,
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:30Z",
    );
    run(&mut p, &mut w, 1);
    p.spec
        .profile_spec
        .as_mut()
        .unwrap()
        .0
        .insert("maxUpdate".into(), json!("50%"));
    let d = run(&mut p, &mut w, 2);
    assert_eq!(redeploy_ops(&d)[0].1.expect(), Expect::Nothing);
    // The new spec, and no status since.
    provision(
        &mut w,
        "kyverno-dev",
        hash,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:00:30Z",
    );
    run(&mut p, &mut w, 3);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some()
    );
}

/// The same change written while Sveltos had not deployed the previous spec on dev: the
/// `Provisioned` dev then shows may be of a spec before that one, so "nothing to redeploy" does
/// not make it current; a status after the spec does.
#[test]
fn a_change_sveltos_does_not_redeploy_written_while_it_deploys_waits_for_a_status() {
    use crate::sveltos::redeploy::Expect;
    let hash = "SAMExxxxxxxxxxxxxxxxx=";
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    run(&mut p, &mut w, 1);
    p.spec
        .profile_spec
        .as_mut()
        .unwrap()
        .0
        .insert("maxUpdate".into(), json!("50%"));
    w.summaries.insert("kyverno-dev".into(), Default::default());
    let d = run(&mut p, &mut w, 2);
    let recorded = redeploy_ops(&d);
    assert_eq!(recorded[0].1.expect(), Expect::Nothing);
    assert!(recorded[0].1.unsettled);
    // The new spec, over a status written before it.
    provision(
        &mut w,
        "kyverno-dev",
        hash,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:00:30Z",
    );
    run(&mut p, &mut w, 3);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_none()
    );
    provision(
        &mut w,
        "kyverno-dev",
        hash,
        "2026-02-16T06:02:10Z",
        "2026-02-16T06:03:30Z",
    );
    run(&mut p, &mut w, 4);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some()
    );
}

/// Without a record (a profile written by another writer or an earlier promoter), the API
/// server's two times decide, and the grace ends the wait for a status that may never come; the
/// decision says until when.
#[test]
fn without_a_record_the_api_server_times_decide_and_the_grace_ends_the_wait() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        "Hxxxxxxxxxxxx=",
        "2026-02-16T06:00:10Z",
        "2026-02-16T06:00:09Z",
    );
    let d = run(&mut p, &mut w, 1);
    assert_eq!(
        d.next_check,
        Some(t(0) + chrono::Duration::seconds(10) + STALE)
    );
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_none()
    );
    run(&mut p, &mut w, 10);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_none()
    );
    run(&mut p, &mut w, 11);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some(),
        "{:?}",
        stage_status(&p, "dev")
    );
    // A status at or after the spec, by the same clock, counts at once.
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        "Hxxxxxxxxxxxx=",
        "2026-02-16T06:00:10Z",
        "2026-02-16T06:00:10Z",
    );
    run(&mut p, &mut w, 1);
    assert!(
        stage_status(&p, "dev")
            .last_successful_applied_time
            .is_some()
    );
}

const STALE: chrono::Duration = crate::pass::summaries::STALE_PROVISIONED_GRACE;

/// Promoted to a stage whose summaries the pass did not list (it was not the current stage): the
/// decision asks for them, so that the record keeps their hashes.
#[test]
fn a_rewritten_stage_that_was_not_listed_asks_for_its_summaries() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    // A first revision reached staging …
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        "Axxxxxxxxxxxx=",
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:01Z",
    );
    run(&mut p, &mut w, 1);
    run(&mut p, &mut w, 3);
    assert!(w.profiles.contains_key("kyverno-staging"));
    // … then a second one completes dev again, while staging's summaries are not in the world.
    with_chart_version(&mut p, "3.6.0");
    run(&mut p, &mut w, 4);
    provision(
        &mut w,
        "kyverno-dev",
        "Bxxxxxxxxxxxx=",
        "2026-02-16T06:04:00Z",
        "2026-02-16T06:04:01Z",
    );
    w.summaries.remove("kyverno-staging");
    run(&mut p, &mut w, 5);
    let d = decide(&p, &w, &HealthResults::new(), &ctx(8));
    assert!(
        d.after_status
            .iter()
            .any(|a| matches!(a, Action::Apply(x) if x.name == "kyverno-staging")),
        "{d:?}"
    );
    assert_eq!(d.needs_summaries, ["kyverno-staging"]);
    assert_eq!(redeploy_ops(&d)[0].1.before(), None);
    // Listed (none exist): the record says so.
    w.summaries_listed.insert("kyverno-staging".into());
    let d = decide(&p, &w, &HealthResults::new(), &ctx(8));
    assert!(d.needs_summaries.is_empty());
    assert_eq!(
        redeploy_ops(&d)[0].1.before(),
        Some(crate::annotations::redeploy::Before::default())
    );
}

/// A pass that died after its record patch (the profile not yet rewritten) left the record: the
/// next pass does not write it again, it goes on to the status.
#[test]
fn a_redeploy_record_already_held_is_not_written_again() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    provision(
        &mut w,
        "kyverno-dev",
        "Axxxxxxxxxxxx=",
        "2026-02-16T06:00:00Z",
        "2026-02-16T06:00:01Z",
    );
    run(&mut p, &mut w, 1);
    with_chart_version(&mut p, "3.6.0");
    let d = decide(&p, &w, &HealthResults::new(), &ctx(2));
    let Some(Action::Record(ops)) = d.actions.first() else {
        panic!("{:?}", d.actions)
    };
    apply_records(&mut p, ops); // killed after the record patch
    let again = decide(&p, &w, &HealthResults::new(), &ctx(2));
    assert!(redeploy_ops(&again).is_empty(), "{:?}", again.actions);
    assert!(again.status.is_some());
}

#[path = "decide_status_tests.rs"]
mod status_texts;

// A stage's profile that someone is deleting is not counted as applied, even with the right
// content: the stage waits until it is gone and recreated (mutation campaign, issue 33).
#[test]
fn a_profile_being_deleted_is_not_counted_as_applied() {
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    being_deleted(&mut w, "kyverno-dev");
    let d = run(&mut p, &mut w, 1);
    assert!(
        !d.actions
            .iter()
            .chain(&d.after_status)
            .any(|a| matches!(a, Action::Apply(_))),
        "{d:?}"
    );
    assert_eq!(
        stage_status(&p, "dev").failure_message.as_deref(),
        Some("ClusterProfile kyverno-dev is being deleted; it is recreated once it is gone.")
    );
}

#[path = "decide_planner_tests.rs"]
mod planner_cases;

#[path = "decide_empty_stage_tests.rs"]
mod empty_stage;
/// Issue 45: a write is unsettled only where a summary did not show a status about the spec it
/// carried (a status of that spec with a hash the pass never saw could still come), judged per
/// summary whatever the status says: a deployment under way or failing with its hash shown is
/// settled; a status older than the spec, a feature without a hash, a missing summary is not.
#[test]
fn a_write_is_unsettled_only_where_a_summary_did_not_show_its_spec_s_status() {
    let at = |s: i64| format!("2026-02-16T06:01:{s:02}Z");
    // (dev's feature status, its hash, spec time, status time, unsettled)
    let cases = [
        (
            "Provisioned",
            Some("PREVxxxxxxxxxxxxxxx="),
            at(10),
            at(10),
            false,
        ),
        (
            "Provisioning",
            Some("PREVxxxxxxxxxxxxxxx="),
            at(10),
            at(10),
            false,
        ),
        (
            "Failed",
            Some("PREVxxxxxxxxxxxxxxx="),
            at(10),
            at(11),
            false,
        ),
        (
            "Provisioned",
            Some("PREVxxxxxxxxxxxxxxx="),
            at(10),
            at(9),
            true,
        ),
        ("Failed", None, at(10), at(10), true),
    ];
    for (i, (status, hash, spec_at, status_at, unsettled)) in cases.into_iter().enumerate() {
        let mut p = promotion(three_stages());
        let mut w = fleet();
        run(&mut p, &mut w, 0);
        let mut listed = provisioned(&w, "kyverno-dev", "x", &spec_at, &status_at);
        for f in listed
            .iter_mut()
            .flat_map(|cs| cs.status.iter_mut())
            .flat_map(|s| s.feature_summaries.iter_mut().flatten())
        {
            f.status = Some(status.into());
            f.hash = hash.map(String::from);
        }
        w.summaries
            .insert("kyverno-dev".into(), listed.into_iter().collect());
        run(&mut p, &mut w, 1);
        with_chart_version(&mut p, "3.6.0");
        let d = run(&mut p, &mut w, 2);
        let recorded = redeploy_ops(&d);
        assert_eq!(recorded.len(), 1, "case {i}: {:?}", d.actions);
        assert_eq!(recorded[0].1.unsettled, unsettled, "case {i}");
    }
    // A matching cluster without a summary.
    let mut p = promotion(three_stages());
    let mut w = fleet();
    run(&mut p, &mut w, 0);
    w.summaries.insert("kyverno-dev".into(), Default::default());
    run(&mut p, &mut w, 1);
    with_chart_version(&mut p, "3.6.0");
    let d = run(&mut p, &mut w, 2);
    assert!(redeploy_ops(&d)[0].1.unsettled);
}
