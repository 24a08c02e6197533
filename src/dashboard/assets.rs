//! The page's script and style sheet, embedded in the binary: the dashboard works offline, in an
//! air-gapped cluster and from the static image, and loads nothing from anywhere else.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

pub const APP_JS: &str = include_str!("assets/app.js");
pub const APP_CSS: &str = include_str!("assets/app.css");
pub const ICON: &str = include_str!("assets/icon.svg");

/// A digest of both: the assets' URLs change with their content, so a browser never runs a
/// script of another build against this one's pages.
pub fn version() -> &'static str {
    static VERSION: LazyLock<String> = LazyLock::new(|| {
        let digest = Sha256::new()
            .chain_update(APP_JS)
            .chain_update(APP_CSS)
            .finalize();
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    });
    &VERSION
}

/// `/assets/<name>`.
pub fn serve(name: &str) -> Response {
    let (body, kind) = match name {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        "icon.svg" => (ICON, "image/svg+xml"),
        _ => return (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // Versioned URLs: a year is safe.
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}
