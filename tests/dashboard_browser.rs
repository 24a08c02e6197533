//! The dashboard in a real browser (headless Chromium, Debian's package, over the DevTools
//! protocol), used as a person uses it: the overview of the simulated fleet, the pipeline, Approve
//! on the waiting stage by keyboard, the confirmation naming what changes, the stage advancing
//! after the next passes, the promotion's page; no script error and no Content-Security-Policy
//! violation on the way. Skips, saying so, where no Chromium can start (CI installs it and sets
//! `PROMOTER_REQUIRE_BROWSER`, so there it fails instead).
//!
//! `PROMOTER_SCREENSHOTS=docs/src/images cargo test --test dashboard_browser` also writes the
//! book's screenshots (`dashboard-overview.png`, `dashboard-promotion.png`).

mod browser;
mod common;

use browser::{Browser, Page};
use promoter::dashboard::sim::SimClock;
use promoter::dashboard::{Dashboard, Options};
use promoter::sim::{Fleet, SimHealth, SimOptions, SimWorld, Simulation};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn example(file: &str) -> Vec<promoter::api::ClusterPromotion> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    promoter::manifest::load_file(&path)
        .unwrap()
        .iter()
        .filter_map(|d| d.promotion().cloned())
        .collect()
}

fn blog_lab() -> Fleet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleets/blog-lab.yaml");
    Fleet::parse(&std::fs::read_to_string(path).unwrap(), "blog-lab.yaml").unwrap()
}

fn options(freezes: Vec<promoter::sim::ScriptedFreeze>) -> SimOptions {
    SimOptions {
        start: common::start_time(),
        tick: chrono::Duration::minutes(1),
        until: chrono::Duration::days(7),
        approvals: Vec::new(),
        failures: Vec::new(),
        updates: Vec::new(),
        freezes,
        default_tz: chrono_tz::UTC,
        sveltos_clock_skew: chrono::Duration::zero(),
        progress: false,
    }
}

/// `simulate … --dashboard`, its clock paused: the page moves it.
async fn simulation(world: SimWorld, opts: &SimOptions) -> Dashboard {
    let sim = Simulation::start(world, SimHealth::FleetObjects, opts)
        .await
        .unwrap();
    let client = sim.client().clone();
    let clock = Arc::new(SimClock::new(opts.start, 60.0, false));
    promoter::dashboard::start(
        client,
        clock.clone(),
        Some((sim, clock)),
        Options::new("simulated fleet"),
    )
    .await
    .unwrap()
}

