//! Each event: the input its handlers get, and how their verdicts (in configuration order)
//! become the decision of one callback of the [`Hooks`] registry.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures_util::future::join_all;
use serde_json::{Map, Value, json};

use super::env_file::EnvFile;
use super::{
    config::{Config, Entry, Handler, HookEvent},
    process::{self, Failure, Permission, Reply, Report, Verdict},
};
use crate::{
    agent::{AgentResponse, SessionEnv, session_end_reason},
    context::RunContext,
    layers::{
        hooks::{
            BeforeModel, HookFuture, Hooks, InstructionsInput, MessageDisplay, MessageDisplayInput,
            Notification, PermissionDenied, PermissionRequest, PostCompactInput, PostToolBatch,
            PostToolUse, PostToolUseFailure, PreToolUse, SessionStart, SessionStartInput, Stop,
            StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskInput,
            ToolBatch, ToolFailure, UserPrompt, state::Added,
        },
        matcher::ToolMatcher,
        summarize::{CompactDecision, CompactInfo},
    },
    message::{Message, Messages, StopReason, ToolCall, ToolOutput, ToolSpec, Usage},
    model::{ModelRequest, ModelResponse, ModelSettings},
};

/// What PreCompact hooks match on (`trigger`): the summarize layer compacts on its own.
const TRIGGER: &str = "auto";
/// The SessionEnd budget when no handler sets a longer timeout (the reference's 1.5 s).
const SESSION_END_BUDGET: Duration = Duration::from_millis(1500);
/// The most a SessionEnd handler's own `timeout` raises the budget all SessionEnd handlers
/// share (60 s, as in Claude Code; the budget is 1.5 s when no handler sets a longer timeout,
/// and `CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS` overrides it).
pub const SESSION_END_MAX_BUDGET: Duration = Duration::from_secs(60);
/// Overrides the SessionEnd budget, in milliseconds (as in Claude Code).
const SESSION_END_ENV: &str = "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS";

/// The loaded configuration and where handlers run.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) project_dir: PathBuf,
    /// The process's working directory when the hooks were built (read once, not at every
    /// hook call); `None` if it could not be read.
    pub(crate) process_dir: Option<PathBuf>,
    /// `permission_mode` in every input.
    pub(crate) permission_mode: &'static str,
}

impl Inner {
    pub(crate) fn entries(&self, event: HookEvent) -> &[Entry] {
        if self.config.disabled {
            return &[];
        }
        &self.config.events[event.index()]
    }

    fn wants(&self, event: HookEvent, subject: &str) -> bool {
        self.entries(event).iter().any(|e| e.matches(subject))
    }

    /// Runs the handlers of `event` matching `subject` (`None`: all) in parallel; their
    /// verdicts in configuration order. Background (`async`) handlers are started and not
    /// waited for. One-shot handlers get the session's environment (see [`SessionEnv`]) of
    /// the run `report` names.
    async fn run(
        self: &Arc<Self>,
        event: HookEvent,
        subject: Option<&str>,
        input: Map<String, Value>,
        report: Report<'_>,
    ) -> Vec<Verdict> {
        if !self
            .entries(event)
            .iter()
            .any(|e| subject.is_none_or(|s| e.matches(s)))
        {
            return Vec::new();
        }
        let env = match report {
            Report::Run(ctx) => session_env(ctx),
            Report::Log => Arc::default(),
        };
        self.run_with_env(event, subject, input, report, env).await
    }

    /// [`run`](Self::run) with `env` for the one-shot handlers.
    async fn run_with_env(
        self: &Arc<Self>,
        event: HookEvent,
        subject: Option<&str>,
        input: Map<String, Value>,
        report: Report<'_>,
        env: Arc<[(String, String)]>,
    ) -> Vec<Verdict> {
        // Handlers run in the directory the input's `cwd` names (`CLAUDE_PROJECT_DIR` is the
        // project directory, whatever it is: see `Inner::call`).
        let cwd: &Path = match input.get("cwd").and_then(Value::as_str) {
            Some(cwd) => Path::new(cwd),
            None => &self.project_dir,
        };
        // Before anything is serialized or spawned: the matcher, the `if` rule and the
        // trust pin of each handler (checked on the script it would run where it runs: a
        // persistent process runs in the project directory).
        let pinned = |e: &Entry| {
            let runs_in = match e.handler.persistent {
                Some(_) => &self.project_dir,
                None => cwd,
            };
            e.handler.extras.pin.as_ref().map(|p| p.verify(runs_in))
        };
        let entries: Vec<&Entry> = self
            .entries(event)
            .iter()
            .filter(|e| subject.is_none_or(|s| e.matches(s)) && e.handler.allows(&input))
            .filter(|e| match pinned(e) {
                Some(Err(why)) => {
                    report.warn(format!("hook `{}` is skipped: {why}", e.handler.label));
                    false
                }
                _ => true,
            })
            .collect();
        if entries.is_empty() {
            return Vec::new();
        }
        let dir: Arc<Path> = cwd.into();
        let input: Arc<str> = Value::Object(input).to_string().into();
        let mut waited = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.handler.background {
                let ctx = report.ctx().cloned();
                self.spawn_background(
                    event,
                    Arc::clone(&entry.handler),
                    Arc::clone(&input),
                    Arc::clone(&dir),
                    Arc::clone(&env),
                    ctx,
                );
            } else {
                waited.push(&entry.handler);
            }
        }
        join_all(waited.into_iter().map(|handler| {
            let (input, dir, env) = (&input, &dir, &env);
            async move {
                let result = self.call(event, handler, input, dir, report, env).await;
                process::interpret(event, handler, result, report)
            }
        }))
        .await
    }

    async fn call(
        &self,
        event: HookEvent,
        handler: &Handler,
        input: &str,
        dir: &std::path::Path,
        report: Report<'_>,
        env: &[(String, String)],
    ) -> Result<Reply, Failure> {
        let dialect = handler.extras.dialect;
        let translated = dialect.input(event, input);
        // The session's environment, then the handler's own (a plugin's `CLAUDE_PLUGIN_ROOT` …).
        // NOTE: a persistent process is shared by every run: it never sees one session's
        // environment.
        let env: std::borrow::Cow<'_, [(String, String)]> = if handler.extras.env.is_empty() {
            env.into()
        } else {
            env.iter()
                .chain(handler.extras.env.iter())
                .cloned()
                .collect::<Vec<_>>()
                .into()
        };
        let dirs = process::Dirs {
            cwd: dir,
            project: &self.project_dir,
        };
        let result = process::call(event, handler, dirs, &translated, report, &env).await;
        result.map(|reply| dialect.output(event, input, reply))
    }

    fn spawn_background(
        self: &Arc<Self>,
        event: HookEvent,
        handler: Arc<Handler>,
        input: Arc<str>,
        dir: Arc<std::path::Path>,
        env: Arc<[(String, String)]>,
        ctx: Option<RunContext>,
    ) {
        let inner = Arc::clone(self);
        spawn("an async hook", async move {
            let result = inner
                .call(event, &handler, &input, &dir, Report::Log, &env)
                .await;
            process::background_done(event, &handler, result, ctx.as_ref());
        });
    }
}

