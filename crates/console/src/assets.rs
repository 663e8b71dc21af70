//! The console's one stylesheet and one script, embedded at build time
//! and served with a long cache life: their URLs carry a hash of their
//! bytes, so a new build is a new URL.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("../assets/console.css");
const JS: &str = include_str!("../assets/console.js");

/// The paths, hashed once: every page names them.
static CSS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/console/assets/console.{}.css", short_hash(CSS)));
static JS_PATH: LazyLock<String> =
    LazyLock::new(|| format!("/console/assets/console.{}.js", short_hash(JS)));

/// The stylesheet's path under the public URL's path.
pub fn css_path() -> &'static str {
    &CSS_PATH
}

/// The script's path under the public URL's path.
pub fn js_path() -> &'static str {
    &JS_PATH
}

/// FNV-1a of `text`, enough to tell two builds' assets apart.
fn short_hash(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{:08x}", hash >> 32)
}

pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let asked = format!("/console/assets/{name}");
    let (body, kind) = if asked == css_path() {
        (CSS, "text/css; charset=utf-8")
    } else if asked == js_path() {
        (JS, "text/javascript; charset=utf-8")
    } else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// No icon: an empty answer, so that a browser's request for one is not
/// an error in its console.
pub(crate) async fn favicon() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=86400"),
    );
    response
}
