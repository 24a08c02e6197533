//! Generated management clusters for benchmarks: N promotions × S stages × C clusters, in the states
//! a real one holds. Clusters are split into S rings (stage k selects ring k). Of the promotions,
//! 85 % are complete; the rest are spread over the stages, deploying, soaking or failing. Profiles
//! exist for every stage reached; ClusterSummaries for every cluster of a reached stage of the
//! in-progress promotions (those are the ones a pass reads), with the hashes Sveltos reports, and a
//! `promoter.dev/redeploy` record of the stage in progress (its freshness judged by content, issue
//! 30). Every promotion has issue 24's
//! settings (a 12 h progress deadline, the rollback policy, a history for the completed ones); two
//! PromotionFreezes exist: an active one holding the 5 % labelled `team=frozen`, and one scheduled
//! for next week.

use super::feature_hash::feature_hash;
use crate::annotations::REDEPLOY;
use crate::annotations::redeploy::{Before, Redeploy, prefix};
use crate::api::sveltos::{CLUSTER_NAME_LABEL, CLUSTER_PROFILE_NAME_LABEL, CLUSTER_TYPE_LABEL};
use crate::api::{
    ClusterPromotion, ClusterPromotionSpec, ClusterPromotionStatus, StageStatus, Timestamp,
};
use crate::fake::{
    FakeApiServer, cluster_profile_type, cluster_promotion_type, cluster_summary_type,
    sveltos_cluster_type,
};
use crate::hash::{revision_hash, stages_hash};
use crate::pass::profiles::{SPEC_HASH_ANNOTATION, main_profile};
use crate::pass::stage_status::with_timestamp;
use crate::sveltos::normal_form::normalize;
use crate::sveltos::redeploy::{Expect, bit};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    pub promotions: usize,
    pub stages: usize,
    pub clusters: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Complete,
    Deploying,
    Soaking,
    Failing,
}

fn state_of(j: usize) -> State {
    match j % 20 {
        0 => State::Deploying,
        1 => State::Soaking,
        2 => State::Failing,
        _ => State::Complete,
    }
}

