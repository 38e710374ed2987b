//! [`LedgerLayer`]: record every tool call — input, output, duration, status — into a
//! [`LedgerSink`], for an audit trail of what an agent did.
//!
//! Each call that completes (or is dropped before it completes) becomes one [`LedgerEntry`]:
//! session id, run id, step, tool, call id, input JSON, output text, `is_error`, status
//! ([`CallStatus`]: `ok`, `error` for an error output, `err` for a failed call, `cancelled`),
//! duration (tokio time, so paused-time tests see it) and the Unix time the call started.
//!
//! Recording never slows or fails a tool call: [`LedgerSink::record`] hands the entry to a
//! writer and returns; a sink that cannot write logs a warning (`tracing::warn!`) and the call's
//! result is returned as it is. [`LedgerLayer::flush`] waits until everything recorded so far
//! is written (before reading the ledger, or before the process exits).
//!
//! Sinks:
//!
//! - [`JsonlLedger`]: one JSON object per line, appended to a file by one writer task (tokio
//!   fs), in the order the calls ended, flushed after each batch.
//! - `SqliteLedger` (feature `sqlite`): a table `tool_calls` in an SQLite file (created on
//!   open), written in transactions by a dedicated thread; query it with
//!   `SqliteLedger::calls(session_id)`.
//! - any closure `Fn(LedgerEntry) + Send + Sync`.
//!
//! The ledger is an audit trail, not the [tool-call journal](crate::store::journal) that makes
//! a crashed run resumable (that one is kept by the thread store, written before each call
//! runs, and on by itself): see there for why they are two things.
//!
//! Put the layer outermost to record what the model sees (a guard's denial included), or
//! innermost to record only the calls that reached the tools.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower_agent::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent::layers::ledger::{CallStatus, JsonlLedger, LedgerEntry, LedgerLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let ledger = LedgerLayer::new(JsonlLedger::new(dir.path().join("tools.jsonl")));
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("add", json!({"a": 1, "b": 2})).text("3"))
//!     .tool(tool_fn("add", "Adds", json!({"type": "object"}), |args, _| async move {
//!         Ok((args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string())
//!     }))
//!     .tool_layer(ledger.clone())
//!     .build();
//! agent.run("1 + 2?").await?;
//!
//! ledger.flush().await;
//! let text = std::fs::read_to_string(dir.path().join("tools.jsonl"))?;
//! let entry: LedgerEntry = serde_json::from_str(text.lines().next().unwrap())?;
//! assert_eq!((entry.tool.as_str(), entry.output.as_str()), ("add", "3"));
//! assert_eq!(entry.input, json!({"a": 1, "b": 2}));
//! assert_eq!(entry.status, CallStatus::Ok);
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::{SystemTime, UNIX_EPOCH},
};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tower::{Layer, Service};

use crate::{
    context::RunContext,
    error::{self, BoxError},
    message::{ToolCall, ToolOutput},
    tool::ToolRequest,
};

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use self::sqlite::{SqliteLedger, SqliteLedgerError};

/// How a recorded tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// A normal output.
    Ok,
    /// An error output (`is_error`), which the model sees.
    Error,
    /// The call failed (`Err`); the output is the error's text.
    Err,
    /// The call's future was dropped before it ended (the run was cancelled or dropped).
    Cancelled,
}

impl CallStatus {
    /// `ok`, `error`, `err` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Error => "error",
            CallStatus::Err => "err",
            CallStatus::Cancelled => "cancelled",
        }
    }

    /// The status [`as_str`](Self::as_str) names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => CallStatus::Ok,
            "error" => CallStatus::Error,
            "err" => CallStatus::Err,
            "cancelled" => CallStatus::Cancelled,
            _ => return None,
        })
    }
}

impl fmt::Display for CallStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The session (thread) id.
    pub session_id: String,
    /// The run id.
    pub run_id: String,
    /// The step of the run.
    pub step: u32,
    /// The tool's name.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The arguments.
    pub input: Value,
    /// The output text (for a failed call, the error and its sources).
    pub output: String,
    /// Whether the output is an error (also true for `err` and `cancelled`).
    pub is_error: bool,
    /// How the call ended.
    pub status: CallStatus,
    /// How long the call took, in milliseconds (tokio time).
    pub duration_ms: f64,
    /// When the call started, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
}

