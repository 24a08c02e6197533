//! `promoter doctor`: what a pass needs from the cluster it runs against, checked one by one — the
//! API server reachable (else nothing more is asked), the CRDs served, the permissions of the
//! identity in use (a SelfSubjectAccessReview per verb of the shipped least-privilege role), when
//! the CronJob last succeeded, which Sveltos runs, and whether that Sveltos still advances
//! ClusterPromotions itself (open-source builds up to v1.13 do; two controllers advancing one
//! promotion would fight over its status).

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::batch::v1::CronJob;
use kube::api::{Api, PostParams};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    Ok,
    Warning,
    Failed,
    Skipped,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The CronJob that runs the passes (`--cronjob`, as `status` names it); None: `none`,
    /// promoter runs elsewhere.
    pub cronjob: Option<(String, String)>,
    pub sveltos_namespace: String,
    pub now: DateTime<Utc>,
    /// Where the notification settings are (`--notifications`); None: notifications off.
    pub notifications: Option<crate::notify::Location>,
}

/// The first check's name.
const API_SERVER: &str = "API server";

fn check(name: &str, verdict: Verdict, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        verdict,
        detail: detail.into(),
    }
}

pub async fn doctor(client: &kube::Client, o: &Options) -> Vec<Check> {
    // Every other check asks the API server: one that cannot be reached is said once, as kubectl
    // says it, and not as a dozen failed checks blaming CRDs or Sveltos.
    let mut out = match client.list_api_groups().await {
        Ok(groups) => vec![check(
            API_SERVER,
            Verdict::Ok,
            format!("reachable ({} API groups served)", groups.groups.len()),
        )],
        Err(e) => {
            return vec![
                check(API_SERVER, Verdict::Failed, crate::cli_error::line(&e)),
                check(
                    "the other checks",
                    Verdict::Skipped,
                    "they ask the API server",
                ),
            ];
        }
    };
    out.extend(crds(client).await);
    out.extend(freezes(client, o.now).await);
    let cj = read_cronjob(client, o).await;
    let pass_account = cj
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .and_then(service_account);
    out.push(permissions(client, pass_account).await);
    out.push(cronjob(&cj, o, recorded_write(client, o.now).await));
    out.extend(sveltos(client, o).await);
    out.extend(notifications(client, o.notifications.as_ref()).await);
    out
}

/// The notification settings as a pass reads them: the rules valid, and each receiver's URL and
/// headers in the Secret (a receiver that cannot be sent to fails: its transitions would wait
/// until maxAge and be dropped).
async fn notifications(
    client: &kube::Client,
    location: Option<&crate::notify::Location>,
) -> Vec<Check> {
    use crate::pass::notifications::{Read, read};
    let name = "notifications";
    let Some(location) = location else {
        return vec![check(
            name,
            Verdict::Skipped,
            "disabled (--notifications none)",
        )];
    };
    match read(client, location).await {
        Read::Off => vec![check(
            name,
            Verdict::Skipped,
            format!("no ConfigMap {location}: notifications are off"),
        )],
        Read::Unreadable(e) => vec![check(
            name,
            Verdict::Warning,
            format!("reading the ConfigMap {location} failed: {e}"),
        )],
        Read::Invalid(problems) => vec![check(
            name,
            Verdict::Failed,
            format!(
                "ConfigMap {location}, key {}: {}",
                crate::notify::config::CONFIG_KEY,
                crate::notify::config::describe(&problems)
            ),
        )],
        Read::Ready { config, endpoints } => {
            let mut out = vec![check(
                name,
                Verdict::Ok,
                format!(
                    "ConfigMap {location}: {} receiver{}, {} rule{}, maxAge {}s",
                    config.receivers.len(),
                    if config.receivers.len() == 1 { "" } else { "s" },
                    config.rules.len(),
                    if config.rules.len() == 1 { "" } else { "s" },
                    config.max_age.as_secs()
                ),
            )];
            out.extend(endpoints.into_iter().map(|(receiver, e)| match e {
                // The URL is a secret: only its host is shown.
                Ok(e) => check(
                    &format!("notification receiver {receiver}"),
                    Verdict::Ok,
                    format!(
                        "{} to host {}",
                        e.kind.as_str(),
                        e.uri.host().unwrap_or_default()
                    ),
                ),
                Err(why) => check(
                    &format!("notification receiver {receiver}"),
                    Verdict::Failed,
                    why,
                ),
            }));
            out
        }
    }
}

