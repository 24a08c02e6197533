//! `promoter dashboard` and `simulate --dashboard`: a local web view of every pipeline, with its
//! gates and actions, talking to the cluster with the user's own kubeconfig identity (as `kubectl
//! proxy` does) or to a simulated fleet.
//!
//! * [`hub`]: one loop per server reads the cluster as `status` does and keeps the models of what
//!   the open pages show; pages get what changed over server-sent events.
//! * [`model`]: the views' models, made of `status`' and `explain`'s (`ops`), never re-derived.
//! * [`views`]: the HTML, rendered on the server; [`assets`]: the small script and style sheet,
//!   embedded.
//! * [`actions`]: approve, pause, resume, abort, rollback, freeze create/delete, bypass: a preview
//!   by the command's own pure part, then the command's own function.
//! * [`security`]: loopback by default, Host and Origin checks, a session cookie from the printed
//!   URL, a token on every change, a strict CSP.
//! * [`sim`]: the simulation's clock, played from the page.

pub mod actions;
pub mod assets;
pub mod cache;
pub mod hub;
pub mod model;
pub mod security;
pub mod sim;
pub mod views;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono_tz::Tz;
use futures::Stream;
use hub::{Clock, Hub, HubOptions, Snapshot};
use security::Guard;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use views::Page;

/// How to serve.
#[derive(Clone, Debug)]
pub struct Options {
    /// Default 127.0.0.1: only this machine.
    pub address: IpAddr,
    /// 0: a free port.
    pub port: u16,
    pub read_only: bool,
    /// More names the page may be reached by (`--allow-host`), e.g. behind `kubectl port-forward`
    /// or an SSH tunnel's other name.
    pub allow_hosts: Vec<String>,
    /// Time between two reads of the cluster; none: only after a pass or an action (simulation).
    pub refresh: Option<Duration>,
    /// The client the watches are made with (`client::for_watches`: a quiet watch lasts its
    /// `timeoutSeconds`); none: the dashboard's client, whose read timeout ends a quiet watch
    /// sooner (it is made again).
    pub watches: Option<Watches>,
    pub tz: Tz,
    pub cronjob: Option<(String, String)>,
    /// What the header says the data is.
    pub source: String,
}

impl Options {
    pub fn new(source: &str) -> Options {
        Options {
            address: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            read_only: false,
            allow_hosts: Vec::new(),
            refresh: Some(Duration::from_secs(2)),
            watches: None,
            tz: chrono_tz::UTC,
            cronjob: None,
            source: source.to_string(),
        }
    }
}

/// A client for watch requests.
#[derive(Clone)]
pub struct Watches(pub kube::Client);

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watches")
    }
}

