//! Building blocks of a thread store on a SQL database: the decisions the SQL stores of
//! tower-agent (`Sqlite`, `Postgres`) share, for a store of yours on another database. Your
//! store runs the SQL; what to write is decided here.
//!
//! The layout they are made for: a thread row (id, a revision, the message count, the
//! [pending calls](encode_calls)), one row per message (thread id, position, the message as
//! JSON text, [`encode_message`]), one row per key of the thread's [data](super::data) (JSON
//! text) and one row per [journal](super::journal) entry ([`decode_journal_entry`]).
//!
//! A save writes only what changed:
//!
//! - **messages**: the store remembers what it last saved or loaded of each thread
//!   ([`SavedThread`], at most [`SavedThreads::DEFAULT_CAPACITY`] threads in a
//!   [`SavedThreads`]), and [`plan`] tells from the thread row found whether the new history
//!   only grew since (append the new messages), the thread is new, or the stored rows must be
//!   compared ([`FirstDifference`]) and rewritten from the first one that differs. A history
//!   the store marked stored ([`Messages::mark_stored`], [`Messages::stored_len`]) appends
//!   even when the store no longer remembers the thread;
//! - **data**: [`data_changes`] (or [`data_changes_from_rows`] when the store remembers
//!   nothing) lists the keys to delete and the values to write.
//!
//! # Example
//!
//! The decisions of two saves of one thread (the SQL left out):
//!
//! ```
//! use tower_agent_core::message::{Message, Messages};
//! use tower_agent_core::store::{
//!     ThreadData,
//!     sql::{Plan, SavedThread, SavedThreads, data_changes, is_current, plan},
//! };
//!
//! let mut saved = SavedThreads::new(SavedThreads::DEFAULT_CAPACITY);
//! let mut messages: Messages = [Message::user("hi")].into_iter().collect();
//! let data = ThreadData::new();
//!
//! // The first save: no thread row found, nothing remembered.
//! assert_eq!(plan(None, None, &messages), Plan::Fresh);
//! // ... insert the rows; the database gave the thread revision 1.
//! saved.put("t1".into(), SavedThread::new(1, messages.clone(), data.clone()));
//!
//! // The next save: the row found (revision 1, one message) is what the store remembers,
//! // and the history only grew: append from position 1.
//! messages.push(Message::assistant("hello"));
//! let found = Some((1, 1));
//! let current = saved.get("t1").filter(|s| is_current(found, s));
//! assert_eq!(plan(found, current, &messages), Plan::Append(1));
//! // No data changed: no data row to write.
//! let changes = data_changes(current.map(|s| &s.data), &data);
//! assert!(!changes.delete_all && changes.deleted.is_empty() && changes.upserts.is_empty());
//! ```

use std::{
    collections::BTreeMap,
    fmt,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use super::{DataChange, JournalEntry, Thread, ThreadData};
use crate::{
    error::BoxError,
    event::PendingCall,
    message::{Message, Messages, ToolCall},
};

/// What a store last wrote or read of a thread: the history and data (O(1) clones of the
/// run's, shared with them) and the revision the database gave the thread then.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SavedThread {
    /// The revision of the thread row then (a store gives a revision once, never twice).
    pub revision: i64,
    /// The history then.
    pub messages: Messages,
    /// The data then.
    pub data: ThreadData,
}

impl SavedThread {
    /// The thread saved (or loaded) at `revision` with `messages` and `data`.
    pub fn new(revision: i64, messages: Messages, data: ThreadData) -> Self {
        SavedThread {
            revision,
            messages,
            data,
        }
    }
}

/// What a store remembers of the threads it saved or loaded: a least-recently-used map of
/// [`SavedThread`]s by thread id, at most `capacity` of them. `get`, `put` and `remove` are
/// O(1) (a hash map threaded by a recency list).
pub struct SavedThreads {
    entries: hashlink::LruCache<String, SavedThread>,
}

impl SavedThreads {
    /// How many threads the SQL stores remember.
    pub const DEFAULT_CAPACITY: usize = 1024;

    /// An empty map of at most `capacity` threads (at least one).
    pub fn new(capacity: usize) -> Self {
        SavedThreads {
            entries: hashlink::LruCache::new(capacity.max(1)),
        }
    }

    /// The entry of thread `id`, now the most recently used.
    pub fn get(&mut self, id: &str) -> Option<&SavedThread> {
        self.entries.get(id)
    }

    /// Sets the entry of thread `id` (the most recently used), evicting the least recently
    /// used one when full.
    pub fn put(&mut self, id: String, saved: SavedThread) {
        self.entries.insert(id, saved);
    }

