//! Client ID metadata documents (SPEC §4): a client whose `client_id` is
//! an https URL with a path is described by the JSON document at that URL,
//! so it need not register. The document is fetched by a
//! [`DocumentFetcher`] the binary provides (through the outbound SSRF
//! guard, https only, no redirects, 5 s, 64 KiB), checked by the same
//! rules as a registration, and saved as a public client whose id is the
//! URL: that saved record is the last good copy, which every node reads
//! at `/token`, and which `/authorize` uses when a refetch cannot reach
//! the document. A document that cannot be fetched and was never good is
//! an error page, and nothing is kept of it, so the next try fetches again.
//!
//! How long a good copy is fresh comes from its `Cache-Control` (between
//! [`MIN_FRESH`] and [`MAX_FRESH`]); freshness is this node's memory, so
//! another node fetches once for itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_store::{OAuthClientOrigin, OAuthClientRecord, Store, StoreError, now_ms};
use serde::Deserialize;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use url::Url;

use crate::registration::{Requested, check};

/// Largest document read.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// A fetch that has not finished by then fails.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest time a good copy is used without fetching again.
pub const MIN_FRESH: Duration = Duration::from_secs(5 * 60);
/// Longest time a good copy is used without fetching again.
pub const MAX_FRESH: Duration = Duration::from_secs(24 * 3600);
/// Documents whose freshness one node remembers; past it the stalest is
/// forgotten (and fetched again when next used).
const MAX_REMEMBERED: usize = 4096;
/// Fetches in flight at once; past it a request is told to try again.
const MAX_CONCURRENT_FETCHES: usize = 16;

/// A document as fetched: its bytes and its `Cache-Control`.
#[derive(Debug, Clone)]
pub struct FetchedDocument {
    pub body: Vec<u8>,
    pub cache_control: Option<String>,
}

/// Fetches a client ID metadata document. The binary's goes through the
/// outbound client (SSRF guard, TLS roots, no redirects, the size bound);
/// its error is a sentence safe to show the person signing in.
pub trait DocumentFetcher: Send + Sync + 'static {
    fn fetch<'a>(
        &'a self,
        url: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<FetchedDocument, String>> + Send + 'a>>;
}

/// Whether `client_id` names a metadata document: an https URL with a path
/// other than `/`, no fragment, no credentials, no dot segments.
pub fn is_document_url(client_id: &str) -> bool {
    let Ok(url) = Url::parse(client_id) else {
        return false;
    };
    // The parser removes dot segments: one that was there changes the text.
    url.scheme() == "https"
        && url.host_str().is_some()
        && url.path() != "/"
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none()
        && url.as_str() == client_id
}

/// Why a document's client cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("the client's metadata document at {url} could not be fetched: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the client's metadata document at {url} is not valid: {reason}")]
    Invalid { url: String, reason: String },
    #[error("too many client metadata documents are being fetched right now; try again")]
    Busy,
    #[error("the store is unavailable")]
    Store(#[from] StoreError),
}

/// The fields of a document beyond a registration's.
#[derive(Deserialize)]
struct Document {
    client_id: Option<String>,
    #[serde(flatten)]
    requested: Requested,
}

/// Checks a fetched document against the URL it was fetched from, into
/// the client record to save (public, whatever method it declares).
pub fn read_document(url: &str, body: &[u8]) -> Result<OAuthClientRecord, String> {
    let document: Document = serde_json::from_slice(body)
        .map_err(|e| format!("it is not a JSON object of client metadata: {e}"))?;
    if document.client_id.as_deref() != Some(url) {
        return Err("its client_id is not the URL it was fetched from".into());
    }
    let mut requested = document.requested;
    requested.token_endpoint_auth_method = None;
    let registration = check(requested).map_err(|e| e.to_string())?;
    Ok(OAuthClientRecord {
        id: url.to_string(),
        secret_hash: None,
        auth_method: "none".into(),
        redirect_uris: registration
            .redirect_uris
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        client_name: registration.client_name,
        origin: OAuthClientOrigin::MetadataDocument,
        created_at_ms: now_ms(),
        last_used_at_ms: None,
    })
}

/// How long a copy served with this `Cache-Control` stays fresh.
pub fn freshness(cache_control: Option<&str>) -> Duration {
    let mut fresh = Duration::ZERO;
    for directive in cache_control.unwrap_or("").split(',') {
        let directive = directive.trim().to_ascii_lowercase();
        if directive == "no-store" || directive == "no-cache" {
            return MIN_FRESH;
        }
        if let Some(seconds) = directive.strip_prefix("max-age=")
            && let Ok(seconds) = seconds.trim_matches('"').parse::<u64>()
        {
            fresh = Duration::from_secs(seconds);
        }
    }
    fresh.clamp(MIN_FRESH, MAX_FRESH)
}

/// The clients described by metadata documents, as this node knows them.
pub struct MetadataClients {
    fetcher: Arc<dyn DocumentFetcher>,
    /// URL → until when its saved copy is fresh.
    fresh: Mutex<HashMap<String, Instant>>,
    fetches: Semaphore,
}

