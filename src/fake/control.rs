//! What tests steer and observe on the fake server: the request log, injected faults, and the
//! authorizer (allow-all by default; RBAC plugs in here).

use std::time::Duration;

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// The query string, percent-decoded (`labelSelector=…&limit=…`).
    pub query: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, or `discovery`.
    pub verb: String,
    pub group: String,
    /// Plural resource name (`clusterprofiles`), empty for discovery.
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Who the request authenticated as (after impersonation).
    pub user: String,
    /// The user's groups (`system:authenticated` and the like included).
    pub groups: Vec<String>,
    pub code: u16,
    pub content_type: Option<String>,
    /// Size of the response body.
    pub bytes: usize,
    /// When the request arrived.
    pub at: std::time::Instant,
    /// From arrival to the response body being ready (store, serialisation, compression): the
    /// server's share of a pass's wall time in benchmarks, where the fake runs in the same process.
    pub served: std::time::Duration,
}

impl RequestRecord {
    /// What the authorizer decides on.
    pub fn attributes(&self) -> Attributes {
        Attributes {
            user: self.user.clone(),
            groups: self.groups.clone(),
            verb: self.verb.clone(),
            group: self.group.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The attributes RBAC decides on, as the real authorizer receives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

pub trait Authorizer: Send + Sync {
    /// `Err(reason)` forbids the request (403).
    fn authorize(&self, attrs: &Attributes) -> Result<(), String>;
}

pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize(&self, _: &Attributes) -> Result<(), String> {
        Ok(())
    }
}

/// Which requests a fault applies to; empty fields match anything.
#[derive(Clone, Debug, Default)]
pub struct RequestMatcher {
    pub verbs: Vec<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub name: Option<String>,
    /// The client (user) the fault applies to: faults are per client, as on a real network.
    pub user: Option<String>,
    /// The exact URL path (`/apis/cluster.x-k8s.io/v1beta1`): how a discovery request, which has
    /// no resource, is named.
    pub path: Option<String>,
}

impl RequestMatcher {
    pub fn any() -> Self {
        Self::default()
    }
    pub fn writes() -> Self {
        Self::verbs(&["create", "update", "patch", "delete", "deletecollection"])
    }
    pub fn verbs(verbs: &[&str]) -> Self {
        RequestMatcher {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Self::default()
        }
    }
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }
    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(sub.into());
        self
    }
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }
    /// Discovery of one group version: the `/apis/{group}/{version}` request kube's
    /// `discovery::group` makes after `/apis` (kube-client 5.0.0 src/discovery/oneshot.rs
    /// `group` → `ApiGroup::query_apis` → `Client::list_api_group_resources`, one per version
    /// `/apis` lists).
    pub fn discovery(group_version: &str) -> Self {
        RequestMatcher {
            path: Some(format!("/apis/{group_version}")),
            ..Self::verbs(&["discovery"])
        }
    }

    pub fn matches(&self, r: &RequestRecord) -> bool {
        (self.verbs.is_empty() || self.verbs.contains(&r.verb))
            && self.resource.as_ref().is_none_or(|x| *x == r.resource)
            && self
                .subresource
                .as_ref()
                .is_none_or(|x| Some(x) == r.subresource.as_ref())
            && self
                .name
                .as_ref()
                .is_none_or(|x| Some(x) == r.name.as_ref())
            && self.user.as_ref().is_none_or(|x| *x == r.user)
            && self.path.as_ref().is_none_or(|x| *x == r.path)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP code and a matching `Status` body (409, 500, 503, …).
    Status(u16),
    /// Hold the request this long, then apply it and answer (a hung server). With a client
    /// timeout shorter than this, it is a write applied late: after the client gave up, and after
    /// whatever the client (or another) did next.
    Hang(Duration),
    /// Drop the connection before the request is applied (connection reset before the write).
    /// Logged with code 499.
    ResetBefore,
    /// Apply the request, then drop the connection: the write happened, its answer is lost.
    ResetAfter,
    /// Apply the request, then answer only after this delay: past the client's timeout, the
    /// client sees a timeout for a write that happened.
    AnswerAfter(Duration),
    /// Answer 504 at once, as the real API server does when storage is slow ("the request did not
    /// complete within the allowed duration"), and apply the request this long after: a commit
    /// that lands after its answer, and after whatever the client did next.
    LateCommit(Duration),
    /// Send the status and headers at once, then the body in a few pieces, this long apart: with
    /// a client read timeout shorter than this, the answer breaks off midway.
    SlowBody(Duration),
    /// Compact the storage just before serving the request ([`crate::fake::Store::compact`]): a
    /// list continued with a token issued before is answered 410 Expired.
    Compact,
    /// Answer with this error instead of serving the request, as the real server would answer
    /// it (a 422 `Invalid` with its exact text, a 410 `Expired`, …).
    Answer(super::api_error::ApiError),
    /// Serve a list, its last page with an explicit `"continue": ""`: kube-apiserver omits an
    /// empty token (`ListMeta.Continue` is `omitempty`), a proxy that re-encodes the answer
    /// without `omitempty` does not.
    EmptyContinue,
}

/// Lets `skip` matching requests through, then applies `action` to the next `times` (all, if None).
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub matcher: RequestMatcher,
    pub skip: usize,
    pub times: Option<usize>,
    pub action: FaultAction,
    pub(crate) seen: usize,
    /// Fires on a matching request only with this probability, drawn from `rng` (seeded).
    pub probability: Option<f64>,
    pub(crate) rng: u64,
}

impl FaultRule {
    /// Fails only the n-th (1-based) matching request.
    pub fn nth(matcher: RequestMatcher, n: usize, action: FaultAction) -> Self {
        FaultRule {
            matcher,
            skip: n.saturating_sub(1),
            times: Some(1),
            action,
            seen: 0,
            probability: None,
            rng: 0,
        }
    }
    /// Fails every matching request after the first `k`.
    pub fn after(matcher: RequestMatcher, k: usize, action: FaultAction) -> Self {
        FaultRule {
            matcher,
            skip: k,
            times: None,
            action,
            seen: 0,
            probability: None,
            rng: 0,
        }
    }

    /// Fires on each matching request with `probability`, from a generator seeded with `seed`:
    /// the same requests in the same order meet the same faults.
    pub fn random(
        matcher: RequestMatcher,
        probability: f64,
        seed: u64,
        action: FaultAction,
    ) -> Self {
        FaultRule {
            matcher,
            skip: 0,
            times: None,
            action,
            seen: 0,
            probability: Some(probability),
            rng: seed,
        }
    }

    /// splitmix64: small, seeded, good enough to spread faults.
    fn draw(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Counts the request and says whether the fault fires for it.
    pub(crate) fn fires(&mut self, r: &RequestRecord) -> bool {
        if !self.matcher.matches(r) {
            return false;
        }
        self.seen += 1;
        let counted =
            self.seen > self.skip && self.times.is_none_or(|t| self.seen <= self.skip + t);
        match self.probability {
            Some(p) => counted && self.draw() < p,
            None => counted,
        }
    }
}
