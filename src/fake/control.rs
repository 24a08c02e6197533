//! What tests steer and observe on the fake server: the request log, injected faults, and the
//! authorizer (allow-all by default; RBAC plugs in here).

use std::time::Duration;

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, or `discovery`.
    pub verb: String,
    pub group: String,
    /// Plural resource name (`clusterprofiles`), empty for discovery.
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub user: String,
    pub code: u16,
    pub content_type: Option<String>,
    /// Size of the response body.
    pub bytes: usize,
    /// When the request arrived.
    pub at: std::time::Instant,
}

impl RequestRecord {
    /// What the authorizer decides on.
    pub fn attributes(&self) -> Attributes {
        Attributes {
            user: self.user.clone(),
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
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP code and a matching `Status` body (409, 500, 503, …).
    Status(u16),
    /// Hold the request this long before answering normally (a hung server).
    Hang(Duration),
}

/// Lets `skip` matching requests through, then applies `action` to the next `times` (all, if None).
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub matcher: RequestMatcher,
    pub skip: usize,
    pub times: Option<usize>,
    pub action: FaultAction,
    pub(crate) seen: usize,
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
        }
    }

    /// Counts the request and says whether the fault fires for it.
    pub(crate) fn fires(&mut self, r: &RequestRecord) -> bool {
        if !self.matcher.matches(r) {
            return false;
        }
        self.seen += 1;
        self.seen > self.skip && self.times.is_none_or(|t| self.seen <= self.skip + t)
    }
}
