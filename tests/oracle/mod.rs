//! The safety oracle of the rollouts that tests judge write by write (`tests/gates.rs`, under
//! crashes, concurrent passes and faults injected by the fake API server; `tests/campaign.rs`, the
//! real binary through a faulty network). The fake API server runs [`Oracle::check`] after every
//! write it applies, its store still locked, so that every intermediate state is seen; the rules it
//! judges are listed in `tests/gates.rs`'s module docs.

#![allow(dead_code)]

use chrono::{DateTime, Duration, Utc};
use promoter::annotations::{self, Run};
use promoter::api::ClusterPromotion;
use promoter::fake::{
    Store, cluster_profile_type, cluster_promotion_type, cluster_summary_type, sveltos_cluster_type,
};
use promoter::sim::feature_hash::feature_hash;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The user a person's writes authenticate as (a pass's users start with `pass`).
pub const HUMAN: &str = "human";

#[derive(Clone, Debug, Default, PartialEq)]
struct Snap {
    run: Option<Run>,
    current: Option<usize>,
    completed: bool,
}

#[derive(Clone, Debug, Default)]
struct Account {
    given: i64,
    used: i64,
    approved: bool,
}

#[derive(Default)]
pub struct Oracle {
    /// Last observed content of each stage's profile (spec without the selector).
    contents: BTreeMap<(String, usize), Option<String>>,
    /// When a stage was first seen running a content on every selected cluster.
    deployed: BTreeMap<(String, usize, String), DateTime<Utc>>,
    snaps: BTreeMap<String, Snap>,
    approvals: BTreeMap<(String, String), Account>,
    /// Issue 24: the chart version of every revision hash seen in a promotion's spec.
    versions: BTreeMap<String, String>,
    /// Revisions a person asked to roll out again (`promoter.dev/retry`).
    retried: std::collections::BTreeSet<String>,
    /// Issue 30: (promotion, run start, stage) whose progress deadline a clock recorded as met.
    met: std::collections::BTreeSet<(String, String, String)>,
    /// When (the oracle's write count) each promotion was last seen paused by a person, while it is.
    paused_at: BTreeMap<String, usize>,
    /// The write count when the passes of the current tick began (`Lab::passes_begin`).
    pub passes_began: usize,
    /// When the oracle first saw each (promotion, run start, stage) reached.
    reached_at: BTreeMap<(String, String, String), DateTime<Utc>>,
    /// The (promotion, run start, stage) misses seen recorded.
    misses: std::collections::BTreeSet<(String, String, String)>,
    /// Issue 49: the record of the clusters counted against failure budgets, per promotion, as
    /// last seen.
    budgeted: BTreeMap<String, Option<annotations::Budgeted>>,
    /// The (promotion, revision, stages, run start) runs a person has read as complete.
    read_complete: std::collections::BTreeSet<(String, String, String, String)>,
    pub violations: Vec<String>,
    pub writes: usize,
}

/// The reference window evaluation the model checker judges by: one piece of code for both
/// checkers, independent of promoter's `window` module.
#[path = "../../model/src/reference.rs"]
#[allow(dead_code)]
mod reference;

/// `promoter.dev/paused` as a person reads it (the book: `false`, `no`, `off`, `0` or empty pause
/// nothing); judged here without promoter's own reading of it.
fn paused_by_a_person(p: &ClusterPromotion) -> bool {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("promoter.dev/paused"))
        .is_some_and(|v| {
            !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "false" | "no" | "off" | "0" | ""
            )
        })
}

/// The revision a generated profile carries, by its chart version (the scenarios' revisions differ
/// only there).
/// `run` missed a deadline and halted: its miss is recorded, not resumed, and no rollback of it.
pub fn halted_run(p: &ClusterPromotion, run: Option<&Run>) -> bool {
    annotations::failed(p).is_some_and(|f| Some(&f.run) == run && f.resumed.is_none())
        && annotations::rollback(p).is_none_or(|r| Some(&r.from) != run)
}

