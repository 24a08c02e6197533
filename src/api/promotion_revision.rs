//! `PromotionRevision` (`promoter.dev/v1alpha1`, cluster-scoped): one revision of one
//! ClusterPromotion that completed its whole rollout, kept so that a rollback can restore it.
//!
//! Content-addressed: named `<promotion>-r<revision id>`, where the revision id is the first 10 hex
//! digits of SHA-256 of the status' base64 `profileSpecHash` text. A CRD rather than an annotation
//! because the profileSpec can be large (inline Helm values) and annotations share a 256 KiB limit
//! with `kubectl apply`'s last-applied copy; created only on completion, because "last known good"
//! means "completed the whole rollout".

use super::profile_spec::ProfileSpec;
use super::promotion::ClusterPromotion;
use super::sveltos::{SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL};
use super::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The label every revision of a promotion carries (its value: the promotion's name), what the
/// pass lists them by.
pub const PROMOTION_LABEL: &str = "promoter.dev/promotion";

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "promoter.dev",
    version = "v1alpha1",
    kind = "PromotionRevision",
    plural = "promotionrevisions",
    singular = "promotionrevision",
    shortname = "prev",
    category = "promoter",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct PromotionRevisionSpec {
    /// The ClusterPromotion this revision belongs to.
    #[schemars(length(min = 1))]
    pub promotion: String,
    /// The status' `profileSpecHash` of the run that completed (base64).
    #[schemars(length(min = 1))]
    pub revision: String,
    /// The status' `stagesHash` of that run.
    pub stages_hash: String,
    /// The tenant labels the generated profiles carried; may be empty.
    #[serde(default)]
    pub tenant_labels: BTreeMap<String, String>,
    /// The promotion's `spec.profileSpec` of that revision, verbatim.
    #[schemars(schema_with = "preserved_object")]
    pub profile_spec: ProfileSpec,
    /// When the run started (the first stage's `lastUpdateReconciledTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When its last stage completed.
    pub completed_at: Timestamp,
    /// Per stage (by name): the deployment hashes Sveltos reported for the stage's generated
    /// profile when the revision completed, so that a rollback to it is judged by content: a
    /// ClusterSummary carrying them runs it. Absent for a stage whose hashes were not read or
    /// were too many (values templated per cluster).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub feature_hashes: BTreeMap<String, StageHashes>,
}

/// The hashes Sveltos reported for one stage's generated profile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageHashes {
    /// The `promoter.dev/spec-hash` of the profile they are about.
    pub spec: String,
    /// Per feature (`Helm`, `Resources`, `Kustomize`): the distinct first characters of the
    /// `featureSummaries[].hash` its ClusterSummaries carried, sorted.
    pub features: BTreeMap<String, Vec<String>>,
}

/// An object kept as written: the API server prunes nothing inside it.
fn preserved_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// The first `digits` hex digits of `bytes`.
pub(crate) fn hex(bytes: &[u8], digits: usize) -> String {
    bytes
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(digits)
        .map(|n| char::from_digit(u32::from(n), 16).unwrap_or('0'))
        .collect()
}

/// The id users see (`revision 1a2b3c4d5e`): the first 10 hex digits of SHA-256 of the revision
/// hash text (stable, DNS-safe).
pub fn revision_id(revision_hash: &str) -> String {
    hex(&Sha256::digest(revision_hash.as_bytes()), 10)
}

/// The longest object name (a DNS-1123 subdomain).
const NAME_MAX: usize = 253;

/// `<promotion>-r<revision id>`; for a promotion name too long for that, a prefix of the name and
/// a digest of the whole name (as `annotations::stage_key` does), so every promotion has valid,
/// distinct revision names.
pub fn revision_name(promotion: &str, revision_hash: &str) -> String {
    let suffix = format!("-r{}", revision_id(revision_hash));
    if promotion.len() + suffix.len() <= NAME_MAX {
        return format!("{promotion}{suffix}");
    }
    let digest = hex(&Sha256::digest(promotion.as_bytes()), 8);
    let keep = NAME_MAX - suffix.len() - digest.len() - 1;
    let mut cut = keep.min(promotion.len());
    while !promotion.is_char_boundary(cut) {
        cut -= 1;
    }
    // A DNS label may not end with '-' or '.', and the digest starts a new part of the name.
    let prefix = promotion[..cut].trim_end_matches(['-', '.']);
    format!("{prefix}-{digest}{suffix}")
}

