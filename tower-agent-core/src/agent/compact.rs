//! Manual compaction: [`Agent::compact`](super::Agent::compact) replaces a thread's history by
//! a summary the agent's model writes, now, as Claude Code's `/compact [instructions]` does.
//!
//! ```text
//! Agent::compact(CompactRequest)
//!  ├─ load the thread                     (none, nothing to compact, calls waiting: an error)
//!  ├─ PreCompact hooks, trigger `manual`  (a block leaves the thread as it is)
//!  ├─ the model: the history + a request for a summary (the instructions appended), no tools
//!  ├─ the history after the system message → one user message holding the summary
//!  ├─ SessionStart hooks, source `compact` (their contexts follow the summary)
//!  ├─ PostCompact hooks, trigger `manual`, `compact_summary` the model's answer
//!  └─ save the thread
//! ```
//!
//! The model is the agent's model stack under its hooks: your model layers (retries, limits)
//! apply, the hooks' model layer does not (no MessageDisplay or model hooks for the summary).
//! The hooks see a context of their own, on the thread's session, with a fresh run id (command
//! hooks' `prompt_id`: Claude Code gives `/compact` a prompt id of its own). It is not a run:
//! no SessionStart (`startup`, `resume`), UserPromptSubmit, Stop or SessionEnd hooks, no
//! [`AgentEvent`](super::AgentEvent)s.
//!
//! ```
//! use tower_agent_core::{
//!     Agent, AgentRequest,
//!     agent::CompactRequest,
//!     message::Role,
//!     model::ScriptedModel,
//!     store::MemoryStore,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let model = ScriptedModel::new()
//!     .text("Paris.")
//!     .text("<summary>The user asked for the capital of France: Paris.</summary>")
//!     .text("About 2 million.");
//! let agent = Agent::builder()
//!     .model(model)
//!     .system_prompt("You are kind.")
//!     .store(MemoryStore::new())
//!     .build();
//! agent.run(AgentRequest::new("Capital of France?").thread("t")).await?;
//!
//! let done = agent.compact(CompactRequest::new("t").instructions("Keep the city.")).await?;
//! assert_eq!(done.replaced, 2); // the prompt and the answer
//! // The system message, then one user message holding the summary.
//! assert_eq!(done.messages.len(), 2);
//! assert_eq!(done.messages[1].role, Role::User);
//! assert!(done.messages[1].text().contains("capital of France: Paris."));
//!
//! // The next run goes on from the summary.
//! let resp = agent.run(AgentRequest::new("How many live there?").thread("t")).await?;
//! assert_eq!(resp.text, "About 2 million.");
//! # Ok(())
//! # }
//! ```

use std::{path::PathBuf, sync::Arc};

use tower::ServiceExt;

use super::{Inner, PostCompactInput, PreCompactInput, run};
use crate::{
    context::RunContext,
    error::Error,
    message::{Message, Messages, Role, Usage},
    model::ModelRequest,
};

/// A compaction of a thread the caller asks for: see [`Agent::compact`](super::Agent::compact).
#[derive(Debug, Clone)]
#[must_use]
pub struct CompactRequest {
    thread_id: String,
    instructions: Option<String>,
    cwd: Option<PathBuf>,
}

impl CompactRequest {
    /// A compaction of the thread `id`, with no instructions.
    pub fn new(id: impl Into<String>) -> Self {
        CompactRequest {
            thread_id: id.into(),
            instructions: None,
            cwd: None,
        }
    }

    /// This compaction with instructions for the summary (Claude Code: the text after
    /// `/compact`): they are appended to the model's request and given to PreCompact hooks
    /// (`custom_instructions`). Empty instructions are none.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.instructions = (!text.trim().is_empty()).then_some(text);
        self
    }

    /// This compaction with a working directory (the hooks' `cwd`), as a run's
    /// [`AgentRequest::cwd`](super::AgentRequest::cwd); else the agent's.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The thread it compacts.
    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }
}

/// What a compaction did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompactResponse {
    /// The thread.
    pub thread_id: String,
    /// The model's summary (PostCompact's `compact_summary`); `None` when a PreCompact hook
    /// blocked the compaction.
    pub summary: Option<String>,
    /// The reason of the PreCompact hook that blocked the compaction, if one did.
    pub blocked: Option<String>,
    /// How many messages the summary replaced (0 when blocked).
    pub replaced: usize,
    /// The thread's messages after the compaction.
    pub messages: Messages,
    /// The tokens of the summary's model call.
    pub usage: Usage,
}

/// The request for a summary, after the conversation (the crate's own words; Claude Code's are
/// its own).
const SUMMARY_PROMPT: &str = "Summarize this conversation so far, so that it can go on from \
     the summary alone. Keep the user's requests and intent, the decisions made and why, the \
     files, code and commands involved, the errors met and how they were fixed, what is done, \
     what is pending, and the current work. Answer with text only, do not call tools; put the \
     summary between <summary> and </summary>.";

/// The text of the summary's request: [`SUMMARY_PROMPT`] and the caller's instructions.
fn summary_prompt(instructions: Option<&str>) -> String {
    match instructions {
        Some(more) => format!("{SUMMARY_PROMPT}\n\nAdditional instructions:\n{more}"),
        None => SUMMARY_PROMPT.to_owned(),
    }
}

