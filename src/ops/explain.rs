//! `promoter explain NAME`: per stage, its profile and matching clusters; per cluster, its
//! ClusterSummary and feature statuses; the checks and their last result; why the promotion waits
//! and until when; when a pass last ran; and, as a prediction, what the next pass will do.
//! One [`Explanation`] is built; `-o json|yaml` print it, the text is rendered from it.

use super::inspect::{LastPass, StatusRow, age, relative, status_row};
use crate::api::ClusterPromotion;
use crate::pass::World;
use crate::pass::deployment::{WriteRecord, matching_clusters, stale_text};
use crate::pass::profiles::{main_profile, preverification_name, profile_name};
use crate::pass::stage_status::{description_text, description_time};
use crate::pass::summaries::{Provisioned, STALE_PROVISIONED_GRACE};
use crate::sveltos::redeploy::{Expect, ids};
use crate::window::{PromotionWindow, WindowState};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;
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

/// Reads the stored revisions a rollback could restore (the history's completed revisions), so
/// that one not stored (PromotionRevisions not served, or deleted) is said before a rollback
/// needs it. A revision that cannot be read is left out (nothing is said about it).
pub async fn load_revisions(client: &kube::Client, p: &ClusterPromotion, world: &mut World) {
    let name = p.metadata.name.clone().unwrap_or_default();
    let api: kube::Api<crate::api::PromotionRevision> = kube::Api::all(client.clone());
    for entry in crate::annotations::History::of(p).candidates("") {
        let object = crate::api::revision_name(&name, &entry.revision);
        match api.get_opt(&object).await {
            Ok(got) => {
                world.revisions.insert(object, got);
            }
            // Not served (a plain-text 404 has no NotFound reason): not stored either.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                world.revisions.insert(object, None);
            }
            Err(e) => {
                tracing::debug!(revision = %object, error = %crate::cli_error::line(&e), "could not read a stored revision");
            }
        }
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The observed state, the prediction and the last pass, as `status` shows them.
    #[serde(flatten)]
    pub status: StatusRow,
    /// The status' profileSpecHash.
    pub revision: Option<String>,
    /// Its ID (`revision_id`), as every other text names the revision.
    pub revision_id: Option<String>,
    pub paused_by: Option<String>,
    /// promoter's settings (`promoter.dev/` annotations): deadline, failure policy, history.
    pub policy: PolicyExplanation,
    /// Every `promoter.dev/` annotation, with what it is (or why promoter does not know it).
    pub annotations: Vec<crate::known_keys::PresentKey>,
    /// What is wrong with them: bad settings and unknown keys block the promotion (errors); a
    /// hand-written `paused` is explained (a warning).
    pub annotation_problems: Vec<AnnotationProblem>,
    /// When the current stage's progress deadline falls, if it has one and has not completed.
    pub deadline: Option<DateTime<Utc>>,
    /// When the rollback in progress must be done, if it has a deadline.
    pub rollback_deadline: Option<DateTime<Utc>>,
    /// The PromotionFreezes that select this promotion, and the bypass on record.
    pub freezes: Vec<FreezeExplanation>,
    pub freeze_bypass: Option<String>,
    /// The revision history, newest first (`promoter.dev/history`).
    pub history: Vec<crate::annotations::HistoryEntry>,
    /// Ids of completed revisions of the history whose PromotionRevision was read and is absent:
    /// a rollback cannot restore them.
    pub not_stored: Vec<String>,
    pub stages: Vec<StageExplanation>,
    #[serde(skip)]
    now: DateTime<Utc>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnnotationProblem {
    /// `error` or `warning`, as `lint` says it.
    pub severity: &'static str,
    /// `metadata.annotations[promoter.dev/…]: …`
    pub message: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyExplanation {
    /// As written (`30m, production=2h`); none: no deadline.
    pub progress_deadline: Option<String>,
    pub failure_policy: &'static str,
    pub rollback_order: &'static str,
    pub revision_history_limit: usize,
    /// How long a rollback may take (`1h`, or `none`).
    pub rollback_deadline: String,
    /// `promoter.dev/allow-empty-stages` as written; none: every stage that selects no cluster
    /// holds the rollout.
    pub allow_empty_stages: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeExplanation {
    pub name: String,
    pub phase: &'static str,
    pub reason: String,
    /// `until <end>` or `until lifted`.
    pub until: String,
    /// Whether the bypass on record lets this promotion through it now.
    pub bypassed: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageExplanation {
    pub name: String,
    pub number: usize,
    /// `auto`, `manual` or `none`.
    pub trigger: &'static str,
    pub profile: String,
    /// `notCreated`, `beingDeleted`, `current` (this revision), `earlierRevision`.
    pub profile_state: &'static str,
    pub preverification_profile: Option<String>,
    pub description: Option<String>,
    pub failure_message: Option<String>,
    /// When every cluster of the stage was first seen deployed in this run (an approval, a
    /// promotion, does not move it).
    pub provisioned_at: Option<DateTime<Utc>>,
    /// When the rollout was promoted past the stage (its `Successfully provisioned` description).
    pub promoted_at: Option<DateTime<Utc>>,
    /// The stage selects no cluster of the inventory: why it holds the rollout when it is reached
    /// (or that `promoter.dev/allow-empty-stages` lets it pass empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selects_no_cluster: Option<String>,
    /// What Sveltos redeploys for the spec promoter last wrote to the profile, from the
    /// `promoter.dev/redeploy` record (how stage completion judges a `Provisioned`).
    pub redeploy: Option<String>,
    pub clusters: Vec<ClusterExplanation>,
    pub excluded: Vec<ExcludedExplanation>,
    /// The stage's failure budget (`promoter.dev/failure-budget`): `10% (2 of 20 clusters)`;
    /// none: every cluster must run the revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_budget: Option<String>,
    /// Its clusters counted against it in the current run (`promoter.dev/budgeted`), each until it
    /// runs the revision or leaves the stage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgeted: Vec<ExcludedExplanation>,
    pub delay: Option<String>,
    pub health_checks: Vec<HealthCheckExplanation>,
    pub window: Option<WindowExplanation>,
    pub approval: Option<ApprovalExplanation>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExplanation {
    /// `namespace/name`.
    pub cluster: String,
    pub ready: bool,
    pub paused: bool,
    pub cluster_summary: Option<String>,
    pub features: Vec<FeatureExplanation>,
    /// `Yes`, `No`, `Stale` (every feature Provisioned, but not known to be for the summary's
    /// current spec).
    pub provisioned: Option<&'static str>,
    /// Why a `Stale` summary does not count yet (and, when only time can tell, until when).
    pub stale: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureExplanation {
    pub id: String,
    pub status: Option<String>,
    pub failure_message: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExcludedExplanation {
    pub cluster: String,
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckExplanation {
    pub name: String,
    /// `group/version/kind`, or `metrics`.
    pub target: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowExplanation {
    pub from: String,
    pub to: String,
    /// `open`, `closed` or `invalid`.
    pub state: &'static str,
    /// When it closes (open) or opens (closed); none: never.
    pub changes_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalExplanation {
    pub approved: bool,
    pub by: Option<String>,
    pub at: Option<String>,
}

/// What the `promoter.dev/redeploy` record of a profile's current spec says Sveltos does, and so
/// how a `Provisioned` is judged (see `pass::summaries`).
fn redeploy_text(record: Option<&WriteRecord>) -> String {
    match record {
        Some(WriteRecord {
            expect: Expect::Nothing,
            unsettled: false,
            ..
        }) => "nothing: the last spec change touches no deployment hash, so the Provisioned \
               Sveltos shows stays current"
            .into(),
        Some(WriteRecord {
            expect: Expect::Nothing,
            ..
        }) => format!(
            "nothing for the last spec change, but when promoter wrote it a summary showed no \
             status of the spec before it yet, so a summary counts once Sveltos wrote a status \
             strictly after the spec (API server times), or {} minutes after the spec write",
            STALE_PROVISIONED_GRACE.num_minutes()
        ),
        Some(WriteRecord {
            expect: Expect::Features(bits),
            before,
            unsettled,
        }) => format!(
            "{} for the spec promoter wrote; {}",
            ids(*bits).collect::<Vec<_>>().join(", "),
            match (before.is_some(), unsettled) {
                // A status of the previous spec may have landed just before the write.
                (_, true) => format!(
                    "when promoter wrote it a summary showed no status of the spec before it yet, \
                     so a feature counts once Sveltos wrote a status strictly after the spec (API \
                     server times), or {} minutes after the spec write",
                    STALE_PROVISIONED_GRACE.num_minutes()
                ),
                (true, false) =>
                    "a feature counts once its hash is not the one it had before the write".into(),
                (false, false) =>
                    "a feature counts once Sveltos wrote a status after the spec (API server times)"
                        .into(),
            }
        ),
        _ => format!(
            "cannot be known for the last spec change (no record of promoter's write, or a change \
             of content promoter does not read): a summary counts once Sveltos wrote a status after \
             its spec, or {} minutes after the spec write",
            STALE_PROVISIONED_GRACE.num_minutes()
        ),
    }
}

pub fn explain(
    p: &ClusterPromotion,
    world: &World,
    now: DateTime<Utc>,
    tz: Tz,
    last_pass: Option<&LastPass>,
) -> Explanation {
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut row = status_row(p, world, now, tz);
    row.last_pass = last_pass.cloned();
    let status = p.status.clone().unwrap_or_default();
    let (settings, setting_errors) = crate::settings::parse(p);
    let stages = p
        .spec
        .stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let trigger = match stage.trigger.as_ref() {
                Some(t) if t.auto.is_some() => "auto",
                Some(t) if t.manual.is_some() => "manual",
                _ => "none",
            };
            let profile = profile_name(&name, &stage.name);
            let profile_state = match world.profiles.get(&profile) {
                None => "notCreated",
                Some(cp) if cp.metadata.deletion_timestamp.is_some() => "beingDeleted",
                Some(cp) if main_profile(p, stage).is_applied(cp) => "current",
                Some(_) => "earlierRevision",
            };
            let pv = preverification_name(&name, &stage.name);
            let stored = status
                .stages
                .iter()
                .flatten()
                .find(|s| s.name == stage.name);
            let selector = stage.cluster_selector.clone().unwrap_or_default();
            let summaries = world.summaries.get(&profile);
            let record = world
                .profiles
                .get(&profile)
                .and_then(|cp| WriteRecord::of(p, cp));
            let freshness = WriteRecord::freshness(record.as_ref());
            let known = world
                .profiles
                .get(&profile)
                .and_then(|cp| crate::pass::known_hashes::of(p, world, cp));
            let redeploy = world.profiles.contains_key(&profile).then(|| {
                let text = redeploy_text(record.as_ref());
                match &known {
                    Some(k) => format!(
                        "{text}; a summary whose features carry the hashes Sveltos reported for \
                         this spec when revision {} completed counts at once",
                        k.revision
                    ),
                    None => text,
                }
            });
            let matching = matching_clusters(&selector, world);
            let written = settings.failure_budget.for_stage(&stage.name);
            let active = matching.iter().filter(|c| !c.paused).count();
            let failure_budget = (!written.is_zero()).then(|| {
                format!(
                    "{} ({} of {active} clusters)",
                    written.text(),
                    written.allows(active)
                )
            });
            let budgeted = crate::annotations::budgeted_now(p)
                .map(|b| {
                    b.of_stage(&stage.name)
                        .iter()
                        .map(|c| ExcludedExplanation {
                            cluster: c.cluster.clone(),
                            why: c.why.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let selects_no_cluster = matching.is_empty().then(|| {
                if settings.allow_empty_stages.allowed(&stage.name) {
                    format!(
                        "passes empty, as upstream's: {} allows it",
                        crate::settings::ALLOW_EMPTY_STAGES
                    )
                } else {
                    format!(
                        "holds the rollout when reached: {}",
                        crate::pass::empty_stage::message(
                            &stage.name,
                            &selector,
                            world.clusters.iter().map(|c| &c.labels),
                        )
                    )
                }
            });
            let clusters = matching
                .into_iter()
                .map(|c| {
                    let cs = summaries.and_then(|s| s.find(c.kind, &c.namespace, &c.name));
                    let provisioned = cs.and_then(|cs| {
                        summaries.map(|s| {
                            let known = known.as_ref().map(|k| &k.hashes);
                            cs.provisioned(s.content(cs), freshness, known, Some(now))
                        })
                    });
                    ClusterExplanation {
                        cluster: c.to_string(),
                        ready: c.ready,
                        paused: c.paused,
                        cluster_summary: cs.map(|cs| cs.name.to_string()),
                        features: cs
                            .map(|cs| {
                                cs.features
                                    .iter()
                                    .map(|f| FeatureExplanation {
                                        id: f.id.to_string(),
                                        status: f.status.as_deref().map(String::from),
                                        failure_message: f
                                            .failure_message
                                            .as_deref()
                                            .map(String::from),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        provisioned: cs.map(|_| match provisioned {
                            Some(Provisioned::Yes) => "Yes",
                            Some(Provisioned::Stale(_)) => "Stale",
                            _ => "No",
                        }),
                        stale: match provisioned {
                            Some(Provisioned::Stale(why)) => Some(stale_text(why)),
                            _ => None,
                        },
                    }
                })
                .collect();
            let excluded = world
                .excluded
                .iter()
                .filter(|x| selector.selects(&x.cluster.labels).unwrap_or(false))
                .map(|x| ExcludedExplanation {
                    cluster: x.cluster.to_string(),
                    why: x.why.clone(),
                })
                .collect();
            let gates = stage.trigger.as_ref().and_then(|t| t.gates());
            let delay = gates.as_ref().and_then(|g| g.delay).map(|d| d.to_string());
            let health_checks = gates
                .iter()
                .flat_map(|g| g.post_delay_health_checks.iter())
                .map(|check| {
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
                    HealthCheckExplanation {
                        name: check.name.clone(),
                        target: if what.is_empty() {
                            "metrics".into()
                        } else {
                            what
                        },
                    }
                })
                .collect();
            let window = stage
                .trigger
                .as_ref()
                .and_then(|t| t.auto.as_ref())
                .and_then(|a| a.promotion_window.as_ref())
                .map(|w| {
                    let (state, changes_at, error) =
                        match PromotionWindow::parse(&w.from, &w.to, tz) {
                            Ok(pw) => match pw.state(now) {
                                WindowState::Open { closes_at } => ("open", closes_at, None),
                                WindowState::Closed { opens_at } => ("closed", opens_at, None),
                            },
                            Err(e) => ("invalid", None, Some(e.to_string())),
                        };
                    WindowExplanation {
                        from: w.from.clone(),
                        to: w.to.clone(),
                        state,
                        changes_at,
                        error,
                    }
                });
            let approval = stage
                .trigger
                .as_ref()
                .and_then(|t| t.manual.as_ref())
                .map(|m| {
                    let record = crate::annotations::approval(p, &stage.name);
                    ApprovalExplanation {
                        approved: m.is_approved(),
                        by: record.as_ref().map(|r| r.by.clone()),
                        at: record.map(|r| r.at),
                    }
                });
            StageExplanation {
                name: stage.name.clone(),
                number: i + 1,
                trigger,
                profile,
                profile_state,
                preverification_profile: world.profiles.contains_key(&pv).then_some(pv),
                description: stored.and_then(|s| s.current_status_description.clone()),
                failure_message: stored.and_then(|s| s.failure_message.clone()),
                provisioned_at: stored
                    .and_then(|s| s.last_successful_applied_time)
                    .map(|t| t.as_datetime()),
                promoted_at: stored
                    .and_then(|s| s.current_status_description.as_deref())
                    .filter(|d| description_text(d) == "Successfully provisioned")
                    .and_then(description_time),
                selects_no_cluster,
                redeploy,
                clusters,
                excluded,
                failure_budget,
                budgeted,
                delay,
                health_checks,
                window,
                approval,
            }
        })
        .collect();
    let annotation_problems = setting_errors
        .iter()
        .chain(&crate::known_keys::problems(p))
        .map(|e| AnnotationProblem {
            severity: "error",
            message: e.to_string(),
        })
        .chain(
            crate::known_keys::warnings(p)
                .iter()
                .map(|w| AnnotationProblem {
                    severity: "warning",
                    message: w.to_string(),
                }),
        )
        .collect();
    let bypass = crate::annotations::freeze_bypass(p);
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let freezes = crate::freeze::Freezes::new(&world.freezes, now)
        .all
        .iter()
        .filter(|f| f.selects(&labels) && f.phase != crate::api::FreezePhase::Expired)
        .map(|f| FreezeExplanation {
            name: f.name.to_string(),
            phase: f.phase.as_str(),
            reason: f.reason().to_string(),
            until: f.until(),
            bypassed: matches!(&bypass, Some(Ok(b)) if crate::freeze::bypass_allows(b, f.name, now)),
        })
        .collect();
    Explanation {
        revision: status.profile_spec_hash.clone(),
        revision_id: status
            .profile_spec_hash
            .as_deref()
            .map(crate::api::revision_id),
        paused_by: crate::annotations::paused(p).map(|r| format!("{} {}", r.by, r.at)),
        policy: PolicyExplanation {
            progress_deadline: p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::settings::PROGRESS_DEADLINE))
                .cloned(),
            failure_policy: settings.failure_policy.as_str(),
            rollback_order: settings.rollback_order.as_str(),
            revision_history_limit: settings.revision_history_limit,
            rollback_deadline: settings
                .rollback_deadline
                .as_ref()
                .map_or("none".into(), |d| d.text.clone()),
            allow_empty_stages: p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::settings::ALLOW_EMPTY_STAGES))
                .cloned(),
        },
        annotations: crate::known_keys::present(p),
        annotation_problems,
        deadline: current_deadline(p, &row, now),
        rollback_deadline: crate::pass::deadline::predicted_rollback_due(p, now),
        freezes,
        freeze_bypass: bypass.map(|b| match b {
            Ok(b) => format!("by {} until {}: {}", b.by, b.until, b.reason),
            Err(why) => why,
        }),
        not_stored: crate::annotations::History::of(p)
            .candidates("")
            .filter(|e| {
                let object = crate::api::revision_name(&name, &e.revision);
                matches!(world.revisions.get(&object), Some(None))
            })
            .map(|e| e.id.clone())
            .collect(),
        history: crate::annotations::History::of(p).0,
        status: row,
        stages,
        now,
    }
}

/// When the current stage's progress deadline falls, while the stage is in progress.
fn current_deadline(
    p: &ClusterPromotion,
    row: &StatusRow,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    use crate::pass::Phase::*;
    if !matches!(
        row.phase,
        Progressing | RunningChecks | ChecksFailing | Soaking | Failing
    ) {
        return None;
    }
    let stage = p.spec.stage(&row.stage)?;
    let entry = p
        .status
        .as_ref()?
        .stages
        .iter()
        .flatten()
        .find(|s| s.name == row.stage)?;
    crate::pass::deadline::predicted_due(p, stage, entry, now)
}

impl Explanation {
    pub fn text(&self) -> String {
        let mut out = String::new();
        let row = &self.status;
        let now = self.now;
        let name = &row.name;
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
        match &row.last_pass {
            Some(lp) => {
                let _ = writeln!(
                    out,
                    "  last pass: {} ({})",
                    lp.last_successful_time
                        .map(|t| format!("succeeded {} ago", age(Some(t), now)))
                        .unwrap_or_else(|| "never succeeded".into()),
                    lp.source
                );
                if let Some(w) = lp.stale(now, row.last_recorded_write) {
                    let _ = writeln!(out, "  warning: {w}");
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "  last pass: no CronJob read (--cronjob none, not found or not readable); {}",
                    crate::ops::inspect::recorded_write_text(row.last_recorded_write, now)
                );
            }
        }
        if let Some(by) = &self.paused_by {
            let _ = writeln!(
                out,
                "  paused by {by}; `{} resume {name}` lets passes act again",
                crate::invocation::command()
            );
        }
        let _ = writeln!(
            out,
            "  revision: {}",
            match (&self.revision_id, &self.revision) {
                (Some(id), Some(hash)) => format!("{id} (profileSpecHash {hash})"),
                _ => "none yet".into(),
            }
        );
        let pol = &self.policy;
        let _ = writeln!(
            out,
            "  progress deadline: {}; on failure: {}{}; rollback deadline: {}",
            pol.progress_deadline.as_deref().unwrap_or("none"),
            pol.failure_policy,
            if pol.failure_policy == "rollback" {
                format!(" ({})", pol.rollback_order)
            } else {
                String::new()
            },
            pol.rollback_deadline
        );
        if let Some(allowed) = &pol.allow_empty_stages {
            let _ = writeln!(out, "  stages allowed to pass empty: {allowed}");
        }
        for problem in &self.annotation_problems {
            let _ = writeln!(out, "  {}: {}", problem.severity, problem.message);
        }
        if !self.not_stored.is_empty() {
            let _ = writeln!(
                out,
                "  warning: revision {} not stored (no PromotionRevision): a rollback cannot restore it; `{} crd --own | kubectl apply -f -` installs PromotionRevisions",
                self.not_stored.join(", "),
                crate::invocation::command()
            );
        }
        if let Some(t) = self.deadline {
            let _ = writeln!(
                out,
                "  stage {} must complete by {} ({})",
                row.stage,
                ts(t),
                relative(Some(t), now)
            );
        }
        if let Some(t) = self.rollback_deadline {
            let _ = writeln!(
                out,
                "  the rollback must be done by {} ({}); past that it holds for a person",
                ts(t),
                relative(Some(t), now)
            );
        }
        for f in &self.freezes {
            let _ = writeln!(
                out,
                "  freeze {} ({}): {} ({}){}",
                f.name,
                f.phase,
                f.reason,
                f.until,
                if f.bypassed { "; bypassed" } else { "" }
            );
        }
        if let Some(b) = &self.freeze_bypass {
            let _ = writeln!(out, "  freeze bypass: {b}");
        }
        if !self.history.is_empty() {
            let _ = writeln!(
                out,
                "  history (newest first, {} kept):",
                pol.revision_history_limit
            );
            for e in &self.history {
                let mut line = format!(
                    "    revision {}: started {}",
                    e.id,
                    e.started_at
                        .map(|t| t.to_string())
                        .unwrap_or_else(|| "?".into())
                );
                if let Some(t) = e.completed_at {
                    let _ = write!(line, ", completed {t}");
                }
                if self.not_stored.contains(&e.id) {
                    line.push_str(", not stored");
                }
                if let Some(r) = &e.rolled_back {
                    let _ = write!(
                        line,
                        ", rolled back {} to revision {} ({}, by {})",
                        r.at,
                        r.to,
                        r.cause.as_str(),
                        r.by
                    );
                }
                let _ = writeln!(out, "{line}");
            }
        }
        for s in &self.stages {
            let _ = writeln!(
                out,
                "\nStage {}/{} {} (trigger: {})",
                s.number,
                self.stages.len(),
                s.name,
                s.trigger
            );
            let _ = writeln!(
                out,
                "  ClusterProfile {}: {}",
                s.profile,
                profile_state_words(s.profile_state)
            );
            if let Some(pv) = &s.preverification_profile {
                let _ = writeln!(
                    out,
                    "  ClusterProfile {pv}: applied (preHealthCheckDeployment)"
                );
            }
            if let Some(t) = &s.description {
                let _ = writeln!(out, "  status: {t}");
            }
            if let Some(f) = &s.failure_message {
                let _ = writeln!(out, "  failure: {f}");
            }
            if let Some(t) = s.provisioned_at {
                let _ = writeln!(out, "  provisioned: {}", ts(t));
            }
            if let Some(t) = s.promoted_at {
                let _ = writeln!(out, "  promoted: {}", ts(t));
            }
            if let Some(r) = &s.redeploy {
                let _ = writeln!(out, "  redeploy: {r}");
            }
            if let Some(e) = &s.selects_no_cluster {
                let _ = writeln!(out, "  selects no cluster: {e}");
            }
            let _ = writeln!(out, "  clusters ({}):", s.clusters.len());
            for c in &s.clusters {
                let flags = format!(
                    "{}{}",
                    if c.ready { "ready" } else { "NOT READY" },
                    if c.paused { ", paused (skipped)" } else { "" }
                );
                let detail = match &c.cluster_summary {
                    None => "no ClusterSummary".to_string(),
                    Some(cs) => {
                        let features: Vec<String> = c
                            .features
                            .iter()
                            .map(|f| {
                                let mut t =
                                    format!("{} {}", f.id, f.status.as_deref().unwrap_or("?"));
                                if let Some(m) = &f.failure_message {
                                    let _ = write!(t, " ({m})");
                                }
                                t
                            })
                            .collect();
                        format!(
                            "{cs}: {}{}",
                            if features.is_empty() {
                                "no features yet".into()
                            } else {
                                features.join(", ")
                            },
                            match (c.provisioned, &c.stale) {
                                (Some("Yes"), _) => String::new(),
                                (Some("Stale"), Some(why)) => format!(" [not yet: {why}]"),
                                _ => " [not provisioned]".into(),
                            }
                        )
                    }
                };
                let _ = writeln!(out, "    {} ({flags}): {detail}", c.cluster);
            }
            for x in &s.excluded {
                let _ = writeln!(out, "    {} (left out: {})", x.cluster, x.why);
            }
            if let Some(b) = &s.failure_budget {
                let _ = writeln!(
                    out,
                    "  failure budget: {b}; counted in this run: {}",
                    s.budgeted.len()
                );
            }
            for x in &s.budgeted {
                let _ = writeln!(
                    out,
                    "    {} (counted against the failure budget until it runs the revision: {})",
                    x.cluster, x.why
                );
            }
            if let Some(delay) = &s.delay {
                let _ = writeln!(out, "  delay: {delay}");
            }
            for check in &s.health_checks {
                let _ = writeln!(out, "  health check {} ({})", check.name, check.target);
            }
            if let Some(w) = &s.window {
                let state = match (w.state, w.changes_at) {
                    ("open", at) => format!(
                        "open, closes at {}",
                        at.map(ts).unwrap_or_else(|| "never".into())
                    ),
                    ("closed", at) => format!(
                        "closed, opens at {}",
                        at.map(ts).unwrap_or_else(|| "never".into())
                    ),
                    _ => format!("invalid: {}", w.error.as_deref().unwrap_or_default()),
                };
                let _ = writeln!(
                    out,
                    "  promotion window {:?} to {:?}: {state}",
                    w.from, w.to
                );
            }
            if let Some(a) = &s.approval {
                let approval = match (a.approved, &a.by) {
                    (true, Some(by)) => {
                        format!(
                            "approved by {by} at {}",
                            a.at.as_deref().unwrap_or_default()
                        )
                    }
                    (true, None) => "approved".into(),
                    (false, _) => format!(
                        "not approved (`{} approve {name} --stage {}`)",
                        crate::invocation::command(),
                        s.name
                    ),
                };
                let _ = writeln!(out, "  manual approval: {approval}");
            }
        }
        if !row.notifications.is_empty() {
            let _ = writeln!(
                out,
                "\nNotifications not yet delivered ({}):",
                row.notifications.len()
            );
            for n in &row.notifications {
                let stage = n
                    .stage
                    .as_deref()
                    .map(|s| format!(" (stage {s})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {}{stage} at {}: {}",
                    n.transition,
                    ts(n.at),
                    n.message
                );
                match &n.receivers {
                    None => {
                        let _ = writeln!(
                            out,
                            "    not routed yet: the notification settings could not be read"
                        );
                    }
                    Some(to) => {
                        for (r, d) in to {
                            let state = match (&d.last_error, d.attempts) {
                                (Some(e), n) => format!(
                                    "{n} attempt{}, last error: {e}",
                                    if n == 1 { "" } else { "s" }
                                ),
                                (None, _) => "not tried yet".into(),
                            };
                            let _ = writeln!(out, "    to {r}: {state}");
                        }
                    }
                }
            }
        }
        let p = &row.prediction;
        let _ = writeln!(
            out,
            "\nPrediction (if nothing changes before the next pass): {:?}, {}",
            p.phase, p.summary
        );
        if let Some(t) = p.next_check {
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
            if p.actions.is_empty() {
                "change nothing".into()
            } else {
                p.actions.join("; ")
            }
        );
        out
    }
}

/// The text of `promoter explain`.
/// A stage's `profileState` (`notCreated`, `beingDeleted`, `current`, `earlierRevision`) in
/// words, where people read it.
pub fn profile_state_words(state: &str) -> &'static str {
    match state {
        "notCreated" => "not created",
        "beingDeleted" => "being deleted",
        "current" => "applied, current revision",
        _ => "applied, an earlier revision",
    }
}

/// A cluster's `provisioned` (`Yes`, `No`, `Stale`) in words.
pub fn provisioned_words(provisioned: &str) -> &'static str {
    match provisioned {
        "Yes" => "provisioned",
        "Stale" => "provisioned before its current spec (stale)",
        _ => "not provisioned yet",
    }
}

pub fn render(
    p: &ClusterPromotion,
    world: &World,
    now: DateTime<Utc>,
    tz: Tz,
    last_pass: Option<&LastPass>,
) -> String {
    explain(p, world, now, tz, last_pass).text()
}
