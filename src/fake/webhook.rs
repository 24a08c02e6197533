//! A notification receiver for tests: HTTP on loopback, recording every request it gets (path,
//! headers, body, and whether it answered 2xx), with faults to inject per path: an error status,
//! a slow answer, an answer that never comes in time, a connection reset before or after the
//! request was recorded (a lost answer: the sender cannot know it arrived).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the receiver does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status (after recording the request).
    Status(u16),
    /// Answer 200 after this long.
    Slow(Duration),
    /// Drop the connection before recording the request (it never arrived).
    ResetBefore,
    /// Record the request, then drop the connection (it arrived; the answer is lost).
    ResetAfter,
}

/// A fault for the requests to paths starting with `path`: the next `times` of them (None: all).
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub path: String,
    pub fault: Fault,
    pub times: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// Answered 2xx: the sender learns it was delivered.
    pub accepted: bool,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    faults: Vec<FaultRule>,
}

/// A running receiver; it stops when dropped.
pub struct WebhookReceiver {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl WebhookReceiver {
    pub async fn start() -> anyhow::Result<WebhookReceiver> {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let (addr, task) = super::serve_loopback(
            "the webhook receiver",
            move |req: hyper::Request<hyper::body::Incoming>| {
                let state = shared.clone();
                async move { handle(state, req).await }
            },
        )
        .await?;
        Ok(WebhookReceiver { state, addr, task })
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn inject(&self, path: &str, fault: Fault, times: Option<usize>) {
        lock(&self.state).faults.push(FaultRule {
            path: path.into(),
            fault,
            times,
        });
    }

    pub fn clear_faults(&self) {
        lock(&self.state).faults.clear();
    }

    pub fn received(&self) -> Vec<Received> {
        lock(&self.state).received.clone()
    }

    pub fn clear(&self) {
        lock(&self.state).received.clear();
    }
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, std::io::Error> {
    let path = req.uri().path().to_string();
    let fault = {
        let mut s = lock(&state);
        let found = s
            .faults
            .iter_mut()
            .find(|f| path.starts_with(&f.path) && f.times.is_none_or(|n| n > 0));
        found.map(|f| {
            if let Some(n) = &mut f.times {
                *n -= 1;
            }
            f.fault.clone()
        })
    };
    let reset = || std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected reset");
    if fault == Some(Fault::ResetBefore) {
        return Err(reset());
    }
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let code = match &fault {
        Some(Fault::Status(c)) => *c,
        _ => 200,
    };
    if let Some(Fault::Slow(d)) = &fault {
        tokio::time::sleep(*d).await;
    }
    lock(&state).received.push(Received {
        path,
        headers,
        body,
        accepted: (200..300).contains(&code) && fault != Some(Fault::ResetAfter),
    });
    if fault == Some(Fault::ResetAfter) {
        return Err(reset());
    }
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"ok")));
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::OK);
    Ok(response)
}
