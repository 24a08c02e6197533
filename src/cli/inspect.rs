//! `promoter status` and `promoter explain`: reading where rollouts are.

use super::output::{Format, Human, Printer, Render, Table, formats};
use super::{check_selector, not_found, timezone};
use chrono::{DateTime, Utc};
use promoter::api::flag_duration;
use promoter::client::ClientArgs;
use promoter::ops::inspect::{
    LastPass, StatusRow, age, exit_code as code_of, relative, settled, status_row,
};
use serde::Serialize;
use std::process::ExitCode;

/// One line per ClusterPromotion: current stage, observed phase, when the wait ends, message.
///
/// The state shown is the observed one: what the last pass recorded and what the live objects say.
/// What the next pass would do is a prediction, shown as one in `-o wide`, JSON and `explain`.
/// Phases (the names `step -o json` and the metrics use): Pending (no pass has processed this
/// revision), Progressing, Soaking, WindowClosed, RunningChecks, ChecksFailing, AwaitingApproval,
/// Complete, Failing (a deployment fails; Sveltos retries until the progress deadline, then the
/// failure policy acts), Failed, Blocked, Paused, Deleting, Frozen, RollingBack, RolledBack, Aborted.
/// With --exit-code and NAME, the exit status tells CI where the rollout is:
/// 0 complete; 3 promoter or Sveltos will move it on (pending, progressing, soaking, window,
/// checks, failing before its deadline, paused, deleting, frozen, rolling back); 4 awaiting
/// approval; 5 held for a person (failed, blocked, rolled back, aborted); 1 could not run (not
/// found, API unreachable).
/// With --watch and NAME, reprints on every change until the rollout is complete (0), awaits
/// approval (4) or is held for a person (5); when --timeout expires first, it says so and exits
/// with the current phase's code (3 while it moves).
///
/// Examples:
///   promoter status
///   promoter status kyverno-rollout-auto -o wide
///   promoter status kyverno-rollout-auto --exit-code && echo "in production"
///   promoter status kyverno-rollout-auto --watch --timeout 2h
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct StatusArgs {
    /// One ClusterPromotion (default: all).
    name: Option<String>,
    /// Only ClusterPromotions whose labels match this selector (e.g. `team=payments`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    #[arg(long, short = 'o', default_value = "table",
          value_parser = formats(&["table", "wide", "json", "yaml", "name", "jsonpath"]))]
    output: Format,
    /// Table output without the header line.
    #[arg(long)]
    no_headers: bool,
    /// Exit status by phase (needs NAME).
    #[arg(long, requires = "name")]
    exit_code: bool,
    /// Watch NAME: reprint on every change until it settles (exit codes as --exit-code).
    #[arg(long, short = 'w', requires = "name")]
    watch: bool,
    /// With --watch: give up after this long (`30m`, `2h`, `1d`; 0: never).
    #[arg(long, value_name = "DURATION", default_value = "0", requires = "watch")]
    timeout: String,
    /// With --watch: time between two reads.
    #[arg(long, value_name = "DURATION", default_value = "2s", hide = true)]
    poll_interval: String,
    #[command(flatten)]
    deployment: DeploymentArgs,
}

/// Where the deployment records what the pass needs to be interpreted.
#[derive(clap::Args, Debug)]
pub struct DeploymentArgs {
    /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
    #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
    pub(super) timezone: String,
    #[command(flatten)]
    pub(super) cronjob: CronJobArg,
}

/// The CronJob that runs the passes, as `status`, `explain` and `doctor` name it.
#[derive(clap::Args, Debug)]
pub struct CronJobArg {
    /// The CronJob that runs the passes (`NAMESPACE/NAME`), read to tell when a pass last ran;
    /// `none` when promoter runs elsewhere (Lambda, CI).
    #[arg(
        long,
        value_name = "NAMESPACE/NAME|none",
        default_value = promoter::ops::inspect::CRONJOB,
        env = "PROMOTER_CRONJOB",
        value_parser = cronjob_at
    )]
    pub cronjob: CronJobAt,
}

/// `--cronjob`: `(namespace, name)`, or None for `none`.
#[derive(Clone, Debug)]
pub struct CronJobAt(pub Option<(String, String)>);

fn cronjob_at(text: &str) -> Result<CronJobAt, String> {
    if text == "none" || text.is_empty() {
        return Ok(CronJobAt(None));
    }
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(CronJobAt(Some((ns.to_string(), name.to_string()))))
        }
        _ => Err(format!("{text:?}: expected NAMESPACE/NAME or none")),
    }
}

impl DeploymentArgs {
    async fn last_pass(&self, client: &kube::Client) -> Option<LastPass> {
        let (ns, name) = self.cronjob.cronjob.0.as_ref()?;
        promoter::ops::inspect::last_pass(client, ns, name).await
    }
}

