//! What `status` and `explain` show: the observed world and the decision the next pass would make
//! (a dry run: health checks are not run; their last results are in the status).

use crate::api::ClusterPromotion;
use crate::pass::stage_status::description_text;
use crate::pass::{Context, Decision, HealthResults, Phase, World, decide};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

/// One line of `promoter status`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    pub name: String,
    pub stage: String,
    /// `2/3`.
    pub position: String,
    pub phase: String,
    /// Since when the current phase's text holds.
    pub since: Option<DateTime<Utc>>,
    pub message: String,
    pub next_check: Option<DateTime<Utc>>,
    pub next_actions: Vec<String>,
    #[serde(skip)]
    pub kind: Phase,
}

pub fn decision(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, tz: Tz) -> Decision {
    decide(
        p,
        world,
        &HealthResults::new(),
        &Context {
            now,
            default_tz: tz,
        },
    )
}

fn phase_text(p: &ClusterPromotion, d: &Decision) -> String {
    let stage = d.stage.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    let stored = status.stages.iter().flatten().find(|s| s.name == stage);
    let description = stored
        .and_then(|s| s.current_status_description.as_deref())
        .map(description_text)
        .unwrap_or_default();
    let at = |t: Option<DateTime<Utc>>| {
        t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_else(|| "?".into())
    };
    match d.phase {
        Phase::Complete => "Complete".into(),
        Phase::Paused => "Paused".into(),
        Phase::Error => "Blocked".into(),
        Phase::Failed => "Failed".into(),
        Phase::Deleting => "Deleting".into(),
        Phase::AwaitingApproval => "Awaiting approval".into(),
        Phase::Progressing => "Progressing".into(),
        Phase::Waiting if d.summary.contains("soaking") => {
            format!("Soaking until {}", at(d.next_check))
        }
        Phase::Waiting if d.summary.contains("window closed") => {
            format!("Window closed until {}", at(d.next_check))
        }
        Phase::Waiting
            if d.needs_health.is_some() && description == "Awaiting Health Checks to Pass" =>
        {
            "Checks failing".into()
        }
        Phase::Waiting if d.needs_health.is_some() => "Running checks".into(),
        Phase::Waiting => "Waiting".into(),
    }
}

pub fn status_row(p: &ClusterPromotion, world: &World, now: DateTime<Utc>, tz: Tz) -> StatusRow {
    let d = decision(p, world, now, tz);
    let stage = d.stage.clone().unwrap_or_default();
    let status = p.status.clone().unwrap_or_default();
    let stored = status
        .stages
        .iter()
        .flatten()
        .find(|s| s.name == stage)
        .cloned();
    let index = p
        .spec
        .stages
        .iter()
        .position(|s| s.name == stage)
        .map(|i| i + 1)
        .unwrap_or(0);
    let mut message = d.summary.clone();
    // A dry run does not run the checks: the last result is the one in the status.
    if d.needs_health.is_some()
        && let Some(f) = stored.as_ref().and_then(|s| s.failure_message.clone())
    {
        message = format!("stage {stage}: {f}");
    }
    StatusRow {
        name: d.promotion.clone(),
        position: format!("{index}/{}", p.spec.stages.len()),
        stage,
        phase: phase_text(p, &d),
        since: stored
            .as_ref()
            .and_then(|s| s.last_status_check_time.or(s.last_update_reconciled_time))
            .map(|t| t.as_datetime()),
        message,
        next_check: d.next_check,
        next_actions: crate::pass::planned(&d),
        kind: d.phase,
    }
}

/// `--exit-code`: what a CI job gates on.
pub fn exit_code(phase: Phase) -> u8 {
    match phase {
        Phase::Complete => 0,
        Phase::Progressing | Phase::Waiting | Phase::Paused | Phase::Deleting => 3,
        Phase::AwaitingApproval => 4,
        Phase::Failed | Phase::Error => 5,
    }
}

/// `1h2m`, `3d4h`, `45s`.
pub fn age(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match since {
        None => "-".into(),
        Some(t) => crate::sim::timeline::offset(now - t)
            .trim_start_matches('+')
            .to_string(),
    }
}
