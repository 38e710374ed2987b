//! The group commit of [`Postgres`](super::Postgres) saves: one writer task per store drains
//! the queue of saves ([`SAVE_QUEUE`] at most) and writes up to [`MAX_BATCH`] of them (of
//! distinct threads) in one transaction, with one multi-row statement per kind of row, the
//! statements pipelined. Each save gets its own result: a save that loses its compare-and-swap
//! or cannot be serialized fails alone, and a batch the server refuses (a constraint, a
//! deadlock) is written again one save per transaction, so that a bad save fails only itself.
//! A broken connection, a server that cannot be reached or a batch past its deadline fails
//! every save of the batch (and the next batch connects again): never a hang.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use deadpool_postgres::{ClientWrapper, Pool};
use sha2::{Digest, Sha256};
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};
use tokio_postgres::types::ToSql;
use tower_agent_core::{
    error::BoxError,
    store::{
        StoreTag, Thread,
        journal::live_calls,
        sql::{
            FirstDifference, Head, Plan, SavedThread, SavedThreads, data_changes, encode_calls,
            encode_message, is_current, plan, to_millis,
        },
    },
};

use super::{ABSENT, Conflict, LOCK_SPACE, MAX_BATCH, chain};

/// A write waiting for the writer: a save, or a record of the tool-call journal.
pub(super) enum Queued {
    Save(Job<Thread>),
    Record(Job<Record>),
}

impl Queued {
    /// Two writes of one key are never in one batch (the second waits for the next).
    fn key(&self) -> String {
        match self {
            Queued::Save(job) => format!("t{}", job.work.id),
            Queued::Record(job) => format!("j{}\0{}", job.work.thread, job.work.call),
        }
    }
}

/// A record of the tool-call journal: `output` `None` for a call started (any output of an
/// earlier record of the call is cleared), `Some` for a call finished.
pub(super) struct Record {
    pub(super) thread: String,
    pub(super) call: String,
    pub(super) tool: String,
    pub(super) arguments: String,
    pub(super) output: Option<String>,
}

/// A write waiting for the writer, and how to answer its caller.
pub(super) struct Job<W> {
    pub(super) work: W,
    /// When the caller gives up: the batch holding the write is abandoned (and its connection
    /// closed, which rolls it back) by then.
    pub(super) deadline: Instant,
    /// The operation timeout it was given (for errors).
    pub(super) timeout: Duration,
    pub(super) reply: oneshot::Sender<Result<(), BoxError>>,
}

/// The writer task's state.
pub(super) struct Writer {
    /// The store's tag: a history it marked stored at the revision the database holds
    /// appends without the cache (see [`Messages::stored_len`]).
    pub(super) tag: StoreTag,
    pub(super) pool: Pool,
    pub(super) cache: Arc<Mutex<SavedThreads>>,
    pub(super) target: String,
    /// Its connection, taken out of the pool (so that reads never wait for it, nor it for
    /// reads); connected again after it broke.
    pub(super) client: Option<ClientWrapper>,
}

impl Writer {
    /// Writes batches until every sender (every clone of the store) is gone.
    pub(super) async fn run(mut self, mut queue: mpsc::Receiver<Queued>) {
        // Writes of a thread (or journal record) that is already in the batch being formed:
        // they go in the next one, in order (at most 2 × MAX_BATCH are held here).
        let mut held: VecDeque<Queued> = VecDeque::new();
        loop {
            let mut batch = Vec::new();
            let mut keys = HashSet::new();
            let mut next = VecDeque::new();
            for job in held.drain(..) {
                if batch.len() < MAX_BATCH && keys.insert(job.key()) {
                    batch.push(job);
                } else {
                    next.push_back(job);
                }
            }
            if batch.is_empty() {
                match queue.recv().await {
                    Some(job) => {
                        keys.insert(job.key());
                        batch.push(job);
                    }
                    None => return,
                }
            }
            let mut pulls = 0;
            while batch.len() < MAX_BATCH && next.len() < MAX_BATCH && pulls < MAX_BATCH {
                pulls += 1;
                match queue.try_recv() {
                    Ok(job) if keys.insert(job.key()) => batch.push(job),
                    Ok(job) => next.push_back(job),
                    Err(_) => break,
                }
            }
            held = next;
            let (mut saves, mut records) = (Vec::new(), Vec::new());
            for job in batch {
                match job {
                    Queued::Save(job) => saves.push(job),
                    Queued::Record(job) => records.push(job),
                }
            }
            self.write(saves, records).await;
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, SavedThreads> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, what: &str) -> BoxError {
        format!("postgres thread store {}: {what}", self.target).into()
    }

    /// Answers the jobs whose caller gave up or whose deadline passed; the others.
    fn current<W>(&self, jobs: Vec<Job<W>>, now: Instant) -> Vec<Job<W>> {
        let mut current = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.reply.is_closed() {
                continue;
            }
            if job.deadline <= now {
                let text = format!(
                    "the operation took longer than {:?} (waiting for the writer)",
                    job.timeout
                );
                let _ = job.reply.send(Err(self.error(&text)));
                continue;
            }
            current.push(job);
        }
        current
    }

