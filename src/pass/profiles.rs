//! The ClusterProfiles a promotion generates, exactly as upstream names, labels and owns them, and
//! whether an observed profile already is what promoter would write.

use crate::api::sveltos::{
    PROMOTION_NAME_LABEL, PROMOTION_VERIFICATION_LABEL, SERVICE_ACCOUNT_NAME_LABEL,
    SERVICE_ACCOUNT_NAMESPACE_LABEL, STAGE_NAME_ANNOTATION,
};
use crate::api::{ClusterProfile, ClusterPromotion, Stage};
use crate::sveltos::normal_form::{normalize, pruned_paths};
use base64::Engine;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Records the hash of the spec promoter wrote, so that a field removed from the profileSpec is
/// noticed even though the API server's defaulting adds fields of its own.
pub const SPEC_HASH_ANNOTATION: &str = "promoter.dev/spec-hash";

/// The UID of the promotion that generated the profile. It marks the profile as the promotion's
/// while the profile carries no owner reference (`preserveClusterProfilesOnDelete`), so that stale
/// stages are still removed and the profile is still recognised as generated.
pub const PROMOTION_UID_ANNOTATION: &str = "promoter.dev/promotion-uid";

#[derive(Clone, Debug, PartialEq)]
pub struct DesiredProfile {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `{apiVersion, kind, name, uid}` of the promotion, without `controller` or `blockOwnerDeletion`.
    pub owner: Value,
    /// Whether the profile carries that owner reference. Not while
    /// `preserveClusterProfilesOnDelete` is set: open-source Sveltos v1.14+ keeps a ClusterPromotion
    /// controller that, on delete with preserve set, removes the finalizer promoter also uses at
    /// once, and the garbage collector would then delete every owned profile before promoter's next
    /// pass could disown it. A profile that never has the reference cannot be collected.
    pub owned: bool,
    pub spec: Map<String, Value>,
}

pub fn profile_name(promotion: &str, stage: &str) -> String {
    format!("{promotion}-{stage}")
}

pub fn preverification_name(promotion: &str, stage: &str) -> String {
    format!("preverification-{promotion}-{stage}")
}

fn owner(p: &ClusterPromotion) -> Value {
    json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "name": p.metadata.name.clone().unwrap_or_default(),
        "uid": p.metadata.uid.clone().unwrap_or_default(),
    })
}

fn base_labels(p: &ClusterPromotion) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([(
        PROMOTION_NAME_LABEL.to_string(),
        p.metadata.name.clone().unwrap_or_default(),
    )]);
    // Tenant identity: profiles of a tenant's promotion deploy with the tenant's service account.
    for key in [SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL] {
        if let Some(v) = p.metadata.labels.as_ref().and_then(|l| l.get(key)) {
            labels.insert(key.to_string(), v.clone());
        }
    }
    labels
}

fn selector(stage: &Stage) -> Value {
    serde_json::to_value(stage.cluster_selector.clone().unwrap_or_default())
        .unwrap_or_else(|_| json!({}))
}

fn spec_hash(spec: &Map<String, Value>) -> String {
    let bytes = serde_json::to_vec(spec).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&bytes))
}

fn finish(
    name: String,
    labels: BTreeMap<String, String>,
    stage: &Stage,
    p: &ClusterPromotion,
    spec: Map<String, Value>,
) -> DesiredProfile {
    let annotations = BTreeMap::from([
        (STAGE_NAME_ANNOTATION.to_string(), stage.name.clone()),
        (SPEC_HASH_ANNOTATION.to_string(), spec_hash(&spec)),
        (
            PROMOTION_UID_ANNOTATION.to_string(),
            p.metadata.uid.clone().unwrap_or_default(),
        ),
    ]);
    DesiredProfile {
        name,
        labels,
        annotations,
        owner: owner(p),
        owned: !p.spec.preserve_cluster_profiles_on_delete.unwrap_or(false),
        spec,
    }
}

/// `<promotion>-<stage>`: the whole profileSpec (original list order) plus the stage's selector.
pub fn main_profile(p: &ClusterPromotion, stage: &Stage) -> DesiredProfile {
    let promotion = p.metadata.name.clone().unwrap_or_default();
    let mut spec = p.spec.profile_spec.clone().map(|s| s.0).unwrap_or_default();
    spec.insert("clusterSelector".into(), selector(stage));
    finish(
        profile_name(&promotion, &stage.name),
        base_labels(p),
        stage,
        p,
        spec,
    )
}

