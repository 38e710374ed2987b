//! Agents as tools: [`Agent::into_tool`].

use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    Agent, AgentRequest, AgentResponse,
    hooks::{RunHooks, StopBlocks, StopInput, SubagentStartInput},
    transcript::{Target, subagent_path},
};
use crate::{
    error::{BoxError, Error},
    message::{ToolOutput, ToolSpec},
    tool::{Tool, ToolRequest},
};

/// The arguments of a subagent tool.
#[derive(Debug, Deserialize, JsonSchema)]
struct SubagentArgs {
    /// The task for the subagent, with everything it needs to know: it does not see this
    /// conversation.
    prompt: String,
}

/// An [`Agent`] as a [`Tool`]: see [`Agent::into_tool`].
#[derive(Clone)]
pub struct SubagentTool {
    agent: Agent,
    spec: ToolSpec,
}

impl fmt::Debug for SubagentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubagentTool")
            .field("name", &self.spec.name)
            .field("agent", &self.agent)
            .finish()
    }
}

impl Agent {
    /// This agent as a tool of another agent (a subagent): the tool takes a `prompt`, runs
    /// this agent on it in a context of its own, and its final answer is the tool output.
    ///
    /// Before it runs, the calling agent's SubagentStart hooks
    /// (`Hooks::on_subagent_start`, matched
    /// on `name`; `agent_id` is `agent-<call id>`) may give it context: it follows its prompt
    /// as one [hook context](crate::message::Message::hook_context) (a system message of its
    /// first request, in its thread from then on), as Claude Code does.
    ///
    /// When the subagent finishes, the calling agent's SubagentStop hooks
    /// (`Hooks::on_subagent_stop`, matched
    /// on `name`) may send it back to work with feedback, continuing its conversation: the
    /// feedback as a user message, then the hooks' contexts
    /// (`Stop::AddContext`; a command hook's
    /// block in Claude Code's words) as one hook context; at
    /// most as many times in a row as their stop cap allows (a pass in which the subagent
    /// made a tool call resets the count). A subagent run that does not finish
    /// (step limit, abort, block) is an error output naming its outcome. Cancelling the
    /// calling run cancels the subagent.
    ///
    /// # Example
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::{Agent, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::Error> {
    /// let researcher = Agent::builder()
    ///     .model(ScriptedModel::new().text("Tower is a library of modular services."))
    ///     .build();
    /// let lead = Agent::builder()
    ///     .model(
    ///         ScriptedModel::new()
    ///             .tool_call("research", json!({ "prompt": "What is tower?" }))
    ///             .text("Done."),
    ///     )
    ///     .tool(researcher.into_tool("research", "Researches a question"))
    ///     .build();
    /// let resp = lead.run("Find out what tower is").await?;
    /// assert_eq!(resp.messages[2].text(), "Tower is a library of modular services.");
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_tool(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> SubagentTool {
        let mut schema = schemars::schema_for!(SubagentArgs).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
            map.remove("title");
        }
        SubagentTool {
            agent: self,
            spec: ToolSpec::new(name, description, schema),
        }
    }
}

impl Tool for SubagentTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
        let id = req.call.id.clone();
        let name = &self.spec.name;
        let args: SubagentArgs = match serde_json::from_value(req.call.arguments) {
            Ok(args) => args,
            Err(err) => {
                return Ok(ToolOutput::error(
                    id,
                    format!("invalid arguments for tool `{name}`: {err}"),
                ));
            }
        };
        let call = SubagentCall::new(name.clone(), args.prompt);
        let resp = self.agent.run_subagent(call, &id, &req.ctx).await?;
        Ok(if resp.outcome.is_finished() {
            ToolOutput::text(id, resp.text)
        } else {
            ToolOutput::error(
                id,
                format!(
                    "subagent `{name}` did not finish ({:?}); its last answer: {}",
                    resp.outcome, resp.text
                ),
            )
        })
    }
}

