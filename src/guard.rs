//! Guarded writes: JSON patches whose first operation tests the resourceVersion the writer read.
//!
//! kube-apiserver answers a JSON patch that does not apply (a failed `test`, a path that is not
//! there) with a generic 422 `Invalid` whose message is always the text below: the patch
//! library's own message is dropped (`NewGenericServerResponse(http.StatusUnprocessableEntity,
//! ...)` in kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`,
//! `applyJSPatch`, and apimachinery `pkg/api/errors/errors.go`, commit 00f75347). A patch that
//! applies but produces an invalid object is also a 422 `Invalid`, but its message names the
//! object (`ClusterPromotion.config.projectsveltos.io "x" is invalid: ...`). Only the first means
//! "someone else wrote first"; the second is a real error that retrying never fixes.

/// kube-apiserver's message for a JSON patch that does not apply.
pub const PATCH_NOT_APPLIED: &str =
    "the server rejected our request due to an error in our request";

/// Whether the API server refused a JSON patch because one of its operations did not apply
/// (for a guarded patch: the object changed since it was read).
pub fn patch_not_applied(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422 && s.message.starts_with(PATCH_NOT_APPLIED))
}

/// A write whose outcome is not known: its answer was lost (connection reset, timeout) or the
/// server timed out (504: the write may still be committed). Never replayed blindly: the pass
/// reads what happened, or leaves it to the next pass; only a create under a name of its own
/// content is sent again (the server stores it once).
pub fn outcome_unknown(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(_) | kube::Error::HyperError(_))
        || matches!(e, kube::Error::Api(s) if s.code == 504)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: "Invalid".into(),
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn only_a_patch_that_does_not_apply_is_a_lost_race() {
        assert!(patch_not_applied(&api(422, PATCH_NOT_APPLIED)));
        assert!(!patch_not_applied(&api(
            422,
            "ClusterPromotion.config.projectsveltos.io \"p\" is invalid: metadata.annotations: Invalid value"
        )));
        assert!(!patch_not_applied(&api(409, PATCH_NOT_APPLIED)));
    }
}
