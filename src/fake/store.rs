//! The fake API server's object store: the semantics of the real API server for what promoter
//! relies on (resourceVersion and optimistic concurrency, generation, the status subresource,
//! finalizers, owner-reference garbage collection), independent of HTTP.

use super::api_error::ApiError;
use super::events::{self as ev, from_storage, to_storage};
use super::field::{BadValue, ErrorType, FieldError};
use super::managed_fields::{Writer, stamp};
use super::meta::{generate_name, name_rule, validate_event, validate_object_meta};
use super::patch::{PatchError, json_patch, merge_patch};
use super::resource_type::ResourceType;
use super::schema::{Crd, Schema, crd_from_value};
use crate::labels::Requirement;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Arc;

/// A CRD compiled: the type it serves and its schema.
pub(crate) type CompiledCrd = (ResourceType, Arc<Schema>);

/// A CRD (as JSON) read into the type it serves and its compiled schema, what
/// [`Store::register_compiled`] registers.
pub(crate) fn compile_crd(crd: &Value) -> Result<CompiledCrd, String> {
    let Crd {
        group,
        version,
        kind,
        plural,
        namespaced,
        status_subresource,
        schema,
    } = crd_from_value(crd)?;
    let mut rt = ResourceType::custom(&group, &version, &kind, &plural, namespaced);
    rt.status_subresource = status_subresource;
    Ok((rt, Arc::new(schema)))
}

/// The source of "now" for creation and deletion timestamps (virtual in the simulator).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    /// Treated as background: dependents are deleted, but the owner does not wait for them.
    Foreground,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    /// Server-side apply, approximated: create when absent, else a merge patch (no field managers).
    Apply,
}

#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: Vec<Requirement>,
    pub fields: Vec<FieldRequirement>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// One term of a field selector: `field=value` (or `==`), or `field!=value`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub value: String,
    pub not_equal: bool,
}

