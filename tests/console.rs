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

#[test]
fn every_console_example_of_the_readme_and_the_book_runs_as_shown() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-cases");
    let _ = std::fs::remove_dir_all(&cases);
    std::fs::create_dir_all(&cases).expect("the cases' folder");
    let (mut blocks, mut commands, mut pages) = (0, 0, 0);
    let mut per_page = Vec::new();
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
    trycmd::TestCases::new()
        .register_bin("promoter", Path::new(env!("CARGO_BIN_EXE_promoter")))
        .env("PROMOTER_SIMULATE_START", START)
        .env("NO_COLOR", "1")
        .env("TZ", "UTC")
        .case(cases.join("*.md"));
}
