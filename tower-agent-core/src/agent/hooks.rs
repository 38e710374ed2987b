//! [`LoopHooks`]: what the loop asks of agent-level hooks.

use std::{sync::Arc, time::Duration};

use futures_util::future::BoxFuture;

use super::{AgentResponse, Outcome};
use crate::{
    context::RunContext,
    message::{ToolCall, ToolOutput},
    model::BoxModelService,
    tool::BoxToolService,
};

/// What a Stop / SubagentStop hook sees.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StopInput {
    /// The agent's last answer.
    pub last_assistant_message: String,
    /// Whether the agent is already continuing because of a stop hook: a Stop hook has kept
    /// this run going before (SubagentStop: this subagent call), whatever happened since.
    pub stop_hook_active: bool,
    /// For SubagentStop: the subagent's (tool) name.
    pub agent_name: Option<String>,
    /// For SubagentStop: the subagent call's unique id (`agent-<call id>`; Claude Code's
    /// `Agent` tool: a random `a…` id).
    pub agent_id: Option<String>,
    /// For SubagentStop: the subagent's own JSONL transcript (nested under its parent's, in
    /// `subagents/`), if the calling run keeps a transcript.
    pub agent_transcript_path: Option<std::path::PathBuf>,
}

impl StopInput {
    /// The input of a Stop hook (`agent_name` is `None`).
    pub fn new(last_assistant_message: impl Into<String>, stop_hook_active: bool) -> Self {
        StopInput {
            last_assistant_message: last_assistant_message.into(),
            stop_hook_active,
            agent_name: None,
            agent_id: None,
            agent_transcript_path: None,
        }
    }
}

/// What SubagentStop hooks say when they send a subagent back to work
/// ([`LoopHooks::subagent_stop`]): the subagent's next prompt, and contexts for its model
/// after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopFeedback {
    /// The feedback: the subagent goes on with it as a user message.
    pub feedback: String,
    /// Contexts for the model, after the feedback, as one [hook
    /// context](crate::message::Message::hook_context) (a system message): a command hook's
    /// block in Claude Code's words (`SubagentStop hook blocking error from command:
    /// "<command>": <reason>`). Often empty.
    pub context: Vec<String>,
}

impl StopFeedback {
    /// Feedback with no context.
    pub fn new(feedback: impl Into<String>) -> Self {
        StopFeedback {
            feedback: feedback.into(),
            context: Vec::new(),
        }
    }

    /// This feedback with `context` added to its [`context`](Self::context).
    #[must_use]
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.context.push(context.into());
        self
    }
}

/// The Stop-hook blocks of one run (or, for SubagentStop, of one subagent call): what the
/// stop cap bounds and what `stop_hook_active` says, by Claude Code's rule — a block keeps the
/// agent going unless `cap` blocks came **in a row** already (with no tool call in between: a
/// loop whose model works between blocks is not cut, one that makes no progress is), and once
/// a block has kept it going, `stop_hook_active` holds for the rest of the run.
///
/// The crate's hook step layer keeps one per run in the run's data
/// ([`RunData::get_or_default_for`](crate::context::RunData::get_or_default_for), with the
/// layer's [`InstanceId`](crate::context::InstanceId)); a step layer of yours that keeps an
/// agent going can do the same.
///
/// ```
/// use tower_agent_core::agent::StopBlocks;
///
/// let mut blocks = StopBlocks::default();
/// assert!(!blocks.active());
/// assert_eq!(blocks.block(2), Ok(()));
/// assert_eq!(blocks.block(2), Ok(()));
/// assert_eq!(blocks.block(2), Err(3), "a third block in a row is past the cap");
/// blocks.acted(); // the model made a tool call
/// assert_eq!(blocks.block(2), Ok(()));
/// assert!(blocks.active());
/// assert_eq!(blocks.in_a_row(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct StopBlocks {
    /// Blocks in a row: since the run started or the model last made a tool call.
    in_a_row: u32,
    /// Whether a block has kept the run going yet (for the rest of the run).
    active: bool,
}

impl StopBlocks {
    /// `stop_hook_active`: the run is already going on because of a Stop hook.
    pub fn active(self) -> bool {
        self.active
    }

    /// How many blocks came in a row (since the run started or the model last made a tool
    /// call).
    pub fn in_a_row(self) -> u32 {
        self.in_a_row
    }

