//! HTTP front of the fake API server: URL routing, verbs, content types, discovery and `Status`
//! bodies, as kube's client expects them from a real API server.

use super::Shared;
use super::api_error::ApiError;
use super::control::{Attributes, FaultAction, RequestRecord};
use super::resource_type::ResourceType;
use super::store::{DeleteOptions, FieldRequirement, ListOptions, PatchType, Propagation};
use crate::labels::parse_selector;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

type Reply = (u16, Value);

/// A response body: whole, or trickled ([`FaultAction::SlowBody`]).
pub(crate) type FakeBody = http_body_util::Either<
    Full<Bytes>,
    http_body_util::StreamBody<
        futures::stream::BoxStream<'static, Result<hyper::body::Frame<Bytes>, std::io::Error>>,
    >,
>;

pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<Response<FakeBody>, std::io::Error>
where
    B: hyper::body::Body,
    B::Error: std::fmt::Display,
{
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let (code, value) = status_body(&ApiError::bad_request(format!("reading body: {e}")));
            return Ok(
                respond(code, serde_json::to_vec(&value).unwrap_or_default(), true)
                    .map(http_body_util::Either::Left),
            );
        }
    };
    let path = parts.uri.path().to_string();
    let mut query = parse_query(parts.uri.query().unwrap_or_default());
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    // The field manager of a write: `fieldManager`, else the User-Agent's product (managedFields).
    if !query.contains_key("fieldManager") {
        let agent = header("user-agent").unwrap_or_default();
        query.insert(
            "fieldManager".into(),
            super::managed_fields::manager_from_user_agent(&agent),
        );
    }
    let authenticated = header("authorization")
        .and_then(|h| h.strip_prefix("Bearer ").map(String::from))
        .unwrap_or_else(|| "system:anonymous".into());
    let impersonated_groups: Vec<String> = parts
        .headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let requester = Identity::authenticated(&shared, authenticated);
    let (identity, denied) = match impersonate(
        &shared,
        &requester,
        header("impersonate-user"),
        impersonated_groups,
    ) {
        Ok(impersonated) => (impersonated.unwrap_or(requester), None),
        Err(e) => (requester, Some(e)),
    };
    let Identity { user, groups } = identity;
    let content_type =
        header("content-type").map(|c| c.split(';').next().unwrap_or_default().trim().to_string());
    let target = route(&path);
    let verb = verb_of(&parts.method, &target, &query);
    let mut record = RequestRecord {
        method: parts.method.to_string(),
        path: path.clone(),
        query: percent_decode(parts.uri.query().unwrap_or_default()).unwrap_or_default(),
        verb: verb.clone(),
        group: target.as_ref().map(|t| t.group.clone()).unwrap_or_default(),
        resource: target
            .as_ref()
            .map(|t| t.plural.clone())
            .unwrap_or_default(),
        subresource: target.as_ref().and_then(|t| t.subresource.clone()),
        namespace: target.as_ref().and_then(|t| t.namespace.clone()),
        name: target.as_ref().and_then(|t| t.name.clone()),
        user: user.clone(),
        groups,
        code: 0,
        content_type: content_type.clone(),
        bytes: 0,
        at: std::time::Instant::now(),
        served: std::time::Duration::ZERO,
    };

    // A watch is a stream, served on its own ([`super::watch`]).
    if verb == "watch"
        && denied.is_none()
        && let Some(t) = &target
    {
        return Ok(super::watch::serve(&shared, t, &query, record));
    }
    let fault = {
        let mut faults = shared.faults.lock().unwrap_or_else(|p| p.into_inner());
        faults
            .iter_mut()
            .find_map(|f| f.fires(&record).then(|| f.action.clone()))
    };
    if fault == Some(FaultAction::ResetBefore) {
        record.code = 499;
        return Err(reset(&shared, record));
    }
    // A refused impersonation is answered before anything else is looked at.
    let (code, value) = if let Some(e) = &denied {
        status_body(e)
    } else {
        match fault {
            Some(FaultAction::Status(code)) => status_body(&injected(code)),
            Some(FaultAction::Answer(ref e)) => status_body(e),
            Some(FaultAction::LateCommit(d)) => {
                let (shared, method, attrs) =
                    (shared.clone(), parts.method.clone(), record.attributes());
                let (path, target, query, content_type, body) = (
                    path.clone(),
                    target.clone(),
                    query.clone(),
                    content_type.clone(),
                    body.clone(),
                );
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    dispatch(
                        &shared,
                        &method,
                        &path,
                        target.as_ref(),
                        &attrs,
                        &query,
                        content_type.as_deref(),
                        &body,
                    );
                });
                status_body(&injected(504))
            }
            ref other => {
                match other {
                    Some(FaultAction::Hang(d)) => tokio::time::sleep(*d).await,
                    Some(FaultAction::Compact) => shared
                        .store
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .compact(),
                    _ => {}
                }
                dispatch(
                    &shared,
                    &parts.method,
                    &path,
                    target.as_ref(),
                    &record.attributes(),
                    &query,
                    content_type.as_deref(),
                    &body,
                )
            }
        }
    };
    record.code = code;
    let mut value = value;
    if fault == Some(FaultAction::EmptyContinue)
        && let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.entry("continue").or_insert_with(|| json!(""));
    }
    match fault {
        Some(FaultAction::ResetAfter) => return Err(reset(&shared, record)),
        Some(FaultAction::AnswerAfter(d)) => tokio::time::sleep(d).await,
        _ => {}
    }
    // Serialised once: its size on the wire goes to the request log ("bytes read" in benchmarks).
    // A string is a plain-text answer (the real server's "404 page not found").
    let (body, json) = match value {
        Value::String(text) => (text.into_bytes(), false),
        value => (serde_json::to_vec(&value).unwrap_or_default(), true),
    };
    let accepts_gzip = header("accept-encoding").is_some_and(|v| {
        v.split(',')
            .any(|e| e.split(';').next().is_some_and(|e| e.trim() == "gzip"))
    });
    let (body, gzipped) = compress(body, accepts_gzip);
    record.bytes = body.len();
    record.served = record.at.elapsed();
    shared
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(record);
    let mut response = match fault {
        Some(FaultAction::SlowBody(d)) => slow(code, body, d),
        _ => respond(code, body, json).map(http_body_util::Either::Left),
    };
    if gzipped {
        response.headers_mut().insert(
            http::header::CONTENT_ENCODING,
            http::HeaderValue::from_static("gzip"),
        );
    }
    Ok(response)
}

