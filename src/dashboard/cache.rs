//! The dashboard's reads, answered from watches: a kube client whose list requests are served
//! from a cache that one watch per collection keeps current, as client-go's informers serve a
//! controller's reads. Every other request (gets, writes, discovery, watches) goes to the API
//! server.
//!
//! The first list of a collection goes to the API server and starts that collection's reflector:
//! it lists the whole collection once (page by page), then watches it from the list's
//! `resourceVersion` with bookmarks, resuming from the last `resourceVersion` seen when a watch
//! ends (its `timeoutSeconds`, a dropped connection), and lists again only when the server answers
//! `410 Gone`/`Expired` (the version left the server's history). Once it has listed, the lists of
//! that collection are answered from it, with their label and field selectors applied here as the
//! server applies them. So the dashboard reads the world with the very code a pass reads it with
//! (`observe`, `status`, `explain`), and an open page costs the API server its watches only.
//!
//! Objects are kept as JSON text without `metadata.managedFields` (which nothing the dashboard
//! reads looks at): what a list answer is made of, with no decoded tree per object. A list
//! selecting by a label's values (`key=value`, `key in (...)`) or by name is answered from an
//! index of that label, serving only the matching objects: the dashboard's read of one
//! promotion's ClusterSummaries costs that promotion's summaries, not the fleet's.
//!
//! Each change a watch sees is kept ([`Change`]) until the hub takes it, so that it reads again
//! only what the change touches.

use futures::TryStreamExt as _;
use http::{Request, Response};
use kube::api::WatchEvent;
use kube::client::Body;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a watch request lasts before it is made again from where it ended (kube's default).
const WATCH_TIMEOUT: u64 = crate::client::WATCH_TIMEOUT.as_secs();
/// Objects per page of a reflector's list.
const PAGE: u32 = 500;
/// How long a discovery answer (which groups and versions the server serves) is reused (kube's
/// discovery is asked again on each read of the inventory: whether Cluster API is served), and a
/// refusal to list a collection (promoter's own CRDs not installed, RBAC) is answered again.
const KEEP_FOR: Duration = Duration::from_secs(5 * 60);

/// The watched collections and their objects.
pub struct WatchCache {
    inner: kube::Client,
    /// The client the watch requests are made with: its read timeout outlasts a quiet watch.
    watches: kube::Client,
    reflectors: Mutex<BTreeMap<String, Arc<Reflector>>>,
    /// Discovery answers and refused lists by path: when they were read, status code and body.
    kept: Mutex<BTreeMap<String, (std::time::Instant, u16, bytes::Bytes)>>,
    changed: Notify,
    /// What the watches saw change since the hub last took it.
    changes: Mutex<Vec<Change>>,
    /// Objects served in list answers, by collection path (what reading through the cache costs).
    served: Mutex<BTreeMap<String, usize>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// A change a watch saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// An object of `collection` was added, changed or deleted; its labels are as of the event.
    Object {
        collection: String,
        name: String,
        labels: BTreeMap<String, String>,
        /// The object an Event is about (`involvedObject`): kind and name.
        involved: Option<(String, String)>,
    },
    /// `collection` was listed (again): any of its objects may have changed.
    Listed { collection: String },
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            t.abort();
        }
    }
}

/// One collection's objects, as of `resource_version`.
#[derive(Default)]
struct Reflector {
    state: Mutex<Collection>,
}

#[derive(Default)]
struct Collection {
    /// Listed at least once: lists are answered from here.
    synced: bool,
    resource_version: String,
    api_version: String,
    kind: String,
    /// By namespace and name, in the server's order.
    objects: BTreeMap<(String, String), Cached>,
    /// The objects by the value of a label, for each label a list has selected by (built on that
    /// first list, then kept current).
    index: BTreeMap<String, BTreeMap<String, BTreeSet<(String, String)>>>,
}

