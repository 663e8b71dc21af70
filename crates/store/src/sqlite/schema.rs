//! The SQLite schema: numbered migrations applied on open under
//! `PRAGMA user_version`. A schema change is an entry here and one in
//! `postgres/schema.rs` (the schema parity test compares the two).

use rusqlite::Connection;

use crate::StoreResult;

pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE memberships (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    PRIMARY KEY (account_id, org_id)
);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    secret_hash BLOB NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client_info TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    elicitation_mode TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    terminated_at INTEGER
);
CREATE INDEX sessions_last_activity ON sessions(last_activity_at);
CREATE TABLE events (
    session_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    undelivered INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, stream_id, seq)
) WITHOUT ROWID;
CREATE INDEX events_undelivered ON events(session_id, undelivered);
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
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX executions_org_started ON executions(org_id, started_at);
"#,
    r#"
CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    pattern TEXT NOT NULL,
    action TEXT NOT NULL,
    position INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX policies_org_position ON policies(org_id, position);
"#,
    r#"
CREATE TABLE execution_states (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
"#,
    r#"
CREATE TABLE integrations (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    base_url TEXT,
    tool_count INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, namespace)
);
CREATE TABLE catalog_versions (
    org_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
"#,
    r#"
CREATE TABLE connections (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    username TEXT,
    secret TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, namespace)
);
"#,
    // A decision posted by `executor resume` for the process running it.
    r#"
ALTER TABLE execution_states ADD COLUMN decision TEXT;
"#,
    // Personal orgs belong to their account (SPEC §4). Before, a personal
    // org was only an org named after the email, so `--org <someone's
    // email>` could create or join it. An org named exactly like an
    // account's email is that account's personal org. Any other name with
    // an `@` was made with `--org` by someone else (emails are stored
    // lowercased and the owner had no account yet): it is renamed to its id
    // (which `--org` also accepts), so that the name stays free for the
    // personal org of the account it looks like.
    r#"
ALTER TABLE orgs ADD COLUMN owner_account_id TEXT REFERENCES accounts(id);
UPDATE orgs SET owner_account_id = (SELECT a.id FROM accounts a WHERE a.email = orgs.name);
UPDATE orgs SET name = id WHERE owner_account_id IS NULL AND name LIKE '%@%';
CREATE UNIQUE INDEX orgs_owner ON orgs(owner_account_id) WHERE owner_account_id IS NOT NULL;
"#,
    // Which write of the org's integrations made this record (the org's
    // catalog version after it): the server reuses an integration's loaded
    // tools while its revision is unchanged.
    r#"
ALTER TABLE integrations ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
"#,
    // The search index of each integration's tools, built at import so
    // that the server need not (see `IntegrationRecord::search_index`).
    r#"
ALTER TABLE integrations ADD COLUMN search_index BLOB;
"#,
    // OAuth connections (executor-oauth): the grant's non-secret state, a
    // generation that every write moves (a refresh saves only where it is
    // unchanged) and the refresh lease that makes one process refresh at a
    // time; logins between their authorization URL and their callback.
    r#"
ALTER TABLE connections ADD COLUMN oauth TEXT;
ALTER TABLE connections ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN lease_holder TEXT;
ALTER TABLE connections ADD COLUMN lease_until INTEGER;
CREATE TABLE oauth_pending (
    state_hash TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    sealed TEXT NOT NULL,
    request TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0,
    outcome TEXT
);
"#,
    // Periodic jobs every server schedules (the event sweep, retention GC):
    // the next time each is due, so one process runs each per interval.
    r#"
CREATE TABLE jobs (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    next_at INTEGER NOT NULL
);
"#,
    // Nodes and session leases (SPEC §10): a session's runtime lives on the
    // node named by `holder` while that node is alive; `epoch` grows with
    // each claim and fences the holder's writes.
    r#"
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    url TEXT,
    started_at INTEGER NOT NULL,
    alive_until INTEGER NOT NULL
);
ALTER TABLE sessions ADD COLUMN holder TEXT;
ALTER TABLE sessions ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
-- A paused execution's run lives on one node too: `calling` is the highest
-- call index it started after a resume (a replay answers calls up to it
-- that have no journaled answer as in doubt, never sending them again).
ALTER TABLE execution_states ADD COLUMN holder TEXT;
ALTER TABLE execution_states ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_states ADD COLUMN calling INTEGER NOT NULL DEFAULT -1;
"#,
    // The access revision (`Store::access_revision`): a counter every change
    // to tokens or policies moves, in the same transaction, whichever process
    // makes it (the server, a CLI command, another server on the data dir).
    // Caches of tokens and policies stay valid while it stands still.
    r#"