/// Explain a ClusterPromotion: per stage and cluster, what is deployed, why it waits, until when,
/// when a pass last ran, and (a prediction) what the next pass will do.
///
/// Example: promoter explain kyverno-rollout-auto
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    name: String,
    #[arg(long, short = 'o', default_value = "text",
          value_parser = formats(&["text", "json", "yaml", "jsonpath"]))]
    output: Format,
    #[command(flatten)]
    deployment: DeploymentArgs,
}

/// One object for one NAME, a `List` with `items` otherwise (as kubectl does, so that
/// `-o jsonpath='{.items[*].name}'` works).
#[derive(Serialize)]
#[serde(untagged)]
enum Rows {
    One(Box<StatusRow>),
    Many(List),
}

#[derive(Serialize)]
struct List {
    kind: &'static str,
    items: Vec<StatusRow>,
}

struct StatusView {
    rows: Rows,
    now: DateTime<Utc>,
}

impl Serialize for StatusView {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.rows.serialize(s)
    }
}

impl StatusView {
    fn rows(&self) -> &[StatusRow] {
        match &self.rows {
            Rows::One(r) => std::slice::from_ref(r),
            Rows::Many(list) => &list.items,
        }
    }
}

impl Render for StatusView {
    fn human(&self, wide: bool) -> Human {
        let mut header = vec!["NAME", "STAGE", "PHASE", "NEXT", "AGE", "MESSAGE"];
        if wide {
            header.insert(5, "LAST PASS");
            header.push("PREDICTED NEXT PASS");
        }
        let mut table = Table::new(&header);
        for r in self.rows() {
            let mut line = vec![
                r.name.clone(),
                // Before the first pass there is no stage: `- 0/3`, as kubectl shows an empty cell.
                format!(
                    "{} {}",
                    if r.stage.is_empty() { "-" } else { &r.stage },
                    r.position()
                ),
                format!("{:?}", r.phase),
                relative(r.until, self.now),
                age(r.since, self.now),
                if r.message.is_empty() {
                    "-".into()
                } else {
                    r.message.clone()
                },
            ];
            if wide {
                // Without a CronJob: the last status change a pass recorded ("wrote").
                let last = match &r.last_pass {
                    Some(l) => l
                        .last_successful_time
                        .map(|t| format!("{} ago", age(Some(t), self.now))),
                    None => r
                        .last_recorded_write
                        .map(|t| format!("wrote {} ago", age(Some(t), self.now))),
                }
                .unwrap_or_else(|| "-".into());
                line.insert(5, last);
                let p = &r.prediction;
                line.push(if p.actions.is_empty() {
                    format!("{:?}: {} (no writes)", p.phase, p.summary)
                } else {
                    format!("{:?}: {} ({})", p.phase, p.summary, p.actions.join("; "))
                });
            }
            table.push(line);
        }
        Human::Table(table)
    }

    fn names(&self) -> Vec<String> {
        self.rows()
            .iter()
            .map(|r| format!("clusterpromotion.config.projectsveltos.io/{}", r.name))
            .collect()
    }
}

/// Column widths for `status NAME -w` from its first line, wide enough for what later lines hold
/// (kubectl get -w keeps its columns): any of the promotion's stages, the longest phase
/// (`AwaitingApproval`), a NEXT within a year (`in 364d23h`) and an AGE within 27 years
/// (`9999d23h`). A later value wider still widens its column from then on.
fn watch_widths(row: &StatusRow) -> Vec<usize> {
    let position = format!(" {n}/{n}", n = row.stage_count);
    let stage = row
        .stage_names
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    vec![
        row.name.chars().count(),
        stage + position.len(),
        "AwaitingApproval".len(),
        "in 364d23h".len(),
        "9999d23h".len(),
    ]
}

/// One read of the rows `status` shows.
async fn read_rows(
    client: &kube::Client,
    args: &StatusArgs,
    tz: chrono_tz::Tz,
    last_pass: Option<&LastPass>,
) -> anyhow::Result<(Rows, DateTime<Utc>)> {
    // The time the rows are predicted for, read before the cluster, as a pass reads its clock.
    let now = Utc::now();
    let observation =
        promoter::ops::load::status_world(client, args.selector.as_deref(), now, tz).await?;
    let mut rows: Vec<_> = observation
        .promotions
        .iter()
        .filter(|p| args.name.is_none() || p.metadata.name == args.name)
        .map(|p| {
            let mut row = status_row(p, &observation.world, now, tz);
            row.last_pass = last_pass.cloned();
            row
        })
        .collect();
    let rows = match &args.name {
        Some(n) => Rows::One(Box::new(rows.pop().ok_or_else(|| {
            let names = observation.promotions.iter();
            anyhow::anyhow!(not_found(
                n,
                names.filter_map(|p| p.metadata.name.as_deref())
            ))
        })?)),
        None => Rows::Many(List {
            kind: "List",
            items: rows,
        }),
    };
    Ok((rows, now))
}

