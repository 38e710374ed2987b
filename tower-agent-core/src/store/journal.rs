//! The tool-call journal: what a run's tool calls did, kept by the thread store, so that a run
//! whose process died in the middle of a step can be resumed
//! ([`AgentRequest::recover`](crate::AgentRequest::recover)) without running a side effect
//! twice.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use tokio::sync::Notify;
//! use tower_agent_core::{
//!     Agent, AgentRequest, BoxError,
//!     model::ScriptedModel,
//!     store::{MemoryStore, ThreadStore},
//!     tool::tool_fn,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! // A payment that hangs: the run is cut off while it runs (as by a crash).
//! let started = Arc::new(Notify::new());
//! let signal = Arc::clone(&started);
//! let charge = tool_fn("charge", "Charges a card", json!({"type": "object"}), move |_args, _ctx| {
//!     let signal = Arc::clone(&signal);
//!     async move {
//!         signal.notify_one();
//!         std::future::pending::<()>().await;
//!         Ok::<_, BoxError>("charged".to_owned())
//!     }
//! });
//! let store = MemoryStore::new();
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("charge", json!({"usd": 5})).text("Not sure it went through."))
//!     .tool(charge)
//!     .store(store.clone())
//!     .build();
//! tokio::select! {
//!     _ = agent.run(AgentRequest::new("Charge $5.").thread("t")) => unreachable!("it hangs"),
//!     () = started.notified() => {} // the run's future is dropped here
//! }
//!
//! // The thread holds the call, the journal says it started and never finished.
//! let thread = store.load("t").await?.unwrap();
//! let call = thread.messages.last().unwrap().tool_calls[0].clone();
//! let entries = store.journal().unwrap().entries("t", &[call.id.clone()]).await?;
//! assert!(entries[&call.id].in_doubt());
//!
//! // A recovery does not charge twice: `charge` is not idempotent, so the model is told.
//! let resp = agent.run(AgentRequest::recover("t")).await?;
//! let result = resp.messages.iter().find(|m| m.tool_call_id.as_deref() == Some(&call.id)).unwrap();
//! assert!(result.text().contains("may or may not have happened"), "{}", result.text());
//! assert_eq!(resp.text, "Not sure it went through.");
//! # Ok(())
//! # }
//! ```
//!
//! For every tool call of a run on a thread (a run with a thread id, on a store whose
//! [`ThreadStore::journal`](super::ThreadStore::journal) is `Some`: [`MemoryStore`](super::MemoryStore),
//! `Sqlite` and `Postgres` all keep one), the agent loop:
//!
//! 1. saves the thread with the assistant message that makes the calls, before any of them
//!    runs;
//! 2. records the call as **started** ([`ToolJournal::started`]: thread id, call id, tool,
//!    arguments) right before the tool itself runs — innermost, after every tool layer and
//!    hook, so a call a `PreToolUse` hook denied or deferred is never "started". The record is
//!    written (committed, for the SQL stores) before the tool is called; if it cannot be
//!    written, the tool is **not** run and the model gets an error output saying so;
//! 3. records the call as **finished** with its output ([`ToolJournal::finished`]) as soon as
//!    the call settled — the output the model sees, after the hooks (a redaction of a
//!    `PostToolUse` hook is in it). Only a started call is recorded finished: a call the run
//!    deferred or aborted, or that a hook denied before it reached the tool, has no record. A
//!    failure to record is logged (`tracing::warn!`) and the output still goes to the model
//!    (the step's save keeps it).
//!
//! On resume, every call of the thread's last assistant message that has no result is:
//!
//! - **finished** in the journal: its output is replayed, the tool is not run;
//! - **started** but not finished — *in doubt*: run again (through the whole tool stack, hooks
//!   included) only if the tool is [idempotent](crate::message::ToolSpec::idempotent); else the
//!   model gets the error output [`in_doubt_output`] ("may or may not have happened");
//! - **not in the journal**: it never reached the tool; it is run (through the whole stack,
//!   so hooks decide again).
//!
//! Calls waiting for approval ([`agent::interrupt`](crate::agent::interrupt)) are not in
//! flight: a recovery leaves them to the approvals. Calls a person **approved** are, from the
//! save that took the decision ([`Thread::approved`](super::Thread::approved)) until their
//! outputs are saved: a recovery applies the same three rules to them (not started: run once;
//! in doubt: the idempotent rule; finished: replayed), and a call denied before the crash is
//! never run. A new run (a prompt) on a thread whose last
//! run stopped mid-step answers its unanswered calls from the journal, or with an
//! `interrupted: … may or may not have happened` error output, before the prompt: the history
//! stays valid and nothing is run.
//!
//! # The journal and the [`Ledger`][facade-ledger]
//!
//! The journal is not the ledger grown up, and not a layer you add: they answer different
//! questions with opposite rules. The ledger is an audit trail — every call, in any run, with
//! timing and status — that must never slow or fail a call, so it writes in the background
//! and drops entries it cannot write. The journal is a correctness mechanism: its "started"
//! record must be durable *before* the tool runs, and a call it cannot record is not run. It
//! belongs with the thread it resumes (same store, same database, deleted with it), it is
//! written at a fixed place of the loop (innermost for "started", after the hooks for
//! "finished"), and it is on for every run on a thread of a store that keeps one, because a
//! recovery that finds no record would run a call twice. Keep the ledger for auditing.
//!
//! # A journal of your own
//!
//! A store of yours keeps one by implementing [`ToolJournal`] and returning it from
//! [`ThreadStore::journal`](super::ThreadStore::journal). Keep the rules above: `started`
//! replaces an earlier record of the call id and is durable when it returns, `finished`
//! records nothing for a call with no started record, and every save of a thread prunes its
//! entries by [`live_calls`] (see [Size](#size)). Build entries with [`JournalEntry::new`];
//! the arguments and output are serde types (the SQL stores keep each as JSON text).
//!
//! # Size
//!
//! An entry holds the call's arguments and output as the thread's messages do (JSON text).
//! A store keeps only what a resume can read: a save of a thread drops every entry of it but
//! those of the calls of its last message (all of them when that message is not an assistant
//! message with calls), in the save's own transaction for the SQL stores. So a thread at rest
//! keeps no entry, and a thread mid-step the entries of its step; the journal of a thread is
//! deleted with it. [`MemoryStore`](super::MemoryStore) also keeps at most
//! [`MEMORY_JOURNAL_CALLS`] (1,024) calls per thread, dropping the oldest.
//!
//! [facade-ledger]: https://docs.rs/tower-agent/latest/tower_agent/layers/ledger/index.html

