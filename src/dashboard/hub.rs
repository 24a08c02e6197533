//! The one loop per server that reads the cluster and keeps what every open page shows: the
//! overview's rows, the freezes, and the pages of the promotions someone has open. A whole
//! refresh reads as `status` reads (one `observe`), computes the models, and publishes a new
//! snapshot only when a model changed, with the pieces that changed marked by version: a pass
//! that changes nothing costs the open pages nothing, however many there are.
//!
//! Reading through watches ([`super::cache`]), a change a watch sees is read again at once and
//! alone: a ClusterPromotion, a generated ClusterProfile (its promotion's label), a
//! ClusterSummary (its profile's promotion) or an Event about a promotion makes that promotion's
//! row (and open page) be read again ([`crate::ops::load::status_world_of`]) and computed again;
//! every other row keeps its version. A change to what every row reads (the clusters, the
//! freezes, …) is a whole refresh. Between changes, every `--refresh` the rows are computed again
//! at the new time, from the world the watches keep current (a soak ends, a window opens), without
//! reading it.

use super::cache::{Change, WatchCache};
use super::model::{self, Banner, Detail, EventLine, FreezesView, Row};
use super::views::{self, Page};
use crate::api::sveltos::{CLUSTER_PROFILE_NAME_LABEL, PROMOTION_NAME_LABEL};
use crate::api::{ClusterProfile, ClusterPromotion, ClusterSummary};
use crate::pass::observe::Observation;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use k8s_openapi::api::core::v1::Event;
use kube::Resource as _;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// What the page's clock runs on: the wall clock, or a simulation's virtual clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
    /// Virtual seconds per real second while it runs (1 for the wall clock), and whether it runs.
    fn rate(&self) -> (f64, bool);
    /// All the page needs to show this clock and run its own copy of it.
    fn view(&self) -> ClockView {
        let (rate, running) = self.rate();
        ClockView {
            now: self.now(),
            rate,
            running,
            hold: None,
            reached: None,
            ended: None,
        }
    }
}

/// A clock as the page gets it: where it is, how fast it runs, and where it stops. The page runs
/// its own copy from the moment it receives one, and never past `hold`: so it never shows a time
/// the server's clock has not reached.
#[derive(Clone, Debug, PartialEq)]
pub struct ClockView {
    pub now: DateTime<Utc>,
    /// Virtual seconds per real second asked for (1 for the wall clock).
    pub rate: f64,
    pub running: bool,
    /// The clock waits there (a simulated pass is due then and has not run yet).
    pub hold: Option<DateTime<Utc>>,
    /// The rate the clock reaches, measured over its last passes (a simulation whose passes take
    /// longer than the time between two of them at the rate asked runs slower).
    pub reached: Option<f64>,
    /// The simulation ended (its `--until`), at this time.
    pub ended: Option<DateTime<Utc>>,
}

impl ClockView {
    /// Whether the clock runs noticeably slower than asked.
    pub fn behind(&self) -> Option<f64> {
        self.reached
            .filter(|r| self.running && *r < self.rate * 0.9)
    }

    /// The clock's state in words, for the page's header: `paused`, `playing at 600×`, …
    pub fn state_text(&self) -> String {
        if let Some(t) = self.ended {
            return format!(
                "ended: the simulation ran until {} (--until)",
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        if !self.running {
            return "paused".into();
        }
        match self.behind() {
            Some(r) => format!(
                "playing at {} of the {} asked: each pass takes longer than the time between two at that speed",
                rate_text(r),
                rate_text(self.rate)
            ),
            None => format!("playing at {}", rate_text(self.rate)),
        }
    }

    /// What the page receives: times in milliseconds since the epoch.
    pub fn json(&self) -> String {
        let ms = |t: DateTime<Utc>| t.timestamp_millis();
        serde_json::json!({
            "now": ms(self.now),
            "rate": self.rate,
            "running": self.running,
            "hold": self.hold.map(ms),
            "ended": self.ended.is_some(),
            "state": self.state_text(),
        })
        .to_string()
    }
}

/// `600×`, `1.5×`, `330×` (a measured rate, to its whole number above 10).
pub fn rate_text(rate: f64) -> String {
    if rate >= 10.0 || rate.fract() == 0.0 {
        format!("{}×", rate.round())
    } else {
        format!("{:.1}×", rate)
    }
}

/// The wall clock.
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn rate(&self) -> (f64, bool) {
        (1.0, true)
    }
}

/// A piece of the snapshot with the snapshot sequence number it last changed in.
#[derive(Debug)]
pub struct Versioned<T> {
    pub version: u64,
    pub value: Arc<T>,
    /// The piece rendered once for every page (`views`).
    pub html: Arc<str>,
    /// The model as JSON: what "changed" is decided on (no time of reading in it).
    key: Arc<str>,
}

impl<T> Clone for Versioned<T> {
    fn clone(&self) -> Self {
        Versioned {
            version: self.version,
            value: self.value.clone(),
            html: self.html.clone(),
            key: self.key.clone(),
        }
    }
}

/// Everything the open pages show, as of one refresh.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub seq: u64,
    /// When it was read (the dashboard's clock).
    pub at: Option<DateTime<Utc>>,
    /// By name.
    pub rows: BTreeMap<String, Versioned<Row>>,
    /// The snapshot in which a promotion appeared or disappeared last.
    pub membership: u64,
    pub freezes: Option<Versioned<FreezesView>>,
    pub details: BTreeMap<String, Versioned<Detail>>,
    /// The banner: why the last read failed (the rows are the last ones read), and when a pass
    /// last ran.
    pub banner: Option<Versioned<Banner>>,
    /// The snapshot in which the clock's rate or its reference time changed last.
    pub clock: u64,
}

