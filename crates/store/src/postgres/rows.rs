//! What the Postgres role implementations share: statements, row readers
//! and the helpers of writes (catalog bumps, notices, policy locks). Each
//! role of the store is implemented in its own file beside this one; where
//! SQLite relies on its single writer to make "read, then write" atomic,
//! the comment there says what does it here.

use async_trait::async_trait;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{PgStore, col, db_error, word};
use crate::packed::unpack_bytes;
use crate::records::tool_calls_from_json;
use crate::secrets::SecretRef;
use crate::*;

/// One event, as it comes.
pub(super) const EVENT_INSERT: &str = "INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (session_id, stream_id, seq) DO UPDATE SET data = excluded.data, \
     undelivered = excluded.undelivered, created_at = excluded.created_at";
/// One event of the session's holder: the row comes from the session's own
/// row, locked FOR SHARE, so it is inserted only while the fence holds — a
/// racing claim waits for this statement, or this one sees the claim and
/// inserts nothing.
pub(super) const FENCED_EVENT_INSERT: &str = "INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
     SELECT $1, $2, $3, $4, $5, $6 FROM sessions \
     WHERE id = $1 AND holder = $7 AND epoch = $8 FOR SHARE \
     ON CONFLICT (session_id, stream_id, seq) DO UPDATE SET data = excluded.data, \
     undelivered = excluded.undelivered, created_at = excluded.created_at";

/// A CTE that locks the session rows of the batch `$1` that meet
/// `condition`, in id order, before a batch UPDATE joins `locked`. The
/// UPDATE's join visits rows in whatever order its plan chose, so two
/// batches (activity touches, lease releases) sharing sessions could each
/// hold a row the other waits for; Postgres locks a `SELECT … ORDER BY …
/// FOR …`'s rows after sorting them, so batches locked here never
/// deadlock. The lock is the UPDATE's own (`FOR NO KEY UPDATE`), taken only
/// on rows the UPDATE may change (Postgres rechecks `condition` after a
/// wait), and `MATERIALIZED` keeps the CTE from being folded into the join.
pub(super) fn sessions_locked_in_order(condition: &str) -> String {
    format!(
        "WITH locked AS MATERIALIZED \
         (SELECT id FROM sessions WHERE id = ANY($1::text[]) {condition} ORDER BY id FOR NO KEY UPDATE)"
    )
}

/// Serialises `ensure_account` across nodes, as SQLite's IMMEDIATE
/// transaction does: two first logins of one email make one account.
pub(super) const ACCOUNTS_LOCK: &str = "executor:ensure_account";

impl PgStore {
    /// One statement on a pooled connection, prepared once per connection.
    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<u64> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(db_error)?;
        client.execute(&statement, params).await.map_err(db_error)
    }

    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Vec<Row>> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(db_error)?;
        client.query(&statement, params).await.map_err(db_error)
    }

    /// One statement committed without waiting for its WAL flush (on the
    /// unflushed pool, `synchronous_commit=off`): the commit is visible to
    /// every node at once, and only a database crash may lose it. Used only
    /// for writes whose loss is harmless, each saying why where it is
    /// called; every other write waits for its flush.
    pub(super) async fn query_unflushed(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Vec<Row>> {
        let client = self.unflushed_client().await?;
        let statement = client.prepare_cached(sql).await.map_err(db_error)?;
        client.query(&statement, params).await.map_err(db_error)
    }

    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Option<Row>> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await.map_err(db_error)?;
        client.query_opt(&statement, params).await.map_err(db_error)
    }
}

/// An org's committed catalog version: read by every execution.
pub(super) const CATALOG_VERSION: &str = "SELECT version FROM catalog_versions WHERE org_id = $1";

pub(super) fn to_json(v: &serde_json::Value) -> String {
    v.to_string()
}

pub(super) fn from_json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

pub(super) fn session_from_row(r: &Row) -> StoreResult<SessionRecord> {
    Ok(SessionRecord {
        id: col(r, 0)?,
        owner: Principal {
            account_id: col(r, 1)?,
            org_id: col(r, 2)?,
        },
        protocol_version: col(r, 3)?,
        client_info: from_json(col(r, 4)?),
        client_capabilities: from_json(col(r, 5)?),
        elicitation_mode: word(r, 6)?,
        created_at_ms: col(r, 7)?,
        last_activity_at_ms: col(r, 8)?,
        terminated_at_ms: col(r, 9)?,
    })
}

