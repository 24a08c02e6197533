//! The ClusterRoles promoter installs, compiled in from `cronjob/` (Helm renders the same rules,
//! kustomize and `kubectl apply -f` the same files): which of them grants a permission an API
//! server refused, and the `kubectl create clusterrolebinding` line that gives it, so that a hint
//! names what is installed in the cluster, never a file of this repository (Helm and krew users
//! have none).

use k8s_openapi::api::rbac::v1::ClusterRole;
use std::sync::OnceLock;

/// The pass's ClusterRole (the CronJob's and the Lambda function's identity).
pub const PASS: &str = "promoter";
/// Reading rollouts: `status`, `explain`, `plan`, `freeze list`.
pub const VIEW: &str = "promoter-view";
/// Operating rollouts: everything `promoter-view` reads, and approve, pause, resume, abort,
/// rollback and the freeze commands.
pub const APPROVER: &str = "promoter-approver";
/// What aggregates into the built-in `edit`.
pub const EDIT: &str = "promoter-edit";

const PASS_YAML: &str = include_str!("../cronjob/clusterrole.yaml");
const PEOPLE_YAML: &str = include_str!("../cronjob/approver-clusterrole.yaml");

/// The installed ClusterRoles, parsed once; a manifest that does not parse (a build defect, which
/// `roles::tests` catches) leaves its roles out.
pub fn installed() -> &'static [ClusterRole] {
    static ROLES: OnceLock<Vec<ClusterRole>> = OnceLock::new();
    ROLES.get_or_init(|| {
        [PASS_YAML, PEOPLE_YAML]
            .iter()
            .flat_map(|yaml| serde_saphyr::from_multiple::<ClusterRole>(yaml).unwrap_or_default())
            .collect()
    })
}

/// One installed role by name.
pub fn role(name: &str) -> Option<&'static ClusterRole> {
    installed()
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
}

/// A request the API server refused, read back from its Forbidden message (kube-apiserver's
/// `forbiddenMessage`: `User "u" cannot VERB resource "R[/SUB]" in API group "G" at the cluster
/// scope` or `in the namespace "N"`, after `<resource> "<name>" is forbidden: `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub user: String,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Refused {
    pub fn parse(message: &str) -> Option<Refused> {
        static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
        let re = RE
            .get_or_init(|| {
                regex::Regex::new(
                    r#"^\S+(?: "(?P<name>[^"]*)")? is forbidden: User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)" in API group "(?P<group>[^"]*)" (?:at the cluster scope|in the namespace "(?P<ns>[^"]*)")"#,
                )
                .ok()
            })
            .as_ref()?;
        let c = re.captures(message)?;
        let text = |n: &str| c.name(n).map(|m| m.as_str().to_string());
        let combined = text("resource")?;
        let (resource, subresource) = match combined.split_once('/') {
            Some((r, s)) => (r.to_string(), Some(s.to_string())),
            None => (combined, None),
        };
        Some(Refused {
            user: text("user")?,
            verb: text("verb")?,
            group: text("group")?,
            resource,
            subresource,
            namespace: text("ns"),
            name: text("name").filter(|n| !n.is_empty()),
        })
    }

    /// The RBAC attributes of the request.
    fn attributes(&self) -> crate::fake::Attributes {
        crate::fake::Attributes {
            user: self.user.clone(),
            groups: Vec::new(),
            verb: self.verb.clone(),
            group: self.group.clone(),
            resource: self.resource.clone(),
            subresource: self.subresource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// Whether the installed role `name` grants the refused request.
pub fn grants(name: &str, r: &Refused) -> bool {
    let a = r.attributes();
    role(name).is_some_and(|role| {
        role.rules
            .iter()
            .flatten()
            .any(|rule| crate::fake::rbac::rule_allows(rule, &a))
    })
}

static PASS_PROCESS: OnceLock<()> = OnceLock::new();

/// This process runs passes (`promoter step`, the Lambda function): a refused request is the
/// pass's, and its hint names the pass's role first. Called once, at start.
pub fn set_pass_process() {
    let _ = PASS_PROCESS.set(());
}

/// The smallest installed role meant for who asked that grants the request: for people, read
/// before operate; for a pass, the pass's.
pub fn granting(r: &Refused) -> Option<&'static str> {
    let order: &[&'static str] = if PASS_PROCESS.get().is_some() {
        &[PASS]
    } else {
        &[VIEW, APPROVER]
    };
    order.iter().copied().find(|n| grants(n, r))
}

/// The service account the shipped CronJob runs as (where `kubectl apply -k cronjob/` puts it).
pub const PASS_ACCOUNT: &str = "system:serviceaccount:promoter-system:promoter";

/// `kubectl create clusterrolebinding` giving `role` to `user` (a service account by its
/// `--serviceaccount=NS:NAME`).
pub fn binding_command(role: &str, user: &str) -> String {
    let (subject, who) = match user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((ns, name)) => (
            format!("--serviceaccount={ns}:{name}"),
            format!("{ns}-{name}"),
        ),
        None => (format!("--user={user}"), user.to_string()),
    };
    // A binding's name is a DNS subdomain: what a user name may hold beyond that becomes `-`.
    let who: String = who
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("kubectl create clusterrolebinding {who}-{role} --clusterrole={role} {subject}")
}

