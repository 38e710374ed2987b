//! File tools for the model: `ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep` and
//! `execute`, over a [`Backend`] confined to a root directory.
//!
//! # Example
//!
//! A scripted model writes a file, then reads it back:
//!
//! ```
//! use serde_json::json;
//! use tower_agent_builtins::filesystem::Filesystem;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let model = ScriptedModel::new()
//!     .tool_call("write_file", json!({ "path": "notes/todo.md", "content": "- buy milk\n" }))
//!     .tool_call("read_file", json!({ "path": "notes/todo.md" }))
//!     .text("Your list says: buy milk.")
//!     .recording();
//!
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .setup(Filesystem::local(dir.path()))
//!     .build();
//! let resp = agent.run("What is on my list?").await?;
//! assert_eq!(resp.text, "Your list says: buy milk.");
//!
//! // The file is on disk, and the model saw it with line numbers, `cat -n` style.
//! assert_eq!(std::fs::read_to_string(dir.path().join("notes/todo.md"))?, "- buy milk\n");
//! let seen = model.requests()[2].messages.last().unwrap().text().into_owned();
//! assert_eq!(seen, "     1\t- buy milk\n");
//! # Ok(())
//! # }
//! ```
//!
//! # The tools
//!
//! | Tool | Arguments | Output |
//! |---|---|---|
//! | `ls` | `path?` | JSON array of `{"name", "type": "file" \| "dir" \| "symlink" \| "other", "size"}` |
//! | `read_file` | `path`, `offset?` (1-based line), `limit?` (lines, default 2,000) | the lines, numbered like `cat -n`, and `(lines a-b of n; read on with offset b+1)` when partial |
//! | `write_file` | `path`, `content` | creates parent directories; replaces the whole file |
//! | `edit_file` | `path`, `old_text`, `new_text` | replaces the first exact occurrence of `old_text` |
//! | `glob` | `pattern` (relative to the root) | matching paths, one a line, sorted (at most 1,000) |
//! | `grep` | `pattern` (regex), `path?`, `include?` (file-name glob), `case_insensitive?` | `path:line: text` lines (at most 200) |
//! | `execute` | `command`, `timeout?` (seconds) | merged stdout and stderr (at most 30,000 characters) and `[exit code: n]` |
//!
//! Failures the model can fix — a missing file, a path outside the root, an `old_text` that
//! does not occur, an invalid regex, a command timing out — are error
//! [`ToolOutput`](tower_agent_core::message::ToolOutput)s saying what went wrong (the
//! [`FsError`] message, and a hint), never a failed run. A command that runs and fails is not
//! an error output: its exit code is in the output (and in the output's `exit_code`
//! metadata).
//!
//! Files written or edited are recorded in the run's data ([`files_written`], path relative to
//! the root → content), so they are saved with the thread.
//!
//! # Text, binary and large files
//!
//! `read_file` and `edit_file` handle UTF-8 text only: a file that is not valid UTF-8
//! (anywhere) is refused with a clear error, `` `data.bin` is not valid UTF-8 text (line 3) ``,
//! rather than shown as lossy text the model might then write back. `grep` skips binary
//! files and decodes lines lossily.
//!
//! `read_file` streams the file and returns at most [`read_limit`](Filesystem::read_limit)
//! lines (2,000) from `offset`, each cut at 2,000 characters, so a large file is read in parts.
//!
//! # Guarantees and caps
//!
//! Files in the root are outside input; over a [`LocalFs`]:
//!
//! - **Confinement without races.** A path that leads out of the root (`..`, an absolute
//!   path elsewhere, a symlink) is refused, and the error does not say where a symlink leads.
//!   Every file operation opens its path beneath a handle on the root directory, so a process
//!   that swaps a directory for a symlink meanwhile makes the call fail instead of reaching
//!   outside.
//! - **No hangs on special files.** FIFOs, sockets and devices are refused by `read_file`,
//!   `write_file` and `edit_file` (`` `pipe` is a FIFO (named pipe), not a regular file ``)
//!   and skipped by `grep`, without ever blocking in `open`; `ls` shows them as `other`.
//! - **Bounded memory.** `read_file` cuts each line at 2,000 characters *while reading*: it
//!   keeps at most `limit` × 2,000 characters whatever the file's size (a 2 GiB file without a
//!   newline costs a few 64 KiB buffers, not 2 GiB). `grep` matches a line on its first 65,536
//!   characters (at most 256 KiB) and drops the rest as it reads, and shows at most 500
//!   characters of a matching line and 200 matches. `edit_file` edits files of at most
//!   32 MiB. `glob` shows at most 1,000 paths, `execute` at most 30,000 characters of output.
//! - **Every name can be used.** A file name that is not UTF-8 is shown with `\xHH` escapes
//!   (and `\` as `\\`), and paths given to the tools are read back the same way, so any name
//!   `ls`, `glob` or `grep` shows can be passed to `read_file`; see [`LocalFs`] for the exact
//!   rule.
//!
//! # Commands
//!
//! `execute` runs `sh -c <command>` in the root, in its own process group. It is killed —
//! with everything it started — when it outlives its timeout (default 120 s, per call up to
//! 600 s) or when the tool call is dropped (the run is cancelled, a timeout layer fires);
//! when it exits, whatever it left running is killed too, and its output is read for at most
//! 0.5 s more.
//!
//! Its environment is this process's, plus the variables the run's SessionStart hooks
//! exported through `CLAUDE_ENV_FILE` ([`SessionEnv`](tower_agent_core::agent::SessionEnv); see
//! command hooks, `tower_agent::command`).
//!
//! **What "everything it started" covers (no orphan processes).** On Linux, the first
//! supervised command (an `execute` call or a command hook, `tower_agent::command`) makes
//! this process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so that what a command orphans
//! (`setsid -f`, `nohup … &`, a double fork) is re-parented to this process rather than `init`.
//! Each command gets a unique `TOWER_AGENT_SCOPE` environment variable. When its call ends,
//! `/proc` is scanned and every process that belongs to the command is killed (`SIGKILL`): the
//! command and its descendants; members of its process group, or of a group or session one of
//! them leads; and any descendant of this process that carries the command's
//! `TOWER_AGENT_SCOPE` or holds the command's end of one of its stdio pipes — so
//! `setsid sh -c '…' &`, `setsid -f sleep 1000` and even `env -i setsid -f sleep 1000` are
//! found. The scan repeats until nothing of the command is alive (at most 50 rounds, 2 ms
//! apart); the orphans it adopted and killed are reaped (it never waits for a pid it did not
//! adopt, such as the command itself or a process the application spawned), and a pid is only
//! signalled if its start time still matches, so a reused pid is not hit. Not covered: a
//! process that drops every mark (clears its environment, starts a new session *and*
//! redirects all its inherited stdio, e.g. `env -i setsid -f cmd </dev/null >/dev/null 2>&1`)
//! keeps running once its parent has exited, and if it exits before this process it stays a
//! zombie child of this process. Being a subreaper also means that processes the application
//! itself orphans are re-parented to this process (the sweep does not touch them). On other
//! Unix systems only the process group is killed: a process that leaves it (`setsid`) is not
//! tracked. Use
//! [`without_execute`](Filesystem::without_execute) to offer the file tools only. See
//! [`LocalFs`] for the exact confinement rules.