/// Spawns `fut` on the current tokio runtime, or says why it cannot.
fn spawn(what: &str, fut: impl Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(fut);
        }
        Err(_) => tracing::warn!("{what} cannot run outside a tokio runtime; skipped"),
    }
}

/// The variables the run's SessionStart hooks exported through `CLAUDE_ENV_FILE`.
fn session_env(ctx: &RunContext) -> Arc<[(String, String)]> {
    ctx.with_data(|data| data.get::<SessionEnv>().map(|e| Arc::clone(&e.0)))
        .unwrap_or_default()
}

impl Inner {
    /// The directory handlers run in, which is also the `cwd` of their input: the run's
    /// working directory when the agent moved away from the process's (an
    /// [`AgentBuilder::cwd`](crate::agent::AgentBuilder::cwd) or `AgentRequest::cwd`), else
    /// the project directory. The process's directory is the one it had when the hooks were
    /// built (no syscall per hook call).
    fn hook_dir(&self, ctx: &RunContext) -> PathBuf {
        let run = ctx.cwd();
        match &self.process_dir {
            Some(process) if process != run => run.to_path_buf(),
            _ => self.project_dir.clone(),
        }
    }

    /// The fields every input has.
    fn base(&self, event: HookEvent, ctx: &RunContext) -> Map<String, Value> {
        let mut input = base(event, ctx);
        input.insert(
            "cwd".into(),
            self.hook_dir(ctx).to_string_lossy().into_owned().into(),
        );
        input.insert("permission_mode".into(), self.permission_mode.into());
        input
    }
}

/// The fields every input has (`cwd` and `permission_mode` are set by [`Inner::base`]).
fn base(event: HookEvent, ctx: &RunContext) -> Map<String, Value> {
    let mut input = Map::new();
    input.insert("session_id".into(), ctx.session_id().into());
    input.insert(
        "transcript_path".into(),
        ctx.transcript_path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
            .into(),
    );
    input.insert("hook_event_name".into(), event.name().into());
    input
}

/// The matcher of the one callback of an event: the union of its handlers' matchers.
fn union(entries: &[Entry]) -> ToolMatcher {
    let mut union: Option<ToolMatcher> = None;
    for e in entries {
        // The entry's matchers, and its `if` rule: a call no rule matches does not even
        // reach the callback.
        let mut entry: Option<ToolMatcher> = None;
        for m in &e.matchers {
            let Some(m) = m else {
                entry = Some(ToolMatcher::all());
                break;
            };
            let m = m.matcher.clone();
            entry = Some(match entry {
                None => m,
                Some(u) => u.or(m),
            });
        }
        let mut entry = entry.unwrap_or_else(ToolMatcher::all);
        if let Some(rule) = &e.handler.extras.condition {
            let rule = Arc::clone(rule);
            entry = entry.and(ToolMatcher::predicate(move |call| {
                rule.matches(&call.name, &call.arguments)
            }));
        } else if e.matchers.iter().any(Option::is_none) {
            return ToolMatcher::all();
        }
        union = Some(match union {
            None => entry,
            Some(u) => u.or(entry),
        });
    }
    union.unwrap_or_else(ToolMatcher::all)
}

/// A tool's output as `tool_response`: the JSON it holds if it is a JSON object or array,
/// else the text.
fn tool_response(content: &str) -> Value {
    let t = content.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && let Ok(value) = serde_json::from_str::<Value>(content)
    {
        return value;
    }
    Value::String(content.to_owned())
}

fn joined(parts: Vec<String>, separator: &str) -> Option<String> {
    (!parts.is_empty()).then(|| parts.join(separator))
}

// ===== registration =====

/// Adds one callback per configured event to `hooks`, in the order of [`EVENTS`].
///
/// Each callback is named `command:{event}` (`command:PreToolUse` …), so that a Rust hook can
/// be ordered against it with `before` / `after`, unless a hook of the registry has that name
/// already (a second set of command hooks: its callbacks stay unnamed).
pub(crate) fn register(inner: &Arc<Inner>, hooks: Hooks) -> Hooks {
    EVENTS.iter().fold(hooks, |hooks, &(event, add)| {
        let entries = inner.entries(event);
        if entries.is_empty() {
            return hooks;
        }
        let name = format!("command:{}", event.name());
        let taken = hooks.has_name(&name);
        let added = add(inner, entries, hooks);
        if taken {
            added.into()
        } else {
            added.name(name).into()
        }
    })
}

