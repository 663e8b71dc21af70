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
}
