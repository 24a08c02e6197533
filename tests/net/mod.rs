//! The network's physics for tests of the real binary: a fault-injecting TLS proxy in front of the
//! fake API server, and `promoter step` started as the shipped CronJob starts it.
//!
//! The proxy is real TCP and real TLS (a CA and a server certificate for 127.0.0.1 made at run
//! time with rcgen, served by rustls), so the binary goes through its whole connection stack:
//! kube's client, hyper's connection pool, rustls, the kernel's sockets. It trusts the proxy through
//! its kubeconfig's `certificate-authority-data`, as with a real cluster. Each request is read whole
//! from the client, then, as the fault plan decides, answered by the fake API server or met with
//! one of [`Fault`]'s: a connection reset before or after the server applied the request, or in the
//! middle of the answer's body (a TCP RST: `SO_LINGER` 0); a stall past the client's request timeout,
//! before or after the server applied it; a body cut short by a clean close; 500, 503 or 429 with
//! `Retry-After`, without forwarding; 504 after the server committed the request (kube-apiserver's
//! timeout filter answers so while the handler goes on and commits); a slow answer.
//!
//! What the fake API server itself injects (`FaultAction`) happens inside its HTTP handler; these
//! happen on the wire, where a load balancer or a restarting API server makes them.

#![allow(dead_code)]

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;

/// What the proxy does to one request instead of passing it through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// A TCP reset once the request was read, before the server saw it: nothing applied.
    ResetBeforeForwarding,
    /// The server applied the request; a TCP reset instead of its answer.
    ResetAfterForwarding,
    /// The server applied the request; its answer's head and half its body, then a TCP reset.
    ResetMidBody,
    /// No answer, the request not forwarded, until the client gives up (its request timeout).
    StallBeforeForwarding,
    /// The server applied the request; no answer until the client gives up.
    StallAfterForwarding,
    /// The server applied the request; its answer's head and half its body, then a clean close
    /// (TLS close_notify and FIN): a body shorter than its Content-Length.
    TruncatedBody,
    /// This status with `Retry-After: 1` and a `Status` body, the request not forwarded: 500, an
    /// API server's internal error; 503, one restarting; 429, API Priority and Fairness shedding.
    Refused(u16),
    /// The server applied the request; 504 Timeout instead of its answer.
    TimeoutAfterCommit,
    /// The server's answer, [`Proxy::slow`] late (within the client's timeout).
    Slow,
}

impl Fault {
    /// Every fault, in a fixed order (the campaign draws from it).
    pub const ALL: [Fault; 11] = [
        Fault::ResetBeforeForwarding,
        Fault::ResetAfterForwarding,
        Fault::ResetMidBody,
        Fault::StallBeforeForwarding,
        Fault::StallAfterForwarding,
        Fault::TruncatedBody,
        Fault::Refused(500),
        Fault::Refused(503),
        Fault::Refused(429),
        Fault::TimeoutAfterCommit,
        Fault::Slow,
    ];

    /// The request reaches the server (and a write is applied) before the fault.
    pub fn forwards(self) -> bool {
        !matches!(
            self,
            Fault::ResetBeforeForwarding | Fault::StallBeforeForwarding | Fault::Refused(_)
        )
    }

    /// The client never gets the server's answer whole.
    pub fn loses_the_answer(self) -> bool {
        self.forwards() && self != Fault::Slow
    }

    /// The connection ends with a TCP reset.
    pub fn resets(self) -> bool {
        matches!(
            self,
            Fault::ResetBeforeForwarding | Fault::ResetAfterForwarding | Fault::ResetMidBody
        )
    }
}

/// One request as the proxy saw it.
#[derive(Clone, Debug)]
pub struct Record {
    /// [`Proxy::next_epoch`]'s count when the request came (a campaign's pass).
    pub epoch: u64,
    pub method: String,
    /// Path and query.
    pub target: String,
    pub body: Bytes,
    pub fault: Option<Fault>,
    /// The server's status code, when the request was forwarded and answered.
    pub upstream: Option<u16>,
}

impl Record {
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }

    /// A write the server applied whose answer the client did not get.
    pub fn lost_answer_of_an_applied_write(&self) -> bool {
        self.is_write()
            && self.fault.is_some_and(Fault::loses_the_answer)
            && self.upstream.is_some_and(|c| c < 300)
    }
}

