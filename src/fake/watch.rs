//! Watch, as kube-apiserver serves it from its watch cache (kubernetes/kubernetes,
//! `staging/src/k8s.io/apiserver/pkg/storage/cacher/`): a stream of `ADDED`, `MODIFIED`,
//! `DELETED`, `BOOKMARK` and `ERROR` events, one JSON object a line.
//!
//! * `resourceVersion` unset or `"0"`: the objects there are now, as `ADDED` events, then every
//!   change after. A numeric one: every change after it, none of the objects before; one older
//!   than the history kept (compaction, or the cache's window) is answered as the cacher answers
//!   it, with a 200 whose only event is an `ERROR` carrying a `410 Expired` Status,
//!   `too old resource version: N (M)` (`watch_cache.go`, `getAllEventsSinceLocked`; the cacher
//!   returns it through `newErrWatcher`), after which a client lists again.
//! * `sendInitialEvents=true` (a streaming list; it requires `resourceVersionMatch=NotOlderThan`
//!   and `allowWatchBookmarks=true`, `apimachinery/pkg/apis/meta/internalversion/validation`): the
//!   objects as `ADDED`, then a `BOOKMARK` annotated `k8s.io/initial-events-end: "true"`.
//! * `allowWatchBookmarks=true`: a `BOOKMARK` (an object of the kind with only its
//!   `resourceVersion`) every minute (`cacher.go`, `defaultBookmarkFrequency`), at the revision the
//!   watch has seen every change up to, so that a client resumes from there without missing one
//!   and without the history it skipped being needed.
//! * Selectors are applied to each change as the cacher applies them: an object that stops
//!   matching is `DELETED` for this watch, one that starts matching is `ADDED`.
//! * `timeoutSeconds` ends the stream (cleanly); without it, the server picks one between 30 and
//!   60 minutes (`--min-request-timeout`), here 30.
//!
//! History is kept as the cache keeps it: the changes of the last 75 s (`eventFreshDuration`),
//! at least 100 and at most 102,400 of them (`defaultLowerBoundCapacity`,
//! `defaultUpperBoundCapacity`), and none from before a compaction ([`super::Store::compact`]).
//!
//! Known differences: a `resourceVersion` newer than the store's is watched from now on (the real
//! server waits up to 3 s, then answers 504 `ResourceVersionTooLarge`); a watch is never ended
//! for being slow to read; injected faults ([`super::FaultRule`]) do not apply to watches.

use super::api_error::ApiError;
use super::control::RequestRecord;
use super::events::{from_storage, storage};
use super::http::{FakeBody, Target, forbidden, list_options, respond, status_body};
use super::store::{ListOptions, Store};
use super::{FakeApiServer, ResourceType, Shared};
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use http::Response;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// group, plural, namespace, name: where the store keeps an object.
type Key = (String, String, String, String);

/// `eventFreshDuration` and the cache's capacity bounds (`cacher/watch_cache.go`).
const FRESH: Duration = Duration::from_secs(75);
const LOWER_CAPACITY: usize = 100;
const UPPER_CAPACITY: usize = 100 * 1024;
/// `defaultBookmarkFrequency` (`cacher/cacher.go`).
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Without `timeoutSeconds`: the lower end of the real server's random 30–60 minutes.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// One stored change of one object.
pub(crate) struct Change {
    revision: u64,
    key: Key,
    /// The object before the change (none for a creation).
    previous: Option<Arc<Value>>,
    /// The object after it; for a deletion, the object as it was, at the deletion's revision.
    object: Arc<Value>,
    deleted: bool,
    at: Instant,
}

/// The store's recent changes, which watches are served from.
pub struct Journal {
    history: Mutex<History>,
    /// The revision of the latest change (watches wait on it).
    latest: tokio::sync::watch::Sender<u64>,
    bookmark_every: Mutex<Duration>,
    /// Moved on to end every watch open ([`FakeApiServer::end_watches`]).
    ends: tokio::sync::watch::Sender<u64>,
}

struct History {
    changes: VecDeque<Arc<Change>>,
    /// Every change after this revision is kept (older ones left the window).
    trimmed: u64,
    /// A new watch cannot start before this revision ([`super::Store::compact`]); watches already
    /// running go on, as they do on a real server.
    compacted: u64,
}

impl Journal {
    pub(crate) fn new(revision: u64) -> Self {
        Journal {
            history: Mutex::new(History {
                changes: VecDeque::new(),
                trimmed: revision,
                compacted: 0,
            }),
            latest: tokio::sync::watch::Sender::new(revision),
            bookmark_every: Mutex::new(BOOKMARK_EVERY),
            ends: tokio::sync::watch::Sender::new(0),
        }
    }

