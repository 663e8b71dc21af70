//! Group commit: single-row writes of one kind that arrive while earlier
//! ones of that kind are in flight are written together, one statement for
//! the group.
//!
//! Under a burst of restored executions, most of Postgres's work per row
//! is the statement around it (bind, plan, lock, commit, a round trip),
//! and Postgres shares the two cores with the server and its clients.
//! One group of a kind is in flight at a time. Unless the kind lingers, a
//! write that finds no group in flight goes at once, alone; writes that
//! arrive while one is in flight wait and go together in the next group.
//! Every caller still awaits its own row's commit, so "committed before
//! it is answered" holds row by row.
//!
//! A kind that lingers (delivery marks, which nobody waits for) holds a
//! group open for a moment after its first row, so that a burst's rows
//! share a statement; [`Group::flush`] ends the moment early for a reader
//! that must see every row queued before it.
//!
//! A group refused for what one of its rows holds (a value, a constraint, a
//! row written twice, a deadlock) is written again row by row, in arrival
//! order, so that row fails only its own caller. Any other failure (a lost
//! connection, a timeout, a full pool) fails the whole group at once: its
//! rows would fail alike, or may have committed already, and trying them
//! one by one would hold every write of the kind behind them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant};
use tokio_postgres::types::ToSql;

use super::{checkout, col, db_error, pg_text};
use crate::{EventRecord, ExecutionRecord, StoreError, StoreResult, ToolCallRecord};

/// Rows one statement takes at most.
const MAX_GROUP: usize = 64;
/// Writes waiting for their group; a full queue makes callers wait (each caller
/// is a request in flight, which is bounded already).
const QUEUE: usize = 1024;

/// One kind of grouped write.
#[async_trait]
pub(super) trait GroupWrite: Send + Sync + 'static {
    type Row: Send + Sync + 'static;
    /// What each row's caller is told (in the rows' order).
    type Answer: Send + 'static;
    /// Writes `rows` in one statement.
    async fn write(&self, rows: &[Self::Row]) -> Result<Vec<Self::Answer>, Failed>;
}

/// Why a group's statement failed, and whether a row may be at fault.
pub(super) struct Failed {
    pub error: StoreError,
    /// Postgres refused the statement for what a row holds: each row is
    /// tried again alone.
    pub row_at_fault: bool,
}

impl From<StoreError> for Failed {
    fn from(error: StoreError) -> Self {
        Failed {
            error,
            row_at_fault: false,
        }
    }
}

/// A driver error as a group's failure: SQLSTATE classes 21 (a row
/// written twice), 22 (a value), 23 (a constraint) and 40 (a deadlock, a
/// serialisation failure) are a row's doing; anything else is not.
fn failed(e: tokio_postgres::Error) -> Failed {
    let row_at_fault = e.code().is_some_and(|code| {
        let code = code.code();
        ["21", "22", "23", "40"]
            .iter()
            .any(|class| code.starts_with(class))
    });
    Failed {
        error: db_error(e),
        row_at_fault,
    }
}

/// The same error for another caller of the group.
fn again(e: &StoreError) -> StoreError {
    match e {
        StoreError::Busy => StoreError::Busy,
        StoreError::Full => StoreError::Full,
        StoreError::Database(e) => StoreError::Database(e.clone()),
        other => StoreError::database(other.to_string()),
    }
}

struct Waiting<W: GroupWrite> {
    row: W::Row,
    answer: oneshot::Sender<StoreResult<W::Answer>>,
}

/// What the grouping task is sent: a row to write, or a flush to answer
/// once every row sent before it is written.
enum Item<W: GroupWrite> {
    Row(Waiting<W>),
    Flush(oneshot::Sender<()>),
}

/// The queue of one kind of write and the task that groups it.
pub(super) struct Group<W: GroupWrite> {
    queue: mpsc::Sender<Item<W>>,
    writer: Arc<W>,
}