/// Adds the callback of one event to a registry; the event's configured handlers (never
/// none) give the callback's matcher.
type Add = fn(&Arc<Inner>, &[Entry], Hooks) -> Hooks<Added>;

/// The events [`register`] adds a callback for, in registration order (the registry labels
/// hooks by their position), each with how it is added.
const EVENTS: [(HookEvent, Add); 21] = [
    (HookEvent::PreToolUse, add_pre_tool_use),
    (HookEvent::PostToolUse, add_post_tool_use),
    (HookEvent::PostToolUseFailure, add_post_tool_use_failure),
    (HookEvent::UserPromptSubmit, add_user_prompt_submit),
    (HookEvent::Stop, add_stop),
    (HookEvent::SubagentStop, add_subagent_stop),
    (HookEvent::SessionStart, add_session_start),
    (HookEvent::SessionEnd, add_session_end),
    (HookEvent::StopFailure, add_stop_failure),
    (HookEvent::SubagentStart, add_subagent_start),
    (HookEvent::TaskCreated, add_task_created),
    (HookEvent::TaskCompleted, add_task_completed),
    (HookEvent::InstructionsLoaded, add_instructions_loaded),
    (HookEvent::PostCompact, add_post_compact),
    (HookEvent::MessageDisplay, add_message_display),
    (HookEvent::Notification, add_notification),
    (HookEvent::PermissionRequest, add_permission_request),
    (HookEvent::PermissionDenied, add_permission_denied),
    (HookEvent::PostToolBatch, add_post_tool_batch),
    (HookEvent::BeforeModel, add_before_model),
    (HookEvent::AfterModel, add_after_model),
];

// The tool events.

fn add_pre_tool_use(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_tool_use(union(entries), move |call, ctx| {
        let i = Arc::clone(&i);
        async move { i.pre_tool_use(&call, &ctx).await }
    })
}

fn add_post_tool_use(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_tool_use(union(entries), move |call, output, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_use(&call, &output, &ctx).await }
    })
}

fn add_post_tool_use_failure(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_tool_failure(union(entries), move |call, failure, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_use_failure(&call, &failure, &ctx).await }
    })
}

fn add_permission_request(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_request(union(entries), move |call, ctx| {
        let i = Arc::clone(&i);
        async move { i.permission_request(&call, &ctx).await }
    })
}

fn add_permission_denied(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_denied(union(entries), move |call, reason, ctx| {
        let i = Arc::clone(&i);
        async move { i.permission_denied(&call, &reason, &ctx).await }
    })
}

fn add_post_tool_batch(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_tool_batch(move |batch, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_batch(&batch, &ctx).await }
    })
}

// The run's events: its prompt, start, stop and end, and its subagents'.

fn add_user_prompt_submit(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_user_prompt(move |prompt, ctx| {
        let i = Arc::clone(&i);
        async move { i.user_prompt(&prompt, &ctx).await }
    })
}

fn add_stop(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop(move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.stop(HookEvent::Stop, input, &ctx).await }
    })
}

fn add_subagent_stop(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_stop(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.stop(HookEvent::SubagentStop, input, &ctx).await }
    })
}

fn add_session_start(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_start_for(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.session_start(input, &ctx).await }
    })
}

fn add_session_end(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_end(move |response, ctx| i.session_end(response, ctx))
}

fn add_stop_failure(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop_failure(union(entries), move |input, ctx| i.stop_failure(input, ctx))
}

fn add_subagent_start(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_start(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.subagent_start(input, &ctx).await }
    })
}

// What the run tells: tasks, instructions, compaction, messages, notifications.

fn add_task_created(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_created(move |input, ctx: RunContext| {
        let i = Arc::clone(&i);
        async move { i.task(HookEvent::TaskCreated, input, &ctx).await }
    })
}

fn add_task_completed(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_completed(move |input, ctx: RunContext| {
        let i = Arc::clone(&i);
        async move { i.task(HookEvent::TaskCompleted, input, &ctx).await }
    })
}

fn add_instructions_loaded(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_instructions_loaded(union(entries), move |input, ctx| {
        i.instructions_loaded(input, ctx)
    })
}

fn add_post_compact(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_compact(union(entries), move |input, ctx| i.post_compact(input, ctx))
}

fn add_message_display(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_message_display(move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.message_display(input, &ctx).await }
    })
}

fn add_notification(inner: &Arc<Inner>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_notify(union(entries), move |notification, ctx| {
        i.notification(notification, ctx)
    })
}

// The model events.

fn add_before_model(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_model(move |req| {
        let i = Arc::clone(&i);
        async move { i.before_model(req).await }
    })
}

fn add_after_model(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_model(move |resp, ctx| {
        let i = Arc::clone(&i);
        async move { i.after_model(resp, &ctx).await }
    })
}

/// The PreCompact callback for [`SummarizeLayer::on_compact`](crate::layers::summarize::SummarizeLayer::on_compact).
pub(crate) fn pre_compact(
    inner: &Arc<Inner>,
) -> impl Fn(CompactInfo, ModelRequest) -> HookFuture<CompactDecision> + Clone + Send + Sync + 'static
{
    let inner = inner
        .wants(HookEvent::PreCompact, TRIGGER)
        .then(|| Arc::clone(inner));
    move |info, req| match &inner {
        None => HookFuture::ready(CompactDecision::Proceed),
        Some(i) => {
            let i = Arc::clone(i);
            HookFuture::boxed(async move { i.pre_compact(info, &req.ctx).await })
        }
    }
}

// ===== events =====

impl Inner {
    async fn pre_tool_use(self: &Arc<Self>, call: &ToolCall, ctx: &RunContext) -> PreToolUse {
        let event = HookEvent::PreToolUse;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        merge_pre_tool_use(verdicts)
    }

