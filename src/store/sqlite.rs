//! [`Sqlite`]: a [`ThreadStore`] in a SQLite database file (feature `sqlite`).
//!
//! Threads survive the process: the agent loop saves the thread after every step, each save is
//! one transaction, so a process that crashes loses at most the step in flight, and a later
//! run on the same thread id (in this process or the next) continues it.
//!
//! # Example
//!
//! ```
//! use tower_agent::{Agent, AgentRequest, model::ScriptedModel, store::Sqlite};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::BoxError> {
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
//! | `threads` | thread | id, revision (new at every save), message count, todos (JSON), pending calls (JSON), created/updated (Unix ms) |
//! | `messages` | message | thread id, position, the [`Message`] as JSON |
//! | `files` | file written in the thread | thread id, path, content |
//! | `revisions` | (one row) | the last revision given |
//! | `journal` | tool call of a thread | thread id, call id, tool, arguments (JSON), output (JSON, `NULL` until it finished): the [tool-call journal](crate::store::journal), deleted with the thread |
//!
//! The schema is created on [`open`](Sqlite::open) (in a new or empty database, marked with
//! the `application_id` pragma) and migrated with the `user_version` pragma (version 3; an
//! older database is upgraded in place on open). A file that is not a SQLite database, a
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
//! files that changed; nothing is serialized but the new messages. Two things tell the store
//! so, checked against the thread's revision in the database inside the write transaction:
//!
//! - the history itself: a history the store loaded or saved carries a mark of what was
//!   stored (the revision and the message count, shared by the history's clones and dropped
//!   by any edit other than an append), so the save of a thread loaded from this database
//!   appends whether or not the store still remembers it — there is no cliff past the cache;
//! - a cache of the last save or load of the 1,024 threads used last (least recently used first out, O(1) per operation): the shared,
//!   copy-on-write history, not a copy, compared by pointer (one comparison per message), and
//!   the files saved.
//!
//! When the history was compacted or edited, or another store wrote the thread, the save
//! compares the stored rows with the new history and rewrites from the first difference on.
//! When the cache does not hold the thread's files, the save reads the thread's file rows and
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
//! - **one writer thread** owns the write connection. Saves, deletes and [journal](crate::store::journal)
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
//! [store module docs](crate::store)) — which is why runs take a lease.
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
//!   files that differ from the stored ones). Stores of one process on one file share their
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
//! [`ThreadBusy`](super::ThreadBusy) error (the HTTP server answers `409`). The kernel drops
//! the lock when the holder closes the file: when the lease is dropped, or when its process
//! dies in any way (`kill -9` included), so a dead run never blocks its thread. An in-memory
//! database gives every lease.

use std::{
    collections::BTreeMap,
    error::Error as StdError,
    fmt,
    fs::OpenOptions,
    io::{self, Read},
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use futures_util::future::BoxFuture;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use super::ThreadInfo;
use super::{
    Lease, Thread, ThreadStore,
    rows::{
        Cache, Cached, DEFAULT_CACHE_THREADS, FirstDifference, Plan, file_changes, from_millis,
        is_current, new_tag, plan, serialize, to_millis,
    },
};
use crate::{
    context::Todo,
    error::BoxError,
    message::{Message, Messages},
};

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// How long a writer waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema migrations: `MIGRATIONS[n]` takes `user_version` from `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: threads, their messages (one row each) and the files written in them.
    "CREATE TABLE threads (
        id TEXT PRIMARY KEY NOT NULL,
        revision INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        todos TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX threads_updated_at ON threads (updated_at);
    CREATE TABLE messages (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE TABLE files (
        thread_id TEXT NOT NULL,
        path TEXT NOT NULL,
        content TEXT NOT NULL,
        PRIMARY KEY (thread_id, path)
    );",
    // 2: one revision counter for the whole database. A thread's revision used to count its
    // own saves, so a thread deleted and saved again started over at 1 and a stale store could
    // take it for the thread it had cached. Every save now takes the next value of this
    // counter: a revision is never given twice, not even across a delete.
    "CREATE TABLE revisions (
        id INTEGER PRIMARY KEY NOT NULL CHECK (id = 0),
        last INTEGER NOT NULL
    );
    INSERT INTO revisions (id, last) SELECT 0, coalesce(max(revision), 0) FROM threads;",
    // 3: the calls of an interrupted run that wait for approval (JSON array).
    "ALTER TABLE threads ADD COLUMN pending TEXT NOT NULL DEFAULT '[]';",
    // 4: the tool-call journal (`store::journal`): one row per call of a thread, `output`
    // NULL while the call is started and not finished.
    "CREATE TABLE journal (
        thread_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        output TEXT,
        PRIMARY KEY (thread_id, call_id)
    );",
];