impl<W: GroupWrite> Group<W> {
    /// Starts the grouping task on the current runtime. With a `linger`,
    /// a group stays open that long after its first row (or until it is
    /// full or flushed); without, it takes only what is already waiting.
    pub(super) fn start(writer: W, linger: Duration) -> Self {
        let writer = Arc::new(writer);
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(gather(writer.clone(), waiting, linger));
        Group { queue, writer }
    }

    /// Writes `row` with whatever else is waiting, once it is committed.
    pub(super) async fn write(&self, row: W::Row) -> StoreResult<W::Answer> {
        let (answer, answered) = oneshot::channel();
        if let Err(mpsc::error::SendError(item)) =
            self.queue.send(Item::Row(Waiting { row, answer })).await
        {
            // The task is gone (its runtime ended): this row goes alone.
            let Item::Row(w) = item else {
                return Err(StoreError::database("a group write lost its row"));
            };
            return one(&*self.writer, &w.row).await;
        }
        answered.await.map_err(|_| {
            StoreError::database("the write's group was abandoned before it committed")
        })?
    }

    /// Returns once every row sent before the call has been written (or
    /// has failed), cutting a lingering group short.
    pub(super) async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.queue.send(Item::Flush(done)).await.is_ok() {
            // An error means the task is gone, and nothing waits in it.
            let _ = flushed.await;
        }
    }
}

/// Takes the waiting writes as one group, writes it, and so on: one group
/// in flight at a time (one pooled connection per kind).
async fn gather<W: GroupWrite>(
    writer: Arc<W>,
    mut waiting: mpsc::Receiver<Item<W>>,
    linger: Duration,
) {
    loop {
        let first = match waiting.recv().await {
            None => return,
            // Nothing is in flight between groups: a flush that finds no
            // group open is answered at once.
            Some(Item::Flush(done)) => {
                let _ = done.send(());
                continue;
            }
            Some(Item::Row(w)) => w,
        };
        let mut group = vec![first];
        let mut flushes = Vec::new();
        let open_until = Instant::now() + linger;
        while group.len() < MAX_GROUP {
            let next = if linger.is_zero() {
                waiting.try_recv().ok()
            } else {
                tokio::time::timeout_at(open_until, waiting.recv())
                    .await
                    .ok()
                    .flatten()
            };
            match next {
                Some(Item::Row(w)) => group.push(w),
                Some(Item::Flush(done)) => {
                    flushes.push(done);
                    break;
                }
                None => break,
            }
        }
        commit(&*writer, group).await;
        for done in flushes {
            let _ = done.send(());
        }
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
        Ok(_) => Failed::from(StoreError::database(
            "a group write answered for other rows",
        )),
        Err(failed) => failed,
    };
    if !failed.row_at_fault || rows.len() == 1 {
        for answer in answers {
            let _ = answer.send(Err(again(&failed.error)));
        }
        return;
    }
    tracing::debug!(error = %failed.error, rows = rows.len(), "a group write was refused; writing its rows one by one");
    for (row, answer) in rows.iter().zip(answers) {
        let _ = answer.send(one(writer, row).await);
    }
}

