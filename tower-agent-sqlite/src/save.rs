//! Loading and saving a thread in a [`Sqlite`](super::Sqlite) database: a load is one read
//! transaction; a save (in the writer's transaction) appends or rewrites the messages, writes
//! the data keys that changed, the thread row with a new revision, and prunes the journal.

use std::{collections::BTreeMap, sync::atomic::Ordering, time::SystemTime};

use rusqlite::{Connection, OptionalExtension, params};
use tower_agent_core::{
    error::BoxError,
    message::{Message, Messages},
    store::{
        Thread, ThreadData,
        journal::live_calls,
        sql::{
            FirstDifference, Plan, SavedThread, data_changes, data_changes_from_rows, decode_calls,
            decode_value, encode_calls, encode_message, is_current, plan, to_millis,
        },
    },
};

use super::Ctx;

/// The thread `id`, read in one transaction (one snapshot).
pub(super) fn load(
    conn: &mut Connection,
    ctx: &Ctx,
    id: String,
) -> Result<Option<Thread>, BoxError> {
    let tx = conn.transaction()?;
    let head = tx
        .prepare_cached("SELECT revision, pending FROM threads WHERE id = ?1")?
        .query_row([&id], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })
        .optional()?;
    let Some((revision, pending_json)) = head else {
        return Ok(None);
    };
    let (pending, approved) = decode_calls(&id, &pending_json)?;

    let mut messages = Messages::new();
    {
        let mut stmt =
            tx.prepare_cached("SELECT seq, body FROM messages WHERE thread_id = ?1 ORDER BY seq")?;
        let mut rows = stmt.query([&id])?;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let body = row.get_ref(1)?.as_str()?;
            let message: Message = serde_json::from_str(body)
                .map_err(|e| format!("thread `{id}`: bad message {seq}: {e}"))?;
            messages.push(message);
        }
    }
    let data = stored_data(&tx, &id)?
        .into_iter()
        .map(|(key, text)| {
            let value = decode_value(&id, &key, &text)?;
            Ok((key, value))
        })
        .collect::<Result<ThreadData, BoxError>>()?;
    tx.commit()?;

    // The history is what the database holds at `revision`: a save of it (grown) appends.
    messages.mark_stored(ctx.tag, revision);
    let mut cache = ctx.cache();
    // Not over a newer save the writer committed meanwhile.
    if cache.get(&id).is_none_or(|c| c.revision <= revision) {
        cache.put(
            id.clone(),
            SavedThread::new(revision, messages.clone(), data.clone()),
        );
    }
    drop(cache);
    Ok(Some(Thread {
        id,
        messages,
        data,
        pending,
        approved,
    }))
}

/// The data rows of thread `id`: key → JSON text.
fn stored_data(conn: &Connection, id: &str) -> rusqlite::Result<BTreeMap<String, String>> {
    let mut data = BTreeMap::new();
    let mut stmt = conn.prepare_cached("SELECT key, value FROM data WHERE thread_id = ?1")?;
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        data.insert(row.get(0)?, row.get(1)?);
    }
    Ok(data)
}

