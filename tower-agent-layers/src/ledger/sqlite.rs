//! [`SqliteLedger`]: a [`LedgerSink`] in a SQLite file.

use std::{path::Path, sync::mpsc as std_mpsc};

use futures_util::future::BoxFuture;
use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::{CallStatus, LedgerEntry, LedgerSink};

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS tool_calls (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id   TEXT    NOT NULL,
        run_id       TEXT    NOT NULL,
        step         INTEGER NOT NULL,
        tool         TEXT    NOT NULL,
        call_id      TEXT    NOT NULL,
        input        TEXT    NOT NULL,
        output       TEXT    NOT NULL,
        is_error     INTEGER NOT NULL,
        status       TEXT    NOT NULL,
        duration_ms  REAL    NOT NULL,
        timestamp_ms INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS tool_calls_session ON tool_calls (session_id, id);
    CREATE INDEX IF NOT EXISTS tool_calls_run ON tool_calls (run_id, id);
";

type Calls = Result<Vec<LedgerEntry>, rusqlite::Error>;

enum Command {
    Record(LedgerEntry),
    Flush(oneshot::Sender<()>),
    Calls(String, oneshot::Sender<Calls>),
}

/// A [`LedgerSink`] writing to the table `tool_calls` of an SQLite database.
///
/// [`open`](Self::open) creates the table (and indexes on session and run) if missing.
/// A dedicated thread owns the connection: [`record`](LedgerSink::record) only sends the
/// entry to it, and it writes what has arrived in one transaction at a time. Write
/// failures are logged (`tracing::warn!`) and the entries dropped. File databases use
/// WAL journaling, so other connections can read the ledger while it is written.
///
/// ```text
/// tool_calls(id INTEGER PRIMARY KEY, session_id TEXT, run_id TEXT, step INTEGER,
///            tool TEXT, call_id TEXT, input TEXT (JSON), output TEXT, is_error INTEGER,
///            status TEXT ('ok' | 'error' | 'err' | 'cancelled'), duration_ms REAL,
///            timestamp_ms INTEGER)
/// ```
///
/// # Clone
///
/// Clones share the writer thread, which ends when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteLedger {
    tx: std_mpsc::Sender<Command>,
}

impl SqliteLedger {
    /// Opens (or creates) the database at `path`, creates the table, and starts the
    /// writer thread. Opening is blocking I/O; it happens once.
    ///
    /// # Errors
    ///
    /// Fails if the database can't be opened or the table can't be created.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SqliteLedgerError> {
        let conn = Connection::open(path)?;
        // WAL: readers don't wait for the writer. Returns the new mode as a row.
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        Self::start(conn)
    }

    /// A ledger in a private in-memory database (read it with [`calls`](Self::calls)).
    ///
    /// # Errors
    ///
    /// Fails if SQLite can't create the database.
    pub fn open_in_memory() -> Result<Self, SqliteLedgerError> {
        Self::start(Connection::open_in_memory()?)
    }

    fn start(conn: Connection) -> Result<Self, SqliteLedgerError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        let (tx, rx) = std_mpsc::channel();
        std::thread::Builder::new()
            .name("tower-agent-ledger".into())
            .spawn(move || writer(conn, rx))
            .map_err(|e| SqliteLedgerError(Kind::Spawn(e)))?;
        Ok(SqliteLedger { tx })
    }

    /// The calls of a session, in the order they ended (everything recorded before this
    /// call is written first).
    ///
    /// # Errors
    ///
    /// Fails if the query fails, or if the writer thread has stopped.
    pub async fn calls(&self, session_id: &str) -> Result<Vec<LedgerEntry>, SqliteLedgerError> {
        let stopped = |_| SqliteLedgerError(Kind::Stopped);
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Calls(session_id.to_owned(), tx))
            .map_err(|_| SqliteLedgerError(Kind::Stopped))?;
        Ok(rx.await.map_err(stopped)??)
    }
}