use std::collections::HashMap;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::{
    error::BoxError,
    message::{Message, Role, ToolCall, ToolOutput},
};

/// How many calls per thread [`MemoryStore`](super::MemoryStore)'s journal keeps (the oldest
/// are dropped first).
pub const MEMORY_JOURNAL_CALLS: usize = 1024;

/// One call in the journal.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JournalEntry {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments the tool was called with.
    pub arguments: Value,
    /// The output, once the call finished; `None` while it is only started.
    pub output: Option<ToolOutput>,
}

impl JournalEntry {
    /// An entry for `call`, with `output` if it finished.
    pub fn new(call: &ToolCall, output: Option<ToolOutput>) -> Self {
        JournalEntry {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            output,
        }
    }

    /// Whether the call is started and not finished.
    pub fn in_doubt(&self) -> bool {
        self.output.is_none()
    }
}

/// Where a thread store keeps the tool-call journal. See the [module docs](self).
///
/// Every method is one durable write or read: when `started` returns `Ok`, the record
/// survives a crash of this process.
pub trait ToolJournal: Send + Sync {
    /// Records `call` of thread `thread` as started (replacing an earlier record of the same
    /// call id, whose output is then forgotten).
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Records `call` of thread `thread` as finished with `output`: the call's started
    /// record gets its output. A call with no started record is not recorded: it never
    /// reached the tool (a hook denied it — a resume runs it through the hooks again), or its
    /// record is gone because the thread moved on (another run took the step over after this
    /// run's lease was lost, and its save dropped the step's entries): so a late record
    /// never leaves an entry on a thread at rest.
    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>>;

    /// The entries of thread `thread` for the calls `call_ids` (those in the journal), by
    /// call id.
    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>>;
}

/// The output the model gets for a call that was in doubt on resume (started, not finished,
/// tool not idempotent): an error saying it may or may not have happened.
pub fn in_doubt_output(call: &ToolCall) -> ToolOutput {
    ToolOutput::error(
        call.id.clone(),
        format!(
            "in doubt: the run was interrupted (its process stopped) while the tool `{}` was \
             running; the call may or may not have happened, and it was not run again because \
             the tool is not idempotent. Check its effect before calling it again.",
            call.name
        ),
    )
}