/// What the fault plan sees of a request.
pub struct Head<'a> {
    pub epoch: u64,
    pub method: &'a str,
    pub target: &'a str,
    /// How many requests of this method and target came before in this epoch (0 for the first).
    pub occurrence: u64,
}

type Plan = Box<dyn FnMut(&Head) -> Option<Fault> + Send>;

/// The current epoch, and how many requests of each (method, target) it has seen.
type Epoch = (u64, HashMap<(String, String), u64>);

struct Shared {
    upstream: String,
    client: Client<HttpConnector, Full<Bytes>>,
    plan: Mutex<Option<Plan>>,
    log: Mutex<Vec<Record>>,
    epoch: Mutex<Epoch>,
    slow: Duration,
    /// The longest a stall holds a connection the client keeps open.
    stall: Duration,
}

/// A running proxy; it stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    ca_pem: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A CA, and a server certificate it signed for 127.0.0.1 and localhost: (CA PEM, server
/// configuration).
fn tls() -> (String, rustls::ServerConfig) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "promoter test proxy CA");
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("a server key");
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server parameters");
    server
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = server
        .signed_by(&key, &issuer)
        .expect("the server certificate");
    let chain = vec![cert.der().clone(), ca_cert.der().clone()];
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("the server's certificate and key");
    (ca_cert.pem(), config)
}

impl Proxy {
    /// A proxy on a free loopback port in front of the server at `upstream` (`http://127.0.0.1:N`),
    /// passing everything through until a plan is set.
    pub async fn start(upstream: &str) -> Proxy {
        Self::with_timing(upstream, Duration::from_millis(150), Duration::from_secs(5)).await
    }

    /// [`Proxy::start`], answers slowed by `slow` and stalls held at most `stall`.
    pub async fn with_timing(upstream: &str, slow: Duration, stall: Duration) -> Proxy {
        let (ca_pem, config) = tls();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            plan: Mutex::new(None),
            log: Mutex::new(Vec::new()),
            epoch: Mutex::new((0, HashMap::new())),
            slow,
            stall,
        });
        let served = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, shared) = (acceptor.clone(), served.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(shared, tls).await;
                    }
                });
            }
        });
        Proxy {
            addr,
            ca_pem,
            shared,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// A kubeconfig reaching the server through this proxy as `user` (a bearer token of that
    /// name, as the fake API server authenticates), trusting the proxy's CA as a cluster's
    /// kubeconfig trusts its API server's.
    pub fn kubeconfig_yaml(&self, user: &str) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxied\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {user}\ncontexts:\n- name: proxied\n  context:\n    cluster: proxied\n    user: {user}\ncurrent-context: proxied\n",
            self.url()
        )
    }

    /// From now on, `plan` decides each request's fault (None: passed through).
    pub fn set_plan(&self, plan: impl FnMut(&Head) -> Option<Fault> + Send + 'static) {
        *self.shared.plan.lock().unwrap() = Some(Box::new(plan));
    }

    pub fn clear_plan(&self) {
        *self.shared.plan.lock().unwrap() = None;
    }

    /// A new epoch (a campaign's next pass): occurrences count from 0 again.
    pub fn next_epoch(&self) -> u64 {
        let mut e = self.shared.epoch.lock().unwrap();
        e.0 += 1;
        e.1.clear();
        e.0
    }

    pub fn log(&self) -> Vec<Record> {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.shared.log.lock().unwrap().clear();
    }

    pub fn slow(&self) -> Duration {
        self.shared.slow
    }
}

/// Faults drawn at random, reproducibly: each request's fault is a function of the seed, the
/// epoch, its method and target, and how many such requests came before it in the epoch, not of
/// the order in which concurrent requests happen to arrive. `rate` of the requests are faulted,
/// each with one of `kinds`, all equally likely.
pub fn seeded(seed: u64, rate: f64, kinds: &'static [Fault]) -> impl FnMut(&Head) -> Option<Fault> {
    move |h: &Head| {
        let mut x = seed ^ h.epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for b in h.method.bytes().chain([0]).chain(h.target.bytes()) {
            x = (x ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
        x ^= h.occurrence.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let a = splitmix(&mut x);
        let b = splitmix(&mut x);
        (((a >> 11) as f64 / (1u64 << 53) as f64) < rate)
            .then(|| kinds[(b % kinds.len() as u64) as usize])
    }
}

/// splitmix64's step.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One request read from the client.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Bytes,
}

impl Request {
    fn wants_close(&self) -> bool {
        self.headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("connection") && v.eq_ignore_ascii_case(b"close"))
    }
}

