//! Nodes, session leases, periodic jobs and notices on SQLite: [`NodeStore`].

use super::*;

#[async_trait]
impl NodeStore for SqliteStore {
    async fn register_node(&self, id: &str, url: Option<&str>, ttl_ms: i64) -> StoreResult<()> {
        let (id, url) = (id.to_string(), url.map(str::to_string));
        self.writer
            .write(move |conn| {
                let now = now_ms();
                // A node gone for a day has no session left that names it
                // as a live holder; its row is only clutter.
                conn.prepare_cached("DELETE FROM nodes WHERE alive_until < ?1")?
                    .execute([now - NODE_ROW_KEPT_MS])?;
                conn.prepare_cached(
                    "INSERT INTO nodes (id, url, started_at, alive_until) VALUES (?1, ?2, ?3, ?3 + ?4) \
                     ON CONFLICT (id) DO UPDATE SET url = excluded.url, alive_until = excluded.alive_until",
                )?
                .execute(params![id, url, now, ttl_ms])?;
                // A registration starts afresh: what the node held of
                // shared bounds before (it lapsed, or restarted under its
                // id) is not in use any more.
                conn.prepare_cached("DELETE FROM shares WHERE node_id = ?1")?
                    .execute([&id])?;
                Ok(())
            })
            .await
    }

    async fn claim_share(
        &self,
        node: &str,
        share: &str,
        key: &str,
        want: i64,
        limit: i64,
    ) -> StoreResult<i64> {
        let (node, share, key) = (node.to_string(), share.to_string(), key.to_string());
        // The writer's transaction is `BEGIN IMMEDIATE`: the sum and the
        // grant are one step for every process on the file.
        self.writer
            .write(move |conn| {
                let others: i64 = conn
                    .prepare_cached(
                        "SELECT COALESCE(SUM(s.granted), 0) FROM shares s JOIN nodes n ON n.id = s.node_id \
                         WHERE s.share = ?1 AND s.key = ?2 AND s.node_id <> ?3 AND n.alive_until >= ?4",
                    )?
                    .query_row(params![share, key, node, now_ms()], |r| r.get(0))?;
                let granted = want.min(limit - others).max(0);
                conn.prepare_cached(
                    "INSERT INTO shares (share, key, node_id, granted) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (share, key, node_id) DO UPDATE SET granted = excluded.granted",
                )?
                .execute(params![share, key, node, granted])?;
                Ok(granted)
            })
            .await
    }

    async fn set_shares(&self, node: &str, grants: Vec<(String, String, i64)>) -> StoreResult<()> {
        let node = node.to_string();
        self.writer
            .write(move |conn| {
                for (share, key, granted) in grants {
                    if granted > 0 {
                        conn.prepare_cached(
                            "UPDATE shares SET granted = ?4 WHERE share = ?1 AND key = ?2 AND node_id = ?3",
                        )?
                        .execute(params![share, key, node, granted])?;
                    } else {
                        conn.prepare_cached(
                            "DELETE FROM shares WHERE share = ?1 AND key = ?2 AND node_id = ?3",
                        )?
                        .execute(params![share, key, node])?;
                    }
                }
                Ok(())
            })
            .await
    }

