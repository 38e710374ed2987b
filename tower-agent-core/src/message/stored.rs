//! What a thread store last stored of a history, shared by the history's clones: the mark
//! behind [`Messages::mark_stored`] and [`Messages::stored_len`].
//!
//! A [`Mark`] says: the store tagged `tag` stored `len` messages at `revision`, the last of
//! them the very `last` message (the same `Arc`). A history sharing the slot may trust it when
//! its own message at `len - 1` is that very message: every edit other than an append
//! (`insert` before the end, `remove`, `truncate`, `splice`, `get_mut`, `iter_mut`) drops
//! the history's slot, so the histories that share a slot only ever appended since they
//! were cloned from one another, and two of them that hold the same message at `len - 1`
//! hold the same first `len` messages. The store sets the mark only once a save is
//! committed, and checks it against the revision the database holds (revisions are never
//! given twice), so a save of a history loaded or saved by the store appends without
//! reading or comparing the stored rows, whatever the store's cache holds.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use super::Message;
#[cfg(doc)]
use super::Messages;

/// Names a thread store (or the database behind it) in the marks it leaves on the histories
/// it stores ([`Messages::mark_stored`], [`Messages::stored_len`]), so that a mark of one
/// store is never taken for another's.
///
/// Make one with [`StoreTag::unique`] when the store is made, and keep it for the store's
/// life. Stores may share a tag only if they share the revisions too (one counter): the SQL
/// stores give every store on one database file the same tag, so a history loaded by one and
/// saved by another still appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreTag(u64);

impl StoreTag {
    /// A tag no other call of this process got (tags are not kept across processes, nor are
    /// the marks: a history read back from a database carries none until a store marks it).
    ///
    /// ```
    /// use tower_agent_core::message::StoreTag;
    ///
    /// assert_ne!(StoreTag::unique(), StoreTag::unique());
    /// ```
    #[must_use]
    pub fn unique() -> Self {
        /// The last tag given.
        static LAST: AtomicU64 = AtomicU64::new(0);
        StoreTag(LAST.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

pub(crate) struct Mark {
    pub(crate) tag: StoreTag,
    pub(crate) revision: i64,
    pub(crate) len: usize,
    pub(crate) last: Option<Arc<Message>>,
}

#[derive(Default)]
pub(crate) struct Slot(pub(crate) Mutex<Option<Mark>>);