    /// The model made a tool call: earlier blocks are no longer in a row.
    pub fn acted(&mut self) {
        self.in_a_row = 0;
    }

    /// A Stop hook blocked: counted, or, past `cap` blocks in a row, overridden. `Err` holds
    /// the number of blocks in a row, this one included.
    pub fn block(&mut self, cap: u32) -> Result<(), u32> {
        if self.in_a_row >= cap {
            return Err(self.in_a_row + 1);
        }
        self.in_a_row += 1;
        self.active = true;
        Ok(())
    }
}

/// How a session started: the `source` of a SessionStart hook's input (and what its matcher
/// is compared with).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SessionSource {
    /// `"startup"`: a run on a new thread (or on no thread).
    Startup,
    /// `"resume"`: a run on a thread that already existed in the store.
    Resume,
    /// `"compact"`: the history was just compacted (the summarize layer replaced old
    /// messages by a summary); fired again in the same run.
    Compact,
}

impl SessionSource {
    /// The protocol value: `startup`, `resume` or `compact`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionSource::Startup => "startup",
            SessionSource::Resume => "resume",
            SessionSource::Compact => "compact",
        }
    }
}

/// What a SessionStart hook sees.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionStartInput {
    /// How the session started.
    pub source: SessionSource,
    /// The model the agent uses, when its settings name one.
    pub model: Option<String>,
    /// For a resumed session (source [`Resume`](SessionSource::Resume)) whose last model
    /// answer's time the thread keeps: how long ago it came and what the prompt cache may
    /// still hold, as Claude Code sends it (measured against 2.1.328); `None` otherwise.
    pub resumed: Option<ResumedSession>,
}

impl SessionStartInput {
    /// The input of a SessionStart hook (with no [`resumed`](Self::resumed) fields).
    pub fn new(source: SessionSource, model: Option<String>) -> Self {
        SessionStartInput {
            source,
            model,
            resumed: None,
        }
    }
}

/// How long a provider's prompt cache lives by default: 5 minutes (Anthropic's default cache
/// lifetime, Claude Code's `cache_ttl` `"5m"`).
pub const PROMPT_CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// Whether a provider's prompt cache likely still holds a conversation whose last model call
/// was `since` ago: less than [`PROMPT_CACHE_TTL`]. PreModelSwitch's `prompt_cache_warm` and a
/// resumed SessionStart's `prompt_cache_likely_expired` (its negation) both say this.
pub fn prompt_cache_warm(since: Duration) -> bool {
    since < PROMPT_CACHE_TTL
}

/// What a resumed session's SessionStart hooks learn of the conversation they resume and of
/// the provider's prompt cache: the fields Claude Code adds to a SessionStart input of source
/// `resume`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResumedSession {
    /// Whole seconds since the thread's last model answer (`seconds_since_last_response`).
    pub seconds_since_last_response: u64,
    /// The size of the conversation resumed, in tokens (`context_tokens`; the crate's
    /// estimate, four bytes of text a token, as for the model-switch events).
    pub context_tokens: u64,
    /// Whether the last answer is older than the prompt cache lives ([`PROMPT_CACHE_TTL`]),
    /// so the next call likely writes the conversation to the cache again
    /// (`prompt_cache_likely_expired`; see [`prompt_cache_warm`]).
    pub prompt_cache_likely_expired: bool,
    /// What writing the conversation to the cache would cost (`estimated_cache_write_usd`):
    /// `0` — the crate has no price list (as for the model-switch events).
    pub estimated_cache_write_usd: f64,
}

impl ResumedSession {
    /// A session whose last model answer came `since` ago, resuming a conversation of
    /// `context_tokens` tokens: the cache's state follows from `since`.
    pub fn new(since: Duration, context_tokens: u64) -> Self {
        ResumedSession {
            seconds_since_last_response: since.as_secs(),
            context_tokens,
            prompt_cache_likely_expired: !prompt_cache_warm(since),
            estimated_cache_write_usd: 0.0,
        }
    }
}

/// The SessionEnd `reason` of a run's outcome: `other`. The protocol's values are `clear`,
/// `resume`, `logout`, `prompt_input_exit` and `other`; the first four name what a person did
/// at Claude Code's prompt. A run is Claude Code run headless (`claude -p`), whose session ends
/// with `other` however its prompt went — measured on 2.1.328 (`tests/reference`): a finished
/// prompt, in one process or resumed, ends with `other`.
///
/// The outcome itself is in the `outcome` field of command hooks' input.
pub fn session_end_reason(outcome: &Outcome) -> &'static str {
    let _ = outcome;
    "other"
}

