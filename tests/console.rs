//! Every ```console block of README.md and the book (`docs/src/**/*.md`) runs here, with trycmd:
//! each `$ ` line is run and what it prints (stdout and stderr) and its exit code (`? N`, 0 when
//! absent) must be what the block shows; `...` on a line of its own and `[..]` within a line
//! elide what changes from run to run. A doc whose example drifts fails here.
//!
//! The commands run in the repository's root, as a reader runs them from a clone: `$ cargo run --
//! ARGS` and `$ promoter ARGS` both run the `promoter` binary this test was built with. The
//! simulator's virtual clock starts at [`START`] (`PROMOTER_SIMULATE_START`), so timelines do not
//! depend on when the test runs. The count of blocks and commands run is written to
//! `target/tmp/console-examples.txt` (CI prints it).
//!
//! A page whose commands need a cluster names one of [`WORLDS`] in an HTML comment (invisible in
//! the book): `<!-- console world: failing -->`. Its blocks then run against the fake API server
//! with the simulated Sveltos, brought by passes to where the page's story is, its clock ending
//! at the real time (the commands compute ages from it), with `KUBECONFIG` pointing at it.

mod common;

use chrono::{Duration, Utc};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the simulator's clock starts for every example.
const START: &str = "2026-11-20T00:00:00Z";

/// README.md and every page of the book, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs/src"), &mut files);
    files
}

/// The console blocks of a page as trycmd reads them: every other line blanked (trycmd would take
/// a fence without a language for one of its own), so that a failure's line number is the page's;
/// `cargo run --` and `kubectl promoter` become the binary. trycmd reads a block's output without
/// its last line break unless an empty line ends it: one is added before each closing fence, and
/// the next blanked line left out, so that the lines after it keep their numbers. (blocks,
/// commands) counted.
fn console_only(text: &str) -> (String, usize, usize) {
    let mut out = String::new();
    let (mut blocks, mut commands) = (0, 0);
    let mut inside = false;
    let mut owed = 0;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if !inside && trimmed.starts_with("```console") {
            inside = true;
            blocks += 1;
            out.push_str(line);
        } else if inside && trimmed.starts_with("```") {
            inside = false;
            out.push('\n');
            owed += 1;
            out.push_str(line);
        } else if !inside && owed > 0 {
            owed -= 1;
            continue;
        } else if inside {
            let command = line
                .strip_prefix("$ cargo run -- ")
                .or_else(|| line.strip_prefix("$ kubectl promoter "))
                .map(|rest| format!("$ promoter {rest}"));
            if line.starts_with("$ ") {
                commands += 1;
            }
            out.push_str(command.as_deref().unwrap_or(line));
        }
        out.push('\n');
    }
    (out, blocks, commands)
}

/// The worlds a page may run its commands against.
const WORLDS: [&str; 2] = ["failing", "awaiting-approval"];

/// The blog's lab (`examples/fleets/blog-lab.yaml`) as the fake server's SveltosClusters.
const LAB: [(&str, &str, &str); 4] = [
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

/// The world `name`, after its passes, the last one a minute before now.
async fn world(name: &str) -> common::Env {
    let mut env = common::Env::new(&LAB).await;
    let (example, passes) = match name {
        // dev01's deployments fail from the start: the rollout halts at dev.
        "failing" => ("blog-kyverno-auto.yaml", 4),
        // staging deployed, waiting for a person.
        "awaiting-approval" => ("blog-kyverno-manual.yaml", 10),
        other => panic!("no console world {other:?}: one of {WORLDS:?}"),
    };
    let now = Utc::now();
    let start = now - Duration::seconds(now.timestamp() % 60) - Duration::minutes(passes);
    *env.now.lock().expect("the clock") = start;
    if name == "failing" {
        env.addon.failing.insert("dev/dev01".into(), start);
    }
    env.apply_example(example);
    for _ in 0..passes {
        env.tick().await;
    }
    env
}

/// The world a page asks for, if any.
fn world_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("<!-- console world: "))
        .and_then(|rest| rest.strip_suffix(" -->"))
        .map(str::to_string)
}

fn test_cases(bin: &Path) -> trycmd::TestCases {
    let cases = trycmd::TestCases::new();
    cases
        .register_bin("promoter", bin)
        .env("PROMOTER_SIMULATE_START", START)
        .env("NO_COLOR", "1")
        .env("TZ", "UTC");
    cases
}

#[tokio::test(flavor = "multi_thread")]
async fn every_console_example_of_the_readme_and_the_book_runs_as_shown() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-cases");
    let _ = std::fs::remove_dir_all(&cases);
    std::fs::create_dir_all(&cases).expect("the cases' folder");
    let (mut blocks, mut commands, mut pages) = (0, 0, 0);
    let mut per_page = Vec::new();
    // Pages by the world they run in ("" for none).
    let mut by_world: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in markdown_files(root) {
        let text = std::fs::read_to_string(&file).expect("a page");
        let (only, b, c) = console_only(&text);
        if b == 0 {
            continue;
        }
        let relative = file.strip_prefix(root).unwrap_or(&file);
        // One flat name per page, which still says where it is from.
        let name = relative.to_string_lossy().replace('/', "__");
        std::fs::write(cases.join(&name), only).expect("a case");
        by_world
            .entry(world_of(&text).unwrap_or_default())
            .or_default()
            .push(cases.join(&name));
        per_page.push(format!("{}: {b} blocks, {c} commands", relative.display()));
        blocks += b;
        commands += c;
        pages += 1;
    }
    let summary = format!(
        "console examples: {blocks} blocks, {commands} commands, from {pages} pages (README.md and docs/src)\n{}\n",
        per_page.join("\n")
    );
    eprint!("{summary}");
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-examples.txt"),
        &summary,
    );
    // The README's simulations, the getting-started pages and a runbook at least.
    assert!(blocks >= 10, "{summary}");
    eprintln!(
        "a failure names the page as {}/<path with / as __>:<line of the page>",
        cases.display()
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_promoter"));
    for (name, pages) in by_world {
        // trycmd blocks until its commands are done: the fake server's tasks run on the
        // runtime's other threads meanwhile.
        let env = if name.is_empty() {
            None
        } else {
            Some(world(&name).await)
        };
        let kubeconfig =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("console-{name}.kubeconfig"));
        tokio::task::block_in_place(|| {
            let cases = test_cases(bin);
            if let Some(env) = &env {
                std::fs::write(&kubeconfig, env.server.kubeconfig_yaml("admin"))
                    .expect("a kubeconfig");
                cases
                    .env("KUBECONFIG", kubeconfig.display().to_string())
                    .env("PROMOTER_CRONJOB", "none");
            }
            for page in &pages {
                cases.case(page);
            }
            cases.run();
        });
    }
}
