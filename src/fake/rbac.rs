//! RBAC for the fake API server: one user bound to a ClusterRole, its rules evaluated as the real
//! RBAC authorizer does (API groups, resources and `resource/subresource`, verbs, resource names,
//! `*` wildcards). Other users listed as superusers are allowed everything; anyone else nothing.

use super::control::{Attributes, Authorizer};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

pub struct Rbac {
    pub user: String,
    pub rules: Vec<PolicyRule>,
    pub superusers: Vec<String>,
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

fn allows(rule: &PolicyRule, a: &Attributes) -> bool {
    let resource = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let groups = rule.api_groups.clone().unwrap_or_default();
    let resources = rule.resources.clone().unwrap_or_default();
    let names = rule.resource_names.clone().unwrap_or_default();
    matches(&groups, &a.group)
        && matches(&resources, &resource)
        && matches(&rule.verbs, &a.verb)
        && (names.is_empty() || a.name.as_ref().is_some_and(|n| names.contains(n)))
}

impl Rbac {
    pub fn bind(user: &str, role: &ClusterRole, superusers: &[&str]) -> Self {
        Rbac {
            user: user.into(),
            rules: role.rules.clone().unwrap_or_default(),
            superusers: superusers.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Authorizer for Rbac {
    fn authorize(&self, a: &Attributes) -> Result<(), String> {
        if self.superusers.contains(&a.user) {
            return Ok(());
        }
        if a.user == self.user && self.rules.iter().any(|r| allows(r, a)) {
            return Ok(());
        }
        Err(String::new())
    }
}
