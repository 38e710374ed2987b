//! [`Messages`], the conversation history: a persistent vector of messages that keeps a
//! running token count and a thread store's mark.

use std::{fmt, ops::Index, sync::Arc};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Message, StoreTag, memo, stored, tokens};

/// The conversation history: a persistent vector of [`Message`]s.
///
/// Cloning is O(1) and editing a clone copies only the touched path (copy-on-write), so the
/// agent loop hands the same history to every step's [`ModelRequest`](crate::model::ModelRequest)
/// without deep-copying it, and a layer that edits one message (say the system prompt) pays
/// for that message, not for the whole history.
///
/// # Token accounting
///
/// A history also keeps a running token count for
/// [`SummarizeLayer`][facade-summarize-layer], shared by its clones: each
/// message is counted once, not at every model call (see
/// [the summarize docs][facade-token-accounting]). Appending keeps the
/// count, and so does inserting a message in front (a system message that a stage adds to a
/// request of a history without one): at most 2 such messages, each then counted at every
/// call. Editing or removing a message that was counted drops it, and the
/// next count is a full one.
///
/// # Saving incrementally
///
/// A thread store saves a thread after every step of a run: it should write the messages
/// that are new since its last save of the history, not the whole history again. A history
/// carries a mark for that, shared by its clones (the run's history, the thread the agent
/// saves, a copy in the store's cache):
///
/// - once a save (or a load) is committed, the store calls [`mark_stored`](Self::mark_stored)
///   with its [`StoreTag`] and the thread's new revision: a number that names that save and
///   that a store with that tag never gives twice, not to another thread, not after a delete
///   (a counter or sequence of the whole database does it);
/// - at the next save it reads the revision the database holds for the thread and asks
///   [`stored_len`](Self::stored_len): `Some(n)` says that the stored messages are the first
///   `n` of this history, so it writes the rest. `None`: it compares with what is stored, or
///   rewrites it.
///
/// Each clone checks the shared mark against its own messages: it is trusted only when the
/// history's message at `n - 1` is the very message (the same allocation, not an equal one)
/// that was the last one when the mark was set. Every edit that is not an append (`insert`
/// before the end, `remove`, `truncate`, `splice`, `get_mut`, `iter_mut`) drops the mark of
/// the history edited (its clones keep theirs), so the histories that share a mark only
/// ever grew since they were cloned from one another. Marks live in memory only: a history
/// deserialized or built from messages carries none until a store marks it.
///
/// ```
/// use tower_agent_core::message::{Message, Messages, StoreTag};
///
/// let tag = StoreTag::unique(); // your store's, made once
/// let mut history = Messages::new();
/// history.push(Message::user("Hi"));
/// history.push(Message::assistant("Hello!"));
/// history.mark_stored(tag, 7); // the save of these 2 messages committed as revision 7
///
/// let mut next = history.clone(); // the run goes on
/// next.push(Message::user("How are you?"));
/// // The database still holds revision 7: write the messages from index 2 on.
/// assert_eq!(next.stored_len(tag, 7), Some(2));
/// // Saved meanwhile by someone else, or another store: no shortcut.
/// assert_eq!(next.stored_len(tag, 8), None);
/// assert_eq!(next.stored_len(StoreTag::unique(), 7), None);
/// // An edit that is not an append drops the mark (of this clone only).
/// next.get_mut(0).unwrap().push_text("!");
/// assert_eq!(next.stored_len(tag, 7), None);
/// assert_eq!(history.stored_len(tag, 7), Some(2));
/// ```
///
/// [facade-summarize-layer]: https://docs.rs/tower-agent/latest/tower_agent/layers/summarize/struct.SummarizeLayer.html
/// [facade-token-accounting]: https://docs.rs/tower-agent/latest/tower_agent/layers/summarize/index.html#token-accounting
#[derive(Clone, Default)]
pub struct Messages {
    inner: imbl::Vector<Arc<Message>>,
    /// The running token count, shared by clones (see [`memo`]).
    memo: Option<Arc<memo::Memo>>,
    /// Messages inserted in front since the running count was shared with this history: the
    /// count's message `j` is this history's message `j + shift` (see [`memo`]).
    shift: usize,
    /// What a thread store last stored of this history, shared by clones (see [`stored`] and
    /// [Saving incrementally](Self#saving-incrementally)).
    stored: Option<Arc<stored::Slot>>,
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner
    }
}

