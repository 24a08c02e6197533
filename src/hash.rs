//! The two hashes that decide a restart: of the profileSpec (with upstream's list normalisation, so
//! reordering a list does not restart) and of the stages' names and selectors (not triggers, so an
//! approval does not restart). Stored base64-encoded in status, as upstream's `[]byte`.

use crate::api::sveltos::{SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL};
use crate::api::{ClusterPromotion, ProfileSpec, Stage};
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
    digest(&Value::Object(normalised(spec)))
}

/// promoter's revision, recorded as the status' profileSpecHash: everything a generated profile
/// carries from the promotion. Unlike upstream (Q14), the order of `helmCharts`, `policyRefs`,
/// `kustomizationRefs` and `patches` counts (Sveltos deploys in that order), and so do the tenant
/// labels promoter copies onto the profiles (Q12): changing either is a new revision, rolled out
/// from stage 1. No list is sorted: equal revisions generate identical profiles, which is what lets
/// a pass re-apply the current revision to a reached stage as a pure repair (a reorder of a list
/// whose order means nothing is a harmless new revision).
pub fn revision_hash(p: &ClusterPromotion) -> String {
    let mut m = p.spec.profile_spec.clone().map(|s| s.0).unwrap_or_default();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let tenant: serde_json::Map<String, Value> =
        [SERVICE_ACCOUNT_NAME_LABEL, SERVICE_ACCOUNT_NAMESPACE_LABEL]
            .iter()
            .filter_map(|k| Some((k.to_string(), Value::String(labels.get(*k)?.clone()))))
            .collect();
    if !tenant.is_empty() {
        // A key no profileSpec field can have, so that no spec collides with a labelled one.
        m.insert(" tenant".into(), Value::Object(tenant));
    }
    digest(&Value::Object(m))
}

fn normalised(spec: Option<&ProfileSpec>) -> serde_json::Map<String, Value> {
    let mut m = spec.map(|s| s.0.clone()).unwrap_or_default();
    sort_ordered_lists(&mut m);
    sort_set_lists(&mut m);
    m
}

fn sort_ordered_lists(m: &mut serde_json::Map<String, Value>) {
    sort_list(m, "helmCharts", |v| {
        vec![
            field(v, "repositoryURL"),
            field(v, "releaseNamespace"),
            field(v, "releaseName"),
        ]
    });
    for list in ["kustomizationRefs", "policyRefs"] {
        sort_list(m, list, |v| {
            vec![field(v, "kind"), field(v, "namespace"), field(v, "name")]
        });
    }
    sort_list(m, "patches", |v| vec![field(v, "patch")]);
}

fn sort_set_lists(m: &mut serde_json::Map<String, Value>) {
    sort_list(m, "dependsOn", |v| {
        vec![v.as_str().unwrap_or_default().to_string()]
    });
    sort_list(m, "templateResourceRefs", |v| vec![field(v, "identifier")]);
    sort_list(m, "validateHealths", |v| vec![field(v, "name")]);
    sort_list(m, "driftExclusions", |v| {
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
}

pub fn stages_hash(stages: &[Stage]) -> String {
    let items: Vec<Value> = stages
        .iter()
        .map(|s| json!({"name": s.name, "clusterSelector": s.cluster_selector.clone().unwrap_or_default()}))
        .collect();
    digest(&Value::Array(items))
}

/// The stagesHash upstream's Go controller writes, bit for bit: sha256 of Go's `json.Marshal` of
/// `[{"name": ..., "clusterSelector": ...}]` with the fields in that order, `matchLabels` (keys
/// sorted) and `matchExpressions` omitted when empty, and `values` omitted when empty (the
/// `metav1.LabelSelector` and `LabelSelectorRequirement` tags). Checked against the statuses the
/// upstream controller wrote in the Sveltos blog posts (see the tests). promoter's own
/// [`stages_hash`] differs (sorted keys); this one only recognises a status upstream wrote, so that
/// promoter can take its rollout over without starting again.
pub fn upstream_stages_hash(stages: &[Stage]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(upstream_stages_json(stages)))
}

/// Go's `json.Marshal` of upstream's stages-hash input (see [`upstream_stages_hash`]).
fn upstream_stages_json(stages: &[Stage]) -> String {
    let mut out = String::new();
    go_list(&mut out, '[', ']', stages, |out, s| {
        out.push_str("{\"name\":");
        go_string(out, &s.name);
        out.push_str(",\"clusterSelector\":{");
        let sel = s.cluster_selector.clone().unwrap_or_default();
        let labels = sel.match_labels.filter(|m| !m.is_empty());
        if let Some(labels) = &labels {
            out.push_str("\"matchLabels\":");
            go_list(out, '{', '}', labels, |out, (k, v)| {
                go_string(out, k);
                out.push(':');
                go_string(out, v);
            });
        }
        if let Some(exprs) = sel.match_expressions.filter(|e| !e.is_empty()) {
            if labels.is_some() {
                out.push(',');
            }
            out.push_str("\"matchExpressions\":");
            go_list(out, '[', ']', &exprs, |out, e| {
                out.push_str("{\"key\":");
                go_string(out, &e.key);
                out.push_str(",\"operator\":");
                go_string(out, &e.operator);
                if let Some(values) = e.values.as_ref().filter(|v| !v.is_empty()) {
                    out.push_str(",\"values\":");
                    go_list(out, '[', ']', values, |out, v| go_string(out, v));
                }
                out.push('}');
            });
        }
        out.push_str("}}");
    });
    out
}

/// `open item,item,... close`, each item written by `item`.
fn go_list<T>(
    out: &mut String,
    open: char,
    close: char,
    items: impl IntoIterator<Item = T>,
    mut item: impl FnMut(&mut String, T),
) {
    out.push(open);
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        item(out, x);
    }
    out.push(close);
}