/// The user message that replaces the history: the summary (between `<summary>` tags when the
/// model used them, its `<analysis>` left out), introduced.
fn continuation(answer: &str) -> Message {
    let inside = answer
        .split_once("<summary>")
        .map(|(_, rest)| rest.split_once("</summary>").map_or(rest, |(s, _)| s));
    let summary = match inside {
        Some(summary) => summary.trim().to_owned(),
        None => match (answer.find("<analysis>"), answer.find("</analysis>")) {
            (Some(a), Some(b)) if a < b => {
                format!("{}{}", &answer[..a], &answer[b + "</analysis>".len()..])
                    .trim()
                    .to_owned()
            }
            _ => answer.trim().to_owned(),
        },
    };
    Message::user(format!(
        "This conversation goes on from an earlier part, summarized here:\n\n{summary}"
    ))
}

/// [`Agent::compact`](super::Agent::compact).
pub(super) async fn compact(
    inner: Arc<Inner>,
    req: CompactRequest,
) -> Result<CompactResponse, Error> {
    let CompactRequest {
        thread_id,
        instructions,
        cwd,
    } = req;
    let loaded = inner.store.load(&thread_id).await.map_err(Error::store)?;
    let mut thread =
        loaded.ok_or_else(|| Error::compact(format!("no thread {thread_id:?} in the store")))?;
    if !thread.pending.is_empty() || !thread.approved.is_empty() {
        return Err(Error::compact(format!(
            "the thread {thread_id:?} has calls waiting for a decision: answer them first"
        )));
    }
    let start = usize::from(
        thread
            .messages
            .first()
            .is_some_and(|m| m.role == Role::System),
    );
    if thread.messages.len() <= start {
        return Err(Error::compact(format!(
            "the thread {thread_id:?} has nothing to compact"
        )));
    }
    let ctx = run::context(
        &inner,
        RunContext::builder(),
        Some(thread_id.clone()),
        cwd,
        None,
        None,
    );
    let mut response = CompactResponse {
        thread_id,
        summary: None,
        blocked: None,
        replaced: 0,
        messages: Messages::new(),
        usage: Usage::default(),
    };
    if let Some(hooks) = &inner.hooks {
        let input = PreCompactInput::manual(instructions.clone());
        if let Err(reason) = hooks.pre_compact(input, &ctx).await {
            response.blocked = Some(reason);
            response.messages = thread.messages;
            return Ok(response);
        }
    }
    let (answer, usage) =
        summarize(&inner, &thread.messages, instructions.as_deref(), &ctx).await?;
    let mut replacement = vec![continuation(&answer)];
    if let Some(hooks) = &inner.hooks {
        let input = PostCompactInput {
            trigger: "manual",
            compact_summary: answer.clone(),
        };
        let contexts = hooks
            .compacted(
                input,
                inner.settings.model.as_deref().map(str::to_owned),
                &ctx,
            )
            .await;
        if !contexts.is_empty() {
            replacement.push(Message::hook_context(&contexts));
        }
    }
    response.replaced = thread.messages.len() - start;
    if let Some(transcript) = ctx.transcript() {
        transcript.append(replacement.iter());
    }
    let end = thread.messages.len();
    thread.messages.splice(start..end, replacement);
    inner.store.save(&thread).await.map_err(Error::store)?;
    response.summary = Some(answer);
    response.messages = thread.messages;
    response.usage = usage;
    Ok(response)
}

/// The model's summary of `history` (its whole answer) and the call's usage.
async fn summarize(
    inner: &Inner,
    history: &Messages,
    instructions: Option<&str>,
    ctx: &RunContext,
) -> Result<(String, Usage), Error> {
    let mut messages = history.clone();
    messages.push(Message::user(summary_prompt(instructions)));
    let request = ModelRequest {
        messages,
        tools: Arc::default(),
        settings: inner.settings.free_text(),
        ctx: ctx.clone(),
        extensions: http::Extensions::new(),
    };
    let resp = inner
        .summarizer
        .clone()
        .oneshot(request)
        .await
        .map_err(Error::compact)?;
    let resp = resp.collect().await.map_err(Error::compact)?;
    let answer = resp.message.text().into_owned();
    if answer.trim().is_empty() {
        return Err(Error::compact("the model answered with no summary"));
    }
    Ok((answer, resp.usage.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_continuation_holds_the_summary_without_the_analysis() {
        let text = |a: &str| continuation(a).text().into_owned();
        let tagged = "<analysis>\nthinking\n</analysis>\n\n<summary>\nS1\n</summary>";
        assert!(text(tagged).ends_with("\n\nS1"));
        assert!(!text(tagged).contains("thinking"));
        assert!(text("<analysis>x</analysis> plain").ends_with("\n\nplain"));
        assert!(text("just text").ends_with("\n\njust text"));
        assert!(text("<summary>open").ends_with("\n\nopen"));
    }

    #[test]
    fn instructions_follow_the_request_and_empty_ones_are_none() {
        assert!(
            summary_prompt(Some("Keep the plan."))
                .ends_with("\n\nAdditional instructions:\nKeep the plan.")
        );
        assert_eq!(summary_prompt(None), SUMMARY_PROMPT);
        assert_eq!(
            CompactRequest::new("t").instructions("  ").instructions,
            None
        );
    }
}
