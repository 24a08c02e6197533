//! The book's reference pages (`docs/src/reference/`) are what the code generates (`promoter
//! reference`, hidden): commands and flags from clap, the `promoter.dev/` keys and settings,
//! metrics, Event reasons, phases, status texts and exit codes. A change to any of them without
//! the pages fails here; `PROMOTER_BLESS=1 cargo test --test reference` writes them again.

use std::path::Path;

#[test]
fn the_reference_pages_are_what_the_code_generates() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference");
    let generated = std::env::temp_dir().join(format!("promoter-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&generated);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["reference", "--out"])
        .arg(&generated)
        .output()
        .expect("running promoter reference");
    assert!(
        out.status.success(),
        "promoter reference: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bless = std::env::var_os("PROMOTER_BLESS").is_some();
    let mut names: Vec<String> = std::fs::read_dir(&generated)
        .expect("the generated pages")
        .map(|e| {
            e.expect("a generated page")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    let mut stale = Vec::new();
    for name in &names {
        let want = std::fs::read_to_string(generated.join(name)).expect("a generated page");
        let have = std::fs::read_to_string(committed.join(name)).unwrap_or_default();
        if want != have {
            if bless {
                std::fs::create_dir_all(&committed).expect("docs/src/reference");
                std::fs::write(committed.join(name), &want).expect("writing a reference page");
            } else {
                let line = want
                    .lines()
                    .zip(have.lines())
                    .position(|(w, h)| w != h)
                    .unwrap_or(want.lines().count().min(have.lines().count()));
                stale.push(format!(
                    "docs/src/reference/{name}: differs from line {}: the code says {:?}, the page {:?}",
                    line + 1,
                    want.lines().nth(line).unwrap_or(""),
                    have.lines().nth(line).unwrap_or("")
                ));
            }
        }
    }
    // A page the code no longer generates is stale too (every .md there is generated).
    for entry in std::fs::read_dir(&committed)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !names.contains(&name) {
            if bless {
                std::fs::remove_file(entry.path()).expect("removing a stale page");
            } else {
                stale.push(format!("docs/src/reference/{name}: no longer generated"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&generated);
    assert!(
        stale.is_empty(),
        "the reference pages are stale; regenerate them with\n  PROMOTER_BLESS=1 cargo test --test reference\n{}",
        stale.join("\n")
    );
}