/// One subagent call of a tool: what [`Agent::run_subagent`] needs besides the call's id and
/// context. [`SubagentTool`] makes one per call; a subagent tool of yours (one that picks an
/// agent by a type the model names, or builds the prompt itself) makes its own.
///
/// # Example
///
/// ```
/// use tower_agent_core::agent::SubagentCall;
///
/// // What `SubagentTool` sends for the call `call_1` of its tool `research`: the id
/// // `agent-call_1` and the transcript `subagents/agent-call_1.jsonl`.
/// let plain = SubagentCall::new("research", "What is tower?");
/// // A subagent that is part of its caller's session, with an id of its own.
/// let shared = SubagentCall::new("Explore", "Find the config loader")
///     .agent_id("a1b2c3")
///     .transcript_id("a1b2c3")
///     .in_session(true);
/// # let _ = (plain, shared);
/// ```
#[derive(Debug, Clone)]
pub struct SubagentCall {
    agent_type: String,
    agent_id: Option<String>,
    transcript_id: Option<String>,
    prompt: String,
    in_session: bool,
}

impl SubagentCall {
    /// A call of the subagent type `agent_type` (what the caller's SubagentStart and
    /// SubagentStop hooks match and see as `agent_type`, and the name in the subagent's
    /// thread id) with its task, `prompt`: everything it needs to know, as it does not see
    /// the caller's conversation.
    pub fn new(agent_type: impl Into<String>, prompt: impl Into<String>) -> Self {
        SubagentCall {
            agent_type: agent_type.into(),
            agent_id: None,
            transcript_id: None,
            prompt: prompt.into(),
            in_session: false,
        }
    }

    /// The subagent's id, the hooks' `agent_id` (default: `agent-{call id}`).
    #[must_use]
    pub fn agent_id(mut self, id: impl Into<String>) -> Self {
        self.agent_id = Some(id.into());
        self
    }

    /// The name of its transcript, `subagents/agent-{id}.jsonl` next to its caller's (`id`
    /// escaped as thread ids are; default: the call id). Written only when the caller keeps
    /// a transcript.
    #[must_use]
    pub fn transcript_id(mut self, id: impl Into<String>) -> Self {
        self.transcript_id = Some(id.into());
        self
    }

    /// Whether the subagent is part of its caller's session, as Claude Code's subagents are
    /// (default: no): its run then carries a [`SessionSubagent`], so the command hooks of its
    /// run speak for the caller's session and fire none of the session's own events.
    #[must_use]
    pub fn in_session(mut self, yes: bool) -> Self {
        self.in_session = yes;
        self
    }
}

/// In a subagent run's extensions ([`RunContext::extensions`](crate::context::RunContext::extensions))
/// when it is part of its caller's session ([`SubagentCall::in_session`], as for Claude
/// Code's `Agent` tool): tower-agent's command hooks of the run then carry its `agent_id` and
/// `agent_type` and the caller's `session_id`, `transcript_path` and `prompt_id`, and fire
/// none of the session's own events (SessionStart, UserPromptSubmit, Stop, SessionEnd,
/// MessageDisplay), as Claude Code's subagents do. A hook host of yours can do the same.
///
/// # Example
///
/// ```
/// use tower_agent_core::{agent::SessionSubagent, context::RunContext};
///
/// // In a layer: whose session is this run part of?
/// fn session_of(ctx: &RunContext) -> &str {
///     SessionSubagent::of(ctx).map_or(ctx.session_id(), |s| s.session_id())
/// }
/// let ctx = RunContext::builder().session_id("t-1").build();
/// assert_eq!(session_of(&ctx), "t-1"); // not a subagent of a session
/// ```
#[derive(Debug, Clone)]
pub struct SessionSubagent {
    agent_id: String,
    agent_type: String,
    prompt_id: String,
    session_id: String,
    transcript_path: Option<std::path::PathBuf>,
}

impl SessionSubagent {
    /// The subagent the run of `ctx` is, if it is part of its caller's session.
    pub fn of(ctx: &crate::context::RunContext) -> Option<&SessionSubagent> {
        ctx.extensions().get::<SessionSubagent>()
    }

    /// The subagent's id ([`SubagentCall::agent_id`]).
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Its type ([`SubagentCall::new`]).
    pub fn agent_type(&self) -> &str {
        &self.agent_type
    }

