//! The HTTP client of the requests promoter sends beyond Kubernetes: metrics to a Pushgateway,
//! notifications to their receivers. http or https (the system's CA roots), HTTP/1.1, every request
//! with a timeout; an answer other than 2xx is an error with the start of its body.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

pub type Client =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client (its connections are kept and reused until it is dropped).
pub fn client() -> Result<Client, String> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("TLS roots: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https))
}

/// The error of a request, with its causes (`client error (Connect): tcp connect error:
/// Connection refused`); never the URL, which may be a secret.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Sends `request`; Ok for a 2xx answer. The error says what happened without the URL: `no
/// answer within 5s`, `HTTP 500 Internal Server Error: <the body's first 200 characters>`, or
/// the connection's error.
pub async fn send(
    client: &Client,
    request: http::Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<(), String> {
    let response = tokio::time::timeout(timeout, client.request(request))
        .await
        .map_err(|_| format!("no answer within {}", humantime::format_duration(timeout)))?
        .map_err(|e| chain(&e))?;
    let status = response.status();
    // The body is read (within the same time) so that the connection can be reused.
    let body = tokio::time::timeout(timeout, response.into_body().collect())
        .await
        .ok()
        .and_then(Result::ok)
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if status.is_success() {
        return Ok(());
    }
    let text: String = String::from_utf8_lossy(&body).chars().take(200).collect();
    Err(format!("HTTP {status}: {}", text.trim()))
}
