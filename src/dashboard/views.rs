//! The pages, rendered on the server from the models (`model`): every text is escaped by maud,
//! nothing inline runs (the CSP forbids it), and the script only swaps in what the server
//! rendered, filters rows, and ticks countdowns. The words and symbols of each phase are here,
//! once, with an exhaustive match: a new phase does not compile until it has a look.

use super::hub::ClockView;
use super::model::{Banner, ClusterRevision, Detail, EventLine, FreezesView, OverviewRow, Row};
use crate::ops::explain::StageExplanation;
use crate::ops::inspect::{age, relative};
use crate::ops::stages::{StageProgress, StageState};
use crate::pass::phase::Phase;
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// What every page of one server shares.
#[derive(Clone, Debug)]
pub struct Page {
    /// The per-session token mutating requests carry.
    pub csrf: String,
    /// `--read-only`: no action is offered (and none is accepted).
    pub read_only: bool,
    /// Over a simulated fleet (`simulate --dashboard`): the clock's controls are shown.
    pub simulated: bool,
    /// Where the data comes from, for the header (`cluster` or the simulated fleet).
    pub source: String,
}

/// Class, symbol and words of a phase: colour is never the only signal.
pub fn phase_look(phase: Phase) -> (&'static str, &'static str, &'static str) {
    use Phase::*;
    match phase {
        Pending => ("pending", "○", "pending"),
        Progressing => ("deploying", "↻", "deploying"),
        Soaking => ("soaking", "◔", "soaking"),
        WindowClosed => ("window", "◷", "window closed"),
        RunningChecks => ("checks", "⋯", "running checks"),
        ChecksFailing => ("failing", "⚠", "checks failing"),
        AwaitingApproval => ("approval", "⚑", "awaiting approval"),
        Complete => ("complete", "✓", "complete"),
        Failing => ("retrying", "⟳", "failing, retrying"),
        Failed => ("failed", "✗", "failed"),
        Blocked => ("blocked", "⊘", "blocked"),
        Paused => ("paused", "‖", "paused"),
        Deleting => ("deleting", "×", "deleting"),
        Frozen => ("frozen", "❄", "frozen"),
        RollingBack => ("rollingback", "↺", "rolling back"),
        RolledBack => ("rolledback", "↺", "rolled back"),
        Aborted => ("aborted", "■", "aborted"),
        RollbackFailed => ("rollbackfailed", "⛔", "rollback failed"),
    }
}

fn progress_look(progress: StageProgress) -> (&'static str, &'static str, &'static str) {
    match progress {
        StageProgress::Passed => ("passed", "✓", "complete"),
        StageProgress::Current(p) => phase_look(p),
        StageProgress::RollingBack => phase_look(Phase::RollingBack),
        StageProgress::RolledBack => phase_look(Phase::RolledBack),
        StageProgress::NotReached => ("notreached", "·", "not reached"),
    }
}

/// Every phase, for the filter (the one vocabulary of `status`).
const PHASES: [Phase; 18] = Phase::ALL;

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A countdown the page keeps live: `in 1h59m` (as `status`' NEXT column), `due` once passed.
fn until(t: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    html! { time.until datetime=(ts(t)) data-until=(ts(t)) title=(ts(t)) { (relative(Some(t), now)) } }
}

/// A wait's end in a cell: `06:33Z (in 23m)` (the date too when it is not today).
fn until_short(t: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    let format = if t.date_naive() == now.date_naive() {
        "%H:%MZ"
    } else {
        "%Y-%m-%d %H:%MZ"
    };
    html! { (t.format(format).to_string()) " (" (until(t, now)) ")" }
}

/// How long ago, kept live: `5m ago`.
fn since(t: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    html! { time.since datetime=(ts(t)) data-since=(ts(t)) title=(ts(t)) { (age(Some(t), now)) " ago" } }
}

fn at(t: DateTime<Utc>) -> Markup {
    html! { time datetime=(ts(t)) { (ts(t)) } }
}

fn badge(phase: Phase) -> Markup {
    let (class, icon, words) = phase_look(phase);
    html! { span class={"badge st-" (class)} { span.ic aria-hidden="true" { (icon) } " " (words) } }
}

/// What an action button names.
#[derive(Default)]
struct Target<'a> {
    promotion: Option<&'a str>,
    stage: Option<&'a str>,
    name: Option<&'a str>,
}

