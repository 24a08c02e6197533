//! `promoter doctor` through the real binary against the fake API server, with and without the
//! permissions a pass needs, an old or a healthy CronJob, and an old or a new Sveltos.

mod common;

use common::{Env, rand_suffix};
use k8s_openapi::api::rbac::v1::ClusterRole;
use promoter::fake::ResourceType;
use promoter::fake::rbac::Rbac;
use serde_json::{Value, json};
use std::sync::Arc;

fn doctor(env: &Env, user: &str) -> (i32, Vec<Value>, String) {
    doctor_at(&env.server, user)
}

/// `promoter doctor -o json` against `server` as `user`: (exit code, checks, output).
fn doctor_at(server: &promoter::fake::FakeApiServer, user: &str) -> (i32, Vec<Value>, String) {
    doctor_with(server, user, &[], &[])
}

/// `doctor_at` with more arguments and environment variables.
fn doctor_with(
    server: &promoter::fake::FakeApiServer,
    user: &str,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (i32, Vec<Value>, String) {
    let dir = std::env::temp_dir().join(format!("promoter-doctor-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, server.kubeconfig_yaml(user)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(["doctor", "-o", "json", "--kubeconfig"])
        .arg(&kc)
        .args(args)
        .env_remove("PROMOTER_CRONJOB")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let checks: Vec<Value> = serde_json::from_str(&stdout).unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        checks,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

fn verdict<'a>(checks: &'a [Value], name: &str) -> (&'a str, &'a str) {
    let c = checks
        .iter()
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .unwrap_or_else(|| panic!("no check {name}: {checks:?}"));
    (
        c["verdict"].as_str().unwrap_or_default(),
        c["detail"].as_str().unwrap_or_default(),
    )
}

fn pass_role() -> ClusterRole {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cronjob/clusterrole.yaml"),
    )
    .unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_setup_passes_and_problems_are_named() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let sa = "system:serviceaccount:promoter-system:promoter";
    env.server
        .set_authorizer(Arc::new(Rbac::bind(sa, &pass_role(), &["admin"])));
    // No CronJob kind and no Sveltos Deployment here: skipped and warned, nothing failed.
    let (code, checks, out) = doctor(&env, sa);
    assert_eq!(code, 0, "{out}");
    assert_eq!(verdict(&checks, "CRD clusterpromotions").0, "Ok");
    assert_eq!(
        verdict(&checks, "CRD clusters.cluster.x-k8s.io").0,
        "Skipped"
    );
    let (v, detail) = verdict(&checks, "permissions");
    assert_eq!(v, "Ok", "{detail}");

    // One verb fewer: doctor names exactly what is missing.
    let mut reduced = pass_role();
    reduced.rules.as_mut().unwrap()[1].verbs.clear();
    env.server
        .set_authorizer(Arc::new(Rbac::bind(sa, &reduced, &["admin"])));
    let (code, checks, out) = doctor(&env, sa);
    assert_eq!(code, 2, "{out}");
    let (v, detail) = verdict(&checks, "permissions");
    assert_eq!(v, "Failed");
    assert!(
        detail.contains("update clusterpromotions/status.config.projectsveltos.io"),
        "{detail}"
    );

    // A CronJob that stopped succeeding, and a Sveltos that still advances promotions itself.
    let cronjobs = ResourceType::builtin("batch", "v1", "CronJob", "cronjobs", true);
    let deployments = ResourceType::builtin("apps", "v1", "Deployment", "deployments", true);
    env.server.register(cronjobs.clone());
    env.server.register(deployments.clone());
    let ten_minutes_ago = (chrono::Utc::now() - chrono::Duration::minutes(10))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    env.server.store().seed(&cronjobs, json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "promoter", "namespace": "promoter-system"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "promoter", "image": "promoter"}]}}}}},
        "status": {"lastSuccessfulTime": ten_minutes_ago}})).unwrap();
    env.server.store().seed(&deployments, json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "addon-controller", "namespace": "projectsveltos"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
          "spec": {"containers": [{"name": "manager", "image": "docker.io/projectsveltos/addon-controller:v1.13.0"}]}}}})).unwrap();
    env.server
        .set_authorizer(Arc::new(promoter::fake::AllowAll));
    let (code, checks, out) = doctor(&env, "admin");
    assert_eq!(code, 2, "{out}");
    let (v, detail) = verdict(&checks, "CronJob promoter-system/promoter");
    assert_eq!(v, "Failed", "{detail}");
    assert!(detail.contains("last succeeded 10m"), "{detail}");
    let (v, detail) = verdict(&checks, "another controller");
    assert_eq!(v, "Failed");
    assert!(detail.contains("v1.13.0"), "{detail}");

    // The CronJob as `status` names it (issue 31): `--cronjob NAMESPACE/NAME` or `none`, or
    // PROMOTER_CRONJOB, the same flag and variable.
    for (args, vars) in [
        (&["--cronjob", "none"][..], &[][..]),
        (&[][..], &[("PROMOTER_CRONJOB", "none")][..]),
    ] {
        let (_, checks, out) = doctor_with(&env.server, "admin", args, vars);
        let (v, detail) = verdict(&checks, "CronJob");
        assert_eq!(v, "Skipped", "{args:?} {vars:?}: {out}");
        assert!(detail.contains("--cronjob none"), "{detail}");
        // What is known without a CronJob (issue 31): the last change a pass recorded.
        assert!(
            detail.contains("; the last status change a pass recorded: ")
                && detail.contains("a quiet pass leaves no record"),
            "{detail}"
        );
    }
    for (args, vars) in [
        (&["--cronjob", "promoter-system/other"][..], &[][..]),
        (
            &[][..],
            &[("PROMOTER_CRONJOB", "promoter-system/other")][..],
        ),
    ] {
        let (_, checks, out) = doctor_with(&env.server, "admin", args, vars);
        let (v, _) = verdict(&checks, "CronJob promoter-system/other");
        assert_eq!(v, "Skipped", "{args:?} {vars:?}: {out}");
    }
    let (code, _, out) = doctor_with(&env.server, "admin", &["--cronjob", "promoter"], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("expected NAMESPACE/NAME"), "{out}");
}

