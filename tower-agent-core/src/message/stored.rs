//! What a thread store last stored of a history, shared by the history's clones.
//!
//! A [`Mark`] says: store `store` stored `len` messages at `revision`, the last of them
//! the very `last` message (the same `Arc`). A history sharing the slot may trust it when
//! its own message at `len - 1` is that very message: every edit other than an append
//! (`insert` before the end, `remove`, `truncate`, `splice`, `get_mut`, `iter_mut`) drops
//! the history's slot, so the histories that share a slot only ever appended since they
//! were cloned from one another, and two of them that hold the same message at `len - 1`
//! hold the same first `len` messages. The store sets the mark only once a save is
//! committed, and checks it against the revision the database holds (revisions are never
//! given twice), so a save of a history loaded or saved by the store appends without
//! reading or comparing the stored rows, whatever the store's cache holds.

use std::sync::{Arc, Mutex};

use super::Message;

#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) struct Mark {
    pub(crate) store: u64,
    pub(crate) revision: i64,
    pub(crate) len: usize,
    pub(crate) last: Option<Arc<Message>>,
}

#[derive(Default)]
pub(crate) struct Slot(pub(crate) Mutex<Option<Mark>>);
