//! The fingerprint of a state: equal for states no step of the model can tell apart, so that the
//! explorer visits each once. What is left out or renamed, and why that is sound:
//!
//! * **resourceVersions and UIDs** are only ever compared for equality, and the store never hands
//!   out an old value again. So a pass's copy of an object (what it listed, the promotion its last
//!   write returned) keeps only whether they are the stored object's current ones or not, and the
//!   stored objects' own values are left out, with `generation` (never read by promoter; it counts
//!   spec changes, so it would grow without bound), `creationTimestamp` (read only by the claims
//!   of overlapping promotions, which are all created at the start here) and
//!   `managedFields`: of these, stage completion reads a summary's spec and status write times
//!   (when no `promoter.dev/redeploy` record with previous hashes decides, or the write was
//!   unsettled), so a summary keeps what it reads of them as `written` ([`written`]).
//! * **Timestamps** (status fields, descriptions, records, the grant's run) matter to a decision
//!   only by how far they are from "now" within the delay ([`horizon`]; every other comparison is
//!   with a later epoch, a whole step later), and by the equality of runs (a run's `since`, in the
//!   status, the grants and the completion record). Otherwise an old timestamp is only copied from
//!   the observed status into the new one, and whether a status changed does not depend on its
//!   value. No decision orders two recorded times against each other: they may be stamped by two
//!   passes' clocks (whether a recorded miss is shown is judged by the failed stage's
//!   failureMessage, not by its lastStatusCheckTime against the miss's `at`, s40b), so merging
//!   states that differ only in the order of two old times is sound. So times within the horizon
//!   of now are kept as their offset from now, old `since`s as their rank among the old `since`s,
//!   every other old time as "old"; the epoch itself only as where it is in the window's period
//!   (hourly: even epochs open, odd ones closed). So the clock ticks forever over finitely many
//!   states.
//! * The clusters never change and are left out.
//!
//! Each object is serialised once (`memo`): its text between timestamps is hashed into segments,
//! and a state's fingerprint folds the segments with the timestamps' names. Segments are 128-bit
//! (two SipHash lanes), and so is the fold: a collision among 10^9 states has odds of about 10^-20.

use super::ghost::Ghost;
use super::memo::ArcMemo;
use super::setup::{at, horizon, step};
use super::state::{Acting, Pass, State, Work};
use chrono::DateTime;
use promoter::annotations::Run;
use promoter::api::ClusterSummary;
use promoter::fake::{
    Store, cluster_profile_type, cluster_promotion_type, cluster_summary_type,
    promotion_freeze_type, promotion_revision_type,
};
use promoter::pass::Decision;
use promoter::pass::decision::RecordOp;
use promoter::pass::summaries::{spec_written, status_written};
use promoter::pass::write_plan::{self, PlannedWrite, WriteKind};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The shape of a timestamp as the API server and promoter write them (`d` a digit).
const STAMP: &[u8; 20] = b"dddd-dd-ddTdd:dd:ddZ";

/// The byte ranges of the timestamps in `s`, leftmost first and not overlapping (what the regex
/// `[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z` finds): a scan of the text, not a
/// regex engine (the model's texts are serialised for every new object).
fn stamps_in(s: &[u8]) -> Vec<(usize, usize)> {
    let fits = |at: usize| {
        s.get(at..at + STAMP.len()).is_some_and(|w| {
            w.iter().zip(STAMP).all(|(c, p)| {
                if *p == b'd' {
                    c.is_ascii_digit()
                } else {
                    c == p
                }
            })
        })
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i + STAMP.len() <= s.len() {
        // Every match has its `T` 10 bytes in: look there first.
        if s[i + 10] == b'T' && fits(i) {
            out.push((i, i + STAMP.len()));
            i += STAMP.len();
        } else {
            i += 1;
        }
    }
    out
}

const DROPPED: [&str; 5] = [
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
];

/// An object's text as segments between its timestamps.
#[derive(Clone, Debug, Default)]
struct Text {
    segments: Vec<u128>,
    /// Seconds since the epoch of each timestamp, between the segments.
    stamps: Vec<i64>,
    /// The timestamps that identify a run (see [`identities`]).
    identities: Vec<i64>,
}

fn seconds(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|d| d.timestamp())
}