    /// Forgets thread `id`.
    pub fn remove(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// Forgets every thread.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many threads it remembers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it remembers no thread.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl fmt::Debug for SavedThreads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SavedThreads")
            .field("len", &self.entries.len())
            .field("capacity", &self.entries.capacity())
            .finish()
    }
}

/// The thread row as a save finds it in the database: its revision and message count.
pub type Head = (i64, i64);

/// Whether what the store remembers (`saved`) is still what the database holds (`stored`,
/// the thread row found): the same revision (revisions are never given twice) and message
/// count.
pub fn is_current(stored: Option<Head>, saved: &SavedThread) -> bool {
    stored.is_some_and(|(revision, count)| {
        saved.revision == revision && saved.messages.len() as i64 == count
    })
}

/// How a save writes the messages of a thread, from [`plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No thread row: delete any leftover message rows of the id, insert every message.
    Fresh,
    /// The stored messages are the first `n` of the new history: insert the rest.
    Append(usize),
    /// Compacted, edited, or written elsewhere: compare the stored rows with the new history
    /// ([`FirstDifference`]), delete from the first difference on and insert the rest.
    Compare,
}

/// The plan of a save of `new`, given the thread row found (`stored`) and what the store
/// remembers of the thread if that is still current (see [`is_current`]; `None` when it
/// remembers nothing or something else).
///
/// (A history marked stored at the revision found, [`Messages::stored_len`], may append
/// whatever this says: the SQL stores ask that first.)
pub fn plan(stored: Option<Head>, current: Option<&SavedThread>, new: &Messages) -> Plan {
    match (current, stored) {
        (None, None) => Plan::Fresh,
        (Some(c), Some(_)) if shares_prefix(new, &c.messages) => Plan::Append(c.messages.len()),
        _ => Plan::Compare,
    }
}

/// Whether `new` starts with the very messages of `old` (the same shared allocations, not
/// just equal ones): true when the history only grew since `old` was cloned from it. One
/// pointer comparison per message, by sequential iteration (cheaper than indexed access).
fn shares_prefix(new: &Messages, old: &Messages) -> bool {
    old.len() <= new.len() && new.iter().zip(old.iter()).all(|(a, b)| std::ptr::eq(a, b))
}

/// Walks the stored `(position, body)` rows of a thread in order, to find the first one that
/// is not the new history's message at that position (as [`encode_message`] writes it): the
/// rows from there on are rewritten ([`Plan::Compare`]).
///
/// ```
/// use tower_agent_core::message::{Message, Messages};
/// use tower_agent_core::store::sql::{FirstDifference, encode_message};
///
/// let new: Messages = [Message::user("a"), Message::user("b!")].into_iter().collect();
/// let stored = [(0, encode_message(&Message::user("a"))?), (1, encode_message(&Message::user("b"))?)];
/// let mut first_difference = FirstDifference::new(&new);
/// for (seq, body) in &stored {
///     if !first_difference.row(*seq, body)? {
///         break;
///     }
/// }
/// // Keep row 0; delete from row 1 on, insert the messages from position 1.
/// assert_eq!(first_difference.same(), 1);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug)]
pub struct FirstDifference<'a> {
    new: &'a Messages,
    same: usize,
    done: bool,
}

impl<'a> FirstDifference<'a> {
    /// The walk of the rows stored for the history `new`.
    pub fn new(new: &'a Messages) -> Self {
        FirstDifference {
            new,
            same: 0,
            done: false,
        }
    }

    /// Feeds the next stored row (its position and body); `false` once the difference is
    /// found (stop reading).
    ///
    /// # Errors
    ///
    /// A message of the new history that cannot be serialized.
    pub fn row(&mut self, seq: i64, body: &str) -> Result<bool, serde_json::Error> {
        if self.done {
            return Ok(false);
        }
        match self.new.get(self.same) {
            Some(m) if seq == self.same as i64 && encode_message(m)? == body => {
                self.same += 1;
                Ok(true)
            }
            _ => {
                self.done = true;
                Ok(false)
            }
        }
    }

    /// How many leading messages are stored as they are: rows from there on are rewritten.
    pub fn same(&self) -> usize {
        self.same
    }
}

/// A message as it is stored: its JSON text.
///
/// # Errors
///
/// A message that cannot be serialized.
pub fn encode_message(message: &Message) -> Result<String, serde_json::Error> {
    serde_json::to_string(message)
}