fn promotion(j: usize, stages: usize) -> serde_json::Result<ClusterPromotion> {
    let stage_list: Vec<Value> = (0..stages)
        .map(|k| {
            let mut s = json!({"name": format!("s{k}"), "clusterSelector": {"matchLabels": {"ring": format!("r{k}")}}});
            if k + 1 < stages {
                s["trigger"] = json!({"auto": {"delay": "30m"}});
            }
            s
        })
        .collect();
    let spec: ClusterPromotionSpec = serde_json::from_value(json!({
        "profileSpec": {"syncMode": "Continuous", "helmCharts": [{"repositoryURL": "https://charts.example.com",
            "repositoryName": "example", "chartName": format!("example/app-{j}"), "chartVersion": "1.2.3",
            "releaseName": format!("app-{j}"), "releaseNamespace": "apps", "helmChartAction": "Install",
            "values": "replicas: 3\nresources:\n  requests: {cpu: 100m, memory: 128Mi}\n"}]},
        "stages": stage_list
    }))?;
    let mut p = ClusterPromotion::new(&format!("app-{j:04}"), spec);
    p.metadata.uid = Some(format!("00000000-0000-4000-9000-{j:012}"));
    p.metadata.finalizers = Some(vec!["config.projectsveltos.io/clusterpromotion".into()]);
    p.metadata.labels = Some(
        [(
            "team".to_string(),
            if j % 20 == 5 { "frozen" } else { "apps" }.to_string(),
        )]
        .into(),
    );
    p.metadata.annotations = Some(
        [
            (crate::settings::PROGRESS_DEADLINE, "12h"),
            (crate::settings::FAILURE_POLICY, "rollback"),
            (crate::settings::ROLLBACK_ORDER, "reverse"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    Ok(p)
}

/// Fills the server; returns the number of ClusterSummaries created.
pub fn populate(
    server: &FakeApiServer,
    scale: Scale,
    now: DateTime<Utc>,
) -> serde_json::Result<usize> {
    let mut store = server.store();
    for i in 0..scale.clusters {
        let ring = i % scale.stages.max(1);
        let obj = json!({"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
            "metadata": {"name": format!("c{i:05}"), "namespace": "fleet", "labels": {"ring": format!("r{ring}"), "region": "eu"}},
            "spec": {}, "status": {"ready": true}});
        let _ = store.seed(&sveltos_cluster_type(), obj);
    }
    for f in [
        json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze", "metadata": {"name": "frozen-team"},
               "spec": {"reason": "incident 42", "promotionSelector": {"matchLabels": {"team": "frozen"}}}}),
        json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze", "metadata": {"name": "next-week"},
               "spec": {"reason": "holidays", "start": Timestamp::new(now + Duration::days(7)).to_string()}}),
    ] {
        let _ = store.seed(&crate::fake::promotion_freeze_type(), f);
    }
    let mut summaries = 0;
    let ts = |t: DateTime<Utc>| Some(Timestamp::new(t));
    for j in 0..scale.promotions {
        let mut p = promotion(j, scale.stages)?;
        let state = state_of(j);
        let reached = if state == State::Complete {
            scale.stages
        } else {
            1 + (j / 20) % scale.stages
        };
        let mut stages = Vec::new();
        for k in 0..reached {
            let name = format!("s{k}");
            let promoted = state == State::Complete || k + 1 < reached;
            let mut s = StageStatus {
                name: name.clone(),
                last_update_reconciled_time: ts(now - Duration::hours(6)),
                ..Default::default()
            };
            if promoted {
                s.last_successful_applied_time = ts(now - Duration::hours(2));
                s.last_status_check_time = s.last_successful_applied_time;
                s.current_status_description = Some(with_timestamp(
                    "Successfully provisioned",
                    now - Duration::hours(2),
                ));
            }
            stages.push(s);
        }
        p.status = Some(ClusterPromotionStatus {
            stages: Some(stages),
            profile_spec_hash: Some(revision_hash(&p)),
            stages_hash: Some(stages_hash(&p.spec.stages)),
            current_stage_name: Some(format!("s{}", reached - 1)),
            last_promotion_time: ts(now - Duration::hours(1)),
        });
        if state == State::Complete
            && let Some(run) = p.status.as_ref().and_then(crate::annotations::Run::of)
        {
            // As promoter records a completion (issue 14), with the history (issue 24).
            let mut history = crate::annotations::History::default();
            history.record_completion(
                &run.revision,
                run.started_at(),
                Timestamp::new(now - Duration::hours(2)),
                10,
            );
            let a = p.metadata.annotations.get_or_insert_with(Default::default);
            a.insert(
                crate::annotations::COMPLETED.to_string(),
                serde_json::to_string(&run)?,
            );
            a.insert(
                crate::annotations::HISTORY.to_string(),
                history.to_annotation(),
            );
        }
        for k in 0..reached {
            let profile = main_profile(&p, &p.spec.stages[k]).to_object();
            let profile_name = profile.metadata.name.clone().unwrap_or_default();
            let spec = serde_json::to_value(&profile.spec).unwrap_or_default();
            let _ = store.seed(
                &cluster_profile_type(),
                serde_json::to_value(&profile).unwrap_or_default(),
            );
            if state == State::Complete || k + 1 < reached {
                continue;
            }
            let feature = match state {
                State::Deploying => "Provisioning",
                State::Failing => "Failed",
                _ => "Provisioned",
            };
            // As Sveltos reports it: the hash of what the feature deploys, its own clock's time.
            let hash = feature_hash(&normalize(&profile.spec.fields), "Helm");
            let applied = Timestamp::new(now - Duration::hours(3)).to_string();
            // This stage's profile was rewritten from an earlier revision, whose Helm hash the
            // record keeps: every summary's freshness is judged by content.
            let mut before = Before::default();
            before.extend(bit("Helm"), prefix("EARLIERREVISIONxxxxxxxxxx="));
            let written = profile
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
                .map_or("", String::as_str);
            let record = Redeploy::new(written, &Expect::Features(bit("Helm")), Some(&before));
            let records: BTreeMap<&str, Redeploy> = [(profile_name.as_str(), record)].into();
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(REDEPLOY.to_string(), serde_json::to_string(&records)?);
            for i in (0..scale.clusters).filter(|i| i % scale.stages.max(1) == k) {
                let cluster = format!("c{i:05}");
                let cs = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
                    "metadata": {"name": format!("{profile_name}-sveltos-{cluster}"), "namespace": "fleet",
                                 "labels": {CLUSTER_PROFILE_NAME_LABEL: profile_name, CLUSTER_NAME_LABEL: cluster, CLUSTER_TYPE_LABEL: "Sveltos"}},
                    "spec": {"clusterNamespace": "fleet", "clusterName": cluster, "clusterType": "Sveltos", "clusterProfileSpec": spec},
                    "status": {"featureSummaries": [{"featureID": "Helm", "status": feature, "hash": hash, "lastAppliedTime": applied}]}});
                let _ = store.seed(&cluster_summary_type(), cs);
                summaries += 1;
            }
        }
        let _ = store.seed(&cluster_promotion_type(), serde_json::to_value(&p)?);
    }
    Ok(summaries)
}
