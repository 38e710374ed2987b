//! What the SQL stores (`Sqlite`, `Postgres`) share: the per-thread memory of the last save,
//! the append-or-rewrite decision, the first stored row that differs, and which data rows a
//! save writes. Each store runs the SQL; the decisions are made here, once.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use super::{DataChange, JournalEntry, ThreadData};
use crate::{
    error::BoxError,
    event::PendingCall,
    message::{Message, Messages, ToolCall},
};

/// How many threads a store remembers the last saved state of.
pub(super) const DEFAULT_CACHE_THREADS: usize = 1024;

/// What the store last wrote or read for a thread: the shared history and data (O(1) clones
/// of the run's), and the revision the database had then.
#[derive(Clone)]
pub(super) struct Cached {
    pub(super) revision: i64,
    pub(super) messages: Messages,
    pub(super) data: ThreadData,
}

impl Cached {
    pub(super) fn new(revision: i64, messages: Messages, data: ThreadData) -> Self {
        Cached {
            revision,
            messages,
            data,
        }
    }
}

/// A least-recently-used map of [`Cached`] entries, at most `capacity` of them: `get`, `put`
/// and `remove` are O(1) (a hash map threaded by a recency list, [`hashlink::LruCache`]).
pub(super) struct Cache {
    entries: hashlink::LruCache<String, Cached>,
}

impl Cache {
    pub(super) fn new(capacity: usize) -> Self {
        Cache {
            entries: hashlink::LruCache::new(capacity.max(1)),
        }
    }

    /// The entry of `id`, now the most recently used.
    pub(super) fn get(&mut self, id: &str) -> Option<&Cached> {
        self.entries.get(id)
    }

    /// Sets the entry of `id` (the most recently used), evicting the least recently used one
    /// when full.
    pub(super) fn put(&mut self, id: String, cached: Cached) {
        self.entries.insert(id, cached);
    }

    pub(super) fn remove(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// Forgets every entry.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(super) fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many entries it holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The thread row as a save finds it in the database: its revision and message count.
pub(super) type Head = (i64, i64);

/// What the store remembers is still what the database holds (`stored`): the same revision
/// (revisions are never given twice) and message count.
pub(super) fn is_current(stored: Option<Head>, cached: &Cached) -> bool {
    stored.is_some_and(|(revision, count)| {
        cached.revision == revision && cached.messages.len() as i64 == count
    })
}

/// How a save writes the messages of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// No thread row: delete any leftover rows of the id, insert every message.
    Fresh,
    /// The stored messages are the first `n` of the new history: insert the rest.
    Append(usize),
    /// Compacted, edited, or written elsewhere: compare the stored rows with the new history
    /// ([`FirstDifference`]), delete from the first difference on and insert the rest.
    Compare,
}

/// The plan of a save of `new`, given the thread row found (`stored`) and what the store
/// remembers of the thread if that is still current (see [`is_current`]).
pub(super) fn plan(stored: Option<Head>, current: Option<&Cached>, new: &Messages) -> Plan {
    match (current, stored) {
        (None, None) => Plan::Fresh,
        (Some(c), Some(_)) if shares_prefix(new, &c.messages) => Plan::Append(c.messages.len()),
        _ => Plan::Compare,
    }
}

/// Whether `new` starts with the very messages of `old` (the same shared allocations, not
/// just equal ones): true when the history only grew since `old` was cloned from it. One
/// pointer comparison per message, by sequential iteration (cheaper than indexed access).
pub(super) fn shares_prefix(new: &Messages, old: &Messages) -> bool {
    old.len() <= new.len() && new.iter().zip(old.iter()).all(|(a, b)| std::ptr::eq(a, b))
}

/// Walks the stored `(seq, body)` rows of a thread in order, to find the first one that is
/// not the new history's message at that position (serialized the same way).
pub(super) struct FirstDifference<'a> {
    new: &'a Messages,
    same: usize,
    done: bool,
}

impl<'a> FirstDifference<'a> {
    pub(super) fn new(new: &'a Messages) -> Self {
        FirstDifference {
            new,
            same: 0,
            done: false,
        }
    }

    /// Feeds the next stored row; `false` once the difference is found (stop reading).
    pub(super) fn row(&mut self, seq: i64, body: &str) -> Result<bool, serde_json::Error> {
        if self.done {
            return Ok(false);
        }
        match self.new.get(self.same) {
            Some(m) if seq == self.same as i64 && serialize(m)? == body => {
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
    pub(super) fn same(&self) -> usize {
        self.same
    }
}

/// A message as it is stored (JSON text).
pub(super) fn serialize(message: &Message) -> Result<String, serde_json::Error> {
    serde_json::to_string(message)
}

/// Which data rows (key → JSON text) a save writes.
#[derive(Debug, Default, PartialEq)]
pub(super) struct DataChanges<'a> {
    /// Delete every data row of the thread first (nothing known about what is stored).
    pub(super) delete_all: bool,
    /// Keys to delete (no longer in the thread).
    pub(super) deleted: Vec<&'a str>,
    /// Keys to insert or update, with their value (JSON text).
    pub(super) upserts: Vec<(&'a str, String)>,
}

/// The data rows to write for `new`, given the data stored by the last save if that is
/// still current (`None`: rewrite them all). Nothing at all for the data the last save
/// stored (the same shared map: one comparison); else one comparison per key, a value
/// compared by pointer first (values the run did not set are shared with the saved ones).
/// Only the values written are serialized.
pub(super) fn data_changes<'a>(
    current: Option<&'a ThreadData>,
    new: &'a ThreadData,
) -> DataChanges<'a> {
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
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(super) fn data_changes_from_rows<'a>(
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

/// A data value of thread `id` as it is stored (JSON text), read back.
pub(super) fn parse_value(id: &str, key: &str, text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("thread `{id}`: bad data `{key}`: {e}"))
}

pub(super) fn to_millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(super) fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// A journal entry from its stored columns: arguments and output as JSON text.
pub(super) fn decode_journal_entry(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_least_recently_used() {
        let mut cache = Cache::new(2);
        let entry = || Cached::new(1, Messages::new(), ThreadData::new());
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
        let mut cache = Cache::new(n);
        let entry = |r| Cached::new(r, Messages::new(), ThreadData::new());
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
        let cached = Cached::new(3, old.clone(), ThreadData::new());
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

/// One entry of the SQL stores' `pending` column: a pending call, or (marked `approved`) an
/// approved call whose output is not saved yet ([`Thread::approved`](super::Thread::approved)).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredCall<C> {
    #[serde(flatten)]
    call: C,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    approved: bool,
}

/// The `pending` column of `thread`: its pending calls, then its approved ones marked (a
/// thread with neither is `[]`, as the column's default).
pub(super) fn encode_calls(thread: &super::Thread) -> serde_json::Result<String> {
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

/// The pending and approved calls of thread `id` from its `pending` column.
pub(super) fn decode_calls(
    id: &str,
    text: &str,
) -> Result<(Vec<PendingCall>, Vec<PendingCall>), String> {
    let calls: Vec<StoredCall<PendingCall>> = serde_json::from_str(text)
        .map_err(|e| format!("thread `{id}`: bad pending calls JSON: {e}"))?;
    let (approved, pending): (Vec<_>, Vec<_>) = calls.into_iter().partition(|c| c.approved);
    Ok((
        pending.into_iter().map(|c| c.call).collect(),
        approved.into_iter().map(|c| c.call).collect(),
    ))
}
