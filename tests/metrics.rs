//! Metrics of a short-lived stepper, through a real Prometheus Pushgateway (Debian's
//! `prometheus-pushgateway`, which `.ci/run` installs): after passes of the real binary, the
//! gateway's own /metrics shows the pushed figures; a dead gateway changes nothing of the pass.

mod common;

use common::{Env, rand_suffix};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn pushgateway_binary() -> Option<String> {
    let candidates = [
        std::env::var("PROMOTER_PUSHGATEWAY_BIN").unwrap_or_default(),
        "/usr/bin/prometheus-pushgateway".into(),
        "/usr/local/bin/pushgateway".into(),
    ];
    candidates
        .into_iter()
        .find(|p| !p.is_empty() && std::path::Path::new(p).exists())
}

struct Gateway {
    child: Child,
    url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn get(url: &str) -> Option<String> {
    use http_body_util::{BodyExt, Empty};
    let client: hyper_util::client::legacy::Client<_, Empty<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let response = client.get(url.parse().ok()?).await.ok()?;
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some(String::from_utf8_lossy(&body).into_owned())
}

async fn start_gateway() -> Option<Gateway> {
    let Some(bin) = pushgateway_binary() else {
        eprintln!(
            "SKIPPED: no Prometheus Pushgateway binary (apt-get install prometheus-pushgateway)"
        );
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new(bin)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let gw = Gateway {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if get(&format!("{}/-/ready", gw.url)).await.is_some() {
            return Some(gw);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the Pushgateway did not become ready");
}

/// The value of the sample whose line starts with `prefix` (metric name and labels as exposed).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            l.starts_with(&format!("{name}{{"))
                && labels
                    .iter()
                    .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn step(env: &Env, args: &[&str]) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("promoter-metrics-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, env.server.kubeconfig_yaml("admin")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .arg("step")
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("TZ")
        .env_remove("PROMOTER_PUSHGATEWAY_URL")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn passes_push_their_metrics_to_a_real_pushgateway() {
    let Some(gw) = start_gateway().await else {
        return;
    };
    let env = Env::new(&[("dev", "dev01", "dev"), ("staging", "st01", "staging")]).await;
    env.apply_example("blog-kyverno-manual.yaml");
    env.apply_example("blog-kyverno-auto.yaml");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (code, out, err) = step(&env, &["--pushgateway-url", &gw.url]);
    assert_eq!(code, 0, "{out}{err}");
    let text = get(&format!("{}/metrics", gw.url)).await.unwrap();
    let g = [("job", "promoter"), ("instance", "promoter")];
    let last = sample(&text, "promoter_last_success_timestamp_seconds", &g).unwrap();
    assert!(last >= before.floor(), "{last} < {before}");
    assert_eq!(
        sample(&text, "promoter_promotions", &[("phase", "Progressing")]),
        Some(2.0)
    );
    assert_eq!(sample(&text, "promoter_promotions_in_error", &g), Some(0.0));
    // The first pass created two profiles and wrote statuses: writes were counted.
    assert!(
        sample(&text, "promoter_pass_writes", &g).unwrap() >= 4.0,
        "{text}"
    );
    assert!(sample(&text, "promoter_pass_requests", &g).unwrap() >= 6.0);
    assert_eq!(
        sample(
            &text,
            "promoter_promotion_stage_index",
            &[("promotion", "kyverno-prog-rollout-man")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "promoter_promotion_phase",
            &[
                ("promotion", "kyverno-rollout-auto"),
                ("phase", "Progressing")
            ]
        ),
        Some(1.0)
    );
    assert!(
        sample(
            &text,
            "promoter_promotion_last_promotion_timestamp_seconds",
            &[("promotion", "kyverno-rollout-auto")]
        )
        .is_some()
    );
    // The second pass records what it waits for; the third learns nothing new and writes nothing,
    // and its push replaces the group: zero writes now.
    for _ in 0..2 {
        let (code, out, _) = step(&env, &["--pushgateway-url", &gw.url]);
        assert_eq!(code, 0, "{out}");
    }
    let text = get(&format!("{}/metrics", gw.url)).await.unwrap();
    assert_eq!(
        sample(&text, "promoter_pass_writes", &g),
        Some(0.0),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_pushgateway_leaves_the_pass_untouched() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let dead = {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}")
    };
    let (code, out, err) = step(&env, &["--pushgateway-url", &dead]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("kyverno-rollout-auto: started"), "{out}");
    assert!(
        err.contains("pushing metrics to the Pushgateway failed"),
        "{err}"
    );
    assert!(env.profile("kyverno-rollout-auto-dev").is_some());
}
