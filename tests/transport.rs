//! The real binary over real TCP and TLS (`tests/net`: a fault-injecting proxy in front of the fake
//! API server): no command is ever ended by a signal from a socket, and the proxy's faults are what
//! they say.

mod common;
mod net;

use common::Env;
use net::{Fault, Proxy, step_as_the_cronjob_runs_it};
use std::os::unix::process::ExitStatusExt;

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("dev", "dev02", "dev"),
    ("staging", "staging", "staging"),
    ("prod", "prod", "prod"),
];

/// A kubeconfig file for `yaml`, removed with the returned directory guard.
struct TempKubeconfig(std::path::PathBuf);

impl TempKubeconfig {
    fn new(yaml: &str) -> TempKubeconfig {
        let dir = std::env::temp_dir().join(format!(
            "promoter-transport-{}-{}",
            std::process::id(),
            common::rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("kubeconfig"), yaml).unwrap();
        TempKubeconfig(dir)
    }

    fn path(&self) -> std::path::PathBuf {
        self.0.join("kubeconfig")
    }
}

impl Drop for TempKubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Before: `restore_sigpipe()` gave the whole process SIGPIPE's default action, so a write to a
/// connection the proxy had reset (rustls writes its records with `writev`, which, unlike `send`,
/// raises SIGPIPE) ended `promoter step` by that signal: no report, no exit code, no retry.
#[tokio::test(flavor = "multi_thread")]
async fn a_reset_connection_never_ends_a_pass_by_a_signal() {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let proxy = Proxy::start(&env.server.url()).await;
    let kubeconfig = TempKubeconfig::new(&proxy.kubeconfig_yaml("pass"));
    for fault in [
        Fault::ResetBeforeForwarding,
        Fault::ResetMidBody,
        Fault::ResetAfterForwarding,
    ] {
        for every in [1, 2] {
            // The first try of every request (every == 1), or of every other one, is reset.
            proxy.next_epoch();
            proxy.clear_log();
            proxy.set_plan(move |h| {
                (h.occurrence == 0 && h.target.len() % every == 0).then_some(fault)
            });
            let out = step_as_the_cronjob_runs_it(&kubeconfig.path())
                .output()
                .await
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                out.status.signal(),
                None,
                "{fault:?} (every {every}): ended by a signal: {text}"
            );
            assert!(
                matches!(out.status.code(), Some(0..=2)),
                "{fault:?}: {:?}: {text}",
                out.status
            );
            let resets = proxy.log().iter().filter(|r| r.fault.is_some()).count();
            assert!(resets > 0, "{fault:?}: no request was reset");
        }
    }
}

/// A loopback port nothing listens on, behind an https URL as a real cluster's: (its kubeconfig,
/// the server as kubectl names it).
fn refused() -> (TempKubeconfig, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("127.0.0.1:{port}");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://{server}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\n"
    );
    (TempKubeconfig::new(&yaml), server)
}

/// The binary with `args` and only `vars` in its environment (and a HOME without a kubeconfig):
/// (exit code, stdout, stderr, how long it took).
fn run(args: &[&str], vars: &[(&str, &str)]) -> (Option<i32>, String, String, std::time::Duration) {
    let home = std::env::temp_dir().join(format!("promoter-home-{}", common::rand_suffix()));
    std::fs::create_dir_all(&home).unwrap();
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(args)
        .env_clear()
        .env("HOME", &home)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&home);
    assert_eq!(out.status.signal(), None, "{args:?}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
        took,
    )
}

/// Before: `status` against a refused port tried each read five times (3.3 s), printed a WARN line
/// per read, and said `Unable to connect to the server: Connection refused (os error 111)` without
/// naming the server. Now every command a person types fails at once with kubectl's line.
#[test]
fn a_person_s_command_names_an_unreachable_server_at_once() {
    let (kubeconfig, server) = refused();
    let kc = kubeconfig.path();
    let kc = kc.to_str().unwrap();
    let line = format!(
        "The connection to the server {server} was refused - did you specify the right host or port?"
    );
    for args in [
        &["status"][..],
        &["status", "some-rollout", "-o", "json", "--cronjob", "none"],
        &["explain", "some-rollout", "--cronjob", "none"],
        &["plan", "some-rollout"],
        &["approve", "some-rollout", "--stage", "prod"],
        &["freeze", "list"],
    ] {
        let mut with = args.to_vec();
        with.extend(["--kubeconfig", kc]);
        let (code, out, err, took) = run(&with, &[]);
        assert_eq!(code, Some(1), "{args:?}: {out}{err}");
        assert_eq!(
            err.trim_end(),
            line,
            "{args:?}: one line, no warnings before it"
        );
        assert!(
            took < std::time::Duration::from_secs(2),
            "{args:?}: {took:?}, no retries"
        );
        // Not retried: no retry is even logged at debug level.
        with.extend(["--log-level", "promoter::client=debug"]);
        let (_, _, err, _) = run(&with, &[]);
        assert!(!err.contains("retrying"), "{args:?}: {err}");
    }
}

