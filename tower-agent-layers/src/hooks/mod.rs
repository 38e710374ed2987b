//! Hook callbacks for every event: plain functions, several per point, filtered by matchers,
//! ordered by priority or by name, able to observe, block or modify.
//!
//! Register callbacks on a [`Hooks`] registry, [`compile`](Hooks::compile) it (the order is
//! resolved once, here: a cycle or an unknown name is an error naming the hooks), and hand
//! the [`HookSet`] to [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks). The
//! builder places the set's layers ([`HookLayers`]) outermost on each of the agent's stacks —
//! the start stack (SessionStart, UserPromptSubmit), the model stack, the tool stack and the
//! step stack (Stop, PostToolBatch) — and [`Agent::describe`](tower_agent_core::Agent::describe) prints
//! them in place. The events raised inside built-in tools (SubagentStart, SubagentStop,
//! TaskCreated, TaskCompleted, InstructionsLoaded), the run's end (SessionEnd, StopFailure)
//! and [`Agent::compact`](tower_agent_core::Agent::compact) reach the set through [`LoopHooks`], the
//! points only the loop can fire. Several sets add up, the first registered outermost.
//!
//! To place a layer yourself in a `ServiceBuilder` stack, take it alone
//! ([`HookSet::start_layer`], [`HookSet::model_layer`], [`HookSet::tool_layer`],
//! [`HookSet::step_layer`]) and register the set's loop points with
//! [`AgentBuilder::loop_hooks`](tower_agent_core::agent::AgentBuilder::loop_hooks), or the set's
//! SessionEnd, StopFailure, Subagent*, Task*, InstructionsLoaded and manual-compaction hooks
//! never fire. Write a `Layer` by hand when a hook needs more than a callback.
//!
//! # Events
//!
//! Every event — where it fires, the methods that register a Rust hook for it, what the hook
//! can do — is a row of the table on [`HookEvent`], made from the crate's one list of events.
//! A callback takes the event's input and the run's [`RunContext`]; its signature is on its
//! registration method.
//!
//! Callbacks that decide return the event's decision type ([`PreToolUse`], [`PostToolUse`],
//! …) either at once or as a future (`async move { … }`): both work, and a synchronous answer
//! costs no allocation. Matchers ([`ToolMatcher`] syntax) filter the tool events by tool name
//! and SubagentStop by the subagent's name; other events ignore them.
//!
//! # Order and merge rules
//!
//! - Hooks run in **priority** order, higher first (= outer: for tools and the model, the
//!   first hook sees the request first), then in registration order. `before("x")` /
//!   `after("x")` constraints override priorities; resolving them is a topological sort done
//!   once in [`Hooks::compile`].
//! - **The tool's input check** comes first ([`Tool::check`](tower_agent_core::tool::Tool::check),
//!   reached through the request's [`ToolChecks`](tower_agent_core::tool::ToolChecks), as Claude Code
//!   validates a tool's input before its hooks): a refused call is answered with the refusal
//!   and fires no PreToolUse, PostToolUse or PostToolUseFailure hook; the hooks, permission
//!   rules and approvals of an accepted call see its normalised input (its
//!   [`ObservableInput`](tower_agent_core::tool::ObservableInput) when the check gave one). The tool runs
//!   with the checked input, or with a hook's rewrite, which it checks again.
//! - **PreToolUse**: decisions combine **deny > ask > allow**. The first `Deny` (or `Refuse`) stops the
//!   chain; an `Ask` is remembered and the chain goes on (a later `Deny` still wins); rewrites
//!   chain in order, each hook seeing the arguments the previous one wrote. A denied call is
//!   an error output `PreToolUse:<tool> hook error: <reason>` the model sees (Claude Code's
//!   words); a `Refuse` denies it as a `Deny` does, answered with the hook's own output (how
//!   another agent words a refusal). Contexts are kept in order and
//!   follow the result (or the denial). `Abort` denies the call and ends the run `Aborted`;
//!   `Many` applies several decisions of one hook in order. `Defer` ranks between deny and
//!   ask (see [`PreToolUse::Defer`]).
//! - **Permission rules** ([`Hooks::permission_rules`], [`Permission`]; command
//!   hooks (`tower_agent::command`) add Claude Code's): checked once the PreToolUse
//!   hooks let a call through. A `Deny` refuses it with its text alone, nothing asked; an
//!   `Ask` (even over a hook's `Allow`), a hook's `Ask`, or a `NotAllowed` no hook allowed
//!   goes the approval path.
//! - **Approval** (a call some hook or rule asked about): a hook's ask with nobody to ask (no
//!   [`Approval`] service, no deferring policy) is refused at once with its reason alone, as
//!   Claude Code `-p` does. Otherwise the PermissionRequest hooks run in order; the first
//!   `Deny` denies (the model sees its message alone; with `interrupt` the run also ends
//!   `Aborted`), an `Allow` is kept (its `updated_input` replaces the arguments) and the
//!   chain goes on (a later `Deny` still wins). With no decision, a `permission_prompt`
//!   [`Notification`] is sent and the [`Approval`] service ([`Hooks::approval`]) is asked;
//!   its `Deny` is the user's answer (`denied: <why>`). Without a service, a rule's ask is
//!   refused with the rule's text. When the service fails, the call is denied **on its
//!   own**, and only then do the PermissionDenied hooks run: a `Retry` adds a note (a
//!   context after the step's results) telling the model it may retry.
//!   With the deferring policy ([`Hooks::defer_approvals`]) the call instead waits in the
//!   thread for a person's decision, and so does a deferred call (any number per step): see
//!   [`agent::interrupt`](tower_agent_core::agent::interrupt).
//! - **PostToolBatch**: after every call of a step resolved (and the step's reminders),
//!   before the next model call, once per step; contexts are kept in order and added as one
//!   [hook context](tower_agent_core::message::Message::hook_context) (a system message); the first
//!   `Stop` adds its reason as a user message of a `<system-hook>` block and ends the run
//!   `Blocked`.
//! - **PostToolUse / PostToolUseFailure**: replacements chain in order; the contexts of all
//!   hooks are kept, in order, with the output
//!   ([`ToolOutput::add_context`](tower_agent_core::message::ToolOutput::add_context)); the loop adds
//!   a step's, in call order, as one [hook context](tower_agent_core::message::Message::hook_context)
//!   after its results (as Claude Code does: the result stays the tool's). `Abort` ends the
//!   run `Aborted` (the output is dropped).
//! - **UserPromptSubmit**: the first `Block` ends the run `Blocked` (the prompt is not added to
//!   the thread); rewrites chain; contexts are kept in order and added after the prompt (and
//!   SessionStart's) as one [hook context](tower_agent_core::message::Message::hook_context).
//! - **SessionStart**: contexts are kept in order; the first `Block` ends the run `Blocked`
//!   before the prompt enters the thread.
//! - **Stop / SubagentStop**: if any hook continues, the agent continues with the feedback of
//!   every continuing hook (in order, blank-line separated) as a user message. From then on,
//!   for the rest of the run, Stop hooks get `stop_hook_active = true` (as in Claude Code's
//!   reference: the run is already going on because of a stop hook), also after steps with
//!   tool calls; a hook that must not loop checks it.
//! - **Stop cap**, as Claude Code's client does (its reference documents none; it caps
//!   *consecutive* blocks): once Stop hooks have kept a run going 8 times **in a row** — with
//!   no step in between in which the model made a tool call — the next attempt is overridden
//!   and the run ends ([`Outcome::Finished`](tower_agent_core::agent::Outcome::Finished)) with an
//!   [`AgentEvent::Warning`](tower_agent_core::agent::AgentEvent::Warning) (also a Notification) saying
//!   so. A step in which the model made at least one tool call (whatever became of the
//!   calls: a denied call counts) resets the count to 0, so a "keep going until done" loop
//!   whose model works between blocks (a 12-iteration loop, a tool call each iteration) runs
//!   to its end, bounded by [`max_steps`](tower_agent_core::agent::AgentBuilder::max_steps), while a hook
//!   that blocks an agent making no progress (answering text only) is overridden at the 9th
//!   block. Every way of continuing counts alike (a `Continue` here; for command hooks a
//!   `decision: "block"`, an exit 2 or an `additionalContext`). SubagentStop blocks are
//!   counted per subagent call, by the same rule (a pass of the subagent in which it made a
//!   tool call resets the count). Change the cap with [`Hooks::stop_cap`]
//!   ([`DEFAULT_STOP_CAP`] = 8).
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_layers::hooks::{Hooks, PostToolUse, PreToolUse};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hooks = Hooks::new()
//!     .before_tool_use("bash", |call, _ctx| {
//!         let command = call.arguments["command"].as_str().unwrap_or_default().to_owned();
//!         async move {
//!             if command.contains("rm -rf") {
//!                 PreToolUse::Deny("rm -rf is not allowed".into())
//!             } else {
//!                 PreToolUse::Continue
//!             }
//!         }
//!     })
//!     .priority(100)
//!     .name("security")
//!     .after_tool_use("*", |_call, _out, _ctx| PostToolUse::AddContext("checked".into()))
//!     .compile()?;
//!
//! let model = ScriptedModel::new()
//!     .tool_call("bash", json!({ "command": "rm -rf /" }))
//!     .text("I won't do that.")
//!     .recording();
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .tool(tool_fn("bash", "Runs a command", json!({"type": "object"}), |_, _| async {
//!         Ok("ran")
//!     }))
//!     .hooks(hooks)
//!     .build();
//! let resp = agent.run("clean up").await?;
//! assert_eq!(resp.messages[2].text(), "PreToolUse:bash hook error: rm -rf is not allowed");
//! # Ok(())
//! # }
//! ```

mod compact;
mod decision;
mod events;
mod failure;
pub mod future;
mod loop_points;
mod model;
mod order;
mod resume;
mod settings;
mod setup;
mod start;
mod step;
mod switch;
mod tool;
mod watch;

use std::{collections::HashMap, fmt, sync::Arc};

use tower::util::BoxCloneSyncService;

pub use self::{
    compact::PreCompact,
    decision::{
        BeforeModel, Deferred, HookFuture, HookResult, InstructionsInput, MessageDisplay,
        MessageDisplayInput, Notification, Permission, PermissionDenied, PermissionRequest,
        PostCompactInput, PostToolBatch, PostToolUse, PostToolUseFailure, PreCompactInput,
        PreToolUse, ResumedSession, SessionSource, SessionStart, SessionStartInput, Stop,
        StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskEvent, TaskInput,
        ToolBatch, ToolFailure, UserPrompt,
    },
    events::*,
    model::{HookModel, HookModelLayer},
    order::HookOrderError,
    setup::{DirectoryAdded, DirectoryAddedInput, Setup},
    start::{HookStart, HookStartLayer},
    step::{HookStep, HookStepLayer},
    tool::{DURATION_MS, HookTool, HookToolLayer},
    watch::{FileChanged, FileChangedInput, FileEvent, MAX_WATCHED},
};
use futures_util::future::BoxFuture;

use tower::Layer;

use self::events::HookSlots;
pub use self::settings::SettingsSource;
use crate::matcher::ToolMatcher;
use tower_agent_core::{
    agent::{
        AgentResponse, HookLayers, LoopHooks, StopFeedback, start::BoxStartService,
        step::BoxStepService,
    },
    context::RunContext,
    error::BoxError,
    message::ToolCall,
};

/// The `notification_type` of a [`RunContext::warn`].
pub const NOTIFY_WARNING: &str = "warning";
/// The `notification_type` sent when the [`Approval`] service is about to be asked.
pub const NOTIFY_PERMISSION_PROMPT: &str = "permission_prompt";

/// The default cap on Stop-hook continuations in a row — with no tool call in between — (per
/// run; SubagentStop: per subagent call): Claude Code's 8. The 9th such block is overridden
/// and the run ends with a warning; a step with a tool call resets the count.
pub const DEFAULT_STOP_CAP: u32 = 8;

/// What the [`Approval`] service is asked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The call (arguments as rewritten by the hooks before).
    pub call: ToolCall,
    /// The reasons of the hooks that asked.
    pub reason: String,
    /// The run.
    pub ctx: RunContext,
}

/// What the [`Approval`] service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Go on with the call.
    Allow,
    /// Deny it, with a reason for the model.
    Deny(String),
}

/// The service that answers [`PreToolUse::Ask`]: any tower service (a channel to a UI, a
/// policy engine …), type-erased.
pub type Approval = BoxCloneSyncService<ApprovalRequest, ApprovalDecision, BoxError>;

/// A permission check ([`Hooks::permission_rules`]).
pub(crate) type PermissionCheck = Arc<dyn Fn(&ToolCall, &RunContext) -> Permission + Send + Sync>;

/// Puts a registered hook into its slot of a compiled set, with its matcher and how it fails.
type Install = Arc<dyn Fn(&mut HookSlots, &ToolMatcher, &Arc<failure::Policy>) + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Registration {
    /// The registration method, for labels.
    event: &'static str,
    install: Install,
    matcher: ToolMatcher,
    pub(crate) name: Option<String>,
    /// [`Hooks::fail_closed`].
    fail_closed: bool,
    pub(crate) priority: i32,
    pub(crate) before: Vec<String>,
    pub(crate) after: Vec<String>,
}

impl Registration {
    /// How error messages name this hook.
    pub(crate) fn label(&self, index: usize) -> String {
        match &self.name {
            Some(name) => format!("`{name}`"),
            None => self.unnamed_label(index),
        }
    }

    /// `#index (event)`, whatever the name.
    pub(crate) fn unnamed_label(&self, index: usize) -> String {
        format!("#{index} ({})", self.event)
    }
}

/// The two states of a [`Hooks`] registry, in its type: whether the call before was a
/// registration, so that [`priority`](Hooks::priority), [`name`](Hooks::name),
/// [`before`](Hooks::before) and [`after`](Hooks::after) can only follow one.
pub mod state {
    /// A [`Hooks`](super::Hooks) registry (new, or after a setting such as
    /// [`stop_cap`](super::Hooks::stop_cap)): register a hook next.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Open;

    /// A [`Hooks`](super::Hooks) registry whose last call registered a hook:
    /// [`priority`](super::Hooks::priority), [`name`](super::Hooks::name),
    /// [`before`](super::Hooks::before) and [`after`](super::Hooks::after) configure it.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Added;
}

/// A registry of hook callbacks. See the [module docs](crate::hooks).
///
/// Each registration method (`before_tool_use`, `on_stop`, …) adds one hook and returns a
/// `Hooks<`[`Added`](state::Added)`>`, on which [`priority`](Self::priority),
/// [`name`](Self::name), [`before`](Self::before) and [`after`](Self::after) configure the
/// hook just added. They exist on no other state, so configuring a hook that was never
/// added does not compile:
///
/// ```compile_fail
/// use tower_agent_layers::hooks::Hooks;
///
/// let hooks = Hooks::new().priority(10); // no hook to give a priority to
/// ```
///
/// A `Hooks<Added>` is a complete registry: [`compile`](Self::compile) it, or turn it into
/// a plain `Hooks` with `.into()` to store it.
#[derive(Clone, Default)]
#[must_use]
pub struct Hooks<S = state::Open> {
    registrations: Vec<Registration>,
    approval: Option<Approval>,
    defer_approvals: bool,
    permissions: Vec<PermissionCheck>,
    /// [`DURATION_MS`] is recorded (a hook reads it).
    times_tool_calls: bool,
    /// [`Hooks::watch_settings`].
    settings: Vec<Arc<dyn SettingsSource>>,
    stop_cap: Option<u32>,
    transcripts: Option<std::path::PathBuf>,
    _state: S,
}

impl Hooks {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
}

impl From<Hooks<state::Added>> for Hooks {
    fn from(hooks: Hooks<state::Added>) -> Self {
        hooks.into_open()
    }
}

impl Hooks<state::Added> {
    fn last(&mut self) -> &mut Registration {
        // The type says the last call registered a hook, so there is one; `push` is the
        // only way to reach this state.
        let index = self.registrations.len() - 1;
        &mut self.registrations[index]
    }

    /// The priority of the hook just added (default 0; higher runs earlier / outer).
    pub fn priority(mut self, priority: i32) -> Self {
        self.last().priority = priority;
        self
    }

    /// Names the hook just added, for `before`/`after` and error messages.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.last().name = Some(name.into());
        self
    }

    /// The hook just added fails closed: if it panics, the event's blocking decision stands
    /// for it — a PreToolUse hook denies the call, a UserPromptSubmit or SessionStart hook
    /// blocks the run, a PostToolUse hook aborts it, a Stop hook keeps the agent going, a
    /// PostToolBatch hook stops the loop, a PermissionRequest hook denies, a TaskCreated or
    /// TaskCompleted hook blocks the call, `should_continue` ends the run — as a command hook
    /// with Claude Code's `"onFailure": "block"`. Without it a hook that panics is skipped
    /// (fail-open). Either way the panic is logged naming the hook, and the reason of a
    /// blocking decision says which hook panicked and why. BeforeModel and AfterModel hooks
    /// own the request or response they were given: their panic goes on unwinding.
    pub fn fail_closed(mut self) -> Self {
        self.last().fail_closed = true;
        self
    }

    /// The hook just added runs before the hook named `name`.
    pub fn before(mut self, name: impl Into<String>) -> Self {
        self.last().before.push(name.into());
        self
    }

    /// The hook just added runs after the hook named `name`.
    pub fn after(mut self, name: impl Into<String>) -> Self {
        self.last().after.push(name.into());
        self
    }
}