/// Writes `thread` (inside the writer's transaction); returns its new revision.
pub(super) fn save(conn: &Connection, ctx: &Ctx, thread: &Thread) -> Result<i64, BoxError> {
    let id = thread.id.as_str();
    let new = &thread.messages;
    let stored: Option<(i64, i64)> = conn
        .prepare_cached("SELECT revision, message_count FROM threads WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    // What this store last wrote or read, if it is still what the database holds.
    let cached = ctx
        .cache()
        .get(id)
        .filter(|c| is_current(stored, c))
        .cloned();
    // The history says its first messages are the ones stored at this very revision (it was
    // loaded or saved here and only grew since): append, whatever the cache holds.
    let marked = stored.and_then(|(revision, count)| {
        usize::try_from(count)
            .ok()
            .filter(|&n| new.stored_len(ctx.tag, revision) == Some(n))
    });

    // 1. Messages: append, or rewrite from the first difference.
    let how = marked.map_or_else(|| plan(stored, cached.as_ref(), new), Plan::Append);
    let keep = keep_messages(conn, ctx, id, new, how)?;
    insert_messages(conn, id, new, keep)?;
    // 2. Data: only the keys that changed.
    save_data(conn, id, cached.as_ref(), stored.is_some(), &thread.data)?;
    // 3. The thread row.
    let revision = save_thread_row(conn, thread)?;
    // 4. The journal.
    prune_journal(conn, id, new)?;
    Ok(revision)
}

/// Deletes the message rows of thread `id` that `how` does not keep; returns how many
/// leading messages of `new` stay stored as they are.
fn keep_messages(
    conn: &Connection,
    ctx: &Ctx,
    id: &str,
    new: &Messages,
    how: Plan,
) -> Result<usize, BoxError> {
    match how {
        Plan::Fresh => {
            // No thread row: nothing of this id may survive (rows of a half-deleted thread
            // would make the inserts below fail).
            conn.prepare_cached("DELETE FROM messages WHERE thread_id = ?1")?
                .execute([id])?;
            Ok(0)
        }
        Plan::Append(keep) => Ok(keep),
        Plan::Compare => {
            let mut first_difference = FirstDifference::new(new);
            {
                let mut stmt = conn.prepare_cached(
                    "SELECT seq, body FROM messages WHERE thread_id = ?1 ORDER BY seq",
                )?;
                let mut rows = stmt.query([id])?;
                while let Some(row) = rows.next()? {
                    ctx.compared_rows.fetch_add(1, Ordering::Relaxed);
                    if !first_difference.row(row.get(0)?, row.get_ref(1)?.as_str()?)? {
                        break;
                    }
                }
            }
            let same = first_difference.same();
            conn.prepare_cached("DELETE FROM messages WHERE thread_id = ?1 AND seq >= ?2")?
                .execute(params![id, same as i64])?;
            Ok(same)
        }
    }
}

/// Inserts the messages of `new` from position `keep` on.
fn insert_messages(
    conn: &Connection,
    id: &str,
    new: &Messages,
    keep: usize,
) -> Result<(), BoxError> {
    let mut insert =
        conn.prepare_cached("INSERT INTO messages (thread_id, seq, body) VALUES (?1, ?2, ?3)")?;
    for (seq, message) in new.iter().enumerate().skip(keep) {
        insert.execute(params![id, seq as i64, encode_message(message)?])?;
    }
    Ok(())
}

/// Writes the data rows of thread `id` that changed: compared with the cache's data, or with
/// the stored rows when the cache does not know them and a thread row exists (`stored`).
fn save_data(
    conn: &Connection,
    id: &str,
    cached: Option<&SavedThread>,
    stored: bool,
    new: &ThreadData,
) -> Result<(), BoxError> {
    let read;
    let changes = match cached {
        Some(c) => data_changes(Some(&c.data), new),
        None if stored => {
            read = stored_data(conn, id)?;
            data_changes_from_rows(&read, new)
        }
        // No thread row: nothing of this id may survive.
        None => data_changes(None, new),
    };
    if changes.delete_all {
        conn.prepare_cached("DELETE FROM data WHERE thread_id = ?1")?
            .execute([id])?;
    }
    for key in changes.deleted {
        conn.prepare_cached("DELETE FROM data WHERE thread_id = ?1 AND key = ?2")?
            .execute(params![id, key])?;
    }
    for (key, value) in changes.upserts {
        conn.prepare_cached(
            "INSERT INTO data (thread_id, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (thread_id, key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![id, key, value])?;
    }
    Ok(())
}

/// Writes the thread row: count, pending calls and a new revision (never given before
/// in this database), which it returns.
fn save_thread_row(conn: &Connection, thread: &Thread) -> Result<i64, BoxError> {
    let now = to_millis(SystemTime::now());
    let revision: i64 = conn
        .prepare_cached("UPDATE revisions SET last = last + 1 WHERE id = 0 RETURNING last")?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(
        "INSERT INTO threads (id, revision, message_count, created_at, updated_at, pending)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET
            revision = excluded.revision,
            message_count = excluded.message_count,
            updated_at = excluded.updated_at,
            pending = excluded.pending",
    )?
    .execute(params![
        thread.id.as_str(),
        revision,
        thread.messages.len() as i64,
        now,
        encode_calls(thread)?
    ])?;
    Ok(revision)
}

/// Deletes the journal entries of thread `id` no resume can read any more: those of a call
/// that is not one of the last message's.
fn prune_journal(conn: &Connection, id: &str, new: &Messages) -> Result<(), BoxError> {
    match live_calls(new.last()) {
        [] => conn
            .prepare_cached("DELETE FROM journal WHERE thread_id = ?1")?
            .execute([id])?,
        calls => {
            let live = serde_json::to_string(&calls.iter().map(|c| &c.id).collect::<Vec<_>>())?;
            conn.prepare_cached(
                "DELETE FROM journal WHERE thread_id = ?1
                 AND call_id NOT IN (SELECT value FROM json_each(?2))",
            )?
            .execute(params![id, live])?
        }
    };
    Ok(())
}
