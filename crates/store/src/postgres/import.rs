//! `executor migrate`: an embedded SQLite store copied into an empty
//! Postgres one, so that a user who outgrows one machine keeps their tokens,
//! integrations, connections, policies and history.
//!
//! All or nothing: the SQLite file is read in one read transaction (a WAL
//! snapshot, consistent even while a server writes; later writes do not
//! move, which is why the command says to stop servers first), every sealed
//! secret is opened with the key before anything is written, and the copy
//! is one Postgres transaction whose row counts are compared with the
//! source's before it commits.
//!
//! The columns come from the Postgres schema itself (the schema parity
//! test keeps both stores' columns equal), so a new column needs nothing
//! here; a new table is named in `TABLES`. The built-in authorization server's clients and grants travel
//! with their tokens, so MCP clients stay signed in, and so do browsers
//! (console sessions). What is not copied: OAuth logins in flight (minutes
//! long; run the login again), the schedule of periodic jobs, and the
//! SQLite-only `PRAGMA`s. Sessions keep their ids, so a
//! client that reconnects with its session id is restored on Postgres.

use std::path::Path;

use deadpool_postgres::Transaction;
use rusqlite::OptionalExtension;
use rusqlite::types::Value;
use tokio_postgres::types::ToSql;

use super::notices::CATALOG_CHANNEL;
use super::{PgStore, col, db_error, pg_text};
use crate::packed::pack;
use crate::secrets::{SecretKey, SecretRef, connection_aad, open};
use crate::{SqliteStore, StoreError, StoreResult};

/// The tables copied, parents first (foreign keys).
const TABLES: &[&str] = &[
    "accounts",
    "orgs",
    "memberships",
    "tokens",
    "sessions",
    "events",
    "executions",
    "tool_calls",
    "policies",
    "execution_states",
    "integrations",
    "catalog_versions",
    "connections",
    // The authorization server's clients, then what hangs off them (no
    // foreign keys, but the same order), and browser sign-in.
    "oauth_clients",
    "oauth_grants",
    "oauth_codes",
    "oauth_refresh_tokens",
    "login_links",
    "console_sessions",
];

/// Rows read from SQLite and sent to Postgres at a time.
const CHUNK: i64 = 500;

/// How many rows of each table were copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    pub tables: Vec<(String, u64)>,
}

/// How a column is sent to Postgres.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ColumnKind {
    Text,
    Int,
    Bool,
    Bytes,
    /// `integrations.document`: packed bytes, or TEXT from an earlier
    /// release, which is packed on the way.
    Document,
}

struct Table {
    name: &'static str,
    columns: Vec<(String, ColumnKind)>,
}

impl PgStore {
    /// Copies the SQLite store at `sqlite_path` into this (empty) store.
    /// `key` must open every sealed connection secret of the source; the
    /// key check of this store is set to it.
    pub async fn import_sqlite(
        &self,
        sqlite_path: &Path,
        key: &SecretKey,
    ) -> StoreResult<ImportReport> {
        // The start checks and migrations of the source, as a server would.
        drop(SqliteStore::open(sqlite_path)?);
        let source = crate::sqlite::connect(sqlite_path)?;
        refuse_while_served(&source)?;
        source.execute_batch("BEGIN")?;
        check_sealed_secrets(&source, key)?;

        let mut client = self.client().await?;
        let tables = tables(&client).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        refuse_unless_empty(&tx).await?;
        let mut report = ImportReport { tables: Vec::new() };
        for table in &tables {
            let copied = copy_table(&source, &tx, table).await?;
            report.tables.push((table.name.to_string(), copied));
        }
        // Nodes already running on this database hear of the catalogs, as
        // they do of every integration write.
        tx.execute(
            &format!("SELECT pg_notify('{CATALOG_CHANNEL}', org_id) FROM catalog_versions"),
            &[],
        )
        .await
        .map_err(db_error)?;
        source.execute_batch("COMMIT")?;
        tx.commit().await.map_err(db_error)?;
        self.catalog_changed();
        drop(client);
        self.check_secret_key(key).await?;
        Ok(report)
    }
}