/// The buttons that start an action: the script asks the server what it would change, shows it,
/// and sends it once confirmed.
fn action(page: &Page, label: &str, action: &str, t: Target<'_>) -> Markup {
    if page.read_only {
        return html! {};
    }
    html! {
        button type="button" class={"act act-" (action)} data-action=(action)
            data-promotion=[t.promotion] data-stage=[t.stage] data-name=[t.name] { (label) }
    }
}

/// The document around a view.
pub fn layout(
    page: &Page,
    title: &str,
    nav: &str,
    stream: &str,
    clock: Option<&ClockView>,
    body: Markup,
) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="promoter-token" content=(page.csrf);
                meta name="promoter-stream" content=(stream);
                meta name="promoter-clock" content=(clock.map(ClockView::json).unwrap_or_default());
                title { (title) " · promoter" }
                link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
                link rel="stylesheet" href={"/assets/app.css?v=" (super::assets::version())};
                script src={"/assets/app.js?v=" (super::assets::version())} defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "promoter" }
                    nav aria-label="Views" {
                        a href="/" aria-current=[(nav == "overview").then_some("page")] { "Overview" }
                        a href="/freezes" aria-current=[(nav == "freezes").then_some("page")] { "Freezes" }
                    }
                    span.source { (page.source) }
                    span.clock { "now " time #clock { } }
                    @if let Some(c) = clock.filter(|_| page.simulated) { (sim_controls(c)) }
                    span #live.live role="status" aria-live="polite" { }
                    @if page.read_only { span.ro { "read-only" } }
                }
                p #connection.banner.err role="alert" hidden { }
                div #banner { }
                main #main tabindex="-1" { (body) }
                (confirm_dialog())
                div #toast role="status" aria-live="polite" { }
            }
        }
    }
    .into_string()
}

/// The simulation's clock controls, as the clock is: one Play/Pause toggle that shows its state,
/// the speed asked (also one the page does not offer, such as `--speed 120`), and what the clock
/// reaches. The script keeps them so with every clock the server sends.
fn sim_controls(c: &ClockView) -> Markup {
    let (toggle, label) = if c.running {
        ("pause", "‖ Pause")
    } else {
        ("play", "▶ Play")
    };
    let mut speeds = super::sim::SPEEDS.to_vec();
    if !speeds.contains(&c.rate) {
        speeds.push(c.rate);
    }
    speeds.sort_by(f64::total_cmp);
    html! {
        span.sim role="group" aria-label="Simulation clock" {
            button #sim-toggle type="button" class={"toggle " (if c.running { "playing" } else { "paused" })}
                data-sim=(toggle) disabled[c.ended.is_some()] { (label) }
            span #sim-state role="status" { (c.state_text()) }
            label { "speed "
                select #sim-speed data-sim="speed" {
                    @for r in speeds {
                        option value=(r) selected[r == c.rate] { (super::hub::rate_text(r)) }
                    }
                }
            }
            button type="button" data-sim="step" title="Run the next pass now" { "Next pass" }
            button type="button" data-sim="skip" title="Jump to the next time something changes" { "Skip to next change" }
        }
    }
}