impl Messages {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.inner.get(index).map(|m| &**m)
    }

    /// A mutable reference to the message at `index` (copy-on-write).
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Message> {
        // The first messages (the system message at 0, and those inserted in front) are never
        // in the running count: editing them is free.
        if index > self.shift && index < self.len() {
            self.edited(index - self.shift, index + 1 == self.len());
        }
        self.stored = None;
        self.inner.get_mut(index).map(Arc::make_mut)
    }

    /// The first message.
    pub fn first(&self) -> Option<&Message> {
        self.get(0)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.inner.last().map(|m| &**m)
    }

    /// The last message, shared (no copy): read while the history changes.
    pub(crate) fn last_shared(&self) -> Option<Arc<Message>> {
        self.inner.last().cloned()
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.inner.push_back(Arc::new(message));
        self.keep_memo();
        self.keep_stored();
    }

    /// Inserts a message at `index`, shifting the rest.
    ///
    /// # Panics
    ///
    /// Panics if `index > len`.
    pub fn insert(&mut self, index: usize, message: Message) {
        if index < self.len() {
            if index <= self.shift && self.memo.is_some() && self.shift < memo::MAX_SHIFT {
                // In front of every counted message: they all move up by one.
                self.shift += 1;
            } else {
                self.edited_at(index, false);
            }
            self.stored = None;
        }
        self.inner.insert(index, Arc::new(message));
        self.keep_memo();
    }

    /// Removes and returns the message at `index`.
    ///
    /// # Panics
    ///
    /// Panics if `index >= len`.
    pub fn remove(&mut self, index: usize) -> Message {
        if index < self.len() {
            if self.shift > 0 && index <= self.shift {
                // One of the messages in front of the counted ones: they all move down by one.
                self.shift -= 1;
            } else {
                self.edited(index - self.shift, index + 1 == self.len());
            }
        }
        self.stored = None;
        Arc::unwrap_or_clone(self.inner.remove(index))
    }

    /// Keeps the first `len` messages.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.edited_at(len, true);
            self.stored = None;
        }
        self.inner.truncate(len);
    }

    /// Replaces the messages in `range` by `with` (used by compaction).
    pub fn splice(
        &mut self,
        range: std::ops::Range<usize>,
        with: impl IntoIterator<Item = Message>,
    ) {
        if range.start < self.len() {
            // Replacing everything from `range.start` on leaves no old message behind it.
            self.edited_at(range.start, range.end >= self.len());
            self.stored = None;
        }
        let tail = self.inner.split_off(range.end);
        self.inner.truncate(range.start);
        self.inner.extend(with.into_iter().map(Arc::new));
        self.inner.append(tail);
        self.keep_memo();
    }

    /// Iterates over the messages.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> + ExactSizeIterator + '_ {
        self.inner.iter().map(|m| &**m)
    }

    /// Iterates mutably over the messages (each touched one is copied if shared).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Message> + '_ {
        if self.len() > 1 {
            self.edited_at(1, false);
        }
        self.stored = None;
        self.inner.iter_mut().map(Arc::make_mut)
    }

    /// Whether `self[range]` and `other[range]` are the very same shared messages (not just
    /// equal): true when neither side edited them since one was cloned from the other.
    pub fn shares_range(&self, other: &Messages, range: std::ops::Range<usize>) -> bool {
        range.end <= self.len()
            && range.end <= other.len()
            && self
                .inner
                .focus()
                .narrow(range.clone())
                .into_iter()
                .zip(other.inner.focus().narrow(range))
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// Copies the messages into a `Vec`.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Gives the history a running count if it has none (an allocation once per history,
    /// not per append).
    fn keep_memo(&mut self) {
        if self.memo.is_none() {
            self.memo = Some(Arc::default());
            self.shift = 0;
        }
    }

    /// Gives the history a slot for what a store stores of it if it has none (an allocation
    /// once per history, not per append).
    fn keep_stored(&mut self) {
        if self.stored.is_none() {
            self.stored = Some(Arc::default());
        }
    }

    /// Records that the store tagged `tag` now holds this whole history as `revision` (call
    /// it once the save, or the load, is committed), for this history and the clones that
    /// share its mark: a later save of any of them asks [`stored_len`](Self::stored_len)
    /// whether it may only append. See [Saving incrementally](Self#saving-incrementally).
    ///
    /// A history that never held a message keeps no mark (this does nothing then).
    pub fn mark_stored(&self, tag: StoreTag, revision: i64) {
        if let Some(slot) = &self.stored {
            *slot
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(stored::Mark {
                tag,
                revision,
                len: self.len(),
                last: self.inner.last().cloned(),
            });
        }
    }

    /// How many leading messages of this history are the very ones the store tagged `tag`
    /// holds at `revision` (the last [`mark_stored`](Self::mark_stored) seen by this history,
    /// if it is the store's and that revision's, and the history only grew since): a save may
    /// then write the messages from there on and leave the stored ones as they are. `None`
    /// when there is no such mark: compare with what is stored, or rewrite it all.
    ///
    /// `Some(n)` is always right (never a false positive); `None` may come after any edit
    /// that was not an append. See [Saving incrementally](Self#saving-incrementally).
    pub fn stored_len(&self, tag: StoreTag, revision: i64) -> Option<usize> {
        let slot = self.stored.as_ref()?;
        let mark = slot
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let m = mark.as_ref()?;
        let ok = m.tag == tag
            && m.revision == revision
            && m.len <= self.len()
            && match (&m.last, m.len.checked_sub(1)) {
                (Some(last), Some(i)) => Arc::ptr_eq(last, &self.inner[i]),
                (None, None) => true,
                _ => false,
            };
        ok.then_some(m.len)
    }

    /// The messages from this history's `index` on are about to change (see [`edited`]).
    /// Changing one of the messages in front of the counted ones (`index <= shift`, when some
    /// were inserted) drops the count.
    ///
    /// [`edited`]: Self::edited
    fn edited_at(&mut self, index: usize, replaced_to_end: bool) {
        if self.shift > 0 && index <= self.shift {
            self.memo = None;
            self.shift = 0;
        } else {
            self.edited(index - self.shift, replaced_to_end);
        }
    }

    /// The count's messages from `index` on (the running count's own indices) are about to
    /// change. `replaced_to_end`: every message from `index` on is replaced or removed (none
    /// of the old ones stays behind it).
    fn edited(&mut self, index: usize, replaced_to_end: bool) {
        let Some(memo) = &self.memo else { return };
        match memo.on_edit(index, replaced_to_end, Arc::strong_count(memo) == 1) {
            memo::OnEdit::Keep => {}
            memo::OnEdit::Drop => {
                self.memo = None;
                self.shift = 0;
            }
            memo::OnEdit::Fork(copy) => self.memo = Some(Arc::new(copy)),
        }
    }

    /// Tokens of the messages by `counter` (the sum of
    /// [`count_message`](tokens::TokenCounter::count_message) over them), counting only what
    /// the running count shared with this history's clones has not counted yet: a run's model
    /// requests carry clones of its history, so a layer that counts each request's messages
    /// counts each message once over the run, not at every call (see
    /// [the summarize docs][facade-token-accounting]). The system message
    /// and the last 4 messages are counted at every call (stages and layers edit them per
    /// request). One running count per history: counting with another counter (another
    /// `Arc`) starts it over, so keep one counter per layer.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tower_agent_core::message::{Message, Messages, tokens::{BytesPerFour, TokenCounter}};
    ///
    /// let counter: Arc<dyn TokenCounter> = Arc::new(BytesPerFour);
    /// let mut history = Messages::new();
    /// history.push(Message::system("You help."));
    /// for i in 0..20 {
    ///     history.push(Message::user(format!("question {i}")));
    ///     history.push(Message::assistant(format!("answer {i}")));
    /// }
    /// let request = history.clone(); // what a model layer gets
    /// assert_eq!(request.count_tokens(&counter), counter.count_messages(&history));
    /// history.push(Message::user("one more"));
    /// // The next request's count starts where the last one's ended.
    /// assert_eq!(history.clone().count_tokens(&counter), counter.count_messages(&history));
    /// ```
    ///
    /// [facade-token-accounting]: https://docs.rs/tower-agent/latest/tower_agent/layers/summarize/index.html#token-accounting
    pub fn count_tokens(&self, counter: &Arc<dyn tokens::TokenCounter>) -> usize {
        let n = self.inner.len();
        // The messages in front of the counted ones: the system message (or the first one),
        // and those inserted in front since the count was shared.
        let shift = self.shift;
        let heads = (shift + 1).min(n);
        let head: usize = self
            .inner
            .focus()
            .narrow(0..heads)
            .into_iter()
            .map(|m| counter.count_message(m))
            .sum();
        // `from` and `upto` are this history's indices; the running count's are `shift` less.
        let (from, base) = match &self.memo {
            Some(memo) => memo.lookup(counter, &self.inner, shift),
            None => (1, 0),
        };
        let from = (from + shift).min(n.max(heads));
        let mut tail = 0;
        // The last `memo::SLACK` messages are counted at every call and left out of the
        // running count: a request's own last messages (a reminder) are not the history's.
        let upto = n.saturating_sub(memo::SLACK).max(from);
        for (i, m) in self
            .inner
            .focus()
            .narrow(from.min(n)..n)
            .into_iter()
            .enumerate()
        {
            let tokens = counter.count_message(m);
            tail += tokens;
            if from + i + 1 == upto
                && let Some(memo) = &self.memo
            {
                memo.advance(counter, upto - shift, base + tail, m);
            }
        }
        head + base + tail
    }
}