impl FieldRequirement {
    pub fn equals(field: &str, value: &str) -> Self {
        FieldRequirement {
            field: field.into(),
            value: value.into(),
            not_equal: false,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

type Key = (String, String, String, String); // group, plural, namespace, name

/// A key's four parts, borrowed: an object is looked up without building a [`Key`] (four
/// strings per `get`/`peek`, the model checker's most frequent call).
trait KeyParts {
    fn parts(&self) -> (&str, &str, &str, &str);
}

impl KeyParts for Key {
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.0, &self.1, &self.2, &self.3)
    }
}

impl KeyParts for (&str, &str, &str, &str) {
    fn parts(&self) -> (&str, &str, &str, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for Key {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

// Ordered as `Key` is (a `String` orders as its `str`), as `Borrow` requires.
impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

/// Cloned whole by the model checker (the `promoter-model` crate), one copy per explored state: the compiled schemas
/// are shared.
#[derive(Clone)]
pub struct Store {
    /// Shared between clones until a type is registered (copy on write), like `schemas`.
    types: Arc<Vec<ResourceType>>,
    /// Structural schemas of the types registered from CRDs, by (group, plural).
    schemas: Arc<HashMap<(String, String), Arc<Schema>>>,
    /// Set only while [`Store::seed_unvalidated`] stores an object.
    unvalidated: bool,
    /// Shared between clones: a clone costs a reference count per object, and a write copies
    /// only the object it changes.
    objects: Arc<BTreeMap<Key, Arc<Value>>>,
    /// Continue tokens issued at a revision below this one are expired ([`Store::compact`]).
    compacted: u64,
    /// Propagation asked for by a delete that had to wait for finalizers.
    pending_propagation: HashMap<String, Propagation>,
    revision: u64,
    uids: u64,
    clock: Clock,
    /// The field manager of the writes being made (`managedFields`): the HTTP layer sets the
    /// request's, a simulated controller its own; [`DIRECT_WRITER`] otherwise.
    manager: String,
    /// The changes watches are served from ([`super::watch`]); kept only once a server serves
    /// watches, so that the model checker's clones pay nothing for it.
    journal: Option<Arc<super::watch::Journal>>,
}

/// The field manager of writes made on the store directly (fixtures, tests).
pub const DIRECT_WRITER: &str = "fake-store";

fn meta(obj: &Value, field: &str) -> Option<String> {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .map(String::from)
}

fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"][field] = value;
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether two objects are the same in everything that is not metadata (and not status, with a
/// status subresource): what moves `generation`. Compared in place, without copying either.
fn same_spec_part(a: &Value, b: &Value, rt: &ResourceType) -> bool {
    fn part<'v>(v: &'v Value, rt: &ResourceType) -> impl Iterator<Item = (&'v String, &'v Value)> {
        let status = rt.status_subresource;
        v.as_object()
            .into_iter()
            .flatten()
            .filter(move |(k, _)| match k.as_str() {
                "metadata" | "apiVersion" | "kind" => false,
                "status" => !status,
                _ => true,
            })
    }
    // serde_json's maps iterate in key order: equal parts are equal sequences.
    part(a, rt).eq(part(b, rt))
}

/// A continue token as kube-apiserver makes one: unpadded base64url of
/// `{"v":"meta.k8s.io/v1","rv":<revision of the list>,"start":"<key after the last item>"}`, the key
/// here `<namespace>/<name>` and a NUL (kubernetes/apiserver pkg/storage/continue.go
/// `EncodeContinue`, commit 24a394e5). Clients treat it as opaque.
fn encode_continue(last: &str, rv: i64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The key a continuation starts after, and the revision it reads at; a token that is not one of
/// ours is a 400, with the real text (`DecodeContinue`; pkg/storage/interfaces.go).
fn decode_continue(token: &str) -> Result<(String, i64), ApiError> {
    use base64::Engine;
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| invalid(&format!("continue key is not valid: {e}")))?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(invalid(
            "continue key is not valid: server does not recognize this encoded version",
        ));
    }
    let rv = v["rv"].as_i64().unwrap_or(0);
    if rv == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v["start"].as_str().unwrap_or_default();
    let Some(after) = start.strip_suffix('\u{0}').filter(|a| !a.is_empty()) else {
        return Err(invalid(
            "continue key is not valid: encoded start key empty",
        ));
    };
    Ok((after.to_string(), rv))
}

/// A continuation whose revision was compacted away: 410 Expired with kube-apiserver's text, and an
/// inconsistent continuation (rv -1: the rest of the list as it is now) in `metadata.continue`
/// (kubernetes/apiserver pkg/storage/etcd3/errors.go `handleCompactedErrorForPaging`, and
/// kubernetes/apimachinery pkg/api/errors/errors.go `NewResourceExpired`, commits 24a394e5 and
/// eed236ce).
fn expired_continue(after: &str) -> ApiError {
    ApiError {
        continue_token: Some(encode_continue(after, -1)),
        ..ApiError::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may show \
             up in the list.",
        )
    }
}

impl Store {
    pub fn new(clock: Clock) -> Self {
        Store {
            types: Arc::default(),
            schemas: Arc::default(),
            unvalidated: false,
            objects: Arc::default(),
            pending_propagation: HashMap::new(),
            revision: 1,
            compacted: 0,
            uids: 0,
            clock,
            manager: DIRECT_WRITER.into(),
            journal: None,
        }
    }

