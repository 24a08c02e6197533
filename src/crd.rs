//! `promoter crd`: the ClusterPromotion CRD generated from the Rust types.

use crate::api::ClusterPromotion;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use serde_json::Value;

/// The CRD of the Rust types, normalised to upstream's conventions: Go's CRD generator never
/// emits `nullable` (an absent field and a null one are the same to it) and always sets `listKind`.
pub fn cluster_promotion_crd() -> CustomResourceDefinition {
    let mut crd = ClusterPromotion::crd();
    crd.spec.names.list_kind = Some("ClusterPromotionList".into());
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.description =
                Some("ClusterPromotion is the Schema for the clusterpromotions API (served by promoter).".into());
            if let Ok(mut value) = serde_json::to_value(&*schema) {
                normalise(&mut value);
                add_type_meta(&mut value);
                if let Ok(clean) = serde_json::from_value::<JSONSchemaProps>(value) {
                    *schema = clean;
                }
            }
        }
    }
    crd
}

/// Removes `nullable`, and gives int-or-string `anyOf` branches back the types that kube's
/// structural rewriter strips (the API server accepts both forms; upstream writes the typed one).
fn normalise(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("nullable");
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && map.contains_key("anyOf")
            {
                map.insert(
                    "anyOf".into(),
                    serde_json::json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            map.values_mut().for_each(normalise);
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// The `apiVersion`, `kind` and `metadata` properties that Go's CRD generator always declares.
fn add_type_meta(schema: &mut Value) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "apiVersion".into(),
            serde_json::json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
        );
        props.insert(
            "kind".into(),
            serde_json::json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
        );
        props.insert("metadata".into(), serde_json::json!({"type": "object"}));
    }
}

/// The CRD as YAML, ready for `kubectl apply -f -`.
pub fn cluster_promotion_crd_yaml() -> anyhow::Result<String> {
    Ok(serde_saphyr::to_string(&cluster_promotion_crd())?)
}