/// A running dashboard; it stops when dropped.
pub struct Dashboard {
    /// Opens a session: print it, open it.
    pub login_url: String,
    pub addr: SocketAddr,
    pub hub: Arc<Hub>,
    /// What the pages carry for mutating requests (tests send it as a page would).
    pub csrf: String,
    /// The session cookie (`name=value`), as a browser holds it after the login URL.
    pub cookie: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Dashboard {
    /// Serves until the process ends.
    pub async fn wait(mut self) {
        if let Some(server) = self.tasks.pop() {
            let _ = server.await;
        }
    }
}

#[derive(Clone)]
struct App {
    hub: Arc<Hub>,
    sim: Option<sim::SimHandle>,
    read_only: bool,
}

/// Starts serving `client`'s cluster, on `clock`'s time. A simulation passes the handle its page
/// controls and its own clock, and drives the refreshes itself.
pub async fn start(
    client: kube::Client,
    clock: Arc<dyn Clock>,
    simulation: Option<(crate::sim::Simulation<'static>, Arc<sim::SimClock>)>,
    options: Options,
) -> anyhow::Result<Dashboard> {
    let listener = tokio::net::TcpListener::bind((options.address, options.port))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot serve the dashboard on {}:{}: {e}",
                options.address,
                options.port
            )
        })?;
    let addr = listener.local_addr()?;
    let guard = Arc::new(Guard::new(addr, &options.allow_hosts)?);
    // A cluster's dashboard reads through watches (a simulation wakes its hub after each pass).
    let cache = simulation.is_none().then(|| {
        let watches = options
            .watches
            .as_ref()
            .map_or_else(|| client.clone(), |w| w.0.clone());
        cache::WatchCache::new(client.clone(), watches)
    });
    let client = match &cache {
        Some(cache) => cache.client(),
        None => client,
    };
    let page = Page {
        csrf: guard.csrf.clone(),
        read_only: options.read_only,
        simulated: simulation.is_some(),
        source: options.source.clone(),
    };
    let hub = Hub::new(
        client,
        cache.clone(),
        clock,
        HubOptions {
            tz: options.tz,
            cronjob: options.cronjob.clone(),
            refresh: if simulation.is_some() {
                None
            } else {
                options.refresh
            },
            linger: Duration::from_secs(30),
            page,
        },
    );
    let mut tasks = vec![tokio::spawn(hub.clone().run())];
    if let Some(cache) = cache {
        // A change seen by a watch is shown at once: the hub reads again, from the cache.
        let hub = hub.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                cache.changed().await;
                hub.wake();
            }
        }));
    }
    let sim = simulation.map(|(simulation, sim_clock)| {
        let (handle, task) = sim::drive(simulation, sim_clock, hub.clone());
        tasks.push(task);
        handle
    });
    let app = App {
        hub: hub.clone(),
        sim,
        read_only: options.read_only,
    };
    let router = Router::new()
        .route("/", get(overview_page))
        .route("/promotions/{name}", get(promotion_page))
        .route("/freezes", get(freezes_page))
        .route("/events", get(events))
        .route("/login", get(login))
        .route("/assets/{file}", get(asset))
        .route("/api/overview", get(overview_json))
        .route("/api/promotions/{name}", get(promotion_json))
        .route("/api/preview", post(preview))
        .route("/api/act", post(act))
        .route("/api/sim", post(sim_control))
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            security::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            login_state,
        ));
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the dashboard's server stopped");
        }
    });
    tasks.push(server);
    Ok(Dashboard {
        login_url: guard.login_url(),
        addr,
        hub,
        csrf: guard.csrf.clone(),
        cookie: format!("{}={}", guard.cookie, guard.session),
        tasks,
    })
}

/// Gives the login handler the guard (the other handlers never see the session's secrets).
async fn login_state(
    axum::extract::State(guard): axum::extract::State<Arc<Guard>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    request.extensions_mut().insert(guard);
    next.run(request).await
}

#[derive(Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

async fn login(
    axum::Extension(guard): axum::Extension<Arc<Guard>>,
    Query(q): Query<LoginQuery>,
) -> Response {
    match q.token {
        Some(t) if security::same_secret(&t, &guard.session) => (
            [(header::SET_COOKIE, guard.session_cookie())],
            Redirect::to("/"),
        )
            .into_response(),
        _ => (
            StatusCode::UNAUTHORIZED,
            "wrong or missing token: open the URL that `promoter dashboard` printed\n",
        )
            .into_response(),
    }
}

async fn asset(Path(file): Path<String>) -> Response {
    assets::serve(&file)
}

/// The page's clock (virtual, in a simulation), for its countdowns.
fn clock_json(hub: &Hub) -> String {
    hub.clock().view().json()
}

fn banner_of(s: &Snapshot) -> &str {
    s.banner.as_ref().map(|b| &*b.html).unwrap_or_default()
}

fn with_banner(banner: &str, page: String) -> String {
    // The banner is rendered once per refresh; the layout leaves its place empty.
    page.replacen(
        "<div id=\"banner\"></div>",
        &format!("<div id=\"banner\">{banner}</div>"),
        1,
    )
}

async fn overview_page(State(app): State<App>) -> Html<String> {
    let s = app.hub.ready(None).await;
    let page = views::layout(
        app.hub.page(),
        "Overview",
        "overview",
        &format!("/events?view=overview&since={}", s.seq),
        Some(&app.hub.clock().view()),
        views::overview(&s.rows_html(), s.rows.len()),
    );
    Html(with_banner(banner_of(&s), page))
}

