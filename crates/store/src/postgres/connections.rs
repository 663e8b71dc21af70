//! Connections and OAuth logins in flight on Postgres: [`ConnectionStore`].

use async_trait::async_trait;

use super::{PgStore, col, db_error, pg_text};
use crate::columns::*;
use crate::*;

use super::rows::*;

#[async_trait]
impl ConnectionStore for PgStore {
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

    async fn save_connection_if(
        &self,
        c: ConnectionRecord,
        generation: i64,
        lease: Option<&str>,
    ) -> StoreResult<bool> {
        let n = self
            .execute(
                "UPDATE connections SET secret = $3, oauth = $4, updated_at = $5, generation = generation + 1, \
                 lease_holder = NULL, lease_until = NULL \
                 WHERE org_id = $1 AND namespace = $2 AND generation = $6 \
                 AND ($7::text IS NULL OR lease_holder IS NULL OR lease_holder = $7 \
                      OR lease_until < executor_now_ms())",
                &[
                    &c.org_id,
                    &c.namespace,
                    &c.secret,
                    &c.oauth,
                    &c.updated_at_ms,
                    &generation,
                    &lease,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn holds_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        lease: &str,
    ) -> StoreResult<bool> {
        let found = self
            .query_opt(
                "SELECT 1 FROM connections WHERE org_id = $1 AND namespace = $2 \
                 AND generation = $3 AND lease_holder = $4 AND lease_until >= executor_now_ms()",
                &[&org_id, &namespace, &generation, &lease],
            )
            .await?;
        Ok(found.is_some())
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

    async fn pending_login_of(
        &self,
        org_id: &str,
        namespace: &str,
        state_hash: &str,
    ) -> StoreResult<Option<PendingLoginState>> {
        let found = self
            .query_opt(
                "SELECT expires_at, taken, outcome FROM oauth_pending \
                 WHERE state_hash = $1 AND org_id = $2 AND namespace = $3",
                &[&state_hash, &org_id, &namespace],
            )
            .await?;
        match found {
            Some(row) => Ok(Some(PendingLoginState {
                expires_at_ms: col(&row, 0)?,
                taken: col(&row, 1)?,
                outcome: col(&row, 2)?,
            })),
            None => Ok(None),
        }
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
}