/// Which data rows (key → JSON text) a save writes, from [`data_changes`] or
/// [`data_changes_from_rows`].
#[derive(Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct DataChanges<'a> {
    /// Delete every data row of the thread first (nothing known about what is stored).
    pub delete_all: bool,
    /// Keys to delete (no longer in the thread).
    pub deleted: Vec<&'a str>,
    /// Keys to insert or update, with their value (JSON text).
    pub upserts: Vec<(&'a str, String)>,
}

/// The data rows to write for `new`, given the data stored by the last save if that is
/// still current (`None`: rewrite them all). Nothing at all for the data the last save
/// stored (the same shared map: one comparison); else one comparison per key, a value
/// compared by pointer first (values the run did not set are shared with the saved ones),
/// see [`ThreadData::changes_since`]. Only the values written are serialized.
pub fn data_changes<'a>(current: Option<&'a ThreadData>, new: &'a ThreadData) -> DataChanges<'a> {
    let Some(old) = current else {
        return DataChanges {
            delete_all: true,
            deleted: Vec::new(),
            upserts: new.iter().map(|(k, v)| (k, v.to_string())).collect(),
        };
    };
    let mut changes = DataChanges::default();
    for change in new.changes_since(old) {
        match change {
            DataChange::Removed(key) => changes.deleted.push(key),
            DataChange::Set(key, value) => changes.upserts.push((key, value.to_string())),
        }
    }
    changes
}

/// The data rows to write for `new`, given the rows stored (`stored`: key → JSON text) when
/// the store remembers nothing of them: a value is written when its JSON text differs.
pub fn data_changes_from_rows<'a>(
    stored: &'a BTreeMap<String, String>,
    new: &'a ThreadData,
) -> DataChanges<'a> {
    DataChanges {
        delete_all: false,
        deleted: stored
            .keys()
            .filter(|k| new.value(k).is_none())
            .map(String::as_str)
            .collect(),
        upserts: new
            .iter()
            .filter_map(|(key, value)| {
                let text = value.to_string();
                (stored.get(key) != Some(&text)).then_some((key, text))
            })
            .collect(),
    }
}

/// The data value `key` of thread `id` read back from its JSON text.
///
/// # Errors
///
/// Text that is not JSON, named by thread and key.
pub fn decode_value(id: &str, key: &str, text: &str) -> Result<serde_json::Value, BoxError> {
    serde_json::from_str(text).map_err(|e| format!("thread `{id}`: bad data `{key}`: {e}").into())
}

/// A time as the SQL stores keep it: milliseconds since the Unix epoch (0 before it, the
/// largest `i64` past it).
pub fn to_millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A time kept by [`to_millis`] read back (the epoch for a negative number).
pub fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// A journal entry from its stored columns: the call id, the tool, the arguments and the
/// output (`None` until the call finished) as JSON text.
///
/// # Errors
///
/// Arguments or an output that are not JSON (an output not of a
/// [`ToolOutput`](crate::message::ToolOutput)), named by call.
pub fn decode_journal_entry(
    call_id: String,
    tool: String,
    arguments: &str,
    output: Option<String>,
) -> Result<JournalEntry, BoxError> {
    let arguments = serde_json::from_str(arguments)
        .map_err(|e| format!("journal entry of call `{call_id}`: bad arguments: {e}"))?;
    let output = match output {
        Some(text) => Some(
            serde_json::from_str(&text)
                .map_err(|e| format!("journal entry of call `{call_id}`: bad output: {e}"))?,
        ),
        None => None,
    };
    let call = ToolCall {
        id: call_id,
        name: tool,
        arguments,
    };
    Ok(JournalEntry::new(&call, output))
}

/// One entry of the SQL stores' `pending` column: a pending call, or (marked `approved`) an
/// approved call whose output is not saved yet ([`Thread::approved`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredCall<C> {
    #[serde(flatten)]
    call: C,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    approved: bool,
}

/// The column of the calls of `thread` that wait ([`Thread::pending`], [`Thread::approved`])
/// as JSON text: one array, its pending calls, then its approved ones marked
/// `"approved": true` (a thread with neither is `[]`, the column's default).
///
/// # Errors
///
/// A call that cannot be serialized.
pub fn encode_calls(thread: &Thread) -> serde_json::Result<String> {
    let pending = thread.pending.iter().map(|call| StoredCall {
        call,
        approved: false,
    });
    let approved = thread.approved.iter().map(|call| StoredCall {
        call,
        approved: true,
    });
    serde_json::to_string(&pending.chain(approved).collect::<Vec<_>>())
}