/// The tenant labels promoter copies from a promotion onto its generated profiles.
pub fn tenant_labels(p: &ClusterPromotion) -> BTreeMap<String, String> {
    let labels = p.metadata.labels.as_ref();
    [SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL]
        .iter()
        .filter_map(|k| Some((k.to_string(), labels?.get(*k)?.clone())))
        .collect()
}

impl PromotionRevision {
    /// The revision object of `p` as it is now (its spec's profileSpec and tenant labels), for the
    /// run with these hashes: named, labelled and owned by the promotion (so it goes with it).
    pub fn of(
        p: &ClusterPromotion,
        revision: &str,
        stages_hash: &str,
        started_at: Option<Timestamp>,
        completed_at: Timestamp,
    ) -> PromotionRevision {
        let promotion = p.metadata.name.clone().unwrap_or_default();
        let mut r = PromotionRevision::new(
            &revision_name(&promotion, revision),
            PromotionRevisionSpec {
                promotion: promotion.clone(),
                revision: revision.to_string(),
                stages_hash: stages_hash.to_string(),
                tenant_labels: tenant_labels(p),
                profile_spec: p.spec.profile_spec.clone().unwrap_or_default(),
                started_at,
                completed_at,
                feature_hashes: BTreeMap::new(),
            },
        );
        r.metadata.labels = Some(BTreeMap::from([(
            PROMOTION_LABEL.into(),
            promotion.clone(),
        )]));
        r.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "config.projectsveltos.io/v1beta1".into(),
            kind: "ClusterPromotion".into(),
            name: promotion,
            uid: p.metadata.uid.clone().unwrap_or_default(),
            ..Default::default()
        }]);
        r
    }

    /// The id users see (`revision_id` of the spec's revision).
    pub fn id(&self) -> String {
        revision_id(&self.spec.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::dns1123_subdomain_error;

    #[test]
    fn ids_are_ten_hex_digits_of_the_hash_text() {
        let id = revision_id("q1w2e3r4t5y6u7i8o9p0");
        assert_eq!(id.len(), 10);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(id, revision_id("q1w2e3r4t5y6u7i8o9p0"));
        assert_ne!(id, revision_id("q1w2e3r4t5y6u7i8o9p1"));
        // SHA-256("abc") = ba7816bf8f01cfea…
        assert_eq!(revision_id("abc"), "ba7816bf8f");
    }

    #[test]
    fn every_promotion_name_has_valid_distinct_revision_names() {
        assert_eq!(
            revision_name("kyverno-rollout-auto", "abc"),
            "kyverno-rollout-auto-rba7816bf8f"
        );
        let a = format!("{}a", "x".repeat(249));
        let b = format!("{}b", "x".repeat(249));
        let dotted = format!("{}.{}", "y".repeat(231), "z".repeat(20));
        for name in ["p", &"p".repeat(241), &"p".repeat(242), &a, &b, &dotted] {
            let n = revision_name(name, "abc");
            assert!(n.len() <= NAME_MAX, "{n}");
            assert_eq!(dns1123_subdomain_error(&n), None, "{n}");
            assert!(n.ends_with("-rba7816bf8f"));
        }
        assert_eq!(revision_name(&"p".repeat(241), "abc").len(), 253);
        assert_ne!(revision_name(&a, "abc"), revision_name(&b, "abc"));
    }

    #[test]
    fn the_object_of_a_promotion() {
        let p: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "app", "uid": "u-1", "labels": {
                "projectsveltos.io/serviceaccount-name": "t", "team": "x"}},
            "spec": {"profileSpec": {"syncMode": "Continuous", "unknownField": {"kept": 1}},
                     "stages": [{"name": "dev"}]}
        }))
        .unwrap();
        let at = Timestamp::parse("2026-02-16T06:00:00Z").unwrap();
        let r = PromotionRevision::of(&p, "abc", "st", None, at);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "promoter.dev/v1alpha1", "kind": "PromotionRevision",
                "metadata": {"name": "app-rba7816bf8f", "labels": {"promoter.dev/promotion": "app"},
                    "ownerReferences": [{"apiVersion": "config.projectsveltos.io/v1beta1",
                        "kind": "ClusterPromotion", "name": "app", "uid": "u-1"}]},
                "spec": {"promotion": "app", "revision": "abc", "stagesHash": "st",
                    "tenantLabels": {"projectsveltos.io/serviceaccount-name": "t"},
                    "profileSpec": {"syncMode": "Continuous", "unknownField": {"kept": 1}},
                    "completedAt": "2026-02-16T06:00:00Z"}
            })
        );
        assert_eq!(r.id(), "ba7816bf8f");
    }
}