/// promoter's own CRDs are checked like the others; the active freezes are listed (name, reason,
/// selector, until) and an invalid one is a failing check of its own.
#[tokio::test(flavor = "multi_thread")]
async fn own_crds_and_freezes() {
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    let (_, checks, out) = doctor(&env, "admin");
    assert_eq!(
        verdict(&checks, "CRD promotionfreezes.promoter.dev").0,
        "Ok",
        "{out}"
    );
    assert_eq!(
        verdict(&checks, "CRD promotionrevisions.promoter.dev").0,
        "Ok"
    );
    assert_eq!(
        verdict(&checks, "PromotionFreezes"),
        ("Ok", "none active (0 in all)")
    );
    let freezes = promoter::fake::promotion_freeze_type();
    for (name, spec) in [
        (
            "holidays",
            json!({"reason": "CAB-123", "promotionSelector": {"matchLabels": {"tier": "prod"}},
            "end": "2099-01-04T00:00:00Z"}),
        ),
        (
            "backwards",
            json!({"reason": "x", "start": "2099-01-04T00:00:00Z", "end": "2098-01-04T00:00:00Z"}),
        ),
    ] {
        let freeze = json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
            "metadata": {"name": name}, "spec": spec});
        // Unvalidated: the CRD refuses the backwards one now; it was stored before that rule.
        env.server
            .store()
            .seed_unvalidated(&freezes, freeze)
            .unwrap();
    }
    let (code, checks, out) = doctor(&env, "admin");
    assert_eq!(code, 2, "{out}");
    assert_eq!(
        verdict(&checks, "PromotionFreezes"),
        (
            "Ok",
            "1 active: holidays (\"CAB-123\"; tier=prod; until 2099-01-04T00:00:00Z)"
        )
    );
    let (v, detail) = verdict(&checks, "PromotionFreeze backwards");
    assert_eq!(v, "Failed");
    assert!(
        detail.starts_with("Invalid, holds nothing: spec.end: "),
        "{detail}"
    );

    // Without promoter's CRDs: a warning (they are optional), with what is missing and the
    // command that installs them.
    let bare = promoter::fake::FakeApiServer::start().await.unwrap();
    for rt in promoter::fake::sveltos_types() {
        bare.register(rt);
    }
    let (_, checks, _) = doctor_at(&bare, "admin");
    assert_eq!(
        verdict(&checks, "CRD promotionfreezes.promoter.dev"),
        (
            "Warning",
            "not served (promoter.dev/v1alpha1): no freezes, no stored revisions (a failure-policy rollback is blocked); promoter crd --own | kubectl apply -f -"
        )
    );
    assert_eq!(verdict(&checks, "PromotionFreezes").0, "Skipped");
}