/// What a StopFailure hook sees: the run ended on a model (API) error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopFailureInput {
    /// The error type: `rate_limit`, `overloaded`, `authentication_failed`, `billing_error`,
    /// `invalid_request`, `model_not_found`, `server_error`, `max_output_tokens` or `unknown`.
    pub error: &'static str,
    /// The error's details, where Claude Code gives them: the status and body of a request
    /// too long for the model's context; the text of an error that is not a provider's. `None`
    /// for the other provider errors (Claude Code 2.1.328 sends no `error_details` there).
    pub error_details: Option<String>,
    /// The error as the conversation shows it (`API Error: 400 <the API's message>`).
    pub last_assistant_message: String,
}

impl StopFailureInput {
    /// The input for a model error whose text (with its causes) is `details`; the error type
    /// is read from an HTTP status or well-known words in it.
    pub fn from_error(details: impl Into<String>) -> Self {
        let details = details.into();
        let error = error_type(&details);
        StopFailureInput {
            error,
            last_assistant_message: format!("API Error: {details}"),
            error_details: Some(details),
        }
    }

    /// The input for a failed model call, as Claude Code builds it: from the
    /// [`ProviderError`](crate::model::ProviderError) in `err`'s chain, its status and the API's
    /// own message (`API Error: 400 <message>`; an authentication failure `Failed to
    /// authenticate. API Error: 403 <message>`), the type from its kind — a generic invalid
    /// request is `unknown`, a request too long for the context `invalid_request` with the
    /// status and body as details (measured against 2.1.328: `tests/reference`). Without a
    /// provider error, [`from_error`](Self::from_error) of its text.
    pub fn from_model_error(err: &(dyn std::error::Error + 'static)) -> Self {
        let Some(p) = crate::model::ProviderError::find(err) else {
            return Self::from_error(crate::error::chain(err));
        };
        let status = p.status().map(|s| s.to_string());
        let said = [status.as_deref(), p.message()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        let said = if said.is_empty() { p.to_string() } else { said };
        let shown = format!("API Error: {said}");
        let (error, error_details, shown) = if p.is_context_length_exceeded() {
            let body = p.body_excerpt().unwrap_or_default();
            let details = [status.as_deref().unwrap_or_default(), body].join(" ");
            ("invalid_request", Some(details.trim().to_owned()), shown)
        } else if p.is_authentication() {
            let shown = format!("Failed to authenticate. {shown}");
            ("authentication_failed", None, shown)
        } else if p.is_rate_limited() {
            ("rate_limit", None, shown)
        } else if p.status() == Some(529) {
            ("overloaded", None, shown)
        } else if p.is_quota_exceeded() {
            ("billing_error", None, shown)
        } else if p.status() == Some(404) {
            ("model_not_found", None, shown)
        } else if p.is_server_error() {
            ("server_error", None, shown)
        } else {
            ("unknown", None, shown)
        };
        StopFailureInput {
            error,
            error_details,
            last_assistant_message: shown,
        }
    }
}

/// The StopFailure `error` type of a model error's text.
fn error_type(text: &str) -> &'static str {
    let t = text.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(&["429", "rate limit", "rate_limit", "too many requests"]) {
        "rate_limit"
    } else if has(&["529", "overloaded"]) {
        "overloaded"
    } else if has(&[
        "401",
        "unauthorized",
        "authentication",
        "invalid api key",
        "invalid x-api-key",
    ]) {
        "authentication_failed"
    } else if has(&["402", "billing", "credit balance", "insufficient_quota"]) {
        "billing_error"
    } else if has(&["model_not_found", "model not found", "404"]) {
        "model_not_found"
    } else if has(&["max_tokens", "max output tokens", "max_output_tokens"]) {
        "max_output_tokens"
    } else if has(&["400", "invalid_request", "invalid request", "bad request"]) {
        "invalid_request"
    } else if has(&["500", "502", "503", "504", "server error", "internal error"]) {
        "server_error"
    } else {
        "unknown"
    }
}

/// What a SubagentStart hook sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubagentStartInput {
    /// The subagent's type: its tool name (what matchers are compared with).
    pub agent_type: String,
    /// This subagent call's unique id (the tool call's id, prefixed `agent-`; Claude Code's
    /// `Agent` tool: a random `a…` id).
    pub agent_id: String,
}

