//! The generated ClusterPromotion CRD against upstream's, property path by property path.

use promoter::crd::cluster_promotion_crd;
use serde_json::Value;
use std::path::PathBuf;

fn upstream_crd() -> Option<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/reference/crds/config.projectsveltos.io_clusterpromotions.yaml");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_saphyr::from_str(&text).expect("upstream CRD parses")),
        Err(e) => {
            // CI always has ../shared beside the clone: a missing file there is a failure, not a skip.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{} missing in CI: {e}",
                path.display()
            );
            eprintln!("skipping: {} not found ({e})", path.display());
            None
        }
    }
}

/// Schema keywords whose values must be identical at every path.
const KEYWORDS: &[&str] = &[
    "type",
    "format",
    "enum",
    "default",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
];

fn sorted_strings(v: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect();
    out.sort();
    out
}

fn compare(path: &str, up: &Value, ours: &Value, problems: &mut Vec<String>) {
    for kw in KEYWORDS {
        let (a, b) = (up.get(*kw), ours.get(*kw));
        let same = match (*kw, a, b) {
            ("enum", ..) => sorted_strings(a) == sorted_strings(b),
            // k8s-openapi keeps numeric bounds as f64, so `1` comes back as `1.0`: same to the server.
            (_, Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
            _ => a == b,
        };
        if !same {
            problems.push(format!("{path}: {kw} differs: upstream {a:?}, ours {b:?}"));
        }
    }
    if sorted_strings(up.get("required")) != sorted_strings(ours.get("required")) {
        problems.push(format!(
            "{path}: required differs: upstream {:?}, ours {:?}",
            sorted_strings(up.get("required")),
            sorted_strings(ours.get("required"))
        ));
    }
    let (up_props, our_props) = (up.get("properties"), ours.get("properties"));
    for (name, sub) in up_props.and_then(Value::as_object).into_iter().flatten() {
        match our_props.and_then(|p| p.get(name)) {
            Some(o) => compare(&format!("{path}.{name}"), sub, o, problems),
            None => problems.push(format!("{path}.{name}: missing in ours")),
        }
    }
    for name in our_props
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if up_props.and_then(|p| p.get(name)).is_none() {
            problems.push(format!(
                "{path}.{name}: not in upstream (a Sveltos API server would prune it)"
            ));
        }
    }
    for child in ["items", "additionalProperties"] {
        match (up.get(child), ours.get(child)) {
            (Some(u), Some(o)) if u.is_object() => {
                compare(&format!("{path}.{child}"), u, o, problems)
            }
            (Some(u), o) if u.is_object() => {
                problems.push(format!("{path}.{child}: missing in ours ({o:?})"))
            }
            _ => {}
        }
    }
    for (i, (u, o)) in up
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .zip(
            ours.get("anyOf")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        )
        .enumerate()
    {
        compare(&format!("{path}.anyOf[{i}]"), u, o, problems);
    }
}

