//! What a release ships, checked as far as this machine allows (no container engine, no krew):
//! the versions agree everywhere; the Dockerfile packs, as a numeric non-root user, the binary
//! release/build.sh builds for each TARGETARCH; that binary runs in an image-like root (the final
//! stage's files only, read-only, no /etc/passwd) as the image's user; and the archives and krew
//! manifest release/build.sh wrote (target/dist, which `.ci/run` builds for the host) hold what the
//! manifest promises, the manifest passing krew's own validation rules.

mod common;

use common::{rand_suffix, succeeded};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap()
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn versions_agree() {
    let chart = yaml("charts/promoter/Chart.yaml");
    assert_eq!(
        chart["version"],
        json!(VERSION),
        "charts/promoter/Chart.yaml"
    );
    assert_eq!(
        chart["appVersion"],
        json!(VERSION),
        "charts/promoter/Chart.yaml"
    );
    let kustomization = yaml("cronjob/kustomization.yaml");
    assert_eq!(
        kustomization["images"][0]["newTag"],
        json!(format!("v{VERSION}")),
        "the image cronjob/ installs"
    );
    assert_eq!(
        package_version(&read("lambda/Cargo.toml")),
        VERSION,
        "lambda/Cargo.toml"
    );
}

/// The `version = "…"` of a Cargo.toml's [package].
fn package_version(text: &str) -> String {
    let mut in_package = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(v) = line.strip_prefix("version = ") {
            return v.trim_matches('"').to_string();
        }
    }
    panic!("no [package] version")
}

/// The Dockerfile's instructions, one a line (continuations joined), without comments.
fn instructions() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(t);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The user the image runs as (`USER uid:gid`, numeric).
fn image_user() -> (u32, u32) {
    let last = instructions()
        .into_iter()
        .rev()
        .find(|i| i.starts_with("USER "))
        .unwrap();
    let (uid, gid) = last["USER ".len()..].split_once(':').unwrap();
    (uid.parse().unwrap(), gid.parse().unwrap())
}

#[test]
fn the_dockerfile_packs_the_release_binary_as_a_numeric_non_root_user() {
    let all = instructions();
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, i)| i.starts_with("FROM "))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(stages.len(), 2, "a build stage and the image");
    // The build stage runs on the build machine and cross-compiles with the release script.
    assert!(all[stages[0]].starts_with("FROM --platform=$BUILDPLATFORM "));
    let build = &all[stages[0]..stages[1]];
    assert!(build.iter().any(|i| i == "ARG TARGETARCH"));
    let script = build
        .iter()
        .find(|i| i.contains("release/build.sh"))
        .unwrap();
    assert!(
        script.contains("--binaries-only --out /out \"${TARGETARCH}\""),
        "{script}"
    );
    // The image: an empty base, the CA bundle and the binary the script wrote for TARGETARCH.
    let image = &all[stages[1]..];
    assert_eq!(image[0], "FROM scratch");
    let copies: Vec<&String> = image.iter().filter(|i| i.starts_with("COPY ")).collect();
    assert_eq!(
        copies,
        [
            "COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
            "COPY --from=build /out/linux-${TARGETARCH}/promoter /promoter",
        ]
    );
    let (uid, gid) = image_user();
    assert!(uid > 0 && gid > 0, "non-root");
    assert!(image.contains(&"ENTRYPOINT [\"/promoter\"]".to_string()));
    assert!(image.contains(&"CMD [\"step\"]".to_string()));
    // The CronJob's pod runs as the image's user (the chart's defaults are the same, tests/chart.rs).
    let cronjob = yaml("cronjob/cronjob.yaml");
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], json!(uid));
    assert_eq!(pod["securityContext"]["runAsGroup"], json!(gid));
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
        json!(true)
    );
}

fn host_platform() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// target/dist, as release/build.sh leaves it, when it has run for this machine's platform.
fn dist() -> Option<PathBuf> {
    let dir = root().join("target/dist");
    if dir
        .join(format!("linux-{}/promoter", host_platform()))
        .exists()
    {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: no target/dist/linux-{}/promoter; run release/build.sh --profile dev {} (.ci/run does)",
            host_platform(),
            host_platform()
        );
        None
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("promoter-{name}-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn make_read_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            make_read_only(&entry.path());
        }
    }
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & !0o222)).unwrap();
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            make_writable(&entry.path());
        }
    }
}