async fn promotion_page(State(app): State<App>, Path(name): Path<String>) -> Response {
    let _viewing = app.hub.view(&name);
    let s = app.hub.ready(Some(&name)).await;
    let Some(d) = s.details.get(&name) else {
        let why = if s.rows.contains_key(&name) {
            format!("ClusterPromotion {name} could not be read in full; see the overview")
        } else {
            format!("No ClusterPromotion {name}.")
        };
        return (
            StatusCode::NOT_FOUND,
            Html(views::not_found(app.hub.page(), &why)),
        )
            .into_response();
    };
    let body = maud::html! { div #detail data-name=(name) { (maud::PreEscaped(&*d.html)) } };
    let page = views::layout(
        app.hub.page(),
        &name,
        "promotion",
        &format!(
            "/events?view=promotion&name={}&since={}",
            urlencode(&name),
            s.seq
        ),
        Some(&app.hub.clock().view()),
        body,
    );
    Html(with_banner(banner_of(&s), page)).into_response()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn freezes_page(State(app): State<App>) -> Html<String> {
    let s = app.hub.ready(None).await;
    let live = s.freezes.as_ref().map(|f| &*f.html).unwrap_or_default();
    let promotions: Vec<String> = s.rows.keys().cloned().collect();
    let page = views::layout(
        app.hub.page(),
        "Freezes",
        "freezes",
        &format!("/events?view=freezes&since={}", s.seq),
        Some(&app.hub.clock().view()),
        views::freezes_page(app.hub.page(), live, &promotions),
    );
    Html(with_banner(banner_of(&s), page))
}

async fn overview_json(State(app): State<App>) -> Response {
    let s = app.hub.ready(None).await;
    let rows: Vec<&model::Row> = s.rows.values().map(|r| &*r.value).collect();
    axum::Json(serde_json::json!({"seq": s.seq, "rows": rows})).into_response()
}

async fn promotion_json(State(app): State<App>, Path(name): Path<String>) -> Response {
    let _viewing = app.hub.view(&name);
    let s = app.hub.ready(Some(&name)).await;
    match s.details.get(&name) {
        Some(d) => axum::Json(&*d.value).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no ClusterPromotion {name}\n"),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
struct StreamQuery {
    view: String,
    name: Option<String>,
    #[serde(default)]
    since: u64,
}

/// What a page of `view` needs of snapshot `s`, given that it shows snapshot `sent`.
fn updates(s: &Snapshot, view: &StreamQuery, sent: u64) -> Vec<Event> {
    let mut out = Vec::new();
    if let Some(b) = &s.banner
        && b.version > sent
    {
        out.push(Event::default().event("banner").data(&*b.html));
    }
    match view.view.as_str() {
        "overview" => {
            if s.membership > sent {
                out.push(Event::default().event("rows").data(s.rows_html()));
            } else {
                for (name, r) in &s.rows {
                    if r.version > sent {
                        let data =
                            serde_json::json!({"id": format!("row-{name}"), "html": &*r.html});
                        out.push(Event::default().event("row").data(data.to_string()));
                    }
                }
            }
        }
        "promotion" => {
            let name = view.name.as_deref().unwrap_or_default();
            match s.details.get(name) {
                Some(d) if d.version > sent => {
                    out.push(Event::default().event("detail").data(&*d.html));
                }
                Some(_) => {}
                None if s.at.is_some() && !s.rows.contains_key(name) => {
                    out.push(Event::default().event("gone").data(name));
                }
                None => {}
            }
        }
        "freezes" => {
            if let Some(f) = s.freezes.as_ref().filter(|f| f.version > sent) {
                out.push(Event::default().event("freezes").data(&*f.html));
            }
        }
        _ => {}
    }
    out
}

async fn events(
    State(app): State<App>,
    Query(q): Query<StreamQuery>,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    use futures::StreamExt;
    let viewing = match (q.view.as_str(), &q.name) {
        ("promotion", Some(name)) => Some(app.hub.view(name)),
        _ => None,
    };
    struct Conn {
        hub: Arc<Hub>,
        rx: tokio::sync::watch::Receiver<Arc<Snapshot>>,
        q: StreamQuery,
        sent: u64,
        first: bool,
        _viewing: Option<hub::Viewing>,
    }
    let conn = Conn {
        rx: app.hub.subscribe(),
        hub: app.hub.clone(),
        sent: q.since,
        q,
        first: true,
        _viewing: viewing,
    };
    let stream = futures::stream::unfold(conn, |mut c| async move {
        loop {
            let mut batch = Vec::new();
            if c.first {
                batch.push(Event::default().event("clock").data(clock_json(&c.hub)));
            } else if c.rx.changed().await.is_err() {
                return None;
            }
            let s = c.rx.borrow_and_update().clone();
            if !c.first && s.clock > c.sent {
                // The page re-anchors its countdowns on the clock as it is now.
                batch.push(Event::default().event("clock").data(clock_json(&c.hub)));
            }
            batch.extend(updates(&s, &c.q, c.sent));
            c.first = false;
            c.sent = c.sent.max(s.seq);
            if !batch.is_empty() {
                return Some((futures::stream::iter(batch.into_iter().map(Ok)), c));
            }
        }
    })
    .flatten();
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// An error as the CLI prints it, with the API server's status code when there is one.
fn failed(e: &anyhow::Error) -> Response {
    let code = e
        .chain()
        .find_map(|c| match c.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => StatusCode::from_u16(s.code).ok(),
            _ => None,
        })
        .filter(|c| c.is_client_error() || c.is_server_error());
    let text = crate::cli_error::render(e);
    // The commands also say kubectl's NotFound line themselves (a freeze looked up among those
    // listed, with a "did you mean"): the same status as the API server's own.
    let code = code.unwrap_or(if text.starts_with("Error from server (NotFound)") {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    });
    (code, axum::Json(serde_json::json!({"error": text}))).into_response()
}

fn read_only_refusal() -> Response {
    (
        StatusCode::FORBIDDEN,
        axum::Json(serde_json::json!({"error": "this dashboard is read-only (--read-only)"})),
    )
        .into_response()
}

async fn actor_for(
    app: &App,
    request: &actions::Request,
) -> anyhow::Result<crate::ops::control::Actor> {
    let (by, reason) = actions::actor_inputs(request);
    crate::ops::identity::actor(app.hub.client(), by, reason).await
}

async fn preview(
    State(app): State<App>,
    axum::Json(request): axum::Json<actions::Request>,
) -> Response {
    if app.read_only {
        return read_only_refusal();
    }
    let now = app.hub.clock().now();
    let result = async {
        let actor = actor_for(&app, &request).await?;
        actions::preview(app.hub.client(), &request.action, &actor, now).await
    }
    .await;
    match result {
        Ok(p) => axum::Json(p).into_response(),
        Err(e) => failed(&e),
    }
}

async fn act(
    State(app): State<App>,
    axum::Json(request): axum::Json<actions::Request>,
) -> Response {
    if app.read_only {
        return read_only_refusal();
    }
    let now = app.hub.clock().now();
    let result = async {
        let actor = actor_for(&app, &request).await?;
        // What was confirmed must still be what the command would do.
        let current = actions::preview(app.hub.client(), &request.action, &actor, now).await?;
        if request.fingerprint.as_deref() != Some(current.fingerprint.as_str()) {
            return Ok(Err(current));
        }
        actions::perform(app.hub.client(), &request.action, &actor, now)
            .await
            .map(Ok)
    }
    .await;
    // The answer comes after the read that shows it: the page and every other open page see the
    // action as soon as it is confirmed.
    app.hub
        .refresh_after(request.action.promotion(), request.action.freezes())
        .await;
    match result {
        Ok(Ok(message)) => axum::Json(serde_json::json!({"message": message})).into_response(),
        Ok(Err(changed)) => (
            StatusCode::CONFLICT,
            axum::Json(serde_json::json!({
                "error": "it changed since you looked: confirm what it would do now",
                "preview": changed,
            })),
        )
            .into_response(),
        Err(e) => failed(&e),
    }
}

#[derive(Deserialize)]
struct SimRequest {
    op: String,
    #[serde(default)]
    rate: Option<f64>,
}

async fn sim_control(State(app): State<App>, axum::Json(r): axum::Json<SimRequest>) -> Response {
    let Some(handle) = &app.sim else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"error": "not a simulation"})),
        )
            .into_response();
    };
    let control = match (r.op.as_str(), r.rate) {
        ("play", _) => sim::Control::Play,
        ("pause", _) => sim::Control::Pause,
        ("speed", Some(rate)) if rate.is_finite() && rate > 0.0 => sim::Control::Speed(rate),
        ("step", _) => sim::Control::Step,
        ("skip", _) => sim::Control::Skip,
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"error": "op: play, pause, speed (with rate), step or skip"})),
            )
                .into_response();
        }
    };
    match handle.control(control).await {
        Ok(message) => axum::Json(serde_json::json!({"message": message})).into_response(),
        Err(e) => failed(&e),
    }
}
