//! Each event: the input its handlers get, and how their verdicts (in configuration order)
//! become the decision of one callback of the [`Hooks`] registry.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures_util::future::join_all;
use serde_json::{Map, Value};

use crate::{
    config::{Config, HookEvent},
    dialect::Dialect,
    formats,
    handler::{Entry, Handler},
    process::{self, Verdict},
    reply::{Failure, Reply, Report},
    spawn::Dirs,
};
use tower_agent_core::agent::SessionEnv;
use tower_agent_core::context::RunContext;
use tower_agent_layers::matcher::ToolMatcher;

mod environment;
mod live;
mod model;
mod register;
mod session;
mod tool;

pub(crate) use self::{live::Live, model::pre_compact, register::register};

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
        let inputs = self.inputs(event, input, &entries, report);
        let mut waited = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.handler.background {
                let ctx = report.ctx().cloned();
                self.spawn_background(
                    event,
                    Arc::clone(&entry.handler),
                    Arc::clone(inputs.of(&entry.handler)),
                    Arc::clone(&dir),
                    Arc::clone(&env),
                    ctx,
                );
            } else {
                waited.push(&entry.handler);
            }
        }
        // Handlers run in parallel, but those of one Gemini CLI `sequential` group (next to
        // each other in configuration order) run one after another, as one unit.
        let units = waited.chunk_by(|a, b| {
            a.extras.sequential.is_some() && a.extras.sequential == b.extras.sequential
        });
        let verdicts = join_all(units.map(|unit| {
            let (inputs, dir, env) = (&inputs, &dir, &env);
            async move {
                let mut verdicts = Vec::with_capacity(unit.len());
                for handler in unit {
                    let input = inputs.of(handler);
                    let result = self.call(event, handler, input, dir, report, env).await;
                    let mut verdict = process::interpret(event, handler, result, report);
                    in_dialect(event, subject, handler, &mut verdict);
                    verdicts.push(verdict);
                }
                verdicts
            }
        }))
        .await;
        verdicts.into_iter().flatten().collect()
    }

    /// The input serialized once for each dialect `entries` speak: Claude Code's, and Codex's
    /// or Gemini CLI's when a handler is theirs.
    fn inputs(
        &self,
        event: HookEvent,
        input: Map<String, Value>,
        entries: &[&Entry],
        report: Report<'_>,
    ) -> Inputs {
        let codex = entries
            .iter()
            .any(|e| e.handler.extras.dialect == Dialect::Codex)
            .then(|| {
                let model = report.ctx().and_then(tower_agent_core::agent::RunModel::of);
                let run = formats::CodexRun {
                    model: model.as_deref(),
                    permission_mode: self.permission_mode,
                };
                let input = formats::codex_input(event, input.clone(), &run);
                Arc::from(Value::Object(input).to_string())
            });
        let gemini = entries
            .iter()
            .any(|e| e.handler.extras.dialect == Dialect::Gemini)
            .then(|| {
                let prompt = report
                    .ctx()
                    .and_then(tower_agent_core::agent::RunPrompt::of);
                let mut input = input.clone();
                if let (HookEvent::Stop, Some(ctx)) = (event, report.ctx()) {
                    formats::gemini_turn(ctx, &mut input);
                }
                let input = formats::gemini_input(event, input, prompt.as_deref());
                Arc::from(Value::Object(input).to_string())
            });
        Inputs {
            claude: Value::Object(input).to_string().into(),
            codex,
            gemini,
        }
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
        // The session's environment, then the handler's own (a plugin's `CLAUDE_PLUGIN_ROOT` …).
        // NOTE: a persistent process is shared by every run: it never sees one session's
        // environment.
        let codex = dialect == Dialect::Codex;
        let env: std::borrow::Cow<'_, [(String, String)]> = if dialect != Dialect::Claude {
            // Codex and Gemini CLI set no `CLAUDE_ENV_FILE` (Codex no `CLAUDE_PROJECT_DIR`
            // either: `Dirs`).
            env.iter()
                .filter(|(k, _)| k != "CLAUDE_ENV_FILE")
                .chain(handler.extras.env.iter())
                .cloned()
                .collect::<Vec<_>>()
                .into()
        } else if handler.extras.env.is_empty() {
            env.into()
        } else {
            env.iter()
                .chain(handler.extras.env.iter())
                .cloned()
                .collect::<Vec<_>>()
                .into()
        };
        let dirs = Dirs {
            cwd: dir,
            project: &self.project_dir,
            claude_project_dir: !codex,
        };
        let result = process::call(event, handler, dirs, input, report, &env).await;
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

