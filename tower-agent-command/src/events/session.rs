//! The run's events: the prompt, Stop, the session's start and end, the working directory,
//! subagents, tasks, memory files, compactions, display, notifications.

use std::{sync::Arc, time::Duration};

use serde_json::{Map, Value};

use super::{
    Inner, Live, SESSION_END_BUDGET, SESSION_END_ENV, SESSION_END_MAX_BUDGET, joined,
    register::Add, session_env, spawn, spawn_task, union,
};
use crate::{
    config::HookEvent, env_file::EnvFile, handler::Entry, process::Verdict, reply::Report,
};
use tower_agent_core::agent::{AgentResponse, SessionEnv, SessionSubagent, session_end_reason};
use tower_agent_core::context::RunContext;
use tower_agent_layers::hooks::{
    CwdChanged, CwdChangedInput, Hooks, InstructionsInput, MessageDisplay, MessageDisplayInput,
    Notification, PostCompactInput, ResumedSession, SessionSource, SessionStart, SessionStartInput,
    Stop, StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskInput,
    UserPrompt, state::Added,
};

/// A resumed session's fields (Claude Code 2.1.328 sends them with source `resume`).
fn resumed_fields(input: &mut Map<String, Value>, resumed: &ResumedSession) {
    input.insert(
        "seconds_since_last_response".into(),
        resumed.seconds_since_last_response.into(),
    );
    input.insert("context_tokens".into(), resumed.context_tokens.into());
    input.insert(
        "prompt_cache_likely_expired".into(),
        resumed.prompt_cache_likely_expired.into(),
    );
    input.insert(
        "estimated_cache_write_usd".into(),
        resumed.estimated_cache_write_usd.into(),
    );
}

impl Inner {
    pub(super) async fn user_prompt(
        self: &Arc<Self>,
        prompt: &str,
        ctx: &RunContext,
    ) -> UserPrompt {
        let event = HookEvent::UserPromptSubmit;
        if SessionSubagent::of(ctx).is_some() {
            return UserPrompt::Continue;
        }
        let mut input = self.base(event, ctx);
        input.insert("prompt".into(), prompt.into());
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        prompt_decision(verdicts)
    }

    pub(super) async fn stop(
        self: &Arc<Self>,
        event: HookEvent,
        stop: StopInput,
        ctx: &RunContext,
    ) -> Stop {
        if event == HookEvent::Stop && SessionSubagent::of(ctx).is_some() {
            // A subagent of the session: its caller fires SubagentStop instead.
            return Stop::Finish;
        }
        let mut input = self.base(event, ctx);
        input.insert("stop_hook_active".into(), stop.stop_hook_active.into());
        input.insert(
            "last_assistant_message".into(),
            stop.last_assistant_message.into(),
        );
        // Claude Code's background shell tasks and scheduled prompts: a run has none.
        input.insert("background_tasks".into(), Value::Array(Vec::new()));
        input.insert("session_crons".into(), Value::Array(Vec::new()));
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
        let (mut feedback, mut contexts) = (Vec::new(), Vec::new());
        for v in verdicts {
            if let Some(reason) = v.stop {
                // The agent is stopping anyway: it finishes, and the reason is reported.
                ctx.warn(format!("a {event} hook ended the run: {reason}"));
                return Stop::Finish;
            }
            feedback.extend(v.block.or(v.failed));
            feedback.extend(v.contexts);
            contexts.extend(v.block_context.map(Stop::AddContext));
        }
        match joined(feedback, "\n\n") {
            None => Stop::Finish,
            Some(feedback) if contexts.is_empty() => Stop::Continue(feedback),
            Some(feedback) => {
                contexts.insert(0, Stop::Continue(feedback));
                Stop::Many(contexts)
            }
        }
    }

