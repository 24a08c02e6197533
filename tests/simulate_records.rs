//! The simulator's outputs checked against the run's own records: the Events every pass wrote,
//! and each promotion as stored after each pass (its status, its completion and other records),
//! for each promotion of multi-promotion runs, with and without `--update`, `--freeze`, `--fail`.
//!
//! The expectations are derived from those records alone, never from the simulator's own
//! reading of them: an Event the pass wrote is a line of the timeline at the Event's time, a
//! line of a kind the passes announce has its Event, the verdict is what the promotion's own last
//! pass decided and recorded.

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use common::{example, example_fleet};
use promoter::api::{ClusterPromotion, revision_id};
use promoter::fake::cluster_promotion_type;
use promoter::pass::{Phase, PromotionReport};
use promoter::sim::timeline::PromotionTimeline;
use promoter::sim::{
    Fleet, ScriptedApproval, ScriptedFailure, ScriptedFreeze, ScriptedUpdate, SimHealth,
    SimOptions, SimReport, SimWorld, Simulation,
};
use std::collections::BTreeMap;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 2, 17, 6, 0, 0).unwrap()
}

fn lab() -> Fleet {
    example_fleet("blog-lab.yaml")
}

fn opts() -> SimOptions {
    SimOptions {
        until: Duration::days(3),
        ..SimOptions::new(start())
    }
}

/// One pass as the fake API server recorded it.
struct Pass {
    at: DateTime<Utc>,
    /// Each promotion as stored after the pass.
    stored: BTreeMap<String, ClusterPromotion>,
    /// What the pass decided for each promotion.
    decided: Vec<PromotionReport>,
}

/// An Event as stored.
#[derive(Debug)]
struct Recorded {
    about: String,
    reason: String,
    note: String,
    at: DateTime<Utc>,
}

