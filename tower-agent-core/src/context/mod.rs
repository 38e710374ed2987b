//! [`RunContext`]: where a request is in a run, and what the run shares.
//!
//! Every [`ModelRequest`](crate::model::ModelRequest) and
//! [`ToolRequest`](crate::tool::ToolRequest) carries the context of its run, so any layer knows
//! the session, the run, the step and the working directory, can read the caller's
//! per-request data ([`RunContext::extensions`]), keep typed per-run data
//! ([`RunContext::with_data`]), queue a reminder for the model, emit an event, or see that the
//! run was cancelled. Cloning it is one reference count.
//!
//! Built-ins keep their per-run data here too: the todo list
//! (`builtins::todo::todos`) and the files written
//! (`builtins::filesystem::files_written`),
//! which the loop restores from the thread and saves with it.
//!
//! # Example
//!
//! ```
//! use tower_agent_core::context::RunContext;
//!
//! let ctx = RunContext::builder().session_id("thread-1").cwd("/tmp").build();
//! assert_eq!(ctx.session_id(), "thread-1");
//!
//! // Typed per-run data, shared by every clone.
//! #[derive(Clone, Debug, PartialEq)]
//! struct Calls(u32);
//! let clone = ctx.clone();
//! ctx.with_data(|data| data.insert(Calls(3)));
//! assert_eq!(clone.with_data(|data| data.get::<Calls>().cloned()), Some(Calls(3)));
//!
//! // Work outside any call (a background hook) queues its reminders on the run; they are
//! // delivered once, after the step's tool results.
//! ctx.remind("Consider updating the docs.");
//! ```

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    hash::{BuildHasher, Hasher},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{event::AgentEvent, message::Messages};

pub mod data;
pub(crate) mod persisted;
pub mod transcript;

use self::transcript::Transcript;

/// The context of one agent run, carried by every model and tool request.
///
/// See the [module docs](crate::context).
#[derive(Clone)]
pub struct RunContext {
    shared: Arc<Shared>,
    step: u32,
}

struct Shared {
    session_id: String,
    run_id: String,
    /// The working directory: it moves when a tool moves it ([`RunContext::set_cwd`]).
    cwd: Mutex<PathBuf>,
    directories: Vec<PathBuf>,
    data: Mutex<RunData>,
    reminders: Mutex<Vec<String>>,
    events: Option<mpsc::UnboundedSender<AgentEvent>>,
    cancel: CancellationToken,
    transcript: Option<Box<Transcript>>,
    /// Boxed: most runs have no observer.
    warning_observers: Mutex<Vec<Arc<WarningFn>>>,
    /// The run's warnings so far ([`RunContext::warnings`]).
    warnings: Mutex<Warnings>,
    extensions: http::Extensions,
}

/// The most warnings a run keeps for [`RunContext::warnings`] (and the run's answer): past
/// it, they are only counted (each is still logged and sent as an event).
const MAX_WARNINGS: usize = 256;

/// The warnings of a run: the first [`MAX_WARNINGS`], and how many more there were.
#[derive(Debug, Default)]
struct Warnings {
    kept: Vec<String>,
    more: usize,
}

/// An observer of a run's warnings ([`RunContext::on_warning`]).
type WarningFn = dyn Fn(&str, &RunContext) + Send + Sync;

impl RunContext {
    /// A context with fresh ids, the process's current directory, no event listener and a new
    /// cancellation token.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder to set the ids, directory, event sender or cancellation token.
    pub fn builder() -> RunContextBuilder {
        RunContextBuilder::default()
    }

    /// The session (thread) id.
    pub fn session_id(&self) -> &str {
        &self.shared.session_id
    }

    /// The id of this run.
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// The step of the run this request belongs to (0-based).
    pub fn step(&self) -> u32 {
        self.step
    }

    /// This context at another step (same run, same shared state).
    #[must_use]
    pub fn with_step(&self, step: u32) -> Self {
        RunContext {
            shared: Arc::clone(&self.shared),
            step,
        }
    }

