//! Claude Code's `Agent` tool: [`AgentTool`].

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    hash::{BuildHasher, Hasher},
    sync::Arc,
    time::Instant,
};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::TOOL_RESPONSE;
use tower_agent_core::{
    Agent,
    agent::{AgentResponse, SubagentCall},
    error::BoxError,
    message::{ToolCall, ToolOutput, ToolSpec},
    tool::{Tool, ToolRequest},
};

/// The subagent type a call names when it names none.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// The input of Claude Code's `Agent` tool.
#[derive(Debug, Deserialize, JsonSchema)]
struct AgentArgs {
    /// A short (3-5 word) description of the task.
    #[expect(
        dead_code,
        reason = "what Claude Code shows a person; hooks see it in the input"
    )]
    description: String,
    /// The task for the agent to perform, with everything it needs to know: it does not see
    /// this conversation.
    prompt: String,
    /// The type of agent to use for this task.
    #[serde(default)]
    subagent_type: Option<String>,
    /// Whether to run the agent in the background. This host runs every agent in the
    /// foreground: the result comes back in this call.
    #[serde(default)]
    run_in_background: Option<bool>,
}

#[derive(Clone)]
struct AgentType {
    description: String,
    agent: Agent,
}

/// Claude Code's `Agent` tool: a subagent of a named type runs a task in a context of its own
/// and its final answer is the result, with the input and the `tool_response` Claude Code
/// gives hooks.
///
/// Input: `{description, prompt, subagent_type?, run_in_background?}`; `subagent_type`
/// names one of the types added with [`agent_type`](Self::agent_type) (default
/// [`GENERAL_PURPOSE`]). Each call runs that type's [`Agent`] through the machinery of
/// [`Agent::into_tool`] — the calling agent's SubagentStart and SubagentStop hooks (matched on
/// the type, `agent_type` the type, `agent_id` a random id of its own such as
/// `ac19b0c11f435edc1`, a transcript at `<session>/subagents/agent-<agent_id>.jsonl` beside the
/// caller's) — and, as in Claude Code, the subagent shares its caller's session:
/// command hooks (`tower_agent::command`) of its run (give it the caller's) see its `agent_id` and
/// `agent_type` and the caller's `session_id`, `transcript_path` and `prompt_id` in every
/// input, and fire none of the session's own
/// events (SessionStart, UserPromptSubmit, Stop, SessionEnd, MessageDisplay): its end fires
/// its caller's SubagentStop.
///
/// The model gets the subagent's final answer, after the note of the tools it called when it
/// called any (as `content` below, Claude Code's text). Hooks get as `tool_response`:
///
/// | field | what it holds |
/// |---|---|
/// | `status` | `"completed"` |
/// | `prompt`, `agentType`, `agentId` | the task, the type, the id |
/// | `resolvedModel` | the model the type's agent's settings name, if they name one |
/// | `content` | `[{"type": "text", "text": <the answer>}]`, after a harness note of the tools it called when it called any (`{"type": "text", "text": "<tools-used-before-summary>Bash, Read</tools-used-before-summary>\n"}`) |
/// | `totalDurationMs` | how long the subagent ran |
/// | `totalTokens`, `usage` | the tokens of its last model answer ([`AgentResponse::last_usage`]: `input_tokens` without the cached ones, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`; `totalTokens` their sum) |
/// | `totalToolUseCount`, `toolsUsed` | its tool calls, and the tools it called, sorted (when it called any) |
/// | `toolStats` | when it called any tool: `readCount` (`Read`), `searchCount` (`Grep`, `Glob`), `bashCount`, `editFileCount` (`Edit`, `Write`, `NotebookEdit`), `linesAdded` / `linesRemoved` (the lines of the edits' new and old texts), `otherToolCount` (the rest, `Agent` calls aside) |
/// | `canContinueAgent` | `false`: a subagent's conversation ends with its call |
///
/// Claude Code's note leaves out the tools its conversation has named already (called, or
/// named in an earlier note); a tool does not see its caller's conversation, so this one
/// names every tool the subagent called.
///
/// A call with `run_in_background: true` runs in the foreground all the same (this tool has no
/// background agents), and its answer says so. An unknown type, or a subagent that does not
/// finish (step limit, abort, a block), is an error output.
///
/// # Example
///
/// ```
/// use serde_json::json;
/// use tower_agent_builtins::claude_code::AgentTool;
/// use tower_agent_core::{Agent, model::ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::Error> {
/// let helper = Agent::builder()
///     .model(ScriptedModel::new().text("Tower is a library of modular services."))
///     .build();
/// let lead = Agent::builder()
///     .model(
///         ScriptedModel::new()
///             .tool_call("Agent", json!({
///                 "description": "Research tower",
///                 "prompt": "What is tower?",
///                 "subagent_type": "general-purpose",
///             }))
///             .text("Done."),
///     )
///     .tool(AgentTool::new().agent_type("general-purpose", "Researches anything", helper))
///     .build();
/// let resp = lead.run("Find out what tower is").await?;
/// assert_eq!(resp.messages[2].text(), "Tower is a library of modular services.");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct AgentTool {
    types: Arc<BTreeMap<String, AgentType>>,
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("types", &self.types.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AgentTool {
    /// The tool with no agent type yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the agent type `name`, described to the model as `description`,
    /// run by `agent` (for Claude Code's [`GENERAL_PURPOSE`] type: the same model and Claude
    /// Code's tools, without this one).
    #[must_use]
    pub fn agent_type(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        agent: Agent,
    ) -> Self {
        let description = description.into();
        Arc::make_mut(&mut self.types).insert(name.into(), AgentType { description, agent });
        self
    }
}

/// A random subagent id as Claude Code makes them: `a` and 16 hex digits.
fn agent_id(call_id: &str) -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(call_id.as_bytes());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    format!("a{:016x}", h.finish())
}

