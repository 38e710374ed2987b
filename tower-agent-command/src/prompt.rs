//! `prompt` and `agent` handlers: a model (or a read-only subagent) judges the hook's input
//! and answers `{"ok": …, "reason": …}`; the answer becomes the JSON output a command hook
//! would print for that event ([prompt and agent hooks](super#prompt-and-agent-hooks)).

use std::{
    fmt,
    hash::{Hash, Hasher},
    path::Path,
    sync::{Arc, OnceLock},
};

use serde_json::{Map, Value, json};
use tower::ServiceExt;

use crate::reply::{Failure, Reply, Stdout};
use tower_agent_builtins::filesystem::Filesystem;
use tower_agent_core::Agent;
use tower_agent_core::agent::{AgentRequest, Outcome};
use tower_agent_core::context::RunContext;
use tower_agent_core::message::Message;
use tower_agent_core::model::{BoxModelService, ModelRequest, ModelSettings};
use tower_agent_core::tool::ToolRouter;
use tower_agent_layers::hooks::HookEvent;

/// The most turns (model calls) the subagent of an `agent` hook may take: 50, as in the
/// reference. One that has not answered by then is a non-blocking error.
pub(crate) const AGENT_MAX_TURNS: u32 = 50;

/// The read-only file tools an `agent` hook's subagent gets, rooted at the project dir.
pub(crate) const AGENT_TOOLS: [&str; 4] = ["ls", "read_file", "glob", "grep"];

/// What the model of a `prompt` hook is told about its answer.
const PROMPT_INSTRUCTIONS: &str = "You check one condition for a hook of an AI coding agent. \
The user message holds what to check and the hook's event data as JSON. Reply with a single \
JSON object and nothing else: {\"ok\": true} if the condition is met and the action may go \
on, or {\"ok\": false, \"reason\": \"...\"} if it is not, the reason saying what is wrong and \
what to do. Add \"impossible\": true to an {\"ok\": false} answer only if the condition can \
never be met.";

/// What the subagent of an `agent` hook is told.
const AGENT_INSTRUCTIONS: &str = "You verify one condition for a hook of an AI coding agent. \
The user message holds what to verify and the hook's event data as JSON. Inspect the project \
with the read-only tools (ls, read_file, glob, grep) as needed. When you know, reply with a \
single JSON object and nothing else: {\"ok\": true} if the condition is met, or \
{\"ok\": false, \"reason\": \"...\"} if it is not, the reason saying what is wrong and what \
to do.";

/// `prompt` (one model call) or `agent` (a subagent with read-only tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ModelKind {
    Prompt,
    Agent,
}

impl ModelKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ModelKind::Prompt => "prompt",
            ModelKind::Agent => "agent",
        }
    }
}

/// A `prompt` or `agent` handler: what it asks, and the model service that answers.
pub(crate) struct ModelHook {
    pub(crate) kind: ModelKind,
    pub(crate) prompt: String,
    /// The `model` field: the request's model name (default: the service's).
    pub(crate) model: Option<String>,
    /// `continueOnBlock` (prompt hooks; agent hooks always behave as if it were `true`).
    pub(crate) continue_on_block: bool,
    pub(crate) service: BoxModelService,
    /// The subagent of an `agent` hook, made on first use.
    agent: OnceLock<Agent>,
}

impl ModelHook {
    pub(crate) fn new(
        kind: ModelKind,
        prompt: String,
        model: Option<String>,
        continue_on_block: bool,
        service: BoxModelService,
    ) -> Self {
        ModelHook {
            kind,
            prompt,
            model,
            continue_on_block,
            service,
            agent: OnceLock::new(),
        }
    }

    fn key(&self) -> (ModelKind, &str, Option<&str>, bool) {
        (
            self.kind,
            &self.prompt,
            self.model.as_deref(),
            self.continue_on_block,
        )
    }

    /// How logs and warnings name the handler: `prompt "first words…"`.
    pub(crate) fn label(&self) -> String {
        let mut words: String = self.prompt.chars().take(60).collect();
        if words.len() < self.prompt.len() {
            words.push('…');
        }
        format!("{} {words:?}", self.kind.name())
    }

    fn settings(&self) -> ModelSettings {
        let settings = ModelSettings::default();
        match &self.model {
            Some(m) => settings.model(m.as_str()),
            None => settings,
        }
    }