async fn one<W: GroupWrite>(writer: &W, row: &W::Row) -> StoreResult<W::Answer> {
    writer
        .write(std::slice::from_ref(row))
        .await
        .map_err(|f| f.error)?
        .pop()
        .ok_or_else(|| StoreError::database("a write answered for no row"))
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

    async fn write(&self, given: &[ExecutionRecord]) -> Result<Vec<()>, Failed> {
        // One id twice in one statement is an error for ON CONFLICT: a
        // run's later record (it arrived later, from the same run) is the
        // one written, and both callers are answered once it commits. In
        // id order, so two groups lock shared rows in one order.
        let mut latest: BTreeMap<&str, &ExecutionRecord> = BTreeMap::new();
        for x in given {
            latest.insert(x.id.as_str(), x);
        }
        let rows: Vec<&ExecutionRecord> = latest.into_values().collect();
        let text =
            |f: fn(&ExecutionRecord) -> String| rows.iter().map(|x| f(x)).collect::<Vec<String>>();
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
        let calls = text(|x| serde_json::to_string(&x.tool_calls).unwrap_or_else(|_| "[]".into()));
        let started: Vec<i64> = rows.iter().map(|x| x.started_at_ms).collect();
        let durations: Vec<i64> = rows.iter().map(|x| x.duration_ms).collect();
        let each = rows.iter().flat_map(|x| x.tool_calls.iter());
        let call = ToolCallColumns::of(each);
        let params: [&(dyn ToSql + Sync); 29] = [
            &ids,
            &sessions,
            &accounts,
            &orgs,
            &code,
            &status,
            &results,
            &errors,
            &logs,
            &calls,
            &started,
            &durations,
            &call.ids,
            &call.orgs,
            &call.executions,
            &call.sessions,
            &call.accounts,
            &call.paths,
            &call.outcomes,
            &call.error_codes,
            &call.policy_actions,
            &call.policy_rules,
            &call.approvals,
            &call.decided_by,
            &call.waits,
            &call.arg_names,
            &call.started,
            &call.durations,
            &call.decided_via,
        ];
        let client = checkout(&self.pool).await?;
        let statement = client
            .prepare_cached(INSERT_EXECUTIONS)
            .await
            .map_err(failed)?;
        client.execute(&statement, &params).await.map_err(failed)?;
        Ok(vec![(); given.len()])
    }
}

/// The tool calls of a group of records, column by column for `unnest`.
struct ToolCallColumns {
    ids: Vec<String>,
    orgs: Vec<String>,
    executions: Vec<String>,
    sessions: Vec<Option<String>>,
    accounts: Vec<String>,
    paths: Vec<String>,
    outcomes: Vec<String>,
    error_codes: Vec<Option<String>>,
    policy_actions: Vec<Option<String>>,
    policy_rules: Vec<Option<String>>,
    approvals: Vec<Option<String>>,
    decided_by: Vec<Option<String>>,
    waits: Vec<i64>,
    arg_names: Vec<String>,
    started: Vec<i64>,
    durations: Vec<i64>,
    decided_via: Vec<Option<String>>,
}