    /// The working directory of the run: the one the run started in
    /// ([`AgentRequest::cwd`](crate::AgentRequest::cwd)), until a tool moves it
    /// ([`set_cwd`](Self::set_cwd)).
    pub fn cwd(&self) -> PathBuf {
        self.shared
            .cwd
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Moves the run's working directory to `dir` (for a tool whose shell changed directory,
    /// as Claude Code's `Bash` does after a `cd`); returns the directory it was in. Every
    /// clone of the context sees the move: later hooks run in, and are given, the new
    /// directory, and an agent's hooks fire their CwdChanged hooks at
    /// the end of the step (after the PostToolUse hooks of the call that moved it, before
    /// PostToolBatch). A relative `dir` is taken relative to the current working directory.
    ///
    /// The move lasts for the run: the thread's next run starts in the directory its request
    /// names ([`AgentRequest::cwd`](crate::AgentRequest::cwd)), and its CwdChanged hooks fire
    /// if that is not where this run ended.
    pub fn set_cwd(&self, dir: impl Into<PathBuf>) -> PathBuf {
        let mut cwd = self
            .shared
            .cwd
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = cwd.join(dir.into());
        std::mem::replace(&mut *cwd, dir)
    }

    /// The directories the run may work in besides [`cwd`](Self::cwd)
    /// ([`AgentRequest::add_dir`](crate::AgentRequest::add_dir)), relative ones resolved
    /// against it.
    pub fn directories(&self) -> &[PathBuf] {
        &self.shared.directories
    }

    /// The caller's per-request data ([`AgentRequest::extensions`](crate::AgentRequest)): the
    /// authenticated principal, a tenant, … Read-only: the run cannot change what the caller
    /// said. Per-run data of layers and stages goes in [`RunContext::with_data`] instead.
    pub fn extensions(&self) -> &http::Extensions {
        &self.shared.extensions
    }

    /// Runs `f` on the run's typed per-run data (of layers, stages, tools and built-ins),
    /// under the run's lock: `f` is synchronous, so the lock is never held across an `.await`.
    pub fn with_data<R>(&self, f: impl FnOnce(&mut RunData) -> R) -> R {
        f(&mut self
            .shared
            .data
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// Queues a reminder from work outside any call — a hook that runs in the background
    /// after its call ended, a task of a layer — which has no answer to carry it. Reminders
    /// queued during a step are appended once, after all of the step's tool results (and the
    /// contexts hooks added to them), with the reminders of the step's answers, as one [hook
    /// context](crate::message::Message::hook_context): a system message, the reminders
    /// blank-line separated.
    ///
    /// A layer or a tool answering a call attaches its reminder to the answer instead, where
    /// the layers above it see it: [`ToolOutput::remind`](crate::message::ToolOutput::remind),
    /// [`ModelResponse::remind`](crate::model::ModelResponse::remind) (see [`Reminders`](crate::message::Reminders)).
    pub fn remind(&self, text: impl Into<String>) {
        self.reminders().push(text.into());
    }

    /// Takes the queued reminders. The agent's loop takes them after each step's tool
    /// results (a loop of your own would do the same).
    pub fn take_reminders(&self) -> Vec<String> {
        std::mem::take(&mut *self.reminders())
    }

    fn reminders(&self) -> MutexGuard<'_, Vec<String>> {
        self.shared
            .reminders
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether anyone listens to this run's events ([`Agent::stream`](crate::Agent::stream)).
    /// Check it before building an expensive event.
    pub fn is_listening(&self) -> bool {
        self.shared.events.is_some()
    }

    /// Sends an event to the run's event stream, if anyone listens.
    pub fn emit(&self, event: AgentEvent) {
        if let Some(tx) = &self.shared.events {
            // A closed receiver means the listener went away; the run goes on.
            let _ = tx.send(event);
        }
    }

    /// Builds and sends an event only if anyone listens.
    pub fn emit_with(&self, event: impl FnOnce() -> AgentEvent) {
        if let Some(tx) = &self.shared.events {
            let _ = tx.send(event());
        }
    }

    /// Reports something worth knowing that does not stop the run: calls the agent's
    /// Notification hooks (the [`on_warning`](Self::on_warning) observers), then logs it (a
    /// `tracing` event at `WARN` level with the fields `session_id`, `run_id` and `step`),
    /// keeps it for the run's answer ([`AgentResponse::warnings`](crate::AgentResponse::warnings),
    /// [`warnings`](Self::warnings)) and sends [`AgentEvent::Warning`] to the event stream.
    pub fn warn(&self, message: impl Into<String>) {
        let message = message.into();
        let observers = self
            .shared
            .warning_observers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for observe in observers {
            observe(&message, self);
        }
        self.record_warning(message);
    }

    /// The one place a run's warnings go out: logged at `WARN` with the run's ids, kept for
    /// the run's answer, sent as [`AgentEvent::Warning`]. [`warn`](Self::warn) without the
    /// observers (a retry's warning is no Notification).
    pub(crate) fn record_warning(&self, message: String) {
        tracing::warn!(
            session_id = %self.session_id(),
            run_id = %self.run_id(),
            step = self.step,
            "{message}"
        );
        {
            let mut warnings = self
                .shared
                .warnings
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if warnings.kept.len() < MAX_WARNINGS {
                warnings.kept.push(message.clone());
            } else {
                warnings.more += 1;
            }
        }
        self.emit(AgentEvent::Warning { message });
    }

    /// The run's warnings so far ([`warn`](Self::warn)), in order: the first 256, then, if
    /// there were more, one line saying how many were left out (every one is logged).
    pub fn warnings(&self) -> Vec<String> {
        let warnings = self
            .shared
            .warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut list = warnings.kept.clone();
        if warnings.more > 0 {
            list.push(format!(
                "{} more warnings not listed (see the log)",
                warnings.more
            ));
        }
        list
    }

    /// Calls `observe` with every warning of the run from now on ([`warn`](Self::warn)), in the
    /// order the observers were added (the agent's Notification hooks are one). An observer
    /// runs on the task that warns: keep it short.
    pub fn on_warning(&self, observe: impl Fn(&str, &RunContext) + Send + Sync + 'static) {
        self.shared
            .warning_observers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::new(observe));
    }

    /// The run's cancellation token: cancel it to end the run with
    /// [`Outcome::Cancelled`](crate::agent::Outcome::Cancelled); long-running tools can watch
    /// it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.shared.cancel
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancel.is_cancelled()
    }

    /// The session's JSONL transcript, if the agent keeps transcripts
    /// ([`AgentBuilder::transcripts`](crate::agent::AgentBuilder::transcripts), on by default
    /// for agents with command hooks): one line per message, in
    /// Claude Code's shape, each written before any hook can read it (see
    /// [`AgentBuilder::transcripts`](crate::agent::AgentBuilder::transcripts) for the format
    /// and when each line is written).
    ///
    /// The file is `{dir}/{name}.jsonl`, `name` being the session id with every byte other
    /// than ASCII letters, digits, `-`, `_` and `.` percent-escaped (`a/b` is `a%2Fb`, `%` is
    /// `%25`), so distinct ids never share a file; an escaped id longer than 200 bytes is cut
    /// to 160 and followed by `%~` and 32 hex digits of its SHA-256.
    pub fn transcript_path(&self) -> Option<&Path> {
        self.shared.transcript.as_deref().map(Transcript::path)
    }

    /// The run's transcript writer, if the run keeps a transcript (see
    /// [`transcript_path`](Self::transcript_path)): a layer writes its own lines with it.
    pub fn transcript(&self) -> Option<&Transcript> {
        self.shared.transcript.as_deref()
    }
}

impl Default for RunContext {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RunContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunContext")
            .field("session_id", &self.shared.session_id)
            .field("run_id", &self.shared.run_id)
            .field("step", &self.step)
            .field("cwd", &self.cwd())
            .field("listening", &self.is_listening())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RunContext`]. See [`RunContext::builder`].
#[derive(Debug, Default)]
pub struct RunContextBuilder {
    session_id: Option<String>,
    run_id: Option<String>,
    cwd: Option<PathBuf>,
    directories: Vec<PathBuf>,
    data: RunData,
    events: Option<mpsc::UnboundedSender<AgentEvent>>,
    cancel: Option<CancellationToken>,
    transcript: Option<TranscriptAt>,
    transcript_agent: Option<String>,
    extensions: http::Extensions,
}

/// Where a [`RunContextBuilder`] puts the transcript.
#[derive(Debug)]
enum TranscriptAt {
    File(PathBuf),
    Dir(PathBuf),
}

impl RunContextBuilder {
    /// The session's JSONL transcript file (see [`RunContext::transcript_path`]).
    #[must_use]
    pub fn transcript_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.transcript = Some(TranscriptAt::File(path.into()));
        self
    }

    /// The session's JSONL transcript in `dir`: the file is `{dir}/{name}.jsonl`, `name`
    /// being the session id escaped (see [`RunContext::transcript_path`]).
    #[must_use]
    pub fn transcript_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.transcript = Some(TranscriptAt::Dir(dir.into()));
        self
    }

    /// The transcript is a subagent's, of id `agent_id`: its lines carry `agentId` and are
    /// marked `isSidechain`.
    #[must_use]
    pub fn transcript_agent_id(mut self, agent_id: impl Into<String>) -> Self {
        self.transcript_agent = Some(agent_id.into());
        self
    }

    /// The session (thread) id; a fresh one if unset.
    #[must_use]
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// The run id; a fresh one if unset.
    #[must_use]
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// The working directory; the process's current directory if unset.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The directories the run may work in besides its working directory (see
    /// [`RunContext::directories`]); relative ones are resolved against the working directory.
    #[must_use]
    pub fn directories<P: Into<PathBuf>>(mut self, dirs: impl IntoIterator<Item = P>) -> Self {
        self.directories.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// The run's initial typed data (see [`RunContext::with_data`]): the agent starts a run
    /// with the data restored from its thread.
    #[must_use]
    pub fn data(mut self, data: RunData) -> Self {
        self.data = data;
        self
    }

    /// Where events go.
    #[must_use]
    pub fn events(mut self, tx: mpsc::UnboundedSender<AgentEvent>) -> Self {
        self.events = Some(tx);
        self
    }

    /// The cancellation token.
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The caller's per-request data (see [`RunContext::extensions`]).
    #[must_use]
    pub fn extensions(mut self, extensions: http::Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// Builds the context (at step 0).
    pub fn build(self) -> RunContext {
        let session_id = self.session_id.unwrap_or_else(|| new_id("thread"));
        let run_id = self.run_id.unwrap_or_else(|| new_id("run"));
        let cwd = self
            .cwd
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        let transcript = self.transcript.map(|at| {
            let path = match at {
                TranscriptAt::File(path) => path,
                TranscriptAt::Dir(dir) => {
                    dir.join(format!("{}.jsonl", transcript_file_name(&session_id)))
                }
            };
            Box::new(Transcript::new(
                path,
                &session_id,
                &run_id,
                &cwd,
                self.transcript_agent,
            ))
        });
        let directories = self.directories.into_iter().map(|d| cwd.join(d)).collect();
        RunContext {
            shared: Arc::new(Shared {
                session_id,
                run_id,
                cwd: Mutex::new(cwd),
                directories,
                data: Mutex::new(self.data),
                reminders: Mutex::new(Vec::new()),
                events: self.events,
                cancel: self.cancel.unwrap_or_default(),
                transcript,
                warning_observers: Mutex::new(Vec::new()),
                warnings: Mutex::default(),
                extensions: self.extensions,
            }),
            step: 0,
        }
    }
}

/// A compaction of the thread's history, reported by the model layer that compacted the
/// request (such as `SummarizeLayer`) in its
/// response's [`extensions`](crate::model::ModelResponse::extensions): after the step's model
/// call, the loop replaces the messages in `range` with `replacement`, provided the history
/// still holds exactly the messages `source` holds in that range (see
/// [`Messages::shares_range`]), so the thread keeps the compaction instead of compacting again
/// at every step.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Compaction {
    /// The messages the range was computed on (the model request's, cheap to clone).
    pub source: Messages,
    /// The range of `source` to replace.
    pub range: std::ops::Range<usize>,
    /// What replaces it.
    pub replacement: Vec<crate::message::Message>,
    /// The summarizer's text (PostCompact's `compact_summary`).
    pub summary: String,
    /// `auto` or `manual` (PreCompact / PostCompact `trigger`).
    pub trigger: &'static str,
}

impl Compaction {
    /// Replace `range` of `source` (the model request's messages) with `replacement`;
    /// `summary` is the summarizer's text; the trigger is `auto`.
    pub fn new(
        source: Messages,
        range: std::ops::Range<usize>,
        replacement: Vec<crate::message::Message>,
        summary: impl Into<String>,
    ) -> Self {
        Compaction {
            source,
            range,
            replacement,
            summary: summary.into(),
            trigger: "auto",
        }
    }

    /// This compaction with another trigger (`manual`).
    #[must_use]
    pub fn trigger(mut self, trigger: &'static str) -> Self {
        self.trigger = trigger;
        self
    }
}

/// Identifies one instance of a layer, stage or tool, so that the per-run data of several
/// instances of one type sit side by side in a run's [`RunData`]
/// ([`insert_for`](RunData::insert_for), [`get_for`](RunData::get_for)).
///
/// Make one when the layer is made and keep it in the layer: clones of a layer share their
/// id, and so their per-run data (an agent clones its stacks, and a stage registered with
/// [`AgentBuilder::stage`](crate::agent::AgentBuilder::stage) is two clones that must share
/// their data). Two layers made separately have separate data even when their types are
/// equal.
///
/// ```
/// use tower_agent_core::context::{InstanceId, RunContext};
///
/// #[derive(Default)]
/// struct Calls(u32);
///
/// let (a, b) = (InstanceId::new(), InstanceId::new());
/// let ctx = RunContext::new();
/// ctx.with_data(|data| data.get_or_default_for::<Calls>(a).0 += 1);
/// ctx.with_data(|data| data.get_or_default_for::<Calls>(a).0 += 1);
/// assert_eq!(ctx.with_data(|data| data.get_for::<Calls>(a).map(|c| c.0)), Some(2));
/// assert!(ctx.with_data(|data| data.get_for::<Calls>(b).is_none()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InstanceId(u64);

impl InstanceId {
    /// A fresh id, unique in the process.
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        InstanceId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for InstanceId {
    fn default() -> Self {
        Self::new()
    }
}

/// A map from type (and optionally a layer instance) to value: per-run data of layers and
/// stages.
#[derive(Default)]
pub struct RunData {
    map: HashMap<(TypeId, u64), Box<dyn Any + Send + Sync>>,
}

/// The key of values stored without an instance.
const NO_INSTANCE: u64 = 0;

impl RunData {
    fn key<T: 'static>(instance: u64) -> (TypeId, u64) {
        (TypeId::of::<T>(), instance)
    }

