//! Group commit: single-row writes of one kind that arrive while earlier
//! ones of that kind are in flight are written together, one statement for
//! the group.
//!
//! Under a burst of restored executions, most of Postgres's work per row
//! is the statement around it (bind, plan, lock, commit, a round trip),
//! and Postgres shares the two cores with the server and its clients.
//! Nothing waits to form a group: a write that finds its kind's slot free
//! goes at once, alone; writes that arrive while the slot is busy wait and
//! go together in the next group. Every caller still awaits its own row's
//! commit, so "committed before it is answered" holds row by row.
//!
//! A group that fails is written again row by row, in arrival order, so one
//! bad row (or a deadlock, or a lock timeout) fails only its own caller.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_postgres::types::ToSql;

use super::{checkout, col, db_error, pg_text};
use crate::{EventRecord, ExecutionRecord, StoreError, StoreResult};

/// Rows one statement takes at most.
const MAX_GROUP: usize = 64;
/// Writes waiting for a slot; a full queue makes callers wait (each caller
/// is a request in flight, which is bounded already).
const QUEUE: usize = 1024;

/// One kind of grouped write.
#[async_trait]
pub(super) trait GroupWrite: Send + Sync + 'static {
    type Row: Send + Sync + 'static;
    /// What each row's caller is told (in the rows' order).
    type Answer: Send + 'static;
    async fn write(&self, rows: &[Self::Row]) -> StoreResult<Vec<Self::Answer>>;
}

struct Waiting<W: GroupWrite> {
    row: W::Row,
    answer: oneshot::Sender<StoreResult<W::Answer>>,
}

/// The queue of one kind of write and the task that groups it.
pub(super) struct Group<W: GroupWrite> {
    queue: mpsc::Sender<Waiting<W>>,
    writer: Arc<W>,
}

impl<W: GroupWrite> Group<W> {
    /// Starts the grouping task on the current runtime: at most `slots`
    /// groups in flight at once (each holds one pooled connection).
    pub(super) fn start(writer: W, slots: usize) -> Self {
        let writer = Arc::new(writer);
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(gather(
            writer.clone(),
            waiting,
            Arc::new(Semaphore::new(slots)),
        ));
        Group { queue, writer }
    }

    /// Writes `row` with whatever else is waiting, once it is committed.
    pub(super) async fn write(&self, row: W::Row) -> StoreResult<W::Answer> {
        let (answer, answered) = oneshot::channel();
        if let Err(mpsc::error::SendError(w)) = self.queue.send(Waiting { row, answer }).await {
            // The task is gone (its runtime ended): this row goes alone.
            return one(&*self.writer, &w.row).await;
        }
        answered.await.map_err(|_| {
            StoreError::Database("the write's group was abandoned before it committed".into())
        })?
    }
}

/// Takes every waiting write whenever a slot is free, and writes them as
/// one group on a task of its own.
async fn gather<W: GroupWrite>(
    writer: Arc<W>,
    mut waiting: mpsc::Receiver<Waiting<W>>,
    slots: Arc<Semaphore>,
) {
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = waiting.recv().await else {
            return;
        };
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match waiting.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        let writer = writer.clone();
        tokio::spawn(async move {
            commit(&*writer, group).await;
            drop(slot);
        });
    }
}

async fn commit<W: GroupWrite>(writer: &W, group: Vec<Waiting<W>>) {
    let (rows, answers): (Vec<W::Row>, Vec<_>) =
        group.into_iter().map(|w| (w.row, w.answer)).unzip();
    let failed = match writer.write(&rows).await {
        Ok(given) if given.len() == rows.len() => {
            for (answer, given) in answers.into_iter().zip(given) {
                let _ = answer.send(Ok(given));
            }
            return;
        }
        Ok(_) => StoreError::Database("a group write answered for other rows".into()),
        Err(e) => e,
    };
    // A full pool fails every row alike; anything else may be one row's
    // fault (or a deadlock's), so each row is tried again alone.
    if rows.len() == 1 {
        if let Some(answer) = answers.into_iter().next() {
            let _ = answer.send(Err(failed));
        }
        return;
    }
    if matches!(failed, StoreError::Busy) {
        for answer in answers {
            let _ = answer.send(Err(StoreError::Busy));
        }
        return;
    }
    tracing::debug!(error = %failed, rows = rows.len(), "a group write failed; writing its rows one by one");
    for (row, answer) in rows.iter().zip(answers) {
        let _ = answer.send(one(writer, row).await);
    }
}

