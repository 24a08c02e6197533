//! The pass's side of notifications (see `notify`): reading the settings, recording a decision's
//! transitions in the outbox of its guarded record patch, and, once every promotion's writes are
//! done, sending what is due and writing each outbox back.
//!
//! Transitions are the decision's own Events (by reason, table [`TRANSITIONS`]) and the approvals
//! it consumes; nothing is derived again. Nothing here can fail a pass or hold up a promotion: a
//! problem is a warning, sends share one deadline inside the pass deadline, and the outbox is
//! written back only after the promotion's own writes, with a patch that tests the outbox alone.

use super::decision::{Action, Decision, LetThrough, Reason};
use crate::annotations::outbox::{self, Entry, MESSAGE_LIMIT, OUTBOX, cut};
use crate::annotations::{Run, encode};
use crate::api::{ClusterPromotion, Timestamp, revision_id};
use crate::notify::delivery::{self, Attempt, Counts, Due};
use crate::notify::send::{self, Job, Outcome};
use crate::notify::{Config, Location, Transition, body, config};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// The Event reasons that are transitions to notify, and which.
pub const TRANSITIONS: [(Reason, Transition); 13] = [
    (Reason::StageProvisioning, Transition::StageStarted),
    (Reason::StageProvisioned, Transition::StageCompleted),
    (Reason::AwaitingApproval, Transition::AwaitingApproval),
    (Reason::ChecksFailing, Transition::ChecksFailing),
    (Reason::DeploymentFailed, Transition::Failed),
    (Reason::ProgressDeadlineExceeded, Transition::Failed),
    (Reason::Blocked, Transition::Failed),
    (Reason::RollbackStarted, Transition::RolledBack),
    (Reason::RolledBack, Transition::RolledBack),
    (Reason::RollbackDeadlineExceeded, Transition::RollbackFailed),
    (Reason::RolloutComplete, Transition::RolloutCompleted),
    (Reason::Frozen, Transition::Frozen),
    (Reason::FailureBudgetSpent, Transition::FailureBudgetSpent),
];

/// The transition of an Event reason, if it is one. `FreezeBypassed` too.
pub fn transition(reason: &str) -> Option<Transition> {
    if reason == Reason::FreezeBypassed.as_str() {
        return Some(Transition::FreezeBypassed);
    }
    TRANSITIONS
        .iter()
        .find(|(r, _)| r.as_str() == reason)
        .map(|(_, t)| *t)
}

/// The `reason` of the approved transition (no Event: `promoter approve` records its own).
pub const APPROVAL_USED: &str = "ApprovalUsed";

/// One transition a decision makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Noted {
    pub transition: Transition,
    pub reason: String,
    pub stage: Option<String>,
    pub message: String,
    /// Recorded by the record patch itself: deliverable once it is written.
    pub recorded: bool,
}

/// The transitions of a decision, in the order they happened: its Events, and the approvals it
/// lets stages through on.
pub fn transitions(d: &Decision) -> Vec<Noted> {
    let approved = |a: &LetThrough| {
        let by = match &a.approval {
            Some(r) => format!(
                " by {}{}{}",
                r.by,
                r.reason
                    .as_deref()
                    .map(|x| format!(" ({x})"))
                    .unwrap_or_default(),
                r.revision
                    .as_deref()
                    .map(|h| format!(" for revision {}", revision_id(h)))
                    .unwrap_or_default()
            ),
            None => String::new(),
        };
        Noted {
            transition: Transition::Approved,
            reason: APPROVAL_USED.into(),
            stage: Some(a.stage.clone()),
            message: format!("Stage {} approved{by}", a.stage),
            recorded: d.events[a.after.min(d.events.len())..]
                .iter()
                .any(|e| e.recorded),
        }
    };
    let mut out = Vec::new();
    for (i, e) in d.events.iter().enumerate() {
        out.extend(d.approved.iter().filter(|a| a.after == i).map(approved));
        if let Some(t) = transition(&e.reason).filter(|_| !e.owed) {
            out.push(Noted {
                transition: t,
                reason: e.reason.clone(),
                stage: e.stage.clone(),
                message: e.message.clone(),
                recorded: e.recorded,
            });
        }
    }
    out.extend(
        d.approved
            .iter()
            .filter(|a| a.after >= d.events.len())
            .map(approved),
    );
    out
}

/// The outbox a decision records, and what it gives up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub entries: Vec<Entry>,
    /// Recorded transitions dropped (too old, beyond the outbox's bound), with why.
    pub lost: Vec<(Entry, String)>,
}