    async fn announce(&self, name: &str, value: &str) -> StoreResult<()> {
        let (name, value) = (name.to_string(), value.to_string());
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO announcements (name, value, updated_at) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
                     updated_at = excluded.updated_at",
                )?
                .execute(params![name, value, now_ms()])?;
                Ok(())
            })
            .await
    }

    async fn announced(&self, name: &str) -> StoreResult<Option<String>> {
        self.read_one(
            "SELECT value FROM announcements WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
    }

    async fn heartbeat_node(&self, id: &str, ttl_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let now = now_ms();
                Ok(conn
                    .prepare_cached(
                        "UPDATE nodes SET alive_until = ?2 + ?3 WHERE id = ?1 AND alive_until >= ?2",
                    )?
                    .execute(params![id, now, ttl_ms])?
                    == 1)
            })
            .await
    }

    async fn evict_node(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("UPDATE nodes SET alive_until = 0 WHERE id = ?1")?
                    .execute([id])?;
                Ok(())
            })
            .await
    }

    async fn node_alive(&self, id: &str) -> StoreResult<bool> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM nodes WHERE id = ?1 AND alive_until >= ?2")?
                .exists(params![id, now_ms()])?)
        })
    }

    async fn holds_session(&self, id: &str, fence: &Fence) -> StoreResult<bool> {
        self.holds("sessions", id, fence).await
    }

    async fn holds_execution(&self, id: &str, fence: &Fence) -> StoreResult<bool> {
        self.holds("execution_states", id, fence).await
    }

    async fn retire_node(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("UPDATE sessions SET holder = NULL WHERE holder = ?1")?
                    .execute([&id])?;
                conn.prepare_cached("DELETE FROM nodes WHERE id = ?1")?
                    .execute([&id])?;
                Ok(())
            })
            .await
    }

    async fn claim_session(&self, id: &str, node: &str) -> StoreResult<SessionClaim> {
        // A read first, off the writer: a request for a session another
        // live node holds (the common case on a node that hands requests
        // over) costs a read, not a write.
        let read = {
            let (id, node) = (id.to_string(), node.to_string());
            self.read(move |conn| claim_refusal(conn, &id, &node))?
        };
        if let Some(outcome) = ClaimRefusal::outcome(read, node) {
            return Ok(outcome);
        }
        let (id, node) = (id.to_string(), node.to_string());
        // The writer runs the claim and, when it fails, the read of why in
        // one transaction: the answer is exact, not a hint.
        self.writer
            .write(move |conn| {
                let now = now_ms();
                let claimed = conn
                    .prepare_cached(&format!(
                        "UPDATE sessions SET holder = ?2, epoch = epoch + 1 \
                         WHERE id = ?1 AND terminated_at IS NULL \
                           AND EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND alive_until >= ?3) \
                           AND (holder IS NULL OR holder = ?2 OR NOT EXISTS \
                                (SELECT 1 FROM nodes n WHERE n.id = sessions.holder AND n.alive_until >= ?3)) \
                         RETURNING {SESSION_COLUMNS}, epoch"
                    ))?
                    .query_row(params![id, node, now], |r| {
                        Ok((session_from_row(r)?, r.get::<_, i64>(10)?))
                    })
                    .optional()?;
                if let Some((record, epoch)) = claimed {
                    return Ok(SessionClaim::Claimed {
                        record,
                        fence: Fence { node, epoch },
                    });
                }
                let found = claim_refusal(conn, &id, &node)?;
                // One transaction: a claim refused here cannot have raced.
                ClaimRefusal::outcome(found, &node)
                    .ok_or_else(|| StoreError::database("session claim refused without a cause"))
            })
            .await
    }

    async fn release_sessions(&self, node: &str, sessions: Vec<(String, i64)>) -> StoreResult<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let node = node.to_string();
        self.writer
            .write(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "UPDATE sessions SET holder = NULL WHERE id = ?1 AND holder = ?2 AND epoch = ?3",
                )?;
                for (id, epoch) in &sessions {
                    stmt.execute(params![id, node, epoch])?;
                }
                Ok(())
            })
            .await
    }

    async fn claim_job(
        &self,
        name: &str,
        holder: &str,
        every_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn
                    .prepare_cached(CLAIM_JOB_SQLITE)?
                    .execute(params![name, holder, now_ms, every_ms])?
                    == 1)
            })
            .await
    }
}

impl SqliteStore {
    /// Whether `table`'s row `id` names `fence`'s node at its epoch, that
    /// node alive now.
    async fn holds(&self, table: &'static str, id: &str, fence: &Fence) -> StoreResult<bool> {
        let (id, node, epoch) = (id.to_string(), fence.node.clone(), fence.epoch);
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT 1 FROM {table} t JOIN nodes n ON n.id = t.holder \
                     WHERE t.id = ?1 AND t.holder = ?2 AND t.epoch = ?3 AND n.alive_until >= ?4"
                ))?
                .exists(params![id, node, epoch, now_ms()])?)
        })
    }
}
