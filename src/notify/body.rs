//! What is sent for one transition, per kind of receiver. Every body carries the idempotency key,
//! so a receiver can drop a resend (at-least-once delivery); none carries a cluster name beyond
//! what the message itself says, nor any URL.

use super::config::Kind;
use super::transition::Transition;
use crate::annotations::outbox::Entry;
use serde_json::{Value, json};

/// A request body and its content type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

pub fn render(kind: Kind, promotion: &str, e: &Entry) -> Body {
    let (content_type, value) = match kind {
        Kind::Webhook => ("application/json", webhook(promotion, e)),
        Kind::Slack => ("application/json", slack(promotion, e)),
        Kind::Teams => ("application/json", teams(promotion, e)),
        Kind::CloudEvents => ("application/cloudevents+json", cloudevent(promotion, e)),
    };
    Body {
        content_type,
        bytes: value.to_string().into_bytes(),
    }
}

/// The generic webhook's JSON body (documented in the book's page on notifications).
pub fn webhook(promotion: &str, e: &Entry) -> Value {
    json!({
        "key": e.key,
        "promotion": promotion,
        "stage": e.stage,
        "transition": e.transition,
        "reason": e.reason,
        "message": e.message,
        "at": e.at,
        "revision": e.revision,
    })
}

fn transition(e: &Entry) -> Option<Transition> {
    Transition::parse(&e.transition)
}

fn title(e: &Entry) -> String {
    transition(e).map_or_else(|| e.transition.clone(), |t| t.title().to_string())
}

fn attention(e: &Entry) -> bool {
    transition(e).is_some_and(Transition::attention)
}

/// `revision 1a2b3c4d5e · 2026-02-16T06:28:24Z`
fn context_line(e: &Entry) -> String {
    match &e.revision {
        Some(r) => format!("revision {r} · {}", e.at),
        None => e.at.to_string(),
    }
}

/// Slack's escaping of `&`, `<` and `>` in text (its only control characters).
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Slack incoming webhook message: `text` (notifications, and clients without blocks) and
/// blocks (a section and a context line).
pub fn slack(promotion: &str, e: &Entry) -> Value {
    let mark = if attention(e) { ":warning: " } else { "" };
    let stage = e
        .stage
        .as_deref()
        .map(|s| format!(" · stage `{}`", slack_escape(s)))
        .unwrap_or_default();
    json!({
        "text": slack_escape(&format!("{promotion}: {}", e.message)),
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": format!(
                        "{mark}*{}* · `{}`{stage}\n{}",
                        slack_escape(&title(e)),
                        slack_escape(promotion),
                        slack_escape(&e.message)
                    ),
                },
            },
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": slack_escape(&format!("{} · key {}", context_line(e), e.key))}],
            },
        ],
    })
}

/// A Microsoft Teams message for a Workflows webhook ("Post to a channel when a webhook request is
/// received"): one Adaptive Card (1.4) attachment.
pub fn teams(promotion: &str, e: &Entry) -> Value {
    let mut facts = vec![json!({"title": "Promotion", "value": promotion})];
    if let Some(s) = &e.stage {
        facts.push(json!({"title": "Stage", "value": s}));
    }
    if let Some(r) = &e.revision {
        facts.push(json!({"title": "Revision", "value": r}));
    }
    facts.push(json!({"title": "At", "value": e.at}));
    facts.push(json!({"title": "Key", "value": e.key}));
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": [
                    {
                        "type": "TextBlock",
                        "text": format!("{}: {promotion}", title(e)),
                        "weight": "Bolder",
                        "size": "Medium",
                        "color": if attention(e) { "Attention" } else { "Default" },
                        "wrap": true,
                    },
                    {"type": "TextBlock", "text": e.message, "wrap": true},
                    {"type": "FactSet", "facts": facts},
                ],
            },
        }],
    })
}

