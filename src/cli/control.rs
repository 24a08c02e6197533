//! `promoter approve`, `pause`, `resume`, `abort` and `rollback`: the writes an operator makes to a
//! promotion.

use chrono::Utc;
use promoter::client::ClientArgs;
use promoter::ops::control::Actor;
use std::process::ExitCode;

use super::suggesting;

/// Who acts and why, recorded with every write a person makes.
#[derive(clap::Args, Debug)]
pub struct WhoArgs {
    /// A note recorded next to the authenticated identity (a ticket, a reason).
    #[arg(long)]
    pub(super) by: Option<String>,
    /// Why: recorded with the action and in its Event (at most 512 bytes).
    #[arg(long)]
    pub(super) reason: Option<String>,
}

/// Approve a manual stage: sets `approved: true` and records who, when and for which revision.
///
/// A later change of the profileSpec voids the approval. Default stage: the current one.
///
/// Example: promoter approve kyverno-prog-rollout-man --stage staging
#[derive(clap::Args, Debug)]
pub struct ApproveArgs {
    name: String,
    #[arg(long)]
    stage: Option<String>,
    #[command(flatten)]
    who: WhoArgs,
}

/// Pause a ClusterPromotion: every pass leaves it alone until it is resumed.
#[derive(clap::Args, Debug)]
pub struct PauseArgs {
    name: String,
    #[command(flatten)]
    who: WhoArgs,
}

/// Resume a ClusterPromotion: lifts whatever holds it, and says which.
///
/// A pause; an abort of the current run; a stage halted by its missed progress deadline (it gets
/// a new deadline); a rollback that missed its own deadline (it goes on, with a new deadline); a
/// rollback of the current run, or a new spec held because its revision was rolled back (that
/// revision rolls out again from the first stage).
///
/// Resuming a rolled-back revision redeploys the revision that failed: it needs --yes.
///
/// Example: promoter resume kyverno-rollout-auto --reason "fix deployed"
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ResumeArgs {
    name: String,
    /// Confirm redeploying a rolled-back revision (refused without it, naming the revision).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Say what resume would lift, and write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    who: WhoArgs,
}

/// Abort the current run of a ClusterPromotion: it holds where it is, nothing deployed is changed.
///
/// Passes write no profile until `promoter resume` or a new revision. Refused when nothing runs.
///
/// Example: promoter abort kyverno-rollout-auto --reason "INC-42: bad release"
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct AbortArgs {
    name: String,
    #[command(flatten)]
    who: WhoArgs,
}

/// Roll the current run of a ClusterPromotion back to a revision that completed its rollout.
///
/// The next passes restore every reached stage to that revision (the highest stage first, each
/// deployed everywhere before the next lower one, or all at once), then hold until the spec
/// changes or `promoter resume`. Default target: the last known good revision (newest completed,
/// not rolled back, still stored). `promoter explain NAME` lists the history.
///
/// Example: promoter rollback kyverno-rollout-auto --reason "INC-42" --order all-at-once
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct RollbackArgs {
    name: String,
    /// The revision to restore: its ID (`1a2b3c4d5e`, as explain, history, Events and
    /// notifications show it), its hash, or its PromotionRevision's name.
    #[arg(long, value_name = "ID")]
    to_revision: Option<String>,
    /// Default: the promotion's promoter.dev/rollback-order, else reverse. While a reverse
    /// rollback of the run is recorded, all-at-once speeds it up (the other way is refused).
    #[arg(long, value_parser = ["reverse", "all-at-once"])]
    order: Option<String>,
    #[command(flatten)]
    who: WhoArgs,
}

/// Who the API server says we are, with the operator's note, and why (the dashboard asks the same).
pub(super) async fn actor(
    client: &kube::Client,
    note: Option<&str>,
    reason: Option<&str>,
) -> anyhow::Result<Actor> {
    promoter::ops::identity::actor(client, note, reason).await
}

/// Connects, finds out who acts, runs `act` on the promotion `name`, and prints its one line; a
/// promotion that does not exist is kubectl's NotFound line with a "did you mean".
pub(super) async fn acting<F, Fut>(
    client: &ClientArgs,
    name: &str,
    who: &WhoArgs,
    act: F,
) -> anyhow::Result<ExitCode>
where
    F: FnOnce(kube::Client, Actor) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let client = promoter::client::client(client).await?;
    let actor = actor(&client, who.by.as_deref(), who.reason.as_deref()).await?;
    match act(client.clone(), actor).await {
        Ok(msg) => {
            super::streams::line(&msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(suggesting(e, &client, name).await),
    }
}

pub async fn approve(args: ApproveArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    acting(client, name, &args.who, |c, actor| async move {
        let stage = args.stage.as_deref();
        promoter::ops::control::approve(&c, name, stage, &actor, Utc::now()).await
    })
    .await
}

pub async fn pause(args: PauseArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    acting(client, name, &args.who, |c, actor| async move {
        promoter::ops::control::set_paused(&c, name, true, &actor, Utc::now()).await
    })
    .await
}

pub async fn resume(args: ResumeArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    acting(client, name, &args.who, |c, actor| async move {
        let options = promoter::ops::control::ResumeOptions {
            yes: args.yes,
            dry_run: args.dry_run,
        };
        promoter::ops::control::resume(&c, name, options, &actor, Utc::now()).await
    })
    .await
}

pub async fn abort(args: AbortArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    acting(client, name, &args.who, |c, actor| async move {
        promoter::ops::control::abort(&c, name, &actor, Utc::now()).await
    })
    .await
}

pub async fn rollback(args: RollbackArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    use promoter::ops::rollback::{RollbackRequest, request_rollback};
    let request = RollbackRequest {
        to_revision: args.to_revision.clone(),
        order: args
            .order
            .as_deref()
            .and_then(promoter::settings::RollbackOrder::parse),
    };
    let name = &args.name;
    acting(client, name, &args.who, |c, actor| async move {
        request_rollback(&c, name, &request, &actor, Utc::now()).await
    })
    .await
}