fn confirm_dialog() -> Markup {
    html! {
        dialog #confirm aria-labelledby="confirm-title" {
            form method="dialog" #confirm-form {
                h2 #confirm-title { }
                div #confirm-summary { }
                p.changes-title { "What will change:" }
                ul #confirm-changes { }
                div #confirm-fields {
                    label { "Reason " input #confirm-reason name="reason" maxlength="512" autocomplete="off"; }
                    label { "Note (recorded next to your identity) " input #confirm-by name="by" autocomplete="off"; }
                }
                p #confirm-error role="alert" { }
                div.buttons {
                    button type="button" #confirm-cancel value="cancel" { "Cancel" }
                    button type="submit" #confirm-ok.primary value="ok" { "Confirm" }
                }
            }
        }
    }
}

/// The banner: a read that failed, or passes that look stopped.
pub fn banner(_page: &Page, b: &Banner, now: DateTime<Utc>) -> String {
    html! {
        @if let Some(e) = &b.error {
            p.banner.err role="alert" { "Cannot read the cluster (showing what was last read): " (e) }
        }
        @if let Some(w) = b.last_pass.as_ref().and_then(|l| l.stale(now, None)) {
            p.banner.warn { "warning: " (w) }
        }
    }
    .into_string()
}

/// Whether the current stage `s` awaits its approval, as its phase or as a second fact (a freeze
/// or a pause holds it too), and `approve` lets it through: its Approve button is shown.
fn approvable(s: &StageState, also: &[Phase], approve: &[(String, bool)]) -> bool {
    let awaits = match s.progress {
        StageProgress::Current(Phase::AwaitingApproval) => true,
        StageProgress::Current(_) => also.contains(&Phase::AwaitingApproval),
        _ => false,
    };
    awaits && approve.iter().any(|(stage, _)| *stage == s.name)
}

/// ` · awaiting approval`: the second facts of a current stage, in words.
fn also_words(also: &[Phase]) -> String {
    also.iter()
        .map(|p| format!(" · {}", phase_look(*p).2))
        .collect()
}

