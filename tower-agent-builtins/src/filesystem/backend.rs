//! The [`Backend`] trait, its data types and its error, [`FsError`].

use std::{
    error::Error as StdError,
    fmt,
    sync::Arc,
    time::{Duration, SystemTime},
};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// Where the filesystem tools read, write and run commands: a directory tree confined to a
/// root, local ([`LocalFs`](super::LocalFs)) or elsewhere (a container, a remote machine).
///
/// Paths are strings as the model wrote them: relative to the backend's root, or absolute but
/// inside it. A backend must refuse any path that leads out of its root, with an error of
/// kind [`FsErrorKind::EscapesRoot`].
///
/// The trait is object safe and every method returns a boxed future, so a backend is usable
/// as `Arc<dyn Backend>`; `Arc<B>` is a backend too.
///
/// [`exec`](Self::exec) has a default implementation that fails with
/// [`FsErrorKind::Unsupported`], for backends that cannot run commands.
///
/// # Example
///
/// A backend that delegates to [`LocalFs`](super::LocalFs) and counts the files it writes:
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use futures_util::future::BoxFuture;
/// use tower_agent_builtins::filesystem::{
///     Backend, DirEntry, Edit, FileText, FsError, GrepMatches, GrepOptions, LocalFs, ReadRange,
/// };
///
/// #[derive(Debug)]
/// struct Counting { inner: LocalFs, writes: AtomicUsize }
///
/// impl Backend for Counting {
///     fn ls<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Vec<DirEntry>, FsError>> {
///         self.inner.ls(path)
///     }
///     fn read_file<'a>(&'a self, path: &'a str, range: ReadRange)
///         -> BoxFuture<'a, Result<FileText, FsError>> {
///         self.inner.read_file(path, range)
///     }
///     fn write_file<'a>(&'a self, path: &'a str, content: &'a str)
///         -> BoxFuture<'a, Result<String, FsError>> {
///         self.writes.fetch_add(1, Ordering::Relaxed);
///         self.inner.write_file(path, content)
///     }
///     fn edit_file<'a>(&'a self, path: &'a str, old_text: &'a str, new_text: &'a str)
///         -> BoxFuture<'a, Result<Edit, FsError>> {
///         self.inner.edit_file(path, old_text, new_text)
///     }
///     fn glob<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<String>, FsError>> {
///         self.inner.glob(pattern)
///     }
///     fn grep<'a>(&'a self, pattern: &'a str, options: GrepOptions)
///         -> BoxFuture<'a, Result<GrepMatches, FsError>> {
///         self.inner.grep(pattern, options)
///     }
///     // `exec` keeps its default: this backend runs no commands.
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), FsError> {
/// let dir = tempfile::tempdir().unwrap();
/// let fs: Arc<dyn Backend> = Arc::new(Counting { inner: LocalFs::new(dir.path()), writes: AtomicUsize::new(0) });
/// assert_eq!(fs.write_file("a/b.txt", "hi\n").await?, "a/b.txt");
/// assert_eq!(fs.read_file("a/b.txt", ReadRange::all()).await?.text, "hi\n");
/// let err = fs.exec("true", Default::default()).await.unwrap_err();
/// assert_eq!(err.kind(), tower_agent_builtins::filesystem::FsErrorKind::Unsupported);
/// # Ok(())
/// # }
/// ```
pub trait Backend: fmt::Debug + Send + Sync + 'static {
    /// The entries of the directory `path`, sorted by name.
    fn ls<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Vec<DirEntry>, FsError>>;

    /// The lines `range` of the text file `path`, each cut at
    /// [`range.max_line_chars`](ReadRange::max_line_chars) characters if given.
    ///
    /// # Errors
    ///
    /// [`FsErrorKind::NotUtf8`] if the file is not valid UTF-8 (anywhere, not only in the
    /// range).
    fn read_file<'a>(
        &'a self,
        path: &'a str,
        range: ReadRange,
    ) -> BoxFuture<'a, Result<FileText, FsError>>;

    /// Creates or replaces the file `path` (creating its parent directories) and returns its
    /// path relative to the root, with `/` separators.
    fn write_file<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<String, FsError>>;

    /// Replaces the first occurrence of `old_text` in the file `path` by `new_text`.
    ///
    /// # Errors
    ///
    /// [`FsErrorKind::OldTextNotFound`] if `old_text` does not occur in the file,
    /// [`FsErrorKind::InvalidInput`] if it is empty.
    fn edit_file<'a>(
        &'a self,
        path: &'a str,
        old_text: &'a str,
        new_text: &'a str,
    ) -> BoxFuture<'a, Result<Edit, FsError>>;

    /// The paths (relative to the root, `/`-separated, sorted) of the files and directories
    /// matching the glob `pattern`, itself relative to the root. `*` and `?` do not cross
    /// `/`; `**` does.
    fn glob<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<String>, FsError>>;

    /// The lines matching the regular expression `pattern`.
    fn grep<'a>(
        &'a self,
        pattern: &'a str,
        options: GrepOptions,
    ) -> BoxFuture<'a, Result<GrepMatches, FsError>>;

    /// What each of `paths` (relative to the root, as [`glob`](Self::glob) and
    /// [`grep`](Self::grep) return them) is, in order: `None` for a path that does not exist
    /// or cannot be examined. Symlinks inside the root are followed.
    ///
    /// The default knows nothing (every entry `None`): the tools that sort by modification
    /// time (the [Claude Code tools](crate::claude_code)' `Glob` and `Grep`) then
    /// sort by path, and `Glob` lists directories too.
    fn stat<'a>(&'a self, paths: &'a [String]) -> BoxFuture<'a, Vec<Option<FileStat>>> {
        Box::pin(async move { vec![None; paths.len()] })
    }

    /// Runs `command` with `sh -c` in the root, within `options.timeout`; stdout and stderr
    /// are merged.
    ///
    /// When the returned future is dropped or the timeout expires, the command and everything
    /// it started must be killed.
    ///
    /// # Errors
    ///
    /// [`FsErrorKind::Timeout`] when the timeout expires. A command that runs and fails is
    /// not an error: see [`ExecOutput::exit_code`].
    fn exec<'a>(
        &'a self,
        command: &'a str,
        options: ExecOptions,
    ) -> BoxFuture<'a, Result<ExecOutput, FsError>> {
        let _ = (command, options);
        Box::pin(async {
            Err(FsError::new(
                FsErrorKind::Unsupported,
                "this filesystem backend cannot run commands",
            ))
        })
    }
}

impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn ls<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Vec<DirEntry>, FsError>> {
        (**self).ls(path)
    }

    fn read_file<'a>(
        &'a self,
        path: &'a str,
        range: ReadRange,
    ) -> BoxFuture<'a, Result<FileText, FsError>> {
        (**self).read_file(path, range)
    }

    fn write_file<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<String, FsError>> {
        (**self).write_file(path, content)
    }

    fn edit_file<'a>(
        &'a self,
        path: &'a str,
        old_text: &'a str,
        new_text: &'a str,
    ) -> BoxFuture<'a, Result<Edit, FsError>> {
        (**self).edit_file(path, old_text, new_text)
    }

    fn glob<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<String>, FsError>> {
        (**self).glob(pattern)
    }

    fn grep<'a>(
        &'a self,
        pattern: &'a str,
        options: GrepOptions,
    ) -> BoxFuture<'a, Result<GrepMatches, FsError>> {
        (**self).grep(pattern, options)
    }

    fn stat<'a>(&'a self, paths: &'a [String]) -> BoxFuture<'a, Vec<Option<FileStat>>> {
        (**self).stat(paths)
    }

    fn exec<'a>(
        &'a self,
        command: &'a str,
        options: ExecOptions,
    ) -> BoxFuture<'a, Result<ExecOutput, FsError>> {
        (**self).exec(command, options)
    }
}

// ===== data types =====

/// What kind of entry a [`DirEntry`] is. Serialized as `"file"`, `"dir"`, `"symlink"` or
/// `"other"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else: a FIFO, a socket, a device. Serialized as `"other"`.
    Other,
}

/// One entry of a directory listing. Serialized as `{"name", "type", "size"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DirEntry {
    /// The entry's file name.
    pub name: String,
    /// What it is.
    #[serde(rename = "type")]
    pub kind: EntryKind,
    /// Its size in bytes (of the link itself for a symlink).
    pub size: u64,
}

impl DirEntry {
    /// A directory entry.
    pub fn new(name: impl Into<String>, kind: EntryKind, size: u64) -> Self {
        DirEntry {
            name: name.into(),
            kind,
            size,
        }
    }
}

/// What a path is ([`Backend::stat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileStat {
    /// What kind of entry it is.
    pub kind: EntryKind,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last modified, if the backend knows.
    pub modified: Option<SystemTime>,
}

impl FileStat {
    /// A path's kind, size and modification time.
    pub fn new(kind: EntryKind, size: u64, modified: Option<SystemTime>) -> Self {
        FileStat {
            kind,
            size,
            modified,
        }
    }
}

/// Which lines of a file to read: skip `offset` lines, then read at most `limit`, each cut
/// at `max_line_chars` characters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadRange {
    /// Lines to skip (0-based: `0` starts at the first line).
    pub offset: usize,
    /// Lines to read at most; `None` reads to the end.
    pub limit: Option<usize>,
    /// Characters of a line kept at most; `None` keeps whole lines. A backend cuts longer
    /// lines while reading (so a huge line costs no memory) and records them in
    /// [`FileText::cut_lines`].
    pub max_line_chars: Option<usize>,
}

