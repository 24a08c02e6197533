//! `promoter lint`: offline checks of manifests.

use super::output::{Format, Human, Printer, Render, formats};
use super::timezone;
use chrono::Utc;
use promoter::ops::lint::{Diagnostic, Severity, lint};
use promoter::sim::Fleet;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check manifests offline, before they are applied, with file, document and field path.
///
/// Errors (exit 2): what the API server would reject or prune, generated names that are too long or
/// invalid, durations, cron expressions, Lua that does not compile, CEL that does not parse, and with
/// --fleet, clusters selected by two stages. Warnings (exit 0): selectors that can overlap, clusters in
/// no stage, DryRun and OneTime sync modes, a trigger on the last stage. Notes preview windows.
///
/// Examples:
///   promoter lint examples/*.yaml
///   promoter lint my-promotion.yaml --fleet fleet.yaml
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LintArgs {
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// A fleet (Fleet and SveltosCluster documents) to check stage membership against.
    #[arg(long)]
    fleet: Option<PathBuf>,
    /// The deployment's window zone (the CronJob's `PROMOTER_TIMEZONE`/`TZ`), never the shell's `TZ`.
    #[arg(long, default_value = "UTC", env = "PROMOTER_TIMEZONE")]
    timezone: String,
    #[arg(long, short = 'o', default_value = "text", value_parser = formats(&["text", "json", "yaml", "jsonpath", "github"]))]
    output: Format,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    files: usize,
    errors: usize,
    warnings: usize,
    diagnostics: Vec<Diagnostic>,
}

impl Render for Report {
    fn human(&self, _wide: bool) -> Human {
        let mut out = String::new();
        for d in &self.diagnostics {
            out.push_str(&format!("{d}\n"));
        }
        out.push_str(&format!(
            "{} errors, {} warnings in {} files\n",
            self.errors, self.warnings, self.files
        ));
        Human::Text(out)
    }

    fn github(&self) -> String {
        // https://docs.github.com/actions/reference/workflow-commands-for-github-actions
        let escape_data = |s: &str| {
            s.replace('%', "%25")
                .replace('\r', "%0D")
                .replace('\n', "%0A")
        };
        let escape_property = |s: &str| escape_data(s).replace(':', "%3A").replace(',', "%2C");
        let mut out = String::new();
        for d in &self.diagnostics {
            let level = match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Note => "notice",
            };
            let mut props = format!("file={}", escape_property(&d.file));
            if let (Some(l), Some(c)) = (d.line, d.column) {
                props.push_str(&format!(",line={l},col={c}"));
            }
            let message = if d.path.is_empty() {
                d.message.clone()
            } else {
                format!("{}: {}", d.path, d.message)
            };
            out.push_str(&format!("::{level} {props}::{}\n", escape_data(&message)));
        }
        out
    }
}

pub fn run(args: LintArgs) -> anyhow::Result<ExitCode> {
    let tz = timezone(&args.timezone)?;
    let fleet = match &args.fleet {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
            Some(Fleet::parse(&text, &path.display().to_string()).map_err(|e| anyhow::anyhow!(e))?)
        }
        None => None,
    };
    let diagnostics = lint(&args.files, fleet.as_ref(), tz, Utc::now());
    let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
    let report = Report {
        files: args.files.len(),
        errors: count(Severity::Error),
        warnings: count(Severity::Warning),
        diagnostics,
    };
    Printer::new(args.output).print(&report)?;
    Ok(if report.errors > 0 {
        ExitCode::from(promoter::exit_codes::ATTENTION)
    } else {
        ExitCode::SUCCESS
    })
}
