//! The parts every command that runs tools shares, built from resolved
//! configs: the store (after its start checks), the key that seals
//! connection secrets, the outbound side (HTTP client, credentials, OAuth),
//! the org catalogs and the engine.

use std::sync::Arc;

use executor_engine::Engine;
use executor_integrations::{Credentials, Kinds, StoreCatalogs};
use executor_oauth::OAuth;
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

pub(crate) fn engine(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
) -> AnyResult<Arc<Engine>> {
    Ok(engine_and_outbound(store, global, opts)?.0)
}

/// The engine, and the outbound side its tools call through (for the
/// OAuth callback of `serve`).
pub(crate) fn engine_and_outbound(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
) -> AnyResult<(Arc<Engine>, Outbound)> {
    let outbound = outbound(store.clone(), global, opts.http())?;
    let catalogs = Arc::new(store_catalogs(store.clone(), &outbound, opts.upstream()));
    let engine = Arc::new(Engine::with_catalogs(store, opts.engine(), catalogs));
    Ok((engine, outbound))
}

/// What tool calls go out through: the guarded HTTP client, the org's
/// connections, and the OAuth client that refreshes their tokens.
pub(crate) struct Outbound {
    pub http: Arc<HttpClient>,
    pub credentials: Arc<Credentials>,
    pub oauth: Arc<OAuth>,
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
        key: Some(key),
        oauth: Some(oauth.clone()),
    });
    Ok(Outbound {
        http,
        credentials,
        oauth,
    })
}

/// Org catalogs from the store, with the HTTP client and credentials their
/// tools are invoked with.
pub(crate) fn store_catalogs(
    store: Arc<dyn Store>,
    outbound: &Outbound,
    upstream: UpstreamSettings,
) -> StoreCatalogs {
    let upstreams = Upstreams::new(
        outbound.http.clone(),
        outbound.credentials.clone(),
        store.clone(),
        upstream,
    );
    let kinds = Kinds::new(
        outbound.http.clone(),
        outbound.credentials.clone(),
        upstreams,
    );
    let core = executor_engine::core_tool_entries(store.clone());
    StoreCatalogs::new(store, kinds, core)
}
