//! A connection to the API server that could not be made, named as kubectl names it.
//!
//! kube reports a refused connection as `client error (Connect)` around `Connection refused (os
//! error 111)`, without the server: the person reading it must guess which kubeconfig, context
//! and address were in use. This layer, innermost in a client's stack, knows the server it sends
//! to and turns every failure to connect (refused, a host name that does not resolve, a TLS
//! handshake refused, a connect timeout) into [`Unreachable`], whose text is kubectl's: `The
//! connection to the server 127.0.0.1:6443 was refused - did you specify the right host or
//! port?`. [`super::retry`] decides from it what to retry: within a pass's deadline, a pass tries
//! again (an API server restarting comes back within seconds); a person's command does not.

use futures::future::BoxFuture;
use std::error::Error as StdError;
use std::task::{Context, Poll};
use tower::{BoxError, Service};

/// Why the connection could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Nothing listens at the address (ECONNREFUSED).
    Refused,
    /// The host name does not resolve.
    UnknownHost,
    /// Anything else while connecting: a timeout, a TLS handshake that failed.
    Other,
}

/// A failure to connect to `server` (`host:port`, as the kubeconfig's URL gives it).
#[derive(Debug)]
pub struct Unreachable {
    pub server: String,
    pub why: Why,
    source: BoxError,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.why {
            Why::Refused => write!(
                f,
                "The connection to the server {} was refused - did you specify the right host or port?",
                self.server
            ),
            Why::UnknownHost => write!(
                f,
                "Unable to connect to the server {}: no such host ({})",
                self.server,
                innermost(&*self.source)
            ),
            Why::Other => write!(
                f,
                "Unable to connect to the server {}: {}",
                self.server,
                innermost(&*self.source)
            ),
        }
    }
}

impl StdError for Unreachable {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

fn chain<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |c: &&'a (dyn StdError + 'static)| (*c).source())
}

fn innermost(e: &(dyn StdError + 'static)) -> String {
    chain(e).last().map(|c| c.to_string()).unwrap_or_default()
}

/// Whether `e` is a failure to connect, and which. hyper-util's connector names its failures
/// (`ConnectError`: "tcp connect error", "dns error", in hyper-util 0.1
/// `src/client/legacy/connect/http.rs`), and its client marks them (`Error::is_connect`); a
/// refusal is the OS's ECONNREFUSED underneath.
pub fn classify(e: &(dyn StdError + 'static)) -> Option<Why> {
    let connecting = chain(e).any(|c| {
        c.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(|h| h.is_connect())
    });
    if !connecting {
        return None;
    }
    if chain(e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    }) {
        return Some(Why::Refused);
    }
    if chain(e).any(|c| c.to_string().starts_with("dns error")) {
        return Some(Why::UnknownHost);
    }
    Some(Why::Other)
}

/// The `Unreachable` in `e`'s chain, if any.
pub fn find<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a Unreachable> {
    chain(e).find_map(|c| c.downcast_ref::<Unreachable>())
}

/// The server as kubectl names it: the URL's host and port.
pub fn server_of(url: &http::Uri) -> String {
    url.authority()
        .map(|a| a.to_string())
        .unwrap_or_else(|| url.to_string())
}

/// Wraps a client's service: its connect failures become [`Unreachable`] for `server`.
#[derive(Clone)]
pub struct Named<S> {
    pub inner: S,
    pub server: std::sync::Arc<str>,
}

impl<S, Req> Service<Req> for Named<S>
where
    S: Service<Req, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let fut = self.inner.call(req);
        let server = self.server.clone();
        Box::pin(async move {
            fut.await.map_err(|e| match classify(&*e) {
                Some(why) => Box::new(Unreachable {
                    server: server.to_string(),
                    why,
                    source: e,
                }) as BoxError,
                None => e,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_the_url_s_host_and_port() {
        assert_eq!(
            server_of(&"https://127.0.0.1:6443".parse().unwrap()),
            "127.0.0.1:6443"
        );
        assert_eq!(
            server_of(&"https://api.example.com/".parse().unwrap()),
            "api.example.com"
        );
    }

    #[test]
    fn kubectl_s_texts() {
        let e = Unreachable {
            server: "127.0.0.1:6443".into(),
            why: Why::Refused,
            source: "Connection refused (os error 111)".into(),
        };
        assert_eq!(
            e.to_string(),
            "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"
        );
        let e = Unreachable {
            server: "nope.invalid:6443".into(),
            why: Why::UnknownHost,
            source: "failed to lookup address information: Name or service not known".into(),
        };
        assert_eq!(
            e.to_string(),
            "Unable to connect to the server nope.invalid:6443: no such host (failed to lookup address information: Name or service not known)"
        );
    }
}