/// Which task event fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskEvent {
    /// TaskCreated: a todo is being added.
    Created,
    /// TaskCompleted: a todo is being marked done.
    Completed,
}

/// What a TaskCreated / TaskCompleted hook sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInput {
    /// The event.
    pub event: TaskEvent,
    /// The task's id.
    pub task_id: String,
    /// Its title.
    pub task_subject: String,
    /// Its description, if it has one.
    pub task_description: Option<String>,
}

impl TaskInput {
    /// The input of a task event.
    pub fn new(event: TaskEvent, task_id: impl Into<String>, subject: impl Into<String>) -> Self {
        TaskInput {
            event,
            task_id: task_id.into(),
            task_subject: subject.into(),
            task_description: None,
        }
    }
}

/// What an InstructionsLoaded hook sees: a memory file was loaded into the context.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstructionsInput {
    /// The file's absolute path.
    pub file_path: std::path::PathBuf,
    /// Its scope: `Project` (under the run's working directory) or `User` (elsewhere).
    pub memory_type: &'static str,
    /// Why it was loaded: `session_start` (at the start of a run).
    pub load_reason: &'static str,
}

impl InstructionsInput {
    /// The file at `file_path` (absolute), of `memory_type` (`Project` or `User`), loaded for
    /// `load_reason` (`session_start`).
    pub fn new(
        file_path: impl Into<std::path::PathBuf>,
        memory_type: &'static str,
        load_reason: &'static str,
    ) -> Self {
        InstructionsInput {
            file_path: file_path.into(),
            memory_type,
            load_reason,
        }
    }
}

/// What a PreCompact hook of the loop sees: a compaction the caller asked for
/// ([`Agent::compact`](super::Agent::compact)) is about to start. (The summarize layer's own
/// compactions ask `SummarizeLayer::on_compact`.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreCompactInput {
    /// `manual`: the caller asked.
    pub trigger: &'static str,
    /// The caller's instructions for the summary, if it gave some (Claude Code: the text after
    /// `/compact`; `null` without).
    pub custom_instructions: Option<String>,
}

impl PreCompactInput {
    /// The input of a compaction the summarize layer makes (`auto`, no instructions).
    pub fn auto() -> Self {
        PreCompactInput {
            trigger: "auto",
            custom_instructions: None,
        }
    }

    /// The input of a manual compaction with `instructions`.
    pub fn manual(instructions: Option<String>) -> Self {
        PreCompactInput {
            trigger: "manual",
            custom_instructions: instructions,
        }
    }
}

/// What a PostCompact hook sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostCompactInput {
    /// `auto` (the context window filled) or `manual` (the caller asked).
    pub trigger: &'static str,
    /// The summary that replaced the older messages.
    pub compact_summary: String,
}

impl PostCompactInput {
    /// A compaction of `trigger` (`auto` or `manual`) that wrote `compact_summary`.
    pub fn new(trigger: &'static str, compact_summary: impl Into<String>) -> Self {
        PostCompactInput {
            trigger,
            compact_summary: compact_summary.into(),
        }
    }
}

/// What a MessageDisplay hook sees: an assistant message with text, once it is complete (as
/// the protocol does for non-interactive runs: one call per message, `index` 0, `final` true).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageDisplayInput {
    /// The turn (the run's id).
    pub turn_id: String,
    /// The message (unique in the run).
    pub message_id: String,
    /// The batch's index in the message (always 0).
    pub index: u32,
    /// Whether this is the message's last batch (always true).
    pub is_final: bool,
    /// The text.
    pub delta: String,
}

impl MessageDisplayInput {
    /// The whole text `delta` of the message `message_id` of the turn `turn_id`, in one
    /// batch (`index` 0, `is_final`).
    pub fn new(
        turn_id: impl Into<String>,
        message_id: impl Into<String>,
        delta: impl Into<String>,
    ) -> Self {
        MessageDisplayInput {
            turn_id: turn_id.into(),
            message_id: message_id.into(),
            index: 0,
            is_final: true,
            delta: delta.into(),
        }
    }
}

