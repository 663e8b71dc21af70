//! `impl Store for PgStore`, method by method in the order of the trait.
//! Where SQLite relies on its single writer to make "read, then write"
//! atomic, the comment says what does it here.

use async_trait::async_trait;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::group::FencedEvent;
use super::notices::{self, CATALOG_CHANNEL, DECISIONS_CHANNEL};
use super::{PgStore, col, db_error, pg_text, word};
use crate::leases::{ClaimRefusal, ExecutionRefusal};
use crate::orgs::OrgChoice;
use crate::packed::{pack, unpack_bytes};
use crate::secrets::SecretRef;
use crate::*;

/// How long a dead node's row stays (see `register_node`).
const NODE_ROW_KEPT_MS: i64 = 24 * 3600 * 1000;

const SESSION_COLUMNS: &str = "id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at";
const EVENT_COLUMNS: &str = "session_id, stream_id, seq, data, undelivered, created_at";
const EXECUTION_COLUMNS: &str = "id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms";
const CONNECTION_COLUMNS: &str =
    "org_id, namespace, kind, username, secret, updated_at, oauth, generation";
const PENDING_LOGIN_COLUMNS: &str =
    "state_hash, org_id, namespace, sealed, request, created_at, expires_at";
const POLICY_COLUMNS: &str = "id, org_id, pattern, action, position, created_at";

/// One event, as it comes.
const EVENT_INSERT: &str = "INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (session_id, stream_id, seq) DO UPDATE SET data = excluded.data, \
     undelivered = excluded.undelivered, created_at = excluded.created_at";
/// One event of the session's holder: the row comes from the session's own
/// row, locked FOR SHARE, so it is inserted only while the fence holds — a
/// racing claim waits for this statement, or this one sees the claim and
/// inserts nothing.
const FENCED_EVENT_INSERT: &str = "INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
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
fn sessions_locked_in_order(condition: &str) -> String {
    format!(
        "WITH locked AS MATERIALIZED \
         (SELECT id FROM sessions WHERE id = ANY($1::text[]) {condition} ORDER BY id FOR NO KEY UPDATE)"
    )
}

/// Serialises `ensure_account` across nodes, as SQLite's IMMEDIATE
/// transaction does: two first logins of one email make one account.
const ACCOUNTS_LOCK: &str = "executor:ensure_account";

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

fn to_json(v: &serde_json::Value) -> String {
    v.to_string()
}

fn from_json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

fn session_from_row(r: &Row) -> StoreResult<SessionRecord> {
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

fn event_from_row(r: &Row) -> StoreResult<EventRecord> {
    Ok(EventRecord {
        session_id: col(r, 0)?,
        stream_id: col(r, 1)?,
        seq: col(r, 2)?,
        data: col(r, 3)?,
        undelivered: col(r, 4)?,
        created_at_ms: col(r, 5)?,
    })
}

fn execution_from_row(r: &Row) -> StoreResult<ExecutionRecord> {
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
        tool_calls: from_json(col(r, 9)?),
        started_at_ms: col(r, 10)?,
        duration_ms: col(r, 11)?,
    })
}

