//! Who is acting, as the API server authenticated them: a SelfSubjectReview (what `kubectl auth
//! whoami` shows), so that approvals and pauses record a real identity rather than `$USER`, which
//! containers and CI leave unset and anybody can set.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};

/// The authenticated username, or None where the API server cannot say (before Kubernetes 1.28,
/// or no permission to create SelfSubjectReviews).
pub async fn whoami(client: &kube::Client) -> Option<String> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    match api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Ok(r) => r.status?.user_info?.username.filter(|u| !u.is_empty()),
        Err(e) => {
            tracing::debug!(error = %crate::cli_error::line(&e), "SelfSubjectReview failed; the identity is not known");
            None
        }
    }
}

/// Who acts and why, as every command that writes records it: the identity the API server
/// authenticated, with the operator's note (`--by`), and the reason. A reason that is too long is
/// refused before anything is written. The CLI and the dashboard both ask here.
pub async fn actor(
    client: &kube::Client,
    note: Option<&str>,
    reason: Option<&str>,
) -> anyhow::Result<super::control::Actor> {
    let who = whoami(client).await;
    let mut actor = super::control::Actor::new(&recorded_by(who.as_deref(), note), reason)?;
    actor.identity = who;
    Ok(actor)
}

/// What an approval or a pause records as `by`: the authenticated identity, with the `--by` note
/// when one was given; the note alone (marked unverified) when the identity is unknown.
pub fn recorded_by(identity: Option<&str>, note: Option<&str>) -> String {
    match (identity, note.filter(|n| !n.trim().is_empty())) {
        (Some(id), Some(note)) if note != id => format!("{id} ({note})"),
        (Some(id), _) => id.to_string(),
        (None, Some(note)) => format!("{note} (unverified)"),
        (None, None) => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_first_note_second() {
        assert_eq!(recorded_by(Some("alice"), None), "alice");
        assert_eq!(recorded_by(Some("alice"), Some("CAB-42")), "alice (CAB-42)");
        assert_eq!(recorded_by(Some("alice"), Some("alice")), "alice");
        assert_eq!(recorded_by(None, Some("bob")), "bob (unverified)");
        assert_eq!(recorded_by(None, None), "unknown");
    }
}
