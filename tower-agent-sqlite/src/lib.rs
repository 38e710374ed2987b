//! [`Sqlite`]: a [`ThreadStore`] of [tower-agent](https://docs.rs/tower-agent) in a SQLite
//! database file (tower-agent's feature `sqlite`, where this crate is `tower_agent::store::sqlite`).
//!
//! Threads survive the process: the agent loop saves the thread after every step, each save is
//! one transaction, so a process that crashes loses at most the step in flight, and a later
//! run on the same thread id (in this process or the next) continues it.
//!
//! # Example
//!
//! ```
//! use tower_agent_core::{Agent, AgentRequest, model::ScriptedModel};
//! use tower_agent_sqlite::Sqlite;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("threads.db");
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text("Nice to meet you, Ada."))
//!     .store(Sqlite::open(&path)?)
//!     .build();
//! agent.run(AgentRequest::new("I am Ada.").thread("t1")).await?;
//! drop(agent);
//!
//! // Another process, later: the thread is still there.
//! let store = Sqlite::open(&path)?;
//! let threads = store.list_threads().await?;
//! assert_eq!(threads[0].id, "t1");
//! assert_eq!(threads[0].messages, 2); // user, assistant
//! # Ok(())
//! # }
//! ```
//!
//! # What is stored
//!
//! | table | one row per | columns |
//! |---|---|---|
//! | `threads` | thread | id, revision (new at every save), message count, pending calls (JSON), created/updated (Unix ms) |
//! | `messages` | message | thread id, position, the [`Message`](tower_agent_core::message::Message) as JSON |
//! | `data` | key of the thread's [data](tower_agent_core::store::data) | thread id, key, value (JSON): the todo list (`tower_agent.todos`), one row per file written (`tower_agent.files/` and its path), your [`Persisted`](tower_agent_core::store::Persisted) types |
//! | `revisions` | (one row) | the last revision given |
//! | `journal` | tool call of a thread | thread id, call id, tool, arguments (JSON), output (JSON, `NULL` until it finished): the [tool-call journal](tower_agent_core::store::journal), deleted with the thread |
//!
//! The schema knows nothing of the built-ins: whatever a tool or layer keeps in the thread's
//! data is a row of `data`, and a save writes only the keys whose value changed (a step that
//! edits one file of fifty writes one row; a step that changes no data writes none).
//!
//! The schema is created on [`open`](Sqlite::open) (in a new or empty database, marked with
//! the `application_id` pragma) and migrated with the `user_version` pragma (version 5; an
//! older database is upgraded in place on open, in one transaction: version 5 moved the
//! todo list (column `threads.todos`) and the files (table `files`) of version 4 into
//! `data`). A file that is not a SQLite database, a
//! damaged (e.g. truncated) database, the database of another application, and a database
//! written by a newer version of this crate are refused and left untouched.
//!
//! # Open errors
//!
//! An [`OpenError`] names the file and the cause, e.g.
//! ``cannot open thread store `/data/threads.db`: the file cannot be written (read-only):
//! Read-only file system (os error 30)``. Before SQLite sees the file, `open` opens it for
//! writing itself (creating it empty if it does not exist), so a read-only file or file
//! system, a missing directory or a parent that is not a directory is reported with the
//! operating system's error, not as a bare "unable to open database file";
//! [`OpenError::is_read_only`] and [`OpenError::is_damaged`] tell the common cases apart.
//!
//! # Saving a step is cheap
//!
//! The loop hands the store the whole thread after every step. When the stored messages are
//! still a prefix of the new history (the usual step: a few messages appended) and nobody else
//! wrote the thread in between, a save appends only the new messages and writes only the
//! data keys that changed; nothing is serialized but the new messages and the changed values. Two things tell the store
//! so, checked against the thread's revision in the database inside the write transaction:
//!
//! - the history itself: a history the store loaded or saved carries a mark of what was
//!   stored (the revision and the message count, shared by the history's clones and dropped
//!   by any edit other than an append), so the save of a thread loaded from this database
//!   appends whether or not the store still remembers it — there is no cliff past the cache;
//! - a cache of the last save or load of the 1,024 threads used last (least recently used first out, O(1) per operation): the shared,
//!   copy-on-write history, not a copy, compared by pointer (one comparison per message), and
//!   the data saved (shared too: unchanged data is one pointer comparison, a changed one a
//!   comparison per key, by pointer first).
//!
//! When the history was compacted or edited, or another store wrote the thread, the save
//! compares the stored rows with the new history and rewrites from the first difference on.
//! When the cache does not hold the thread's data, the save reads the thread's data rows and
//! writes those that differ.
//!
//! # Durability and concurrency
//!
//! The database is in WAL mode with `synchronous = NORMAL`: a committed save survives a crash
//! of the process (the last few commits may be lost on a power cut). Writers wait up to 5
//! seconds for a lock held by another process (`busy_timeout`).
//!
//! A `Sqlite` runs its SQL on threads of its own, never on the async runtime's (and never on
//! tokio's blocking pool), so the number of OS threads is fixed whatever the load:
//!
//! - **one writer thread** owns the write connection. Saves, deletes and [journal](tower_agent_core::store::journal)
//!   records queue for it (at most [`WRITE_QUEUE`] (1,024) waiting; a caller beyond that waits,
//!   asynchronously, for room). It takes every write queued (up to [`MAX_BATCH`] (512)) and
//!   runs them in **one** `IMMEDIATE` transaction (group commit). A write that fails is rolled
//!   back alone and its caller gets its error, the others are committed: the batch is run
//!   again, each write in a savepoint of its own (savepoints are not paid for when nothing
//!   fails). Each caller is answered once the transaction is committed.
//! - **[`READERS`] (2) reader threads**, each with its own connection, serve loads, lists and
//!   journal look-ups in parallel with the writer (WAL readers see the last commit; a
//!   load is one read transaction). At most [`READ_QUEUE`] (1,024) reads wait for them. An
//!   in-memory database has no readers: its one connection is the writer's.
//!
//! So a store uses `1 + READERS` OS threads (one for an in-memory database). They stop, and
//! the database is closed, when the last clone of the store is dropped (the drop waits for the
//! writes already queued). A panic on one of them fails the operations in flight there (the
//! transaction rolls back) and the thread goes on; a thread that is gone makes every later
//! call an error, never a hang. Concurrent runs on different threads are safe. Two runs on the
//! *same* thread at the same time are not merged: the last save wins (see the
//! [store module docs](tower_agent_core::store)) — which is why runs take a lease.
//!
//! # Several stores on one file
//!
//! Several `Sqlite` stores may use one file (other processes, replicas of a server). A save
//! means "this is the thread now", and it is never applied onto another writer's rows:
//!
//! - Every save gives the thread a new revision from a counter of the whole database (the
//!   `revisions` table), so no two saves, not even of a thread deleted and created again,
//!   ever share a revision.
//! - Inside its write transaction, a save compares the revision (and message count) its
//!   history's mark or its cache holds with the database's. Only when they match does it
//!   append; otherwise another store wrote or deleted the thread since, and the save compares
//!   the stored rows with its history and rewrites them from the first difference (and the
//!   data rows that differ from the stored ones). Stores of one process on one file share their
//!   marks' meaning (a history saved through one appends through the other); a mark from
//!   another database never matches.
//!
//! So when two stores save the same thread, the database holds exactly one writer's thread,
//! the last one saved, never a mix of both. There is no merge and no conflict error: as with
//! every [`ThreadStore`], the last save wins.
//!
//! # Run leases
//!
//! [`ThreadStore::lease`] holds an exclusive OS file lock ([`std::fs::File::try_lock`]: `flock`
//! on Unix) on a lock file of the thread in `<database file>.leases/` (one empty file per
//! thread leased, named by the SHA-256 of its id) while the run lives. A second lease of the
//! thread — from this process or any other process that opens the same database file — is a
//! [`ThreadBusy`](tower_agent_core::store::ThreadBusy) error (the HTTP server answers `409`). The kernel drops
//! the lock when the holder closes the file: when the lease is dropped, or when its process
//! dies in any way (`kill -9` included), so a dead run never blocks its thread. An in-memory
//! database gives every lease.
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