    /// Writes one batch and answers each of its callers.
    async fn write(&mut self, batch: Vec<Job<Thread>>, records: Vec<Job<Record>>) {
        let now = Instant::now();
        let batch = self.current(batch, now);
        let records = self.current(records, now);
        let Some(deadline) = batch
            .iter()
            .map(|job| job.deadline)
            .chain(records.iter().map(|job| job.deadline))
            .min()
        else {
            return;
        };
        let remembered: Vec<Option<SavedThread>> = {
            let mut cache = self.cache();
            batch
                .iter()
                .map(|job| cache.get(&job.work.id).cloned())
                .collect()
        };
        let result = match self.connection(deadline).await {
            Ok(()) => self.attempt(&batch, &remembered, &records, deadline).await,
            Err(e) => Err(Failure::Connection(e)),
        };
        match result {
            Ok(outcomes) => {
                self.answer(batch, outcomes);
                for job in records {
                    let _ = job.reply.send(Ok(()));
                }
            }
            // Refused by the server, the connection fine: one write per transaction, so that
            // only the bad one fails.
            Err(Failure::Refused(e)) if batch.len() + records.len() > 1 => {
                drop(e);
                let mut outcomes = Vec::with_capacity(batch.len());
                for (job, remembered) in batch.iter().zip(&remembered) {
                    let one = match self.connection(job.deadline).await {
                        Ok(()) => {
                            self.attempt(
                                std::slice::from_ref(job),
                                std::slice::from_ref(remembered),
                                &[],
                                job.deadline,
                            )
                            .await
                        }
                        Err(e) => Err(Failure::Connection(e)),
                    };
                    outcomes.push(match one {
                        Ok(mut o) => o.pop().expect("one outcome per save"),
                        Err(failure) => Err(self.failed(failure, job)),
                    });
                }
                self.answer(batch, outcomes);
                for job in records {
                    let one = match self.connection(job.deadline).await {
                        Ok(()) => {
                            self.attempt(&[], &[], std::slice::from_ref(&job), job.deadline)
                                .await
                        }
                        Err(e) => Err(Failure::Connection(e)),
                    };
                    let reply = one.map(drop).map_err(|f| f.text(&self.target).into());
                    let _ = job.reply.send(reply);
                }
            }
            Err(failure) => {
                let mut cache = self.cache();
                let text = failure.text(&self.target);
                for job in batch {
                    // Unknown whether it was committed: compare the rows next time.
                    cache.remove(&job.work.id);
                    let _ = job.reply.send(Err(text.clone().into()));
                }
                for job in records {
                    let _ = job.reply.send(Err(text.clone().into()));
                }
            }
        }
    }

    /// The error of one save written alone that failed.
    fn failed(&mut self, failure: Failure, job: &Job<Thread>) -> BoxError {
        self.cache().remove(&job.work.id);
        failure.text(&self.target).into()
    }

    /// Remembers what was saved and answers each caller.
    fn answer(&self, batch: Vec<Job<Thread>>, outcomes: Vec<Result<i64, BoxError>>) {
        let mut cache = self.cache();
        for (job, outcome) in batch.into_iter().zip(outcomes) {
            let reply = match outcome {
                Ok(revision) => {
                    let thread = job.work;
                    thread.messages.mark_stored(self.tag, revision);
                    cache.put(
                        thread.id.clone(),
                        SavedThread::new(revision, thread.messages, thread.data),
                    );
                    Ok(())
                }
                // Remembered as it was: this stale history keeps failing until a load.
                Err(e) if e.is::<Conflict>() => Err(e),
                Err(e) => {
                    cache.remove(&job.work.id);
                    Err(e)
                }
            };
            let _ = job.reply.send(reply);
        }
    }

