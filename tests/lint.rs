//! `promoter lint` on a corpus of bad manifests, each declaring the diagnostics it must produce
//! (`# expect: <severity>: <text>`), and on the seed examples, which must have no errors.

mod common;

use common::yaml_files;
use promoter::ops::lint::{Severity, lint};
use std::path::Path;

#[test]
fn every_bad_manifest_gets_its_diagnostic() {
    let corpus = yaml_files("tests/lint");
    assert!(corpus.len() >= 10);
    for file in corpus {
        let text = std::fs::read_to_string(&file).unwrap();
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .collect();
        assert!(
            !expected.is_empty(),
            "{} declares no expectation",
            file.display()
        );
        let got: Vec<String> = lint(
            std::slice::from_ref(&file),
            None,
            chrono_tz::Tz::UTC,
            chrono::Utc::now(),
        )
        .iter()
        .map(|d| d.to_string())
        .collect();
        for e in expected {
            assert!(
                got.iter().any(|g| g.contains(e)),
                "{}: no diagnostic contains {e:?}; got {got:#?}",
                file.display()
            );
        }
    }
}

#[test]
fn the_seed_examples_have_no_errors() {
    let diagnostics = lint(
        &yaml_files("examples"),
        None,
        chrono_tz::Tz::UTC,
        chrono::Utc::now(),
    );
    let errors: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The seeds put a trigger on their last stage: a warning, not an error.
    assert!(
        diagnostics
            .iter()
            .any(|d| d.severity == Severity::Warning && d.message.contains("last stage"))
    );
}

/// Every example says in its first line what it shows, and those written for promoter (not the
/// seeds of upstream's documents) lint without a warning either, each with the fleet it names.
#[test]
fn every_example_says_what_it_shows_and_promoter_s_own_lint_clean() {
    let mut files = yaml_files("examples");
    files.extend(yaml_files("examples/demo"));
    files.extend(yaml_files("examples/fleets"));
    files.extend(yaml_files("examples/ci"));
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.starts_with("# ") && text.lines().next().is_some_and(|l| l.len() > 20),
            "{}: no first-line comment of what it shows",
            file.display()
        );
    }
    let fleet = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
        promoter::sim::Fleet::parse(&std::fs::read_to_string(&path).unwrap(), name).unwrap()
    };
    for (manifests, fleet_file) in [
        (
            vec!["examples/promotion-window.yaml"],
            "examples/fleets/blog-lab.yaml",
        ),
        (
            vec!["examples/health-check.yaml"],
            "examples/fleets/health-check.yaml",
        ),
        (
            vec![
                "examples/rollback-on-deadline.yaml",
                "examples/rollback-on-deadline-v2.yaml",
            ],
            "examples/fleets/blog-lab.yaml",
        ),
        (
            vec!["examples/demo/teams.yaml", "examples/demo/freeze.yaml"],
            "examples/fleets/blog-lab.yaml",
        ),
        (
            vec!["examples/freeze-holidays.yaml"],
            "examples/fleets/blog-lab.yaml",
        ),
    ] {
        let paths: Vec<std::path::PathBuf> = manifests
            .iter()
            .map(|m| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(m))
            .collect();
        let diagnostics = lint(
            &paths,
            Some(&fleet(fleet_file)),
            chrono_tz::Tz::UTC,
            chrono::Utc::now(),
        );
        // The blog's lab has a management cluster that no stage selects, on purpose.
        let problems: Vec<String> = diagnostics
            .iter()
            .filter(|d| d.severity != Severity::Note)
            .filter(|d| !d.message.ends_with("mgmt/mgmt is in no stage"))
            .map(|d| d.to_string())
            .collect();
        assert!(problems.is_empty(), "{manifests:?}: {problems:#?}");
    }
}

/// The ClusterPromotions shown in README.md and the book (```yaml blocks) lint without an error
/// or a warning: a reader who copies one gets a manifest the API server and promoter accept.
#[test]
fn the_manifests_shown_in_the_readme_and_the_book_lint_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("book-manifests");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut files = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
            let yaml = block.split("```").next().unwrap_or_default();
            if !yaml.contains("kind: ClusterPromotion") {
                continue;
            }
            let name = page
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('/', "__");
            let file = out.join(format!("{name}-{i}.yaml"));
            std::fs::write(&file, yaml).unwrap();
            files.push(file);
        }
    }
    assert!(files.len() >= 2, "{files:?}");
    let problems: Vec<String> = lint(&files, None, chrono_tz::Tz::UTC, chrono::Utc::now())
        .iter()
        .filter(|d| d.severity != Severity::Note)
        .map(|d| d.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_fleet_shows_concrete_overlaps_and_strays() {
    let fleet = promoter::sim::Fleet::parse(
        "apiVersion: promoter.dev/v1alpha1\nkind: Fleet\nclusters:\n- {name: both, namespace: x, labels: {env: prod, canary: 'true'}}\n- {name: stray, namespace: x, labels: {env: qa}}\n",
        "fleet.yaml",
    )
    .unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lint/overlap.yaml");
    let got: Vec<String> = lint(
        &[file],
        Some(&fleet),
        chrono_tz::Tz::UTC,
        chrono::Utc::now(),
    )
    .iter()
    .map(|d| d.to_string())
    .collect();
    assert!(
        got.iter().any(|g| g
            .contains("error: spec.stages: cluster x/both is selected by stages canary and prod")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|g| g.contains("warning: spec.stages: cluster x/stray is in no stage")),
        "{got:#?}"
    );
}

#[test]
fn exit_codes() {
    let bin = env!("CARGO_BIN_EXE_promoter");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(bin)
        .arg("lint")
        .arg(root.join("tests/lint/bad-duration.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bad-duration.yaml:10:29: document 1: error: spec.stages[0].trigger.auto.delay: invalid duration \"5x\""), "{stdout}");
    let ok = std::process::Command::new(bin)
        .arg("lint")
        .arg(root.join("examples/blog-kyverno-auto.yaml"))
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "warnings only");
}