impl ToolCallColumns {
    fn of<'a>(calls: impl Iterator<Item = &'a ToolCallRecord>) -> Self {
        let mut c = ToolCallColumns {
            ids: Vec::new(),
            orgs: Vec::new(),
            executions: Vec::new(),
            sessions: Vec::new(),
            accounts: Vec::new(),
            paths: Vec::new(),
            outcomes: Vec::new(),
            error_codes: Vec::new(),
            policy_actions: Vec::new(),
            policy_rules: Vec::new(),
            approvals: Vec::new(),
            decided_by: Vec::new(),
            waits: Vec::new(),
            arg_names: Vec::new(),
            started: Vec::new(),
            durations: Vec::new(),
            decided_via: Vec::new(),
        };
        let text = |t: &str| pg_text(t).into_owned();
        for call in calls {
            c.ids.push(text(&call.id));
            c.orgs.push(call.org_id.clone());
            c.executions.push(call.execution_id.clone());
            c.sessions.push(call.session_id.clone());
            c.accounts.push(call.account_id.clone());
            c.paths.push(text(&call.tool_path));
            c.outcomes.push(call.outcome.as_str().to_string());
            c.error_codes.push(call.error_code.as_deref().map(text));
            c.policy_actions
                .push(call.policy_action.map(|a| a.as_str().to_string()));
            c.policy_rules.push(call.policy_rule.clone());
            c.approvals
                .push(call.approval.map(|a| a.as_str().to_string()));
            c.decided_by.push(call.decided_by.clone());
            c.waits.push(call.approval_wait_ms);
            c.arg_names.push(text(
                &serde_json::to_string(&call.arg_names).unwrap_or_else(|_| "[]".into()),
            ));
            c.started.push(call.started_at_ms);
            c.durations.push(call.duration_ms);
            c.decided_via
                .push(call.decided_via.map(|v| v.as_str().to_string()));
        }
        c
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

    async fn write(&self, rows: &[FencedEvent]) -> Result<Vec<bool>, Failed> {
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
        // over session rows locks them, so batches never deadlock), only
        // those some row's node still holds: a claim racing this statement
        // waits for it, or this one reads the claim's version (a locking
        // read sees the newest) and inserts nothing for it. The answer is
        // by row number, not by key: each caller learns whether its own
        // row went in.
        let statement = client
            .prepare_cached(APPEND_FENCED_EVENTS)
            .await
            .map_err(failed)?;
        let inserted = client
            .query(&statement, &params)
            .await
            .map_err(failed)?
            .iter()
            .map(|row| col::<i64>(row, 0))
            .collect::<StoreResult<HashSet<i64>>>()?;
        Ok((1..=rows.len() as i64)
            .map(|n| inserted.contains(&n))
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

    async fn write(&self, rows: &[Delivered]) -> Result<Vec<()>, Failed> {
        let sessions: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        let streams: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        let seqs: Vec<i64> = rows.iter().map(|r| r.2).collect();
        let client = checkout(&self.unflushed).await?;
        // The rows are locked in key order first, so two groups never hold
        // rows the other waits for. A replay taking one session's events
        // (`take_undelivered`) locks in scan order: against it a deadlock
        // stays possible, rare, and costs a retry (40P01 is a row's fault
        // here) or that replay's error, never a lost event.
        let statement = client
            .prepare_cached(MARK_DELIVERED)
            .await
            .map_err(failed)?;
        client
            .execute(&statement, &[&sessions, &streams, &seqs])
            .await
            .map_err(failed)?;
        Ok(vec![(); rows.len()])
    }
}

/// A group of execution records (`ExecutionRecords`) and their tool calls,
/// in one statement (so one transaction): a record written again replaces
/// its calls (those it no longer has are deleted, the others upserted).
pub(super) const INSERT_EXECUTIONS: &str = "WITH records AS (INSERT INTO executions (id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                                      $7::text[], $8::text[], $9::text[], $10::text[], $11::int8[], $12::int8[]) \
                 ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, account_id = excluded.account_id, \
                 org_id = excluded.org_id, code = excluded.code, status = excluded.status, result = excluded.result, \
                 error = excluded.error, logs = excluded.logs, tool_calls = excluded.tool_calls, \
                 started_at = excluded.started_at, duration_ms = excluded.duration_ms), \
             stale AS (DELETE FROM tool_calls WHERE execution_id = ANY($1::text[]) AND NOT (id = ANY($13::text[]))), \
             calls AS (INSERT INTO tool_calls (id, org_id, execution_id, session_id, account_id, tool_path, outcome, \
                 error_code, policy_action, policy_rule, approval, decided_by, approval_wait_ms, arg_names, started_at, duration_ms, \
                 decided_via) \
                 SELECT * FROM unnest($13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], \
                                      $19::text[], $20::text[], $21::text[], $22::text[], $23::text[], $24::text[], \
                                      $25::int8[], $26::text[], $27::int8[], $28::int8[], $29::text[]) \
                 ON CONFLICT (id) DO UPDATE SET org_id = excluded.org_id, execution_id = excluded.execution_id, \
                 session_id = excluded.session_id, account_id = excluded.account_id, tool_path = excluded.tool_path, \
                 outcome = excluded.outcome, error_code = excluded.error_code, policy_action = excluded.policy_action, \
                 policy_rule = excluded.policy_rule, approval = excluded.approval, decided_by = excluded.decided_by, \
                 approval_wait_ms = excluded.approval_wait_ms, arg_names = excluded.arg_names, \
                 started_at = excluded.started_at, duration_ms = excluded.duration_ms, \
                 decided_via = excluded.decided_via) \
             SELECT 1";

/// A group of events, each written only while its node still holds its
/// session (`FencedEvents`).
pub(super) const APPEND_FENCED_EVENTS: &str = "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::bool[], \
                                                 $6::int8[], $7::text[], $8::int8[]) WITH ORDINALITY \
                              AS r(session_id, stream_id, seq, data, undelivered, created_at, holder, epoch, n)), \
                 locked AS MATERIALIZED (SELECT id, holder, epoch FROM sessions \
                                         WHERE id = ANY($1::text[]) AND holder = ANY($7::text[]) \
                                         ORDER BY id FOR SHARE), \
                 fenced AS MATERIALIZED (SELECT r.* FROM r JOIN locked \
                                         ON locked.id = r.session_id AND locked.holder = r.holder AND locked.epoch = r.epoch), \
                 inserted AS (INSERT INTO events (session_id, stream_id, seq, data, undelivered, created_at) \
                              SELECT session_id, stream_id, seq, data, undelivered, created_at FROM fenced \
                              ON CONFLICT (session_id, stream_id, seq) DO UPDATE SET data = excluded.data, \
                              undelivered = excluded.undelivered, created_at = excluded.created_at) \
                 SELECT n FROM fenced";

/// A group of delivery marks (`DeliveryMarks`).
pub(super) const MARK_DELIVERED: &str = "WITH locked AS MATERIALIZED ( \
                   SELECT e.session_id, e.stream_id, e.seq FROM events e \
                   JOIN unnest($1::text[], $2::text[], $3::int8[]) AS m(session_id, stream_id, seq) \
                     ON e.session_id = m.session_id AND e.stream_id = m.stream_id AND e.seq = m.seq \
                   ORDER BY 1, 2, 3 FOR NO KEY UPDATE OF e) \
                 UPDATE events e SET undelivered = false FROM locked \
                 WHERE e.session_id = locked.session_id AND e.stream_id = locked.stream_id AND e.seq = locked.seq";

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::Notify;

    use super::*;

    /// Answers each row ×10, refuses any statement holding 13 (as Postgres
    /// refuses a bad row), fails every statement holding 99 as a lost
    /// connection would, and holds its first statement until `open`.
    #[derive(Default)]
    struct Recorder {
        statements: Mutex<Vec<Vec<u32>>>,
        open: Notify,
    }

    #[async_trait]
    impl GroupWrite for Arc<Recorder> {
        type Row = u32;
        type Answer = u32;

        async fn write(&self, rows: &[u32]) -> Result<Vec<u32>, Failed> {
            let first = {
                let mut statements = self.statements.lock().unwrap();
                statements.push(rows.to_vec());
                statements.len() == 1
            };
            if first {
                self.open.notified().await;
            }
            if rows.contains(&99) {
                return Err(StoreError::database("connection lost").into());
            }
            if rows.contains(&13) {
                return Err(Failed {
                    error: StoreError::database("row 13 refused"),
                    row_at_fault: true,
                });
            }
            Ok(rows.iter().map(|r| r * 10).collect())
        }
    }

    /// Starts a group whose first statement (row 1) is held, queues
    /// `rows` behind it, then lets it go; returns every caller's answer
    /// and the statements written.
    async fn behind_a_held_write(rows: &[u32]) -> (Vec<StoreResult<u32>>, Vec<Vec<u32>>) {
        let recorder = Arc::new(Recorder::default());
        let group = Arc::new(Group::start(recorder.clone(), Duration::ZERO));
        let mut callers = Vec::new();
        for row in std::iter::once(1).chain(rows.iter().copied()) {
            let writer = group.clone();
            callers.push(tokio::spawn(async move { writer.write(row).await }));
            // In order: each row queued before the next is sent.
            while QUEUE - group.queue.capacity() < callers.len() - 1
                || recorder.statements.lock().unwrap().is_empty()
            {
                tokio::task::yield_now().await;
            }
        }
        recorder.open.notify_one();
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.unwrap());
        }
        let statements = recorder.statements.lock().unwrap().clone();
        (answers, statements)
    }

    #[tokio::test]
    async fn writes_waiting_behind_a_group_go_together_and_each_gets_its_own_answer() {
        let (answers, statements) = behind_a_held_write(&[2, 3, 4]).await;
        assert_eq!(statements, [vec![1], vec![2, 3, 4]]);
        let answers: Vec<u32> = answers.into_iter().map(|a| a.unwrap()).collect();
        assert_eq!(answers, [10, 20, 30, 40]);
    }

    #[tokio::test]
    async fn a_group_refused_for_a_row_is_written_again_row_by_row() {
        let (answers, statements) = behind_a_held_write(&[2, 13, 4]).await;
        assert_eq!(
            statements,
            [vec![1], vec![2, 13, 4], vec![2], vec![13], vec![4]]
        );
        assert_eq!(answers[0].as_ref().ok(), Some(&10));
        assert_eq!(answers[1].as_ref().ok(), Some(&20));
        assert!(
            matches!(&answers[2], Err(StoreError::Database(e)) if e.message() == "row 13 refused"),
            "{:?}",
            answers[2]
        );
        assert_eq!(answers[3].as_ref().ok(), Some(&40));
    }

    #[tokio::test]
    async fn a_group_lost_for_another_reason_fails_whole_and_is_not_written_again() {
        let (answers, statements) = behind_a_held_write(&[2, 99]).await;
        assert_eq!(statements, [vec![1], vec![2, 99]], "no row retried alone");
        assert_eq!(answers[0].as_ref().ok(), Some(&10));
        for answer in &answers[1..] {
            assert!(
                matches!(answer, Err(StoreError::Database(e)) if e.message() == "connection lost"),
                "{answer:?}"
            );
        }
    }
    /// Sends `rows` one after another to a group that lingers for `linger`
    /// and writes at once (its first statement is not held).
    async fn lingering(
        linger: Duration,
        rows: &[u32],
    ) -> (
        Arc<Recorder>,
        Arc<Group<Arc<Recorder>>>,
        Vec<tokio::task::JoinHandle<StoreResult<u32>>>,
    ) {
        let recorder = Arc::new(Recorder::default());
        recorder.open.notify_one();
        let group = Arc::new(Group::start(recorder.clone(), linger));
        let mut callers = Vec::new();
        for &row in rows {
            let writer = group.clone();
            callers.push(tokio::spawn(async move { writer.write(row).await }));
            tokio::task::yield_now().await;
        }
        (recorder, group, callers)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lingering_group_takes_the_rows_sent_while_it_is_open() {
        let started = Instant::now();
        let (recorder, _group, callers) = lingering(Duration::from_millis(50), &[1, 2, 3]).await;
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.unwrap().unwrap());
        }
        assert_eq!(answers, [10, 20, 30]);
        assert_eq!(*recorder.statements.lock().unwrap(), [vec![1, 2, 3]]);
        assert!(
            started.elapsed() >= Duration::from_millis(50),
            "it lingered"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_cuts_a_lingering_group_short_and_waits_for_its_rows() {
        let started = Instant::now();
        let linger = Duration::from_secs(3600);
        let (recorder, group, callers) = lingering(linger, &[1, 2]).await;
        group.flush().await;
        assert_eq!(
            *recorder.statements.lock().unwrap(),
            [vec![1, 2]],
            "written before the flush returned"
        );
        assert!(
            started.elapsed() < linger,
            "the flush did not wait out the linger"
        );
        for caller in callers {
            assert!(caller.await.unwrap().is_ok());
        }
        // Nothing open: a flush returns at once; later rows form a group of their own.
        group.flush().await;
        assert_eq!(group.write(3).await.ok(), Some(30));
        assert_eq!(*recorder.statements.lock().unwrap(), [vec![1, 2], vec![3]]);
    }

    #[tokio::test]
    async fn a_flush_waits_for_the_group_in_flight() {
        let recorder = Arc::new(Recorder::default());
        let group = Arc::new(Group::start(recorder.clone(), Duration::ZERO));
        let writer = group.clone();
        let first = tokio::spawn(async move { writer.write(1).await });
        while recorder.statements.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let flusher = group.clone();
        let flushed = tokio::spawn(async move { flusher.flush().await });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(
            !flushed.is_finished(),
            "the flush returned while row 1 was in flight"
        );
        recorder.open.notify_one();
        flushed.await.unwrap();
        assert_eq!(first.await.unwrap().ok(), Some(10));
    }
}