/// The real API server gzips a response when the client accepts it and the body exceeds 128 KiB
/// (kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go,
/// `defaultGzipThresholdBytes`; feature gate APIResponseCompression, on by default), at level 1
/// (same file, `defaultGzipContentEncodingLevel`, lowered from 4 in kubernetes/kubernetes#112296):
/// the bytes on the wire and the server's CPU are those of Go's fastest level ([`GZIP_LEVEL`]).
const GZIP_THRESHOLD: usize = 128 * 1024;

/// Go's level 1 (`compress/flate` `BestSpeed`, the `compress/gzip` writer of the file above) and
/// flate2's level 1 are different algorithms: on the same bytes, pages of the fleet benchmark's
/// lists (docs: Benchmarks, Fleet scale), Go's made 212,581 bytes of a 5.26 MB page of
/// ClusterSummaries where flate2's level 1 (miniz_oxide's fast path) made 307,120 (+44 %). Of
/// flate2's levels, 2 comes nearest, in bytes and in CPU (50 ms against Go's 23–40 ms for that
/// page): +4 to +5 % on pages of ClusterSummaries, −6 to −7 % on the smaller lists (profiles,
/// promotions, clusters), about +3.5 % over a steady pass's lists. Measured with Go 1.19 and
/// flate2 1.1.11, 2026-11-28.
const GZIP_LEVEL: u32 = 2;

fn compress(body: Vec<u8>, accepts_gzip: bool) -> (Vec<u8>, bool) {
    use std::io::Write as _;
    if !accepts_gzip || body.len() <= GZIP_THRESHOLD {
        return (body, false);
    }
    let mut encoder =
        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
    match encoder.write_all(&body).and_then(|()| encoder.finish()) {
        Ok(gz) => (gz, true),
        Err(_) => (body, false),
    }
}