/// `promoter lint -o json FILES`, parsed.
fn lint_json(files: &[std::path::PathBuf]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["lint", "-o", "json"])
        .args(files)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every diagnostic points at its field (file:line:column), and `-o github` turns them into pull
/// request annotations.
#[test]
fn diagnostics_have_lines_and_github_annotations() {
    let bin = env!("CARGO_BIN_EXE_promoter");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("tests/lint/bad-duration.yaml");
    let out = std::process::Command::new(bin)
        .args(["lint", "-o", "github"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expected = format!(
        "::error file={},line=10,col=29::spec.stages[0].trigger.auto.delay: invalid duration \"5x\"",
        file.display()
    );
    assert!(stdout.lines().any(|l| l == expected), "{stdout}");
    let v = lint_json(std::slice::from_ref(&file));
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["severity"] == "Error")
        .unwrap();
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(10), Some(29)),
        "{v}"
    );
}

/// A broken file reports its own line and column and the next files are still checked; every
/// error of every document is reported, CRD errors in the API server's words; JSON names paths.
#[test]
fn every_error_of_every_file_through_the_binary() {
    let bin = env!("CARGO_BIN_EXE_promoter");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = [
        root.join("tests/lint/yaml-syntax.yaml"),
        root.join("tests/lint/crd-enum-and-two-documents.yaml"),
        root.join("tests/lint/every-error.yaml"),
    ];
    let out = std::process::Command::new(bin)
        .arg("lint")
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let at = |i: usize, rest: &str| format!("{}:{rest}", files[i].display());
    for line in [
        at(0, "9:22: error: invalid YAML: unclosed bracket '{'"),
        at(
            1,
            "9:15: document 1: error: spec.profileSpec.syncMode: Unsupported value: \"Continous\": supported values: \"OneTime\", \"Continuous\", \"ContinuousWithDriftDetection\", \"DryRun\"",
        ),
        at(
            1,
            "22:29: document 2: error: spec.stages[0].trigger.auto.delay: invalid duration \"5x\"",
        ),
        at(
            2,
            "20:5: document 1: error: spec.stages[0].name: Required value",
        ),
        at(
            2,
            "22:29: document 1: error: spec.stages[1].trigger.auto.delay: invalid duration \"soon\"",
        ),
        at(2, "27:1: document 2: error: metadata.name: Required value"),
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?} in\n{stdout}"
        );
    }
    assert!(
        stdout.ends_with("11 errors, 2 warnings in 3 files\n"),
        "{stdout}"
    );
    let v = lint_json(&files);
    let enum_error = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .unwrap()
                .starts_with("Unsupported value")
        })
        .unwrap();
    assert_eq!(
        enum_error["path"], "spec.profileSpec.syncMode",
        "{enum_error}"
    );
    assert_eq!(enum_error["line"], 9);
    assert_eq!(enum_error["column"], 15);
}

/// promoter's CRD is never stricter than upstream's: a field either refuses is refused by
/// upstream's too, for every document of the corpus and the examples.
#[test]
fn promoters_crd_refuses_nothing_upstreams_accepts() {
    use promoter::ops::crd_schema::{CrdSchema, cluster_promotion};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crd: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            root.join("src/fake/crds/config.projectsveltos.io_clusterpromotions.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let upstream = CrdSchema::compile(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        "config.projectsveltos.io/v1beta1",
        "ClusterPromotion",
    )
    .unwrap();
    let ours = cluster_promotion().unwrap();
    let mut checked = 0;
    for file in yaml_files("tests/lint")
        .into_iter()
        .chain(yaml_files("examples"))
    {
        let Ok(docs) = serde_saphyr::from_multiple::<serde_json::Value>(
            &std::fs::read_to_string(&file).unwrap(),
        ) else {
            continue;
        };
        for doc in docs.iter().filter(|d| d["kind"] == "ClusterPromotion") {
            let theirs: Vec<String> = upstream.validate(doc).into_iter().map(|e| e.path).collect();
            for e in ours.validate(doc) {
                assert!(
                    theirs.contains(&e.path),
                    "{}: only promoter refuses {e:?}",
                    file.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

/// Exactly the diagnostics of a `promoter.dev/` key promoter does not know (with the known key it
/// is a typo of) and of a hand-written `paused`; nothing about a key outside promoter's prefix or
/// a known per-stage record.
#[test]
fn unknown_promoter_keys_and_only_those() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lint/unknown-keys.yaml");
    let got: Vec<String> = lint(
        std::slice::from_ref(&file),
        None,
        chrono_tz::Tz::UTC,
        chrono::Utc::now(),
    )
    .iter()
    .map(|d| d.to_string())
    .collect();
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(!got.iter().any(|g| g.contains("example.com")), "{got:#?}");
    assert!(
        !got.iter()
            .any(|g| g.contains("[promoter.dev/approval.dev]")),
        "{got:#?}"
    );
}
