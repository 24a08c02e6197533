//! What keeps the dashboard from acting for anyone but the person who started it, with their
//! kubeconfig identity:
//!
//! * **Host**: a request whose `Host` is not the served address is refused, so a page of another
//!   site whose name is made to resolve to 127.0.0.1 (DNS rebinding) reads and does nothing.
//! * **Origin**: a request that says it comes from another origin is refused, and a request that
//!   changes something must say it comes from the served one (browsers send `Origin` on every
//!   POST).
//! * **Session**: the URL printed at start carries a random token; opening it sets an `HttpOnly`,
//!   `SameSite=Strict` cookie, without which nothing but the login and the static assets is
//!   served (other local users and processes can reach a loopback port too).
//! * **Token**: every request that changes something carries a second per-session token, which
//!   only the served pages hold (in a `<meta>`), in the `X-Promoter-Token` header.
//! * **Headers**: a strict Content-Security-Policy (no inline script or style, nothing from
//!   elsewhere, no framing), `nosniff`, no referrer, no caching of pages.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// Every page and answer carries this policy: scripts, styles, images and connections from the
/// served origin only; no inline code; no plugins, frames or form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The header that carries the per-session token on every mutating request.
pub const TOKEN_HEADER: &str = "x-promoter-token";

/// A random secret: 32 bytes from the operating system, as hex.
pub fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal in time independent of where they differ (a token compared byte by byte would leak its
/// prefix through timing).
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The session's secrets and the addresses it answers to.
#[derive(Clone, Debug)]
pub struct Guard {
    /// `Host` values accepted: `127.0.0.1:PORT`, `localhost:PORT`, … (lowercase).
    pub hosts: Vec<String>,
    /// Opens the session (`/login?token=…`), then is its cookie.
    pub session: String,
    /// What mutating requests carry in [`TOKEN_HEADER`].
    pub csrf: String,
    /// The cookie's name: one per port, so two dashboards on one host keep their sessions.
    pub cookie: String,
}

impl Guard {
    /// For a server bound to `addr`: the loopback names of it, and `extra` hosts (`--allow-host`).
    pub fn new(addr: SocketAddr, extra: &[String]) -> anyhow::Result<Guard> {
        let port = addr.port();
        let mut hosts = vec![match addr {
            SocketAddr::V4(a) => format!("{}:{port}", a.ip()),
            SocketAddr::V6(a) => format!("[{}]:{port}", a.ip()),
        }];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{port}"));
        }
        for h in extra {
            let h = h.to_ascii_lowercase();
            hosts.push(if h.contains(':') && !h.ends_with(']') {
                h
            } else {
                format!("{h}:{port}")
            });
        }
        hosts.dedup();
        Ok(Guard {
            hosts,
            session: random_token()?,
            csrf: random_token()?,
            cookie: format!("promoter_session_{port}"),
        })
    }

    /// The URL that opens a session (printed at start).
    pub fn login_url(&self) -> String {
        format!(
            "http://{}/login?token={}",
            self.hosts.first().map(String::as_str).unwrap_or_default(),
            self.session
        )
    }

    pub fn host_allowed(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| self.hosts.iter().any(|a| a == &h.to_ascii_lowercase()))
    }

    /// `Origin` absent (a same-origin GET), or `http://` one of the served hosts.
    pub fn origin_allowed(&self, headers: &HeaderMap, required: bool) -> bool {
        match headers.get(header::ORIGIN).map(|o| o.to_str()) {
            None => !required,
            Some(Ok(origin)) => origin
                .to_ascii_lowercase()
                .strip_prefix("http://")
                .is_some_and(|h| self.hosts.iter().any(|a| a == h)),
            Some(Err(_)) => false,
        }
    }

    pub fn has_session(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(name, value)| name == self.cookie && same_secret(value, &self.session))
    }

    pub fn has_token(&self, headers: &HeaderMap) -> bool {
        headers
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| same_secret(v, &self.csrf))
    }

    /// The `Set-Cookie` that opens the session.
    pub fn session_cookie(&self) -> String {
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie, self.session
        )
    }
}