/// The body in four pieces, `pause` apart (the first at once).
fn slow(code: u16, body: Vec<u8>, pause: std::time::Duration) -> Response<FakeBody> {
    use futures::StreamExt as _;
    let body = Bytes::from(body);
    let piece = body.len().div_ceil(4).max(1);
    let pieces: Vec<Bytes> = (0..body.len())
        .step_by(piece)
        .map(|i| body.slice(i..(i + piece).min(body.len())))
        .collect();
    let stream = futures::stream::iter(pieces.into_iter().enumerate())
        .then(move |(i, b)| async move {
            if i > 0 {
                tokio::time::sleep(pause).await;
            }
            Ok(hyper::body::Frame::data(b))
        })
        .boxed();
    let (parts, _) = respond(code, Vec::new(), true).into_parts();
    Response::from_parts(
        parts,
        http_body_util::Either::Right(http_body_util::StreamBody::new(stream)),
    )
}

/// Logs the request and drops its connection: hyper closes it when the service fails.
fn reset(shared: &Shared, record: RequestRecord) -> std::io::Error {
    shared
        .log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(record);
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "injected fault: connection reset",
    )
}

fn injected(code: u16) -> ApiError {
    let reason = match code {
        409 => "Conflict",
        404 => "NotFound",
        403 => "Forbidden",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    ApiError::new(code, reason, format!("injected fault: {reason}"))
}

pub(crate) fn respond(code: u16, body: Vec<u8>, json: bool) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(if json {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        }),
    );
    resp
}

pub(crate) fn status_body(e: &ApiError) -> Reply {
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": e.message, "reason": e.reason, "code": e.code,
    });
    if let Some(name) = &e.name {
        status["details"] = json!({"name": name});
    }
    if let Some(token) = &e.continue_token {
        status["metadata"]["continue"] = json!(token);
    }
    if let Some(inv) = &e.invalid {
        let causes: Vec<Value> = inv
            .causes
            .iter()
            .map(|c| json!({"reason": c.kind.reason(), "message": c.body(), "field": c.field}))
            .collect();
        status["details"]["group"] = json!(inv.group);
        status["details"]["kind"] = json!(inv.kind);
        status["details"]["causes"] = json!(causes);
    }
    (e.code, status)
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// `/api/v1/...` and `/apis/{group}/{version}/...`; `None` for discovery paths.
fn route(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return None,
    };
    Some(Target {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        namespace,
        name,
        subresource,
    })
}

fn verb_of(method: &Method, target: &Option<Target>, query: &BTreeMap<String, String>) -> String {
    let Some(t) = target else {
        return "discovery".into();
    };
    let v = match (method.as_str(), t.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    };
    v.into()
}