mod backend;
mod local;
mod tools;

pub(crate) use tools::Registry;

use std::{collections::BTreeMap, fmt, path::PathBuf, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;

use self::tools::Config;
pub use self::{
    backend::{
        Backend, DirEntry, Edit, EntryKind, ExecOptions, ExecOutput, FileStat, FileText, FsError,
        FsErrorKind, GrepMatch, GrepMatches, GrepOptions, ReadRange,
    },
    local::LocalFs,
};
use tower_agent_core::{
    agent::{Setup, SetupContext},
    context::RunContext,
    error::BoxError,
    store::ThreadData,
    tool::ToolRouter,
};

/// A [`Setup`] stage that registers the file tools over a [`Backend`].
///
/// See the [module docs](crate::filesystem).
///
/// # Clone
///
/// Clones share the backend.
#[derive(Clone)]
pub struct Filesystem {
    backend: Arc<dyn Backend>,
    config: Config,
}

impl Filesystem {
    /// The tools over `backend` (an `Arc<dyn Backend>` is a backend too).
    pub fn new<B: Backend>(backend: B) -> Self {
        Filesystem {
            backend: Arc::new(backend),
            config: Config::default(),
        }
    }

    /// The tools over the local directory `root` (a [`LocalFs`]).
    pub fn local(root: impl Into<PathBuf>) -> Self {
        Self::new(LocalFs::new(root))
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Leaves out the `execute` tool.
    #[must_use]
    pub fn without_execute(mut self) -> Self {
        self.config.execute = false;
        self
    }

    /// How long a command may run when the call gives no `timeout` (default 120 s).
    #[must_use]
    pub fn exec_timeout(mut self, timeout: Duration) -> Self {
        self.config.exec_timeout = timeout;
        self
    }

    /// The longest `timeout` a call may ask for (default 600 s); longer ones are cut to it.
    #[must_use]
    pub fn max_exec_timeout(mut self, timeout: Duration) -> Self {
        self.config.max_exec_timeout = timeout;
        self
    }

    /// At most this many characters of a command's output are returned (default 30,000): the
    /// first and last halves, with `... (truncated N characters) ...` between.
    #[must_use]
    pub fn max_output(mut self, chars: usize) -> Self {
        self.config.max_output = chars;
        self
    }

    /// How many lines `read_file` returns when the call gives no `limit` (default 2,000).
    #[must_use]
    pub fn read_limit(mut self, lines: usize) -> Self {
        self.config.read_limit = lines;
        self
    }

    /// How many matching lines `grep` returns at most (default 200).
    #[must_use]
    pub fn grep_limit(mut self, matches: usize) -> Self {
        self.config.grep_limit = matches;
        self
    }

    /// How many paths `glob` returns at most (default 1,000).
    #[must_use]
    pub fn glob_limit(mut self, paths: usize) -> Self {
        self.config.glob_limit = paths;
        self
    }

    /// The tools as a router, to register them without the setup stage (e.g. with
    /// [`AgentBuilder::tools`](tower_agent_core::agent::AgentBuilder::tools), or to call them directly).
    pub fn tools(&self) -> ToolRouter {
        let mut router = ToolRouter::new();
        tools::register(&self.backend, &self.config, &mut router);
        router
    }
}

impl Setup for Filesystem {
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        tools::register(&self.backend, &self.config, &mut &cx);
        Box::pin(async { Ok(()) })
    }
}

impl fmt::Debug for Filesystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Filesystem")
            .field("backend", &self.backend)
            .field("execute", &self.config.execute)
            .field("exec_timeout", &self.config.exec_timeout)
            .field("max_exec_timeout", &self.config.max_exec_timeout)
            .field("max_output", &self.config.max_output)
            .field("read_limit", &self.config.read_limit)
            .field("grep_limit", &self.config.grep_limit)
            .field("glob_limit", &self.config.glob_limit)
            .finish()
    }
}