/// Whether a stage has a preverification profile: its trigger names a preHealthCheckDeployment.
pub fn has_preverification(stage: &Stage) -> bool {
    stage
        .trigger
        .as_ref()
        .and_then(|t| t.gates())
        .is_some_and(|g| !g.pre_health_check_deployment.is_empty())
}

/// `preverification-<promotion>-<stage>`: deploys the trigger's preHealthCheckDeployment.
pub fn preverification_profile(p: &ClusterPromotion, stage: &Stage) -> Option<DesiredProfile> {
    if !has_preverification(stage) {
        return None;
    }
    let gates = stage.trigger.as_ref()?.gates()?;
    let promotion = p.metadata.name.clone().unwrap_or_default();
    let mut spec = Map::new();
    spec.insert("syncMode".into(), json!("Continuous"));
    if let Some(ps) = &p.spec.profile_spec {
        for field in ["tier", "continueOnConflict", "continueOnError"] {
            if let Some(v) = ps.get(field) {
                spec.insert(field.into(), v.clone());
            }
        }
    }
    spec.insert("clusterSelector".into(), selector(stage));
    spec.insert(
        "policyRefs".into(),
        serde_json::to_value(gates.pre_health_check_deployment).unwrap_or(json!([])),
    );
    let mut labels = base_labels(p);
    labels.insert(PROMOTION_VERIFICATION_LABEL.into(), "true".into());
    Some(finish(
        preverification_name(&promotion, &stage.name),
        labels,
        stage,
        p,
        spec,
    ))
}