    pub(super) async fn session_start(
        self: &Arc<Self>,
        start: SessionStartInput,
        ctx: &RunContext,
    ) -> SessionStart {
        let event = HookEvent::SessionStart;
        let source = start.source.as_str();
        if !self.wants(event, source) || SessionSubagent::of(ctx).is_some() {
            return SessionStart::Continue;
        }
        let mut input = self.base(event, ctx);
        if start.source == SessionSource::Compact {
            // The compaction's prompt (Claude Code: `/compact`'s own), where a session's
            // first SessionStart comes before any (measured: vector `compact_manual`).
            input.insert("prompt_id".into(), ctx.run_id().into());
        }
        input.insert("source".into(), source.into());
        if let Some(model) = start.model {
            input.insert("model".into(), model.into());
        }
        if let Some(resumed) = start.resumed {
            resumed_fields(&mut input, &resumed);
        }
        let verdicts = self
            .run_with_env_file(event, Some(source), input, ctx)
            .await;
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

    /// Runs the handlers of `event` with a `CLAUDE_ENV_FILE`: a fresh file per firing; what
    /// the hooks export there is read after and kept for the run's later hooks.
    pub(super) async fn run_with_env_file(
        self: &Arc<Self>,
        event: HookEvent,
        subject: Option<&str>,
        input: Map<String, Value>,
        ctx: &RunContext,
    ) -> Vec<Verdict> {
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
            .run_with_env(event, subject, input, Report::Run(ctx), env.into())
            .await;
        if let Some(file) = file {
            let (vars, warnings) = file.read(&earlier).await;
            warnings.into_iter().for_each(|w| ctx.warn(w));
            if !vars.is_empty() {
                let all: Vec<(String, String)> = earlier.iter().cloned().chain(vars).collect();
                ctx.with_data(|data| data.insert(SessionEnv(all.into())));
            }
        }
        verdicts
    }

    /// CwdChanged: observe only. A block or a stop is reported (the event cannot block, as in
    /// the protocol); the last `watchPaths` answered is the files to watch.
    pub(super) async fn cwd_changed(
        self: &Arc<Self>,
        change: CwdChangedInput,
        ctx: &RunContext,
    ) -> CwdChanged {
        let event = HookEvent::CwdChanged;
        let mut input = self.base(event, ctx);
        input.insert("old_cwd".into(), change.old_cwd.to_string_lossy().into());
        input.insert("new_cwd".into(), change.new_cwd.to_string_lossy().into());
        let mut watch = None;
        for v in self.run_with_env_file(event, None, input, ctx).await {
            if let Some(reason) = v.block.or(v.stop) {
                ctx.warn(format!("a CwdChanged hook: {reason}"));
            }
            watch = v.watch_paths.or(watch);
        }
        watch.map_or(CwdChanged::Continue, CwdChanged::Watch)
    }

    /// SessionEnd: in the background, after the run's StopFailure hooks ([`FailureHooks`]).
    pub(super) fn session_end(self: &Arc<Self>, response: &AgentResponse, ctx: &RunContext) {
        let event = HookEvent::SessionEnd;
        let reason = session_end_reason(&response.outcome);
        if !self.wants(event, reason) || SessionSubagent::of(ctx).is_some() {
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
        let failure = ctx.with_data(|data| data.remove::<FailureHooks>());
        spawn("a SessionEnd hook", async move {
            // The run's StopFailure hooks first, as in Claude Code (for at most the budget).
            if let Some(FailureHooks(failure)) = failure {
                let _ = tokio::time::timeout(budget, failure).await;
            }
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
    pub(super) fn session_end_budget(&self) -> Duration {
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

    pub(super) fn stop_failure(self: &Arc<Self>, failure: &StopFailureInput, ctx: &RunContext) {
        let event = HookEvent::StopFailure;
        let mut input = self.base(event, ctx);
        input.insert("error".into(), failure.error.into());
        if let Some(details) = &failure.error_details {
            input.insert("error_details".into(), details.clone().into());
        }
        input.insert(
            "last_assistant_message".into(),
            failure.last_assistant_message.clone().into(),
        );
        let (inner, env, error) = (Arc::clone(self), session_env(ctx), failure.error);
        // Output and exit code are ignored (as in the protocol): observe only. The run's
        // SessionEnd hooks wait for these ([`FailureHooks`]).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("a StopFailure hook cannot run outside a tokio runtime; skipped");
            return;
        };
        let task = runtime.spawn(async move {
            inner
                .run_with_env(event, Some(error), input, Report::Log, env)
                .await;
        });
        ctx.with_data(|data| data.insert(FailureHooks(task)));
    }

    pub(super) async fn subagent_start(
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

    pub(super) async fn task(
        self: &Arc<Self>,
        event: HookEvent,
        task: TaskInput,
        ctx: &RunContext,
    ) -> Task {
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

    pub(super) fn instructions_loaded(
        self: &Arc<Self>,
        loaded: &InstructionsInput,
        ctx: &RunContext,
    ) {
        let event = HookEvent::InstructionsLoaded;
        let mut input = self.base(event, ctx);
        input.insert(
            "file_path".into(),
            loaded.file_path.to_string_lossy().into_owned().into(),
        );
        input.insert("memory_type".into(), loaded.memory_type.into());
        input.insert("load_reason".into(), loaded.load_reason.into());
        let (inner, env, reason) = (Arc::clone(self), session_env(ctx), loaded.load_reason);
        // No decision control (as in the protocol): observe only. The run waits for it before
        // UserPromptSubmit, as Claude Code does (see `Setup::at_session_start`).
        let task = spawn_task("an InstructionsLoaded hook", async move {
            inner
                .run_with_env(event, Some(reason), input, Report::Log, env)
                .await;
        });
        if let Some(task) = task {
            tower_agent_core::agent::RunHooks::wait_for(ctx, task);
        }
    }

    pub(super) fn post_compact(self: &Arc<Self>, compact: &PostCompactInput, ctx: &RunContext) {
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

    pub(super) async fn message_display(
        self: &Arc<Self>,
        display: MessageDisplayInput,
        ctx: &RunContext,
    ) -> MessageDisplay {
        let event = HookEvent::MessageDisplay;
        if SessionSubagent::of(ctx).is_some() {
            // Claude Code shows a subagent's answers to no one.
            return MessageDisplay::Keep;
        }
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

    pub(super) fn notification(self: &Arc<Self>, notification: &Notification, ctx: &RunContext) {
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
}

/// The decision of UserPromptSubmit and UserPromptExpansion hooks: `continue: false`, exit 2,
/// `decision: "block"` or a fail-closed failure blocks the prompt (the first stop at once, the
/// blocks' reasons joined); else their contexts (`additionalContext`, plain stdout), joined.
pub(super) fn prompt_decision(verdicts: Vec<Verdict>) -> UserPrompt {
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

/// The session events [`register`](super::register) adds a callback for, in registration order,
/// each with how it is added.
pub(super) const EVENTS: &[(HookEvent, Add)] = &[
    (HookEvent::UserPromptSubmit, add_user_prompt_submit),
    (HookEvent::Stop, add_stop),
    (HookEvent::SubagentStop, add_subagent_stop),
    (HookEvent::SessionStart, add_session_start),
    (HookEvent::CwdChanged, add_cwd_changed),
    (HookEvent::SessionEnd, add_session_end),
    (HookEvent::StopFailure, add_stop_failure),
    (HookEvent::SubagentStart, add_subagent_start),
    (HookEvent::TaskCreated, add_task_created),
    (HookEvent::TaskCompleted, add_task_completed),
    (HookEvent::InstructionsLoaded, add_instructions_loaded),
    (HookEvent::PostCompact, add_post_compact),
    (HookEvent::MessageDisplay, add_message_display),
    (HookEvent::Notification, add_notification),
];

fn add_user_prompt_submit(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_user_prompt(move |prompt, ctx| {
        let i = i.current();
        async move { i.user_prompt(&prompt, &ctx).await }
    })
}

fn add_stop(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop(move |input, ctx| {
        let i = i.current();
        async move { i.stop(HookEvent::Stop, input, &ctx).await }
    })
}

fn add_subagent_stop(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_stop(union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.stop(HookEvent::SubagentStop, input, &ctx).await }
    })
}

fn add_session_start(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_start_for(union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.session_start(input, &ctx).await }
    })
}

fn add_cwd_changed(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_cwd_changed(move |input, ctx| {
        let i = i.current();
        async move { i.cwd_changed(input, &ctx).await }
    })
}

fn add_session_end(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_end(move |response, ctx| i.current().session_end(response, ctx))
}

fn add_stop_failure(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop_failure(union(entries), move |input, ctx| {
        i.current().stop_failure(input, ctx)
    })
}

fn add_subagent_start(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_start(union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.subagent_start(input, &ctx).await }
    })
}

fn add_task_created(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_created(move |input, ctx: RunContext| {
        let i = i.current();
        async move { i.task(HookEvent::TaskCreated, input, &ctx).await }
    })
}

fn add_task_completed(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_completed(move |input, ctx: RunContext| {
        let i = i.current();
        async move { i.task(HookEvent::TaskCompleted, input, &ctx).await }
    })
}

fn add_instructions_loaded(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_instructions_loaded(union(entries), move |input, ctx| {
        i.current().instructions_loaded(input, ctx)
    })
}

fn add_post_compact(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_compact(union(entries), move |input, ctx| {
        i.current().post_compact(input, ctx)
    })
}

fn add_message_display(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_message_display(move |input, ctx| {
        let i = i.current();
        async move { i.message_display(input, &ctx).await }
    })
}

fn add_notification(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_notify(union(entries), move |notification, ctx| {
        i.current().notification(notification, ctx)
    })
}

/// A run's StopFailure hooks, running in the background: its SessionEnd hooks start once they
/// are done, the order Claude Code runs them in (StopFailure, then SessionEnd; measured against
/// 2.1.328: `tests/reference`).
struct FailureHooks(tokio::task::JoinHandle<()>);