#[allow(clippy::too_many_arguments)]
fn dispatch(
    shared: &Shared,
    method: &Method,
    path: &str,
    target: Option<&Target>,
    attrs: &Attributes,
    query: &BTreeMap<String, String>,
    content_type: Option<&str>,
    body: &Bytes,
) -> Reply {
    let Some(t) = target else {
        return discovery(shared, path);
    };
    if let Some(reply) = self_review(shared, method, t, attrs, body) {
        return reply;
    }
    let rt = {
        let store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
        store.resource(&t.group, &t.version, &t.plural).cloned()
    };
    let Some(rt) = rt else {
        // A group/version nobody serves is not an API path at all: the real server's mux answers
        // with Go's plain-text NotFound (k8s.io/apiserver's notfoundhandler, http.NotFound), which
        // kube's client cannot parse as a Status; a served group/version without the resource
        // answers with a Status.
        if !group_version_served(shared, &t.group, &t.version) {
            return (404, Value::String("404 page not found\n".into()));
        }
        return status_body(&ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    let authorizer = shared
        .authorizer
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Err(reason) = authorizer.authorize(attrs) {
        return status_body(&forbidden(&rt, attrs, &reason));
    }
    match serve(
        shared,
        method,
        &rt,
        t,
        &attrs.verb,
        query,
        content_type,
        body,
        &attrs.user,
    ) {
        Ok(reply) => reply,
        Err(e) => status_body(&e),
    }
}

/// The reviews, answered as the real API server does: `SelfSubjectAccessReview` (the authorizer's
/// verdict on the spec's attributes for the requester, what `kubectl auth can-i` asks),
/// `SelfSubjectReview` (who the request authenticated as, what `kubectl auth whoami` shows), both
/// granted to everyone by `system:basic-user`, and `SubjectAccessReview` (the verdict for the
/// spec's `user` and exactly its `groups`, granted only where RBAC allows creating one). None is
/// stored.
fn self_review(
    shared: &Shared,
    method: &Method,
    t: &Target,
    attrs: &Attributes,
    body: &Bytes,
) -> Option<Reply> {
    let kind = match (t.group.as_str(), t.plural.as_str()) {
        ("authorization.k8s.io", "selfsubjectaccessreviews") => "SelfSubjectAccessReview",
        ("authentication.k8s.io", "selfsubjectreviews") => "SelfSubjectReview",
        ("authorization.k8s.io", "subjectaccessreviews") => "SubjectAccessReview",
        _ => return None,
    };
    let authorizer = shared
        .authorizer
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    // Creating one is authorized like any create (`system:basic-user` grants it to everyone).
    if let Err(reason) = authorizer.authorize(attrs) {
        let rt = ResourceType::builtin(&t.group, &t.version, kind, &t.plural, false);
        return Some(status_body(&forbidden(&rt, attrs, &reason)));
    }
    if method != Method::POST {
        return Some(status_body(&ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({kind})"),
        )));
    }
    let mut review: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Some(status_body(&ApiError::bad_request(format!(
                "decoding {kind}: {e}"
            ))));
        }
    };
    if kind == "SelfSubjectReview" {
        review["status"] = json!({"userInfo": {"username": attrs.user, "groups": attrs.groups}});
        return Some((201, review));
    }
    let ra = &review["spec"]["resourceAttributes"];
    let text = |f: &str| {
        ra.get(f)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(String::from)
    };
    let (user, groups) = if kind == "SubjectAccessReview" {
        let spec = &review["spec"];
        let groups = spec["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        (
            spec["user"].as_str().unwrap_or_default().to_string(),
            groups,
        )
    } else {
        (attrs.user.clone(), attrs.groups.clone())
    };
    let asked = Attributes {
        user,
        groups,
        verb: text("verb").unwrap_or_default(),
        group: text("group").unwrap_or_default(),
        resource: text("resource").unwrap_or_default(),
        subresource: text("subresource"),
        namespace: text("namespace"),
        name: text("name"),
    };
    review["status"] = match authorizer.authorize(&asked) {
        Ok(()) => json!({"allowed": true}),
        Err(reason) => json!({"allowed": false, "reason": reason}),
    };
    Some((201, review))
}

pub(crate) fn forbidden(rt: &ResourceType, a: &Attributes, reason: &str) -> ApiError {
    let what = match &a.name {
        Some(n) => format!("{} \"{n}\"", rt.group_resource()),
        None => rt.group_resource(),
    };
    let resource = match &a.subresource {
        Some(s) => format!("{}/{s}", a.resource),
        None => a.resource.clone(),
    };
    let scope = match &a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".into(),
    };
    let mut msg = format!(
        "{what} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        a.user, a.verb, a.group
    );
    if !reason.is_empty() {
        msg.push_str(&format!(": {reason}"));
    }
    ApiError {
        name: a.name.clone(),
        ..ApiError::new(403, "Forbidden", msg)
    }
}

fn parse_body(body: &Bytes, content_type: Option<&str>) -> Result<Value, ApiError> {
    if content_type == Some("application/apply-patch+yaml") {
        let text = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
        return serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("invalid YAML: {e}")));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

