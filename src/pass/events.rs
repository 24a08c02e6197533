//! promoter's Kubernetes Events: what each one says, and how it is written.
//!
//! Every transition a pass decides and every action a person takes (`promoter approve`, `pause`,
//! `resume`) is one events.k8s.io/v1 Event about the ClusterPromotion, with a machine-readable
//! [`Reason`] (in `decision`) and, for the transitions upstream reports, upstream's text (reference §3.10:
//! `Stage <s> provisioned`, `Provisioning stage <s> (Restart)`, `Provisioning stage <s>`; upstream
//! gives them all the reason `Sveltos`).
//!
//! The pass is stateless, so an Event is edge-triggered by comparing what the observed status
//! records with what the pass decides: it is emitted only by a pass that writes the status (a
//! transition always changes the stage's description, failureMessage or the stage itself), and
//! only once the status write succeeded (or, its answer lost, the promotion read back shows it).
//! A pass that changes nothing emits nothing; a pass killed between its status write and its
//! Events loses those Events. A pass's Event is named after the transition it announces
//! ([`transition_event_name`]), so that its create is idempotent: one whose answer was lost, or
//! that the server refused for now (429, 5xx), is sent again, and stored once.
//! "Window opened" and "checks failing/passing again" are read from the stage's observed
//! description: `Window Closed: …` (the window gate waited), `Awaiting Health Checks to Pass`
//! (checks failed; upstream also writes it when a provisioned stage's deployment regresses,
//! promoter writes `Clusters are being provisioned` then, so that it never claims failing checks
//! where none fail).

use super::decision::{EventNote, Reason};
use super::stage_status::description_text;
use crate::annotations::{Run, outbox};
use crate::api::ClusterPromotion;
use crate::bounded_text::prefix as truncate_bytes;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};

const CHECKS_FAILING: &str = "Awaiting Health Checks to Pass";
const WINDOW_CLOSED: &str = "Window Closed:";

/// The observed description of a stage, without its timestamp.
fn observed_description<'a>(p: &'a ClusterPromotion, stage: &str) -> Option<&'a str> {
    p.status
        .as_ref()?
        .stages
        .as_ref()?
        .iter()
        .find(|s| s.name == stage)?
        .current_status_description
        .as_deref()
        .map(description_text)
}

/// Whether the observed status shows the stage waiting for its checks to pass.
pub fn checks_were_failing(p: &ClusterPromotion, stage: &str) -> bool {
    observed_description(p, stage) == Some(CHECKS_FAILING)
}

/// Whether the observed status shows the stage waiting for its promotion window.
pub fn window_was_closed(p: &ClusterPromotion, stage: &str) -> bool {
    observed_description(p, stage).is_some_and(|d| d.starts_with(WINDOW_CLOSED))
}

/// events.k8s.io/v1 limits, checked by kube-apiserver on create (kubernetes/kubernetes
/// `pkg/apis/core/validation/events.go` at 04791b4906602ffda5ccf9bc4c84d3329f1d7080,
/// `ValidateEventCreate` and `legacyValidateEvent`): with `eventTime` set, `reportingController`
/// must be a qualified name, `reportingInstance`, `action` and `reason` are required and at most
/// 128 bytes, the note at most 1024 bytes, `type` Normal or Warning, the deprecated
/// fields unset, and `regarding` without a namespace only in `default` or `kube-system`. Anything
/// else is refused with 422, the whole Event.
const NOTE_LIMIT: usize = 1024;
const REASON_LIMIT: usize = 128;
const INSTANCE_LIMIT: usize = 128;
/// A qualified name (`<DNS subdomain prefix>/<name>`).
pub const REPORTING_CONTROLLER: &str = "promoter.dev/promoter";
/// Events about cluster-scoped objects go to `default`, as kubectl and client-go record them.
pub const EVENT_NAMESPACE: &str = "default";

/// `generateName` of a promotion's Events: `<promotion>-`. A prefix must be a valid DNS-1123
/// subdomain once a trailing `-` is masked, so `<promotion>.` is refused with 422; the server cuts
/// the prefix to 58 characters and appends 5 random ones.
fn event_name_prefix(promotion: &str) -> String {
    format!("{promotion}-")
}