/// Each table's columns and how they travel, read from Postgres.
async fn tables(client: &deadpool_postgres::Client) -> StoreResult<Vec<Table>> {
    let mut out = Vec::new();
    for name in TABLES {
        let rows = client
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                &[name],
            )
            .await
            .map_err(db_error)?;
        let mut columns = Vec::new();
        for row in &rows {
            let (column, data_type): (String, &str) = (col(row, 0)?, col(row, 1)?);
            let kind = match (*name, column.as_str(), data_type) {
                ("integrations", "document", _) => ColumnKind::Document,
                (_, _, "text") => ColumnKind::Text,
                (_, _, "bigint") => ColumnKind::Int,
                (_, _, "boolean") => ColumnKind::Bool,
                (_, _, "bytea") => ColumnKind::Bytes,
                (_, _, other) => {
                    return Err(StoreError::database(format!(
                        "{name}.{column} has a type the copy does not know: {other}"
                    )));
                }
            };
            columns.push((column, kind));
        }
        out.push(Table { name, columns });
    }
    Ok(out)
}

/// The copy goes into an empty store only: merging two stores' accounts
/// and orgs is not a copy.
async fn refuse_unless_empty(tx: &Transaction<'_>) -> StoreResult<()> {
    let mut holding = Vec::new();
    for name in TABLES {
        let row = tx
            .query_one(&format!("SELECT count(*) FROM {name}"), &[])
            .await
            .map_err(db_error)?;
        let count: i64 = col(&row, 0)?;
        if count > 0 {
            holding.push(format!("{count} {name}"));
        }
    }
    if holding.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "the Postgres store already holds data ({}); migrate copies into an empty \
             database only: create a new one (createdb) and point --database-url \
             (EXECUTOR_DATABASE_URL) at it",
            holding.join(", ")
        )))
    }
}

/// Refuses to copy a store a server is still serving: its writes after the
/// copy would be lost. A server is a node with an address whose lease runs
/// (a CLI command's node has none).
fn refuse_while_served(source: &rusqlite::Connection) -> StoreResult<()> {
    let serving: Option<(String, String)> = source
        .query_row(
            "SELECT id, url FROM nodes WHERE url IS NOT NULL AND alive_until > ?1 LIMIT 1",
            [crate::now_ms()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    match serving {
        None => Ok(()),
        Some((node, url)) => Err(StoreError::Invalid(format!(
            "a server is still serving this store (node {node} at {url}): stop it first, \
             then migrate, so that nothing it writes afterwards is left behind"
        ))),
    }
}

/// Opens every sealed connection secret with `key` before anything is
/// written: a copy whose secrets no node could open is refused whole.
fn check_sealed_secrets(source: &rusqlite::Connection, key: &SecretKey) -> StoreResult<()> {
    let mut stmt = source.prepare(
        "SELECT COALESCE(o.name, c.org_id), c.org_id, c.namespace, c.secret FROM connections c \
         LEFT JOIN orgs o ON o.id = c.org_id ORDER BY 1, 3",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut unopened = Vec::new();
    for row in rows {
        let (org, org_id, namespace, secret) = row?;
        if SecretRef::is_sealed(&secret)
            && open(key, &secret, &connection_aad(&org_id, &namespace)).is_err()
        {
            unopened.push(format!("{org}/{namespace}"));
        }
    }
    if unopened.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "the secret key does not open the sealed secrets of {}: give migrate the key the \
             SQLite store was used with (EXECUTOR_SECRET_KEY or <data-dir>/secret.key); nothing \
             was copied",
            unopened.join(", ")
        )))
    }
}

type Param = Box<dyn ToSql + Sync + Send>;

