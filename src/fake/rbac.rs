//! RBAC for the fake API server, decided as kube-apiserver's RBAC authorizer decides
//! (`plugin/pkg/auth/authorizer/rbac`: `VisitRulesFor` and `RuleAllows`), from ClusterRoles, Roles,
//! ClusterRoleBindings and RoleBindings:
//!
//! * a ClusterRoleBinding grants its role's rules everywhere; a RoleBinding (to a Role or a
//!   ClusterRole) only inside its own namespace, so never for a cluster-scoped object nor for a
//!   list across all namespaces;
//! * subjects are users by name, groups (every authenticated user is in `system:authenticated`, a
//!   service account also in `system:serviceaccounts` and `system:serviceaccounts:<namespace>`),
//!   and service accounts (`system:serviceaccount:<namespace>:<name>`, the binding's namespace when
//!   the subject names none);
//! * a rule matches on API group, verb and resource (`*`, `resource/subresource`, `*/subresource`)
//!   and, when it lists `resourceNames`, only on a request that names one of them (so never a list
//!   or a create);
//! * a ClusterRole with an `aggregationRule` holds the rules of every other ClusterRole its
//!   selectors match, as kube-controller-manager's ClusterRole aggregation controller writes them
//!   (`pkg/controller/clusterroleaggregation`), transitively: `view` is itself labelled
//!   `aggregate-to-edit`, so what aggregates into `view` reaches `edit` and `admin` too;
//! * a binding to a role that does not exist grants nothing, and the denial's reason says so
//!   (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`), as the real authorizer's does.
//!
//! [`Rbac::kubernetes_defaults`] holds the roles and bindings every cluster starts with that matter
//! to promoter (bootstrap policy, `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`),
//! abridged to the resources promoter's commands touch.

use super::control::{Attributes, Authorizer};
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use std::collections::BTreeMap;

/// The group every authenticated request is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of cluster administrators (bound to `cluster-admin`).
pub const MASTERS: &str = "system:masters";
const SA_PREFIX: &str = "system:serviceaccount:";

#[derive(Clone, Debug, Default)]
pub struct Rbac {
    cluster_roles: BTreeMap<String, ClusterRole>,
    /// Each ClusterRole's rules, aggregated ones filled in.
    effective: BTreeMap<String, Vec<PolicyRule>>,
    roles: BTreeMap<(String, String), Role>,
    cluster_bindings: Vec<ClusterRoleBinding>,
    role_bindings: Vec<RoleBinding>,
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// `RuleAllows` for a resource request: verb, API group and resource (`*`, `resource/sub`,
/// `*/sub`) match, and the name is one of `resourceNames` when the rule lists any.
pub fn rule_allows(rule: &PolicyRule, a: &Attributes) -> bool {
    let combined = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    let resources = rule.resources.as_deref().unwrap_or_default();
    let names = rule.resource_names.as_deref().unwrap_or_default();
    let resource = resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || a.subresource
                .as_ref()
                .is_some_and(|sub| r.strip_prefix("*/") == Some(sub.as_str()))
    });
    matches(&rule.verbs, &a.verb)
        && matches(groups, &a.group)
        && resource
        && (names.is_empty() || a.name.as_ref().is_some_and(|n| names.contains(n)))
}

/// The groups a user is in beyond those it authenticated with: `system:authenticated`, and a
/// service account's two groups.
pub fn implied_groups(user: &str) -> Vec<String> {
    if user == "system:anonymous" {
        return vec!["system:unauthenticated".into()];
    }
    let mut out = vec![AUTHENTICATED.to_string()];
    if let Some((ns, _)) = user
        .strip_prefix(SA_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        out.push("system:serviceaccounts".into());
        out.push(format!("system:serviceaccounts:{ns}"));
    }
    out
}

/// `appliesTo`: whether a binding's subject is the request's user.
fn subject_is(s: &Subject, binding_namespace: &str, a: &Attributes) -> bool {
    match s.kind.as_str() {
        "User" => s.name == a.user,
        "Group" => a.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = match s.namespace.as_deref() {
                Some(ns) if !ns.is_empty() => ns,
                _ => binding_namespace,
            };
            a.user == format!("{SA_PREFIX}{ns}:{}", s.name)
        }
        _ => false,
    }
}

fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    // metav1 semantics: an empty selector matches everything.
    let Ok(sel) = serde_json::to_value(selector)
        .and_then(serde_json::from_value::<crate::labels::LabelSelector>)
    else {
        return false;
    };
    sel.requirements()
        .map(|reqs| crate::labels::matches_all(&reqs, labels))
        .unwrap_or(false)
}

fn cluster_role_ref(name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: name.into(),
    }
}

fn subject(kind: &str, name: &str) -> Subject {
    let (name, namespace) = match (kind, name.strip_prefix(SA_PREFIX)) {
        ("ServiceAccount", Some(rest)) => match rest.split_once(':') {
            Some((ns, n)) => (n.to_string(), Some(ns.to_string())),
            None => (name.to_string(), None),
        },
        _ => (name.to_string(), None),
    };
    Subject {
        api_group: (kind != "ServiceAccount").then(|| "rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name,
        namespace,
    }
}

fn named_role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        },
        rules: Some(rules),
        aggregation_rule: None,
    }
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    let strings = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

fn aggregated(name: &str, labels: &[(&str, &str)], selects: &str) -> ClusterRole {
    let mut role = named_role(name, labels, Vec::new());
    role.aggregation_rule = Some(AggregationRule {
        cluster_role_selectors: Some(vec![LabelSelector {
            match_labels: Some([(selects.to_string(), "true".to_string())].into()),
            ..Default::default()
        }]),
    });
    role
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

impl Rbac {
    /// No roles and no bindings: everything is denied.
    pub fn new() -> Self {
        Self::default()
    }

    /// What a new cluster has (abridged to what promoter touches): `cluster-admin` bound to
    /// `system:masters`; `system:basic-user` (a user's own SelfSubjectAccessReview and
    /// SelfSubjectReview) bound to `system:authenticated`; the user-facing `admin`, `edit` and
    /// `view`, aggregated from `system:aggregate-to-*` and anything else labelled so. `view` reads
    /// core Events, ConfigMaps, Jobs and CronJobs, never Secrets; `edit` adds reading Secrets and
    /// writing those; neither creates Events.
    pub fn kubernetes_defaults() -> Self {
        let mut cluster_admin =
            named_role("cluster-admin", &[], vec![rule(&["*"], &["*"], &["*"])]);
        if let Some(rules) = cluster_admin.rules.as_mut() {
            rules.push(PolicyRule {
                non_resource_urls: Some(vec!["*".into()]),
                verbs: vec!["*".into()],
                ..Default::default()
            });
        }
        let view_rules = vec![
            rule(
                READ,
                &[""],
                &[
                    "pods",
                    "services",
                    "endpoints",
                    "persistentvolumeclaims",
                    "configmaps",
                    "serviceaccounts",
                ],
            ),
            rule(
                READ,
                &[""],
                &[
                    "events",
                    "limitranges",
                    "resourcequotas",
                    "namespaces",
                    "pods/log",
                ],
            ),
            rule(
                READ,
                &["apps"],
                &["deployments", "replicasets", "statefulsets", "daemonsets"],
            ),
            rule(
                READ,
                &["batch"],
                &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
            ),
        ];
        let edit_rules = vec![
            rule(READ, &[""], &["secrets", "pods/exec"]),
            rule(
                WRITE,
                &[""],
                &[
                    "pods",
                    "services",
                    "configmaps",
                    "secrets",
                    "serviceaccounts",
                ],
            ),
            rule(
                WRITE,
                &["apps"],
                &["deployments", "replicasets", "statefulsets", "daemonsets"],
            ),
            rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
        ];
        let admin_rules = vec![rule(
            &[READ, WRITE].concat(),
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
        )];
        let basic_user = named_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        );
        let mut rbac = Self::new();
        for role in [
            cluster_admin,
            basic_user,
            aggregated("admin", &[], AGGREGATE_TO_ADMIN),
            aggregated("edit", &[(AGGREGATE_TO_ADMIN, "true")], AGGREGATE_TO_EDIT),
            aggregated("view", &[(AGGREGATE_TO_EDIT, "true")], AGGREGATE_TO_VIEW),
            named_role(
                "system:aggregate-to-admin",
                &[(AGGREGATE_TO_ADMIN, "true")],
                admin_rules,
            ),
            named_role(
                "system:aggregate-to-edit",
                &[(AGGREGATE_TO_EDIT, "true")],
                edit_rules,
            ),
            named_role(
                "system:aggregate-to-view",
                &[(AGGREGATE_TO_VIEW, "true")],
                view_rules,
            ),
        ] {
            rbac = rbac.cluster_role(role);
        }
        rbac.bind_cluster_role("cluster-admin", "Group", MASTERS)
            .bind_cluster_role("system:basic-user", "Group", AUTHENTICATED)
    }

    /// The defaults, `role`, and `user` bound to it cluster-wide; `superusers` bound to
    /// `cluster-admin`.
    pub fn bind(user: &str, role: &ClusterRole, superusers: &[&str]) -> Self {
        let name = role.metadata.name.clone().unwrap_or_else(|| "bound".into());
        let mut rbac = Self::kubernetes_defaults()
            .cluster_role(role.clone())
            .bind_cluster_role(&name, subject_kind(user), user);
        for s in superusers {
            rbac = rbac.bind_cluster_role("cluster-admin", subject_kind(s), s);
        }
        rbac
    }

    /// Adds (or replaces) a ClusterRole; aggregated roles are recomputed.
    pub fn cluster_role(mut self, role: ClusterRole) -> Self {
        let name = role.metadata.name.clone().unwrap_or_default();
        self.cluster_roles.insert(name, role);
        self.aggregate();
        self
    }

    /// Every ClusterRole of a multi-document YAML manifest (other kinds are skipped).
    pub fn cluster_roles_yaml(mut self, yaml: &str) -> Result<Self, String> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(yaml).map_err(|e| e.to_string())?;
        for doc in docs {
            if doc["kind"] == "ClusterRole" {
                let role: ClusterRole = serde_json::from_value(doc).map_err(|e| e.to_string())?;
                self = self.cluster_role(role);
            }
        }
        Ok(self)
    }

    pub fn role(mut self, role: Role) -> Self {
        let key = (
            role.metadata.namespace.clone().unwrap_or_default(),
            role.metadata.name.clone().unwrap_or_default(),
        );
        self.roles.insert(key, role);
        self
    }

    pub fn cluster_role_binding(mut self, binding: ClusterRoleBinding) -> Self {
        self.cluster_bindings.push(binding);
        self
    }

    pub fn role_binding(mut self, binding: RoleBinding) -> Self {
        self.role_bindings.push(binding);
        self
    }

    /// `kubectl create clusterrolebinding … --clusterrole=ROLE --user=NAME` (`kind` `User`,
    /// `Group` or `ServiceAccount`, the latter named `system:serviceaccount:NS:NAME`).
    pub fn bind_cluster_role(self, role: &str, kind: &str, name: &str) -> Self {
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{role}-{name}")),
                ..Default::default()
            },
            role_ref: cluster_role_ref(role),
            subjects: Some(vec![subject(kind, name)]),
        };
        self.cluster_role_binding(binding)
    }

    /// `kubectl create rolebinding … -n NAMESPACE --clusterrole=ROLE --user=NAME`.
    pub fn bind_cluster_role_in(self, namespace: &str, role: &str, kind: &str, name: &str) -> Self {
        let binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{role}-{name}")),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            role_ref: cluster_role_ref(role),
            subjects: Some(vec![subject(kind, name)]),
        };
        self.role_binding(binding)
    }

    /// A ClusterRole's rules as the aggregation controller leaves them.
    pub fn rules_of(&self, cluster_role: &str) -> Option<&[PolicyRule]> {
        self.effective.get(cluster_role).map(Vec::as_slice)
    }

    /// The aggregation controller run to its fixed point: each aggregated role holds the rules of
    /// the roles its selectors match (in name order, without duplicates), those roles' own
    /// aggregated rules included.
    fn aggregate(&mut self) {
        self.effective = self
            .cluster_roles
            .iter()
            .map(|(n, r)| (n.clone(), r.rules.clone().unwrap_or_default()))
            .collect();
        // Each round reaches one more level of nesting; more rounds than roles never help.
        for _ in 0..=self.cluster_roles.len() {
            let mut changed = false;
            for (name, role) in &self.cluster_roles {
                let Some(selectors) = role
                    .aggregation_rule
                    .as_ref()
                    .and_then(|a| a.cluster_role_selectors.as_ref())
                else {
                    continue;
                };
                let mut rules: Vec<PolicyRule> = Vec::new();
                for (other, other_role) in &self.cluster_roles {
                    let labels = other_role.metadata.labels.clone().unwrap_or_default();
                    if other == name || !selectors.iter().any(|s| selector_matches(s, &labels)) {
                        continue;
                    }
                    for r in self.effective.get(other).into_iter().flatten() {
                        if !rules.contains(r) {
                            rules.push(r.clone());
                        }
                    }
                }
                if self.effective.get(name) != Some(&rules) {
                    self.effective.insert(name.clone(), rules);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// The rules a role reference grants, or why it grants nothing.
    fn rules_for(&self, r: &RoleRef, namespace: &str) -> Result<&[PolicyRule], String> {
        match r.kind.as_str() {
            "ClusterRole" => self
                .effective
                .get(&r.name)
                .map(Vec::as_slice)
                .ok_or_else(|| {
                    format!(
                        "clusterrole.rbac.authorization.k8s.io {:?} not found",
                        r.name
                    )
                }),
            "Role" => self
                .roles
                .get(&(namespace.to_string(), r.name.clone()))
                .map(|role| role.rules.as_deref().unwrap_or_default())
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {:?} not found", r.name)),
            other => Err(format!("unknown role kind {other:?}")),
        }
    }
}

/// `system:serviceaccount:…` names a ServiceAccount subject, anything else a user.
fn subject_kind(name: &str) -> &'static str {
    if name.starts_with(SA_PREFIX) {
        "ServiceAccount"
    } else {
        "User"
    }
}

impl Authorizer for Rbac {
    fn authorize(&self, a: &Attributes) -> Result<(), String> {
        let mut errors: Vec<String> = Vec::new();
        let mut visit = |rules: Result<&[PolicyRule], String>| match rules {
            Ok(rules) => rules.iter().any(|r| rule_allows(r, a)),
            Err(e) => {
                errors.push(e);
                false
            }
        };
        for b in &self.cluster_bindings {
            let applies = b.subjects.iter().flatten().any(|s| subject_is(s, "", a));
            if applies && visit(self.rules_for(&b.role_ref, "")) {
                return Ok(());
            }
        }
        // A RoleBinding grants only inside its namespace: never a cluster-scoped request.
        if let Some(ns) = a.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            for b in &self.role_bindings {
                if b.metadata.namespace.as_deref() != Some(ns) {
                    continue;
                }
                let applies = b.subjects.iter().flatten().any(|s| subject_is(s, ns, a));
                if applies && visit(self.rules_for(&b.role_ref, ns)) {
                    return Ok(());
                }
            }
        }
        if errors.is_empty() {
            Err(String::new())
        } else {
            Err(format!("RBAC: {}", errors.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(user: &str, verb: &str, group: &str, resource: &str) -> Attributes {
        Attributes {
            user: user.into(),
            groups: implied_groups(user),
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: None,
            name: None,
        }
    }

    fn promoter_view() -> ClusterRole {
        named_role(
            "promoter-view",
            &[(AGGREGATE_TO_VIEW, "true")],
            vec![rule(
                READ,
                &["config.projectsveltos.io"],
                &["clusterpromotions"],
            )],
        )
    }

    #[test]
    fn aggregation_reaches_view_edit_and_admin() {
        let rbac = Rbac::kubernetes_defaults()
            .cluster_role(promoter_view())
            .bind_cluster_role("view", "User", "vera")
            .bind_cluster_role("edit", "User", "ed")
            .bind_cluster_role("admin", "Group", "admins");
        let list = |user: &str| {
            let mut a = attrs(
                user,
                "list",
                "config.projectsveltos.io",
                "clusterpromotions",
            );
            if user == "ada" {
                a.groups.push("admins".into());
            }
            rbac.authorize(&a)
        };
        assert_eq!(list("vera"), Ok(()));
        assert_eq!(list("ed"), Ok(()), "view is labelled aggregate-to-edit");
        assert_eq!(list("ada"), Ok(()), "edit is labelled aggregate-to-admin");
        assert!(list("nobody").is_err());
        // A role added later is aggregated too, as the controller does.
        let later = rbac.cluster_role(named_role(
            "later",
            &[(AGGREGATE_TO_VIEW, "true")],
            vec![rule(READ, &["promoter.dev"], &["promotionfreezes"])],
        ));
        assert_eq!(
            later.authorize(&attrs("vera", "list", "promoter.dev", "promotionfreezes")),
            Ok(())
        );
    }

    #[test]
    fn a_role_binding_never_grants_cluster_scope() {
        let rbac = Rbac::kubernetes_defaults()
            .cluster_role(promoter_view())
            .bind_cluster_role_in("team-a", "view", "User", "vera");
        let mut a = attrs(
            "vera",
            "list",
            "config.projectsveltos.io",
            "clusterpromotions",
        );
        assert!(rbac.authorize(&a).is_err());
        a.namespace = Some("team-a".into());
        a.resource = "configmaps".into();
        a.group = String::new();
        assert_eq!(rbac.authorize(&a), Ok(()));
        a.namespace = Some("team-b".into());
        assert!(rbac.authorize(&a).is_err());
    }

    #[test]
    fn resource_names_subresources_and_service_accounts() {
        let role = named_role(
            "r",
            &[],
            vec![
                PolicyRule {
                    resource_names: Some(vec!["promoter".into()]),
                    ..rule(&["get"], &["batch"], &["cronjobs"])
                },
                rule(&["patch"], &["promoter.dev"], &["*/status"]),
            ],
        );
        let sa = "system:serviceaccount:promoter-system:promoter";
        let rbac = Rbac::new()
            .cluster_role(role)
            .cluster_role_binding(ClusterRoleBinding {
                metadata: ObjectMeta::default(),
                role_ref: cluster_role_ref("r"),
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "promoter".into(),
                    namespace: Some("promoter-system".into()),
                    api_group: None,
                }]),
            });
        let mut get = attrs(sa, "get", "batch", "cronjobs");
        assert!(
            rbac.authorize(&get).is_err(),
            "no name, no resourceNames match"
        );
        get.name = Some("promoter".into());
        assert_eq!(rbac.authorize(&get), Ok(()));
        get.name = Some("other".into());
        assert!(rbac.authorize(&get).is_err());
        let mut patch = attrs(sa, "patch", "promoter.dev", "promotionfreezes");
        assert!(rbac.authorize(&patch).is_err());
        patch.subresource = Some("status".into());
        assert_eq!(rbac.authorize(&patch), Ok(()));
        assert!(
            rbac.authorize(&attrs(
                "system:serviceaccount:other:promoter",
                "patch",
                "promoter.dev",
                "x"
            ))
            .is_err()
        );
        assert!(implied_groups(sa).contains(&"system:serviceaccounts:promoter-system".to_string()));
    }

    #[test]
    fn a_binding_to_a_missing_role_says_so() {
        let rbac = Rbac::new().bind_cluster_role("promoter-view", "User", "vera");
        assert_eq!(
            rbac.authorize(&attrs("vera", "list", "x", "y")),
            Err("RBAC: clusterrole.rbac.authorization.k8s.io \"promoter-view\" not found".into())
        );
    }
}