/// `reportingInstance`: the pod (CronJob) or function (Lambda) that wrote the Event, else
/// `promoter`.
fn reporting_instance() -> String {
    instance_from(|k| std::env::var(k).ok())
}

/// [`reporting_instance`] from the environment `var` reads (a parameter: tests cannot set the
/// process's own environment safely).
fn instance_from(var: impl Fn(&str) -> Option<String>) -> String {
    let id = ["HOSTNAME", "AWS_LAMBDA_FUNCTION_NAME"]
        .iter()
        .filter_map(|k| var(k))
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "promoter".into());
    truncate_bytes(id.trim(), INSTANCE_LIMIT).to_string()
}

/// The Event of one note about `p`, as a real API server accepts it.
pub fn event(p: &ClusterPromotion, note: &EventNote, action: &str, now: DateTime<Utc>) -> Event {
    event_regarding(&promotion_reference(p), note, action, now)
}

/// The object an Event about `p` regards.
fn promotion_reference(p: &ClusterPromotion) -> ObjectReference {
    ObjectReference {
        api_version: Some("config.projectsveltos.io/v1beta1".into()),
        kind: Some("ClusterPromotion".into()),
        name: p.metadata.name.clone(),
        uid: p.metadata.uid.clone(),
        resource_version: p.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The Event of one note about the object `regarding` (a ClusterPromotion, a PromotionFreeze).
pub fn event_regarding(
    regarding: &ObjectReference,
    note: &EventNote,
    action: &str,
    now: DateTime<Utc>,
) -> Event {
    let name = regarding.name.clone().unwrap_or_default();
    // `eventTime` is a MicroTime: RFC 3339 with microseconds; it is required on this API.
    let event_time = k8s_openapi::jiff::Timestamp::from_microsecond(now.timestamp_micros())
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime);
    Event {
        metadata: kube::core::ObjectMeta {
            generate_name: Some(event_name_prefix(&name)),
            ..Default::default()
        },
        event_time,
        action: Some(action.into()),
        reason: Some(truncate_bytes(&note.reason, REASON_LIMIT).to_string()),
        note: Some(truncate_bytes(&note.message, NOTE_LIMIT).to_string()),
        type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
        reporting_controller: Some(REPORTING_CONTROLLER.into()),
        reporting_instance: Some(reporting_instance()),
        regarding: Some(regarding.clone()),
        ..Default::default()
    }
}

/// The name of the Event of a pass's transition: `<promotion>.<digest>`, the digest of what makes
/// it one transition, as the notification outbox keys it (the promotion's UID, its run, the stage,
/// the reason, the message and the status written with it, [`outbox::key`]). A create sent again
/// after its answer was lost, and two passes announcing the same transition from the same status,
/// name the same Event, which the API server stores once (the second create is refused with 409
/// AlreadyExists). The name is a DNS subdomain of at most 253 characters, as an Event's must be.
pub fn transition_event_name(p: &ClusterPromotion, note: &EventNote) -> String {
    let status = p.status.as_ref();
    let key = outbox::key(
        p.metadata.uid.as_deref().unwrap_or_default(),
        status.and_then(Run::of).as_ref(),
        note.stage.as_deref(),
        &note.reason,
        &note.message,
        &outbox::status_token(status),
    );
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let promotion =
        truncate_bytes(name, NAME_LIMIT - DIGEST_LENGTH - 1).trim_end_matches(['-', '.']);
    format!("{promotion}.{}", &key[..DIGEST_LENGTH])
}

/// An object name's limit (a DNS subdomain), and the digest's share of an Event's name.
const NAME_LIMIT: usize = 253;
const DIGEST_LENGTH: usize = 16;

/// Records the Events of a pass's transitions about `p` (the promotion as the pass's status write
/// returned it), each under its [`transition_event_name`]: a create whose answer was lost or that
/// the server asked to try again is sent again under the same name ([`create_once`]; stored
/// already: 409, counted as recorded). Failing to record one is a warning, never a failed pass.
/// Returns how many are stored.
pub async fn emit_transitions(
    client: &kube::Client,
    p: &ClusterPromotion,
    notes: &[EventNote],
    now: DateTime<Utc>,
) -> usize {
    let events: Api<Event> = Api::namespaced(client.clone(), EVENT_NAMESPACE);
    let regarding = promotion_reference(p);
    let mut recorded = 0;
    for note in notes {
        let mut event = event_regarding(&regarding, note, "ClusterPromotion", now);
        event.metadata.generate_name = None;
        event.metadata.name = Some(transition_event_name(p, note));
        match create_once(&events, &event).await {
            Ok(()) => recorded += 1,
            Err(e) => warn_not_recorded(regarding.name.as_deref(), note, &e),
        }
    }
    recorded
}

/// Creates `event`, named after its content, until the server stores it or already has it (409
/// AlreadyExists). Such a create is idempotent, so it is retried as a read is (the reads' attempts
/// and backoff, never past the pass's deadline): after a lost answer, and on the statuses that
/// say "try again" (429, 5xx). The pass is stateless: an Event it fails to store here is never
/// announced by a later pass, whose status already shows the transition.
async fn create_once(events: &Api<Event>, event: &Event) -> Result<(), kube::Error> {
    use crate::client::retry::{ATTEMPTS, deadline, jittered_backoff, retryable_status};
    let mut attempt = 0;
    loop {
        let error = match events.create(&PostParams::default(), event).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(e) => e,
        };
        let again = crate::guard::outcome_unknown(&error)
            || matches!(&error, kube::Error::Api(s)
                if http::StatusCode::from_u16(s.code).is_ok_and(retryable_status));
        attempt += 1;
        let wait = jittered_backoff(attempt - 1);
        let past_deadline = deadline().is_some_and(|d| tokio::time::Instant::now() + wait >= d);
        if !again || attempt >= ATTEMPTS || past_deadline {
            return Err(error);
        }
        tracing::debug!(event = event.metadata.name.as_deref().unwrap_or_default(),
            error = %crate::cli_error::line(&error), "creating the event again");
        tokio::time::sleep(wait).await;
    }
}

