//! Issue 24's commands through the real binary against the fake API server: `rollback`, `abort`,
//! `resume` (which lifts every hold and says which), and `freeze create|list|delete|bypass`. Each
//! writes a guarded JSON patch (or the freeze object), records who and why, and an Event; refusals
//! are one line with exit 1. The pass does not act on these records yet: the tests check what is
//! recorded, as the pass will read it.

mod common;

use common::{Env, events_of, promoter};
use promoter::annotations::{self, History, Run};
use promoter::api::{ClusterPromotion, PromotionRevision, Timestamp, revision_id};
use promoter::fake::promotion_revision_type;
use serde_json::{Value, json};

const FLEET: &[(&str, &str, &str)] = &[
    ("dev", "dev01", "dev"),
    ("staging", "st01", "staging"),
    ("prod", "prod01", "prod"),
];
const MANUAL: &str = "kyverno-prog-rollout-man";
/// An earlier revision of the promotion that completed (its hash text, as a status holds it).
const OLD: &str = "b2xkIHJldmlzaW9u";
const OLDER: &str = "b2xkZXIgb25l";

/// The manual Kyverno rollout waiting for approval at staging.
async fn at_staging() -> Env {
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-manual.yaml");
    for _ in 0..12 {
        env.tick().await;
    }
    assert_eq!(env.current_stage(MANUAL).as_deref(), Some("staging"));
    env
}

fn run_of(env: &Env, name: &str) -> Run {
    Run::of(env.promotion(name).unwrap().status.as_ref().unwrap()).unwrap()
}

fn annotation(env: &Env, name: &str, key: &str) -> Option<String> {
    env.promotion(name)?.metadata.annotations?.get(key).cloned()
}

/// History entries for `OLD` and `OLDER`, both completed; a stored PromotionRevision for each of
/// `stored`.
fn seed_history(env: &Env, name: &str, stored: &[&str]) {
    let at = |s: &str| Timestamp::parse(s).unwrap();
    let mut h = History::default();
    h.record_completion(
        OLDER,
        Some(at("2026-02-10T06:00:00Z")),
        at("2026-02-10T07:00:00Z"),
        10,
    );
    h.record_completion(
        OLD,
        Some(at("2026-02-12T06:00:00Z")),
        at("2026-02-12T07:00:00Z"),
        10,
    );
    env.store_json_patch(
        name,
        json!([{"op": "add", "path": "/metadata/annotations", "value": {annotations::HISTORY: h.to_annotation()}}]),
    );
    let p = env.promotion(name).unwrap();
    for revision in stored {
        let r = PromotionRevision::of(&p, revision, "c3RhZ2Vz", None, at("2026-02-12T07:00:00Z"));
        env.server
            .store()
            .seed(&promotion_revision_type(), serde_json::to_value(r).unwrap())
            .unwrap();
    }
}

async fn last_event(env: &Env, name: &str) -> (String, String) {
    let e = events_of(env, name).await.pop().unwrap();
    (e.reason.unwrap(), e.note.unwrap())
}