/// The files written or edited in a thread, as thread data: one key per file of a thread's
/// [`data`](tower_agent_core::store::Thread::data), [`FilesWritten::PREFIX`] followed by its path (relative
/// to the root), its content a JSON string — one key per file, so a step that edits one file
/// of many writes one row.
///
/// ```
/// use tower_agent_builtins::filesystem::FilesWritten;
/// use tower_agent_core::store::Thread;
///
/// let mut thread = Thread::new("t1");
/// FilesWritten::set(&mut thread.data, "notes/plan.md", "# Plan");
/// assert_eq!(&*FilesWritten::of(&thread.data)["notes/plan.md"], "# Plan");
/// assert_eq!(FilesWritten::paths(&thread.data).collect::<Vec<_>>(), ["notes/plan.md"]);
/// assert!(FilesWritten::remove(&mut thread.data, "notes/plan.md"));
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct FilesWritten;

impl FilesWritten {
    /// What every key of a file written starts with.
    pub const PREFIX: &'static str = "tower_agent.files/";

    /// The files in `data`: path → content (a value that is not a string is left out).
    pub fn of(data: &ThreadData) -> BTreeMap<String, Arc<str>> {
        data.with_prefix(Self::PREFIX)
            .filter_map(|(key, value)| {
                let content = value.as_str()?;
                Some((key[Self::PREFIX.len()..].to_owned(), Arc::from(content)))
            })
            .collect()
    }

    /// The paths of the files in `data`, in order (their contents are not copied).
    pub fn paths(data: &ThreadData) -> impl Iterator<Item = &str> {
        data.with_prefix(Self::PREFIX)
            .map(|(key, _)| &key[Self::PREFIX.len()..])
    }

    /// Sets the content of file `path` in `data` (only its key changes: a store writes that
    /// one).
    pub fn set(data: &mut ThreadData, path: &str, content: &str) {
        data.set_value(
            format!("{}{path}", Self::PREFIX),
            serde_json::Value::String(content.to_owned()),
        );
    }

    /// Removes file `path` from `data`; whether it was there.
    pub fn remove(data: &mut ThreadData, path: &str) -> bool {
        data.remove_value(&format!("{}{path}", Self::PREFIX))
            .is_some()
    }
}

/// The files written or edited in the run's thread: path (relative to the root) → content.
/// They are kept in the run's thread data ([`FilesWritten`]), restored from the thread and
/// saved with it.
pub fn files_written(ctx: &RunContext) -> BTreeMap<String, Arc<str>> {
    ctx.with_thread_data(|d| FilesWritten::of(d))
}

/// Records a file written or edited in the run (for a tool of your own that writes files):
/// it is saved with the thread (only this file's key is written), and read back by
/// [`files_written`].
pub fn record_file(ctx: &RunContext, path: String, content: Arc<str>) {
    ctx.with_thread_data(|d| FilesWritten::set(d, &path, &content));
}