    /// Makes sure the writer has an open connection, by `deadline`.
    async fn connection(&mut self, deadline: Instant) -> Result<(), String> {
        if self.client.as_ref().is_some_and(|c| !c.is_closed()) {
            return Ok(());
        }
        self.client = None;
        let object = tokio::time::timeout_at(deadline, self.pool.get())
            .await
            .map_err(|_| "no connection in time".to_owned())?
            .map_err(|e| format!("cannot connect: {e}"))?;
        self.client = Some(deadpool_postgres::Object::take(object));
        Ok(())
    }

    /// One transaction for `batch`, by `deadline`: the outcome of each save, or why the whole
    /// batch failed (nothing of it committed, unless the connection broke during the commit).
    async fn attempt(
        &mut self,
        batch: &[Job<Thread>],
        remembered: &[Option<SavedThread>],
        records: &[Job<Record>],
        deadline: Instant,
    ) -> Result<Vec<Result<i64, BoxError>>, Failure> {
        let client = self.client.as_mut().expect("connected");
        let write = write_batch(client, self.tag, batch, remembered, records);
        match tokio::time::timeout_at(deadline, write).await {
            Ok(Ok(outcomes)) => Ok(outcomes),
            Ok(Err(e)) => {
                let broken = client.is_closed() || !refused(&e);
                // Not reused either way: a refused batch is rare, and a fresh session starts
                // the next attempt with nothing left of the failed transaction.
                self.client = None;
                if broken {
                    Err(Failure::Connection(chain(&e)))
                } else {
                    Err(Failure::Refused(chain(&e)))
                }
            }
            Err(_) => {
                // Closed, never reused: the server rolls the transaction back.
                self.client = None;
                let first = batch
                    .iter()
                    .map(|job| (job.deadline, job.timeout))
                    .chain(records.iter().map(|job| (job.deadline, job.timeout)))
                    .min();
                Err(Failure::Timeout(first.map_or(Duration::ZERO, |(_, t)| t)))
            }
        }
    }
}

/// Whether `e` is the server refusing a statement on a session that goes on (a constraint, a
/// deadlock, a serialization failure): an error of the server below `FATAL`. A `FATAL` or
/// `PANIC` error (a terminated backend, a server shutting down) ends the session, and a
/// client-side error (a closed socket) is no answer at all: the connection is broken, and
/// whether the batch was committed is unknown.
fn refused(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::Severity;
    e.as_db_error().is_some_and(|db| {
        !matches!(
            db.parsed_severity(),
            Some(Severity::Fatal | Severity::Panic)
        )
    })
}

/// Why a whole batch failed.
enum Failure {
    /// The server refused a statement; the connection is fine, nothing was written.
    Refused(String),
    /// The connection broke or could not be made.
    Connection(String),
    /// The batch took longer than the operation timeout of one of its saves (this one).
    Timeout(Duration),
}

impl Failure {
    fn text(&self, target: &str) -> String {
        match self {
            Failure::Refused(e) | Failure::Connection(e) => {
                format!("postgres thread store {target}: {e}")
            }
            Failure::Timeout(timeout) => format!(
                "postgres thread store {target}: the operation took longer than {timeout:?} (the \
                 connection was closed)"
            ),
        }
    }
}

