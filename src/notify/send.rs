//! Sending a pass's notifications without ever holding the pass up: every send has its receiver's
//! timeout (5 s by default), all sends share one deadline inside the pass deadline, receivers are
//! sent to concurrently (and one receiver's promotions a few at a time, each promotion's
//! transitions in order), and a receiver that failed once is not tried again in the pass.

use super::body::Body;
use super::config::Endpoint;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::Full;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::time::Instant;

/// Promotions sent to one receiver at the same time.
const PER_RECEIVER: usize = 4;

/// One request: a transition of a promotion to one receiver.
#[derive(Clone, Debug)]
pub struct Job {
    pub receiver: String,
    pub promotion: String,
    pub key: String,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    Failed(String),
    /// Not tried in this pass: the receiver failed before, or the time was up.
    NotAttempted,
}

fn request(endpoint: &Endpoint, job: &Job) -> Result<http::Request<Full<Bytes>>, String> {
    let mut builder = http::Request::post(endpoint.uri.clone())
        .header(http::header::CONTENT_TYPE, job.body.content_type)
        .header(
            http::header::USER_AGENT,
            concat!("promoter/", env!("CARGO_PKG_VERSION")),
        )
        .header("Idempotency-Key", job.key.as_str());
    for (name, value) in &endpoint.headers {
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::from(job.body.bytes.clone())))
        .map_err(|e| format!("building the request: {e}"))
}