/// The image's root filesystem rebuilt from the Dockerfile's final stage (and the two example files
/// a simulation reads), entered with chroot as the image's user: the binary needs no library, no
/// /etc/passwd, no /tmp and no writable path.
#[test]
fn the_packed_binary_runs_in_an_image_like_root_as_the_images_user() {
    let Some(dist) = dist() else { return };
    if unsafe { libc::geteuid() } != 0 {
        return eprintln!("SKIPPED: chroot needs root");
    }
    let Some(chroot) = ["/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        return eprintln!("SKIPPED: no chroot (coreutils)");
    };
    let rootfs = scratch_dir("rootfs");
    std::fs::create_dir_all(rootfs.join("etc/ssl/certs")).unwrap();
    std::fs::create_dir_all(rootfs.join("examples/fleets")).unwrap();
    std::fs::copy(
        dist.join(format!("linux-{}/promoter", host_platform())),
        rootfs.join("promoter"),
    )
    .unwrap();
    std::fs::copy(
        "/etc/ssl/certs/ca-certificates.crt",
        rootfs.join("etc/ssl/certs/ca-certificates.crt"),
    )
    .unwrap();
    for f in ["blog-kyverno-auto.yaml", "fleets/blog-lab.yaml"] {
        std::fs::copy(
            root().join("examples").join(f),
            rootfs.join("examples").join(f),
        )
        .unwrap();
    }
    make_read_only(&rootfs);
    let (uid, gid) = image_user();
    let run = |args: &[&str]| {
        // No environment at all, as a container starts with only what the pod spec sets.
        succeeded(
            Command::new(chroot)
                .arg(format!("--userspec={uid}:{gid}"))
                .arg(&rootfs)
                .arg("/promoter")
                .args(args)
                .env_clear(),
        )
    };
    assert!(run(&["--version"]).starts_with(&format!("promoter {VERSION}")));
    assert!(run(&["crd"]).contains("kind: CustomResourceDefinition"));
    let timeline = run(&[
        "simulate",
        "/examples/blog-kyverno-auto.yaml",
        "--fleet",
        "/examples/fleets/blog-lab.yaml",
    ]);
    assert!(
        timeline.contains("=> complete: production promoted"),
        "{timeline}"
    );
    make_writable(&rootfs);
    let _ = std::fs::remove_dir_all(&rootfs);
}

/// krew's `ValidatePlugin` rules (sigs.k8s.io/krew, internal/index/validation), for a manifest
/// installed by `kubectl krew install --manifest`.
fn krew_validate(name: &str, p: &Value) -> Result<(), String> {
    let sha256 = regex::Regex::new("^[a-f0-9]{64}$").unwrap();
    let safe = regex::Regex::new(r"^[\w-]+$").unwrap();
    if p["apiVersion"] != "krew.googlecontainertools.github.com/v1alpha2" {
        return Err(format!("apiVersion {}", p["apiVersion"]));
    }
    if p["kind"] != "Plugin" {
        return Err(format!("kind {}", p["kind"]));
    }
    if !safe.is_match(name) || p["metadata"]["name"] != name {
        return Err(format!("name {}", p["metadata"]["name"]));
    }
    let spec = &p["spec"];
    if spec["shortDescription"].as_str().is_none_or(str::is_empty) {
        return Err("no shortDescription".into());
    }
    let version = spec["version"].as_str().unwrap_or_default();
    let semver = regex::Regex::new(r"^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$").unwrap();
    if !semver.is_match(version) {
        return Err(format!("version {version:?}"));
    }
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    if platforms.is_empty() {
        return Err("no platform".into());
    }
    for pl in &platforms {
        if pl["uri"].as_str().is_none_or(str::is_empty) {
            return Err("a platform without uri".into());
        }
        if !pl["sha256"].as_str().is_some_and(|s| sha256.is_match(s)) {
            return Err(format!("sha256 {}", pl["sha256"]));
        }
        if pl["bin"].as_str().is_none_or(str::is_empty) {
            return Err("a platform without bin".into());
        }
        if let Some(files) = pl.get("files") {
            let files = files.as_array().cloned().unwrap_or_default();
            if files.is_empty()
                || files.iter().any(|f| {
                    f["from"].as_str().is_none_or(str::is_empty)
                        || f["to"].as_str().is_none_or(str::is_empty)
                })
            {
                return Err("files without from or to".into());
            }
        }
        let labels = pl["selector"]["matchLabels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if labels.is_empty() || labels.keys().any(|k| k != "os" && k != "arch") {
            return Err(format!("selector {}", pl["selector"]));
        }
    }
    Ok(())
}

