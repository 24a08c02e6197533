//! `promoter freeze create|list|delete|bypass`: PromotionFreezes, which stop the promotions they
//! select from starting a new stage, and the audited bypass that lets one promotion through.

use super::control::{Actor, Changed, guarded_patch, retrying, set_annotations};
use crate::annotations::{CREATED_BY, FREEZE_BYPASS, FreezeBypass, Record, encode};
use crate::api::promotion_freeze::REASON_MAX;
use crate::api::{ClusterPromotion, PromotionFreeze, PromotionFreezeSpec, Timestamp};
use crate::freeze::{Freezes, evaluate};
use crate::labels::{LabelSelector, LabelSelectorRequirement, Op, parse_selector};
use crate::pass::decision::Reason;
use crate::pass::events;
use chrono::{DateTime, Duration, Utc};
use kube::api::{Api, DeleteParams, PostParams};
use serde::Serialize;
use std::collections::BTreeMap;

/// The furthest ahead a bypass may end: a bypass is for an emergency, not a standing exception.
pub fn bypass_max() -> Duration {
    Duration::days(7)
}

/// An RFC 3339 time, or a duration from now in the flag grammar (`--start`, `--end`, `--until`).
pub fn time_or_duration(
    flag: &str,
    text: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = Timestamp::parse(text) {
        return Ok(t.as_datetime());
    }
    let d = crate::api::flag_duration::parse(text).map_err(|_| {
        anyhow::anyhow!(
            "{flag}: {text:?} is neither an RFC 3339 time (2026-12-20T00:00:00Z) nor a duration (4h, 1d)"
        )
    })?;
    later(flag, text, now, d)
}

/// `at + d`, an error where the grammar accepts a duration (`300000y`) the calendar cannot hold.
pub fn later(
    flag: &str,
    text: &str,
    at: DateTime<Utc>,
    d: chrono::Duration,
) -> anyhow::Result<DateTime<Utc>> {
    at.checked_add_signed(d)
        .ok_or_else(|| anyhow::anyhow!("{flag}: {text:?} ends beyond the calendar"))
}

/// What `promoter freeze create` was asked for.
#[derive(Clone, Debug, Default)]
pub struct NewFreeze {
    pub name: String,
    pub reason: String,
    /// `--selector` in `kubectl get -l` form; none: every promotion.
    pub selector: Option<String>,
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
}

/// `tier=prod,team in (a,b),!legacy` as a LabelSelector (`=` becomes matchLabels; a freeze's
/// selector is a LabelSelector, so `>`/`<` have no place in it).
pub fn label_selector(text: &str) -> Result<LabelSelector, String> {
    let requirements = parse_selector(text).map_err(|e| e.to_string())?;
    let mut selector = LabelSelector::default();
    for r in requirements {
        let (operator, values) = match r.op {
            Op::In(v) if v.len() == 1 => {
                selector
                    .match_labels
                    .get_or_insert_default()
                    .insert(r.key, v[0].clone());
                continue;
            }
            Op::In(v) => ("In", Some(v)),
            Op::NotIn(v) => ("NotIn", Some(v)),
            Op::Exists => ("Exists", None),
            Op::DoesNotExist => ("DoesNotExist", None),
            Op::Gt(_) | Op::Lt(_) => {
                return Err(format!(
                    "{text:?}: a promotionSelector cannot compare numbers (> or <)"
                ));
            }
        };
        selector
            .match_expressions
            .get_or_insert_default()
            .push(LabelSelectorRequirement {
                key: r.key,
                operator: operator.into(),
                values,
            });
    }
    Ok(selector)
}

