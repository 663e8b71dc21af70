//! A request as an integration kind hands it to the client: its parts
//! already encoded, the credential not yet placed.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::header::{COOKIE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use zeroize::Zeroizing;

use crate::credential::Credential;
use crate::failure::{CONNECTION_REJECTED, HttpFailure};

/// Everything but RFC 3986 unreserved characters is encoded: a value can
/// never break out of its path segment, query pair or cookie.
pub const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// A request before its URL exists: path and query pieces already encoded,
/// headers and cookies set, the body encoded.
#[derive(Debug)]
pub struct OutboundRequest {
    pub method: Method,
    /// From `/`, encoded.
    pub path: String,
    /// `name=value` pieces, encoded.
    pub query: Vec<String>,
    pub headers: HeaderMap,
    /// (name, encoded value).
    pub cookies: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

impl OutboundRequest {
    pub fn new(method: Method, path: String) -> Self {
        OutboundRequest {
            method,
            path,
            query: Vec::new(),
            headers: HeaderMap::new(),
            cookies: Vec::new(),
            body: None,
        }
    }

    /// Puts the credential where `placement` says; a value a header cannot
    /// carry is refused.
    pub fn apply_credential(
        &mut self,
        placement: Option<Placement<'_>>,
    ) -> Result<(), HttpFailure> {
        let header_error = || {
            HttpFailure::new(
                CONNECTION_REJECTED,
                "the connection's credential contains characters an HTTP header cannot carry",
            )
        };
        match placement {
            None => {}
            Some(Placement::Header(name, secret)) => {
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| header_error())?;
                let value = sensitive_header(secret).ok_or_else(header_error)?;
                self.headers.insert(name, value);
            }
            Some(Placement::Query(name, secret)) => self.query.push(format!(
                "{}={}",
                utf8_percent_encode(name, COMPONENT),
                utf8_percent_encode(secret, COMPONENT)
            )),
            Some(Placement::Cookie(name, secret)) => {
                // The credential wins over a parameter of the same name.
                self.cookies.retain(|(n, _)| n != name);
                let value = utf8_percent_encode(secret, COMPONENT).to_string();
                self.cookies.push((name.to_string(), value));
            }
            Some(Placement::Bearer(token)) => {
                let text = Zeroizing::new(format!("Bearer {token}"));
                let value = sensitive_header(&text).ok_or_else(header_error)?;
                self.headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            Some(Placement::Basic(user, password)) => {
                let token = Credential::basic_token(user, password);
                let text = Zeroizing::new(format!("Basic {}", token.as_str()));
                let value = sensitive_header(&text).ok_or_else(header_error)?;
                self.headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        Ok(())
    }

    /// The URL under `base`; the cookies become their header.
    pub fn url(&mut self, base: &str) -> Result<Url, HttpFailure> {
        if !self.cookies.is_empty() {
            let cookie = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            let value = sensitive_header(&cookie).ok_or_else(|| {
                HttpFailure::invalid("a cookie parameter cannot be sent as a header")
            })?;
            self.headers.insert(COOKIE, value);
        }
        let mut text = format!("{}{}", base.trim_end_matches('/'), self.path);
        if !self.query.is_empty() {
            text.push(if text.contains('?') { '&' } else { '?' });
            text.push_str(&self.query.join("&"));
        }
        // The message names the base only: the full URL may hold a key.
        Url::parse(&text).map_err(|e| {
            HttpFailure::upstream(format!("the base URL {base:?} is not usable: {e}"), false)
        })
    }
}

/// How an integration kind builds one call's request for a credential:
/// once, and again for the renewed credential when the upstream refused
/// the first (`HttpClient::send_renewing`).
pub trait BuildRequest {
    /// The request, and where `credential` goes in it.
    fn build<'a>(
        &'a self,
        credential: &'a Credential,
    ) -> Result<(OutboundRequest, Option<Placement<'a>>), HttpFailure>;
}

/// Marked sensitive so that reqwest and hyper never print it.
pub fn sensitive_header(text: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(text).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Where the credential goes (chosen by the integration kind from what its
/// API declares): a named header, query parameter or cookie, or the
/// `Authorization` header as a bearer token or Basic pair. Borrows the
/// secret; nothing is copied until the request is built.
#[derive(PartialEq, Eq)]
pub enum Placement<'a> {
    Header(&'a str, &'a str),
    Query(&'a str, &'a str),
    Cookie(&'a str, &'a str),
    Bearer(&'a str),
    Basic(&'a str, &'a str),
}
