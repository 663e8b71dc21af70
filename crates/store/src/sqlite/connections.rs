//! Connections and OAuth logins in flight on SQLite: [`ConnectionStore`].

use super::*;

#[async_trait]
impl ConnectionStore for SqliteStore {
    async fn set_connection(&self, c: ConnectionRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO connections (org_id, namespace, kind, username, secret, updated_at, oauth, generation) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1) \
                     ON CONFLICT (org_id, namespace) DO UPDATE SET kind = ?3, username = ?4, secret = ?5, updated_at = ?6, \
                     oauth = ?7, generation = generation + 1, lease_holder = NULL, lease_until = NULL",
                    params![c.org_id, c.namespace, c.kind, c.username, c.secret, c.updated_at_ms, c.oauth],
                )?;
                Ok(())
            })
            .await
    }

    async fn list_connections(&self, org_id: &str) -> StoreResult<Vec<ConnectionRecord>> {
        self.read_all("SELECT org_id, namespace, kind, username, secret, updated_at, oauth, generation FROM connections WHERE org_id = ?1 ORDER BY namespace", [org_id], connection_row)
    }

    async fn get_connection(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> StoreResult<Option<ConnectionRecord>> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT org_id, namespace, kind, username, secret, updated_at, oauth, generation FROM connections WHERE org_id = ?1 AND namespace = ?2",
                )?
                .query_row([org_id, namespace], connection_row)
                .optional()?)
        })
    }

    async fn remove_connection(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM connections WHERE org_id = ?1 AND namespace = ?2",
                    params![org_id, namespace],
                )? > 0)
            })
            .await
    }

    async fn save_connection_if(
        &self,
        c: ConnectionRecord,
        generation: i64,
        lease: Option<&str>,
    ) -> StoreResult<bool> {
        let lease = lease.map(str::to_string);
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "UPDATE connections SET secret = ?3, oauth = ?4, updated_at = ?5, generation = generation + 1, \
                     lease_holder = NULL, lease_until = NULL \
                     WHERE org_id = ?1 AND namespace = ?2 AND generation = ?6 \
                     AND (?7 IS NULL OR lease_holder IS NULL OR lease_holder = ?7 OR lease_until < ?8)",
                    params![c.org_id, c.namespace, c.secret, c.oauth, c.updated_at_ms, generation, lease, now_ms()],
                )? > 0)
            })
            .await
    }

    async fn holds_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        lease: &str,
    ) -> StoreResult<bool> {
        let (org_id, namespace, lease) =
            (org_id.to_string(), namespace.to_string(), lease.to_string());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT 1 FROM connections WHERE org_id = ?1 AND namespace = ?2 \
                     AND generation = ?3 AND lease_holder = ?4 AND lease_until >= ?5",
                )?
                .exists(params![org_id, namespace, generation, lease, now_ms()])?)
        })
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
        let (org_id, namespace, holder) = (
            org_id.to_string(),
            namespace.to_string(),
            holder.to_string(),
        );
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "UPDATE connections SET lease_holder = ?4, lease_until = ?5 \
                     WHERE org_id = ?1 AND namespace = ?2 AND generation = ?3 \
                     AND (lease_until IS NULL OR lease_until < ?6 OR lease_holder = ?4)",
                    params![org_id, namespace, generation, holder, until_ms, now_ms],
                )? > 0)
            })
            .await
    }

    async fn release_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        holder: &str,
    ) -> StoreResult<()> {
        let (org_id, namespace, holder) = (
            org_id.to_string(),
            namespace.to_string(),
            holder.to_string(),
        );
        self.writer
            .write(move |conn| {
                conn.execute(
                    "UPDATE connections SET lease_holder = NULL, lease_until = NULL \
                     WHERE org_id = ?1 AND namespace = ?2 AND lease_holder = ?3",
                    params![org_id, namespace, holder],
                )?;
                Ok(())
            })
            .await
    }

    async fn insert_pending_login(&self, p: PendingLoginRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                // Logins are rare and short-lived: an hour past expiry, a
                // row (settled or not) has nobody left to read it.
                conn.execute(
                    "DELETE FROM oauth_pending WHERE expires_at < ?1",
                    [p.created_at_ms - 3_600_000],
                )?;
                conn.execute(
                    &format!("INSERT INTO oauth_pending ({PENDING_LOGIN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                    params![p.state_hash, p.org_id, p.namespace, p.sealed, p.request, p.created_at_ms, p.expires_at_ms],
                )?;
                Ok(())
            })
            .await
    }

    async fn take_pending_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> StoreResult<Option<PendingLoginRecord>> {
        let state_hash = state_hash.to_string();
        self.writer
            .write(move |conn| {
                let taken = conn.execute(
                    "UPDATE oauth_pending SET taken = 1 WHERE state_hash = ?1 AND taken = 0 AND expires_at >= ?2",
                    params![state_hash, now_ms],
                )?;
                if taken == 0 {
                    return Ok(None);
                }
                Ok(conn
                    .query_row(
                        &format!("SELECT {PENDING_LOGIN_COLUMNS} FROM oauth_pending WHERE state_hash = ?1"),
                        [&state_hash],
                        pending_login_row,
                    )
                    .optional()?)
            })
            .await
    }

    async fn settle_pending_login(&self, state_hash: &str, outcome: String) -> StoreResult<()> {
        let state_hash = state_hash.to_string();
        self.writer
            .write(move |conn| {
                conn.execute(
                    "UPDATE oauth_pending SET taken = 1, outcome = ?2 WHERE state_hash = ?1",
                    params![state_hash, outcome],
                )?;
                Ok(())
            })
            .await
    }

    async fn pending_login_of(
        &self,
        org_id: &str,
        namespace: &str,
        state_hash: &str,
    ) -> StoreResult<Option<PendingLoginState>> {
        self.read_one(
            "SELECT expires_at, taken, outcome FROM oauth_pending \
             WHERE state_hash = ?1 AND org_id = ?2 AND namespace = ?3",
            params![state_hash, org_id, namespace],
            |r| {
                Ok(PendingLoginState {
                    expires_at_ms: r.get(0)?,
                    taken: r.get::<_, i64>(1)? != 0,
                    outcome: r.get(2)?,
                })
            },
        )
    }

    async fn pending_login_outcome(&self, state_hash: &str) -> StoreResult<Option<Option<String>>> {
        self.read_one(
            "SELECT outcome FROM oauth_pending WHERE state_hash = ?1",
            [state_hash],
            |r| r.get::<_, Option<String>>(0),
        )
    }
}
