//! An org's policy rules on Postgres: [`PolicyStore`].

use async_trait::async_trait;

use super::{PgStore, col, db_error, pg_text};
use crate::columns::*;
use crate::*;

use super::rows::*;

#[async_trait]
impl PolicyStore for PgStore {
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
        self.access_changed();
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
        self.access_changed();
        Ok(true)
    }

    async fn move_policy(&self, org_id: &str, id: &str, position: i64) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_policies(&tx, org_id).await?;
        let found = tx
            .query_opt(
                "SELECT position, (SELECT COUNT(*) FROM policies WHERE org_id = $1) \
                 FROM policies WHERE org_id = $1 AND id = $2",
                &[&org_id, &id],
            )
            .await
            .map_err(db_error)?;
        let Some(found) = found else {
            return Ok(false);
        };
        let (from, count): (i64, i64) = (col(&found, 0)?, col(&found, 1)?);
        let to = position.clamp(0, count - 1);
        // The rules between close the gap it leaves and open the one it
        // takes: positions stay dense.
        if to < from {
            tx.execute(
                "UPDATE policies SET position = position + 1 WHERE org_id = $1 AND position >= $2 AND position < $3",
                &[&org_id, &to, &from],
            )
            .await
            .map_err(db_error)?;
        } else if to > from {
            tx.execute(
                "UPDATE policies SET position = position - 1 WHERE org_id = $1 AND position > $2 AND position <= $3",
                &[&org_id, &from, &to],
            )
            .await
            .map_err(db_error)?;
        }
        tx.execute(
            "UPDATE policies SET position = $3 WHERE org_id = $1 AND id = $2",
            &[&org_id, &id, &to],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.access_changed();
        Ok(true)
    }

    async fn update_policy(
        &self,
        org_id: &str,
        id: &str,
        pattern: String,
        action: PolicyAction,
    ) -> StoreResult<Option<PolicyRecord>> {
        let updated = self
            .query_opt(
                &format!(
                    "UPDATE policies SET pattern = $3, action = $4 WHERE org_id = $1 AND id = $2 \
                     RETURNING {POLICY_COLUMNS}"
                ),
                &[&org_id, &id, &pg_text(&pattern), &action.as_str()],
            )
            .await?;
        self.access_changed();
        updated.as_ref().map(policy_from_row).transpose()
    }
}