/// An event's input as each dialect's handlers get it.
struct Inputs {
    claude: Arc<str>,
    codex: Option<Arc<str>>,
    gemini: Option<Arc<str>>,
}

impl Inputs {
    fn of(&self, handler: &Handler) -> &Arc<str> {
        let other = match handler.extras.dialect {
            Dialect::Claude => None,
            Dialect::Codex => self.codex.as_ref(),
            Dialect::Gemini => self.gemini.as_ref(),
        };
        other.unwrap_or(&self.claude)
    }
}

/// Spawns `fut` on the current tokio runtime, or says why it cannot.
fn spawn(what: &str, fut: impl Future<Output = ()> + Send + 'static) {
    let _ = spawn_task(what, fut);
}

/// [`spawn`], with the task to wait for.
fn spawn_task(
    what: &str,
    fut: impl Future<Output = ()> + Send + 'static,
) -> Option<tokio::task::JoinHandle<()>> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => Some(handle.spawn(fut)),
        Err(_) => {
            tracing::warn!("{what} cannot run outside a tokio runtime; skipped");
            None
        }
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
    /// [`AgentBuilder::cwd`](tower_agent_core::agent::AgentBuilder::cwd) or `AgentRequest::cwd`), else
    /// the project directory. The process's directory is the one it had when the hooks were
    /// built (no syscall per hook call).
    pub(super) fn hook_dir(&self, ctx: &RunContext) -> PathBuf {
        let run = ctx.cwd();
        match &self.process_dir {
            Some(process) if *process != run => run,
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
        let subagent = tower_agent_core::agent::SessionSubagent::of(ctx);
        if has_prompt_id(event) {
            // A subagent of the session runs within its caller's prompt.
            let prompt_id = subagent.map_or(ctx.run_id(), |s| s.prompt_id());
            input.insert("prompt_id".into(), prompt_id.into());
        }
        if let Some(subagent) = subagent {
            // Its caller's session, as Claude Code's subagents' hooks see it (measured).
            input.insert("session_id".into(), subagent.session_id().into());
            let transcript = subagent.transcript_path();
            let transcript = transcript.map(|p| p.to_string_lossy().into_owned());
            input.insert(
                "transcript_path".into(),
                transcript.unwrap_or_default().into(),
            );
            input.insert("agent_id".into(), subagent.agent_id().into());
            input.insert("agent_type".into(), subagent.agent_type().into());
        }
        if has_permission_mode(event) {
            input.insert("permission_mode".into(), self.permission_mode.into());
        }
        if has_effort(event)
            && let Some(effort) = tower_agent_core::agent::RunEffort::of(ctx)
        {
            input.insert(
                "effort".into(),
                serde_json::json!({ "level": effort.as_str() }),
            );
        }
        input
    }
}

/// Whether an event's input has `effort` (`{"level": …}`, the agent's
/// [`reasoning_effort`](tower_agent_core::model::ModelSettings::reasoning_effort), when it names one):
/// Claude Code 2.1.328 sends it with the events that follow a model call — PreToolUse,
/// PermissionRequest, PostToolUse, PostToolUseFailure, PostToolBatch, Stop, SubagentStop and
/// StopFailure (measured: `tests/reference`).
fn has_effort(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::PreToolUse
            | HookEvent::PermissionRequest
            | HookEvent::PostToolUse
            | HookEvent::PostToolUseFailure
            | HookEvent::PostToolBatch
            | HookEvent::Stop
            | HookEvent::SubagentStop
            | HookEvent::StopFailure
    )
}

/// Whether an event's input has `prompt_id`: the id of the prompt the hook's work came from —
/// here the run's ([`RunContext::run_id`]): a run is one prompt. Claude Code 2.1.328 sends it
/// with every event after the first prompt, not with SessionStart, Setup and
/// InstructionsLoaded, which come before it (measured: `tests/reference`).
fn has_prompt_id(event: HookEvent) -> bool {
    !matches!(
        event,
        HookEvent::SessionStart | HookEvent::Setup | HookEvent::InstructionsLoaded
    )
}