fn version_of(profile: &Value) -> Option<String> {
    profile["spec"]["helmCharts"][0]["chartVersion"]
        .as_str()
        .map(String::from)
}

fn content(profile: &Value) -> String {
    let mut spec = profile["spec"].clone();
    if let Some(m) = spec.as_object_mut() {
        m.remove("clusterSelector");
    }
    let labels = &profile["metadata"]["labels"];
    json!({"spec": spec, "sa": [labels["projectsveltos.io/serviceaccount-name"], labels["projectsveltos.io/serviceaccount-namespace"]]}).to_string()
}

/// The clusters the stage selects (`namespace/name`) that have no summary of this profile in sync
/// and Provisioned *for that spec*: every feature with the hash Sveltos computes from it (issue
/// 30: a `Provisioned` written late from the previous spec, or older than the spec, is not a
/// deployment of it).
fn outside_clusters(
    cp: &Value,
    pname: &str,
    stage: &promoter::api::Stage,
    clusters: &[Value],
    summaries: &[Value],
) -> Vec<String> {
    selected(stage, clusters)
        .filter(|c| {
            !summaries.iter().any(|cs| {
                cs["metadata"]["labels"]["projectsveltos.io/cluster-profile-name"] == pname
                    && cs["spec"]["clusterName"] == c["metadata"]["name"]
                    && cs["spec"]["clusterNamespace"] == c["metadata"]["namespace"]
                    && cs["spec"]["clusterProfileSpec"] == cp["spec"]
                    && cs["status"]["featureSummaries"]
                        .as_array()
                        .is_some_and(|f| {
                            f.iter().all(|x| {
                                let spec = cs["spec"]["clusterProfileSpec"]
                                    .as_object()
                                    .cloned()
                                    .unwrap_or_default();
                                let id = x["featureID"].as_str().unwrap_or_default();
                                x["status"] == "Provisioned"
                                    && x["hash"] == feature_hash(&spec, id).as_str()
                            })
                        })
            })
        })
        .map(cluster_key)
        .collect()
}

/// The clusters `stage` selects.
fn selected<'a>(
    stage: &promoter::api::Stage,
    clusters: &'a [Value],
) -> impl Iterator<Item = &'a Value> {
    let selector = stage.cluster_selector.clone().unwrap_or_default();
    clusters.iter().filter(move |c| {
        let labels: BTreeMap<String, String> =
            serde_json::from_value(c["metadata"]["labels"].clone()).unwrap_or_default();
        selector.selects(&labels).unwrap_or(false)
    })
}