/// The `application_id` of a tower-agent thread database: `"tagt"`.
const APPLICATION_ID: i32 = i32::from_be_bytes(*b"tagt");

/// The schema version this crate writes.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A [`ThreadStore`] in a SQLite database. See the [module docs](crate::store::sqlite).
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
    /// ([`Messages::stored_as`]): one per database file in this process (stores on one file
    /// share it: revisions are the file's), one per in-memory database.
    tag: u64,
    cache: Mutex<Cache>,
    /// Stored message rows a save read back to compare with its history (the rewrite path).
    compared_rows: AtomicU64,
    /// The largest number of writes committed in one transaction so far.
    largest_batch: AtomicUsize,
}

impl Ctx {
    fn cache(&self) -> MutexGuard<'_, Cache> {
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
static OPEN_FILES: Mutex<BTreeMap<FileKey, (usize, u64)>> = Mutex::new(BTreeMap::new());

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

fn open_files() -> MutexGuard<'static, BTreeMap<FileKey, (usize, u64)>> {
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
                    let entry = registry.entry(key).or_insert_with(|| (0, new_tag()));
                    entry.0 += 1;
                    (Some(OpenFile(key)), entry.1)
                }
                None => (None, new_tag()),
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
        Self::start(conn, Vec::new(), None, None, new_tag())
            .map_err(|e| fail(OpenErrorKind::Thread, Some(e.into())))
    }

    /// Starts the writer thread on `conn` and a reader thread on each of `readers` (none:
    /// the writer's connection serves the reads).
    fn start(
        conn: Connection,
        readers: Vec<Connection>,
        path: Option<PathBuf>,
        open: Option<OpenFile>,
        tag: u64,
    ) -> io::Result<Self> {
        let ctx = Arc::new(Ctx {
            tag,
            cache: Mutex::new(Cache::new(DEFAULT_CACHE_THREADS)),
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
                .spawn(move || writer(conn, &writer_ctx, rx))?,
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
                Ok(ThreadInfo {
                    id: row.get(0)?,
                    messages: row.get::<_, i64>(1)?.try_into().unwrap_or(0),
                    created_at: from_millis(row.get(2)?),
                    updated_at: from_millis(row.get(3)?),
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Deletes the thread `id` (messages, todos and files); deleting a missing thread is not
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

/// The writer thread: takes every write queued (up to [`MAX_BATCH`]), runs them in one
/// transaction, commits it, and answers each caller.
fn writer(mut conn: Connection, ctx: &Ctx, mut rx: mpsc::Receiver<Job>) {
    let mut jobs = Vec::new();
    while let Some(job) = rx.blocking_recv() {
        jobs.push(job);
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let mut writes = Vec::with_capacity(jobs.len());
        let mut reads = Vec::new();
        for job in jobs.drain(..) {
            match job {
                Job::Write(write, reply) => writes.push((write, reply)),
                Job::Read(read) => reads.push(read),
                #[cfg(test)]
                Job::Exit => return,
            }
        }
        if !writes.is_empty()
            && catch_unwind(AssertUnwindSafe(|| commit(&mut conn, ctx, writes))).is_err()
        {
            // The transaction rolled back as it unwound and the callers got an error (their
            // answers were dropped). What the cache holds may be off: forget it.
            tracing::error!("sqlite thread store: a write panicked; its transaction failed");
            ctx.cache().clear();
        }
        for read in reads {
            let _ = catch_unwind(AssertUnwindSafe(|| read(&mut conn, ctx)));
        }
    }
}

/// Commits `writes` in one transaction and answers each caller.
///
/// The batch is first run as it is: a savepoint per write journals every page the write
/// changes, which costs more than the write itself, and writes almost never fail. If one
/// does, the transaction is rolled back and the batch run again with a savepoint per write,
/// so that the failing write is rolled back alone and its caller gets its error while the
/// others are committed.
fn commit(conn: &mut Connection, ctx: &Ctx, writes: Vec<(Write, Reply)>) {
    ctx.largest_batch.fetch_max(writes.len(), Ordering::Relaxed);
    if writes.len() > 1 {
        match all_or_nothing(conn, ctx, &writes) {
            Ok(revisions) => {
                for ((write, reply), revision) in writes.into_iter().zip(revisions) {
                    committed(ctx, write, revision);
                    let _ = reply.send(Ok(()));
                }
                return;
            }
            Err(Failed::Write) => {} // rolled back: again, one savepoint per write
            Err(Failed::Commit(e)) => return fail_all(ctx, writes, &e),
        }
    }
    let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return fail_all(ctx, writes, &e.to_string()),
    };
    let mut done = Vec::with_capacity(writes.len());
    // A savepoint only when there are others to keep.
    let alone = writes.len() == 1;
    for (write, reply) in writes {
        let result = if alone {
            apply(&tx, ctx, &write)
        } else {
            tx.savepoint().map_err(BoxError::from).and_then(|sp| {
                let revision = apply(&sp, ctx, &write)?;
                sp.commit()?;
                Ok(revision)
            })
        };
        if alone && let Err(e) = result {
            // Nothing of it may be committed.
            forget(ctx, &write);
            let _ = reply.send(Err(e));
            return;
        }
        done.push((write, result, reply));
    }
    match tx.commit() {
        Ok(()) => {
            for (write, result, reply) in done {
                let answer = match result {
                    Ok(revision) => {
                        committed(ctx, write, revision);
                        Ok(())
                    }
                    Err(e) => {
                        forget(ctx, &write);
                        Err(e)
                    }
                };
                let _ = reply.send(answer);
            }
        }
        Err(e) => {
            let writes = done.into_iter().map(|(w, _, r)| (w, r)).collect();
            fail_all(ctx, writes, &e.to_string());
        }
    }
}

/// Why [`all_or_nothing`] stored nothing.
enum Failed {
    /// A write failed; the transaction was rolled back.
    Write,
    /// The transaction could not begin or commit.
    Commit(String),
}

/// Runs every write of `writes` in one transaction with no savepoint, and commits it only
/// if all of them succeeded; returns each write's revision.
fn all_or_nothing(
    conn: &mut Connection,
    ctx: &Ctx,
    writes: &[(Write, Reply)],
) -> Result<Vec<Option<i64>>, Failed> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| Failed::Commit(e.to_string()))?;
    let mut revisions = Vec::with_capacity(writes.len());
    for (write, _) in writes {
        // On an error the transaction rolls back as it is dropped.
        revisions.push(apply(&tx, ctx, write).map_err(|_| Failed::Write)?);
    }
    tx.commit().map_err(|e| Failed::Commit(e.to_string()))?;
    Ok(revisions)
}

/// Answers every caller of `writes` with the error `e` (the transaction could not begin or
/// commit): nothing of the batch is stored.
fn fail_all(ctx: &Ctx, writes: Vec<(Write, Reply)>, e: &str) {
    for (_, reply) in writes {
        let _ = reply.send(Err(format!(
            "sqlite thread store: the transaction of this write failed: {e}"
        )
        .into()));
    }
    ctx.cache().clear();
}

/// Runs one write in the writer's transaction; a save answers its new revision.
fn apply(conn: &Connection, ctx: &Ctx, write: &Write) -> Result<Option<i64>, BoxError> {
    match write {
        Write::Save(thread) => save(conn, ctx, thread).map(Some),
        Write::Delete(id) => {
            conn.prepare_cached("DELETE FROM messages WHERE thread_id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM files WHERE thread_id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM threads WHERE id = ?1")?
                .execute([id])?;
            conn.prepare_cached("DELETE FROM journal WHERE thread_id = ?1")?
                .execute([id])?;
            Ok(None)
        }
        Write::Exec(exec) => {
            exec(conn)?;
            Ok(None)
        }
    }
}

/// What a committed write changes in memory: the cache, and the mark on the saved history.
fn committed(ctx: &Ctx, write: Write, revision: Option<i64>) {
    match (write, revision) {
        (Write::Save(thread), Some(revision)) => {
            thread.messages.mark_stored(ctx.tag, revision);
            ctx.cache().put(
                thread.id,
                Cached::new(revision, thread.messages, thread.files),
            );
        }
        (Write::Delete(id), _) => ctx.cache().remove(&id),
        _ => {}
    }
}

/// A write that failed: what the cache holds of its thread may be off.
fn forget(ctx: &Ctx, write: &Write) {
    if let Write::Save(thread) = write {
        ctx.cache().remove(&thread.id);
    }
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
        Box::pin(self.read(move |conn, ctx| load(conn, ctx, id)))
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
                Some(path) => super::file_lease::take(path, id),
                None => Ok(Lease::free()),
            }
        })
    }

    fn journal(&self) -> Option<&dyn super::ToolJournal> {
        Some(self)
    }
}

