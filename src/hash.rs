//! The two hashes that decide a restart: of the profileSpec (with upstream's list normalisation, so
//! reordering a list does not restart) and of the stages' names and selectors (not triggers, so an
//! approval does not restart). Stored base64-encoded in status, as upstream's `[]byte`.

use crate::api::{ProfileSpec, Stage};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn digest(v: &Value) -> String {
    // serde_json's map is ordered by key, so the serialisation is canonical.
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&bytes))
}

fn field(v: &Value, name: &str) -> String {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn sort_list(
    spec: &mut serde_json::Map<String, Value>,
    name: &str,
    key: impl Fn(&Value) -> Vec<String>,
) {
    if let Some(Value::Array(items)) = spec.get_mut(name) {
        items.sort_by_key(|item| key(item));
    }
}

/// Upstream's normalisation: these lists are sorted (in a copy) before hashing.
pub fn profile_spec_hash(spec: Option<&ProfileSpec>) -> String {
    let mut m = spec.map(|s| s.0.clone()).unwrap_or_default();
    sort_list(&mut m, "helmCharts", |v| {
        vec![
            field(v, "repositoryURL"),
            field(v, "releaseNamespace"),
            field(v, "releaseName"),
        ]
    });
    for list in ["kustomizationRefs", "policyRefs"] {
        sort_list(&mut m, list, |v| {
            vec![field(v, "kind"), field(v, "namespace"), field(v, "name")]
        });
    }
    sort_list(&mut m, "dependsOn", |v| {
        vec![v.as_str().unwrap_or_default().to_string()]
    });
    sort_list(&mut m, "templateResourceRefs", |v| {
        vec![field(v, "identifier")]
    });
    sort_list(&mut m, "validateHealths", |v| vec![field(v, "name")]);
    sort_list(&mut m, "patches", |v| vec![field(v, "patch")]);
    sort_list(&mut m, "driftExclusions", |v| {
        let mut paths: Vec<String> = v
            .get("paths")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(String::from))
            .collect();
        paths.sort();
        let t = v.get("target").cloned().unwrap_or(Value::Null);
        let target: Vec<String> = ["group", "version", "kind", "namespace", "name"]
            .iter()
            .map(|f| field(&t, f))
            .collect();
        vec![format!("{}\u{1}{}", paths.join("\0"), target.join("\0"))]
    });
    digest(&Value::Object(m))
}

pub fn stages_hash(stages: &[Stage]) -> String {
    let items: Vec<Value> = stages
        .iter()
        .map(|s| json!({"name": s.name, "clusterSelector": s.cluster_selector.clone().unwrap_or_default()}))
        .collect();
    digest(&Value::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(v: Value) -> Vec<Stage> {
        serde_json::from_value(v).unwrap()
    }

    // Upstream unit cases 2-5 (reference §5).
    #[test]
    fn stages_hash_is_order_sensitive_and_ignores_triggers() {
        let base = json!([
            {"name": "s1", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"manual": {"approved": false}}},
            {"name": "s2", "clusterSelector": {"matchLabels": {"env": "prod"}}}
        ]);
        let h = stages_hash(&stages(base.clone()));
        assert_eq!(h.len(), 44, "base64 of a sha256");
        let mut swapped = base.clone();
        swapped.as_array_mut().unwrap().reverse();
        assert_ne!(
            stages_hash(&stages(swapped)),
            h,
            "reordering stages changes the hash"
        );
        let mut approved = base.clone();
        approved[0]["trigger"]["manual"]["approved"] = json!(true);
        assert_eq!(
            stages_hash(&stages(approved)),
            h,
            "trigger changes are not included"
        );
        let mut reselected = base.clone();
        reselected[0]["clusterSelector"]["matchLabels"]["env"] = json!("qa");
        assert_ne!(
            stages_hash(&stages(reselected)),
            h,
            "selector changes are included"
        );
    }

    #[test]
    fn profile_spec_hash_ignores_list_order_but_not_content() {
        let a: ProfileSpec = serde_json::from_value(json!({
            "dependsOn": ["b", "a"],
            "helmCharts": [{"repositoryURL": "r1", "releaseNamespace": "n", "releaseName": "x"},
                           {"repositoryURL": "r0", "releaseNamespace": "n", "releaseName": "y"}],
            "policyRefs": [{"kind": "Secret", "namespace": "n", "name": "s"}, {"kind": "ConfigMap", "namespace": "n", "name": "c"}],
            "kustomizationRefs": [{"kind": "GitRepository", "namespace": "n", "name": "k2"}, {"kind": "GitRepository", "namespace": "n", "name": "k1"}]
        }))
        .unwrap();
        let mut b = a.clone();
        for list in ["dependsOn", "helmCharts", "policyRefs", "kustomizationRefs"] {
            b.0.get_mut(list).unwrap().as_array_mut().unwrap().reverse();
        }
        assert_eq!(profile_spec_hash(Some(&a)), profile_spec_hash(Some(&b)));
        let mut c = a.clone();
        c.0["helmCharts"][0]["chartVersion"] = json!("3.6.2");
        assert_ne!(profile_spec_hash(Some(&a)), profile_spec_hash(Some(&c)));
        assert_ne!(profile_spec_hash(None), profile_spec_hash(Some(&a)));
        // preDeployChecks are not sorted upstream: their order counts.
        let d: ProfileSpec =
            serde_json::from_value(json!({"preDeployChecks": [{"name": "a"}, {"name": "b"}]}))
                .unwrap();
        let mut e = d.clone();
        e.0.get_mut("preDeployChecks")
            .unwrap()
            .as_array_mut()
            .unwrap()
            .reverse();
        assert_ne!(profile_spec_hash(Some(&d)), profile_spec_hash(Some(&e)));
    }
}