impl Tool for AgentTool {
    fn spec(&self) -> ToolSpec {
        let mut schema = schemars::schema_for!(AgentArgs).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
            map.remove("title");
        }
        let types: Vec<String> = self
            .types
            .iter()
            .map(|(name, t)| format!("- {name}: {}", t.description))
            .collect();
        let description = format!(
            "Launch a new agent to handle a task in a context of its own; its final answer is \
             the result. Available agent types:\n{}",
            types.join("\n")
        );
        ToolSpec::new("Agent", description, schema)
    }

    async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
        let id = req.call.id.clone();
        let args: AgentArgs = match serde_json::from_value(req.call.arguments) {
            Ok(args) => args,
            Err(err) => {
                return Ok(ToolOutput::error(
                    id,
                    format!("invalid arguments for tool `Agent`: {err}"),
                ));
            }
        };
        let kind = args
            .subagent_type
            .unwrap_or_else(|| GENERAL_PURPOSE.to_owned());
        let Some(t) = self.types.get(&kind) else {
            let known: Vec<&str> = self.types.keys().map(String::as_str).collect();
            return Ok(ToolOutput::error(
                id,
                format!(
                    "Agent type '{kind}' not found. Available agents: {}",
                    known.join(", ")
                ),
            ));
        };
        let agent_id = agent_id(&id);
        let call = SubagentCall::new(kind.clone(), args.prompt.clone())
            .agent_id(agent_id.clone())
            .transcript_id(agent_id.clone())
            .in_session(true);
        let started = Instant::now();
        let resp = t.agent.run_subagent(call, &id, &req.ctx).await?;
        if !resp.outcome.is_finished() {
            return Ok(ToolOutput::error(
                id,
                format!(
                    "subagent `{kind}` did not finish ({:?}); its last answer: {}",
                    resp.outcome, resp.text
                ),
            ));
        }
        let note = tools_note(&resp);
        let mut response = tool_response(&resp, note.as_deref(), &args.prompt, &kind, &agent_id);
        if let Some(model) = t.agent.model_name() {
            response["resolvedModel"] = json!(model);
        }
        response["totalDurationMs"] =
            json!(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        // What the model gets: the report after the same note (as Claude Code sends it).
        let mut text = note.unwrap_or_default();
        text.push_str(&resp.text);
        if args.run_in_background == Some(true) {
            text.push_str(
                "\n\n(This agent ran in the foreground: this host runs no agents in the \
                 background.)",
            );
        }
        Ok(ToolOutput::text(id, text).with_metadata(TOOL_RESPONSE, response))
    }
}

/// The harness note Claude Code opens a subagent's report with when it called tools:
/// `<tools-used-before-summary>Bash, Read</tools-used-before-summary>` and a newline.
fn tools_note(resp: &AgentResponse) -> Option<String> {
    let used: BTreeSet<&str> = (resp.messages.iter())
        .flat_map(|m| &m.tool_calls)
        .map(|c| c.name.as_str())
        .collect();
    let names: Vec<&str> = used.into_iter().collect();
    (!names.is_empty()).then(|| {
        format!(
            "<tools-used-before-summary>{}</tools-used-before-summary>\n",
            names.join(", ")
        )
    })
}

