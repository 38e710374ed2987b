//! Claude Code's tools — `Bash`, `Read`, `Write`, `Edit`, `Glob`, `Grep` — under Claude Code's
//! names, with its input schemas, answering the model with the text Claude Code gives and
//! hooks with the `tool_response` Claude Code gives, over a filesystem
//! [`Backend`].
//!
//! So a command hook (`tower_agent::command`) written for Claude Code — matching `Bash` and reading
//! `tool_response.stdout`, matching `Write|Edit` and reading `tool_input.file_path` — works on
//! the crate's own tools. The shapes are measured against Claude Code 2.1.328 by the
//! differential suite (`tests/reference`, vectors `tool_*`).
//!
//! # Example
//!
//! A scripted model writes a file, then runs a command on it; the tools answer the model with
//! Claude Code's text, and hooks with Claude Code's `tool_response` (the output's metadata
//! under [`TOOL_RESPONSE`], what a PostToolUse hook of `tower_agent::layers::hooks::Hooks` or
//! a command hook reads):
//!
//! ```
//! use serde_json::json;
//! use tower::{Service, ServiceExt};
//! use tower_agent_builtins::claude_code::ClaudeCode;
//! use tower_agent_core::{
//!     Agent,
//!     context::RunContext,
//!     message::{TOOL_RESPONSE, ToolCall},
//!     model::ScriptedModel,
//!     tool::ToolRequest,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let dir = tempfile::tempdir()?;
//! let file = dir.path().join("notes.txt");
//! let model = ScriptedModel::new()
//!     .tool_call("Write", json!({ "file_path": file, "content": "buy milk\n" }))
//!     .text("Written.")
//!     .recording();
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .setup(ClaudeCode::local(dir.path()))
//!     .cwd(dir.path())
//!     .build();
//! agent.run("Note that I need milk.").await?;
//! assert_eq!(std::fs::read_to_string(&file)?, "buy milk\n");
//! // The model saw what Claude Code's tools say.
//! let said = model.requests()[1].messages.last().unwrap().text().into_owned();
//! assert!(said.starts_with("File created successfully at: "));
//!
//! // The tools called directly, as the agent calls them: `Bash` answers hooks with
//! // Claude Code's `{stdout, stderr, …}`.
//! let mut tools = ClaudeCode::local(dir.path()).tools();
//! let ctx = RunContext::builder().cwd(dir.path()).build();
//! let call = ToolCall::new("c1", "Bash", json!({ "command": "wc -l < notes.txt" }));
//! let output = tools.ready().await?.call(ToolRequest::new(call, ctx)).await?;
//! assert_eq!(output.metadata[TOOL_RESPONSE]["stdout"], "1");
//! # Ok(())
//! # }
//! ```
//!
//! # The tools
//!
//! | Tool | Input | The model gets | `tool_response` (hooks) |
//! |---|---|---|---|
//! | `Bash` | `command`, `timeout?` (ms), `description?` | the output, trimmed; `(Bash completed with no output)`; on failure `Exit code N` and the output (an error) | `{stdout, stderr: "", interrupted, isImage, noOutputExpected}` |
//! | `Read` | `file_path`, `offset?` (1-based line), `limit?` | `N\tline` lines; a reminder for an empty file or an offset past the end | `{type: "text", file: {filePath, content, numLines, startLine, totalLines}}` |
//! | `Write` | `file_path`, `content` | `File created successfully at: …` / `The file … has been updated successfully.` | `{type: "create" \| "update", filePath, content, structuredPatch, originalFile, userModified}` |
//! | `Edit` | `file_path`, `old_string`, `new_string`, `replace_all?` | `The file … has been updated successfully.`; refusals in `<tool_use_error>` | `{filePath, oldString, newString, originalFile, structuredPatch, userModified, replaceAll}` (+ `contentNotInModelContext` for a file not read) |
//! | `Glob` | `pattern`, `path?` | paths, oldest first; `No files found` | `{filenames, durationMs, numFiles, truncated, totalMatches, countIsComplete}` |
//! | `Grep` | `pattern`, `path?`, `glob?`, `output_mode?`, `-i?`, `-n?`, `head_limit?`, `offset?` | `Found N files` and paths (newest first); `path:line:text`; `path:count` and a total | `{mode, filenames, numFiles, …}` per mode |
//!
//! Paths: `file_path` and `path` are absolute, as Claude Code asks, or relative to the run's
//! working directory ([`RunContext::cwd`]); paths shown are relative to it when under it.
//!
//! **Checked before the hooks.** As Claude Code does, the tools check their input before the
//! PreToolUse hooks ([`Tool::check`]): `Edit` refuses an `old_string` not found, or found more
//! than once without `replace_all`, one equal to `new_string`, a missing file (unless
//! `old_string` is empty: a new file), a file already there for an empty `old_string`, and a
//! file too large — a refused call fires no hook, the model gets the refusal as the call's
//! result. Hooks see the input as Claude Code shows it: `Edit`'s `replace_all: false` filled
//! in, and for `Read`, `Write` and `Edit` a `file_path` made absolute (against the run's
//! working directory, `.` and `..` gone; an [`ObservableInput`]) — the tool runs on the path
//! as the model gave it, as Claude Code's do, unless a hook rewrote it. The call checks again
//! (the file may change in between).
//! Everything goes through the backend, so a path outside its root is refused (the error
//! says so). `Write` and `Edit` record the files they write ([`files_written`]).
//!
//! **The session's directory.** `Bash` runs its command (`sh -c`, through
//! [`Backend::exec`]) in the run's working directory, and keeps where it ended: a `cd` moves
//! the run ([`RunContext::set_cwd`]), so the next command, the other tools' relative paths
//! and later hooks are in the new directory, and the agent's hooks fire CwdChanged at the end
//! of the step, as in Claude Code.
//!
//! # Caps
//!
//! - `Bash`: the output is at most 30,000 characters ([`max_output`](ClaudeCode::max_output);
//!   the middle of a longer one is cut out); a command is killed, with everything it started,
//!   after 120 s ([`bash_timeout`](ClaudeCode::bash_timeout)), or its `timeout`, at most
//!   600 s ([`max_bash_timeout`](ClaudeCode::max_bash_timeout)).
//! - `Read`: at most 2,000 lines a call ([`read_limit`](ClaudeCode::read_limit)), each cut at
//!   2,000 characters while reading, so a call holds at most 2,000 × 2,000 characters whatever
//!   the file.
//! - `Write` and `Edit`: the previous content is read (for `originalFile` and the patch) when
//!   the file has at most 32 MiB ([`max_edit_bytes`](ClaudeCode::max_edit_bytes)); `Edit`
//!   refuses a larger file. The patch is a line diff (a longest common subsequence) when the
//!   changed middle of the file is at most 4,000,000 line pairs, else one replacement.
//! - `Glob`: at most 100 paths ([`glob_limit`](ClaudeCode::glob_limit)), then a note that
//!   the results are truncated.
//! - `Grep`: at most 250 entries unless `head_limit` says otherwise
//!   ([`grep_limit`](ClaudeCode::grep_limit)); the search stops after 10,000 matching lines
//!   ([`grep_cap`](ClaudeCode::grep_cap)), keeping 501 characters of each (a line longer
//!   than 500 is shown as `[Omitted long matching line]`).
//!
//! # What differs from Claude Code
//!
//! - `Bash` runs `sh -c` (the backend's shell), not the user's shell, and does not run
//!   commands in the background (`run_in_background` is not offered).
//! - `Read` reads UTF-8 text only (no images, PDFs or notebooks).
//! - `Grep` offers no context lines (`-A`, `-B`, `-C`), `type` or `multiline`; its pattern is
//!   a Rust `regex`, close to ripgrep's.
//! - Files are found by modification time as the backend reports it
//!   ([`Backend::stat`]); a backend that does not, lists them by path.
//!
//! [`files_written`]: crate::filesystem::files_written
//! [`Backend::exec`]: crate::filesystem::Backend::exec
//! [`Backend::stat`]: crate::filesystem::Backend::stat
//! [`RunContext::cwd`]: tower_agent_core::context::RunContext::cwd
//! [`RunContext::set_cwd`]: tower_agent_core::context::RunContext::set_cwd
//! [`Tool::check`]: tower_agent_core::tool::Tool::check
//! [`ObservableInput`]: tower_agent_core::tool::ObservableInput