impl<S> Hooks<S> {
    fn with_state<T>(self, state: T) -> Hooks<T> {
        Hooks {
            registrations: self.registrations,
            approval: self.approval,
            defer_approvals: self.defer_approvals,
            permissions: self.permissions,
            times_tool_calls: self.times_tool_calls,
            settings: self.settings,
            stop_cap: self.stop_cap,
            transcripts: self.transcripts,
            _state: state,
        }
    }

    /// This registry in the [`Open`](state::Open) state (the hook added last keeps its
    /// priority, name and order constraints): one type for a registry however it was built.
    pub fn into_open(self) -> Hooks {
        self.with_state(state::Open)
    }

    fn push(
        mut self,
        event: &'static str,
        matcher: ToolMatcher,
        install: Install,
    ) -> Hooks<state::Added> {
        self.registrations.push(Registration {
            event,
            install,
            matcher,
            name: None,
            fail_closed: false,
            priority: 0,
            before: Vec::new(),
            after: Vec::new(),
        });
        self.with_state(state::Added)
    }

    /// The service asked when a PreToolUse hook answers [`PreToolUse::Ask`].
    pub fn approval<A>(mut self, service: A) -> Hooks
    where
        A: tower::Service<ApprovalRequest, Response = ApprovalDecision>
            + Clone
            + Send
            + Sync
            + 'static,
        A::Error: Into<BoxError>,
        A::Future: Send + 'static,
    {
        use tower::ServiceExt;
        self.approval = Some(Approval::new(service.map_err(Into::into)));
        self.with_state(state::Open)
    }