/// A string as Go's `encoding/json` writes it: HTML-safe (`<`, `>`, `&` escaped), U+2028/U+2029
/// escaped, control characters as `\u00XX` except `\n`, `\r`, `\t`.
fn go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
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

    // Issue 14, problem 7: a reorder of an order-significant list, or new tenant labels, is a new
    // revision (upstream's hash, above, ignores both).
    #[test]
    fn revision_hash_counts_order_and_tenant_labels() {
        let p = |spec: Value, labels: Value| -> ClusterPromotion {
            serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels},
                "spec": {"profileSpec": spec, "stages": [{"name": "s"}]}}))
            .unwrap()
        };
        let spec = json!({"helmCharts": [{"releaseName": "a"}, {"releaseName": "b"}],
            "policyRefs": [{"name": "a"}, {"name": "b"}], "kustomizationRefs": [{"name": "a"}, {"name": "b"}],
            "patches": [{"patch": "a"}, {"patch": "b"}]});
        let base = revision_hash(&p(spec.clone(), json!({})));
        for list in ["helmCharts", "policyRefs", "kustomizationRefs", "patches"] {
            let mut reordered = spec.clone();
            reordered[list].as_array_mut().unwrap().reverse();
            assert_ne!(revision_hash(&p(reordered, json!({}))), base, "{list}");
        }
        let tenant = json!({"projectsveltos.io/serviceaccount-name": "eng"});
        assert_ne!(revision_hash(&p(spec.clone(), tenant)), base);
        assert_eq!(
            revision_hash(&p(spec.clone(), json!({"team": "x"}))),
            base,
            "other labels are not carried onto profiles"
        );
    }

    /// The stagesHash upstream wrote for the blog posts' promotions (seeds 002 and 003 in
    /// `../shared/seeds/`: "Sveltos: Progressive Rollouts Pt.1" and "Combining Rollout and
    /// Progressive Rollout Across Clusters").
    #[test]
    fn upstream_stages_hash_is_bit_identical_to_the_go_controller() {
        let three = |prod: &str| {
            stages(json!([
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {"delay": "2m"}}},
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
                {"name": "production", "clusterSelector": {"matchLabels": {"env": prod}}}
            ]))
        };
        assert_eq!(
            upstream_stages_hash(&three("prod")),
            "K+oVryzpxI5/sCfRe03pIwhkVZ00YPTFDNpRVYmpLOk="
        );
        assert_eq!(
            upstream_stages_hash(&three("production")),
            "9IEZq/BvODcdF+6Ogxjvm+ayNbh/GejSU4RJijXK50s="
        );
        assert_ne!(
            upstream_stages_hash(&three("prod")),
            stages_hash(&three("prod"))
        );
    }

    #[test]
    fn upstream_stages_json_follows_the_go_field_order_and_omitempty() {
        let s = stages(json!([
            {"name": "a", "clusterSelector": {"matchExpressions": [
                {"key": "t", "operator": "In", "values": ["x", "y"]},
                {"key": "e", "operator": "Exists", "values": []}],
                "matchLabels": {"z": "1", "b": "2"}}},
            {"name": "b"},
            {"name": "c", "clusterSelector": {"matchLabels": {}}}
        ]));
        assert_eq!(
            upstream_stages_json(&s),
            r#"[{"name":"a","clusterSelector":{"matchLabels":{"b":"2","z":"1"},"matchExpressions":[{"key":"t","operator":"In","values":["x","y"]},{"key":"e","operator":"Exists"}]}},{"name":"b","clusterSelector":{}},{"name":"c","clusterSelector":{}}]"#
        );
    }

    #[test]
    fn go_strings_escape_as_go_does() {
        let mut out = String::new();
        go_string(&mut out, "a<b>&\"\\\n\u{1}\u{2028}é");
        assert_eq!(out, r#""a\u003cb\u003e\u0026\"\\\n\u0001\u2028é""#);
    }
}