/// Reads one whole request (head and Content-Length body); None when the client closed the
/// connection between requests, or sent what is not HTTP/1.1 this proxy reads.
async fn read_request<S: AsyncRead + Unpin>(io: &mut S, buf: &mut BytesMut) -> Option<Request> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let method = parsed.method?.to_string();
                let target = parsed.path?.to_string();
                let headers: Vec<(String, Vec<u8>)> = parsed
                    .headers
                    .iter()
                    .map(|h| (h.name.to_string(), h.value.to_vec()))
                    .collect();
                let chunked = headers.iter().any(|(k, v)| {
                    k.eq_ignore_ascii_case("transfer-encoding")
                        && !v.eq_ignore_ascii_case(b"identity")
                });
                if chunked {
                    // kube's client sends whole bodies with a Content-Length.
                    return None;
                }
                let length = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                while buf.len() < n + length {
                    if io.read_buf(buf).await.ok()? == 0 {
                        return None;
                    }
                }
                buf.advance(n);
                let body = buf.split_to(length).freeze();
                return Some(Request {
                    method,
                    target,
                    headers,
                    body,
                });
            }
            Ok(httparse::Status::Partial) => {
                if io.read_buf(buf).await.ok()? == 0 {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

/// The server's answer, whole.
struct Answer {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Bytes,
}

impl Answer {
    /// A `Status` answer as kube-apiserver writes one.
    fn status(code: u16, reason: &str, message: &str, retry_after: bool) -> Answer {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": {}, "code": code,
        });
        let mut headers = vec![("Content-Type".to_string(), b"application/json".to_vec())];
        if retry_after {
            headers.push(("Retry-After".to_string(), b"1".to_vec()));
        }
        Answer {
            status: code,
            headers,
            body: Bytes::from(body.to_string()),
        }
    }

    fn head(&self) -> Vec<u8> {
        let reason = http::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut out = format!("HTTP/1.1 {} {reason}\r\n", self.status).into_bytes();
        for (k, v) in &self.headers {
            if [
                "connection",
                "keep-alive",
                "transfer-encoding",
                "content-length",
            ]
            .iter()
            .any(|h| k.eq_ignore_ascii_case(h))
            {
                continue;
            }
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes());
        out
    }
}

async fn forward(shared: &Shared, req: &Request) -> Option<Answer> {
    let mut builder = http::Request::builder()
        .method(req.method.as_str())
        .uri(format!("{}{}", shared.upstream, req.target));
    for (k, v) in &req.headers {
        if ["host", "connection", "content-length"]
            .iter()
            .any(|h| k.eq_ignore_ascii_case(h))
        {
            continue;
        }
        builder = builder.header(k.as_str(), v.as_slice());
    }
    let request = builder.body(Full::new(req.body.clone())).ok()?;
    let response = shared.client.request(request).await.ok()?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some(Answer {
        status,
        headers,
        body,
    })
}

/// Ends the connection with a TCP reset (`SO_LINGER` 0, then close), not a FIN.
fn reset(tls: TlsStream<TcpStream>) {
    let _ = tls.get_ref().0.set_zero_linger();
    drop(tls);
}