    /// The deferring approval policy: a call a PreToolUse hook asks about (and no
    /// PermissionRequest hook decides) or defers — for any number of calls in the step — waits
    /// in the thread for a person's decision instead of going to an [`Approval`] service: the
    /// run ends [`Outcome::Interrupted`](tower_agent_core::agent::Outcome::Interrupted) once the step's
    /// other calls are done, and a later request answers with
    /// [`AgentRequest::approvals`](tower_agent_core::agent::AgentRequest::approvals). See
    /// [`agent::interrupt`](tower_agent_core::agent::interrupt). Replaces [`approval`](Self::approval).
    pub fn defer_approvals(mut self) -> Hooks {
        self.defer_approvals = true;
        self.with_state(state::Open)
    }

    /// Adds a permission check: what rules say of each tool call once its PreToolUse hooks
    /// have run ([`Permission`]). The tool hook layer ([`HookSet::tool_layer`]) enforces it in
    /// Claude Code's order: the PreToolUse hooks first (a hook's deny wins at once); then a
    /// [`Permission::Deny`] refuses the call, whatever the hooks said; a
    /// [`Permission::Ask`], a hook's [`PreToolUse::Ask`], or a [`Permission::NotAllowed`]
    /// no hook allowed goes the approval path (PermissionRequest hooks, then the
    /// [`Approval`] service, else refused); anything else runs. A hook's
    /// [`PreToolUse::Allow`] thus overrides only `NotAllowed`. Checks added here combine,
    /// the most cautious winning. Command hooks (`tower_agent::command`) add one
    /// for the `permissions` of their settings.
    pub fn permission_rules<F>(mut self, check: F) -> Hooks
    where
        F: Fn(&ToolCall, &RunContext) -> Permission + Send + Sync + 'static,
    {
        self.permissions.push(Arc::new(check));
        self.with_state(state::Open)
    }

