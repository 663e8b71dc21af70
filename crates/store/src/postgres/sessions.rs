//! Session records and the SSE event log on Postgres: [`SessionStore`].

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::group::FencedEvent;
use super::{PgStore, col, db_error, pg_text};
use crate::columns::*;
use crate::*;

use super::rows::*;

#[async_trait]
impl SessionStore for PgStore {
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

    async fn list_sessions(
        &self,
        org_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Vec<SessionRecord>> {
        let (after_time, after_id) = page_after(page);
        let found = self
            .query(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE org_id = $1 \
                       AND ($2::int8 IS NULL OR (last_activity_at, id) < ($2, $3::text)) \
                     ORDER BY last_activity_at DESC, id DESC LIMIT $4"
                ),
                &[
                    &org_id,
                    &after_time,
                    &after_id,
                    &i64::from(page.bounded_limit()),
                ],
            )
            .await?;
        rows(found, session_from_row)
    }

    async fn touch_sessions(&self, touches: Vec<SessionTouch>) -> StoreResult<()> {
        // One statement per batch. An id twice in one batch would be updated
        // with either value (UPDATE … FROM takes one match), so each keeps
        // its latest.
        let mut latest = std::collections::BTreeMap::new();
        for t in touches {
            let entry = latest.entry(t.id).or_insert((t.epoch, t.at_ms));
            *entry = (t.epoch.max(entry.0), t.at_ms.max(entry.1));
        }
        if latest.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(latest.len());
        let mut epochs = Vec::with_capacity(latest.len());
        let mut ats = Vec::with_capacity(latest.len());
        for (id, (epoch, at)) in latest {
            ids.push(id);
            epochs.push(epoch);
            ats.push(at);
        }
        // On the main pool: a batch may wait for row locks, and the
        // unflushed pool's few connections serve claims, which a restore
        // waits for. Only at the toucher's epoch: a claim since fences it.
        self.execute(
            &format!(
                "{} UPDATE sessions s SET last_activity_at = GREATEST(s.last_activity_at, t.at) \
                 FROM unnest($1::text[], $2::int8[], $3::int8[]) AS t(id, at, epoch), locked \
                 WHERE s.id = t.id AND locked.id = s.id AND s.epoch = t.epoch",
                sessions_locked_in_order("")
            ),
            &[&ids, &ats, &epochs],
        )
        .await?;
        Ok(())
    }

    async fn sessions_terminated_since(&self, since_ms: i64) -> StoreResult<Vec<String>> {
        let found = self
            .query(
                "SELECT id FROM sessions WHERE terminated_at >= $1 ORDER BY terminated_at LIMIT $2",
                &[&since_ms, &i64::from(MAX_TERMINATED_LISTED)],
            )
            .await?;
        rows(found, |r| col(r, 0))
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

    async fn delivered_event_bytes(&self) -> StoreResult<u64> {
        let rows = self
            .query(
                "SELECT coalesce(SUM(octet_length(data)), 0)::bigint FROM events WHERE NOT undelivered",
                &[],
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(col::<i64>(row, 0)?.max(0) as u64),
            None => Ok(0),
        }
    }

    async fn trim_delivered_events(&self, bytes: u64) -> StoreResult<Trimmed> {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let rows = self
            .query(
                &delete_oldest_delivered("$1::text IS NOT NULL"),
                &[&"all", &bytes],
            )
            .await?;
        let trimmed = super::executions::trimmed(rows.first())?;
        if trimmed.rows > 0 {
            self.vacuum("events").await;
        }
        Ok(trimmed)
    }

    async fn event_bytes_by_session(&self) -> StoreResult<Vec<SessionEventBytes>> {
        let rows = self
            .query(
                "SELECT e.session_id, s.org_id, SUM(octet_length(e.data))::bigint FROM events e \
                 JOIN sessions s ON s.id = e.session_id GROUP BY e.session_id, s.org_id",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(SessionEventBytes {
                    session_id: col(row, 0)?,
                    org_id: col(row, 1)?,
                    bytes: col::<i64>(row, 2)?.max(0) as u64,
                })
            })
            .collect()
    }

