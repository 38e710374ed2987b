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
//! The loop hands the store the whole thread after every step. The store remembers what it
//! last saved or loaded for each thread (the shared, copy-on-write history, not a copy) and
//! the thread's revision in the database. When the stored messages are still a prefix of the
//! new history (the usual step: a few messages appended) and nobody else wrote the thread in
//! between, a save appends only the new messages and writes only the files that changed. The
//! prefix check compares pointers, one per message (about 3 µs per 1,000 messages); nothing
//! is serialized but the new messages. When
//! the history was compacted or edited, or another connection wrote the thread, it compares
//! the stored rows with the new history and rewrites from the first difference on.
//!
//! # Durability and concurrency
//!
//! The database is in WAL mode with `synchronous = NORMAL`: a committed save survives a crash
//! of the process (the last few commits may be lost on a power cut). Writers wait up to 5
//! seconds for a lock held by another process (`busy_timeout`); a save is one `IMMEDIATE`
//! transaction, so it takes the write lock before it reads anything.
//!
//! # Several stores on one file
//!
//! Several `Sqlite` stores may use one file (other processes, replicas of a server). A save
//! means "this is the thread now", and it is never applied onto another writer's rows:
//!
//! - Every save gives the thread a new revision from a counter of the whole database (the
//!   `revisions` table), so no two saves, not even of a thread deleted and created again,
//!   ever share a revision.
//! - Inside its write transaction, a save compares the revision (and message count) it
//!   remembers with the database's. Only when they match does it append; otherwise another
//!   store wrote or deleted the thread since, and the save compares the stored rows with its
//!   history and rewrites them from the first difference (and rewrites all files).
//!
//! So when two stores save the same thread, the database holds exactly one writer's thread,
//! the last one saved, never a mix of both. There is no merge and no conflict error: as with
//! every [`ThreadStore`], the last save wins.
//!
//! A `Sqlite` holds one connection behind a mutex; every operation runs on tokio's blocking
//! pool ([`spawn_blocking`](tokio::task::spawn_blocking)), never on the async runtime's
//! threads, so the store must be used inside a tokio runtime. Concurrent runs on different
//! threads are safe; their saves take turns (each is a short transaction). Clones share the
//! connection. Two runs on the *same* thread at the same time are not merged: the last save
//! wins (see the [store module docs](crate::store)) — which is why runs take a lease.
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
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use futures_util::future::BoxFuture;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