/// The outbox after this decision, when it has to be written in the decision's guarded record
/// patch (pure): with the decision's transitions added (routed when the rules are known, and
/// only those some rule sends somewhere), and what the observed status confirms marked so, since
/// a status write of this pass may move the status on. Entries the observed status does not
/// confirm are dropped: their status write failed, and this patch, guarded by the
/// resourceVersion, makes sure it never happens later. `None`: nothing to write.
pub fn record(
    p: &ClusterPromotion,
    d: &Decision,
    rules: Option<&Config>,
    now: DateTime<Utc>,
) -> Option<Recorded> {
    let observed = outbox::read(p).unwrap_or_default();
    let observed_token = outbox::status_token(p.status.as_ref());
    let after = d.status.as_ref().or(p.status.as_ref());
    let token = outbox::status_token(after);
    let run = after.and_then(Run::of);
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let max_age = rules.map_or(config::DEFAULT_MAX_AGE, |r| r.max_age);
    let mut changed = false;
    let mut lost = Vec::new();
    let mut entries = Vec::new();
    for mut e in observed {
        let confirmed = e.deliverable(&observed_token);
        if delivery::expired(&e, max_age, now) {
            if confirmed {
                lost.push((e, "older than maxAge".to_string()));
            }
            changed = true;
            continue;
        }
        if !confirmed {
            changed = true;
            continue;
        }
        if !e.confirmed {
            e.confirmed = true;
            changed = true;
        }
        entries.push(e);
    }
    let mut added = false;
    for n in transitions(d) {
        let to = match rules {
            Some(r) => {
                let routes = r.routes(&labels, n.transition);
                if routes.is_empty() {
                    continue;
                }
                Some(
                    routes
                        .into_iter()
                        .map(|r| (r, Default::default()))
                        .collect(),
                )
            }
            None => None,
        };
        let key = outbox::key(
            &uid,
            run.as_ref(),
            n.stage.as_deref(),
            &n.reason,
            &n.message,
            &token,
        );
        if entries.iter().any(|e| e.key == key) {
            continue;
        }
        entries.push(Entry {
            key,
            transition: n.transition.as_str().into(),
            reason: n.reason,
            stage: n.stage,
            message: cut(&n.message, MESSAGE_LIMIT),
            at: Timestamp::new(now),
            revision: run.as_ref().map(|r| revision_id(&r.revision)),
            status: token.clone(),
            confirmed: n.recorded,
            to,
        });
        added = true;
    }
    let records = d.actions.iter().any(|a| matches!(a, Action::Record(_)));
    if !(added || (changed && (d.status.is_some() || records))) {
        return None;
    }
    for e in outbox::bound(&mut entries) {
        lost.push((e, "beyond the outbox's bound".into()));
    }
    Some(Recorded { entries, lost })
}

/// The notification settings of one pass.
pub struct Settings {
    pub location: Location,
    /// None: they could not be read, or are invalid (a warning said why). Transitions are still
    /// recorded, and sent once they can be read.
    pub config: Option<Config>,
    pub endpoints: BTreeMap<String, Result<config::Endpoint, String>>,
}

/// The notification settings as read from the cluster, before anything is concluded from them
/// (the pass warns, `doctor` reports).
pub enum Read {
    /// No ConfigMap at the location: notifications are off.
    Off,
    /// The ConfigMap could not be read (the error).
    Unreadable(String),
    /// Its `config.yaml` is invalid.
    Invalid(Vec<config::Problem>),
    /// Valid rules, and each receiver's endpoint or why it cannot be sent to.
    Ready {
        config: Config,
        endpoints: BTreeMap<String, Result<config::Endpoint, String>>,
    },
}

/// Reads the ConfigMap and the Secret at `location`.
pub async fn read(client: &kube::Client, location: &Location) -> Read {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &location.namespace);
    let text = match configmaps.get_opt(&location.name).await {
        Ok(None) => return Read::Off,
        Err(e) => return Read::Unreadable(crate::cli_error::line_with_hint(&e)),
        Ok(Some(cm)) => cm
            .data
            .and_then(|d| d.get(config::CONFIG_KEY).cloned())
            .unwrap_or_default(),
    };
    let config = match Config::parse(&text) {
        Ok(c) => c,
        Err(problems) => return Read::Invalid(problems),
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &location.namespace);
    let data = match secrets.get_opt(&location.name).await {
        Ok(s) => Ok(s.map(|s| {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect::<BTreeMap<_, _>>()
        })),
        Err(e) => Err(format!(
            "reading the Secret {location} failed: {}",
            crate::cli_error::line_with_hint(&e)
        )),
    };
    let endpoints = match &data {
        Ok(data) => config::resolve(&config, data.as_ref(), &location.to_string()),
        // Every receiver fails alike: the Secret could not be read at all.
        Err(e) => config
            .receivers
            .iter()
            .map(|r| (r.name.clone(), Err(e.clone())))
            .collect(),
    };
    Read::Ready { config, endpoints }
}

