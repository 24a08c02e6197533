//! `promoter crd`: the CRDs generated from the Rust types: upstream's ClusterPromotion (served by
//! promoter where Sveltos does not serve it), and promoter's own `promoter.dev` kinds,
//! PromotionFreeze and PromotionRevision.

use crate::api::{ClusterPromotion, PromotionFreeze, PromotionRevision};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use serde_json::Value;

/// The CRD of the Rust types, normalised to upstream's conventions: Go's CRD generator never
/// emits `nullable` (an absent field and a null one are the same to it) and always sets `listKind`.
pub fn cluster_promotion_crd() -> CustomResourceDefinition {
    let mut crd = ClusterPromotion::crd();
    // Additions over upstream (which has none of these): `kubectl get cpromo`, `kubectl get
    // sveltos`, and columns that say where each rollout stands.
    crd.spec.names.short_names = Some(vec!["cpromo".into()]);
    crd.spec.names.categories = Some(vec!["sveltos".into()]);
    finish(crd, &cluster_promotion_description(), printer_columns())
}

/// The ClusterPromotion's description (`kubectl explain clusterpromotion`), naming promoter's
/// settings: annotations, since the upstream schema prunes unknown spec fields.
fn cluster_promotion_description() -> String {
    let settings: Vec<String> = crate::settings::SETTINGS
        .iter()
        .map(|s| format!("{}: {}", s.key, s.summary()))
        .collect();
    format!(
        "ClusterPromotion is the Schema for the clusterpromotions API (served by promoter). promoter's settings are annotations: {}.",
        settings.join("; ")
    )
}

/// `PromotionFreeze`: stops the promotions it selects from starting a new stage. What the API
/// server can refuse at admission it refuses (see [`freeze_admission`]); the printer columns read
/// well before any pass ran and for times in the future (`kubectl get pfreeze`).
pub fn promotion_freeze_crd() -> CustomResourceDefinition {
    let mut crd = finish(
        PromotionFreeze::crd(),
        "PromotionFreeze stops every ClusterPromotion its promotionSelector picks from starting a new stage, between start and end (promoter).",
        vec![
            column(
                "Phase",
                "string",
                ".status.phase",
                "Scheduled, Active, Expired or Invalid.",
                0,
            ),
            column(
                "Reason",
                "string",
                ".spec.reason",
                "Why nothing may start.",
                0,
            ),
            // Times as written: kubectl prints a `date` column as the age since then, which is
            // `<invalid>` for a time still ahead, as every scheduled freeze's start and end are.
            column(
                "Start",
                "string",
                ".spec.start",
                "When it starts, RFC 3339 (absent: at creation).",
                0,
            ),
            column(
                "End",
                "string",
                ".spec.end",
                "When it ends, RFC 3339 (absent: when deleted).",
                0,
            ),
            column(
                "Selector",
                "string",
                ".spec.promotionSelector",
                "The ClusterPromotions it holds (absent: every promotion).",
                1,
            ),
            column(
                "Message",
                "string",
                ".status.message",
                "What it holds, or why it is Invalid (from the last pass).",
                1,
            ),
            column("Age", "date", ".metadata.creationTimestamp", "", 0),
        ],
    );
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            && let Ok(mut value) = serde_json::to_value(&*schema)
        {
            freeze_admission(&mut value);
            if let Ok(with_rules) = serde_json::from_value::<JSONSchemaProps>(value) {
                *schema = with_rules;
            }
        }
    }
    crd
}

/// The label key and value syntax (apimachinery's IsQualifiedName and IsValidLabelValue) as
/// patterns: a name part of at most 63 characters, with an optional DNS-subdomain prefix.
const LABEL_KEY_PATTERN: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
const LABEL_VALUE_PATTERN: &str = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// A label key's parts' lengths: a prefix of at most 253 characters, a name of at most 63.
const LABEL_KEY_PARTS: &str = "^([^/]{1,253}/)?[^/]{1,63}$";
/// What a label key is, as the rules' messages say it.
const LABEL_KEY_TEXT: &str = "a label key: an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at most 63 characters (alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric)";
/// A label key's longest: a 253-character DNS-subdomain prefix, '/', a 63-character name.
const LABEL_KEY_MAX: u64 = 253 + 1 + 63;
/// The most requirements a freeze's selector may have: far more than any freeze needs, and a
/// bound on how often the per-requirement rules run (kube-apiserver multiplies a rule's estimated
/// cost by it; an unbounded list counts as the request size limit over the item's least size).
pub const MATCH_EXPRESSIONS_MAX: u64 = 64;
/// The most labels a freeze's `matchLabels` may have: the bound on how often its key rule's
/// per-key check runs.
pub const MATCH_LABELS_MAX: u64 = 64;
const OPERATOR_MAX: u64 = 16;

