//! The running token count of a history, shared by its clones.
//!
//! It holds the tokens of messages `1..len` (the system message, index 0, is recounted at
//! every call: stages edit it per call) and the message at `len - 1`. A history sharing it
//! may use it when its own message at `len - 1` is that very message (the same `Arc`): the
//! history it was counted on and this one then descend from the one that appended that
//! message, and neither changed the messages before it since, because
//! - editing or removing a message below `len` drops the history's count;
//! - editing a message at or above `len` while the count is shared, other than by
//!   replacing everything from it to the end, forks the count (the edited history gets its
//!   own copy), so that no other history can advance the shared count past the edit and
//!   hand it back.
//!
//! These indices are the count's own. A history that inserted messages in front of the
//! counted ones since it shared the count (a stage adding a system message to a request whose
//! history has none) keeps how many as its `shift`: the count's message `j` is its message
//! `j + shift`, and its first `shift + 1` messages are counted at every call. Inserting or
//! removing one of those moves the shift (at most [`MAX_SHIFT`]: past it the count is
//! dropped); any other change to them drops the count.

use std::sync::{Arc, Mutex, PoisonError};

use super::Message;
use super::tokens::TokenCounter;

/// Messages at the end of a counted history left out of the running count (counted at
/// every call).
pub(crate) const SLACK: usize = 4;

/// Messages a history may insert in front of the counted ones and keep its running
/// count (each is then counted at every call): 2.
pub(crate) const MAX_SHIFT: usize = 2;

#[derive(Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
}

#[derive(Clone, Default)]
struct State {
    counter: Option<Arc<dyn TokenCounter>>,
    /// Messages `1..len` are counted; 0 when nothing is.
    len: usize,
    sum: usize,
    last: Option<Arc<Message>>,
}

pub(crate) enum OnEdit {
    Keep,
    Drop,
    Fork(Memo),
}

impl Memo {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn on_edit(&self, index: usize, replaced_to_end: bool, unique: bool) -> OnEdit {
        let state = self.state();
        if index < state.len {
            OnEdit::Drop
        } else if replaced_to_end || unique {
            OnEdit::Keep
        } else {
            OnEdit::Fork(Memo {
                state: Mutex::new(state.clone()),
            })
        }
    }

    /// Where counting starts and the tokens before it, in the count's indices (from 1
    /// when the count does not apply to `messages`, whose message `j + shift` is the
    /// count's `j`).
    pub(super) fn lookup(
        &self,
        counter: &Arc<dyn TokenCounter>,
        messages: &imbl::Vector<Arc<Message>>,
        shift: usize,
    ) -> (usize, usize) {
        let state = self.state();
        let applies = state.len >= 2
            && state.len + shift <= messages.len()
            && state
                .counter
                .as_ref()
                .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(counter)))
            && state
                .last
                .as_ref()
                .is_some_and(|last| Arc::ptr_eq(last, &messages[state.len - 1 + shift]));
        if applies {
            (state.len, state.sum)
        } else {
            (1, 0)
        }
    }

    /// Messages `1..len` hold `sum` tokens; `last` is the one at `len - 1`.
    pub(super) fn advance(
        &self,
        counter: &Arc<dyn TokenCounter>,
        len: usize,
        sum: usize,
        last: &Arc<Message>,
    ) {
        let mut state = self.state();
        let counter_same = state
            .counter
            .as_ref()
            .is_some_and(|c| std::ptr::addr_eq(Arc::as_ptr(c), Arc::as_ptr(counter)));
        if counter_same
            && state.len == len
            && state.last.as_ref().is_some_and(|l| Arc::ptr_eq(l, last))
        {
            return;
        }
        if !counter_same {
            state.counter = Some(Arc::clone(counter));
        }
        state.len = len;
        state.sum = sum;
        state.last = Some(Arc::clone(last));
    }
}