/// The journal records of a batch: one statement for the calls started, one for those
/// finished (`tower_agent_journal`, see `store::journal`), pipelined.
async fn write_records(
    tx: &deadpool_postgres::Transaction<'_>,
    records: &[Job<Record>],
) -> Result<(), tokio_postgres::Error> {
    if records.is_empty() {
        return Ok(());
    }
    let mut started: [Vec<&str>; 4] = Default::default();
    let mut finished: [Vec<&str>; 5] = Default::default();
    for job in records {
        let r = &job.work;
        let fields = [&*r.thread, &*r.call, &*r.tool, &*r.arguments];
        match &r.output {
            None => {
                for (column, value) in started.iter_mut().zip(fields) {
                    column.push(value);
                }
            }
            Some(output) => {
                for (column, value) in finished.iter_mut().zip(fields) {
                    column.push(value);
                }
                finished[4].push(output);
            }
        }
    }
    let (start, finish) = tokio::try_join!(
        tx.prepare_cached(
            "INSERT INTO tower_agent_journal (thread_id, call_id, tool, arguments, output)
             SELECT t, c, n, a, NULL FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                AS r (t, c, n, a)
             ON CONFLICT (thread_id, call_id) DO UPDATE
             SET tool = excluded.tool, arguments = excluded.arguments, output = NULL"
        ),
        tx.prepare_cached(
            "UPDATE tower_agent_journal j SET output = r.o
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
                AS r (t, c, n, a, o)
             WHERE j.thread_id = r.t AND j.call_id = r.c"
        ),
    )?;
    let start_params: Vec<&(dyn ToSql + Sync)> =
        started.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
    let finish_params: Vec<&(dyn ToSql + Sync)> =
        finished.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
    // In the order they ran (see `write_batch`).
    let (started, finished) = tokio::join!(
        tx.execute(&start, &start_params),
        tx.execute(&finish, &finish_params),
    );
    started?;
    finished?;
    Ok(())
}

/// The advisory lock key of thread `id` (second key; the first is [`LOCK_SPACE`]).
pub(super) fn thread_key(id: &str) -> i32 {
    let digest = Sha256::digest(id.as_bytes());
    i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// What one save of a batch writes.
struct Write<'a> {
    /// Delete the thread's message rows from this position on (`None`: a pure append).
    delete_from: Option<i64>,
    /// Insert the messages from this position on.
    insert_from: usize,
    thread: &'a Thread,
    remembered: Option<&'a SavedThread>,
    /// Compare the stored rows with the history first ([`Plan::Compare`]).
    compare: bool,
}

/// Writes `batch` in one transaction: the outcome of each save (its new revision, or why it
/// alone failed), or the error that failed the transaction.
async fn write_batch(
    client: &mut ClientWrapper,
    tag: StoreTag,
    batch: &[Job<Thread>],
    remembered: &[Option<SavedThread>],
    records: &[Job<Record>],
) -> Result<Vec<Result<i64, BoxError>>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    if batch.is_empty() {
        write_records(&tx, records).await?;
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let heads = lock_threads(&tx, batch).await?;
    let stored: HashMap<&str, Head> = heads
        .iter()
        .map(|row| (row.get::<_, &str>(0), (row.get(1), row.get(2))))
        .collect();

    // Each save's plan, or its own failure.
    let mut outcomes: Vec<Result<i64, BoxError>> = Vec::with_capacity(batch.len());
    let mut writes: Vec<Option<Write<'_>>> = Vec::with_capacity(batch.len());
    let mut compare: Vec<&str> = Vec::new();
    for (job, remembered) in batch.iter().zip(remembered) {
        let id = job.work.id.as_str();
        match plan_write(tag, &job.work, remembered.as_ref(), stored.get(id).copied()) {
            Ok(write) => {
                if write.compare {
                    compare.push(id);
                }
                outcomes.push(Ok(0));
                writes.push(Some(write));
            }
            Err(conflict) => {
                outcomes.push(Err(Box::new(conflict)));
                writes.push(None);
            }
        }
    }
    // Compacted, edited or unknown histories: from their first stored row that differs.
    if !compare.is_empty() {
        compare_stored(&tx, batch, &compare, &mut writes, &mut outcomes).await?;
    }

    // The rows: one statement per kind, for every save of the batch.
    let mut rows = Rows::default();
    for (i, write) in writes.iter().enumerate() {
        let Some(w) = write else { continue };
        if let Err(e) = rows.add(i, w) {
            outcomes[i] = Err(Box::new(e));
        }
    }
    // The journal records last: the thread locks are always taken first.
    if rows.written.is_empty() {
        write_records(&tx, records).await?;
        tx.commit().await?;
        return Ok(outcomes);
    }
    let revisions = write_rows(&tx, &rows).await?;
    let revisions: HashMap<&str, i64> = revisions
        .iter()
        .map(|row| (row.get::<_, &str>(0), row.get(1)))
        .collect();
    write_records(&tx, records).await?;
    // After the records: those of the batch came first.
    prune_journals(&tx, batch, &rows).await?;
    tx.commit().await?;
    for &i in &rows.written {
        let id = batch[i].work.id.as_str();
        outcomes[i] = revisions
            .get(id)
            .copied()
            .ok_or_else(|| format!("thread `{id}`: the server returned no revision").into());
    }
    Ok(outcomes)
}