/// Sends every job by `until`; one outcome per job, in order.
pub async fn send_all(
    client: Result<&crate::http_client::Client, &str>,
    endpoints: &BTreeMap<String, Result<Endpoint, String>>,
    jobs: &[Job],
    until: Instant,
) -> Vec<Outcome> {
    let outcomes: Mutex<Vec<Outcome>> = Mutex::new(vec![Outcome::NotAttempted; jobs.len()]);
    let set = |i: usize, o: Outcome| {
        if let Ok(mut all) = outcomes.lock() {
            all[i] = o;
        }
    };
    // Job indices by receiver, then by promotion (in order of appearance).
    let mut by_receiver: BTreeMap<&str, Vec<Vec<usize>>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        let chains = by_receiver.entry(job.receiver.as_str()).or_default();
        match chains
            .iter_mut()
            .find(|c| jobs[c[0]].promotion == job.promotion)
        {
            Some(chain) => chain.push(i),
            None => chains.push(vec![i]),
        }
    }
    let receivers = by_receiver.into_iter().map(|(name, chains)| {
        let set = &set;
        async move {
            let endpoint = match (client, endpoints.get(name)) {
                (Err(e), _) => Err(e.to_string()),
                (_, None) => Err(format!("no receiver is named {name:?}")),
                (_, Some(Err(e))) => Err(e.clone()),
                (Ok(c), Some(Ok(e))) => Ok((c, e)),
            };
            let (client, endpoint) = match endpoint {
                Ok(ce) => ce,
                Err(e) => {
                    // Nothing can reach it: every transition for it says why.
                    for i in chains.into_iter().flatten() {
                        set(i, Outcome::Failed(e.clone()));
                    }
                    return;
                }
            };
            let failed = AtomicBool::new(false);
            futures::stream::iter(chains)
                .for_each_concurrent(PER_RECEIVER, |chain| {
                    let failed = &failed;
                    async move {
                        for i in chain {
                            let left = until.saturating_duration_since(Instant::now());
                            if failed.load(Ordering::Relaxed) || left.is_zero() {
                                return;
                            }
                            let outcome = match request(endpoint, &jobs[i]) {
                                Ok(r) => {
                                    crate::http_client::send(client, r, endpoint.timeout.min(left))
                                        .await
                                        .map_or_else(Outcome::Failed, |()| Outcome::Sent)
                                }
                                Err(e) => Outcome::Failed(e),
                            };
                            if outcome != Outcome::Sent {
                                failed.store(true, Ordering::Relaxed);
                            }
                            set(i, outcome);
                        }
                    }
                })
                .await;
        }
    });
    // Each send is bounded already; this bounds the whole, whatever happens inside.
    let _ = tokio::time::timeout_at(until, futures::future::join_all(receivers)).await;
    outcomes.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::webhook::{Fault, WebhookReceiver};
    use crate::notify::config::{Config, resolve};
    use std::time::Duration;

    fn job(receiver: &str, promotion: &str, key: &str) -> Job {
        Job {
            receiver: receiver.into(),
            promotion: promotion.into(),
            key: key.into(),
            body: Body {
                content_type: "application/json",
                bytes: format!("{{\"key\":\"{key}\"}}").into_bytes(),
            },
        }
    }

    async fn setup() -> (WebhookReceiver, BTreeMap<String, Result<Endpoint, String>>) {
        let r = WebhookReceiver::start().await.unwrap();
        let config = Config::parse(&format!(
            "receivers:\n- {{name: good, type: webhook, url: '{}', headersFrom: {{X-Token: token}}}}\n- {{name: bad, type: webhook, url: '{}', timeout: 300ms}}\n- {{name: nosecret, type: slack, urlFrom: {{key: missing}}}}\n",
            r.url("/good"),
            r.url("/bad")
        ))
        .unwrap();
        let secret = BTreeMap::from([("token".to_string(), b"t0k3n".to_vec())]);
        let endpoints = resolve(&config, Some(&secret), "ns/s");
        (r, endpoints)
    }

    /// On tokio's virtual clock, as below: the dead receiver's 300 ms timeout is the only time
    /// that passes.
    #[tokio::test(start_paused = true)]
    async fn a_failed_receiver_is_not_retried_in_the_pass_and_holds_up_no_other() {
        let (r, endpoints) = setup().await;
        // `bad` never answers in time.
        r.inject("/bad", Fault::Slow(Duration::from_secs(30)), None);
        let client = crate::http_client::client().unwrap();
        let jobs = vec![
            job("bad", "p", "k1"),
            job("good", "p", "k1"),
            job("bad", "p", "k2"),
            job("good", "q", "k3"),
            job("nosecret", "p", "k1"),
            job("nosecret", "q", "k3"),
        ];
        let started = Instant::now();
        let out = send_all(
            Ok(&client),
            &endpoints,
            &jobs,
            started + Duration::from_secs(20),
        )
        .await;
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(300),
            "a dead receiver cost its timeout once"
        );
        assert!(
            matches!(&out[0], Outcome::Failed(e) if e.starts_with("no answer within 300ms")),
            "{out:?}"
        );
        assert_eq!(out[1], Outcome::Sent);
        assert_eq!(out[2], Outcome::NotAttempted, "not retried in the pass");
        assert_eq!(out[3], Outcome::Sent);
        assert_eq!(
            out[4],
            Outcome::Failed("Secret ns/s has no key \"missing\"".into())
        );
        assert_eq!(out[5], out[4]);
        let good: Vec<_> = r
            .received()
            .into_iter()
            .filter(|x| x.path == "/good")
            .collect();
        assert_eq!(good.len(), 2);
        assert_eq!(good[0].headers["idempotency-key"], "k1");
        assert_eq!(good[0].headers["x-token"], "t0k3n");
        assert_eq!(good[0].headers["content-type"], "application/json");
        assert!(good[0].headers["user-agent"].starts_with("promoter/"));
    }

    #[tokio::test]
    async fn errors_say_what_happened_without_the_url() {
        let (r, endpoints) = setup().await;
        let client = crate::http_client::client().unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        r.inject("/good", Fault::Status(500), Some(1));
        let out = send_all(Ok(&client), &endpoints, &[job("good", "p", "k")], until).await;
        assert!(
            matches!(&out[0], Outcome::Failed(e) if e.starts_with("HTTP 500")),
            "{out:?}"
        );
        r.inject("/good", Fault::ResetBefore, Some(1));
        let out = send_all(Ok(&client), &endpoints, &[job("good", "p", "k")], until).await;
        let Outcome::Failed(e) = &out[0] else {
            panic!("{out:?}")
        };
        assert!(!e.contains("127.0.0.1") && !e.contains("/good"), "{e}");
        r.inject("/good", Fault::ResetAfter, Some(1));
        let out = send_all(Ok(&client), &endpoints, &[job("good", "p", "k")], until).await;
        assert!(
            matches!(&out[0], Outcome::Failed(_)),
            "a lost answer is a failure: {out:?}"
        );
        assert_eq!(r.received().len(), 2, "it arrived twice (500, lost answer)");
        let out = send_all(Ok(&client), &endpoints, &[job("good", "p", "k")], until).await;
        assert_eq!(out[0], Outcome::Sent);
        let out = send_all(
            Err("TLS roots: none"),
            &endpoints,
            &[job("good", "p", "k")],
            until,
        )
        .await;
        assert_eq!(out[0], Outcome::Failed("TLS roots: none".into()));
    }

    /// On tokio's virtual clock (paused, advanced only when every task waits): the deadline and
    /// the 30 s answer are timers of that clock, so a busy machine cannot make this test fail.
    #[tokio::test(start_paused = true)]
    async fn nothing_is_sent_after_the_deadline() {
        let (r, endpoints) = setup().await;
        r.inject("/good", Fault::Slow(Duration::from_secs(30)), None);
        let client = crate::http_client::client().unwrap();
        let jobs: Vec<Job> = (0..3).map(|i| job("good", "p", &format!("k{i}"))).collect();
        let started = Instant::now();
        let out = send_all(
            Ok(&client),
            &endpoints,
            &jobs,
            started + Duration::from_millis(400),
        )
        .await;
        // The 30 s answer was not waited for: the pass went on at its deadline.
        assert_eq!(started.elapsed(), Duration::from_millis(400));
        assert_eq!(out[0], Outcome::Failed("no answer within 400ms".into()));
        assert_eq!(out[1..], [Outcome::NotAttempted, Outcome::NotAttempted]);
        let out = send_all(Ok(&client), &endpoints, &jobs, Instant::now()).await;
        assert!(out.iter().all(|o| *o == Outcome::NotAttempted));
    }
}
