//! `promoter status` and `promoter explain`: reading where rollouts are.

use super::output::{Format, Human, Printer, Render, Table, formats};
use super::{check_selector, not_found, timezone};
use chrono::{DateTime, Utc};
use promoter::client::ClientArgs;
use promoter::ops::inspect::{StatusRow, age, exit_code as code_of, status_row};
use serde::Serialize;
use std::process::ExitCode;

/// One line per ClusterPromotion: current stage, phase, age of the phase, message.
///
/// Phases: Progressing, Soaking until T, Awaiting approval, Window closed until T, Checks failing,
/// Running checks, Blocked, Failed, Paused, Deleting, Complete.
/// With --exit-code and NAME, the exit status tells CI where the rollout is:
/// 0 complete; 3 progressing or waiting (soak, window, checks, paused); 4 awaiting approval;
/// 5 failed or blocked; 1 could not run (not found, API unreachable).
///
/// Examples:
///   promoter status
///   promoter status kyverno-rollout-auto -o wide
///   promoter status kyverno-rollout-auto --exit-code && echo "in production"
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct StatusArgs {
    /// One ClusterPromotion (default: all).
    name: Option<String>,
    /// Only ClusterPromotions whose labels match this selector (e.g. `team=payments`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    #[arg(long, short = 'o', default_value = "table",
          value_parser = formats(&["table", "wide", "json", "yaml", "name"]))]
    output: Format,
    /// Table output without the header line.
    #[arg(long)]
    no_headers: bool,
    /// Exit status by phase (needs NAME).
    #[arg(long, requires = "name")]
    exit_code: bool,
    /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
    #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
    timezone: String,
}

/// Explain a ClusterPromotion: per stage and cluster, what is deployed, why it waits, until when,
/// and what the next pass will do.
///
/// Example: promoter explain kyverno-rollout-auto
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    name: String,
    /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
    #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
    timezone: String,
}

/// One object for one NAME, a list otherwise (as kubectl does).
#[derive(Serialize)]
#[serde(untagged)]
enum Rows {
    One(StatusRow),
    Many(Vec<StatusRow>),
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
            Rows::Many(rows) => rows,
        }
    }
}

impl Render for StatusView {
    fn human(&self, wide: bool) -> Human {
        let mut header = vec!["NAME", "STAGE", "PHASE", "AGE", "MESSAGE"];
        if wide {
            header.push("NEXT PASS");
        }
        let mut table = Table::new(&header);
        for r in self.rows() {
            let mut line = vec![
                r.name.clone(),
                format!("{} {}", r.stage, r.position),
                r.phase.clone(),
                age(r.since, self.now),
                r.message.clone(),
            ];
            if wide {
                line.push(if r.next_actions.is_empty() {
                    "-".into()
                } else {
                    r.next_actions.join("; ")
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

pub async fn status(args: StatusArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let tz = timezone(&args.timezone)?;
    check_selector(args.selector.as_deref())?;
    let client = promoter::client::client(client).await?;
    let observation = promoter::pass::observe::observe(&client, args.selector.as_deref()).await?;
    let now = Utc::now();
    let mut rows: Vec<_> = observation
        .promotions
        .iter()
        .filter(|p| args.name.is_none() || p.metadata.name == args.name)
        .map(|p| status_row(p, &observation.world, now, tz))
        .collect();
    let code = match (args.exit_code, rows.first()) {
        (true, Some(r)) => ExitCode::from(code_of(r.kind)),
        _ => ExitCode::SUCCESS,
    };
    let rows = match &args.name {
        Some(n) => Rows::One(rows.pop().ok_or_else(|| anyhow::anyhow!(not_found(n)))?),
        None => Rows::Many(rows),
    };
    let printer = Printer {
        format: args.output,
        no_headers: args.no_headers,
    };
    printer.print(&StatusView { rows, now })?;
    Ok(code)
}

pub async fn explain(args: ExplainArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let ExplainArgs { name, timezone: tz } = args;
    let tz = timezone(&tz)?;
    let client = promoter::client::client(client).await?;
    let mut observation = promoter::pass::observe::observe(&client, None).await?;
    if let Some(bad) = observation.undecodable.iter().find(|b| b.name == name) {
        anyhow::bail!("ClusterPromotion {name} cannot be read: {}", bad.error);
    }
    let p = observation
        .promotions
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
        .cloned()
        .ok_or_else(|| anyhow::anyhow!(not_found(&name)))?;
    if observation.world.clusters.is_empty() {
        observation.world.clusters = promoter::pass::observe::inventory(&client).await?;
    }
    promoter::ops::explain::load_summaries(&client, &p, &mut observation.world).await?;
    print!(
        "{}",
        promoter::ops::explain::render(&p, &observation.world, Utc::now(), tz)
    );
    Ok(ExitCode::SUCCESS)
}
