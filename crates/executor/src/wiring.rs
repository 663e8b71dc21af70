//! The parts every command that runs tools shares, built from resolved
//! configs: the store (after its start checks), the key that seals
//! connection secrets, the outbound side (HTTP client, credentials, OAuth),
//! the org catalogs and the engine.

use std::sync::Arc;

use executor_catalog::CatalogSource;
use executor_engine::{Engine, EngineConfig};
use executor_integrations::{Credentials, Kinds, StoreCatalogs};
use executor_oauth::OAuth;
use executor_ops::{LoginCallback, Operations, Parts, SessionControl, Surface};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::secrets::{SecretError, SecretKey};
use executor_store::{PgOptions, PgStore, SqliteStore, Store, StoreOptions};
use executor_upstream::{UpstreamSettings, Upstreams};

use crate::AnyResult;
use crate::cli::{EngineOpts, GlobalOpts};

/// Opens the store after its start checks (SPEC §11), whose refusals are
/// the operator's message on stderr. `needs_secret_key`: the command seals or
/// opens connection secrets, so their key must still be there. `serving`:
/// a server, whose Postgres connections are all opened before it listens.
pub(crate) async fn open_store(
    global: &GlobalOpts,
    options: StoreOptions,
    needs_secret_key: bool,
    serving: bool,
) -> AnyResult<Arc<dyn Store>> {
    let url = global.database_url();
    if global.shared_store() {
        let pool_size = usize::from(global.database_pool_size);
        let store = PgStore::open(&url, PgOptions { pool_size }).await?;
        if needs_secret_key {
            // Never a key made up here: every node must hold the one the
            // store was set up with, and the check says so before anything
            // is sealed with another.
            store.check_secret_key(&load_secret_key(global)?).await?;
        }
        if serving {
            store.warm_pool().await;
        }
        return Ok(Arc::new(store));
    }
    let store = SqliteStore::open_url(&url, options)?;
    if needs_secret_key {
        // Before anything calls `SecretKey::load_or_create`, which would make
        // a new key that never opens the secrets already sealed.
        store.check_secret_key(&global.data_dir())?;
    }
    Ok(Arc::new(store))
}

/// The key that seals connection secrets: on the embedded store made on
/// first use; on a shared store only ever given (`EXECUTOR_SECRET_KEY` or an
/// existing `<data-dir>/secret.key`), since nodes share no files.
pub(crate) fn load_secret_key(global: &GlobalOpts) -> Result<SecretKey, SecretError> {
    if global.shared_store() {
        SecretKey::load_existing(&global.data_dir())
    } else {
        SecretKey::load_or_create(&global.data_dir())
    }
}

/// An engine and what it was built from.
pub(crate) struct Wired {
    pub engine: Arc<Engine>,
    /// What its tools call through (for the OAuth callback of `serve`).
    pub outbound: Outbound,
    /// The org catalogs it calls (the operations search them too).
    pub catalogs: Arc<dyn CatalogSource>,
}

/// `public_url` is a server's (its console links paused calls there);
/// None for a command.
pub(crate) fn wire_engine(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
    public_url: Option<&str>,
) -> AnyResult<Wired> {
    let outbound = outbound(store.clone(), global, opts.http())?;
    let catalogs: Arc<dyn CatalogSource> =
        Arc::new(store_catalogs(store.clone(), &outbound, opts.upstream()));
    let config = EngineConfig {
        console_approvals_url: public_url.map(|url| format!("{url}/console/approvals/")),
        ..opts.engine()
    };
    let engine = Arc::new(Engine::with_catalogs(store, config, catalogs.clone()));
    Ok(Wired {
        engine,
        outbound,
        catalogs,
    })
}

/// The operations over a wired engine: a server's (with its live
/// `sessions`), or a command's that runs code.
pub(crate) fn operations_of(
    store: Arc<dyn Store>,
    wired: &Wired,
    opts: &EngineOpts,
    surface: Surface,
    login_callback: Option<LoginCallback>,
    sessions: Option<Arc<dyn SessionControl>>,
) -> Operations {
    Operations::new(Parts {
        kinds: kinds(
            store.clone(),
            &wired.outbound.http,
            &wired.outbound.credentials,
            opts.upstream(),
            wired.outbound.key.clone(),
        ),
        store,
        credentials: wired.outbound.credentials.clone(),
        key: wired.outbound.key.clone(),
        catalogs: wired.catalogs.clone(),
        engine: Some(wired.engine.clone()),
        sessions,
        http: opts.http(),
        surface,
        login_callback,
    })
}