use std::{
    collections::BTreeMap,
    fmt, io,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use tower_agent_core::{
    error::BoxError,
    store::{
        Lease, StoreTag, Thread, ThreadInfo, ThreadStore, ToolJournal,
        sql::{SavedThreads, from_millis},
    },
};

pub use self::open::OpenError;
use self::open::{OpenErrorKind, check_file, classify, prepare};

mod file_lease;
mod journal;
mod open;
mod save;
mod writer;

/// How long a writer waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A [`ThreadStore`] in a SQLite database. See the [crate docs](crate).
///
/// Cloning is one reference count; clones share the connections and their threads, which
/// stop (and close the database) when the last clone is dropped.
#[derive(Clone)]
pub struct Sqlite {
    shared: Arc<Shared>,
}

/// How many writes (saves, deletes, journal records) may wait for the writer thread; a
/// caller beyond that waits (asynchronously) for room.
pub const WRITE_QUEUE: usize = 1024;

/// The most writes the writer commits in one transaction (group commit).
pub const MAX_BATCH: usize = 512;

/// How many read connections (each on its own thread) a file-backed store opens.
pub const READERS: usize = 2;

/// How many reads (loads, lists, journal look-ups) may wait for a reader thread; a caller
/// beyond that waits (asynchronously) for room.
pub const READ_QUEUE: usize = 1024;

struct Shared {
    /// `None` for an in-memory database.
    path: Option<PathBuf>,
    #[cfg_attr(not(test), allow(dead_code))]
    ctx: Arc<Ctx>,
    /// To the writer thread. `None` once dropping (closes the channel: the thread stops).
    writes: Option<mpsc::Sender<Job>>,
    /// To the reader threads; `None` for an in-memory database (its one connection is the
    /// writer's: reads go to the writer thread) and once dropping.
    reads: Option<mpsc::Sender<ReadJob>>,
    /// The writer and reader threads, joined on drop.
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Dropped after the threads are joined (their connections closed), so the file leaves
    /// the registry only once no connection of this store is open on it.
    _open: Option<OpenFile>,
}

/// What the store's threads share.
struct Ctx {
    /// Names the database in the marks the store leaves on the histories it loads and saves
    /// ([`Messages::stored_len`]): one per database file in this process (stores on one file
    /// share it: revisions are the file's), one per in-memory database.
    tag: StoreTag,
    cache: Mutex<SavedThreads>,
    /// Stored message rows a save read back to compare with its history (the rewrite path).
    compared_rows: AtomicU64,
    /// The largest number of writes committed in one transaction so far.
    largest_batch: AtomicUsize,
}

impl Ctx {
    fn cache(&self) -> MutexGuard<'_, SavedThreads> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Reply = oneshot::Sender<Result<(), BoxError>>;

/// A read: runs on a reader thread (or the writer's, for an in-memory database) and sends
/// its own answer.
type ReadJob = Box<dyn FnOnce(&mut Connection, &Ctx) + Send>;

/// A write, run inside the writer's transaction (again, in a savepoint of its own, if
/// another write of its batch failed).
type Exec = Box<dyn Fn(&Connection) -> Result<(), BoxError> + Send>;

enum Job {
    Write(Write, Reply),
    Read(ReadJob),
    /// Stops the writer thread as if it had died (tests).
    #[cfg(test)]
    Exit,
}

enum Write {
    Save(Thread),
    Delete(String),
    Exec(Exec),
}

/// A database file held open by a [`Sqlite`] of this process, by device and inode, with how
/// many stores hold it and its tag (see [`Ctx::tag`]).
///
/// POSIX record locks belong to the process, not to a file descriptor: opening the file a
/// second time (for the header check in [`Sqlite::open`]) and closing it would release the
/// locks SQLite holds on it through another store's connection, and let another process
/// write under it. A file in the registry was checked by the store that holds it, so `open`
/// skips the check for it. (SQLite's "How To Corrupt An SQLite Database File", section 2.2:
/// in WAL mode the locks that matter live in the `-shm` file, so this guards the rollback-journal
/// mode a file falls back to where WAL is unavailable.)
static OPEN_FILES: Mutex<BTreeMap<FileKey, (usize, StoreTag)>> = Mutex::new(BTreeMap::new());

/// Device and inode of a file (`None` where the platform has no such notion).
type FileKey = (u64, u64);

fn file_key(path: &Path) -> Option<FileKey> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

fn open_files() -> MutexGuard<'static, BTreeMap<FileKey, (usize, StoreTag)>> {
    OPEN_FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// One store's entry in [`OPEN_FILES`].
struct OpenFile(FileKey);

impl Drop for OpenFile {
    fn drop(&mut self) {
        let mut files = open_files();
        if let Some((count, _)) = files.get_mut(&self.0) {
            *count -= 1;
            if *count == 0 {
                files.remove(&self.0);
            }
        }
    }
}

impl Drop for Shared {
    /// Closes the channels (the threads finish the jobs queued and stop) and joins the
    /// threads, so the database is closed when the last handle is gone.
    fn drop(&mut self) {
        self.writes.take();
        self.reads.take();
        let me = std::thread::current().id();
        for handle in self.threads.drain(..) {
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

// ===== impl Sqlite =====

impl Sqlite {
    /// Opens (or creates) the database at `path`, creating or migrating its schema, and
    /// turns on WAL mode. The parent directory must exist.
    ///
    /// This blocks while it opens the file; call it at startup (or in `spawn_blocking`).
    ///
    /// # Errors
    ///
    /// An [`OpenError`] naming the file if it cannot be opened, is not a SQLite database or
    /// is another application's (the file is then left exactly as it was), was written by a
    /// newer version of this crate, or the schema cannot be created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let fail = |kind, source: Option<BoxError>| OpenError {
            path: path.to_owned(),
            kind,
            source,
        };
        // Check the header before SQLite touches the file: whatever it is, a file that is not
        // a database is never written (no journal, no WAL switch, no schema). Not for a file
        // another store of this process holds open (see `OPEN_FILES`); the registry stays
        // locked until this store is in it, so two opens of one file do not both check.
        let (open, tag) = {
            let mut registry = open_files();
            if !file_key(path).is_some_and(|key| registry.contains_key(&key)) {
                check_file(path).map_err(|(kind, source)| fail(kind, source))?;
            }
            // The check may have created the file: its key only now.
            match file_key(path) {
                Some(key) => {
                    let entry = registry
                        .entry(key)
                        .or_insert_with(|| (0, StoreTag::unique()));
                    entry.0 += 1;
                    (Some(OpenFile(key)), entry.1)
                }
                None => (None, StoreTag::unique()),
            }
        };
        let connect = || {
            let conn = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|e| fail(classify(&e), Some(e.into())))?;
            conn.busy_timeout(BUSY_TIMEOUT)
                .map_err(|e| fail(classify(&e), Some(e.into())))?;
            Ok::<_, OpenError>(conn)
        };
        let conn = prepare(connect()?, true).map_err(|(kind, source)| fail(kind, source))?;
        let readers = (0..READERS)
            .map(|_| connect())
            .collect::<Result<Vec<_>, _>>()?;
        Self::start(conn, readers, Some(path.to_owned()), open, tag)
            .map_err(|e| fail(OpenErrorKind::Thread, Some(e.into())))
    }

    /// A new, empty database in memory (gone when the last clone is dropped). For tests.
    ///
    /// # Errors
    ///
    /// Fails only if SQLite cannot allocate the database.
    pub fn memory() -> Result<Self, OpenError> {
        let fail = |kind, source: Option<BoxError>| OpenError {
            path: PathBuf::from(":memory:"),
            kind,
            source,
        };
        let conn = Connection::open_in_memory().map_err(|e| fail(classify(&e), Some(e.into())))?;
        let conn = prepare(conn, false).map_err(|(kind, source)| fail(kind, source))?;
        Self::start(conn, Vec::new(), None, None, StoreTag::unique())
            .map_err(|e| fail(OpenErrorKind::Thread, Some(e.into())))
    }

    /// Starts the writer thread on `conn` and a reader thread on each of `readers` (none:
    /// the writer's connection serves the reads).
    fn start(
        conn: Connection,
        readers: Vec<Connection>,
        path: Option<PathBuf>,
        open: Option<OpenFile>,
        tag: StoreTag,
    ) -> io::Result<Self> {
        let ctx = Arc::new(Ctx {
            tag,
            cache: Mutex::new(SavedThreads::new(SavedThreads::DEFAULT_CAPACITY)),
            compared_rows: AtomicU64::new(0),
            largest_batch: AtomicUsize::new(0),
        });
        // Built first, so that a thread that fails to start stops the ones started (their
        // channels close when this is dropped).
        let mut shared = Shared {
            path,
            ctx: Arc::clone(&ctx),
            writes: None,
            reads: None,
            threads: Vec::with_capacity(1 + readers.len()),
            _open: open,
        };
        let (writes, rx) = mpsc::channel(WRITE_QUEUE);
        shared.writes = Some(writes);
        conn.set_prepared_statement_cache_capacity(32);
        let writer_ctx = Arc::clone(&ctx);
        shared.threads.push(
            std::thread::Builder::new()
                .name("tower-agent-sqlite-writer".into())
                .spawn(move || writer::writer(conn, &writer_ctx, rx))?,
        );
        if !readers.is_empty() {
            let (reads, rx) = mpsc::channel::<ReadJob>(READ_QUEUE);
            shared.reads = Some(reads);
            let rx = Arc::new(Mutex::new(rx));
            for mut conn in readers {
                conn.set_prepared_statement_cache_capacity(32);
                let (ctx, rx) = (Arc::clone(&ctx), Arc::clone(&rx));
                shared.threads.push(
                    std::thread::Builder::new()
                        .name("tower-agent-sqlite-reader".into())
                        .spawn(move || {
                            loop {
                                // One reader waits on the channel, the others on the lock.
                                let job =
                                    rx.lock().unwrap_or_else(|p| p.into_inner()).blocking_recv();
                                let Some(job) = job else { break };
                                // A panic drops the job's answer: its caller gets an error.
                                let _ = catch_unwind(AssertUnwindSafe(|| job(&mut conn, &ctx)));
                            }
                        })?,
                );
            }
        }
        Ok(Sqlite {
            shared: Arc::new(shared),
        })
    }

    /// The database file (`None` for [`memory`](Self::memory)).
    pub fn path(&self) -> Option<&Path> {
        self.shared.path.as_deref()
    }

    /// The threads in the store, most recently updated first.
    ///
    /// # Errors
    ///
    /// Fails if the database cannot be read.
    pub async fn list_threads(&self) -> Result<Vec<ThreadInfo>, BoxError> {
        self.read(|conn, _| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, message_count, created_at, updated_at FROM threads
                 ORDER BY updated_at DESC, id",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(ThreadInfo::new(
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)?.try_into().unwrap_or(0),
                    from_millis(row.get(2)?),
                    from_millis(row.get(3)?),
                ))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Deletes the thread `id` (its messages and data); deleting a missing thread is not
    /// an error. The same as [`ThreadStore::delete`].
    ///
    /// # Errors
    ///
    /// Fails if the database cannot be written.
    pub async fn delete_thread(&self, id: &str) -> Result<(), BoxError> {
        self.write(Write::Delete(id.to_owned())).await
    }

    /// Runs `write` on the writer thread, in the next transaction it commits; answers once
    /// that transaction is committed (or the write failed).
    async fn write(&self, write: Write) -> Result<(), BoxError> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Write(write, reply)).await?;
        answer.await.map_err(|_| failed())?
    }

    /// Runs `f` on a reader thread (the writer's for an in-memory database).
    async fn read<T, F>(&self, f: F) -> Result<T, BoxError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Ctx) -> Result<T, BoxError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn, ctx| {
            let _ = reply.send(f(conn, ctx));
        });
        match &self.shared.reads {
            Some(reads) => reads.send(job).await.map_err(|_| stopped())?,
            None => self.send(Job::Read(job)).await?,
        }
        answer.await.map_err(|_| failed())?
    }

    async fn send(&self, job: Job) -> Result<(), BoxError> {
        match &self.shared.writes {
            Some(writes) => writes.send(job).await.map_err(|_| stopped()),
            None => Err(stopped()),
        }
    }
}

