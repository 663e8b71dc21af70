//! The Postgres schema, its migrations and the start checks that run before
//! them (SPEC §11, §10).
//!
//! `PG_MIGRATIONS` is to Postgres what `MIGRATIONS` in `sqlite/schema.rs` is to
//! SQLite: its first entry is the SQLite schema as the last SQLite migration
//! left it, in Postgres types (`INTEGER` → `BIGINT`, `BLOB` → `BYTEA`, 0/1
//! flags → `BOOLEAN`). A later schema change is an entry in both lists.
//! JSON stays `TEXT`: the stores never query into it, and `JSONB` would
//! reorder keys and cost a parse per write.
//!
//! Several nodes may start at once on one database: every migration runs in
//! its own transaction under one advisory lock, and re-reads the version
//! after taking it, so each is applied exactly once.

use deadpool_postgres::Client;

use super::{db_error, redact};
use crate::{Refusal, StoreError, StoreResult};

pub(super) const PG_MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    owner_account_id TEXT REFERENCES accounts(id)
);
CREATE UNIQUE INDEX orgs_owner ON orgs(owner_account_id) WHERE owner_account_id IS NOT NULL;
CREATE TABLE memberships (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    PRIMARY KEY (account_id, org_id)
);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    secret_hash BYTEA NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client_info TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    elicitation_mode TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_activity_at BIGINT NOT NULL,
    terminated_at BIGINT
);
CREATE INDEX sessions_last_activity ON sessions(last_activity_at);
CREATE TABLE events (
    session_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data TEXT NOT NULL,
    undelivered BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, stream_id, seq)
);
CREATE INDEX events_undelivered ON events(session_id) WHERE undelivered;
CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    session_id TEXT,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    code TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    error TEXT,
    logs TEXT NOT NULL,
    tool_calls TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL
);
CREATE INDEX executions_org_started ON executions(org_id, started_at);
CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    pattern TEXT NOT NULL,
    action TEXT NOT NULL,
    position BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX policies_org_position ON policies(org_id, position);
CREATE TABLE execution_states (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    decision TEXT
);
CREATE TABLE integrations (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    base_url TEXT,
    tool_count BIGINT NOT NULL,
    document BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    revision BIGINT NOT NULL DEFAULT 0,
    search_index BYTEA,
    PRIMARY KEY (org_id, namespace)
);
-- Both are LZ4 already: TOAST must not try to compress them again.
ALTER TABLE integrations
    ALTER COLUMN document SET STORAGE EXTERNAL,
    ALTER COLUMN search_index SET STORAGE EXTERNAL;
CREATE TABLE catalog_versions (
    org_id TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
CREATE TABLE connections (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    username TEXT,
    secret TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    oauth TEXT,
    generation BIGINT NOT NULL DEFAULT 0,
    lease_holder TEXT,
    lease_until BIGINT,
    PRIMARY KEY (org_id, namespace)
);
CREATE TABLE oauth_pending (
    state_hash TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    sealed TEXT NOT NULL,
    request TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    taken BOOLEAN NOT NULL DEFAULT false,
    outcome TEXT
);
-- Facts about the store itself: `key_check`, a value sealed with the key
-- of the first node, which a node with another key cannot open.
CREATE TABLE executor_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
"#,
    // Periodic jobs every node schedules (SQLite migration 11).
    r#"
CREATE TABLE jobs (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    next_at BIGINT NOT NULL
);
"#,
    // Nodes and session leases (SQLite migration 12). Lease times are the
    // database's clock, so nodes on machines whose clocks differ agree.
    r#"
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    url TEXT,
    started_at BIGINT NOT NULL,
    alive_until BIGINT NOT NULL
);
ALTER TABLE sessions ADD COLUMN holder TEXT;
ALTER TABLE sessions ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE execution_states ADD COLUMN holder TEXT;
ALTER TABLE execution_states ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE execution_states ADD COLUMN calling BIGINT NOT NULL DEFAULT -1;
CREATE FUNCTION executor_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
"#,
    // The access revision (SQLite migration 13): every change to tokens or
    // policies notifies `executor_access` in its own transaction, so nodes
    // drop their cached tokens and policies when it commits.
    r#"
CREATE FUNCTION executor_access_changed() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_notify('executor_access', ''); RETURN NULL; END $$;
CREATE TRIGGER tokens_access AFTER INSERT OR UPDATE OR DELETE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION executor_access_changed();
CREATE TRIGGER policies_access AFTER INSERT OR UPDATE OR DELETE ON policies
    FOR EACH STATEMENT EXECUTE FUNCTION executor_access_changed();