/// What the API server refuses in a PromotionFreeze (kube-apiserver enforces `enum`, `pattern`,
/// `maxLength` and `x-kubernetes-validations` CEL rules on every write, with the CEL types of
/// `SchemaDeclType`: a `date-time` string is a timestamp): an operator other than In, NotIn,
/// Exists and DoesNotExist; values missing for In/NotIn or given for Exists/DoesNotExist; label
/// keys and values of the wrong syntax; an end not after the start. Added to the freeze's own
/// CRD only: the selector type is shared with ClusterPromotion, whose CRD stays upstream's.
/// Every rule has a bounded cost, as kube-apiserver requires to accept the CRD: it estimates each
/// rule's cost from the sizes the schema allows, multiplies it by how many times the rule may run
/// (the product of `maxItems`/`maxProperties` of the lists and maps around it; unbounded: the
/// request size limit over the least size of an item), and refuses a rule over its budget
/// (k8s.io/apiextensions-apiserver pkg/apis/apiextensions/validation/cel_validation.go,
/// MaxCardinality; "estimated rule cost exceeds budget"). So the requirements' list has a
/// `maxItems` and the operator the rules compare a `maxLength`; the times are timestamps (one
/// comparison); matchLabels has a `maxProperties`, and its keys are checked by a rule over the
/// map (see the estimate of a key's size below). What remains (a stored freeze from before these
/// rules) is an Invalid freeze that holds nothing, said by the pass, `step`, `freeze list` and
/// `doctor`.
fn freeze_admission(schema: &mut Value) {
    use serde_json::json;
    let Some(spec) = schema.pointer_mut("/properties/spec") else {
        return;
    };
    spec["x-kubernetes-validations"] = json!([{
        "rule": "!has(self.start) || !has(self.end) || self.end > self.start",
        "message": "end must be after start",
        "fieldPath": ".end",
    }]);
    let Some(selector) = spec.pointer_mut("/properties/promotionSelector/properties") else {
        return;
    };
    // A key's syntax is a pattern, its parts' lengths another (RE2 cannot say both at once: the
    // prefix's 253 characters span dots).
    let key_rule = |key: &str| {
        format!("{key}.matches('{LABEL_KEY_PATTERN}') && {key}.matches('{LABEL_KEY_PARTS}')")
    };
    if let Some(labels) = selector.pointer_mut("/matchLabels") {
        labels["additionalProperties"]["pattern"] = json!(LABEL_VALUE_PATTERN);
        labels["additionalProperties"]["maxLength"] = json!(63);
        // The rule's per-key check runs once per key: the map's bound is its cardinality. A map
        // key's size is not bounded by any schema, and kube-apiserver's estimator sizes it from
        // the key type's MaxElements (apiextensions-apiserver schema/cel compilation.go
        // sizeEstimator, "@keys"), which for the plain string key type of a map
        // (k8s.io/apiserver/pkg/cel/common/schemas.go: NewMapType(StringType, ...)) is unset:
        // the estimate is one regex per key, times maxProperties.
        labels["maxProperties"] = json!(MATCH_LABELS_MAX);
        labels["x-kubernetes-validations"] = json!([{
            "rule": format!("self.all(k, {})", key_rule("k")),
            "message": format!("every key must be {LABEL_KEY_TEXT}"),
        }]);
    }
    if let Some(list) = selector.pointer_mut("/matchExpressions") {
        // The item rules below run once per item: the list's bound is their cardinality.
        list["maxItems"] = json!(MATCH_EXPRESSIONS_MAX);
    }
    if let Some(item) = selector.pointer_mut("/matchExpressions/items") {
        item["properties"]["operator"]["enum"] = json!(["In", "NotIn", "Exists", "DoesNotExist"]);
        // The rules compare it: its bound is the comparisons' cost ("DoesNotExist", 12).
        item["properties"]["operator"]["maxLength"] = json!(OPERATOR_MAX);
        item["properties"]["key"]["pattern"] = json!(LABEL_KEY_PATTERN);
        item["properties"]["key"]["maxLength"] = json!(LABEL_KEY_MAX);
        item["properties"]["values"]["items"]["pattern"] = json!(LABEL_VALUE_PATTERN);
        item["properties"]["values"]["items"]["maxLength"] = json!(63);
        item["x-kubernetes-validations"] = json!([
            {
                // The pattern above says the syntax; this the prefix's length (key: 317 at most).
                "rule": key_rule("self.key"),
                "message": format!("must be {LABEL_KEY_TEXT}"),
                "fieldPath": ".key",
            },
            {
                "rule": "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
                "message": "must be specified when `operator` is 'In' or 'NotIn'",
                "fieldPath": ".values",
            },
            {
                "rule": "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",
                "message": "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "fieldPath": ".values",
            },
        ]);
    }
}

