//! `promoter explain NAME`: per stage, its profile and matching clusters; per cluster, its
//! ClusterSummary and feature statuses; the checks and their last result; why the promotion waits
//! and until when; and what the next pass will do.

use super::inspect::{LastPass, age, decision, relative, status_row};
use crate::api::ClusterPromotion;
use crate::pass::World;
use crate::pass::deployment::matching_clusters;
use crate::pass::profiles::{main_profile, preverification_name, profile_name};
use crate::pass::summaries::Provisioned;
use crate::window::{PromotionWindow, WindowState};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::fmt::Write;

/// Adds the ClusterSummaries of every profile of the promotion (a pass reads only the current one's).
pub async fn load_summaries(
    client: &kube::Client,
    p: &ClusterPromotion,
    world: &mut World,
) -> anyhow::Result<()> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let names: Vec<String> = world
        .profiles_of(&name)
        .filter_map(|cp| cp.metadata.name.clone())
        .collect();
    world.summaries = crate::pass::observe::summaries_of(client, &names).await?;
    Ok(())
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn render(
    p: &ClusterPromotion,
    world: &World,
    now: DateTime<Utc>,
    tz: Tz,
    last_pass: Option<&LastPass>,
) -> String {
    let mut out = String::new();
    let name = p.metadata.name.clone().unwrap_or_default();
    let row = status_row(p, world, now, tz);
    let d = decision(p, world, now, tz);
    let status = p.status.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "ClusterPromotion {name}: {:?} (stage {} {})",
        row.phase,
        row.stage,
        row.position()
    );
    if !row.message.is_empty() {
        let _ = writeln!(out, "  {}", row.message);
    }
    if let Some(t) = row.until {
        let _ = writeln!(out, "  waits until {} ({})", ts(t), relative(Some(t), now));
    }
    match last_pass {
        Some(lp) => {
            let _ = writeln!(
                out,
                "  last pass: {} ({})",
                lp.last_successful_time
                    .map(|t| format!("succeeded {} ago", age(Some(t), now)))
                    .unwrap_or_else(|| "never succeeded".into()),
                lp.source
            );
            if let Some(w) = lp.stale(now) {
                let _ = writeln!(out, "  warning: {w}");
            }
        }
        None => {
            let _ = writeln!(
                out,
                "  last pass: unknown (no readable CronJob; see --cronjob)"
            );
        }
    }
    if let Some(r) = crate::annotations::paused(p) {
        let _ = writeln!(
            out,
            "  paused by {} {}; `promoter resume {name}` lets passes act again",
            r.by, r.at
        );
    }
    let _ = writeln!(
        out,
        "  revision (profileSpecHash): {}",
        status.profile_spec_hash.as_deref().unwrap_or("none yet")
    );
    for (i, stage) in p.spec.stages.iter().enumerate() {
        let trigger = match stage.trigger.as_ref() {
            Some(t) if t.auto.is_some() => "auto",
            Some(t) if t.manual.is_some() => "manual",
            _ => "none",
        };
        let _ = writeln!(
            out,
            "\nStage {}/{} {} (trigger: {trigger})",
            i + 1,
            p.spec.stages.len(),
            stage.name
        );
        let profile = profile_name(&name, &stage.name);
        let state = match world.profiles.get(&profile) {
            None => "not created".to_string(),
            Some(cp) if cp.metadata.deletion_timestamp.is_some() => "being deleted".into(),
            Some(cp) if main_profile(p, stage).is_applied(cp) => "applied, current revision".into(),
            Some(_) => "applied, an earlier revision".into(),
        };
        let _ = writeln!(out, "  ClusterProfile {profile}: {state}");
        if world
            .profiles
            .contains_key(&preverification_name(&name, &stage.name))
        {
            let _ = writeln!(
                out,
                "  ClusterProfile {}: applied (preHealthCheckDeployment)",
                preverification_name(&name, &stage.name)
            );
        }
        if let Some(s) = status
            .stages
            .iter()
            .flatten()
            .find(|s| s.name == stage.name)
        {
            if let Some(t) = &s.current_status_description {
                let _ = writeln!(out, "  status: {t}");
            }
            if let Some(f) = &s.failure_message {
                let _ = writeln!(out, "  failure: {f}");
            }
            if let Some(t) = s.last_successful_applied_time {
                let _ = writeln!(out, "  provisioned: {t}");
            }
        }
        let selector = stage.cluster_selector.clone().unwrap_or_default();
        let clusters = matching_clusters(&selector, world);
        let _ = writeln!(out, "  clusters ({}):", clusters.len());
        let summaries = world.summaries.get(&profile);
        for c in clusters {
            let flags = format!(
                "{}{}",
                if c.ready { "ready" } else { "NOT READY" },
                if c.paused { ", paused (skipped)" } else { "" }
            );
            let cs = summaries.and_then(|s| s.find(c.kind, &c.namespace, &c.name));
            let detail = match cs {
                None => "no ClusterSummary".to_string(),
                Some(cs) => {
                    let features: Vec<String> = cs
                        .features
                        .iter()
                        .map(|f| {
                            let mut t = format!("{} {}", f.id, f.status.as_deref().unwrap_or("?"));
                            if let Some(m) = &f.failure_message {
                                let _ = write!(t, " ({m})");
                            }
                            t
                        })
                        .collect();
                    format!(
                        "{}: {}{}",
                        cs.name,
                        if features.is_empty() {
                            "no features yet".into()
                        } else {
                            features.join(", ")
                        },
                        match summaries.map(|s| cs.provisioned(s.content(cs), Some(now))) {
                            Some(Provisioned::Yes) => "",
                            Some(Provisioned::Stale) => " [Provisioned predates its spec]",
                            _ => " [not provisioned]",
                        }
                    )
                }
            };
            let _ = writeln!(out, "    {c} ({flags}): {detail}");
        }
        for x in world
            .excluded
            .iter()
            .filter(|x| selector.selects(&x.cluster.labels).unwrap_or(false))
        {
            let _ = writeln!(out, "    {} (left out: {})", x.cluster, x.why);
        }
        if let Some(gates) = stage.trigger.as_ref().and_then(|t| t.gates()) {
            if let Some(delay) = gates.delay {
                let _ = writeln!(out, "  delay: {delay}");
            }
            for check in gates.post_delay_health_checks {
                let what = [
                    check.group.as_deref(),
                    check.version.as_deref(),
                    check.kind.as_deref(),
                ]
                .iter()
                .flatten()
                .copied()
                .collect::<Vec<_>>()
                .join("/");
                let _ = writeln!(
                    out,
                    "  health check {} ({})",
                    check.name,
                    if what.is_empty() {
                        "metrics".into()
                    } else {
                        what
                    }
                );
            }
        }
        if let Some(w) = stage
            .trigger
            .as_ref()
            .and_then(|t| t.auto.as_ref())
            .and_then(|a| a.promotion_window.as_ref())
        {
            let state = match PromotionWindow::parse(&w.from, &w.to, tz) {
                Ok(pw) => match pw.state(now) {
                    WindowState::Open { closes_at } => format!(
                        "open, closes at {}",
                        closes_at.map(ts).unwrap_or_else(|| "never".into())
                    ),
                    WindowState::Closed { opens_at } => format!(
                        "closed, opens at {}",
                        opens_at.map(ts).unwrap_or_else(|| "never".into())
                    ),
                },
                Err(e) => format!("invalid: {e}"),
            };
            let _ = writeln!(
                out,
                "  promotion window {:?} to {:?}: {state}",
                w.from, w.to
            );
        }
        if let Some(m) = stage.trigger.as_ref().and_then(|t| t.manual.as_ref()) {
            let approval = match (
                m.is_approved(),
                crate::annotations::approval(p, &stage.name),
            ) {
                (true, Some(r)) => format!("approved by {} at {}", r.by, r.at),
                (true, None) => "approved".into(),
                (false, _) => format!(
                    "not approved (`promoter approve {name} --stage {}`)",
                    stage.name
                ),
            };
            let _ = writeln!(out, "  manual approval: {approval}");
        }
    }
    let actions = crate::pass::planned(&d);
    let _ = writeln!(
        out,
        "\nPrediction (if nothing changes before the next pass): {:?}, {}",
        row.prediction.phase, row.prediction.summary
    );
    if let Some(t) = row.prediction.next_check {
        let _ = writeln!(
            out,
            "  next check at {} ({})",
            ts(t),
            relative(Some(t), now)
        );
    }
    let _ = writeln!(
        out,
        "Next pass will: {}",
        if actions.is_empty() {
            "change nothing".into()
        } else {
            actions.join("; ")
        }
    );
    out
}