    async fn post_tool_use(
        self: &Arc<Self>,
        call: &ToolCall,
        output: &ToolOutput,
        ctx: &RunContext,
    ) -> PostToolUse {
        let event = HookEvent::PostToolUse;
        // The hooks may read the transcript: the result goes there first.
        if let Some(transcript) = ctx.transcript() {
            transcript.record_tool_result(output);
        }
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_response".into(), tool_response(&output.content));
        input.insert("tool_use_id".into(), call.id.clone().into());
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        let mut decisions = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop {
                return PostToolUse::Abort(reason);
            }
            if let Some(new) = v.updated_output {
                let content = match new {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                decisions.push(PostToolUse::Replace(ToolOutput {
                    content,
                    ..output.clone()
                }));
            }
            // A block after the fact: its reason goes next to the result.
            if let Some(reason) = v.block.or(v.failed) {
                decisions.push(PostToolUse::AddContext(reason));
            }
            decisions.extend(v.contexts.into_iter().map(PostToolUse::AddContext));
        }
        match decisions.len() {
            0 => PostToolUse::Keep,
            1 => decisions.pop().expect("one decision"),
            _ => PostToolUse::Many(decisions),
        }
    }

    async fn post_tool_use_failure(
        self: &Arc<Self>,
        call: &ToolCall,
        failure: &ToolFailure,
        ctx: &RunContext,
    ) -> PostToolUseFailure {
        let event = HookEvent::PostToolUseFailure;
        // The hooks may read the transcript: the failed result goes there first.
        if let Some(transcript) = ctx.transcript() {
            match &failure.output {
                Some(output) => transcript.record_tool_result(output),
                None => transcript
                    .record_tool_result(&ToolOutput::error(call.id.clone(), failure.error.clone())),
            }
        }
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        input.insert("error".into(), failure.error.clone().into());
        input.insert("is_interrupt".into(), false.into());
        input.insert("tool_response".into(), json!({ "error": failure.error }));
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        let mut contexts = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop {
                return PostToolUseFailure::Abort(reason);
            }
            contexts.extend(v.block.or(v.failed));
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(PostToolUseFailure::Keep, PostToolUseFailure::AddContext)
    }