/// The pending and approved calls of thread `id` from the column [`encode_calls`] wrote.
///
/// # Errors
///
/// Text that is not such an array, named by thread.
pub fn decode_calls(
    id: &str,
    text: &str,
) -> Result<(Vec<PendingCall>, Vec<PendingCall>), BoxError> {
    let calls: Vec<StoredCall<PendingCall>> = serde_json::from_str(text)
        .map_err(|e| format!("thread `{id}`: bad pending calls JSON: {e}"))?;
    let (approved, pending): (Vec<_>, Vec<_>) = calls.into_iter().partition(|c| c.approved);
    Ok((
        pending.into_iter().map(|c| c.call).collect(),
        approved.into_iter().map(|c| c.call).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_least_recently_used() {
        let mut cache = SavedThreads::new(2);
        let entry = || SavedThread::new(1, Messages::new(), ThreadData::new());
        cache.put("a".into(), entry());
        cache.put("b".into(), entry());
        assert!(cache.get("a").is_some());
        cache.put("c".into(), entry());
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        cache.remove("a");
        assert!(cache.get("a").is_none());
    }

    /// A full cache of 100,000 entries takes 100,000 more puts (each evicting one) quickly:
    /// the old `put` scanned every entry per eviction (10^10 steps here, minutes); this is a
    /// count of work, not a timing: it finishes at all only if eviction is O(1)-ish.
    #[test]
    fn cache_stays_bounded_and_evicts_in_order() {
        let n = 100_000;
        let mut cache = SavedThreads::new(n);
        let entry = |r| SavedThread::new(r, Messages::new(), ThreadData::new());
        for i in 0..2 * n {
            cache.put(i.to_string(), entry(i as i64));
            if i % 2 == 0 && i >= n {
                // Touch a recent one: it must survive the evictions that follow.
                assert!(cache.get(&(i - 1).to_string()).is_some());
            }
        }
        assert_eq!(cache.len(), n);
        // The oldest untouched ones went first; the touched one (n - 1) stayed.
        assert!(cache.get("0").is_none() && cache.get(&n.to_string()).is_none());
        assert!(cache.get(&(n - 1).to_string()).is_some());
        assert_eq!(
            cache.get(&(2 * n - 1).to_string()).unwrap().revision,
            2 * n as i64 - 1
        );
    }

    #[test]
    fn plans() {
        let old: Messages = [Message::user("a")].into_iter().collect();
        let cached = SavedThread::new(3, old.clone(), ThreadData::new());
        let mut grown = old.clone();
        grown.push(Message::user("b"));
        assert_eq!(plan(None, None, &grown), Plan::Fresh);
        assert_eq!(plan(Some((3, 1)), Some(&cached), &grown), Plan::Append(1));
        let copy: Messages = grown.iter().cloned().collect();
        assert_eq!(plan(Some((3, 1)), Some(&cached), &copy), Plan::Compare);
        assert_eq!(plan(Some((3, 1)), None, &grown), Plan::Compare);
        assert!(is_current(Some((3, 1)), &cached));
        assert!(!is_current(Some((4, 1)), &cached) && !is_current(None, &cached));
    }

    #[test]
    fn data_changes_write_only_what_changed() {
        use serde_json::json;
        let mut data: ThreadData = (0..50)
            .map(|i| (format!("f/{i}"), json!(format!("content {i}"))))
            .collect();
        data.set_value("todos", json!([]));
        let saved = data.clone();
        // Nothing changed: nothing written, nothing compared.
        assert_eq!(data_changes(Some(&saved), &data), DataChanges::default());
        // One file of fifty edited, one removed, one added.
        data.set_value("f/7", json!("edited"));
        data.remove_value("f/8");
        data.set_value("f/new", json!("new"));
        let changes = data_changes(Some(&saved), &data);
        assert!(!changes.delete_all);
        assert_eq!(changes.deleted, ["f/8"]);
        assert_eq!(
            changes.upserts,
            [
                ("f/7", "\"edited\"".to_owned()),
                ("f/new", "\"new\"".to_owned())
            ]
        );
        // Unknown: all of them.
        let all = data_changes(None, &data);
        assert!(all.delete_all && all.upserts.len() == 51);
        // Against stored rows: by JSON text.
        let stored: BTreeMap<String, String> = saved
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_string()))
            .collect();
        let from_rows = data_changes_from_rows(&stored, &data);
        assert_eq!(
            (from_rows.deleted, from_rows.upserts),
            (changes.deleted, changes.upserts)
        );
    }
}
