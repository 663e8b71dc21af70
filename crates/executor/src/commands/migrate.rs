//! `executor migrate`: the embedded store into Postgres (SPEC §10). The copy
//! itself is `PgStore::import_sqlite`; this is the command around it: which
//! stores, which key, and what the operator does next.

use std::path::PathBuf;

use executor_store::secrets::{KEY_ENV_VAR, KEY_FILE_NAME, SecretKey};
use executor_store::{PgOptions, PgStore, redact_database_url};

use crate::AnyResult;
use crate::cli::GlobalOpts;

pub(crate) async fn run(global: &GlobalOpts, from: Option<&str>) -> AnyResult<()> {
    if !global.shared_store() {
        return Err(
            "migrate copies into Postgres: set --database-url (or EXECUTOR_DATABASE_URL) to \
             postgres://USER:PASSWORD@HOST:PORT/DATABASE, an empty database"
                .into(),
        );
    }
    let source = match from {
        Some(url) => PathBuf::from(
            url.strip_prefix("sqlite://")
                .ok_or_else(|| format!("--from takes a sqlite://PATH URL, not {url:?}"))?,
        ),
        None => global.data_dir().join("executor.db"),
    };
    if !source.is_file() {
        return Err(format!("there is no SQLite store at {}", source.display()).into());
    }
    // The key the SQLite store sealed its secrets with: the environment's,
    // or the data dir's file. Never a new one.
    let key = SecretKey::load_existing(&global.data_dir())?;
    let target_url = global.database_url();
    let pool_size = usize::from(global.database_pool_size);
    let target = PgStore::open(&target_url, PgOptions { pool_size }).await?;
    let report = target.import_sqlite(&source, &key).await?;
    let copied: Vec<String> = report
        .tables
        .iter()
        .map(|(table, rows)| format!("{rows} {table}"))
        .collect();
    eprintln!(
        "copied {} into {}: {}",
        source.display(),
        redact_database_url(&target_url),
        copied.join(", ")
    );
    if std::env::var_os(KEY_ENV_VAR).is_none() {
        eprintln!(
            "every node needs this store's key: give each {KEY_ENV_VAR}=$(cat {})",
            global.data_dir().join(KEY_FILE_NAME).display()
        );
    }
    Ok(())
}