    /// Asks the model (or the subagent) about `input` (the hook's JSON input) and returns
    /// its verdict as the answer a command hook would give for `event`.
    pub(crate) async fn evaluate(
        &self,
        event: HookEvent,
        input: &str,
        project_dir: &Path,
        parent: Option<&RunContext>,
    ) -> Result<Reply, Failure> {
        let prompt = fill(&self.prompt, input);
        // Cancelled with the run it belongs to.
        let cancel = parent.map_or_else(Default::default, |p| p.cancellation().child_token());
        let text = match self.kind {
            ModelKind::Prompt => {
                let ctx = RunContext::builder()
                    .cwd(project_dir)
                    .cancellation(cancel)
                    .build();
                let req = ModelRequest {
                    messages: vec![Message::system(PROMPT_INSTRUCTIONS), Message::user(prompt)]
                        .into(),
                    tools: Arc::default(),
                    settings: self.settings(),
                    ctx,
                    extensions: http::Extensions::new(),
                };
                let resp = self
                    .service
                    .clone()
                    .oneshot(req)
                    .await
                    .map_err(|e| Failure::Io(format!("the model call failed: {e}")))?
                    .collect()
                    .await
                    .map_err(|e| Failure::Io(format!("the model's answer failed: {e}")))?;
                resp.message.text().into_owned()
            }
            ModelKind::Agent => {
                let agent = self.agent.get_or_init(|| self.subagent(project_dir));
                let request = AgentRequest::new(prompt)
                    .cancellation(cancel)
                    .cwd(project_dir);
                let resp = agent
                    .run(request)
                    .await
                    .map_err(|e| Failure::Io(format!("the verifier agent failed: {e}")))?;
                match resp.outcome {
                    Outcome::Finished => resp.text,
                    Outcome::MaxSteps => {
                        return Err(Failure::Io(format!(
                            "the verifier agent gave no answer within {AGENT_MAX_TURNS} turns"
                        )));
                    }
                    other => {
                        return Err(Failure::Io(format!(
                            "the verifier agent did not finish: {other:?}"
                        )));
                    }
                }
            }
        };
        let verdict = parse(&text)?;
        Ok(Reply {
            code: Some(0),
            stdout: Stdout::Json(self.output(event, verdict)),
            stderr: String::new(),
        })
    }

    /// The subagent of an `agent` hook: the same model service, the read-only file tools
    /// rooted at `project_dir`, at most [`AGENT_MAX_TURNS`] turns.
    fn subagent(&self, project_dir: &Path) -> Agent {
        let all = Filesystem::local(project_dir).without_execute().tools();
        // Only these names route (to the full router, which dispatches by name): a call to
        // `write_file` is an unknown tool.
        let mut tools = ToolRouter::new();
        for spec in all.specs().iter() {
            if AGENT_TOOLS.contains(&spec.name.as_str()) {
                tools.add_service(spec.clone(), all.clone());
            }
        }
        Agent::builder()
            .model(self.service.clone())
            .tools(&tools)
            .system_prompt(AGENT_INSTRUCTIONS)
            .settings(self.settings())
            .max_steps(AGENT_MAX_TURNS)
            .cwd(project_dir)
            .name("hook-verifier")
            .build()
    }

    /// What `{ok, reason, impossible}` means for `event`, as a command hook's JSON output.
    fn output(&self, event: HookEvent, v: Answer) -> Value {
        if v.ok {
            return Value::Null;
        }
        let reason = v
            .reason
            .unwrap_or_else(|| format!("the condition of a {} hook is not met", self.kind.name()));
        // An agent hook's block is a prompt hook's with `continueOnBlock: true`.
        let continues = self.continue_on_block || self.kind == ModelKind::Agent;
        let block = || json!({ "decision": "block", "reason": reason });
        let end_turn = || json!({ "continue": false, "stopReason": reason });
        match event {
            HookEvent::Stop | HookEvent::SubagentStop => {
                if v.impossible && self.kind == ModelKind::Prompt {
                    tracing::info!(%event, %reason, "a prompt hook judged its condition impossible; the agent stops");
                    Value::Null
                } else {
                    block()
                }
            }
            HookEvent::PreToolUse if continues => json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }),
            HookEvent::PostToolUse if continues => block(),
            HookEvent::PreToolUse | HookEvent::PostToolUse => end_turn(),
            HookEvent::UserPromptSubmit | HookEvent::PostToolUseFailure => block(),
            // Not loaded for other events (see `supports`).
            _ => Value::Null,
        }
    }
}

/// The timeout of a `prompt` (30 s) or `agent` (60 s) handler that sets none.
pub(crate) fn default_timeout(kind: ModelKind) -> std::time::Duration {
    match kind {
        ModelKind::Prompt => std::time::Duration::from_secs(30),
        ModelKind::Agent => std::time::Duration::from_secs(60),
    }
}

/// Whether `prompt` and `agent` handlers run on `event` (the reference's list, as far as
/// this crate fires its events).
pub(crate) fn supports(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::PreToolUse
            | HookEvent::PostToolUse
            | HookEvent::PostToolUseFailure
            | HookEvent::UserPromptSubmit
            | HookEvent::Stop
            | HookEvent::SubagentStop
    )
}