/// Where a [`LedgerLayer`] puts its entries.
///
/// Implemented for closures `Fn(LedgerEntry) + Send + Sync + 'static`.
pub trait LedgerSink: Send + Sync + 'static {
    /// Records one entry. Called from the tool call's future when it ends: must not block
    /// (hand the entry to a writer) and must not fail (log what goes wrong).
    fn record(&self, entry: LedgerEntry);

    /// Resolves once every entry recorded before the call is written, or failed to be. The
    /// default is ready at once.
    fn flush(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

impl<F> LedgerSink for F
where
    F: Fn(LedgerEntry) + Send + Sync + 'static,
{
    fn record(&self, entry: LedgerEntry) {
        self(entry);
    }
}

// ===== LedgerLayer =====

/// Records every tool call into a [`LedgerSink`]. See the [module docs](crate::layers::ledger).
///
/// # Clone
///
/// Clones share the sink.
#[derive(Clone)]
#[must_use]
pub struct LedgerLayer {
    sink: Arc<dyn LedgerSink>,
}

impl LedgerLayer {
    /// Records into `sink`.
    pub fn new(sink: impl LedgerSink) -> Self {
        LedgerLayer {
            sink: Arc::new(sink),
        }
    }

    /// Resolves once every entry recorded so far is written (see [`LedgerSink::flush`]).
    pub fn flush(&self) -> BoxFuture<'static, ()> {
        self.sink.flush()
    }
}

impl fmt::Debug for LedgerLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LedgerLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for LedgerLayer {
    type Service = Ledger<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Ledger {
            inner,
            sink: Arc::clone(&self.sink),
        }
    }
}

/// The service of [`LedgerLayer`].
#[derive(Clone)]
pub struct Ledger<S> {
    inner: S,
    sink: Arc<dyn LedgerSink>,
}

impl<S> Ledger<S> {
    /// Wraps `inner`, recording into `sink`.
    pub fn new(inner: S, sink: impl LedgerSink) -> Self {
        LedgerLayer::new(sink).layer(inner)
    }

    inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for Ledger<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<ToolRequest> for Ledger<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let pending = Pending {
            call: req.call.clone(),
            ctx: req.ctx.clone(),
            started: tokio::time::Instant::now(),
            timestamp_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            sink: Arc::clone(&self.sink),
        };
        future::ResponseFuture::new(self.inner.call(req), pending)
    }
}

/// A call in flight: what its entry needs besides the result.
struct Pending {
    call: ToolCall,
    ctx: RunContext,
    started: tokio::time::Instant,
    timestamp_ms: u64,
    sink: Arc<dyn LedgerSink>,
}

impl Pending {
    fn finish(self, status: CallStatus, output: String) {
        let entry = LedgerEntry {
            session_id: self.ctx.session_id().to_owned(),
            run_id: self.ctx.run_id().to_owned(),
            step: self.ctx.step(),
            tool: self.call.name,
            call_id: self.call.id,
            input: self.call.arguments,
            output,
            is_error: status != CallStatus::Ok,
            status,
            duration_ms: self.started.elapsed().as_secs_f64() * 1e3,
            timestamp_ms: self.timestamp_ms,
        };
        self.sink.record(entry);
    }
}

/// The response future of [`Ledger`].
pub mod future {
    use std::{
        future::Future,
        pin::Pin,
        task::{Context, Poll, ready},
    };

    use pin_project_lite::pin_project;

    use super::*;

    pin_project! {
        /// The response future of [`Ledger`](super::Ledger). Dropped before the call ends, it
        /// records the call as [`CallStatus::Cancelled`].
        pub struct ResponseFuture<F> {
            #[pin]
            inner: F,
            pending: Option<Pending>,
        }

        impl<F> PinnedDrop for ResponseFuture<F> {
            fn drop(this: Pin<&mut Self>) {
                if let Some(pending) = this.project().pending.take() {
                    pending.finish(CallStatus::Cancelled, "cancelled before it ended".into());
                }
            }
        }
    }

    impl<F> ResponseFuture<F> {
        pub(super) fn new(inner: F, pending: Pending) -> Self {
            ResponseFuture {
                inner,
                pending: Some(pending),
            }
        }
    }

    impl<F, E> Future for ResponseFuture<F>
    where
        F: Future<Output = Result<ToolOutput, E>>,
        E: Into<BoxError>,
    {
        type Output = Result<ToolOutput, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            let result = ready!(this.inner.poll(cx)).map_err(Into::into);
            if let Some(pending) = this.pending.take() {
                match &result {
                    Ok(out) => {
                        let status = if out.is_error {
                            CallStatus::Error
                        } else {
                            CallStatus::Ok
                        };
                        pending.finish(status, out.content.clone());
                    }
                    Err(err) => pending.finish(CallStatus::Err, error::chain(&**err)),
                }
            }
            Poll::Ready(result)
        }
    }

    impl<F> fmt::Debug for ResponseFuture<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}

