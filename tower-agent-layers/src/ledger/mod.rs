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
//! The ledger is an audit trail, not the [tool-call journal](tower_agent_core::store::journal) that makes
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
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_layers::ledger::{CallStatus, JsonlLedger, LedgerEntry, LedgerLayer};
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

use tower_agent_core::{
    context::RunContext,
    error::{self, BoxError},
    message::{ToolCall, ToolOutput},
    tool::ToolRequest,
};

pub mod future;
mod jsonl;
mod layer;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use self::jsonl::JsonlLedger;
pub use self::layer::LedgerLayer;
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