/// The PromotionFreeze `create` writes, or why it would hold nothing (checked before anything
/// is written; the API server checks the rest).
pub fn freeze_object(
    new: &NewFreeze,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<PromotionFreeze, String> {
    let reason = new.reason.trim();
    if reason.is_empty() {
        return Err("--reason is required: it is shown on every promotion the freeze holds".into());
    }
    if reason.len() > REASON_MAX {
        return Err(format!(
            "--reason is {} bytes long; at most {REASON_MAX} are allowed",
            reason.len()
        ));
    }
    let selector = new
        .selector
        .as_deref()
        .map(label_selector)
        .transpose()
        .map_err(|e| format!("--selector: {e}"))?;
    if let Some(end) = new.end {
        if end <= new.start.unwrap_or(now) {
            return Err(format!(
                "the end ({}) is not after the start ({}): the freeze would hold nothing",
                Timestamp::new(end),
                Timestamp::new(new.start.unwrap_or(now))
            ));
        }
        if end <= now {
            return Err(format!(
                "the end ({}) has passed: the freeze would hold nothing",
                Timestamp::new(end)
            ));
        }
    }
    let mut f = PromotionFreeze::new(
        &new.name,
        PromotionFreezeSpec {
            reason: reason.to_string(),
            promotion_selector: selector,
            start: new.start.map(Timestamp::new),
            end: new.end.map(Timestamp::new),
            unreadable: None,
        },
    );
    let created = Record {
        by: actor.by.clone(),
        at: Timestamp::new(now).to_string(),
        revision: None,
        reason: None,
    };
    f.metadata.annotations = Some(BTreeMap::from([(CREATED_BY.into(), encode(&created))]));
    Ok(f)
}

/// Labels of every promotion, by name; none when they cannot be listed (a hint, not a need).
async fn promotion_labels(
    client: &kube::Client,
) -> Option<BTreeMap<String, BTreeMap<String, String>>> {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    match api.list(&Default::default()).await {
        Ok(list) => Some(
            list.items
                .into_iter()
                .filter_map(|p| Some((p.metadata.name?, p.metadata.labels.unwrap_or_default())))
                .collect(),
        ),
        Err(e) => {
            tracing::debug!(
                "listing ClusterPromotions to say what a freeze holds: {}",
                crate::cli_error::line(&e)
            );
            None
        }
    }
}

/// `a, b, c` or `none`.
fn names(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

pub async fn create(
    client: &kube::Client,
    new: &NewFreeze,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let object = freeze_object(new, actor, now).map_err(|e| anyhow::anyhow!(e))?;
    let api: Api<PromotionFreeze> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .map_err(|e| {
            anyhow::Error::new(e).context(format!("creating PromotionFreeze {}", new.name))
        })?;
    let e = evaluate(&created, now);
    let promotions = promotion_labels(client).await;
    let selected: Option<Vec<String>> = promotions.as_ref().map(|all| {
        all.iter()
            .filter(|(_, labels)| e.selects(labels))
            .map(|(n, _)| n.clone())
            .collect()
    });
    // Its phase at once (Scheduled, Active), as the pass would write it: `kubectl get pfreeze`
    // reads well before the next pass (a printer column is JSONPath over the object, it cannot
    // compute the phase). An active one records what it holds as the pass would (`held`, from
    // every promotion listed; none when they could not be listed: the next pass records them).
    // Best effort: without the permission, the next pass writes it all.
    let status = serde_json::json!({
        "metadata": {"resourceVersion": created.metadata.resource_version},
        "status": e.status(selected.clone()),
    });
    if let Err(err) = api
        .patch_status(
            &new.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(status),
        )
        .await
    {
        tracing::debug!(
            "writing the new freeze's status: {}; the next pass writes it",
            crate::cli_error::line(&err)
        );
    }
    let mut out = format!(
        "created freeze {}: {} ({}), {}",
        new.name,
        e.selector_text(),
        e.reason(),
        e.message
    );
    if let Some(selected) = &selected {
        out.push_str(&format!("; selects now: {}", names(selected)));
    }
    Ok(out)
}

/// One freeze as `freeze list` shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeRow {
    pub name: String,
    pub phase: String,
    pub reason: String,
    pub selector: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// When Active: the promotions it holds now (None: promotions could not be listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holds: Option<Vec<String>>,
    pub message: String,
}

/// Every freeze as the pass reads them (one that cannot be decoded included, as it holds).
pub async fn all_freezes(client: &kube::Client) -> anyhow::Result<Vec<PromotionFreeze>> {
    crate::pass::observe::freezes(client).await?.ok_or_else(|| {
        anyhow::anyhow!(
            "PromotionFreezes are not served (their CRD is not installed): `{} crd --own | kubectl apply -f -`",
            crate::invocation::command()
        )
    })
}

pub async fn list(client: &kube::Client, now: DateTime<Utc>) -> anyhow::Result<Vec<FreezeRow>> {
    let freezes = all_freezes(client).await?;
    let promotions = promotion_labels(client).await;
    Ok(rows(&freezes, promotions.as_ref(), now))
}

/// The rows of `freeze list` for these freezes, with the promotions each holds now among
/// `promotions` (their labels by name; none: they could not be listed).
pub fn rows(
    freezes: &[PromotionFreeze],
    promotions: Option<&BTreeMap<String, BTreeMap<String, String>>>,
    now: DateTime<Utc>,
) -> Vec<FreezeRow> {
    let evaluated = Freezes::new(freezes, now);
    evaluated
        .all
        .iter()
        .map(|e| FreezeRow {
            name: e.name.to_string(),
            phase: e.phase.to_string(),
            reason: e.reason().to_string(),
            selector: e.selector_text(),
            start: e.freeze.spec.start.map(|t| t.to_string()),
            end: e.freeze.spec.end.map(|t| t.to_string()),
            holds: promotions.map(|all| {
                all.iter()
                    .filter(|(n, labels)| e.holds(n, labels))
                    .map(|(n, _)| n.clone())
                    .collect()
            }),
            message: e.message.clone(),
        })
        .collect()
}

/// kubectl's NotFound line for a freeze, with the existing name it is a typo of.
async fn freeze_not_found(api: &Api<PromotionFreeze>, name: &str) -> anyhow::Error {
    let existing: Vec<String> = match api.list(&Default::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter_map(|f| f.metadata.name)
            .collect(),
        Err(_) => Vec::new(),
    };
    anyhow::anyhow!(
        "Error from server (NotFound): promotionfreezes.promoter.dev {name:?} not found{}",
        crate::suggest::did_you_mean(name, existing.iter().map(String::as_str))
    )
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

pub async fn delete(client: &kube::Client, name: &str) -> anyhow::Result<String> {
    let api: Api<PromotionFreeze> = Api::all(client.clone());
    // Untyped: the API server answers with the object deleted, and a freeze that cannot be decoded
    // (the one most in need of deleting) would make a typed delete fail after it succeeded.
    let untyped: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<PromotionFreeze>(&()),
    );
    match untyped.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(format!(
            "deleted freeze {name}: the promotions it held start new stages again from the next pass"
        )),
        Err(e) if is_not_found(&e) => Err(freeze_not_found(&api, name).await),
        Err(e) => Err(anyhow::Error::new(e).context(format!("deleting PromotionFreeze {name}"))),
    }
}