/// A CloudEvents 1.0 event in structured mode (`application/cloudevents+json`): `id` is the key,
/// `source` `promoter/<promotion>`, `type` `dev.promoter.<transition>`, `data` the webhook body.
pub fn cloudevent(promotion: &str, e: &Entry) -> Value {
    let mut event = json!({
        "specversion": "1.0",
        "id": e.key,
        "source": format!("promoter/{promotion}"),
        "type": format!("dev.promoter.{}", e.transition),
        "time": e.at,
        "datacontenttype": "application/json",
        "data": webhook(promotion, e),
    });
    if let Some(s) = &e.stage {
        event["subject"] = json!(s);
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;

    fn entry() -> Entry {
        Entry {
            key: "ab".repeat(32),
            transition: "Failed".into(),
            reason: "DeploymentFailed".into(),
            stage: Some("staging".into()),
            message: "Stage staging: cluster <a> & b failed".into(),
            at: Timestamp::parse("2026-02-16T06:28:24Z").unwrap(),
            revision: Some("1a2b3c4d5e".into()),
            status: "0".repeat(16),
            confirmed: true,
            to: None,
        }
    }

    #[test]
    fn the_webhook_body_is_the_documented_one() {
        assert_eq!(
            webhook("payments", &entry()),
            json!({
                "key": "ab".repeat(32),
                "promotion": "payments",
                "stage": "staging",
                "transition": "Failed",
                "reason": "DeploymentFailed",
                "message": "Stage staging: cluster <a> & b failed",
                "at": "2026-02-16T06:28:24Z",
                "revision": "1a2b3c4d5e",
            })
        );
        let b = render(Kind::Webhook, "payments", &entry());
        assert_eq!(b.content_type, "application/json");
        let back: Value = serde_json::from_slice(&b.bytes).unwrap();
        assert_eq!(back, webhook("payments", &entry()));
    }

    #[test]
    fn slack_text_and_blocks_are_escaped() {
        let v = slack("payments", &entry());
        assert_eq!(
            v["text"],
            "payments: Stage staging: cluster &lt;a&gt; &amp; b failed"
        );
        let section = v["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(
            section.starts_with(":warning: *Failed* · `payments` · stage `staging`\n"),
            "{section}"
        );
        assert!(!section.contains('<') && section.contains("&lt;a&gt;"));
        assert_eq!(v["blocks"][0]["text"]["type"], "mrkdwn");
        let context = v["blocks"][1]["elements"][0]["text"].as_str().unwrap();
        assert!(context.contains("revision 1a2b3c4d5e") && context.contains(&"ab".repeat(32)));
        let mut calm = entry();
        calm.transition = "StageCompleted".into();
        assert!(
            slack("p", &calm)["blocks"][0]["text"]["text"]
                .as_str()
                .unwrap()
                .starts_with("*Stage completed*")
        );
    }

    #[test]
    fn teams_gets_one_adaptive_card() {
        let v = teams("payments", &entry());
        assert_eq!(v["type"], "message");
        let a = &v["attachments"][0];
        assert_eq!(a["contentType"], "application/vnd.microsoft.card.adaptive");
        let card = &a["content"];
        assert_eq!(
            (&card["type"], &card["version"]),
            (&json!("AdaptiveCard"), &json!("1.4"))
        );
        assert_eq!(card["body"][0]["text"], "Failed: payments");
        assert_eq!(card["body"][0]["color"], "Attention");
        assert_eq!(
            card["body"][1]["text"],
            "Stage staging: cluster <a> & b failed"
        );
        let facts: Vec<&str> = card["body"][2]["facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["title"].as_str().unwrap())
            .collect();
        assert_eq!(facts, ["Promotion", "Stage", "Revision", "At", "Key"]);
    }

    #[test]
    fn cloudevents_structured_mode() {
        let b = render(Kind::CloudEvents, "payments", &entry());
        assert_eq!(b.content_type, "application/cloudevents+json");
        let v: Value = serde_json::from_slice(&b.bytes).unwrap();
        assert_eq!(v["specversion"], "1.0");
        assert_eq!(v["id"], "ab".repeat(32));
        assert_eq!(v["source"], "promoter/payments");
        assert_eq!(v["type"], "dev.promoter.Failed");
        assert_eq!(v["subject"], "staging");
        assert_eq!(v["time"], "2026-02-16T06:28:24Z");
        assert_eq!(v["data"], webhook("payments", &entry()));
        let mut no_stage = entry();
        no_stage.stage = None;
        assert!(cloudevent("p", &no_stage).get("subject").is_none());
    }

    /// The book's example of each body (`docs/src/notifications.md`) has the shape of what is
    /// sent: the same fields at every level (an object with a `…` field may leave fields out),
    /// lists of the same length.
    #[test]
    fn the_book_s_examples_are_the_bodies() {
        fn same_shape(doc: &Value, sent: &Value, at: &str) {
            match (doc, sent) {
                (Value::Object(d), Value::Object(s)) => {
                    let partial = d.contains_key("…");
                    for k in s.keys() {
                        assert!(partial || d.contains_key(k), "{at}.{k} is not in the book");
                    }
                    for (k, v) in d.iter().filter(|(k, _)| *k != "…") {
                        let sent = s.get(k).unwrap_or_else(|| panic!("{at}.{k} is not sent"));
                        same_shape(v, sent, &format!("{at}.{k}"));
                    }
                }
                (Value::Array(d), Value::Array(s)) => {
                    assert_eq!(d.len(), s.len(), "{at}");
                    for (i, (d, s)) in d.iter().zip(s).enumerate() {
                        same_shape(d, s, &format!("{at}[{i}]"));
                    }
                }
                (Value::Object(_) | Value::Array(_), _)
                | (_, Value::Object(_) | Value::Array(_)) => {
                    panic!("{at}: {doc} in the book, {sent} sent")
                }
                _ => {}
            }
        }
        let page = include_str!("../../docs/src/notifications.md");
        let section = &page[page.find("## Bodies").unwrap()..];
        let example = |kind: &str| -> Value {
            let from = section.find(&format!("* `{kind}`")).unwrap();
            let text = &section[from..];
            let start = text.find("```json").unwrap() + "```json".len();
            let end = start + text[start..].find("```").unwrap();
            serde_json::from_str(&text[start..end]).unwrap_or_else(|e| panic!("{kind}: {e}"))
        };
        let e = entry();
        for (kind, sent) in [
            ("webhook", webhook("payments", &e)),
            ("slack", slack("payments", &e)),
            ("teams", teams("payments", &e)),
            ("cloudevents", cloudevent("payments", &e)),
        ] {
            same_shape(&example(kind), &sent, kind);
        }
    }
}