pub use super::ThreadInfo;
use super::{
    Lease, Thread, ThreadStore,
    rows::{
        Cache, Cached, DEFAULT_CACHE_THREADS, FirstDifference, Plan, file_changes, from_millis,
        is_current, plan, serialize, to_millis,
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
/// Cloning is one reference count; clones share the connection.
#[derive(Clone)]
pub struct Sqlite {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None` for an in-memory database.
    path: Option<PathBuf>,
    state: Mutex<State>,
    /// Dropped after `state` (fields drop in order), so the file leaves the registry only
    /// once its connection is closed.
    _open: Option<OpenFile>,
}

/// A database file held open by a [`Sqlite`] of this process, by device and inode, with how
/// many stores hold it.
///
/// POSIX record locks belong to the process, not to a file descriptor: opening the file a
/// second time (for the header check in [`Sqlite::open`]) and closing it would release the
/// locks SQLite holds on it through another store's connection, and let another process
/// write under it. A file in the registry was checked by the store that holds it, so `open`
/// skips the check for it. (SQLite's "How To Corrupt An SQLite Database File", section 2.2:
/// in WAL mode the locks that matter live in the `-shm` file, so this guards the rollback-journal
/// mode a file falls back to where WAL is unavailable.)
static OPEN_FILES: Mutex<BTreeMap<FileKey, usize>> = Mutex::new(BTreeMap::new());

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

fn open_files() -> MutexGuard<'static, BTreeMap<FileKey, usize>> {
    OPEN_FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// One store's entry in [`OPEN_FILES`].
struct OpenFile(FileKey);

impl Drop for OpenFile {
    fn drop(&mut self) {
        let mut files = open_files();
        if let Some(count) = files.get_mut(&self.0) {
            *count -= 1;
            if *count == 0 {
                files.remove(&self.0);
            }
        }
    }
}

struct State {
    conn: Connection,
    cache: Cache,
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
        let open = {
            let mut registry = open_files();
            if !file_key(path).is_some_and(|key| registry.contains_key(&key)) {
                check_file(path).map_err(|(kind, source)| fail(kind, source))?;
            }
            // The check may have created the file: its key only now.
            file_key(path).map(|key| {
                *registry.entry(key).or_insert(0) += 1;
                OpenFile(key)
            })
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail(classify(&e), Some(e.into())))?;
        let conn = prepare(conn, true).map_err(|(kind, source)| fail(kind, source))?;
        Ok(Self::from_conn(conn, Some(path.to_owned()), open))
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
        Ok(Self::from_conn(conn, None, None))
    }

    fn from_conn(conn: Connection, path: Option<PathBuf>, open: Option<OpenFile>) -> Self {
        conn.set_prepared_statement_cache_capacity(32);
        Sqlite {
            shared: Arc::new(Shared {
                path,
                state: Mutex::new(State {
                    conn,
                    cache: Cache::new(DEFAULT_CACHE_THREADS),
                }),
                _open: open,
            }),
        }
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
        self.blocking(|state| {
            let mut stmt = state.conn.prepare_cached(
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
        let id = id.to_owned();
        self.blocking(move |state| {
            state.cache.remove(&id);
            let tx = state
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute("DELETE FROM messages WHERE thread_id = ?1", [&id])?;
            tx.execute("DELETE FROM files WHERE thread_id = ?1", [&id])?;
            tx.execute("DELETE FROM threads WHERE id = ?1", [&id])?;
            tx.execute("DELETE FROM journal WHERE thread_id = ?1", [&id])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn blocking<T, F>(&self, f: F) -> Result<T, BoxError>
    where
        T: Send + 'static,
        F: FnOnce(&mut State) -> Result<T, BoxError> + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || f(&mut shared.lock()))
            .await
            .map_err(|e| -> BoxError {
                if e.is_panic() {
                    format!("sqlite thread store: operation panicked: {e}").into()
                } else {
                    format!("sqlite thread store: operation cancelled: {e}").into()
                }
            })?
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic mid-transaction rolled the transaction back when it unwound; the connection
        // is still good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
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
        Box::pin(self.blocking(move |state| load(state, id)))
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        // Cheap: the history is shared, file contents are reference counted.
        let thread = thread.clone();
        Box::pin(self.blocking(move |state| {
            let result = save(state, &thread);
            if result.is_err() {
                state.cache.remove(&thread.id);
            }
            result
        }))
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

fn load(state: &mut State, id: String) -> Result<Option<Thread>, BoxError> {
    let tx = state.conn.transaction()?;
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
    let pending = serde_json::from_str(&pending_json)
        .map_err(|e| format!("thread `{id}`: bad pending calls JSON: {e}"))?;

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
    let mut files = BTreeMap::new();
    {
        let mut stmt = tx.prepare_cached("SELECT path, content FROM files WHERE thread_id = ?1")?;
        let mut rows = stmt.query([&id])?;
        while let Some(row) = rows.next()? {
            let path: String = row.get(0)?;
            let content: String = row.get(1)?;
            files.insert(path, Arc::<str>::from(content));
        }
    }
    tx.commit()?;

    state.cache.put(
        id.clone(),
        Cached::new(revision, messages.clone(), files.clone()),
    );
    Ok(Some(Thread {
        id,
        messages,
        todos,
        files,
        pending,
    }))
}

fn save(state: &mut State, thread: &Thread) -> Result<(), BoxError> {
    let State { conn, cache } = state;
    let id = thread.id.as_str();
    let new = &thread.messages;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let stored: Option<(i64, i64)> = tx
        .prepare_cached("SELECT revision, message_count FROM threads WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    // What this store last wrote or read, if it is still what the database holds.
    let cached = cache.get(id).filter(|c| is_current(stored, c));

    // 1. Messages: append, or rewrite from the first difference.
    let keep = match plan(stored, cached, new) {
        Plan::Fresh => {
            // No thread row: nothing of this id may survive (rows of a half-deleted thread
            // would make the inserts below fail).
            tx.prepare_cached("DELETE FROM messages WHERE thread_id = ?1")?
                .execute([id])?;
            0
        }
        Plan::Append(keep) => keep,
        Plan::Compare => {
            let mut first_difference = FirstDifference::new(new);
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT seq, body FROM messages WHERE thread_id = ?1 ORDER BY seq",
                )?;
                let mut rows = stmt.query([id])?;
                while let Some(row) = rows.next()? {
                    if !first_difference.row(row.get(0)?, row.get_ref(1)?.as_str()?)? {
                        break;
                    }
                }
            }
            let same = first_difference.same();
            tx.prepare_cached("DELETE FROM messages WHERE thread_id = ?1 AND seq >= ?2")?
                .execute(params![id, same as i64])?;
            same
        }
    };
    {
        let mut insert =
            tx.prepare_cached("INSERT INTO messages (thread_id, seq, body) VALUES (?1, ?2, ?3)")?;
        for (seq, message) in new.iter().enumerate().skip(keep) {
            insert.execute(params![id, seq as i64, serialize(message)?])?;
        }
    }

    // 2. Files: only the ones that changed.
    let files = file_changes(cached.map(|c| &c.files), &thread.files);
    if files.delete_all {
        tx.prepare_cached("DELETE FROM files WHERE thread_id = ?1")?
            .execute([id])?;
    }
    for path in files.deleted {
        tx.prepare_cached("DELETE FROM files WHERE thread_id = ?1 AND path = ?2")?
            .execute(params![id, path])?;
    }
    for (path, content) in files.upserts {
        upsert_file(&tx, id, path, content)?;
    }

    // 3. The thread row: count, todos, a new revision (never given before in this database).
    let now = to_millis(SystemTime::now());
    let revision: i64 = tx
        .prepare_cached("UPDATE revisions SET last = last + 1 WHERE id = 0 RETURNING last")?
        .query_row([], |row| row.get(0))?;
    tx.prepare_cached(
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
        id,
        revision,
        new.len() as i64,
        serde_json::to_string(&thread.todos)?,
        now,
        serde_json::to_string(&thread.pending)?
    ])?;
    tx.commit()?;

    cache.put(
        id.to_owned(),
        Cached::new(revision, new.clone(), thread.files.clone()),
    );
    Ok(())
}

fn upsert_file(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    path: &str,
    content: &str,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(
        "INSERT INTO files (thread_id, path, content) VALUES (?1, ?2, ?3)
         ON CONFLICT (thread_id, path) DO UPDATE SET content = excluded.content",
    )?
    .execute(params![id, path, content])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{context::TodoStatus, message::Message};

    fn count_rows(store: &Sqlite, id: &str) -> i64 {
        store
            .shared
            .lock()
            .conn
            .query_row(
                "SELECT count(*) FROM messages WHERE thread_id = ?1",
                [id],
                |r| r.get(0),
            )
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
        assert_eq!(count_rows(&store, "t"), 3);

        // Compaction: rewrite from the first difference.
        t.messages.splice(0..2, [Message::user("summary")]);
        t.files.remove("/f");
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t"), 2);

        // A fresh store on the same connection state (no cache) still diffs correctly.
        store.shared.lock().cache.remove("t");
        t.messages.push(Message::user("d"));
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);

        // Shorter history than stored.
        store.shared.lock().cache.remove("t");
        t.messages.truncate(1);
        store.save(&t).await.unwrap();
        assert_eq!(store.load("t").await.unwrap().unwrap(), t);
        assert_eq!(count_rows(&store, "t"), 1);

        store.delete("t").await.unwrap();
        assert!(store.load("t").await.unwrap().is_none());
        assert_eq!(count_rows(&store, "t"), 0);
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