CREATE TABLE revisions (
    name TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
INSERT INTO revisions (name, n) VALUES ('access', 0);
CREATE TRIGGER tokens_insert_access AFTER INSERT ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER tokens_update_access AFTER UPDATE ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER tokens_delete_access AFTER DELETE ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_insert_access AFTER INSERT ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_update_access AFTER UPDATE ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_delete_access AFTER DELETE ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
"#,
    // The audit trail of tool calls (SPEC §13), written with each
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
    approval_wait_ms INTEGER NOT NULL,
    arg_names TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX tool_calls_org_started ON tool_calls(org_id, started_at, id);
CREATE INDEX tool_calls_execution ON tool_calls(execution_id);
DROP INDEX executions_org_started;
CREATE INDEX executions_org_started ON executions(org_id, started_at, id);
CREATE INDEX executions_started ON executions(started_at, id);
CREATE INDEX sessions_org_activity ON sessions(org_id, last_activity_at, id);
"#,
    // What servers announce about themselves (`NodeStore::announce`): the
    // public URL a running server completes OAuth logins at, read by
    // `connections login` on the same store.
    r#"
CREATE TABLE announcements (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
"#,
    // Executions listed by state: a rare state (a paused one)
    // is read from its own range instead of being filtered out of the org's.
    r#"
CREATE INDEX executions_org_status ON executions(org_id, status, started_at, id);
-- Sessions terminated lately: a server looks for the ones a process that
-- cannot notify it (the CLI on SQLite) ended (`sessions_terminated_since`).
CREATE INDEX sessions_terminated ON sessions(terminated_at) WHERE terminated_at IS NOT NULL;
"#,
    // The built-in authorization server (SPEC §4) and browser sign-in
    // (SPEC §14). An OAuth access token is a row of `tokens` with the
    // grant it was issued under (`grant_id`), so `/mcp` checks it as it
    // checks an API token, and the access-revision triggers above move
    // when a grant's revocation revokes it. Clients are the server's, not
    // an org's; a grant ties one to an (account, org). Codes, refresh
    // tokens, login links and console sessions are kept as SHA-256 hashes
    // of their secrets. A code remembers its first use (`used_at`), a
    // second presentation (`replayed_at`, which stops a grant from being
    // made of it) and the grant made of it (revoked by a replay); a
    // refresh token remembers when it was rotated (a later use within the
    // grace still issues; after it, the grant is revoked).
    // A new token no longer moves the access revision: nothing cached names
    // it, and an OAuth client's every refresh would otherwise make every
    // server re-read every token it next sees.
    r#"
DROP TRIGGER tokens_insert_access;
ALTER TABLE tokens ADD COLUMN grant_id TEXT;
CREATE INDEX tokens_grant ON tokens(grant_id) WHERE grant_id IS NOT NULL;
CREATE TABLE oauth_clients (
    id TEXT PRIMARY KEY,
    secret_hash BLOB,
    auth_method TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    client_name TEXT,
    origin TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER
);
CREATE TABLE oauth_codes (
    code_hash BLOB PRIMARY KEY,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    replayed_at INTEGER,
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
    created_at INTEGER NOT NULL,
    last_used_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX oauth_grants_org_created ON oauth_grants(org_id, created_at);
CREATE INDEX oauth_grants_client ON oauth_grants(client_id);
CREATE TABLE oauth_refresh_tokens (
    token_hash BLOB PRIMARY KEY,
    grant_id TEXT NOT NULL,
    issued_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    rotated_at INTEGER
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens(grant_id);
CREATE TABLE login_links (
    link_hash BLOB PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
CREATE TABLE console_sessions (
    session_hash BLOB PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    token_id TEXT
);
"#,
    // How each call's approval was decided (SPEC §14): resume, native,
    // console, api, cli, caller or timeout; NULL in rows written before.
    r#"
ALTER TABLE tool_calls ADD COLUMN decided_via TEXT;
"#,
    // Bounds that hold across the nodes of one store (SPEC §4, §10, §12):
    // what each node holds of a bound (running executions of an org, of
    // all, live sessions of a principal, GET streams of a session). A
    // node's rows count while its lease runs; a new registration drops them.
    r#"
CREATE TABLE shares (
    share TEXT NOT NULL,
    key TEXT NOT NULL,
    node_id TEXT NOT NULL,
    granted INTEGER NOT NULL,
    PRIMARY KEY (share, key, node_id)
);
CREATE INDEX shares_by_node ON shares (node_id);
"#,
];

pub(crate) fn migrate(conn: &Connection) -> StoreResult<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        // IMMEDIATE: two processes starting at once serialise here instead
        // of failing to upgrade a read transaction.
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated between our read and now.
        let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if v > i as i64 {
            continue;
        }
        tx.execute_batch(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
        tx.commit()?;
    }
    Ok(())
}