/// Reads the settings at `location` for a pass: None when notifications are off (no location,
/// or no ConfigMap there: an outbox left then is dropped, [`drop_outboxes`]); a problem is a
/// warning, never an error of the pass.
pub async fn load(client: &kube::Client, location: Option<&Location>) -> Option<Settings> {
    let location = location?;
    let mut settings = Settings {
        location: location.clone(),
        config: None,
        endpoints: BTreeMap::new(),
    };
    match read(client, location).await {
        Read::Off => {
            tracing::debug!("no ConfigMap {location}: notifications are off");
            return None;
        }
        Read::Unreadable(e) => tracing::warn!(
            "reading the notification settings (ConfigMap {location}) failed: {e}; transitions are recorded and sent once it can be read"
        ),
        Read::Invalid(problems) => tracing::warn!(
            "the notification settings (ConfigMap {location}, key {}) are invalid: {}; transitions are recorded and sent once they are fixed",
            config::CONFIG_KEY,
            config::describe(&problems)
        ),
        Read::Ready { config, endpoints } => {
            settings.config = Some(config);
            settings.endpoints = endpoints;
        }
    }
    Some(settings)
}

/// How long all sends of a pass may take, at most.
pub const SEND_BUDGET: Duration = Duration::from_secs(10);
/// Time kept before the pass deadline for writing the outboxes back.
pub const WRITE_BACK_RESERVE: Duration = Duration::from_secs(2);

/// When a pass's sends must end.
pub fn send_deadline(pass_deadline: Option<tokio::time::Instant>) -> tokio::time::Instant {
    let budget = tokio::time::Instant::now() + SEND_BUDGET;
    match pass_deadline.and_then(|d| d.checked_sub(WRITE_BACK_RESERVE)) {
        Some(d) => d.min(budget),
        None => budget,
    }
}

/// One promotion's outbox as the pass last saw it.
struct Outbox {
    name: String,
    value: String,
    entries: Vec<Entry>,
    due: Due,
}

/// Sends what is due in the outboxes of `promotions` (each as this pass last wrote or read it),
/// until `until`, and writes each outbox back. Figures by promotion name.
pub async fn deliver(
    client: &kube::Client,
    settings: &Settings,
    promotions: &[ClusterPromotion],
    now: DateTime<Utc>,
    until: tokio::time::Instant,
) -> BTreeMap<String, Counts> {
    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    let mut outboxes = Vec::new();
    let mut jobs = Vec::new();
    for p in promotions {
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(value) = crate::annotations::annotation(p, OUTBOX) else {
            continue;
        };
        let entries = match outbox::decode(&value) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(promotion = %name, "{e}; it is replaced by the next transition");
                continue;
            }
        };
        let token = outbox::status_token(p.status.as_ref());
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let due = delivery::due(&entries, &token, settings.config.as_ref(), &labels, now);
        for (key, receiver) in &due.sends {
            let (Some(e), Some(r)) = (
                entries.iter().find(|e| &e.key == key),
                settings.config.as_ref().and_then(|c| c.receiver(receiver)),
            ) else {
                continue;
            };
            jobs.push(Job {
                receiver: receiver.clone(),
                promotion: name.clone(),
                key: key.clone(),
                body: body::render(r.kind, &name, e),
            });
        }
        counts.entry(name.clone()).or_default().pending = delivery::pending(&entries, &token);
        outboxes.push(Outbox {
            name,
            value,
            entries,
            due,
        });
    }
    if outboxes.is_empty() {
        return counts;
    }
    // The client (which loads the system's CA roots) only when something is due: a steady pass
    // over outboxes holding sent entries sends nothing.
    let outcomes = if jobs.is_empty() {
        Vec::new()
    } else {
        let http = crate::http_client::client();
        send::send_all(
            http.as_ref().map_err(String::as_str),
            &settings.endpoints,
            &jobs,
            until,
        )
        .await
    };
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    for o in outboxes {
        let c = counts.entry(o.name.clone()).or_default();
        let mut results = Vec::new();
        for (job, outcome) in jobs
            .iter()
            .zip(&outcomes)
            .filter(|(j, _)| j.promotion == o.name)
        {
            let entry = o.entries.iter().find(|e| e.key == job.key);
            let what = entry.map_or_else(String::new, |e| {
                format!(
                    "{}{}",
                    e.transition,
                    e.stage
                        .as_deref()
                        .map(|s| format!(" (stage {s})"))
                        .unwrap_or_default()
                )
            });
            let result = match outcome {
                Outcome::Sent => {
                    c.sent += 1;
                    Attempt::Sent
                }
                Outcome::Failed(error) => {
                    c.failed += 1;
                    tracing::warn!(
                        promotion = %o.name,
                        receiver = %job.receiver,
                        key = %job.key,
                        "notifying {what} to receiver {} failed: {error}; the next pass retries",
                        job.receiver
                    );
                    Attempt::Failed(error.clone())
                }
                Outcome::NotAttempted => continue,
            };
            results.push(((job.key.clone(), job.receiver.clone()), result));
        }
        for d in o.due.dropped.iter().filter(|d| d.lost) {
            c.dropped += 1;
            tracing::warn!(
                promotion = %o.name,
                key = %d.key,
                "a notification is dropped{}: {}",
                d.receiver
                    .as_deref()
                    .map(|r| format!(" for receiver {r}"))
                    .unwrap_or_default(),
                d.why
            );
        }
        let after = delivery::apply(&o.entries, &o.due, &results);
        if after == o.entries {
            continue;
        }
        match write_back(&api, &o, &results).await {
            Ok(Some(entries)) => {
                let token = promotions
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(o.name.as_str()))
                    .map(|p| outbox::status_token(p.status.as_ref()))
                    .unwrap_or_default();
                c.pending = delivery::pending(&entries, &token);
            }
            Ok(None) => c.pending = 0,
            Err(e) => tracing::warn!(
                promotion = %o.name,
                "writing the outbox back failed: {}; what was sent may be sent again (same idempotency key)",
                crate::cli_error::line_with_hint(&e)
            ),
        }
    }
    counts
}