// ===== JsonlLedger =====

enum Command {
    Record(LedgerEntry),
    Flush(oneshot::Sender<()>),
}

/// A [`LedgerSink`] appending one JSON line per call to a file.
///
/// One writer task (spawned on the tokio runtime of the first call it records, and again if
/// that runtime went away) appends the entries in the order they were recorded, a batch at a
/// time, and flushes after each batch. The file is opened (created if missing, never
/// truncated) on the first write; if it can't be opened or written, the batch is dropped with
/// a warning and the next batch tries again. Recording outside a tokio runtime drops the entry
/// with a warning.
///
/// # Clone
///
/// Clones share the file and the writer.
#[derive(Clone)]
pub struct JsonlLedger {
    inner: Arc<JsonlInner>,
}

struct JsonlInner {
    path: PathBuf,
    tx: Mutex<Option<mpsc::UnboundedSender<Command>>>,
}

impl JsonlLedger {
    /// A ledger appending to the file at `path` (opened on the first write).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlLedger {
            inner: Arc::new(JsonlInner {
                path: path.into(),
                tx: Mutex::new(None),
            }),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Sends `cmd` to the writer, starting one if there is none (or its runtime is gone).
    /// False if there is no runtime to start one on.
    fn send(&self, cmd: Command) -> bool {
        let mut tx = self.inner.tx.lock().unwrap_or_else(|p| p.into_inner());
        let cmd = match tx.as_ref() {
            Some(sender) => match sender.send(cmd) {
                Ok(()) => return true,
                // The writer's runtime went away: start another one.
                Err(mpsc::error::SendError(cmd)) => cmd,
            },
            None => cmd,
        };
        self.spawn_writer(&mut tx)
            .is_some_and(|sender| sender.send(cmd).is_ok())
    }

    fn spawn_writer<'a>(
        &self,
        tx: &'a mut Option<mpsc::UnboundedSender<Command>>,
    ) -> Option<&'a mpsc::UnboundedSender<Command>> {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            *tx = None;
            return None;
        };
        let (sender, rx) = mpsc::unbounded_channel();
        handle.spawn(jsonl_writer(self.inner.path.clone(), rx));
        Some(tx.insert(sender))
    }
}

impl fmt::Debug for JsonlLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonlLedger")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl LedgerSink for JsonlLedger {
    fn record(&self, entry: LedgerEntry) {
        if !self.send(Command::Record(entry)) {
            tracing::warn!(
                path = %self.inner.path.display(),
                "tool ledger entry dropped: no tokio runtime to write it"
            );
        }
    }

    fn flush(&self) -> BoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let sent = self.send(Command::Flush(tx));
        Box::pin(async move {
            if sent {
                let _ = rx.await;
            }
        })
    }
}

async fn jsonl_writer(path: PathBuf, mut rx: mpsc::UnboundedReceiver<Command>) {
    use tokio::io::AsyncWriteExt;

    let mut file: Option<tokio::fs::File> = None;
    let mut buf = Vec::new();
    let mut waiters = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut entries = 0usize;
        let mut next = Some(first);
        while let Some(cmd) = next {
            match cmd {
                Command::Record(entry) => match serde_json::to_writer(&mut buf, &entry) {
                    Ok(()) => {
                        buf.push(b'\n');
                        entries += 1;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "tool ledger entry could not be serialized")
                    }
                },
                Command::Flush(waiter) => waiters.push(waiter),
            }
            next = rx.try_recv().ok();
        }
        if !buf.is_empty() {
            let written = async {
                if file.is_none() {
                    let f = tokio::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .await?;
                    file = Some(f);
                }
                let f = file.as_mut().expect("opened above");
                f.write_all(&buf).await?;
                f.flush().await
            }
            .await;
            if let Err(err) = written {
                tracing::warn!(
                    path = %path.display(),
                    error = %err,
                    entries,
                    "could not write to the tool ledger; entries dropped"
                );
                file = None;
            }
            buf.clear();
        }
        for waiter in waiters.drain(..) {
            let _ = waiter.send(());
        }
    }
}

// ===== SqliteLedger =====

#[cfg(feature = "sqlite")]
mod sqlite {
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
                Kind::Spawn(_) => {
                    f.write_str("could not start the sqlite tool ledger's writer thread")
                }
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
}