async fn one<W: GroupWrite>(writer: &W, row: &W::Row) -> StoreResult<W::Answer> {
    writer
        .write(std::slice::from_ref(row))
        .await?
        .pop()
        .ok_or_else(|| StoreError::Database("a write answered for no row".into()))
}

/// Execution records, upserted (a paused run's record is written again
/// when it settles).
pub(super) struct ExecutionRecords {
    pub pool: Pool,
}

#[async_trait]
impl GroupWrite for ExecutionRecords {
    type Row = ExecutionRecord;
    type Answer = ();

    async fn write(&self, rows: &[ExecutionRecord]) -> StoreResult<Vec<()>> {
        // One id twice in one statement is an error for ON CONFLICT; the
        // same run's records are written in order instead.
        let mut seen = HashSet::with_capacity(rows.len());
        if rows.len() > 1 && !rows.iter().all(|x| seen.insert(x.id.as_str())) {
            let mut answers = Vec::with_capacity(rows.len());
            for row in rows {
                answers.extend(self.write(std::slice::from_ref(row)).await?);
            }
            return Ok(answers);
        }
        let text = |f: fn(&ExecutionRecord) -> String| rows.iter().map(f).collect::<Vec<String>>();
        let ids = text(|x| x.id.clone());
        let sessions: Vec<Option<String>> = rows.iter().map(|x| x.session_id.clone()).collect();
        let accounts = text(|x| x.account_id.clone());
        let orgs = text(|x| x.org_id.clone());
        let code = text(|x| pg_text(&x.code).into_owned());
        let status = text(|x| x.status.as_str().to_string());
        let results: Vec<Option<String>> = rows
            .iter()
            .map(|x| x.result.as_ref().map(|v| v.to_string()))
            .collect();
        let errors: Vec<Option<String>> = rows
            .iter()
            .map(|x| x.error.as_deref().map(|e| pg_text(e).into_owned()))
            .collect();
        let logs = text(|x| serde_json::to_string(&x.logs).unwrap_or_else(|_| "[]".into()));
        let calls = text(|x| x.tool_calls.to_string());
        let started: Vec<i64> = rows.iter().map(|x| x.started_at_ms).collect();
        let durations: Vec<i64> = rows.iter().map(|x| x.duration_ms).collect();
        let params: [&(dyn ToSql + Sync); 12] = [
            &ids, &sessions, &accounts, &orgs, &code, &status, &results, &errors, &logs, &calls,
            &started, &durations,
        ];
        let client = checkout(&self.pool).await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO executions (id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                                      $7::text[], $8::text[], $9::text[], $10::text[], $11::int8[], $12::int8[]) \
                 ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, account_id = excluded.account_id, \
                 org_id = excluded.org_id, code = excluded.code, status = excluded.status, result = excluded.result, \
                 error = excluded.error, logs = excluded.logs, tool_calls = excluded.tool_calls, \
                 started_at = excluded.started_at, duration_ms = excluded.duration_ms",
            )
            .await
            .map_err(db_error)?;
        client
            .execute(&statement, &params)
            .await
            .map_err(db_error)?;
        Ok(vec![(); rows.len()])
    }
}

/// One event of a session's holder, with the fence it carries.
pub(super) struct FencedEvent {
    pub event: EventRecord,
    pub holder: String,
    pub epoch: i64,
}

/// Events appended by their session's holder: each row goes in only while
/// its fence holds. The answer says whether it did.
pub(super) struct FencedEvents {
    pub pool: Pool,
}

#[async_trait]
impl GroupWrite for FencedEvents {
    type Row = FencedEvent;
    type Answer = bool;