/// Notifications are off (no ConfigMap at their location): what an outbox still holds, recorded
/// while the settings could not be read or before they were removed, would never be sent, and a
/// pass with notifications off records nothing that would clear it. It is removed, with a patch
/// that tests its value (an outbox another pass changed meanwhile is left to the next pass).
pub async fn drop_outboxes(client: &kube::Client, promotions: &[ClusterPromotion]) {
    let api: Api<ClusterPromotion> = Api::all(client.clone());
    let path = format!("/metadata/annotations/{}", OUTBOX.replace('/', "~1"));
    for p in promotions {
        let Some(value) = crate::annotations::annotation(p, OUTBOX) else {
            continue;
        };
        let name = p.metadata.name.clone().unwrap_or_default();
        let recorded = outbox::decode(&value).map_or(0, |e| e.len());
        let patch: json_patch::Patch = match serde_json::from_value(json!([
            {"op": "test", "path": path, "value": value},
            {"op": "remove", "path": path}
        ])) {
            Ok(patch) => patch,
            Err(e) => {
                tracing::warn!(promotion = %name, "the outbox patch: {e}");
                continue;
            }
        };
        match api
            .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => tracing::info!(
                promotion = %name,
                "notifications are off: the {recorded} transitions left in the outbox are not notified"
            ),
            Err(e) if crate::guard::patch_not_applied(&e) => {}
            Err(e) => tracing::warn!(
                promotion = %name,
                "removing the outbox (notifications are off) failed: {}; the next pass tries again",
                crate::cli_error::line_with_hint(&e)
            ),
        }
    }
}

