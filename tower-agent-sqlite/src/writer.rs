//! The writer thread of a [`Sqlite`](super::Sqlite): group commit (every write queued, in one
//! transaction), a failing write rolled back alone, and what a committed write changes in
//! memory (the cache, the marks on the saved histories).

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::atomic::Ordering,
};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::mpsc;

use tower_agent_core::{error::BoxError, store::sql::SavedThread};

use super::{Ctx, Job, MAX_BATCH, Reply, Write, save::save};

/// The writer thread: takes every write queued (up to [`MAX_BATCH`]), runs them in one
/// transaction, commits it, and answers each caller.
pub(super) fn writer(mut conn: Connection, ctx: &Ctx, mut rx: mpsc::Receiver<Job>) {
    let mut jobs = Vec::new();
    while let Some(job) = rx.blocking_recv() {
        jobs.push(job);
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let mut writes = Vec::with_capacity(jobs.len());
        let mut reads = Vec::new();
        for job in jobs.drain(..) {
            match job {
                Job::Write(write, reply) => writes.push((write, reply)),
                Job::Read(read) => reads.push(read),
                #[cfg(test)]
                Job::Exit => return,
            }
        }
        if !writes.is_empty()
            && catch_unwind(AssertUnwindSafe(|| commit(&mut conn, ctx, writes))).is_err()
        {
            // The transaction rolled back as it unwound and the callers got an error (their
            // answers were dropped). What the cache holds may be off: forget it.
            tracing::error!("sqlite thread store: a write panicked; its transaction failed");
            ctx.cache().clear();
        }
        for read in reads {
            let _ = catch_unwind(AssertUnwindSafe(|| read(&mut conn, ctx)));
        }
    }
}

/// Commits `writes` in one transaction and answers each caller.
///
/// The batch is first run as it is: a savepoint per write journals every page the write
/// changes, which costs more than the write itself, and writes almost never fail. If one
/// does, the transaction is rolled back and the batch run again with a savepoint per write,
/// so that the failing write is rolled back alone and its caller gets its error while the
/// others are committed.
fn commit(conn: &mut Connection, ctx: &Ctx, writes: Vec<(Write, Reply)>) {
    ctx.largest_batch.fetch_max(writes.len(), Ordering::Relaxed);
    if writes.len() > 1 {
        match all_or_nothing(conn, ctx, &writes) {
            Ok(revisions) => {
                for ((write, reply), revision) in writes.into_iter().zip(revisions) {
                    committed(ctx, write, revision);
                    let _ = reply.send(Ok(()));
                }
                return;
            }
            Err(Failed::Write) => {} // rolled back: again, one savepoint per write
            Err(Failed::Commit(e)) => return fail_all(ctx, writes, &e),
        }
    }
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return fail_all(ctx, writes, &e.to_string()),
    };
    let mut done = Vec::with_capacity(writes.len());
    // A savepoint only when there are others to keep.
    let alone = writes.len() == 1;
    for (write, reply) in writes {
        let result = if alone {
            apply(&tx, ctx, &write)
        } else {
            tx.savepoint().map_err(BoxError::from).and_then(|sp| {
                let revision = apply(&sp, ctx, &write)?;
                sp.commit()?;
                Ok(revision)
            })
        };
        if alone && let Err(e) = result {
            // Nothing of it may be committed.
            forget(ctx, &write);
            let _ = reply.send(Err(e));
            return;
        }
        done.push((write, result, reply));
    }
    match tx.commit() {
        Ok(()) => {
            for (write, result, reply) in done {
                let answer = match result {
                    Ok(revision) => {
                        committed(ctx, write, revision);
                        Ok(())
                    }
                    Err(e) => {
                        forget(ctx, &write);
                        Err(e)
                    }
                };
                let _ = reply.send(answer);
            }
        }
        Err(e) => {
            let writes = done.into_iter().map(|(w, _, r)| (w, r)).collect();
            fail_all(ctx, writes, &e.to_string());
        }
    }
}

/// Why [`all_or_nothing`] stored nothing.
enum Failed {
    /// A write failed; the transaction was rolled back.
    Write,
    /// The transaction could not begin or commit.
    Commit(String),
}

/// Runs every write of `writes` in one transaction with no savepoint, and commits it only
/// if all of them succeeded; returns each write's revision.
fn all_or_nothing(
    conn: &mut Connection,
    ctx: &Ctx,
    writes: &[(Write, Reply)],
) -> Result<Vec<Option<i64>>, Failed> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| Failed::Commit(e.to_string()))?;
    let mut revisions = Vec::with_capacity(writes.len());
    for (write, _) in writes {
        // On an error the transaction rolls back as it is dropped.
        revisions.push(apply(&tx, ctx, write).map_err(|_| Failed::Write)?);
    }
    tx.commit().map_err(|e| Failed::Commit(e.to_string()))?;
    Ok(revisions)
}

/// Answers every caller of `writes` with the error `e` (the transaction could not begin or
/// commit): nothing of the batch is stored.
fn fail_all(ctx: &Ctx, writes: Vec<(Write, Reply)>, e: &str) {
    for (_, reply) in writes {
        let _ = reply.send(Err(format!(
            "sqlite thread store: the transaction of this write failed: {e}"
        )
        .into()));
    }
    ctx.cache().clear();
}

/// Runs one write in the writer's transaction; a save answers its new revision.
fn apply(conn: &Connection, ctx: &Ctx, write: &Write) -> Result<Option<i64>, BoxError> {
    match write {
        Write::Save(thread) => save(conn, ctx, thread).map(Some),
        Write::Delete(id) => {
            conn.prepare_cached("DELETE FROM messages WHERE thread_id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM data WHERE thread_id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM threads WHERE id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM journal WHERE thread_id = ?1")?
                .execute([id])?;
            Ok(None)
        }
        Write::Exec(exec) => {
            exec(conn)?;
            Ok(None)
        }
    }
}

/// What a committed write changes in memory: the cache, and the mark on the saved history.
fn committed(ctx: &Ctx, write: Write, revision: Option<i64>) {
    match (write, revision) {
        (Write::Save(thread), Some(revision)) => {
            thread.messages.mark_stored(ctx.tag, revision);
            ctx.cache().put(
                thread.id,
                SavedThread::new(revision, thread.messages, thread.data),
            );
        }
        (Write::Delete(id), _) => ctx.cache().remove(&id),
        _ => {}
    }
}

/// A write that failed: what the cache holds of its thread may be off.
fn forget(ctx: &Ctx, write: &Write) {
    if let Write::Save(thread) = write {
        ctx.cache().remove(&thread.id);
    }
}
