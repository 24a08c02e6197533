//! A resource type the fake API server serves: its group, version, kind and plural, scope and
//! subresources.

/// A resource the server serves, as a CRD or a built-in type would register it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// Custom resources answer a delete with the deleted object; built-in types with a `Status`.
    pub custom: bool,
}

impl ResourceType {
    pub fn custom(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            status_subresource: true,
            custom: true,
        }
    }

    pub fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        ResourceType {
            custom: false,
            status_subresource: false,
            ..Self::custom(group, version, kind, plural, namespaced)
        }
    }

    pub fn without_status(mut self) -> Self {
        self.status_subresource = false;
        self
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `clusterpromotions.config.projectsveltos.io`, as the API server names it in messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}