/// Every phase a promotion is in (its phase, then the second facts), for the filter.
fn phases_attr(phase: Phase, also: &[Phase]) -> String {
    std::iter::once(phase)
        .chain(also.iter().copied())
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn stage_cell(page: &Page, r: &OverviewRow, s: &StageState, now: DateTime<Utc>) -> Markup {
    let (class, icon, words) = progress_look(s.progress);
    let title = match &s.description {
        Some(d) => format!("{}: {d}", s.name),
        None => s.name.clone(),
    };
    let approvable = approvable(s, &r.status.also, &r.offers.approve);
    html! {
        li class={"st st-" (class)} title=(title) {
            span.ic aria-hidden="true" { (icon) }
            span.sn { (s.name) }
            @if let StageProgress::Current(_) = s.progress {
                span.sw { (words) @if let Some(t) = s.until { " until " (until_short(t, now)) } (also_words(&r.status.also)) }
            } @else {
                span.vh { (words) }
            }
            @if approvable {
                (action(page, "Approve", "approve", Target { promotion: Some(&r.status.name), stage: Some(&s.name), ..Target::default() }))
            }
        }
    }
}

/// One `<tr>` of the overview (swapped in whole when it changes).
pub fn row(page: &Page, row: &Row, now: DateTime<Utc>) -> String {
    match row {
        Row::Unreadable { name, error } => html! {
            tr id={"row-" (name)} data-name=(name) data-phase="Blocked" data-phases="Blocked" data-labels="" {
                td { a href={"/promotions/" (name)} { (name) } }
                td { (badge(Phase::Blocked)) }
                td { "-" }
                td { "-" }
                td.msg { "cannot be read: " (error) }
            }
        }
        .into_string(),
        Row::Promotion(r) => {
            let s = &r.status;
            let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            html! {
                tr id={"row-" (s.name)} data-name=(s.name) data-phase=(format!("{:?}", s.phase)) data-phases=(phases_attr(s.phase, &s.also)) data-labels=(labels.join("\n")) {
                    td.name {
                        a href={"/promotions/" (s.name)} { (s.name) }
                        " " (badge(s.phase))
                        @for a in &s.also { " " (badge(*a)) }
                        @if !labels.is_empty() {
                            div.labels { @for l in &labels { span.label { (l) } " " } }
                        }
                    }
                    td { ol.pipeline aria-label={"stages of " (s.name)} { @for st in &r.stages { (stage_cell(page, r, st, now)) } } }
                    td { @match &r.revision { Some(id) => { code { (id) } }, None => { "-" } } }
                    td.next { @match s.next() { Some((what, t)) => { (what) " " (until(t, now)) }, None => { "-" } } }
                    td.msg { (s.message) }
                }
            }
            .into_string()
        }
    }
}

/// The overview, around its rows (rendered once per refresh, `rows_html`).
pub fn overview(rows_html: &str, count: usize) -> Markup {
    html! {
        h1.vh { "Overview" }
        form.filters role="search" #filters {
            label { span.vh { "Search" } input #q type="search" placeholder="Search promotions ( / )" autocomplete="off"; }
            label { span.vh { "Phase" }
                select #phase {
                    option value="" { "Every phase" }
                    @for p in PHASES { option value=(format!("{p:?}")) { (phase_look(p).2) } }
                }
            }
            label { span.vh { "Labels" } input #labels type="search" placeholder="Labels: team=payments,tier!=dev" autocomplete="off"; }
            span #count aria-live="polite" { (count) (if count == 1 { " promotion" } else { " promotions" }) }
        }
        table.overview {
            thead { tr { th scope="col" { "Promotion" } th scope="col" { "Stages" } th scope="col" { "Revision" } th scope="col" { "Next" } th scope="col" { "Message" } } }
            tbody #rows { (PreEscaped(rows_html)) }
        }
        @if count == 0 {
            p.empty #empty { "No ClusterPromotion yet." }
        }
    }
}

fn revision_chip(r: &ClusterRevision) -> (&'static str, String) {
    match r {
        ClusterRevision::Runs(id) => ("runs", format!("✓ {id}")),
        ClusterRevision::Deploying(id) => ("deploying", format!("↻ {id}")),
        ClusterRevision::Failed(id) => ("failed", format!("✗ {id}")),
        ClusterRevision::Stale(id) => ("stale", format!("? {id}")),
        ClusterRevision::Earlier => ("earlier", "earlier revision".into()),
        ClusterRevision::Nothing => ("none", "—".into()),
    }
}

fn stage_column(
    page: &Page,
    d: &Detail,
    s: &StageExplanation,
    state: Option<&StageState>,
    revisions: &[ClusterRevision],
    now: DateTime<Utc>,
) -> Markup {
    let name = &d.explanation.status.name;
    let (class, icon, words) =
        state
            .map(|st| progress_look(st.progress))
            .unwrap_or(("notreached", "·", "not reached"));
    let approve = d.offers.approve.iter().find(|(stage, _)| *stage == s.name);
    html! {
        section class={"stage st-" (class)} aria-labelledby={"stage-" (s.name)} {
            h2 #{"stage-" (s.name)} {
                span.ic aria-hidden="true" { (icon) } " " (s.number) ". " (s.name)
            }
            p.state { (words)
                @if let Some(t) = state.and_then(|st| st.until) { " until " (until_short(t, now)) }
                @if matches!(state.map(|st| st.progress), Some(StageProgress::Current(_))) { (also_words(&d.explanation.status.also)) }
            }
            dl {
                dt { "trigger" } dd { (s.trigger) }
                @if let Some(delay) = &s.delay { dt { "soak" } dd { (delay) } }
                @if let Some(w) = &s.window {
                    dt { "window" }
                    dd { code { (w.from) } " → " code { (w.to) } ": " (w.state)
                        @if let Some(t) = w.changes_at {
                            @if w.state == "open" { ", closes " } @else { ", opens " }
                            (until(t, now))
                        }
                        @if let Some(e) = &w.error { " — " (e) }
                    }
                }
                @if let Some(a) = &s.approval {
                    dt { "approval" }
                    dd {
                        @if a.approved {
                            "approved" @if let Some(by) = &a.by { " by " (by) } @if let Some(t) = &a.at { " at " (t) }
                        } @else { "not approved" }
                        @if let Some((stage, pre)) = approve {
                            " " (action(page, if *pre { "Pre-approve" } else { "Approve" }, "approve", Target { promotion: Some(name), stage: Some(stage), ..Target::default() }))
                        }
                    }
                }
                @for c in &s.health_checks { dt { "check" } dd { (c.name) " (" (c.target) ")" } }
                dt { "profile" } dd { code { (s.profile) } " " (crate::ops::explain::profile_state_words(s.profile_state)) }
                @if let Some(pv) = &s.preverification_profile { dt { "pre-check" } dd { code { (pv) } } }
                @if let Some(t) = s.provisioned_at { dt { "provisioned" } dd { (at(t)) } }
            }
            @if let Some(desc) = &s.description { p.desc { (desc) } }
            @if let Some(f) = &s.failure_message { p.failure role="note" { (f) } }
            @if let Some(why) = &s.selects_no_cluster {
                // An empty stage is said where its clusters would be, before it is reached too.
                h3 { "Clusters: none selected" }
                p.failure role="note" { "selects no cluster: " (why) }
            } @else {
                h3 { "Clusters (" (s.clusters.len()) ")" }
            }
            ul.chips {
                @for (c, rev) in s.clusters.iter().zip(revisions.iter().chain(std::iter::repeat(&ClusterRevision::Nothing))) {
                    @let (chip, text) = revision_chip(rev);
                    @let hover = c.features.iter().map(|f| format!("{} {}{}", f.id, f.status.as_deref().unwrap_or("?"), f.failure_message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())).collect::<Vec<_>>().join("\n");
                    li {
                        details class={"chip chip-" (chip)} id={"chip-" (s.name) "-" (c.cluster)} {
                            summary title=(hover) {
                                span.cn { (c.cluster) } " " span.cr { (text) }
                                @if !c.ready { " " span.flag { "not ready" } }
                                @if c.paused { " " span.flag { "paused" } }
                                @if s.budgeted.iter().any(|b| b.cluster == c.cluster) { " " span.flag { "failure budget" } }
                            }
                            div.chip-body {
                                @match &c.cluster_summary {
                                    None => { p { "no ClusterSummary yet" } }
                                    Some(cs) => {
                                        p { "ClusterSummary " code { (cs) } @if let Some(pv) = c.provisioned { ": " (crate::ops::explain::provisioned_words(pv)) } }
                                        @if c.features.is_empty() { p { "no features yet" } }
                                        ul { @for f in &c.features {
                                            li { (f.id) ": " (f.status.as_deref().unwrap_or("?"))
                                                @if let Some(m) = &f.failure_message { " — " span.failure { (m) } } }
                                        } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !s.excluded.is_empty() {
                ul.excluded { @for x in &s.excluded { li { (x.cluster) " left out: " (x.why) } } }
            }
            @if let Some(b) = &s.failure_budget {
                p.budget { "failure budget " (b) ": " (s.budgeted.len()) " counted in this run" }
            }
            @if !s.budgeted.is_empty() {
                ul.budgeted role="note" { @for x in &s.budgeted { li { (x.cluster) " counted against the failure budget until it runs the revision: " (x.why) } } }
            }
        }
    }
}

/// The inside of a promotion's page (swapped in whole when its model changes).
pub fn detail(page: &Page, d: &Detail, now: DateTime<Utc>) -> String {
    let e = &d.explanation;
    let s = &e.status;
    let name = &s.name;
    let o = &d.offers;
    html! {
        section.head aria-labelledby="title" {
            h1 #title { (name) " " (badge(s.phase)) @for a in &s.also { " " (badge(*a)) } }
            @if !d.labels.is_empty() {
                div.labels { @for (k, v) in &d.labels { span.label { (k) "=" (v) } " " } }
            }
            @if !s.message.is_empty() { p.message { (s.message) } }
            dl.facts {
                dt { "stage" } dd { (if s.stage.is_empty() { "-" } else { &s.stage }) " " (s.position()) }
                @if let Some(t) = s.until { dt { "waits until" } dd { (at(t)) " (" (until(t, now)) ")" } }
                dt { "revision" } dd { @match &e.revision { Some(r) => { code { (crate::api::revision_id(r)) } }, None => { "none yet" } } }
                @if let Some(t) = e.deadline { dt { "progress deadline" } dd { "stage " (s.stage) " must complete by " (at(t)) " (" (until(t, now)) ")" } }
                dt { "on failure" } dd { (e.policy.failure_policy)
                    @if e.policy.failure_policy == "rollback" { " (" (e.policy.rollback_order) ")" }
                    "; deadline " (e.policy.progress_deadline.as_deref().unwrap_or("none")) }
                @if let Some(by) = &e.paused_by { dt { "paused by" } dd { (by) } }
                dt { "last pass" } dd {
                    @match s.last_pass.as_ref() {
                        Some(lp) => { @match lp.last_successful_time { Some(t) => { "succeeded " (since(t, now)) }, None => { "never succeeded" } } " (" (lp.source) ")" },
                        None => { "no CronJob read; " (crate::ops::inspect::recorded_write_text(s.last_recorded_write, now)) },
                    }
                }
            }
            @if !page.read_only {
                div.actions role="group" aria-label="Actions" {
                    @if o.pause { (action(page, "Pause", "pause", Target { promotion: Some(name), ..Target::default() })) }
                    @if !o.resume.is_empty() { (action(page, "Resume", "resume", Target { promotion: Some(name), ..Target::default() })) }
                    @if o.abort { (action(page, "Abort", "abort", Target { promotion: Some(name), ..Target::default() })) }
                    @if o.rollback { (action(page, "Roll back…", "rollback", Target { promotion: Some(name), ..Target::default() })) }
                    @if !e.freezes.is_empty() { (action(page, "Bypass freeze…", "bypass", Target { promotion: Some(name), ..Target::default() })) }
                }
            }
            @if !e.freezes.is_empty() || e.freeze_bypass.is_some() {
                div.freezes-held {
                    h2 { "Freezes" }
                    ul {
                        @for f in &e.freezes {
                            li { "❄ " strong { (f.name) } " (" (f.phase) "): " (f.reason) " (" (f.until) ")" @if f.bypassed { " — bypassed" } }
                        }
                    }
                    @if let Some(b) = &e.freeze_bypass { p { "bypass: " (b) } }
                }
            }
        }
        section.pipeline-cols aria-label="Stages" {
            @for (i, st) in e.stages.iter().enumerate() {
                (stage_column(page, d, st, d.stages.get(i), d.cluster_revisions.get(i).map(Vec::as_slice).unwrap_or_default(), now))
            }
        }
        section.prediction aria-labelledby="prediction" {
            h2 #prediction { "Next pass (a prediction)" }
            p { (phase_look(s.prediction.phase).2) ": " (s.prediction.summary)
                @if let Some(t) = s.prediction.next_check { "; then " (s.prediction.next_check_for.unwrap_or("next check")) " " (until(t, now)) } }
            p { "Will: " @if s.prediction.actions.is_empty() { "change nothing" } @else { (s.prediction.actions.join("; ")) } }
        }
        section.history aria-labelledby="history" {
            h2 #history { "Revisions" }
            @match &d.restore {
                Some(r) => { p { "A rollback would restore revision " code { (r.id) }
                    @if let Some(t) = r.completed_at { " (completed " (t.to_string()) ")" } "." } },
                None => { p { "No completed, stored revision to roll back to." } },
            }
            @if !e.not_stored.is_empty() {
                p.warn { "Not stored (a rollback cannot restore them): " (e.not_stored.join(", ")) }
            }
            @if e.history.is_empty() { p { "No history yet." } } @else {
                table {
                    thead { tr { th { "revision" } th { "started" } th { "completed" } th { "rolled back" } } }
                    tbody { @for h in &e.history {
                        tr {
                            td { code { (h.id) } @if e.revision.as_deref() == Some(h.revision.as_str()) { " (current)" } }
                            td { (h.started_at.map(|t| t.to_string()).unwrap_or_else(|| "?".into())) }
                            td { (h.completed_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into())) }
                            td { @match &h.rolled_back { Some(r) => { (r.at.to_string()) " to " code { (r.to) } " (" (r.cause.as_str()) ", by " (r.by) ")" }, None => { "-" } } }
                        }
                    } }
                }
            }
        }
        section.events aria-labelledby="events" {
            h2 #events { "Events" }
            @if let Some(why) = &d.events_error {
                p.warn { "Events cannot be read: " (why) }
            } @else if d.events.is_empty() {
                p { "No Events (they expire after an hour by default)." }
            } @else {
                ol.timeline { @for ev in &d.events { (event_line(ev, now)) } }
            }
        }
        @if !s.notifications.is_empty() {
            section.notifications aria-labelledby="notifications" {
                h2 #notifications { "Notifications not yet delivered (" (s.notifications.len()) ")" }
                ul { @for n in &s.notifications {
                    li { strong { (n.transition) } @if let Some(st) = &n.stage { " (stage " (st) ")" } " at " (at(n.at)) ": " (n.message)
                        @match &n.receivers {
                            None => { " — not routed yet: the notification settings could not be read" },
                            Some(to) => { ul { @for (r, dl) in to {
                                li { "to " (r) ": " @match &dl.last_error { Some(err) => { (dl.attempts) " attempts, last error: " (err) }, None => { "not tried yet" } } }
                            } } },
                        }
                    }
                } }
            }
        }
    }
    .into_string()
}

fn event_line(e: &EventLine, now: DateTime<Utc>) -> Markup {
    html! {
        li class={"ev ev-" (e.kind.to_ascii_lowercase())} {
            @if let Some(t) = e.at { (since(t, now)) " " }
            strong { (e.reason) } " " (e.note)
            @if e.count > 1 { " ×" (e.count) }
        }
    }
}

/// The live part of the freezes page.
pub fn freezes(page: &Page, f: &FreezesView, now: DateTime<Utc>) -> String {
    html! {
        @if f.not_served {
            p.warn { "promoter's own CRDs are not served: nothing can be frozen (`promoter crd --own | kubectl apply -f -`)." }
        }
        @if f.freezes.is_empty() { p { "No PromotionFreeze." } } @else {
            table.freezes {
                thead { tr { th { "freeze" } th { "phase" } th { "holds now" } th { "selects" } th { "start" } th { "end" } th { "reason" } th { span.vh { "actions" } } } }
                tbody { @for r in &f.freezes {
                    tr id={"freeze-" (r.name)} {
                        td { (r.name) }
                        td { span class={"badge fz-" (r.phase.to_ascii_lowercase())} { (r.phase) }
                            @if f.unreadable.contains(&r.name) { " " span.badge.fz-unreadable { span.ic aria-hidden="true" { "⚠" } " unreadable: holds (fails closed)" } } }
                        td { @match (&r.holds, r.phase.as_str()) {
                            (Some(h), "Active") if h.is_empty() => { "none" },
                            (Some(h), "Active") => { @for (i, n) in h.iter().enumerate() { @if i > 0 { ", " } a href={"/promotions/" (n)} { (n) } } },
                            _ => { "-" },
                        } }
                        td { (r.selector) }
                        td { (r.start.as_deref().unwrap_or("-")) }
                        td { (r.end.as_deref().unwrap_or("-")) }
                        td { (r.reason) @if r.phase == "Invalid" { " — invalid: " (r.message) } }
                        td { (action(page, "Delete", "freeze-delete", Target { name: Some(&r.name), ..Target::default() })) }
                    }
                } }
            }
        }
        h2 { "Bypasses" }
        @if f.bypasses.is_empty() { p { "No bypass on record." } } @else {
            ul.bypasses { @for (p, b) in &f.bypasses {
                li { a href={"/promotions/" (p)} { (p) } ": "
                    @match b {
                        Ok(b) => { "by " (b.by) " until " (b.until.to_string()) " (" (until(b.until.as_datetime(), now)) ")"
                            @if let Some(fz) = &b.freeze { " for freeze " (fz) } @else { " for any freeze" }
                            ": " (b.reason) },
                        Err(why) => { (why) },
                    }
                }
            } }
        }
    }
    .into_string()
}

/// The freezes page: the live part, and the forms (outside it, so updates never clear them).
pub fn freezes_page(page: &Page, live: &str, promotions: &[String]) -> Markup {
    html! {
        h1 { "Freezes" }
        div #freezes-live { (PreEscaped(live)) }
        @if !page.read_only {
            div.forms {
                form.card #freeze-create data-action="freeze-create" {
                    h2 { "Create a freeze" }
                    label { "Name " input name="name" required pattern="[a-z0-9]([-a-z0-9.]*[a-z0-9])?" autocomplete="off"; }
                    label { "Reason " input name="freezeReason" required maxlength="512" autocomplete="off"; }
                    label { "Promotions (labels; empty: all) " input name="selector" placeholder="tier=prod" autocomplete="off"; }
                    label { "Start (time or duration; empty: now) " input name="start" placeholder="2026-12-20T00:00:00Z" autocomplete="off"; }
                    label { "End (time or duration; empty: until deleted) " input name="end" placeholder="2w" autocomplete="off"; }
                    button type="submit" { "Create…" }
                }
                form.card #freeze-bypass data-action="bypass" {
                    h2 { "Bypass for one promotion" }
                    label { "Promotion " select name="promotion" required { @for p in promotions { option value=(p) { (p) } } } }
                    label { "Freeze (empty: any) " input name="freeze" autocomplete="off"; }
                    label { "Until (duration or time, at most 7 days) " input name="until" required value="4h" autocomplete="off"; }
                    button type="submit" { "Bypass…" }
                }
            }
        }
    }
}

/// A page that is not there.
pub fn not_found(page: &Page, what: &str) -> String {
    layout(
        page,
        "not found",
        "",
        "",
        None,
        html! { h1 { "Not found" } p { (what) } p { a href="/" { "Back to the overview" } } },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every phase a promotion can be in is offered by the filter, and looks its own way: its own
    /// class with a colour in the stylesheet, and its own words (colour is never the only signal).
    #[test]
    fn every_phase_has_its_own_colour_and_words() {
        let css = include_str!("assets/app.css");
        let mut classes = std::collections::BTreeSet::new();
        let mut words = std::collections::BTreeSet::new();
        for phase in PHASES {
            let (class, icon, text) = phase_look(phase);
            assert!(
                css.contains(&format!(".badge.st-{class} {{ background:"))
                    || css.contains(&format!(".badge.st-{class}, "))
                    || css.contains(&format!(", .badge.st-{class} {{ background:")),
                "no colour for {phase:?} (st-{class})"
            );
            assert!(!icon.is_empty() && !text.is_empty());
            assert!(classes.insert(class), "{phase:?} shares class {class}");
            assert!(words.insert(text), "{phase:?} shares words {text}");
        }
        assert!(PHASES.contains(&Phase::RollbackFailed) && PHASES.contains(&Phase::Failing));
        assert_eq!(
            phase_look(Phase::RollbackFailed),
            ("rollbackfailed", "⛔", "rollback failed")
        );
    }
}