/// `desired` is contained in `observed`: every key it sets has the same value there, recursively,
/// so fields the API server defaulted (or another controller added) do not count as drift.
fn contained(desired: &Value, observed: &Value) -> bool {
    match (desired, observed) {
        (Value::Object(d), Value::Object(o)) => contained_map(d, o),
        (Value::Array(d), Value::Array(o)) => {
            d.len() == o.len() && d.iter().zip(o).all(|(a, b)| contained(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => desired == observed,
    }
}

/// [`contained`] for two objects, without wrapping (cloning) them into values.
fn contained_map(desired: &Map<String, Value>, observed: &Map<String, Value>) -> bool {
    desired
        .iter()
        .all(|(k, v)| observed.get(k).is_some_and(|ov| contained(v, ov)))
}

/// The value at a path as [`pruned_paths`] spells it (`a.b[0].c`).
fn value_at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for part in path.split('.') {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        cur = cur.get(key)?;
        for idx in indices.split(['[', ']']).filter(|x| !x.is_empty()) {
            cur = cur.get(idx.parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

impl DesiredProfile {
    /// Whether `observed` already carries this spec, labels, annotations and owner reference.
    pub fn is_applied(&self, observed: &ClusterProfile) -> bool {
        // Borrowed, not cloned: this runs for every reached stage of every promotion, every pass.
        let labels = observed.metadata.labels.as_ref();
        let annotations = observed.metadata.annotations.as_ref();
        let refs: Vec<_> = observed
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.kind == "ClusterPromotion" && r.name == self.owner["name"])
            .collect();
        let owner_right = if self.owned {
            refs.iter().any(|r| r.uid == self.owner["uid"])
        } else {
            refs.is_empty()
        };
        owner_right
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            && self
                .annotations
                .iter()
                .all(|(k, v)| annotations.and_then(|a| a.get(k)) == Some(v))
            && (contained_map(&self.spec, &observed.spec.fields)
                || self.pruned_fields(observed).is_some())
    }

    /// Whether `observed` carries this spec, whatever its metadata: by content, or by promoter's
    /// spec hash (a hand edit of a field keeps it). A profile that does not would bring its
    /// clusters another configuration when written.
    pub fn carries_spec(&self, observed: &ClusterProfile) -> bool {
        let hash = observed
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SPEC_HASH_ANNOTATION));
        (hash.is_some() && hash == self.annotations.get(SPEC_HASH_ANNOTATION))
            || contained_map(&self.spec, &observed.spec.fields)
    }

    /// Fields of this spec that the served ClusterProfile CRD pruned (an older Sveltos than the
    /// schema promoter writes for): the profile carries promoter's spec hash for exactly this spec,
    /// and differs from it, in normal form, only by fields it lacks. Rewriting it would only be
    /// pruned again, every pass; the fields are reported instead. Paths are those the
    /// profileSpec sets (defaults the older CRD does not know are not reported).
    /// `None` when the observed spec differs otherwise (it must be rewritten).
    pub fn pruned_fields(&self, observed: &ClusterProfile) -> Option<Vec<String>> {
        let hash_matches = observed
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SPEC_HASH_ANNOTATION))
            == self.annotations.get(SPEC_HASH_ANNOTATION);
        if !hash_matches {
            return None;
        }
        let desired = Value::Object(normalize(&self.spec));
        let seen = Value::Object(normalize(&observed.spec.fields));
        let paths = pruned_paths(&desired, &seen)?;
        let written = Value::Object(self.spec.clone());
        Some(
            paths
                .into_iter()
                .filter(|p| value_at(&written, p).is_some())
                .collect(),
        )
    }

    /// The paths of this spec that the served CRD dropped from `observed` (see [`Self::pruned_fields`]);
    /// empty when nothing was dropped. Cheap when the observed spec holds everything written.
    pub fn dropped_by_server(&self, observed: &ClusterProfile) -> Vec<String> {
        if contained(
            &Value::Object(self.spec.clone()),
            &Value::Object(observed.spec.fields.clone()),
        ) {
            return Vec::new();
        }
        self.pruned_fields(observed).unwrap_or_default()
    }

    /// The object to create.
    pub fn to_object(&self) -> ClusterProfile {
        let mut profile = ClusterProfile::new(
            &self.name,
            crate::api::ClusterProfileSpec {
                fields: self.spec.clone(),
            },
        );
        profile.metadata.labels = Some(self.labels.clone());
        profile.metadata.annotations = Some(self.annotations.clone());
        if self.owned {
            profile.metadata.owner_references = serde_json::from_value(json!([self.owner])).ok();
        }
        profile
    }

    /// `observed` updated to this desired state, keeping what others set: finalizers (Sveltos
    /// adds its own), other labels, annotations and owners, and the status.
    pub fn merged_into(&self, observed: &ClusterProfile) -> ClusterProfile {
        let mut out = observed.clone();
        out.spec.fields = self.spec.clone();
        out.metadata
            .labels
            .get_or_insert_default()
            .extend(self.labels.clone());
        out.metadata
            .annotations
            .get_or_insert_default()
            .extend(self.annotations.clone());
        let refs = out.metadata.owner_references.get_or_insert_default();
        // Drop a stale reference to an earlier promotion of the same name, then add ours.
        refs.retain(|r| !(r.kind == "ClusterPromotion" && r.name == self.owner["name"]));
        if self.owned
            && let Ok(ours) = serde_json::from_value(self.owner.clone())
        {
            refs.push(ours);
        }
        out
    }
}

/// Whether the profile is the promotion `name`'s: an owner reference to it (upstream does not
/// compare UIDs), or, for a profile kept without one (`preserveClusterProfilesOnDelete`), its
/// promotion label together with promoter's [`PROMOTION_UID_ANNOTATION`].
pub fn owned_by(profile: &ClusterProfile, promotion: &str) -> bool {
    has_owner_reference(profile, promotion)
        || (profile
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PROMOTION_NAME_LABEL))
            .is_some_and(|v| v == promotion)
            && profile
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(PROMOTION_UID_ANNOTATION)))
}

