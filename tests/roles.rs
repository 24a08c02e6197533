//! Every command of the book's "Operating a rollout", run through the real binary as a user bound
//! to each role the book (docs/src/security.md) tells people to bind (the shipped `promoter-view`, `promoter-approver`,
//! the built-in `view` and `edit` that `promoter-view`/`promoter-edit` aggregate into, the pass's
//! own `promoter` for `step` and `doctor`), on the fake API server's RBAC, which decides as
//! kube-apiserver's does (bindings, groups, aggregation, resourceNames). What a role grants
//! works; what it does not is one line, as kubectl prints it, with a hint naming the installed
//! ClusterRole that grants it and the `kubectl create clusterrolebinding` line.

mod common;

use common::{Env, rand_suffix};
use promoter::fake::ResourceType;
use promoter::fake::rbac::Rbac;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

const NAME: &str = "kyverno-prog-rollout-man";
const SA: &str = "system:serviceaccount:promoter-system:promoter";

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// A new cluster's roles, what `kubectl apply -k cronjob/` installs, and the bindings the book's
/// commands create.
fn cluster_rbac() -> Rbac {
    Rbac::kubernetes_defaults()
        .cluster_roles_yaml(&repo_file("cronjob/clusterrole.yaml"))
        .unwrap()
        .cluster_roles_yaml(&repo_file("cronjob/approver-clusterrole.yaml"))
        .unwrap()
        .bind_cluster_role("promoter", "ServiceAccount", SA)
        .bind_cluster_role("cluster-admin", "User", "admin")
        .bind_cluster_role("promoter-view", "User", "vera")
        .bind_cluster_role("promoter-approver", "User", "alice")
        .bind_cluster_role("promoter-approver", "Group", "release-managers")
        .bind_cluster_role("view", "User", "victor")
        .bind_cluster_role("edit", "User", "edna")
        // A namespace's viewer: `view` through a RoleBinding reaches no cluster-scoped object.
        .bind_cluster_role_in("team-a", "view", "User", "nina")
}

