//! The CronJob installation in cronjob/: every manifest is a valid Kubernetes object with no unknown
//! field, and the shipped ClusterRole is both sufficient (a complete rollout with health checks,
//! preverification, approval reset, deletions and notifications passes under it, enforced by the fake API server as
//! RBAC does) and minimal (dropping any one verb makes some pass fail with 403).

mod common;

use base64::Engine;
use common::Env;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use promoter::fake::rbac::Rbac;
use promoter::fake::secret_type;
use promoter::fake::{FakeApiServer, ResourceType};
use promoter::health::HealthEngine;
use promoter::pass::{PassOptions, run_pass};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

const SA: &str = "system:serviceaccount:promoter-system:promoter";

fn manifest(file: &str) -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("cronjob")
            .join(file),
    )
    .unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// A manifest of cronjob/, typed (no unknown field).
fn typed<K: DeserializeOwned + serde::Serialize>(file: &str) -> K {
    common::round_trip(&manifest(file), file)
}

#[test]
fn manifests_are_valid_objects() {
    let kustomization = manifest("kustomization.yaml");
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        resources,
        [
            "crds.yaml",
            "namespace.yaml",
            "serviceaccount.yaml",
            "clusterrole.yaml",
            "clusterrolebinding.yaml",
            "approver-clusterrole.yaml",
            "cronjob.yaml"
        ]
    );
    typed::<Namespace>("namespace.yaml");
    let sa: ServiceAccount = typed("serviceaccount.yaml");
    let binding: ClusterRoleBinding = typed("clusterrolebinding.yaml");
    typed::<ClusterRole>("clusterrole.yaml");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        format!(
            "system:serviceaccount:{}:{}",
            subject.namespace.clone().unwrap(),
            subject.name
        ),
        SA
    );
    assert_eq!(sa.metadata.name.as_deref(), Some("promoter"));
    let cron: CronJob = typed("cronjob.yaml");
    let spec = cron.spec.unwrap();
    assert_eq!(spec.schedule, "* * * * *");
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
    assert!(spec.starting_deadline_seconds.is_some());
    let job = spec.job_template.spec.unwrap();
    assert!(
        job.active_deadline_seconds.unwrap() < 60,
        "a pass ends before the next one starts"
    );
    assert!(job.ttl_seconds_after_finished.is_some());
    let pod = job.template.spec.unwrap();
    let psc = pod.security_context.unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let c = &pod.containers[0];
    let sc = c.security_context.clone().unwrap();
    assert_eq!(
        (sc.allow_privilege_escalation, sc.read_only_root_filesystem),
        (Some(false), Some(true))
    );
    assert_eq!(sc.capabilities.unwrap().drop.unwrap(), ["ALL"]);
    let resources = c.resources.clone().unwrap();
    assert!(resources.requests.is_some() && resources.limits.is_some());
    let env: Vec<String> = c.env.clone().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(env, ["TZ", "PROMOTER_LOG_FORMAT", "PROMOTER_LOG_LEVEL"]);
}