/// What only the loop can ask of a hook set: the points that have no service of their own.
///
/// Every other hook event fires in a layer of one of the agent's stacks ([`start`](super::start),
/// model, tool, [`step`](super::step); see [`HookLayers`]) — except these, which cannot:
///
/// - **SubagentStart, SubagentStop, TaskCreated, TaskCompleted, InstructionsLoaded** are
///   raised by built-in tools and stages in the middle of their own work (a subagent about to
///   run or to finish inside one tool call, a todo list's diff, a memory file read): no service
///   boundary sits there. The tool finds the hooks of its run in the run's data
///   ([`RunHooks`]).
/// - **SessionEnd, StopFailure** fire as the run ends, also when its future is dropped
///   (outcome `Cancelled`), from the loop's drop guard, which holds the steps and usage so far;
///   a layer around the run would need them in the response of a run that never answers.
/// - **PreCompact, PostCompact** of a compaction the caller asked for
///   ([`Agent::compact`](super::Agent::compact)), which is not a run.
///
/// Register an implementation with [`AgentBuilder::loop_hooks`](super::AgentBuilder::loop_hooks)
/// (its loop points only) or, for a set that has layers too, with
/// [`AgentBuilder::hooks`](super::AgentBuilder::hooks). Several registrations add up: each is
/// asked in the order registered (see each method for how their answers combine). Every
/// method has a default that does nothing, so an implementation names only the points it
/// uses. Synchronous methods are called on the loop's task: keep them short.
pub trait LoopHooks: Send + Sync + 'static {
    /// Whether any SubagentStop hook would run for the subagent `name`: when `false`,
    /// [`subagent_stop`](Self::subagent_stop) is not called.
    fn has_subagent_stop(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// SubagentStop (`input.agent_name` set): `Some(feedback)` sends the subagent back to
    /// work with the feedback as a user message, followed by its contexts as one [hook
    /// context](crate::message::Message::hook_context); `None` lets it finish.
    fn subagent_stop<'a>(
        &'a self,
        input: StopInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Option<StopFeedback>> {
        let _ = (input, ctx);
        Box::pin(async { None })
    }

    /// How many times in a row — with no pass in between in which the subagent made a tool
    /// call — [`subagent_stop`](Self::subagent_stop) may send a subagent back to work; the
    /// next attempt is overridden with a warning (Claude Code's rule: 8).
    fn stop_cap(&self) -> u32 {
        8
    }

    /// Where the agent keeps transcripts when its builder names no directory
    /// ([`AgentBuilder::transcripts`](super::AgentBuilder::transcripts) wins): command hooks
    /// give a per-project default, so their `transcript_path` is never empty.
    fn transcripts_dir(&self) -> Option<&std::path::Path> {
        None
    }

    /// The run ended with `response`, its thread saved: work the run waits for before it
    /// returns (an AGENT-HOOKS `agent_shutdown` emission), awaited right before
    /// [`session_end`](Self::session_end). A run that ends without reaching its end (an error
    /// of the store, a dropped future) calls only `session_end`.
    fn run_end<'a>(
        &'a self,
        response: &'a AgentResponse,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, ()> {
        let _ = (response, ctx);
        Box::pin(async {})
    }

    /// The run ended with `response` (before its `AgentStop` event).
    fn session_end(&self, response: &AgentResponse, ctx: &RunContext) {
        let _ = (response, ctx);
    }

    /// StopFailure: the run ends on a model error (observe only; called before
    /// [`session_end`](Self::session_end)).
    fn stop_failure(&self, input: &StopFailureInput, ctx: &RunContext) {
        let _ = (input, ctx);
    }

    /// Whether [`subagent_start`](Self::subagent_start) has anything to run for that
    /// subagent type; when `false` it is not called.
    fn has_subagent_start(&self, agent_type: &str) -> bool {
        let _ = agent_type;
        false
    }

    /// SubagentStart: a subagent is about to run; the contexts to give it, in order (they
    /// follow its prompt, as one [hook context](crate::message::Message::hook_context) of its
    /// first request). It cannot be blocked.
    fn subagent_start<'a>(
        &'a self,
        input: SubagentStartInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        let _ = (input, ctx);
        Box::pin(async { Vec::new() })
    }

    /// Whether [`task`](Self::task) has anything to run for `event`; when `false` it is not
    /// called.
    fn has_task(&self, event: TaskEvent) -> bool {
        let _ = event;
        false
    }

    /// TaskCreated / TaskCompleted: `Err(feedback)` prevents the creation or the completion
    /// (the whole `write_todos` call fails with the feedback).
    fn task<'a>(
        &'a self,
        input: TaskInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        let _ = (input, ctx);
        Box::pin(async { Ok(()) })
    }

    /// InstructionsLoaded: a memory file was loaded (observe only), as the session starts
    /// ([`Setup::at_session_start`](super::Setup::at_session_start)); the built-in command
    /// hooks' processes end before UserPromptSubmit.
    fn instructions_loaded(&self, input: &InstructionsInput, ctx: &RunContext) {
        let _ = (input, ctx);
    }

    /// PreCompact, for a compaction the caller asked for
    /// ([`Agent::compact`](super::Agent::compact)): `Err(reason)` blocks it (the thread stays
    /// as it is).
    fn pre_compact<'a>(
        &'a self,
        input: PreCompactInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        let _ = (input, ctx);
        Box::pin(async { Ok(()) })
    }

    /// A compaction the caller asked for replaced the thread's history by its summary: the
    /// SessionStart hooks of source `compact` (with `model`), then the PostCompact hooks, in
    /// Claude Code's order; the SessionStart contexts, in order (they follow the summary).
    fn compacted<'a>(
        &'a self,
        input: PostCompactInput,
        model: Option<String>,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        let _ = (input, model, ctx);
        Box::pin(async { Vec::new() })
    }
}