fn connection_from_row(r: &Row) -> StoreResult<ConnectionRecord> {
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

fn pending_login_from_row(r: &Row) -> StoreResult<PendingLoginRecord> {
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

fn policy_from_row(r: &Row) -> StoreResult<PolicyRecord> {
    Ok(PolicyRecord {
        id: col(r, 0)?,
        org_id: col(r, 1)?,
        pattern: col(r, 2)?,
        action: word(r, 3)?,
        position: col(r, 4)?,
        created_at_ms: col(r, 5)?,
    })
}

fn rows<T>(rows: Vec<Row>, f: impl Fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
}

fn document(bytes: &[u8]) -> StoreResult<String> {
    unpack_bytes(bytes).map_err(StoreError::Database)
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
    async fn ensure_account(&self, email: &str, org: Option<&str>) -> StoreResult<Principal> {
        let (email, choice) = OrgChoice::asked(email, org)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[&ACCOUNTS_LOCK],
        )
        .await
        .map_err(db_error)?;
        let now = now_ms();
        let account_id: String = match tx
            .query_opt("SELECT id FROM accounts WHERE email = $1", &[&email])
            .await
            .map_err(db_error)?
        {
            Some(row) => col(&row, 0)?,
            None => {
                let id = format!("acc_{}", uuid::Uuid::new_v4().simple());
                tx.execute(
                    "INSERT INTO accounts (id, email, created_at) VALUES ($1, $2, $3)",
                    &[&id, &email, &now],
                )
                .await
                .map_err(db_error)?;
                id
            }
        };
        // A personal org is found by its owner, never by its name.
        let (name, owner, found) = match &choice {
            OrgChoice::Personal => (
                email.as_str(),
                Some(account_id.as_str()),
                tx.query_opt(
                    "SELECT id, owner_account_id FROM orgs WHERE owner_account_id = $1",
                    &[&account_id],
                )
                .await
                .map_err(db_error)?,
            ),
            OrgChoice::Shared(name) => (
                name.as_str(),
                None,
                tx.query_opt(
                    "SELECT id, owner_account_id FROM orgs WHERE name = $1",
                    &[&pg_text(name)],
                )
                .await
                .map_err(db_error)?,
            ),
        };
        let found = match found {
            Some(row) => Some((col::<String>(&row, 0)?, col::<Option<String>>(&row, 1)?)),
            None => None,
        };
        let org_id = match found {
            Some((_, Some(found_owner))) if found_owner != account_id => {
                return Err(StoreError::ForeignPersonalOrg {
                    org: name.to_string(),
                });
            }
            Some((id, _)) => id,
            None => {
                let id = format!("org_{}", uuid::Uuid::new_v4().simple());
                tx.execute(
                    "INSERT INTO orgs (id, name, created_at, owner_account_id) VALUES ($1, $2, $3, $4)",
                    &[&id, &pg_text(name), &now, &owner],
                )
                .await
                .map_err(db_error)?;
                id
            }
        };
        tx.execute(
            "INSERT INTO memberships (account_id, org_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&account_id, &org_id],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(Principal { account_id, org_id })
    }

    async fn insert_token(&self, t: TokenRecord) -> StoreResult<()> {
        self.execute(
            "INSERT INTO tokens (id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &t.id,
                &t.secret_hash,
                &t.principal.account_id,
                &t.principal.org_id,
                &t.created_at_ms,
                &t.expires_at_ms,
                &t.revoked_at_ms,
            ],
        )
        .await?;
        Ok(())
    }

    async fn find_token(&self, id: &str) -> StoreResult<Option<TokenRecord>> {
        let row = self
            .query_opt(
                "SELECT id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at FROM tokens WHERE id = $1",
                &[&id],
            )
            .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(TokenRecord {
            id: col(&r, 0)?,
            secret_hash: col(&r, 1)?,
            principal: Principal {
                account_id: col(&r, 2)?,
                org_id: col(&r, 3)?,
            },
            created_at_ms: col(&r, 4)?,
            expires_at_ms: col(&r, 5)?,
            revoked_at_ms: col(&r, 6)?,
        }))
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
                &[&id, &at_ms],
            )
            .await?;
        Ok(n > 0)
    }

    async fn insert_session(&self, s: SessionRecord, holder: &str) -> StoreResult<()> {
        self.execute(
            &format!("INSERT INTO sessions ({SESSION_COLUMNS}, holder, epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"),
            &[
                &s.id,
                &s.owner.account_id,
                &s.owner.org_id,
                &pg_text(&s.protocol_version),
                &to_json(&s.client_info),
                &to_json(&s.client_capabilities),
                &s.elicitation_mode.as_str(),
                &s.created_at_ms,
                &s.last_activity_at_ms,
                &s.terminated_at_ms,
                &holder,
                &FIRST_EPOCH,
            ],
        )
        .await?;
        Ok(())
    }

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        self.query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(session_from_row)
        .transpose()
    }

    async fn touch_sessions(&self, touches: Vec<(String, i64)>) -> StoreResult<()> {
        // One statement per batch. An id twice in one batch would be updated
        // with either value (UPDATE … FROM takes one match), so each keeps
        // its latest.
        let mut latest = std::collections::BTreeMap::new();
        for (id, at) in touches {
            let entry = latest.entry(id).or_insert(at);
            *entry = (*entry).max(at);
        }
        if latest.is_empty() {
            return Ok(());
        }
        let (ids, ats): (Vec<String>, Vec<i64>) = latest.into_iter().unzip();
        // On the main pool: a batch may wait for row locks, and the
        // unflushed pool's few connections serve claims, which a restore
        // waits for.
        self.execute(
            &format!(
                "{} UPDATE sessions s SET last_activity_at = GREATEST(s.last_activity_at, t.at) \
                 FROM unnest($1::text[], $2::int8[]) AS t(id, at), locked \
                 WHERE s.id = t.id AND locked.id = s.id",
                sessions_locked_in_order("")
            ),
            &[&ids, &ats],
        )
        .await?;
        Ok(())
    }

    async fn terminate_session(&self, id: &str, at_ms: i64) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "UPDATE sessions SET terminated_at = COALESCE(terminated_at, $2) WHERE id = $1",
            &[&id, &at_ms],
        )
        .await
        .map_err(db_error)?;
        tx.execute("DELETE FROM events WHERE session_id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn gc_sessions(&self, before_ms: i64) -> StoreResult<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "DELETE FROM events WHERE session_id IN (SELECT id FROM sessions WHERE last_activity_at < $1)",
            &[&before_ms],
        )
        .await
        .map_err(db_error)?;
        let n = tx
            .execute(
                "DELETE FROM sessions WHERE last_activity_at < $1",
                &[&before_ms],
            )
            .await
            .map_err(db_error)?;
        // Paused executions expire within minutes; their saved states
        // (kept for idempotent repeats) go with the same retention.
        tx.execute(
            "DELETE FROM execution_states WHERE updated_at < $1",
            &[&before_ms],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n)
    }

    async fn append_event(
        &self,
        e: EventRecord,
        bounds: LogBounds,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        // Prune only when the stream can be over its bounds: streams of a
        // single request hold one or two events and take one statement.
        let may_overflow =
            e.seq >= bounds.max_events as i64 || e.data.len() as u64 > bounds.max_bytes / 2;
        if !may_overflow && let Some(f) = fence {
            // The common case, a holder's response: grouped with the
            // events other sessions append at the same time (`group.rs`).
            let id = e.session_id.clone();
            let event = FencedEvent {
                event: e,
                holder: f.node.clone(),
                epoch: f.epoch,
            };
            return match self.fenced_events().write(event).await? {
                true => Ok(()),
                false => Err(StoreError::Fenced { id }),
            };
        }
        // Fenced: the row comes from the session's own row, locked FOR
        // SHARE, so it is inserted only while the fence holds and a claim
        // waits for it (or it sees the claim and inserts nothing).
        let (insert_sql, holder, epoch) = match fence {
            Some(f) => (FENCED_EVENT_INSERT, f.node.as_str(), f.epoch),
            None => (EVENT_INSERT, "", 0),
        };
        let row: [&(dyn ToSql + Sync); 8] = [
            &e.session_id,
            &e.stream_id,
            &e.seq,
            &e.data,
            &e.undelivered,
            &e.created_at_ms,
            &holder,
            &epoch,
        ];
        let row = if fence.is_some() { &row[..] } else { &row[..6] };
        let inserted = |n: u64| {
            if n == 1 {
                Ok(())
            } else {
                Err(StoreError::Fenced {
                    id: e.session_id.clone(),
                })
            }
        };
        if !may_overflow {
            return inserted(self.execute(insert_sql, row).await?);
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let insert = tx.prepare_cached(insert_sql).await.map_err(db_error)?;
        inserted(tx.execute(&insert, row).await.map_err(db_error)?)?;
        tx.execute(
            "DELETE FROM events WHERE session_id = $1 AND stream_id = $2 AND seq <= $3",
            &[
                &e.session_id,
                &e.stream_id,
                &(e.seq - bounds.max_events as i64),
            ],
        )
        .await
        .map_err(db_error)?;
        // The byte bound: newest first, every event past the one where the
        // running total passes it goes, but never the newest.
        let prune = tx
            .prepare_cached(
                "DELETE FROM events e USING ( \
                   SELECT seq FROM ( \
                     SELECT seq, \
                            SUM(octet_length(data)) OVER (ORDER BY seq DESC) AS total, \
                            row_number() OVER (ORDER BY seq DESC) AS newest \
                     FROM events WHERE session_id = $1 AND stream_id = $2) sized \
                   WHERE newest > 1 AND total > $3) cut \
                 WHERE e.session_id = $1 AND e.stream_id = $2 AND e.seq = cut.seq",
            )
            .await
            .map_err(db_error)?;
        let max_bytes = i64::try_from(bounds.max_bytes).unwrap_or(i64::MAX);
        tx.execute(&prune, &[&e.session_id, &e.stream_id, &max_bytes])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn mark_delivered(&self, session_id: &str, stream_id: &str, seq: i64) -> StoreResult<()> {
        // Grouped with the marks of other streams, in a group that lingers
        // (`MARKS_LINGER`). Unflushed: a mark lost in a database crash only
        // replays the event once more (delivery is at-least-once).
        self.delivery_marks()
            .write((session_id.to_string(), stream_id.to_string(), seq))
            .await
    }

    async fn events_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND stream_id = $2 AND seq > $3 ORDER BY seq"
                ),
                &[&session_id, &stream_id, &after_seq],
            )
            .await?;
        rows(found, event_from_row)
    }

    async fn take_undelivered(
        &self,
        session_id: &str,
        except: &[String],
    ) -> StoreResult<Vec<EventRecord>> {
        // This node's lingering marks first, so that what it delivered is
        // not taken again (another node's may still be lingering: delivery
        // is at-least-once).
        self.flush_marks().await;
        // One statement: of two nodes taking at once, each event goes to one.
        let found = self
            .query(
                &format!(
                    "UPDATE events SET undelivered = false WHERE session_id = $1 AND undelivered \
                     AND stream_id <> ALL($2::text[]) RETURNING {EVENT_COLUMNS}"
                ),
                &[&session_id, &except],
            )
            .await?;
        let mut events = rows(found, event_from_row)?;
        // RETURNING has no order; the log's is creation, then stream, then seq.
        events.sort_by(|a, b| {
            (a.created_at_ms, &a.stream_id, a.seq).cmp(&(b.created_at_ms, &b.stream_id, b.seq))
        });
        // They were undelivered when taken.
        for event in &mut events {
            event.undelivered = true;
        }
        Ok(events)
    }

    async fn delete_replayed_events(&self, before_ms: i64) -> StoreResult<u64> {
        // A stream is judged by its newest event, so a stream that is still
        // being written keeps all of its delivered events.
        self.execute(
            "DELETE FROM events WHERE NOT undelivered AND (session_id, stream_id) IN \
             (SELECT session_id, stream_id FROM events GROUP BY session_id, stream_id \
              HAVING MAX(created_at) < $1)",
            &[&before_ms],
        )
        .await
    }

    async fn flush(&self) -> StoreResult<()> {
        // Every write above is committed before its method returns, but
        // for the delivery marks, which linger.
        self.flush_marks().await;
        Ok(())
    }

    async fn sync(&self) -> StoreResult<()> {
        // A transaction that wrote WAL waits, on the main pool, for its
        // commit's flush, which covers every earlier commit (the unflushed
        // pool's included). A transactional logical message is such a
        // write that touches no row (an id alone writes no WAL before the
        // commit, and Postgres commits that asynchronously).
        self.query(
            "SELECT pg_logical_emit_message(true, 'executor.sync', '')",
            &[],
        )
        .await?;
        Ok(())
    }

    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.notices()
    }

    fn access_revision(&self) -> Option<u64> {
        PgStore::access_revision(self)
    }

    async fn find_org(&self, name: &str) -> StoreResult<Option<String>> {
        let name = name.trim();
        // Personal orgs are named after the (lowercased) email.
        let name = if name.contains('@') {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        match self
            .query_opt(
                "SELECT id FROM orgs WHERE name = $1 OR id = $1",
                &[&pg_text(&name)],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn list_orgs(&self) -> StoreResult<Vec<(String, String)>> {
        // "C": byte order, SQLite's BINARY, whatever the database's locale.
        let found = self
            .query("SELECT id, name FROM orgs ORDER BY name COLLATE \"C\"", &[])
            .await?;
        rows(found, |r| Ok((col(r, 0)?, col(r, 1)?)))
    }

    async fn add_policy(&self, p: PolicyRecord) -> StoreResult<PolicyRecord> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Count, shift, insert: atomic only while no other writer moves the
        // org's positions, which this lock (per org) makes so.
        lock_policies(&tx, &p.org_id).await?;
        let count: i64 = col(
            &tx.query_one(
                "SELECT COUNT(*) FROM policies WHERE org_id = $1",
                &[&p.org_id],
            )
            .await
            .map_err(db_error)?,
            0,
        )?;
        let position = p.position.clamp(0, count);
        tx.execute(
            "UPDATE policies SET position = position + 1 WHERE org_id = $1 AND position >= $2",
            &[&p.org_id, &position],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            &format!("INSERT INTO policies ({POLICY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"),
            &[
                &p.id,
                &p.org_id,
                &pg_text(&p.pattern),
                &p.action.as_str(),
                &position,
                &p.created_at_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(PolicyRecord { position, ..p })
    }

    async fn list_policies(&self, org_id: &str) -> StoreResult<Vec<PolicyRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {POLICY_COLUMNS} FROM policies WHERE org_id = $1 ORDER BY position"
                ),
                &[&org_id],
            )
            .await?;
        rows(found, policy_from_row)
    }

    async fn remove_policy(&self, org_id: &str, id: &str) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_policies(&tx, org_id).await?;
        let removed = tx
            .query_opt(
                "DELETE FROM policies WHERE org_id = $1 AND id = $2 RETURNING position",
                &[&org_id, &id],
            )
            .await
            .map_err(db_error)?;
        let Some(removed) = removed else {
            return Ok(false);
        };
        let position: i64 = col(&removed, 0)?;
        tx.execute(
            "UPDATE policies SET position = position - 1 WHERE org_id = $1 AND position > $2",
            &[&org_id, &position],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(true)
    }

    async fn upsert_integration(&self, r: IntegrationRecord) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // The bump's row lock orders the org's writers; the record's
        // revision is the version this write made.
        let revision = bump_catalog_version(&tx, &r.org_id).await?;
        tx.execute(
            "INSERT INTO integrations (org_id, namespace, kind, source, base_url, tool_count, document, created_at, updated_at, revision, search_index) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10) \
             ON CONFLICT (org_id, namespace) DO UPDATE SET kind = excluded.kind, source = excluded.source, \
             base_url = excluded.base_url, tool_count = excluded.tool_count, document = excluded.document, \
             updated_at = excluded.updated_at, revision = excluded.revision, search_index = excluded.search_index",
            &[
                &r.org_id,
                &r.namespace,
                &r.kind,
                &pg_text(&r.source),
                &r.base_url.as_deref().map(pg_text),
                &r.tool_count,
                &pack(&r.document),
                &r.updated_at_ms,
                &revision,
                &r.search_index,
            ],
        )
        .await
        .map_err(db_error)?;
        notify(&tx, CATALOG_CHANNEL, &r.org_id).await?;
        tx.commit().await.map_err(db_error)?;
        self.catalog_changed();
        Ok(())
    }

    async fn list_integrations(
        &self,
        org_id: &str,
        with_documents: bool,
    ) -> StoreResult<Vec<IntegrationRecord>> {
        let sql = if with_documents {
            "SELECT org_id, namespace, kind, source, base_url, tool_count, updated_at, revision, document FROM integrations WHERE org_id = $1 ORDER BY namespace COLLATE \"C\""
        } else {
            "SELECT org_id, namespace, kind, source, base_url, tool_count, updated_at, revision FROM integrations WHERE org_id = $1 ORDER BY namespace COLLATE \"C\""
        };
        let found = self.query(sql, &[&org_id]).await?;
        rows(found, |r| {
            Ok(IntegrationRecord {
                org_id: col(r, 0)?,
                namespace: col(r, 1)?,
                kind: col(r, 2)?,
                source: col(r, 3)?,
                base_url: col(r, 4)?,
                tool_count: col(r, 5)?,
                updated_at_ms: col(r, 6)?,
                revision: col(r, 7)?,
                document: if with_documents {
                    document(col(r, 8)?)?
                } else {
                    String::new()
                },
                search_index: None,
            })
        })
    }

    async fn remove_integration(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let n = tx
            .execute(
                "DELETE FROM integrations WHERE org_id = $1 AND namespace = $2",
                &[&org_id, &namespace],
            )
            .await
            .map_err(db_error)?;
        if n > 0 {
            bump_catalog_version(&tx, org_id).await?;
            notify(&tx, CATALOG_CHANNEL, org_id).await?;
        }
        tx.commit().await.map_err(db_error)?;
        self.catalog_changed();
        Ok(n > 0)
    }

    async fn integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
    ) -> StoreResult<Option<IntegrationDocument>> {
        let row = self
            .query_opt(
                "SELECT document, search_index FROM integrations WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision],
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(IntegrationDocument {
            document: document(col(&row, 0)?)?,
            search_index: col(&row, 1)?,
        }))
    }

    async fn replace_integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        document: String,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE integrations SET document = $4 WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision, &pack(&document)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn replace_search_index(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        search_index: Vec<u8>,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE integrations SET search_index = $4 WHERE org_id = $1 AND namespace = $2 AND revision = $3",
                &[&org_id, &namespace, &revision, &search_index],
            )
            .await?;
        Ok(n == 1)
    }

    async fn catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        // Kept until a catalog change is notified (or this store makes
        // one): the read it saves was one round trip on every execution.
        let revision = self.catalog_revision();
        if let Some(version) = revision.and_then(|r| self.catalog_versions.get(org_id, r)) {
            return Ok(version);
        }
        let version = self.committed_catalog_version(org_id).await?;
        if let Some(revision) = revision {
            self.catalog_versions.keep(org_id, revision, version);
        }
        Ok(version)
    }

    async fn committed_catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        match self.query_opt(CATALOG_VERSION, &[&org_id]).await? {
            Some(row) => col(&row, 0),
            None => Ok(0),
        }
    }

    async fn set_connection(&self, c: ConnectionRecord) -> StoreResult<()> {
        self.execute(
            "INSERT INTO connections (org_id, namespace, kind, username, secret, updated_at, oauth, generation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 1) \
             ON CONFLICT (org_id, namespace) DO UPDATE SET kind = excluded.kind, username = excluded.username, \
             secret = excluded.secret, updated_at = excluded.updated_at, oauth = excluded.oauth, \
             generation = connections.generation + 1, lease_holder = NULL, lease_until = NULL",
            &[
                &c.org_id,
                &c.namespace,
                &c.kind.as_str(),
                &c.username.as_deref().map(pg_text),
                &c.secret,
                &c.updated_at_ms,
                &c.oauth,
            ],
        )
        .await?;
        Ok(())
    }

    async fn list_connections(&self, org_id: &str) -> StoreResult<Vec<ConnectionRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {CONNECTION_COLUMNS} FROM connections WHERE org_id = $1 ORDER BY namespace COLLATE \"C\""
                ),
                &[&org_id],
            )
            .await?;
        rows(found, connection_from_row)
    }

    async fn get_connection(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> StoreResult<Option<ConnectionRecord>> {
        self.query_opt(
            &format!(
                "SELECT {CONNECTION_COLUMNS} FROM connections WHERE org_id = $1 AND namespace = $2"
            ),
            &[&org_id, &namespace],
        )
        .await?
        .as_ref()
        .map(connection_from_row)
        .transpose()
    }

    async fn remove_connection(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let n = self
            .execute(
                "DELETE FROM connections WHERE org_id = $1 AND namespace = $2",
                &[&org_id, &namespace],
            )
            .await?;
        Ok(n > 0)
    }

    async fn save_connection_if(&self, c: ConnectionRecord, generation: i64) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE connections SET secret = $3, oauth = $4, updated_at = $5, generation = generation + 1, \
                 lease_holder = NULL, lease_until = NULL \
                 WHERE org_id = $1 AND namespace = $2 AND generation = $6",
                &[
                    &c.org_id,
                    &c.namespace,
                    &c.secret,
                    &c.oauth,
                    &c.updated_at_ms,
                    &generation,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn lease_connection(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        holder: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        // The lease runs on the database's clock: nodes whose clocks differ
        // agree on when it ends. The caller's span (until − now) is kept.
        let n = self
            .execute(
                "UPDATE connections SET lease_holder = $4, \
                   lease_until = executor_now_ms() + ($5::int8 - $6::int8) \
                 WHERE org_id = $1 AND namespace = $2 AND generation = $3 \
                 AND (lease_until IS NULL OR lease_until < executor_now_ms() OR lease_holder = $4)",
                &[
                    &org_id,
                    &namespace,
                    &generation,
                    &holder,
                    &until_ms,
                    &now_ms,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn release_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        holder: &str,
    ) -> StoreResult<()> {
        self.execute(
            "UPDATE connections SET lease_holder = NULL, lease_until = NULL \
             WHERE org_id = $1 AND namespace = $2 AND lease_holder = $3",
            &[&org_id, &namespace, &holder],
        )
        .await?;
        Ok(())
    }

    async fn register_node(&self, id: &str, url: Option<&str>, ttl_ms: i64) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // A node gone for a day has no session left that names it as a
        // live holder; its row is only clutter.
        tx.execute(
            "DELETE FROM nodes WHERE alive_until < executor_now_ms() - $1",
            &[&NODE_ROW_KEPT_MS],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "INSERT INTO nodes (id, url, started_at, alive_until) \
             VALUES ($1, $2, executor_now_ms(), executor_now_ms() + $3) \
             ON CONFLICT (id) DO UPDATE SET url = excluded.url, alive_until = excluded.alive_until",
            &[&id, &url, &ttl_ms],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn heartbeat_node(&self, id: &str, ttl_ms: i64) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE nodes SET alive_until = executor_now_ms() + $2 \
                 WHERE id = $1 AND alive_until >= executor_now_ms()",
                &[&id, &ttl_ms],
            )
            .await?;
        Ok(n == 1)
    }

    async fn evict_node(&self, id: &str) -> StoreResult<()> {
        self.execute("UPDATE nodes SET alive_until = 0 WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    async fn node_alive(&self, id: &str) -> StoreResult<bool> {
        let alive = self
            .query_opt(
                "SELECT 1 FROM nodes WHERE id = $1 AND alive_until >= executor_now_ms()",
                &[&id],
            )
            .await?;
        Ok(alive.is_some())
    }

    async fn retire_node(&self, id: &str) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // In id order, as every write to many session rows (a grouped
        // event insert may hold some of them FOR SHARE meanwhile).
        tx.execute(
            "WITH locked AS MATERIALIZED \
               (SELECT id FROM sessions WHERE holder = $1 ORDER BY id FOR NO KEY UPDATE) \
             UPDATE sessions s SET holder = NULL FROM locked WHERE s.id = locked.id AND s.holder = $1",
            &[&id],
        )
        .await
        .map_err(db_error)?;
        tx.execute("DELETE FROM nodes WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn claim_session(&self, id: &str, node: &str) -> StoreResult<SessionClaim> {
        // One statement, one round trip: the claim, and when it takes
        // nothing, the row as it was (who holds it, whether they and the
        // caller are alive). A claim that takes nothing writes nothing, so
        // a request for a session another live node holds costs a read.
        // Racing claimers serialise on the row lock and the loser's WHERE
        // is evaluated again against the winner's row (READ COMMITTED); its
        // read of the row is from before the winner committed, which may
        // look claimable, and then the next attempt reads who won.
        //
        // Unflushed: a claim lost in a database crash leaves the old epoch
        // in place, and the claimer's fenced writes are then refused;
        // waiting for the flush would double the restore time.
        for _ in 0..3 {
            let found = self
                .query_unflushed(
                    &format!(
                        "WITH claimed AS ( \
                           UPDATE sessions SET holder = $2, epoch = epoch + 1 \
                           WHERE id = $1 AND terminated_at IS NULL \
                             AND EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                             AND (holder IS NULL OR holder = $2 OR NOT EXISTS \
                                  (SELECT 1 FROM nodes n WHERE n.id = sessions.holder AND n.alive_until >= executor_now_ms())) \
                           RETURNING {SESSION_COLUMNS}, epoch) \
                         SELECT {SESSION_COLUMNS}, epoch, true, NULL::text, NULL::text, true, true FROM claimed \
                         UNION ALL \
                         SELECT {SESSION_COLUMNS}, epoch, false, holder, \
                           (SELECT url FROM nodes n WHERE n.id = sessions.holder), \
                           EXISTS (SELECT 1 FROM nodes n WHERE n.id = sessions.holder AND n.alive_until >= executor_now_ms()), \
                           EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                         FROM sessions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM claimed)"
                    ),
                    &[&id, &node],
                )
                .await?;
            let Some(row) = found.first() else {
                return Ok(SessionClaim::NotFound);
            };
            let record = session_from_row(row)?;
            if col(row, 11)? {
                return Ok(SessionClaim::Claimed {
                    record,
                    fence: Fence {
                        node: node.to_string(),
                        epoch: col(row, 10)?,
                    },
                });
            }
            let refusal = ClaimRefusal {
                record,
                holder: col(row, 12)?,
                holder_url: col(row, 13)?,
                holder_alive: col(row, 14)?,
                caller_alive: col(row, 15)?,
            };
            if let Some(outcome) = ClaimRefusal::outcome(Some(refusal), node) {
                return Ok(outcome);
            }
        }
        Err(StoreError::Busy)
    }

    async fn release_sessions(&self, node: &str, sessions: Vec<(String, i64)>) -> StoreResult<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let (ids, epochs): (Vec<String>, Vec<i64>) = sessions.into_iter().unzip();
        self.execute(
            &format!(
                "{} UPDATE sessions s SET holder = NULL \
                 FROM unnest($1::text[], $2::int8[]) AS r(id, epoch), locked \
                 WHERE s.id = r.id AND locked.id = s.id AND s.holder = $3 AND s.epoch = r.epoch",
                // Not the rows another node holds now: their claims and
                // fenced writes must not wait for this release.
                sessions_locked_in_order("AND holder = $3")
            ),
            &[&ids, &epochs, &node],
        )
        .await?;
        Ok(())
    }

    async fn publish(&self, notice: Notice) -> StoreResult<()> {
        if let Some((channel, payload)) = notices::payload(&notice) {
            self.execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
                .await?;
        }
        Ok(())
    }

    async fn claim_job(
        &self,
        name: &str,
        holder: &str,
        every_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        // The row lock makes one of racing claimers see the moved `next_at`.
        let n = self
            .execute(
                "INSERT INTO jobs (name, holder, next_at) VALUES ($1, $2, $3::int8 + $4::int8) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, next_at = excluded.next_at \
                 WHERE jobs.next_at <= $3::int8",
                &[&name, &holder, &now_ms, &every_ms],
            )
            .await?;
        Ok(n == 1)
    }

    async fn insert_pending_login(&self, p: PendingLoginRecord) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Logins are rare and short-lived: an hour past expiry, a row
        // (settled or not) has nobody left to read it.
        tx.execute(
            "DELETE FROM oauth_pending WHERE expires_at < $1",
            &[&(p.created_at_ms - 3_600_000)],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            &format!(
                "INSERT INTO oauth_pending ({PENDING_LOGIN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &p.state_hash,
                &p.org_id,
                &p.namespace,
                &p.sealed,
                &p.request,
                &p.created_at_ms,
                &p.expires_at_ms,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn take_pending_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> StoreResult<Option<PendingLoginRecord>> {
        // One statement: a callback on any node completes the login once.
        self.query_opt(
            &format!(
                "UPDATE oauth_pending SET taken = true \
                 WHERE state_hash = $1 AND NOT taken AND expires_at >= $2 \
                 RETURNING {PENDING_LOGIN_COLUMNS}"
            ),
            &[&state_hash, &now_ms],
        )
        .await?
        .as_ref()
        .map(pending_login_from_row)
        .transpose()
    }

    async fn settle_pending_login(&self, state_hash: &str, outcome: String) -> StoreResult<()> {
        self.execute(
            "UPDATE oauth_pending SET taken = true, outcome = $2 WHERE state_hash = $1",
            &[&state_hash, &outcome],
        )
        .await?;
        Ok(())
    }

    async fn pending_login_outcome(&self, state_hash: &str) -> StoreResult<Option<Option<String>>> {
        match self
            .query_opt(
                "SELECT outcome FROM oauth_pending WHERE state_hash = $1",
                &[&state_hash],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn save_execution_state(
        &self,
        id: &str,
        org_id: &str,
        state: String,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        // An upsert, not a replace: a decision `executor resume` posted
        // meanwhile stays for the run to take.
        let Some(fence) = fence else {
            self.execute(
                "INSERT INTO execution_states (id, org_id, state, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO UPDATE SET org_id = excluded.org_id, state = excluded.state, \
                 updated_at = excluded.updated_at",
                &[&id, &org_id, &state, &now_ms()],
            )
            .await?;
            return Ok(());
        };
        // The row lock of the conflicting row orders this against a claim.
        let saved = self
            .execute(
                "INSERT INTO execution_states (id, org_id, state, updated_at, holder, epoch) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (id) DO UPDATE SET org_id = excluded.org_id, state = excluded.state, \
                 updated_at = excluded.updated_at \
                 WHERE execution_states.holder = excluded.holder AND execution_states.epoch = excluded.epoch",
                &[&id, &org_id, &state, &now_ms(), &fence.node, &fence.epoch],
            )
            .await?;
        if saved == 1 {
            Ok(())
        } else {
            Err(StoreError::Fenced { id: id.to_string() })
        }
    }

    async fn claim_execution(&self, id: &str, node: &str) -> StoreResult<ExecutionClaim> {
        // As `claim_session`: the row lock orders racing claimers, and a
        // refusal whose read finds the way clear claims again.
        for _ in 0..3 {
            let claimed = self
                .query_opt(
                    "UPDATE execution_states SET holder = $2, epoch = epoch + 1 \
                     WHERE id = $1 \
                       AND EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                       AND (holder IS NULL OR holder = $2 OR NOT EXISTS \
                            (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= executor_now_ms())) \
                     RETURNING epoch, calling",
                    &[&id, &node],
                )
                .await?;
            if let Some(row) = claimed {
                return Ok(ExecutionClaim::Claimed {
                    fence: Fence {
                        node: node.to_string(),
                        epoch: col(&row, 0)?,
                    },
                    calling: col(&row, 1)?,
                });
            }
            let found = self
                .query_opt(
                    "SELECT holder, (SELECT url FROM nodes n WHERE n.id = execution_states.holder), \
                       EXISTS (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= executor_now_ms()), \
                       EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                     FROM execution_states WHERE id = $1",
                    &[&id, &node],
                )
                .await?;
            let found = match found {
                Some(row) => Some(ExecutionRefusal {
                    holder: col(&row, 0)?,
                    holder_url: col(&row, 1)?,
                    holder_alive: col(&row, 2)?,
                    caller_alive: col(&row, 3)?,
                }),
                None => None,
            };
            if let Some(outcome) = ExecutionRefusal::outcome(found, node) {
                return Ok(outcome);
            }
        }
        Err(StoreError::Busy)
    }

    async fn advance_execution(&self, id: &str, fence: &Fence, index: i64) -> StoreResult<()> {
        let moved = self
            .execute(
                "UPDATE execution_states SET calling = GREATEST(calling, $4) \
                 WHERE id = $1 AND holder = $2 AND epoch = $3",
                &[&id, &fence.node, &fence.epoch, &index],
            )
            .await?;
        if moved == 1 {
            Ok(())
        } else {
            Err(StoreError::Fenced { id: id.to_string() })
        }
    }

    async fn load_execution_state(&self, id: &str) -> StoreResult<Option<String>> {
        match self
            .query_opt("SELECT state FROM execution_states WHERE id = $1", &[&id])
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn post_execution_decision(&self, id: &str, action: &str) -> StoreResult<bool> {
        // The notice goes out with the commit, so the node holding the run
        // takes the decision at once instead of at its next poll.
        let posted = self
            .query_opt(
                &format!(
                    "WITH posted AS (UPDATE execution_states SET decision = $2 \
                       WHERE id = $1 AND decision IS NULL RETURNING id) \
                     SELECT pg_notify('{DECISIONS_CHANNEL}', id) FROM posted"
                ),
                &[&id, &action],
            )
            .await?;
        Ok(posted.is_some())
    }

    async fn take_execution_decision(&self, id: &str) -> StoreResult<Option<String>> {
        // Read and clear in one statement (the row lock makes one taker):
        // Postgres 15 has no `RETURNING OLD`, so the old value comes from a
        // locking CTE.
        match self
            .query_opt(
                "WITH posted AS (SELECT id, decision FROM execution_states \
                   WHERE id = $1 AND decision IS NOT NULL FOR UPDATE) \
                 UPDATE execution_states e SET decision = NULL FROM posted \
                 WHERE e.id = posted.id RETURNING posted.decision",
                &[&id],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn insert_execution(&self, x: ExecutionRecord) -> StoreResult<()> {
        // Grouped with the records of executions finishing at the same
        // time (`group.rs`); awaited until its own row is committed.
        self.execution_records().write(x).await
    }

    async fn insert_execution_deferred(&self, x: ExecutionRecord) -> StoreResult<()> {
        // The same, on the unflushed pool: committed, not yet flushed.
        // The caller's next flushed write (its answer's event) flushes the
        // WAL past this commit.
        self.execution_records_deferred().write(x).await
    }

    async fn list_executions(
        &self,
        org_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let found = self
            .query(
                &format!(
                    "SELECT {EXECUTION_COLUMNS} FROM executions WHERE ($1::text IS NULL OR org_id = $1) \
                     ORDER BY started_at DESC LIMIT $2"
                ),
                &[&org_id, &i64::from(limit)],
            )
            .await?;
        rows(found, execution_from_row)
    }

    async fn get_execution(&self, id: &str) -> StoreResult<Option<ExecutionRecord>> {
        self.query_opt(
            &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(execution_from_row)
        .transpose()
    }
}

/// Marks the org's catalog as changed, so servers rebuild it; the new
/// version. The row lock it takes orders the org's integration writers.
async fn bump_catalog_version(
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
async fn notify(
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
async fn lock_policies(tx: &deadpool_postgres::Transaction<'_>, org_id: &str) -> StoreResult<()> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('executor:policies:' || $1, 0))",
        &[&org_id],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}