/// A rollout that uses every permission: health checks (kubeconfig Secret, a jobCheck ConfigMap),
/// a preverification profile (created, then deleted), a new revision (profile updated), a manual
/// stage (approval reset), a CAPI
/// inventory, and a promotion deleted with preserveClusterProfilesOnDelete. Returns the number of
/// 403 answers and whether everything completed.
async fn scenario(role: &ClusterRole) -> (usize, bool) {
    let env = Env::new(&[("dev", "dev01", "dev"), ("prod", "prod01", "prod")]).await;
    env.server.register(promoter::fake::capi_cluster_type());
    env.server.store().seed(&promoter::fake::capi_cluster_type(), json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "capi01", "namespace": "other", "labels": {"env": "lab"}}, "spec": {}, "status": {"controlPlaneReady": true}})).unwrap();
    let managed = FakeApiServer::start().await.unwrap();
    managed.register(ResourceType::builtin("batch", "v1", "Job", "jobs", true));
    managed.register(secret_type());
    managed.store().seed(&ResourceType::builtin("batch", "v1", "Job", "jobs", true), json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "verify", "namespace": "checks"}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})).unwrap();
    managed.store().seed(&secret_type(), json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "app"}})).unwrap();
    env.server.store().seed(&secret_type(), json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "dev01-sveltos-kubeconfig", "namespace": "dev"},
        "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(managed.kubeconfig_yaml("promoter"))}})).unwrap();
    env.server.store().seed(&ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true), json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "verify", "namespace": "dev"},
        "data": {"job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: verify\n  namespace: checks\n"}})).unwrap();
    let main: promoter::api::ClusterPromotion = serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "metadata": {"name": "main"},
        "spec": {"profileSpec": {"helmCharts": [{"repositoryURL": "https://x", "repositoryName": "x", "chartName": "x/c", "chartVersion": "1.0.0", "releaseName": "r", "releaseNamespace": "n"}]},
          "stages": [
            {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"manual": {"approved": true,
              "preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "dev", "name": "verify"}],
              "postDelayHealthChecks": [
                {"name": "job", "featureID": "Resources", "jobCheck": {"jobRef": {"kind": "ConfigMap", "name": "verify", "namespace": ""}}},
                {"name": "token", "featureID": "Resources", "version": "v1", "kind": "Secret", "namespace": "app",
                 "script": "function evaluate() return {healthy = true} end"}]}}},
            {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}]}
    })).unwrap();
    env.apply_promotion(&main);
    let mut kept = main.clone();
    kept.metadata.name = Some("kept".into());
    kept.spec.stages.truncate(1);
    kept.spec.stages[0].trigger = None;
    env.apply_promotion(&kept);
    // A promotion that cannot be read (its error status is a merge patch of /status) and a
    // hand-written profile with a generated name (looked at with a get, then adopted).
    env.server.store().seed(&promoter::fake::cluster_promotion_type(), json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "metadata": {"name": "unreadable"},
        "spec": {"stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "1d"}}}]}})).unwrap();
    env.server.store().seed(&promoter::fake::cluster_profile_type(), json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile", "metadata": {"name": "main-prod"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "legacy"}}}})).unwrap();
    // Issue 24: a freeze that ended before the rollout (it holds nothing; the pass writes its
    // status), and a promotion that completes two revisions with a history of one (its first
    // stored revision is deleted).
    env.server.store().seed(&promoter::fake::promotion_freeze_type(), json!({
        "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze", "metadata": {"name": "over"},
        "spec": {"reason": "last week's freeze", "start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}})).unwrap();
    let mut history = kept.clone();
    history.metadata.name = Some("history".into());
    history.metadata.annotations = Some(
        [(
            "promoter.dev/revision-history-limit".to_string(),
            "1".to_string(),
        )]
        .into(),
    );
    env.apply_promotion(&history);
    // Issue 26: the notification settings at their default place (the ConfigMap and the Secret
    // read with the same `get` as the health checks' Secrets and ConfigMaps), and a receiver.
    let receiver = promoter::fake::webhook::WebhookReceiver::start()
        .await
        .unwrap();
    env.server.store().seed(&ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true), json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "promoter-notifications", "namespace": "promoter-system"},
        "data": {"config.yaml": "receivers:\n- {name: hook, type: webhook, urlFrom: {key: url}}\nrules:\n- receivers: [hook]\n"}})).unwrap();
    env.server
        .store()
        .seed(
            &secret_type(),
            json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "promoter-notifications", "namespace": "promoter-system"},
        "data": {"url": base64::engine::general_purpose::STANDARD.encode(receiver.url("/hook"))}}),
        )
        .unwrap();
    env.server
        .set_authorizer(Arc::new(Rbac::bind(SA, role, &["admin"])));
    let sa = env.server.client_as(SA).await.unwrap();
    let mut deleted = false;
    for tick in 0..30 {
        if tick == 8 {
            let mut v2 = history.clone();
            v2.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] =
                json!("2.0.0");
            env.apply_promotion(&v2);
        }
        if tick == 2 {
            // A new revision mid-rollout: stage 1's profile is updated in place.
            let mut v2 = main.clone();
            v2.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] =
                json!("2.0.0");
            env.apply_promotion(&v2);
        }
        let opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: chrono_tz::Tz::UTC,
            now: env.now(),
            notifications: Some(promoter::notify::Location::default_location()),
        };
        let _ = run_pass(&sa, &HealthEngine::new(sa.clone(), env.now()), &opts).await;
        env.addon.reconcile(&env.server, env.now());
        env.advance(chrono::Duration::minutes(1));
        if tick == 12 && !deleted {
            // preserve set just before the delete: the profiles still carry the owner reference
            // (promoter leaves it off only while preserve is set), so they are disowned (patch).
            let mut preserve = kept.clone();
            preserve.spec.preserve_cluster_profiles_on_delete = Some(true);
            env.apply_promotion(&preserve);
            let api: kube::Api<promoter::api::ClusterPromotion> =
                kube::Api::all(env.client.clone());
            deleted = api.delete("kept", &Default::default()).await.is_ok();
        }
    }
    let forbidden = env.server.count(|r| r.code == 403);
    let main_done = env
        .description("main", "prod")
        .is_some_and(|d| d.starts_with("Successfully provisioned"));
    let approval_reset = env
        .promotion("main")
        .is_some_and(|p| p.spec.stages[0].manual_approval().is_none());
    let preserved = env.promotion("kept").is_none()
        && env
            .profile("kept-dev")
            .is_some_and(|p| p.metadata.owner_references.unwrap_or_default().is_empty());
    let unreadable_reported = env
        .server
        .store()
        .get(&promoter::fake::cluster_promotion_type(), "", "unreadable")
        .ok()
        .and_then(|v| v.pointer("/status/stages/0/failureMessage").cloned())
        .is_some();
    let adopted = env.profile("main-prod").is_some_and(|p| {
        p.metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|r| r.name == "main")
    });
    let freeze_status = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "over")
        .ok()
        .and_then(|v| v.pointer("/status/phase").cloned());
    let revisions: Vec<Value> = env
        .server
        .store()
        .all(&promoter::fake::promotion_revision_type())
        .into_iter()
        .filter(|r| r["spec"]["promotion"] == "history")
        .collect();
    let notified = receiver
        .received()
        .iter()
        .any(|r| r.json()["transition"] == "RolloutCompleted");
    let history_trimmed = revisions.len() == 1
        && revisions[0]["spec"]["profileSpec"]["helmCharts"][0]["chartVersion"] == "2.0.0";
    (
        forbidden,
        main_done
            && notified
            && freeze_status == Some(json!("Expired"))
            && history_trimmed
            && unreadable_reported
            && adopted
            && approval_reset
            && preserved
            && env.profile("preverification-main-dev").is_none(),
    )
}