/// A hook set that also fires at the agent's four levels: the layers
/// [`AgentBuilder::hooks`](super::AgentBuilder::hooks) places, at documented positions, when
/// the agent is built.
///
/// Each `wrap_*` method is the set's layer at one level, applied to the stack under it:
///
/// | level | where the builder places it | when |
/// |---|---|---|
/// | [start](super::start) | outermost of the start stack, outside every [`start_layer`](super::AgentBuilder::start_layer) | once, at build |
/// | model | outermost of the model stack, outside the service given to [`model`](super::AgentBuilder::model) | once, at build |
/// | tool | outermost of each run's tool stack, outside every [`tool_layer`](super::AgentBuilder::tool_layer) | once per run |
/// | [step](super::step) | outermost of the step stack, outside every [`step_layer`](super::AgentBuilder::step_layer) | once, at build |
///
/// With several sets, the first registered is the outermost at each level.
/// [`Agent::describe`](super::Agent::describe) prints every stack in this order, the sets'
/// layers included. A set whose layers you place yourself (as tower layers, where you want
/// them) registers its loop points alone with
/// [`AgentBuilder::loop_hooks`](super::AgentBuilder::loop_hooks): then nothing is placed for
/// it.
///
/// The callback registry `HookSet` of the facade crate (`tower_agent::layers::hooks`)
/// implements it: its model, tool, start and step hooks are these layers.
pub trait HookLayers: LoopHooks {
    /// The set's model layer around `model` (the model stack under it).
    fn wrap_model(&self, model: BoxModelService) -> BoxModelService {
        model
    }

    /// The set's tool layer around `tools` (a run's tool stack under it).
    fn wrap_tools(&self, tools: BoxToolService) -> BoxToolService {
        tools
    }

    /// The set's start layer around `start`; `None` (the default) when the set has no start
    /// hook, so nothing is placed.
    fn wrap_start(
        &self,
        start: super::start::BoxStartService,
    ) -> Option<super::start::BoxStartService> {
        let _ = start;
        None
    }

    /// The set's step layer around `step`; `None` (the default) when the set has no step
    /// hook, so nothing is placed (an agent without step layers then calls no step stack).
    fn wrap_step(&self, step: super::step::BoxStepService) -> Option<super::step::BoxStepService> {
        let _ = step;
        None
    }
}

/// Hook work a run waits for before it goes on: the command hooks of InstructionsLoaded,
/// which Claude Code finishes before UserPromptSubmit (measured: `tests/reference`). Kept in
/// the run's data by [`RunHooks::wait_for`], awaited by [`settle_hooks`].
#[derive(Default)]
struct PendingHooks(Vec<tokio::task::JoinHandle<()>>);

/// Waits until the hooks kept by [`RunHooks::wait_for`] have ended (a hook that panicked too).
pub(crate) async fn settle_hooks(ctx: &RunContext) {
    let pending = ctx.with_data(|d| d.remove::<PendingHooks>());
    for task in pending.map(|p| p.0).unwrap_or_default() {
        if let Err(err) = task.await {
            tracing::warn!("a hook the run waited for failed: {err}");
        }
    }
}