    /// Have the tool hook layer record how long each call its PostToolUse or
    /// PostToolUseFailure hooks see took ([`DURATION_MS`] in the output's metadata): for the
    /// hooks that report it (command hooks' `duration_ms`), so that the others pay nothing.
    pub fn time_tool_calls(mut self) -> Hooks {
        self.times_tool_calls = true;
        self.with_state(state::Open)
    }

    /// Watches `source` during runs: the step hook layer asks it between steps whether its
    /// files changed, and lets it apply the change (command hooks' settings files:
    /// ConfigChange, then the hooks as the files are now). See [`SettingsSource`]; sources
    /// added here are all watched, in order.
    pub fn watch_settings(mut self, source: Arc<dyn SettingsSource>) -> Hooks {
        self.settings.push(source);
        self.with_state(state::Open)
    }

    /// How many times in a row Stop hooks may keep a run going ([`DEFAULT_STOP_CAP`] = 8,
    /// as in Claude Code); the next attempt is overridden and the run ends with a warning.
    /// In a row: with no step in between in which the model made a tool call — such a step
    /// resets the count to 0, so a loop whose model works between blocks is bounded by
    /// `max_steps`, not by the cap. SubagentStop hooks: per subagent call, a pass in which the
    /// subagent made a tool call resetting the count. See the
    /// [module docs](crate::hooks).
    pub fn stop_cap(mut self, cap: u32) -> Hooks {
        self.stop_cap = Some(cap);
        self.with_state(state::Open)
    }