/// The `since` of every run a promotion names: its status' (the first stage entry's
/// `lastUpdateReconciledTime`, see `Run::of`), and every `promoter.dev/` record's (grants,
/// completion, failure, abort, rollback, history). These are the only timestamps whose equality a
/// decision looks at.
fn identities(v: &Value) -> Vec<i64> {
    let mut out = Vec::new();
    if let Some(t) = v
        .pointer("/status/stages/0/lastUpdateReconciledTime")
        .and_then(Value::as_str)
        .and_then(seconds)
    {
        out.push(t);
    }
    for (key, value) in v
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if !key.starts_with("promoter.dev/") {
            continue;
        }
        let record: Value = value
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        // A record names a run by its `since` (grants, completion, failure, abort: `run`; a
        // rollback: `from`); the history names each run by its `startedAt`.
        record_identities(&record, &mut out);
    }
    out
}

/// The run identities a record names (see [`identities`]).
fn record_identities(record: &Value, out: &mut Vec<i64>) {
    let entries = match record {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for entry in entries {
        for pointer in ["/since", "/run/since", "/from/since", "/startedAt"] {
            if let Some(t) = entry
                .pointer(pointer)
                .and_then(Value::as_str)
                .and_then(seconds)
            {
                out.push(t);
            }
        }
    }
}

/// A 128-bit hash (two SipHash lanes) of bytes or of any hashable value.
fn hash128<T: Hash + ?Sized>(t: &T) -> u128 {
    let mut a = std::collections::hash_map::DefaultHasher::new();
    let mut b = std::collections::hash_map::DefaultHasher::new();
    0xa5u8.hash(&mut b);
    t.hash(&mut a);
    t.hash(&mut b);
    ((a.finish() as u128) << 64) | b.finish() as u128
}

fn text_of(v: &Value) -> Text {
    let s = serde_json::to_string(v).unwrap_or_default();
    let mut t = Text::default();
    let mut last = 0;
    for (start, end) in stamps_in(s.as_bytes()) {
        t.segments.push(hash128(&s.as_bytes()[last..start]));
        t.stamps.push(seconds(&s[start..end]).unwrap_or_default());
        last = end;
    }
    t.segments.push(hash128(&s.as_bytes()[last..]));
    t.identities = identities(v);
    t
}

/// A stored object without what the fingerprint leaves out.
fn stripped(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in DROPPED {
            m.remove(k);
        }
        // Summaries' owner references name the profile's uid.
        if obj.get("kind") == Some(&json!("ClusterSummary")) {
            m.remove("ownerReferences");
            m.insert("written".into(), written(obj));
        }
    }
    v
}

/// What stage completion reads of a summary's `managedFields` (left out with them): when its spec
/// was written (a timestamp, named as every other), and whether its last status write came
/// before, in the same second as, or after it. Read only of a summary whose features are all
/// `Provisioned` (`Summary::provisioned` looks no further otherwise).
fn written(obj: &Value) -> Value {
    let provisioned = obj
        .pointer("/status/featureSummaries")
        .and_then(Value::as_array)
        .is_some_and(|fs| fs.iter().all(|f| f["status"] == "Provisioned"));
    if !provisioned {
        return Value::Null;
    }
    let Ok(cs) = serde_json::from_value::<ClusterSummary>(obj.clone()) else {
        return Value::Null;
    };
    let spec = spec_written(&cs);
    let order = match (spec, status_written(&cs)) {
        (Some(a), Some(b)) => format!("{:?}", b.cmp(&a)),
        (a, b) => format!("{}{}", a.is_some(), b.is_some()),
    };
    let spec = spec
        .and_then(|t| DateTime::from_timestamp(t, 0))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    json!({"spec": spec, "status": order})
}