/// The [`LoopHooks`] of a run, kept in its data: how a tool (or a layer) reaches the run's
/// hooks from inside a call, to fire the events raised in the middle of its own work — as
/// subagents ([`Agent::into_tool`](super::Agent::into_tool)) fire SubagentStart and
/// SubagentStop, the todo built-in TaskCreated and TaskCompleted, the memory built-in
/// InstructionsLoaded. The loop puts them there as the run starts, when the agent has hooks
/// ([`AgentBuilder::hooks`](super::AgentBuilder::hooks),
/// [`AgentBuilder::loop_hooks`](super::AgentBuilder::loop_hooks); several registrations are
/// one [`LoopHooks`] here, which asks each in order).
///
/// ```
/// use std::sync::Arc;
/// use tower_agent_core::agent::{LoopHooks, RunHooks, TaskEvent};
/// use tower_agent_core::context::RunContext;
///
/// struct Tasks;
/// impl LoopHooks for Tasks {
///     fn has_task(&self, event: TaskEvent) -> bool {
///         event == TaskEvent::Created
///     }
/// }
///
/// // In a tool's call: fire TaskCreated only if some hook of the run would see it.
/// fn would_tell(ctx: &RunContext) -> bool {
///     RunHooks::of(ctx).is_some_and(|hooks| hooks.has_task(TaskEvent::Created))
/// }
/// let ctx = RunContext::new();
/// assert!(!would_tell(&ctx)); // a run without hooks
/// // What the loop does as a run starts (a test of a tool can do the same):
/// ctx.with_data(|d| d.insert(RunHooks::new(Arc::new(Tasks))));
/// assert!(would_tell(&ctx));
/// ```
#[derive(Clone)]
pub struct RunHooks(Arc<dyn LoopHooks>);

impl RunHooks {
    /// `hooks`, to keep in a run's data.
    pub fn new(hooks: Arc<dyn LoopHooks>) -> Self {
        RunHooks(hooks)
    }

    /// The hooks of the run of `ctx`, if it has any.
    pub fn of(ctx: &RunContext) -> Option<Arc<dyn LoopHooks>> {
        ctx.with_data(|data| data.get::<RunHooks>().map(|p| Arc::clone(&p.0)))
    }

    /// Keeps `task`, a hook's work spawned for the run of `ctx` while the session starts, for
    /// the run to wait for: how an observe-only hook that runs in the background (an
    /// [`instructions_loaded`](LoopHooks::instructions_loaded) hook that starts a process)
    /// still ends before the run goes on, as Claude Code's InstructionsLoaded hooks end
    /// before its UserPromptSubmit hooks.
    ///
    /// The run waits for the tasks kept so far once the setup stages' session-start work
    /// ([`Setup::at_session_start`](super::Setup::at_session_start)) is done, before the
    /// UserPromptSubmit hooks (or, without a start layer to run that work, before the setup
    /// stages); a task that fails or panics is logged (`tracing` warning) and the run goes on.
    /// A task kept at another time, or in a run without setup stages, is not waited for: it
    /// runs on by itself. Cancelling the run does not abort the tasks.
    pub fn wait_for(ctx: &RunContext, task: tokio::task::JoinHandle<()>) {
        ctx.with_data(|d| d.get_or_default::<PendingHooks>().0.push(task));
    }
}

impl std::fmt::Debug for RunHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunHooks(..)")
    }
}

/// The environment the SessionStart hooks of a run exported through `CLAUDE_ENV_FILE`: given
/// to later command hooks and to the `execute` tool of the run. Kept in the run's data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionEnv(pub Arc<[(String, String)]>);

impl SessionEnv {
    /// The variables of the run of `ctx` (empty if none were exported).
    pub fn of(ctx: &RunContext) -> SessionEnv {
        ctx.with_data(|data| data.get::<SessionEnv>().cloned())
            .unwrap_or_default()
    }

    /// The variables, in the order they were exported (a later one overrides an earlier one
    /// of the same name when applied in order).
    pub fn vars(&self) -> &[(String, String)] {
        &self.0
    }
}

/// What a PostToolBatch hook sees: every call of the step and its result as the model will
/// see it, in call order.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ToolBatch {
    /// The calls, in the order the model made them.
    pub calls: Vec<ToolCall>,
    /// Their outputs (`outputs[i]` answers `calls[i]`).
    pub outputs: Vec<ToolOutput>,
}