/// The operations of a command that runs no code. `with_key`: it seals or
/// opens connection secrets (see `commands::uses_secret_key`); without,
/// the key is never read, so a command works when it is lost.
pub(crate) fn command_operations(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    with_key: bool,
) -> AnyResult<Operations> {
    let http = HttpConfig::default();
    let (client, credentials, key) = if with_key {
        let outbound = outbound(store.clone(), global, http.clone())?;
        (outbound.http, outbound.credentials, outbound.key)
    } else {
        // Connections are listed, never opened.
        let credentials = Arc::new(Credentials {
            store: store.clone(),
            key: None,
            oauth: None,
        });
        (Arc::new(HttpClient::new(http.clone())?), credentials, None)
    };
    let upstream = UpstreamSettings::default();
    let core = executor_engine::core_tool_entries(store.clone());
    let catalog_kinds = kinds(
        store.clone(),
        &client,
        &credentials,
        upstream.clone(),
        key.clone(),
    );
    let catalogs: Arc<dyn CatalogSource> =
        Arc::new(StoreCatalogs::new(store.clone(), catalog_kinds, core));
    Ok(Operations::new(Parts {
        kinds: kinds(store.clone(), &client, &credentials, upstream, key.clone()),
        store,
        credentials,
        key,
        catalogs,
        engine: None,
        sessions: None,
        http,
        surface: SHELL,
        login_callback: None,
    }))
}

/// What an operator at the machine's shell may do: anything the flags ask.
pub(crate) const SHELL: Surface = Surface {
    allow_local_network: true,
    may_read_files: true,
    may_start_commands: true,
};

/// What tool calls go out through: the guarded HTTP client, the org's
/// connections, and the OAuth client that refreshes their tokens.
pub(crate) struct Outbound {
    pub http: Arc<HttpClient>,
    pub credentials: Arc<Credentials>,
    pub oauth: Arc<OAuth>,
    pub key: Option<Arc<SecretKey>>,
}

pub(crate) fn outbound(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    http: HttpConfig,
) -> AnyResult<Outbound> {
    let http = Arc::new(HttpClient::new(http)?);
    let key = Arc::new(load_secret_key(global)?);
    let oauth = Arc::new(OAuth::new(store.clone(), key.clone(), (*http).clone()));
    let credentials = Arc::new(Credentials {
        store,
        key: Some(key.clone()),
        oauth: Some(oauth.clone()),
    });
    Ok(Outbound {
        http,
        credentials,
        oauth,
        key: Some(key),
    })
}

/// Org catalogs from the store, with the HTTP client and credentials their
/// tools are invoked with.
pub(crate) fn store_catalogs(
    store: Arc<dyn Store>,
    outbound: &Outbound,
    upstream: UpstreamSettings,
) -> StoreCatalogs {
    let core = executor_engine::core_tool_entries(store.clone());
    let kinds = kinds(
        store.clone(),
        &outbound.http,
        &outbound.credentials,
        upstream,
        outbound.key.clone(),
    );
    StoreCatalogs::new(store, kinds, core)
}

/// The integration kinds, calling through `http` with `credentials`.
fn kinds(
    store: Arc<dyn Store>,
    http: &Arc<HttpClient>,
    credentials: &Arc<Credentials>,
    upstream: UpstreamSettings,
    key: Option<Arc<SecretKey>>,
) -> Kinds {
    let upstreams = Upstreams::new(http.clone(), credentials.clone(), store, upstream, key);
    Kinds::new(http.clone(), credentials.clone(), upstreams)
}

/// Fetches client ID metadata documents for the authorization server
/// (SPEC §4) through the outbound client: the integrations' SSRF guard and
/// TLS roots, the size bound, and no redirect followed.
pub(crate) struct ClientDocuments(HttpClient);

impl ClientDocuments {
    pub(crate) fn fetcher(
        config: HttpConfig,
    ) -> AnyResult<Arc<dyn executor_authz::DocumentFetcher>> {
        Ok(Arc::new(ClientDocuments(HttpClient::without_redirects(
            config,
        )?)))
    }
}

impl executor_authz::DocumentFetcher for ClientDocuments {
    fn fetch<'a>(
        &'a self,
        url: &'a str,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = Result<executor_authz::FetchedDocument, String>> + Send + 'a>,
    > {
        Box::pin(async move {
            let fetched = self
                .0
                .get_document(url, executor_authz::MAX_DOCUMENT_BYTES)
                .await
                .map_err(|failure| failure.message)?;
            Ok(executor_authz::FetchedDocument {
                body: fetched.body,
                cache_control: fetched.cache_control,
            })
        })
    }
}
