//! `promoter.dev/redeploy`: what promoter expects Sveltos to redeploy after it changed a generated
//! profile's spec, written in the guarded record patch of the pass that plans the write (before
//! the profile is written), so that stage completion knows whether the `Provisioned` a summary
//! shows is about the spec it carries ([`crate::pass::summaries`]).
//!
//! The value is a JSON object keyed by profile name; each entry names the profile write it is about
//! (the `promoter.dev/spec-hash` promoter wrote with it: an entry about another spec is not used),
//! what Sveltos redeploys for that change ([`crate::sveltos::redeploy`]), and, for the features it
//! redeploys, the hashes they carried on the profile's summaries when promoter wrote it (the first
//! [`HASH_PREFIX`] characters of each; at most [`MAX_BEFORE`] in all, else none are kept). A few
//! hundred bytes per stage in progress: entries of profiles the promotion no longer generates are
//! dropped whenever the record is written.

use super::{REDEPLOY, annotation};
use crate::api::ClusterPromotion;
use crate::sveltos::redeploy::{Expect, bit, ids};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many characters of a feature's hash are kept (72 bits of its base64).
pub const HASH_PREFIX: usize = 12;
/// At most this many hashes are kept for one profile: a fleet whose summaries all differ (values
/// templated per cluster) keeps none, and its stages are judged by the API server's times.
pub const MAX_BEFORE: usize = 64;

/// The first [`HASH_PREFIX`] characters of a feature's hash; None when it is shorter.
pub type HashPrefix = [u8; HASH_PREFIX];

pub fn prefix(hash: &str) -> Option<HashPrefix> {
    hash.as_bytes().get(..HASH_PREFIX)?.try_into().ok()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum ExpectText {
    Word(String),
    Features(Vec<String>),
}

/// One profile write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redeploy {
    /// The `promoter.dev/spec-hash` written with the profile.
    pub spec: String,
    expect: ExpectText,
    /// Per expected feature, the hash prefixes its summaries carried before the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    before: Option<BTreeMap<String, Vec<String>>>,
    /// A summary showed no status of the spec before this one when promoter wrote it
    /// (see [`crate::pass::summaries::Freshness`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsettled: bool,
}

/// The hashes features carried before a write, per feature bit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Before(Vec<(u8, HashPrefix)>);

impl Before {
    pub fn insert(&mut self, feature: u8, hash: HashPrefix) {
        if !self.0.contains(&(feature, hash)) {
            self.0.push((feature, hash));
        }
    }

    /// [`Self::insert`] when there is a hash.
    pub fn extend(&mut self, feature: u8, hash: Option<HashPrefix>) {
        if let Some(h) = hash {
            self.insert(feature, h);
        }
    }