async fn crds(client: &kube::Client) -> Vec<Check> {
    let wanted = [
        (
            "config.projectsveltos.io/v1beta1",
            "clusterpromotions",
            true,
        ),
        ("config.projectsveltos.io/v1beta1", "clusterprofiles", true),
        ("config.projectsveltos.io/v1beta1", "clustersummaries", true),
        ("lib.projectsveltos.io/v1beta1", "sveltosclusters", true),
        ("promoter.dev/v1alpha1", "promotionfreezes", true),
        ("promoter.dev/v1alpha1", "promotionrevisions", true),
        ("cluster.x-k8s.io/v1beta1", "clusters", false),
    ];
    let mut out = Vec::new();
    for (gv, plural, required) in wanted {
        let name = format!("CRD {plural}.{}", gv.split('/').next().unwrap_or_default());
        let served = match client.list_api_group_resources(gv).await {
            Ok(list) => list.resources.iter().any(|r| r.name == plural),
            Err(_) => false,
        };
        out.push(match (served, required) {
            (true, _) => check(&name, Verdict::Ok, format!("served ({gv})")),
            // promoter's own CRDs are optional: rollouts run without them (no freeze, no stored
            // revision; a rollback policy is blocked and says so).
            (false, true) if gv.starts_with("promoter.dev/") => check(
                &name,
                Verdict::Warning,
                format!(
                    "not served ({gv}): no freezes, no stored revisions (a failure-policy rollback is blocked); {} crd --own | kubectl apply -f -",
                    crate::invocation::command()
                ),
            ),
            (false, true) => check(
                &name,
                Verdict::Failed,
                if plural == "clusterpromotions" {
                    format!(
                        "not served ({gv}): {} crd | kubectl apply -f -",
                        crate::invocation::command()
                    )
                } else {
                    format!("not served ({gv}): is Sveltos installed?")
                },
            ),
            (false, false) => check(
                &name,
                Verdict::Skipped,
                "Cluster API not installed: only SveltosClusters are managed",
            ),
        });
    }
    out
}

/// The PromotionFreezes: the active ones (name, reason, selector, until), and one failing check
/// per invalid one (it holds nothing, and its author should know) and per one that cannot be read
/// (it holds every promotion it may select until it is fixed or deleted).
async fn freezes(client: &kube::Client, now: DateTime<Utc>) -> Vec<Check> {
    let name = "PromotionFreezes";
    let list = match crate::pass::observe::freezes(client).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            return vec![check(name, Verdict::Skipped, "the CRD is not served")];
        }
        Err(e) => {
            return vec![check(name, Verdict::Warning, crate::cli_error::render(&e))];
        }
    };
    let evaluated = crate::freeze::Freezes::new(&list, now);
    let active: Vec<String> = evaluated
        .all
        .iter()
        .filter(|f| f.phase == crate::api::FreezePhase::Active)
        .map(|f| {
            format!(
                "{} ({:?}; {}; {})",
                f.name,
                f.reason(),
                f.selector_text(),
                f.until()
            )
        })
        .collect();
    let mut out = vec![check(
        name,
        Verdict::Ok,
        if active.is_empty() {
            format!("none active ({} in all)", list.len())
        } else {
            format!("{} active: {}", active.len(), active.join(", "))
        },
    )];
    out.extend(evaluated.invalid().map(|f| {
        check(
            &format!("PromotionFreeze {}", f.name),
            Verdict::Failed,
            format!("Invalid, holds nothing: {}", f.message),
        )
    }));
    out.extend(
        evaluated
            .all
            .iter()
            .filter(|f| f.unreadable().is_some())
            .map(|f| {
                check(
                    &format!("PromotionFreeze {}", f.name),
                    Verdict::Failed,
                    format!("{}: {}", f.phase, f.message),
                )
            }),
    );
    out
}