pub async fn status(args: StatusArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let tz = timezone(&args.deployment.timezone)?;
    check_selector(args.selector.as_deref())?;
    let timeout =
        flag_duration::parse(&args.timeout).map_err(|e| anyhow::anyhow!("--timeout: {e}"))?;
    let interval = flag_duration::parse(&args.poll_interval)
        .map_err(|e| anyhow::anyhow!("--poll-interval: {e}"))?;
    let client = promoter::client::client(client).await?;
    let last_pass = args.deployment.last_pass(&client).await;
    let mut printer = Printer {
        format: args.output.clone(),
        no_headers: args.no_headers,
    };
    if args.watch
        && let Some(w) = last_pass.as_ref().and_then(|l| l.stale(Utc::now(), None))
    {
        super::streams::err(&format!("warning: {w}"));
    }
    if !args.watch {
        let (rows, now) = read_rows(&client, &args, tz, last_pass.as_ref()).await?;
        let recorded = match &rows {
            Rows::One(r) => r.last_recorded_write,
            Rows::Many(list) => list
                .items
                .iter()
                .filter_map(|r| r.last_recorded_write)
                .max(),
        };
        if let Some(w) = last_pass.as_ref().and_then(|l| l.stale(now, recorded)) {
            super::streams::err(&format!("warning: {w}"));
        }
        let view = StatusView { rows, now };
        for r in view.rows() {
            let errors = r.notification_errors();
            if !errors.is_empty() {
                super::streams::err(&format!(
                    "warning: {}: {} notification{} not delivered yet ({})",
                    r.name,
                    r.notifications.len(),
                    if r.notifications.len() == 1 { "" } else { "s" },
                    errors.join("; ")
                ));
            }
        }
        let StatusView { rows, now } = view;
        let code = match (&rows, args.exit_code) {
            (Rows::One(r), true) => ExitCode::from(code_of(r.phase)),
            _ => ExitCode::SUCCESS,
        };
        printer.print(&StatusView { rows, now })?;
        return Ok(code);
    }
    // --watch: poll, print what changed, stop when it settles or the timeout expires.
    let started = std::time::Instant::now();
    let deadline = (!timeout.is_zero()).then(|| started + timeout.to_std().unwrap_or_default());
    let mut shown = String::new();
    let mut widths: Vec<usize> = Vec::new();
    loop {
        let (rows, now) = read_rows(&client, &args, tz, last_pass.as_ref()).await?;
        let Rows::One(row) = &rows else {
            anyhow::bail!("--watch needs NAME");
        };
        if widths.is_empty() {
            widths = watch_widths(row);
        }
        let phase = row.phase;
        // Compared without the ages and relative times, which change on their own.
        let key = format!(
            "{:?} {} {} {:?}",
            row.phase, row.stage, row.message, row.until
        );
        if key != shown {
            super::streams::out(&printer.render_within(&StatusView { rows, now }, &mut widths)?)?;
            // kubectl get -w: the header once.
            printer.no_headers = true;
            shown = key;
        }
        // Settled, or nobody reads the watch any more.
        if settled(phase) || super::streams::closed() {
            return Ok(ExitCode::from(code_of(phase)));
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            super::streams::err(&format!(
                "timed out after {} waiting for {}: still {phase:?}",
                args.timeout,
                args.name.as_deref().unwrap_or_default()
            ));
            return Ok(ExitCode::from(code_of(phase)));
        }
        tokio::time::sleep(interval.to_std().unwrap_or_default()).await;
    }
}

pub async fn explain(args: ExplainArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let ExplainArgs {
        name,
        output,
        deployment,
    } = args;
    let tz = timezone(&deployment.timezone)?;
    let client = promoter::client::client(client).await?;
    let last_pass = deployment.last_pass(&client).await;
    let mut observation = promoter::pass::observe::observe(&client, None).await?;
    if let Some(bad) = observation.undecodable.iter().find(|b| b.name == name) {
        anyhow::bail!("ClusterPromotion {name} cannot be read: {}", bad.error);
    }
    let p = observation
        .promotions
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
        .cloned()
        .ok_or_else(|| {
            let names = observation.promotions.iter();
            anyhow::anyhow!(not_found(
                &name,
                names.filter_map(|p| p.metadata.name.as_deref())
            ))
        })?;
    let now = Utc::now();
    promoter::ops::load::explain_world(&client, &p, &mut observation.world, now, tz).await?;
    let explanation =
        promoter::ops::explain::explain(&p, &observation.world, now, tz, last_pass.as_ref());
    Printer::new(output).print(&Explained(explanation))?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
#[serde(transparent)]
struct Explained(promoter::ops::explain::Explanation);

impl Render for Explained {
    fn human(&self, _wide: bool) -> Human {
        Human::Text(self.0.text())
    }

    fn names(&self) -> Vec<String> {
        vec![format!(
            "clusterpromotion.config.projectsveltos.io/{}",
            self.0.status.name
        )]
    }
}