/// The hint for a Forbidden message: which installed ClusterRole grants the request and the line
/// that binds it; for a permission no installed role grants, who may give it.
pub fn hint(message: &str) -> String {
    let Some(r) = Refused::parse(message) else {
        return format!(
            "the identity in use lacks this permission; promoter installs the ClusterRoles {VIEW} (status, explain, plan, freeze list) and {APPROVER} (every command that operates a rollout): {}",
            binding_command(APPROVER, "<user>")
        );
    };
    let Some(role) = granting(&r) else {
        if grants(PASS, &r) && PASS_PROCESS.get().is_none() {
            // Not a person's permission (the pass's role reads every Secret it needs).
            return format!(
                "only the pass's ClusterRole {PASS} grants {} on {}, for the pass's service account; run this as it (--as {PASS_ACCOUNT}) or as an administrator",
                r.verb, r.resource
            );
        }
        return format!(
            "no ClusterRole promoter installs grants {} on {}; ask a cluster administrator",
            r.verb, r.resource
        );
    };
    let what = match role {
        VIEW => "reads rollouts",
        APPROVER => "operates rollouts",
        _ => "is the pass's",
    };
    format!(
        "the ClusterRole {role} (installed with promoter; with Helm, named after the release) {what} and grants it: {}",
        binding_command(role, &r.user)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_roles_parse() {
        for name in [PASS, VIEW, APPROVER, EDIT] {
            assert!(role(name).is_some(), "{name}");
        }
    }

    #[test]
    fn forbidden_messages_are_read_back() {
        let r = Refused::parse("clusterpromotions.config.projectsveltos.io \"p\" is forbidden: User \"vera\" cannot patch resource \"clusterpromotions\" in API group \"config.projectsveltos.io\" at the cluster scope").unwrap();
        assert_eq!(
            (
                r.user.as_str(),
                r.verb.as_str(),
                r.name.as_deref(),
                r.namespace
            ),
            ("vera", "patch", Some("p"), None)
        );
        let r = Refused::parse("clusterpromotions.config.projectsveltos.io \"p\" is forbidden: User \"system:serviceaccount:promoter-system:promoter\" cannot update resource \"clusterpromotions/status\" in API group \"config.projectsveltos.io\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"promoter\" not found").unwrap();
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = Refused::parse("cronjobs.batch \"promoter\" is forbidden: User \"nina\" cannot get resource \"cronjobs\" in API group \"batch\" in the namespace \"promoter-system\"").unwrap();
        assert_eq!(r.namespace.as_deref(), Some("promoter-system"));
        assert_eq!(granting(&r), Some(VIEW));
        assert!(Refused::parse("something else").is_none());
    }

    #[test]
    fn hints_name_the_smallest_installed_role_and_the_binding() {
        let h = hint(
            "clusterpromotions.config.projectsveltos.io is forbidden: User \"vera\" cannot list resource \"clusterpromotions\" in API group \"config.projectsveltos.io\" at the cluster scope",
        );
        assert!(h.contains("ClusterRole promoter-view"), "{h}");
        assert!(h.ends_with("kubectl create clusterrolebinding vera-promoter-view --clusterrole=promoter-view --user=vera"), "{h}");
        let h = hint(
            "clusterpromotions.config.projectsveltos.io \"p\" is forbidden: User \"vera\" cannot patch resource \"clusterpromotions\" in API group \"config.projectsveltos.io\" at the cluster scope",
        );
        assert!(h.contains("ClusterRole promoter-approver"), "{h}");
        let h = hint(
            "configmaps \"promoter-notifications\" is forbidden: User \"vera\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"promoter-system\"",
        );
        assert!(
            h.starts_with("only the pass's ClusterRole promoter grants get on configmaps"),
            "{h}"
        );
        assert_eq!(
            binding_command(PASS, "system:serviceaccount:ops:runner"),
            "kubectl create clusterrolebinding ops-runner-promoter --clusterrole=promoter --serviceaccount=ops:runner"
        );
        let h = hint(
            "deployments.apps \"addon-controller\" is forbidden: User \"vera\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"projectsveltos\"",
        );
        assert!(
            h.starts_with("no ClusterRole promoter installs grants get on deployments"),
            "{h}"
        );
        assert_eq!(
            binding_command(VIEW, "Bob@Example.com"),
            "kubectl create clusterrolebinding bob-example.com-promoter-view --clusterrole=promoter-view --user=Bob@Example.com"
        );
    }
}