    async fn user_prompt(self: &Arc<Self>, prompt: &str, ctx: &RunContext) -> UserPrompt {
        let event = HookEvent::UserPromptSubmit;
        let mut input = self.base(event, ctx);
        input.insert("prompt".into(), prompt.into());
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        let mut blocks = Vec::new();
        let mut contexts = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop {
                return UserPrompt::Block(reason);
            }
            blocks.extend(v.block.or(v.failed));
            contexts.extend(v.contexts);
        }
        if let Some(reason) = joined(blocks, "; ") {
            return UserPrompt::Block(reason);
        }
        joined(contexts, "\n\n").map_or(UserPrompt::Continue, UserPrompt::AddContext)
    }

    async fn stop(self: &Arc<Self>, event: HookEvent, stop: StopInput, ctx: &RunContext) -> Stop {
        let mut input = self.base(event, ctx);
        input.insert("stop_hook_active".into(), stop.stop_hook_active.into());
        input.insert(
            "last_assistant_message".into(),
            stop.last_assistant_message.into(),
        );
        let subject = match (event, &stop.agent_name) {
            (HookEvent::SubagentStop, Some(name)) => {
                input.insert("agent_type".into(), name.clone().into());
                let id = stop.agent_id.clone().unwrap_or_else(|| name.clone());
                input.insert("agent_id".into(), id.into());
                let transcript = stop.agent_transcript_path.as_ref();
                let path = transcript.map(|p| p.to_string_lossy().into_owned());
                input.insert(
                    "agent_transcript_path".into(),
                    path.unwrap_or_default().into(),
                );
                Some(name.as_str())
            }
            _ => None,
        };
        let verdicts = self.run(event, subject, input, Report::Run(ctx)).await;
        let mut feedback = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop {
                // The agent is stopping anyway: it finishes, and the reason is reported.
                ctx.warn(format!("a {event} hook ended the run: {reason}"));
                return Stop::Finish;
            }
            feedback.extend(v.block.or(v.failed));
            feedback.extend(v.contexts);
        }
        joined(feedback, "\n\n").map_or(Stop::Finish, Stop::Continue)
    }

    async fn session_start(
        self: &Arc<Self>,
        start: SessionStartInput,
        ctx: &RunContext,
    ) -> SessionStart {
        let event = HookEvent::SessionStart;
        let source = start.source.as_str();
        if !self.wants(event, source) {
            return SessionStart::Continue;
        }
        let mut input = self.base(event, ctx);
        input.insert("source".into(), source.into());
        if let Some(model) = start.model {
            input.insert("model".into(), model.into());
        }
        // CLAUDE_ENV_FILE: a fresh file per firing; what the hooks export is read after.
        let earlier = session_env(ctx);
        let mut env: Vec<(String, String)> = earlier.to_vec();
        let file = match EnvFile::create() {
            Ok(file) => {
                let path = file.path().to_string_lossy().into_owned();
                env.push(("CLAUDE_ENV_FILE".into(), path));
                Some(file)
            }
            Err(err) => {
                ctx.warn(format!("CLAUDE_ENV_FILE could not be created: {err}"));
                None
            }
        };
        let verdicts = self
            .run_with_env(event, Some(source), input, Report::Run(ctx), env.into())
            .await;
        if let Some(file) = file {
            let (vars, warnings) = file.read(&earlier).await;
            warnings.into_iter().for_each(|w| ctx.warn(w));
            if !vars.is_empty() {
                let all: Vec<(String, String)> = earlier.iter().cloned().chain(vars).collect();
                ctx.with_data(|data| data.insert(SessionEnv(all.into())));
            }
        }
        let mut contexts = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.failed) {
                return SessionStart::Block(reason);
            }
            if let Some(reason) = v.block {
                // SessionStart cannot block (as in the protocol): the reason is reported.
                ctx.warn(format!("a SessionStart hook: {reason}"));
            }
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(SessionStart::Continue, SessionStart::AddContext)
    }

    fn session_end(self: &Arc<Self>, response: &AgentResponse, ctx: &RunContext) {
        let event = HookEvent::SessionEnd;
        let reason = session_end_reason(&response.outcome);
        if !self.wants(event, reason) {
            return;
        }
        let mut input = self.base(event, ctx);
        input.insert("reason".into(), reason.into());
        input.insert(
            "outcome".into(),
            serde_json::to_value(&response.outcome).unwrap_or_default(),
        );
        let inner = Arc::clone(self);
        let env = session_env(ctx);
        let budget = self.session_end_budget();
        spawn("a SessionEnd hook", async move {
            let run = inner.run_with_env(event, Some(reason), input, Report::Log, env);
            if tokio::time::timeout(budget, run).await.is_err() {
                tracing::warn!(
                    "SessionEnd hooks ran past their shared budget of {budget:?}; they were killed"
                );
            }
        });
    }

    /// The budget every SessionEnd handler shares: `CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS`
    /// if set, else 1.5 s raised to the longest handler `timeout`, at most 60 s.
    fn session_end_budget(&self) -> Duration {
        if let Some(ms) = std::env::var(SESSION_END_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Duration::from_millis(ms);
        }
        self.entries(HookEvent::SessionEnd)
            .iter()
            .filter_map(|e| e.handler.timeout)
            .fold(SESSION_END_BUDGET, Duration::max)
            .min(SESSION_END_MAX_BUDGET)
    }

    fn stop_failure(self: &Arc<Self>, failure: &StopFailureInput, ctx: &RunContext) {
        let event = HookEvent::StopFailure;
        let mut input = self.base(event, ctx);
        input.insert("error".into(), failure.error.into());
        input.insert("error_details".into(), failure.error_details.clone().into());
        input.insert(
            "last_assistant_message".into(),
            failure.last_assistant_message.clone().into(),
        );
        let (inner, env, error) = (Arc::clone(self), session_env(ctx), failure.error);
        // Output and exit code are ignored (as in the protocol): observe only.
        spawn("a StopFailure hook", async move {
            inner
                .run_with_env(event, Some(error), input, Report::Log, env)
                .await;
        });
    }

    async fn subagent_start(
        self: &Arc<Self>,
        start: SubagentStartInput,
        ctx: &RunContext,
    ) -> SubagentStart {
        let event = HookEvent::SubagentStart;
        let mut input = self.base(event, ctx);
        input.insert("agent_id".into(), start.agent_id.into());
        input.insert("agent_type".into(), start.agent_type.clone().into());
        let verdicts = self
            .run(event, Some(&start.agent_type), input, Report::Run(ctx))
            .await;
        let mut contexts = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.block.or(v.stop) {
                // SubagentStart cannot block (as in the protocol): the reason is reported.
                ctx.warn(format!("a SubagentStart hook: {reason}"));
            }
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(SubagentStart::Continue, SubagentStart::AddContext)
    }

    async fn task(self: &Arc<Self>, event: HookEvent, task: TaskInput, ctx: &RunContext) -> Task {
        let mut input = self.base(event, ctx);
        input.insert("task_id".into(), task.task_id.into());
        input.insert("task_subject".into(), task.task_subject.into());
        if let Some(description) = task.task_description {
            input.insert("task_description".into(), description.into());
        }
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        let mut blocks = Vec::new();
        for v in verdicts {
            blocks.extend(v.block.or(v.failed));
            // TaskCreated ignores `continue: false`; for TaskCompleted it stops the work on
            // the task: here, the completion is refused with the stop reason.
            if event == HookEvent::TaskCompleted {
                blocks.extend(v.stop);
            }
        }
        joined(blocks, "\n\n").map_or(Task::Continue, Task::Block)
    }

    fn instructions_loaded(self: &Arc<Self>, loaded: &InstructionsInput, ctx: &RunContext) {
        let event = HookEvent::InstructionsLoaded;
        let mut input = self.base(event, ctx);
        input.insert(
            "file_path".into(),
            loaded.file_path.to_string_lossy().into_owned().into(),
        );
        input.insert("memory_type".into(), loaded.memory_type.into());
        input.insert("load_reason".into(), loaded.load_reason.into());
        let (inner, env, reason) = (Arc::clone(self), session_env(ctx), loaded.load_reason);
        // No decision control (as in the protocol): observe only.
        spawn("an InstructionsLoaded hook", async move {
            inner
                .run_with_env(event, Some(reason), input, Report::Log, env)
                .await;
        });
    }

    fn post_compact(self: &Arc<Self>, compact: &PostCompactInput, ctx: &RunContext) {
        let event = HookEvent::PostCompact;
        let mut input = self.base(event, ctx);
        input.insert("trigger".into(), compact.trigger.into());
        input.insert(
            "compact_summary".into(),
            compact.compact_summary.clone().into(),
        );
        let (inner, env, trigger) = (Arc::clone(self), session_env(ctx), compact.trigger);
        // No decision control (as in the protocol): observe only.
        spawn("a PostCompact hook", async move {
            inner
                .run_with_env(event, Some(trigger), input, Report::Log, env)
                .await;
        });
    }

    async fn message_display(
        self: &Arc<Self>,
        display: MessageDisplayInput,
        ctx: &RunContext,
    ) -> MessageDisplay {
        let event = HookEvent::MessageDisplay;
        let mut input = self.base(event, ctx);
        input.insert("turn_id".into(), display.turn_id.into());
        input.insert("message_id".into(), display.message_id.into());
        input.insert("index".into(), display.index.into());
        input.insert("final".into(), display.is_final.into());
        input.insert("delta".into(), display.delta.into());
        // Display only: blocks, `continue` and `systemMessage` are discarded; a failure shows
        // the original text.
        let verdicts = self.run(event, None, input, Report::Log).await;
        verdicts
            .into_iter()
            .rev()
            .find_map(|v| v.display)
            .map_or(MessageDisplay::Keep, MessageDisplay::Replace)
    }

    fn notification(self: &Arc<Self>, notification: &Notification, ctx: &RunContext) {
        let event = HookEvent::Notification;
        let mut input = self.base(event, ctx);
        input.insert("message".into(), notification.message.clone().into());
        if let Some(title) = &notification.title {
            input.insert("title".into(), title.clone().into());
        }
        let kind = notification.notification_type;
        input.insert("notification_type".into(), kind.into());
        let inner = Arc::clone(self);
        // Exit codes, stderr, `systemMessage` and `continue` are ignored (the reference):
        // the handlers only observe, in the background.
        spawn("a Notification hook", async move {
            inner.run(event, Some(kind), input, Report::Log).await;
        });
    }

    async fn permission_request(
        self: &Arc<Self>,
        call: &ToolCall,
        ctx: &RunContext,
    ) -> PermissionRequest {
        let event = HookEvent::PermissionRequest;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        merge_permission_request(verdicts)
    }

    async fn permission_denied(
        self: &Arc<Self>,
        call: &ToolCall,
        reason: &str,
        ctx: &RunContext,
    ) -> PermissionDenied {
        let event = HookEvent::PermissionDenied;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        input.insert("reason".into(), reason.into());
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        if verdicts.iter().any(|v| v.retry) {
            PermissionDenied::Retry
        } else {
            PermissionDenied::Stand
        }
    }

    async fn post_tool_batch(
        self: &Arc<Self>,
        batch: &ToolBatch,
        ctx: &RunContext,
    ) -> PostToolBatch {
        let event = HookEvent::PostToolBatch;
        let mut input = self.base(event, ctx);
        let calls: Vec<Value> = batch
            .calls
            .iter()
            .zip(&batch.outputs)
            .map(|(call, output)| {
                json!({
                    "tool_name": call.name,
                    "tool_input": call.arguments,
                    "tool_use_id": call.id,
                    "tool_response": output.content,
                })
            })
            .collect();
        input.insert("tool_calls".into(), calls.into());
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        let mut contexts = Vec::new();
        for v in verdicts {
            // `continue: false` first, then a block (exit 2 or `decision: "block"`).
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                return PostToolBatch::Stop(reason);
            }
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(PostToolBatch::Continue, PostToolBatch::AddContext)
    }

    async fn pre_compact(self: &Arc<Self>, info: CompactInfo, ctx: &RunContext) -> CompactDecision {
        let event = HookEvent::PreCompact;
        let mut input = self.base(event, ctx);
        input.insert("trigger".into(), TRIGGER.into());
        input.insert("custom_instructions".into(), "".into());
        input.insert("tokens".into(), info.tokens.into());
        input.insert("threshold".into(), info.threshold.into());
        input.insert("summarized_messages".into(), info.summarized.into());
        input.insert("kept_messages".into(), info.kept.into());
        let verdicts = self
            .run(event, Some(TRIGGER), input, Report::Run(ctx))
            .await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                tracing::info!("compaction vetoed by a PreCompact hook: {reason}");
                return CompactDecision::Veto;
            }
        }
        CompactDecision::Proceed
    }

    async fn before_model(self: &Arc<Self>, mut req: ModelRequest) -> BeforeModel {
        let event = HookEvent::BeforeModel;
        let ctx = req.ctx.clone();
        let mut input = self.base(event, &ctx);
        input.insert(
            "llm_request".into(),
            json!({
                "messages": req.messages,
                "tools": *req.tools,
                "settings": settings_json(&req.settings),
            }),
        );
        let verdicts = self.run(event, None, input, Report::Run(&ctx)).await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                return BeforeModel::Respond(ModelResponse::text(reason));
            }
            if let Some(new) = v.llm_request
                && let Err(why) = replace_request(&mut req, new)
            {
                ctx.warn(format!(
                    "a BeforeModel hook's llm_request is ignored: {why}"
                ));
            }
        }
        BeforeModel::Continue(req)
    }

    async fn after_model(
        self: &Arc<Self>,
        mut resp: ModelResponse,
        ctx: &RunContext,
    ) -> ModelResponse {
        let event = HookEvent::AfterModel;
        let mut input = self.base(event, ctx);
        input.insert(
            "llm_response".into(),
            json!({
                "message": resp.message,
                "usage": resp.usage,
                "stop_reason": resp.stop_reason,
            }),
        );
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                let usage = resp.usage;
                let mut blocked = ModelResponse::text(reason);
                blocked.usage = usage;
                return blocked;
            }
            if let Some(new) = v.llm_response
                && let Err(why) = replace_response(&mut resp, new)
            {
                ctx.warn(format!(
                    "an AfterModel hook's llm_response is ignored: {why}"
                ));
            }
        }
        resp
    }
}