    /// The id of the caller's run: the prompt the subagent works for.
    pub fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    /// The caller's session id (its thread).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The caller's transcript, if it keeps one.
    pub fn transcript_path(&self) -> Option<&std::path::Path> {
        self.transcript_path.as_deref()
    }
}

impl Agent {
    /// Runs this agent as the subagent of the tool call `id` of `ctx`'s run, as
    /// [`SubagentTool`] does (see [`Agent::into_tool`]): what a subagent tool of yours calls in
    /// its [`call`](Tool::call), with the id and the context of its
    /// [`ToolRequest`].
    ///
    /// In order: the caller's SubagentStart hooks (matched on the call's type; their contexts
    /// follow the prompt as one hook context), then the subagent on its prompt, in a thread
    /// of its own (`{session}/{type}/{id}`, deleted from the agent's store when the call ends
    /// or is dropped) and in the caller's working directory, directories, extensions and
    /// cancellation; then, each time it finishes, the caller's SubagentStop hooks, which may
    /// send it back to work with feedback, at most as many times in a row as their stop cap
    /// allows (a pass with a tool call resets the count; past the cap it ends, with a
    /// warning on the run). The subagent's transcript goes next to its caller's, when the
    /// caller keeps one.
    ///
    /// The response is the subagent's last: [`Outcome::is_finished`](super::Outcome::is_finished)
    /// says whether it finished (else it hit its step limit, aborted or was blocked: a tool
    /// usually turns that into an error output).
    ///
    /// # Errors
    ///
    /// As [`Agent::run`]: the subagent's run could not run (a setup stage or its thread store
    /// failed).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the subagent's run (see the [module
    /// docs](super#cancel-safety)); its thread is still deleted, by a task spawned on the
    /// current runtime.
    ///
    /// # Example
    ///
    /// A tool that gives the subagent its task with a checklist of its own:
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::{
    ///     Agent, BoxError,
    ///     agent::SubagentCall,
    ///     message::{ToolOutput, ToolSpec},
    ///     model::ScriptedModel,
    ///     tool::{Tool, ToolRequest},
    /// };
    ///
    /// struct Review(Agent);
    ///
    /// impl Tool for Review {
    ///     fn spec(&self) -> ToolSpec {
    ///         ToolSpec::new("review", "Reviews a file", json!({"type": "object"}))
    ///     }
    ///
    ///     async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
    ///         let file = req.call.arguments["file"].as_str().unwrap_or_default();
    ///         let call = SubagentCall::new("review", format!("Review {file}: naming, errors, tests."));
    ///         let resp = self.0.run_subagent(call, &req.call.id, &req.ctx).await?;
    ///         Ok(if resp.outcome.is_finished() {
    ///             ToolOutput::text(req.call.id, resp.text)
    ///         } else {
    ///             ToolOutput::error(req.call.id, "the review did not finish")
    ///         })
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::Error> {
    /// let reviewer = Agent::builder().model(ScriptedModel::new().text("Looks good.")).build();
    /// let lead = Agent::builder()
    ///     .model(ScriptedModel::new().tool_call("review", json!({"file": "lib.rs"})).text("Done."))
    ///     .tool(Review(reviewer))
    ///     .build();
    /// let resp = lead.run("Review lib.rs").await?;
    /// assert_eq!(resp.messages[2].text(), "Looks good.");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_subagent(
        &self,
        call: SubagentCall,
        id: &str,
        ctx: &crate::context::RunContext,
    ) -> Result<AgentResponse, Error> {
        let name = &call.agent_type;
        let agent_id = call.agent_id.unwrap_or_else(|| format!("agent-{id}"));
        let transcript_id = call.transcript_id.unwrap_or_else(|| id.to_owned());
        let parent = RunHooks::of(ctx);
        // SubagentStart: contexts that follow the subagent's prompt.
        let mut start_context = Vec::new();
        if let Some(parent) = parent.as_ref().filter(|h| h.has_subagent_start(name)) {
            let input = SubagentStartInput {
                agent_type: name.clone(),
                agent_id: agent_id.clone(),
            };
            start_context = parent.subagent_start(input, ctx).await;
        }
        let hooks = parent.filter(|h| h.has_subagent_stop(name));
        // The subagent's conversation lives in its store for the length of this call, so a
        // SubagentStop hook can send it back to work on it.
        let thread = format!("{}/{name}/{id}", ctx.session_id());
        // The subagent's transcript, next to its caller's (`{session}/subagents/agent-{id}`).
        let transcript = ctx.transcript_path().map(|parent| Target {
            path: subagent_path(parent, &transcript_id),
            agent_id: transcript_id.clone(),
        });
        let session = call.in_session.then(|| SessionSubagent {
            agent_id: agent_id.clone(),
            agent_type: name.clone(),
            prompt_id: ctx.run_id().to_owned(),
            session_id: ctx.session_id().to_owned(),
            transcript_path: ctx.transcript_path().map(std::path::Path::to_path_buf),
        });
        // A pass of the subagent: its prompt (the task, then a SubagentStop hook's feedback)
        // and the hook contexts that follow it.
        let request = |prompt: String, context: Vec<String>| {
            let mut request = AgentRequest::new(prompt)
                .thread(thread.clone())
                .cancellation(ctx.cancellation().child_token())
                .cwd(ctx.cwd());
            // The caller's per-request data (who asked) holds for the subagent too.
            request.extensions = ctx.extensions().clone();
            request.extensions.remove::<SessionSubagent>();
            if let Some(session) = &session {
                request.extensions.insert(session.clone());
            }
            request.directories = ctx.directories().to_vec();
            request.prompt_context = context;
            request.transcript.clone_from(&transcript);
            request
        };
        let mut cleanup = DeleteOnDrop {
            agent: self.clone(),
            thread: Some(thread.clone()),
        };
        let mut next = request(call.prompt, start_context);
        // Counted per subagent call, as Stop blocks are per run; `seen`: the messages of the
        // subagent's thread before its last pass.
        let (mut blocks, mut seen) = (StopBlocks::default(), 0);
        let result = loop {
            let resp = match self.run(next).await {
                Ok(resp) => resp,
                Err(err) => break Err(err),
            };
            if made_tool_call(&resp, &mut seen) {
                blocks.acted();
            }
            let Some(hooks) = hooks.as_ref().filter(|_| resp.outcome.is_finished()) else {
                break Ok(resp);
            };
            let mut input = StopInput::new(resp.text.clone(), blocks.active());
            input.agent_name = Some(name.clone());
            input.agent_id = Some(agent_id.clone());
            input.agent_transcript_path = transcript.as_ref().map(|t| t.path.clone());
            let Some(feedback) = hooks.subagent_stop(input, ctx).await else {
                break Ok(resp);
            };
            let cap = hooks.stop_cap();
            if let Err(n) = blocks.block(cap) {
                ctx.warn(format!(
                    "SubagentStop hooks blocked subagent `{name}` from ending {n} times in a row \
                     with no tool call in between; the stop cap ({cap}) overrides them and the \
                     subagent ends"
                ));
                break Ok(resp);
            }
            next = request(feedback.feedback, feedback.context);
        };
        cleanup.thread = None;
        if let Err(err) = self.store().delete(&thread).await {
            tracing::warn!(%thread, error = %err, "could not delete a subagent's thread");
        }
        result
    }
}

/// Whether the subagent made a tool call in the pass that ended with `resp`: in the messages
/// of its thread past the first `seen` (a pass that compacted its thread below that is read
/// as having made none); `seen` becomes the thread's length.
fn made_tool_call(resp: &AgentResponse, seen: &mut usize) -> bool {
    let made = resp
        .messages
        .iter()
        .skip(*seen)
        .any(|m| !m.tool_calls.is_empty());
    *seen = resp.messages.len();
    made
}

/// Deletes a subagent's thread if its call is dropped before it could (a timeout on the tool
/// stack, a cancelled parent run), so no thread is left behind in a persistent store.
struct DeleteOnDrop {
    agent: Agent,
    thread: Option<String>,
}

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(%thread, "no runtime to delete a dropped subagent's thread");
            return;
        };
        let agent = self.agent.clone();
        runtime.spawn(async move {
            if let Err(err) = agent.store().delete(&thread).await {
                tracing::warn!(%thread, error = %err, "could not delete a subagent's thread");
            }
        });
    }
}
