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
    error::BoxError,
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
        let call = SubagentCall {
            agent_type: name.clone(),
            agent_id: format!("agent-{id}"),
            transcript_id: id.clone(),
            prompt: args.prompt,
            in_session: false,
        };
        Ok(match self.agent.run_subagent(call, &id, &req.ctx).await? {
            SubagentEnd::Finished(resp) => ToolOutput::text(id, resp.text),
            SubagentEnd::Unfinished(resp) => ToolOutput::error(
                id,
                format!(
                    "subagent `{name}` did not finish ({:?}); its last answer: {}",
                    resp.outcome, resp.text
                ),
            ),
        })
    }
}

/// One subagent call: what [`SubagentTool`] and Claude Code's `Agent` tool
/// (`AgentTool`) share.
pub(crate) struct SubagentCall {
    /// The subagent's type: what its SubagentStart / SubagentStop hooks match and see as
    /// `agent_type`.
    pub(crate) agent_type: String,
    /// Its id, the hooks' `agent_id`.
    pub(crate) agent_id: String,
    /// The name of its transcript (`subagents/agent-<transcript_id>.jsonl`).
    pub(crate) transcript_id: String,
    /// Its task.
    pub(crate) prompt: String,
    /// The subagent shares its caller's session, as Claude Code's subagents do
    /// ([`SessionSubagent`]).
    pub(crate) in_session: bool,
}

/// How a subagent call ended.
pub(crate) enum SubagentEnd {
    /// It finished: its last response (its thread's messages, every pass).
    Finished(AgentResponse),
    /// It did not finish (step limit, abort, block): its last response.
    Unfinished(AgentResponse),
}

/// In a subagent run's extensions when it shares its caller's session (Claude Code's `Agent`
/// tool): command hooks of the run carry its `agent_id` and `agent_type` and the caller's
/// `session_id`, `transcript_path` and `prompt_id`, and fire none of the session's own events (SessionStart, UserPromptSubmit,
/// Stop, SessionEnd, MessageDisplay), as Claude Code's subagents do.
#[derive(Debug, Clone)]
pub(crate) struct SessionSubagent {
    /// The subagent's id.
    pub(crate) agent_id: String,
    /// Its type.
    pub(crate) agent_type: String,
    /// The id of the caller's run (its prompt).
    pub(crate) prompt_id: String,
    /// The caller's session id.
    pub(crate) session_id: String,
    /// The caller's transcript, if it keeps one.
    pub(crate) transcript_path: Option<std::path::PathBuf>,
}

impl SessionSubagent {
    /// The subagent `ctx`'s run is, if it shares its caller's session.
    pub(crate) fn of(ctx: &crate::context::RunContext) -> Option<&SessionSubagent> {
        ctx.extensions().get::<SessionSubagent>()
    }
}

impl Agent {
    /// Runs this agent as the subagent of the tool call `id` of `ctx`'s run: SubagentStart
    /// hooks first (their contexts follow its prompt), then the subagent, sent back to
    /// work as the SubagentStop hooks say (see [`Agent::into_tool`]).
    pub(crate) async fn run_subagent(
        &self,
        call: SubagentCall,
        id: &str,
        ctx: &crate::context::RunContext,
    ) -> Result<SubagentEnd, BoxError> {
        let name = &call.agent_type;
        let parent = RunHooks::of(ctx);
        // SubagentStart: contexts that follow the subagent's prompt.
        let mut start_context = Vec::new();
        if let Some(parent) = parent.as_ref().filter(|h| h.has_subagent_start(name)) {
            let input = SubagentStartInput {
                agent_type: name.clone(),
                agent_id: call.agent_id.clone(),
            };
            start_context = parent.subagent_start(input, ctx).await;
        }
        let hooks = parent.filter(|h| h.has_subagent_stop(name));
        // The subagent's conversation lives in its store for the length of this call, so a
        // SubagentStop hook can send it back to work on it.
        let thread = format!("{}/{name}/{id}", ctx.session_id());
        // The subagent's transcript, next to its caller's (`{session}/subagents/agent-{id}`).
        let transcript = ctx.transcript_path().map(|parent| Target {
            path: subagent_path(parent, &call.transcript_id),
            agent_id: call.transcript_id.clone(),
        });
        let session = call.in_session.then(|| SessionSubagent {
            agent_id: call.agent_id.clone(),
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
                Err(err) => break Err(err.into()),
            };
            if made_tool_call(&resp, &mut seen) {
                blocks.acted();
            }
            if !resp.outcome.is_finished() {
                break Ok(SubagentEnd::Unfinished(resp));
            }
            let Some(hooks) = &hooks else {
                break Ok(SubagentEnd::Finished(resp));
            };
            let mut input = StopInput::new(resp.text.clone(), blocks.active());
            input.agent_name = Some(name.clone());
            input.agent_id = Some(call.agent_id.clone());
            input.agent_transcript_path = transcript.as_ref().map(|t| t.path.clone());
            let Some(feedback) = hooks.subagent_stop(input, ctx).await else {
                break Ok(SubagentEnd::Finished(resp));
            };
            let cap = hooks.stop_cap();
            if let Err(n) = blocks.block(cap) {
                ctx.warn(format!(
                    "SubagentStop hooks blocked subagent `{name}` from ending {n} times in a row \
                     with no tool call in between; the stop cap ({cap}) overrides them and the \
                     subagent ends"
                ));
                break Ok(SubagentEnd::Finished(resp));
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