fn warn_not_recorded(object: Option<&str>, note: &EventNote, e: &kube::Error) {
    tracing::warn!(
        object = object.unwrap_or_default(),
        reason = %note.reason,
        error = %crate::cli_error::line_with_hint(e),
        "could not record the event {:?}",
        note.message
    );
}

/// Records the notes about `p`; failing to record one is a warning, never a failed pass or command.
/// Returns how many were recorded.
pub async fn emit(
    client: &kube::Client,
    p: &ClusterPromotion,
    notes: &[EventNote],
    action: &str,
    now: DateTime<Utc>,
) -> usize {
    emit_regarding(client, &promotion_reference(p), notes, action, now).await
}

/// [`emit`] about any object.
pub async fn emit_regarding(
    client: &kube::Client,
    regarding: &ObjectReference,
    notes: &[EventNote],
    action: &str,
    now: DateTime<Utc>,
) -> usize {
    let events: Api<Event> = Api::namespaced(client.clone(), EVENT_NAMESPACE);
    let mut recorded = 0;
    for note in notes {
        match events
            .create(
                &PostParams::default(),
                &event_regarding(regarding, note, action, now),
            )
            .await
        {
            Ok(_) => recorded += 1,
            Err(e) => warn_not_recorded(regarding.name.as_deref(), note, &e),
        }
    }
    recorded
}