impl PartialEq for ModelHook {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ModelHook {}

impl Hash for ModelHook {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Debug for ModelHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelHook")
            .field("kind", &self.kind)
            .field("prompt", &self.prompt)
            .field("model", &self.model)
            .field("continue_on_block", &self.continue_on_block)
            .finish_non_exhaustive()
    }
}

/// `$ARGUMENTS` in `prompt` replaced by `input`; `\$` is a literal `$` (so `\$ARGUMENTS` is
/// the text `$ARGUMENTS`). Without a `$ARGUMENTS`, `input` is appended after a blank line.
pub(crate) fn fill(prompt: &str, input: &str) -> String {
    const PLACEHOLDER: &str = "$ARGUMENTS";
    let mut out = String::with_capacity(prompt.len() + input.len() + 2);
    let mut found = false;
    let mut rest = prompt;
    while let Some(i) = rest.find(['\\', '$']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("\\$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = tail.strip_prefix(PLACEHOLDER) {
            out.push_str(input);
            found = true;
            rest = after;
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    if !found {
        out.push_str("\n\n");
        out.push_str(input);
    }
    out
}

/// A model's `{ok, reason, impossible}`.
#[derive(Debug, PartialEq)]
pub(crate) struct Answer {
    ok: bool,
    reason: Option<String>,
    impossible: bool,
}

/// Reads the model's answer: a JSON object with a boolean `ok`, alone or inside a code fence
/// or other text (the outermost `{…}` is tried). Anything else is a non-blocking error.
pub(crate) fn parse(text: &str) -> Result<Answer, Failure> {
    let trimmed = text.trim();
    let object = serde_json::from_str::<Map<String, Value>>(trimmed)
        .ok()
        .or_else(|| {
            let start = trimmed.find('{')?;
            let end = trimmed.rfind('}')?;
            serde_json::from_str::<Map<String, Value>>(trimmed.get(start..=end)?).ok()
        });
    let bad = || {
        let shown: String = trimmed.chars().take(200).collect();
        Failure::Io(format!(
            "answered no {{\"ok\": true|false, \"reason\": \"...\"}} JSON: {shown:?}"
        ))
    };
    let object = object.ok_or_else(bad)?;
    let ok = object.get("ok").and_then(Value::as_bool).ok_or_else(bad)?;
    let reason = match object.get("reason") {
        Some(Value::String(r)) if !r.trim().is_empty() => Some(r.clone()),
        _ => None,
    };
    let impossible = object.get("impossible").and_then(Value::as_bool) == Some(true);
    Ok(Answer {
        ok,
        reason,
        impossible,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_filled_in() {
        assert_eq!(fill("check $ARGUMENTS now", "{}"), "check {} now");
        assert_eq!(fill("a $ARGUMENTS b $ARGUMENTS", "X"), "a X b X");
        assert_eq!(
            fill("no placeholder", "{\"a\":1}"),
            "no placeholder\n\n{\"a\":1}"
        );
        assert_eq!(
            fill("costs \\$1.00, literal \\$ARGUMENTS", "X"),
            "costs $1.00, literal $ARGUMENTS\n\nX"
        );
        assert_eq!(fill("$ARGUMENT $ \\ é", "X"), "$ARGUMENT $ \\ é\n\nX");
        // The input is not scanned again.
        assert_eq!(fill("$ARGUMENTS", "$ARGUMENTS \\$"), "$ARGUMENTS \\$");
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any prompt and answer text: no panic; the input appears in the filled prompt.
            #[test]
            fn fill_and_parse_never_panic(
                prompt in r"(\$ARGUMENTS|\\\$|\$|\\|[a-z é{}]{0,5}){0,10}",
                answer in r#"(\{|\}|"ok"|:|true|false|"reason"|,|[a-z ]{0,4}|`){0,16}"#,
            ) {
                let filled = fill(&prompt, "INPUT");
                prop_assert!(filled.contains("INPUT"));
                let _ = parse(&answer);
            }
        }
    }

    #[test]
    fn answers() {
        let a = |ok, reason: Option<&str>, impossible| Answer {
            ok,
            reason: reason.map(Into::into),
            impossible,
        };
        assert_eq!(parse(r#"{"ok": true}"#).unwrap(), a(true, None, false));
        assert_eq!(
            parse("```json\n{\"ok\": false, \"reason\": \"tests fail\"}\n```").unwrap(),
            a(false, Some("tests fail"), false)
        );
        assert_eq!(
            parse(r#"Sure. {"ok": false, "reason": "x", "impossible": true}"#).unwrap(),
            a(false, Some("x"), true)
        );
        for bad in ["", "yes", "{\"ok\": \"true\"}", "{\"reason\": \"x\"}", "{"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