#[tokio::test]
async fn the_cluster_role_is_sufficient_and_minimal() {
    let role: ClusterRole = serde_json::from_value(manifest("clusterrole.yaml")).unwrap();
    let (forbidden, done) = scenario(&role).await;
    assert_eq!(forbidden, 0, "the shipped role lacks a permission");
    assert!(done, "the rollout completed under the shipped role");
    let rules = role.rules.clone().unwrap();
    let granted = |resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.resources.iter().flatten().any(|x| x == resource) && r.verbs.iter().any(|v| v == verb)
        })
    };
    for (resource, verb) in [
        ("promotionfreezes", "list"),
        ("promotionfreezes/status", "patch"),
        ("promotionrevisions", "get"),
        ("promotionrevisions", "list"),
        ("promotionrevisions", "create"),
        ("promotionrevisions", "delete"),
    ] {
        assert!(granted(resource, verb), "{verb} {resource} is in the role");
    }
    for (i, rule) in rules.iter().enumerate() {
        for verb in &rule.verbs {
            let mut reduced = role.clone();
            let r = &mut reduced.rules.as_mut().unwrap()[i];
            r.verbs.retain(|v| v != verb);
            let (forbidden, _) = scenario(&reduced).await;
            assert!(
                forbidden > 0,
                "verb {verb} on {:?} is never needed",
                rule.resources
            );
        }
    }
}