thread_local! {
    static STORED: RefCell<ArcMemo<Value, Arc<Text>>> = RefCell::default();
    static WRITES: RefCell<ArcMemo<Vec<PlannedWrite>, Arc<Text>>> = RefCell::default();
    static PLANS: RefCell<ArcMemo<Vec<Decision>, Arc<Vec<PlannedWrite>>>> = RefCell::default();
    /// A ghost's text, per ghost (states share it until a step changes it, see `State::ghost`).
    static GHOSTS: RefCell<ArcMemo<Ghost, Arc<Text>>> = RefCell::default();
}

fn stored_text(v: &Arc<Value>) -> Arc<Text> {
    STORED.with(|m| {
        m.borrow_mut()
            .get(v, 0, |v| Arc::new(text_of(&stripped(v))))
    })
}

/// Whether a pass's copy carries the stored object's resourceVersion and uid (two bits).
fn held_flags(store: &Store, obj: &Value) -> u128 {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let live = match obj.get("kind").and_then(Value::as_str) {
        Some("ClusterPromotion") => store.peek(&cluster_promotion_type(), "", name),
        Some("ClusterProfile") => store.peek(&cluster_profile_type(), "", name),
        _ => return 0,
    };
    let mut flags = 0;
    for (bit, field) in [(1, "/metadata/resourceVersion"), (2, "/metadata/uid")] {
        let mine = obj.pointer(field);
        if mine.is_some() && live.and_then(|l| l.pointer(field)) == mine {
            flags |= bit;
        }
    }
    flags
}

/// What a state is made of, in a fixed order: tags, texts, and per-state values.
enum Item {
    Tag(u128),
    Text(Arc<Text>),
    Stamp(i64),
}

/// What a pass listed: the objects (listed objects are stored ones, see `state::Objects`) and
/// whether each is still the stored one.
fn push_list(items: &mut Vec<Item>, store: &Store, list: &[Arc<Value>]) {
    items.push(Item::Tag(list.len() as u128 | 1 << 100));
    for obj in list {
        items.push(Item::Text(stored_text(obj)));
        items.push(Item::Tag(held_flags(store, obj)));
    }
}

/// A pass that decided is what it will still do: the rest of its writes (not what it listed, so
/// that passes that listed different worlds but write the same are one state), and for a promotion
/// whose profiles it will read again before acting (`Prepare`), what it decides from.
fn push_acting(items: &mut Vec<Item>, store: &Store, a: &Acting) {
    let observation = |items: &mut Vec<Item>| {
        items.push(Item::Stamp(at(a.now).timestamp()));
        push_list(items, store, &a.promotions);
        push_list(items, store, &a.profiles);
        push_list(items, store, &a.summaries);
        push_list(items, store, &a.fetched);
    };
    items.push(Item::Tag(a.index as u128 | 14 << 96));
    match &a.work {
        Work::Prepare => {
            items.push(Item::Tag(15 << 96));
            observation(items);
        }
        Work::Writing {
            writes,
            at,
            current_json,
            ..
        } => {
            items.push(Item::Tag(16 << 96));
            for i in *at..writes.len() {
                push_write(items, store, writes, i);
            }
            items.push(Item::Text(stored_text(current_json)));
            items.push(Item::Tag(held_flags(store, current_json)));
        }
    }
    let mut needs_observation = false;
    for i in a.index + 1..a.decisions.len() {
        let d = &a.decisions[i];
        if !super::state::acts(d) {
            continue;
        }
        items.push(Item::Tag(i as u128 | 17 << 96));
        if a.needs_prepare(i) {
            needs_observation = true;
            continue;
        }
        let plan = PLANS.with(|m| {
            m.borrow_mut().get(&a.decisions, i, |d| {
                Arc::new(write_plan::plan(&d[i], &a.world))
            })
        });
        for w in 0..plan.len() {
            push_write(items, store, &plan, w);
        }
    }
    if needs_observation {
        items.push(Item::Tag(18 << 96));
        observation(items);
    }
}