mod journal;

// ===== opening =====

/// Checks the file before SQLite touches it, so that the errors name their cause:
///
/// - a missing file is created here (empty: SQLite makes it a new database), so that a
///   directory that does not exist or cannot be written is reported with the OS error
///   (SQLite would only say "unable to open database file");
/// - a file that cannot be opened for writing (a read-only file or file system) is refused
///   with the OS error (SQLite would open it read-only and fail on the first save);
/// - a file that is not empty and does not start with the SQLite header is refused.
fn check_file(path: &Path) -> Result<(), (OpenErrorKind, Option<BoxError>)> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return match OpenOptions::new().write(true).create_new(true).open(path) {
                // Created empty, or by another process in the meantime: SQLite takes over.
                Ok(_) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err((OpenErrorKind::Create, Some(e.into()))),
            };
        }
        Err(e) if is_read_only(&e) => return Err((OpenErrorKind::ReadOnly, Some(e.into()))),
        Err(e) => return Err((OpenErrorKind::Io, Some(e.into()))),
    };
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    (&mut file)
        .take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| (OpenErrorKind::Io, Some(e.into())))?;
    if head.is_empty() || head == SQLITE_HEADER {
        Ok(())
    } else {
        Err((OpenErrorKind::NotADatabase, None))
    }
}