/// Whose permissions to check: the pass's service account, as the CronJob names it, when someone
/// else runs doctor (a SubjectAccessReview each); the identity in use otherwise (the pass itself,
/// `--as` it, or a pass run from CI or Lambda, where no CronJob is).
async fn permissions(client: &kube::Client, pass_account: Option<String>) -> Check {
    let Some(role) = crate::roles::role(crate::roles::PASS) else {
        return check(
            "permissions",
            Verdict::Failed,
            "promoter was built without its pass role",
        );
    };
    let me = crate::ops::identity::whoami(client).await;
    let subject = pass_account.filter(|sa| me.as_ref() != Some(sa));
    let name = match &subject {
        Some(sa) => format!("permissions of {sa} (the CronJob's service account)"),
        None => "permissions of the identity in use".to_string(),
    };
    let (mut asked, mut denied, mut errors) = (0, Vec::new(), Vec::new());
    for rule in role.rules.iter().flatten() {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r.to_string(), Some(s.to_string())),
                    None => (resource.clone(), None),
                };
                for verb in &rule.verbs {
                    asked += 1;
                    let attributes = ResourceAttributes {
                        group: Some(group.clone()),
                        resource: Some(resource.clone()),
                        subresource: subresource.clone(),
                        verb: Some(verb.clone()),
                        ..Default::default()
                    };
                    let what = format!(
                        "{verb} {}{}{}",
                        resource,
                        subresource
                            .as_deref()
                            .map(|s| format!("/{s}"))
                            .unwrap_or_default(),
                        if group.is_empty() {
                            String::new()
                        } else {
                            format!(".{group}")
                        }
                    );
                    match allowed(client, subject.as_deref(), attributes).await {
                        Ok(true) => {}
                        Ok(false) => denied.push(what),
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
    }
    if let Some(e) = errors.first() {
        // Someone who may not ask about another identity: what to run instead.
        return match &subject {
            Some(sa) => check(
                &name,
                Verdict::Skipped,
                format!(
                    "cannot ask as {}: {e}; run `{} doctor --as {sa}` as an administrator",
                    me.as_deref().unwrap_or("this identity"),
                    crate::invocation::command()
                ),
            ),
            None => check(&name, Verdict::Warning, format!("could not ask: {e}")),
        };
    }
    if denied.is_empty() {
        return check(
            &name,
            Verdict::Ok,
            format!("all {asked} permissions a pass uses are granted"),
        );
    }
    let who = subject.or(me);
    check(
        &name,
        Verdict::Failed,
        format!(
            "missing {} of {asked}: {}; the ClusterRole {} (installed with promoter; with Helm, named after the release) grants them: {}",
            denied.len(),
            denied.join(", "),
            crate::roles::PASS,
            crate::roles::binding_command(crate::roles::PASS, who.as_deref().unwrap_or("<user>"))
        ),
    )
}

/// Whether `subject` (None: the identity in use) may do what `attributes` say; Err: the
/// question could not be asked (one line, with its hint).
async fn allowed(
    client: &kube::Client,
    subject: Option<&str>,
    attributes: ResourceAttributes,
) -> Result<bool, String> {
    let answer = match subject {
        None => Api::<SelfSubjectAccessReview>::all(client.clone())
            .create(
                &PostParams::default(),
                &SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(attributes),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .map(|r| r.status.is_some_and(|s| s.allowed)),
        Some(user) => Api::<SubjectAccessReview>::all(client.clone())
            .create(
                &PostParams::default(),
                &SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        resource_attributes: Some(attributes),
                        user: Some(user.to_string()),
                        groups: Some(crate::fake::rbac::implied_groups(user)),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .await
            .map(|r| r.status.is_some_and(|s| s.allowed)),
    };
    // About another identity, doctor says itself what to run instead.
    answer.map_err(|e| match subject {
        Some(_) => crate::cli_error::line(&e),
        None => crate::cli_error::line_with_hint(&e),
    })
}

/// The CronJob's service account as a user name (`system:serviceaccount:NS:NAME`).
fn service_account(cj: &CronJob) -> Option<String> {
    let namespace = cj.metadata.namespace.clone()?;
    let account = cj
        .spec
        .as_ref()
        .and_then(|s| s.job_template.spec.as_ref())
        .and_then(|j| j.template.spec.as_ref())
        .and_then(|p| p.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    Some(format!("system:serviceaccount:{namespace}:{account}"))
}

async fn read_cronjob(client: &kube::Client, o: &Options) -> kube::Result<Option<CronJob>> {
    let Some((namespace, name)) = &o.cronjob else {
        return Ok(None);
    };
    Api::<CronJob>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
}

/// The last status change a pass recorded on any promotion, as `status` says it without a
/// CronJob (empty when the promotions cannot be listed: the permissions check says why).
async fn recorded_write(client: &kube::Client, now: DateTime<Utc>) -> String {
    let api: kube::Api<crate::api::ClusterPromotion> = kube::Api::all(client.clone());
    match api.list(&Default::default()).await {
        Ok(list) => format!(
            "; {}",
            crate::ops::inspect::recorded_write_text(
                list.items
                    .iter()
                    .filter_map(crate::ops::inspect::recorded_write)
                    .max(),
                now
            )
        ),
        Err(_) => String::new(),
    }
}

fn cronjob(read: &kube::Result<Option<CronJob>>, o: &Options, recorded: String) -> Check {
    let Some((namespace, name)) = &o.cronjob else {
        return check(
            "CronJob",
            Verdict::Skipped,
            format!("--cronjob none: promoter runs elsewhere (Lambda, CI){recorded}"),
        );
    };
    let name = format!("CronJob {namespace}/{name}");
    let cj = match read {
        Ok(Some(cj)) => cj,
        Ok(None) => {
            return check(
                &name,
                Verdict::Skipped,
                format!(
                    "not found: fine if promoter runs as a Lambda function or from CI (--cronjob none, or --cronjob NAMESPACE/NAME){recorded}"
                ),
            );
        }
        // The pass's own identity may not read it (it needs not): nothing to say about it.
        Err(kube::Error::Api(s)) if s.code == 403 => {
            return check(
                &name,
                Verdict::Skipped,
                format!("not readable by this identity: {}", s.message),
            );
        }
        Err(e) => return check(&name, Verdict::Warning, crate::cli_error::line_with_hint(e)),
    };
    if cj.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false) {
        return check(&name, Verdict::Failed, "suspended: no pass runs");
    }
    let last = cj
        .status
        .as_ref()
        .and_then(|s| s.last_successful_time.as_ref())
        .and_then(|t| DateTime::<Utc>::from_timestamp(t.0.as_second(), 0));
    match last {
        None => check(&name, Verdict::Warning, "has never succeeded yet"),
        Some(t) if o.now - t > chrono::Duration::minutes(5) => check(
            &name,
            Verdict::Failed,
            format!(
                "last succeeded {} ago ({t}): rollouts are not advancing; see its pods' logs",
                crate::ops::inspect::age(Some(t), o.now)
            ),
        ),
        Some(t) => check(
            &name,
            Verdict::Ok,
            format!(
                "last succeeded {} ago ({t})",
                crate::ops::inspect::age(Some(t), o.now)
            ),
        ),
    }
}

/// `v1.13.2` → (1, 13, 2).
fn version(tag: &str) -> Option<(u64, u64, u64)> {
    let mut parts = tag.trim_start_matches('v').split(['.', '-']);
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next().and_then(|p| p.parse().ok()).unwrap_or(0),
    ))
}