/// One planned write: its text (without the resourceVersion and uid preconditions of the
/// profile it writes) and whether those are the stored profile's.
fn push_write(items: &mut Vec<Item>, store: &Store, plan: &Arc<Vec<PlannedWrite>>, i: usize) {
    items.push(Item::Text(WRITES.with(|m| {
        m.borrow_mut().get(plan, i, |p| Arc::new(write_text(&p[i])))
    })));
    let profile = cluster_profile_type();
    let live = |name: &str, field: &str| {
        store
            .peek(&profile, "", name)
            .and_then(|l| l.pointer(field))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let flags: u128 = match &plan[i].kind {
        WriteKind::ReplaceProfile(body) => {
            let name = body.metadata.name.clone().unwrap_or_default();
            (live(&name, "/metadata/resourceVersion") == body.metadata.resource_version) as u128
        }
        WriteKind::DeleteProfile { name, uid } => {
            (uid.is_some() && live(name, "/metadata/uid") == *uid) as u128
        }
        WriteKind::DisownProfile { name, patch } => {
            (live(name, "/metadata/resourceVersion").as_deref()
                == patch
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)) as u128
        }
        _ => 0,
    };
    items.push(Item::Tag(flags | 19 << 96));
}

/// Metadata without what the fingerprint leaves out (see [`DROPPED`]).
fn unstamped(m: &mut kube::api::ObjectMeta) {
    m.resource_version = None;
    m.uid = None;
    m.generation = None;
    m.creation_timestamp = None;
    m.managed_fields = None;
}