mod agent;
mod bash;
mod diff;
mod files;
mod paths;
mod search;

use std::{fmt, path::PathBuf, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;

pub use self::agent::{AgentTool, GENERAL_PURPOSE};
use self::paths::Paths;
use crate::filesystem::{Backend, LocalFs, Registry};
use tower_agent_core::{
    agent::{Setup, SetupContext},
    error::BoxError,
    // The metadata key of what hooks get as `tool_response` (`tower_agent::command` reads it).
    message::TOOL_RESPONSE,
    tool::ToolRouter,
};

/// The settings of the tools (see the setters of [`ClaudeCode`]).
#[derive(Debug, Clone)]
struct Config {
    bash: bool,
    bash_timeout: Duration,
    max_bash_timeout: Duration,
    max_output: usize,
    read_limit: usize,
    max_line_chars: usize,
    max_edit_bytes: u64,
    glob_limit: usize,
    grep_limit: usize,
    grep_cap: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bash: true,
            bash_timeout: Duration::from_secs(120),
            max_bash_timeout: Duration::from_secs(600),
            max_output: 30_000,
            read_limit: 2_000,
            max_line_chars: 2_000,
            max_edit_bytes: 32 * 1024 * 1024,
            glob_limit: 100,
            grep_limit: 250,
            grep_cap: 10_000,
        }
    }
}

