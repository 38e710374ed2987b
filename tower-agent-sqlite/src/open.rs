//! Opening a [`Sqlite`](super::Sqlite) database: the file checked before SQLite sees it, the
//! schema created or migrated (`user_version`), and [`OpenError`].

use std::{
    error::Error as StdError,
    fmt,
    fs::OpenOptions,
    io::{self, Read},
    path::{Path, PathBuf},
};

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use super::BUSY_TIMEOUT;
use tower_agent_core::error::BoxError;

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

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
    // 5: the thread data (`store::data`): one row per key of a thread, its value JSON text.
    // The built-ins' columns and tables move into it: the todo list (column `todos`, a list
    // that is not empty) under `tower_agent.todos`, each file (table `files`) under
    // `tower_agent.files/` and its path, its content as a JSON string.
    "CREATE TABLE data (
        thread_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (thread_id, key)
    );
    INSERT INTO data (thread_id, key, value)
        SELECT id, 'tower_agent.todos', todos FROM threads WHERE todos <> '[]';
    INSERT INTO data (thread_id, key, value)
        SELECT thread_id, 'tower_agent.files/' || path, json_quote(content) FROM files;
    DROP TABLE files;
    ALTER TABLE threads DROP COLUMN todos;",
];

/// The `application_id` of a tower-agent thread database: `"tagt"`.
pub(super) const APPLICATION_ID: i32 = i32::from_be_bytes(*b"tagt");

/// The schema version this crate writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Checks the file before SQLite touches it, so that the errors name their cause:
///
/// - a missing file is created here (empty: SQLite makes it a new database), so that a
///   directory that does not exist or cannot be written is reported with the OS error
///   (SQLite would only say "unable to open database file");
/// - a file that cannot be opened for writing (a read-only file or file system) is refused
///   with the OS error (SQLite would open it read-only and fail on the first save);
/// - a file that is not empty and does not start with the SQLite header is refused.
pub(super) fn check_file(path: &Path) -> Result<(), (OpenErrorKind, Option<BoxError>)> {
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
pub(super) fn prepare(
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

pub(super) fn classify(e: &rusqlite::Error) -> OpenErrorKind {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => OpenErrorKind::NotADatabase,
        Some(ErrorCode::DatabaseCorrupt) => OpenErrorKind::Damaged,
        Some(ErrorCode::ReadOnly) => OpenErrorKind::ReadOnly,
        Some(ErrorCode::CannotOpen) => OpenErrorKind::CannotOpen,
        _ => OpenErrorKind::Sqlite,
    }
}

/// Why [`Sqlite::open`](super::Sqlite::open) failed. Its `Display` names the file.
pub struct OpenError {
    pub(super) path: PathBuf,
    pub(super) kind: OpenErrorKind,
    pub(super) source: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpenErrorKind {
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