    /// Inserts a value, returning the previous one of its type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        self.insert_at(NO_INSTANCE, value)
    }

    /// The value of type `T`.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map.get(&Self::key::<T>(NO_INSTANCE))?.downcast_ref()
    }

    /// The value of type `T`, mutably.
    pub fn get_mut<T: Send + Sync + 'static>(&mut self) -> Option<&mut T> {
        self.map
            .get_mut(&Self::key::<T>(NO_INSTANCE))?
            .downcast_mut()
    }

    /// The value of type `T`, inserting `T::default()` first if there is none.
    pub fn get_or_default<T: Default + Send + Sync + 'static>(&mut self) -> &mut T {
        self.map
            .entry(Self::key::<T>(NO_INSTANCE))
            .or_insert_with(|| Box::new(T::default()))
            .downcast_mut()
            .expect("the entry of TypeId::of::<T>() holds a T")
    }

    /// Removes the value of type `T`.
    pub fn remove<T: Send + Sync + 'static>(&mut self) -> Option<T> {
        self.remove_at(NO_INSTANCE)
    }

    /// Inserts the value of type `T` of one instance, returning its previous one.
    pub fn insert_for<T: Send + Sync + 'static>(&mut self, id: InstanceId, value: T) -> Option<T> {
        self.insert_at(id.0, value)
    }

    /// The value of type `T` of one instance.
    pub fn get_for<T: Send + Sync + 'static>(&self, id: InstanceId) -> Option<&T> {
        self.map.get(&Self::key::<T>(id.0))?.downcast_ref()
    }

    /// The value of type `T` of one instance, mutably.
    pub fn get_for_mut<T: Send + Sync + 'static>(&mut self, id: InstanceId) -> Option<&mut T> {
        self.map.get_mut(&Self::key::<T>(id.0))?.downcast_mut()
    }

    /// The value of type `T` of one instance, inserting `T::default()` first if there is none.
    pub fn get_or_default_for<T: Default + Send + Sync + 'static>(
        &mut self,
        id: InstanceId,
    ) -> &mut T {
        self.map
            .entry(Self::key::<T>(id.0))
            .or_insert_with(|| Box::new(T::default()))
            .downcast_mut()
            .expect("the entry of TypeId::of::<T>() holds a T")
    }

    /// Removes the value of type `T` of one instance.
    pub fn remove_for<T: Send + Sync + 'static>(&mut self, id: InstanceId) -> Option<T> {
        self.remove_at(id.0)
    }

    fn insert_at<T: Send + Sync + 'static>(&mut self, instance: u64, value: T) -> Option<T> {
        self.map
            .insert(Self::key::<T>(instance), Box::new(value))
            .and_then(|old| old.downcast().ok().map(|b| *b))
    }

    fn remove_at<T: Send + Sync + 'static>(&mut self, instance: u64) -> Option<T> {
        self.map
            .remove(&Self::key::<T>(instance))
            .and_then(|b| b.downcast().ok().map(|b| *b))
    }
}

