//! `promoter reference --out DIR` (hidden): writes the book's generated reference pages, the
//! commands' page from clap (this binary's [`Cli`]) and the library's pages
//! ([`promoter::reference`]). `tests/reference.rs` compares them with `docs/src/reference/`.

use super::Cli;
use clap::{Command, CommandFactory};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write the book's generated reference pages (commands, annotations, metrics, Events, phases,
/// exit codes) into DIR.
///
/// Example: promoter reference --out docs/src/reference
#[derive(clap::Args, Debug)]
pub struct ReferenceArgs {
    /// The folder to write the pages into (`docs/src/reference`).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: ReferenceArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", args.out.display()))?;
    let mut pages = promoter::reference::pages();
    pages.insert(0, ("commands.md", commands()));
    for (name, text) in pages {
        let path = args.out.join(name);
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Every command's `--help`, as the binary prints it, under a heading of its own: environment
/// values are hidden, so the page does not depend on the shell that generated it.
pub fn commands() -> String {
    let mut cmd = without_env_values(Cli::command());
    cmd.build();
    let mut out = promoter::reference::banner();
    out.push_str(
        "# Commands\n\n\
         Every command and flag, as `promoter <command> --help` prints them. As a kubectl plugin \
         (`kubectl promoter …`) the commands and flags are the same.\n\n",
    );
    let mut index = String::new();
    let mut body = String::new();
    section(&mut cmd, 0, &mut index, &mut body);
    out.push_str(&index);
    out.push('\n');
    out.push_str(&body);
    out
}

fn without_env_values(cmd: Command) -> Command {
    cmd.mut_args(|a| a.hide_env_values(true))
        .mut_subcommands(without_env_values)
}

fn section(cmd: &mut Command, depth: usize, index: &mut String, body: &mut String) {
    let name = cmd
        .get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let anchor = name.replace(' ', "-");
    if depth > 0 {
        let about = cmd
            .get_about()
            .map(|a| a.to_string().replace('\n', " "))
            .unwrap_or_default();
        let _ = writeln!(
            index,
            "{}* [`{name}`](#{anchor}): {about}",
            "  ".repeat(depth - 1)
        );
    }
    let help = cmd.render_long_help().to_string();
    let _ = writeln!(body, "## `{name}`\n\n```text\n{}\n```\n", help.trim_end());
    let mut subcommands: Vec<Command> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .cloned()
        .collect();
    for sub in &mut subcommands {
        section(sub, depth + 1, index, body);
    }
}