impl ReadRange {
    /// The whole file.
    pub const fn all() -> Self {
        ReadRange {
            offset: 0,
            limit: None,
            max_line_chars: None,
        }
    }

    /// At most `limit` lines after skipping `offset` lines.
    pub const fn lines(offset: usize, limit: usize) -> Self {
        ReadRange {
            offset,
            limit: Some(limit),
            max_line_chars: None,
        }
    }

    /// With lines cut at `chars` characters.
    #[must_use]
    pub const fn max_line_chars(mut self, chars: usize) -> Self {
        self.max_line_chars = Some(chars);
        self
    }
}

/// Lines read from a text file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileText {
    /// The lines read, as in the file (line endings included).
    pub text: String,
    /// The number (1-based) of the first line read.
    pub first_line: usize,
    /// How many lines were read.
    pub line_count: usize,
    /// How many lines the whole file has.
    pub total_lines: usize,
    /// The lines cut at [`ReadRange::max_line_chars`], in order: `(line number, characters
    /// left out)`. A cut line is in [`text`](Self::text) as its first characters and its
    /// `\n` (if it had one).
    pub cut_lines: Vec<(usize, usize)>,
    /// Whether the file's last line ends with a newline (`false` for an empty file, and
    /// when the backend does not say).
    pub final_newline: bool,
}

impl FileText {
    /// Lines read from a file.
    pub fn new(text: String, first_line: usize, line_count: usize, total_lines: usize) -> Self {
        FileText {
            text,
            first_line,
            line_count,
            total_lines,
            cut_lines: Vec::new(),
            final_newline: false,
        }
    }

    /// Saying whether the file's last line ends with a newline (see
    /// [`final_newline`](Self::final_newline)).
    #[must_use]
    pub fn with_final_newline(mut self, yes: bool) -> Self {
        self.final_newline = yes;
        self
    }

    /// With the lines that were cut (see [`cut_lines`](Self::cut_lines)).
    #[must_use]
    pub fn with_cut_lines(mut self, cut_lines: Vec<(usize, usize)>) -> Self {
        self.cut_lines = cut_lines;
        self
    }

    /// Whether lines of the file were left out (before or after the range read).
    pub fn is_partial(&self) -> bool {
        self.line_count < self.total_lines
    }
}

/// The result of [`Backend::edit_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Edit {
    /// The file's path relative to the root, `/`-separated.
    pub path: String,
    /// The file's new content.
    pub content: String,
    /// How many times `old_text` occurred before the edit (only the first was replaced).
    pub occurrences: usize,
}

impl Edit {
    /// An edit result.
    pub fn new(path: String, content: String, occurrences: usize) -> Self {
        Edit {
            path,
            content,
            occurrences,
        }
    }
}

/// Options of [`Backend::grep`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrepOptions {
    /// The file or directory to search (relative to the root); the root if `None`.
    pub path: Option<String>,
    /// Search only files whose name matches this glob (e.g. `*.rs`, `*.{ts,tsx}`).
    pub include: Option<String>,
    /// Match case-insensitively.
    pub case_insensitive: bool,
    /// Stop after this many matching lines.
    pub max_matches: usize,
    /// Keep at most this many matching lines of each file (`None`: all), e.g. `1` to learn
    /// which files match. A backend that does not honour it returns more.
    pub max_per_file: Option<usize>,
    /// Keep at most this many characters of each matching line in
    /// [`GrepMatch::line`] (`None`: the whole line, as far as the backend matches it).
    pub max_line_chars: Option<usize>,
}

impl Default for GrepOptions {
    /// The whole root, every file, case-sensitive, at most 200 matches.
    fn default() -> Self {
        GrepOptions {
            path: None,
            include: None,
            case_insensitive: false,
            max_matches: 200,
            max_per_file: None,
            max_line_chars: None,
        }
    }
}

impl GrepOptions {
    /// Search only in `path`.
    #[must_use]
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Search only files whose name matches the glob `include`.
    #[must_use]
    pub fn include(mut self, include: impl Into<String>) -> Self {
        self.include = Some(include.into());
        self
    }

    /// Match case-insensitively, or not.
    #[must_use]
    pub fn case_insensitive(mut self, yes: bool) -> Self {
        self.case_insensitive = yes;
        self
    }

    /// Stop after `n` matching lines.
    #[must_use]
    pub fn max_matches(mut self, n: usize) -> Self {
        self.max_matches = n;
        self
    }

    /// Keep at most `n` matching lines of each file.
    #[must_use]
    pub fn max_per_file(mut self, n: usize) -> Self {
        self.max_per_file = Some(n);
        self
    }

    /// Keep at most `chars` characters of each matching line.
    #[must_use]
    pub fn max_line_chars(mut self, chars: usize) -> Self {
        self.max_line_chars = Some(chars);
        self
    }
}