struct Cached {
    text: Arc<str>,
    labels: BTreeMap<String, String>,
}

impl Reflector {
    fn collection(&self) -> std::sync::MutexGuard<'_, Collection> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Collection {
    fn insert(&mut self, key: (String, String), cached: Cached) {
        self.remove(&key);
        for (label, by_value) in &mut self.index {
            if let Some(value) = cached.labels.get(label) {
                by_value
                    .entry(value.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        self.objects.insert(key, cached);
    }

    fn remove(&mut self, key: &(String, String)) {
        let Some(old) = self.objects.remove(key) else {
            return;
        };
        for (label, by_value) in &mut self.index {
            if let Some(value) = old.labels.get(label)
                && let Some(keys) = by_value.get_mut(value)
            {
                keys.remove(key);
                if keys.is_empty() {
                    by_value.remove(value);
                }
            }
        }
    }

    /// The objects whose `label` has one of `values`, in the collection's order.
    fn labelled(&mut self, label: &str, values: &[String]) -> BTreeSet<(String, String)> {
        let objects = &self.objects;
        let by_value = self.index.entry(label.to_string()).or_insert_with(|| {
            let mut by_value: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
            for (key, cached) in objects {
                if let Some(value) = cached.labels.get(label) {
                    by_value
                        .entry(value.clone())
                        .or_default()
                        .insert(key.clone());
                }
            }
            by_value
        });
        values
            .iter()
            .filter_map(|v| by_value.get(v))
            .flatten()
            .cloned()
            .collect()
    }
}

fn json_response(code: u16, body: bytes::Bytes) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `/api`, `/apis`, `/api/{version}`, `/apis/{group}`, `/apis/{group}/{version}`: what the server
/// serves.
fn is_discovery(req: &Request<Body>) -> bool {
    let segments: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
    req.method() == http::Method::GET
        && matches!(
            segments.as_slice(),
            ["api"] | ["apis"] | ["api", _] | ["apis", _] | ["apis", _, _]
        )
}

/// A collection path (`/api/v1/...` or `/apis/{group}/{version}/...`, namespaced or not, no
/// object name) and its query, if `req` lists it.
fn listed_collection(req: &Request<Body>) -> Option<(String, BTreeMap<String, String>)> {
    if req.method() != http::Method::GET {
        return None;
    }
    let path = req.uri().path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => return None,
    };
    match rest {
        [_] | ["namespaces", _, _] => {}
        _ => return None,
    }
    let query: BTreeMap<String, String> =
        form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    if query.contains_key("watch") {
        return None;
    }
    Some((path.to_string(), query))
}

/// A field selector's terms, `field=value` or `field!=value`.
fn field_terms(selector: &str) -> Option<Vec<(String, String, bool)>> {
    selector
        .split(',')
        .filter(|t| !t.is_empty())
        .map(|term| {
            if let Some((f, v)) = term.split_once("!=") {
                return Some((f.to_string(), v.to_string(), true));
            }
            let (f, v) = term.split_once("==").or_else(|| term.split_once('='))?;
            Some((f.to_string(), v.to_string(), false))
        })
        .collect()
}

impl WatchCache {
    /// `watches`: the client for watch requests ([`crate::client::for_watches`]); with one whose
    /// read timeout is a request's, a quiet watch ends then and is made again.
    pub fn new(inner: kube::Client, watches: kube::Client) -> Arc<WatchCache> {
        Arc::new(WatchCache {
            inner,
            watches,
            reflectors: Mutex::new(BTreeMap::new()),
            kept: Mutex::new(BTreeMap::new()),
            changed: Notify::new(),
            changes: Mutex::new(Vec::new()),
            served: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// A client that reads through this cache.
    pub fn client(self: &Arc<Self>) -> kube::Client {
        let cache = Arc::downgrade(self);
        let inner = self.inner.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let (cache, inner) = (cache.upgrade(), inner.clone());
            async move {
                if let Some(cache) = &cache
                    && let Some((path, query)) = listed_collection(&req)
                {
                    if let Some(refused) = cache.kept(&path) {
                        return Ok(refused);
                    }
                    if let Some(answer) = cache.answer(&path, &query) {
                        return Ok(answer);
                    }
                    cache.reflect(&path);
                }
                match cache.filter(|_| is_discovery(&req)) {
                    Some(cache) => cache.discover(&inner, req).await,
                    None => inner.send(req).await,
                }
            }
        });
        kube::Client::new(service, self.inner.default_namespace().to_string())
    }

    /// Resolves when an object of a watched collection changed (or one was listed again).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// The changes seen since the last call, oldest first.
    pub fn take_changes(&self) -> Vec<Change> {
        std::mem::take(&mut *self.changes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Objects served in list answers so far, by collection path.
    pub fn served(&self) -> BTreeMap<String, usize> {
        self.served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn saw(&self, change: Change) {
        self.changes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(change);
        self.changed.notify_one();
    }

    /// The answer kept for `path`, while it is recent.
    fn kept(&self, path: &str) -> Option<Response<Body>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (_, code, body) = kept.get(path).filter(|(at, ..)| at.elapsed() < KEEP_FOR)?;
        Some(json_response(*code, body.clone()))
    }

    fn keep(&self, path: String, code: u16, body: bytes::Bytes) {
        self.kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path, (std::time::Instant::now(), code, body));
    }

    /// A discovery request, answered as last read if that is recent, else read (and kept if
    /// the server served it).
    async fn discover(
        &self,
        inner: &kube::Client,
        req: Request<Body>,
    ) -> Result<Response<Body>, kube::Error> {
        use http_body_util::BodyExt as _;
        let path = req.uri().path().to_string();
        if let Some(kept) = self.kept(&path) {
            return Ok(kept);
        }
        let response = inner.send(req).await?;
        if response.status() != http::StatusCode::OK {
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        self.keep(path, 200, body.clone());
        Ok(Response::from_parts(parts, Body::from(body)))
    }

    /// A list answered from the collection's reflector, once it has listed.
    fn answer(&self, path: &str, query: &BTreeMap<String, String>) -> Option<Response<Body>> {
        let reflector = self
            .reflectors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .cloned()?;
        // A selector this cache cannot read is the server's to refuse.
        let labels = match query.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => crate::labels::parse_selector(s).ok()?,
            None => Vec::new(),
        };
        let fields = match query.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => field_terms(s)?,
            None => Vec::new(),
        };
        let mut collection = reflector.collection();
        if !collection.synced {
            return None;
        }
        // Only the objects a label's values or a name select are looked at, when the list
        // selects so.
        let by_label = labels.iter().find_map(|r| match &r.op {
            crate::labels::Op::In(values) => Some((r.key.clone(), values.clone())),
            _ => None,
        });
        let by_name = fields
            .iter()
            .find(|(field, _, not_equal)| field == "metadata.name" && !not_equal)
            .map(|(_, name, _)| name.clone());
        let candidates: Option<BTreeSet<(String, String)>> = match (by_label, by_name) {
            (Some((label, values)), _) => Some(collection.labelled(&label, &values)),
            (None, Some(name)) => Some(
                collection
                    .objects
                    .keys()
                    .filter(|(_, n)| *n == name)
                    .cloned()
                    .collect(),
            ),
            (None, None) => None,
        };
        let collection = &*collection;
        let mut body = format!(
            r#"{{"apiVersion":{},"kind":{},"metadata":{{"resourceVersion":{}}},"items":["#,
            Value::from(collection.api_version.as_str()),
            Value::from(collection.kind.as_str()),
            Value::from(collection.resource_version.as_str()),
        );
        let mut first = true;
        let mut served = 0;
        let objects: Box<dyn Iterator<Item = (&(String, String), &Cached)>> = match &candidates {
            Some(keys) => Box::new(
                keys.iter()
                    .filter_map(|k| collection.objects.get_key_value(k)),
            ),
            None => Box::new(collection.objects.iter()),
        };
        for ((namespace, name), cached) in objects {
            let labelled = labels
                .iter()
                .all(|r| r.matches_value(cached.labels.get(&r.key).map(String::as_str)));
            if !labelled || !fields_match(&fields, namespace, name, &cached.text) {
                continue;
            }
            if !first {
                body.push(',');
            }
            first = false;
            served += 1;
            body.push_str(&cached.text);
        }
        *self
            .served
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(path.to_string())
            .or_default() += served;
        body.push_str("]}");
        Some(json_response(200, body.into()))
    }

    /// Starts the collection's reflector, unless it runs.
    fn reflect(self: &Arc<Self>, path: &str) {
        let reflector = {
            let mut reflectors = self.reflectors.lock().unwrap_or_else(|p| p.into_inner());
            if reflectors.contains_key(path) {
                return;
            }
            let r = Arc::new(Reflector::default());
            reflectors.insert(path.to_string(), r.clone());
            r
        };
        let cache = Arc::downgrade(self);
        let (inner, watches, path) = (self.inner.clone(), self.watches.clone(), path.to_string());
        let task = tokio::spawn(async move {
            let gone = run(&inner, &watches, &path, &reflector, |change| {
                if let Some(c) = cache.upgrade() {
                    c.saw(change);
                }
            })
            .await;
            // A collection the server does not serve (or does not let this user list): its
            // lists are answered with the server's refusal for a while, then tried again.
            tracing::debug!(collection = %path, error = %crate::cli_error::line(&gone), "not watching this collection");
            if let Some(c) = cache.upgrade() {
                if let kube::Error::Api(status) = &gone
                    && let Ok(body) = serde_json::to_vec(status)
                {
                    c.keep(path.clone(), status.code, body.into());
                }
                c.reflectors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&path);
            }
        });
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task);
    }
}

/// Whether a cached object matches a field selector's terms: `metadata.name` and
/// `metadata.namespace`, and other fields by their path in the object (`involvedObject.name`).
fn fields_match(terms: &[(String, String, bool)], namespace: &str, name: &str, text: &str) -> bool {
    // Decoded only for a field other than its name and namespace.
    let mut object: Option<Option<Value>> = None;
    terms.iter().all(|(field, value, not_equal)| {
        let actual = match field.as_str() {
            "metadata.name" => name.to_string(),
            "metadata.namespace" => namespace.to_string(),
            other => object
                .get_or_insert_with(|| serde_json::from_str(text).ok())
                .as_ref()
                .and_then(|o| o.pointer(&format!("/{}", other.replace('.', "/"))))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        };
        (actual == *value) != *not_equal
    })
}

#[derive(Deserialize)]
struct Page {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<Box<RawValue>>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// Namespace, name, labels and stored text of a listed or watched object, its version, and the
/// object it is about (an Event's `involvedObject`: kind and name).
type Entry = ((String, String), Cached, String, Option<(String, String)>);

fn entry(mut object: Value) -> Option<Entry> {
    let involved = object.get("involvedObject").map(|o| {
        let field = |k: &str| {
            o.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        (field("kind"), field("name"))
    });
    let metadata = object.get_mut("metadata")?.as_object_mut()?;
    metadata.remove("managedFields");
    let text = |k: &str| {
        metadata
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let key = (text("namespace"), text("name"));
    let version = text("resourceVersion");
    let labels = metadata
        .get("labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    let text: Arc<str> = serde_json::to_string(&object).ok()?.into();
    Some((key, Cached { text, labels }, version, involved))
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The whole collection, page by page: its objects, and the version they are at.
async fn list(inner: &kube::Client, path: &str) -> Result<Collection, kube::Error> {
    let mut collection = Collection::default();
    let mut continue_token = String::new();
    loop {
        let mut uri = format!("{path}?limit={PAGE}");
        if !continue_token.is_empty() {
            uri.push_str("&continue=");
            uri.extend(form_urlencoded::byte_serialize(continue_token.as_bytes()));
        }
        let request = Request::get(uri)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        let page: Page = inner.request(request).await?;
        collection.api_version = page.api_version;
        collection.kind = page.kind;
        collection.resource_version = page.metadata.resource_version;
        for item in page.items {
            if let Some((key, cached, ..)) = serde_json::from_str(item.get()).ok().and_then(entry) {
                collection.objects.insert(key, cached);
            }
        }
        match page.metadata.continue_token.filter(|c| !c.is_empty()) {
            Some(token) => continue_token = token,
            None => break,
        }
    }
    collection.synced = true;
    Ok(collection)
}

/// Lists and watches `path` into `reflector` until the server says it does not serve it (the
/// error, then).
async fn run(
    inner: &kube::Client,
    watches: &kube::Client,
    path: &str,
    reflector: &Reflector,
    changed: impl Fn(Change),
) -> kube::Error {
    let mut pause = Duration::from_secs(1);
    let backoff = |pause: &mut Duration| {
        let now = *pause;
        *pause = (*pause * 2).min(Duration::from_secs(30));
        now
    };
    loop {
        match list(inner, path).await {
            Ok(listed) => {
                *reflector.collection() = listed;
                changed(Change::Listed {
                    collection: path.to_string(),
                });
            }
            // Forbidden, NotFound, MethodNotAllowed: not to be watched here.
            Err(e) if matches!(status_code(&e), Some(403..=405)) => return e,
            Err(e) => {
                tracing::debug!(collection = %path, error = %crate::cli_error::line(&e), "listing to watch");
                tokio::time::sleep(backoff(&mut pause)).await;
                continue;
            }
        }
        // Watch from the last version seen until the server no longer has it.
        loop {
            let from = reflector.collection().resource_version.clone();
            let uri = format!(
                "{path}?watch=true&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT}",
                form_urlencoded::byte_serialize(from.as_bytes()).collect::<String>()
            );
            let Ok(request) = Request::get(uri).body(Vec::new()) else {
                break;
            };
            let events = match watches.request_events::<Value>(request).await {
                Ok(events) => events,
                Err(e) if matches!(status_code(&e), Some(410)) => break,
                Err(e) => {
                    tracing::debug!(collection = %path, error = %crate::cli_error::line(&e), "watching");
                    tokio::time::sleep(backoff(&mut pause)).await;
                    continue;
                }
            };
            let mut events = std::pin::pin!(events);
            let mut expired = false;
            while let Ok(Some(event)) = events.try_next().await {
                pause = Duration::from_secs(1);
                let mut collection = reflector.collection();
                let (object, deleted) = match event {
                    WatchEvent::Added(object) | WatchEvent::Modified(object) => (object, false),
                    WatchEvent::Deleted(object) => (object, true),
                    WatchEvent::Bookmark(b) => {
                        collection.resource_version = b.metadata.resource_version;
                        continue;
                    }
                    WatchEvent::Error(status) => {
                        expired = status.code == 410;
                        if !expired {
                            tracing::debug!(collection = %path, error = %status.message, "watching");
                            drop(collection);
                            tokio::time::sleep(backoff(&mut pause)).await;
                        }
                        break;
                    }
                };
                let Some((key, cached, version, involved)) = entry(object) else {
                    continue;
                };
                let change = Change::Object {
                    collection: path.to_string(),
                    name: key.1.clone(),
                    labels: cached.labels.clone(),
                    involved,
                };
                collection.resource_version = version;
                if deleted {
                    collection.remove(&key);
                } else {
                    collection.insert(key, cached);
                }
                drop(collection);
                changed(change);
            }
            if expired {
                break;
            }
        }
    }
}
