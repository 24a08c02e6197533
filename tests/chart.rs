//! The Helm chart `charts/promoter`, rendered by a real chart renderer: for the default values it
//! renders the objects `kubectl apply -k cronjob/` installs (as `kubectl kustomize` builds them),
//! object by object. The one normalisation: the labels Helm's conventions put on every object
//! (`helm.sh/chart` and `app.kubernetes.io/{name,instance,version,managed-by}`) are removed before
//! comparing. The Namespace is rendered only with `namespace.create=true` (`helm install
//! --create-namespace` creates it otherwise, before any object of the chart, and Helm cannot own
//! it); with it, the rendering is exactly the kustomization's. So the chart's ClusterRole has the
//! rules tests/cronjob.rs proves sufficient and minimal (the chart reads them, and the approver
//! roles, from cronjob/ through links in `files/`). promoter's own CRDs are the chart's `crds/` (a
//! link to cronjob/crds.yaml), rendered as `helm template --include-crds` does.
//!
//! Renderer: `helm template` when a `helm` binary is on the PATH, else Helm's Go SDK (v4) through
//! the PyPI package helm-python-sdk (tests/chart/render.py; `.ci/run` installs it). Without either,
//! or without `kubectl` (for `kubectl kustomize`), the tests say SKIPPED and pass.

mod common;