/// An error of [`SqliteLedger`]: SQLite failed, or the writer thread could not start or
/// has stopped. The `Display` text is not specified; the SQLite error is the
/// [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct SqliteLedgerError(Kind);

#[derive(Debug)]
enum Kind {
    Sqlite(rusqlite::Error),
    Spawn(std::io::Error),
    Stopped,
}

impl SqliteLedgerError {
    /// The SQLite error, if SQLite failed.
    pub fn sqlite(&self) -> Option<&rusqlite::Error> {
        match &self.0 {
            Kind::Sqlite(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for SqliteLedgerError {
    fn from(e: rusqlite::Error) -> Self {
        SqliteLedgerError(Kind::Sqlite(e))
    }
}

impl std::fmt::Display for SqliteLedgerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Sqlite(_) => f.write_str("sqlite tool ledger failed"),
            Kind::Spawn(_) => f.write_str("could not start the sqlite tool ledger's writer thread"),
            Kind::Stopped => f.write_str("the sqlite tool ledger's writer thread has stopped"),
        }
    }
}

impl std::error::Error for SqliteLedgerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Kind::Sqlite(e) => Some(e),
            Kind::Spawn(e) => Some(e),
            Kind::Stopped => None,
        }
    }
}

impl std::fmt::Debug for SqliteLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteLedger").finish_non_exhaustive()
    }
}

impl LedgerSink for SqliteLedger {
    fn record(&self, entry: LedgerEntry) {
        if self.tx.send(Command::Record(entry)).is_err() {
            tracing::warn!("tool ledger entry dropped: the SQLite writer thread stopped");
        }
    }

    fn flush(&self) -> BoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Command::Flush(tx)).is_ok();
        Box::pin(async move {
            if sent {
                let _ = rx.await;
            }
        })
    }
}

fn writer(mut conn: Connection, rx: std_mpsc::Receiver<Command>) {
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(cmd) = next {
            match cmd {
                Command::Record(entry) => batch.push(entry),
                Command::Flush(waiter) => {
                    write(&mut conn, &mut batch);
                    let _ = waiter.send(());
                }
                Command::Calls(session, reply) => {
                    write(&mut conn, &mut batch);
                    let _ = reply.send(calls(&conn, &session));
                }
            }
            next = rx.try_recv().ok();
        }
        write(&mut conn, &mut batch);
    }
}

fn write(conn: &mut Connection, batch: &mut Vec<LedgerEntry>) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len();
    let result = (|| {
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO tool_calls (session_id, run_id, step, tool, call_id, input, output,
                 is_error, status, duration_ms, timestamp_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for e in batch.iter() {
                stmt.execute(params![
                    e.session_id,
                    e.run_id,
                    e.step,
                    e.tool,
                    e.call_id,
                    e.input.to_string(),
                    e.output,
                    e.is_error,
                    e.status.as_str(),
                    e.duration_ms,
                    e.timestamp_ms as i64,
                ])?;
            }
        }
        tx.commit()
    })();
    if let Err(err) = result {
        tracing::warn!(error = %err, entries = n, "could not write to the SQLite tool ledger; entries dropped");
    }
    batch.clear();
}

fn calls(conn: &Connection, session: &str) -> rusqlite::Result<Vec<LedgerEntry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, run_id, step, tool, call_id, input, output, is_error, status,
         duration_ms, timestamp_ms FROM tool_calls WHERE session_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([session], |row| {
        let input: String = row.get(5)?;
        let status: String = row.get(8)?;
        Ok(LedgerEntry {
            session_id: row.get(0)?,
            run_id: row.get(1)?,
            step: row.get(2)?,
            tool: row.get(3)?,
            call_id: row.get(4)?,
            input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
            output: row.get(6)?,
            is_error: row.get(7)?,
            status: CallStatus::parse(&status).unwrap_or(CallStatus::Err),
            duration_ms: row.get(9)?,
            timestamp_ms: row.get::<_, i64>(10)? as u64,
        })
    })?;
    rows.collect()
}