/// PermissionRequest verdicts, in configuration order, as one decision: `continue: false`
/// denies and interrupts; a deny (messages joined) beats an allow (the last `updatedInput`
/// wins); a fail-closed failure denies.
fn merge_permission_request(verdicts: Vec<Verdict>) -> PermissionRequest {
    let mut denies = Vec::new();
    let mut interrupt = false;
    let mut allow: Option<Option<Value>> = None;
    for v in verdicts {
        if let Some(reason) = v.stop {
            return PermissionRequest::Deny {
                message: reason,
                interrupt: true,
            };
        }
        if let Some(why) = v.failed {
            denies.push(why);
            continue;
        }
        match v.request {
            Some(PermissionRequest::Deny {
                message,
                interrupt: i,
            }) => {
                denies.push(message);
                interrupt |= i;
            }
            Some(PermissionRequest::Allow { updated_input }) => {
                allow = Some(updated_input.or(allow.flatten()));
            }
            Some(PermissionRequest::NoDecision) | None => {}
        }
    }
    if let Some(message) = joined(denies, "; ") {
        return PermissionRequest::Deny { message, interrupt };
    }
    match allow {
        Some(updated_input) => PermissionRequest::Allow { updated_input },
        None => PermissionRequest::NoDecision,
    }
}

/// PreToolUse verdicts, in configuration order, as one decision: `continue: false` aborts;
/// deny > defer > ask > allow (reasons of the winning kind joined); every `updatedInput`
/// applied in order; every context kept in order.
fn merge_pre_tool_use(verdicts: Vec<Verdict>) -> PreToolUse {
    let mut contexts = Vec::new();
    let mut denies = Vec::new();
    let mut asks = Vec::new();
    let mut rewrites = Vec::new();
    let mut allowed = false;
    let mut deferred = false;
    for v in verdicts {
        if let Some(reason) = v.stop {
            return PreToolUse::Abort(reason);
        }
        contexts.extend(v.contexts.into_iter().map(PreToolUse::AddContext));
        if let Some(reason) = v.block.or(v.failed) {
            denies.push(reason);
            continue;
        }
        match v.permission {
            Some((Permission::Deny, reason)) => denies.push(reason),
            Some((Permission::Ask, reason)) => asks.push(reason),
            Some((Permission::Defer, _)) => deferred = true,
            Some((Permission::Allow, _)) => allowed = true,
            None => {}
        }
        rewrites.extend(v.updated_input.map(PreToolUse::Rewrite));
    }
    let mut decisions = contexts;
    if let Some(reason) = joined(denies, "; ") {
        decisions.push(PreToolUse::Deny(reason));
    } else {
        decisions.extend(rewrites);
        if deferred {
            // Ignored by the tool layer in a step of several calls: the asks still count.
            decisions.push(PreToolUse::Defer);
        }
        if let Some(reason) = joined(asks, "; ") {
            decisions.push(PreToolUse::Ask(reason));
        } else if allowed {
            decisions.push(PreToolUse::Allow);
        }
    }
    match decisions.len() {
        0 => PreToolUse::Continue,
        1 => decisions.pop().expect("one decision"),
        _ => PreToolUse::Many(decisions),
    }
}