    fn history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn record(
        &self,
        revision: u64,
        key: Key,
        previous: Option<Arc<Value>>,
        object: Arc<Value>,
        deleted: bool,
    ) {
        let now = Instant::now();
        let mut history = self.history();
        // A second write of the same object at the same revision (a seeded object given its uid)
        // is the same change: the history keeps the object once.
        let previous = match history.changes.back() {
            Some(last) if last.revision == revision && last.key == key => {
                let first = last.previous.clone();
                history.changes.pop_back();
                first
            }
            _ => previous,
        };
        history.changes.push_back(Arc::new(Change {
            revision,
            key,
            previous,
            object,
            deleted,
            at: now,
        }));
        while history.changes.len() > UPPER_CAPACITY
            || (history.changes.len() > LOWER_CAPACITY
                && history
                    .changes
                    .front()
                    .is_some_and(|c| now.duration_since(c.at) > FRESH))
        {
            if let Some(dropped) = history.changes.pop_front() {
                history.trimmed = history.trimmed.max(dropped.revision);
            }
        }
        drop(history);
        self.latest.send_replace(revision);
    }

    /// History before `revision` is gone: a watch from an older one is expired.
    pub(crate) fn compact(&self, revision: u64) {
        let mut history = self.history();
        history.compacted = history.compacted.max(revision);
    }

    /// The changes after `revision`, or the oldest revision a watch can start or go on from: a
    /// new watch (`starting`) not from before the last compaction, a running one not from before
    /// the window.
    fn since(&self, revision: u64, starting: bool) -> Result<Vec<Arc<Change>>, u64> {
        let history = self.history();
        let floor = if starting {
            history.trimmed.max(history.compacted)
        } else {
            history.trimmed
        };
        if revision < floor {
            return Err(floor);
        }
        let first = history.changes.partition_point(|c| c.revision <= revision);
        Ok(history.changes.range(first..).cloned().collect())
    }
}

impl FakeApiServer {
    /// Ends every watch open, cleanly, as the API server does at their `timeoutSeconds` or when
    /// it restarts: their clients watch again from the last version they saw.
    pub fn end_watches(&self) {
        self.store().journal().ends.send_modify(|n| *n += 1);
    }

    /// How often a watch that allows bookmarks gets one (a minute, as the real server; tests
    /// shorten it).
    pub fn set_bookmark_interval(&self, every: Duration) {
        *self
            .store()
            .journal()
            .bookmark_every
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = every;
    }
}

/// What a watch asked for, beyond the list options.
struct Request {
    resource_version: Option<u64>,
    initial_events: bool,
    bookmarks: bool,
    timeout: Duration,
}

fn invalid(message: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {message}"),
    )
}

fn parse(query: &BTreeMap<String, String>) -> Result<Request, ApiError> {
    let flag = |k: &str| query.get(k).is_some_and(|v| v == "true" || v == "1");
    let initial_events = flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let matching = query.get("resourceVersionMatch").filter(|m| !m.is_empty());
    if initial_events {
        if matching.map(String::as_str) != Some("NotOlderThan") {
            return Err(invalid(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !bookmarks {
            return Err(invalid(
                "allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
            ));
        }
    } else if matching.is_some() {
        return Err(invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let resource_version = match query.get("resourceVersion").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")))?,
        ),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    Ok(Request {
        resource_version,
        initial_events,
        bookmarks,
        timeout,
    })
}

/// Answers a watch request: a `Status` if it is refused, else the stream of its events.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    t: &Target,
    query: &BTreeMap<String, String>,
    mut record: RequestRecord,
) -> Response<FakeBody> {
    let (code, opening) = match open(shared, t, query, &record) {
        Ok(opened) => (200, Ok(opened)),
        Err(e) => {
            let (code, body) = status_body(&e);
            (code, Err(body))
        }
    };
    record.code = code;
    record.served = record.at.elapsed();
    shared
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(record);
    match opening {
        Err(body) => respond(code, serde_json::to_vec(&body).unwrap_or_default(), true)
            .map(http_body_util::Either::Left),
        Ok(watch) => {
            let (tx, rx) = futures::channel::mpsc::channel(64);
            tokio::spawn(watch.run(tx));
            let (parts, _) = respond(200, Vec::new(), true).into_parts();
            Response::from_parts(
                parts,
                http_body_util::Either::Right(http_body_util::StreamBody::new(rx.boxed())),
            )
        }
    }
}

/// A watch accepted: what it sends first, and where it goes on from.
struct Watch {
    rt: ResourceType,
    namespace: Option<String>,
    options: ListOptions,
    journal: Arc<Journal>,
    latest: tokio::sync::watch::Receiver<u64>,
    ends: tokio::sync::watch::Receiver<u64>,
    /// Events sent before any change: the objects there are (`ADDED`), or a 410 (`ERROR`).
    first: Vec<Value>,
    /// Every change up to this revision has been sent (or did not concern this watch).
    position: u64,
    request: Request,
    expired: bool,
}

fn open(
    shared: &Shared,
    t: &Target,
    query: &BTreeMap<String, String>,
    record: &RequestRecord,
) -> Result<Watch, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let mut store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    let rt = store
        .resource(&t.group, &t.version, &t.plural)
        .cloned()
        .ok_or_else(not_found)?;
    let authorizer = shared
        .authorizer
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let attributes = record.attributes();
    authorizer
        .authorize(&attributes)
        .map_err(|reason| forbidden(&rt, &attributes, &reason))?;
    if t.subresource.is_some() || (t.namespace.is_some() && !rt.namespaced) {
        return Err(not_found());
    }
    let options = ListOptions {
        limit: None,
        continue_token: None,
        ..list_options(query)?
    };
    // Selectors are checked now, so that a bad one is a 400, not a broken stream.
    let _ = Store::selector(&rt, &options)?;
    let request = parse(query)?;
    let journal = store.journal();
    let mut latest = journal.latest.subscribe();
    // Changes after the version asked for, made before this watch began, are sent first.
    latest.mark_changed();
    let ends = journal.ends.subscribe();
    let now = store.revision();
    let mut first = Vec::new();
    let mut expired = false;
    let position = match request.resource_version {
        Some(rv) if rv > 0 && !request.initial_events => match journal.since(rv, true) {
            Ok(_) => rv,
            Err(oldest) => {
                expired = true;
                first.push(
                    json!({"type": "ERROR", "object": status_body(&ApiError::new(
                    410,
                    "Expired",
                    format!("too old resource version: {rv} ({oldest})"),
                )).1}),
                );
                now
            }
        },
        _ => {
            let listed = store.list(&rt, t.namespace.as_deref(), &options)?;
            let items = match listed {
                Value::Object(mut m) => m.remove("items"),
                _ => None,
            };
            if let Some(Value::Array(items)) = items {
                first.extend(
                    items
                        .into_iter()
                        .map(|object| json!({"type": "ADDED", "object": object})),
                );
            }
            if request.initial_events {
                first.push(bookmark(&rt, now, true));
            }
            now
        }
    };
    Ok(Watch {
        rt,
        namespace: t.namespace.clone(),
        options,
        journal,
        latest,
        ends,
        first,
        position,
        request,
        expired,
    })
}

fn bookmark(rt: &ResourceType, revision: u64, initial_events_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"type": "BOOKMARK", "object": {
        "apiVersion": rt.api_version(), "kind": rt.kind, "metadata": metadata,
    }})
}