    /// Runs `f` with `manager` as the field manager of its writes (`managedFields`).
    pub fn with_manager<R>(&mut self, manager: &str, f: impl FnOnce(&mut Store) -> R) -> R {
        let previous = std::mem::replace(&mut self.manager, manager.to_string());
        let out = f(self);
        self.manager = previous;
        out
    }

    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    fn now(&self) -> String {
        (self.clock)().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    pub fn register(&mut self, rt: ResourceType) {
        let types = Arc::make_mut(&mut self.types);
        types.retain(|t| !(t.group == rt.group && t.plural == rt.plural));
        types.push(rt);
    }

    /// Registers a custom resource from its CRD (as JSON or YAML), with the CRD's structural
    /// semantics: pruning, defaulting and validation on every write. Objects already stored are
    /// pruned and defaulted again, as a real server does when it reads them after a CRD change.
    pub fn register_crd(&mut self, crd: &Value) -> Result<ResourceType, String> {
        let (rt, schema) = compile_crd(crd)?;
        Ok(self.register_compiled(rt, schema))
    }

    /// Registers a custom resource from a CRD already compiled ([`Store::register_crd`]'s work
    /// after reading the CRD): the fake server's CRDs are compiled once per process and shared.
    pub(crate) fn register_compiled(
        &mut self,
        rt: ResourceType,
        schema: Arc<Schema>,
    ) -> ResourceType {
        let (group, plural) = (rt.group.clone(), rt.plural.clone());
        Arc::make_mut(&mut self.schemas).insert((group.clone(), plural.clone()), schema.clone());
        self.register(rt.clone());
        for ((g, p, ..), obj) in Arc::make_mut(&mut self.objects).iter_mut() {
            if *g == group && *p == plural {
                schema.normalise(Arc::make_mut(obj));
            }
        }
        rt
    }

    /// Registers a custom resource from a CRD in YAML (one document).
    pub fn register_crd_yaml(&mut self, yaml: &str) -> Result<ResourceType, String> {
        let crd: Value = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        self.register_crd(&crd)
    }

    /// The compiled schema of a type registered from a CRD.
    pub fn schema(&self, rt: &ResourceType) -> Option<Arc<Schema>> {
        self.schemas
            .get(&(rt.group.clone(), rt.plural.clone()))
            .cloned()
    }

    /// What the server does to every object it persists: the CRD's pruning and defaulting, then
    /// metadata, schema and kind-specific validation (`old` is the stored object on an update).
    fn admit(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let schema = self.schema(rt);
        if let Some(schema) = &schema {
            schema.normalise(obj);
        }
        if self.unvalidated {
            return Ok(());
        }
        let mut errs = validate_object_meta(obj, name_rule(&rt.group, &rt.kind), rt.namespaced);
        if let Some(schema) = &schema {
            errs.extend(schema.validate(obj, old));
        }
        if rt.kind == "Event" && old.is_none() {
            errs.extend(validate_event(obj, rt.group == "events.k8s.io"));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                rt,
                &meta(obj, "name").unwrap_or_default(),
                errs,
            ))
        }
    }

    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    pub fn resource_by_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.api_version() == api_version && t.kind == kind)
            .cloned()
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// What kube-apiserver's compactor does every 5 minutes (or a storage restart): it records the
    /// compaction with a write (a new revision), then etcd drops the history below it, and every
    /// continue token issued before is expired ([`Store::list`]). Real compaction keeps the last
    /// 5 minutes; this drops everything older than now, the worst case for a list in progress.
    /// kubernetes/apiserver pkg/storage/etcd3/compact.go `Compact` (commit 24a394e5).
    pub fn compact(&mut self) {
        self.revision += 1;
        self.compacted = self.revision;
        if let Some(journal) = &self.journal {
            journal.compact(self.compacted);
        }
    }

    /// The changes this store records from now on, for watches: a watch can resume from any
    /// revision since then (and since the last compaction).
    pub(crate) fn journal(&mut self) -> Arc<super::watch::Journal> {
        let revision = self.revision;
        self.journal
            .get_or_insert_with(|| Arc::new(super::watch::Journal::new(revision)))
            .clone()
    }

    /// Stores an object (in its storage form) and records the change for watches.
    fn put(&mut self, key: Key, stored: Value) {
        let stored = Arc::new(stored);
        let previous = Arc::make_mut(&mut self.objects).insert(key.clone(), stored.clone());
        if let Some(journal) = &self.journal {
            journal.record(self.revision, key, previous, stored, false);
        }
    }