impl MetadataClients {
    pub fn new(fetcher: Arc<dyn DocumentFetcher>) -> Self {
        MetadataClients {
            fetcher,
            fresh: Mutex::new(HashMap::new()),
            fetches: Semaphore::new(MAX_CONCURRENT_FETCHES),
        }
    }

    /// The client `url` describes: the saved copy while fresh, else the
    /// document fetched again (and saved), else — when it cannot be
    /// reached — the last good copy.
    pub async fn client(
        &self,
        store: &dyn Store,
        url: &str,
    ) -> Result<OAuthClientRecord, DocumentError> {
        let saved = store
            .find_oauth_client(url)
            .await?
            .filter(|c| c.origin == OAuthClientOrigin::MetadataDocument);
        if let Some(saved) = &saved
            && self.is_fresh(url)
        {
            return Ok(saved.clone());
        }
        let Ok(_permit) = self.fetches.try_acquire() else {
            return saved.ok_or(DocumentError::Busy);
        };
        let fetched = match tokio::time::timeout(FETCH_TIMEOUT, self.fetcher.fetch(url)).await {
            Ok(fetched) => fetched,
            Err(_) => Err(format!(
                "it did not arrive within {} s",
                FETCH_TIMEOUT.as_secs()
            )),
        };
        let document = match fetched {
            Ok(document) => document,
            Err(reason) => {
                return match saved {
                    Some(saved) => {
                        tracing::warn!(client_id = %url, %reason, "a client metadata document could not be fetched; its last good copy is used");
                        Ok(saved)
                    }
                    None => Err(DocumentError::Unreachable {
                        url: url.to_string(),
                        reason,
                    }),
                };
            }
        };
        let record =
            read_document(url, &document.body).map_err(|reason| DocumentError::Invalid {
                url: url.to_string(),
                reason,
            })?;
        if !store.save_metadata_client(record.clone()).await? {
            return Err(DocumentError::Invalid {
                url: url.to_string(),
                reason: "its URL is already another client's id".into(),
            });
        }
        self.remember(url, freshness(document.cache_control.as_deref()));
        Ok(match saved {
            Some(saved) => OAuthClientRecord {
                created_at_ms: saved.created_at_ms,
                last_used_at_ms: saved.last_used_at_ms,
                ..record
            },
            None => record,
        })
    }

    fn is_fresh(&self, url: &str) -> bool {
        self.fresh
            .lock()
            .ok()
            .and_then(|fresh| fresh.get(url).copied())
            .is_some_and(|until| Instant::now() < until)
    }

    fn remember(&self, url: &str, fresh_for: Duration) {
        let Ok(mut fresh) = self.fresh.lock() else {
            return;
        };
        let now = Instant::now();
        if fresh.len() >= MAX_REMEMBERED && !fresh.contains_key(url) {
            fresh.retain(|_, until| *until > now);
            if fresh.len() >= MAX_REMEMBERED
                && let Some(stalest) = fresh
                    .iter()
                    .min_by_key(|(_, until)| **until)
                    .map(|(k, _)| k.clone())
            {
                fresh.remove(&stalest);
            }
        }
        fresh.insert(url.to_string(), now + fresh_for);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use executor_store::SqliteStore;
    use proptest::prelude::*;

    use super::*;

    const URL: &str = "https://app.example/client.json";

    /// Answers with the next scripted outcome, and counts the fetches.
    #[derive(Default)]
    struct Scripted {
        answers: Mutex<VecDeque<Result<FetchedDocument, String>>>,
        fetched: Mutex<u32>,
    }

    impl Scripted {
        fn then(&self, answer: Result<FetchedDocument, String>) {
            self.answers.lock().unwrap().push_back(answer);
        }
        fn fetched(&self) -> u32 {
            *self.fetched.lock().unwrap()
        }
    }

    impl DocumentFetcher for Scripted {
        fn fetch<'a>(
            &'a self,
            _url: &'a str,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<FetchedDocument, String>> + Send + 'a>>
        {
            *self.fetched.lock().unwrap() += 1;
            let answer = self.answers.lock().unwrap().pop_front();
            Box::pin(async move { answer.unwrap_or_else(|| Err("nothing scripted".into())) })
        }
    }

    fn good(name: &str, cache_control: Option<&str>) -> Result<FetchedDocument, String> {
        let body = serde_json::json!({"client_id": URL, "client_name": name,
            "redirect_uris": ["https://app.example/cb"]});
        Ok(FetchedDocument {
            body: body.to_string().into_bytes(),
            cache_control: cache_control.map(str::to_string),
        })
    }

    fn store() -> (Arc<dyn Store>, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("cimd-{}", executor_store::tokens::random_id(8)));
        std::fs::create_dir_all(&dir).unwrap();
        (
            Arc::new(SqliteStore::open(&dir.join("executor.db")).unwrap()),
            dir,
        )
    }