/// Copies one table in chunks; the number of rows, checked against the source.
async fn copy_table(
    source: &rusqlite::Connection,
    tx: &Transaction<'_>,
    table: &Table,
) -> StoreResult<u64> {
    let names: Vec<&str> = table.columns.iter().map(|(c, _)| c.as_str()).collect();
    let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
    let insert = tx
        .prepare(&format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            names.join(", "),
            placeholders.join(", ")
        ))
        .await
        .map_err(db_error)?;
    let mut copied = 0u64;
    loop {
        let chunk = read_chunk(source, table, &names, copied as i64)?;
        if chunk.is_empty() {
            break;
        }
        for row in &chunk {
            let params: Vec<&(dyn ToSql + Sync)> = row
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            tx.execute(&insert, &params).await.map_err(db_error)?;
        }
        copied += chunk.len() as u64;
    }
    let expected: i64 =
        source.query_row(&format!("SELECT count(*) FROM {}", table.name), [], |r| {
            r.get(0)
        })?;
    let row = tx
        .query_one(&format!("SELECT count(*) FROM {}", table.name), &[])
        .await
        .map_err(db_error)?;
    let landed: i64 = col(&row, 0)?;
    if landed != expected || copied != expected as u64 {
        return Err(StoreError::database(format!(
            "{}: {expected} rows in SQLite, {landed} copied; nothing was committed",
            table.name
        )));
    }
    Ok(copied)
}

/// Up to [`CHUNK`] rows from `offset`, in a stable order, as parameters.
fn read_chunk(
    source: &rusqlite::Connection,
    table: &Table,
    names: &[&str],
    offset: i64,
) -> StoreResult<Vec<Vec<Param>>> {
    // Every table has a primary key; ordering by all columns of it is
    // stable, and rowid is not there for WITHOUT ROWID tables.
    let mut stmt = source.prepare(&format!(
        "SELECT {} FROM {} ORDER BY {} LIMIT ?1 OFFSET ?2",
        names.join(", "),
        table.name,
        primary_key(table.name)
    ))?;
    let mut rows = stmt.query([CHUNK, offset])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut params: Vec<Param> = Vec::with_capacity(names.len());
        for (i, (column, kind)) in table.columns.iter().enumerate() {
            let value: Value = row.get(i)?;
            params.push(convert(table.name, column, *kind, value)?);
        }
        out.push(params);
    }
    Ok(out)
}

fn primary_key(table: &str) -> &'static str {
    match table {
        "memberships" => "account_id, org_id",
        "events" => "session_id, stream_id, seq",
        "integrations" | "connections" => "org_id, namespace",
        "catalog_versions" => "org_id",
        "oauth_codes" => "code_hash",
        "oauth_refresh_tokens" => "token_hash",
        "login_links" => "link_hash",
        "console_sessions" => "session_hash",
        _ => "id",
    }
}

/// One SQLite value as the Postgres column takes it.
fn convert(table: &str, column: &str, kind: ColumnKind, value: Value) -> StoreResult<Param> {
    let mismatch = |value: &Value| {
        StoreError::database(format!(
            "{table}.{column} holds a value the copy cannot convert ({:?})",
            value.data_type()
        ))
    };
    Ok(match (kind, value) {
        (ColumnKind::Text, Value::Null) => Box::new(None::<String>),
        (ColumnKind::Text, Value::Text(text)) => Box::new(pg_text(&text).into_owned()),
        (ColumnKind::Int, Value::Null) => Box::new(None::<i64>),
        (ColumnKind::Int, Value::Integer(n)) => Box::new(n),
        (ColumnKind::Bool, Value::Integer(n)) => Box::new(n != 0),
        (ColumnKind::Bytes, Value::Null) => Box::new(None::<Vec<u8>>),
        (ColumnKind::Bytes, Value::Blob(bytes)) => Box::new(bytes),
        (ColumnKind::Document, Value::Blob(bytes)) => Box::new(bytes),
        (ColumnKind::Document, Value::Text(text)) => Box::new(pack(&text)),
        (_, other) => return Err(mismatch(&other)),
    })
}
