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
