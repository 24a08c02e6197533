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
    simulation_at(world, opts, 60.0, false).await.0
}

/// `simulate … --dashboard --speed RATE` (paused unless `running`), and its clock.
async fn simulation_at(
    world: SimWorld,
    opts: &SimOptions,
    rate: f64,
    running: bool,
) -> (Dashboard, Arc<SimClock>) {
    let sim = Simulation::start(world, SimHealth::FleetObjects, opts)
        .await
        .unwrap();
    let client = sim.client().clone();
    let clock = Arc::new(SimClock::new(opts.start, rate, running));
    let d = promoter::dashboard::start(
        client,
        clock.clone(),
        Some((sim, clock.clone())),
        Options::new("simulated fleet"),
    )
    .await
    .unwrap();
    (d, clock)
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
        "0 of 1 promotion"
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
        "0 of 1 promotion"
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

/// The book's pictures, from the command examples/demo/teams.yaml names (a person can run it and
/// see the same): five promotions in different states on the blog's lab fleet, one of them frozen
/// while its stage awaits approval.
#[tokio::test(flavor = "multi_thread")]
async fn screenshots_of_the_overview_and_a_promotion() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo/teams.yaml"),
    )
    .unwrap();
    // The command, as the file's header gives it (its lines joined).
    let command = demo
        .lines()
        .skip_while(|l| !l.contains("promoter simulate"))
        .take_while(|l| l.starts_with("#   "))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .trim_end_matches('\\')
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut args: Vec<&str> = command.split_whitespace().skip(2).collect();
    assert!(args.contains(&"--dashboard"), "{command}");
    args.extend(["--speed", "0", "--port", "0"]);
    let served = serve_simulation(&args);
    let d_url = format!("http://127.0.0.1:{}", port_of(&served.url));
    let mut page = browser.page(1360, 640).await.unwrap();
    page.goto(&served.url).await.unwrap();
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
    // Two facts at once: checkout-web's staging is frozen and awaits its approval.
    let checkout = text(
        &mut page,
        "document.querySelector('#row-checkout-web').dataset.phases",
    )
    .await;
    assert_eq!(checkout, "Frozen AwaitingApproval");
    assert_eq!(
        page.eval("!!document.querySelector('#row-checkout-web button[data-action=approve]')")
            .await
            .unwrap(),
        Value::Bool(true)
    );
    // The last skip's answer, gone as it goes after a few seconds.
    page.eval("document.getElementById('toast').className = ''")
        .await
        .unwrap();
    // Its fade (0.2 s) over before the picture.
    page.wait_for(
        "getComputedStyle(document.getElementById('toast')).opacity === '0'",
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let png = page.screenshot(false).await.unwrap();
    assert!(png.len() > 10_000, "a blank screenshot?");
    save("dashboard-overview.png", &png);
    page.goto(&format!("{d_url}/promotions/kyverno-prog-rollout-man"))
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

/// Milliseconds since the epoch.
fn ms(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_millis()
}

/// The time the page's clock shows (to the second), in milliseconds since the epoch.
async fn shown_on(page: &mut Page) -> i64 {
    page.eval("Date.parse(document.getElementById('clock').getAttribute('datetime'))")
        .await
        .unwrap()
        .as_f64()
        .unwrap_or_else(|| panic!("no time on the page's clock")) as i64
}

/// At 600× the page's clock is the simulation's: never ahead of the server's clock (by more than
/// one tick of the simulation, what a rate changed in flight may cost), never backwards (a pause
/// included), and when the simulation cannot keep the rate asked the page says what it reaches.
#[tokio::test(flavor = "multi_thread")]
async fn the_simulated_clock_at_600x_is_never_ahead_of_the_simulation_nor_goes_backwards() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let opts = options(Vec::new());
    let (d, clock) = simulation_at(
        SimWorld {
            promotions: example("blog-kyverno-manual.yaml"),
            fleet: blog_lab(),
            objects: Vec::new(),
        },
        &opts,
        600.0,
        true,
    )
    .await;
    use promoter::dashboard::hub::Clock;
    let mut page = browser.page(1280, 800).await.unwrap();
    page.goto(&d.login_url).await.unwrap();
    page.wait_for(
        "document.getElementById('live').textContent === '● live'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let tick = ms(opts.start + opts.tick) - ms(opts.start);
    let mut shown: Vec<i64> = Vec::new();
    let mut worst_ahead = i64::MIN;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(12) {
        let on_page = shown_on(&mut page).await;
        // Read after the page's: the server's clock at least as late as what the page showed.
        let server = ms(clock.now());
        worst_ahead = worst_ahead.max(on_page - server);
        assert!(
            on_page <= server + tick,
            "the page shows {} while the simulation is at {} ({} s ahead after {:?})",
            on_page,
            server,
            (on_page - server) / 1000,
            started.elapsed()
        );
        if let Some(last) = shown.last() {
            assert!(
                on_page >= *last,
                "the page's clock went back from {last} to {on_page}"
            );
        }
        shown.push(on_page);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = shown[0];
    let last = *shown.last().unwrap();
    assert!(
        last - first > 10 * tick,
        "the clock hardly moved: {first} .. {last}"
    );
    // The words say what the clock reaches.
    let view = clock.view();
    let state = text(
        &mut page,
        "document.getElementById('sim-state').textContent",
    )
    .await;
    match view.behind() {
        Some(_) => assert!(state.contains("of the 600× asked"), "{state} ({view:?})"),
        None => assert!(state.starts_with("playing at "), "{state} ({view:?})"),
    }
    eprintln!(
        "600×: the page at most {worst_ahead} ms ahead of the server's clock; the server reaches {:?}",
        view.reached
    );
    // Pause: the page stops where the simulation stopped, not before and not after.
    page.click("#sim-toggle").await.unwrap();
    page.wait_for(
        "document.getElementById('sim-state').textContent === 'paused'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let paused = ms(clock.now());
    let on_page = shown_on(&mut page).await;
    assert!(
        on_page >= last,
        "the page's clock went back on Pause: {last} to {on_page}"
    );
    assert_eq!(
        on_page,
        paused - paused % 1000,
        "paused: the page shows the simulation's time"
    );
    let problems = page.problems();
    assert!(problems.is_empty(), "the page reported: {problems:?}");
}

/// `promoter simulate … --dashboard` as a person starts it, with its URL from its output.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_simulation(args: &[&str]) -> Served {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("simulate")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    // Keeps reading, so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Served { child, url }
}

/// The port of `http://127.0.0.1:PORT/…`.
fn port_of(url: &str) -> String {
    url.trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .unwrap()
        .to_string()
}

/// Play and Pause are one button that shows the clock's state, and the speed selector shows the
/// rate the server's clock runs at: `--speed 0` starts paused (at the default speed once
/// played), a speed chosen stays shown after a reload.
#[tokio::test(flavor = "multi_thread")]
async fn play_pause_is_one_toggle_that_shows_its_state_and_the_speed_shown_is_the_servers() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let served = serve_simulation(&[
        "examples/blog-kyverno-manual.yaml",
        "--fleet",
        "examples/fleets/blog-lab.yaml",
        "--dashboard",
        "--speed",
        "0",
        "--port",
        "0",
    ]);
    let mut page = browser.page(1280, 800).await.unwrap();
    page.goto(&served.url).await.unwrap();
    page.wait_for(
        "document.getElementById('live').textContent === '● live'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let controls = "(() => { const t = document.getElementById('sim-toggle'); return [t.textContent, t.className, document.getElementById('sim-state').textContent, document.getElementById('sim-speed').value, document.querySelectorAll('[data-sim=play], [data-sim=pause]').length]; })()";
    assert_eq!(
        page.eval(controls).await.unwrap(),
        serde_json::json!(["▶ Play", "toggle paused", "paused", "60", 1])
    );
    page.click("#sim-toggle").await.unwrap();
    page.wait_for(
        "document.getElementById('sim-toggle').textContent === '‖ Pause'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let state = text(
        &mut page,
        "document.getElementById('sim-state').textContent",
    )
    .await;
    assert!(
        state.starts_with("playing at ") && state.contains("60×"),
        "{state}"
    );
    assert_eq!(
        text(&mut page, "document.getElementById('sim-toggle').className").await,
        "toggle playing"
    );
    page.eval("{ const s = document.getElementById('sim-speed'); s.value = '600'; s.dispatchEvent(new Event('change', {bubbles: true})); }")
        .await
        .unwrap();
    page.wait_for(
        "document.getElementById('sim-state').textContent.includes('600×')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    // A reload shows the server's clock as it is: playing, at 600×.
    page.goto(&format!("http://127.0.0.1:{}/", port_of(&served.url)))
        .await
        .unwrap();
    let after = page.eval(controls).await.unwrap();
    assert_eq!(after[0], "‖ Pause", "{after}");
    assert_eq!(after[1], "toggle playing", "{after}");
    assert_eq!(after[3], "600", "{after}");
    page.click("#sim-toggle").await.unwrap();
    page.wait_for(
        "document.getElementById('sim-state').textContent === 'paused' && document.getElementById('sim-toggle').textContent === '▶ Play'",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let problems = page.problems();
    assert!(problems.is_empty(), "the page reported: {problems:?}");
}

/// When the dashboard stops, the page says so (and keeps what it showed); when it was restarted,
/// the page says its session ended and what to open.
#[tokio::test(flavor = "multi_thread")]
async fn the_page_says_when_the_dashboard_stops_and_when_it_was_restarted() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let args = |port: &str| -> Vec<String> {
        [
            "examples/blog-kyverno-manual.yaml",
            "--fleet",
            "examples/fleets/blog-lab.yaml",
            "--dashboard",
            "--speed",
            "0",
            "--port",
            port,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let first = serve_simulation(&args("0").iter().map(String::as_str).collect::<Vec<_>>());
    let port = port_of(&first.url);
    let mut page = browser.page(1280, 800).await.unwrap();
    page.goto(&first.url).await.unwrap();
    page.wait_for(
        "document.getElementById('live').textContent === '● live' && document.getElementById('connection').hidden",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    drop(first);
    page.wait_for(
        "!document.getElementById('connection').hidden",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let said = text(
        &mut page,
        "document.getElementById('connection').textContent",
    )
    .await;
    assert!(
        said.starts_with("The dashboard does not answer (stopped?)"),
        "{said}"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('#rows tr').length")
            .await
            .unwrap(),
        1,
        "what it last sent stays"
    );
    let _second = serve_simulation(&args(&port).iter().map(String::as_str).collect::<Vec<_>>());
    page.wait_for(
        "document.getElementById('connection').textContent.startsWith('This page')",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let said = text(
        &mut page,
        "document.getElementById('connection').textContent",
    )
    .await;
    assert!(
        said.contains("session ended") && said.contains("Open the URL it printed"),
        "{said}"
    );
    assert_eq!(
        text(&mut page, "document.getElementById('live').textContent").await,
        "disconnected"
    );
}

/// A dashboard of a cluster (the fake API server), as `promoter dashboard` serves it: its world is
/// kept by watches. A promotion created through the API, not the dashboard, shows on the open
/// page as soon as its watch event arrives; then the open, idle page costs the API server no
/// request for a minute: its reads are answered from the watches' caches, and a quiet watch lasts
/// its `timeoutSeconds` (the watches' client reads that long without a byte). The latency is
/// reported, not asserted (a busy machine is slower; `benches/dashboard.rs` measures it).
#[tokio::test(flavor = "multi_thread")]
async fn a_change_made_through_the_api_shows_from_a_watch_and_an_idle_page_lists_nothing() {
    let Some(browser) = Browser::launch().await.unwrap() else {
        return;
    };
    let env = common::Env::lab().await;
    env.apply_example("blog-kyverno-manual.yaml");
    let mut options = Options::new("cluster");
    options.watches = Some(promoter::dashboard::Watches(
        env.server.watch_client().await.unwrap(),
    ));
    let d = promoter::dashboard::start(
        env.client.clone(),
        Arc::new(promoter::dashboard::hub::WallClock),
        None,
        options,
    )
    .await
    .unwrap();
    let mut page = browser.page(1360, 640).await.unwrap();
    page.goto(&d.login_url).await.unwrap();
    page.wait_for(
        "document.querySelectorAll('#rows tr').length === 1",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    // The watches are running once a read is answered without a list reaching the server.
    common::refresh_until_watched(&env, &d).await;
    let mut other = example("blog-kyverno-manual.yaml").remove(0);
    other.metadata.name = Some("made-elsewhere".into());
    other.metadata.resource_version = None;
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.create(&Default::default(), &other).await.unwrap();
    let answered = std::time::Instant::now();
    page.wait_for(
        "!!document.getElementById('row-made-elsewhere')",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    eprintln!(
        "a promotion created through the API showed on the page {} ms after the API answered",
        answered.elapsed().as_millis()
    );
    env.server.clear_requests();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let requests = env.server.requests();
    let listed: Vec<String> = requests
        .iter()
        .filter(|r| r.verb == "list")
        .map(|r| format!("{} {}", r.path, r.query))
        .collect();
    assert_eq!(listed, Vec::<String>::new(), "an idle page listed");
    let watched: Vec<String> = requests
        .iter()
        .filter(|r| r.verb == "watch")
        .map(|r| format!("{} {}", r.path, r.query))
        .collect();
    assert_eq!(
        watched,
        Vec::<String>::new(),
        "a quiet watch was made again"
    );
    eprintln!(
        "an idle page for 60 s: {} requests to the API server ({:?})",
        requests.len(),
        requests
            .iter()
            .map(|r| format!("{} {}", r.verb, r.path))
            .collect::<Vec<_>>()
    );
    assert!(page.problems().is_empty(), "{:?}", page.problems());
}