    async fn write(&self, rows: &[FencedEvent]) -> StoreResult<Vec<bool>> {
        let sessions: Vec<&str> = rows.iter().map(|r| r.event.session_id.as_str()).collect();
        let streams: Vec<&str> = rows.iter().map(|r| r.event.stream_id.as_str()).collect();
        let seqs: Vec<i64> = rows.iter().map(|r| r.event.seq).collect();
        let data: Vec<&str> = rows.iter().map(|r| r.event.data.as_str()).collect();
        let undelivered: Vec<bool> = rows.iter().map(|r| r.event.undelivered).collect();
        let created: Vec<i64> = rows.iter().map(|r| r.event.created_at_ms).collect();
        let holders: Vec<&str> = rows.iter().map(|r| r.holder.as_str()).collect();
        let epochs: Vec<i64> = rows.iter().map(|r| r.epoch).collect();
        let params: [&(dyn ToSql + Sync); 8] = [
            &sessions,
            &streams,
            &seqs,
            &data,
            &undelivered,
            &created,
            &holders,
            &epochs,
        ];
        let client = checkout(&self.pool).await?;
        // The session rows are locked FOR SHARE in id order (as every batch
        // over session rows locks them, so batches never deadlock), and
        // only those still held by a row's node: a claim racing this
        // statement waits for it, or this one reads the claim's version
        // (a locking read sees the newest) and inserts nothing for it.
        let statement = client
            .prepare_cached(
                "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::bool[], \
                                                 $6::int8[], $7::text[], $8::int8[]) \
                              AS r(session_id, stream_id, seq, data, undelivered, created_at, holder, epoch)), \
                 locked AS MATERIALIZED (SELECT id, holder, epoch FROM sessions \
                                         WHERE id = ANY($1::text[]) AND holder = ANY($7::text[]) \
                                         ORDER BY id FOR SHARE) \
                 INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
                 SELECT r.session_id, r.stream_id, r.seq, r.data, r.undelivered, r.created_at \
                 FROM r JOIN locked ON locked.id = r.session_id AND locked.holder = r.holder AND locked.epoch = r.epoch \
                 ON CONFLICT (session_id, stream_id, seq) DO UPDATE SET data = excluded.data, \
                 undelivered = excluded.undelivered, created_at = excluded.created_at \
                 RETURNING session_id, stream_id, seq",
            )
            .await
            .map_err(db_error)?;
        let inserted = client
            .query(&statement, &params)
            .await
            .map_err(db_error)?
            .iter()
            .map(|row| {
                Ok((
                    col::<String>(row, 0)?,
                    col::<String>(row, 1)?,
                    col::<i64>(row, 2)?,
                ))
            })
            .collect::<StoreResult<HashSet<_>>>()?;
        Ok(rows
            .iter()
            .map(|r| {
                let e = &r.event;
                inserted.contains(&(e.session_id.clone(), e.stream_id.clone(), e.seq))
            })
            .collect())
    }
}

/// Delivery marks, on the unflushed pool (a lost mark replays its event
/// once more).
pub(super) struct DeliveryMarks {
    pub unflushed: Pool,
}

/// One delivered event: session, stream, sequence number.
pub(super) type Delivered = (String, String, i64);

#[async_trait]
impl GroupWrite for DeliveryMarks {
    type Row = Delivered;
    type Answer = ();

    async fn write(&self, rows: &[Delivered]) -> StoreResult<Vec<()>> {
        let sessions: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let streams: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        let seqs: Vec<i64> = rows.iter().map(|r| r.2).collect();
        let client = checkout(&self.unflushed).await?;
        let statement = client
            .prepare_cached(
                "UPDATE events e SET undelivered = false \
                 FROM unnest($1::text[], $2::text[], $3::int8[]) AS m(session_id, stream_id, seq) \
                 WHERE e.session_id = m.session_id AND e.stream_id = m.stream_id AND e.seq = m.seq",
            )
            .await
            .map_err(db_error)?;
        client
            .execute(&statement, &[&sessions, &streams, &seqs])
            .await
            .map_err(db_error)?;
        Ok(vec![(); rows.len()])
    }
}
