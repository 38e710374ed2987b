//! [`LocalFs`]: the local disk, confined to a root directory.

mod exec;
mod lines;
mod names;
mod ops;
mod resolve;
mod walk;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use futures_util::future::BoxFuture;

use super::backend::{
    Backend, DirEntry, Edit, ExecOptions, ExecOutput, FileStat, FileText, FsError, FsErrorKind,
    GrepMatches, GrepOptions, ReadRange,
};

pub(super) use self::exec::format_duration;
use self::{exec::exec, resolve::Resolver};

/// How many symlinks [`LocalFs`] follows by hand (dangling ones) before giving up.
const MAX_SYMLINK_HOPS: u32 = 40;
/// How long output is still read after the shell exited and what it left running was killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// Files whose first bytes hold a NUL are binary and skipped by grep.
const BINARY_SNIFF: usize = 8 * 1024;
/// The characters of a line that grep matches on; the rest of a longer line is dropped.
pub(super) const GREP_LINE_CHARS: usize = 64 * 1024;
/// The largest file `edit_file` edits, in bytes (32 MiB).
pub(super) const MAX_EDIT_BYTES: u64 = 32 * 1024 * 1024;
/// The buffer of streamed reads (64 KiB).
const READ_BUFFER: usize = 64 * 1024;

/// A [`Backend`] over the local disk, confined to a root directory.
///
/// # Confinement
///
/// Every path is resolved against the root. A path is refused, with an error of kind
/// [`FsErrorKind::EscapesRoot`], when it leads out of the root:
///
/// - by `..` (`../x`, `a/../../x`),
/// - by being absolute and outside the root (an absolute path inside the root is fine),
/// - through a symlink whose target is outside the root. For a path that does not exist yet
///   (a new file), the deepest existing ancestor is resolved, so a new file cannot be created
///   through a symlinked directory either; a dangling symlink is followed by hand. The error
///   says that the path escapes through a symlink, not where the symlink points.
///
/// Symlinks that stay inside the root are followed.
///
/// That check gives the clear errors; the operation itself cannot be raced out of the root.
/// Every file operation (`ls`, `read_file`, `write_file` and the directories it creates,
/// `edit_file`, `glob`, `grep`) opens its path *beneath* a handle on the root directory (a
/// [`cap_std::fs::Dir`]: `openat2` with `RESOLVE_BENEATH` on Linux, or a walk component by
/// component with `O_NOFOLLOW`), never by an absolute path, and `glob` and `grep` open each
/// directory they walk beneath its parent without following symlinks. A process that swaps a
/// directory of the root for a symlink to elsewhere while an operation runs makes it fail
/// (``path `x` escapes the root ... while it was being opened``); nothing is read, written or
/// listed outside the root.
///
/// # Regular files only
///
/// `read_file`, `write_file`, `edit_file` and `grep` open regular files only: a FIFO, socket
/// or device is refused with [`FsErrorKind::NotARegularFile`] (`grep` skips it while walking
/// a directory), and `ls` lists it with type `other`. The type is checked with `stat` before
/// opening, and every open is non-blocking and checked again with `fstat`, so a FIFO swapped
/// in meanwhile cannot block a thread either.
///
/// # Caps
///
/// - `read_file` streams the file: it keeps only the lines of its [`ReadRange`], each cut at
///   [`ReadRange::max_line_chars`] characters *while reading* (the `read_file` tool passes
///   2,000), so its memory is bounded by the range, not the file: `limit: 5` on a 2 GiB file
///   without a newline keeps 5 × 2,000 characters. The rest of the file is still read, to
///   count its lines and check it is UTF-8.
/// - `grep` streams each file and matches a line on its first 65,536 characters (at most
///   256 KiB): the rest of a longer line is read and dropped, and a match shows that start.
/// - `edit_file` edits files of at most 32 MiB; a larger one is refused with
///   [`FsErrorKind::InvalidInput`].
///
/// Reads go through a 64 KiB buffer.
///
/// # Text
///
/// Text files must be UTF-8: reading or editing a file that is not fails with
/// [`FsErrorKind::NotUtf8`] rather than returning mangled text. [`grep`](Backend::grep) skips
/// binary files (a NUL in their first 8 KiB) and decodes other files lossily.
/// [`glob`](Backend::glob) and [`grep`](Backend::grep) do not follow symlinks while walking,
/// and grep does not walk into `.git` directories.
///
/// # File names that are not UTF-8
///
/// A file name that is valid UTF-8 is shown (by `ls`, `glob`, `grep`, and in the paths
/// `write_file` and `edit_file` return) as it is. Any other name is shown escaped: each byte
/// that is not part of valid UTF-8 as `\xHH` (two uppercase hex digits), and each `\` as `\\`
/// — `caf\xE9.txt` for the bytes `b"caf\xe9.txt"`. Paths given to the tools are read back the
/// same way, so every name shown can be passed back: a path component that holds `\\` or a
/// `\xHH` escape of a byte from `80` to `FF` is decoded (`\\` → `\`, `\xHH` → the byte; any
/// other `\` stays as it is); other components are taken literally. The rare UTF-8 name that
/// would read back as something else (it holds `\\` or such an escape itself) is shown escaped
/// too, so that it reads back as itself.
///
/// # Commands
///
/// [`exec`](Backend::exec) runs `sh -c` in the root, stdin closed, stdout and stderr merged,
/// in a new process group. When the shell exits, whatever it left running is killed (its output
/// is then read for at most 0.5 s more); when the timeout expires or the future is dropped, the
/// shell and everything it started are killed (`SIGKILL`). On Linux that includes processes
/// that left the group (`setsid -f`, `nohup … &`); see
/// [what "everything it started" covers](super#commands).
///
/// File operations run on tokio's blocking thread pool.
///
/// # Example
///
/// ```
/// use tower_agent_builtins::filesystem::{Backend, FsErrorKind, LocalFs, ReadRange};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_builtins::filesystem::FsError> {
/// let dir = tempfile::tempdir().unwrap();
/// let fs = LocalFs::new(dir.path());
/// fs.write_file("src/lib.rs", "fn main() {}\n").await?;
/// let text = fs.read_file("src/lib.rs", ReadRange::all()).await?;
/// assert_eq!((text.text.as_str(), text.total_lines), ("fn main() {}\n", 1));
///
/// let err = fs.read_file("../secret", ReadRange::all()).await.unwrap_err();
/// assert_eq!(err.kind(), FsErrorKind::EscapesRoot);
/// assert!(err.to_string().starts_with("path `../secret` escapes the root "));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct LocalFs {
    root: PathBuf,
}

