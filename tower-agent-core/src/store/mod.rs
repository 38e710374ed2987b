//! Thread state: [`ThreadStore`], the in-memory [`MemoryStore`] and the persistent stores:
//! `Sqlite` (feature `sqlite`, a database file) and `Postgres` (feature `postgres`, one
//! database shared by server replicas).
//!
//! A run with a thread id loads the thread (messages, and its [data]: the todo list,
//! the files written, your own [`Persisted`] types) before it starts, saves it
//! after every step and at the end, and so continues the conversation of an earlier run with
//! the same id. A run without a thread id is ephemeral: it gets a fresh id and is not saved.
//!
//! Two runs on the same thread at the same time are not merged: the last save wins (a save
//! means "this is the thread now"; the stored thread is always one save's thread, never a mix
//! of two, also with several `Sqlite` stores on one file). Serialize
//! runs per thread (e.g. one at a time per conversation in your server) if that matters.
//! `Postgres` goes further across replicas: a save over a thread that another store wrote or
//! deleted since this store last read or saved it fails with a conflict error instead.
//!
//! Each store also keeps the [tool-call journal](journal) ([`ThreadStore::journal`]): what the
//! tool calls of a run on a thread did, so that a run whose process died is resumed
//! ([`AgentRequest::recover`](crate::AgentRequest::recover), `POST /threads/{id}/resume`)
//! without running a side effect twice. A run on a thread saves the assistant message that
//! makes tool calls before any of them runs, and again after their results.
//!
//! A store of yours on a SQL database can make the decisions the SQL stores make (append or
//! rewrite the messages, which data rows to write, the columns of pending calls and journal
//! entries) with the building blocks in [`sql`].
//!
//! # Example
//!
//! ```
//! use tower_agent_core::{Agent, AgentRequest, model::ScriptedModel, store::MemoryStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let store = MemoryStore::new();
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text("Nice to meet you, Ada.").text("You are Ada."))
//!     .store(store.clone())
//!     .build();
//!
//! agent.run(AgentRequest::new("I am Ada.").thread("t1")).await?;
//! let second = agent.run(AgentRequest::new("Who am I?").thread("t1")).await?;
//! assert_eq!(second.text, "You are Ada.");
//! // user, assistant, user, assistant
//! assert_eq!(store.get("t1").unwrap().messages.len(), 4);
//! # Ok(())
//! # }
//! ```

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    sync::{Arc, Mutex},
};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::{context::RunData, error::BoxError, message::Messages};

/// The per-thread data map (its home is [`context::data`](crate::context::data), below the
/// stores).
pub use crate::context::data;

pub use self::data::{DataChange, Persisted, ThreadData};

pub mod journal;
pub mod sql;

pub use self::journal::{JournalEntry, ToolJournal};
/// A store's name in the marks of incremental saves (its home is [`message`](crate::message),
/// with [`Messages::mark_stored`] and [`Messages::stored_len`]).
pub use crate::message::StoreTag;

/// A thread as the SQL stores list it (`Sqlite::list_threads`, `Postgres::list_threads`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadInfo {
    /// The thread id.
    pub id: String,
    /// How many messages it holds.
    pub messages: usize,
    /// When it was first saved.
    pub created_at: std::time::SystemTime,
    /// When it was last saved.
    pub updated_at: std::time::SystemTime,
}

impl ThreadInfo {
    /// The listing of thread `id`: `messages` messages, first saved at `created_at`, last
    /// saved at `updated_at` (for a store of yours that lists its threads as the SQL stores
    /// do).
    pub fn new(
        id: impl Into<String>,
        messages: usize,
        created_at: std::time::SystemTime,
        updated_at: std::time::SystemTime,
    ) -> Self {
        ThreadInfo {
            id: id.into(),
            messages,
            created_at,
            updated_at,
        }
    }
}