    /// Whether [`stop_cap`](Self::stop_cap) was set.
    pub fn has_stop_cap(&self) -> bool {
        self.stop_cap.is_some()
    }

    /// The transcripts directory of agents built with these hooks when their builder names
    /// none ([`AgentBuilder::transcripts`](tower_agent_core::agent::AgentBuilder::transcripts) wins).
    /// Command hooks (`tower_agent::command`) set a per-project default.
    pub fn transcripts_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Hooks {
        self.transcripts = Some(dir.into());
        self.with_state(state::Open)
    }

    /// Whether a hook of this registry is named `name` (names are unique: see
    /// [`name`](Hooks::name)).
    pub fn has_name(&self, name: &str) -> bool {
        self.registrations
            .iter()
            .any(|r| r.name.as_deref() == Some(name))
    }

    /// Whether [`transcripts_dir`](Self::transcripts_dir) was set.
    pub fn has_transcripts_dir(&self) -> bool {
        self.transcripts.is_some()
    }

    /// Resolves the order and compiles the hooks.
    ///
    /// # Errors
    ///
    /// A cycle in the `before`/`after` constraints, a constraint naming no hook, or two hooks
    /// with one name: the error names the hooks involved.
    pub fn compile(self) -> Result<HookSet, HookOrderError> {
        let order = order::resolve(&self.registrations)?;
        let mut set = HookSetInner {
            stop_cap: self.stop_cap.unwrap_or(DEFAULT_STOP_CAP),
            transcripts: self.transcripts,
            approval: self.approval,
            defer_approvals: self.defer_approvals,
            permissions: self.permissions,
            times_tool_calls: self.times_tool_calls,
            settings: self.settings,
            order: order
                .iter()
                .map(|&i| self.registrations[i].label(i))
                .collect(),
            ..HookSetInner::default()
        };
        for i in order {
            let registration = &self.registrations[i];
            let policy = Arc::new(failure::Policy {
                label: registration.label(i),
                fail_closed: registration.fail_closed,
            });
            (registration.install)(&mut set.slots, &registration.matcher, &policy);
        }
        Ok(HookSet {
            inner: Arc::new(set),
        })
    }
}