/// The `tool_response` of a finished subagent (its `totalDurationMs` set by the caller), as
/// Claude Code 2.1.328 makes it: its tools sorted, `toolStats` when it called any, and the
/// tokens of its last answer.
fn tool_response(
    resp: &AgentResponse,
    note: Option<&str>,
    prompt: &str,
    kind: &str,
    agent_id: &str,
) -> Value {
    let calls: Vec<&ToolCall> = resp.messages.iter().flat_map(|m| &m.tool_calls).collect();
    let used: BTreeSet<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    let mut content = Vec::new();
    if let Some(note) = note {
        content.push(json!({"type": "text", "text": note}));
    }
    content.push(json!({"type": "text", "text": resp.text}));
    // Claude Code's are the API's counts: `input_tokens` without the cached ones.
    let last = resp.last_usage;
    let uncached = last
        .input_tokens
        .saturating_sub(last.cache_read_tokens + last.cache_write_tokens);
    let mut response = json!({
        "status": "completed",
        "prompt": prompt,
        "agentId": agent_id,
        "agentType": kind,
        "content": content,
        "totalDurationMs": 0,
        "totalTokens": last.total(),
        "totalToolUseCount": calls.len(),
        "usage": {
            "input_tokens": uncached,
            "output_tokens": last.output_tokens,
            "cache_read_input_tokens": last.cache_read_tokens,
            "cache_creation_input_tokens": last.cache_write_tokens,
        },
        "canContinueAgent": false,
    });
    if !used.is_empty() {
        response["toolsUsed"] = json!(used);
    }
    if let Some(stats) = tool_stats(&calls) {
        response["toolStats"] = stats;
    }
    response
}

/// Claude Code's `toolStats` of a subagent's calls: `Read`s, searches (`Grep`, `Glob`),
/// `Bash` calls, file edits (`Edit`, `Write`, `NotebookEdit`) with the lines they add and
/// remove, and the other calls (not `Agent` ones); `None` when there are none.
fn tool_stats(calls: &[&ToolCall]) -> Option<Value> {
    let (mut read, mut search, mut bash, mut edit, mut other) = (0, 0, 0, 0, 0);
    let (mut added, mut removed) = (0, 0);
    for call in calls {
        let input = &call.arguments;
        match call.name.as_str() {
            "Read" => read += 1,
            "Grep" | "Glob" => search += 1,
            "Bash" => bash += 1,
            "Agent" | "Task" => {}
            "Edit" | "Write" | "NotebookEdit" => {
                edit += 1;
                let (a, r) = edited_lines(&call.name, input);
                added += a;
                removed += r;
            }
            _ => other += 1,
        }
    }
    (read + search + bash + edit + other > 0).then(|| {
        json!({
            "readCount": read,
            "searchCount": search,
            "bashCount": bash,
            "editFileCount": edit,
            "linesAdded": added,
            "linesRemoved": removed,
            "otherToolCount": other,
        })
    })
}

/// The lines an edit call adds and removes, counted as Claude Code counts them: the lines of
/// `new_string` and `old_string` (of each of `edits`, if given), of a `Write`'s `content`, of
/// a `NotebookEdit`'s `new_source`.
fn edited_lines(tool: &str, input: &Value) -> (u64, u64) {
    // A text's lines: its newlines plus one; none for an empty text (or none at all).
    let lines = |v: &Value| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .map_or(0, |s| s.matches('\n').count() as u64 + 1)
    };
    match tool {
        "Edit" => match input.get("edits").and_then(Value::as_array) {
            Some(edits) => edits.iter().fold((0, 0), |(a, r), e| {
                (a + lines(&e["new_string"]), r + lines(&e["old_string"]))
            }),
            None => (lines(&input["new_string"]), lines(&input["old_string"])),
        },
        "Write" => (lines(&input["content"]), 0),
        "NotebookEdit" => (lines(&input["new_source"]), 0),
        _ => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// The lines of an edit, as Claude Code counts them: newlines plus one, none for an empty
    /// text; a multi-edit's `edits` add up; a `NotebookEdit` adds its `new_source`.
    #[test]
    fn edited_lines_count_as_claude_code() {
        use super::edited_lines;
        let edit = json!({"old_string": "", "new_string": "a\nb"});
        assert_eq!(edited_lines("Edit", &edit), (2, 0));
        let edits = json!({"edits": [
            {"old_string": "a", "new_string": "b\n"},
            {"old_string": "c\nd", "new_string": "e"},
        ]});
        assert_eq!(edited_lines("Edit", &edits), (3, 3));
        assert_eq!(
            edited_lines("NotebookEdit", &json!({"new_source": "x"})),
            (1, 0)
        );
        assert_eq!(edited_lines("Write", &json!({})), (0, 0));
    }
}