/// Takes the locks of the batch's threads and reads their thread rows (id, revision, message
/// count). Saves and deletes of one thread take turns; the locks in key order, so that two
/// batches (of any replicas) never wait for each other in a cycle.
async fn lock_threads(
    tx: &deadpool_postgres::Transaction<'_>,
    batch: &[Job<Thread>],
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let mut keys: Vec<i32> = batch.iter().map(|job| thread_key(&job.work.id)).collect();
    keys.sort_unstable();
    keys.dedup();
    let ids: Vec<&str> = batch.iter().map(|job| job.work.id.as_str()).collect();
    let (lock, heads) = tokio::try_join!(
        tx.prepare_cached(
            "SELECT pg_advisory_xact_lock($1, k)
             FROM (SELECT unnest($2::int4[]) AS k ORDER BY 1) AS keys"
        ),
        tx.prepare_cached(
            "SELECT id, revision, message_count FROM tower_agent_threads WHERE id = ANY($1)"
        ),
    )?;
    let lock_params: [&(dyn ToSql + Sync); 2] = [&LOCK_SPACE, &keys];
    let head_params: [&(dyn ToSql + Sync); 1] = [&ids];
    // In the order they ran (see the rows' statements below).
    let (locked, heads) = tokio::join!(
        tx.query(&lock, &lock_params),
        tx.query(&heads, &head_params),
    );
    locked?;
    heads
}

/// The write of one save, given what this store remembers of the thread and the thread row
/// `found`; a [`Conflict`] if what it remembers is not what the database holds.
fn plan_write<'a>(
    tag: StoreTag,
    thread: &'a Thread,
    remembered: Option<&'a SavedThread>,
    found: Option<Head>,
) -> Result<Write<'a>, Conflict> {
    // What this store remembers must still be what the database holds.
    let current = match remembered {
        None => None,
        Some(r) if r.revision == ABSENT && found.is_none() => None,
        Some(r) if r.revision != ABSENT && is_current(found, r) => Some(r),
        Some(r) => {
            return Err(Conflict {
                thread: thread.id.clone(),
                expected: (r.revision != ABSENT).then_some(r.revision),
                found: found.map(|(revision, _)| revision),
            });
        }
    };
    // A history this store marked stored at the revision the database holds appends,
    // whatever the cache holds (no cliff past the cache size).
    let marked = found.and_then(|(revision, count)| {
        usize::try_from(count)
            .ok()
            .filter(|&n| thread.messages.stored_len(tag, revision) == Some(n))
    });
    let planned = match (current, marked) {
        (None, Some(keep)) => Plan::Append(keep),
        _ => plan(found, current, &thread.messages),
    };
    let (delete_from, insert_from, compare) = match planned {
        // No thread row: nothing of this id may survive.
        Plan::Fresh => (Some(0), 0, false),
        Plan::Append(keep) => (None, keep, false),
        Plan::Compare => (Some(0), 0, true),
    };
    Ok(Write {
        delete_from,
        insert_from,
        thread,
        remembered: current,
        compare,
    })
}

/// Reads the stored rows of the saves that compare (`compare`, their ids) and sets their
/// writes to delete and insert from the first row that differs; a save whose history cannot
/// be serialized fails alone.
async fn compare_stored<'a>(
    tx: &deadpool_postgres::Transaction<'_>,
    batch: &'a [Job<Thread>],
    compare: &[&str],
    writes: &mut [Option<Write<'a>>],
    outcomes: &mut [Result<i64, BoxError>],
) -> Result<(), tokio_postgres::Error> {
    let select = tx
        .prepare_cached(
            "SELECT thread_id, seq, body FROM tower_agent_messages WHERE thread_id = ANY($1)
             ORDER BY thread_id, seq",
        )
        .await?;
    let rows = tx.query(&select, &[&compare]).await?;
    let mut differences = first_differences(batch, &rows);
    for (i, write) in writes.iter_mut().enumerate() {
        let Some(w) = write.as_mut().filter(|w| w.compare) else {
            continue;
        };
        match differences.remove(w.thread.id.as_str()).unwrap_or(Ok(0)) {
            Ok(same) => {
                w.delete_from = Some(same as i64);
                w.insert_from = same;
            }
            Err(e) => {
                outcomes[i] = Err(Box::new(e));
                *write = None;
            }
        }
    }
    Ok(())
}