    /// Removes an object and records its deletion for watches, with `last` (the object as it was
    /// when deleted, at the deletion's revision) as the deleted object.
    fn remove(&mut self, key: &Key, last: Value) {
        let previous = Arc::make_mut(&mut self.objects).remove(key);
        if let Some(journal) = &self.journal {
            journal.record(self.revision, key.clone(), previous, Arc::new(last), true);
        }
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    /// Where an object is stored: events.k8s.io/v1 Events with the core/v1 ones ([`ev`]).
    fn key(rt: &ResourceType, ns: &str, name: &str) -> Key {
        let ns = if rt.namespaced { ns } else { "" };
        let (group, plural) = ev::storage(rt);
        (
            group.to_string(),
            plural.to_string(),
            ns.to_string(),
            name.to_string(),
        )
    }

    /// [`Store::key`], borrowed (for lookups).
    fn key_parts<'a>(
        rt: &'a ResourceType,
        ns: &'a str,
        name: &'a str,
    ) -> (&'a str, &'a str, &'a str, &'a str) {
        let ns = if rt.namespaced { ns } else { "" };
        let (group, plural) = ev::storage(rt);
        (group, plural, ns, name)
    }

    /// Whether a stored object (by key) is one of `rt`'s.
    fn stores(rt: &ResourceType, g: &str, p: &str) -> bool {
        ev::storage(rt) == (g, p)
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&Self::key_parts(rt, ns, name) as &dyn KeyParts)
            .map(|v| from_storage(rt, (**v).clone()))
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Every object of a type, in key order (for tests and the simulator).
    pub fn all(&self, rt: &ResourceType) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((g, p, ..), _)| Self::stores(rt, g, p))
            .map(|(_, v)| from_storage(rt, (**v).clone()))
            .collect()
    }

    /// One object as stored, without copying (the model checker compares them by reference).
    pub fn peek(&self, rt: &ResourceType, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(&Self::key_parts(rt, ns, name) as &dyn KeyParts)
    }

    /// Whether two stores hold the very same objects (a clone neither has written to since): then
    /// every object of one is the other's (the model checker skips comparing them one by one).
    pub fn shares_objects(&self, other: &Store) -> bool {
        Arc::ptr_eq(&self.objects, &other.objects)
    }

    /// Every object of a type as stored, without copying (the model checker hashes them). Events
    /// are in their storage form (see [`ev`]).
    pub fn stored<'a>(&'a self, rt: &'a ResourceType) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        self.objects
            .iter()
            .filter(|((g, p, ..), _)| Self::stores(rt, g, p))
            .map(|(_, v)| v)
    }

    /// The field selector's labels as the type knows them (Events: `involvedObject.name`, …, see
    /// [`ev::field_label`]; every other type: `metadata.name` and `metadata.namespace`).
    fn field_labels(
        rt: &ResourceType,
        opts: &ListOptions,
    ) -> Result<Vec<FieldRequirement>, ApiError> {
        opts.fields
            .iter()
            .map(|r| {
                let field = match ev::field_label(rt, &r.field) {
                    Some(mapped) => mapped?.to_string(),
                    None if r.field == "metadata.name" || r.field == "metadata.namespace" => {
                        r.field.clone()
                    }
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {}",
                            r.field
                        )));
                    }
                };
                Ok(FieldRequirement { field, ..r.clone() })
            })
            .collect()
    }

    /// Whether a stored object (by namespace and name) is one that a list or a watch with these
    /// options selects: its label and field selectors.
    pub(crate) fn selector<'o>(
        rt: &ResourceType,
        opts: &'o ListOptions,
    ) -> Result<impl Fn(&str, &str, &Value) -> bool + use<'o>, ApiError> {
        let fields = Self::field_labels(rt, opts)?;
        Ok(move |n: &str, name: &str, obj: &Value| {
            // No JSON-pointer parsing per object: a list scans every object of its type.
            let labels = obj.get("metadata").and_then(|m| m.get("labels"));
            opts.labels.iter().all(|r| {
                r.matches_value(labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str))
            }) && fields.iter().all(|r| {
                let actual = match r.field.as_str() {
                    "metadata.name" => name.to_string(),
                    "metadata.namespace" => n.to_string(),
                    label => ev::field_value(obj, label),
                };
                (actual == r.value) != r.not_equal
            })
        })
    }

    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let selected = Self::selector(rt, opts)?;
        // A continuation reads at its token's revision (here: the latest, see the module's known
        // differences), or at the latest for an inconsistent continuation (-1).
        let (after, snapshot) = match &opts.continue_token {
            None => (String::new(), self.revision as i64),
            Some(token) => {
                let (after, rv) = decode_continue(token)?;
                if rv > 0 && (rv as u64) < self.compacted {
                    return Err(expired_continue(&after));
                }
                (after, if rv > 0 { rv } else { self.revision as i64 })
            }
        };
        let (group, plural) = ev::storage(rt);
        let scope = ns.unwrap_or_default();
        // Only this type's objects (and namespace's), from where the previous page ended: the
        // real server lists from a per-type cache too, so a list costs what that type holds. The
        // position is a key, not a string: "a-b/x" sorts before "a/y" as text but after as a key.
        let start = match after.split_once('/') {
            Some((n, name)) => Excluded(Self::key(rt, n, name)),
            None => Included(Self::key(rt, scope, "")),
        };
        let mut in_type = self
            .objects
            .range((start, Unbounded))
            .take_while(|((g, p, n, _), _)| {
                g == group && p == plural && ns.is_none_or(|ns| ns == n)
            })
            .peekable();
        let limit = opts.limit.filter(|l| *l > 0);
        let mut items = Vec::new();
        let mut last = String::new();
        while limit.is_none_or(|l| items.len() < l) {
            let Some((key, obj)) = in_type.next() else {
                break;
            };
            if selected(&key.2, &key.3, obj) {
                items.push(from_storage(rt, (**obj).clone()));
                last = format!("{}/{}", key.2, key.3);
            }
        }
        let mut list_meta = json!({"resourceVersion": self.revision.to_string()});
        // A selective page is filled to its limit, as etcd's list fills it (reading further, twice
        // as much each time, until `limit` objects matched: kubernetes/kubernetes
        // `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go` `GetList`, commit
        // 00319881a809400fd88feac10e724a9e4afae4d9); never a short page with a continue token.
        // As the real server: a page that filled its limit continues while the type holds more
        // objects, matching or not (so a selective list may end with an empty page), and counts
        // what remains only without selectors (ListMeta.remainingItemCount: "If the list request
        // contained label or field selectors, then the number of remaining items is unknown").
        if limit.is_some() && in_type.peek().is_some() {
            list_meta["continue"] = json!(encode_continue(&last, snapshot));
            if opts.labels.is_empty() && opts.fields.is_empty() {
                list_meta["remainingItemCount"] = json!(in_type.count());
            }
        }
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": list_meta,
            "items": items,
        }))
    }

    pub fn create(&mut self, rt: &ResourceType, ns: &str, obj: Value) -> Result<Value, ApiError> {
        self.create_inner(rt, ns, obj, false)
    }

    fn create_inner(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        mut obj: Value,
        keep_status: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        let body_ns = meta(&obj, "namespace").unwrap_or_default();
        if rt.namespaced {
            if !body_ns.is_empty() && !ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            let ns = if ns.is_empty() {
                body_ns
            } else {
                ns.to_string()
            };
            if ns.is_empty() {
                return Err(ApiError::bad_request(
                    "a namespace is required for a namespaced resource",
                ));
            }
            set_meta(&mut obj, "namespace", json!(ns));
        } else if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("namespace");
        }
        let name = match (meta(&obj, "name"), meta(&obj, "generateName")) {
            (Some(n), _) if !n.is_empty() => n,
            (_, Some(prefix)) if !prefix.is_empty() => {
                self.uids += 1;
                let name = generate_name(&prefix, self.uids);
                set_meta(&mut obj, "name", json!(name));
                name
            }
            _ => String::new(),
        };
        let key = Self::key(rt, &meta(&obj, "namespace").unwrap_or_default(), &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError {
                name: Some(name.clone()),
                ..ApiError::new(
                    409,
                    "AlreadyExists",
                    format!("{} \"{name}\" already exists", rt.group_resource()),
                )
            });
        }
        self.uids += 1;
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.uids);
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        set_meta(&mut obj, "name", json!(name));
        set_meta(&mut obj, "uid", json!(uid));
        set_meta(&mut obj, "creationTimestamp", json!(self.now()));
        set_meta(&mut obj, "generation", json!(1));
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("deletionTimestamp");
        }
        if rt.status_subresource
            && !keep_status
            && let Some(m) = obj.as_object_mut()
        {
            // The API server drops status on create when status is a subresource.
            m.remove("status");
        }
        self.admit(rt, &mut obj, None)?;
        self.stamp_created(rt, &mut obj, keep_status);
        let rv = self.next_revision();
        set_meta(&mut obj, "resourceVersion", json!(rv));
        let stored = to_storage(rt, obj);
        self.put(key, stored.clone());
        Ok(from_storage(rt, stored))
    }

    /// A created object's managed fields: the creator's entry, and for a seeded object with a status
    /// (a fixture standing for an object created and then given a status) the status entry too,
    /// both at the server's now. A fixture that brings its own `managedFields` keeps them.
    fn stamp_created(&self, rt: &ResourceType, obj: &mut Value, keep_status: bool) {
        if keep_status && obj.pointer("/metadata/managedFields").is_some() {
            return;
        }
        let writer = Writer::update(&self.manager);
        let (now, api) = (self.now(), rt.api_version());
        let status = if rt.status_subresource {
            obj.as_object_mut().and_then(|m| m.remove("status"))
        } else {
            None
        };
        stamp(obj, None, &writer, &api, "", &now);
        if let Some(status) = status {
            let before = obj.clone();
            obj["status"] = status;
            stamp(obj, Some(&before), &writer, &api, "status", &now);
        }
    }

    /// Inserts an object as is, status and uid included (fixtures, and live state loaded into a
    /// simulation); bypasses the rules of create.
    /// The object is still pruned, defaulted and validated, status included: a real server holds
    /// nothing else.
    pub fn seed(&mut self, rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
        let ns = meta(&obj, "namespace").unwrap_or_default();
        let uid = meta(&obj, "uid");
        let mut created = self.create_inner(rt, &ns, obj, true)?;
        if let Some(uid) = uid {
            set_meta(&mut created, "uid", json!(uid));
            let key = Self::key(rt, &ns, &meta(&created, "name").unwrap_or_default());
            self.put(key, to_storage(rt, created.clone()));
        }
        Ok(created)
    }

    /// Inserts an object as a server holds one written before its CRD became stricter: pruned and
    /// defaulted (as on every read from storage) but never validated, since validation only runs on
    /// writes. Metadata is still completed as on create.
    pub fn seed_unvalidated(&mut self, rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
        self.unvalidated = true;
        let result = self.seed(rt, obj);
        self.unvalidated = false;
        result
    }

    /// PUT: replaces the object (or only its status) with optimistic concurrency.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        body: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let current = self.get(rt, ns, name)?;
        match meta(&body, "resourceVersion") {
            None => {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    vec![FieldError::new(
                        ErrorType::Invalid,
                        "metadata.resourceVersion",
                        BadValue::Raw("0x0".into()),
                        "must be specified for an update",
                    )],
                ));
            }
            Some(rv) if Some(&rv) != meta(&current, "resourceVersion").as_ref() => {
                return Err(ApiError::conflict(rt, name));
            }
            _ => {}
        }
        if meta(&body, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "the name of the object does not match the name on the URL",
            ));
        }
        self.commit(rt, current, body, status_only, "Update")
    }

    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        kind: PatchType,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let current = match self.get(rt, ns, name) {
            Ok(c) => c,
            Err(e) if kind == PatchType::Apply && e.code == 404 => {
                let mut obj = patch.clone();
                set_meta(&mut obj, "name", json!(name));
                return self.create(rt, ns, obj);
            }
            Err(e) => return Err(e),
        };
        let patched = match kind {
            PatchType::Merge | PatchType::Apply => {
                let mut doc = current.clone();
                merge_patch(&mut doc, patch);
                doc
            }
            PatchType::Json => json_patch(&current, patch).map_err(|e| match e {
                PatchError::Malformed(m) => ApiError::bad_request(m),
                // kube-apiserver answers a patch that does not apply (a failed `test`, a missing
                // path) with a generic 422 that drops the patch library's text
                // (`NewGenericServerResponse(422, ...)` in `endpoints/handlers/patch.go`,
                // apimachinery `api/errors/errors.go`): only this message tells it apart from a
                // validation failure, whose message names the object ("... is invalid: ...").
                PatchError::Failed(m) => {
                    tracing::debug!("JSON patch not applied: {m}");
                    ApiError::new(422, "Invalid", crate::guard::PATCH_NOT_APPLIED)
                }
            })?,
        };
        if meta(&patched, "resourceVersion") != meta(&current, "resourceVersion") {
            return Err(ApiError::conflict(rt, name));
        }
        let operation = if kind == PatchType::Apply {
            "Apply"
        } else {
            "Update"
        };
        self.commit(rt, current, patched, status_only, operation)
    }

    /// Applies a write: keeps what clients cannot change, moves generation and resourceVersion only
    /// when something changed, and completes a deletion once the last finalizer is gone.
    fn commit(
        &mut self,
        rt: &ResourceType,
        current: Value,
        mut new: Value,
        status_only: bool,
        operation: &'static str,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        let name = meta(&current, "name").unwrap_or_default();
        if status_only {
            let status = new.get("status").cloned();
            new = current.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        } else if rt.status_subresource {
            match current.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        new["apiVersion"] = json!(rt.api_version());
        new["kind"] = json!(rt.kind);
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
            "resourceVersion",
        ] {
            match current.pointer(&format!("/metadata/{field}")) {
                Some(v) => set_meta(&mut new, field, v.clone()),
                None => {
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove(field);
                    }
                }
            }
        }
        if current.pointer("/metadata/deletionTimestamp").is_some() {
            let (old_f, new_f) = (finalizers(&current), finalizers(&new));
            if new_f.iter().any(|f| !old_f.contains(f)) {
                return Err(ApiError::invalid(
                    rt,
                    &name,
                    vec![FieldError::forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted",
                    )],
                ));
            }
        }
        self.admit(rt, &mut new, Some(&current))?;
        // The server's managed fields, never the client's.
        match current.pointer("/metadata/managedFields") {
            Some(m) => set_meta(&mut new, "managedFields", m.clone()),
            None => {
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("managedFields");
                }
            }
        }
        if new == current {
            // A write that changes nothing is not persisted; resourceVersion stays.
            return Ok(current);
        }
        let writer = Writer {
            manager: self.manager.clone(),
            operation,
        };
        let subresource = if status_only { "status" } else { "" };
        stamp(
            &mut new,
            Some(&current),
            &writer,
            &rt.api_version(),
            subresource,
            &self.now(),
        );
        if !same_spec_part(&new, &current, rt) {
            let generation = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            set_meta(&mut new, "generation", json!(generation + 1));
        }
        let key = Self::key(rt, &meta(&current, "namespace").unwrap_or_default(), &name);
        let rv = self.next_revision();
        set_meta(&mut new, "resourceVersion", json!(rv));
        if new.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty() {
            self.remove(&key, to_storage(rt, new.clone()));
            let uid = meta(&new, "uid").unwrap_or_default();
            let propagation = self
                .pending_propagation
                .remove(&uid)
                .unwrap_or(Propagation::Background);
            self.collect_dependents(&uid, propagation);
            return Ok(new);
        }
        let stored = to_storage(rt, new);
        self.put(key, stored.clone());
        Ok(from_storage(rt, stored))
    }

    /// DELETE: immediate without finalizers, otherwise marks the object and waits for them.
    /// Returns the object, and whether it is gone.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Value, bool), ApiError> {
        let current = self.get(rt, ns, name)?;
        let uid = meta(&current, "uid").unwrap_or_default();
        if opts.precondition_uid.as_ref().is_some_and(|u| *u != uid)
            || opts
                .precondition_resource_version
                .as_ref()
                .is_some_and(|rv| Some(rv) != meta(&current, "resourceVersion").as_ref())
        {
            return Err(ApiError::conflict(rt, name));
        }
        let propagation = opts.propagation.unwrap_or(Propagation::Background);
        let key = Self::key(rt, ns, name);
        if propagation == Propagation::Orphan {
            self.orphan_dependents(&uid);
        }
        if !finalizers(&current).is_empty() {
            if current.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok((current, false));
            }
            let mut marked = current;
            set_meta(&mut marked, "deletionTimestamp", json!(self.now()));
            // rest.BeforeDelete: setting deletionTimestamp moves the generation.
            if let Some(g) = marked
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
            {
                set_meta(&mut marked, "generation", json!(g + 1));
            }
            set_meta(&mut marked, "deletionGracePeriodSeconds", json!(0));
            let rv = self.next_revision();
            set_meta(&mut marked, "resourceVersion", json!(rv));
            self.put(key, to_storage(rt, marked.clone()));
            self.pending_propagation.insert(uid, propagation);
            return Ok((marked, false));
        }
        // A deletion is a write of its own: the real storage gives it a revision, which the
        // deleted object carries in the watch event that tells of it.
        let rv = self.next_revision();
        let mut last = current.clone();
        set_meta(&mut last, "resourceVersion", json!(rv));
        self.remove(&key, to_storage(rt, last));
        self.collect_dependents(&uid, propagation);
        Ok((current, true))
    }

    fn dependents_of(&self, uid: &str) -> Vec<Key> {
        self.objects
            .iter()
            .filter(|(_, obj)| {
                obj.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn remove_owner_ref(&mut self, key: &Key, uid: &str) {
        let rv = self.next_revision();
        if let Some(mut obj) = self.objects.get(key).map(|o| (**o).clone()) {
            if let Some(refs) = obj
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r["uid"] != uid);
            }
            set_meta(&mut obj, "resourceVersion", json!(rv));
            self.put(key.clone(), obj);
        }
    }

    fn orphan_dependents(&mut self, uid: &str) {
        for key in self.dependents_of(uid) {
            self.remove_owner_ref(&key, uid);
        }
    }

    /// The garbage collector: a dependent whose owners are all gone is deleted (waiting for its own
    /// finalizers); one with another live owner only loses the dangling reference.
    fn collect_dependents(&mut self, uid: &str, propagation: Propagation) {
        if propagation == Propagation::Orphan {
            self.orphan_dependents(uid);
            return;
        }
        for key in self.dependents_of(uid) {
            let Some(obj) = self.objects.get(&key).map(|o| (**o).clone()) else {
                continue;
            };
            let other_owner_alive = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|r| r["uid"] != uid)
                .any(|r| {
                    self.objects
                        .values()
                        .any(|o| o.pointer("/metadata/uid") == Some(&r["uid"]))
                });
            if other_owner_alive {
                self.remove_owner_ref(&key, uid);
                continue;
            }
            let Some(rt) = self
                .types
                .iter()
                .find(|t| t.group == key.0 && t.plural == key.1)
                .cloned()
            else {
                continue;
            };
            // Errors cannot happen here: the object exists and no precondition is set.
            let _ = self.delete(&rt, &key.2, &key.3, &DeleteOptions::default());
        }
    }
}
