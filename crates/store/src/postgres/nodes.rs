//! Nodes, session leases, periodic jobs and notices on Postgres: [`NodeStore`].

use async_trait::async_trait;

use super::notices::{self};
use super::{PgStore, col, db_error};
use crate::columns::*;
use crate::leases::ClaimRefusal;
use crate::node::NODE_ROW_KEPT_MS;
use crate::*;

use super::rows::*;

#[async_trait]
impl NodeStore for PgStore {
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        self.notices()
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
        // A registration starts afresh: what the node held of shared
        // bounds before is not in use any more.
        tx.execute("DELETE FROM shares WHERE node_id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn claim_share(
        &self,
        node: &str,
        share: &str,
        key: &str,
        want: i64,
        limit: i64,
    ) -> StoreResult<i64> {
        // Unflushed: a grant is visible to every node when it commits; only
        // a database crash can lose it, and that ends every node's work
        // and lease with it.
        let rows = self
            .query_unflushed(
                "SELECT executor_claim_share($1, $2, $3, $4, $5)",
                &[&share, &key, &node, &want, &limit],
            )
            .await?;
        match rows.first() {
            Some(row) => row.try_get(0).map_err(db_error),
            None => Err(StoreError::database("the share claim returned no row")),
        }
    }

    async fn set_shares(&self, node: &str, grants: Vec<(String, String, i64)>) -> StoreResult<()> {
        let (shares, keys, granted): (Vec<String>, Vec<String>, Vec<i64>) = grants
            .into_iter()
            .fold(Default::default(), |(mut s, mut k, mut g), (a, b, c)| {
                s.push(a);
                k.push(b);
                g.push(c);
                (s, k, g)
            });
        // Unflushed (see `claim_share`): giving units back early is harmless.
        self.query_unflushed(
            "WITH given AS (SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[]) AS g(share, key, granted)), \
             updated AS (UPDATE shares s SET granted = g.granted FROM given g \
                 WHERE s.node_id = $1 AND s.share = g.share AND s.key = g.key AND g.granted > 0) \
             DELETE FROM shares s USING given g \
             WHERE s.node_id = $1 AND s.share = g.share AND s.key = g.key AND g.granted <= 0",
            &[&node, &shares, &keys, &granted],
        )
        .await?;
        Ok(())
    }

    async fn announce(&self, name: &str, value: &str) -> StoreResult<()> {
        self.execute(
            "INSERT INTO announcements (name, value, updated_at) \
             VALUES ($1, $2, executor_now_ms()) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at",
            &[&name, &value],
        )
        .await?;
        Ok(())
    }

    async fn announced(&self, name: &str) -> StoreResult<Option<String>> {
        let row = self
            .query_opt("SELECT value FROM announcements WHERE name = $1", &[&name])
            .await?;
        Ok(row.map(|r| r.get(0)))
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

    async fn holds_session(&self, id: &str, fence: &Fence) -> StoreResult<bool> {
        self.holds(HOLDS_SESSION, id, fence).await
    }

    async fn holds_execution(&self, id: &str, fence: &Fence) -> StoreResult<bool> {
        self.holds(HOLDS_EXECUTION, id, fence).await
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
}

/// Whether a row names the node at the epoch, that node alive by the
/// database's clock.
const HOLDS_SESSION: &str = "SELECT 1 FROM sessions t JOIN nodes n ON n.id = t.holder \
     WHERE t.id = $1 AND t.holder = $2 AND t.epoch = $3 AND n.alive_until >= executor_now_ms()";
const HOLDS_EXECUTION: &str = "SELECT 1 FROM execution_states t JOIN nodes n ON n.id = t.holder \
     WHERE t.id = $1 AND t.holder = $2 AND t.epoch = $3 AND n.alive_until >= executor_now_ms()";

impl PgStore {
    async fn holds(&self, query: &str, id: &str, fence: &Fence) -> StoreResult<bool> {
        let found = self
            .query_opt(query, &[&id, &fence.node, &fence.epoch])
            .await?;
        Ok(found.is_some())
    }
}
