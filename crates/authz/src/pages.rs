//! The server-rendered pages of sign-in and consent, and the headers every
//! page carries: no script at all, no framing, no caching, no referrer.
//! Every value shown is escaped.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `Content-Security-Policy` of every page: nothing loads, nothing runs,
/// nothing frames it. (No `form-action`: Chromium applies it to the
/// redirect after a consent POST, which goes to the client.)
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'";

const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}\
h1{font-size:1.3rem}.box{border:1px solid #ccc;border-radius:8px;padding:1rem;margin:1rem 0}\
.warn{background:#fff4e5;border-color:#f0b45b}.muted{color:#666}label{display:block;margin:.6rem 0 .2rem}\
input[type=text],input[type=password],select{width:100%;padding:.4rem;box-sizing:border-box}\
button{padding:.45rem 1rem;margin:.8rem .4rem 0 0}code{word-break:break-all}";

/// HTML-escapes text for element content and quoted attributes, and
/// drops bidirectional controls, with which a client's name could show
/// as another.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title` is text, `body` is HTML already escaped.
pub fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=en><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width,initial-scale=1\">\
         <title>{title} · Executor</title><style>{STYLE}</style><main>\
         <h1>{title}</h1>{body}</main></html>\n",
        title = escape(title),
    );
    let mut response = (status, html).into_response();
    page_headers(&mut response);
    response
}

/// The headers of every page this crate renders.
pub fn page_headers(response: &mut Response) {
    html_headers(response, CSP);
}

/// The headers of a page of this server's (sign-in, consent, the
/// console): HTML under `csp`, never framed, never cached, no Referer to
/// another site, no content sniffing.
pub fn html_headers(response: &mut Response, csp: &'static str) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // No Referer leaves for another site (the client gets none from the
    // consent page), but not `no-referrer`: under it a browser sends
    // `Origin: null` with the page's own form POSTs, which the same-origin
    // check must refuse.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// An error shown in the browser instead of a redirect: an unknown client
/// or a redirect URI that is not registered is never redirected to.
pub fn error_page(status: StatusCode, message: &str) -> Response {
    page(
        status,
        "Cannot continue",
        &format!("<p>{}</p>", escape(message)),
    )
}

/// The page for a store that could not be read or written (SPEC §4: a
/// transient failure, try again); `what` says what failed, for the log.
pub fn unavailable_page(what: &str, error: &dyn std::fmt::Display) -> Response {
    tracing::error!(%error, "could not {what}");
    error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The server could not reach its store; try again.",
    )
}

/// A hidden form field.
pub fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=hidden name=\"{}\" value=\"{}\">",
        escape(name),
        escape(value)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_inert() {
        assert_eq!(
            escape("<script>\"x\"&'y'</script>"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
        assert!(!hidden("n", "\"><script>").contains("<script>"));
        assert_eq!(escape("evil\u{202e}gpj.exe"), "evilgpj.exe");
    }
}
