//! Browser sign-in (SPEC §14): a console session is a random cookie whose
//! hash the store keeps with the (account, org) it acts for. It lapses
//! after 12 h without use. Its CSRF token is derived from the cookie (a
//! hash under a fixed label), so it needs no storage, differs per session
//! and cannot be computed by a page that cannot read the HttpOnly cookie.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use executor_store::tokens::{hash, is_current};
use executor_store::{
    ConsoleSessionRecord, LoginLinkRecord, Principal, SignInStore, Store, StoreResult, now_ms,
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::secrets::SecretKind;

/// The cookie's name over http.
pub const COOKIE: &str = "executor_session";
/// The cookie's name over https: the `__Host-` prefix makes browsers
/// refuse it from a sibling subdomain (which could otherwise sign a person
/// in as someone else) or with a `Domain`.
pub const SECURE_COOKIE: &str = "__Host-executor_session";

fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { COOKIE }
}
/// A session unused this long is signed out (SPEC §14).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(12 * 3600);
/// How long a login link may wait (SPEC §14).
pub const LOGIN_LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// Activity is written at most this often per session.
const TOUCH_EVERY_MS: i64 = 60_000;

/// A signed-in browser.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub principal: Principal,
    /// The token every form of this session carries.
    pub csrf: String,
    session_hash: Vec<u8>,
}

impl SignedIn {
    pub fn session_hash(&self) -> &[u8] {
        &self.session_hash
    }

    /// Whether `presented` is this session's CSRF token (constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(presented.as_bytes()))
    }
}

fn csrf_of(cookie: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(b"executor console csrf\0");
    digest.update(cookie.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.finalize())
}

/// The session cookie's value, if the request carries one.
fn cookie_value(headers: &HeaderMap, secure: bool) -> Option<&str> {
    let name = cookie_name(secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// The signed-in session a request's cookie names, if it is still live;
/// `secure`: the public URL is https (the cookie's name says so).
pub async fn signed_in(
    store: &dyn Store,
    headers: &HeaderMap,
    secure: bool,
) -> StoreResult<Option<SignedIn>> {
    let Some(cookie) = cookie_value(headers, secure) else {
        return Ok(None);
    };
    let session_hash = hash(cookie);
    let Some(session) = store.find_console_session(&session_hash).await? else {
        return Ok(None);
    };
    let now = now_ms();
    let idle = session.last_seen_at_ms + IDLE_TIMEOUT.as_millis() as i64 <= now;
    if idle || !token_still_current(store, session.token_id.as_deref(), now).await? {
        store.delete_console_session(&session_hash).await?;
        return Ok(None);
    }
    if now - session.last_seen_at_ms >= TOUCH_EVERY_MS {
        store.touch_console_session(&session_hash, now).await?;
    }
    Ok(Some(SignedIn {
        principal: session.principal,
        csrf: csrf_of(cookie),
        session_hash,
    }))
}

/// Whether the API token a session was signed in with (if any) still
/// acts: revoking it signs its browsers out.
async fn token_still_current(
    store: &dyn Store,
    token_id: Option<&str>,
    now: i64,
) -> StoreResult<bool> {
    let Some(id) = token_id else {
        return Ok(true);
    };
    Ok(store
        .find_token(id)
        .await?
        .is_some_and(|t| !t.is_oauth() && is_current(&t, now)))
}

/// Starts a session for `principal`, signed in with the API token
/// `token_id` if one was pasted: its `Set-Cookie` value.
pub async fn start_session(
    store: &dyn SignInStore,
    principal: Principal,
    token_id: Option<String>,
    secure: bool,
) -> StoreResult<HeaderValue> {
    let cookie = SecretKind::Cookie.mint();
    let now = now_ms();
    store
        .insert_console_session(ConsoleSessionRecord {
            session_hash: cookie.hash,
            principal,
            created_at_ms: now,
            last_seen_at_ms: now,
            token_id,
        })
        .await?;
    Ok(set_cookie(&cookie.text, secure, false))
}

/// `Set-Cookie` for the session cookie, or one that clears it.
pub fn set_cookie(value: &str, secure: bool, clear: bool) -> HeaderValue {
    let name = cookie_name(secure);
    let secure = if secure { "; Secure" } else { "" };
    let expiry = if clear { "; Max-Age=0" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax{secure}{expiry}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("executor_session=; Path=/; Max-Age=0"))
}

/// Makes a one-time login link for `principal` (`executor console
/// login-link`): the secret to put in `<public-url>/console/login?link=`.
pub async fn mint_login_link(store: &dyn SignInStore, principal: Principal) -> StoreResult<String> {
    let link = SecretKind::LoginLink.mint();
    let now = now_ms();
    store
        .insert_login_link(LoginLinkRecord {
            link_hash: link.hash,
            principal,
            created_at_ms: now,
            expires_at_ms: now + LOGIN_LINK_TTL.as_millis() as i64,
        })
        .await?;
    Ok(link.text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others_and_its_csrf_is_its_own() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; executor_session=abc; b=2"),
        );
        assert_eq!(cookie_value(&headers, false), Some("abc"));
        assert_eq!(
            cookie_value(&headers, true),
            None,
            "https wants the __Host- cookie"
        );
        assert_ne!(csrf_of("abc"), csrf_of("abd"));
        assert!(!csrf_of("abc").contains("abc"));
    }

    #[test]
    fn the_cookie_is_http_only_lax_and_secure_on_https() {
        let cookie = set_cookie("v", true, false);
        let text = cookie.to_str().unwrap();
        assert!(text.starts_with("__Host-executor_session="));
        assert!(
            text.contains("HttpOnly") && text.contains("SameSite=Lax") && text.contains("Secure")
        );
        assert!(
            !set_cookie("v", false, false)
                .to_str()
                .unwrap()
                .contains("Secure")
        );
    }
}
