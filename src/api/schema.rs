//! OpenAPI schemas of the subtypes ClusterPromotion shares with the rest of Sveltos (the whole
//! `profileSpec`, `PolicyRef`, libsveltos `ValidateHealth`), vendored verbatim from the upstream CRD.
//!
//! These subtrees are upstream's, not promoter's: hand-copying thousands of lines of schema into Rust
//! attributes would drift. `tests/crd_compat.rs` checks the vendored copies against the upstream CRD.

use schemars::Schema;

pub const PROFILE_SPEC: &str = include_str!("schema/profile_spec.json");
pub const POLICY_REF: &str = include_str!("schema/policy_ref.json");
pub const VALIDATE_HEALTH: &str = include_str!("schema/validate_health.json");

pub(crate) fn vendored(text: &str) -> Schema {
    // The files are compiled in and checked by tests; a broken file yields an open schema rather
    // than a panic in `promoter crd`.
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| Schema::try_from(v).ok())
        .unwrap_or_else(|| schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
}

/// Implements `JsonSchema` for a type whose schema is a vendored upstream fragment.
macro_rules! vendored_schema {
    ($ty:ty, $name:literal, $text:expr) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $crate::api::schema::vendored($text)
            }
        }
    };
}
pub(crate) use vendored_schema;