/// `step` may retry a refused connection within its deadline (an API server restarting), quietly
/// at the default log level, and ends with the same one line.
#[test]
fn a_pass_retries_an_unreachable_server_within_its_deadline_quietly() {
    let (kubeconfig, server) = refused();
    let kc = kubeconfig.path();
    let (code, _, err, _) = run(
        &[
            "step",
            "--deadline",
            "3s",
            "--kubeconfig",
            kc.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "The connection to the server {server} was refused - did you specify the right host or port?"
        )
    );
    let (_, _, err, _) = run(
        &[
            "step",
            "--deadline",
            "3s",
            "--log-level",
            "promoter::client=debug",
            "--kubeconfig",
            kc.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        err.contains("retrying"),
        "retried within the deadline: {err}"
    );
    assert!(!err.contains("WARN"), "{err}");
}

/// Before: `doctor` against an unreachable server ran every check (14 s, 12 WARN lines) and
/// failed the CRD checks with "promoter crd | kubectl apply" and "is Sveltos installed?". Now the
/// API server is checked first, and what asks it is skipped.
#[test]
fn doctor_checks_the_api_server_first() {
    let (kubeconfig, server) = refused();
    let kc = kubeconfig.path();
    let (code, out, err, took) = run(
        &["doctor", "-o", "json", "--kubeconfig", kc.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{out}{err}");
    assert_eq!(err, "", "no warnings");
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    let checks: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(checks.len(), 2, "{out}");
    assert_eq!(checks[0]["name"], "API server");
    assert_eq!(checks[0]["verdict"], "Failed");
    assert!(
        checks[0]["detail"].as_str().unwrap().contains(&format!(
            "The connection to the server {server} was refused"
        )),
        "{out}"
    );
    assert_eq!(checks[1]["verdict"], "Skipped");
    assert!(
        !out.contains("kubectl apply") && !out.contains("Sveltos installed"),
        "{out}"
    );
}

/// Kubeconfig problems, one line each, as kubectl says them. Before: a missing file said
/// `failed to read kubeconfig from '"/…"'`, an unparsable one printed a six-line drawing, and an
/// unknown context said `failed to load current context: nope`.
#[test]
fn kubeconfig_problems_are_one_line_each() {
    let (kubeconfig, _) = refused();
    let kc = kubeconfig.path();
    let kc = kc.to_str().unwrap();
    let bad =
        TempKubeconfig::new("apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster: [\n");
    let bad = bad.path();
    let bad = bad.to_str().unwrap();
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, String);
    let cases: Vec<Case> = vec![
        (
            vec!["status", "--kubeconfig", "/nonexistent/kubeconfig"],
            vec![],
            "error: the kubeconfig /nonexistent/kubeconfig (--kubeconfig) does not exist".into(),
        ),
        (
            vec!["status"],
            vec![("KUBECONFIG", "/nonexistent/kubeconfig")],
            "error: the kubeconfig /nonexistent/kubeconfig (KUBECONFIG) does not exist".into(),
        ),
        (
            vec!["status"],
            vec![],
            "error: no kubeconfig: ~/.kube/config does not exist, KUBECONFIG is unset, and this is not a pod (--kubeconfig names a file)".into(),
        ),
        (
            vec!["status", "--kubeconfig", bad],
            vec![],
            format!("error: the kubeconfig {bad} is not valid: line 5 column 12: expected mapping start"),
        ),
        (
            vec!["status", "--kubeconfig", kc, "--context", "nope"],
            vec![],
            "error: context \"nope\" does not exist".into(),
        ),
        (
            vec!["status", "--context", "nope"],
            vec![("KUBECONFIG", kc)],
            "error: context \"nope\" does not exist".into(),
        ),
    ];
    for (args, vars, want) in cases {
        let (code, out, err, _) = run(&args, &vars);
        assert_eq!(code, Some(1), "{args:?} {vars:?}: {out}{err}");
        assert_eq!(err.trim_end(), want, "{args:?} {vars:?}");
    }
}

/// Each of the proxy's faults, seen from kube's client with promoter's connection policy (a write
/// goes out once, so one attempt is seen) and from the fake API server: whether the write was
/// applied, and what the client got.
#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_s_faults_are_what_they_say() {
    let env = Env::new(FLEET).await;
    let proxy = Proxy::with_timing(
        &env.server.url(),
        std::time::Duration::from_millis(300),
        std::time::Duration::from_secs(5),
    )
    .await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&proxy.kubeconfig_yaml("admin")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client =
        promoter::client::from_config_with_timeout(config, std::time::Duration::from_millis(600))
            .unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "default");
    for (i, fault) in Fault::ALL.into_iter().enumerate() {
        let name = format!("cm-{i}");
        proxy.set_plan(move |h| (h.method == "POST").then_some(fault));
        let cm = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let answer = api.create(&Default::default(), &cm).await;
        let took = started.elapsed();
        proxy.clear_plan();
        let applied = api.get_opt(&name).await.unwrap().is_some();
        assert_eq!(applied, fault.forwards(), "{fault:?}: applied");
        match (fault, &answer) {
            (Fault::Slow, Ok(_)) => assert!(took >= proxy.slow(), "{fault:?}: {took:?}"),
            (Fault::Refused(code), Err(kube::Error::Api(s))) => assert_eq!(s.code, code),
            (Fault::TimeoutAfterCommit, Err(kube::Error::Api(s))) => {
                assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"))
            }
            (Fault::StallBeforeForwarding | Fault::StallAfterForwarding, Err(e)) => {
                assert!(
                    promoter::cli_error::line(e).contains("timed out"),
                    "{fault:?}: {e:?}"
                )
            }
            (
                Fault::ResetBeforeForwarding
                | Fault::ResetAfterForwarding
                | Fault::ResetMidBody
                | Fault::TruncatedBody,
                Err(e),
            ) => {
                let line = promoter::cli_error::line(e);
                assert!(
                    line.contains("reset")
                        || line.contains("end of file")
                        || line.contains("closed"),
                    "{fault:?}: {line}"
                )
            }
            (fault, answer) => panic!("{fault:?}: {answer:?}"),
        }
        let seen = proxy.log();
        let last = seen.iter().rev().find(|r| r.method == "POST").unwrap();
        assert_eq!((last.fault, last.method.as_str()), (Some(fault), "POST"));
        assert_eq!(
            last.lost_answer_of_an_applied_write(),
            fault.loses_the_answer(),
            "{fault:?}"
        );
    }
}