#[allow(clippy::too_many_arguments)]
fn serve(
    shared: &Shared,
    method: &Method,
    rt: &ResourceType,
    t: &Target,
    verb: &str,
    query: &BTreeMap<String, String>,
    content_type: Option<&str>,
    body: &Bytes,
    user: &str,
) -> Result<Reply, ApiError> {
    if query.get("dryRun").is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by the fake API server",
        ));
    }
    if rt.namespaced != t.namespace.is_some()
        && !(verb == "list" && rt.namespaced)
        && verb != "create"
    {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let status_only = match t.subresource.as_deref() {
        None => false,
        Some("status") if rt.status_subresource => true,
        Some(_) => {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
    };
    let mut store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    let manager = query.get("fieldManager").cloned().unwrap_or_default();
    let result = store.with_manager(&manager, |store| {
        serve_locked(
            store,
            rt,
            t,
            verb,
            query,
            content_type,
            body,
            method,
            &ns,
            &name,
            status_only,
        )
    });
    // Write hooks see every applied write alone, before any other request runs (the lock is held).
    if result.as_ref().is_ok_and(|(code, _)| *code < 300)
        && matches!(verb, "create" | "update" | "patch" | "delete")
    {
        let hooks = shared
            .write_hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for hook in hooks {
            hook(&store, user);
        }
    }
    result
}

/// A list's (or a watch's) selectors and page, from its query.
pub(crate) fn list_options(query: &BTreeMap<String, String>) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        labels: match query.get("labelSelector") {
            Some(s) => parse_selector(s).map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => Vec::new(),
        },
        fields: query
            .get("fieldSelector")
            .map(|s| parse_field_selector(s))
            .transpose()?
            .unwrap_or_default(),
        limit: query.get("limit").and_then(|l| l.parse().ok()),
        continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
    })
}

#[allow(clippy::too_many_arguments)]
fn serve_locked(
    store: &mut super::store::Store,
    rt: &ResourceType,
    t: &Target,
    verb: &str,
    query: &BTreeMap<String, String>,
    content_type: Option<&str>,
    body: &Bytes,
    method: &Method,
    ns: &str,
    name: &str,
    status_only: bool,
) -> Result<Reply, ApiError> {
    let (ns, name) = (ns.to_string(), name.to_string());
    match verb {
        "get" => Ok((200, store.get(rt, &ns, &name)?)),
        "list" => Ok((
            200,
            store.list(rt, t.namespace.as_deref(), &list_options(query)?)?,
        )),
        "create" => {
            if t.name.is_some() {
                return Err(ApiError::new(
                    405,
                    "MethodNotAllowed",
                    "POST is not allowed on a named resource",
                ));
            }
            Ok((201, store.create(rt, &ns, parse_body(body, content_type)?)?))
        }
        "update" => Ok((
            200,
            store.update(rt, &ns, &name, parse_body(body, content_type)?, status_only)?,
        )),
        "patch" => {
            let kind = match content_type {
                Some("application/merge-patch+json") => PatchType::Merge,
                Some("application/json-patch+json") => PatchType::Json,
                Some("application/apply-patch+yaml") => PatchType::Apply,
                Some("application/strategic-merge-patch+json") if !rt.custom => PatchType::Merge,
                other => {
                    return Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        format!(
                            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
                        ),
                    ));
                }
            };
            Ok((
                200,
                store.patch(
                    rt,
                    &ns,
                    &name,
                    kind,
                    &parse_body(body, content_type)?,
                    status_only,
                )?,
            ))
        }
        "delete" => {
            let mut opts = DeleteOptions::default();
            let body_opts: Value = if body.is_empty() {
                Value::Null
            } else {
                parse_body(body, Some("application/json"))?
            };
            let policy = body_opts
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| query.get("propagationPolicy").cloned());
            opts.propagation = match policy.as_deref() {
                None => None,
                Some("Orphan") => Some(Propagation::Orphan),
                Some("Background") => Some(Propagation::Background),
                Some("Foreground") => Some(Propagation::Foreground),
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "unknown propagationPolicy {other:?}"
                    )));
                }
            };
            if body_opts.get("orphanDependents") == Some(&Value::Bool(true)) {
                opts.propagation = Some(Propagation::Orphan);
            }
            opts.precondition_uid = body_opts
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from);
            opts.precondition_resource_version = body_opts
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from);
            let (obj, gone) = store.delete(rt, &ns, &name, &opts)?;
            if gone && !rt.custom {
                return Ok((
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                           "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": obj.pointer("/metadata/uid")}}),
                ));
            }
            Ok((200, obj))
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{method} ({verb}) is not supported by the fake API server"),
        )),
    }
}