/// A conversation thread as it is persisted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "SerializedThread")]
pub struct Thread {
    /// The thread id.
    pub id: String,
    /// Its messages.
    pub messages: Messages,
    /// Its data besides the messages: the [`Persisted`] types of your tools and layers, and
    /// those of tower-agent's built-ins (the todo list, the files written). See
    /// [`store::data`](data).
    #[serde(default, skip_serializing_if = "ThreadData::is_empty")]
    pub data: ThreadData,
    /// Tool calls waiting for a person's decision: the run ended
    /// [`Outcome::Interrupted`](crate::agent::Outcome::Interrupted) (see
    /// [`interrupt`](crate::agent::interrupt)). Every store keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<crate::event::PendingCall>,
    /// Tool calls a person approved whose outputs are not in the thread yet: the save that
    /// took the decision moved them here from [`pending`](Self::pending) (each with the
    /// arguments it runs with, and a placeholder output in the history), and the save of
    /// their outputs empties it. A thread with approved calls is a run that stopped before
    /// finishing them: [`AgentRequest::recover`](crate::AgentRequest::recover) finishes them
    /// by the [journal]'s rules. Every store keeps them (the SQL stores in the
    /// column of the pending calls, marked `"approved": true`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved: Vec<crate::event::PendingCall>,
}

/// A [`Thread`] as JSON, also as this crate wrote it before [`Thread::data`]: with fields
/// `todos` and `files` (path → content), which are read into the data.
#[derive(Deserialize)]
struct SerializedThread {
    id: String,
    messages: Messages,
    #[serde(default)]
    data: ThreadData,
    #[serde(default)]
    pending: Vec<crate::event::PendingCall>,
    #[serde(default)]
    approved: Vec<crate::event::PendingCall>,
    #[serde(default)]
    todos: Vec<serde_json::Value>,
    #[serde(default)]
    files: BTreeMap<String, String>,
}

impl From<SerializedThread> for Thread {
    fn from(t: SerializedThread) -> Self {
        let mut thread = Thread {
            id: t.id,
            messages: t.messages,
            data: t.data,
            pending: t.pending,
            approved: t.approved,
        };
        // Where the todo and filesystem built-ins of `tower-agent` keep them now.
        if !t.todos.is_empty() {
            let todos = serde_json::Value::Array(t.todos);
            thread.data.set_value("tower_agent.todos", todos);
        }
        for (path, content) in t.files {
            let content = serde_json::Value::String(content);
            thread
                .data
                .set_value(format!("tower_agent.files/{path}"), content);
        }
        thread
    }
}

impl Thread {
    /// The run's data restored from the thread (its [`ThreadData`]).
    pub(crate) fn restore(data: ThreadData) -> RunData {
        let mut extensions = RunData::default();
        if !data.is_empty() {
            extensions.insert(data);
        }
        extensions
    }

    /// The thread `id` of `messages`, with the thread data of the run's `data` (shared, not
    /// copied).
    pub(crate) fn of_run(id: &str, messages: Messages, data: &RunData) -> Self {
        Thread {
            id: id.to_owned(),
            messages,
            data: data.get::<ThreadData>().cloned().unwrap_or_default(),
            pending: Vec::new(),
            approved: Vec::new(),
        }
    }

    /// An empty thread.
    pub fn new(id: impl Into<String>) -> Self {
        Thread {
            id: id.into(),
            ..Self::default()
        }
    }
}

/// Where threads are kept between runs.
///
/// Implementations must be safe for concurrent runs on different threads.
pub trait ThreadStore: Send + Sync + 'static {
    /// The thread `id`, or `None` if there is none.
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>>;

    /// Saves (creates or replaces) a thread.
    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Deletes the thread `id`; deleting a missing thread is not an error.
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Takes the lease of thread `id` for a run: while the returned [`Lease`] lives, no other
    /// lease of the thread is given, by this store or any other on the same database (other
    /// replicas); dropping it releases it. A thread leased elsewhere is a [`ThreadBusy`]
    /// error. The HTTP server ([`AgentRoutes`][facade-server]) takes one for every run, and
    /// answers `409` when the thread is busy.
    ///
    /// The default gives every lease at once (a store of one process: the server's own
    /// one-run-per-thread rule is enough); `Postgres` leases across replicas, `Sqlite` across
    /// the processes that open one database file.
    ///
    /// [facade-server]: https://docs.rs/tower-agent/latest/tower_agent/server/index.html
    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        let _ = id;
        Box::pin(async { Ok(Lease::free()) })
    }

    /// The store's [tool-call journal](self::journal), which makes a crashed run resumable
    /// without running a side effect twice; `None` (the default) if the store keeps none
    /// (then a resumed run treats every unanswered call as never started).
    fn journal(&self) -> Option<&dyn ToolJournal> {
        None
    }
}