async fn text(page: &mut Page, expression: &str) -> String {
    page.eval(expression)
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Clicks "Skip to next change" until `expression` holds (each click waits for the page to show
/// the pass it ran).
async fn skip_until(page: &mut Page, expression: &str) {
    for _ in 0..40 {
        if page.eval(expression).await.unwrap() == Value::Bool(true) {
            return;
        }
        let before = text(page, "document.getElementById('toast').textContent").await;
        page.eval("document.getElementById('toast').textContent = ''")
            .await
            .unwrap();
        page.click("button[data-sim=skip]").await.unwrap();
        page.wait_for(
            "document.getElementById('toast').textContent !== ''",
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("{e} (last: {before})"));
        // The pass's changes arrive over the page's event stream.
        let _ = page.wait_for(expression, Duration::from_secs(2)).await;
    }
    panic!("never: {expression}");
}

/// Presses Tab until the focused element matches `selector`: the page can be driven without a
/// mouse, in document order.
async fn tab_to(page: &mut Page, selector: &str) -> usize {
    let check = format!(
        "document.activeElement && document.activeElement.matches({})",
        serde_json::to_string(selector).unwrap()
    );
    for presses in 0..150 {
        if page.eval(&check).await.unwrap() == Value::Bool(true) {
            return presses;
        }
        page.key("Tab", false).await.unwrap();
    }
    panic!("Tab never reached {selector}");
}

fn save(name: &str, png: &[u8]) {
    if let Some(dir) = std::env::var_os("PROMOTER_SCREENSHOTS") {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
        eprintln!("wrote {}", dir.join(name).display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_approves_the_waiting_stage_and_the_rollout_continues() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let opts = options(Vec::new());
    let d = simulation(
        SimWorld {
            promotions: example("blog-kyverno-manual.yaml"),
            fleet: blog_lab(),
            objects: Vec::new(),
        },
        &opts,
    )
    .await;
    let mut page = browser.page(1280, 800).await.unwrap();
    page.goto(&d.login_url).await.unwrap();
    // The overview: the promotion as a row of its stages.
    page.wait_for(
        "document.querySelectorAll('#rows tr').length === 1",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let stages = page
        .eval("[...document.querySelectorAll('#rows .pipeline .sn')].map(e => e.textContent)")
        .await
        .unwrap();
    assert_eq!(stages, serde_json::json!(["dev", "staging", "production"]));
    page.wait_for(
        "document.getElementById('live').textContent === '● live'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    // The clock plays from the page: passes run, the rows follow, until staging waits.
    skip_until(
        &mut page,
        "!!document.querySelector('button[data-action=approve]')",
    )
    .await;
    let cell = text(
        &mut page,
        "document.querySelector('.pipeline li.st-approval').textContent",
    )
    .await;
    assert!(
        cell.contains("staging") && cell.contains("awaiting approval"),
        "{cell}"
    );
    // Keyboard only: Tab to Approve, Enter opens the confirmation.
    page.eval("document.activeElement.blur()").await.unwrap();
    tab_to(&mut page, "button[data-action=approve]").await;
    page.key("Enter", false).await.unwrap();
    page.wait_for(
        "document.getElementById('confirm').open",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(
        text(
            &mut page,
            "document.getElementById('confirm-title').textContent"
        )
        .await,
        "Approve staging?"
    );
    let summary = text(
        &mut page,
        "document.getElementById('confirm-summary').textContent",
    )
    .await;
    assert!(
        summary.starts_with("Approve stage staging of kyverno-prog-rollout-man for revision "),
        "{summary}"
    );
    assert!(summary.contains("Recorded as: admin"), "{summary}");
    let changes = text(
        &mut page,
        "document.getElementById('confirm-changes').textContent",
    )
    .await;
    assert!(
        changes.contains("set spec.stages[1].trigger.manual.approved to true"),
        "{changes}"
    );
    assert!(
        changes.contains("annotation promoter.dev/approval.staging"),
        "{changes}"
    );
    // The reason field has the focus; typing and Enter confirm.
    assert_eq!(
        text(&mut page, "document.activeElement.id").await,
        "confirm-reason"
    );
    page.type_text("CAB-42").await.unwrap();
    page.key("Enter", false).await.unwrap();
    page.wait_for(
        "document.getElementById('toast').textContent.startsWith('approved stage staging of kyverno-prog-rollout-man')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(
        page.eval("document.getElementById('confirm').open")
            .await
            .unwrap(),
        Value::Bool(false)
    );
    // Live, without a reload: the row says approved and not yet acted on.
    page.wait_for(
        "document.querySelector('#rows tr td.msg').textContent.startsWith('approved by admin')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    // The next passes let it through, to production and to the end.
    skip_until(
        &mut page,
        "document.querySelector('#rows tr').dataset.phase === 'Complete'",
    )
    .await;
    let cells = page
        .eval("[...document.querySelectorAll('#rows .pipeline li')].map(e => e.className)")
        .await
        .unwrap();
    assert_eq!(
        cells,
        serde_json::json!(["st st-passed", "st st-passed", "st st-complete"])
    );
    // Filters: by phase, by label, by name.
    page.eval("{ const s = document.getElementById('phase'); s.value = 'Failed'; s.dispatchEvent(new Event('input')); }")
        .await
        .unwrap();
    assert_eq!(
        text(&mut page, "document.getElementById('count').textContent").await,
        "0 of 1 promotions"
    );
    page.eval("{ const s = document.getElementById('phase'); s.value = ''; s.dispatchEvent(new Event('input')); }")
        .await
        .unwrap();
    // "/" jumps to the search box.
    page.eval("document.activeElement.blur()").await.unwrap();
    page.key("/", false).await.unwrap();
    assert_eq!(text(&mut page, "document.activeElement.id").await, "q");
    page.type_text("nomatch").await.unwrap();
    page.eval("document.getElementById('q').dispatchEvent(new Event('input'))")
        .await
        .unwrap();
    assert_eq!(
        text(&mut page, "document.getElementById('count').textContent").await,
        "0 of 1 promotions"
    );
    // The promotion's page, by keyboard: its link, Enter.
    page.goto(&format!("http://{}/", d.addr)).await.unwrap();
    page.eval("document.activeElement.blur()").await.unwrap();
    tab_to(&mut page, "#rows a").await;
    page.key("Enter", false).await.unwrap();
    page.wait_for(
        "!!document.querySelector('section.pipeline-cols')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let columns = page
        .eval("[...document.querySelectorAll('section.stage h2')].map(e => e.textContent)")
        .await
        .unwrap();
    assert_eq!(
        columns,
        serde_json::json!(["✓ 1. dev", "✓ 2. staging", "✓ 3. production"])
    );
    // A cluster chip opens with Enter and shows its features.
    tab_to(&mut page, "details.chip summary").await;
    page.key("Enter", false).await.unwrap();
    assert_eq!(
        page.eval("document.querySelector('details.chip').open")
            .await
            .unwrap(),
        Value::Bool(true)
    );
    let events = text(
        &mut page,
        "document.querySelector('section.events').textContent",
    )
    .await;
    assert!(
        events.contains("Approved Stage staging approved by admin"),
        "{events}"
    );
    // Escape cancels a confirmation and gives the focus back.
    tab_to(&mut page, "button[data-action=pause]").await;
    page.key("Enter", false).await.unwrap();
    page.wait_for(
        "document.getElementById('confirm').open",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    page.key("Escape", false).await.unwrap();
    page.wait_for(
        "!document.getElementById('confirm').open",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(
        page.eval("document.activeElement.dataset.action")
            .await
            .unwrap(),
        Value::String("pause".into())
    );
    let problems = page.problems();
    assert!(problems.is_empty(), "the page reported: {problems:?}");
}

/// The book's pictures: the promotions of `examples/demo/` (three teams, the checkout team frozen)
/// beside the blog's manual rollout and the rollback example, on the blog's lab fleet.
#[tokio::test(flavor = "multi_thread")]
async fn screenshots_of_the_overview_and_a_promotion() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let mut promotions = example("blog-kyverno-manual.yaml");
    promotions.extend(example("rollback-on-deadline.yaml"));
    promotions.extend(example("demo/teams.yaml"));
    let freeze = promoter::manifest::load_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo/freeze.yaml"),
    )
    .unwrap()
    .remove(0)
    .raw;
    let opts = options(Vec::new());
    let d = simulation(
        SimWorld {
            promotions,
            fleet: blog_lab(),
            objects: vec![(promoter::fake::promotion_freeze_type(), freeze)],
        },
        &opts,
    )
    .await;
    let mut page = browser.page(1360, 640).await.unwrap();
    page.goto(&d.login_url).await.unwrap();
    page.wait_for(
        "document.querySelectorAll('#rows tr').length === 5",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    skip_until(
        &mut page,
        "document.querySelector('#row-kyverno-prog-rollout-man').dataset.phase === 'AwaitingApproval' && document.querySelector('#row-payments-api').dataset.phase === 'Soaking' && document.querySelector('#row-checkout-web').dataset.phase === 'Frozen'",
    )
    .await;
    let png = page.screenshot(false).await.unwrap();
    assert!(png.len() > 10_000, "a blank screenshot?");
    save("dashboard-overview.png", &png);
    page.goto(&format!(
        "http://{}/promotions/kyverno-prog-rollout-man",
        d.addr
    ))
    .await
    .unwrap();
    page.wait_for(
        "!!document.querySelector('section.pipeline-cols')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    page.eval("document.querySelector('details.chip').open = true")
        .await
        .unwrap();
    let mut page_tall = page;
    page_tall
        .call(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": 1360, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        )
        .await
        .unwrap();
    let png = page_tall.screenshot(false).await.unwrap();
    save("dashboard-promotion.png", &png);
    let problems = page_tall.problems();
    assert!(problems.is_empty(), "the page reported: {problems:?}");
}