    /// SPEC §4: a copy is used while fresh, fetched again when due, kept
    /// as the last good copy when a refetch fails; a document that never
    /// was good is an error each time, fetched anew each time.
    #[tokio::test(start_paused = true)]
    async fn a_good_copy_is_kept_and_a_failure_is_never_cached_as_good() {
        let (store, dir) = store();
        let fetcher = Arc::new(Scripted::default());
        let clients = MetadataClients::new(fetcher.clone());

        fetcher.then(Err("HTTP 404".into()));
        let err = clients.client(store.as_ref(), URL).await.unwrap_err();
        assert!(matches!(err, DocumentError::Unreachable { .. }), "{err}");
        assert!(
            store.find_oauth_client(URL).await.unwrap().is_none(),
            "nothing kept"
        );
        fetcher.then(Err("HTTP 404".into()));
        assert!(clients.client(store.as_ref(), URL).await.is_err());
        assert_eq!(fetcher.fetched(), 2, "a failure is not remembered");

        fetcher.then(good("App", Some("max-age=600")));
        let client = clients.client(store.as_ref(), URL).await.unwrap();
        assert_eq!(client.client_name.as_deref(), Some("App"));
        clients.client(store.as_ref(), URL).await.unwrap();
        assert_eq!(fetcher.fetched(), 3, "fresh for 600 s: not fetched again");

        tokio::time::advance(Duration::from_secs(601)).await;
        fetcher.then(Err("timed out".into()));
        let kept = clients.client(store.as_ref(), URL).await.unwrap();
        assert_eq!(
            kept.client_name.as_deref(),
            Some("App"),
            "the last good copy"
        );
        assert_eq!(fetcher.fetched(), 4);

        fetcher.then(good("App 2", None));
        let renewed = clients.client(store.as_ref(), URL).await.unwrap();
        assert_eq!(renewed.client_name.as_deref(), Some("App 2"));
        assert_eq!(renewed.created_at_ms, client.created_at_ms);

        fetcher.then(Ok(FetchedDocument {
            body: b"{}".to_vec(),
            cache_control: None,
        }));
        tokio::time::advance(MIN_FRESH + Duration::from_secs(1)).await;
        let invalid = clients.client(store.as_ref(), URL).await.unwrap_err();
        assert!(
            matches!(invalid, DocumentError::Invalid { .. }),
            "{invalid}"
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_document_url_is_https_with_a_path() {
        for yes in [
            "https://app.example/oauth/client.json",
            "https://app.example:8443/c",
        ] {
            assert!(is_document_url(yes), "{yes}");
        }
        for no in [
            "http://app.example/client.json",
            "https://app.example/",
            "https://app.example",
            "https://app.example/c#frag",
            "https://user@app.example/c",
            "https://app.example/a/../c",
            "cl_123",
            "exc_abc",
        ] {
            assert!(!is_document_url(no), "{no}");
        }
    }

    #[test]
    fn a_document_must_name_itself_and_is_a_public_client() {
        let url = "https://app.example/client.json";
        let body = serde_json::json!({
            "client_id": url, "client_name": "App", "redirect_uris": ["https://app.example/cb"],
            "token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://app.example/jwks",
            "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"]
        });
        let record = read_document(url, body.to_string().as_bytes()).unwrap();
        assert_eq!(record.id, url);
        assert_eq!(record.auth_method, "none");
        assert_eq!(record.secret_hash, None);
        assert_eq!(record.origin, OAuthClientOrigin::MetadataDocument);
        assert_eq!(record.client_name.as_deref(), Some("App"));

        let elsewhere = serde_json::json!({"client_id": "https://app.example/other.json",
            "redirect_uris": ["https://app.example/cb"]});
        assert!(read_document(url, elsewhere.to_string().as_bytes()).is_err());
        let bad_redirect =
            serde_json::json!({"client_id": url, "redirect_uris": ["http://app.example/cb"]});
        assert!(read_document(url, bad_redirect.to_string().as_bytes()).is_err());
        assert!(read_document(url, b"<html>").is_err());
    }

    #[test]
    fn freshness_follows_cache_control_within_bounds() {
        assert_eq!(freshness(None), MIN_FRESH);
        assert_eq!(freshness(Some("no-store")), MIN_FRESH);
        assert_eq!(freshness(Some("max-age=60")), MIN_FRESH);
        assert_eq!(
            freshness(Some("public, max-age=3600")),
            Duration::from_secs(3600)
        );
        assert_eq!(freshness(Some("max-age=31536000, immutable")), MAX_FRESH);
        assert_eq!(freshness(Some("max-age=junk")), MIN_FRESH);
    }

    proptest! {
        /// Whatever a document holds, reading it answers (never panics),
        /// and what it accepts is the URL's own public client.
        #[test]
        fn any_document_is_answered(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let url = "https://app.example/client.json";
            if let Ok(record) = read_document(url, &body) {
                prop_assert_eq!(record.id, url);
                prop_assert_eq!(record.auth_method, "none");
            }
        }

        #[test]
        fn freshness_is_always_within_bounds(header in "\\PC{0,60}") {
            let fresh = freshness(Some(&header));
            prop_assert!((MIN_FRESH..=MAX_FRESH).contains(&fresh));
        }
    }
}