"#,
    // The audit trail of tool calls (SPEC §13; SQLite migration 14), written with each
    // execution's record; listed newest first per org with a keyset
    // (started_at, id), which the executions' index now ends with too.
    r#"
CREATE TABLE tool_calls (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    session_id TEXT,
    account_id TEXT NOT NULL,
    tool_path TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error_code TEXT,
    policy_action TEXT,
    policy_rule TEXT,
    approval TEXT,
    decided_by TEXT,
    approval_wait_ms BIGINT NOT NULL,
    arg_names TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL
);
CREATE INDEX tool_calls_org_started ON tool_calls(org_id, started_at, id);
CREATE INDEX tool_calls_execution ON tool_calls(execution_id);
DROP INDEX executions_org_started;
CREATE INDEX executions_org_started ON executions(org_id, started_at, id);
CREATE INDEX executions_started ON executions(started_at, id);
CREATE INDEX sessions_org_activity ON sessions(org_id, last_activity_at, id);
"#,
    // What servers announce (SQLite migration 15) about themselves (`NodeStore::announce`): the
    // public URL a running server completes OAuth logins at, read by
    // `connections login` on the same store.
    r#"
CREATE TABLE announcements (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
"#,
    // Executions listed by state (SQLite migration 16): a rare state (a paused one)
    // is read from its own range instead of being filtered out of the org's.
    r#"
CREATE INDEX executions_org_status ON executions(org_id, status, started_at, id);
-- Sessions terminated lately: a server looks for the ones a process that
-- cannot notify it (the CLI on SQLite) ended (`sessions_terminated_since`).
CREATE INDEX sessions_terminated ON sessions(terminated_at) WHERE terminated_at IS NOT NULL;
"#,
    // The built-in authorization server (SPEC §4) and browser sign-in
    // (SPEC §14; SQLite migration 17, which says what each table keeps).
    // OAuth access tokens are rows of `tokens` with a `grant_id`, so the
    // access trigger above notifies when a grant's revocation revokes them;
    // it no longer fires on an insert (nothing cached names a new token).
    r#"
DROP TRIGGER tokens_access ON tokens;
CREATE TRIGGER tokens_access AFTER UPDATE OR DELETE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION executor_access_changed();
ALTER TABLE tokens ADD COLUMN grant_id TEXT;
CREATE INDEX tokens_grant ON tokens(grant_id) WHERE grant_id IS NOT NULL;
CREATE TABLE oauth_clients (
    id TEXT PRIMARY KEY,
    secret_hash BYTEA,
    auth_method TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    client_name TEXT,
    origin TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT
);
CREATE TABLE oauth_codes (
    code_hash BYTEA PRIMARY KEY,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    replayed_at BIGINT,
    grant_id TEXT
);
CREATE INDEX oauth_codes_expires ON oauth_codes(expires_at);
CREATE TABLE oauth_grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    resource TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX oauth_grants_org_created ON oauth_grants(org_id, created_at);
CREATE INDEX oauth_grants_client ON oauth_grants(client_id);
CREATE TABLE oauth_refresh_tokens (
    token_hash BYTEA PRIMARY KEY,
    grant_id TEXT NOT NULL,
    issued_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated_at BIGINT
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens(grant_id);
CREATE TABLE login_links (
    link_hash BYTEA PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE TABLE console_sessions (
    session_hash BYTEA PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    token_id TEXT
);
"#,
    // How each call's approval was decided (SQLite migration 18).
    r#"
ALTER TABLE tool_calls ADD COLUMN decided_via TEXT;
"#,
    // What each node holds of a bound shared by the cluster (SQLite
    // migration 19). `executor_claim_share` grants under an advisory lock
    // per (share, key), in one round trip: a volatile function reads with
    // a fresh snapshot per statement, so the sum it reads after the lock
    // holds every grant committed before it.
    r#"
CREATE TABLE shares (
    share TEXT NOT NULL,
    key TEXT NOT NULL,
    node_id TEXT NOT NULL,
    granted BIGINT NOT NULL,
    PRIMARY KEY (share, key, node_id)
);
CREATE INDEX shares_by_node ON shares (node_id);
CREATE FUNCTION executor_claim_share(p_share TEXT, p_key TEXT, p_node TEXT, p_want BIGINT, p_limit BIGINT)
    RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    others BIGINT;
    granted BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('executor:share:' || p_share || ':' || p_key, 0));
    SELECT COALESCE(SUM(s.granted), 0) INTO others FROM shares s JOIN nodes n ON n.id = s.node_id
        WHERE s.share = p_share AND s.key = p_key AND s.node_id <> p_node
          AND n.alive_until >= executor_now_ms();
    granted := GREATEST(LEAST(p_want, p_limit - others), 0);
    INSERT INTO shares (share, key, node_id, granted) VALUES (p_share, p_key, p_node, granted)
        ON CONFLICT (share, key, node_id) DO UPDATE SET granted = excluded.granted;
    RETURN granted;
END $$;
"#,
];

/// The advisory lock migrations take (`'executor:migrate'` as a number).
const MIGRATION_LOCK: i64 = 0x6578_6563_6d69_6772;

/// Tables listed in a refusal of a foreign database.
const NAMED_TABLES: i64 = 8;

/// The start checks, in the order SQLite's preflight runs them: the database
/// is writable (not a standby), not from a newer release, not another
/// program's. Nothing is written before they pass.
pub(super) async fn check(client: &mut Client, url: &str) -> StoreResult<()> {
    let url = redact(url);
    let standby: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(db_error)?
        .try_get(0)
        .map_err(db_error)?;
    if standby {
        return Err(Refusal::PostgresReadOnly { url }.into());
    }
    match schema_version(client).await? {
        Some(found) if found > PG_MIGRATIONS.len() as i64 => Err(Refusal::PostgresNewerSchema {
            url,
            found,
            known: PG_MIGRATIONS.len(),
        }
        .into()),
        Some(_) => check_writable(client, &url).await,
        None => {
            let tables: Vec<String> = client
                .query(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = current_schema() ORDER BY 1 LIMIT $1",
                    &[&NAMED_TABLES],
                )
                .await
                .map_err(db_error)?
                .iter()
                .filter_map(|row| row.try_get(0).ok())
                .collect();
            if tables.is_empty() {
                Ok(())
            } else {
                Err(Refusal::PostgresForeign { url, tables }.into())
            }
        }
    }
}

/// A write goes through (then is rolled back): not a read-only role or a
/// database set read-only, which would otherwise fail the first session.
async fn check_writable(client: &mut Client, url: &str) -> StoreResult<()> {
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute("UPDATE executor_schema SET version = version", &[])
        .await
        .map_err(|e| not_writable(url, e))?;
    tx.rollback().await.map_err(db_error)
}

/// The applied migrations, or None when the database has no executor schema.
async fn schema_version(client: &Client) -> StoreResult<Option<i64>> {
    let row = client
        .query_one("SELECT to_regclass('executor_schema') IS NOT NULL", &[])
        .await
        .map_err(db_error)?;
    let exists: bool = row.try_get(0).map_err(db_error)?;
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_opt("SELECT version FROM executor_schema", &[])
        .await
        .map_err(db_error)?;
    Ok(Some(match row {
        Some(row) => row.try_get(0).map_err(db_error)?,
        None => 0,
    }))
}

/// Applies the migrations this database lacks, each once across nodes.
pub(super) async fn migrate(client: &mut Client, url: &str) -> StoreResult<()> {
    if schema_version(client).await? == Some(PG_MIGRATIONS.len() as i64) {
        return Ok(());
    }
    for (i, sql) in PG_MIGRATIONS.iter().enumerate() {
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(db_error)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS executor_schema (version BIGINT NOT NULL); \
             INSERT INTO executor_schema (version) SELECT 0 \
             WHERE NOT EXISTS (SELECT 1 FROM executor_schema)",
        )
        .await
        .map_err(|e| not_writable(url, e))?;
        let version: i64 = tx
            .query_one("SELECT version FROM executor_schema", &[])
            .await
            .map_err(db_error)?
            .try_get(0)
            .map_err(db_error)?;
        // Another node applied it between our read and the lock.
        if version > i as i64 {
            continue;
        }
        tx.batch_execute(sql).await.map_err(db_error)?;
        tx.execute(
            "UPDATE executor_schema SET version = $1",
            &[&(i as i64 + 1)],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
    }
    Ok(())
}

/// A write refused at the first migration: a read-only role or database.
fn not_writable(url: &str, e: tokio_postgres::Error) -> StoreError {
    Refusal::PostgresNotWritable {
        url: redact(url),
        cause: super::describe(&e),
    }
    .into()
}