impl Index<usize> for Messages {
    type Output = Message;

    fn index(&self, index: usize) -> &Message {
        &self.inner[index]
    }
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Message>> for Messages {
    fn from(v: Vec<Message>) -> Self {
        v.into_iter().collect()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<T: IntoIterator<Item = Message>>(iter: T) -> Self {
        Messages {
            inner: iter.into_iter().map(Arc::new).collect(),
            memo: Some(Arc::default()),
            shift: 0,
            // A slot for the store's mark, as `push` gives one: a history built at once and
            // then saved is marked by that save.
            stored: Some(Arc::default()),
        }
    }
}

impl Extend<Message> for Messages {
    fn extend<T: IntoIterator<Item = Message>>(&mut self, iter: T) {
        self.inner.extend(iter.into_iter().map(Arc::new));
        self.keep_memo();
        self.keep_stored();
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = Box<dyn Iterator<Item = &'a Message> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Messages::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_mark_is_trusted_only_for_histories_that_only_grew() {
        let tag = StoreTag::unique();
        // No message yet: no mark kept.
        let empty = Messages::new();
        empty.mark_stored(tag, 1);
        assert_eq!(empty.stored_len(tag, 1), None);

        let mut saved: Messages = (0..3).map(|i| Message::user(i.to_string())).collect();
        saved.mark_stored(tag, 2);
        assert_eq!(saved.stored_len(tag, 2), Some(3));
        let grown = {
            let mut h = saved.clone();
            h.push(Message::user("3"));
            h
        };
        assert_eq!(grown.stored_len(tag, 2), Some(3));
        // A clone that lost messages, or that was edited, has no mark.
        let mut cut = saved.clone();
        cut.truncate(2);
        assert_eq!(cut.stored_len(tag, 2), None);
        let mut inserted = saved.clone();
        inserted.insert(0, Message::system("s"));
        assert_eq!(inserted.stored_len(tag, 2), None);
        // An equal history is not the same one.
        assert_eq!(Messages::from(saved.to_vec()).stored_len(tag, 2), None);
        // A later mark by a clone holds for every clone that shares it and holds its messages.
        grown.mark_stored(tag, 5);
        assert_eq!(grown.stored_len(tag, 5), Some(4));
        assert_eq!(saved.stored_len(tag, 5), None, "saved lacks message 3");
        assert_eq!(saved.stored_len(tag, 2), None, "the mark moved on");
        saved.push(Message::user("other 3"));
        assert_eq!(saved.stored_len(tag, 5), None, "another message 3");
    }

    #[test]
    fn messages_copy_on_write() {
        let mut a = Messages::from(vec![Message::system("s"), Message::user("u")]);
        let b = a.clone();
        a.get_mut(0).unwrap().push_text("!");
        assert_eq!(a[0].text(), "s!");
        assert_eq!(b[0].text(), "s");
        a.splice(0..1, [Message::user("summary")]);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].text(), "summary");
        assert_eq!(a[1].text(), "u");
        assert_eq!(a.remove(0).text(), "summary");
        assert_eq!(a.len(), 1);

        let base = Messages::from(vec![
            Message::user("1"),
            Message::user("2"),
            Message::user("3"),
        ]);
        let mut edited = base.clone();
        assert!(base.shares_range(&edited, 0..3));
        edited.get_mut(2).unwrap().push_text("!");
        assert!(base.shares_range(&edited, 0..2));
        assert!(!base.shares_range(&edited, 0..3));
        assert!(!base.shares_range(&edited, 0..4));
        let equal_copy = Messages::from(base.to_vec());
        assert!(
            !base.shares_range(&equal_copy, 0..1),
            "equal but not shared"
        );
    }
}