/// One line matching a grep.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrepMatch {
    /// The file, relative to the root, `/`-separated.
    pub path: String,
    /// The line number, 1-based.
    pub line_number: usize,
    /// The line, without its line ending.
    pub line: String,
}

impl GrepMatch {
    /// A matching line.
    pub fn new(path: impl Into<String>, line_number: usize, line: impl Into<String>) -> Self {
        GrepMatch {
            path: path.into(),
            line_number,
            line: line.into(),
        }
    }
}

impl fmt::Display for GrepMatch {
    /// `path:line: text`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line_number, self.line)
    }
}

/// The result of [`Backend::grep`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GrepMatches {
    /// The matching lines, by path then line number.
    pub matches: Vec<GrepMatch>,
    /// Whether the search stopped at [`GrepOptions::max_matches`] with more to find.
    pub truncated: bool,
}

impl GrepMatches {
    /// A grep result.
    pub fn new(matches: Vec<GrepMatch>, truncated: bool) -> Self {
        GrepMatches { matches, truncated }
    }
}

/// Options of [`Backend::exec`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecOptions {
    /// How long the command may run.
    pub timeout: Duration,
    /// At most this many characters of output are kept: the first and last halves, with a
    /// `... (truncated N characters) ...` line between.
    pub max_output: usize,
    /// Variables set in the command's environment, in order (the `execute` tool passes the
    /// session's [`SessionEnv`](tower_agent_core::agent::SessionEnv): what SessionStart hooks exported
    /// through `CLAUDE_ENV_FILE`).
    pub env: std::sync::Arc<[(String, String)]>,
}

impl Default for ExecOptions {
    /// 120 seconds, 30,000 characters, no variables.
    fn default() -> Self {
        ExecOptions {
            timeout: Duration::from_secs(120),
            max_output: 30_000,
            env: std::sync::Arc::default(),
        }
    }
}

impl ExecOptions {
    /// With a timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// With these variables set in the command's environment.
    #[must_use]
    pub fn env(mut self, vars: std::sync::Arc<[(String, String)]>) -> Self {
        self.env = vars;
        self
    }

    /// With an output cap, in characters.
    #[must_use]
    pub fn max_output(mut self, chars: usize) -> Self {
        self.max_output = chars;
        self
    }
}

/// What a command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecOutput {
    /// Its output, stdout and stderr merged (lossily decoded as UTF-8, capped).
    pub output: String,
    /// Its exit code; `None` if it was ended by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether output was left out to respect [`ExecOptions::max_output`].
    pub truncated: bool,
}

impl ExecOutput {
    /// A command's output and exit code.
    pub fn new(output: String, exit_code: Option<i32>) -> Self {
        ExecOutput {
            output,
            exit_code,
            signal: None,
            truncated: false,
        }
    }

    /// With the signal that ended the command.
    #[must_use]
    pub fn with_signal(mut self, signal: Option<i32>) -> Self {
        self.signal = signal;
        self
    }

    /// Marked as truncated, or not.
    #[must_use]
    pub fn with_truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }

    /// Whether the command exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

// ===== FsError =====

/// What kind of failure an [`FsError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FsErrorKind {
    /// The file or directory does not exist.
    NotFound,
    /// The path leads out of the backend's root (by `..`, an absolute path or a symlink).
    EscapesRoot,
    /// The file is not valid UTF-8 text.
    NotUtf8,
    /// A file was expected, the path is a directory.
    IsADirectory,
    /// A directory was expected, the path is not one.
    NotADirectory,
    /// A file was expected, the path is a FIFO, a socket or a device (which are not opened:
    /// opening them may block, or have effects).
    NotARegularFile,
    /// `old_text` does not occur in the file to edit.
    OldTextNotFound,
    /// A regular expression or glob pattern does not parse.
    InvalidPattern,
    /// Some other argument is not acceptable (e.g. an empty `old_text`).
    InvalidInput,
    /// A command ran out of time (and was killed).
    Timeout,
    /// The backend cannot do this (e.g. run commands).
    Unsupported,
    /// Any other I/O failure (permission denied, disk full, ...).
    Io,
}

/// An error of a filesystem [`Backend`]: a [kind](FsErrorKind) and a message that says what
/// went wrong, naming the path.
///
/// The `Display` text is the message, lowercase and without a final period, e.g.
/// ``path `../x` escapes the root /srv/project``. The filesystem tools show it to the model.
pub struct FsError {
    kind: FsErrorKind,
    message: String,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl FsError {
    /// An error of kind `kind` saying `message`.
    pub fn new(kind: FsErrorKind, message: impl Into<String>) -> Self {
        FsError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// This error, caused by `source`.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> FsErrorKind {
        self.kind
    }

    /// The message (same as the `Display` text).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Debug for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("FsError");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for FsError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}
