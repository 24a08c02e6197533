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
    assert!(stdout.contains("bad-duration.yaml: document 1: error: spec.stages[0].trigger.auto.delay: invalid duration \"5x\""), "{stdout}");
    let ok = std::process::Command::new(bin)
        .arg("lint")
        .arg(root.join("examples/blog-kyverno-auto.yaml"))
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "warnings only");
}