impl fmt::Debug for RunData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunData")
            .field("len", &self.map.len())
            .finish()
    }
}

/// The bytes of a session id kept as they are in its transcript's file name: ASCII letters,
/// digits, `-`, `_` and `.`. Every other byte (of the UTF-8 text) is written `%XX`.
const FILE_NAME_BYTES: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.');

/// The longest transcript file name kept whole (without `.jsonl`); longer ones are cut.
const MAX_FILE_NAME: usize = 200;

/// The file name (without `.jsonl`) of a session's transcript: the session id, readable and
/// distinct for distinct ids. Bytes other than ASCII letters, digits, `-`, `_` and `.` are
/// percent-escaped (`a/b` is `a%2Fb`, `a_b` stays `a_b`, `%` is `%25`), so two ids never
/// share a file on a case-sensitive file system. A name longer than 200 bytes is cut to its
/// first 160 and followed by `%~` and 32 hex digits of the SHA-256 of the id (`%~` is never
/// part of an escaped id), so it fits every file system's 255-byte name limit.
pub(crate) fn transcript_file_name(session_id: &str) -> String {
    let name = percent_encoding::utf8_percent_encode(session_id, FILE_NAME_BYTES).to_string();
    if name.len() <= MAX_FILE_NAME {
        return name;
    }
    use sha2::Digest;
    // Cut outside a `%XX` escape: the name is ASCII.
    let mut cut = 160;
    while name.as_bytes()[cut - 2..cut].contains(&b'%') {
        cut -= 1;
    }
    let digest = sha2::Sha256::digest(session_id.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}%~{hex}", &name[..cut])
}

