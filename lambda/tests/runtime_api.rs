//! The real `bootstrap` binary under a loopback emulation of the Lambda Runtime API, against the
//! fake Kubernetes API server: invocations in, pass summaries or errors out.

use base64::Engine as _;
use promoter::fake::{
    FakeApiServer, cluster_profile_type, cluster_promotion_type, sveltos_cluster_type,
};
use promoter_lambda::emulator::{Outcome, Posted, RuntimeApi};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(60);

fn scheduled_event() -> Value {
    json!({
        "version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": "2026-11-22T06:00:00Z", "region": "eu-west-1",
        "resources": ["arn:aws:events:eu-west-1:123456789012:rule/promoter-every-minute"],
        "detail": {}
    })
}

/// The management cluster: the blog's automated Kyverno rollout and a dev and a staging cluster.
async fn management_cluster() -> FakeApiServer {
    let server = FakeApiServer::start_with_sveltos().await.unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/blog-kyverno-auto.yaml");
    let mut store = server.store();
    for doc in promoter::manifest::load_file(&path).unwrap() {
        if let Some(p) = doc.promotion() {
            store
                .seed(&cluster_promotion_type(), serde_json::to_value(p).unwrap())
                .unwrap();
        }
    }
    for (name, env) in [("dev-1", "dev"), ("staging-1", "staging")] {
        store
            .seed(
                &sveltos_cluster_type(),
                promoter::sim::sveltos_cluster("fleet", name, &[("env", env)]),
            )
            .unwrap();
    }
    drop(store);
    server
}

/// The kubeconfig `aws eks update-kubeconfig` writes, pointed at `server`.
fn eks_kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mgmt\n  cluster:\n    server: {server}\ncontexts:\n- name: mgmt\n  context:\n    cluster: mgmt\n    user: mgmt\ncurrent-context: mgmt\nusers:\n- name: mgmt\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [--region, eu-west-1, eks, get-token, --cluster-name, fleet-management, --output, json]\n"
    )
}

/// The binary under test: this build's, or another build of it (CI points this at the static musl
/// build, so the shipped kind of binary runs these tests too).
fn bootstrap_path() -> String {
    std::env::var("PROMOTER_LAMBDA_BOOTSTRAP")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_bootstrap").to_string())
}

fn bootstrap(runtime: &RuntimeApi, env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(bootstrap_path());
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime.address())
        .env("AWS_LAMBDA_FUNCTION_NAME", "promoter")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/promoter")
        .env(
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/11/22/[$LATEST]0123456789abcdef",
        )
        .env("AWS_REGION", "eu-west-1")
        .env("TZ", ":UTC")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd.spawn().expect("the bootstrap binary starts")
}

async fn outcome(runtime: &RuntimeApi, id: &str, child: &mut Child) -> Posted {
    match runtime.outcome(id, WAIT).await {
        Some(p) => p,
        None => {
            let _ = child.start_kill();
            let out = child.wait_with_output_ref().await;
            panic!("no outcome for invocation {id}; bootstrap's stderr:\n{out}");
        }
    }
}

trait StderrOf {
    async fn wait_with_output_ref(&mut self) -> String;
}

impl StderrOf for Child {
    async fn wait_with_output_ref(&mut self) -> String {
        use tokio::io::AsyncReadExt as _;
        let mut text = String::new();
        if let Some(mut err) = self.stderr.take() {
            let _ = err.read_to_string(&mut text).await;
        }
        text
    }
}

#[tokio::test]
async fn invocations_run_passes_with_a_native_eks_token() {
    let server = management_cluster().await;
    let runtime = RuntimeApi::start(Duration::from_secs(55)).await.unwrap();
    let kubeconfig = eks_kubeconfig(&server.url());
    let mut child = bootstrap(
        &runtime,
        &[
            ("PROMOTER_KUBECONFIG_DATA", kubeconfig.as_str()),
            ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLEEXAMPLE00"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
            ),
            ("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLE"),
        ],
    );

    // The schedule: one real pass, which starts the rollout with the dev stage's profile.
    let id = runtime.invoke(scheduled_event());
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Response, "{}", posted.body);
    let summary = &posted.body["summary"];
    assert_eq!(summary["promotions"], 1, "{}", posted.body);
    assert_eq!(summary["changed"], 1, "{}", posted.body);
    assert_eq!(summary["inError"], 0, "{}", posted.body);
    let pass = &posted.body["pass"];
    assert_eq!(pass["dryRun"], false);
    let actions = pass["promotions"][0]["actions"].to_string();
    assert!(
        actions.contains("applying ClusterProfile kyverno-rollout-auto-dev"),
        "{actions}"
    );
    let profiles = server.store().all(&cluster_profile_type());
    assert_eq!(profiles.len(), 1, "the dev stage's ClusterProfile exists");

    // Every request carried the token `aws eks get-token` would have made, signed in-process.
    let users: Vec<String> = server.requests().iter().map(|r| r.user.clone()).collect();
    assert!(!users.is_empty());
    for user in &users {
        let payload = user.strip_prefix("k8s-aws-v1.").expect("an EKS token");
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        let url = String::from_utf8(url).unwrap();
        assert!(
            url.starts_with(
                "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15"
            ),
            "{url}"
        );
        assert!(
            url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"),
            "{url}"
        );
        assert!(
            url.contains("X-Amz-Security-Token=IQoJb3JpZ2luX2VjEXAMPLE"),
            "{url}"
        );
    }

    // A direct invocation asking for a dry run, in the same warm process: it writes nothing.
    let writes = server.writes();
    let id = runtime.invoke(json!({"dryRun": true}));
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Response, "{}", posted.body);
    assert_eq!(posted.body["pass"]["dryRun"], true);
    assert_eq!(server.writes(), writes, "a dry run writes nothing");

    // A payload it does not understand goes through the error path, and the function lives on.
    let id = runtime.invoke(json!({"dry_run": true}));
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Error);
    assert_eq!(posted.body["errorType"], "InvalidEvent", "{}", posted.body);
    assert!(
        posted.body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("dry_run")
    );

    let id = runtime.invoke(scheduled_event());
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Response, "{}", posted.body);
    // One poll per invocation, then the next one waits: the warm process is ready for more.
    let mut polls = 0;
    for _ in 0..500 {
        polls = runtime.polls().len();
        if polls == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(polls, 5);
    let _ = child.kill().await;
}