/// For each thread of `rows` (its stored `(thread_id, seq, body)` rows, in order), how many
/// leading messages of its save's history are stored as they are.
fn first_differences<'r>(
    batch: &[Job<Thread>],
    rows: &'r [tokio_postgres::Row],
) -> HashMap<&'r str, Result<usize, serde_json::Error>> {
    let mut differences = HashMap::new();
    let by_id: HashMap<&str, usize> = batch
        .iter()
        .enumerate()
        .map(|(i, job)| (job.work.id.as_str(), i))
        .collect();
    let mut start = 0;
    while start < rows.len() {
        let id: &str = rows[start].get(0);
        let end = rows[start..]
            .iter()
            .position(|row| row.get::<_, &str>(0) != id)
            .map_or(rows.len(), |n| start + n);
        let Some(job) = by_id.get(id).map(|&i| &batch[i]) else {
            start = end;
            continue;
        };
        let mut first_difference = FirstDifference::new(&job.work.messages);
        let mut result = Ok(());
        for row in &rows[start..end] {
            match first_difference.row(row.get(1), row.get(2)) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        differences.insert(id, result.map(|()| first_difference.same()));
        start = end;
    }
    differences
}

/// The rows a batch writes, one column per parameter of the statement of their kind.
#[derive(Default)]
struct Rows<'a> {
    /// Message rows deleted: thread, from this position on.
    delete_ids: Vec<&'a str>,
    delete_from: Vec<i64>,
    /// Message rows inserted: thread, position, body.
    insert_ids: Vec<&'a str>,
    insert_seqs: Vec<i64>,
    insert_bodies: Vec<String>,
    /// Threads whose data rows are all deleted.
    data_cleared: Vec<&'a str>,
    /// Data rows deleted: thread, key.
    data_deleted: (Vec<&'a str>, Vec<&'a str>),
    /// Data rows inserted or updated: thread, key, value (JSON text).
    data_upserted: (Vec<&'a str>, Vec<&'a str>, Vec<String>),
    /// Thread rows: id, message count, pending calls.
    thread_ids: Vec<&'a str>,
    counts: Vec<i64>,
    pending: Vec<String>,
    /// The batch positions of the saves written.
    written: Vec<usize>,
}

impl<'a> Rows<'a> {
    /// Adds the rows of save `i`; an error (and nothing added) if it cannot be serialized: a
    /// save that cannot be fails alone, before anything is sent.
    fn add(&mut self, i: usize, w: &Write<'a>) -> Result<(), serde_json::Error> {
        let thread = w.thread;
        let id = thread.id.as_str();
        let bodies = thread
            .messages
            .iter()
            .skip(w.insert_from)
            .map(encode_message)
            .collect::<Result<Vec<String>, _>>()?;
        let pend = encode_calls(thread)?;
        if let Some(from) = w.delete_from {
            self.delete_ids.push(id);
            self.delete_from.push(from);
        }
        for (n, body) in bodies.into_iter().enumerate() {
            self.insert_ids.push(id);
            self.insert_seqs.push((w.insert_from + n) as i64);
            self.insert_bodies.push(body);
        }
        let data = data_changes(w.remembered.map(|c| &c.data), &thread.data);
        if data.delete_all {
            self.data_cleared.push(id);
        }
        for key in data.deleted {
            self.data_deleted.0.push(id);
            self.data_deleted.1.push(key);
        }
        for (key, value) in data.upserts {
            self.data_upserted.0.push(id);
            self.data_upserted.1.push(key);
            self.data_upserted.2.push(value);
        }
        self.thread_ids.push(id);
        self.counts.push(thread.messages.len() as i64);
        self.pending.push(pend);
        self.written.push(i);
        Ok(())
    }
}