/// One Event for what a person did (`approve`, `pause`, `resume`).
pub async fn emit_action(
    client: &kube::Client,
    p: &ClusterPromotion,
    reason: Reason,
    message: String,
    now: DateTime<Utc>,
) -> bool {
    emit(client, p, &[reason.note(message)], reason.action(), now).await == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterPromotionStatus, StageStatus};

    fn promotion() -> ClusterPromotion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p", "uid": "u-1", "resourceVersion": "7"}, "spec": {"stages": [{"name": "prod"}]}
        }))
        .unwrap()
    }

    #[test]
    fn event_names_and_notes_are_what_a_server_accepts() {
        let prefix = event_name_prefix("blog.kyverno");
        assert!(
            crate::fake::meta::dns1123_subdomain(&format!("{}a", &prefix[..prefix.len() - 1]))
                .is_empty()
        );
        let long = "é".repeat(NOTE_LIMIT);
        let cut = truncate_bytes(&long, NOTE_LIMIT);
        assert!(cut.len() <= NOTE_LIMIT && cut.len() > NOTE_LIMIT - 2);
        assert_eq!(truncate_bytes("short", NOTE_LIMIT), "short");
        assert!(crate::fake::meta::qualified_name(REPORTING_CONTROLLER).is_empty());
    }

    #[test]
    fn an_event_has_the_shape_the_api_server_requires() {
        let p = promotion();
        let now = DateTime::parse_from_rfc3339("2026-02-16T06:28:24.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        let e = event(
            &p,
            &Reason::ChecksFailing.note("x".repeat(2000)),
            "ClusterPromotion",
            now,
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["eventTime"], "2026-02-16T06:28:24.123456Z");
        assert_eq!(v["type"], "Warning");
        assert_eq!(v["reason"], "ChecksFailing");
        let note = v["note"].as_str().unwrap();
        assert!(
            note.len() <= NOTE_LIMIT && note.len() > NOTE_LIMIT - 8,
            "{}",
            note.len()
        );
        assert!(note.ends_with("more bytes)"), "a cut note says so: {note}");
        assert_eq!(
            v["regarding"],
            serde_json::json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
                "name": "p", "uid": "u-1", "resourceVersion": "7"
            }),
            "kubectl describe finds the Events of the promotion by these"
        );
        assert_eq!(v["metadata"]["generateName"], "p-");
        assert_eq!(v["action"], "ClusterPromotion");
        assert_eq!(v["reportingController"], REPORTING_CONTROLLER);
        assert_eq!(
            v["reportingInstance"],
            instance_from(|k| std::env::var(k).ok())
        );
        let mut obj = v.clone();
        obj["metadata"]["namespace"] = EVENT_NAMESPACE.into();
        assert!(crate::fake::meta::validate_event(&obj, true).is_empty());
        for r in [Reason::Approved, Reason::StageProvisioning, Reason::Blocked] {
            assert!(r.as_str().len() <= REASON_LIMIT && r.action().len() <= 128);
        }
    }

    #[test]
    fn the_reporting_instance_is_the_pod_or_the_function_else_promoter() {
        let env = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        assert_eq!(instance_from(env(&[])), "promoter");
        assert_eq!(
            instance_from(env(&[("HOSTNAME", " promoter-29-abcde\n")])),
            "promoter-29-abcde"
        );
        assert_eq!(
            instance_from(env(&[
                ("HOSTNAME", "pod"),
                ("AWS_LAMBDA_FUNCTION_NAME", "fn")
            ])),
            "pod"
        );
        assert_eq!(
            instance_from(env(&[
                ("HOSTNAME", " "),
                ("AWS_LAMBDA_FUNCTION_NAME", "promoter-fn")
            ])),
            "promoter-fn",
            "a blank HOSTNAME is no name"
        );
        let long = "h".repeat(200);
        assert_eq!(
            instance_from(env(&[("HOSTNAME", &long)])).len(),
            INSTANCE_LIMIT
        );
    }

    /// What `emit` and `emit_action` return is what the server stored; a refused Event is
    /// counted out, never an error.
    #[tokio::test]
    async fn emit_counts_the_events_the_server_stored() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let server = FakeApiServer::start_with_sveltos().await.unwrap();
        let client = server.client().await.unwrap();
        let refuse_next = || {
            server.inject(FaultRule::nth(
                RequestMatcher::verbs(&["create"]).resource("events"),
                1,
                FaultAction::Status(403),
            ))
        };
        let p = promotion();
        let now = Utc::now();
        let notes = [
            Reason::StageProvisioning.note("Provisioning stage prod".into()),
            Reason::StageProvisioned.note("Stage prod provisioned".into()),
        ];
        assert_eq!(emit(&client, &p, &notes, "ClusterPromotion", now).await, 2);
        refuse_next();
        assert_eq!(emit(&client, &p, &notes, "ClusterPromotion", now).await, 1);
        assert!(emit_action(&client, &p, Reason::Paused, "paused".into(), now).await);
        refuse_next();
        assert!(!emit_action(&client, &p, Reason::Resumed, "resumed".into(), now).await);
        let events: Api<Event> = Api::namespaced(client, EVENT_NAMESPACE);
        let stored = events.list(&Default::default()).await.unwrap();
        let mut reasons: Vec<&str> = stored
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("p"))
            .filter_map(|e| e.reason.as_deref())
            .collect();
        reasons.sort();
        assert_eq!(
            reasons,
            [
                "Paused",
                "StageProvisioned",
                "StageProvisioned",
                "StageProvisioning"
            ]
        );
    }

    /// A transition's Event is named by its content: the same transition (same status) the same
    /// name, another status another name, always a valid name of at most 253 characters.
    #[test]
    fn a_transition_event_is_named_by_its_content() {
        let note = Reason::StageProvisioned.note("Stage prod provisioned".into());
        let mut p = promotion();
        let name = transition_event_name(&p, &note);
        assert!(
            name.starts_with("p.") && name.len() == 2 + DIGEST_LENGTH,
            "{name}"
        );
        assert_eq!(transition_event_name(&p, &note), name);
        p.status = Some(ClusterPromotionStatus {
            current_stage_name: Some("prod".into()),
            ..Default::default()
        });
        assert_ne!(transition_event_name(&p, &note), name, "another status");
        let other = Reason::StageProvisioning.note("Provisioning stage prod".into());
        assert_ne!(
            transition_event_name(&p, &other),
            transition_event_name(&p, &note)
        );
        for long in [
            format!("{}-{}", "a".repeat(235), "b".repeat(17)),
            format!("{}.{}", "a".repeat(235), "b".repeat(17)),
            "c".repeat(253),
        ] {
            p.metadata.name = Some(long.clone());
            let name = transition_event_name(&p, &note);
            assert!(name.len() <= NAME_LIMIT, "{long}: {}", name.len());
            assert!(
                crate::fake::meta::dns1123_subdomain(&name).is_empty(),
                "{name}"
            );
        }
    }

    /// A transition's Event is stored once: sent again under its name after a lost answer, whether
    /// the server had stored it or not, and when a concurrent pass announced it too.
    #[tokio::test]
    async fn a_transition_event_is_stored_once_whatever_became_of_its_answer() {
        use crate::fake::{FakeApiServer, FaultAction, FaultRule, RequestMatcher};
        let p = promotion();
        let notes = [
            Reason::StageProvisioning.note("Provisioning stage prod".into()),
            Reason::StageProvisioned.note("Stage prod provisioned".into()),
        ];
        for fault in [
            None,
            Some(FaultAction::ResetAfter),
            Some(FaultAction::ResetBefore),
        ] {
            let server = FakeApiServer::start_with_sveltos().await.unwrap();
            let client = server.client().await.unwrap();
            if let Some(f) = &fault {
                server.inject(FaultRule::nth(
                    RequestMatcher::verbs(&["create"]).resource("events"),
                    1,
                    f.clone(),
                ));
            }
            let now = Utc::now();
            assert_eq!(
                emit_transitions(&client, &p, &notes, now).await,
                2,
                "{fault:?}"
            );
            assert_eq!(
                emit_transitions(&client, &p, &notes, now).await,
                2,
                "{fault:?}: stored already"
            );
            let events: Api<Event> = Api::namespaced(client, EVENT_NAMESPACE);
            let mut reasons: Vec<String> = events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|e| e.reason)
                .collect();
            reasons.sort();
            assert_eq!(
                reasons,
                ["StageProvisioned", "StageProvisioning"],
                "{fault:?}"
            );
        }
    }

    #[test]
    fn transitions_are_read_from_the_observed_description() {
        let mut p = promotion();
        let with = |d: &str| ClusterPromotionStatus {
            stages: Some(vec![StageStatus {
                name: "prod".into(),
                current_status_description: Some(format!("{d} (2026-02-16T06:28:24Z)")),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert!(!checks_were_failing(&p, "prod") && !window_was_closed(&p, "prod"));
        p.status = Some(with("Awaiting Health Checks to Pass"));
        assert!(checks_were_failing(&p, "prod") && !checks_were_failing(&p, "dev"));
        p.status = Some(with(
            "Window Closed: Waiting for Next Schedule (2026-02-16T07:00:00Z).",
        ));
        assert!(window_was_closed(&p, "prod") && !checks_were_failing(&p, "prod"));
    }
}
