//! `promoter dashboard` over HTTP, as a browser speaks to it, against the fake API server through
//! kube's real client: every endpoint, its refusals (wrong Host, foreign Origin, no session, no
//! token, read-only, RBAC), that the pages show what `status` and `explain` compute, that each
//! action writes what its command writes, live updates, and that no credential reaches a page.

mod common;

use chrono::{DateTime, Utc};
use common::{Env, SEED_FLEET, completed_before_a_break, events_of};
use promoter::dashboard::hub::Clock;
use promoter::dashboard::{Dashboard, Options};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The test's virtual clock, as the dashboard's.
struct EnvClock(Arc<Mutex<DateTime<Utc>>>);

impl Clock for EnvClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
    fn rate(&self) -> (f64, bool) {
        (1.0, false)
    }
}

async fn serve_as(env: &Env, client: kube::Client, read_only: bool) -> Dashboard {
    let mut options = Options::new("cluster");
    options.read_only = read_only;
    // Refreshed by the test (wake) and after actions: nothing depends on a timer.
    options.refresh = Some(Duration::from_secs(3600));
    promoter::dashboard::start(client, Arc::new(EnvClock(env.now.clone())), None, options)
        .await
        .unwrap()
}

async fn serve(env: &Env) -> Dashboard {
    serve_as(env, env.client.clone(), false).await
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request, with exactly the headers given (Host too, unless `host` is None: then
/// the served address).
async fn raw(
    d: &Dashboard,
    method: &str,
    path: &str,
    host: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(d.addr).await.unwrap();
    let served = d.addr.to_string();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        host.unwrap_or(&served)
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut out))
        .await
        .expect("an answer")
        .unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A GET as the browser sends it once the session is open.
async fn get(d: &Dashboard, path: &str) -> Reply {
    raw(d, "GET", path, None, &[("Cookie", &d.cookie)], None).await
}

/// A POST as the page's script sends it.
async fn post(d: &Dashboard, path: &str, body: &Value) -> Reply {
    let origin = format!("http://{}", d.addr);
    raw(
        d,
        "POST",
        path,
        None,
        &[
            ("Cookie", &d.cookie),
            ("Origin", &origin),
            ("X-Promoter-Token", &d.csrf),
        ],
        Some(&body.to_string()),
    )
    .await
}

/// Preview, then carry out what the preview said (as a person confirming the dialog).
async fn confirm(d: &Dashboard, request: Value) -> (Value, Reply) {
    let preview = post(d, "/api/preview", &request).await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    let preview = preview.json();
    let mut act = request.clone();
    act["fingerprint"] = preview["fingerprint"].clone();
    let done = post(d, "/api/act", &act).await;
    (preview, done)
}

/// A waiting manual stage: the blog's manual rollout, passes until staging awaits approval.
async fn awaiting_approval() -> (Env, String) {
    let env = Env::new(SEED_FLEET).await;
    let name = env.apply_example("blog-kyverno-manual.yaml")[0].clone();
    for _ in 0..30 {
        env.tick().await;
        if env
            .description(&name, "staging")
            .is_some_and(|d| d.contains("Awaiting Manual Approval"))
        {
            return (env, name);
        }
    }
    panic!("staging of {name} never awaited approval");
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_wrong_host_foreign_origin_no_session_no_token() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    let origin = format!("http://{}", d.addr);
    let approve =
        json!({"action": "approve", "promotion": name, "stage": "staging", "fingerprint": "x"})
            .to_string();
    // DNS rebinding: a page of another site whose name resolves to 127.0.0.1.
    for (method, body) in [("GET", None), ("POST", Some(approve.as_str()))] {
        let r = raw(
            &d,
            method,
            "/",
            Some(&format!("evil.example:{}", d.addr.port())),
            &[
                ("Cookie", &d.cookie),
                ("Origin", &origin),
                ("X-Promoter-Token", &d.csrf),
            ],
            body,
        )
        .await;
        assert_eq!(r.status, 403, "{method}: {}", r.body);
        assert!(r.body.contains("Host"), "{}", r.body);
    }
    // A cross-site request, and a change that does not say where it comes from.
    let r = raw(
        &d,
        "POST",
        "/api/act",
        None,
        &[
            ("Cookie", &d.cookie),
            ("Origin", "http://evil.example"),
            ("X-Promoter-Token", &d.csrf),
        ],
        Some(&approve),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = raw(
        &d,
        "POST",
        "/api/act",
        None,
        &[("Cookie", &d.cookie), ("X-Promoter-Token", &d.csrf)],
        Some(&approve),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // No session: nothing but the login and the assets.
    for path in [
        "/",
        "/freezes",
        &format!("/promotions/{name}"),
        "/api/overview",
        "/events?view=overview",
    ] {
        let r = raw(&d, "GET", path, None, &[], None).await;
        assert_eq!(r.status, 401, "{path}: {}", r.body);
        assert!(r.body.contains("open the URL"), "{}", r.body);
    }
    let wrong = raw(
        &d,
        "GET",
        "/",
        None,
        &[("Cookie", &format!("{}x", d.cookie))],
        None,
    )
    .await;
    assert_eq!(wrong.status, 401);
    // A change without the page's token (the session cookie alone is not enough).
    let r = raw(
        &d,
        "POST",
        "/api/act",
        None,
        &[("Cookie", &d.cookie), ("Origin", &origin)],
        Some(&approve),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("token"), "{}", r.body);
    let r = raw(
        &d,
        "POST",
        "/api/act",
        None,
        &[
            ("Cookie", &d.cookie),
            ("Origin", &origin),
            ("X-Promoter-Token", "0000"),
        ],
        Some(&approve),
    )
    .await;
    assert_eq!(r.status, 403);
    // Nothing of it was written.
    let p = env.promotion(&name).unwrap();
    assert!(promoter::annotations::approval(&p, "staging").is_none());
    // The login: a wrong token opens nothing; the printed URL opens the session.
    let r = raw(&d, "GET", "/login?token=nope", None, &[], None).await;
    assert_eq!(r.status, 401);
    assert!(r.header("set-cookie").is_none());
    let login = d
        .login_url
        .trim_start_matches(&format!("http://{}", d.addr));
    let r = raw(&d, "GET", login, None, &[], None).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/"));
    let cookie = r.header("set-cookie").unwrap();
    assert!(cookie.starts_with(&format!("{};", d.cookie)), "{cookie}");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    // Also through `localhost`, the other name of loopback.
    let r = raw(
        &d,
        "GET",
        "/",
        Some(&format!("localhost:{}", d.addr.port())),
        &[("Cookie", &d.cookie)],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    // The assets need no session; every answer, refusals and 404s included, carries the policy.
    for (path, status) in [
        ("/assets/app.js", 200),
        ("/assets/app.css", 200),
        ("/assets/nope.js", 404),
        ("/", 401),
    ] {
        let r = raw(&d, "GET", path, None, &[], None).await;
        assert_eq!(r.status, status, "{path}");
        assert_eq!(
            r.header("content-security-policy"),
            Some(promoter::dashboard::security::CSP),
            "{path}"
        );
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
    }
    let r = get(&d, "/no/such/page").await;
    assert_eq!(r.status, 404);
    assert!(r.header("content-security-policy").is_some());
    assert_eq!(get(&d, "/").await.header("cache-control"), Some("no-store"));
    // No inline script or style anywhere: the policy would block it.
    let page = get(&d, "/").await.body;
    assert!(
        !page.contains("<script>") && !page.contains(" style="),
        "{page}"
    );
    assert!(!page.contains(" on"), "no inline event handlers");
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_show_what_status_and_explain_compute() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    // The overview's model is `status`' row, for the same read.
    let overview = get(&d, "/api/overview").await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    let row = &overview.json()["rows"][0]["promotion"];
    let observation =
        promoter::ops::load::status_world(&env.client, None, env.now(), chrono_tz::UTC)
            .await
            .unwrap();
    let p = env.promotion(&name).unwrap();
    let status =
        promoter::ops::inspect::status_row(&p, &observation.world, env.now(), chrono_tz::UTC);
    assert_eq!(row["status"], serde_json::to_value(&status).unwrap());
    assert_eq!(row["status"]["phase"], "AwaitingApproval");
    assert_eq!(
        row["stages"],
        json!([
            {"name": "dev", "progress": "passed", "description": "Successfully provisioned"},
            {"name": "staging", "progress": {"current": "AwaitingApproval"}, "description": "Paused: Awaiting Manual Approval"},
            {"name": "production", "progress": "notReached"}
        ])
    );
    assert_eq!(row["offers"]["approve"], json!([["staging", false]]));
    // The HTML: each stage with its symbol and words, the Approve button on the waiting stage.
    let html = get(&d, "/").await.body;
    assert!(html.contains(&format!("id=\"row-{name}\"")), "{html}");
    assert!(html.contains("data-phase=\"AwaitingApproval\""));
    assert!(html.contains("awaiting approval"));
    assert!(html.contains("class=\"st st-passed\""));
    assert!(html.contains(&format!(
        "data-action=\"approve\" data-promotion=\"{name}\" data-stage=\"staging\""
    )));
    // The promotion's page: `explain`'s model, and the clusters with the revision they run.
    let detail = get(&d, &format!("/api/promotions/{name}")).await;
    assert_eq!(detail.status, 200, "{}", detail.body);
    let detail = detail.json();
    let mut world = promoter::ops::load::status_world(&env.client, None, env.now(), chrono_tz::UTC)
        .await
        .unwrap()
        .world;
    promoter::ops::load::explain_world(&env.client, &p, &mut world, env.now(), chrono_tz::UTC)
        .await
        .unwrap();
    let explanation = promoter::ops::explain::explain(&p, &world, env.now(), chrono_tz::UTC, None);
    assert_eq!(
        detail["explanation"],
        serde_json::to_value(&explanation).unwrap()
    );
    let revision = promoter::api::revision_id(explanation.revision.as_deref().unwrap());
    assert_eq!(
        detail["clusterRevisions"][0],
        json!([{"runs": revision}, {"runs": revision}])
    );
    // Production is not reached: its cluster runs nothing of this promotion yet.
    assert_eq!(detail["clusterRevisions"][2], json!(["nothing"]));
    let events = detail["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["reason"] == "AwaitingApproval"),
        "{events:?}"
    );
    let page = get(&d, &format!("/promotions/{name}")).await;
    assert_eq!(page.status, 200);
    for text in [
        "dev/dev01",
        &format!("✓ {revision}"),
        "Stage staging awaits manual approval",
        "No completed, stored revision to roll back to.",
        "Next pass (a prediction)",
    ] {
        assert!(page.body.contains(text), "{text} not in {}", page.body);
    }
    let missing = get(&d, "/promotions/no-such-promotion").await;
    assert_eq!(missing.status, 404);
    assert!(
        missing
            .body
            .contains("No ClusterPromotion no-such-promotion.")
    );
    assert_eq!(get(&d, "/api/promotions/nope").await.status, 404);
    // The freezes page, empty, with its forms.
    let freezes = get(&d, "/freezes").await.body;
    assert!(freezes.contains("No PromotionFreeze."), "{freezes}");
    assert!(freezes.contains("id=\"freeze-create\""));
}

/// Issue 30's freezes as the pass reads them: a freeze promoter cannot decode is shown, Active and
/// failing closed, holding the promotion; a hand-written bypass without the authenticated user is
/// shown as ignored, with why.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_freeze_and_an_ignored_bypass_are_shown_as_the_pass_reads_them() {
    let (env, name) = awaiting_approval().await;
    env.server
        .store()
        .seed_unvalidated(
            &promoter::fake::promotion_freeze_type(),
            json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
                   "metadata": {"name": "broken"},
                   "spec": {"reason": "INC-9", "end": "next tuesday"}}),
        )
        .unwrap();
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": {
            "promoter.dev/freeze-bypass": r#"{"by":"mallory","reason":"x","until":"2099-01-01T00:00:00Z"}"#}}})),
    )
    .await
    .unwrap();
    let d = serve(&env).await;
    let page = get(&d, "/freezes").await.body;
    assert!(page.contains("id=\"freeze-broken\""), "{page}");
    assert!(page.contains("unreadable: holds (fails closed)"), "{page}");
    assert!(page.contains("it cannot be read (spec.end: "), "{page}");
    assert!(
        page.contains(&format!("<a href=\"/promotions/{name}\">{name}</a>")),
        "it holds the promotion: {page}"
    );
    assert!(
        page.contains("promoter.dev/freeze-bypass is ignored: it does not name the identity the API server authenticated"),
        "{page}"
    );
    // Deleting it is offered, and the preview reads it as the pass does.
    let (preview, done) = confirm(&d, json!({"action": "freeze-delete", "name": "broken"})).await;
    assert!(
        preview["summary"][0].as_str().unwrap().ends_with(&name),
        "{preview}"
    );
    assert_eq!(done.status, 200, "{}", done.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_is_the_commands_guarded_patch_identity_record_and_event() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    let request = json!({"action": "approve", "promotion": name, "stage": "staging", "reason": "CAB-42", "by": "change board"});
    let (preview, done) = confirm(&d, request.clone()).await;
    let revision = promoter::api::revision_id(
        env.promotion(&name)
            .unwrap()
            .status
            .unwrap()
            .profile_spec_hash
            .as_deref()
            .unwrap(),
    );
    assert_eq!(preview["title"], "Approve staging?");
    assert_eq!(preview["identity"], "admin (change board)");
    let changes: Vec<String> = serde_json::from_value(preview["changes"].clone()).unwrap();
    assert!(
        changes[1].contains("only if the promotion is unchanged since it was read"),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"  only if spec.stages[1].name is still staging".to_string()),
        "{changes:?}"
    );
    assert!(
        changes.contains(&"  set spec.stages[1].trigger.manual.approved to true".to_string()),
        "{changes:?}"
    );
    assert!(
        changes
            .iter()
            .any(|c| c.contains("annotation promoter.dev/approval.staging")),
        "{changes:?}"
    );
    assert_eq!(
        changes.last().unwrap(),
        &format!("an Event Approved about {name} (namespace default)")
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(
        done.json()["message"],
        format!(
            "approved stage staging of {name} for revision {}",
            promoter::api::revision_id(
                &env.promotion(&name)
                    .unwrap()
                    .status
                    .unwrap()
                    .profile_spec_hash
                    .unwrap()
            )
        )
    );
    // What `promoter approve` writes: approved, the record (authenticated identity, note,
    // reason, revision), and the Event.
    let p = env.promotion(&name).unwrap();
    assert!(
        p.spec.stages[1]
            .trigger
            .as_ref()
            .unwrap()
            .manual
            .as_ref()
            .unwrap()
            .is_approved()
    );
    let record = promoter::annotations::approval(&p, "staging").unwrap();
    assert_eq!(record.by, "admin (change board)");
    assert_eq!(record.reason.as_deref(), Some("CAB-42"));
    assert_eq!(
        record.at,
        env.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let events = events_of(&env, &name).await;
    let approved = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Approved"))
        .unwrap();
    assert_eq!(
        approved.note.as_deref(),
        Some(
            format!(
                "Stage staging approved by admin (change board) for revision {}: CAB-42",
                promoter::api::revision_id(
                    p.status
                        .as_ref()
                        .unwrap()
                        .profile_spec_hash
                        .as_deref()
                        .unwrap()
                )
            )
            .as_str()
        )
    );
    assert!(revision.len() == 10);
    // The page sees it at once (an action wakes the read), and the next pass lets staging through.
    let row = get(&d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
    assert!(
        row["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("approved by admin (change board)"),
        "{row}"
    );
    for _ in 0..3 {
        env.tick().await;
    }
    assert_ne!(env.current_stage(&name).as_deref(), Some("staging"));
    // A second approval of the same stage is no longer offered, and one confirmed against a
    // stale preview is refused with the new preview.
    let stale = post(
        &d,
        "/api/act",
        &json!({"action": "pause", "promotion": name, "fingerprint": "not what it would do"}),
    )
    .await;
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(stale.json()["preview"]["title"], format!("Pause {name}?"));
    assert!(promoter::annotations::paused(&env.promotion(&name).unwrap()).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_resume_abort_freeze_bypass_write_what_their_commands_write() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    let (_, done) = confirm(
        &d,
        json!({"action": "pause", "promotion": name, "reason": "INC-7"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let paused = promoter::annotations::paused(&env.promotion(&name).unwrap()).unwrap();
    assert_eq!(paused.by, "admin");
    assert_eq!(paused.reason.as_deref(), Some("INC-7"));
    // Paused again: the command would write nothing, and the preview says so.
    let again = post(
        &d,
        "/api/preview",
        &json!({"action": "pause", "promotion": name}),
    )
    .await
    .json();
    assert_eq!(again["nothing"], true);
    assert!(
        again["summary"][0]
            .as_str()
            .unwrap()
            .contains("is already paused by admin")
    );
    let (preview, done) = confirm(&d, json!({"action": "resume", "promotion": name})).await;
    assert!(
        preview["summary"][1]
            .as_str()
            .unwrap()
            .starts_with("• paused by admin since"),
        "{preview}"
    );
    let said = done.json()["message"].as_str().unwrap().to_string();
    assert!(
        said.starts_with(&format!("resumed {name}: paused by admin since ")),
        "{said}"
    );
    assert!(promoter::annotations::paused(&env.promotion(&name).unwrap()).is_none());
    let (_, done) = confirm(
        &d,
        json!({"action": "abort", "promotion": name, "reason": "bad"}),
    )
    .await;
    assert!(
        done.json()["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("aborted {name} at stage staging"))
    );
    assert!(promoter::annotations::aborted(&env.promotion(&name).unwrap()).is_some());
    // Freezes: create (the author recorded), bypass (recorded on the promotion), delete.
    let (preview, done) = confirm(
        &d,
        json!({"action": "freeze-create", "name": "holidays", "freezeReason": "CAB-123", "selector": "", "end": "2d"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(preview["summary"][1], format!("Selects now: {name}"));
    let freezes: kube::Api<promoter::api::PromotionFreeze> = kube::Api::all(env.client.clone());
    let f = freezes.get("holidays").await.unwrap();
    assert_eq!(f.spec.reason, "CAB-123");
    assert!(
        f.metadata.annotations.unwrap()["promoter.dev/created-by"].contains("\"by\":\"admin\"")
    );
    // A bypass needs a reason, as `freeze bypass --reason` does.
    let no_reason = post(
        &d,
        "/api/preview",
        &json!({"action": "bypass", "promotion": name, "until": "4h"}),
    )
    .await;
    assert_eq!(no_reason.status, 200);
    assert_eq!(no_reason.json()["reasonRequired"], true);
    let (_, refused) = confirm(
        &d,
        json!({"action": "bypass", "promotion": name, "until": "4h", "freeze": "holidays"}),
    )
    .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("--reason is required")
    );
    let (_, done) = confirm(
        &d,
        json!({"action": "bypass", "promotion": name, "until": "4h", "freeze": "holidays", "reason": "hotfix"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let bypass = promoter::annotations::freeze_bypass(&env.promotion(&name).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            bypass.by.as_str(),
            bypass.user.as_deref(),
            bypass.reason.as_str(),
            bypass.freeze.as_deref()
        ),
        ("admin", Some("admin"), "hotfix", Some("holidays"))
    );
    let page = get(&d, "/freezes").await.body;
    assert!(page.contains("id=\"freeze-holidays\""), "{page}");
    assert!(page.contains("for freeze holidays: hotfix"), "{page}");
    let (preview, done) = confirm(&d, json!({"action": "freeze-delete", "name": "holidays"})).await;
    assert_eq!(
        preview["changes"][0],
        "delete PromotionFreeze holidays (CAB-123)"
    );
    assert!(
        done.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("deleted freeze holidays")
    );
    assert!(freezes.get_opt("holidays").await.unwrap().is_none());
    // A freeze that does not exist: kubectl's NotFound line.
    let gone = post(
        &d,
        "/api/preview",
        &json!({"action": "freeze-delete", "name": "holidays"}),
    )
    .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert!(
        gone.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Error from server (NotFound)")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_names_the_revision_it_restores_and_records_it() {
    let mut env = Env::new(common::DEV_STAGING_PROD).await;
    let name = completed_before_a_break(&mut env, "rollback-on-deadline.yaml", "3.6.0").await;
    let good =
        promoter::annotations::Run::of(env.promotion(&name).unwrap().status.as_ref().unwrap())
            .unwrap();
    let mut p = env.promotion(&name).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("3.6.0");
    env.apply_promotion(&p);
    for _ in 0..3 {
        env.tick().await;
    }
    let d = serve(&env).await;
    let detail = get(&d, &format!("/api/promotions/{name}")).await.json();
    let good_id = promoter::api::revision_id(&good.revision);
    assert_eq!(detail["restore"]["id"], good_id, "{detail}");
    assert_eq!(detail["offers"]["rollback"], true);
    let page = get(&d, &format!("/promotions/{name}")).await.body;
    assert!(
        page.contains(&format!(
            "A rollback would restore revision <code>{good_id}</code>"
        )),
        "{page}"
    );
    let (preview, done) = confirm(
        &d,
        json!({"action": "rollback", "promotion": name, "reason": "INC-9", "order": "all-at-once"}),
    )
    .await;
    assert_eq!(
        preview["title"],
        format!("Roll back {name} to revision {good_id}?")
    );
    assert_eq!(preview["revisions"][0][0], good_id);
    assert_eq!(done.status, 200, "{}", done.body);
    let recorded = promoter::annotations::rollback(&env.promotion(&name).unwrap()).unwrap();
    assert_eq!(recorded.to, good.revision);
    assert_eq!(recorded.order.as_str(), "all-at-once");
    assert_eq!(
        (recorded.by.as_str(), recorded.reason.as_deref()),
        ("admin", Some("INC-9"))
    );
    let events = events_of(&env, &name).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("RollbackRequested"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_offers_and_accepts_no_action() {
    let (env, name) = awaiting_approval().await;
    let d = serve_as(&env, env.client.clone(), true).await;
    for path in [
        "/".to_string(),
        format!("/promotions/{name}"),
        "/freezes".into(),
    ] {
        let page = get(&d, &path).await.body;
        assert!(!page.contains("data-action"), "{path}: {page}");
        assert!(page.contains("read-only"));
    }
    for path in ["/api/preview", "/api/act"] {
        let r = post(
            &d,
            path,
            &json!({"action": "approve", "promotion": name, "stage": "staging"}),
        )
        .await;
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(r.body.contains("read-only"));
    }
    assert!(promoter::annotations::approval(&env.promotion(&name).unwrap(), "staging").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_rbac_refuses_shows_the_api_servers_reason() {
    let (env, name) = awaiting_approval().await;
    // A viewer: may read everything, may not patch.
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "viewer"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]
    }))
    .unwrap();
    env.server
        .set_authorizer(Arc::new(promoter::fake::rbac::Rbac::bind(
            "viewer",
            &role,
            &["admin"],
        )));
    let viewer = env.server.client_as("viewer").await.unwrap();
    let d = serve_as(&env, viewer, false).await;
    let (preview, done) = confirm(
        &d,
        json!({"action": "approve", "promotion": name, "stage": "staging"}),
    )
    .await;
    assert_eq!(preview["identity"], "viewer");
    assert_eq!(done.status, 403, "{}", done.body);
    let error = done.json()["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with(&format!("Error from server (Forbidden): clusterpromotions.config.projectsveltos.io \"{name}\" is forbidden: User \"viewer\" cannot patch resource \"clusterpromotions\"")),
        "{error}"
    );
    assert!(promoter::annotations::approval(&env.promotion(&name).unwrap(), "staging").is_none());
}

/// Reads server-sent events until one named `event` whose data contains `needle`.
async fn until_event(
    lines: &mut tokio::io::Lines<BufReader<tokio::net::TcpStream>>,
    event: &str,
    needle: &str,
) -> String {
    let mut current = String::new();
    let wait = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(e) = line.strip_prefix("event: ") {
                current = e.to_string();
            } else if let Some(data) = line.strip_prefix("data: ")
                && current == event
                && data.contains(needle)
            {
                return data.to_string();
            }
        }
        panic!("the stream ended before a {event} event with {needle}");
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("no {event} event with {needle}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn live_updates_reach_open_pages_and_a_quiet_pass_costs_nothing() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    let first = get(&d, "/api/overview").await.json()["seq"]
        .as_u64()
        .unwrap();
    // A pass that changes nothing: the next read publishes nothing.
    let writes = env.server.writes();
    env.pass().await;
    assert_eq!(env.server.writes(), writes, "the pass was not a quiet one");
    d.hub.refresh().await;
    d.hub.refresh().await;
    assert_eq!(
        d.hub.snapshot().seq,
        first,
        "a quiet pass published a snapshot"
    );
    // An open overview gets the changed row, and only it.
    let mut s = tokio::net::TcpStream::connect(d.addr).await.unwrap();
    s.write_all(
        format!(
            "GET /events?view=overview&since={first} HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nAccept: text/event-stream\r\n\r\n",
            d.addr, d.cookie
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut lines = BufReader::new(s).lines();
    until_event(&mut lines, "clock", "rate").await;
    // Someone approves with kubectl; the page shows it without a reload.
    env.json_patch(
        &name,
        json!([{"op": "add", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]),
    )
    .await;
    d.hub.wake();
    let data = until_event(&mut lines, "row", &format!("row-{name}")).await;
    let row: Value = serde_json::from_str(&data).unwrap();
    assert!(
        row["html"]
            .as_str()
            .unwrap()
            .contains("approved; not yet acted on by a pass"),
        "{row}"
    );
    // A promotion's open page is kept up to date too, by the same one read.
    let detail = get(&d, &format!("/api/promotions/{name}")).await.json();
    assert_eq!(
        detail["explanation"]["stages"][1]["approval"]["approved"],
        true
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_credential_reaches_a_page() {
    let (env, name) = awaiting_approval().await;
    // Secrets a cluster holds: a managed cluster's kubeconfig, the notification receivers' URLs.
    let marker = "s3cr3t-token-MARKER";
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    for (secret_name, key) in [
        ("dev01-sveltos-kubeconfig", "kubeconfig"),
        ("promoter-notifications", "slack-url"),
    ] {
        env.server
            .store()
            .seed(
                &promoter::fake::secret_type(),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name, "namespace": "dev"},
                       "data": {key: b64(&format!("users: [{{token: {marker}}}] https://hooks.slack.com/services/{marker}"))}}),
            )
            .unwrap();
    }
    let d = serve(&env).await;
    let mut bodies = Vec::new();
    for path in [
        "/".to_string(),
        "/api/overview".into(),
        format!("/promotions/{name}"),
        format!("/api/promotions/{name}"),
        "/freezes".into(),
        "/assets/app.js".into(),
    ] {
        let r = get(&d, &path).await;
        assert_eq!(r.status, 200, "{path}");
        bodies.push((path, r.body));
    }
    let preview = post(
        &d,
        "/api/preview",
        &json!({"action": "approve", "promotion": name, "stage": "staging"}),
    )
    .await;
    bodies.push(("/api/preview".into(), preview.body));
    let session = d.cookie.split_once('=').unwrap().1.to_string();
    for (path, body) in &bodies {
        assert!(!body.contains(marker), "{path} shows a Secret's content");
        assert!(!body.contains(&session), "{path} shows the session's token");
        assert!(
            !body.contains(&b64(marker)[..12]),
            "{path} shows a Secret's data"
        );
    }
}

/// The ClusterPromotions of a file of this repository.
fn promotions_of(file: &str) -> Vec<promoter::api::ClusterPromotion> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    promoter::manifest::load_file(&path)
        .unwrap()
        .iter()
        .filter_map(|d| d.promotion().cloned())
        .collect()
}

/// `simulate FILE --fleet examples/fleets/blog-lab.yaml --dashboard` with these scripted freezes
/// and failures, its clock paused: only the page moves it.
async fn simulated(
    file: &str,
    freezes: &[&str],
    failures: &[&str],
) -> (Dashboard, Arc<promoter::dashboard::sim::SimClock>) {
    simulated_with(promotions_of(file), freezes, failures, &[]).await
}

/// The same with these promotions, and new revisions `(FILE, OFFSET)` (`--update FILE@OFFSET`).
async fn simulated_with(
    promotions: Vec<promoter::api::ClusterPromotion>,
    freezes: &[&str],
    failures: &[&str],
    updates: &[(&str, &str)],
) -> (Dashboard, Arc<promoter::dashboard::sim::SimClock>) {
    use promoter::dashboard::sim::SimClock;
    let path = |p: &str| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(p);
    let fleet = promoter::sim::Fleet::parse(
        &std::fs::read_to_string(path("examples/fleets/blog-lab.yaml")).unwrap(),
        "blog-lab.yaml",
    )
    .unwrap();
    let start = common::start_time();
    let opts = promoter::sim::SimOptions {
        start,
        tick: chrono::Duration::minutes(1),
        until: chrono::Duration::days(1),
        approvals: Vec::new(),
        failures: failures
            .iter()
            .map(|f| promoter::sim::ScriptedFailure::parse(f).unwrap())
            .collect(),
        updates: updates
            .iter()
            .map(|(file, at)| promoter::sim::ScriptedUpdate {
                promotions: promotions_of(file),
                at: promoter::api::flag_duration::parse(at).unwrap(),
            })
            .collect(),
        freezes: freezes
            .iter()
            .map(|f| promoter::sim::ScriptedFreeze::parse(f).unwrap())
            .collect(),
        default_tz: chrono_tz::UTC,
        sveltos_clock_skew: chrono::Duration::zero(),
        progress: false,
    };
    let sim = promoter::sim::Simulation::start(
        promoter::sim::SimWorld {
            promotions,
            fleet,
            objects: Vec::new(),
        },
        promoter::sim::SimHealth::FleetObjects,
        &opts,
    )
    .await
    .unwrap();
    let client = sim.client().clone();
    let clock = Arc::new(SimClock::new(start, 60.0, false));
    let d = promoter::dashboard::start(
        client,
        clock.clone(),
        Some((sim, clock.clone())),
        Options::new("simulated fleet"),
    )
    .await
    .unwrap();
    (d, clock)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_simulation_is_played_from_the_page() {
    let start = common::start_time();
    let (d, clock) = simulated("examples/blog-kyverno-manual.yaml", &[], &[]).await;
    let page = get(&d, "/").await.body;
    assert!(page.contains("data-sim=\"play\""), "{page}");
    let step = post(&d, "/api/sim", &json!({"op": "step"})).await;
    assert_eq!(step.status, 200, "{}", step.body);
    assert_eq!(
        step.json()["message"],
        "ran the pass at 2026-02-16T06:00:00Z"
    );
    assert_eq!(clock.now(), start, "paused: the clock stays at the pass");
    let row = get(&d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
    assert_eq!(row["status"]["stage"], "dev");
    // Skipping goes from change to change until staging waits for a person; then there is
    // nothing to skip to.
    let mut said = String::new();
    for _ in 0..40 {
        let r = post(&d, "/api/sim", &json!({"op": "skip"})).await.json();
        said = r["message"].as_str().unwrap().to_string();
        if said.starts_with("nothing will change") {
            break;
        }
    }
    assert!(
        said.starts_with("nothing will change without outside help"),
        "{said}"
    );
    let row = get(&d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
    assert_eq!(row["status"]["phase"], "AwaitingApproval", "{row}");
    // Approve in the page, as a person; the next passes let it continue to the end.
    let name = row["status"]["name"].as_str().unwrap().to_string();
    let (_, done) = confirm(
        &d,
        json!({"action": "approve", "promotion": name, "stage": "staging"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    for _ in 0..40 {
        let r = post(&d, "/api/sim", &json!({"op": "skip"})).await.json();
        if r["message"]
            .as_str()
            .unwrap()
            .starts_with("nothing will change")
        {
            break;
        }
    }
    let row = get(&d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
    assert_eq!(row["status"]["phase"], "Complete", "{row}");
    // Play, speed, pause; a bad request says what is accepted.
    assert_eq!(
        post(&d, "/api/sim", &json!({"op": "speed", "rate": 600}))
            .await
            .json()["message"],
        "600× real time"
    );
    assert_eq!(
        post(&d, "/api/sim", &json!({"op": "play"})).await.json()["message"],
        "playing"
    );
    assert!(clock.rate().1);
    assert_eq!(
        post(&d, "/api/sim", &json!({"op": "pause"})).await.json()["message"],
        "paused"
    );
    assert_eq!(
        post(&d, "/api/sim", &json!({"op": "rewind"})).await.status,
        400
    );
    // Not a simulation: no clock to play.
    let (env, _) = awaiting_approval().await;
    let live = serve(&env).await;
    assert_eq!(
        post(&live, "/api/sim", &json!({"op": "play"})).await.status,
        404
    );
    assert!(!get(&live, "/").await.body.contains("data-sim"));
}

/// What a person sees change on the overview and the freezes page: each promotion's stage, phase
/// and end of its wait, each freeze's phase.
async fn seen(d: &Dashboard) -> Vec<String> {
    let rows = get(d, "/api/overview").await.json()["rows"].clone();
    let mut out: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = &r["promotion"]["status"];
            format!("{} {} {} {}", s["name"], s["stage"], s["phase"], s["until"])
        })
        .collect();
    let freezes = get(d, "/freezes").await.body;
    for phase in ["Scheduled", "Active", "Expired"] {
        if freezes.contains(&format!("class=\"badge fz-{}\"", phase.to_lowercase())) {
            out.push(format!("freeze {phase}"));
        }
    }
    out
}

/// "Skip to next change" goes to the next time something a person sees changes, and to each one:
/// a soak's end, a deployment done (not a minute per click while clusters deploy), a scheduled
/// freeze's start and end, a progress deadline.
#[tokio::test(flavor = "multi_thread")]
async fn skip_goes_to_each_next_change_a_person_sees() {
    use promoter::dashboard::hub::Clock;
    let (d, clock) = simulated(
        "examples/rollback-on-deadline.yaml",
        &["20m..2h=holidays"],
        &["prod"],
    )
    .await;
    let start = common::start_time();
    let mut landed = Vec::new();
    let mut before = seen(&d).await;
    for _ in 0..30 {
        let r = post(&d, "/api/sim", &json!({"op": "skip"})).await.json();
        let said = r["message"].as_str().unwrap().to_string();
        let at = (clock.now() - start).num_minutes();
        let now = seen(&d).await;
        eprintln!("+{at}m {said}: {now:?}");
        if said.starts_with("nothing will change") {
            break;
        }
        assert_ne!(now, before, "+{at}m: {said}, and nothing changed");
        landed.push(at);
        before = now;
    }
    // Dev and staging deploy (3m) and soak (2m); production fails from the start: Failing until
    // its deadline (2h after 06:10); the freeze from +20m to +2h, held nothing in between (the
    // last stage starts nothing).
    assert_eq!(landed, [0, 3, 5, 8, 10, 20, 120, 130]);
    assert!(before[0].contains("\"Failed\""), "{before:?}");
    // The promotion's page says when the simulation's last pass ran, kept live, and how often
    // they run (there is no CronJob to ask).
    let page = get(&d, "/promotions/kyverno-rollout-guarded").await.body;
    assert!(
        page.contains("data-since=\"2026-02-16T08:11:00Z\"")
            && page.contains("(the simulation, a pass every 1m)"),
        "{page}"
    );
}

/// Issue 46 §4: a freeze over a stage that awaits its approval. Both are true, and both are shown:
/// `status` (its phase, `also`, its message), the overview (both badges, the phase filter finds it
/// under either, the stage's words) and the Approve button, which still works: the approval lets
/// the stage through once the freeze is gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_freeze_over_a_stage_awaiting_approval_shows_both_and_approve_stays_on_offer() {
    let (env, name) = awaiting_approval().await;
    // A freeze of every promotion, as `promoter freeze create holidays --reason CAB-9` makes it.
    let freeze = json!({"apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
        "metadata": {"name": "holidays"}, "spec": {"reason": "CAB-9"}});
    env.server
        .store()
        .seed(&promoter::fake::promotion_freeze_type(), freeze)
        .unwrap();
    env.tick().await;
    let (code, out, err) = common::promoter(&env, &["status", &name, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["phase"], "Frozen", "{status:#}");
    assert_eq!(status["also"], json!(["AwaitingApproval"]), "{status:#}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("Frozen: freeze holidays: CAB-9 (until lifted)")
            && message.contains("stage staging awaits approval"),
        "{message}"
    );
    let d = serve(&env).await;
    let row = get(&d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
    assert_eq!(
        row["status"]["also"],
        json!(["AwaitingApproval"]),
        "{row:#}"
    );
    let page = get(&d, "/").await.body;
    let tr = page
        .split("<tr ")
        .find(|t| t.contains(&format!("id=\"row-{name}\"")))
        .unwrap();
    assert!(
        tr.contains("data-phases=\"Frozen AwaitingApproval\""),
        "{tr}"
    );
    assert!(
        tr.contains("❄</span> frozen</span>") && tr.contains("⚑</span> awaiting approval</span>"),
        "both badges: {tr}"
    );
    assert!(tr.contains("frozen · awaiting approval"), "{tr}");
    assert!(
        tr.contains(&format!(
            "data-action=\"approve\" data-promotion=\"{name}\" data-stage=\"staging\""
        )),
        "the Approve button stays: {tr}"
    );
    let (preview, done) = confirm(
        &d,
        json!({"action": "approve", "promotion": name, "stage": "staging"}),
    )
    .await;
    assert_eq!(done.status, 200, "{preview:#} {}", done.body);
    env.tick().await;
    assert_eq!(env.current_stage(&name).as_deref(), Some("staging"), "held");
    let (code, out, err) = common::promoter(&env, &["freeze", "delete", "holidays"]);
    assert_eq!(code, 0, "{out}{err}");
    env.tick().await;
    assert_eq!(
        env.current_stage(&name).as_deref(),
        Some("production"),
        "the approval given during the freeze let it through"
    );
}

/// Issue 46 §4: a pause over a failing deployment says both (the pause's description replaces
/// what the stage said; what a pass would decide without the pause is the other fact).
#[tokio::test(flavor = "multi_thread")]
async fn a_pause_over_a_failing_deployment_says_both() {
    let mut env = Env::new(SEED_FLEET).await;
    env.addon
        .failing
        .insert("staging/staging".into(), common::start_time());
    let name = env.apply_example("blog-kyverno-auto.yaml")[0].clone();
    for _ in 0..30 {
        env.tick().await;
        if env
            .description(&name, "staging")
            .is_some_and(|d| d.starts_with("Deployment Fail"))
        {
            break;
        }
    }
    let (code, out, err) = common::promoter(&env, &["pause", &name]);
    assert_eq!(code, 0, "{out}{err}");
    env.tick().await;
    let (_, out, _) = common::promoter(&env, &["status", &name, "-o", "json"]);
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["phase"], "Paused", "{status:#}");
    let also = status["also"][0].as_str().unwrap_or_default();
    assert!(also == "Failed" || also == "Failing", "{status:#}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("paused by ")
            && message.contains("stage staging: deployment fail")
            && message.contains("cluster staging/staging"),
        "{message}"
    );
    let d = serve(&env).await;
    let page = get(&d, "/").await.body;
    assert!(
        page.contains(&format!("data-phases=\"Paused {also}\"")),
        "{page}"
    );
}

/// The words a page shows, without its markup (attributes are for the script, not for people).
fn words_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Issue 46 §5: pages speak words, not the models' internal names (`notCreated`, `Yes`, a
/// phase's enum name), and count in the singular when there is one.
#[tokio::test(flavor = "multi_thread")]
async fn pages_say_words_not_internal_names_and_count_one_as_one() {
    let (env, name) = awaiting_approval().await;
    let d = serve(&env).await;
    let overview = words_of(&get(&d, "/").await.body);
    assert!(
        overview.contains("1 promotion ") && !overview.contains("1 promotions"),
        "{overview}"
    );
    let page = words_of(&get(&d, &format!("/promotions/{name}")).await.body);
    for internal in [
        "notCreated",
        "earlierRevision",
        "beingDeleted",
        "provisioned: Yes",
        // The prediction's phase (Events keep their reasons, as kubectl shows them).
        "AwaitingApproval: ",
    ] {
        assert!(!page.contains(internal), "{internal} in {page}");
    }
    assert!(
        page.contains("not created") && page.contains("applied, current revision"),
        "{page}"
    );
    assert!(page.contains("awaiting approval: "), "{page}");
}

/// Skips until the first promotion's phase is `phase`; its row.
async fn skip_to_phase(d: &Dashboard, phase: &str) -> Value {
    for _ in 0..60 {
        let row = get(d, "/api/overview").await.json()["rows"][0]["promotion"].clone();
        if row["status"]["phase"] == phase {
            return row;
        }
        let r = post(d, "/api/sim", &json!({"op": "skip"})).await.json();
        assert!(
            !r["message"]
                .as_str()
                .unwrap()
                .starts_with("nothing will change"),
            "never {phase}: {row:#}"
        );
    }
    panic!("never {phase}");
}

/// Issue 46 §4, the other pairs: a rollback under an active freeze says the freeze (which does not
/// hold a rollback); a stage that awaits its approval under a progress-deadline policy has met its
/// deadline, and nothing says a deadline runs (the Next column, explain).
#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_under_a_freeze_and_a_deadline_policy_under_an_approval_say_what_holds() {
    // 3.6.0 fails on prod from +20m; production's 2h deadline falls at +2h30m, inside the freeze.
    let (d, _clock) = simulated_with(
        promotions_of("examples/rollback-on-deadline.yaml"),
        &["2h..5h=holidays"],
        &["prod@20m"],
        &[("examples/rollback-on-deadline-v2.yaml", "20m")],
    )
    .await;
    let row = skip_to_phase(&d, "RollingBack").await;
    let message = row["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("rolling back to revision ")
            && message.ends_with(
                "; freeze simulated-freeze-1 is active (until 2026-02-16T11:00:00Z): it does not hold a rollback"
            ),
        "{message}"
    );
    assert_eq!(
        row["status"]["prediction"]["nextCheckFor"],
        "rollback deadline"
    );
    let page = get(&d, "/").await.body;
    assert!(page.contains("rollback deadline <time"), "{page}");
    drop(d);
    // A manual stage under a progress-deadline policy, awaiting its approval.
    let mut manual = promotions_of("examples/blog-kyverno-manual.yaml");
    manual[0]
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("promoter.dev/progress-deadline".into(), "30m".into());
    let (d, _clock) = simulated_with(manual, &[], &[], &[]).await;
    let row = skip_to_phase(&d, "AwaitingApproval").await;
    assert_eq!(row["status"]["also"], Value::Null, "{row:#}");
    assert_eq!(
        row["status"]["prediction"]["nextCheck"],
        Value::Null,
        "{row:#}"
    );
    let detail = get(&d, "/api/promotions/kyverno-prog-rollout-man")
        .await
        .json();
    assert_eq!(detail["explanation"]["deadline"], Value::Null, "{detail:#}");
    let page = get(&d, "/").await.body;
    let next = page.split("<td class=\"next\">").nth(1).unwrap();
    assert!(next.starts_with("-</td>"), "{next}");
}

/// Issue 46 §2: a stage that selects no cluster showed `Clusters (0)` and passed. The promotion's
/// page says it where the stage's clusters would be, before the stage is reached (the hold to
/// come, with the selector and the nearest labels) and while it holds the rollout; the overview's
/// row is Blocked with `status`' message.
#[tokio::test(flavor = "multi_thread")]
async fn a_stage_that_selects_no_cluster_is_said_on_the_overview_and_the_promotion_page() {
    let env = Env::new(&[
        ("dev", "dev01", "dev"),
        ("staging", "staging", "staging"),
        ("prod", "prod", "prod"),
    ])
    .await;
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/blog-kyverno-auto.yaml"),
    )
    .unwrap()
    .replace("env: staging", "env: stagin");
    let docs = promoter::manifest::load_str(&text, "typo.yaml").unwrap();
    let promotion = docs[0].promotion().unwrap().clone();
    let name = promotion.metadata.name.clone().unwrap();
    env.apply_promotion(&promotion);
    env.tick().await;
    let d = serve(&env).await;
    let why = "stage staging selects no cluster: clusterSelector env=stagin: none of the 3 clusters of the inventory matches (nearest labels: env=staging (1 cluster))";
    // Before the stage is reached: the hold to come.
    let page = words_of(&get(&d, &format!("/promotions/{name}")).await.body);
    assert!(
        page.contains(&format!(
            "Clusters: none selected  selects no cluster: holds the rollout when reached: {why}"
        )),
        "{page}"
    );
    for _ in 0..15 {
        env.tick().await;
    }
    d.hub.refresh().await;
    let overview = get(&d, "/api/overview").await.json();
    let status = &overview["rows"][0]["promotion"]["status"];
    assert_eq!(status["phase"], "Blocked", "{status}");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(why)),
        "{status}"
    );
    assert!(
        words_of(&get(&d, "/").await.body).contains(why),
        "the overview's Message column"
    );
    let page = words_of(&get(&d, &format!("/promotions/{name}")).await.body);
    assert!(
        page.contains("Clusters: none selected") && !page.contains("Clusters (0)"),
        "{page}"
    );
    assert!(page.contains(why), "{page}");
}

/// Waits (at most 30 s) until `done` holds, checking every 50 ms.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A promotion created through the API under another name, as `kubectl apply` would.
async fn create_elsewhere(env: &Env, name: &str) {
    let mut p = common::example("blog-kyverno-manual.yaml").remove(0);
    p.metadata.name = Some(name.into());
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(env.client.clone());
    api.create(&Default::default(), &p).await.unwrap();
}

/// The dashboard reads through watches: once each collection is listed, its reads come from the
/// watch's cache; a watch the server ends is resumed from its last resourceVersion (no list), and
/// only a `410` (the version compacted away) makes the collection be listed again.
#[tokio::test(flavor = "multi_thread")]
async fn the_dashboards_watches_resume_and_list_again_only_on_410() {
    let env = Env::lab().await;
    env.apply_example("blog-kyverno-manual.yaml");
    let d = serve(&env).await;
    let count = |verb: &str| {
        env.server
            .requests()
            .iter()
            .filter(|r| r.verb == verb)
            .count()
    };
    common::refresh_until_watched(&env, &d).await;
    let (lists, watches) = (count("list"), count("watch"));
    assert!(watches > 0);

    env.server.end_watches();
    eventually("every watch is made again", || {
        count("watch") >= 2 * watches
    })
    .await;
    create_elsewhere(&env, "after-the-watches-ended").await;
    eventually(
        "the promotion created after the watches ended shows",
        || {
            d.hub
                .snapshot()
                .rows
                .contains_key("after-the-watches-ended")
        },
    )
    .await;
    assert_eq!(count("list"), lists, "a resumed watch lists nothing");

    env.server.compact();
    env.server.end_watches();
    eventually("each collection is listed again after its 410", || {
        count("list") >= lists + watches
    })
    .await;
    create_elsewhere(&env, "after-the-compaction").await;
    eventually("the promotion created after the compaction shows", || {
        d.hub.snapshot().rows.contains_key("after-the-compaction")
    })
    .await;
    assert_eq!(
        count("list"),
        lists + watches,
        "one list per collection, only after the 410"
    );
}

/// A collection the server refuses to list (promoter's own CRDs not installed) is not listed again
/// by every read: its refusal is answered for a while, so an idle dashboard still lists nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_collection_the_server_refuses_is_not_listed_by_every_read() {
    let env = Env::without_own_crds(&[("dev", "dev01", "dev")]).await;
    env.apply_example("blog-kyverno-manual.yaml");
    let d = serve(&env).await;
    common::refresh_until_watched(&env, &d).await;
    env.server.clear_requests();
    for _ in 0..5 {
        d.hub.refresh().await;
    }
    let listed: Vec<String> = env
        .server
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(listed, Vec::<String>::new());
    assert!(
        d.hub
            .snapshot()
            .rows
            .contains_key("kyverno-prog-rollout-man"),
        "the promotions are shown"
    );
}

/// A stage that passed within its failure budget: the promotion's page names the cluster counted
/// against it, on its chip and under the stage, as `explain` does.
#[tokio::test(flavor = "multi_thread")]
async fn the_page_names_the_clusters_counted_against_a_failure_budget() {
    let mut env = Env::new(SEED_FLEET).await;
    env.addon
        .failing
        .insert("dev/dev01".into(), common::start_time());
    let name = env.apply_example("failure-budget.yaml").remove(0);
    for _ in 0..20 {
        env.tick().await;
    }
    let d = serve(&env).await;
    let page = get(&d, &format!("/promotions/{name}")).await;
    assert_eq!(page.status, 200);
    for text in [
        "failure budget 1 (1 of 2 clusters): 1 counted in this run",
        "dev/dev01 counted against the failure budget until it runs the revision: cluster dev/dev01: feature Helm Failed",
        "<span class=\"flag\">failure budget</span>",
    ] {
        assert!(page.body.contains(text), "{text} not in {}", page.body);
    }
}

/// A dashboard of the fleet benchmark's world (`sim::scale`, `n` promotions × 4 stages × 2n
/// clusters), on the wall clock, reading through its watches: refreshed by what they see only.
async fn fleet_dashboard(n: usize) -> (promoter::fake::FakeApiServer, Dashboard) {
    let server = promoter::fake::FakeApiServer::start_with_sveltos()
        .await
        .unwrap();
    let scale = promoter::sim::scale::Scale {
        promotions: n,
        stages: 4,
        clusters: 2 * n,
    };
    let now = Utc::now();
    promoter::sim::scale::populate(&server, scale, now).unwrap();
    let mut options = Options::new("cluster");
    options.refresh = Some(Duration::from_secs(3600));
    // A clock that stands still: what changes is what the watches see.
    let d = promoter::dashboard::start(
        server.client().await.unwrap(),
        Arc::new(EnvClock(Arc::new(Mutex::new(now)))),
        None,
        options,
    )
    .await
    .unwrap();
    common::refresh_until_watched_on(&server, &d).await;
    (server, d)
}

/// Objects the dashboard's watch cache served from `collection` (its path's last segment).
fn served(d: &Dashboard, collection: &str) -> usize {
    let cache = d
        .hub
        .cache()
        .expect("a cluster's dashboard reads through watches");
    cache
        .served()
        .iter()
        .filter(|(path, _)| path.ends_with(&format!("/{collection}")))
        .map(|(_, n)| n)
        .sum()
}

fn versions(d: &Dashboard) -> BTreeMap<String, u64> {
    d.hub
        .snapshot()
        .rows
        .iter()
        .map(|(name, r)| (name.clone(), r.version))
        .collect()
}

/// A whole read of the world (as `status` reads it) changes nothing the dashboard shows: what the
/// watches' changes made of it is what `status` computes.
async fn a_whole_read_changes_nothing(d: &Dashboard) {
    let seq = d.hub.snapshot().seq;
    d.hub.refresh().await;
    let after = d.hub.snapshot();
    assert_eq!(
        after.seq,
        seq,
        "a whole read published rows the watches' refresh had not: {:?}",
        after
            .rows
            .iter()
            .filter(|(_, r)| r.version > seq)
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    );
}

use std::collections::BTreeMap;

/// A change made through the API to one promotion is read again alone, at once: its row is
/// published again, every other row keeps its version, and the read serves that promotion and
/// its own ClusterSummaries only, not the fleet's.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_to_one_promotion_reads_and_republishes_only_its_row() {
    let (server, d) = fleet_dashboard(20).await;
    let client = server.client().await.unwrap();
    let profiles: kube::Api<promoter::api::ClusterProfile> = kube::Api::all(client.clone());
    let profiles = profiles.list(&Default::default()).await.unwrap().items;
    let promotion_of = |profile: &str| {
        let p = profiles
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(profile))?;
        p.metadata
            .labels
            .as_ref()?
            .get("config.projectsveltos.io/promotionname")
            .cloned()
    };
    // The promotions whose summaries are read (in progress), and how many each has.
    let summaries: kube::Api<promoter::api::ClusterSummary> = kube::Api::all(client.clone());
    let mut summaries_of: BTreeMap<String, usize> = BTreeMap::new();
    for cs in summaries.list(&Default::default()).await.unwrap().items {
        if let Some(p) = cs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("projectsveltos.io/cluster-profile-name"))
            .and_then(|p| promotion_of(p))
        {
            *summaries_of.entry(p).or_default() += 1;
        }
    }
    let whole = served(&d, "clustersummaries");
    d.hub.refresh().await;
    let whole = served(&d, "clustersummaries") - whole;
    let (name, mine) = summaries_of
        .iter()
        .next()
        .map(|(p, n)| (p.clone(), *n))
        .expect("a promotion with ClusterSummaries");
    assert!(
        whole > mine,
        "a whole read serves other promotions' summaries too ({whole}, {name}'s {mine})"
    );

    let before = versions(&d);
    let (promotions, summaries) = (
        served(&d, "clusterpromotions"),
        served(&d, "clustersummaries"),
    );
    let api: kube::Api<promoter::api::ClusterPromotion> = kube::Api::all(client);
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    eventually("the promotion's row is published again", || {
        versions(&d).get(&name) != before.get(&name)
    })
    .await;
    let after = versions(&d);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(n, v)| before.get(*n) != Some(v))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        changed,
        vec![&name],
        "only the promotion changed is published again"
    );
    assert_eq!(
        served(&d, "clusterpromotions") - promotions,
        1,
        "only that promotion is read"
    );
    let read = served(&d, "clustersummaries") - summaries;
    assert!(
        read <= mine,
        "only that promotion's ClusterSummaries are read: {read} served, it has {mine}"
    );
    a_whole_read_changes_nothing(&d).await;
}

/// A change to what every row reads (a freeze; a cluster leaving its stage) is a whole read:
/// every piece it changes is published, as a whole read computes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_to_what_every_row_reads_is_read_whole() {
    let (server, d) = fleet_dashboard(20).await;
    let freezes: kube::Api<promoter::api::PromotionFreeze> =
        kube::Api::all(server.client().await.unwrap());
    let freeze: promoter::api::PromotionFreeze = serde_json::from_value(json!({
        "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionFreeze",
        "metadata": {"name": "everything"},
        "spec": {"reason": "CAB-1"}}))
    .unwrap();
    freezes.create(&Default::default(), &freeze).await.unwrap();
    let freezes_page = d.hub.snapshot().freezes.as_ref().map(|f| f.version);
    eventually("the freeze shows on the freezes page", || {
        d.hub.snapshot().freezes.as_ref().map(|f| f.version) != freezes_page
    })
    .await;
    // The rows a watch's change made are the ones a whole read makes (once every row changed
    // is published: no half-read world between).
    tokio::time::sleep(Duration::from_millis(500)).await;
    a_whole_read_changes_nothing(&d).await;

    let read = served(&d, "sveltosclusters");
    let clusters = promoter::fake::sveltos_cluster_type();
    {
        let mut store = server.store();
        for i in 0..4 {
            let name = format!("c{i:05}");
            let mut c = store.get(&clusters, "fleet", &name).unwrap();
            c["metadata"]["labels"]["ring"] = json!("none");
            store.update(&clusters, "fleet", &name, c, false).unwrap();
        }
    }
    eventually(
        "the clusters gone from their stages are read again, with the whole world",
        || served(&d, "sveltosclusters") > read,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    a_whole_read_changes_nothing(&d).await;
}