/// Whether the profile carries an owner reference to the promotion `name`.
pub fn has_owner_reference(profile: &ClusterProfile, promotion: &str) -> bool {
    profile
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.kind == "ClusterPromotion" && r.name == promotion)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion() -> ClusterPromotion {
        serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "kyverno", "uid": "u1", "labels": {"projectsveltos.io/serviceaccount-name": "eng",
                          "projectsveltos.io/serviceaccount-namespace": "team", "other": "x"}},
            "spec": {"profileSpec": {"tier": 90, "continueOnError": true, "syncMode": "Continuous",
                                     "helmCharts": [{"releaseName": "b"}, {"releaseName": "a"}]},
                     "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
                                 "trigger": {"auto": {"preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "d", "name": "job"}]}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn main_profile_as_upstream_plus_tenant_labels() {
        let p = promotion();
        let d = main_profile(&p, &p.spec.stages[0]);
        assert_eq!(d.name, "kyverno-dev");
        assert_eq!(
            d.labels["config.projectsveltos.io/promotionname"],
            "kyverno"
        );
        assert_eq!(d.labels["projectsveltos.io/serviceaccount-name"], "eng");
        assert!(!d.labels.contains_key("other"));
        assert_eq!(d.annotations["config.projectsveltos.io/stagename"], "dev");
        assert_eq!(
            d.owner,
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion", "name": "kyverno", "uid": "u1"})
        );
        assert_eq!(
            d.spec["clusterSelector"],
            json!({"matchLabels": {"env": "dev"}})
        );
        assert_eq!(
            d.spec["helmCharts"],
            json!([{"releaseName": "b"}, {"releaseName": "a"}]),
            "original order kept"
        );
        let obj = serde_json::to_value(d.to_object()).unwrap();
        assert!(
            obj["metadata"]["ownerReferences"][0]
                .get("controller")
                .is_none()
        );
    }

    #[test]
    fn preverification_profile_as_upstream() {
        let p = promotion();
        let d = preverification_profile(&p, &p.spec.stages[0]).unwrap();
        assert_eq!(d.name, "preverification-kyverno-dev");
        assert_eq!(
            d.labels["config.projectsveltos.io/promotion-verification"],
            "true"
        );
        assert_eq!(
            Value::Object(d.spec.clone()),
            json!({"syncMode": "Continuous", "tier": 90, "continueOnError": true,
                   "clusterSelector": {"matchLabels": {"env": "dev"}},
                   "policyRefs": [{"kind": "ConfigMap", "namespace": "d", "name": "job"}]})
        );
    }

    #[test]
    fn applied_tolerates_defaults_and_foreign_fields_but_not_drift() {
        let p = promotion();
        let d = main_profile(&p, &p.spec.stages[0]);
        let mut observed = d.to_object();
        assert!(d.is_applied(&observed));
        // The API server defaults fields; Sveltos adds its finalizer and a label.
        observed
            .spec
            .fields
            .insert("stopMatchingBehavior".into(), json!("WithdrawPolicies"));
        observed.spec.fields["helmCharts"][0]["helmChartAction"] = json!("Install");
        observed.metadata.finalizers =
            Some(vec!["clusterprofilefinalizer.projectsveltos.io".into()]);
        observed
            .metadata
            .labels
            .get_or_insert_default()
            .insert("x".into(), "y".into());
        assert!(d.is_applied(&observed));
        let mut drifted = observed.clone();
        drifted.spec.fields.insert("tier".into(), json!(50));
        assert!(!d.is_applied(&drifted));
        let merged = d.merged_into(&drifted);
        assert!(d.is_applied(&merged));
        assert_eq!(
            merged.metadata.finalizers, observed.metadata.finalizers,
            "others' finalizers kept"
        );
        assert_eq!(merged.metadata.labels.as_ref().unwrap()["x"], "y");
        // A different promotion UID (recreated promotion) is not our owner reference.
        let mut p2 = p.clone();
        p2.metadata.uid = Some("u2".into());
        let d2 = main_profile(&p2, &p2.spec.stages[0]);
        assert!(!d2.is_applied(&observed));
        assert_eq!(
            d2.merged_into(&observed)
                .metadata
                .owner_references
                .unwrap()
                .len(),
            1
        );
        // A field removed from the profileSpec changes the recorded hash.
        let mut p3 = p.clone();
        p3.spec
            .profile_spec
            .as_mut()
            .unwrap()
            .0
            .remove("continueOnError");
        assert!(!main_profile(&p3, &p3.spec.stages[0]).is_applied(&observed));
    }

    /// Lists are compared whole, element by element; numbers by value (`1` is `1.0`); objects
    /// only by the keys the desired one sets.
    #[test]
    fn contained_compares_lists_whole_and_numbers_by_value() {
        assert!(contained(
            &json!({"a": [1, {"b": 2}], "s": "x"}),
            &json!({"a": [1.0, {"b": 2, "c": 3}], "s": "x", "d": 4})
        ));
        assert!(!contained(&json!({"a": [1, 2]}), &json!({"a": [1]})));
        assert!(!contained(&json!({"a": [1]}), &json!({"a": [1, 2]})));
        assert!(!contained(&json!({"a": [1, 2]}), &json!({"a": [1, 3]})));
        assert!(!contained(&json!({"a": 1}), &json!({"a": 2})));
        assert!(!contained(&json!({"a": 1}), &json!({})));
        assert!(!contained(&json!({"s": "x"}), &json!({"s": "y"})));
        assert!(contained(&json!({}), &json!({"a": 1})));
    }

    /// Paths as `pruned_paths` spells them: keys joined by dots, list indices in brackets.
    #[test]
    fn value_at_follows_keys_and_indices() {
        let v = json!({"a": {"b": [{"c": 1}, {"c": 2, "d": [[5, 6]]}]}, "e": 3});
        assert_eq!(value_at(&v, "e"), Some(&json!(3)));
        assert_eq!(value_at(&v, "a.b[1].c"), Some(&json!(2)));
        assert_eq!(value_at(&v, "a.b[1].d[0][1]"), Some(&json!(6)));
        assert_eq!(
            value_at(&v, "a.b[1]"),
            Some(&json!({"c": 2, "d": [[5, 6]]}))
        );
        assert_eq!(value_at(&v, "a.b[2].c"), None);
        assert_eq!(value_at(&v, "a.x"), None);
        assert_eq!(value_at(&v, "a.b[x]"), None);
        assert_eq!(value_at(&v, "e.f"), None);
    }

    fn reference(kind: &str, name: &str, uid: &str) -> Value {
        json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": kind, "name": name, "uid": uid})
    }

    fn with_references(mut cp: ClusterProfile, refs: &[Value]) -> ClusterProfile {
        cp.metadata.owner_references = serde_json::from_value(Value::Array(refs.to_vec())).ok();
        cp
    }

    /// The owner reference applied is exactly this promotion's (its UID); another promotion's,
    /// or another kind's of the same name, is neither ours nor dropped.
    #[test]
    fn the_owner_reference_is_this_promotions_and_others_are_kept() {
        let p = promotion();
        let d = main_profile(&p, &p.spec.stages[0]);
        let bare = with_references(d.to_object(), &[]);
        let ours = reference("ClusterPromotion", "kyverno", "u1");
        let stale = reference("ClusterPromotion", "kyverno", "u0");
        let other_kind = reference("Application", "kyverno", "u1");
        let other_promotion = reference("ClusterPromotion", "other", "u1");
        assert!(!d.is_applied(&bare));
        assert!(!d.is_applied(&with_references(
            bare.clone(),
            std::slice::from_ref(&other_kind)
        )));
        assert!(!d.is_applied(&with_references(
            bare.clone(),
            std::slice::from_ref(&other_promotion)
        )));
        assert!(!d.is_applied(&with_references(bare.clone(), std::slice::from_ref(&stale))));
        assert!(d.is_applied(&with_references(
            bare.clone(),
            &[other_kind.clone(), ours.clone()]
        )));
        let merged = d.merged_into(&with_references(
            bare.clone(),
            &[other_kind.clone(), stale, other_promotion.clone()],
        ));
        assert_eq!(
            serde_json::to_value(&merged.metadata.owner_references).unwrap(),
            json!([other_kind, other_promotion, ours])
        );
    }

    /// With `preserveClusterProfilesOnDelete` the profile carries no reference to the promotion
    /// (its UID annotation marks it instead): one that has one is not applied, and the merge
    /// drops it, keeping the others.
    #[test]
    fn a_preserved_profile_carries_no_owner_reference_to_the_promotion() {
        let mut p = promotion();
        p.spec.preserve_cluster_profiles_on_delete = Some(true);
        let d = main_profile(&p, &p.spec.stages[0]);
        assert!(!d.owned);
        let created = d.to_object();
        assert_eq!(created.metadata.owner_references, None);
        assert!(d.is_applied(&created));
        let other_kind = reference("Application", "kyverno", "u1");
        assert!(d.is_applied(&with_references(
            created.clone(),
            std::slice::from_ref(&other_kind)
        )));
        let referenced = with_references(
            created.clone(),
            &[
                other_kind.clone(),
                reference("ClusterPromotion", "kyverno", "u1"),
            ],
        );
        assert!(!d.is_applied(&referenced));
        let merged = d.merged_into(&referenced);
        assert_eq!(
            serde_json::to_value(&merged.metadata.owner_references).unwrap(),
            json!([other_kind])
        );
        assert!(d.is_applied(&merged));
        assert!(owned_by(&merged, "kyverno"));
        assert!(!has_owner_reference(&merged, "kyverno"));
    }

    /// An owner reference to the promotion (any UID), or its label together with promoter's
    /// UID annotation; neither alone, nor another promotion's.
    #[test]
    fn a_profile_is_the_promotions_by_reference_or_by_label_and_uid_annotation() {
        let cp = |labels: Value, annotations: Value, refs: Value| -> ClusterProfile {
            serde_json::from_value(json!({
                "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                "metadata": {"name": "kyverno-dev", "labels": labels, "annotations": annotations,
                             "ownerReferences": refs},
                "spec": {}
            }))
            .unwrap()
        };
        let label = json!({PROMOTION_NAME_LABEL: "kyverno"});
        let uid = json!({PROMOTION_UID_ANNOTATION: "u1"});
        let referenced = cp(
            json!({}),
            json!({}),
            json!([reference("ClusterPromotion", "kyverno", "u9")]),
        );
        assert!(owned_by(&referenced, "kyverno"));
        assert!(has_owner_reference(&referenced, "kyverno"));
        assert!(!owned_by(&referenced, "other"));
        assert!(!has_owner_reference(&referenced, "other"));
        let other_kind = cp(
            json!({}),
            json!({}),
            json!([reference("Application", "kyverno", "u1")]),
        );
        assert!(!owned_by(&other_kind, "kyverno"));
        assert!(!has_owner_reference(&other_kind, "kyverno"));
        let marked = cp(label.clone(), uid.clone(), json!([]));
        assert!(owned_by(&marked, "kyverno"));
        assert!(!has_owner_reference(&marked, "kyverno"));
        assert!(!owned_by(&marked, "other"));
        assert!(!owned_by(&cp(label, json!({}), json!([])), "kyverno"));
        assert!(!owned_by(&cp(json!({}), uid, json!([])), "kyverno"));
    }

    /// A served CRD that prunes a field promoter writes: the profile, carrying promoter's hash
    /// of this very spec, differs only by the missing field; it counts as applied and the
    /// field is reported. Any other difference, or another spec's hash, is drift.
    #[test]
    fn a_field_the_served_crd_pruned_is_reported_not_rewritten() {
        let mut p = promotion();
        p.spec.profile_spec.as_mut().unwrap().0.insert(
            "driftExclusions".into(),
            json!([{"paths": ["/spec/replicas"]}]),
        );
        let d = main_profile(&p, &p.spec.stages[0]);
        let written = d.to_object();
        assert_eq!(d.pruned_fields(&written), Some(vec![]));
        assert!(d.dropped_by_server(&written).is_empty());
        let mut pruned = written.clone();
        pruned.spec.fields.remove("driftExclusions");
        assert_eq!(
            d.pruned_fields(&pruned),
            Some(vec!["driftExclusions".to_string()])
        );
        assert_eq!(d.dropped_by_server(&pruned), ["driftExclusions"]);
        assert!(d.is_applied(&pruned));
        // Pruned, and another field changed: rewritten.
        let mut changed = pruned.clone();
        changed.spec.fields.insert("tier".into(), json!(50));
        assert_eq!(d.pruned_fields(&changed), None);
        assert!(d.dropped_by_server(&changed).is_empty());
        assert!(!d.is_applied(&changed));
        // The hash of another spec: promoter did not write this one.
        let mut other_hash = pruned.clone();
        other_hash
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(SPEC_HASH_ANNOTATION.into(), "other".into());
        assert_eq!(d.pruned_fields(&other_hash), None);
        assert!(d.dropped_by_server(&other_hash).is_empty());
        assert!(!d.is_applied(&other_hash));
    }
}