/// A run's hold on a thread, from [`ThreadStore::lease`]: released when dropped.
pub struct Lease {
    _held: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Lease {
    /// A lease that holds nothing (for stores with nothing to hold across processes).
    pub fn free() -> Self {
        Lease { _held: None }
    }

    /// A lease held by `held`: released when `held` is dropped.
    pub fn held_by(held: impl std::any::Any + Send + Sync) -> Self {
        Lease {
            _held: Some(Box::new(held)),
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("held", &self._held.is_some())
            .finish()
    }
}

/// A lease refused: another run (of this or another replica) holds the thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBusy {
    thread: String,
}

impl ThreadBusy {
    /// The error for the thread `id`.
    pub fn new(id: impl Into<String>) -> Self {
        ThreadBusy { thread: id.into() }
    }

    /// The busy thread.
    pub fn thread(&self) -> &str {
        &self.thread
    }
}

impl fmt::Display for ThreadBusy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a run is already going on thread `{}`", self.thread)
    }
}

impl std::error::Error for ThreadBusy {}

impl<T: ThreadStore> ThreadStore for Arc<T> {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        (**self).load(id)
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        (**self).save(thread)
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        (**self).delete(id)
    }

    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        (**self).lease(id)
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        (**self).journal()
    }
}

/// Threads in memory, shared by clones. The default store.
#[derive(Clone, Default)]
pub struct MemoryStore {
    threads: Arc<Mutex<HashMap<String, Thread>>>,
    journal: Arc<Mutex<journal::MemoryJournal>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the thread `id` (cheap: messages are shared).
    pub fn get(&self, id: &str) -> Option<Thread> {
        self.lock().get(id).cloned()
    }

    /// Number of threads.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether there are no threads.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Thread>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("threads", &self.len())
            .finish()
    }
}

impl ThreadStore for MemoryStore {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        let thread = self.get(id);
        Box::pin(async move { Ok(thread) })
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        let mut threads = self.lock();
        match threads.get_mut(&thread.id) {
            // The usual save (a step of a thread already here): the id is kept, the rest is
            // shared (messages, data) or copied, with no allocation for the id.
            Some(stored) => {
                let Thread {
                    id: _,
                    messages,
                    data,
                    pending,
                    approved,
                } = thread;
                stored.messages.clone_from(messages);
                stored.data.clone_from(data);
                stored.pending.clone_from(pending);
                stored.approved.clone_from(approved);
            }
            None => {
                threads.insert(thread.id.clone(), thread.clone());
            }
        }
        drop(threads);
        // The entries of calls this save answers (or that belong to an older step) can never
        // be read again.
        self.journal_lock()
            .prune(&thread.id, thread.messages.last());
        Box::pin(Done)
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        self.lock().remove(id);
        self.journal_lock().remove(id);
        Box::pin(Done)
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

/// The answer of a [`MemoryStore`] operation, done when it is called: a zero-sized future,
/// so boxing it allocates nothing.
struct Done;

impl std::future::Future for Done {
    type Output = Result<(), BoxError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl MemoryStore {
    fn journal_lock(&self) -> std::sync::MutexGuard<'_, journal::MemoryJournal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ToolJournal for MemoryStore {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a crate::message::ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.journal_lock()
            .record(thread, JournalEntry::new(call, None));
        Box::pin(Done)
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a crate::message::ToolCall,
        output: &'a crate::message::ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.journal_lock().finish(thread, call, output);
        Box::pin(Done)
    }

    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        let entries = self.journal_lock().entries(thread, call_ids);
        Box::pin(async { Ok(entries) })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A thread serialized before `Thread::data` (fields `todos` and `files`) reads into its
    /// data; serialized now, it has `data` only.
    #[test]
    fn a_thread_of_the_old_shape_deserializes_into_its_data() {
        let old = json!({
            "id": "t",
            "messages": [],
            "todos": [{"id": "1", "title": "a", "status": "done"}],
            "files": {"src/a.rs": "fn a() {}"},
        });
        let thread: super::Thread = serde_json::from_value(old).unwrap();
        assert_eq!(
            thread.data.value("tower_agent.todos").unwrap()[0]["title"],
            "a"
        );
        assert_eq!(
            thread.data.value("tower_agent.files/src/a.rs").unwrap(),
            "fn a() {}"
        );
        let now = serde_json::to_value(&thread).unwrap();
        assert_eq!(
            now,
            json!({
                "id": "t",
                "messages": [],
                "data": {
                    "tower_agent.files/src/a.rs": "fn a() {}",
                    "tower_agent.todos": [{"id": "1", "title": "a", "status": "done"}],
                },
            })
        );
        let back: super::Thread = serde_json::from_value(now).unwrap();
        assert_eq!(back, thread);
    }
}