/// A rollout awaiting approval at staging, with a completed earlier revision stored (for
/// `rollback`), the shipped CronJob after a successful pass, and the shipped roles in force.
async fn world() -> Env {
    let env = Env::new(&[("dev", "dev01", "dev"), ("staging", "st01", "staging")]).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..8 {
        env.tick().await;
    }
    let cronjobs = ResourceType::builtin("batch", "v1", "CronJob", "cronjobs", true);
    env.server.register(cronjobs.clone());
    let mut cronjob: Value = serde_saphyr::from_str(&repo_file("cronjob/cronjob.yaml")).unwrap();
    cronjob["metadata"]["namespace"] = json!("promoter-system");
    let just_now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    cronjob["status"] = json!({"lastSuccessfulTime": just_now, "lastScheduleTime": just_now});
    env.server.store().seed(&cronjobs, cronjob).unwrap();
    let p = env.promotion(NAME).unwrap();
    let at = promoter::api::Timestamp::parse("2026-02-10T07:00:00Z").unwrap();
    let mut history = promoter::annotations::History::default();
    history.record_completion("b2xk", None, at, 10);
    env.store_json_patch(
        NAME,
        json!([{"op": "add", "path": "/metadata/annotations", "value": {promoter::annotations::HISTORY: history.to_annotation()}}]),
    );
    let revision = promoter::api::PromotionRevision::of(&p, "b2xk", "c3Q=", None, at);
    env.server
        .store()
        .seed(
            &promoter::fake::promotion_revision_type(),
            serde_json::to_value(revision).unwrap(),
        )
        .unwrap();
    env.server.set_groups("rita", &["release-managers"]);
    env.server.set_authorizer(Arc::new(cluster_rbac()));
    env
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The binary as `user` (a kubeconfig whose token names the user), with `args`.
fn run_as(env: &Env, user: &str, args: &[&str]) -> Run {
    let dir = std::env::temp_dir().join(format!("promoter-roles-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, env.server.kubeconfig_yaml(user)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&kc)
        .env_remove("TZ")
        .env_remove("PROMOTER_CRONJOB")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

const READS: &[&[&str]] = &[
    &["status"],
    &["status", NAME, "-o", "json"],
    &["status", NAME, "--exit-code"],
    &["status", NAME, "-w", "--timeout", "1s"],
    &["explain", NAME],
    &["plan", NAME],
    &["freeze", "list"],
];

const WRITES: &[&[&str]] = &[
    &["approve", NAME, "--stage", "staging"],
    &["pause", NAME],
    &["resume", NAME],
    &["abort", NAME, "--reason", "INC-1"],
    &["rollback", NAME, "--reason", "INC-1"],
    &["resume", NAME],
    &["freeze", "create", "incident", "--reason", "INC-1"],
    &[
        "freeze", "bypass", NAME, "--reason", "hotfix", "--until", "1h", "--freeze", "incident",
    ],
    &["freeze", "delete", "incident"],
];

/// Exit codes a command may end with besides 0: `--exit-code` and `-w` tell the phase (4:
/// awaiting approval, 3: progressing while a person's commands run); `plan` exits 2 when the
/// rollout stops before its end (here: at the approval).
fn read_ok(args: &[&str], code: i32) -> bool {
    code == 0
        || (args.contains(&"--exit-code") || args.contains(&"-w")) && (code == 3 || code == 4)
        || args[0] == "plan" && code == 2
}

/// No log line, no debug dump: nothing on stderr, or only the warnings a command prints.
fn clean(run: &Run) -> bool {
    !run.stderr.contains('{') && !run.stderr.contains("Error {") && !run.stderr.contains("WARN")
}

fn assert_works(env: &Env, user: &str, commands: &[&[&str]]) {
    for args in commands {
        let run = run_as(env, user, args);
        assert!(
            read_ok(args, run.code),
            "{user}: {args:?} exited {}: {}{}",
            run.code,
            run.stdout,
            run.stderr
        );
        assert!(clean(&run), "{user}: {args:?}: {}", run.stderr);
    }
}

/// A denied command: exit 1, kubectl's one Forbidden line, and a hint that names `role` and the
/// binding that grants it to `user`.
fn assert_denied(env: &Env, user: &str, args: &[&str], role: &str) {
    let run = run_as(env, user, args);
    assert_eq!(
        run.code, 1,
        "{user}: {args:?}: {}{}",
        run.stdout, run.stderr
    );
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines[0].starts_with("Error from server (Forbidden): "),
        "{user}: {args:?}: {}",
        run.stderr
    );
    assert!(
        lines[0].contains(&format!("User \"{user}\" cannot ")),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 2, "{user}: {args:?}: {}", run.stderr);
    let hint = lines[1];
    assert!(hint.starts_with("hint: "), "{hint}");
    assert!(
        hint.contains(&format!("ClusterRole {role}")),
        "{user}: {args:?}: {hint}"
    );
    assert!(
        hint.contains(&format!(
            "kubectl create clusterrolebinding {user}-{role} --clusterrole={role} --user={user}"
        )),
        "{hint}"
    );
    assert!(
        !hint.contains(".yaml"),
        "no file of this repository: {hint}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn promoter_view_reads_everything_and_writes_nothing() {
    let env = world().await;
    assert_works(&env, "vera", READS);
    let status: Value =
        serde_json::from_str(&run_as(&env, "vera", &["status", NAME, "-o", "json"]).stdout)
            .unwrap();
    assert_eq!(
        status["lastPass"]["source"],
        "CronJob promoter-system/promoter"
    );
    for args in WRITES
        .iter()
        .filter(|a| a[0] != "resume" && a[1] != "delete" && a[1] != "bypass")
    {
        assert_denied(&env, "vera", args, "promoter-approver");
    }
    assert_eq!(
        env.server.count(|r| r.is_write()
            && r.user == "vera"
            && r.code < 300
            && !r.resource.starts_with("selfsubject")),
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn promoter_approver_runs_every_command() {
    let env = world().await;
    assert_works(&env, "alice", READS);
    assert_works(&env, "alice", WRITES);
    assert_eq!(env.server.count(|r| r.code == 403), 0);
}

/// `kubectl create clusterrolebinding … --clusterrole=promoter-approver --group=release-managers`,
/// as the book says: a member of the group runs every command.
#[tokio::test(flavor = "multi_thread")]
async fn a_group_bound_to_promoter_approver_runs_every_command() {
    let env = world().await;
    assert_works(&env, "rita", READS);
    assert_works(&env, "rita", WRITES);
    assert_eq!(env.server.count(|r| r.code == 403), 0);
}

/// promoter-view aggregates into the built-in view: a cluster-wide viewer reads rollouts.
#[tokio::test(flavor = "multi_thread")]
async fn the_built_in_view_reads_rollouts_cluster_wide() {
    let env = world().await;
    assert_works(&env, "victor", READS);
    assert_denied(
        &env,
        "victor",
        &["approve", NAME, "--stage", "staging"],
        "promoter-approver",
    );
}

/// promoter-edit aggregates into the built-in edit: a cluster-wide editor operates rollouts.
/// Only the Events of its actions are not written (edit creates no Events): each command says so
/// in one warning line and still succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn the_built_in_edit_operates_rollouts_cluster_wide() {
    let env = world().await;
    assert_works(&env, "edna", READS);
    for args in WRITES {
        let run = run_as(&env, "edna", args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains('{'), "{args:?}: {}", run.stderr);
        // One warning line where the command records an Event, naming the role that may.
        for line in run.stderr.lines() {
            assert!(
                line.contains("could not record the event")
                    && line.contains("ClusterRole promoter-approver"),
                "{args:?}: {line}"
            );
        }
    }
}

/// A namespace's viewer (view through a RoleBinding) cannot read cluster-scoped objects, as on
/// a real cluster: one Forbidden line, and a hint with the binding that would let them.
#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_viewer_is_told_which_binding_reads_rollouts() {
    let env = world().await;
    for args in [&["status"][..], &["explain", NAME], &["freeze", "list"]] {
        assert_denied(&env, "nina", args, "promoter-view");
    }
    // kubectl's --as needs the right to impersonate, as on a real server.
    let run = run_as(&env, "nina", &["status", "--as", "alice"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with("Error from server (Forbidden): users \"alice\" is forbidden: User \"nina\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{}",
        run.stderr
    );
}

/// The pass's ClusterRole runs `step`, as the CronJob runs it, and `doctor` finds every
/// permission a pass needs.
#[tokio::test(flavor = "multi_thread")]
async fn the_pass_role_runs_step_and_doctor() {
    let env = world().await;
    let run = run_as(&env, SA, &["step"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(clean(&run), "{}", run.stderr);
    let run = run_as(&env, SA, &["doctor", "-o", "json"]);
    let checks: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let permissions = checks
        .iter()
        .find(|c| c["name"] == "permissions of the identity in use")
        .unwrap();
    assert_eq!(permissions["verdict"], "Ok", "{permissions}");
    // An administrator checks the pass's identity with --as, as with kubectl.
    let run = run_as(&env, "admin", &["doctor", "-o", "json", "--as", SA]);
    let checks: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "permissions of the identity in use" && c["verdict"] == "Ok"),
        "{checks:?}"
    );
}

/// A pass under the wrong identity (a person's read-only role): every refused write is one line
/// of its promotion's report, as kubectl prints it, with the pass's ClusterRole and its binding.
#[tokio::test(flavor = "multi_thread")]
async fn a_pass_without_its_role_says_which_role_it_needs() {
    let env = world().await;
    // A new revision: the pass must write the status.
    let mut p = env.promotion(NAME).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    env.apply_promotion(&p);
    let run = run_as(&env, "vera", &["step"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let errors: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{}", run.stdout);
    assert!(
        errors[0].contains("Error from server (Forbidden): "),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].ends_with(
            "; hint: the ClusterRole promoter (installed with promoter; with Helm, named after the release) is the pass's and grants it: kubectl create clusterrolebinding vera-promoter --clusterrole=promoter --user=vera"
        ),
        "{}",
        errors[0]
    );
    assert!(
        !run.stdout.contains('{') && !run.stderr.contains('{'),
        "{}{}",
        run.stdout,
        run.stderr
    );
}
/// `doctor` as an administrator checks the permissions of the CronJob's service account (one
/// SubjectAccessReview each), not the administrator's own; a person who may not ask about another
/// identity is told what to run instead, and doctor still succeeds for them.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_the_pass_s_account_whoever_runs_it() {
    let env = world().await;
    let permissions = |user: &str| {
        let run = run_as(&env, user, &["doctor", "-o", "json"]);
        let checks: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        let c = checks
            .iter()
            .find(|c| c["name"].as_str().unwrap().starts_with("permissions"))
            .unwrap()
            .clone();
        (run.code, c)
    };
    let (code, c) = permissions("admin");
    assert_eq!(code, 0, "{c}");
    assert_eq!(
        c["name"],
        format!("permissions of {SA} (the CronJob's service account)")
    );
    assert_eq!(c["verdict"], "Ok", "{c}");
    for user in ["vera", "alice"] {
        let (code, c) = permissions(user);
        assert_eq!(code, 0, "{user}: {c}");
        assert_eq!(c["verdict"], "Skipped", "{c}");
        assert!(
            c["detail"].as_str().unwrap().ends_with(&format!(
                "run `promoter doctor --as {SA}` as an administrator"
            )),
            "{c}"
        );
    }
    // The pass's binding gone: the administrator is told the line that restores it.
    env.server.set_authorizer(Arc::new(
        Rbac::kubernetes_defaults()
            .cluster_roles_yaml(&repo_file("cronjob/clusterrole.yaml"))
            .unwrap()
            .bind_cluster_role("cluster-admin", "User", "admin"),
    ));
    let (code, c) = permissions("admin");
    assert_eq!(code, 2, "{c}");
    assert_eq!(c["verdict"], "Failed", "{c}");
    assert!(
        c["detail"].as_str().unwrap().ends_with(
            "kubectl create clusterrolebinding promoter-system-promoter-promoter --clusterrole=promoter --serviceaccount=promoter-system:promoter"
        ),
        "{c}"
    );
}

/// The dashboard of someone bound to `promoter-view` shows all that a promotion's page shows, its
/// Events included (the page said "Events cannot be read … Forbidden" when the role could not list
/// them); so does an approver's.
#[tokio::test(flavor = "multi_thread")]
async fn a_viewer_s_dashboard_shows_the_promotion_s_events() {
    use promoter::dashboard::hub::{Hub, HubOptions, WallClock};
    let env = world().await;
    for user in ["vera", "alice"] {
        let client = env.server.client_as(user).await.unwrap();
        let hub = Hub::new(
            client,
            None,
            Arc::new(WallClock),
            HubOptions {
                tz: chrono_tz::UTC,
                cronjob: None,
                refresh: None,
                linger: std::time::Duration::from_secs(30),
                page: promoter::dashboard::views::Page {
                    csrf: String::new(),
                    read_only: true,
                    simulated: false,
                    source: "cluster".into(),
                },
            },
        );
        let _viewing = hub.view(NAME);
        hub.refresh().await;
        let snapshot = hub.snapshot();
        let detail = &snapshot.details[NAME].value;
        assert_eq!(detail.events_error, None, "{user}");
        assert!(
            detail.events.iter().any(|e| e.reason == "AwaitingApproval"),
            "{user}: {:?}",
            detail.events
        );
        let forbidden = env.server.count(|r| r.user == user && r.code == 403);
        assert_eq!(forbidden, 0, "{user}: {:#?}", env.server.requests());
    }
}