/// `PromotionRevision`: one completed revision of one promotion, what a rollback restores.
pub fn promotion_revision_crd() -> CustomResourceDefinition {
    finish(
        PromotionRevision::crd(),
        "PromotionRevision is one revision of a ClusterPromotion that completed its whole rollout, kept for rollbacks (promoter).",
        vec![
            column(
                "Promotion",
                "string",
                ".spec.promotion",
                "The ClusterPromotion.",
                0,
            ),
            column(
                "Completed",
                "date",
                ".spec.completedAt",
                "When its rollout completed.",
                0,
            ),
            column(
                "Revision",
                "string",
                ".spec.revision",
                "The profileSpecHash of the run.",
                1,
            ),
            column("Age", "date", ".metadata.creationTimestamp", "", 0),
        ],
    )
}

/// promoter's own CRDs (`promoter.dev`), what `cronjob/crds.yaml` installs.
pub fn own_crds() -> Vec<CustomResourceDefinition> {
    vec![promotion_freeze_crd(), promotion_revision_crd()]
}

/// Every CRD `promoter crd` prints: ClusterPromotion first, then promoter's own.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    let mut out = vec![cluster_promotion_crd()];
    out.extend(own_crds());
    out
}

/// `listKind`, printer columns, a description, and a schema in upstream's conventions.
fn finish(
    mut crd: CustomResourceDefinition,
    description: &str,
    columns: Vec<CustomResourceColumnDefinition>,
) -> CustomResourceDefinition {
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for version in &mut crd.spec.versions {
        version.additional_printer_columns = Some(columns.clone());
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema.description = Some(description.into());
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

fn column(
    name: &str,
    type_: &str,
    path: &str,
    description: &str,
    priority: i32,
) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        json_path: path.into(),
        description: Some(description.into()),
        priority: (priority > 0).then_some(priority),
        format: None,
    }
}

/// `kubectl get clusterpromotions` columns. The paths are client-go JSONPath over the status that
/// both upstream and promoter write; `[-1:]` is the stage reached last.
pub fn printer_columns() -> Vec<CustomResourceColumnDefinition> {
    vec![
        column(
            "Stage",
            "string",
            ".status.currentStageName",
            "The stage being rolled out, or the last one reached.",
            0,
        ),
        column(
            "Status",
            "string",
            ".status.stages[-1:].currentStatusDescription",
            "What the current stage is doing or waiting for.",
            0,
        ),
        column(
            "Last Promotion",
            "date",
            ".status.lastPromotionTime",
            "When the current stage was started.",
            0,
        ),
        column(
            "Failure",
            "string",
            ".status.stages[-1:].failureMessage",
            "Why the current stage is not done (deployment, checks, errors).",
            1,
        ),
        column("Age", "date", ".metadata.creationTimestamp", "", 0),
    ]
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
    crds_yaml(&[cluster_promotion_crd()])
}

/// CRDs as one multi-document YAML stream, ready for `kubectl apply -f -`.
pub fn crds_yaml(crds: &[CustomResourceDefinition]) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, crd) in crds.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    /// `kubectl explain clusterpromotion` names every promoter setting, the rollback's deadline
    /// included (issue 30).
    #[test]
    fn the_clusterpromotion_description_names_every_setting() {
        let crd = super::cluster_promotion_crd();
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .unwrap();
        let description = schema.description.clone().unwrap();
        for setting in crate::settings::SETTINGS {
            let key = setting.key;
            assert!(description.contains(key), "{key}: {description}");
        }
        assert!(description.contains("promoter.dev/rollback-deadline"));
    }
}