/// Whether opening a file for writing failed because it (or its file system) is read-only.
fn is_read_only(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
    )
}

/// Configures a fresh connection and brings its schema up to date.
fn prepare(
    mut conn: Connection,
    wal: bool,
) -> Result<Connection, (OpenErrorKind, Option<BoxError>)> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_error)?;
    // The first read of the file: SQLite reports a damaged header here, before any write.
    let found = schema_version(&conn)?;
    if found < SCHEMA_VERSION {
        // Another process may be migrating the same file: decide under the write lock.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error)?;
        let version = schema_version(&tx)?;
        for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(migration).map_err(|e| {
                (
                    OpenErrorKind::Migration {
                        to: from as i64 + 1,
                    },
                    Some(e.into()),
                )
            })?;
        }
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(sql_error)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sql_error)?;
        tx.commit().map_err(sql_error)?;
    }
    if wal {
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(sql_error)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "sqlite thread store: WAL mode not available");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql_error)?;
        // Savepoint journals (group commit) in memory, not in temporary files.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(sql_error)?;
    }
    Ok(conn)
}

/// The schema version of a database this store may use: one it created (its application id),
/// or an empty one (version 0). Refuses the database of another application and one of a
/// newer version of this crate.
fn schema_version(conn: &Connection) -> Result<i64, (OpenErrorKind, Option<BoxError>)> {
    let pragma = |name| {
        conn.pragma_query_value(None, name, |row| row.get::<_, i64>(0))
            .map_err(sql_error)
    };
    let (application, version) = (pragma("application_id")?, pragma("user_version")?);
    if application != i64::from(APPLICATION_ID) {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .map_err(sql_error)?;
        if application != 0 || version != 0 || tables != 0 {
            return Err((OpenErrorKind::Foreign, None));
        }
    }
    if version > SCHEMA_VERSION {
        return Err((OpenErrorKind::TooNew { found: version }, None));
    }
    Ok(version)
}

fn sql_error(e: rusqlite::Error) -> (OpenErrorKind, Option<BoxError>) {
    (classify(&e), Some(e.into()))
}

fn classify(e: &rusqlite::Error) -> OpenErrorKind {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => OpenErrorKind::NotADatabase,
        Some(ErrorCode::DatabaseCorrupt) => OpenErrorKind::Damaged,
        Some(ErrorCode::ReadOnly) => OpenErrorKind::ReadOnly,
        Some(ErrorCode::CannotOpen) => OpenErrorKind::CannotOpen,
        _ => OpenErrorKind::Sqlite,
    }
}