#[test]
fn the_krew_template_names_every_platform_the_release_builds() {
    let template = read("krew/promoter.yaml");
    let manifest: Value = serde_saphyr::from_str(&template).unwrap();
    let archives: Vec<String> = manifest["spec"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let labels = &p["selector"]["matchLabels"];
            let (os, arch) = (
                labels["os"].as_str().unwrap(),
                labels["arch"].as_str().unwrap(),
            );
            assert_eq!(p["sha256"], "${SHA256}");
            assert_eq!(p["bin"], "promoter");
            p["uri"].as_str().unwrap().to_string() + &format!(" {os}/{arch}")
        })
        .collect();
    assert_eq!(
        archives,
        [
            "${BASE_URL}/promoter_${VERSION}_linux_amd64.tar.gz linux/amd64",
            "${BASE_URL}/promoter_${VERSION}_linux_arm64.tar.gz linux/arm64"
        ]
    );
    assert_eq!(manifest["spec"]["version"], "${VERSION}");
}

/// The archives and manifest of target/dist: checksums right, and what krew would install (the
/// archive unpacked, `bin` linked as kubectl-promoter) runs as the plugin.
#[test]
fn the_release_archives_hold_what_the_krew_manifest_installs() {
    let Some(dist) = dist() else { return };
    let manifest: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dist.join("promoter.yaml")).unwrap())
            .unwrap();
    krew_validate("promoter", &manifest).unwrap();
    assert_eq!(manifest["spec"]["version"], json!(format!("v{VERSION}")));
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    succeeded(
        Command::new("sha256sum")
            .args(["--check", "--strict", "SHA256SUMS"])
            .current_dir(&dist),
    );
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    assert_eq!(
        platforms.len(),
        sums.lines().count(),
        "one platform per archive"
    );
    for p in platforms {
        let uri = p["uri"].as_str().unwrap();
        let archive = uri.rsplit('/').next().unwrap();
        let arch = p["selector"]["matchLabels"]["arch"].as_str().unwrap();
        assert_eq!(archive, format!("promoter_v{VERSION}_linux_{arch}.tar.gz"));
        // sha256sum --check verified SHA256SUMS against the archives.
        assert!(
            sums.lines()
                .any(|l| l == format!("{}  {archive}", p["sha256"].as_str().unwrap())),
            "{archive}: the manifest's sha256 is not the archive's"
        );
        let unpacked = scratch_dir("krew");
        succeeded(
            Command::new("tar")
                .arg("-xzf")
                .arg(dist.join(archive))
                .arg("-C")
                .arg(&unpacked),
        );
        let mut names: Vec<String> = std::fs::read_dir(&unpacked)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["LICENSE", "promoter"]);
        for f in p["files"].as_array().unwrap() {
            assert!(unpacked.join(f["from"].as_str().unwrap()).exists());
        }
        assert_eq!(
            std::fs::read(unpacked.join("promoter")).unwrap(),
            std::fs::read(dist.join(format!("linux-{arch}/promoter"))).unwrap(),
            "the archive holds the binary the image packs"
        );
        if arch == host_platform() {
            let bin = unpacked.join(p["bin"].as_str().unwrap());
            let link = unpacked.join("kubectl-promoter");
            std::os::unix::fs::symlink(&bin, &link).unwrap();
            let help = succeeded(Command::new(&link).args(["status", "--help"]));
            assert!(help.contains("Usage: kubectl promoter status"), "{help}");
        }
        let _ = std::fs::remove_dir_all(&unpacked);
    }
}
