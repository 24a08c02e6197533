//! The binary as a kubectl plugin: installed (or linked) as `kubectl-promoter`, kubectl runs it for
//! `kubectl promoter …`, and its help and usage say so; linked as `kubectl_complete-promoter`, it
//! answers kubectl's (1.26+) completion requests for `kubectl promoter <TAB>` in cobra's
//! `__complete` format, which kubectl hands on to its own shell completion.

use super::Cli;
use clap::builder::StyledStr;
use clap::{Command, CommandFactory};
use promoter::invocation::{PLUGIN_BINARY, PLUGIN_COMPLETION_BINARY};
use regex::Regex;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// What the binary was started as, from the file name in argv[0] (a symlink keeps its own name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invocation {
    Promoter,
    Plugin,
    Completion,
}

impl Invocation {
    pub fn of(argv0: Option<&OsString>) -> Self {
        let name = argv0
            .and_then(|a| Path::new(a).file_name())
            .and_then(|n| n.to_str())
            .map(|n| n.strip_suffix(".exe").unwrap_or(n));
        match name {
            Some(PLUGIN_BINARY) => Self::Plugin,
            Some(PLUGIN_COMPLETION_BINARY) => Self::Completion,
            _ => Self::Promoter,
        }
    }
}

/// The command line as the binary runs: promoter's, or the plugin's (see [`as_plugin`]).
pub fn command() -> Command {
    if promoter::invocation::is_plugin() {
        as_plugin(Cli::command())
    } else {
        Cli::command()
    }
}

/// The name completion scripts are generated for.
pub fn completion_bin_name() -> &'static str {
    if promoter::invocation::is_plugin() {
        PLUGIN_BINARY
    } else {
        "promoter"
    }
}

/// Usage lines start with `kubectl promoter`, and so do the examples in the help texts.
fn as_plugin(cmd: Command) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    // `promoter status` in a text, not `promoter-system` or `promoter.dev/…`.
    let example = Regex::new(&format!(
        r"(^|[\s`(]){}\s({})\b",
        "promoter",
        names.join("|")
    ));
    match example {
        Ok(re) => retitle(cmd, &re),
        Err(_) => cmd,
    }
    .bin_name("kubectl promoter")
}

fn retitle(cmd: Command, re: &Regex) -> Command {
    let fix = |s: Option<&StyledStr>| {
        s.map(|s| {
            let text = s.to_string();
            StyledStr::from(
                re.replace_all(&text, "${1}kubectl promoter $2")
                    .into_owned(),
            )
        })
    };
    let mut cmd = cmd.mut_args(|a| {
        let (help, long_help) = (fix(a.get_help()), fix(a.get_long_help()));
        let a = match help {
            Some(h) => a.help(h),
            None => a,
        };
        match long_help {
            Some(h) => a.long_help(h),
            None => a,
        }
    });
    if let Some(t) = fix(cmd.get_about()) {
        cmd = cmd.about(t);
    }
    if let Some(t) = fix(cmd.get_long_about()) {
        cmd = cmd.long_about(t);
    }
    if let Some(t) = fix(cmd.get_after_help()) {
        cmd = cmd.after_help(t);
    }
    if let Some(t) = fix(cmd.get_after_long_help()) {
        cmd = cmd.after_long_help(t);
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |c| retitle(c, re));
    }
    cmd
}

/// Answers kubectl's completion request: `kubectl_complete-promoter ARGS… PARTIAL` prints one
/// candidate a line (`value<TAB>help`), then `:<directive>` (cobra's: 4 = no file completion; 0 =
/// let the shell complete file names when promoter has nothing to offer).
pub fn complete(args: impl Iterator<Item = OsString>) -> ExitCode {
    let mut line: Vec<OsString> = std::iter::once(OsString::from(PLUGIN_BINARY))
        .chain(args)
        .collect();
    if line.len() == 1 {
        line.push(OsString::new());
    }
    let index = line.len() - 1;
    let mut cmd = as_plugin(Cli::command());
    let cwd = std::env::current_dir().ok();
    let candidates =
        clap_complete::engine::complete(&mut cmd, line, index, cwd.as_deref()).unwrap_or_default();
    let mut out = String::new();
    let mut offered = 0;
    for c in candidates.iter().filter(|c| !c.is_hide_set()) {
        out.push_str(&c.get_value().to_string_lossy());
        if let Some(help) = c.get_help() {
            let help = help.to_string();
            if let Some(first) = help.lines().next().filter(|l| !l.is_empty()) {
                out.push('\t');
                out.push_str(first);
            }
        }
        out.push('\n');
        offered += 1;
    }
    out.push_str(if offered > 0 { ":4\n" } else { ":0\n" });
    let _ = super::streams::out(&out);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_in_argv0_decides() {
        let of = |s: &str| Invocation::of(Some(&OsString::from(s)));
        assert_eq!(of("/usr/local/bin/promoter"), Invocation::Promoter);
        assert_eq!(of("/home/u/.krew/bin/kubectl-promoter"), Invocation::Plugin);
        assert_eq!(of("kubectl-promoter.exe"), Invocation::Plugin);
        assert_eq!(of("kubectl_complete-promoter"), Invocation::Completion);
        assert_eq!(of("kubectl-promoter-x"), Invocation::Promoter);
        assert_eq!(Invocation::of(None), Invocation::Promoter);
    }

    #[test]
    fn the_plugin_says_kubectl_promoter() {
        let mut cmd = as_plugin(Cli::command());
        cmd.build();
        let status = cmd.find_subcommand_mut("status").unwrap();
        let help = status.render_long_help().to_string();
        assert!(
            help.contains("kubectl promoter status kyverno-rollout-auto -o wide"),
            "{help}"
        );
        assert!(!help.contains("\n  promoter status"), "{help}");
        let usage = status.render_usage().to_string();
        assert!(usage.contains("kubectl promoter status"), "{usage}");
        // Names that only start like a command are left alone.
        let re = Regex::new(r"(^|[\s`(])promoter\s(status)\b").unwrap();
        let s = "promoter-system/promoter status";
        assert_eq!(re.replace_all(s, "${1}kubectl promoter $2"), s);
    }
}