/// `namespace/name`, as promoter names a cluster.
fn cluster_key(c: &Value) -> String {
    format!(
        "{}/{}",
        c["metadata"]["namespace"].as_str().unwrap_or_default(),
        c["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Issue 49: the clusters `run`'s record (`promoter.dev/budgeted`) names against `stage`'s failure
/// budget; none for a record of another run (void).
fn named(p: &ClusterPromotion, run: Option<&Run>, stage: &str) -> BTreeSet<String> {
    annotations::budgeted(p)
        .filter(|b| Some(&b.run) == run)
        .map(|b| {
            b.of_stage(stage)
                .iter()
                .map(|c| c.cluster.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// How many of `stage`'s `clusters` its failure budget allows to fail.
fn allowed(p: &ClusterPromotion, stage: &str, clusters: usize) -> usize {
    promoter::settings::Settings::of(p)
        .failure_budget
        .for_stage(stage)
        .allows(clusters)
}

/// Whether `cluster`'s summary of `pname` reports a feature `Failed` or `FailedNonRetriable`.
fn failing(pname: &str, cluster: &str, summaries: &[Value]) -> bool {
    summaries.iter().any(|cs| {
        cs["metadata"]["labels"]["projectsveltos.io/cluster-profile-name"] == pname
            && format!(
                "{}/{}",
                cs["spec"]["clusterNamespace"].as_str().unwrap_or_default(),
                cs["spec"]["clusterName"].as_str().unwrap_or_default()
            ) == cluster
            && cs["status"]["featureSummaries"]
                .as_array()
                .is_some_and(|f| {
                    f.iter()
                        .any(|x| x["status"] == "Failed" || x["status"] == "FailedNonRetriable")
                })
    })
}

impl Oracle {
    pub fn check(&mut self, store: &Store, user: &str, now: DateTime<Utc>) {
        self.writes += 1;
        let profiles: BTreeMap<String, Value> = store
            .all(&cluster_profile_type())
            .into_iter()
            .map(|p| (p["metadata"]["name"].as_str().unwrap_or("").to_string(), p))
            .collect();
        let summaries = store.all(&cluster_summary_type());
        let clusters = store.all(&sveltos_cluster_type());
        for pv in store.all(&cluster_promotion_type()) {
            let Ok(p) = serde_json::from_value::<ClusterPromotion>(pv) else {
                continue;
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            let recorded = p
                .status
                .as_ref()
                .and_then(|s| s.current_stage_name.as_ref())
                .and_then(|c| p.spec.stages.iter().position(|s| s.name == *c));
            // Issue 24: what the records say about the current run.
            let status = p.status.clone().unwrap_or_default();
            let run = Run::of(&status);
            if let Some(v) = p.spec.profile_spec.as_ref().and_then(|s| {
                s.get("helmCharts")
                    .and_then(|h| h.pointer("/0/chartVersion"))
                    .and_then(Value::as_str)
                    .map(String::from)
            }) {
                self.versions.insert(promoter::hash::revision_hash(&p), v);
            }
            if let Some(r) = annotations::retry(&p).filter(|_| user == HUMAN) {
                self.retried.insert(r.revision);
            }
            self.check_deadline_and_revisions(store, &p, run.as_ref(), user);
            self.check_deadline_timing(&p, run.as_ref(), user, now);
            self.check_completion_stays(&p, run.as_ref(), user);
            let pass = user.starts_with("pass");
            if paused_by_a_person(&p) {
                self.paused_at.entry(name.clone()).or_insert(self.writes);
            } else {
                self.paused_at.remove(&name);
            }
            // Paused before this tick's passes began: each of them observed the pause.
            let paused_for_pass = pass
                && self
                    .paused_at
                    .get(&name)
                    .is_some_and(|w| *w <= self.passes_began);
            // A halted miss of the current run (no rollback of it recorded, not resumed).
            let halted = halted_run(&p, run.as_ref());
            let rollback = annotations::rollback(&p).filter(|r| Some(&r.from) == run.as_ref());
            let good = rollback
                .as_ref()
                .and_then(|r| self.versions.get(&r.to).cloned());
            let history = annotations::History::of(&p);
            let reached: Vec<bool> = p
                .spec
                .stages
                .iter()
                .map(|s| status.stages.iter().flatten().any(|e| e.name == s.name))
                .collect();
            // Issue 49: the clusters of each stage outside its profile's revision (all of them
            // without a profile), and whether that is within its failure budget, each of them
            // named in the run's record.
            let outside: Vec<Vec<String>> = p
                .spec
                .stages
                .iter()
                .map(|stage| {
                    let pname = format!("{name}-{}", stage.name);
                    match profiles.get(&pname) {
                        Some(cp) => outside_clusters(cp, &pname, stage, &clusters, &summaries),
                        None => selected(stage, &clusters).map(cluster_key).collect(),
                    }
                })
                .collect();
            let everywhere: Vec<bool> = p
                .spec
                .stages
                .iter()
                .enumerate()
                .map(|(j, stage)| {
                    profiles.contains_key(&format!("{name}-{}", stage.name))
                        && outside[j].is_empty()
                })
                .collect();
            let within_budget: Vec<bool> = p
                .spec
                .stages
                .iter()
                .enumerate()
                .map(|(j, stage)| {
                    let named = named(&p, run.as_ref(), &stage.name);
                    profiles.contains_key(&format!("{name}-{}", stage.name))
                        && outside[j].len()
                            <= allowed(&p, &stage.name, selected(stage, &clusters).count())
                        && outside[j].iter().all(|c| named.contains(c))
                })
                .collect();
            self.check_budget_record(&p, run.as_ref(), user, &profiles, &clusters, &summaries);
            let versions_now: Vec<Option<String>> = p
                .spec
                .stages
                .iter()
                .map(|s| {
                    profiles
                        .get(&format!("{name}-{}", s.name))
                        .and_then(version_of)
                })
                .collect();
            let freezes = store.all(&promoter::fake::promotion_freeze_type());
            for (j, stage) in p.spec.stages.iter().enumerate() {
                let pname = format!("{name}-{}", stage.name);
                let key = (name.clone(), j);
                let changed =
                    profiles.get(&pname).map(content) != self.contents.get(&key).cloned().flatten();
                let Some(v) = versions_now[j].clone().filter(|_| changed) else {
                    continue;
                };
                if paused_for_pass {
                    self.violations.push(format!(
                        "write {} by {user}: {pname} changed to {v} while {name} was paused",
                        self.writes
                    ));
                }
                if halted && pass {
                    self.violations.push(format!(
                        "write {} by {user}: {pname} changed to {v} after the run halted on a missed deadline",
                        self.writes
                    ));
                }
                let to_good = good.as_deref() == Some(v.as_str());
                if let Some(r) = &rollback {
                    // Issue 30: once the rollback missed its own deadline it holds for a person:
                    // a profile changes only to repair one that held the good revision already.
                    let before = self
                        .contents
                        .get(&key)
                        .cloned()
                        .flatten()
                        .and_then(|c| serde_json::from_str::<Value>(&c).ok())
                        .and_then(|c| {
                            c["spec"]["helmCharts"][0]["chartVersion"]
                                .as_str()
                                .map(String::from)
                        });
                    if r.missed.is_some() && before != good {
                        self.violations.push(format!(
                            "write {} by {user}: {pname} changed to {v} after the rollback missed its deadline",
                            self.writes
                        ));
                    }
                    // During a rollback of the current run, a profile only ever changes to the
                    // revision rolled back to: it is never mixed up with a forward rollout.
                    if !to_good {
                        self.violations.push(format!(
                            "write {} by {user}: {pname} changed to {v} during a rollback to {good:?}",
                            self.writes
                        ));
                    }
                    // Reverse: every higher target runs the good revision everywhere first.
                    if r.order == promoter::settings::RollbackOrder::Reverse {
                        for k in j + 1..p.spec.stages.len() {
                            // Every stage with a profile: an unfinished earlier revision may
                            // have left one above the run's reach, and re-applying it is not
                            // running it.
                            let target = reached[k] || versions_now[k].is_some();
                            if target && !(versions_now[k] == good && everywhere[k]) {
                                self.violations.push(format!(
                                    "write {} by {user}: {pname} rolled back before {} finished rolling back",
                                    self.writes, p.spec.stages[k].name
                                ));
                            }
                        }
                    }
                    continue;
                }
                // A revision rolled back before rolls out again only after a person asked.
                let revision = self
                    .versions
                    .iter()
                    .find(|(_, x)| **x == v)
                    .map(|(h, _)| h.clone());
                if let Some(h) = &revision
                    && history.rolled_back(h).is_some()
                    && !self.retried.contains(h)
                {
                    self.violations.push(format!(
                        "write {} by {user}: {pname} got {v}, a rolled-back revision nobody retried",
                        self.writes
                    ));
                }
                // No stage starts during a freeze without a bypass on record: an Active freeze
                // holds what it selects, what its status says it held when it became active
                // (issue 30: relabelling does not escape it), and, when it cannot be read, all
                // it may select.
                for f in &freezes {
                    let Some(f) = promoter::pass::observe::lenient_freeze(f) else {
                        continue;
                    };
                    let ev = promoter::freeze::evaluate(&f, now);
                    let labels = p.metadata.labels.clone().unwrap_or_default();
                    if !ev.holds(&name, &labels) {
                        continue;
                    }
                    let bypassed = annotations::freeze_bypass(&p)
                        .and_then(Result::ok)
                        .is_some_and(|b| promoter::freeze::bypass_allows(&b, ev.name, now));
                    if !bypassed {
                        self.violations.push(format!(
                            "write {} by {user}: {pname} got {v} during freeze {} without a bypass",
                            self.writes, ev.name
                        ));
                    }
                }
            }
            for (j, stage) in p.spec.stages.iter().enumerate() {
                let pname = format!("{name}-{}", stage.name);
                let now_content = profiles.get(&pname).map(content);
                // Deployed: every selected cluster has an in-sync, provisioned summary, or every
                // one but at most its failure budget, each of them named in the run's record.
                if let Some(cp) = profiles.get(&pname)
                    && (everywhere[j] || within_budget[j])
                {
                    self.deployed
                        .entry((name.clone(), j, content(cp)))
                        .or_insert(now);
                }
                let key = (name.clone(), j);
                let before = self.contents.get(&key).cloned().flatten();
                if j > 0
                    && let Some(c) = &now_content
                    && before.as_ref() != Some(c)
                {
                    // Order of writes: a stage's profile changes only once the status records
                    // the promotion to it (issue 14 review: no rule covered this).
                    if recorded.is_none_or(|r| r < j) {
                        self.violations.push(format!(
                            "write {} by {user}: {pname} changed before the status recorded stage {} as reached",
                            self.writes, stage.name
                        ));
                    }
                    let prev = &p.spec.stages[j - 1];
                    let delay = prev
                        .trigger
                        .as_ref()
                        .and_then(|t| t.gates())
                        .and_then(|g| g.delay.map(|d| d.to_chrono()))
                        .unwrap_or_else(Duration::zero);
                    match self.deployed.get(&(name.clone(), j - 1, c.clone())) {
                        None => self.violations.push(format!(
                            "write {} by {user}: {pname} got a revision stage {} never ran everywhere",
                            self.writes, prev.name
                        )),
                        Some(t) if now < *t + delay => self.violations.push(format!(
                            "write {} by {user}: {pname} promoted at {now}, before {}'s delay ended ({} + {delay})",
                            self.writes, prev.name, t
                        )),
                        Some(_) => {}
                    }
                }
                self.contents.insert(key, now_content);
            }
            // The run, and the stage it is at.
            let current = status
                .current_stage_name
                .as_ref()
                .and_then(|c| p.spec.stages.iter().position(|s| s.name == *c));
            let completed = run.is_some() && annotations::completed(&p) == run;
            let snap = Snap {
                run: run.clone(),
                current,
                completed,
            };
            let before = self.snaps.insert(name.clone(), snap.clone());
            let mut passed: Option<usize> = None;
            if let Some(b) = &before
                && b.run.is_some()
                && b.run == snap.run
            {
                match (b.current, snap.current) {
                    (Some(x), Some(y)) if y == x + 1 => passed = Some(x),
                    (Some(x), Some(y)) if y > x + 1 => self.violations.push(format!(
                        "write {} by {user}: {name} advanced twice ({x} -> {y})",
                        self.writes
                    )),
                    (Some(x), Some(y)) if y < x => self.violations.push(format!(
                        "write {} by {user}: {name} went back ({x} -> {y}) in one run",
                        self.writes
                    )),
                    _ => {}
                }
                if snap.completed && !b.completed {
                    passed = snap.current;
                }
                if paused_for_pass && (b.current != snap.current || b.completed != snap.completed) {
                    self.violations.push(format!(
                        "write {} by {user}: {name} moved ({:?} -> {:?}) while paused",
                        self.writes, b.current, snap.current
                    ));
                }
            }
            // Issue 49: a stage passes only with at most its failure budget of clusters outside
            // the revision, each of them named in the run's record (Sveltos does not move while
            // the passes of a tick run: the store is what the passing pass listed).
            if let Some(j) = passed
                && !everywhere[j]
                && !within_budget[j]
            {
                self.violations.push(format!(
                    "write {} by {user}: {name} passed stage {} with clusters outside the revision {:?}, more than its failure budget or not all named in the run's record ({:?})",
                    self.writes,
                    p.spec.stages[j].name,
                    outside[j],
                    named(&p, run.as_ref(), &p.spec.stages[j].name)
                ));
            }
            if let Some(j) = passed
                && let Some(w) = p.spec.stages[j]
                    .trigger
                    .as_ref()
                    .and_then(|t| t.auto.as_ref())
                    .and_then(|a| a.promotion_window.as_ref())
                && !reference::window_open(&w.from, &w.to, now)
            {
                self.violations.push(format!(
                    "write {} by {user}: {name} passed stage {} at {now}, outside its window {} - {}",
                    self.writes, p.spec.stages[j].name, w.from, w.to
                ));
            }
            let human = !user.starts_with("pass");
            for (j, stage) in p.spec.stages.iter().enumerate() {
                let Some(manual) = stage.trigger.as_ref().and_then(|t| t.manual.as_ref()) else {
                    continue;
                };
                if !manual.automatic_reset() {
                    continue;
                }
                let acct = self
                    .approvals
                    .entry((name.clone(), stage.name.clone()))
                    .or_default();
                let approved = manual.is_approved();
                if human && approved != acct.approved {
                    acct.given += if approved { 1 } else { -1 };
                    acct.given = acct.given.max(acct.used);
                }
                acct.approved = approved;
                if passed == Some(j) {
                    acct.used += 1;
                }
                let pending = snap.run.is_some()
                    && annotations::grant(&p, &stage.name).map(|g| g.run) == snap.run
                    && snap.current == Some(j)
                    && !snap.completed;
                if acct.used > acct.given {
                    self.violations.push(format!(
                        "write {} by {user}: {name} stage {} passed {} times on {} approvals (reused)",
                        self.writes, stage.name, acct.used, acct.given
                    ));
                    acct.given = acct.used;
                }
                // An approval consumed for a run that a new revision superseded before the stage
                // passed is void, not lost: an approval approves one revision (issue 14 review).
                let superseded = annotations::grant(&p, &stage.name).is_some_and(|g| {
                    snap.run
                        .as_ref()
                        .is_some_and(|r| r.revision != g.run.revision)
                });
                if acct.given > acct.used && !approved && !pending && superseded {
                    acct.given = acct.used;
                }
                if acct.given > acct.used && !approved && !pending {
                    self.violations.push(format!(
                        "write {} by {user}: {name} stage {}: an approval was lost",
                        self.writes, stage.name
                    ));
                    acct.given = acct.used;
                }
            }
        }
    }
}

impl Oracle {
    /// Issue 49, the failure budget's record (`promoter.dev/budgeted`), as the book's invariants
    /// state it: within a run, a cluster named against a stage's budget stays named until it runs
    /// the stage's profile or leaves the stage, and only a pass names or drops one; a cluster is
    /// named for the first time in a run only while it is failing (a feature `Failed`, or, with a
    /// progress deadline, not deployed by it: then not judged here).
    fn check_budget_record(
        &mut self,
        p: &ClusterPromotion,
        run: Option<&Run>,
        user: &str,
        profiles: &BTreeMap<String, Value>,
        clusters: &[Value],
        summaries: &[Value],
    ) {
        let name = p.metadata.name.clone().unwrap_or_default();
        let now = annotations::budgeted(p);
        let before = self.budgeted.insert(name.clone(), now.clone()).flatten();
        if before == now {
            return;
        }
        let pass = user.starts_with("pass");
        let settings = promoter::settings::Settings::of(p);
        let deadlines = p
            .spec
            .stages
            .iter()
            .any(|s| settings.deadline_for(&s.name).is_some());
        for stage in &p.spec.stages {
            let pname = format!("{name}-{}", stage.name);
            let outside = match profiles.get(&pname) {
                Some(cp) => outside_clusters(cp, &pname, stage, clusters, summaries),
                None => selected(stage, clusters).map(cluster_key).collect(),
            };
            let in_stage: BTreeSet<String> = selected(stage, clusters).map(cluster_key).collect();
            // Dropped within the run of the record before this write (a record of another run,
            // or none, is void: a new run starts with every stage's whole budget).
            // (A pass that starts a new run may drop the record before its status write: the
            // spec is then not the record's run's any more.)
            if let Some(b) = &before
                && run == Some(&b.run)
                && b.run.revision == promoter::hash::revision_hash(p)
                && b.run.stages == promoter::hash::stages_hash(&p.spec.stages)
            {
                let was: BTreeSet<String> = b
                    .of_stage(&stage.name)
                    .iter()
                    .map(|c| c.cluster.clone())
                    .collect();
                let is = named(p, Some(&b.run), &stage.name);
                for c in was.difference(&is) {
                    if outside.contains(c) && in_stage.contains(c) {
                        self.violations.push(format!(
                            "write {} by {user}: {name}: cluster {c} counted against stage {}'s failure budget is no longer named, though it does not run the revision and is still in the stage",
                            self.writes, stage.name
                        ));
                    }
                }
            }
            if let Some(b) = &now {
                let was: BTreeSet<String> = before
                    .as_ref()
                    .filter(|x| x.run == b.run)
                    .map(|x| {
                        x.of_stage(&stage.name)
                            .iter()
                            .map(|c| c.cluster.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                for c in b.of_stage(&stage.name) {
                    if was.contains(&c.cluster) {
                        continue;
                    }
                    if !pass || !(deadlines || failing(&pname, &c.cluster, summaries)) {
                        self.violations.push(format!(
                            "write {} by {user}: {name}: cluster {} named against stage {}'s failure budget while not failing",
                            self.writes, c.cluster, stage.name
                        ));
                    }
                }
            }
        }
    }

    /// Issue 33: a run a person has read as complete (the last stage current, described
    /// "Successfully provisioned", upstream's text for it) never reads as waiting again: not an
    /// earlier current stage, not waiting, awaiting, delayed or provisioning, whatever passes,
    /// crashes and late writes follow. Judged from the status text a person reads, not from
    /// promoter's own completion record.
    fn check_completion_stays(&mut self, p: &ClusterPromotion, run: Option<&Run>, user: &str) {
        let (Some(run), Some(status), Some(last)) = (run, p.status.as_ref(), p.spec.stages.last())
        else {
            return;
        };
        let name = p.metadata.name.clone().unwrap_or_default();
        let key = (
            name.clone(),
            run.revision.clone(),
            run.stages.clone(),
            run.since.clone(),
        );
        let current = status.current_stage_name.as_deref().unwrap_or_default();
        let description = status
            .stages
            .iter()
            .flatten()
            .find(|e| e.name == current)
            .and_then(|e| e.current_status_description.as_deref())
            .unwrap_or_default();
        if current == last.name && description.starts_with("Successfully provisioned") {
            self.read_complete.insert(key);
            return;
        }
        if !self.read_complete.contains(&key) {
            return;
        }
        // Reported once per run (every later write would show the same).
        const WAITING: [&str; 7] = [
            "Paused: Awaiting",
            "Delayed:",
            "Window Closed:",
            "Awaiting",
            "Running Post-Promotion",
            "Clusters are being provisioned",
            "Waiting",
        ];
        if current != last.name || WAITING.iter().any(|w| description.starts_with(w)) {
            self.read_complete.remove(&key);
            self.violations.push(format!(
                "write {} by {user}: {name} read complete, now at stage {current:?}: {description:?}",
                self.writes
            ));
        }
    }

    /// A stage misses its deadline no earlier than the deadline after the oracle first saw it
    /// reached in the run (holds only move a deadline later), by the oracle's own clock.
    fn check_deadline_timing(
        &mut self,
        p: &ClusterPromotion,
        run: Option<&Run>,
        user: &str,
        now: DateTime<Utc>,
    ) {
        let Some(run) = run else { return };
        let name = p.metadata.name.clone().unwrap_or_default();
        if let Some(stage) = p.status.as_ref().and_then(|s| s.current_stage_name.clone()) {
            self.reached_at
                .entry((name.clone(), run.since.clone(), stage))
                .or_insert(now);
        }
        let Some(f) = annotations::failed(p).filter(|f| f.run == *run && f.resumed.is_none())
        else {
            return;
        };
        let Some(limit) = promoter::settings::Settings::of(p)
            .deadline_for(&f.stage)
            .map(|d| d.after)
        else {
            return;
        };
        let key = (name.clone(), run.since.clone(), f.stage.clone());
        // Judged at the write that records the miss.
        if !self.misses.insert(key.clone()) {
            return;
        }
        if let Some(reached) = self.reached_at.get(&key)
            && now < *reached + limit
        {
            self.violations.push(format!(
                "write {} by {user}: {name} stage {} failed its deadline at {now}, reached at {reached}, deadline {}",
                self.writes, f.stage, f.deadline
            ));
        }
    }

    /// Issue 30, as the book's invariants state them:
    /// * a stage whose progress deadline its clock recorded as met (`promoter.dev/deadline-clock`
    ///   `metAt` for the run and stage) is never recorded as having missed it
    ///   (`promoter.dev/failed` for that run and stage);
    /// * every stored PromotionRevision of a promotion is named by its history, its current run
    ///   or its recorded rollback, unless a sweep is due (`promoter.dev/revision-sweep`).
    fn check_deadline_and_revisions(
        &mut self,
        store: &Store,
        p: &ClusterPromotion,
        run: Option<&Run>,
        user: &str,
    ) {
        let name = p.metadata.name.clone().unwrap_or_default();
        if let Some(run) = run {
            for stage in &p.spec.stages {
                let subject = annotations::Subject::Stage(stage.name.clone());
                if annotations::deadline_clock(p, run, &subject).is_some_and(|c| c.met_at.is_some())
                {
                    self.met
                        .insert((name.clone(), run.since.clone(), stage.name.clone()));
                }
            }
            if let Some(f) = annotations::failed(p).filter(|f| f.run == *run)
                && self
                    .met
                    .contains(&(name.clone(), run.since.clone(), f.stage.clone()))
            {
                self.violations.push(format!(
                    "write {} by {user}: {name} stage {} failed its progress deadline after meeting it",
                    self.writes, f.stage
                ));
            }
        }
        if annotations::sweep_due(p).is_some() {
            return;
        }
        let history = annotations::History::of(p);
        let mut named: std::collections::BTreeSet<String> = history
            .kept_revisions()
            .into_iter()
            .map(String::from)
            .collect();
        named.extend(run.map(|r| r.revision.clone()));
        named.extend(annotations::rollback(p).map(|r| r.to));
        for r in store.all(&promoter::fake::promotion_revision_type()) {
            if r["spec"]["promotion"] != name.as_str() {
                continue;
            }
            let revision = r["spec"]["revision"].as_str().unwrap_or_default();
            if !named.contains(revision) {
                self.violations.push(format!(
                    "write {} by {user}: PromotionRevision {} of {name} is named by nothing and no sweep is due",
                    self.writes, r["metadata"]["name"]
                ));
            }
        }
    }
}
