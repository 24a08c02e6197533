//! promoter's own kinds (`promoter.dev/v1alpha1`: PromotionFreeze, PromotionRevision), served
//! from the CRDs `promoter crd --own` prints, generated from the Rust types (nothing vendored):
//! pruned, defaulted and validated as a real API server does with those CRDs installed.

use super::resource_type::ResourceType;
use super::store::{CompiledCrd, Store, compile_crd};
use std::sync::LazyLock;

pub fn promotion_freeze_type() -> ResourceType {
    ResourceType::custom(
        "promoter.dev",
        "v1alpha1",
        "PromotionFreeze",
        "promotionfreezes",
        false,
    )
}

/// No status subresource: a revision is written once, whole.
pub fn promotion_revision_type() -> ResourceType {
    let mut rt = ResourceType::custom(
        "promoter.dev",
        "v1alpha1",
        "PromotionRevision",
        "promotionrevisions",
        false,
    );
    rt.status_subresource = false;
    rt
}

/// Serves both kinds from their generated CRDs.
pub fn register_own_crds(store: &mut Store) -> Result<(), String> {
    for (rt, schema) in OWN_COMPILED.as_ref().map_err(Clone::clone)? {
        store.register_compiled(rt.clone(), schema.clone());
    }
    Ok(())
}

/// The generated CRDs, compiled once per process: every server a test starts registers them, and
/// they depend on nothing but promoter's types.
static OWN_COMPILED: LazyLock<Result<Vec<CompiledCrd>, String>> = LazyLock::new(|| {
    crate::crd::own_crds()
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(crd).map_err(|e| format!("{name}: {e}"))?;
            compile_crd(&value).map_err(|e| format!("{name}: {e}"))
        })
        .collect()
});