pub(super) fn event_from_row(r: &Row) -> StoreResult<EventRecord> {
    Ok(EventRecord {
        session_id: col(r, 0)?,
        stream_id: col(r, 1)?,
        seq: col(r, 2)?,
        data: col(r, 3)?,
        undelivered: col(r, 4)?,
        created_at_ms: col(r, 5)?,
    })
}

pub(super) fn execution_from_row(r: &Row) -> StoreResult<ExecutionRecord> {
    let logs: &str = col(r, 8)?;
    Ok(ExecutionRecord {
        id: col(r, 0)?,
        session_id: col(r, 1)?,
        account_id: col(r, 2)?,
        org_id: col(r, 3)?,
        code: col(r, 4)?,
        status: word(r, 5)?,
        result: col::<Option<&str>>(r, 6)?.map(from_json),
        error: col(r, 7)?,
        logs: serde_json::from_str(logs).unwrap_or_default(),
        tool_calls: tool_calls_from_json(col(r, 9)?),
        started_at_ms: col(r, 10)?,
        duration_ms: col(r, 11)?,
    })
}

pub(super) fn connection_from_row(r: &Row) -> StoreResult<ConnectionRecord> {
    Ok(ConnectionRecord {
        org_id: col(r, 0)?,
        namespace: col(r, 1)?,
        kind: word(r, 2)?,
        username: col(r, 3)?,
        secret: col(r, 4)?,
        updated_at_ms: col(r, 5)?,
        oauth: col(r, 6)?,
        generation: col(r, 7)?,
    })
}

pub(super) fn pending_login_from_row(r: &Row) -> StoreResult<PendingLoginRecord> {
    Ok(PendingLoginRecord {
        state_hash: col(r, 0)?,
        org_id: col(r, 1)?,
        namespace: col(r, 2)?,
        sealed: col(r, 3)?,
        request: col(r, 4)?,
        created_at_ms: col(r, 5)?,
        expires_at_ms: col(r, 6)?,
    })
}

/// An optional stored word (`None` for NULL).
fn opt_word<T: std::str::FromStr<Err = UnknownValue>>(
    r: &Row,
    index: usize,
) -> StoreResult<Option<T>> {
    col::<Option<&str>>(r, index)?
        .map(|text| {
            text.parse()
                .map_err(|e: UnknownValue| StoreError::database_caused(e.to_string(), e))
        })
        .transpose()
}

pub(super) fn tool_call_from_row(r: &Row) -> StoreResult<ToolCallRecord> {
    let names: &str = col(r, 13)?;
    Ok(ToolCallRecord {
        id: col(r, 0)?,
        org_id: col(r, 1)?,
        execution_id: col(r, 2)?,
        session_id: col(r, 3)?,
        account_id: col(r, 4)?,
        tool_path: col(r, 5)?,
        outcome: word(r, 6)?,
        error_code: col(r, 7)?,
        policy_action: opt_word(r, 8)?,
        policy_rule: col(r, 9)?,
        approval: opt_word(r, 10)?,
        decided_by: col(r, 11)?,
        approval_wait_ms: col(r, 12)?,
        arg_names: serde_json::from_str(names).unwrap_or_default(),
        started_at_ms: col(r, 14)?,
        duration_ms: col(r, 15)?,
        decided_via: opt_word(r, 16)?,
    })
}

pub(super) fn token_from_row(r: &Row) -> StoreResult<TokenRecord> {
    Ok(TokenRecord {
        id: col(r, 0)?,
        secret_hash: col(r, 1)?,
        principal: Principal {
            account_id: col(r, 2)?,
            org_id: col(r, 3)?,
        },
        created_at_ms: col(r, 4)?,
        expires_at_ms: col(r, 5)?,
        revoked_at_ms: col(r, 6)?,
        grant_id: col(r, 7)?,
    })
}

/// Writes a token row (an API token, or an OAuth access token with its
/// grant) in a transaction; the caller calls [`PgStore::access_changed`]
/// after its commit.
pub(super) async fn insert_token_row(
    tx: &deadpool_postgres::Transaction<'_>,
    t: &TokenRecord,
) -> StoreResult<()> {
    tx.execute(INSERT_TOKEN, &token_params(t))
        .await
        .map_err(db_error)?;
    Ok(())
}