/// Writes the outbox after sending: a JSON patch that tests the outbox's value (not the
/// resourceVersion: it must not conflict with anything else); when another pass changed the
/// outbox meanwhile, the results are applied again to what it holds now. The outbox written,
/// or None when the promotion or its outbox is gone.
async fn write_back(
    api: &Api<ClusterPromotion>,
    o: &Outbox,
    results: &[((String, String), Attempt)],
) -> kube::Result<Option<Vec<Entry>>> {
    let path = format!("/metadata/annotations/{}", OUTBOX.replace('/', "~1"));
    let (mut value, mut entries) = (o.value.clone(), o.entries.clone());
    for _ in 0..3 {
        let after = delivery::apply(&entries, &o.due, results);
        let write = if after.is_empty() {
            json!({"op": "remove", "path": path})
        } else {
            json!({"op": "replace", "path": path, "value": encode(&after)})
        };
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "test", "path": path, "value": value}, write]))
                .map_err(kube::Error::SerdeError)?;
        match api
            .patch(&o.name, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(Some(after)),
            Err(e) if crate::guard::patch_not_applied(&e) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
            Err(e) => return Err(e),
        }
        let Some(p) = api.get_opt(&o.name).await? else {
            return Ok(None);
        };
        let Some(v) = crate::annotations::annotation(&p, OUTBOX) else {
            return Ok(None);
        };
        entries = outbox::decode(&v).unwrap_or_default();
        value = v;
    }
    Ok(Some(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::Record;
    use crate::api::{ClusterPromotionStatus, StageStatus};
    use chrono::TimeZone;

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 2, 16, 6, 0, 0).unwrap() + chrono::Duration::minutes(min)
    }

    fn status(stage: &str, description: &str) -> ClusterPromotionStatus {
        ClusterPromotionStatus {
            stages: Some(vec![StageStatus {
                name: "dev".into(),
                last_update_reconciled_time: Some(Timestamp::new(t(0))),
                current_status_description: Some(description.into()),
                ..Default::default()
            }]),
            profile_spec_hash: Some("rev".into()),
            stages_hash: Some("st".into()),
            current_stage_name: Some(stage.into()),
            last_promotion_time: None,
        }
    }

    fn promotion(s: Option<ClusterPromotionStatus>) -> ClusterPromotion {
        let mut p: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "uid": "u-1", "labels": {"team": "payments"}},
            "spec": {"stages": [{"name": "dev"}, {"name": "prod"}]}
        }))
        .unwrap();
        p.status = s;
        p
    }

    fn rules() -> Config {
        Config::parse(
            "receivers:\n- {name: slack, type: slack, url: 'http://s/x'}\nrules:\n- receivers: [slack]\n  transitions: [StageCompleted, Approved, StageStarted]\nmaxAge: 1h\n",
        )
        .unwrap()
    }

    /// dev provisioned and staging started, in one decision that writes the status.
    fn advancing(p: &ClusterPromotion) -> Decision {
        let mut d = Decision::new("p");
        d.status = Some(status(
            "prod",
            "Successfully provisioned (2026-02-16T06:05:00Z)",
        ));
        d.event(
            Reason::StageProvisioned,
            Some("dev"),
            "Stage dev provisioned".into(),
        );
        d.event(
            Reason::WindowOpened,
            Some("dev"),
            "Stage dev: promotion window open".into(),
        );
        d.event(
            Reason::StageProvisioning,
            Some("prod"),
            "Provisioning stage prod".into(),
        );
        d.event(
            Reason::ChecksFailing,
            Some("dev"),
            "Stage dev: health checks failing".into(),
        );
        let _ = p;
        d
    }

    #[test]
    fn every_reason_that_is_a_transition_maps_to_one() {
        assert_eq!(
            transition("StageProvisioned"),
            Some(Transition::StageCompleted)
        );
        assert_eq!(transition("Blocked"), Some(Transition::Failed));
        assert_eq!(transition("RolledBack"), Some(Transition::RolledBack));
        assert_eq!(
            transition("FreezeBypassed"),
            Some(Transition::FreezeBypassed)
        );
        for not in [
            "WindowOpened",
            "ChecksPassing",
            "TookOver",
            "FieldsPruned",
            "Approved",
        ] {
            assert_eq!(transition(not), None, "{not}");
        }
        // Every transition but Approved (from consumed approvals) comes from some reason.
        for t in Transition::ALL {
            let from_reason =
                TRANSITIONS.iter().any(|(_, x)| *x == t) || t == Transition::FreezeBypassed;
            assert_eq!(from_reason, t != Transition::Approved, "{t}");
        }
    }

    #[test]
    fn a_decisions_transitions_are_recorded_before_its_status_write() {
        let p = promotion(Some(status(
            "dev",
            "Clusters are being provisioned (2026-02-16T06:00:00Z)",
        )));
        let d = advancing(&p);
        let rec = record(&p, &d, Some(&rules()), t(5)).unwrap();
        let got: Vec<(&str, Option<&str>)> = rec
            .entries
            .iter()
            .map(|e| (e.transition.as_str(), e.stage.as_deref()))
            .collect();
        // ChecksFailing: no rule sends it; WindowOpened: no transition.
        assert_eq!(
            got,
            [
                ("StageCompleted", Some("dev")),
                ("StageStarted", Some("prod"))
            ]
        );
        let token = outbox::status_token(d.status.as_ref());
        for e in &rec.entries {
            assert_eq!(e.status, token);
            assert!(
                !e.confirmed,
                "confirmed only once the status write happened"
            );
            assert_eq!(e.to.as_ref().unwrap().keys().collect::<Vec<_>>(), ["slack"]);
            assert_eq!(e.at, Timestamp::new(t(5)));
            assert_eq!(e.revision.as_deref(), Some(revision_id("rev").as_str()));
        }
        // The same decision computes the same keys; recorded already, nothing is added twice.
        assert_eq!(record(&p, &d, Some(&rules()), t(5)).unwrap(), rec);
        let mut again = p.clone();
        again
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(OUTBOX.into(), outbox::encode(&rec.entries));
        assert!(record(&again, &Decision::new("p"), Some(&rules()), t(5)).is_none());
        // Without the rules every transition is recorded, not yet routed.
        let all = record(&p, &d, None, t(5)).unwrap();
        assert_eq!(all.entries.len(), 3);
        assert!(all.entries.iter().all(|e| e.to.is_none()));
    }

    #[test]
    fn what_the_observed_status_confirms_is_marked_and_the_rest_dropped() {
        let written = status(
            "dev",
            "Clusters are being provisioned (2026-02-16T06:00:00Z)",
        );
        let mut p = promotion(Some(written.clone()));
        let mk = |key: &str, status: &str, confirmed: bool, at: i64| Entry {
            key: key.into(),
            transition: "StageStarted".into(),
            reason: "StageProvisioning".into(),
            stage: Some("dev".into()),
            message: "m".into(),
            at: Timestamp::new(t(at)),
            revision: None,
            status: status.into(),
            confirmed,
            to: None,
        };
        let token = outbox::status_token(Some(&written));
        let observed = vec![
            mk("confirmed-by-status", &token, false, 0),
            mk("status-write-failed", "ffffffffffffffff", false, 0),
            mk("marked", "ffffffffffffffff", true, 0),
            mk("too-old", "ffffffffffffffff", true, -61),
        ];
        p.metadata
            .annotations
            .get_or_insert_default()
            .insert(OUTBOX.into(), outbox::encode(&observed));
        // A decision that writes nothing leaves the outbox to the sending.
        assert!(record(&p, &Decision::new("p"), Some(&rules()), t(0)).is_none());
        // One that writes the status, even without a transition, marks what the status
        // confirmed and drops what it does not.
        let mut quiet = Decision::new("p");
        quiet.status = Some(written.clone());
        let rec = record(&p, &quiet, Some(&rules()), t(0)).unwrap();
        let keys: Vec<&str> = rec.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["confirmed-by-status", "marked"]);
        assert!(rec.entries.iter().all(|e| e.confirmed));
        // One that moves the status on marks what the status confirmed first.
        let d = advancing(&p);
        let rec = record(&p, &d, Some(&rules()), t(0)).unwrap();
        let keys: Vec<(&str, bool)> = rec
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.confirmed))
            .collect();
        assert_eq!(
            &keys[..2],
            [("confirmed-by-status", true), ("marked", true)]
        );
        assert_eq!(keys.len(), 4);
        assert_eq!(rec.lost.len(), 1);
        assert_eq!(rec.lost[0].0.key, "too-old");
    }

    #[test]
    fn a_stage_let_through_on_its_approval_is_the_approved_transition() {
        let p = promotion(Some(status(
            "dev",
            "Paused: Awaiting Manual Approval (2026-02-16T06:00:00Z)",
        )));
        let mut d = Decision::new("p");
        d.status = Some(status(
            "prod",
            "Successfully provisioned (2026-02-16T06:05:00Z)",
        ));
        d.event(
            Reason::StageProvisioned,
            Some("dev"),
            "Stage dev provisioned".into(),
        );
        d.let_through(
            "dev",
            Some(Record {
                by: "alice".into(),
                at: "2026-02-16T06:04:00Z".into(),
                revision: Some("rev".into()),
                reason: Some("CAB-42".into()),
            }),
        );
        d.let_through("hand", None);
        d.event(
            Reason::StageProvisioning,
            Some("prod"),
            "Provisioning stage prod".into(),
        );
        d.let_through("last", None);
        let noted = transitions(&d);
        // In the order they happened, each once; one after the last Event too.
        let order: Vec<(Transition, Option<&str>)> = noted
            .iter()
            .map(|n| (n.transition, n.stage.as_deref()))
            .collect();
        assert_eq!(
            order,
            [
                (Transition::StageCompleted, Some("dev")),
                (Transition::Approved, Some("dev")),
                (Transition::Approved, Some("hand")),
                (Transition::StageStarted, Some("prod")),
                (Transition::Approved, Some("last")),
            ]
        );
        assert_eq!(noted[0].transition, Transition::StageCompleted);
        let noted = &noted[1..];
        assert_eq!(noted[0].transition, Transition::Approved);
        assert_eq!(
            noted[0].message,
            format!(
                "Stage dev approved by alice (CAB-42) for revision {}",
                revision_id("rev")
            )
        );
        assert_eq!(noted[1].message, "Stage hand approved");
        assert_eq!(noted[2].transition, Transition::StageStarted);
        let rec = record(&p, &d, Some(&rules()), t(5)).unwrap();
        assert_eq!(rec.entries[1].transition, "Approved");
        assert_eq!(rec.entries[1].reason, APPROVAL_USED);
    }

    #[test]
    fn a_transition_its_record_patch_records_is_deliverable_once_written() {
        let p = promotion(Some(status(
            "dev",
            "Clusters are being provisioned (2026-02-16T06:00:00Z)",
        )));
        let mut d = Decision::new("p");
        d.status = Some(status(
            "dev",
            "Successfully provisioned (2026-02-16T06:05:00Z)",
        ));
        d.recorded_event(
            Reason::RolloutComplete,
            Some("dev"),
            "ClusterPromotion p complete: stage dev provisioned".into(),
        );
        let rec = record(&p, &d, None, t(5)).unwrap();
        assert!(
            rec.entries[0].confirmed,
            "the completion record stands even if the status write fails"
        );
    }

    /// The server and receiver of [`deliver`]'s tests: the settings at the default place send
    /// to `hook` (accepts) and `down` (answers 500), `maxAge` 1h; promotions `a` and `b` stored
    /// with their statuses and these outboxes, as [`deliver`] is given them.
    struct Delivering {
        server: crate::fake::FakeApiServer,
        receiver: crate::fake::webhook::WebhookReceiver,
        client: kube::Client,
        settings: Settings,
        promotions: Vec<ClusterPromotion>,
    }

    fn entry(key: &str, status: &str, confirmed: bool, at: i64, to: &[&str]) -> Entry {
        Entry {
            key: key.into(),
            transition: "StageStarted".into(),
            reason: "StageProvisioning".into(),
            stage: Some("dev".into()),
            message: format!("Provisioning stage dev ({key})"),
            at: Timestamp::new(t(at)),
            revision: None,
            status: status.into(),
            confirmed,
            to: Some(
                to.iter()
                    .map(|r| (r.to_string(), Default::default()))
                    .collect(),
            ),
        }
    }

    /// A status as the CRD stores it (its hashes are bytes, base64).
    fn stored_status(stage: &str, description: &str) -> ClusterPromotionStatus {
        ClusterPromotionStatus {
            profile_spec_hash: Some("cmV2".into()),
            stages_hash: Some("c3Q=".into()),
            ..status(stage, description)
        }
    }

    fn a_status() -> ClusterPromotionStatus {
        stored_status(
            "dev",
            "Clusters are being provisioned (2026-02-16T06:00:00Z)",
        )
    }

    fn b_status() -> ClusterPromotionStatus {
        stored_status("prod", "Successfully provisioned (2026-02-16T06:05:00Z)")
    }

    async fn delivering(a: &[Entry], b: &[Entry]) -> Delivering {
        use crate::fake::webhook::{Fault, WebhookReceiver};
        let server = crate::fake::FakeApiServer::start_with_sveltos()
            .await
            .unwrap();
        let receiver = WebhookReceiver::start().await.unwrap();
        receiver.inject("/down", Fault::Status(500), None);
        let location = Location::default_location();
        let config = format!(
            "receivers:\n- {{name: hook, type: webhook, url: '{}'}}\n- {{name: down, type: webhook, url: '{}'}}\nrules:\n- receivers: [hook]\nmaxAge: 1h\n",
            receiver.url("/hook"),
            receiver.url("/down")
        );
        server
            .store()
            .seed(
                &crate::fake::ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": location.name, "namespace": location.namespace},
                    "data": {config::CONFIG_KEY: config}}),
            )
            .unwrap();
        for (name, st, entries) in [("a", a_status(), a), ("b", b_status(), b)] {
            server
                .store()
                .seed(
                    &crate::fake::cluster_promotion_type(),
                    json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                        "metadata": {"name": name, "uid": format!("u-{name}"),
                                     "annotations": {OUTBOX: outbox::encode(entries)}},
                        "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]},
                        "status": st}),
                )
                .unwrap();
        }
        let client = server.client().await.unwrap();
        let settings = load(&client, Some(&location)).await.unwrap();
        let api: Api<ClusterPromotion> = Api::all(client.clone());
        let mut promotions = Vec::new();
        for name in ["a", "b"] {
            promotions.push(api.get(name).await.unwrap());
        }
        Delivering {
            server,
            receiver,
            client,
            settings,
            promotions,
        }
    }

    impl Delivering {
        async fn deliver(&self) -> BTreeMap<String, Counts> {
            let until = tokio::time::Instant::now() + Duration::from_secs(10);
            deliver(&self.client, &self.settings, &self.promotions, t(0), until).await
        }

        /// The outbox as stored now: keys, and the receivers each still goes to.
        async fn stored(&self, name: &str) -> Option<Vec<(String, Vec<String>)>> {
            let api: Api<ClusterPromotion> = Api::all(self.client.clone());
            let p = api.get_opt(name).await.unwrap()?;
            crate::annotations::annotation(&p, OUTBOX)?;
            Some(
                outbox::read(&p)
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.key, e.to.unwrap_or_default().into_keys().collect()))
                    .collect(),
            )
        }

        fn sent_to(&self, path: &str) -> usize {
            self.receiver
                .received()
                .iter()
                .filter(|r| r.path == path)
                .count()
        }
    }

    fn owned(v: &[(&str, &[&str])]) -> Option<Vec<(String, Vec<String>)>> {
        Some(
            v.iter()
                .map(|(k, to)| (k.to_string(), to.iter().map(|r| r.to_string()).collect()))
                .collect(),
        )
    }

    /// Each promotion's figures are its own: sent, failed, dropped (too old, receiver gone), and
    /// what is still pending by its own status; each outbox is written back without what was
    /// delivered or dropped, and removed once empty.
    #[tokio::test]
    async fn deliver_sends_what_is_due_and_writes_each_outbox_back() {
        let a_token = outbox::status_token(Some(&a_status()));
        let b_token = outbox::status_token(Some(&b_status()));
        let a = [
            entry("a1", &a_token, true, 0, &["hook", "down"]),
            entry("a-old", &a_token, true, -61, &["hook"]),
            entry("a-gone", &a_token, true, 0, &["gone"]),
            // Not deliverable for `a` (its status write failed); it would be for `b`.
            entry("a-unwritten", &b_token, false, 0, &["hook"]),
        ];
        let b = [entry("b1", &b_token, true, 0, &["hook"])];
        let env = delivering(&a, &b).await;
        let counts = env.deliver().await;
        let figures = |c: &Counts| (c.sent, c.failed, c.dropped, c.pending);
        assert_eq!(figures(&counts["a"]), (1, 1, 2, 1));
        assert_eq!(figures(&counts["b"]), (1, 0, 0, 0));
        assert_eq!(counts.len(), 2);
        assert_eq!((env.sent_to("/hook"), env.sent_to("/down")), (2, 1));
        assert_eq!(
            env.stored("a").await,
            owned(&[("a1", &["down"]), ("a-unwritten", &["hook"])])
        );
        assert_eq!(env.stored("b").await, None, "delivered: the outbox is gone");
    }

    /// A write-back that lost a race to another pass applies the results to the outbox as it is
    /// now; one refused otherwise is not tried again (the next pass sends again, same key); a
    /// promotion gone meanwhile has nothing pending.
    #[tokio::test]
    async fn a_write_back_retries_only_a_lost_race() {
        use crate::fake::{FaultAction, FaultRule, RequestMatcher};
        let a_token = outbox::status_token(Some(&a_status()));
        let seen = [entry("a1", &a_token, true, 0, &["hook"])];
        let now = [
            entry("a1", &a_token, true, 0, &["hook"]),
            entry("a2", &a_token, true, 0, &["hook"]),
        ];
        // Another pass added `a2` after this one read the outbox.
        let env = delivering(&now, &[]).await;
        let mut raced = env.promotions.clone();
        raced[0]
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(OUTBOX.into(), outbox::encode(&seen));
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        let counts = deliver(&env.client, &env.settings, &raced, t(0), until).await;
        assert_eq!((counts["a"].sent, counts["a"].pending), (1, 1));
        assert_eq!(env.stored("a").await, owned(&[("a2", &["hook"])]));

        let env = delivering(&seen, &[]).await;
        env.server.inject(FaultRule::nth(
            RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
            1,
            FaultAction::Status(403),
        ));
        let counts = env.deliver().await;
        assert_eq!((counts["a"].sent, counts["a"].pending), (1, 1));
        assert_eq!(
            env.stored("a").await,
            owned(&[("a1", &["hook"])]),
            "written once, refused"
        );

        let env = delivering(&seen, &[]).await;
        Api::<ClusterPromotion>::all(env.client.clone())
            .delete("a", &Default::default())
            .await
            .unwrap();
        let counts = env.deliver().await;
        assert_eq!((counts["a"].sent, counts["a"].pending), (1, 0));
    }

    /// The budget from the call, or the pass deadline less the write-back reserve when that is
    /// earlier. Bounded by the clock read before and after the call, not by a slack: nothing
    /// here depends on how fast the test runs.
    #[test]
    fn the_send_deadline_is_inside_the_pass_deadline() {
        let now = tokio::time::Instant::now();
        let d = send_deadline(Some(now + Duration::from_secs(40)));
        let after = tokio::time::Instant::now();
        assert!(d >= now + SEND_BUDGET, "the whole budget");
        assert!(d <= after + SEND_BUDGET);
        let before = tokio::time::Instant::now();
        let d = send_deadline(None);
        let after = tokio::time::Instant::now();
        assert!(d >= before + SEND_BUDGET && d <= after + SEND_BUDGET);
        let d = send_deadline(Some(now + Duration::from_secs(5)));
        assert_eq!(d, now + Duration::from_secs(3));
        let d = send_deadline(Some(now + Duration::from_secs(1)));
        assert!(d <= now + Duration::from_secs(1));
    }
}