/// Records a bypass on `promotion` (guarded by the resourceVersion read, retried on conflict) and
/// a `FreezeBypassGranted` Event. `until` must be ahead, at most [`bypass_max`]; `freeze`, when
/// named, must exist.
pub async fn bypass(
    client: &kube::Client,
    promotion: &str,
    freeze: Option<&str>,
    until: DateTime<Utc>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> anyhow::Result<String> {
    let record = bypass_record(freeze, until, actor, now).map_err(|e| anyhow::anyhow!(e))?;
    let all = all_freezes(client).await?;
    if let Some(f) = freeze {
        check_freeze_exists(client, &all, f).await?;
    }
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let updated = retrying(promotion, "recording the bypass", || {
        bypass_once(&api, promotion, &record)
    })
    .await?;
    let which = match freeze {
        Some(f) => format!("freeze {f}"),
        None => "any freeze".into(),
    };
    let note = actor.note(format!(
        "Freeze bypass for {which} granted by {} until {}",
        actor.by, record.until
    ));
    events::emit_action(client, &updated, Reason::FreezeBypassGranted, note, now).await;
    let mut out = format!(
        "recorded a bypass: {promotion} may start new stages during {which} until {}",
        record.until
    );
    {
        let labels = updated.metadata.labels.clone().unwrap_or_default();
        let holding: Vec<String> = Freezes::new(&all, now)
            .holding(promotion, &labels)
            .iter()
            .map(|f| f.name.to_string())
            .collect();
        out.push_str(&format!("; freezes holding it now: {}", names(&holding)));
    }
    Ok(out)
}

/// Whether the freeze named is among `all` (as [`all_freezes`] read them, an undecodable one
/// included): kubectl's NotFound line (with a "did you mean") when not.
pub async fn check_freeze_exists(
    client: &kube::Client,
    all: &[PromotionFreeze],
    name: &str,
) -> anyhow::Result<()> {
    if all.iter().any(|x| x.metadata.name.as_deref() == Some(name)) {
        return Ok(());
    }
    Err(freeze_not_found(&Api::all(client.clone()), name).await)
}

async fn bypass_once(
    api: &Api<ClusterPromotion>,
    name: &str,
    record: &FreezeBypass,
) -> anyhow::Result<Result<ClusterPromotion, Changed>> {
    let p = api.get(name).await?;
    guarded_patch(api, &p, bypass_ops(&p, record)).await
}

/// What `freeze bypass` writes to `p` as read (pure; [`guarded`](super::control::guarded) when
/// sent).
pub fn bypass_ops(p: &ClusterPromotion, record: &FreezeBypass) -> Vec<serde_json::Value> {
    set_annotations(p, &[(FREEZE_BYPASS, encode(record))])
}

/// The bypass `freeze bypass` records, or why it refuses (pure; whether a named freeze exists is
/// the caller's read): the identity the API server authenticated, a reason, and an `until` ahead,
/// at most [`bypass_max`] away.
pub fn bypass_record(
    freeze: Option<&str>,
    until: DateTime<Utc>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> Result<FreezeBypass, String> {
    let Some(user) = actor.identity.clone() else {
        return Err("the API server did not say who you are (a SelfSubjectReview, `kubectl auth whoami`: Kubernetes 1.28 or later); a bypass records the identity it authenticated, so none was recorded".into());
    };
    let Some(reason) = actor.reason.clone() else {
        return Err(
            "--reason is required: a bypass is recorded with who, why and until when".into(),
        );
    };
    if until <= now {
        return Err(format!("--until {} has passed", Timestamp::new(until)));
    }
    if until - now > bypass_max() {
        return Err(format!(
            "--until {} is more than {} days ahead; a bypass is for an emergency (delete or narrow the freeze instead)",
            Timestamp::new(until),
            bypass_max().num_days()
        ));
    }
    Ok(FreezeBypass {
        by: actor.by.clone(),
        user: Some(user),
        at: Some(Timestamp::new(now)),
        reason,
        until: Timestamp::new(until),
        freeze: freeze.map(String::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        Timestamp::parse(s).unwrap().as_datetime()
    }

    #[test]
    fn a_bypass_records_the_authenticated_identity_or_nothing() {
        let now = t("2026-12-25T10:00:00Z");
        let until = t("2026-12-25T14:00:00Z");
        let mut actor = Actor::new("bob (unverified)", Some("hotfix")).unwrap();
        let e = bypass_record(None, until, &actor, now).unwrap_err();
        assert!(
            e.starts_with("the API server did not say who you are"),
            "{e}"
        );
        actor.by = "alice (INC-7)".into();
        actor.identity = Some("alice".into());
        let b = bypass_record(Some("holidays"), until, &actor, now).unwrap();
        assert_eq!(
            (b.by.as_str(), b.user.as_deref()),
            ("alice (INC-7)", Some("alice"))
        );
        // What the pass reads back is a bypass.
        let p: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "annotations": {FREEZE_BYPASS: encode(&b)}},
            "spec": {"stages": [{"name": "dev"}]}
        }))
        .unwrap();
        assert_eq!(crate::annotations::freeze_bypass(&p), Some(Ok(b)));
    }

    #[test]
    fn selectors_in_kubectl_form_become_label_selectors() {
        let s = label_selector("tier=prod,team in (a,b),!legacy,region").unwrap();
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"matchLabels": {"tier": "prod"}, "matchExpressions": [
                {"key": "team", "operator": "In", "values": ["a", "b"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "region", "operator": "Exists"}]})
        );
        assert!(s.requirements().is_ok());
        assert!(
            label_selector("replicas>3")
                .unwrap_err()
                .contains("cannot compare")
        );
        assert!(label_selector("a in (").is_err());
    }

    #[test]
    fn the_freeze_object_and_what_is_refused_before_writing() {
        let now = t("2026-12-01T00:00:00Z");
        let actor = Actor::new("alice", None).unwrap();
        let new = NewFreeze {
            name: "holidays".into(),
            reason: "Holiday change freeze (CAB-123)".into(),
            selector: Some("tier=prod".into()),
            start: Some(t("2026-12-20T00:00:00Z")),
            end: Some(t("2027-01-04T00:00:00Z")),
        };
        let f = freeze_object(&new, &actor, now).unwrap();
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                "metadata": {"name": "holidays", "annotations": {
                    "promoter.dev/created-by": "{\"by\":\"alice\",\"at\":\"2026-12-01T00:00:00Z\"}"}},
                "spec": {"reason": "Holiday change freeze (CAB-123)",
                    "promotionSelector": {"matchLabels": {"tier": "prod"}},
                    "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}})
        );
        for (change, why) in [
            (
                NewFreeze {
                    reason: " ".into(),
                    ..new.clone()
                },
                "--reason is required",
            ),
            (
                NewFreeze {
                    reason: "x".repeat(513),
                    ..new.clone()
                },
                "at most 512",
            ),
            (
                NewFreeze {
                    selector: Some("a in (".into()),
                    ..new.clone()
                },
                "--selector",
            ),
            (
                NewFreeze {
                    end: new.start,
                    ..new.clone()
                },
                "is not after the start",
            ),
            (
                NewFreeze {
                    start: None,
                    end: Some(t("2026-11-30T00:00:00Z")),
                    ..new.clone()
                },
                "is not after the start",
            ),
        ] {
            let e = freeze_object(&change, &actor, now).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