use common::{on_path, succeeded};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const NAMESPACE: &str = "promoter-system";
/// The labels Helm's conventions add to every object of a chart (see `promoter.labels`).
const HELM_LABELS: [&str; 5] = [
    "helm.sh/chart",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The renderer's command for `template` (with the release name) or `lint`, or why there is none.
fn renderer(action: &str, release: &str) -> Result<Command, String> {
    if let Some(helm) = on_path("helm") {
        let mut c = Command::new(helm);
        match action {
            "template" => c.args(["template", release, "--include-crds"]),
            _ => c.args(["lint", "--strict"]),
        };
        return Ok(c);
    }
    let python = std::env::var("PROMOTER_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = root().join("tests/chart/render.py");
    let probe = Command::new(&python)
        .arg(&script)
        .arg("--help")
        .output()
        .map_err(|e| format!("no helm binary, and {python}: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "no helm binary, and {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    let mut c = Command::new(python);
    c.arg(script).args([action, "--name", release]);
    Ok(c)
}

/// The chart's objects for these `--set` values and release name, or why they cannot be had.
fn render_as(release: &str, sets: &[&str]) -> Result<Vec<Value>, String> {
    let mut c = renderer("template", release)?;
    c.arg(root().join("charts/promoter"))
        .args(["--namespace", NAMESPACE]);
    for s in sets {
        c.args(["--set", s]);
    }
    let out = c.output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "rendering failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(documents(&text))
}

fn render(sets: &[&str]) -> Option<Vec<Value>> {
    match render_as("promoter", sets) {
        Ok(docs) => Some(docs),
        Err(why) if why.starts_with("rendering failed") => panic!("{why}"),
        Err(why) => {
            eprintln!("SKIPPED: no chart renderer ({why}); .ci/run installs helm-python-sdk");
            None
        }
    }
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// What `kubectl apply -k cronjob/` applies.
fn kustomized() -> Option<Vec<Value>> {
    let Some(kubectl) = on_path("kubectl") else {
        eprintln!("SKIPPED: no kubectl on the PATH for `kubectl kustomize cronjob/`");
        return None;
    };
    let out = succeeded(
        Command::new(kubectl)
            .arg("kustomize")
            .arg(root().join("cronjob")),
    );
    Some(documents(&out))
}

fn key(o: &Value) -> String {
    format!(
        "{} {}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Objects by kind, namespace and name, without the labels Helm adds.
fn normalised(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|mut o| {
            if let Some(labels) = o
                .pointer_mut("/metadata/labels")
                .and_then(Value::as_object_mut)
            {
                for l in HELM_LABELS {
                    labels.remove(l);
                }
                if labels.is_empty() {
                    o["metadata"].as_object_mut().unwrap().remove("labels");
                }
            }
            (key(&o), o)
        })
        .collect()
}

fn assert_same(chart: BTreeMap<String, Value>, installed: BTreeMap<String, Value>) {
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        installed.keys().collect::<Vec<_>>(),
        "the chart renders other objects than cronjob/ installs"
    );
    for (k, o) in &installed {
        assert_eq!(&chart[k], o, "{k} differs from cronjob/'s");
    }
}

#[test]
fn default_values_render_what_cronjob_installs() {
    let (Some(chart), Some(installed)) = (render(&[]), kustomized()) else {
        return;
    };
    // Helm installs crds/ as they are (a link to cronjob/crds.yaml); the templates get its labels.
    for o in chart
        .iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
    {
        let labels = &o["metadata"]["labels"];
        for l in HELM_LABELS {
            assert!(labels[l].is_string(), "{} lacks {l}", key(o));
        }
    }
    let mut installed = normalised(installed);
    let namespace = installed
        .remove(&format!("Namespace /{NAMESPACE}"))
        .unwrap();
    assert_same(normalised(chart), installed.clone());
    // With namespace.create, the Namespace too, labels and all.
    let chart = render(&["namespace.create=true"]).unwrap();
    installed.insert(key(&namespace), namespace);
    assert_same(normalised(chart), installed);
}

/// The object of this kind and name, typed (no unknown field).
fn typed<K: DeserializeOwned + serde::Serialize>(objects: &[Value], kind: &str, name: &str) -> K {
    let raw = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    common::round_trip(raw, &format!("{kind} {name}"))
}

/// The pod template of the CronJob `name`.
fn pod_of(chart: &[Value], name: &str) -> PodSpec {
    let cron: CronJob = typed(chart, "CronJob", name);
    let job = cron.spec.unwrap().job_template.spec.unwrap();
    job.template.spec.unwrap()
}

#[test]
fn every_setting_reaches_the_cronjob() {
    let Some(chart) = render(&[
        "schedule=*/2 * * * *",
        "suspend=true",
        "activeDeadlineSeconds=100",
        "image.tag=v9.9.9,image.pullPolicy=Always",
        "imagePullSecrets[0].name=registry",
        "timezone=Europe/Berlin",
        "log.format=human,log.level=promoter=debug",
        "deadline=90s",
        "shard=1/3",
        "selector=team=payments",
        "pushgateway.url=http://pushgateway.monitoring:9091,pushgateway.instance=mgmt",
        "extraEnv[0].name=PROMOTER_CAPI_ONBOARD_ANNOTATION,extraEnv[0].value=onboard",
        "resources.limits.memory=256Mi",
        "podLabels.team=platform,podAnnotations.note=x",
        "nodeSelector.kubernetes\\.io/os=linux",
        "tolerations[0].operator=Exists",
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/p",
    ]) else {
        return;
    };
    let cron: CronJob = typed(&chart, "CronJob", "promoter");
    let spec = cron.spec.unwrap();
    assert_eq!(spec.schedule, "*/2 * * * *");
    assert_eq!(spec.suspend, Some(true));
    let job = spec.job_template.spec.unwrap();
    assert_eq!(job.active_deadline_seconds, Some(100));
    let template = job.template;
    let meta = template.metadata.unwrap();
    assert_eq!(meta.labels.unwrap()["team"], "platform");
    assert_eq!(meta.annotations.unwrap()["note"], "x");
    let pod = template.spec.unwrap();
    assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "registry");
    assert_eq!(pod.node_selector.unwrap()["kubernetes.io/os"], "linux");
    assert_eq!(
        pod.tolerations.unwrap()[0].operator.as_deref(),
        Some("Exists")
    );
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("ghcr.io/promoter-dev/promoter:v9.9.9")
    );
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        c.args.as_deref().unwrap(),
        ["step", "--selector=team=payments"]
    );
    let env: Vec<(String, String)> = c
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect();
    let expected = [
        ("TZ", "Europe/Berlin"),
        ("PROMOTER_LOG_FORMAT", "human"),
        ("PROMOTER_LOG_LEVEL", "promoter=debug"),
        ("PROMOTER_DEADLINE", "90s"),
        ("PROMOTER_SHARD", "1/3"),
        (
            "PROMOTER_PUSHGATEWAY_URL",
            "http://pushgateway.monitoring:9091",
        ),
        ("PROMOTER_PUSHGATEWAY_INSTANCE", "mgmt"),
        ("PROMOTER_CAPI_ONBOARD_ANNOTATION", "onboard"),
    ]
    .map(|(n, v)| (n.to_string(), v.to_string()));
    assert_eq!(env, expected);
    let limits = c.resources.clone().unwrap().limits.unwrap();
    assert_eq!(limits["memory"].0, "256Mi");
    assert_eq!(limits["cpu"].0, "500m", "values merge with the defaults");
    let sa: ServiceAccount = typed(&chart, "ServiceAccount", "promoter");
    assert_eq!(
        sa.metadata.annotations.unwrap()["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::1:role/p"
    );
    // Every flag the chart sets is one `promoter step` takes.
    let out = Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(c.args.as_deref().unwrap())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for (name, _) in &env[1..7] {
        assert!(help.contains(&format!("[env: {name}=")), "{name}: {help}");
    }

    // A digest pins the image instead of the tag.
    let chart = render(&["image.digest=sha256:0123"]).unwrap();
    let pod = pod_of(&chart, "promoter");
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("ghcr.io/promoter-dev/promoter@sha256:0123")
    );
}

#[test]
fn names_follow_the_release_and_parts_can_be_left_out() {
    // Another release name (a second shard, say): every name and reference follows it.
    let chart = match render_as("payments", &["shard=1/2", "namespace.create=true"]) {
        Ok(c) => c,
        Err(why) if why.starts_with("rendering failed") => panic!("{why}"),
        Err(why) => return eprintln!("SKIPPED: no chart renderer ({why})"),
    };
    let name = "payments-promoter";
    typed::<Namespace>(&chart, "Namespace", NAMESPACE);
    typed::<ServiceAccount>(&chart, "ServiceAccount", name);
    typed::<ClusterRole>(&chart, "ClusterRole", name);
    let binding: ClusterRoleBinding = typed(&chart, "ClusterRoleBinding", name);
    assert_eq!(binding.role_ref.name, name);
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (name, Some(NAMESPACE))
    );
    let approver: ClusterRole = typed(&chart, "ClusterRole", &format!("{name}-approver"));
    let cronjob_rule = approver
        .rules
        .unwrap()
        .into_iter()
        .find(|r| r.resources.as_deref() == Some(&["cronjobs".to_string()]))
        .unwrap();
    assert_eq!(cronjob_rule.resource_names.unwrap(), [name]);
    typed::<ClusterRole>(&chart, "ClusterRole", &format!("{name}-view"));
    typed::<ClusterRole>(&chart, "ClusterRole", &format!("{name}-edit"));
    let pod = pod_of(&chart, name);
    assert_eq!(pod.service_account_name.as_deref(), Some(name));

    // Without RBAC and with an existing service account: only the CronJob (and the CRDs).
    let chart = render(&[
        "rbac.create=false",
        "rbac.approverRoles=false",
        "serviceAccount.create=false",
        "serviceAccount.name=existing",
    ])
    .unwrap();
    let mut keys: Vec<String> = chart.iter().map(key).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            format!("CronJob {NAMESPACE}/promoter"),
            "CustomResourceDefinition /promotionfreezes.promoter.dev".into(),
            "CustomResourceDefinition /promotionrevisions.promoter.dev".into(),
        ]
    );
    let pod = pod_of(&chart, "promoter");
    assert_eq!(pod.service_account_name.as_deref(), Some("existing"));
    // An existing service account must be named.
    let err = render_as("promoter", &["serviceAccount.create=false"]).unwrap_err();
    assert!(err.contains("serviceAccount.name"), "{err}");
}

