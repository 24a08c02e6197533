//! `promoter --version` names the git commit it was built from: `PROMOTER_GIT_COMMIT` when the build
//! sets it (the image build, which has no .git), else `git rev-parse`, else "unknown".

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PROMOTER_GIT_COMMIT");
    // Rebuild when HEAD moves; only files that exist are named (a missing one reruns every build).
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for path in ["HEAD", "packed-refs"]
        .into_iter()
        .map(String::from)
        .chain(branch)
        .filter_map(|p| git(&["rev-parse", "--git-path", &p]))
    {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("PROMOTER_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=PROMOTER_VERSION={version} (commit {commit})");
}