fn settings_json(s: &ModelSettings) -> Value {
    json!({
        "model": s.model.as_deref(),
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
        "stream": s.stream,
    })
}

/// Replaces the parts of `req` present in `new` (`messages`, `tools`, `settings`).
fn replace_request(req: &mut ModelRequest, new: Value) -> Result<(), String> {
    let Value::Object(mut new) = new else {
        return Err("it is not an object".into());
    };
    let messages = match new.remove("messages") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<Messages>(v).map_err(|e| format!("messages: {e}"))?)
        }
    };
    let tools = match new.remove("tools") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<Vec<ToolSpec>>(v).map_err(|e| format!("tools: {e}"))?)
        }
    };
    let settings = match new.remove("settings") {
        None | Some(Value::Null) => None,
        Some(Value::Object(s)) => {
            let mut settings = req.settings.clone();
            if let Some(v) = s.get("model") {
                settings.model = v.as_str().map(Into::into);
            }
            if let Some(v) = s.get("temperature") {
                settings.temperature = v.as_f64().map(|t| t as f32);
            }
            if let Some(v) = s.get("max_tokens") {
                settings.max_tokens = v.as_u64().and_then(|n| u32::try_from(n).ok());
            }
            if let Some(v) = s.get("stream").and_then(Value::as_bool) {
                settings.stream = v;
            }
            Some(settings)
        }
        Some(_) => return Err("settings: not an object".into()),
    };
    if let Some(messages) = messages {
        req.messages = messages;
    }
    if let Some(tools) = tools {
        req.tools = Arc::new(tools);
    }
    if let Some(settings) = settings {
        req.settings = settings;
    }
    Ok(())
}

/// Replaces the parts of `resp` present in `new` (`message`, `usage`, `stop_reason`).
fn replace_response(resp: &mut ModelResponse, new: Value) -> Result<(), String> {
    let Value::Object(mut new) = new else {
        return Err("it is not an object".into());
    };
    let message = match new.remove("message") {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value::<Message>(v).map_err(|e| format!("message: {e}"))?),
    };
    let usage = match new.remove("usage") {
        None => None,
        Some(v) => {
            Some(serde_json::from_value::<Option<Usage>>(v).map_err(|e| format!("usage: {e}"))?)
        }
    };
    let stop_reason = match new.remove("stop_reason") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<StopReason>(v).map_err(|e| format!("stop_reason: {e}"))?)
        }
    };
    if let Some(message) = message {
        resp.message = message;
    }
    if let Some(usage) = usage {
        resp.usage = usage;
    }
    if let Some(stop_reason) = stop_reason {
        resp.stop_reason = stop_reason;
    }
    Ok(())
}

// ===== MCP elicitation =====

#[cfg(feature = "mcp")]
mod elicitation {
    use std::sync::Arc;

    use serde_json::{Map, Value};

    use super::{HookEvent, Inner, Report, Verdict};
    use crate::{
        command::process::Elicit,
        mcp::client::{ElicitationMode, ElicitationRequest, ElicitationResponse},
    };

    /// The mode fields of both events' inputs.
    fn mode_fields(input: &mut Map<String, Value>, mode: &ElicitationMode, form_schema: bool) {
        match mode {
            ElicitationMode::Form { requested_schema } => {
                input.insert("mode".into(), "form".into());
                if form_schema {
                    input.insert("requested_schema".into(), requested_schema.clone());
                }
            }
            ElicitationMode::Url {
                url,
                elicitation_id,
            } => {
                input.insert("mode".into(), "url".into());
                if form_schema {
                    input.insert("url".into(), url.clone().into());
                }
                if !elicitation_id.is_empty() {
                    input.insert("elicitation_id".into(), elicitation_id.clone().into());
                }
            }
        }
    }