fn write_text(w: &PlannedWrite) -> Text {
    let mut w = w.clone();
    let mut ids = Vec::new();
    let mut stamps = Vec::new();
    match &mut w.kind {
        WriteKind::CreateProfile(body) | WriteKind::ReplaceProfile(body) => {
            unstamped(&mut body.metadata);
        }
        WriteKind::DeleteProfile { uid, .. } => *uid = None,
        WriteKind::DisownProfile { patch, .. } => {
            if let Some(m) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
        WriteKind::Status(status) => ids.extend(Run::of(status).map(|r| r.since)),
        WriteKind::Records(ops) => {
            for op in ops {
                match op {
                    RecordOp::ConsumeApproval { grant, .. } => ids.push(grant.run.since.clone()),
                    RecordOp::Complete(run) => ids.push(run.since.clone()),
                    RecordOp::History(h) => record_identities(&json!(h.0), &mut stamps),
                    RecordOp::Failed(f) => record_identities(&json!(f), &mut stamps),
                    RecordOp::Rollback(r) => record_identities(&json!(r), &mut stamps),
                    RecordOp::Clock(c) => record_identities(&json!(c), &mut stamps),
                    _ => {}
                }
            }
        }
        WriteKind::StoreRevision(body) => {
            unstamped(&mut body.metadata);
        }
        WriteKind::Finalizer { .. } | WriteKind::Nothing => {}
    }
    let mut t = text_of(&Value::String(format!("{:?}", w.kind)));
    t.identities = ids.iter().filter_map(|x| seconds(x)).collect();
    t.identities.extend(stamps);
    t
}

fn mix(h: &mut (u64, u64), x: u128) {
    let (lo, hi) = (x as u64, (x >> 64) as u64);
    h.0 = (h.0 ^ lo)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(31)
        ^ hi;
    h.1 = (h.1 ^ hi)
        .wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        .rotate_left(29)
        ^ lo.rotate_left(17);
    h.0 = h.0.wrapping_add(h.1);
}

pub fn fingerprint(s: &State) -> u128 {
    let mut items: Vec<Item> = Vec::new();
    for (tag, rt) in [
        (1u128, cluster_promotion_type()),
        (2, cluster_profile_type()),
        (3, cluster_summary_type()),
        (4, promotion_revision_type()),
        (5, promotion_freeze_type()),
    ] {
        items.push(Item::Tag(tag << 96));
        for obj in s.store.stored(&rt) {
            items.push(Item::Text(stored_text(obj)));
        }
    }
    for p in &s.passes {
        match p {
            Pass::Idle => items.push(Item::Tag(10 << 96)),
            Pass::Observing { now, listed } => {
                items.push(Item::Tag(11 << 96));
                items.push(Item::Stamp(at(*now).timestamp()));
                push_list(&mut items, &s.store, &listed.promotions);
                match &listed.profiles {
                    Some(profiles) => push_list(&mut items, &s.store, profiles),
                    None => items.push(Item::Tag(12 << 96)),
                }
            }
            Pass::Acting(a) => {
                items.push(Item::Tag(13 << 96));
                push_acting(&mut items, &s.store, a);
            }
        }
    }
    let period = (chrono::Duration::hours(1).num_seconds() / step().num_seconds()).max(1) as u32;
    items.push(Item::Tag(u128::from(s.epoch % period) | 20 << 96));
    items.push(Item::Tag(hash128(&s.budget)));
    items.push(Item::Text(GHOSTS.with(|m| {
        m.borrow_mut()
            .get(&s.ghost, 0, |g| Arc::new(text_of(&json!(g))))
    })));

    // Timestamps by their names (see the module's docs).
    let now = at(s.epoch).timestamp();
    let edge = now - horizon().num_seconds();
    let mut old: BTreeSet<i64> = BTreeSet::new();
    for item in &items {
        if let Item::Text(t) = item {
            old.extend(t.identities.iter().filter(|x| **x < edge));
        }
    }
    for g in &s.ghost.promotions {
        if let Some(t) = g.approval.grant.as_ref().and_then(|r| seconds(&r.since))
            && t < edge
        {
            old.insert(t);
        }
    }
    let old: Vec<i64> = old.into_iter().rev().collect();
    let name = |x: i64| -> u128 {
        if x >= edge {
            (x - now) as u64 as u128
        } else {
            match old.iter().position(|o| *o == x) {
                Some(rank) => (1 << 120) | rank as u128,
                None => 2 << 120,
            }
        }
    };
    let mut h = (0x243F_6A88_85A3_08D3u64, 0x1319_8A2E_0370_7344u64);
    for item in &items {
        match item {
            Item::Tag(x) => mix(&mut h, *x),
            Item::Stamp(x) => mix(&mut h, name(*x) | 1 << 110),
            Item::Text(t) => {
                for (i, seg) in t.segments.iter().enumerate() {
                    mix(&mut h, *seg);
                    if let Some(x) = t.stamps.get(i) {
                        mix(&mut h, name(*x));
                    }
                }
            }
        }
    }
    ((h.0 as u128) << 64) | h.1 as u128
}

#[cfg(test)]
mod tests {
    /// The scan finds what the regex it replaced finds, where it finds it.
    #[test]
    fn the_timestamp_scan_is_the_regex() {
        let regex = regex::Regex::new(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
            .unwrap_or_else(|_| unreachable!());
        for text in [
            "",
            "2026-11-27T10:00:00Z",
            r#"{"a":"2026-11-27T10:00:00Z","b":"x2026-11-27T10:00:00Zy"}"#,
            "12026-11-27T10:00:00Z2026-11-27T10:00:01ZZ",
            "2026-11-27T10:00:00Z2026-11-27T10:00:01Z",
            "2026-11-27T10:00:0Z 2026-11-27 10:00:00Z 2026-11-27T10:00:00+00:00",
            "2026-11-27T10:00:00",
            "T2026-11-27TT10:00:00Z 9999-99-99T99:99:99Z",
        ] {
            let want: Vec<(usize, usize)> = regex
                .find_iter(text)
                .map(|m| (m.start(), m.end()))
                .collect();
            assert_eq!(super::stamps_in(text.as_bytes()), want, "{text}");
        }
    }

    /// A summary's spec time is named like every other timestamp: exactly within the horizon,
    /// else "old". That tells the grace apart only while the horizon is the grace.
    #[test]
    fn the_horizon_is_the_grace() {
        assert_eq!(
            super::horizon(),
            promoter::pass::summaries::STALE_PROVISIONED_GRACE
        );
    }
}
