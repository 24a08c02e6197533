//! Errors as kubectl prints them: one line, the API server's reason and message once
//! (`Error from server (NotFound): …`), a server that could not be reached as kubectl names it
//! ([`crate::client::unreachable`]), the innermost cause of another connection failure, and a hint
//! where the usual cause is known (a missing CRD, missing permissions: the installed ClusterRole
//! that grants it and the binding line).
//!
//! [`render`] is for a command's error on stderr (the line, then `hint: …`); [`line`] is the same
//! line without the hint, for everything else that carries an error as text (a promotion's status,
//! a report line, a log field, a doctor check). kube's own `Display` of an API error appends the
//! whole `Status` as Rust debug output, so no kube error is ever formatted with `{e}`.

/// The error of a command, for stderr.
pub fn render(e: &anyhow::Error) -> String {
    let (text, hint) = line_and_hint(e.as_ref());
    match hint {
        Some(h) => format!("{text}\nhint: {h}"),
        None => text,
    }
}

/// One line, as kubectl prints it, for any error (an `anyhow::Error`'s `as_ref()`, a
/// `kube::Error`, …): no hint, no debug output.
pub fn line(e: &(dyn std::error::Error + 'static)) -> String {
    line_and_hint(e).0
}

/// [`line`] with the hint after a `; hint: `: one line where a hint still helps (the report of
/// a pass, a doctor check).
pub fn line_with_hint(e: &(dyn std::error::Error + 'static)) -> String {
    match line_and_hint(e) {
        (text, Some(h)) => format!("{text}; hint: {h}"),
        (text, None) => text,
    }
}

fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}

fn line_and_hint(e: &(dyn std::error::Error + 'static)) -> (String, Option<String>) {
    // kubectl's own line, which names the server and says what to check.
    if let Some(u) = crate::client::unreachable::find(e) {
        return (u.to_string(), None);
    }
    // What promoter was doing: the contexts added above the first kube error.
    let mut doing: Vec<String> = Vec::new();
    for cause in chain(e) {
        if let Some(k) = cause.downcast_ref::<kube::Error>() {
            return kube_error(k, &doing);
        }
        doing.push(cause.to_string());
    }
    let mut parts: Vec<String> = Vec::new();
    for cause in chain(e) {
        let text = cause.to_string();
        // Library errors often repeat their source's text inside their own.
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    let text = parts.join(": ");
    if text.starts_with("Error from server") || text.starts_with("error:") {
        (text, None)
    } else {
        (format!("error: {text}"), None)
    }
}

fn while_doing(doing: &[String]) -> String {
    match doing.first() {
        Some(d) => format!(" (while {d})"),
        None => String::new(),
    }
}

fn kube_error(e: &kube::Error, doing: &[String]) -> (String, Option<String>) {
    match e {
        kube::Error::Api(status) => {
            let (reason, message) = reason_and_message(status);
            let line = format!(
                "Error from server ({reason}): {message}{}",
                while_doing(doing)
            );
            (line, api_hint(status.code, &message, doing))
        }
        // A connection that could not be made at all is `Unreachable`, above; this is one that
        // broke (reset, cut short, timed out).
        kube::Error::HyperError(_) | kube::Error::Service(_) => (
            format!(
                "Unable to connect to the server: {}{}",
                innermost(e),
                while_doing(doing)
            ),
            None,
        ),
        other => (
            format!("error: {}{}", innermost(other), while_doing(doing)),
            None,
        ),
    }
}

/// What kubectl would say. An API group nobody serves answers with Go's plain-text "404 page not
/// found", not a Status; kube then reports "Failed to parse error data" as the reason, and kubectl
/// says NotFound, "the server could not find the requested resource" (the message a served group
/// gives for an unknown resource, so both get the same hint). Other bodies that are not a Status
/// (a proxy's page) keep their text, with the HTTP status as the reason.
fn reason_and_message(status: &kube::core::Status) -> (String, String) {
    const UNPARSED: &str = "Failed to parse error data";
    match (status.code, status.reason.as_str()) {
        (404, UNPARSED) => (
            "NotFound".into(),
            "the server could not find the requested resource".into(),
        ),
        (code, UNPARSED) | (code, "") => (
            http::StatusCode::from_u16(code)
                .ok()
                .and_then(|c| c.canonical_reason())
                .map_or_else(|| code.to_string(), String::from),
            status.message.clone(),
        ),
        (_, reason) => (reason.into(), status.message.clone()),
    }
}

/// The deepest cause's text: connection errors nest the same failure several times.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        last = c.to_string();
        cur = c.source();
    }
    last
}

fn api_hint(code: u16, message: &str, doing: &[String]) -> Option<String> {
    let about_promotions = doing.iter().any(|d| d.contains("ClusterPromotion"));
    let about_own_kinds = doing
        .iter()
        .any(|d| d.contains("PromotionFreeze") || d.contains("PromotionRevision"));
    match code {
        404 if message.contains("could not find the requested resource") => {
            Some(if about_own_kinds {
                format!(
                    "promoter's own CRDs (PromotionFreeze, PromotionRevision) are not installed: {} crd --own | kubectl apply -f -",
                    crate::invocation::command()
                )
            } else if about_promotions {
                format!(
                    "the ClusterPromotion CRD is not installed: {} crd | kubectl apply -f -",
                    crate::invocation::command()
                )
            } else {
                "a CRD promoter reads is not served here: is Sveltos installed (ClusterProfile, ClusterSummary, SveltosCluster)?".into()
            })
        }
        401 => Some("the API server rejected the credentials of the kubeconfig in use".into()),
        403 => Some(crate::roles::hint(message)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: reason.into(),
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn api_errors_are_one_line_with_the_message_once() {
        let e = Err::<(), _>(api(
            404,
            "NotFound",
            "clusterpromotions.config.projectsveltos.io \"x\" not found",
        ))
        .context("reading ClusterPromotion x")
        .unwrap_err();
        let text = render(&e);
        assert_eq!(
            text,
            "Error from server (NotFound): clusterpromotions.config.projectsveltos.io \"x\" not found (while reading ClusterPromotion x)"
        );
        assert_eq!(text.matches("not found").count(), 1);
    }

    #[test]
    fn hints_for_a_missing_crd_and_forbidden() {
        let e = Err::<(), _>(api(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ))
        .context("listing ClusterPromotions")
        .unwrap_err();
        assert!(render(&e).contains("promoter crd | kubectl apply -f -"));
        let e = Err::<(), _>(api(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ))
        .context("listing PromotionFreezes")
        .unwrap_err();
        assert!(render(&e).contains("promoter crd --own | kubectl apply -f -"));
        let e = Err::<(), _>(api(403, "Forbidden", "clusterpromotions.config.projectsveltos.io is forbidden: User \"bob\" cannot list resource \"clusterpromotions\" in API group \"config.projectsveltos.io\" at the cluster scope"))
            .context("listing ClusterPromotions")
            .unwrap_err();
        let text = render(&e);
        assert!(
            text.starts_with("Error from server (Forbidden): clusterpromotions"),
            "{text}"
        );
        assert!(
            text.ends_with("\nhint: the ClusterRole promoter-view (installed with promoter; with Helm, named after the release) reads rollouts and grants it: kubectl create clusterrolebinding bob-promoter-view --clusterrole=promoter-view --user=bob"),
            "{text}"
        );
    }

    /// kube's `Display` of an API error appends the whole Status as Rust debug output; nothing
    /// promoter prints or records uses it.
    #[test]
    fn a_kube_error_anywhere_is_kubectl_s_one_line() {
        let e = api(
            403,
            "Forbidden",
            "configmaps \"x\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"n\"",
        );
        assert!(e.to_string().contains("Status {"), "kube's own Display");
        assert_eq!(
            line(&e),
            "Error from server (Forbidden): configmaps \"x\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"n\""
        );
        let with_hint = line_with_hint(&e);
        assert!(
            !with_hint.contains('\n') && with_hint.contains("; hint: "),
            "{with_hint}"
        );
        let wrapped = anyhow::Error::new(e).context("reading the settings");
        assert!(line(wrapped.as_ref()).ends_with(" (while reading the settings)"));
    }

    /// What kube makes of a body that is not a Status (kube-client's handle_api_errors).
    #[test]
    fn a_group_nobody_serves_reads_as_kubectl_says_it() {
        let e = Err::<(), _>(api(404, "Failed to parse error data", "404 page not found"))
            .context("listing ClusterPromotions")
            .unwrap_err();
        assert_eq!(
            render(&e),
            "Error from server (NotFound): the server could not find the requested resource (while listing ClusterPromotions)\nhint: the ClusterPromotion CRD is not installed: promoter crd | kubectl apply -f -"
        );
        let e = Err::<(), _>(api(
            502,
            "Failed to parse error data",
            "<html>upstream</html>",
        ))
        .context("listing ClusterPromotions")
        .unwrap_err();
        assert_eq!(
            render(&e),
            "Error from server (Bad Gateway): <html>upstream</html> (while listing ClusterPromotions)"
        );
    }

    #[test]
    fn other_errors_are_not_repeated() {
        let inner = std::io::Error::other("boom");
        let e = anyhow::Error::new(inner).context("reading x: boom");
        assert_eq!(render(&e), "error: reading x: boom");
    }
}