/// A token row, [`TOKEN_COLUMNS`](crate::columns::TOKEN_COLUMNS) in order.
pub(super) const INSERT_TOKEN: &str = "INSERT INTO tokens (id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at, grant_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

pub(super) fn token_params(t: &TokenRecord) -> [&(dyn ToSql + Sync); 8] {
    [
        &t.id,
        &t.secret_hash,
        &t.principal.account_id,
        &t.principal.org_id,
        &t.created_at_ms,
        &t.expires_at_ms,
        &t.revoked_at_ms,
        &t.grant_id,
    ]
}

/// The keyset bound of a page: (time, id) of the previous page's last row.
pub(super) fn page_after(page: &PageRequest) -> (Option<i64>, Option<&str>) {
    match &page.after {
        Some(key) => (Some(key.started_at_ms), Some(key.id.as_str())),
        None => (None, None),
    }
}

pub(super) fn policy_from_row(r: &Row) -> StoreResult<PolicyRecord> {
    Ok(PolicyRecord {
        id: col(r, 0)?,
        org_id: col(r, 1)?,
        pattern: col(r, 2)?,
        action: word(r, 3)?,
        position: col(r, 4)?,
        created_at_ms: col(r, 5)?,
    })
}

pub(super) fn rows<T>(rows: Vec<Row>, f: impl Fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
}

pub(super) fn document(bytes: &[u8]) -> StoreResult<String> {
    unpack_bytes(bytes).map_err(StoreError::database)
}

/// `org/namespace` of every connection whose secret is sealed (not an
/// `env://` reference), by org name where the org still exists.
pub(super) async fn sealed_connections(store: &PgStore) -> StoreResult<Vec<String>> {
    let found = store
        .query(
            "SELECT COALESCE(o.name, c.org_id), c.namespace, c.secret FROM connections c \
             LEFT JOIN orgs o ON o.id = c.org_id ORDER BY 1 COLLATE \"C\", 2 COLLATE \"C\"",
            &[],
        )
        .await?;
    let mut sealed = Vec::new();
    for row in &found {
        let (org, namespace, secret): (&str, &str, &str) =
            (col(row, 0)?, col(row, 1)?, col(row, 2)?);
        if SecretRef::is_sealed(secret) {
            sealed.push(format!("{org}/{namespace}"));
        }
    }
    Ok(sealed)
}

#[async_trait]
impl Store for PgStore {
    async fn flush(&self) -> StoreResult<()> {
        // Every write above is committed before its method returns, but
        // for the delivery marks, which linger.
        self.flush_marks().await;
        Ok(())
    }

    // `writes_backed_up` stays false: Postgres has no write queue of ours.
    // Writes wait for a pooled connection, and that wait is the bound
    // (`POOL_WAIT`, then `StoreError::Busy`). Requests waiting for one of
    // the pool's connections are the normal state of a burst, not a
    // backlog (300 agents at once waited and were all served).
}

/// Marks the org's catalog as changed, so servers rebuild it; the new
/// version. The row lock it takes orders the org's integration writers.
pub(super) async fn bump_catalog_version(
    tx: &deadpool_postgres::Transaction<'_>,
    org_id: &str,
) -> StoreResult<i64> {
    let row = tx
        .query_one(
            "INSERT INTO catalog_versions (org_id, version) VALUES ($1, 1) \
             ON CONFLICT (org_id) DO UPDATE SET version = catalog_versions.version + 1 \
             RETURNING version",
            &[&org_id],
        )
        .await
        .map_err(db_error)?;
    col(&row, 0)
}

/// A notice sent when the transaction commits (never if it rolls back).
pub(super) async fn notify(
    tx: &deadpool_postgres::Transaction<'_>,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    tx.execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Serialises the writers of one org's policy positions until commit.
pub(super) async fn lock_policies(
    tx: &deadpool_postgres::Transaction<'_>,
    org_id: &str,
) -> StoreResult<()> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('executor:policies:' || $1, 0))",
        &[&org_id],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

/// A list query's parameters as Postgres binds them.
pub(super) fn pg_params(params: &[crate::listing::Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|param| match param {
            crate::listing::Param::Text(text) => text as &(dyn ToSql + Sync),
            crate::listing::Param::Int(n) => n as &(dyn ToSql + Sync),
        })
        .collect()
}