    /// What the hooks of one elicitation event decided: a block (exit 2, `decision:
    /// "block"`) or a fail-closed handler's failure declines; else the most cautious action
    /// any hook gave (cancel, then decline, then accept with the first accept's content).
    fn decide(verdicts: Vec<Verdict>) -> Option<ElicitationResponse> {
        if verdicts
            .iter()
            .any(|v| v.block.is_some() || v.failed.is_some())
        {
            return Some(ElicitationResponse::Decline);
        }
        let mut best: Option<(Elicit, Option<Value>)> = None;
        for v in verdicts {
            if let Some((action, content)) = v.elicitation
                && best.as_ref().is_none_or(|(b, _)| action > *b)
            {
                best = Some((action, content));
            }
        }
        best.map(|(action, content)| match action {
            Elicit::Accept => ElicitationResponse::Accept(content),
            Elicit::Decline => ElicitationResponse::Decline,
            Elicit::Cancel => ElicitationResponse::Cancel,
        })
    }

    impl Inner {
        /// Elicitation: the answer of the hooks matching the server (`None`: no hook
        /// answered, ask the user).
        pub(crate) async fn elicitation(
            self: &Arc<Self>,
            req: &ElicitationRequest,
        ) -> Option<ElicitationResponse> {
            let event = HookEvent::Elicitation;
            if !self.wants(event, &req.server) {
                return None;
            }
            let ctx = req.ctx.clone().unwrap_or_default();
            let mut input = self.base(event, &ctx);
            input.insert("mcp_server_name".into(), req.server.clone().into());
            input.insert("message".into(), req.message.clone().into());
            mode_fields(&mut input, &req.mode, true);
            let verdicts = self
                .run(event, Some(&req.server), input, Report::Run(&ctx))
                .await;
            decide(verdicts)
        }

        /// ElicitationResult: the answer sent to the server (`answer` unless a hook
        /// overrides or blocks it).
        pub(crate) async fn elicitation_result(
            self: &Arc<Self>,
            req: &ElicitationRequest,
            answer: ElicitationResponse,
        ) -> ElicitationResponse {
            let event = HookEvent::ElicitationResult;
            if !self.wants(event, &req.server) {
                return answer;
            }
            let ctx = req.ctx.clone().unwrap_or_default();
            let mut input = self.base(event, &ctx);
            input.insert("mcp_server_name".into(), req.server.clone().into());
            let (action, content) = match &answer {
                ElicitationResponse::Accept(content) => ("accept", content.clone()),
                ElicitationResponse::Decline => ("decline", None),
                ElicitationResponse::Cancel => ("cancel", None),
            };
            input.insert("action".into(), action.into());
            if let Some(content) = content {
                input.insert("content".into(), content);
            }
            mode_fields(&mut input, &req.mode, false);
            let verdicts = self
                .run(event, Some(&req.server), input, Report::Run(&ctx))
                .await;
            decide(verdicts).unwrap_or(answer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(f: impl FnOnce(&mut Verdict)) -> Verdict {
        let mut v = Verdict::default();
        f(&mut v);
        v
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let allow = || verdict(|v| v.permission = Some((Permission::Allow, String::new())));
        let ask = |r: &str| verdict(|v| v.permission = Some((Permission::Ask, r.into())));
        let deny = |r: &str| verdict(|v| v.permission = Some((Permission::Deny, r.into())));
        assert_eq!(merge_pre_tool_use(vec![allow()]), PreToolUse::Allow);
        assert_eq!(
            merge_pre_tool_use(vec![allow(), ask("a"), allow()]),
            PreToolUse::Ask("a".into())
        );
        assert_eq!(
            merge_pre_tool_use(vec![ask("a"), deny("d1"), allow(), deny("d2")]),
            PreToolUse::Deny("d1; d2".into())
        );
        assert_eq!(merge_pre_tool_use(vec![]), PreToolUse::Continue);
    }

    #[test]
    fn rewrites_and_contexts_in_order() {
        let a = verdict(|v| {
            v.updated_input = Some(json!({"n": 1}));
            v.contexts.push("one".into());
        });
        let b = verdict(|v| {
            v.updated_input = Some(json!({"n": 2}));
            v.contexts.push("two".into());
            v.permission = Some((Permission::Ask, "sure?".into()));
        });
        assert_eq!(
            merge_pre_tool_use(vec![a, b]),
            PreToolUse::Many(vec![
                PreToolUse::AddContext("one".into()),
                PreToolUse::AddContext("two".into()),
                PreToolUse::Rewrite(json!({"n": 1})),
                PreToolUse::Rewrite(json!({"n": 2})),
                PreToolUse::Ask("sure?".into()),
            ])
        );
        let stop = verdict(|v| v.stop = Some("halt".into()));
        let deny = verdict(|v| v.block = Some("no".into()));
        assert_eq!(
            merge_pre_tool_use(vec![deny, stop]),
            PreToolUse::Abort("halt".into())
        );
    }

    #[test]
    fn tool_responses() {
        assert_eq!(tool_response("plain"), json!("plain"));
        assert_eq!(tool_response("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(tool_response("{not json"), json!("{not json"));
    }

    #[test]
    fn request_replacement() {
        let mut req = ModelRequest::new(vec![Message::user("hi")]);
        replace_request(
            &mut req,
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "bye"}]}],
                   "settings": {"model": "m", "temperature": 0.5}}),
        )
        .unwrap();
        assert_eq!(req.messages[0].text(), "bye");
        assert_eq!(req.settings.model.as_deref(), Some("m"));
        assert!(replace_request(&mut req, json!({"tools": 3})).is_err());
        let mut resp = ModelResponse::text("a");
        replace_response(
            &mut resp,
            json!({"message": {"role": "assistant", "content": [{"type": "text", "text": "b"}]}}),
        )
        .unwrap();
        assert_eq!(resp.message.text(), "b");
    }
}