fn refused(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

/// Paths served without a session: the login, and the assets (the same for everyone).
fn public(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/")
}

/// Checks every request as the module docs say, and adds the security headers to every answer.
pub async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let headers = request.headers();
    let mutating = !matches!(*request.method(), Method::GET | Method::HEAD);
    let path = request.uri().path().to_string();
    let mut response = if !guard.host_allowed(headers) {
        refused(
            StatusCode::FORBIDDEN,
            "refused: the Host header is not the address this dashboard serves",
        )
    } else if !guard.origin_allowed(headers, mutating) {
        refused(
            StatusCode::FORBIDDEN,
            "refused: a request from another origin (or a change without an Origin)",
        )
    } else if !public(&path) && !guard.has_session(headers) {
        refused(
            StatusCode::UNAUTHORIZED,
            "no session: open the URL that `promoter dashboard` printed (it carries this session's token)",
        )
    } else if mutating && !guard.has_token(headers) {
        refused(
            StatusCode::FORBIDDEN,
            "refused: a change without this session's token",
        )
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !path.starts_with("/assets/") {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn guard() -> Guard {
        Guard::new("127.0.0.1:3180".parse().unwrap(), &[]).unwrap()
    }

    #[test]
    fn only_the_served_address_is_a_host() {
        let g = guard();
        assert!(g.host_allowed(&headers(&[("host", "127.0.0.1:3180")])));
        assert!(g.host_allowed(&headers(&[("host", "LOCALHOST:3180")])));
        for bad in [
            "evil.example:3180",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost",
        ] {
            assert!(!g.host_allowed(&headers(&[("host", bad)])), "{bad}");
        }
        assert!(!g.host_allowed(&HeaderMap::new()));
        let v6 = Guard::new("[::1]:9000".parse().unwrap(), &["dash.internal".into()]).unwrap();
        assert_eq!(
            v6.hosts,
            ["[::1]:9000", "localhost:9000", "dash.internal:9000"]
        );
        // Not loopback: only the address itself and what was allowed.
        let lan = Guard::new("10.1.2.3:9000".parse().unwrap(), &[]).unwrap();
        assert_eq!(lan.hosts, ["10.1.2.3:9000"]);
    }

    #[test]
    fn origins() {
        let g = guard();
        assert!(g.origin_allowed(&HeaderMap::new(), false));
        assert!(!g.origin_allowed(&HeaderMap::new(), true));
        assert!(g.origin_allowed(&headers(&[("origin", "http://127.0.0.1:3180")]), true));
        for bad in [
            "http://evil.example",
            "https://127.0.0.1:3180",
            "http://127.0.0.1:3181",
            "null",
        ] {
            assert!(
                !g.origin_allowed(&headers(&[("origin", bad)]), false),
                "{bad}"
            );
        }
    }

    #[test]
    fn sessions_and_tokens() {
        let g = guard();
        assert_eq!(g.session.len(), 64);
        assert_ne!(g.session, g.csrf);
        assert_ne!(g.session, guard().session);
        let cookie = format!("other=1; {}={}", g.cookie, g.session);
        assert!(g.has_session(&headers(&[("cookie", &cookie)])));
        let wrong = format!("{}={}", g.cookie, g.csrf);
        assert!(!g.has_session(&headers(&[("cookie", &wrong)])));
        let other_port = format!("promoter_session_1={}", g.session);
        assert!(!g.has_session(&headers(&[("cookie", &other_port)])));
        assert!(g.has_token(&headers(&[(TOKEN_HEADER, &g.csrf)])));
        assert!(!g.has_token(&headers(&[(TOKEN_HEADER, &g.session)])));
        assert!(!g.has_token(&HeaderMap::new()));
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
