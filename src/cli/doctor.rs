//! `promoter doctor`: what a pass needs from this cluster.

use super::output::{Format, Human, Printer, Render, formats};
use chrono::Utc;
use promoter::client::ClientArgs;
use promoter::ops::doctor::{Check, Verdict};
use std::process::ExitCode;

/// Check what a pass needs from this cluster: the API server reachable (else the other checks are
/// skipped), CRDs served, the identity's permissions (one
/// SelfSubjectAccessReview per verb a pass uses), the CronJob's last success, the Sveltos version,
/// and whether that Sveltos advances ClusterPromotions itself; the notification settings (rules
/// valid, every receiver's Secret key present).
///
/// Exit codes: 0 nothing failed (warnings allowed); 2 a check failed; 1 could not run.
///
/// Examples:
///   promoter doctor --as system:serviceaccount:promoter-system:promoter
///   promoter doctor --cronjob none        # promoter runs as a Lambda function or from CI
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DoctorArgs {
    #[command(flatten)]
    cronjob: super::inspect::CronJobArg,
    /// Where Sveltos' addon-controller runs.
    #[arg(long, default_value = "projectsveltos")]
    sveltos_namespace: String,
    /// Where the notification settings are (as `step --notifications`): the ConfigMap and the
    /// Secret of this name in this namespace, or `none`.
    #[arg(long, env = "PROMOTER_NOTIFICATIONS", value_name = "NAMESPACE/NAME|none",
          default_value = promoter::notify::config::DEFAULT_LOCATION,
          value_parser = super::step::notifications_at)]
    notifications: super::step::NotificationsAt,
    #[arg(long, short = 'o', default_value = "text", value_parser = formats(&["text", "json", "yaml", "jsonpath"]))]
    output: Format,
}

#[derive(serde::Serialize)]
#[serde(transparent)]
struct Checks(Vec<Check>);

impl Render for Checks {
    fn human(&self, _wide: bool) -> Human {
        let mut out = String::new();
        for c in &self.0 {
            let mark = match c.verdict {
                Verdict::Ok => "ok  ",
                Verdict::Warning => "warn",
                Verdict::Failed => "FAIL",
                Verdict::Skipped => "skip",
            };
            out.push_str(&format!("[{mark}] {}: {}\n", c.name, c.detail));
        }
        Human::Text(out)
    }
}

pub async fn run(args: DoctorArgs, client: &ClientArgs) -> anyhow::Result<ExitCode> {
    let client = promoter::client::client(client).await?;
    let options = promoter::ops::doctor::Options {
        cronjob: args.cronjob.cronjob.0,
        sveltos_namespace: args.sveltos_namespace,
        now: Utc::now(),
        notifications: args.notifications.0,
    };
    let checks = Checks(promoter::ops::doctor::doctor(&client, &options).await);
    Printer::new(args.output).print(&checks)?;
    Ok(if checks.0.iter().any(|c| c.verdict == Verdict::Failed) {
        ExitCode::from(promoter::exit_codes::ATTENTION)
    } else {
        ExitCode::SUCCESS
    })
}