/// The CronJob `cronjob/` installs is the one `status`, `explain` and `doctor` look for by default.
#[test]
fn the_shipped_cronjob_is_where_the_commands_look() {
    use promoter::ops::inspect::{CRONJOB, CRONJOB_NAME, CRONJOB_NAMESPACE};
    let cronjob = manifest("cronjob.yaml");
    let namespace = manifest("kustomization.yaml")["namespace"].clone();
    assert_eq!(namespace, CRONJOB_NAMESPACE);
    assert_eq!(cronjob["metadata"]["namespace"], CRONJOB_NAMESPACE);
    assert_eq!(cronjob["metadata"]["name"], CRONJOB_NAME);
    assert_eq!(CRONJOB, format!("{CRONJOB_NAMESPACE}/{CRONJOB_NAME}"));
    for (command, default) in [
        ("status", format!("[default: {CRONJOB}]")),
        ("explain", format!("[default: {CRONJOB}]")),
        ("doctor", format!("[default: {CRONJOB}]")),
        ("status", "[env: PROMOTER_CRONJOB".to_string()),
        ("doctor", "[env: PROMOTER_CRONJOB".to_string()),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains(&default), "{command} --help: {help}");
    }
}

/// The shipped CronJob's container (its args and env, as the manifest says) exits 0 on a pass that
/// did its work while a promotion waits for a person: under `backoffLimit: 0` a non-zero exit fails
/// the Job, and the CronJob's last success, `status`'s last pass, `doctor` and the stepper alerts
/// would all report a broken stepper. `--fail-on promotions` (or `PROMOTER_FAIL_ON`) is the CI
/// gate's mode: 2 while a promotion is in error. A pass that cannot write exits 2 in both.
#[tokio::test(flavor = "multi_thread")]
async fn the_cronjob_succeeds_while_a_rollout_waits_for_a_person() {
    use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
    let env = Env::new(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-auto.yaml");
    // A promotion that cannot be processed as written: Blocked, a person must fix it.
    let mut held = env.promotion("kyverno-rollout-auto").unwrap();
    held.metadata = kube::core::ObjectMeta {
        name: Some("held".into()),
        ..Default::default()
    };
    held.spec.stages[0].trigger = serde_json::from_value(
        json!({"auto": {"promotionWindow": {"from": "nope", "to": "* * * * *"}}}),
    )
    .unwrap();
    env.apply_promotion(&held);
    let cron: CronJob = typed("cronjob.yaml");
    let pod = cron
        .spec
        .unwrap()
        .job_template
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let container = &pod.containers[0];
    let dir = std::env::temp_dir().join(format!("promoter-cronjob-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, env.server.kubeconfig_yaml("admin")).unwrap();
    let run = |extra: &[&str], fail_on: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"));
        cmd.args(container.args.clone().unwrap_or_default())
            .args(extra)
            .env_clear()
            .env("KUBECONFIG", &kc);
        for e in container.env.clone().unwrap_or_default() {
            cmd.env(e.name, e.value.unwrap_or_default());
        }
        if let Some(f) = fail_on {
            cmd.env("PROMOTER_FAIL_ON", f);
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    };
    let (code, out) = run(&[], None);
    assert_eq!(
        code, 0,
        "the pass did its work; the promotion is blocked: {out}"
    );
    assert!(out.contains("Blocked"), "{out}");
    let (code, out) = run(&["--fail-on", "promotions"], None);
    assert_eq!(code, 2, "a CI gate on the rollouts: {out}");
    let (code, out) = run(&[], Some("promotions"));
    assert_eq!(code, 2, "PROMOTER_FAIL_ON: {out}");
    // The stepper cannot write: that is the stepper's failure, in both modes.
    let mut next = env.promotion("kyverno-rollout-auto").unwrap();
    next.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    env.apply_promotion(&next);
    env.server.inject(FaultRule::after(
        RequestMatcher::writes(),
        0,
        FaultAction::Status(403),
    ));
    let (code, out) = run(&[], None);
    assert_eq!(code, 2, "a write the pass could not make: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}