/// Writes `rows` (pipelined, one statement per kind); the `(id, revision)` rows of the
/// threads written.
async fn write_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    rows: &Rows<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let statements = tokio::try_join!(
        tx.prepare_cached(
            "DELETE FROM tower_agent_messages m USING unnest($1::text[], $2::int8[]) AS d (id, s)
             WHERE m.thread_id = d.id AND m.seq >= d.s"
        ),
        tx.prepare_cached(
            "INSERT INTO tower_agent_messages (thread_id, seq, body)
             SELECT * FROM unnest($1::text[], $2::int8[], $3::text[])"
        ),
        tx.prepare_cached("DELETE FROM tower_agent_data WHERE thread_id = ANY($1)"),
        tx.prepare_cached(
            "DELETE FROM tower_agent_data f USING unnest($1::text[], $2::text[]) AS d (id, k)
             WHERE f.thread_id = d.id AND f.key = d.k"
        ),
        tx.prepare_cached(
            "INSERT INTO tower_agent_data (thread_id, key, value)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
             ON CONFLICT (thread_id, key) DO UPDATE SET value = excluded.value"
        ),
        // A new revision per thread, from the sequence (never given before in this database).
        tx.prepare_cached(
            "INSERT INTO tower_agent_threads
                (id, revision, message_count, created_at, updated_at, pending)
             SELECT id, nextval('tower_agent_revisions'), n, $4, $4, p
             FROM unnest($1::text[], $2::int8[], $3::text[]) AS u (id, n, p)
             ON CONFLICT (id) DO UPDATE SET
                revision = excluded.revision,
                message_count = excluded.message_count,
                updated_at = excluded.updated_at,
                pending = excluded.pending
             RETURNING id, revision"
        ),
    )?;
    let now = to_millis(SystemTime::now());
    // Pipelined: sent in this order, run in this order.
    let params: [&[&(dyn ToSql + Sync)]; 6] = [
        &[&rows.delete_ids, &rows.delete_from],
        &[&rows.insert_ids, &rows.insert_seqs, &rows.insert_bodies],
        &[&rows.data_cleared],
        &[&rows.data_deleted.0, &rows.data_deleted.1],
        &[
            &rows.data_upserted.0,
            &rows.data_upserted.1,
            &rows.data_upserted.2,
        ],
        &[&rows.thread_ids, &rows.counts, &rows.pending, &now],
    ];
    // All awaited, and the first failure in the order they ran is the error: the ones after
    // it only say "current transaction is aborted" (`try_join!` would give whichever it
    // polled first).
    let (deleted, inserted, cleared, data_gone, data_set, revisions) = tokio::join!(
        tx.execute(&statements.0, params[0]),
        tx.execute(&statements.1, params[1]),
        tx.execute(&statements.2, params[2]),
        tx.execute(&statements.3, params[3]),
        tx.execute(&statements.4, params[4]),
        tx.query(&statements.5, params[5]),
    );
    deleted?;
    inserted?;
    cleared?;
    data_gone?;
    data_set?;
    revisions
}

/// Prunes the journal of each thread `rows` saved: no resume can read an entry of a call that
/// is not one of its last message's any more.
async fn prune_journals(
    tx: &deadpool_postgres::Transaction<'_>,
    batch: &[Job<Thread>],
    rows: &Rows<'_>,
) -> Result<(), tokio_postgres::Error> {
    let live: Vec<String> = rows
        .written
        .iter()
        .map(|&i| {
            let calls = live_calls(batch[i].work.messages.last());
            let ids: Vec<&str> = calls
                .iter()
                .map(|c| c.id.as_str())
                // `jsonb` refuses U+0000, and no journal row holds it (text columns cannot):
                // such an id has nothing to keep.
                .filter(|id| !id.contains('\0'))
                .collect();
            // (A list of strings always serializes.)
            serde_json::to_string(&ids).unwrap_or_default()
        })
        .collect();
    let prune = tx
        .prepare_cached(
            "DELETE FROM tower_agent_journal j USING unnest($1::text[], $2::text[]) AS d (id, live)
             WHERE j.thread_id = d.id AND NOT (d.live::jsonb ? j.call_id)",
        )
        .await?;
    tx.execute(&prune, &[&rows.thread_ids, &live]).await?;
    Ok(())
}