impl LocalFs {
    /// A filesystem confined to `root`.
    ///
    /// The root need not exist yet; every operation fails with a clear error while it does not.
    /// A relative root is taken relative to the process's current directory, now.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        LocalFs {
            root: std::path::absolute(&root).unwrap_or(root),
        }
    }

    /// The root, as given (made absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `f` with the resolver on the blocking pool.
    fn blocking<T, F>(&self, f: F) -> BoxFuture<'static, Result<T, FsError>>
    where
        T: Send + 'static,
        F: FnOnce(&Resolver) -> Result<T, FsError> + Send + 'static,
    {
        let root = self.root.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&Resolver::new(&root)?))
                .await
                .map_err(|e| {
                    FsError::new(FsErrorKind::Io, format!("filesystem task failed: {e}"))
                        .with_source(e)
                })?
        })
    }
}

impl Backend for LocalFs {
    fn ls<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Vec<DirEntry>, FsError>> {
        let path = path.to_owned();
        self.blocking(move |r| r.ls(&path))
    }

    fn read_file<'a>(
        &'a self,
        path: &'a str,
        range: ReadRange,
    ) -> BoxFuture<'a, Result<FileText, FsError>> {
        let path = path.to_owned();
        self.blocking(move |r| r.read_file(&path, range))
    }

    fn write_file<'a>(
        &'a self,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<String, FsError>> {
        let (path, content) = (path.to_owned(), content.to_owned());
        self.blocking(move |r| r.write_file(&path, &content))
    }

    fn edit_file<'a>(
        &'a self,
        path: &'a str,
        old_text: &'a str,
        new_text: &'a str,
    ) -> BoxFuture<'a, Result<Edit, FsError>> {
        let (path, old, new) = (path.to_owned(), old_text.to_owned(), new_text.to_owned());
        self.blocking(move |r| r.edit_file(&path, &old, &new))
    }

    fn glob<'a>(&'a self, pattern: &'a str) -> BoxFuture<'a, Result<Vec<String>, FsError>> {
        let pattern = pattern.to_owned();
        self.blocking(move |r| r.glob(&pattern))
    }

    fn grep<'a>(
        &'a self,
        pattern: &'a str,
        options: GrepOptions,
    ) -> BoxFuture<'a, Result<GrepMatches, FsError>> {
        let pattern = pattern.to_owned();
        self.blocking(move |r| r.grep(&pattern, &options))
    }

    fn stat<'a>(&'a self, paths: &'a [String]) -> BoxFuture<'a, Vec<Option<FileStat>>> {
        let paths = paths.to_vec();
        let n = paths.len();
        let stats = self.blocking(move |r| Ok(r.stat(&paths)));
        Box::pin(async move { stats.await.unwrap_or_else(|_| vec![None; n]) })
    }

    fn exec<'a>(
        &'a self,
        command: &'a str,
        options: ExecOptions,
    ) -> BoxFuture<'a, Result<ExecOutput, FsError>> {
        Box::pin(exec(&self.root, command, options))
    }
}