impl<S> fmt::Debug for Hooks<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let events: HashMap<&str, usize> =
            self.registrations.iter().fold(HashMap::new(), |mut m, r| {
                *m.entry(r.event).or_default() += 1;
                m
            });
        f.debug_struct("Hooks")
            .field("events", &events)
            .field("approval", &self.approval.is_some())
            .finish_non_exhaustive()
    }
}

/// Compiled hooks, in their resolved order. Cloning is one reference count.
#[derive(Clone)]
pub struct HookSet {
    pub(crate) inner: Arc<HookSetInner>,
}

impl HookSet {
    /// The tool-level hooks (PreToolUse, PostToolUse, PostToolUseFailure) as a tool layer, to
    /// place yourself. The set's other events need the set's other layers and its loop points
    /// ([`AgentBuilder::loop_hooks`](tower_agent_core::agent::AgentBuilder::loop_hooks)):
    ///
    /// ```
    /// use tower::ServiceBuilder;
    /// use tower_agent_core::{Agent, model::ScriptedModel};
    /// use tower_agent_layers::hooks::{Hooks, PreToolUse};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let set = Hooks::new()
    ///     .before_tool_use("bash", |_call, _ctx| PreToolUse::Deny("no shell".into()))
    ///     .on_session_end(|_response, _ctx| {})
    ///     .compile()?;
    /// let agent = Agent::builder()
    ///     .model(ScriptedModel::new().text("hi"))
    ///     // The set's tool hooks inside a layer of yours, not outermost …
    ///     .tool_layer(ServiceBuilder::new().concurrency_limit(4).layer(set.tool_layer()))
    ///     // … and its SessionEnd hook, which only the loop fires.
    ///     .loop_hooks(set)
    ///     .build();
    /// assert_eq!(agent.describe().tools, ["ConcurrencyLimitLayer", "HookToolLayer"]);
    /// assert_eq!(agent.describe().loop_hooks, ["HookSet"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_layer(&self) -> HookToolLayer {
        HookToolLayer::new(self.clone())
    }

    /// The start hooks (SessionStart, UserPromptSubmit, and the Notification observer) as a
    /// layer of the start stack: see [`HookStartLayer`].
    ///
    /// ```
    /// use tower_agent_core::{Agent, agent::Outcome, model::ScriptedModel};
    /// use tower_agent_layers::hooks::{Hooks, UserPrompt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let prompts = Hooks::new()
    ///     .on_user_prompt(|prompt, _ctx| {
    ///         if prompt.contains("password") {
    ///             UserPrompt::Block("no secrets".into())
    ///         } else {
    ///             UserPrompt::Continue
    ///         }
    ///     })
    ///     .compile()?;
    /// let agent = Agent::builder()
    ///     .model(ScriptedModel::new().text("hi"))
    ///     .start_layer(prompts.start_layer())
    ///     .build();
    /// let resp = agent.run("my password is hunter2").await?;
    /// assert!(matches!(resp.outcome, Outcome::Blocked { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn start_layer(&self) -> HookStartLayer {
        HookStartLayer::new(self.clone())
    }

    /// The step hooks (`after_step`, `should_continue`, PostToolBatch, Stop) as a layer of
    /// the step stack (see [`HookStepLayer`]).
    pub fn step_layer(&self) -> HookStepLayer {
        HookStepLayer::new(self.clone())
    }

    /// The model-level hooks (before/after model) as a model layer.
    pub fn model_layer(&self) -> HookModelLayer {
        HookModelLayer::new(self.clone())
    }

    /// The hooks' labels in their resolved order (names, or `#index (event)`).
    pub fn order(&self) -> &[String] {
        &self.inner.order
    }
}