async fn sveltos(client: &kube::Client, o: &Options) -> Vec<Check> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &o.sveltos_namespace);
    let deployment = match api.get_opt("addon-controller").await {
        Ok(Some(d)) => d,
        Ok(None) => {
            return vec![check(
                "Sveltos version",
                Verdict::Warning,
                format!(
                    "no Deployment {}/addon-controller: Sveltos not installed, or in another namespace (--sveltos-namespace)",
                    o.sveltos_namespace
                ),
            )];
        }
        Err(e) => {
            return vec![check(
                "Sveltos version",
                Verdict::Skipped,
                crate::cli_error::line_with_hint(&e),
            )];
        }
    };
    let image = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| {
            p.containers
                .iter()
                .find(|c| c.name == "manager")
                .or(p.containers.first())
        })
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
    let mut out = vec![check(
        "Sveltos version",
        Verdict::Ok,
        format!("addon-controller {image}"),
    )];
    let other = "another controller advancing ClusterPromotions";
    out.push(match version(tag) {
        // Up to v1.13 the open-source addon-controller advances stages itself (reference §0).
        Some(v) if v < (1, 14, 0) => check(
            other,
            Verdict::Failed,
            format!(
                "Sveltos {tag} advances ClusterPromotions itself: it and promoter would both write their status; upgrade Sveltos to v1.14+ (open source no longer advances them) before running promoter"
            ),
        ),
        Some(_) if image.contains("enterprise") => check(
            other,
            Verdict::Failed,
            "a Sveltos Enterprise build advances ClusterPromotions itself; run promoter only where it does not",
        ),
        Some(_) => check(
            other,
            Verdict::Ok,
            format!("Sveltos {tag} (open source, v1.14+) leaves stage advancement to promoter"),
        ),
        None => check(
            other,
            Verdict::Warning,
            format!("cannot tell from the image tag {tag:?} whether this Sveltos advances ClusterPromotions"),
        ),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(version("v1.13.0"), Some((1, 13, 0)));
        assert_eq!(version("v1.14.2-rc1"), Some((1, 14, 2)));
        assert_eq!(version("1.2"), Some((1, 2, 0)));
        assert_eq!(version("latest"), None);
    }
}