/// Runs the simulation, keeping what the API server holds after each pass and every Event.
async fn run_recorded(
    promotions: Vec<ClusterPromotion>,
    fleet: Fleet,
    opts: &SimOptions,
) -> (SimReport, Vec<Pass>, Vec<Recorded>) {
    let world = SimWorld {
        promotions,
        fleet,
        objects: Vec::new(),
    };
    let mut sim = Simulation::start(world, SimHealth::FleetObjects, opts)
        .await
        .unwrap();
    let mut passes = Vec::new();
    let report = sim
        .run(|sim, at, step| {
            let stored = sim
                .server()
                .store()
                .all(&cluster_promotion_type())
                .into_iter()
                .map(|v| serde_json::from_value::<ClusterPromotion>(v).unwrap())
                .map(|p| (p.metadata.name.clone().unwrap(), p))
                .collect();
            passes.push(Pass {
                at,
                stored,
                decided: step.decided.clone(),
            });
        })
        .await
        .unwrap();
    let store = sim.server().store();
    let rt = store
        .resource("events.k8s.io", "v1", "events")
        .unwrap()
        .clone();
    let mut events: Vec<(u64, Recorded)> = store
        .all(&rt)
        .into_iter()
        .map(|e| {
            let text = |p: &str| {
                e.pointer(p)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            (
                text("/metadata/resourceVersion").parse().unwrap(),
                Recorded {
                    about: text("/regarding/name"),
                    reason: text("/reason"),
                    note: text("/note"),
                    at: DateTime::parse_from_rfc3339(&text("/eventTime"))
                        .unwrap()
                        .with_timezone(&Utc),
                },
            )
        })
        .collect();
    events.sort_by_key(|(v, _)| *v);
    (report, passes, events.into_iter().map(|(_, e)| e).collect())
}

/// How a transition the passes record as an Event reads in the timeline: the Event's reason and
/// how its line begins.
const SHOWN_AS: &[(&str, &[&str])] = &[
    ("StageProvisioning", &["profile applied"]),
    ("StageProvisioned", &["all clusters provisioned"]),
    ("AwaitingApproval", &["awaiting manual approval"]),
    ("WindowOpened", &["promotion window open"]),
    ("ChecksFailing", &["health checks failing"]),
    ("RolloutComplete", &["promoted"]),
    (
        "DeploymentFailed",
        &["deployment failing: ", "deployment failed: "],
    ),
    ("ProgressDeadlineExceeded", &["progress deadline"]),
    (
        "RollbackStarted",
        &["rolling back to revision", "waits to roll back to revision"],
    ),
    ("StageRolledBack", &["rolled back to revision"]),
    ("Frozen", &["frozen: "]),
    ("Blocked", &["blocked: "]),
];

/// Lines that are nothing but an Event of the pass: each has its Event.
const ANNOUNCED: &[&str] = &[
    "profile applied",
    "all clusters provisioned",
    "awaiting manual approval",
    "promotion window open",
    "health checks failing",
    "deployment failing: ",
    "deployment failed: ",
    "frozen: ",
    "blocked: ",
];

/// Whether `note` names `stage` (`Stage dev provisioned`, `Provisioning stage dev`, …).
fn names_stage(note: &str, stage: &str) -> bool {
    note.split(|c: char| c.is_whitespace() || c == ':' || c == ',' || c == ';')
        .any(|w| w == stage)
}

/// Checks `report` against the records; returns every disagreement.
fn disagreements(report: &SimReport, passes: &[Pass], events: &[Recorded]) -> Vec<String> {
    let mut wrong = Vec::new();
    let last = passes.last().unwrap();
    for t in &report.promotions {
        let name = &t.name;
        let own: Vec<&Recorded> = events.iter().filter(|e| &e.about == name).collect();
        let stored = &last.stored[name];
        let decided = last
            .decided
            .iter()
            .find(|r| &r.name == name)
            .unwrap_or_else(|| panic!("{name}: not decided in the last pass"));
        verdict(t, stored, decided, &own, &mut wrong);
        lines_and_events(t, stored, &own, &mut wrong);
        final_run(t, stored, &mut wrong);
        revisions(t, passes, &mut wrong);
    }
    wrong
}

/// The verdict is the promotion's own: complete when its completion is recorded (at its
/// RolloutComplete Event), otherwise stopped where and why its own last pass said.
fn verdict(
    t: &PromotionTimeline,
    stored: &ClusterPromotion,
    decided: &PromotionReport,
    own: &[&Recorded],
    wrong: &mut Vec<String>,
) {
    let name = &t.name;
    let recorded_complete = promoter::annotations::is_complete(stored);
    if t.complete != recorded_complete {
        wrong.push(format!(
            "{name}: complete {} but the completion record says {recorded_complete}",
            t.complete
        ));
    }
    if t.complete {
        let done = own
            .iter()
            .rev()
            .find(|e| e.reason == "RolloutComplete")
            .map(|e| e.at);
        if t.finished_at != done {
            wrong.push(format!(
                "{name}: finished at {:?}, its RolloutComplete Event at {done:?}",
                t.finished_at
            ));
        }
        if t.stopped.is_some() {
            wrong.push(format!("{name}: complete and stopped"));
        }
        return;
    }
    let Some(stop) = &t.stopped else {
        wrong.push(format!("{name}: neither complete nor stopped"));
        return;
    };
    if stop.stage != decided.stage {
        wrong.push(format!(
            "{name}: stopped at stage {:?}, its last pass decided at {:?}",
            stop.stage, decided.stage
        ));
    }
    let current = stored
        .status
        .as_ref()
        .and_then(|s| s.current_stage_name.clone());
    if stop.stage != current && decided.phase != Phase::Frozen {
        wrong.push(format!(
            "{name}: stopped at stage {:?}, its status is at {current:?}",
            stop.stage
        ));
    }
    let said = stop.reason == decided.summary
        || stop
            .reason
            .ends_with(&format!(" while: {}", decided.summary))
        || (decided.phase == Phase::Complete && stop.reason == "complete");
    if !said {
        wrong.push(format!(
            "{name}: stopped for {:?}, its last pass decided {:?} ({})",
            stop.reason, decided.summary, decided.phase
        ));
    }
}

/// Every Event is a line at its time about the stage it names; every line of a kind the passes
/// announce is an Event's.
fn lines_and_events(
    t: &PromotionTimeline,
    stored: &ClusterPromotion,
    own: &[&Recorded],
    wrong: &mut Vec<String>,
) {
    let name = &t.name;
    let stages: Vec<&str> = stored.spec.stages.iter().map(|s| s.name.as_str()).collect();
    let mut used = vec![false; t.events.len()];
    for e in own {
        let Some((_, begins)) = SHOWN_AS.iter().find(|(r, _)| *r == e.reason) else {
            continue;
        };
        let about: Vec<&str> = stages
            .iter()
            .copied()
            .filter(|s| names_stage(&e.note, s))
            .collect();
        let found = t.events.iter().enumerate().position(|(i, l)| {
            !used[i]
                && l.at == e.at
                && begins.iter().any(|b| l.event.starts_with(b))
                && (about.is_empty() || about.contains(&l.stage.as_str()))
        });
        match found {
            Some(i) => used[i] = true,
            None => wrong.push(format!(
                "{name}: the Event {} {:?} at {} is no line of the timeline",
                e.reason, e.note, e.at
            )),
        }
        if e.reason == "DeploymentFailed" {
            // The line says Sveltos' error, as the Event does.
            let error = e.note.split_once(": ").map(|(_, f)| f).unwrap_or(&e.note);
            if !t
                .events
                .iter()
                .any(|l| l.at == e.at && l.event.contains(error))
            {
                wrong.push(format!("{name}: no line says {error:?}"));
            }
        }
    }
    for (i, l) in t.events.iter().enumerate() {
        if used[i] || !ANNOUNCED.iter().any(|b| l.event.starts_with(b)) {
            continue;
        }
        wrong.push(format!(
            "{name}: the line {} {} {:?} has no Event",
            l.at, l.stage, l.event
        ));
    }
    // A stage promoted past: the next stage's profile applied at that time (or the completion).
    for (i, l) in t.events.iter().enumerate() {
        if l.event != "promoted" {
            continue;
        }
        let next = stages
            .iter()
            .position(|s| *s == l.stage)
            .and_then(|k| stages.get(k + 1));
        let announced = match next {
            Some(next) => own.iter().any(|e| {
                e.reason == "StageProvisioning" && e.at == l.at && names_stage(&e.note, next)
            }),
            None => own
                .iter()
                .any(|e| e.reason == "RolloutComplete" && e.at == l.at),
        };
        if !announced {
            wrong.push(format!(
                "{name}: line {i}: {} promoted at {}, but no pass started the next stage or completed then",
                l.stage, l.at
            ));
        }
    }
}

/// The stages of the run the status records: started when its entry says, provisioned when it
/// says every cluster was deployed.
fn final_run(t: &PromotionTimeline, stored: &ClusterPromotion, wrong: &mut Vec<String>) {
    let name = &t.name;
    for entry in stored
        .status
        .as_ref()
        .and_then(|s| s.stages.clone())
        .unwrap_or_default()
    {
        let Some(st) = t.stages.iter().find(|s| s.name == entry.name) else {
            wrong.push(format!("{name}: no stage {}", entry.name));
            continue;
        };
        let started = entry.last_update_reconciled_time.map(|t| t.as_datetime());
        if st.started_at != started {
            wrong.push(format!(
                "{name}: stage {} started at {:?}, its status says {started:?}",
                st.name, st.started_at
            ));
        }
        let provisioned = entry.last_successful_applied_time.map(|t| t.as_datetime());
        if st.provisioned_at != provisioned {
            wrong.push(format!(
                "{name}: stage {} provisioned at {:?}, its status says {provisioned:?}",
                st.name, st.provisioned_at
            ));
        }
    }
}

/// A new revision's line names the revision the status recorded before it and the one the next
/// run records.
fn revisions(t: &PromotionTimeline, passes: &[Pass], wrong: &mut Vec<String>) {
    let name = &t.name;
    let recorded = |p: &Pass| {
        p.stored[name]
            .status
            .as_ref()
            .and_then(|s| s.profile_spec_hash.as_deref())
            .map(revision_id)
    };
    for l in t
        .events
        .iter()
        .filter(|l| l.event.starts_with("new revision"))
    {
        let before = passes.iter().rev().find(|p| p.at < l.at).and_then(recorded);
        let after: Vec<String> = passes
            .iter()
            .filter(|p| p.at >= l.at)
            .filter_map(recorded)
            .collect();
        let Some(before) = before else {
            continue;
        };
        if !l.event.contains(&format!("(replaces {before})")) {
            wrong.push(format!("{name}: {:?} does not replace {before}", l.event));
        }
        let named = l
            .event
            .trim_start_matches("new revision ")
            .split_whitespace()
            .next()
            .unwrap_or_default();
        let started = after.iter().any(|r| r == named);
        let held = after.iter().all(|r| *r == before);
        if !started && !held {
            wrong.push(format!(
                "{name}: {:?} names {named}, the runs after it record {after:?}",
                l.event
            ));
        }
    }
}

/// Runs a scenario and asserts the report agrees with its records.
async fn checked(
    what: &str,
    promotions: Vec<ClusterPromotion>,
    fleet: Fleet,
    opts: &SimOptions,
) -> SimReport {
    let (report, passes, events) = run_recorded(promotions, fleet, opts).await;
    let wrong = disagreements(&report, &passes, &events);
    assert!(
        wrong.is_empty(),
        "{what}:\n{}\n\n{}",
        wrong.join("\n"),
        report.render_text()
    );
    report
}

fn three() -> Vec<ClusterPromotion> {
    [
        "blog-kyverno-auto.yaml",
        "blog-kyverno-manual.yaml",
        "rollback-on-deadline.yaml",
    ]
    .iter()
    .flat_map(|f| example(f))
    .collect()
}

fn updates(at: Duration) -> Vec<ScriptedUpdate> {
    vec![
        ScriptedUpdate {
            promotions: example("blog-kyverno-update.yaml"),
            at,
        },
        ScriptedUpdate {
            promotions: example("rollback-on-deadline-v2.yaml"),
            at,
        },
    ]
}

#[tokio::test]
async fn three_promotions_alone_and_approved() {
    checked("plain", three(), lab(), &opts()).await;
    let mut o = opts();
    o.approvals
        .push(ScriptedApproval::parse("kyverno-prog-rollout-man/staging@30m").unwrap());
    let report = checked("approved", three(), lab(), &o).await;
    assert!(report.promotions.iter().all(|p| p.complete));
}

#[tokio::test]
async fn three_promotions_with_an_update() {
    let mut o = opts();
    o.updates = updates(Duration::hours(1));
    checked("--update", three(), lab(), &o).await;
}

#[tokio::test]
async fn three_promotions_with_a_freeze() {
    let mut o = opts();
    o.freezes
        .push(ScriptedFreeze::parse("20m..2h=holidays").unwrap());
    checked("--freeze", three(), lab(), &o).await;
}

#[tokio::test]
async fn three_promotions_with_a_failure() {
    let mut o = opts();
    o.updates = updates(Duration::days(1));
    o.failures
        .push(ScriptedFailure::parse("staging@1d:3.6.0").unwrap());
    checked("--fail, rolled back", three(), lab(), &o).await;
    let mut o = opts();
    o.failures
        .push(ScriptedFailure::parse("dev01@10m").unwrap());
    checked("--fail, halted", three(), lab(), &o).await;
}

#[tokio::test]
async fn three_promotions_with_an_update_inside_a_freeze_and_a_failure() {
    let mut o = opts();
    o.updates = updates(Duration::hours(1));
    o.freezes
        .push(ScriptedFreeze::parse("20m..2h=holidays").unwrap());
    o.failures
        .push(ScriptedFailure::parse("staging@1h:3.6.0").unwrap());
    o.approvals
        .push(ScriptedApproval::parse("kyverno-prog-rollout-man/staging@3h").unwrap());
    checked("--update --freeze --fail", three(), lab(), &o).await;
}

#[tokio::test]
async fn three_promotions_on_a_derived_fleet() {
    let promotions = three();
    let fleet = Fleet::derive(&promotions, 2);
    let mut o = opts();
    o.updates = updates(Duration::hours(1));
    o.freezes.push(ScriptedFreeze::parse("30m..90m=x").unwrap());
    checked("derived fleet", promotions, fleet, &o).await;
}

/// A fourth promotion whose staging selector has a typo holds there (its Blocked Event is a line),
/// beside the three others, with an update and a freeze.
#[tokio::test]
async fn a_typo_beside_three_promotions() {
    let mut typo = example("blog-kyverno-auto.yaml").remove(0);
    typo.metadata.name = Some("typo".into());
    typo.spec.stages[1].cluster_selector =
        serde_json::from_value(serde_json::json!({"matchLabels": {"env": "stagin"}})).unwrap();
    let mut promotions = three();
    promotions.push(typo);
    let mut o = opts();
    o.updates = updates(Duration::hours(1));
    o.freezes
        .push(ScriptedFreeze::parse("20m..2h=holidays").unwrap());
    let report = checked("a typo", promotions.clone(), lab(), &o).await;
    let t = report.promotions.iter().find(|p| p.name == "typo").unwrap();
    assert_eq!(
        t.stopped.as_ref().and_then(|s| s.stage.as_deref()),
        Some("staging")
    );
    let fleet = Fleet::derive(&promotions, 2);
    checked("a typo, derived fleet", promotions, fleet, &o).await;
}