/// Now, as RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`): the time of each
/// line of a [transcript], and what a hook input of yours can carry in the same
/// form (the command hooks' `timestamp`). A clock before 1970 reads as 1970-01-01.
///
/// # Example
///
/// ```
/// let now = tower_agent_core::context::timestamp();
/// assert_eq!(now.len(), "2026-01-02T03:04:05.678Z".len());
/// assert!(now.ends_with('Z'));
/// ```
pub fn timestamp() -> String {
    timestamp_at(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// [`timestamp`] of a time since the Unix epoch.
fn timestamp_at(now: std::time::Duration) -> String {
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}

// ===== ids =====

/// A fresh id, `{prefix}_{16 hex digits}`: a per-process random base mixed with a counter,
/// so ids are unique in a process and unlikely to collide across processes. The loop names
/// runs (`run_…`) and unnamed threads (`thread_…`) with it; a layer of yours can name its
/// files or records the same way. Not a secret: the ids are predictable, so do not use one
/// as a token.
///
/// # Example
///
/// ```
/// use tower_agent_core::context::new_id;
///
/// let (a, b) = (new_id("out"), new_id("out"));
/// assert_ne!(a, b);
/// assert!(a.starts_with("out_") && a.len() == "out_".len() + 16);
/// ```
pub fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Mix the counter so consecutive ids don't share a prefix.
    let mixed = base ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!("{prefix}_{mixed:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let t = timestamp();
        assert_eq!(t.len(), "2026-11-22T02:08:48.123Z".len(), "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && &t[10..11] == "T",
            "{t}"
        );
    }

    #[test]
    fn ids_are_unique() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| new_id("x")).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn with_step_shares_state() {
        let ctx = RunContext::new();
        let next = ctx.with_step(3);
        assert_eq!(next.step(), 3);
        next.with_data(|d| d.insert(7u8));
        assert_eq!(ctx.with_data(|d| d.get::<u8>().copied()), Some(7));
        ctx.cancellation().cancel();
        assert!(next.is_cancelled());
    }

    #[test]
    fn extensions_by_type() {
        let mut ext = RunData::default();
        assert_eq!(ext.insert(5u32), None);
        assert_eq!(ext.insert(6u32), Some(5));
        *ext.get_or_default::<String>() += "x";
        assert_eq!(ext.get::<String>().map(String::as_str), Some("x"));
        assert_eq!(ext.remove::<u32>(), Some(6));
        assert_eq!(ext.get::<u32>(), None);

        let (a, b) = (InstanceId::new(), InstanceId::new());
        assert_ne!(a, b);
        ext.insert_for(a, 1u8);
        ext.insert_for(b, 2u8);
        ext.insert(3u8);
        assert_eq!(ext.get_for::<u8>(a), Some(&1));
        *ext.get_for_mut::<u8>(b).unwrap() += 10;
        assert_eq!(ext.remove_for::<u8>(b), Some(12));
        assert_eq!(ext.get::<u8>(), Some(&3));
        assert_eq!(ext.get_for::<u8>(b), None);
    }

    #[test]
    fn timestamps() {
        let at = |secs: u64, millis: u64| {
            timestamp_at(std::time::Duration::from_millis(secs * 1000 + millis))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(at(1_700_000_000, 999), "2023-11-14T22:13:20.999Z");
    }

    #[test]
    fn transcript_file_names_are_distinct_and_short() {
        assert_eq!(transcript_file_name("t-1_x.y"), "t-1_x.y");
        assert_eq!(transcript_file_name("a/b"), "a%2Fb");
        assert_eq!(transcript_file_name("a%2Fb"), "a%252Fb");
        assert_eq!(transcript_file_name("é"), "%C3%A9");
        let mut seen = HashMap::new();
        let ids = ["a/b", "a_b", "a%2Fb", "a b", "..", ".", "", "A/B", "a\\b"]
            .into_iter()
            .map(String::from)
            .chain((1..300).map(|n| "/".repeat(n)))
            .chain((1..300).map(|n| "x".repeat(n)));
        for id in ids {
            let name = transcript_file_name(&id);
            assert!(name.len() <= MAX_FILE_NAME, "{name}");
            assert!(!name.contains('/'), "{name}");
            if let Some(other) = seen.insert(name.clone(), id.clone()) {
                panic!("{id:?} and {other:?} share {name}");
            }
        }
    }
}