    async fn trim_events(
        &self,
        scope: EventScope<'_>,
        bytes: u64,
        dropped: DroppedAnswer,
    ) -> StoreResult<TrimmedEvents> {
        let (filter, key) = match scope {
            EventScope::Session(id) => ("session_id = $1", id),
            EventScope::Org(org) => (
                "session_id IN (SELECT id FROM sessions WHERE org_id = $1)",
                org,
            ),
        };
        let budget = i64::try_from(bytes).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let mut out = TrimmedEvents::default();
        // The oldest delivered events first, as far as the budget.
        let deleted = tx
            .query(&delete_oldest_delivered(filter), &[&key, &budget])
            .await
            .map_err(db_error)?;
        out.deleted = super::executions::trimmed(deleted.first())?;
        let mut left = budget.saturating_sub(out.deleted.bytes as i64);
        if left > 0 {
            // Then what no client has read, oldest first; each row's text
            // is read only when it is given up.
            let undelivered = tx
                .query(
                    &format!(
                        "SELECT session_id, stream_id, seq FROM events \
                         WHERE undelivered AND {filter} \
                         ORDER BY created_at, session_id, stream_id, seq"
                    ),
                    &[&key],
                )
                .await
                .map_err(db_error)?;
            for row in &undelivered {
                if left <= 0 {
                    break;
                }
                let (session, stream, seq): (String, String, i64) =
                    (col(row, 0)?, col(row, 1)?, col(row, 2)?);
                let params: [&(dyn ToSql + Sync); 3] = [&session, &stream, &seq];
                let data: String = match tx
                    .query_opt(
                        "SELECT data FROM events WHERE session_id = $1 AND stream_id = $2 AND seq = $3",
                        &params,
                    )
                    .await
                    .map_err(db_error)?
                {
                    Some(row) => col(&row, 0)?,
                    None => continue,
                };
                let size = data.len() as i64;
                let freed = match dropped(&data) {
                    // Replaced already: nothing more to free here.
                    Some(answer) if answer.len() as i64 >= size => continue,
                    Some(answer) => {
                        tx.execute(
                            "UPDATE events SET data = $4 WHERE session_id = $1 AND stream_id = $2 AND seq = $3",
                            &[&session, &stream, &seq, &pg_text(&answer)],
                        )
                        .await
                        .map_err(db_error)?;
                        out.answers += 1;
                        size - answer.len() as i64
                    }
                    None => {
                        tx.execute(
                            "DELETE FROM events WHERE session_id = $1 AND stream_id = $2 AND seq = $3",
                            &params,
                        )
                        .await
                        .map_err(db_error)?;
                        size
                    }
                };
                out.dropped.rows += 1;
                out.dropped.bytes += freed as u64;
                left -= freed;
            }
        }
        tx.commit().await.map_err(db_error)?;
        if out.deleted.rows + out.dropped.rows > 0 {
            self.vacuum("events").await;
        }
        Ok(out)
    }
}

/// One statement: deletes the oldest delivered events `filter` (on `$1`)
/// selects until `$2` bytes are freed; answers (rows, bytes) deleted.
fn delete_oldest_delivered(filter: &str) -> String {
    format!(
        "WITH ranked AS (SELECT session_id, stream_id, seq, octet_length(data) AS size, \
           coalesce(SUM(octet_length(data)) OVER (ORDER BY created_at, session_id, stream_id, seq \
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before \
           FROM events WHERE NOT undelivered AND {filter}), \
         doomed AS (DELETE FROM events e USING ranked r WHERE e.session_id = r.session_id \
           AND e.stream_id = r.stream_id AND e.seq = r.seq AND r.before < $2 RETURNING r.size) \
         SELECT count(*), coalesce(SUM(size), 0)::bigint FROM doomed"
    )
}
