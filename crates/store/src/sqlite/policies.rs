//! An org's policy rules on SQLite: [`PolicyStore`].

use super::*;

#[async_trait]
impl PolicyStore for SqliteStore {
    async fn add_policy(&self, p: PolicyRecord) -> StoreResult<PolicyRecord> {
        self.writer
            .write(move |conn| {
                let count: i64 = conn.query_row("SELECT COUNT(*) FROM policies WHERE org_id = ?1", [&p.org_id], |r| r.get(0))?;
                let position = p.position.clamp(0, count);
                conn.execute(
                    "UPDATE policies SET position = position + 1 WHERE org_id = ?1 AND position >= ?2",
                    params![p.org_id, position],
                )?;
                conn.execute(
                    "INSERT INTO policies (id, org_id, pattern, action, position, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![p.id, p.org_id, p.pattern, p.action, position, p.created_at_ms],
                )?;
                Ok(PolicyRecord { position, ..p })
            })
            .await
    }

    async fn list_policies(&self, org_id: &str) -> StoreResult<Vec<PolicyRecord>> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, org_id, pattern, action, position, created_at FROM policies WHERE org_id = ?1 ORDER BY position",
            )?;
            let rows = stmt.query_map([org_id], |r| {
                Ok(PolicyRecord {
                    id: r.get(0)?,
                    org_id: r.get(1)?,
                    pattern: r.get(2)?,
                    action: r.get(3)?,
                    position: r.get(4)?,
                    created_at_ms: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn remove_policy(&self, org_id: &str, id: &str) -> StoreResult<bool> {
        let (org_id, id) = (org_id.to_string(), id.to_string());
        self.writer
            .write(move |conn| {
                let position: Option<i64> = conn
                    .query_row("SELECT position FROM policies WHERE org_id = ?1 AND id = ?2", params![org_id, id], |r| r.get(0))
                    .optional()?;
                let Some(position) = position else { return Ok(false) };
                conn.execute("DELETE FROM policies WHERE org_id = ?1 AND id = ?2", params![org_id, id])?;
                conn.execute(
                    "UPDATE policies SET position = position - 1 WHERE org_id = ?1 AND position > ?2",
                    params![org_id, position],
                )?;
                Ok(true)
            })
            .await
    }

    async fn move_policy(&self, org_id: &str, id: &str, position: i64) -> StoreResult<bool> {
        let (org_id, id) = (org_id.to_string(), id.to_string());
        self.writer
            .write(move |conn| {
                let from: Option<i64> = conn
                    .query_row(
                        "SELECT position FROM policies WHERE org_id = ?1 AND id = ?2",
                        params![org_id, id],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(from) = from else { return Ok(false) };
                let count: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM policies WHERE org_id = ?1",
                    [&org_id],
                    |r| r.get(0),
                )?;
                let to = position.clamp(0, count - 1);
                // The rules between close the gap it leaves and open the
                // one it takes: positions stay dense.
                if to < from {
                    conn.execute(
                        "UPDATE policies SET position = position + 1 WHERE org_id = ?1 AND position >= ?2 AND position < ?3",
                        params![org_id, to, from],
                    )?;
                } else if to > from {
                    conn.execute(
                        "UPDATE policies SET position = position - 1 WHERE org_id = ?1 AND position > ?2 AND position <= ?3",
                        params![org_id, from, to],
                    )?;
                }
                conn.execute(
                    "UPDATE policies SET position = ?3 WHERE org_id = ?1 AND id = ?2",
                    params![org_id, id, to],
                )?;
                Ok(true)
            })
            .await
    }

    async fn update_policy(
        &self,
        org_id: &str,
        id: &str,
        pattern: String,
        action: PolicyAction,
    ) -> StoreResult<Option<PolicyRecord>> {
        let (org_id, id) = (org_id.to_string(), id.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn
                    .prepare_cached(&format!(
                        "UPDATE policies SET pattern = ?3, action = ?4 WHERE org_id = ?1 AND id = ?2 \
                         RETURNING {POLICY_COLUMNS}"
                    ))?
                    .query_row(params![org_id, id, pattern, action], |r| {
                        Ok(PolicyRecord {
                            id: r.get(0)?,
                            org_id: r.get(1)?,
                            pattern: r.get(2)?,
                            action: r.get(3)?,
                            position: r.get(4)?,
                            created_at_ms: r.get(5)?,
                        })
                    })
                    .optional()?)
            })
            .await
    }
}