/// The notification settings: the ConfigMap from the values (the settings a pass reads), the
/// Secret's name (the same), and where they are in PROMOTER_NOTIFICATIONS when not the default.
#[test]
fn notification_settings_from_the_values() {
    let Some(chart) = render(&[
        "notifications.name=alerts",
        // One --set per list: a later one would replace the list's element.
        "notifications.config.receivers[0].name=hook,notifications.config.receivers[0].type=webhook,notifications.config.receivers[0].urlFrom.key=hook-url",
        "notifications.config.rules[0].receivers[0]=hook,notifications.config.rules[0].transitions[0]=Failed",
        "notifications.config.maxAge=30m",
    ]) else {
        return;
    };
    let cm: k8s_openapi::api::core::v1::ConfigMap = typed(&chart, "ConfigMap", "alerts");
    assert_eq!(cm.metadata.namespace.as_deref(), Some(NAMESPACE));
    let text = &cm.data.unwrap()[promoter::notify::config::CONFIG_KEY];
    let config = promoter::notify::Config::parse(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    assert_eq!(config.receivers[0].name, "hook");
    assert_eq!(config.max_age, std::time::Duration::from_secs(1800));
    let env = |chart: &[Value]| -> Vec<(String, String)> {
        pod_of(chart, "promoter").containers[0]
            .env
            .clone()
            .unwrap()
            .into_iter()
            .filter(|e| e.name == "PROMOTER_NOTIFICATIONS")
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect()
    };
    let at = [(
        "PROMOTER_NOTIFICATIONS".to_string(),
        format!("{NAMESPACE}/alerts"),
    )];
    assert_eq!(env(&chart), at);
    assert!(
        promoter::notify::Location::parse(&at[0].1)
            .unwrap()
            .is_some()
    );
    // The chart renders no Secret: the URLs and tokens are the user's.
    assert!(chart.iter().all(|o| o["kind"] != "Secret"));
    // Off: `none`, and no ConfigMap.
    let chart = render(&[
        "notifications.enabled=false",
        "notifications.config.maxAge=1h",
    ])
    .unwrap();
    assert!(chart.iter().all(|o| o["kind"] != "ConfigMap"));
    assert_eq!(
        env(&chart),
        [("PROMOTER_NOTIFICATIONS".to_string(), "none".to_string())]
    );
}

#[test]
fn the_chart_lints_clean() {
    let mut lint = match renderer("lint", "promoter") {
        Ok(c) => c,
        Err(why) => return eprintln!("SKIPPED: no chart renderer ({why})"),
    };
    let out = lint.arg(root().join("charts/promoter")).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_chart_is_of_this_release() {
    let chart: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("charts/promoter/Chart.yaml")).unwrap(),
    )
    .unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["version"], json!(version));
    assert_eq!(chart["appVersion"], json!(version));
}
