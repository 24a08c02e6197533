//! Reads retried, writes never replayed.
//!
//! kube's own retries are off (`Config::default_retry = false`): they would replay any verb on
//! 429/503/504, writes included, and wait up to a minute. This layer retries only what is
//! idempotent, GET (get, list, discovery), with a bounded, jittered exponential backoff, and never
//! past the deadline of the pass that sent it ([`within_deadline`]). A write goes out once: after a
//! lost answer or a conflict, the pass reads again and decides again, or leaves it to the next pass.
//!
//! A GET's body is read inside the retry, so a connection dropped or stalled in the middle of a body
//! (a slow or cut-off answer) is retried like a reset before the answer.
//!
//! A server that cannot be connected to ([`super::unreachable`]: refused, unknown host) is retried
//! only within a pass's deadline: a pass has its budget and an API server restarting comes back
//! within it; a person's command (`status`, `explain`, `doctor`, …) says at once which server could
//! not be reached. Retries and their end are logged at `info` and below, never as warnings: the
//! error itself, in the report or on stderr, says what failed.

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use kube::client::Body;
use std::hash::{BuildHasher, Hasher};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt};

/// Attempts of one read, the first included.
pub const ATTEMPTS: u32 = 5;
/// The first backoff; each next one doubles, up to [`MAX_BACKOFF`], and is jittered.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `fut` with reads that are retried only until `deadline` (a pass's deadline): a backoff that
/// would end after it is not waited, and an attempt still running at it is abandoned.
pub async fn within_deadline<F: Future>(deadline: Instant, fut: F) -> F::Output {
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of the pass this task serves, if any.
pub fn deadline() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// Statuses that say "try again" for a read: the server was busy, restarting, or timed out, or a
/// proxy between gave up (408, 429, 5xx but 501). 409 on a read is what an overloaded aggregated API
/// or a storage timeout returns at times; a read has nothing to conflict with, so it is retried too.
pub fn retryable_status(code: StatusCode) -> bool {
    matches!(code.as_u16(), 408 | 409 | 429 | 500 | 502 | 503 | 504)
}

/// The wait before attempt `attempt + 1` (0-based `attempt` that failed): exponential, capped,
/// with "equal jitter" (half fixed, half random) so that passes started by the same schedule do not
/// retry in step.
pub fn backoff(attempt: u32, random: u64) -> Duration {
    let exp = FIRST_BACKOFF.saturating_mul(1u32 << attempt.min(16));
    let full = exp.min(MAX_BACKOFF);
    let half = full / 2;
    let jitter_ms = half.as_millis() as u64;
    half + Duration::from_millis(if jitter_ms == 0 {
        0
    } else {
        random % (jitter_ms + 1)
    })
}

/// The jittered wait before attempt `attempt + 1`, for a caller that retries an idempotent write
/// itself (an Event created under a name of its own content).
pub fn jittered_backoff(attempt: u32) -> Duration {
    backoff(attempt, random())
}

fn random() -> u64 {
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The layer: wrap a cloneable service (kube's stack behind a `tower::buffer::Buffer`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RetryReadsLayer;

impl<S> tower::Layer<S> for RetryReadsLayer {
    type Service = RetryReads<S>;
    fn layer(&self, inner: S) -> RetryReads<S> {
        RetryReads { inner }
    }
}

#[derive(Clone)]
pub struct RetryReads<S> {
    inner: S,
}

type Answer<B> = Response<Either<B, Full<Bytes>>>;

impl<S, B> Service<Request<Body>> for RetryReads<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Answer<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Answer<B>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        // A watch streams for as long as it runs: never buffered, never retried here.
        let watch = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        if req.method() != Method::GET || watch {
            // Writes (and anything else) go out exactly once, as they are.
            let fut = self.inner.call(req);
            return Box::pin(async move { Ok(fut.await.map_err(Into::into)?.map(Either::Left)) });
        }
        // The service that was made ready serves the first attempt; clones serve the next.
        let clone = self.inner.clone();
        let first = std::mem::replace(&mut self.inner, clone);
        let (parts, _) = req.into_parts();
        Box::pin(read_with_retries(first, parts))
    }
}

/// A GET request again, from its parts (a GET has no body).
fn rebuild(parts: &http::request::Parts) -> Request<Body> {
    let mut req = Request::new(Body::empty());
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.version_mut() = parts.version;
    *req.headers_mut() = parts.headers.clone();
    *req.extensions_mut() = parts.extensions.clone();
    req
}

enum Attempt<B> {
    Done(Answer<B>),
    /// A retryable status, its whole answer kept: the last attempt returns it as it came.
    Again(Answer<B>),
    Failed(BoxError),
}

async fn attempt<S, B>(mut svc: S, req: Request<Body>, ready: bool) -> Attempt<B>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if !ready && let Err(e) = svc.ready().await {
        return Attempt::Failed(e.into());
    }
    let resp = match svc.call(req).await {
        Ok(r) => r,
        Err(e) => return Attempt::Failed(e.into()),
    };
    let (parts, body) = resp.into_parts();
    // The whole body is read here: an answer cut off or stalled midway is a failed attempt.
    let bytes = match whole(body).await {
        Ok(b) => b,
        Err(e) => return Attempt::Failed(e.into()),
    };
    let again = retryable_status(parts.status);
    let answer = Response::from_parts(parts, Either::Right(Full::new(bytes)));
    if again {
        Attempt::Again(answer)
    } else {
        Attempt::Done(answer)
    }
}

