//! An error as the API server reports it in a `Status`: HTTP code, reason, message and details.

use super::field::{FieldError, aggregate};
use super::resource_type::ResourceType;

/// An error as the API server reports it: HTTP code, `Status.reason` and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub name: Option<String>,
    /// `details.group`/`details.kind`/`details.causes` of an `Invalid` Status.
    pub invalid: Option<Box<InvalidDetails>>,
    /// `metadata.continue` of the Status: an expired list's inconsistent continuation.
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidDetails {
    pub group: String,
    pub kind: String,
    pub causes: Vec<FieldError>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            invalid: None,
            continue_token: None,
        }
    }
    pub(super) fn not_found(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            name: Some(name.into()),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", rt.group_resource()),
            )
        }
    }
    pub(super) fn conflict(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            name: Some(name.into()),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    rt.group_resource()
                ),
            )
        }
    }
    /// `errors.NewInvalid`: `<Kind>.<group> "<name>" is invalid: <errors>`, with the causes.
    pub fn invalid(rt: &ResourceType, name: &str, errs: Vec<FieldError>) -> Self {
        let group_kind = if rt.group.is_empty() {
            rt.kind.clone()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        let message = if errs.is_empty() {
            format!("{group_kind} {name:?} is invalid")
        } else {
            format!("{group_kind} {name:?} is invalid: {}", aggregate(&errs))
        };
        ApiError {
            name: Some(name.into()),
            invalid: Some(Box::new(InvalidDetails {
                group: rt.group.clone(),
                kind: rt.kind.clone(),
                causes: errs,
            })),
            ..Self::new(422, "Invalid", message)
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
}