/// Why [`Sqlite::open`] failed. Its `Display` names the file.
pub struct OpenError {
    path: PathBuf,
    kind: OpenErrorKind,
    source: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenErrorKind {
    Io,
    Create,
    ReadOnly,
    CannotOpen,
    Damaged,
    NotADatabase,
    TooNew { found: i64 },
    Foreign,
    Migration { to: i64 },
    Thread,
    Sqlite,
}

impl OpenError {
    /// The file that could not be opened (`:memory:` for an in-memory database).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file is not a SQLite database (it was left untouched).
    pub fn is_not_a_database(&self) -> bool {
        self.kind == OpenErrorKind::NotADatabase
    }

    /// The file is a SQLite database, but not one of this crate (it has tables, or another
    /// application's id); it was left untouched.
    pub fn is_foreign(&self) -> bool {
        self.kind == OpenErrorKind::Foreign
    }

    /// The file (or its file system) is read-only, or this process may not write it.
    pub fn is_read_only(&self) -> bool {
        self.kind == OpenErrorKind::ReadOnly
    }

    /// The file is a damaged SQLite database: truncated, or its pages are corrupt. It was
    /// left untouched.
    pub fn is_damaged(&self) -> bool {
        self.kind == OpenErrorKind::Damaged
    }

    /// The database was written by a newer version of this crate (its schema version is
    /// higher than the one this version knows).
    pub fn is_too_new(&self) -> bool {
        matches!(self.kind, OpenErrorKind::TooNew { .. })
    }
}

impl fmt::Debug for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenError")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for OpenError {
    /// ``cannot open thread store `PATH`: WHAT IS WRONG: THE OS OR SQLITE ERROR``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot open thread store `{}`: ", self.path.display())?;
        match self.kind {
            OpenErrorKind::Io => f.write_str("cannot read the file"),
            OpenErrorKind::Create => f.write_str("cannot create the file"),
            OpenErrorKind::ReadOnly => f.write_str("the file cannot be written (read-only)"),
            OpenErrorKind::CannotOpen => f.write_str(
                "SQLite cannot open the file or create its `-wal` and `-shm` files next to it \
                 (the directory must be writable)",
            ),
            OpenErrorKind::Damaged => f.write_str(
                "the file is a damaged SQLite database, e.g. truncated (it was left untouched)",
            ),
            OpenErrorKind::NotADatabase => {
                f.write_str("the file is not a SQLite database (it was left untouched)")
            }
            OpenErrorKind::TooNew { found } => write!(
                f,
                "its schema version is {found}, newer than the {SCHEMA_VERSION} this version of \
                 tower-agent knows; upgrade tower-agent"
            ),
            OpenErrorKind::Foreign => f.write_str(
                "it is a SQLite database of another application (it was left untouched)",
            ),
            OpenErrorKind::Migration { to } => {
                write!(f, "cannot migrate its schema to version {to}")
            }
            OpenErrorKind::Thread => f.write_str("cannot start the store's threads"),
            OpenErrorKind::Sqlite => f.write_str("SQLite error"),
        }?;
        // The cause, so that the message alone says what is wrong.
        match &self.source {
            Some(source) => write!(f, ": {source}"),
            None => Ok(()),
        }
    }
}

impl StdError for OpenError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

// ===== load and save =====

fn load(conn: &mut Connection, ctx: &Ctx, id: String) -> Result<Option<Thread>, BoxError> {
    let tx = conn.transaction()?;
    let head = tx
        .prepare_cached("SELECT revision, todos, pending FROM threads WHERE id = ?1")?
        .query_row([&id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })
        .optional()?;
    let Some((revision, todos_json, pending_json)) = head else {
        return Ok(None);
    };
    let todos: Vec<Todo> = serde_json::from_str(&todos_json)
        .map_err(|e| format!("thread `{id}`: bad todos JSON: {e}"))?;
    let (pending, approved) = super::rows::decode_calls(&id, &pending_json)?;

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
    let files = stored_files(&tx, &id)?;
    tx.commit()?;

    // The history is what the database holds at `revision`: a save of it (grown) appends.
    messages.mark_stored(ctx.tag, revision);
    let mut cache = ctx.cache();
    // Not over a newer save the writer committed meanwhile.
    if cache.get(&id).is_none_or(|c| c.revision <= revision) {
        cache.put(
            id.clone(),
            Cached::new(revision, messages.clone(), files.clone()),
        );
    }
    drop(cache);
    Ok(Some(Thread {
        id,
        messages,
        todos,
        files,
        pending,
        approved,
    }))
}