fn stopped() -> BoxError {
    "sqlite thread store: its writer thread has stopped".into()
}

fn failed() -> BoxError {
    "sqlite thread store: the operation was not done: the store's thread failed or stopped \
     (see the log)"
        .into()
}

impl fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sqlite")
            .field(
                "path",
                &self.shared.path.as_deref().unwrap_or(Path::new(":memory:")),
            )
            .finish_non_exhaustive()
    }
}

impl ThreadStore for Sqlite {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        let id = id.to_owned();
        Box::pin(self.read(move |conn, ctx| save::load(conn, ctx, id)))
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        // Cheap: the history is shared, file contents are reference counted.
        Box::pin(self.write(Write::Save(thread.clone())))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(self.delete_thread(id))
    }

    /// Across the processes that open this database file: an OS file lock per thread (see
    /// [Run leases](self#run-leases)). An in-memory database is one process's: every lease is
    /// given.
    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        Box::pin(async move {
            match &self.shared.path {
                Some(path) => file_lease::take(path, id),
                None => Ok(Lease::free()),
            }
        })
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use serde_json::json;
    use tower_agent_core::message::{Message, Messages};

    use super::*;

    async fn count_rows(store: &Sqlite, id: &str) -> i64 {
        let id = id.to_owned();
        store
            .read(move |conn, _| {
                Ok(conn.query_row(
                    "SELECT count(*) FROM messages WHERE thread_id = ?1",
                    [id],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap()
    }

    fn thread(id: &str, texts: &[&str]) -> Thread {
        let mut t = Thread::new(id);
        t.messages = texts.iter().map(|t| Message::user(*t)).collect();
        t
    }

    #[tokio::test]
    async fn round_trip_append_and_rewrite() {
        let store = Sqlite::memory().unwrap();
        assert!(store.load("t").await.unwrap().is_none());

        let mut t = thread("t", &["a", "b"]);
        // The todo list and two files, as tower-agent's built-ins keep them.
        let todo = |status| json!([{"id": "1", "title": "x", "status": status}]);
        t.data.set_value("tower_agent.todos", todo("pending"));
        t.data.set_value("tower_agent.files//f", json!("one"));
        store.save(&t).await.unwrap();

        // Append: the history shares its prefix with what was saved.
        t.messages.push(Message::assistant("c"));
        t.data.set_value("tower_agent.todos", todo("done"));
        t.data.set_value("tower_agent.files//g", json!("two"));
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t").await, 3);

        // Compaction: rewrite from the first difference.
        t.messages.splice(0..2, [Message::user("summary")]);
        t.data.remove_value("tower_agent.files//f");
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t").await, 2);

        // A fresh store on the same connection state (no cache) still diffs correctly.
        store.shared.ctx.cache().remove("t");
        t.messages.push(Message::user("d"));
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);

        // Shorter history than stored.
        store.shared.ctx.cache().remove("t");
        t.messages.truncate(1);
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t").await, 1);

        store.delete("t").await.unwrap();
        assert!(store.load("t").await.unwrap().is_none());
        assert_eq!(count_rows(&store, "t").await, 0);
        store.delete("t").await.unwrap();
    }

    #[tokio::test]
    async fn equal_but_not_shared_history_is_diffed() {
        let store = Sqlite::memory().unwrap();
        let t = thread("t", &["a", "b"]);
        store.save(&t).await.unwrap();
        // A copy (not shared with the cached history) with an edited middle message.
        let mut other = Thread {
            messages: Messages::from(t.messages.to_vec()),
            ..t.clone()
        };
        other.messages.get_mut(1).unwrap().push_text("!");
        other.messages.push(Message::user("c"));
        store.save(&other).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), other);
    }

    fn compared(store: &Sqlite) -> u64 {
        store.shared.ctx.compared_rows.load(Ordering::Relaxed)
    }

    fn long_thread(id: &str, n: usize) -> Thread {
        let mut t = Thread::new(id);
        for i in 0..n {
            t.messages.push(Message::user(format!("message {i}")));
        }
        t
    }

    /// Past the cache's size, a save of a thread loaded or saved by the store appends: no
    /// stored row is read back (the old store compared all 1,000), only the new ones are
    /// written. The same across two stores on one file, and after a load.
    #[tokio::test]
    async fn a_cache_miss_appends_without_reading_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = Sqlite::open(dir.path().join("t.db")).unwrap();
        let mut big = long_thread("big", 1000);
        store.save(&big).await.unwrap();
        // Evict it: more threads saved since than the cache holds.
        for i in 0..SavedThreads::DEFAULT_CAPACITY + 10 {
            store
                .save(&thread(&format!("small{i}"), &["x"]))
                .await
                .unwrap();
        }
        assert!(store.shared.ctx.cache().get("big").is_none());
        let before = compared(&store);
        big.messages.push(Message::assistant("step"));
        big.messages.push(Message::user("next"));
        store.save(&big).await.unwrap();
        assert_eq!(compared(&store) - before, 0, "stored rows were read back");
        assert_eq!(count_rows(&store, "big").await, 1002);

        // Another store on the same file (cold cache), after a load through the first.
        let other = Sqlite::open(dir.path().join("t.db")).unwrap();
        let mut loaded = store.load("big").await.unwrap().unwrap();
        loaded
            .messages
            .push(Message::assistant("from the other store"));
        other.save(&loaded).await.unwrap();
        big.messages.push(Message::assistant("stale"));
        // `big` was saved at an older revision: compared, and the last save wins.
        store.save(&big).await.unwrap();
        assert!(compared(&store) - before > 0);
        assert_eq!(other.load("big").await.unwrap().unwrap(), big);
    }

    /// The mark never lets a history append onto rows that are not its own: histories that
    /// diverged after a load, an edit in place, a compaction.
    #[tokio::test]
    async fn a_mark_is_trusted_only_for_the_very_history_stored() {
        let store = Sqlite::memory().unwrap();
        store.save(&long_thread("t", 5)).await.unwrap();
        let loaded = store.load("t").await.unwrap().unwrap();
        let (mut a, mut b) = (loaded.clone(), loaded);
        a.messages.push(Message::assistant("a"));
        b.messages.push(Message::assistant("b"));
        store.save(&a).await.unwrap();
        store.save(&b).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), b);
        store.save(&a).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), a);
        // Edited in place (the same length) and saved.
        a.messages.get_mut(2).unwrap().push_text(" edited");
        store.save(&a).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), a);
        a.messages.get_mut(5).unwrap().push_text(" edited");
        a.messages.push(Message::user("more"));
        store.save(&a).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), a);
        a.messages.splice(0..2, [Message::user("summary")]);
        store.save(&a).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), a);
        // Deleted and saved again by a history that still carries an old mark.
        store.delete("t").await.unwrap();
        store.save(&long_thread("t", 2)).await.unwrap();
        a.messages.push(Message::user("after the delete"));
        store.save(&a).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), a);
    }

    /// Saves queued together are committed in one transaction, and one that fails (a trigger
    /// refuses it) fails alone: the others are stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn group_commit_fails_a_save_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Sqlite::open(&path).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.body LIKE '%POISON%'
                 BEGIN SELECT RAISE(ABORT, 'poisoned'); END;",
            )
            .unwrap();
        let saves = (0..200).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let text = if i % 4 == 0 { "POISON" } else { "fine" };
                store.save(&thread(&format!("t{i}"), &["a", text])).await
            })
        });
        let results = futures_util::future::join_all(saves).await;
        for (i, result) in results.into_iter().enumerate() {
            let result = result.unwrap();
            let loaded = store.load(&format!("t{i}")).await.unwrap();
            if i % 4 == 0 {
                assert!(result.unwrap_err().to_string().contains("poisoned"));
                assert!(loaded.is_none());
            } else {
                result.unwrap();
                assert_eq!(loaded.unwrap().messages.len(), 2);
            }
        }
        assert!(store.shared.ctx.largest_batch.load(Ordering::Relaxed) > 1);
    }

    /// A batch whose transaction cannot begin (another connection holds the write lock past
    /// the busy timeout) fails every write of it with the cause, stores nothing, and the
    /// store works again once the lock is released.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_that_cannot_begin_fails_every_write_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Sqlite::open(&path).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let saves = (0..3).map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.save(&thread(&format!("t{i}"), &["a"])).await })
        });
        for result in futures_util::future::join_all(saves).await {
            let e = result.unwrap().unwrap_err().to_string();
            assert!(
                e.contains("the transaction of this write failed") && e.contains("locked"),
                "{e}"
            );
        }
        other.execute_batch("ROLLBACK").unwrap();
        for i in 0..3 {
            assert!(store.load(&format!("t{i}")).await.unwrap().is_none());
        }
        store.save(&thread("t0", &["a", "b"])).await.unwrap();
        let loaded = store.load("t0").await.unwrap().unwrap();
        assert_eq!(loaded.messages.len(), 2);
    }

    /// A write that panics fails its caller and its batch; the writer lives on. A writer that
    /// is gone is an error for every later call, not a hang.
    #[tokio::test]
    async fn a_failed_writer_is_an_error_not_a_hang() {
        let store = Sqlite::memory().unwrap();
        let err = store
            .write(Write::Exec(Box::new(|_| panic!("boom"))))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("thread failed"), "{err}");
        store.save(&thread("t", &["a"])).await.unwrap();
        assert!(store.load("t").await.unwrap().is_some());

        store.send(Job::Exit).await.unwrap();
        let five = Duration::from_secs(5);
        let t = thread("t", &["b"]);
        // Either queued with the exit (dropped) or sent after: an error either way.
        for _ in 0..2 {
            let save = tokio::time::timeout(five, store.save(&t));
            let err = save.await.unwrap().unwrap_err();
            assert!(err.to_string().contains("stopped"), "{err}");
        }
        let load = tokio::time::timeout(five, store.load("t"));
        assert!(load.await.unwrap().is_err());
    }

    #[test]
    fn file_check() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        assert!(check_file(&empty).is_ok());
        assert!(check_file(&dir.path().join("missing.db")).is_ok());
        let short = dir.path().join("short.db");
        std::fs::write(&short, b"SQLite").unwrap();
        assert!(matches!(
            check_file(&short),
            Err((OpenErrorKind::NotADatabase, _))
        ));
    }
}
