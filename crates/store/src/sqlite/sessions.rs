//! Session records and the SSE event log on SQLite: [`SessionStore`].

use super::*;

#[async_trait]
impl SessionStore for SqliteStore {
    async fn insert_session(&self, s: SessionRecord, holder: &str) -> StoreResult<()> {
        let holder = holder.to_string();
        self.writer.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO sessions (id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at, holder, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .execute(params![
                s.id,
                s.owner.account_id,
                s.owner.org_id,
                s.protocol_version,
                to_json(&s.client_info),
                to_json(&s.client_capabilities),
                s.elicitation_mode,
                s.created_at_ms,
                s.last_activity_at_ms,
                s.terminated_at_ms,
                holder,
                FIRST_EPOCH
            ])?;
            Ok(())
        })
        .await
    }

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at FROM sessions WHERE id = ?1",
                )?
                .query_row([id], session_from_row)
                .optional()?)
        })
    }

    async fn list_sessions(
        &self,
        org_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Vec<SessionRecord>> {
        let (after_time, after_id) = page_after(page);
        self.read_all(
            &format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE org_id = ?1 \
                   AND (?2 IS NULL OR last_activity_at < ?2 OR (last_activity_at = ?2 AND id < ?3)) \
                 ORDER BY last_activity_at DESC, id DESC LIMIT ?4"
            ),
            params![org_id, after_time, after_id, page.bounded_limit()],
            session_from_row,
        )
    }

    async fn touch_sessions(&self, touches: Vec<SessionTouch>) -> StoreResult<()> {
        if touches.is_empty() {
            return Ok(());
        }
        self.writer
            .write(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "UPDATE sessions SET last_activity_at = MAX(last_activity_at, ?2) \
                     WHERE id = ?1 AND epoch = ?3",
                )?;
                for t in &touches {
                    stmt.execute(params![t.id, t.at_ms, t.epoch])?;
                }
                Ok(())
            })
            .await
    }

    async fn sessions_terminated_since(&self, since_ms: i64) -> StoreResult<Vec<String>> {
        self.read_all(
            "SELECT id FROM sessions WHERE terminated_at >= ?1 ORDER BY terminated_at LIMIT ?2",
            params![since_ms, MAX_TERMINATED_LISTED],
            |r| r.get(0),
        )
    }

    async fn terminate_session(&self, id: &str, at_ms: i64) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let tx = conn;
                tx.execute(
                    "UPDATE sessions SET terminated_at = COALESCE(terminated_at, ?2) WHERE id = ?1",
                    params![id, at_ms],
                )?;
                tx.execute("DELETE FROM events WHERE session_id = ?1", [&id])?;
                Ok(())
            })
            .await
    }

    async fn gc_sessions(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |conn| {
            let tx = conn;
            tx.execute(
                "DELETE FROM events WHERE session_id IN (SELECT id FROM sessions WHERE last_activity_at < ?1)",
                [before_ms],
            )?;
            let n = tx.execute("DELETE FROM sessions WHERE last_activity_at < ?1", [before_ms])?;
            // Paused executions expire within minutes; their saved states
            // (kept for idempotent repeats) go with the same retention.
            tx.execute("DELETE FROM execution_states WHERE updated_at < ?1", [before_ms])?;
            Ok(n as u64)
        })
        .await
    }

    async fn append_event(
        &self,
        e: EventRecord,
        bounds: LogBounds,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        let fence = fence.cloned();
        self.writer.write(move |conn| {
            let tx = conn;
            if let Some(fence) = &fence {
                holds_session(tx, &e.session_id, fence)?;
            }
            tx.prepare_cached(
                "INSERT OR REPLACE INTO events (session_id, stream_id, seq, data, undelivered, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![e.session_id, e.stream_id, e.seq, e.data, e.undelivered as i64, e.created_at_ms])?;
            // Prune only when the stream can be over its bounds: streams of a
            // single request hold one or two events and skip this entirely.
            if e.seq >= bounds.max_events as i64 || e.data.len() as u64 > bounds.max_bytes / 2 {
                prune_stream(tx, &e.session_id, &e.stream_id, e.seq, bounds)?;
            }
                        Ok(())
        })
        .await
    }

    async fn mark_delivered(&self, session_id: &str, stream_id: &str, seq: i64) -> StoreResult<()> {
        let (session_id, stream_id) = (session_id.to_string(), stream_id.to_string());
        self.writer.write_later(move |conn| {
            conn.prepare_cached(
                "UPDATE events SET undelivered = 0 WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
            )?
            .execute(params![session_id, stream_id, seq])?;
            Ok(())
        });
        Ok(())
    }

    async fn events_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let (session_id, stream_id) = (session_id.to_string(), stream_id.to_string());
        self.read_all("SELECT session_id, stream_id, seq, data, undelivered, created_at FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq > ?3 ORDER BY seq", params![session_id, stream_id, after_seq], event_from_row)
    }

    async fn take_undelivered(
        &self,
        session_id: &str,
        except: &[String],
    ) -> StoreResult<Vec<EventRecord>> {
        let session_id = session_id.to_string();
        let except = except.to_vec();
        // On the writer: the read and the marks are one step, so of two
        // takers each event goes to one.
        self.writer
            .write(move |conn| {
                let events = {
                    let mut stmt = conn.prepare_cached(
                        "SELECT session_id, stream_id, seq, data, undelivered, created_at FROM events WHERE session_id = ?1 AND undelivered = 1 ORDER BY created_at, stream_id, seq",
                    )?;
                    let rows = stmt.query_map([&session_id], event_from_row)?;
                    rows.collect::<Result<Vec<_>, _>>()?
                };
                let events: Vec<EventRecord> = events
                    .into_iter()
                    .filter(|e| !except.contains(&e.stream_id))
                    .collect();
                let mut mark = conn.prepare_cached(
                    "UPDATE events SET undelivered = 0 WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
                )?;
                for e in &events {
                    mark.execute(params![session_id, e.stream_id, e.seq])?;
                }
                Ok(events)
            })
            .await
    }

    async fn delete_replayed_events(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| {
                // A stream is judged by its newest event, so a stream that is
                // still being written keeps all of its delivered events.
                let n = conn.execute(
                    "DELETE FROM events WHERE undelivered = 0 AND (session_id, stream_id) IN \
                     (SELECT session_id, stream_id FROM events GROUP BY session_id, stream_id \
                      HAVING MAX(created_at) < ?1)",
                    [before_ms],
                )?;
                Ok(n as u64)
            })
            .await
    }

    async fn delivered_event_bytes(&self) -> StoreResult<u64> {
        self.with(|conn| {
            let bytes: i64 = conn
                .prepare_cached(
                    "SELECT coalesce(SUM(length(CAST(data AS BLOB))), 0) FROM events \
                     WHERE undelivered = 0",
                )?
                .query_row([], |r| r.get(0))?;
            Ok(bytes.max(0) as u64)
        })
        .await
    }

    async fn trim_delivered_events(&self, bytes: u64) -> StoreResult<Trimmed> {
        let budget = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.writer
            .write(move |conn| delete_oldest_delivered(conn, "?1 IS NOT NULL", &"all", budget))
            .await
    }

    async fn event_bytes_by_session(&self) -> StoreResult<Vec<SessionEventBytes>> {
        self.read_all(
            "SELECT e.session_id, s.org_id, SUM(length(CAST(e.data AS BLOB))) FROM events e \
             JOIN sessions s ON s.id = e.session_id GROUP BY e.session_id, s.org_id",
            [],
            |r| {
                Ok(SessionEventBytes {
                    session_id: r.get(0)?,
                    org_id: r.get(1)?,
                    bytes: r.get::<_, i64>(2)?.max(0) as u64,
                })
            },
        )
    }

    async fn trim_events(
        &self,
        scope: EventScope<'_>,
        bytes: u64,
        dropped: DroppedAnswer,
    ) -> StoreResult<TrimmedEvents> {
        let (filter, key) = match scope {
            EventScope::Session(id) => ("session_id = ?1", id.to_string()),
            EventScope::Org(org) => (
                "session_id IN (SELECT id FROM sessions WHERE org_id = ?1)",
                org.to_string(),
            ),
        };
        let budget = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.writer
            .write(move |conn| {
                // The oldest delivered events first, as far as the budget.
                let mut out = TrimmedEvents {
                    deleted: delete_oldest_delivered(conn, filter, &key, budget)?,
                    ..TrimmedEvents::default()
                };
                let mut delete = conn.prepare_cached(
                    "DELETE FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
                )?;
                let mut left = budget.saturating_sub(out.deleted.bytes as i64);
                if left <= 0 {
                    return Ok(out);
                }
                // Then what no client has read, oldest first; each row's
                // text is read only when it is given up.
                let undelivered: Vec<(String, String, i64)> = conn
                    .prepare_cached(&format!(
                        "SELECT session_id, stream_id, seq FROM events \
                         WHERE undelivered = 1 AND {filter} \
                         ORDER BY created_at, session_id, stream_id, seq"
                    ))?
                    .query_map(params![key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()?;
                let mut read = conn.prepare_cached(
                    "SELECT data FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
                )?;
                let mut replace = conn.prepare_cached(
                    "UPDATE events SET data = ?4 WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
                )?;
                for (session, stream, seq) in undelivered {
                    if left <= 0 {
                        break;
                    }
                    let data: String = read.query_row(params![session, stream, seq], |r| r.get(0))?;
                    let size = data.len() as i64;
                    let freed = match dropped(&data) {
                        // Replaced already: nothing more to free here.
                        Some(answer) if answer.len() as i64 >= size => continue,
                        Some(answer) => {
                            replace.execute(params![session, stream, seq, answer])?;
                            out.answers += 1;
                            size - answer.len() as i64
                        }
                        None => {
                            delete.execute(params![session, stream, seq])?;
                            size
                        }
                    };
                    out.dropped.rows += 1;
                    out.dropped.bytes += freed as u64;
                    left -= freed;
                }
                Ok(out)
            })
            .await
    }
}

/// Deletes the oldest delivered events that `filter` (on `?1` = `key`)
/// selects until `budget` bytes are freed (or none is left).
fn delete_oldest_delivered(
    conn: &Connection,
    filter: &str,
    key: &dyn rusqlite::ToSql,
    budget: i64,
) -> StoreResult<Trimmed> {
    let doomed: Vec<(String, String, i64, i64)> = conn
        .prepare_cached(&format!(
            "SELECT session_id, stream_id, seq, size FROM ( \
               SELECT session_id, stream_id, seq, size, coalesce(SUM(size) OVER ( \
                 ORDER BY created_at, session_id, stream_id, seq \
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before \
               FROM (SELECT session_id, stream_id, seq, created_at, \
                       length(CAST(data AS BLOB)) AS size \
                     FROM events WHERE undelivered = 0 AND {filter})) \
             WHERE before < ?2"
        ))?
        .query_map(params![key, budget], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<Result<_, _>>()?;
    let mut delete = conn.prepare_cached(
        "DELETE FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
    )?;
    let mut trimmed = Trimmed::default();
    for (session, stream, seq, size) in doomed {
        trimmed.rows += delete.execute(params![session, stream, seq])? as u64;
        trimmed.bytes += size.max(0) as u64;
    }
    Ok(trimmed)
}