#[test]
fn generated_crd_matches_upstream() {
    let Some(up) = upstream_crd() else { return };
    let ours = serde_json::to_value(cluster_promotion_crd()).unwrap();
    let mut problems = Vec::new();
    // promoter adds a short name and a category (upstream has neither); the rest of `names` is equal.
    let mut names = ours["spec"]["names"].clone();
    assert_eq!(names["shortNames"], serde_json::json!(["cpromo"]));
    assert_eq!(names["categories"], serde_json::json!(["sveltos"]));
    let names_map = names.as_object_mut().unwrap();
    names_map.remove("shortNames");
    names_map.remove("categories");
    if up["spec"]["names"] != names {
        problems.push(format!(
            "spec.names: upstream {}, ours {names}",
            up["spec"]["names"]
        ));
    }
    for field in ["group", "scope"] {
        if up["spec"][field] != ours["spec"][field] {
            problems.push(format!(
                "spec.{field}: upstream {}, ours {}",
                up["spec"][field], ours["spec"][field]
            ));
        }
    }
    let (uv, ov) = (&up["spec"]["versions"], &ours["spec"]["versions"]);
    assert_eq!(
        uv.as_array().map(Vec::len),
        ov.as_array().map(Vec::len),
        "number of versions"
    );
    for field in ["name", "served", "storage", "subresources"] {
        if uv[0][field] != ov[0][field] {
            problems.push(format!(
                "versions[0].{field}: upstream {}, ours {}",
                uv[0][field], ov[0][field]
            ));
        }
    }
    compare(
        "openAPIV3Schema",
        &uv[0]["schema"]["openAPIV3Schema"],
        &ov[0]["schema"]["openAPIV3Schema"],
        &mut problems,
    );
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_walk_detects_differences() {
    // Guard against a comparison that cannot fail: perturb upstream and expect findings.
    let Some(up) = upstream_crd() else { return };
    let schema = &up["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut changed = schema.clone();
    changed["properties"]["spec"]["properties"]["stages"]["x-kubernetes-list-type"] =
        "atomic".into();
    changed["properties"]["spec"]["properties"]["stages"]["items"]["required"] =
        serde_json::json!([]);
    let trigger = &mut changed["properties"]["spec"]["properties"]["stages"]["items"]["properties"]
        ["trigger"];
    trigger["properties"]["manual"]["properties"]["automaticReset"]["default"] = false.into();
    trigger["properties"]
        .as_object_mut()
        .unwrap()
        .remove("auto");
    let mut problems = Vec::new();
    compare("s", schema, &changed, &mut problems);
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn vendored_fragments_are_upstream_verbatim() {
    let Some(up) = upstream_crd() else { return };
    let spec =
        &up["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let frag = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    use promoter::api::schema::*;
    assert_eq!(spec["profileSpec"], frag(PROFILE_SPEC));
    assert_eq!(
        spec["profileSpec"]["properties"]["policyRefs"]["items"],
        frag(POLICY_REF)
    );
    assert_eq!(
        spec["profileSpec"]["properties"]["validateHealths"]["items"],
        frag(VALIDATE_HEALTH)
    );
}

#[test]
fn crd_yaml_parses_back() {
    let yaml = promoter::crd::cluster_promotion_crd_yaml().unwrap();
    let v: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(v["kind"], "CustomResourceDefinition");
    assert_eq!(
        v["metadata"]["name"],
        "clusterpromotions.config.projectsveltos.io"
    );
}

/// Upstream unit case 1: the profileSpec has every ClusterProfile spec field, with the same schema,
/// except clusterSelector, clusterRefs, setRefs, extraLabels and extraAnnotations.
#[test]
fn profile_spec_is_cluster_profile_spec_minus_five_fields() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/reference/crds/config.projectsveltos.io_clusterprofiles.yaml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{} missing in CI",
            path.display()
        );
        return;
    };
    let crd: Value = serde_saphyr::from_str(&text).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let ours: Value = serde_json::from_str(promoter::api::schema::PROFILE_SPEC).unwrap();
    let mut expected = spec.as_object().unwrap().clone();
    for f in promoter::api::profile_spec::NON_PROFILE_SPEC_FIELDS {
        assert!(
            expected.remove(f).is_some(),
            "{f} is a ClusterProfile field"
        );
    }
    let ours = ours["properties"].as_object().unwrap();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (k, v) in ours {
        let mut problems = Vec::new();
        compare(&format!("profileSpec.{k}"), &expected[k], v, &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

/// The printer columns are valid as the API server validates them (a path starting with `.`, a
/// known type, a name), and each path names a field the schema has, in every CRD promoter ships.
#[test]
fn printer_columns_point_at_real_fields() {
    for crd in promoter::crd::all_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        let version = &crd["spec"]["versions"][0];
        let schema = &version["schema"]["openAPIV3Schema"];
        let columns = version["additionalPrinterColumns"].as_array().unwrap();
        assert!(columns.len() >= 4);
        for c in columns {
            let path = c["jsonPath"].as_str().unwrap();
            assert!(path.starts_with('.'), "{path}");
            assert!(matches!(
                c["type"].as_str(),
                Some("string" | "date" | "integer" | "number" | "boolean")
            ));
            if path.starts_with(".metadata") {
                continue;
            }
            let mut node = schema;
            for part in path[1..].split('.') {
                let field = part.split('[').next().unwrap();
                node = &node["properties"][field];
                assert!(
                    !node.is_null(),
                    "{}: {path}: no field {field}",
                    crd["metadata"]["name"]
                );
                if part.contains('[') {
                    node = &node["items"];
                }
            }
        }
    }
}

fn crd_command(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_promoter"))
        .arg("crd")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn crd_names(yaml: &str) -> Vec<String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    docs.iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// `promoter crd` prints ClusterPromotion first (so `promoter crd | kubectl apply -f -` still
/// installs it), then promoter's own; `--only` picks one, `--own` the two `promoter.dev` ones, and
/// `cronjob/crds.yaml` is exactly `promoter crd --own`.
#[test]
fn crd_command_prints_every_crd_and_the_cronjob_ships_the_own_ones() {
    let own = [
        "promotionfreezes.promoter.dev",
        "promotionrevisions.promoter.dev",
    ];
    let all = crd_command(&[]);
    assert_eq!(
        crd_names(&all),
        ["clusterpromotions.config.projectsveltos.io", own[0], own[1]]
    );
    assert_eq!(crd_names(&crd_command(&["--own"])), own);
    for (only, name) in [
        (
            "clusterpromotion",
            "clusterpromotions.config.projectsveltos.io",
        ),
        ("promotionfreeze", own[0]),
        ("promotionrevision", own[1]),
    ] {
        assert_eq!(crd_names(&crd_command(&["--only", only])), [name]);
    }
    let shipped = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cronjob/crds.yaml"),
    )
    .unwrap();
    let generated: String = shipped
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        generated,
        crd_command(&["--own"]),
        "cronjob/crds.yaml is stale: promoter crd --own > cronjob/crds.yaml (keeping its comment)"
    );
    for crd in promoter::crd::own_crds() {
        let names = &crd.spec.names;
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            names.categories.as_deref(),
            Some(&["promoter".to_string()][..])
        );
        assert_eq!(names.short_names.as_ref().map(Vec::len), Some(1));
        let status = crd.spec.versions[0].subresources.is_some();
        assert_eq!(status, names.kind == "PromotionFreeze", "{}", names.kind);
    }
}
