//! `promoter freeze create|list|delete|bypass`: PromotionFreezes and the audited bypass.

use super::control::{WhoArgs, acting};
use super::output::{Format, Human, Printer, Render, Table, formats};
use chrono::Utc;
use promoter::client::ClientArgs;
use promoter::ops::freeze::{FreezeRow, NewFreeze, later, time_or_duration};
use std::process::ExitCode;

/// Stop promotions from starting new stages: PromotionFreezes, and a bypass for one promotion.
///
/// A freeze (cluster-scoped, `promoter.dev/v1alpha1`) holds every ClusterPromotion its selector
/// picks while it is active: stages in progress finish, no new stage starts, and `status` and
/// `explain` say which freeze holds it and why.
#[derive(clap::Args, Debug)]
pub struct FreezeArgs {
    #[command(subcommand)]
    command: FreezeCommand,
}

#[derive(clap::Subcommand, Debug)]
enum FreezeCommand {
    Create(CreateArgs),
    List(ListArgs),
    Delete(DeleteArgs),
    Bypass(BypassArgs),
}

/// Create a PromotionFreeze.
///
/// Times are RFC 3339 (2026-12-20T00:00:00Z) or a duration from now (2h, 1d).
///
/// Example: promoter freeze create holidays --reason "Holiday change freeze (CAB-123)" \
///            --selector tier=prod --start 2026-12-20T00:00:00Z --end 2027-01-04T00:00:00Z
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
struct CreateArgs {
    name: String,
    /// Why nothing may start: shown on every promotion it holds (at most 512 bytes).
    #[arg(long)]
    reason: String,
    /// Which promotions, by their labels (`tier=prod,team in (a,b)`); default: every promotion.
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// When it starts; default: now.
    #[arg(long, value_name = "TIME|DURATION")]
    start: Option<String>,
    /// When it ends; default: when it is deleted.
    #[arg(long, value_name = "TIME|DURATION", conflicts_with = "for_")]
    end: Option<String>,
    /// How long it lasts from its start (instead of --end).
    #[arg(long = "for", id = "for_", value_name = "DURATION")]
    for_: Option<String>,
    /// A note recorded next to the authenticated identity in promoter.dev/created-by.
    #[arg(long)]
    by: Option<String>,
}

/// List the PromotionFreezes: phase, the promotions each holds now, times.
#[derive(clap::Args, Debug)]
struct ListArgs {
    #[arg(long, short = 'o', default_value = "table", value_parser = formats(&["table", "json", "yaml", "jsonpath"]))]
    output: Format,
    #[arg(long)]
    no_headers: bool,
}

/// Delete a PromotionFreeze: the promotions it held start new stages again from the next pass.
#[derive(clap::Args, Debug)]
struct DeleteArgs {
    name: String,
}

/// Let one promotion start new stages while a freeze holds it, until a time, on record.
///
/// Recorded in its promoter.dev/freeze-bypass annotation (who, why, until; replaced by the next
/// bypass) and in a FreezeBypassGranted Event. At most 7 days ahead.
///
/// Example: promoter freeze bypass payments-rollout --reason "hotfix INC-7" --until 4h --freeze holidays
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
struct BypassArgs {
    /// The ClusterPromotion.
    promotion: String,
    /// Why (required).
    #[arg(long)]
    reason: String,
    /// Until when: a duration from now (4h) or an RFC 3339 time.
    #[arg(long, value_name = "DURATION|TIME")]
    until: String,
    /// Only this freeze; default: any freeze.
    #[arg(long)]
    freeze: Option<String>,
    /// A note recorded next to the authenticated identity (a ticket).
    #[arg(long)]
    by: Option<String>,
}

impl Render for Vec<FreezeRow> {
    fn human(&self, _wide: bool) -> Human {
        let mut t = Table::new(&[
            "NAME", "PHASE", "HOLDS", "SELECTOR", "START", "END", "REASON",
        ]);
        for f in self {
            let holds = match (&f.holds, f.phase.as_str()) {
                (Some(h), "Active") if h.is_empty() => "none".to_string(),
                (Some(h), "Active") => h.join(","),
                (None, "Active") => "?".into(),
                _ => "-".into(),
            };
            let reason = if f.phase == "Invalid" {
                format!("{} (invalid: {})", f.reason, f.message)
            } else {
                f.reason.clone()
            };
            t.push(vec![
                f.name.clone(),
                f.phase.clone(),
                holds,
                f.selector.clone(),
                f.start.clone().unwrap_or_else(|| "-".into()),
                f.end.clone().unwrap_or_else(|| "-".into()),
                reason,
            ]);
        }
        Human::Table(t)
    }
}

pub async fn run(args: FreezeArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let now = Utc::now();
    match args.command {
        FreezeCommand::Create(a) => {
            let start = a
                .start
                .as_deref()
                .map(|s| time_or_duration("--start", s, now))
                .transpose()?;
            let end = match (&a.end, &a.for_) {
                (Some(e), _) => Some(time_or_duration("--end", e, now)?),
                (None, Some(d)) => Some(later(
                    "--for",
                    d,
                    start.unwrap_or(now),
                    promoter::api::flag_duration::parse(d)
                        .map_err(|e| anyhow::anyhow!("--for: {e}"))?,
                )?),
                (None, None) => None,
            };
            let new = NewFreeze {
                name: a.name.clone(),
                reason: a.reason,
                selector: a.selector,
                start,
                end,
            };
            let client = promoter::client::client(client).await?;
            let actor = super::control::actor(&client, a.by.as_deref(), None).await?;
            super::streams::line(
                &promoter::ops::freeze::create(&client, &new, &actor, now).await?,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        FreezeCommand::List(a) => {
            let client = promoter::client::client(client).await?;
            let rows = promoter::ops::freeze::list(&client, now).await?;
            let mut printer = Printer::new(a.output);
            printer.no_headers = a.no_headers;
            printer.print(&rows)?;
            Ok(ExitCode::SUCCESS)
        }
        FreezeCommand::Delete(a) => {
            let client = promoter::client::client(client).await?;
            super::streams::line(&promoter::ops::freeze::delete(&client, &a.name).await?)?;
            Ok(ExitCode::SUCCESS)
        }
        FreezeCommand::Bypass(a) => {
            let until = time_or_duration("--until", &a.until, now)?;
            let who = WhoArgs {
                by: a.by.clone(),
                reason: Some(a.reason.clone()),
            };
            let name = &a.promotion;
            acting(client, name, &who, |c, actor| async move {
                let freeze = a.freeze.as_deref();
                promoter::ops::freeze::bypass(&c, name, freeze, until, &actor, now).await
            })
            .await
        }
    }
}