    pub fn contains(&self, feature: u8, hash: &HashPrefix) -> bool {
        self.0.iter().any(|(f, h)| *f == feature && h == hash)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Per feature id, the hashes as text, sorted: how records keep them.
    pub fn by_feature(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (f, h) in &self.0 {
            for id in ids(*f) {
                out.entry(id.to_string())
                    .or_default()
                    .push(String::from_utf8_lossy(h).into_owned());
            }
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    /// [`Self::by_feature`] read back (a hash too short to be one is left out).
    pub fn from_by_feature(kept: &BTreeMap<String, Vec<String>>) -> Before {
        let mut out = Before::default();
        for (id, hashes) in kept {
            for h in hashes.iter().filter_map(|h| prefix(h)) {
                out.insert(bit(id), h);
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Redeploy {
    pub fn new(spec: &str, expect: &Expect, before: Option<&Before>) -> Redeploy {
        let expect = match expect {
            Expect::Nothing => ExpectText::Word("nothing".into()),
            Expect::Unknown => ExpectText::Word("unknown".into()),
            Expect::Features(bits) => ExpectText::Features(ids(*bits).map(String::from).collect()),
        };
        let before = before
            .filter(|b| b.len() <= MAX_BEFORE)
            .map(Before::by_feature);
        Redeploy {
            spec: spec.to_string(),
            expect,
            before,
            unsettled: false,
        }
    }

    /// The record of a write made while a summary showed no status of the spec before it.
    pub fn unsettled(mut self, unsettled: bool) -> Redeploy {
        self.unsettled = unsettled;
        self
    }

    /// What the write makes Sveltos redeploy; a value promoter does not know is [`Expect::Unknown`].
    pub fn expect(&self) -> Expect {
        match &self.expect {
            ExpectText::Word(w) if w == "nothing" => Expect::Nothing,
            ExpectText::Features(f) if !f.is_empty() => {
                let bits = f.iter().map(|id| bit(id)).fold(0, |a, b| a | b);
                if bits == 0 {
                    Expect::Unknown
                } else {
                    Expect::Features(bits)
                }
            }
            _ => Expect::Unknown,
        }
    }

    /// The hashes before the write, when they were kept.
    pub fn before(&self) -> Option<Before> {
        self.before.as_ref().map(Before::from_by_feature)
    }
}

/// The records, by profile name (an undecodable value: none).
pub fn redeploys(p: &ClusterPromotion) -> BTreeMap<String, Redeploy> {
    annotation(p, REDEPLOY)
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default()
}

/// The annotation's new value: `current`'s entries with `written` put over them, keeping only the
/// profiles in `generated`.
pub fn merged(
    current: &ClusterPromotion,
    written: &[(String, Redeploy)],
    generated: &[String],
) -> String {
    let mut all = redeploys(current);
    for (profile, r) in written {
        all.insert(profile.clone(), r.clone());
    }
    all.retain(|profile, _| generated.contains(profile));
    serde_json::to_string(&all).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_record_round_trips_and_too_many_hashes_keep_none() {
        let mut before = Before::default();
        before.insert(bit("Helm"), *b"AAAAAAAAAAAA");
        before.insert(bit("Helm"), *b"AAAAAAAAAAAA");
        before.insert(bit("Resources"), *b"BBBBBBBBBBBB");
        let r = Redeploy::new(
            "h",
            &Expect::Features(bit("Helm") | bit("Resources")),
            Some(&before),
        );
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"spec": "h", "expect": ["Helm", "Resources"],
                   "before": {"Helm": ["AAAAAAAAAAAA"], "Resources": ["BBBBBBBBBBBB"]}})
        );
        let back: Redeploy = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back.expect(),
            Expect::Features(bit("Helm") | bit("Resources"))
        );
        assert_eq!(back.before(), Some(before));
        // Exactly MAX_BEFORE hashes are all kept; one more and none are.
        let mut many = Before::default();
        for i in 0..MAX_BEFORE {
            many.insert(bit("Helm"), prefix(&format!("{i:012}")).unwrap());
        }
        let kept = Redeploy::new("h", &Expect::Features(1), Some(&many)).before();
        assert_eq!(kept.map(|b| b.len()), Some(MAX_BEFORE));
        many.insert(bit("Helm"), prefix(&format!("{MAX_BEFORE:012}")).unwrap());
        assert_eq!(
            Redeploy::new("h", &Expect::Features(1), Some(&many)).before(),
            None
        );
        for (expect, text) in [
            (Expect::Nothing, "\"nothing\""),
            (Expect::Unknown, "\"unknown\""),
        ] {
            let r = Redeploy::new("h", &expect, None);
            assert!(serde_json::to_string(&r).unwrap().contains(text));
            assert_eq!(r.expect(), expect);
        }
        let odd: Redeploy =
            serde_json::from_value(json!({"spec": "h", "expect": "later"})).unwrap();
        assert_eq!(odd.expect(), Expect::Unknown);
        assert!(!odd.unsettled);
        let busy = Redeploy::new("h", &Expect::Nothing, None).unsettled(true);
        let text = serde_json::to_value(&busy).unwrap();
        assert_eq!(text["unsettled"], json!(true));
        assert!(serde_json::from_value::<Redeploy>(text).unwrap().unsettled);
    }

    #[test]
    fn before_is_empty_until_a_hash_is_kept() {
        let mut before = Before::default();
        assert!(before.is_empty());
        before.extend(bit("Helm"), None);
        assert!(before.is_empty());
        before.extend(bit("Helm"), prefix("AAAAAAAAAAAA"));
        assert!(!before.is_empty());
        assert_eq!(before.len(), 1);
    }

    #[test]
    fn a_feature_named_twice_is_expected_once() {
        let twice: Redeploy =
            serde_json::from_value(json!({"spec": "h", "expect": ["Helm", "Helm"]})).unwrap();
        assert_eq!(twice.expect(), Expect::Features(bit("Helm")));
    }
}