/// Whether an event's input has `permission_mode`: Claude Code 2.1.328 leaves it out of
/// SessionStart, Setup, SessionEnd, StopFailure, MessageDisplay, InstructionsLoaded,
/// CwdChanged, FileChanged, PreModelSwitch, PostModelSwitch, SubagentStart, PreCompact,
/// PostCompact and ConfigChange (measured: `tests/reference`).
fn has_permission_mode(event: HookEvent) -> bool {
    !matches!(
        event,
        HookEvent::SessionStart
            | HookEvent::SubagentStart
            | HookEvent::Setup
            | HookEvent::SessionEnd
            | HookEvent::StopFailure
            | HookEvent::CwdChanged
            | HookEvent::FileChanged
            | HookEvent::MessageDisplay
            | HookEvent::InstructionsLoaded
            | HookEvent::PreModelSwitch
            | HookEvent::PostModelSwitch
            | HookEvent::PreCompact
            | HookEvent::PostCompact
            | HookEvent::ConfigChange
            | HookEvent::Elicitation
    )
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
        // A Gemini CLI handler's matchers name Gemini's tools: the callback sees every call,
        // `Entry::matches` picks.
        if e.handler.extras.dialect == Dialect::Gemini {
            return ToolMatcher::all();
        }
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

fn joined(parts: Vec<String>, separator: &str) -> Option<String> {
    (!parts.is_empty()).then(|| parts.join(separator))
}

// ===== MCP elicitation =====

#[cfg(feature = "mcp")]
mod elicitation {
    use std::sync::Arc;

    use serde_json::{Map, Value};

    use super::{HookEvent, Inner, Report, Verdict};
    use crate::process::Elicit;
    use tower_agent_mcp::client::{ElicitationMode, ElicitationRequest, ElicitationResponse};

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
            // `ElicitationMode` is `#[non_exhaustive]`: a mode of a later tower-agent-mcp
            // that this version does not know gives the inputs no mode fields.
            _ => {}
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

/// A handler's verdict as the program its configuration was written for acts on it: Claude
/// Code's words, Codex's or Gemini CLI's rules.
fn in_dialect(event: HookEvent, subject: Option<&str>, handler: &Handler, verdict: &mut Verdict) {
    match handler.extras.dialect {
        Dialect::Claude => process::claude_words(event, subject, handler, verdict),
        Dialect::Codex => formats::codex_verdict(event, handler, verdict),
        Dialect::Gemini => formats::gemini_verdict(event, verdict),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        model::{replace_request, replace_response},
        tool::{merge_post_tool_use, merge_pre_tool_use, tool_response},
        *,
    };

    use crate::process::Permission;
    use serde_json::json;
    use tower_agent_core::message::{Message, ToolOutput};
    use tower_agent_core::model::{ModelRequest, ModelResponse};
    use tower_agent_layers::hooks::{PostToolUse, PreToolUse};

    fn call() -> tower_agent_core::message::ToolCall {
        tower_agent_core::message::ToolCall {
            id: "call-1".into(),
            name: "Bash".into(),
            arguments: json!({"command": "rm -rf x"}),
        }
    }

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
        assert_eq!(
            merge_pre_tool_use(vec![allow()], &call()),
            PreToolUse::Allow
        );
        assert_eq!(
            merge_pre_tool_use(vec![allow(), ask("a"), allow()], &call()),
            PreToolUse::Ask("a".into())
        );
        assert_eq!(
            merge_pre_tool_use(vec![ask("a"), deny("d1"), allow(), deny("d2")], &call()),
            PreToolUse::Deny("d1; d2".into())
        );
        assert_eq!(merge_pre_tool_use(vec![], &call()), PreToolUse::Continue);
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
            merge_pre_tool_use(vec![a, b], &call()),
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
            merge_pre_tool_use(vec![deny, stop], &call()),
            PreToolUse::Abort("halt".into())
        );
    }

    /// A handler of `dialect` (a shell command `hook`).
    fn handler_of(dialect: Dialect) -> Handler {
        let mut handler = Handler::shell_for_test("hook");
        handler.extras.dialect = dialect;
        handler
    }

    /// What one handler of `dialect` that answered `(code, stdout, stderr)` to `event` means,
    /// as the hooks' run reads it.
    fn answered(
        event: HookEvent,
        dialect: Dialect,
        (code, out, err): (i32, &str, &str),
    ) -> Verdict {
        let handler = handler_of(dialect);
        let input = json!({"tool_input": call().arguments}).to_string();
        let reply = Reply {
            code: Some(code),
            stdout: crate::reply::Stdout::Text(out.into()),
            stderr: err.into(),
        };
        let reply = dialect.output(event, &input, reply);
        let mut verdict = process::interpret(event, &handler, Ok(reply), Report::Log);
        in_dialect(event, Some("Bash"), &handler, &mut verdict);
        verdict
    }

    /// Every form a PreToolUse denial takes, in every dialect, as the tool layer gets it:
    /// Claude Code's words (a `Deny`), Codex's (a result, not an error) and Gemini CLI's (an
    /// error) as a `Refuse`; the forms a program does not read decide nothing.
    #[test]
    fn a_denial_in_each_dialects_words() {
        let allow =
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#;
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"why"}}"#;
        let block = r#"{"decision":"block","reason":"why"}"#;
        let forms = [
            ("exit 2", (2, "", "why\n")),
            ("decision block", (0, block, "")),
            ("permissionDecision deny", (0, deny, "")),
            ("exit 2 over an allow", (2, allow, "why")),
        ];
        let codex = PreToolUse::Refuse(ToolOutput::text(
            "call-1",
            "Command blocked by PreToolUse hook: why. Command: rm -rf x",
        ));
        let gemini = PreToolUse::Refuse(ToolOutput::error("call-1", "Tool execution blocked: why"));
        let claude = |r: &str| PreToolUse::Deny(r.into());
        let want: [(Dialect, [PreToolUse; 4]); 3] = [
            (
                Dialect::Claude,
                [
                    claude("[hook]: why"),
                    claude("why"),
                    claude("why"),
                    claude("[hook]: why"),
                ],
            ),
            (Dialect::Codex, std::array::from_fn(|_| codex.clone())),
            // Gemini CLI reads no `permissionDecision`; its JSON decides whatever the exit code.
            (
                Dialect::Gemini,
                [
                    gemini.clone(),
                    gemini.clone(),
                    PreToolUse::Continue,
                    PreToolUse::Continue,
                ],
            ),
        ];
        for (dialect, wants) in want {
            for ((form, answer), want) in forms.iter().zip(wants) {
                let verdict = answered(HookEvent::PreToolUse, dialect, *answer);
                let got = merge_pre_tool_use(vec![verdict], &call());
                assert_eq!(got, want, "{dialect:?}: {form}");
            }
        }
        // Handlers of several dialects: the first denier's words, every reason.
        let both = vec![
            answered(HookEvent::PreToolUse, Dialect::Gemini, (0, block, "")),
            answered(HookEvent::PreToolUse, Dialect::Claude, (0, block, "")),
        ];
        assert_eq!(
            merge_pre_tool_use(both, &call()),
            PreToolUse::Refuse(ToolOutput::error(
                "call-1",
                "Tool execution blocked: why; why"
            ))
        );
    }

    /// Where each dialect's PostToolUse context goes: Claude Code's and Codex's next to the
    /// result (a hook context), Gemini CLI's appended to it in `<hook_context>` tags — after
    /// its block's reason, which replaces the result; two Gemini handlers' one after the other.
    #[test]
    fn a_post_tool_use_context_where_each_dialect_puts_it() {
        let context =
            r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"ctx"}}"#;
        let output = ToolOutput::text("call-1", "out");
        let post = |dialect, answer| answered(HookEvent::PostToolUse, dialect, answer);
        let claude = merge_post_tool_use(
            vec![post(Dialect::Claude, (0, context, ""))],
            &output,
            |_| {},
        );
        assert_eq!(
            claude,
            PostToolUse::AddContext("PostToolUse:Bash hook additional context: ctx".into())
        );
        let codex = merge_post_tool_use(
            vec![post(Dialect::Codex, (0, context, ""))],
            &output,
            |_| {},
        );
        assert_eq!(codex, PostToolUse::AddContext("ctx".into()));
        let in_result = |text: &str, is_error| ToolOutput {
            is_error,
            ..ToolOutput::text("call-1", text)
        };
        let gemini = |answer| post(Dialect::Gemini, answer);
        assert_eq!(
            merge_post_tool_use(vec![gemini((0, context, ""))], &output, |_| {}),
            PostToolUse::Replace(in_result("out\n\n<hook_context>ctx</hook_context>", false))
        );
        let blocked = r#"{"decision":"deny","reason":"hidden","hookSpecificOutput":{"additionalContext":"ctx"}}"#;
        assert_eq!(
            merge_post_tool_use(vec![gemini((0, blocked, ""))], &output, |_| {}),
            PostToolUse::Replace(in_result(
                "hidden\n\n<hook_context>ctx</hook_context>",
                true
            ))
        );
        let two = vec![gemini((0, context, "")), gemini((0, context, ""))];
        let PostToolUse::Many(decisions) = merge_post_tool_use(two, &output, |_| {}) else {
            panic!("two replacements")
        };
        assert_eq!(
            decisions.last(),
            Some(&PostToolUse::Replace(in_result(
                "out\n\n<hook_context>ctx</hook_context>\n\n<hook_context>ctx</hook_context>",
                false
            )))
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