type Sink = futures::channel::mpsc::Sender<Result<hyper::body::Frame<Bytes>, std::io::Error>>;

async fn send(tx: &mut Sink, event: &Value) -> bool {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    tx.send(Ok(hyper::body::Frame::data(Bytes::from(line))))
        .await
        .is_ok()
}

impl Watch {
    /// The event this change is for this watch, if any: selectors decide from the object before
    /// and after the change.
    fn event(&self, change: &Change) -> Option<Value> {
        let (group, plural) = storage(&self.rt);
        let (g, p, ns, name) = &change.key;
        if g != group || p != plural || self.namespace.as_ref().is_some_and(|n| n != ns) {
            return None;
        }
        let selected = Store::selector(&self.rt, &self.options).ok()?;
        let matches = |obj: &Value| selected(ns, name, obj);
        let before = change.previous.as_deref().is_some_and(matches);
        let after = !change.deleted && matches(&change.object);
        let kind = match (before, after) {
            (true, true) => "MODIFIED",
            (false, true) => "ADDED",
            (true, false) => "DELETED",
            (false, false) => return None,
        };
        let object = from_storage(&self.rt, (*change.object).clone());
        Some(json!({"type": kind, "object": object}))
    }

    async fn run(mut self, mut tx: Sink) {
        for event in std::mem::take(&mut self.first) {
            if !send(&mut tx, &event).await {
                return;
            }
        }
        if self.expired {
            return;
        }
        let every = *self
            .journal
            .bookmark_every
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let deadline = tokio::time::sleep(self.request.timeout);
        tokio::pin!(deadline);
        let mut bookmarks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                () = &mut deadline => return,
                _ = self.ends.changed() => return,
                _ = bookmarks.tick(), if self.request.bookmarks => {
                    if !send(&mut tx, &bookmark(&self.rt, self.position, false)).await {
                        return;
                    }
                }
                changed = self.latest.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let changes = match self.journal.since(self.position, false) {
                        Ok(changes) => changes,
                        Err(oldest) => {
                            // Fell behind the history kept: the client must list again.
                            let status = status_body(&ApiError::new(
                                410,
                                "Expired",
                                format!("too old resource version: {} ({oldest})", self.position),
                            )).1;
                            let _ = send(&mut tx, &json!({"type": "ERROR", "object": status})).await;
                            return;
                        }
                    };
                    for change in changes {
                        if let Some(event) = self.event(&change)
                            && !send(&mut tx, &event).await
                        {
                            return;
                        }
                        self.position = change.revision;
                    }
                }
            }
        }
    }
}