/// The promotions list answers, the PromotionFreezes' (read after it) hangs past the pass
/// deadline (the 8 s invocation's end minus twice the 2 s margin): the pass reports the promotions
/// undecided, and the invocation says it ran out of time (`Timeout`), not that the API server
/// failed a read (`ReadFailed`): an alarm on `Timeout` sees it.
#[tokio::test]
async fn a_read_the_deadline_cut_short_reports_a_timeout() {
    let matcher = promoter::fake::RequestMatcher::any().resource("promotionfreezes");
    let (posted, _) = invoked_with_hangs(matcher, Duration::from_secs(8)).await;
    assert_eq!(posted.outcome, Outcome::Error, "{}", posted.body);
    assert_eq!(posted.body["errorType"], "Timeout", "{}", posted.body);
    let message = posted.body["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("were not decided") && message.contains("deadline"),
        "{message}"
    );
}

/// One scheduled invocation of `invocation` against the management cluster whose API server hangs
/// every request `matcher` matches for 20 s: what it posted, and how long after the invoke.
async fn invoked_with_hangs(
    matcher: promoter::fake::RequestMatcher,
    invocation: Duration,
) -> (Posted, Duration) {
    use promoter::fake::{FaultAction, FaultRule};
    let server = management_cluster().await;
    server.inject(FaultRule::after(
        matcher,
        0,
        FaultAction::Hang(Duration::from_secs(20)),
    ));
    let kubeconfig = server.kubeconfig_yaml("lambda");
    let runtime = RuntimeApi::start(invocation).await.unwrap();
    let mut child = bootstrap(
        &runtime,
        &[("PROMOTER_KUBECONFIG_DATA", kubeconfig.as_str())],
    );
    let id = runtime.invoke(scheduled_event());
    let started = std::time::Instant::now();
    let posted = outcome(&runtime, &id, &mut child).await;
    let elapsed = started.elapsed();
    let _ = child.kill().await;
    (posted, elapsed)
}

#[tokio::test]
async fn an_unreachable_cluster_posts_an_error() {
    let kubeconfig = promoter::fake::unreachable_kubeconfig_yaml().unwrap();
    let port = kubeconfig
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    let runtime = RuntimeApi::start(Duration::from_secs(55)).await.unwrap();
    let mut child = bootstrap(
        &runtime,
        &[("PROMOTER_KUBECONFIG_DATA", kubeconfig.as_str())],
    );
    let id = runtime.invoke(scheduled_event());
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Error, "{}", posted.body);
    assert_eq!(posted.body["errorType"], "PassFailed", "{}", posted.body);
    let message = posted.body["errorMessage"].as_str().unwrap();
    assert!(
        message.contains(&port) || message.to_lowercase().contains("connect"),
        "{message}"
    );
    let _ = child.kill().await;
}

#[tokio::test]
async fn without_configuration_the_error_says_what_to_set() {
    let runtime = RuntimeApi::start(Duration::from_secs(55)).await.unwrap();
    let mut child = bootstrap(&runtime, &[]);
    let id = runtime.invoke(scheduled_event());
    let posted = outcome(&runtime, &id, &mut child).await;
    assert_eq!(posted.outcome, Outcome::Error);
    assert_eq!(posted.body["errorType"], "ClusterConfigError");
    assert!(
        posted.body["errorMessage"]
            .as_str()
            .unwrap()
            .contains("PROMOTER_KUBECONFIG_DATA")
    );
    let _ = child.kill().await;
}

#[tokio::test]
async fn outside_lambda_it_says_what_it_is() {
    let out = Command::new(bootstrap_path())
        .env_clear()
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("promoter step") && err.contains("AWS_LAMBDA_RUNTIME_API"),
        "{err}"
    );
}

#[tokio::test]
async fn a_pass_that_would_overrun_the_invocation_reports_a_timeout() {
    // The API server hangs on every request for longer than the invocation may run. (Hanging
    // only the first one made the outcome depend on timing: on a loaded machine the profiles'
    // list hung into the pass deadline while the promotions' list still answered, and the
    // invocation failed as `ReadFailed`, now `Timeout` too.)
    let (posted, elapsed) = invoked_with_hangs(
        promoter::fake::RequestMatcher::any(),
        Duration::from_secs(4),
    )
    .await;
    assert_eq!(posted.outcome, Outcome::Error, "{}", posted.body);
    assert_eq!(posted.body["errorType"], "Timeout", "{}", posted.body);
    assert!(
        elapsed < Duration::from_secs(4),
        "reported before Lambda's own deadline: {elapsed:?}"
    );
}