/// `a=b,c==d,e!=f` (apimachinery `fields.ParseSelector`; values here are never escaped).
fn parse_field_selector(s: &str) -> Result<Vec<FieldRequirement>, ApiError> {
    s.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let (field, value, not_equal) = if let Some((f, v)) = t.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = t.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = t.split_once('=') {
                (f, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{t}'"
                )));
            };
            Ok(FieldRequirement {
                field: field.trim().to_string(),
                value: value.trim().to_string(),
                not_equal,
            })
        })
        .collect()
}

fn group_version_served(shared: &Shared, group: &str, version: &str) -> bool {
    let store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    store
        .types()
        .iter()
        .any(|t| t.group == group && t.version == version)
}

fn discovery(shared: &Shared, path: &str) -> Reply {
    let store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    let types = store.types();
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let resources = |group: &str, version: &str| -> Vec<Value> {
        let mut out = Vec::new();
        for t in types
            .iter()
            .filter(|t| t.group == group && t.version == version)
        {
            out.push(json!({
                "name": t.plural, "singularName": t.kind.to_lowercase(), "namespaced": t.namespaced, "kind": t.kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update"],
            }));
            if t.status_subresource {
                out.push(json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                                "kind": t.kind, "verbs": ["get", "patch", "update"]}));
            }
        }
        out
    };
    match segs.as_slice() {
        ["version"] => (
            200,
            json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-promoter-fake", "platform": "linux/amd64"}),
        ),
        ["api"] => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] => {
            let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for t in types.iter().filter(|t| !t.group.is_empty()) {
                let versions = groups.entry(&t.group).or_default();
                if !versions.contains(&t.version.as_str()) {
                    versions.push(&t.version);
                }
            }
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(g, vs)| {
                    let versions: Vec<Value> = vs
                        .iter()
                        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                        .collect();
                    json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
                })
                .collect();
            (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        ["api", v] => (
            200,
            json!({"kind": "APIResourceList", "groupVersion": v, "resources": resources("", v)}),
        ),
        ["apis", g, v] if types.iter().any(|t| t.group == *g && t.version == *v) => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{g}/{v}"), "resources": resources(g, v)}),
        ),
        _ => status_body(&ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

/// Who a request is: the user its token names and that user's groups.
struct Identity {
    user: String,
    groups: Vec<String>,
}

impl Identity {
    /// As a token authenticator answers: the user the token names (the fake's tokens are user
    /// names), the groups registered for it ([`super::FakeApiServer::set_groups`]), and the groups
    /// every such user is in.
    fn authenticated(shared: &Shared, user: String) -> Identity {
        let mut groups = shared
            .groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&user)
            .cloned()
            .unwrap_or_default();
        groups.extend(super::rbac::implied_groups(&user));
        Identity { user, groups }
    }
}