impl fmt::Debug for HookSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookSet")
            .field("order", &self.inner.order)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub(crate) struct HookSetInner {
    /// The hooks, a slot per registration method.
    pub(crate) slots: HookSlots,
    pub(crate) approval: Option<Approval>,
    /// [`Hooks::defer_approvals`].
    pub(crate) defer_approvals: bool,
    /// [`Hooks::permission_rules`].
    pub(crate) permissions: Vec<PermissionCheck>,
    /// [`Hooks::time_tool_calls`].
    pub(crate) times_tool_calls: bool,
    /// [`Hooks::watch_settings`].
    pub(crate) settings: Vec<Arc<dyn SettingsSource>>,
    pub(crate) stop_cap: u32,
    pub(crate) transcripts: Option<std::path::PathBuf>,
    order: Vec<String>,
    /// The set's key for its per-run data (the watched files).
    pub(crate) id: tower_agent_core::context::InstanceId,
}

impl std::ops::Deref for HookSetInner {
    type Target = HookSlots;

    fn deref(&self) -> &HookSlots {
        &self.slots
    }
}

impl HookSetInner {
    /// What the permission checks say of `call`, combined (the most cautious wins).
    pub(crate) fn permission(&self, call: &ToolCall, ctx: &RunContext) -> Permission {
        let mut verdict = Permission::NoRule;
        for check in &self.permissions {
            let next = check(call, ctx);
            if next.rank() > verdict.rank() {
                verdict = next;
            }
        }
        verdict
    }

    /// The TaskCreated or TaskCompleted hooks.
    fn task_hooks(&self, event: TaskEvent) -> &[Arc<events::TaskFn>] {
        match event {
            TaskEvent::Created => &self.on_task_created,
            TaskEvent::Completed => &self.on_task_completed,
            // NOTE: a task event the loop adds later has no hooks here until this set learns it.
            _ => &[],
        }
    }

    /// Sends `notification` to the Notification hooks matching its type.
    pub(crate) fn notify(&self, notification: &Notification, ctx: &RunContext) {
        for (m, f) in &self.on_notify {
            if m.matches_name(notification.notification_type) {
                f(notification, ctx);
            }
        }
    }

    /// Runs PostToolBatch hooks: `Err(reason)` if one stops the loop, else their contexts.
    pub(crate) async fn post_tool_batch(
        &self,
        batch: Arc<ToolBatch>,
        ctx: &RunContext,
    ) -> Result<Vec<String>, String> {
        fn apply(d: PostToolBatch, contexts: &mut Vec<String>) -> Result<(), String> {
            match d {
                PostToolBatch::Continue => Ok(()),
                PostToolBatch::AddContext(text) => {
                    contexts.push(text);
                    Ok(())
                }
                PostToolBatch::Stop(reason) => Err(reason),
                PostToolBatch::Many(ds) => ds.into_iter().try_for_each(|d| apply(d, contexts)),
            }
        }
        let mut contexts = Vec::new();
        for f in &self.on_post_tool_batch {
            apply(f(Arc::clone(&batch), ctx.clone()).await, &mut contexts)?;
        }
        Ok(contexts)
    }

