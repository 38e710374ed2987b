//! [`Memory`]: `AGENTS.md` files in the system prompt, as memory that persists across
//! conversations.
//!
//! # Example
//!
//! ```
//! use tower_agent::{Agent, builtins::memory::Memory, model::{ModelResponse, ScriptedModel}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("AGENTS.md"), "- The tests run with `cargo test`.\n")?;
//!
//! let agent = Agent::builder()
//!     .model(ScriptedModel::from_fn(|req| {
//!         Ok(ModelResponse::text(req.system().unwrap().text().into_owned()))
//!     }))
//!     .cwd(dir.path())
//!     // Relative paths are taken from the run's working directory; missing files are skipped.
//!     .stage(Memory::new(["AGENTS.md", "docs/AGENTS.md"]))
//!     .build();
//!
//! let system = agent.run("How do I run the tests?").await?.text;
//! assert!(system.starts_with(
//!     "<agent_memory>\n- The tests run with `cargo test`.\n</agent_memory>\n\n\
//!      Guidelines for agent memory:\n"
//! ));
//! # Ok(())
//! # }
//! ```
//!
//! # Loading (setup)
//!
//! At the start of every run the files are loaded (from the local file system; relative paths
//! from the run's [`cwd`](crate::context::RunContext::cwd)). A file is read (on tokio's
//! blocking pool) only when it changed since the stage last read it: each run checks its
//! status (`stat`: device, inode, size, modification and status-change times) and reuses
//! the bytes read before when none changed. A file changed less than 2 s before it was read
//! is read again at the next run (an edit within its timestamp tick could leave its status
//! as it was). The stage keeps at most 256 files (each at most [`MAX_MEMORY_FILE`]). A missing
//! file is skipped silently; a file that cannot be read, is not a regular file (a FIFO is
//! refused without blocking), is larger than [`MAX_MEMORY_FILE`] (1 MiB) or is not UTF-8 is
//! skipped with a
//! `tracing` warning and an [`AgentEvent::Warning`](crate::agent::AgentEvent::Warning); an empty file is skipped. The contents
//! (blank lines around them trimmed) are joined with [`SEPARATOR`].
//!
//! The files are loaded as the session starts ([`Setup::at_session_start`]): after the run's
//! SessionStart hooks and before its UserPromptSubmit hooks, as Claude Code loads its
//! instructions. Each file loaded fires the agent's InstructionsLoaded hooks
//! ([`on_instructions_loaded`](crate::layers::hooks::Hooks::on_instructions_loaded)) with its
//! absolute `file_path`, `memory_type` `Project` (a file under the run's working directory)
//! or `User` (elsewhere), and `load_reason` `session_start`; they observe only (their answers
//! change nothing), and command hooks among them have ended before UserPromptSubmit fires.
//!
//! Since they are checked at every run, edits the agent makes to its memory (e.g. with
//! `edit_file`) show in the next run.
//!
//! # Injection (prepare)
//!
//! Before every model call, unless no memory was loaded, this is appended to the system
//! message — or, with [`in_user_message`](Memory::in_user_message), put in a user message
//! before the conversation, where Claude Code puts `CLAUDE.md` — (the
//! [guidelines](Memory::guidelines) are configurable):
//!
//! ```text
//! <agent_memory>
//! [content]
//! </agent_memory>
//!
//! Guidelines for agent memory:
//! - This memory persists across conversations
//! - You can update it by using edit_file on the AGENTS.md file
//! - Use it to track important context, decisions, and patterns
//! - Keep entries concise and organized
//! ```
//!
//! The text is formatted once, in setup: the prepare stage does no IO and no formatting.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use futures_util::future::BoxFuture;

use crate::{
    agent::{Prepare, Setup, SetupContext},
    context::InstanceId,
    context::RunContext,
    error::BoxError,
    message::{Message, Role},
    model::ModelRequest,
};

/// What separates the contents of two memory files.
pub const SEPARATOR: &str = "\n\n---\n\n";

/// The largest memory file read (1 MiB); a larger one is skipped with a warning.
pub const MAX_MEMORY_FILE: u64 = 1 << 20;

/// The default guidelines that follow the memory.
pub const DEFAULT_GUIDELINES: &str = "Guidelines for agent memory:
- This memory persists across conversations
- You can update it by using edit_file on the AGENTS.md file
- Use it to track important context, decisions, and patterns
- Keep entries concise and organized";