/// kubectl's `--as`/`--as-group` (the `Impersonate-User`/`Impersonate-Group` headers), as
/// k8s.io/apiserver's impersonation filter does: the requester needs `impersonate` on each
/// `users`, `serviceaccounts` (in the account's namespace) and `groups` it names, else 403; the
/// request then is the impersonated user, with the groups named, `system:authenticated`, and a
/// service account's own groups when none are named.
fn impersonate(
    shared: &Shared,
    requester: &Identity,
    user: Option<String>,
    groups: Vec<String>,
) -> Result<Option<Identity>, ApiError> {
    let Some(user) = user else {
        return Ok(None);
    };
    let authorizer = shared
        .authorizer
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let sa = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut asked: Vec<(Option<String>, &str, String)> = vec![match sa {
        Some((ns, name)) => (Some(ns.to_string()), "serviceaccounts", name.to_string()),
        None => (None, "users", user.clone()),
    }];
    asked.extend(groups.iter().map(|g| (None, "groups", g.clone())));
    for (namespace, resource, name) in asked {
        let attrs = Attributes {
            user: requester.user.clone(),
            groups: requester.groups.clone(),
            verb: "impersonate".into(),
            group: String::new(),
            resource: resource.into(),
            subresource: None,
            namespace,
            name: Some(name.clone()),
        };
        if let Err(reason) = authorizer.authorize(&attrs) {
            let rt = ResourceType::builtin("", "v1", "", resource, false);
            return Err(forbidden(&rt, &attrs, &reason));
        }
    }
    let mut all = groups.clone();
    if groups.is_empty() && sa.is_some() {
        all.extend(super::rbac::implied_groups(&user));
    } else if !all.iter().any(|g| g == super::rbac::AUTHENTICATED) {
        all.push(super::rbac::AUTHENTICATED.into());
    }
    Ok(Some(Identity { user, groups: all }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let t = route("/apis/config.projectsveltos.io/v1beta1/clusterpromotions/p/status").unwrap();
        assert_eq!(
            (
                t.group.as_str(),
                t.plural.as_str(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            (
                "config.projectsveltos.io",
                "clusterpromotions",
                Some("p"),
                Some("status")
            )
        );
        let t = route("/api/v1/namespaces/dev/secrets/s").unwrap();
        assert_eq!(
            (t.namespace.as_deref(), t.plural.as_str(), t.name.as_deref()),
            (Some("dev"), "secrets", Some("s"))
        );
        let t = route("/api/v1/namespaces/dev").unwrap();
        assert_eq!(
            (t.namespace.as_deref(), t.plural.as_str(), t.name.as_deref()),
            (None, "namespaces", Some("dev"))
        );
        assert!(route("/apis").is_none());
        assert!(route("/apis/g/v").is_none());
    }

    #[test]
    fn query_decoding() {
        let q = parse_query("labelSelector=a%3Db%2Cc%20in%20(x)&limit=5&continue=");
        assert_eq!(q["labelSelector"], "a=b,c in (x)");
        assert_eq!(q["limit"], "5");
        assert_eq!(percent_decode("%zz"), None);
    }

    /// A fault can name one group version's discovery (a CRD removed between `/apis` and
    /// `/apis/{group}/{version}`: 404; a denied discovery: 403), leaving the rest of discovery and
    /// the group's resources alone.
    #[tokio::test]
    async fn a_fault_can_name_one_group_version_s_discovery() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start().await.unwrap();
        server.register(crate::fake::capi_cluster_type());
        server.register(crate::fake::sveltos_cluster_type());
        let client = server.plain_client_as(crate::fake::ADMIN).await.unwrap();
        let capi = || RequestMatcher::discovery("cluster.x-k8s.io/v1beta1");
        let code = |r: kube::Result<()>| match r {
            Err(kube::Error::Api(s)) => s.code,
            Ok(()) => 200,
            Err(e) => panic!("{e}"),
        };
        let discover = |gv: &'static str| {
            let client = client.clone();
            async move { code(client.list_api_group_resources(gv).await.map(|_| ())) }
        };
        let gvk = kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Cluster");
        let clusters = kube::Api::<kube::api::DynamicObject>::all_with(
            client.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusters"),
        );

        server.inject(FaultRule::after(capi(), 0, FaultAction::Status(404)));
        assert_eq!(discover("cluster.x-k8s.io/v1beta1").await, 404);
        assert_eq!(discover("lib.projectsveltos.io/v1beta1").await, 200);
        assert_eq!(code(client.list_api_groups().await.map(|_| ())), 200);
        assert_eq!(
            code(clusters.list(&Default::default()).await.map(|_| ())),
            200
        );
        let faulted: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.code != 200)
            .map(|r| (r.verb, r.path))
            .collect();
        assert_eq!(
            faulted,
            [(
                "discovery".to_string(),
                "/apis/cluster.x-k8s.io/v1beta1".to_string()
            )]
        );

        server.clear_faults();
        server.inject(FaultRule::nth(capi(), 1, FaultAction::Status(403)));
        assert_eq!(discover("cluster.x-k8s.io/v1beta1").await, 403);
        assert_eq!(discover("cluster.x-k8s.io/v1beta1").await, 200);
    }
}