fn json_annotation(env: &Env, name: &str, key: &str) -> Value {
    serde_json::from_str(&annotation(env, name, key).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_records_the_run_the_target_and_marks_the_history() {
    let env = at_staging().await;
    let (code, _, err) = promoter(&env, &["rollback", MANUAL]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!("error: {MANUAL} has no completed revision to roll back to")
    );
    // The newest completed revision's object is gone: the one before it is last known good.
    seed_history(&env, MANUAL, &[OLDER]);
    let run = run_of(&env, MANUAL);
    let (code, out, err) = promoter(
        &env,
        &["rollback", MANUAL, "--reason", "INC-42", "--by", "CAB-9"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "requested the rollback of {MANUAL} from revision {} to revision {} (reverse): the next pass starts it",
            revision_id(&run.revision),
            revision_id(OLDER)
        )
    );
    let record = annotations::rollback(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!(record.from, run);
    assert_eq!(record.to, OLDER);
    assert_eq!(record.cause, annotations::Cause::Manual);
    assert_eq!(record.by, "admin (CAB-9)");
    assert_eq!(record.reason.as_deref(), Some("INC-42"));
    let history = History::of(&env.promotion(MANUAL).unwrap());
    let marked = history.entry(&run.revision).unwrap();
    assert_eq!(marked.rolled_back.as_ref().unwrap().to, revision_id(OLDER));
    assert_eq!(
        marked.started_at.map(|t| t.to_string()),
        Some(run.since.clone())
    );
    assert_eq!(history.0.len(), 3);
    let (reason, note) = last_event(&env, MANUAL).await;
    assert_eq!(reason, "RollbackRequested");
    assert_eq!(
        note,
        format!(
            "Rollback of revision {} to revision {} (reverse) requested by admin (CAB-9): INC-42",
            revision_id(&run.revision),
            revision_id(OLDER)
        )
    );
    // Asked again: already recorded, nothing written.
    let patches = || env.server.count(|r| r.verb == "patch");
    let before = patches();
    let (code, out, _) = promoter(&env, &["rollback", MANUAL]);
    assert_eq!(code, 0);
    assert!(out.contains("is already rolling back to revision"), "{out}");
    assert_eq!(patches(), before, "nothing written");
    // To another revision while one is recorded: a redirect, which needs that revision stored
    // (OLD's object is gone here; tests/failure_policy.rs redirects to a stored one).
    let (code, _, err) = promoter(
        &env,
        &["rollback", MANUAL, "--to-revision", &revision_id(OLD)],
    );
    assert_eq!(code, 1);
    assert!(err.contains("is gone"), "{err}");
    assert_eq!(patches(), before, "nothing written");

    // resume: the rolled-back revision may roll out again (a retry record naming it), which
    // redeploys the revision that failed: refused without --yes, naming it; --dry-run says what
    // it would do; neither writes.
    let from = revision_id(&run.revision);
    let before = patches();
    let (code, _, err) = promoter(&env, &["resume", MANUAL, "--reason", "fixed"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "resuming {MANUAL} would redeploy revision {from}, which was rolled back"
        )) && err.contains(&format!(
            "resume {MANUAL} --yes` to redeploy it, or --dry-run"
        )),
        "{err}"
    );
    let (code, out, err) = promoter(&env, &["resume", MANUAL, "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "would resume {MANUAL}: the rollback to revision {}: revision {from} rolls out again from the first stage (it redeploys revision {from}: needs --yes); nothing written",
            revision_id(OLDER)
        )
    );
    assert_eq!(patches(), before, "nothing written");
    assert!(annotations::retry(&env.promotion(MANUAL).unwrap()).is_none());
    let (code, out, err) = promoter(&env, &["resume", MANUAL, "--reason", "fixed", "--yes"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rolls out again from the first stage"),
        "{out}"
    );
    let retry = annotations::retry(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!(retry.revision, run.revision);
    assert_eq!(retry.reason.as_deref(), Some("fixed"));
    let (reason, note) = last_event(&env, MANUAL).await;
    assert_eq!(reason, "Resumed");
    assert!(
        note.starts_with("Resumed by admin (the rollback to revision"),
        "{note}"
    );
    let (_, out, _) = promoter(&env, &["resume", MANUAL]);
    assert!(out.contains("nothing to resume"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_to_a_named_revision_and_what_is_refused() {
    let env = at_staging().await;
    seed_history(&env, MANUAL, &[OLDER]);
    for (args, needle) in [
        (vec!["rollback", "nothing-started"], "not found"),
        (
            vec!["rollback", MANUAL, "--to-revision", &revision_id(OLD)[..9]],
            "has no revision",
        ),
        (
            vec!["rollback", MANUAL, "--to-revision", &revision_id(OLD)],
            "is gone",
        ),
        (
            vec!["rollback", MANUAL, "--order", "sideways"],
            "invalid value 'sideways'",
        ),
    ] {
        let (code, _, err) = promoter(&env, &args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        // A usage error is clap's (several lines, exit 1 as every usage error).
        if !err.contains("--help") {
            assert_eq!(err.trim().lines().count(), 1, "one line, as kubectl: {err}");
        }
    }
    let typo = &revision_id(OLD)[..9];
    let (_, _, err) = promoter(&env, &["rollback", MANUAL, "--to-revision", typo]);
    assert!(
        err.contains(&format!("did you mean {:?}?", revision_id(OLD))),
        "{err}"
    );
    let (code, out, err) = promoter(
        &env,
        &[
            "rollback",
            MANUAL,
            "--to-revision",
            OLDER,
            "--order",
            "all-at-once",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(all-at-once)"), "{out}");
    let record = annotations::rollback(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!(record.to, OLDER);
    assert_eq!(record.order, promoter::settings::RollbackOrder::AllAtOnce);
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_holds_the_run_until_resume_and_is_refused_when_nothing_runs() {
    let env = at_staging().await;
    let run = run_of(&env, MANUAL);
    let (code, out, err) = promoter(&env, &["abort", MANUAL, "--reason", "INC-7"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "aborted {MANUAL} at stage staging: passes hold it where it is until `promoter resume {MANUAL}` or a new revision"
        )
    );
    let record = annotations::aborted(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!((record.run, record.by.as_str()), (run.clone(), "admin"));
    assert_eq!(
        last_event(&env, MANUAL).await,
        (
            "Aborted".into(),
            "Aborted by admin at stage staging: INC-7".into()
        )
    );
    let (code, out, _) = promoter(&env, &["abort", MANUAL]);
    assert_eq!(code, 0);
    assert!(out.contains("is already aborted by admin"), "{out}");
    // A halted failure of this run, recorded by a pass: resume lifts both, and says so.
    let failed = annotations::Failed {
        run: run.clone(),
        stage: "staging".into(),
        at: Timestamp::parse("2026-02-16T08:00:00Z").unwrap(),
        why: "Waiting for approval".into(),
        deadline: "2h".into(),
        resumed: None,
        due: None,
    };
    env.store_json_patch(
        MANUAL,
        json!([{"op": "add", "path": "/metadata/annotations/promoter.dev~1failed", "value": annotations::encode(&failed)}]),
    );
    let (code, out, err) = promoter(&env, &["resume", MANUAL]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("aborted by admin at "), "{out}");
    assert!(
        out.contains("stage staging missed its progress deadline (2h) at 2026-02-16T08:00:00Z: it gets a new deadline"),
        "{out}"
    );
    let p = env.promotion(MANUAL).unwrap();
    assert!(annotations::aborted(&p).is_none());
    let resumed = annotations::failed(&p).unwrap().resumed.unwrap();
    assert_eq!(resumed.by, "admin");

    // Nothing runs: not started, or complete.
    let env = Env::new(FLEET).await;
    env.apply_example("blog-kyverno-auto.yaml");
    let (code, _, err) = promoter(&env, &["abort", "kyverno-rollout-auto"]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        "error: kyverno-rollout-auto has not started; nothing runs to abort"
    );
    for _ in 0..20 {
        env.tick().await;
    }
    let (code, _, err) = promoter(&env, &["abort", "kyverno-rollout-auto"]);
    assert_eq!(code, 1);
    assert!(err.contains("has completed revision"), "{err}");
    let (code, _, err) = promoter(&env, &["abort", "kyverno-rollout-aut"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"did you mean "kyverno-rollout-auto"?"#),
        "{err}"
    );
}

/// A new spec whose revision the history marks rolled back is held by the pass; resume writes
/// the retry record for that revision.
#[tokio::test(flavor = "multi_thread")]
async fn resume_retries_a_new_spec_whose_revision_was_rolled_back() {
    let env = at_staging().await;
    let mut p: ClusterPromotion = env.promotion(MANUAL).unwrap();
    p.spec.profile_spec.as_mut().unwrap().0["helmCharts"][0]["chartVersion"] = json!("9.9.9");
    env.apply_promotion(&p);
    let spec_revision = promoter::hash::revision_hash(&env.promotion(MANUAL).unwrap());
    let mut h = History::default();
    h.record_rollback(
        &spec_revision,
        None,
        annotations::RolledBack {
            at: Timestamp::parse("2026-02-15T00:00:00Z").unwrap(),
            cause: annotations::Cause::ProgressDeadline,
            by: "promoter".into(),
            to: revision_id(OLD),
        },
        10,
    );
    env.store_json_patch(
        MANUAL,
        json!([{"op": "add", "path": "/metadata/annotations", "value": {annotations::HISTORY: h.to_annotation()}}]),
    );
    let (code, _, err) = promoter(&env, &["resume", MANUAL]);
    assert_eq!(
        code, 1,
        "a rolled-back revision redeploys only with --yes: {err}"
    );
    assert!(
        err.contains(&format!(
            "would redeploy revision {}",
            revision_id(&spec_revision)
        )),
        "{err}"
    );
    let (code, out, err) = promoter(&env, &["resume", MANUAL, "-y"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "revision {} was rolled back at 2026-02-15T00:00:00Z (ProgressDeadline): it may roll out again",
            revision_id(&spec_revision)
        )),
        "{out}"
    );
    assert_eq!(
        annotations::retry(&env.promotion(MANUAL).unwrap())
            .unwrap()
            .revision,
        spec_revision
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn freezes_are_created_listed_bypassed_and_deleted() {
    let env = at_staging().await;
    env.apply_example("blog-kyverno-auto.yaml");
    env.store_json_patch(
        MANUAL,
        json!([{"op": "add", "path": "/metadata/labels", "value": {"tier": "prod"}}]),
    );
    let (code, out, err) = promoter(
        &env,
        &[
            "freeze",
            "create",
            "holidays",
            "--reason",
            "Holiday change freeze (CAB-123)",
            "--selector",
            "tier=prod",
            "--for",
            "14d",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(
            "created freeze holidays: tier=prod (Holiday change freeze (CAB-123)), active until "
        ),
        "{out}"
    );
    assert!(
        out.trim().ends_with(&format!("selects now: {MANUAL}")),
        "{out}"
    );
    let (code, _, err) = promoter(
        &env,
        &[
            "freeze", "create", "later", "--reason", "r", "--start", "2h", "--end", "1h",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("is not after the start"), "{err}");
    let (code, _, err) = promoter(
        &env,
        &[
            "freeze",
            "create",
            "bad",
            "--reason",
            "r",
            "--selector",
            "a in (",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.starts_with("error: --selector: "), "{err}");
    let (code, _, err) = promoter(&env, &["freeze", "create", "holidays", "--reason", "again"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("Error from server (AlreadyExists): "),
        "{err}"
    );
    let (code, _, _) = promoter(
        &env,
        &[
            "freeze", "create", "incident", "--reason", "INC-7", "--start", "1h",
        ],
    );
    assert_eq!(code, 0);
    let (code, out, _) = promoter(&env, &["freeze", "list"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAME      PHASE      HOLDS"), "{out}");
    assert!(
        lines[1].starts_with(&format!("holidays  Active     {MANUAL}  tier=prod")),
        "{out}"
    );
    assert!(lines[2].starts_with("incident  Scheduled  -"), "{out}");
    let (_, out, _) = promoter(&env, &["freeze", "list", "-o", "json"]);
    let rows: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows[0]["holds"], json!([MANUAL]));
    assert_eq!(rows[1]["selector"], "every promotion");

    // Bypass: who, why, until; refused past 7 days; a named freeze must exist.
    let (code, _, err) = promoter(
        &env,
        &[
            "freeze", "bypass", MANUAL, "--reason", "hotfix", "--until", "8d",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("more than 7 days ahead"), "{err}");
    // A duration the grammar accepts but the calendar cannot hold: an error, not a panic.
    for args in [
        &[
            "freeze", "bypass", MANUAL, "--reason", "r", "--until", "300000y",
        ][..],
        &[
            "freeze", "create", "long", "--reason", "r", "--for", "300000y",
        ][..],
        &[
            "freeze", "create", "long", "--reason", "r", "--start", "300000y",
        ][..],
    ] {
        let (code, _, err) = promoter(&env, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("\"300000y\" ends beyond the calendar"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = promoter(
        &env,
        &[
            "freeze", "bypass", MANUAL, "--reason", "hotfix", "--until", "4h", "--freeze",
            "holiday",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        r#"Error from server (NotFound): promotionfreezes.promoter.dev "holiday" not found; did you mean "holidays"?"#
    );
    let (code, out, err) = promoter(
        &env,
        &[
            "freeze",
            "bypass",
            MANUAL,
            "--reason",
            "hotfix INC-7",
            "--until",
            "4h",
            "--freeze",
            "holidays",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "recorded a bypass: {MANUAL} may start new stages during freeze holidays until "
        )),
        "{out}"
    );
    assert!(
        out.trim().ends_with("freezes holding it now: holidays"),
        "{out}"
    );
    let bypass = annotations::freeze_bypass(&env.promotion(MANUAL).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        (bypass.by.as_str(), bypass.reason.as_str()),
        ("admin", "hotfix INC-7")
    );
    assert_eq!(bypass.freeze.as_deref(), Some("holidays"));
    let (reason, note) = last_event(&env, MANUAL).await;
    assert_eq!(reason, "FreezeBypassGranted");
    assert!(
        note.starts_with("Freeze bypass for freeze holidays granted by admin until "),
        "{note}"
    );
    assert!(note.ends_with(": hotfix INC-7"), "{note}");

    let (code, _, err) = promoter(&env, &["freeze", "delete", "holiday"]);
    assert_eq!(code, 1);
    assert!(err.contains(r#"did you mean "holidays"?"#), "{err}");
    let (code, out, _) = promoter(&env, &["freeze", "delete", "holidays"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("deleted freeze holidays"), "{out}");
    let (_, out, _) = promoter(&env, &["freeze", "list", "-o", "json"]);
    let rows: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    let created_by = env
        .server
        .store()
        .get(&promoter::fake::promotion_freeze_type(), "", "incident")
        .unwrap()["metadata"]["annotations"]["promoter.dev/created-by"]
        .clone();
    assert!(
        created_by
            .as_str()
            .unwrap()
            .starts_with(r#"{"by":"admin","at":""#),
        "{created_by}"
    );
}

/// `rollback` racing the minute's pass: the guarded patch is refused once, read again, and
/// written, as approve does.
#[tokio::test(flavor = "multi_thread")]
async fn rollback_retries_when_the_pass_wrote_first() {
    use promoter::fake::{FaultAction, FaultRule, RequestMatcher};
    let env = at_staging().await;
    seed_history(&env, MANUAL, &[OLD]);
    env.server.clear_requests();
    env.server.inject(FaultRule::nth(
        RequestMatcher::verbs(&["patch"]).resource("clusterpromotions"),
        1,
        FaultAction::Status(409),
    ));
    let (code, out, err) = promoter(&env, &["rollback", MANUAL]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        env.server
            .count(|r| r.verb == "patch" && r.resource == "clusterpromotions"),
        2
    );
    assert_eq!(
        json_annotation(&env, MANUAL, annotations::ROLLBACK)["to"],
        OLD
    );
}

/// Issue 31: `rollback --order` while a rollback of the run is recorded was answered "already
/// rolling back ... nothing to do" and the order was dropped. Speeding a reverse rollback up to
/// all at once takes effect (every stage goes to the same known-good revision, only sooner);
/// the other way round is refused, saying what runs and why (the profiles are being restored at
/// once already: a reverse order cannot take that back).
#[tokio::test(flavor = "multi_thread")]
async fn rollback_order_while_a_rollback_is_recorded_takes_effect_or_is_refused() {
    let env = at_staging().await;
    seed_history(&env, MANUAL, &[OLDER]);
    let (code, _, err) = promoter(&env, &["rollback", MANUAL, "--reason", "INC-42"]);
    assert_eq!(code, 0, "{err}");
    let recorded = annotations::rollback(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!(recorded.order, promoter::settings::RollbackOrder::Reverse);
    let patches = || env.server.count(|r| r.verb == "patch");
    // The same order: nothing to do.
    let before = patches();
    let (code, out, _) = promoter(&env, &["rollback", MANUAL, "--order", "reverse"]);
    assert_eq!(code, 0);
    assert!(out.contains("is already rolling back to revision"), "{out}");
    assert_eq!(patches(), before, "nothing written");
    // Faster: it takes effect; who asked first and when is kept, the Event says who changed it.
    let (code, out, err) = promoter(
        &env,
        &[
            "rollback",
            MANUAL,
            "--order",
            "all-at-once",
            "--by",
            "CAB-9",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!(
            "changed the order of {MANUAL}'s rollback to revision {} from reverse to all-at-once: the next pass restores every remaining stage at once",
            revision_id(OLDER)
        )
    );
    let record = annotations::rollback(&env.promotion(MANUAL).unwrap()).unwrap();
    assert_eq!(
        record,
        annotations::Rollback {
            order: promoter::settings::RollbackOrder::AllAtOnce,
            ..recorded.clone()
        }
    );
    let history = History::of(&env.promotion(MANUAL).unwrap());
    assert_eq!(history.0.len(), 3, "the history is not touched");
    let (reason, note) = last_event(&env, MANUAL).await;
    assert_eq!(reason, "RollbackRequested");
    assert!(
        note.starts_with(&format!(
            "Rollback to revision {} changed from reverse to all-at-once by admin (CAB-9)",
            revision_id(OLDER)
        )),
        "{note}"
    );
    // Back to reverse: refused, one line naming the rollback, its order and the way out.
    let before = patches();
    let (code, _, err) = promoter(&env, &["rollback", MANUAL, "--order", "reverse"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "{MANUAL} is already rolling back to revision {} all-at-once (requested by admin at ",
            revision_id(OLDER)
        )),
        "{err}"
    );
    assert!(err.contains("cannot become reverse"), "{err}");
    assert_eq!(patches(), before, "nothing written");
}