/// The calls whose journal entries a store keeps when it saves a thread whose last message
/// is `last`; it drops every other entry of the thread (in the save's own transaction, if it
/// has them). A resume reads only the calls of the thread's last message, when that is an
/// assistant message with calls: for any other last message (or none) this is empty, and
/// the save drops every entry of the thread. See [Size](self#size).
///
/// ```
/// use tower_agent_core::{message::{Message, Messages}, store::journal::live_calls};
///
/// let mut history = Messages::new();
/// history.push(Message::user("Clean up."));
/// assert!(live_calls(history.last()).is_empty()); // drop every entry of the thread
/// ```
pub fn live_calls(last: Option<&Message>) -> &[ToolCall] {
    match last {
        Some(m) if m.role == Role::Assistant => &m.tool_calls,
        _ => &[],
    }
}

/// The journal of a [`MemoryStore`](super::MemoryStore): per thread, the entries of the
/// step in flight (at most [`MEMORY_JOURNAL_CALLS`] calls).
#[derive(Debug, Default)]
pub(crate) struct MemoryJournal {
    /// Thread → its entries, in the order first recorded (a step's calls: a few, looked up
    /// by a linear search). A thread keeps its slot once journaled, not its entries: the
    /// buffer is freed when a save leaves none (see [`prune`](Self::prune)), and the next
    /// step's records reuse the slot without allocating its id again.
    threads: HashMap<String, Vec<JournalEntry>>,
}

impl MemoryJournal {
    pub(crate) fn record(&mut self, thread: &str, entry: JournalEntry) {
        if !self.threads.contains_key(thread) {
            self.threads.insert(thread.to_owned(), Vec::new());
        }
        let Some(entries) = self.threads.get_mut(thread) else {
            return; // just inserted
        };
        match entries.iter_mut().find(|e| e.call_id == entry.call_id) {
            Some(recorded) => *recorded = entry,
            None => {
                if entries.len() >= MEMORY_JOURNAL_CALLS {
                    entries.remove(0);
                }
                entries.push(entry);
            }
        }
    }

    /// Finishes the started record of `call` (see [`ToolJournal::finished`]: a call with no
    /// started record is not recorded).
    pub(crate) fn finish(&mut self, thread: &str, call: &ToolCall, output: &ToolOutput) {
        let recorded = self
            .threads
            .get_mut(thread)
            .and_then(|entries| entries.iter_mut().find(|e| e.call_id == call.id));
        if let Some(entry) = recorded {
            entry.output = Some(output.clone());
        }
    }

    pub(crate) fn entries(
        &self,
        thread: &str,
        call_ids: &[String],
    ) -> HashMap<String, JournalEntry> {
        let Some(entries) = self.threads.get(thread) else {
            return HashMap::new();
        };
        call_ids
            .iter()
            .filter_map(|id| {
                let entry = entries.iter().find(|e| e.call_id == *id)?;
                Some((id.clone(), entry.clone()))
            })
            .collect()
    }

    pub(crate) fn remove(&mut self, thread: &str) {
        self.threads.remove(thread);
    }

    /// Drops what no resume can read any more once the thread is saved with `last` as its
    /// last message: resume reads only the calls of a last assistant message, so every other
    /// entry of the thread goes (all of them when the last message makes no call).
    pub(crate) fn prune(&mut self, thread: &str, last: Option<&Message>) {
        let Some(entries) = self.threads.get_mut(thread) else {
            return;
        };
        let calls = live_calls(last);
        entries.retain(|e| calls.iter().any(|c| c.id == e.call_id));
        if entries.is_empty() {
            // No entry kept, no buffer either.
            *entries = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(i: usize) -> ToolCall {
        ToolCall {
            id: format!("c{i}"),
            name: "t".into(),
            arguments: json!({}),
        }
    }

    #[test]
    fn the_memory_journal_keeps_the_last_calls_of_a_thread() {
        let mut journal = MemoryJournal::default();
        for i in 0..=MEMORY_JOURNAL_CALLS {
            journal.record("t", JournalEntry::new(&call(i), None));
        }
        // Recording a call again does not grow it.
        journal.finish("t", &call(5), &ToolOutput::text("c5", "done"));
        let ids: Vec<String> = (0..=MEMORY_JOURNAL_CALLS)
            .map(|i| format!("c{i}"))
            .collect();
        let entries = journal.entries("t", &ids);
        assert_eq!(entries.len(), MEMORY_JOURNAL_CALLS);
        assert!(!entries.contains_key("c0"), "the oldest is dropped");
        assert!(entries[&format!("c{MEMORY_JOURNAL_CALLS}")].in_doubt());
        assert_eq!(entries["c5"].output.as_ref().unwrap().content, "done");
        journal.remove("t");
        assert!(journal.entries("t", &ids).is_empty());
    }
}