/// The memory stage: a [`Setup`] that reads `AGENTS.md` files and a [`Prepare`] that puts
/// them in the system prompt. Add it with
/// [`AgentBuilder::stage`](crate::agent::AgentBuilder::stage).
///
/// See the [module docs](crate::builtins::memory).
///
/// # Clone
///
/// Clones share their per-run data (the setup of one clone feeds the prepare of another, as
/// `stage` needs); each configuration method gives the stage a new identity, so differently
/// configured stages on one agent don't see each other's memory.
#[derive(Clone)]
#[must_use]
pub struct Memory {
    id: InstanceId,
    paths: Arc<[PathBuf]>,
    guidelines: Option<Arc<str>>,
    /// The block goes in a user message opening the conversation, not the system prompt.
    in_user_message: bool,
    /// The files as last read, shared by clones.
    cache: Arc<tower_agent_os::bounded::FileCache>,
}

impl Memory {
    /// Memory read from the files `paths` (typically `AGENTS.md` files), in order.
    pub fn new<I>(paths: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<PathBuf>,
    {
        Memory {
            id: InstanceId::new(),
            paths: paths.into_iter().map(Into::into).collect(),
            guidelines: Some(DEFAULT_GUIDELINES.into()),
            in_user_message: false,
            cache: Arc::default(),
        }
    }

    /// Puts the memory block in a user message that opens every model request's
    /// conversation (after the system message, before the first prompt), as Claude Code
    /// places `CLAUDE.md`, instead of the system prompt: the system prompt stays the same
    /// whatever the files say (one prompt cache for every project), and the model reads the
    /// memory as something it was told rather than as its instructions. Like the system
    /// prompt's block, the message is added to each request, not saved in the thread.
    ///
    /// ```
    /// use tower_agent::{Agent, builtins::memory::Memory, message::Role, model::{ModelResponse, ScriptedModel}};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join("CLAUDE.md"), "- Run the tests with make test.\n")?;
    ///
    /// let agent = Agent::builder()
    ///     .model(ScriptedModel::from_fn(|req| {
    ///         let first = req.messages.iter().find(|m| m.role != Role::System).unwrap();
    ///         Ok(ModelResponse::text(first.text().into_owned()))
    ///     }))
    ///     .cwd(dir.path())
    ///     .stage(Memory::new(["CLAUDE.md"]).without_guidelines().in_user_message())
    ///     .build();
    ///
    /// let first = agent.run("How do I run the tests?").await?.text;
    /// assert_eq!(first, "<agent_memory>\n- Run the tests with make test.\n</agent_memory>");
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_user_message(mut self) -> Self {
        self.in_user_message = true;
        self.id = InstanceId::new();
        self
    }

    /// The text after `</agent_memory>` (after a blank line); default
    /// [`DEFAULT_GUIDELINES`].
    pub fn guidelines(mut self, guidelines: impl Into<String>) -> Self {
        self.guidelines = Some(guidelines.into().into());
        self.id = InstanceId::new();
        self
    }

    /// No text after `</agent_memory>`.
    pub fn without_guidelines(mut self) -> Self {
        self.guidelines = None;
        self.id = InstanceId::new();
        self
    }

    /// The configured files.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The memory this stage loaded in the run of `ctx` (the files joined with
    /// [`SEPARATOR`]), or `None` if there was none or its setup has not run.
    pub fn loaded(&self, ctx: &RunContext) -> Option<Arc<str>> {
        ctx.with_data(|data| {
            data.get_for::<MemoryRun>(self.id)
                .and_then(|run| run.content.clone())
        })
    }

    /// Reads the files and joins what was found (warnings go to `ctx`); InstructionsLoaded
    /// hooks see each file loaded.
    async fn load(&self, ctx: &RunContext) -> Option<String> {
        let mut parts = Vec::new();
        let hooks = crate::agent::RunHooks::of(ctx);
        for path in self.paths.iter() {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                ctx.cwd().join(path)
            };
            if let Some(text) = read(ctx, &self.cache, &path).await {
                parts.push(text);
                if let Some(hooks) = &hooks {
                    let file_path = std::path::absolute(&path).unwrap_or(path);
                    let memory_type = if file_path.starts_with(ctx.cwd()) {
                        "Project"
                    } else {
                        "User"
                    };
                    let input = crate::agent::InstructionsInput::new(
                        file_path,
                        memory_type,
                        "session_start",
                    );
                    hooks.instructions_loaded(&input, ctx);
                }
            }
        }
        (!parts.is_empty()).then(|| parts.join(SEPARATOR))
    }