    /// Runs stop hooks (`subagent`: the SubagentStop hooks matching that name); the feedback
    /// of every hook that continues, joined, and the contexts that follow it, or `None` to
    /// finish.
    pub(crate) async fn stop(
        &self,
        subagent: Option<&str>,
        input: StopInput,
        ctx: &RunContext,
    ) -> Option<StopFeedback> {
        let hooks: Vec<&Arc<events::StopFn>> = match subagent {
            None => self.on_stop.iter().collect(),
            Some(name) => self
                .on_subagent_stop
                .iter()
                .filter(|(m, _)| m.matches_name(name))
                .map(|(_, f)| f)
                .collect(),
        };
        fn apply(decision: Stop, feedback: &mut Vec<String>, contexts: &mut Vec<String>) {
            match decision {
                Stop::Finish => {}
                Stop::Continue(text) => feedback.push(text),
                Stop::AddContext(text) => contexts.push(text),
                Stop::Many(ds) => ds.into_iter().for_each(|d| apply(d, feedback, contexts)),
            }
        }
        let (mut feedback, mut contexts) = (Vec::new(), Vec::new());
        for f in hooks {
            apply(
                f(input.clone(), ctx.clone()).await,
                &mut feedback,
                &mut contexts,
            );
        }
        (!feedback.is_empty()).then(|| {
            let mut stop = StopFeedback::new(feedback.join("\n\n"));
            stop.context = contexts;
            stop
        })
    }

    /// Runs UserPromptSubmit hooks: `Err(reason)` if blocked, else the prompt (maybe
    /// rewritten) and the contexts.
    pub(crate) async fn user_prompt(
        &self,
        prompt: String,
        ctx: &RunContext,
    ) -> Result<(String, Vec<String>), String> {
        if self.on_user_prompt.is_empty() {
            return Ok((prompt, Vec::new()));
        }
        let mut prompt: Arc<str> = prompt.into();
        let mut contexts = Vec::new();
        for f in &self.on_user_prompt {
            match f(Arc::clone(&prompt), ctx.clone()).await {
                UserPrompt::Continue => {}
                UserPrompt::Block(reason) => return Err(reason),
                UserPrompt::AddContext(text) => contexts.push(text),
                UserPrompt::Rewrite(text) => prompt = text.into(),
            }
        }
        Ok((prompt.to_string(), contexts))
    }

    /// Runs the UserPromptExpansion hooks matching the command's name, with UserPromptSubmit's
    /// merge rules: the expanded prompt (rewritten) and the contexts, or `Err(reason)`.
    pub(crate) async fn prompt_expansion(
        &self,
        expansion: Arc<tower_agent_core::agent::start::PromptExpansion>,
        mut prompt: String,
        ctx: &RunContext,
    ) -> Result<(String, Vec<String>), String> {
        let mut contexts = Vec::new();
        for (m, f) in &self.on_prompt_expansion {
            if !m.matches_name(&expansion.name) {
                continue;
            }
            match f(Arc::clone(&expansion), ctx.clone()).await {
                UserPrompt::Continue => {}
                UserPrompt::Block(reason) => return Err(reason),
                UserPrompt::AddContext(text) => contexts.push(text),
                UserPrompt::Rewrite(text) => prompt = text,
            }
        }
        Ok((prompt, contexts))
    }

    /// Runs MessageDisplay hooks, each seeing the text the previous one decided: the text to
    /// display.
    pub(crate) async fn message_display(
        &self,
        mut input: MessageDisplayInput,
        ctx: &RunContext,
    ) -> String {
        for f in &self.on_message_display {
            if let MessageDisplay::Replace(text) = f(input.clone(), ctx.clone()).await {
                input.delta = text;
            }
        }
        input.delta
    }

    /// Runs the SessionStart hooks matching the source: `Err(reason)` if one blocks, else
    /// their contexts, in order.
    pub(crate) async fn session_start(
        &self,
        input: SessionStartInput,
        ctx: &RunContext,
    ) -> Result<Vec<String>, String> {
        let mut contexts = Vec::new();
        let source = input.source.as_str();
        for (_, f) in self
            .on_session_start_for
            .iter()
            .filter(|(m, _)| m.matches_name(source))
        {
            match f(input.clone(), ctx.clone()).await {
                SessionStart::Continue => {}
                SessionStart::AddContext(text) => contexts.push(text),
                SessionStart::Block(reason) => return Err(reason),
            }
        }
        Ok(contexts)
    }
}
