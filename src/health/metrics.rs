//! PromQL instant queries for `metricSource` / `metricQueries`; the results are handed to the
//! check's script as the `metrics` table. Credentials come from the Secret `metricSource.secretRef`
//! on the managed cluster: key `token` (bearer) or `username`/`password` (basic auth).

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of an instant query's answer: the first sample of a vector, or a scalar.
pub fn sample_value(body: &Value) -> Result<f64, String> {
    if body["status"] != "success" {
        return Err(format!(
            "query failed: {}",
            body["error"].as_str().unwrap_or("unknown error")
        ));
    }
    let data = &body["data"];
    let value = match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .get(0)
            .map(|r| &r["value"])
            .ok_or("the query returned no samples")?,
        Some("scalar") => &data["result"],
        other => return Err(format!("unsupported result type {other:?}")),
    };
    value
        .get(1)
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| format!("unexpected sample {value}"))
}

async fn authorization(cluster: &kube::Client, source: &Value) -> Result<Option<String>, String> {
    let Some(r) = source.get("secretRef").filter(|r| r.is_object()) else {
        return Ok(None);
    };
    let (ns, name) = (
        r["namespace"].as_str().unwrap_or_default(),
        r["name"].as_str().unwrap_or_default(),
    );
    let secret = Api::<Secret>::namespaced(cluster.clone(), ns)
        .get(name)
        .await
        .map_err(|e| {
            format!(
                "reading metric credentials {ns}/{name}: {}",
                crate::cli_error::line(&e)
            )
        })?;
    let data = secret.data.unwrap_or_default();
    let text = |k: &str| {
        data.get(k)
            .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
    };
    if let Some(token) = text("token") {
        return Ok(Some(format!("Bearer {token}")));
    }
    match (text("username"), text("password")) {
        (Some(u), Some(p)) => Ok(Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        ))),
        _ => Err(format!(
            "metric credentials {ns}/{name} have neither token nor username and password"
        )),
    }
}

pub async fn query_all(
    cluster: &kube::Client,
    source: &Value,
    queries: &[Value],
) -> Result<BTreeMap<String, f64>, String> {
    let base = source["url"]
        .as_str()
        .ok_or("metricSource.url is missing")?
        .trim_end_matches('/');
    let path = source["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .unwrap_or("/api/v1/query");
    let auth = authorization(cluster, source).await?;
    let client = crate::http_client::client().map_err(|e| format!("loading {e}"))?;
    let mut out = BTreeMap::new();
    for q in queries {
        let (name, query) = (
            q["name"].as_str().unwrap_or_default(),
            q["query"].as_str().unwrap_or_default(),
        );
        let uri = format!("{base}{path}?query={}", encode(query));
        let mut req = http::Request::get(&uri)
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("query {name:?}: {e}"))?;
        if let Some(a) = &auth {
            let header =
                http::HeaderValue::from_str(a).map_err(|e| format!("query {name:?}: {e}"))?;
            req.headers_mut()
                .insert(http::header::AUTHORIZATION, header);
        }
        let resp = tokio::time::timeout(QUERY_TIMEOUT, client.request(req))
            .await
            .map_err(|_| format!("query {name:?}: {base} did not answer within {QUERY_TIMEOUT:?}"))?
            .map_err(|e| format!("query {name:?}: {base}: {e}"))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("query {name:?}: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("query {name:?}: HTTP {status} from {base}"));
        }
        let json: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("query {name:?}: invalid answer: {e}"))?;
        out.insert(
            name.to_string(),
            sample_value(&json).map_err(|e| format!("query {name:?}: {e}"))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn instant_query_answers() {
        let v = json!({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "0.02"]}]}});
        assert_eq!(sample_value(&v), Ok(0.02));
        let s =
            json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "3"]}});
        assert_eq!(sample_value(&s), Ok(3.0));
        let empty = json!({"status": "success", "data": {"resultType": "vector", "result": []}});
        assert!(sample_value(&empty).unwrap_err().contains("no samples"));
        assert!(
            sample_value(&json!({"status": "error", "error": "bad"}))
                .unwrap_err()
                .contains("bad")
        );
        assert_eq!(encode("rate(x[5m]) > 0"), "rate%28x%5B5m%5D%29%20%3E%200");
    }
}
