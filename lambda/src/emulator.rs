//! A loopback emulation of the Lambda Runtime API (`/2018-06-01/runtime/...`), so that tests and
//! benchmarks run the real `bootstrap` as Lambda would: it polls for the next invocation, then posts
//! a response or an error. Invocations are queued by the test; a poll with nothing queued waits.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use promoter::fake::serve_loopback;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Notify;

const PREFIX: &str = "/2018-06-01/runtime";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Response,
    Error,
    InitError,
}

/// What the function posted back.
#[derive(Clone, Debug)]
pub struct Posted {
    pub request_id: String,
    pub outcome: Outcome,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(String, Value)>,
    posted: Vec<Posted>,
    polls: Vec<Instant>,
    issued: u64,
}

struct Shared {
    state: Mutex<State>,
    queued: Notify,
    posted: Notify,
    timeout: Duration,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the other tests' results.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct RuntimeApi {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RuntimeApi {
    /// Starts the emulation on 127.0.0.1 with a free port; invocations get `timeout` to finish.
    pub async fn start(timeout: Duration) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            queued: Notify::new(),
            posted: Notify::new(),
            timeout,
        });
        let served = shared.clone();
        let (addr, task) = serve_loopback("the Runtime API emulation", move |req| {
            handle(served.clone(), req)
        })
        .await?;
        Ok(RuntimeApi { shared, addr, task })
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Queues an invocation; returns its request id.
    pub fn invoke(&self, payload: Value) -> String {
        let id = {
            let mut state = self.shared.state();
            state.issued += 1;
            let id = format!("00000000-0000-4000-8000-{:012}", state.issued);
            state.queue.push_back((id.clone(), payload));
            id
        };
        self.shared.queued.notify_waiters();
        id
    }

    /// What the function posted for `request_id` (or an init error), waiting up to `wait`.
    pub async fn outcome(&self, request_id: &str, wait: Duration) -> Option<Posted> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.shared.posted.notified();
            if let Some(p) = self
                .shared
                .state()
                .posted
                .iter()
                .find(|p| p.request_id == request_id || p.outcome == Outcome::InitError)
            {
                return Some(p.clone());
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return None;
            }
        }
    }

    /// When the function asked for its next invocation, in order.
    pub fn polls(&self) -> Vec<Instant> {
        self.shared.state().polls.clone()
    }
}

fn reply(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
}

async fn next(shared: &Shared) -> Response<Full<Bytes>> {
    shared.state().polls.push(Instant::now());
    let (id, payload) = loop {
        let notified = shared.queued.notified();
        if let Some(item) = shared.state().queue.pop_front() {
            break item;
        }
        notified.await;
    };
    let deadline = SystemTime::now() + shared.timeout;
    let deadline_ms = deadline
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let mut response = reply(StatusCode::OK, &payload.to_string());
    let headers = response.headers_mut();
    let pairs = [
        ("lambda-runtime-aws-request-id", id),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:eu-west-1:123456789012:function:promoter".into(),
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1".into(),
        ),
        ("content-type", "application/json".into()),
    ];
    for (name, value) in pairs {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    }
    response
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = req.uri().path().to_string();
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return Ok(reply(StatusCode::NOT_FOUND, "{}"));
    };
    if rest == "/invocation/next" {
        return Ok(next(&shared).await);
    }
    let (request_id, outcome) = if rest == "/init/error" {
        (String::new(), Outcome::InitError)
    } else if let Some(id) = rest
        .strip_prefix("/invocation/")
        .and_then(|r| r.strip_suffix("/response"))
    {
        (id.to_string(), Outcome::Response)
    } else if let Some(id) = rest
        .strip_prefix("/invocation/")
        .and_then(|r| r.strip_suffix("/error"))
    {
        (id.to_string(), Outcome::Error)
    } else {
        return Ok(reply(StatusCode::NOT_FOUND, "{}"));
    };
    let bytes = req.into_body().collect().await?.to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    shared.state().posted.push(Posted {
        request_id,
        outcome,
        body,
        at: Instant::now(),
    });
    shared.posted.notify_waiters();
    Ok(reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#))
}