impl Snapshot {
    /// The overview's rows, as rendered.
    pub fn rows_html(&self) -> String {
        self.rows.values().map(|r| &*r.html).collect()
    }
}

/// How the hub reads and renders.
#[derive(Clone, Debug)]
pub struct HubOptions {
    pub tz: Tz,
    /// The CronJob that runs the passes (`status --cronjob`); none: not read.
    pub cronjob: Option<(String, String)>,
    /// Time between two reads of the cluster; none: only when woken (a simulation wakes it after
    /// each pass, and every action does).
    pub refresh: Option<Duration>,
    /// How long a promotion's page is kept up to date after its last viewer left (a reload
    /// reconnects).
    pub linger: Duration,
    pub page: Page,
}

pub struct Hub {
    client: kube::Client,
    /// The watches `client` reads through, if it does: what they saw change.
    cache: Option<Arc<WatchCache>>,
    clock: Arc<dyn Clock>,
    options: HubOptions,
    tx: watch::Sender<Arc<Snapshot>>,
    /// Promotion pages open: viewers, and when the last one left.
    viewers: Mutex<BTreeMap<String, (usize, Instant)>>,
    wake: Notify,
    /// Serialises refreshes (the loop and requests that need a fresh piece now).
    refreshing: tokio::sync::Mutex<()>,
    /// What the last read saw, for the refresh after an action.
    last: tokio::sync::Mutex<Read>,
    /// A simulation's last pass (there is no CronJob to ask).
    simulated: Mutex<Option<crate::ops::inspect::LastPass>>,
}

/// The last read: the world, and when a pass last ran.
#[derive(Default)]
struct Read(
    Option<Observation>,
    Option<crate::ops::inspect::LastPass>,
    Stale,
);

/// Whether the world kept is not the cluster's as the watches see it (the last read failed):
/// the next refresh reads it whole.
#[derive(Default)]
struct Stale(bool);

/// Keeps a promotion's page up to date while held.
pub struct Viewing {
    hub: Arc<Hub>,
    name: String,
}

impl Drop for Viewing {
    fn drop(&mut self) {
        let mut viewers = self.hub.viewers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = viewers.get_mut(&self.name) {
            v.0 = v.0.saturating_sub(1);
            v.1 = Instant::now();
        }
    }
}

fn key_of<T: serde::Serialize>(value: &T) -> Arc<str> {
    serde_json::to_string(value).unwrap_or_default().into()
}

/// `value` as a piece of snapshot `seq`, keeping the previous version (and its rendering) when the
/// model is the same.
fn versioned<T: serde::Serialize>(
    previous: Option<&Versioned<T>>,
    value: T,
    seq: u64,
    render: impl FnOnce(&T) -> String,
) -> (Versioned<T>, bool) {
    let key = key_of(&value);
    if let Some(p) = previous.filter(|p| p.key == key) {
        return (p.clone(), false);
    }
    let html = render(&value).into();
    (
        Versioned {
            version: seq,
            value: Arc::new(value),
            html,
            key,
        },
        true,
    )
}