/// What every tool shares: the backend, where its root is, the settings.
struct Shared {
    backend: Arc<dyn Backend>,
    paths: Paths,
    config: Config,
}

/// A [`Setup`] stage that registers Claude Code's tools over a [`Backend`].
///
/// See the [module docs](crate::claude_code).
///
/// # Clone
///
/// Clones share the backend.
#[derive(Clone)]
pub struct ClaudeCode {
    backend: Arc<dyn Backend>,
    root: PathBuf,
    config: Config,
}

impl ClaudeCode {
    /// The tools over `backend`, whose root is the directory `root` in the paths the run sees
    /// (its working directory, the absolute paths the model gives): `root/src/main.rs` is
    /// the backend's `src/main.rs`.
    pub fn new<B: Backend>(backend: B, root: impl Into<PathBuf>) -> Self {
        ClaudeCode {
            backend: Arc::new(backend),
            root: root.into(),
            config: Config::default(),
        }
    }

    /// The tools over the local directory `root` (a [`LocalFs`]): they read, write and search
    /// under it only, and run commands (which can go anywhere) starting in it.
    pub fn local(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self::new(LocalFs::new(&root), root)
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Leaves out the `Bash` tool.
    #[must_use]
    pub fn without_bash(mut self) -> Self {
        self.config.bash = false;
        self
    }

    /// How long a command may run when the call gives no `timeout` (default 120 s).
    #[must_use]
    pub fn bash_timeout(mut self, timeout: Duration) -> Self {
        self.config.bash_timeout = timeout;
        self
    }

    /// The longest `timeout` a call may ask for (default 600 s); longer ones are cut to it.
    #[must_use]
    pub fn max_bash_timeout(mut self, timeout: Duration) -> Self {
        self.config.max_bash_timeout = timeout;
        self
    }

    /// At most this many characters of a command's output (default 30,000): the first and
    /// last halves, with `... (truncated N characters) ...` between.
    #[must_use]
    pub fn max_output(mut self, chars: usize) -> Self {
        self.config.max_output = chars;
        self
    }

    /// How many lines `Read` returns at most, and when the call gives no `limit` (default
    /// 2,000).
    #[must_use]
    pub fn read_limit(mut self, lines: usize) -> Self {
        self.config.read_limit = lines;
        self
    }

    /// The largest file whose previous content `Write` and `Edit` read, and that `Edit`
    /// edits, in bytes (default 32 MiB).
    #[must_use]
    pub fn max_edit_bytes(mut self, bytes: u64) -> Self {
        self.config.max_edit_bytes = bytes;
        self
    }

    /// How many paths `Glob` returns at most (default 100).
    #[must_use]
    pub fn glob_limit(mut self, paths: usize) -> Self {
        self.config.glob_limit = paths;
        self
    }

    /// How many entries `Grep` shows when the call gives no `head_limit` (default 250).
    #[must_use]
    pub fn grep_limit(mut self, entries: usize) -> Self {
        self.config.grep_limit = entries;
        self
    }

    /// After how many matching lines `Grep` stops searching (default 10,000): the bound of
    /// its memory, and of what its counts and file lists can say.
    #[must_use]
    pub fn grep_cap(mut self, lines: usize) -> Self {
        self.config.grep_cap = lines;
        self
    }

    /// The tools as a router, to register them without the setup stage (e.g. with
    /// [`AgentBuilder::tools`](tower_agent_core::agent::AgentBuilder::tools), or to call them directly).
    pub fn tools(&self) -> ToolRouter {
        let mut router = ToolRouter::new();
        self.register(&mut router);
        router
    }

    fn register(&self, registry: &mut impl Registry) {
        let shared = Arc::new(Shared {
            backend: Arc::clone(&self.backend),
            paths: Paths::new(self.root.clone()),
            config: self.config.clone(),
        });
        if self.config.bash {
            registry.add(bash::bash(Arc::clone(&shared)));
        }
        registry.add(files::read(Arc::clone(&shared)));
        registry.add(files::write(Arc::clone(&shared)));
        registry.add(files::edit(Arc::clone(&shared)));
        registry.add(search::glob(Arc::clone(&shared)));
        registry.add(search::grep(shared));
    }
}

impl Setup for ClaudeCode {
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        self.register(&mut &cx);
        Box::pin(async { Ok(()) })
    }
}

impl fmt::Debug for ClaudeCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaudeCode")
            .field("backend", &self.backend)
            .field("root", &self.root)
            .field("config", &self.config)
            .finish()
    }
}

#[cfg(test)]
mod tests;