    fn injection(&self, content: &str) -> String {
        let mut text = format!("<agent_memory>\n{content}\n</agent_memory>");
        if let Some(guidelines) = self.guidelines.as_deref().filter(|g| !g.is_empty()) {
            text.push_str("\n\n");
            text.push_str(guidelines);
        }
        text
    }
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memory")
            .field("paths", &self.paths)
            .field("guidelines", &self.guidelines.is_some())
            .field("in_user_message", &self.in_user_message)
            .finish_non_exhaustive()
    }
}

impl Memory {
    /// Loads the files into the run's data, unless this run has loaded them already.
    async fn load_once(&self, ctx: &RunContext) {
        if ctx.with_data(|data| data.get_for::<MemoryRun>(self.id).is_some()) {
            return;
        }
        let content = self.load(ctx).await;
        let run = MemoryRun {
            injection: content.as_deref().map(|c| self.injection(c).into()),
            content: content.map(Into::into),
        };
        ctx.with_data(|data| data.insert_for(self.id, run));
    }
}

impl Setup for Memory {
    /// Loads the files if the session's start has not (see
    /// [`at_session_start`](Self::at_session_start)).
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.load_once(cx.ctx()).await;
            Ok(())
        })
    }

    /// Loads the files as the session starts, as Claude Code loads its instructions: after
    /// the SessionStart hooks, before UserPromptSubmit; the InstructionsLoaded hooks they
    /// fire have ended before UserPromptSubmit fires.
    fn at_session_start<'a>(&'a self, ctx: &'a RunContext) -> Option<BoxFuture<'a, ()>> {
        Some(Box::pin(self.load_once(ctx)))
    }
}

impl Prepare for Memory {
    /// Appends the memory block to the system message, or puts it in a user message before
    /// the conversation ([`in_user_message`](Memory::in_user_message)); nothing if no memory
    /// was loaded.
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError> {
        let injection = req.ctx.with_data(|data| {
            data.get_for::<MemoryRun>(self.id)
                .and_then(|run| run.injection.clone())
        });
        match injection {
            None => {}
            Some(text) if self.in_user_message => {
                let at = req
                    .messages
                    .iter()
                    .take_while(|m| m.role == Role::System)
                    .count();
                req.messages.insert(at, Message::user(&*text));
            }
            Some(text) => req.append_system(&text),
        }
        Ok(())
    }
}

/// The per-run data of a [`Memory`] stage.
struct MemoryRun {
    content: Option<Arc<str>>,
    injection: Option<Arc<str>>,
}

/// The trimmed text of the memory file at `path`, if there is any.
async fn read(
    ctx: &RunContext,
    cache: &tower_agent_os::bounded::FileCache,
    path: &Path,
) -> Option<String> {
    let bytes = match cache.read(path, MAX_MEMORY_FILE).await {
        Ok(bytes) => bytes,
        Err(tower_agent_os::bounded::ReadError::NotFound) => {
            tracing::debug!(path = %path.display(), "memory file does not exist");
            return None;
        }
        Err(err) => {
            ctx.warn(format!("memory: skipped {}: {err}", path.display()));
            return None;
        }
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        ctx.warn(format!(
            "memory: skipped {}: not valid UTF-8",
            path.display()
        ));
        return None;
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.trim_end().trim_start_matches(['\n', '\r']);
    // A file of blanks only: leading spaces of its last line would survive.
    let text = if text.trim().is_empty() { "" } else { text };
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injection_without_guidelines() {
        let m = Memory::new(["a"]).without_guidelines();
        assert_eq!(m.injection("x"), "<agent_memory>\nx\n</agent_memory>");
        let m = Memory::new(["a"]).guidelines("Keep it short.");
        assert_eq!(
            m.injection("x"),
            "<agent_memory>\nx\n</agent_memory>\n\nKeep it short."
        );
    }

    #[test]
    fn configuring_changes_identity() {
        let a = Memory::new(["a"]);
        let b = a.clone();
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, b.without_guidelines().id);
    }
}