impl Hub {
    /// `cache`: the watches `client` reads through (none: every refresh reads the whole world).
    pub fn new(
        client: kube::Client,
        cache: Option<Arc<WatchCache>>,
        clock: Arc<dyn Clock>,
        options: HubOptions,
    ) -> Arc<Hub> {
        let (tx, _) = watch::channel(Arc::new(Snapshot::default()));
        Arc::new(Hub {
            client,
            cache,
            clock,
            options,
            tx,
            viewers: Mutex::new(BTreeMap::new()),
            wake: Notify::new(),
            refreshing: tokio::sync::Mutex::new(()),
            last: tokio::sync::Mutex::new(Read::default()),
            simulated: Mutex::new(None),
        })
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The watches the hub reads through, if it does.
    pub fn cache(&self) -> Option<&Arc<WatchCache>> {
        self.cache.as_ref()
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn page(&self) -> &Page {
        &self.options.page
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.tx.subscribe()
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.tx.borrow().clone()
    }

    /// Asks the loop to read the cluster now (an action was taken, a pass ran).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// A simulated pass ran at `at` (one runs every `tick`): what a promotion's page says of the
    /// last pass.
    pub fn simulated_pass(&self, at: DateTime<Utc>, tick: chrono::Duration) {
        let every =
            crate::ops::inspect::age(Some(DateTime::UNIX_EPOCH), DateTime::UNIX_EPOCH + tick);
        *self.simulated.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(crate::ops::inspect::LastPass {
                source: format!("the simulation, a pass every {every}"),
                last_successful_time: Some(at),
                last_schedule_time: Some(at),
                suspended: false,
            });
    }

    /// The clock changed (play, pause, speed, a jump, a pass): the pages re-anchor their clocks.
    pub fn clock_changed(&self) {
        self.tx.send_modify(|s| {
            let mut next = (**s).clone();
            next.seq += 1;
            next.clock = next.seq;
            *s = Arc::new(next);
        });
    }

    /// Keeps `name`'s page up to date until the returned guard is dropped.
    pub fn view(self: &Arc<Self>, name: &str) -> Viewing {
        let fresh = {
            let mut viewers = self.viewers.lock().unwrap_or_else(|p| p.into_inner());
            let v = viewers
                .entry(name.to_string())
                .or_insert((0, Instant::now()));
            v.0 += 1;
            !self.snapshot().details.contains_key(name)
        };
        if fresh {
            self.wake();
        }
        Viewing {
            hub: self.clone(),
            name: name.to_string(),
        }
    }

    /// The current snapshot, refreshed first when it lacks what a page needs (the first read, a
    /// promotion's page nobody had open).
    pub async fn ready(self: &Arc<Self>, detail: Option<&str>) -> Arc<Snapshot> {
        let s = self.snapshot();
        if s.at.is_none() {
            self.refresh().await;
        } else if detail.is_some_and(|d| !s.details.contains_key(d)) {
            // A page being opened is among the wanted ones: read that promotion.
            self.refresh_changes().await;
        } else {
            return s;
        }
        self.snapshot()
    }

    /// Reads and publishes until the process ends. A read of a large fleet takes time (it is
    /// the pass's read): the next one starts no sooner than that time again after it, so the
    /// dashboard never reads more than half of the time. Reading through watches, a wake reads
    /// only what changed, at once; the rows are computed again every `--refresh`.
    pub async fn run(self: Arc<Self>) {
        let started = Instant::now();
        self.refresh().await;
        let mut due = Instant::now() + started.elapsed();
        loop {
            let woken = match self.options.refresh {
                Some(every) => {
                    let due = (due + every).max(Instant::now());
                    tokio::time::timeout_at(due.into(), self.wake.notified())
                        .await
                        .is_ok()
                }
                None => {
                    self.wake.notified().await;
                    true
                }
            };
            let started = Instant::now();
            match (&self.cache, woken) {
                (Some(_), true) => {
                    self.refresh_changes().await;
                    continue;
                }
                (Some(_), false) => self.recompute().await,
                (None, _) => self.refresh().await,
            }
            due = Instant::now() + started.elapsed();
        }
    }

    fn wanted(&self) -> Vec<String> {
        let mut viewers = self.viewers.lock().unwrap_or_else(|p| p.into_inner());
        let linger = self.options.linger;
        viewers.retain(|_, (n, left)| *n > 0 || left.elapsed() < linger);
        viewers.keys().cloned().collect()
    }

    /// One read of the cluster (as `status` reads it); publishes a snapshot when something shown
    /// changed.
    pub async fn refresh(&self) {
        let _one = self.refreshing.lock().await;
        // What the watches saw so far is in this read.
        if let Some(cache) = &self.cache {
            cache.take_changes();
        }
        let mut last = self.last.lock().await;
        self.read_whole(&mut last).await;
    }

    /// When a pass last ran (`--cronjob`), read again.
    async fn read_last_pass(&self, last: &mut Read) {
        last.1 = match &self.options.cronjob {
            Some((ns, name)) => crate::ops::inspect::last_pass(&self.client, ns, name).await,
            None => None,
        };
    }

    async fn read_whole(&self, last: &mut Read) {
        self.read_last_pass(last).await;
        let now = self.clock.now();
        match crate::ops::load::status_world(&self.client, None, now, self.options.tz).await {
            Err(e) => {
                // The rows stay as last read; the banner says why they are not fresh.
                let error = crate::cli_error::render(&e);
                let Read(observation, last_pass, stale) = last;
                stale.0 = true;
                self.publish(observation.as_mut(), last_pass.clone(), Some(error), None)
                    .await;
            }
            Ok(mut observation) => {
                if observation.promotions.is_empty() {
                    // Nothing to decide, so `observe` read no freeze: the freezes page still
                    // shows them.
                    match crate::pass::observe::freezes(&self.client).await {
                        Ok(Some(f)) => observation.world.freezes = f,
                        Ok(None) => observation.world.own_crds_missing = true,
                        Err(e) => {
                            tracing::warn!(error = %crate::cli_error::line(e.as_ref()), "listing PromotionFreezes")
                        }
                    }
                }
                last.0 = Some(observation);
                let Read(observation, last_pass, stale) = last;
                stale.0 = false;
                self.publish(observation.as_mut(), last_pass.clone(), None, None)
                    .await;
            }
        }
    }

    /// Reads again what the watches saw change since the last read, and the pages being opened,
    /// and publishes: only those promotions' rows are computed again. A change to what every
    /// row reads (or a collection listed again, or a last read that failed) is a whole read.
    pub async fn refresh_changes(&self) {
        let _one = self.refreshing.lock().await;
        let Some(cache) = &self.cache else {
            let mut last = self.last.lock().await;
            return self.read_whole(&mut last).await;
        };
        let changes = cache.take_changes();
        let mut last = self.last.lock().await;
        let Read(Some(observation), last_pass, Stale(false)) = &mut *last else {
            return self.read_whole(&mut last).await;
        };
        let Some(mut names) = affected(&changes, observation) else {
            return self.read_whole(&mut last).await;
        };
        let shown = self.snapshot();
        names.extend(
            self.wanted()
                .into_iter()
                .filter(|n| !shown.details.contains_key(n)),
        );
        if names.is_empty() {
            return;
        }
        let now = self.clock.now();
        let read = crate::ops::load::status_world_of(
            &self.client,
            observation,
            &names,
            now,
            self.options.tz,
        )
        .await;
        let last_pass = last_pass.clone();
        let error = read.err().map(|e| {
            // Partly read: read whole on the next refresh.
            last.2 = Stale(true);
            crate::cli_error::render(&e)
        });
        let Read(observation, ..) = &mut *last;
        self.publish(observation.as_mut(), last_pass, error, Some(&names))
            .await;
    }

    /// Computes every row again at the clock's time, from the world the watches keep current
    /// (read whole if it is not).
    async fn recompute(&self) {
        let _one = self.refreshing.lock().await;
        let mut last = self.last.lock().await;
        if !matches!(&*last, Read(Some(_), _, Stale(false))) {
            return self.read_whole(&mut last).await;
        }
        self.read_last_pass(&mut last).await;
        let Read(observation, last_pass, _) = &mut *last;
        self.publish(observation.as_mut(), last_pass.clone(), None, None)
            .await;
    }

    /// After an action: re-reads only what it changed (the promotion; the freezes) and publishes,
    /// with the rest of the world as last read, so the person sees the result at once even when a
    /// whole read of the fleet takes seconds.
    pub async fn refresh_after(&self, promotion: Option<&str>, freezes: bool) {
        let _one = self.refreshing.lock().await;
        let mut last = self.last.lock().await;
        let Read(Some(observation), last_pass, _) = &mut *last else {
            return self.read_whole(&mut last).await;
        };
        if let Some(name) = promotion {
            let api: kube::Api<ClusterPromotion> = kube::Api::all(self.client.clone());
            match api.get_opt(name).await {
                Ok(Some(p)) => {
                    let promotions = &mut observation.promotions;
                    match promotions
                        .iter()
                        .position(|q| q.metadata.name == p.metadata.name)
                    {
                        Some(i) => promotions[i] = p.clone(),
                        None => promotions.push(p.clone()),
                    }
                    // A rollback just asked for: its prediction needs the revision it restores.
                    crate::ops::load::revisions_asked_for(
                        &self.client,
                        std::slice::from_ref(&p),
                        &mut observation.world,
                        self.clock.now(),
                        self.options.tz,
                    )
                    .await;
                }
                Ok(None) => observation
                    .promotions
                    .retain(|q| q.metadata.name.as_deref() != Some(name)),
                Err(e) => {
                    tracing::warn!(promotion = %name, error = %crate::cli_error::line(&e), "re-reading after an action");
                }
            }
        }
        if freezes {
            match crate::pass::observe::freezes(&self.client).await {
                Ok(Some(f)) => observation.world.freezes = f,
                Ok(None) => observation.world.own_crds_missing = true,
                Err(e) => {
                    tracing::warn!(error = %crate::cli_error::line(e.as_ref()), "listing PromotionFreezes")
                }
            }
        }
        let last_pass = last_pass.clone();
        let only: BTreeSet<String> = promotion.map(str::to_string).into_iter().collect();
        self.publish(
            Some(observation),
            last_pass,
            None,
            (!freezes).then_some(&only),
        )
        .await;
    }

    /// Computes every model from `observation` (none: the last read failed and nothing was read
    /// before), renders what changed, and publishes a snapshot if anything did. `only`: the
    /// promotions read again; every other row and page is kept as it was.
    async fn publish(
        &self,
        observation: Option<&mut Observation>,
        last_pass: Option<crate::ops::inspect::LastPass>,
        error: Option<String>,
        only: Option<&BTreeSet<String>>,
    ) {
        let kept = |name: &str| only.is_some_and(|o| !o.contains(name));
        let previous = self.snapshot();
        let seq = previous.seq + 1;
        let now = self.clock.now();
        let page = &self.options.page;
        let mut next = (*previous).clone();
        next.seq = seq;
        next.at = Some(now);
        let mut changed = previous.at.is_none();
        let wanted = self.wanted();
        if let Some(observation) = observation {
            let mut rows = BTreeMap::new();
            for p in &observation.promotions {
                let Some(name) = p.metadata.name.clone() else {
                    continue;
                };
                if kept(&name)
                    && let Some(row) = previous.rows.get(&name)
                {
                    rows.insert(name, row.clone());
                    continue;
                }
                let mut status =
                    crate::ops::inspect::status_row(p, &observation.world, now, self.options.tz);
                status.last_pass = last_pass.clone();
                let row = Row::Promotion(Box::new(model::overview_row(p, status, now)));
                let (v, c) = versioned(previous.rows.get(&name), row, seq, |r| {
                    views::row(page, r, now)
                });
                changed |= c;
                rows.insert(name, v);
            }
            for bad in &observation.undecodable {
                if kept(&bad.name)
                    && let Some(row) = previous.rows.get(&bad.name)
                {
                    rows.insert(bad.name.clone(), row.clone());
                    continue;
                }
                let row = Row::Unreadable {
                    name: bad.name.clone(),
                    error: bad.error.clone(),
                };
                let (v, c) = versioned(previous.rows.get(&bad.name), row, seq, |r| {
                    views::row(page, r, now)
                });
                changed |= c;
                rows.insert(bad.name.clone(), v);
            }
            if rows.keys().ne(previous.rows.keys()) {
                next.membership = seq;
                changed = true;
            }
            next.rows = rows;
            let freezes = model::freezes_view(&observation.promotions, &observation.world, now);
            let (v, c) = versioned(previous.freezes.as_ref(), freezes, seq, |f| {
                views::freezes(page, f, now)
            });
            changed |= c;
            next.freezes = Some(v);
            // A simulation's last pass is on the promotions' pages only: in the rows and the
            // banner it would make every row change with every pass.
            let simulated = self
                .simulated
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let page_last_pass = last_pass.clone().or(simulated);
            let mut details = BTreeMap::new();
            for name in &wanted {
                if kept(name)
                    && let Some(detail) = previous.details.get(name)
                {
                    details.insert(name.clone(), detail.clone());
                    continue;
                }
                let Some(p) = observation
                    .promotions
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
                else {
                    continue;
                };
                // explain's world replaces the summaries with this promotion's: put them back.
                let saved = std::mem::take(&mut observation.world.summaries);
                let loaded = crate::ops::load::explain_world(
                    &self.client,
                    p,
                    &mut observation.world,
                    now,
                    self.options.tz,
                )
                .await;
                let detail = match loaded {
                    Ok(()) => {
                        let explanation = crate::ops::explain::explain(
                            p,
                            &observation.world,
                            now,
                            self.options.tz,
                            page_last_pass.as_ref(),
                        );
                        let events = events_of(&self.client, name).await;
                        Some(model::detail(p, explanation, events, now))
                    }
                    Err(e) => {
                        tracing::warn!(promotion = %name, error = %crate::cli_error::line(e.as_ref()), "reading a promotion's page");
                        None
                    }
                };
                observation.world.summaries = saved;
                if let Some(detail) = detail {
                    let (v, c) = versioned(previous.details.get(name), detail, seq, |d| {
                        views::detail(page, d, now)
                    });
                    changed |= c;
                    details.insert(name.clone(), v);
                }
            }
            changed |= details.keys().ne(previous.details.keys());
            next.details = details;
        }
        let banner = Banner { error, last_pass };
        let (v, c) = versioned(previous.banner.as_ref(), banner, seq, |b| {
            views::banner(page, b, now)
        });
        changed |= c;
        next.banner = Some(v);
        if changed {
            let _ = self.tx.send_replace(Arc::new(next));
        }
    }
}

/// The promotions a watch's changes touch; none when one touches what every row reads (or a
/// collection was listed again): then the whole world is read again.
fn affected(changes: &[Change], observation: &Observation) -> Option<BTreeSet<String>> {
    let promotions = ClusterPromotion::url_path(&(), None);
    let profiles = ClusterProfile::url_path(&(), None);
    let summaries = ClusterSummary::url_path(&(), None);
    let events = Event::url_path(&(), Some("default"));
    let promotion_of = |profile: &str| {
        observation
            .world
            .profiles
            .get(profile)?
            .metadata
            .labels
            .as_ref()?
            .get(PROMOTION_NAME_LABEL)
            .cloned()
    };
    let mut names = BTreeSet::new();
    for change in changes {
        let Change::Object {
            collection,
            name,
            labels,
            involved,
        } = change
        else {
            return None;
        };
        if *collection == promotions {
            names.insert(name.clone());
        } else if *collection == profiles {
            // Its promotion now, and the one it had (a label taken off).
            names.extend(labels.get(PROMOTION_NAME_LABEL).cloned());
            names.extend(promotion_of(name));
        } else if *collection == summaries {
            // A summary of a profile no promotion generated is read by none.
            names.extend(
                labels
                    .get(CLUSTER_PROFILE_NAME_LABEL)
                    .and_then(|p| promotion_of(p)),
            );
        } else if *collection == events {
            if let Some((kind, name)) = involved
                && kind == "ClusterPromotion"
            {
                names.insert(name.clone());
            }
        } else {
            return None;
        }
    }
    Some(names)
}

/// The promotion's Events (core/v1 in `default`, where a cluster-scoped object's go), oldest first.
async fn events_of(client: &kube::Client, name: &str) -> Result<Vec<EventLine>, String> {
    let api: kube::Api<Event> = kube::Api::namespaced(client.clone(), "default");
    let params = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    let listed = api
        .list(&params)
        .await
        .map_err(|e| crate::cli_error::render(&anyhow::Error::new(e)))?;
    let mut lines: Vec<EventLine> = listed
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("ClusterPromotion"))
        .map(|e| {
            let at = e
                .event_time
                .as_ref()
                .map(|t| t.0.as_second())
                .or_else(|| e.last_timestamp.as_ref().map(|t| t.0.as_second()))
                .or_else(|| e.first_timestamp.as_ref().map(|t| t.0.as_second()))
                .and_then(|s| DateTime::<Utc>::from_timestamp(s, 0));
            EventLine {
                at,
                kind: e.type_.unwrap_or_else(|| "Normal".into()),
                reason: e.reason.unwrap_or_default(),
                note: e.message.unwrap_or_default(),
                count: e
                    .series
                    .as_ref()
                    .and_then(|s| s.count)
                    .or(e.count)
                    .unwrap_or(1),
            }
        })
        .collect();
    lines.sort_by_key(|l| l.at);
    Ok(lines)
}