/// A body read into one buffer, each chunk released as soon as it is copied. Collecting the
/// chunks and joining them after holds a list page's text twice (megabytes); the buffer grows
/// in place (a large one is its own mapping, which `realloc` moves without copying).
async fn whole<B>(body: B) -> Result<Bytes, B::Error>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut buf: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(chunk) = frame?.into_data() {
            buf.extend_from_slice(&chunk);
        }
    }
    Ok(Bytes::from(buf))
}

async fn read_with_retries<S, B>(
    first: S,
    parts: http::request::Parts,
) -> Result<Answer<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // Read in the task that awaits the request (the pass's), not in kube's buffer worker.
    let deadline = deadline();
    let spare = first.clone();
    let mut ready = Some(first);
    let mut n = 0u32;
    loop {
        // The service made ready by `poll_ready` serves the first attempt; clones the next.
        let run = match ready.take() {
            Some(s) => attempt(s, rebuild(&parts), true),
            None => attempt(spare.clone(), rebuild(&parts), false),
        };
        let outcome = match deadline {
            Some(d) => match tokio::time::timeout_at(d, run).await {
                Ok(o) => o,
                Err(_) => Attempt::Failed(
                    format!(
                        "GET {}: the pass deadline passed while reading",
                        parts.uri.path()
                    )
                    .into(),
                ),
            },
            None => run.await,
        };
        let (last, why) = match outcome {
            Attempt::Done(a) => return Ok(a),
            Attempt::Again(a) => {
                let why = a.status().to_string();
                (Ok(a), why)
            }
            Attempt::Failed(e) => {
                if deadline.is_none() && super::unreachable::find(&*e).is_some() {
                    return Err(e);
                }
                let why = e.to_string();
                (Err(e), why)
            }
        };
        n += 1;
        let wait = backoff(n - 1, random());
        let past_deadline = deadline.is_some_and(|d| Instant::now() + wait >= d);
        if n >= ATTEMPTS || past_deadline {
            tracing::info!(path = %parts.uri.path(), attempts = n, error = %why, "read failed; not retried further");
            return last;
        }
        tracing::debug!(path = %parts.uri.path(), attempt = n, error = %why, wait = ?wait, "read failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        for attempt in 0..10 {
            let lo = backoff(attempt, 0);
            let hi = backoff(attempt, u64::MAX);
            let full = FIRST_BACKOFF.saturating_mul(1 << attempt).min(MAX_BACKOFF);
            assert_eq!(lo, full / 2, "attempt {attempt}");
            assert!(hi <= full && hi >= lo, "attempt {attempt}: {hi:?}");
        }
        assert_eq!(backoff(30, 0), MAX_BACKOFF / 2);
        // The random half: 50 ms fixed plus 0..=50 ms (a random number modulo 51).
        assert_eq!(backoff(0, 7), Duration::from_millis(57));
        assert_eq!(backoff(0, 50), Duration::from_millis(100));
        assert_eq!(backoff(0, 51), Duration::from_millis(50));
    }

    #[test]
    fn each_backoff_draws_another_random_number() {
        let draws: std::collections::BTreeSet<u64> = (0..8).map(|_| random()).collect();
        assert!(
            draws.len() > 1,
            "passes started together would retry in step"
        );
    }

    /// When each request was sent, on the test's clock.
    type Sent = std::sync::Arc<std::sync::Mutex<Vec<Instant>>>;
    type Answered = BoxFuture<'static, Result<Response<Full<Bytes>>, BoxError>>;

    /// A service that answers every request with `status` (or an hour later, with `None`), and notes the
    /// virtual time each request was sent at.
    fn server(
        status: Option<u16>,
    ) -> (
        impl Service<
            Request<Body>,
            Response = Response<Full<Bytes>>,
            Error = BoxError,
            Future = Answered,
        > + Clone
        + Send
        + 'static,
        Sent,
    ) {
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = sent.clone();
        let svc = tower::service_fn(move |_req: Request<Body>| {
            if let Ok(mut v) = log.lock() {
                v.push(Instant::now());
            }
            let fut: Answered = Box::pin(async move {
                let Some(code) = status else {
                    // Hung: an answer an hour later (not never, so a regression fails
                    // instead of hanging the test).
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return Ok(Response::new(Full::new(Bytes::from_static(b"{}"))));
                };
                let mut r = Response::new(Full::new(Bytes::from_static(b"{}")));
                *r.status_mut() = StatusCode::from_u16(code)?;
                Ok(r)
            });
            fut
        });
        (svc, sent)
    }

    fn request(method: Method) -> Request<Body> {
        let mut req = Request::new(Body::empty());
        *req.method_mut() = method;
        *req.uri_mut() = http::Uri::from_static("/api/v1/namespaces");
        req
    }

    fn sent(log: &Sent) -> Vec<Instant> {
        log.lock().map(|v| v.clone()).unwrap_or_default()
    }

    // The tests below run on tokio's virtual clock (paused; it moves only when every task waits on
    // a timer), so the deadline, the backoffs and a hung answer are timers of that clock and a busy
    // machine cannot change what they see (issue 33: no timing-sensitive test).

    #[tokio::test(start_paused = true)]
    async fn a_failing_read_is_retried_until_the_deadline_and_no_attempt_starts_after_it() {
        // The jitter is random: twenty reads see different backoffs.
        for _ in 0..20 {
            let (svc, log) = server(Some(503));
            let start = Instant::now();
            let deadline = start + Duration::from_millis(400);
            let answer = within_deadline(
                deadline,
                RetryReads { inner: svc }.oneshot(request(Method::GET)),
            )
            .await
            .map(|r| r.status());
            let ended = Instant::now();
            let sent = sent(&log);
            // The last attempt's answer, as it came: the caller sees the 503, not a made-up error.
            assert_eq!(answer.ok(), Some(StatusCode::SERVICE_UNAVAILABLE));
            // The backoffs (50–100, 100–200, 200–400 ms…) leave room for two to four attempts in
            // 400 ms: more than one (it was retried), fewer than ATTEMPTS (the deadline stopped it).
            assert!(
                (2..ATTEMPTS as usize).contains(&sent.len()),
                "{} attempts",
                sent.len()
            );
            assert!(
                sent.iter().all(|t| *t < deadline),
                "an attempt started at or after the deadline"
            );
            // It gave up as soon as the next backoff would end past the deadline: it did not wait.
            assert!(
                ended < deadline,
                "returned {:?} after the start",
                ended - start
            );
            assert_eq!(
                ended,
                *sent.last().unwrap_or(&start),
                "it waited after its last attempt"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_still_running_at_the_deadline_is_abandoned_at_the_deadline() {
        let (svc, log) = server(None);
        let start = Instant::now();
        let deadline = start + Duration::from_millis(400);
        let answer = within_deadline(
            deadline,
            RetryReads { inner: svc }.oneshot(request(Method::GET)),
        )
        .await;
        let why = answer.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            why.contains("the pass deadline passed while reading"),
            "{why}"
        );
        assert!(why.contains("/api/v1/namespaces"), "{why}");
        assert_eq!(Instant::now(), deadline);
        assert_eq!(sent(&log).len(), 1, "no attempt after an abandoned one");
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_deadline_a_read_is_tried_attempts_times_and_a_write_once() {
        let (svc, log) = server(Some(503));
        // A minute of the virtual clock: a read retried for ever fails here instead of hanging.
        let answer = tokio::time::timeout(
            Duration::from_secs(60),
            RetryReads { inner: svc }.oneshot(request(Method::GET)),
        )
        .await
        .map(|r| r.map(|r| r.status()).ok());
        assert_eq!(answer.ok().flatten(), Some(StatusCode::SERVICE_UNAVAILABLE));
        let reads = sent(&log);
        assert_eq!(reads.len(), ATTEMPTS as usize);
        // The wait before attempt i + 1 is backoff(i): its half fixed, its other half random.
        for (i, gap) in reads.windows(2).map(|w| w[1] - w[0]).enumerate() {
            let i = i as u32;
            assert!(
                (backoff(i, 0)..=backoff(i, 0) * 2).contains(&gap),
                "wait {i}: {gap:?}"
            );
        }
        let (svc, log) = server(Some(503));
        let answer = RetryReads { inner: svc }
            .oneshot(request(Method::POST))
            .await
            .map(|r| r.status());
        assert_eq!(answer.ok(), Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(sent(&log).len(), 1, "a write is never replayed");
    }

    /// kube's stack is a `tower::buffer::Buffer`: a slot reserved by `poll_ready` serves one
    /// call, so every attempt must wait for readiness of its own service.
    #[tokio::test(start_paused = true)]
    async fn every_attempt_waits_for_the_readiness_of_a_buffered_service() {
        let (svc, log) = server(Some(503));
        let buffered = tower::buffer::Buffer::new(svc, 1);
        let answer = RetryReads { inner: buffered }
            .oneshot(request(Method::GET))
            .await
            .map(|r| r.status());
        assert_eq!(answer.ok(), Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(sent(&log).len(), ATTEMPTS as usize);
    }

    /// A watch streams for as long as it runs: sent once, whatever it answers; any other GET,
    /// query or not, is retried.
    #[tokio::test(start_paused = true)]
    async fn a_watch_goes_out_once_and_any_other_read_is_retried() {
        for (uri, attempts) in [
            ("/api/v1/pods?watch=true", 1),
            ("/api/v1/pods?resourceVersion=5&watch=1", 1),
            ("/api/v1/pods?watch=true&resourceVersion=5", 1),
            ("/api/v1/pods?limit=500", ATTEMPTS as usize),
            ("/api/v1/pods?watch=false", ATTEMPTS as usize),
        ] {
            let (svc, log) = server(Some(503));
            let mut req = request(Method::GET);
            *req.uri_mut() = http::Uri::from_static(uri);
            let answer = RetryReads { inner: svc }
                .oneshot(req)
                .await
                .map(|r| r.status());
            assert_eq!(answer.ok(), Some(StatusCode::SERVICE_UNAVAILABLE), "{uri}");
            assert_eq!(sent(&log).len(), attempts, "{uri}");
        }
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for code in [408, 409, 429, 500, 502, 503, 504] {
            assert!(
                retryable_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
        for code in [200, 400, 401, 403, 404, 410, 422, 501] {
            assert!(
                !retryable_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
    }
}
