//! `promoter approve`, `pause` and `resume`: the writes an operator makes.

use chrono::Utc;
use promoter::client::ClientArgs;
use promoter::ops::control::Actor;
use std::process::ExitCode;

use super::suggesting;

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
    /// A note recorded next to the authenticated identity (a ticket, a reason).
    #[arg(long)]
    by: Option<String>,
    /// Why: recorded with the approval and in its `Approved` Event (at most 512 bytes).
    #[arg(long)]
    reason: Option<String>,
}

/// Pause a ClusterPromotion: every pass leaves it alone until it is resumed.
#[derive(clap::Args, Debug)]
pub struct PauseArgs {
    name: String,
    /// A note recorded next to the authenticated identity (a ticket, a reason).
    #[arg(long)]
    by: Option<String>,
    /// Why: recorded with the pause and in its `Paused` Event (at most 512 bytes).
    #[arg(long)]
    reason: Option<String>,
}

/// Resume a paused ClusterPromotion.
#[derive(clap::Args, Debug)]
pub struct ResumeArgs {
    name: String,
    /// A note recorded next to the authenticated identity in the `Resumed` Event.
    #[arg(long)]
    by: Option<String>,
    /// Why: recorded in the `Resumed` Event (at most 512 bytes).
    #[arg(long)]
    reason: Option<String>,
}

/// Who the API server says we are, with the operator's note, and why. A reason that is too long is
/// refused before anything is written.
async fn actor(
    client: &kube::Client,
    note: Option<&str>,
    reason: Option<&str>,
) -> anyhow::Result<Actor> {
    let who = promoter::ops::identity::whoami(client).await;
    Actor::new(
        &promoter::ops::identity::recorded_by(who.as_deref(), note),
        reason,
    )
}

pub async fn approve(args: ApproveArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let client = promoter::client::client(client).await?;
    let actor = actor(&client, args.by.as_deref(), args.reason.as_deref()).await?;
    let msg = promoter::ops::control::approve(
        &client,
        &args.name,
        args.stage.as_deref(),
        &actor,
        Utc::now(),
    )
    .await;
    let msg = match msg {
        Ok(m) => m,
        Err(e) => return Err(suggesting(e, &client, &args.name).await),
    };
    println!("{msg}");
    Ok(ExitCode::SUCCESS)
}

pub async fn pause(args: PauseArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let client = promoter::client::client(client).await?;
    let actor = actor(&client, args.by.as_deref(), args.reason.as_deref()).await?;
    let msg =
        promoter::ops::control::set_paused(&client, &args.name, true, &actor, Utc::now()).await;
    let msg = match msg {
        Ok(m) => m,
        Err(e) => return Err(suggesting(e, &client, &args.name).await),
    };
    println!("{msg}");
    Ok(ExitCode::SUCCESS)
}

pub async fn resume(args: ResumeArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let client = promoter::client::client(client).await?;
    let actor = actor(&client, args.by.as_deref(), args.reason.as_deref()).await?;
    let msg =
        promoter::ops::control::set_paused(&client, &args.name, false, &actor, Utc::now()).await;
    let msg = match msg {
        Ok(m) => m,
        Err(e) => return Err(suggesting(e, &client, &args.name).await),
    };
    println!("{msg}");
    Ok(ExitCode::SUCCESS)
}