/// The notification settings as a pass reads them (issue 26): off without the ConfigMap, each
/// problem of the rules named, and a receiver whose Secret key is missing is a failing check of
/// its own (its transitions could never be sent). The URLs, secrets, are never shown.
#[tokio::test(flavor = "multi_thread")]
async fn notification_settings_and_their_secret_keys() {
    use base64::Engine;
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.server
        .set_authorizer(Arc::new(promoter::fake::AllowAll));
    let configmaps = ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true);
    let meta = json!({"name": "promoter-notifications", "namespace": "promoter-system"});
    let (_, checks, _) = doctor(&env, "admin");
    let (v, detail) = verdict(&checks, "notifications");
    assert_eq!(
        (v, detail),
        (
            "Skipped",
            "no ConfigMap promoter-system/promoter-notifications: notifications are off"
        )
    );

    let invalid = "receivers:\n- {name: hook, type: pager, urlFrom: {key: hook-url}}\nrules:\n- receivers: [nobody]\n";
    env.server
        .store()
        .seed(
            &configmaps,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta, "data": {"config.yaml": invalid}}),
        )
        .unwrap();
    let (code, checks, out) = doctor(&env, "admin");
    assert_eq!(code, 2, "{out}");
    let (v, detail) = verdict(&checks, "notifications");
    assert_eq!(v, "Failed");
    assert!(
        detail.contains("receivers[0].type") && detail.contains("rules[0].receivers[0]"),
        "{detail}"
    );

    let valid = "receivers:\n- {name: hook, type: webhook, urlFrom: {key: hook-url}, headersFrom: {Authorization: token}}\n- {name: slack, type: slack, urlFrom: {key: slack-url}}\nrules:\n- receivers: [hook, slack]\n";
    let mut store = env.server.store();
    let mut cm = store
        .get(&configmaps, "promoter-system", "promoter-notifications")
        .unwrap();
    cm["data"]["config.yaml"] = json!(valid);
    store
        .update(
            &configmaps,
            "promoter-system",
            "promoter-notifications",
            cm,
            false,
        )
        .unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    store.seed(&promoter::fake::secret_type(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta,
        "data": {"hook-url": b64("https://hooks.example.com/s3cr3t-path"), "slack-url": b64("https://hooks.slack.com/services/T/B/s3cr3t")}})).unwrap();
    drop(store);
    let (code, checks, out) = doctor(&env, "admin");
    assert_eq!(code, 2, "{out}");
    assert_eq!(verdict(&checks, "notifications").0, "Ok");
    let (v, detail) = verdict(&checks, "notification receiver hook");
    assert_eq!(v, "Failed");
    assert!(detail.contains("no key \"token\""), "{detail}");
    let (v, detail) = verdict(&checks, "notification receiver slack");
    assert_eq!((v, detail), ("Ok", "slack to host hooks.slack.com"));
    assert!(!out.contains("s3cr3t"), "{out}");
}