/// The file rows of thread `id`.
fn stored_files(conn: &Connection, id: &str) -> rusqlite::Result<BTreeMap<String, Arc<str>>> {
    let mut files = BTreeMap::new();
    let mut stmt = conn.prepare_cached("SELECT path, content FROM files WHERE thread_id = ?1")?;
    let mut rows = stmt.query([id])?;
    while let Some(row) = rows.next()? {
        let path: String = row.get(0)?;
        let content: String = row.get(1)?;
        files.insert(path, Arc::<str>::from(content));
    }
    Ok(files)
}

/// Writes `thread` (inside the writer's transaction); returns its new revision.
fn save(conn: &Connection, ctx: &Ctx, thread: &Thread) -> Result<i64, BoxError> {
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
            .filter(|&n| new.stored_as(ctx.tag, revision, n))
    });

    // 1. Messages: append, or rewrite from the first difference.
    let how = marked.map_or_else(|| plan(stored, cached.as_ref(), new), Plan::Append);
    let keep = keep_messages(conn, ctx, id, new, how)?;
    insert_messages(conn, id, new, keep)?;
    // 2. Files: only the ones that changed.
    save_files(conn, id, cached.as_ref(), stored.is_some(), &thread.files)?;
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
        insert.execute(params![id, seq as i64, serialize(message)?])?;
    }
    Ok(())
}

/// Writes the file rows of thread `id` that changed: compared with the cache's files, or with
/// the stored rows when the cache does not know them and a thread row exists (`stored`).
fn save_files(
    conn: &Connection,
    id: &str,
    cached: Option<&Cached>,
    stored: bool,
    new: &BTreeMap<String, Arc<str>>,
) -> Result<(), BoxError> {
    let read;
    let current = match cached {
        Some(c) => Some(&c.files),
        None if stored => {
            read = stored_files(conn, id)?;
            Some(&read)
        }
        None => None,
    };
    let files = file_changes(current, new);
    if files.delete_all {
        conn.prepare_cached("DELETE FROM files WHERE thread_id = ?1")?
            .execute([id])?;
    }
    for path in files.deleted {
        conn.prepare_cached("DELETE FROM files WHERE thread_id = ?1 AND path = ?2")?
            .execute(params![id, path])?;
    }
    for (path, content) in files.upserts {
        upsert_file(conn, id, path, content)?;
    }
    Ok(())
}

/// Writes the thread row: count, todos, pending calls and a new revision (never given before
/// in this database), which it returns.
fn save_thread_row(conn: &Connection, thread: &Thread) -> Result<i64, BoxError> {
    let now = to_millis(SystemTime::now());
    let revision: i64 = conn
        .prepare_cached("UPDATE revisions SET last = last + 1 WHERE id = 0 RETURNING last")?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(
        "INSERT INTO threads (id, revision, message_count, todos, created_at, updated_at, pending)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET
            revision = excluded.revision,
            message_count = excluded.message_count,
            todos = excluded.todos,
            updated_at = excluded.updated_at,
            pending = excluded.pending",
    )?
    .execute(params![
        thread.id.as_str(),
        revision,
        thread.messages.len() as i64,
        serde_json::to_string(&thread.todos)?,
        now,
        super::rows::encode_calls(thread)?
    ])?;
    Ok(revision)
}

/// Deletes the journal entries of thread `id` no resume can read any more: those of a call
/// that is not one of the last message's.
fn prune_journal(conn: &Connection, id: &str, new: &Messages) -> Result<(), BoxError> {
    match super::journal::live_calls(new.last()) {
        None => conn
            .prepare_cached("DELETE FROM journal WHERE thread_id = ?1")?
            .execute([id])?,
        Some(calls) => {
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

fn upsert_file(conn: &Connection, id: &str, path: &str, content: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT INTO files (thread_id, path, content) VALUES (?1, ?2, ?3)
         ON CONFLICT (thread_id, path) DO UPDATE SET content = excluded.content",
    )?
    .execute(params![id, path, content])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{context::TodoStatus, message::Message};

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
        t.todos.push(Todo::new("1", "x"));
        t.files.insert("/f".into(), "one".into());
        store.save(&t).await.unwrap();

        // Append: the history shares its prefix with what was saved.
        t.messages.push(Message::assistant("c"));
        t.todos[0].status = TodoStatus::Done;
        t.files.insert("/g".into(), "two".into());
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t").await, 3);

        // Compaction: rewrite from the first difference.
        t.messages.splice(0..2, [Message::user("summary")]);
        t.files.remove("/f");
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
        for i in 0..DEFAULT_CACHE_THREADS + 10 {
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