/// Holds the connection, answering nothing, until the client closes it or `limit` passed.
async fn stall(mut tls: TlsStream<TcpStream>, limit: Duration) {
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(limit, async {
        while let Ok(n) = tls.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

async fn serve(shared: Arc<Shared>, mut tls: TlsStream<TcpStream>) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    loop {
        let Some(req) = read_request(&mut tls, &mut buf).await else {
            return;
        };
        let (epoch, fault) = {
            let (epoch, occurrence) = {
                let mut e = shared.epoch.lock().unwrap();
                let epoch = e.0;
                let n =
                    e.1.entry((req.method.clone(), req.target.clone()))
                        .or_insert(0);
                let occurrence = *n;
                *n += 1;
                (epoch, occurrence)
            };
            let head = Head {
                epoch,
                method: &req.method,
                target: &req.target,
                occurrence,
            };
            let fault = shared.plan.lock().unwrap().as_mut().and_then(|p| p(&head));
            (epoch, fault)
        };
        let index = {
            let mut log = shared.log.lock().unwrap();
            log.push(Record {
                epoch,
                method: req.method.clone(),
                target: req.target.clone(),
                body: req.body.clone(),
                fault,
                upstream: None,
            });
            log.len() - 1
        };
        match fault {
            Some(Fault::ResetBeforeForwarding) => return reset(tls),
            Some(Fault::StallBeforeForwarding) => return stall(tls, shared.stall).await,
            Some(Fault::Refused(code)) => {
                let (reason, message) = match code {
                    429 => (
                        "TooManyRequests",
                        "Too many requests, please try again later.",
                    ),
                    503 => (
                        "ServiceUnavailable",
                        "the server is currently unable to handle the request",
                    ),
                    _ => (
                        "InternalError",
                        "Internal error occurred: the server is shutting down",
                    ),
                };
                let answer = Answer::status(code, reason, message, true);
                if write_answer(&mut tls, &answer).await.is_err() {
                    return;
                }
                continue;
            }
            _ => {}
        }
        let Some(answer) = forward(&shared, &req).await else {
            let answer = Answer::status(502, "InternalError", "the proxy's upstream failed", false);
            if write_answer(&mut tls, &answer).await.is_err() {
                return;
            }
            continue;
        };
        if let Some(r) = shared.log.lock().unwrap().get_mut(index) {
            r.upstream = Some(answer.status);
        }
        match fault {
            Some(Fault::ResetAfterForwarding) => return reset(tls),
            Some(Fault::StallAfterForwarding) => return stall(tls, shared.stall).await,
            Some(Fault::ResetMidBody) | Some(Fault::TruncatedBody) => {
                let half = answer.body.len() / 2;
                let mut partial = answer.head();
                partial.extend_from_slice(&answer.body[..half]);
                let _ = tls.write_all(&partial).await;
                let _ = tls.flush().await;
                if fault == Some(Fault::ResetMidBody) {
                    return reset(tls);
                }
                let _ = tls.shutdown().await;
                return;
            }
            Some(Fault::TimeoutAfterCommit) => {
                let answer = Answer::status(
                    504,
                    "Timeout",
                    "Timeout: request did not complete within requested timeout - context deadline exceeded",
                    false,
                );
                if write_answer(&mut tls, &answer).await.is_err() {
                    return;
                }
            }
            Some(Fault::Slow) => {
                tokio::time::sleep(shared.slow).await;
                if write_answer(&mut tls, &answer).await.is_err() {
                    return;
                }
            }
            _ => {
                if write_answer(&mut tls, &answer).await.is_err() {
                    return;
                }
            }
        }
        if req.wants_close() {
            let _ = tls.shutdown().await;
            return;
        }
    }
}

async fn write_answer(tls: &mut TlsStream<TcpStream>, answer: &Answer) -> std::io::Result<()> {
    let mut bytes = answer.head();
    bytes.extend_from_slice(&answer.body);
    tls.write_all(&bytes).await?;
    tls.flush().await
}

/// `promoter step` as the shipped CronJob runs it (its container's args and environment, from
/// `cronjob/cronjob.yaml`), with `kubeconfig`, and nothing else of the test's environment.
pub fn step_as_the_cronjob_runs_it(kubeconfig: &std::path::Path) -> tokio::process::Command {
    use k8s_openapi::api::batch::v1::CronJob;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cronjob/cronjob.yaml");
    let text = std::fs::read_to_string(&path).expect("cronjob/cronjob.yaml");
    let cron: CronJob = serde_saphyr::from_str(&text).expect("the CronJob");
    let container = cron
        .spec
        .and_then(|s| s.job_template.spec)
        .and_then(|j| j.template.spec)
        .map(|p| p.containers[0].clone())
        .expect("the CronJob's container");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_promoter"));
    cmd.args(container.args.unwrap_or_default())
        .env_clear()
        .env("KUBECONFIG", kubeconfig);
    for e in container.env.unwrap_or_default() {
        cmd.env(e.name, e.value.unwrap_or_default());
    }
    cmd
}
