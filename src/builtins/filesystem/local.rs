//! [`LocalFs`]: the local disk, confined to a root directory.

use std::{
    collections::VecDeque,
    ffi::{OsStr, OsString},
    fmt::Write as _,
    fs,
    io::{self, BufRead, BufReader, Read, Seek, Write},
    path::{Component, Path, PathBuf},
    process::Stdio,
    str::Utf8Error,
    time::Duration,
};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::{
    ambient_authority,
    fs::{Dir, FileType, Metadata, OpenOptions},
};
use futures_util::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use super::backend::{
    Backend, DirEntry, Edit, EntryKind, ExecOptions, ExecOutput, FileText, FsError, FsErrorKind,
    GrepMatch, GrepMatches, GrepOptions, ReadRange,
};
use crate::process::ProcessTree;

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
/// use tower_agent::builtins::filesystem::{Backend, FsErrorKind, LocalFs, ReadRange};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent::builtins::filesystem::FsError> {
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

    fn exec<'a>(
        &'a self,
        command: &'a str,
        options: ExecOptions,
    ) -> BoxFuture<'a, Result<ExecOutput, FsError>> {
        Box::pin(exec(&self.root, command, options))
    }
}

// ===== path resolution =====

/// A path resolved inside the root.
struct Resolved {
    /// The path relative to the root, symlinks of its existing part resolved (`.` for the
    /// root): what is opened beneath the root handle.
    inner: PathBuf,
    /// The path relative to the root as the model named it, `/`-separated, names escaped
    /// (`.` for the root).
    rel: String,
}

/// Resolves paths against the canonical root, and opens them beneath it.
struct Resolver {
    /// The canonical root.
    root: PathBuf,
    /// The root as given (absolute), to accept absolute paths spelled with it.
    given: PathBuf,
    /// A handle on the root: every file operation goes through it.
    dir: Dir,
}

impl Resolver {
    fn new(given: &Path) -> Result<Self, FsError> {
        let root = fs::canonicalize(given).map_err(|e| root_error(given, e))?;
        let not_a_dir = || {
            FsError::new(
                FsErrorKind::NotADirectory,
                format!("the filesystem root {} is not a directory", root.display()),
            )
        };
        if !root.is_dir() {
            return Err(not_a_dir());
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).map_err(|e| {
            if e.kind() == io::ErrorKind::NotADirectory {
                not_a_dir()
            } else {
                root_error(given, e)
            }
        })?;
        Ok(Resolver {
            root,
            given: given.to_path_buf(),
            dir,
        })
    }

    fn escapes(&self, path: &str) -> FsError {
        FsError::new(
            FsErrorKind::EscapesRoot,
            format!("path `{path}` escapes the root {}", self.root.display()),
        )
    }

    /// The normalized components of `path` relative to the root (escaped names decoded), or
    /// an escape error.
    fn relative(&self, path: &str) -> Result<Vec<OsString>, FsError> {
        let p = Path::new(path);
        let rel = if p.is_absolute() {
            let abs = normalize_absolute(p);
            abs.strip_prefix(&self.root)
                .or_else(|_| abs.strip_prefix(&self.given))
                .map_err(|_| self.escapes(path))?
                .to_path_buf()
        } else {
            p.to_path_buf()
        };
        let mut out: Vec<OsString> = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => out.push(
                    s.to_str()
                        .and_then(decode_name)
                        .map_or_else(|| s.to_os_string(), name_from_bytes),
                ),
                Component::CurDir => {}
                Component::ParentDir => {
                    if out.pop().is_none() {
                        return Err(self.escapes(path));
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(self.escapes(path)),
            }
        }
        Ok(out)
    }

    fn resolve(&self, path: &str) -> Result<Resolved, FsError> {
        let parts = self.relative(path)?;
        let mut candidate = self.root.clone();
        candidate.extend(&parts);
        let real = self.confine(path, candidate, 0)?;
        let inner = match real.strip_prefix(&self.root) {
            Ok(inner) if inner.as_os_str().is_empty() => PathBuf::from("."),
            Ok(inner) => inner.to_path_buf(),
            Err(_) => return Err(self.escapes(path)),
        };
        let rel = if parts.is_empty() {
            ".".to_owned()
        } else {
            parts
                .iter()
                .map(|s| encode_name(s))
                .collect::<Vec<_>>()
                .join("/")
        };
        Ok(Resolved { inner, rel })
    }

    /// Resolves the symlinks of the existing part of `candidate` (an absolute, normalized
    /// path) and checks that it stays in the root.
    fn confine(&self, path: &str, candidate: PathBuf, hops: u32) -> Result<PathBuf, FsError> {
        let mut existing = candidate.as_path();
        let mut rest = Vec::new();
        loop {
            match fs::symlink_metadata(existing) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match (existing.file_name(), existing.parent()) {
                        (Some(name), Some(parent)) => {
                            rest.push(name.to_os_string());
                            existing = parent;
                        }
                        _ => return Err(io_error("resolve", path, e)),
                    }
                }
                Err(e) => return Err(io_error("resolve", path, e)),
            }
        }
        let real = match fs::canonicalize(existing) {
            Ok(real) => real,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // `existing` is a dangling symlink: follow it by hand, and check where it leads.
                if hops >= MAX_SYMLINK_HOPS {
                    return Err(FsError::new(
                        FsErrorKind::Io,
                        format!("cannot resolve `{path}`: too many levels of symbolic links"),
                    ));
                }
                let target = fs::read_link(existing).map_err(|e| io_error("resolve", path, e))?;
                let parent = existing.parent().unwrap_or(&self.root);
                let parent = fs::canonicalize(parent).map_err(|e| io_error("resolve", path, e))?;
                let mut next = normalize_absolute(&parent.join(target));
                next.extend(rest.iter().rev());
                return self.confine(path, next, hops + 1);
            }
            Err(e) => return Err(io_error("resolve", path, e)),
        };
        if !real.starts_with(&self.root) {
            // NOTE: where the symlink leads is not said: it is outside the root.
            return Err(FsError::new(
                FsErrorKind::EscapesRoot,
                format!(
                    "path `{path}` escapes the root {} through a symlink",
                    self.root.display()
                ),
            ));
        }
        let mut real = real;
        real.extend(rest.iter().rev());
        Ok(real)
    }

    /// The path of `sub` (relative to the resolved `base_rel`) relative to the root,
    /// `/`-separated, names escaped.
    fn display_rel(&self, base_rel: &str, sub: &Path) -> String {
        let sub = sub
            .components()
            .map(|c| encode_name(c.as_os_str()))
            .collect::<Vec<_>>()
            .join("/");
        match (base_rel, sub.is_empty()) {
            (".", _) => sub,
            (_, true) => base_rel.to_owned(),
            _ => format!("{base_rel}/{sub}"),
        }
    }

    /// An I/O error of `action` on `path`; an escape found while opening is an escape error.
    fn op_error(&self, action: &str, path: &str, e: io::Error) -> FsError {
        if is_escape(&e) {
            return FsError::new(
                FsErrorKind::EscapesRoot,
                format!(
                    "path `{path}` escapes the root {} (a part of it became a symlink leading \
                     out of the root while it was being opened)",
                    self.root.display()
                ),
            )
            .with_source(e);
        }
        io_error(action, path, e)
    }

    /// The metadata of `r` (symlinks inside the root followed), if it exists.
    fn metadata(
        &self,
        r: &Resolved,
        action: &str,
        path: &str,
    ) -> Result<Option<Metadata>, FsError> {
        match self.dir.metadata(&r.inner) {
            Ok(meta) => Ok(Some(meta)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.op_error(action, path, e)),
        }
    }

    /// Opens the existing regular file `r` beneath the root, without blocking.
    fn open_file(
        &self,
        r: &Resolved,
        action: &str,
        path: &str,
        options: &mut OpenOptions,
    ) -> Result<fs::File, FsError> {
        if let Some(meta) = self.metadata(r, action, path)? {
            regular_file(&meta.file_type(), path)?;
        }
        options.nonblock(true);
        let file = self
            .dir
            .open_with(&r.inner, options)
            .map_err(|e| self.op_error(action, path, e))?;
        let meta = file.metadata().map_err(|e| io_error(action, path, e))?;
        regular_file(&meta.file_type(), path)?;
        Ok(file.into_std())
    }

    // ===== operations =====

    fn ls(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let r = self.resolve(path)?;
        let Some(meta) = self.metadata(&r, "list", path)? else {
            return Err(io_error("list", path, io::ErrorKind::NotFound.into()));
        };
        if !meta.is_dir() {
            return Err(FsError::new(
                FsErrorKind::NotADirectory,
                format!("`{path}` is a file, not a directory"),
            ));
        }
        let dir = self
            .dir
            .open_dir(&r.inner)
            .map_err(|e| self.op_error("list", path, e))?;
        let mut entries = Vec::new();
        for entry in dir.entries().map_err(|e| io_error("list", path, e))? {
            let entry = entry.map_err(|e| io_error("list", path, e))?;
            // `DirEntry::metadata` does not follow symlinks.
            let meta = entry.metadata().map_err(|e| io_error("list", path, e))?;
            let kind = entry_kind(&meta.file_type());
            entries.push(DirEntry::new(
                encode_name(&entry.file_name()),
                kind,
                meta.len(),
            ));
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    fn read_file(&self, path: &str, range: ReadRange) -> Result<FileText, FsError> {
        let r = self.resolve(path)?;
        let file = self.open_file(&r, "read", path, OpenOptions::new().read(true))?;
        let mut reader = BufReader::with_capacity(READ_BUFFER, file);
        let limit = range.limit.unwrap_or(usize::MAX);
        let max_chars = range.max_line_chars.unwrap_or(usize::MAX);
        let (mut text, mut total, mut count) = (String::new(), 0usize, 0usize);
        let mut cut_lines = Vec::new();
        let mut line = Vec::new();
        let mut utf8 = Utf8Check::default();
        loop {
            let in_range = total >= range.offset && count < limit;
            // Lines out of the range are read (to count them and check them) but not kept.
            let keep = if in_range { max_chars } else { 0 };
            let omitted = match next_line(&mut reader, &mut line, keep, Some(&mut utf8)) {
                Ok(Some(omitted)) => omitted,
                Ok(None) => break,
                Err(LineError::Io(e)) => return Err(io_error("read", path, e)),
                Err(LineError::Utf8(e)) => {
                    return Err(FsError::new(
                        FsErrorKind::NotUtf8,
                        format!("`{path}` is not valid UTF-8 text (line {})", total + 1),
                    )
                    .with_source(e));
                }
            };
            total += 1;
            if in_range {
                text.push_str(&String::from_utf8_lossy(&line));
                count += 1;
                if omitted > 0 {
                    cut_lines.push((total, omitted));
                }
            }
        }
        Ok(FileText::new(text, range.offset + 1, count, total).with_cut_lines(cut_lines))
    }

    fn write_file(&self, path: &str, content: &str) -> Result<String, FsError> {
        let r = self.resolve(path)?;
        if let Some(parent) = r.inner.parent()
            && !parent.as_os_str().is_empty()
        {
            self.dir
                .create_dir_all(parent)
                .map_err(|e| self.op_error("create the directories of", path, e))?;
        }
        let mut file = self.open_file(
            &r,
            "write",
            path,
            OpenOptions::new().write(true).create(true).truncate(true),
        )?;
        file.write_all(content.as_bytes())
            .map_err(|e| io_error("write", path, e))?;
        Ok(r.rel)
    }

    fn edit_file(&self, path: &str, old: &str, new: &str) -> Result<Edit, FsError> {
        if old.is_empty() {
            return Err(FsError::new(
                FsErrorKind::InvalidInput,
                "old_text is empty; give the exact text to replace",
            ));
        }
        let r = self.resolve(path)?;
        if self.metadata(&r, "edit", path)?.is_none() {
            return Err(io_error("edit", path, io::ErrorKind::NotFound.into()));
        }
        let mut file =
            self.open_file(&r, "edit", path, OpenOptions::new().read(true).write(true))?;
        let too_large = |size: u64| {
            FsError::new(
                FsErrorKind::InvalidInput,
                format!(
                    "`{path}` is too large to edit ({size} bytes; edit_file edits files of at \
                     most {} MiB)",
                    MAX_EDIT_BYTES / (1024 * 1024)
                ),
            )
        };
        let size = file
            .metadata()
            .map_err(|e| io_error("read", path, e))?
            .len();
        if size > MAX_EDIT_BYTES {
            return Err(too_large(size));
        }
        let mut bytes = Vec::new();
        (&mut file)
            .take(MAX_EDIT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error("read", path, e))?;
        if bytes.len() as u64 > MAX_EDIT_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        let content = String::from_utf8(bytes).map_err(|e| {
            FsError::new(
                FsErrorKind::NotUtf8,
                format!("`{path}` is not valid UTF-8 text"),
            )
            .with_source(e)
        })?;
        let occurrences = content.matches(old).count();
        if occurrences == 0 {
            return Err(FsError::new(
                FsErrorKind::OldTextNotFound,
                format!("old_text not found in `{path}`"),
            ));
        }
        let content = content.replacen(old, new, 1);
        // The same open file is rewritten: what was read is what is replaced.
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(content.as_bytes()))
            .map_err(|e| io_error("write", path, e))?;
        Ok(Edit::new(r.rel, content, occurrences))
    }

    fn glob(&self, pattern: &str) -> Result<Vec<String>, FsError> {
        let invalid = |e: globset::Error| {
            FsError::new(
                FsErrorKind::InvalidPattern,
                format!("invalid glob pattern `{pattern}`: {e}"),
            )
            .with_source(e)
        };
        // Make the pattern relative to the root.
        let rel_pattern = if Path::new(pattern).is_absolute() {
            let stripped = [&self.root, &self.given].into_iter().find_map(|root| {
                pattern
                    .strip_prefix(root.to_str()?)
                    .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            });
            stripped
                .ok_or_else(|| self.escapes(pattern))?
                .trim_start_matches('/')
        } else {
            pattern
        };
        let segments: Vec<&str> = rel_pattern
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        if segments.contains(&"..") {
            return Err(self.escapes(pattern));
        }
        if segments.is_empty() {
            return Ok(Vec::new());
        }
        let matcher = GlobBuilder::new(&segments.join("/"))
            .literal_separator(true)
            .build()
            .map_err(invalid)?
            .compile_matcher();

        // Walk only below the literal directories the pattern starts with.
        let literal = segments[..segments.len() - 1]
            .iter()
            .take_while(|s| !has_glob_meta(s))
            .count();
        let base = if literal == 0 {
            ".".to_owned()
        } else {
            segments[..literal].join("/")
        };
        let max_depth = if segments[literal..].iter().any(|s| s.contains("**")) {
            usize::MAX
        } else {
            segments.len() - literal
        };
        let r = match self.resolve(&base) {
            Ok(r) => r,
            Err(e) if e.kind() == FsErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let Ok(dir) = self.dir.open_dir(&r.inner) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        walk(
            &dir,
            Path::new(""),
            max_depth,
            false,
            &mut |_, _, sub, _| {
                let rel = self.display_rel(&r.rel, sub);
                if matcher.is_match(&rel) {
                    out.push(rel);
                }
                true
            },
        );
        out.sort();
        Ok(out)
    }

    fn grep(&self, pattern: &str, options: &GrepOptions) -> Result<GrepMatches, FsError> {
        let regex = RegexBuilder::new(pattern)
            .case_insensitive(options.case_insensitive)
            .build()
            .map_err(|e| {
                FsError::new(
                    FsErrorKind::InvalidPattern,
                    format!("invalid regex `{pattern}`: {e}"),
                )
                .with_source(e)
            })?;
        let include = options
            .include
            .as_deref()
            .map(|glob| {
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| {
                        FsError::new(
                            FsErrorKind::InvalidPattern,
                            format!("invalid glob pattern `{glob}`: {e}"),
                        )
                        .with_source(e)
                    })
            })
            .transpose()?;
        let path = options.path.as_deref().unwrap_or(".");
        let r = self.resolve(path)?;
        let Some(meta) = self.metadata(&r, "search", path)? else {
            return Err(io_error("search", path, io::ErrorKind::NotFound.into()));
        };
        let mut search = Search {
            regex: &regex,
            include: include.as_ref(),
            max: options.max_matches,
            found: GrepMatches::default(),
        };
        if meta.is_dir() {
            let dir = self
                .dir
                .open_dir(&r.inner)
                .map_err(|e| self.op_error("search", path, e))?;
            walk(
                &dir,
                Path::new(""),
                usize::MAX,
                true,
                &mut |parent, name, sub, kind| {
                    if kind != EntryKind::File {
                        return true;
                    }
                    let rel = self.display_rel(&r.rel, sub);
                    // Files that cannot be opened, or are not regular files (any more), are
                    // skipped.
                    let open = || -> io::Result<fs::File> {
                        let file = parent.open_with(
                            name,
                            OpenOptions::new()
                                .read(true)
                                .nonblock(true)
                                .follow(FollowSymlinks::No),
                        )?;
                        if file.metadata()?.is_file() {
                            Ok(file.into_std())
                        } else {
                            Err(io::ErrorKind::InvalidInput.into())
                        }
                    };
                    search.file(open, &rel).unwrap_or(true)
                },
            );
        } else {
            let open = || {
                self.open_file(&r, "search", path, OpenOptions::new().read(true))
                    .map_err(io::Error::other)
            };
            if let Err(e) = search.file(open, &r.rel) {
                return Err(match e.downcast::<FsError>() {
                    Ok(e) => e,
                    Err(e) => io_error("search", path, e),
                });
            }
        }
        Ok(search.found)
    }
}

struct Search<'a> {
    regex: &'a Regex,
    include: Option<&'a GlobMatcher>,
    max: usize,
    found: GrepMatches,
}

impl Search<'_> {
    /// Searches one file (opened by `open` if its name is included); returns whether to go
    /// on.
    fn file(&mut self, open: impl FnOnce() -> io::Result<fs::File>, rel: &str) -> io::Result<bool> {
        if let Some(include) = self.include {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if !include.is_match(name) {
                return Ok(true);
            }
        }
        let mut reader = BufReader::with_capacity(READ_BUFFER, open()?);
        let mut head = Vec::with_capacity(BINARY_SNIFF);
        (&mut reader)
            .take(BINARY_SNIFF as u64)
            .read_to_end(&mut head)?;
        if head.contains(&0) {
            return Ok(true);
        }
        let mut reader = io::Cursor::new(head).chain(reader);
        let (mut line, mut number) = (Vec::new(), 0usize);
        loop {
            match next_line(&mut reader, &mut line, GREP_LINE_CHARS, None) {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(true),
                Err(LineError::Io(e)) => return Err(e),
                Err(LineError::Utf8(_)) => unreachable!("grep does not check UTF-8"),
            }
            number += 1;
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if self.regex.is_match(text) {
                if self.found.matches.len() == self.max {
                    self.found.truncated = true;
                    return Ok(false);
                }
                self.found
                    .matches
                    .push(GrepMatch::new(rel, number, text.to_owned()));
            }
        }
    }
}

// ===== streamed lines =====

/// Why [`next_line`] failed.
enum LineError {
    Io(io::Error),
    /// The bytes are not UTF-8 (only when asked to check).
    Utf8(Utf8Error),
}

/// Whether `b` starts a character (does not continue a UTF-8 sequence).
fn starts_char(b: u8) -> bool {
    (b & 0xC0) != 0x80
}

/// How many characters `bytes` holds, counted as the bytes that do not continue a UTF-8
/// sequence (valid runs are counted by `str::chars`, which is fast).
fn count_chars(bytes: &[u8]) -> usize {
    bytes
        .utf8_chunks()
        .map(|c| {
            c.valid().chars().count() + c.invalid().iter().filter(|&&b| starts_char(b)).count()
        })
        .sum()
}

/// Reads the next line of `reader` into `keep`: at most its first `max_chars` characters (and
/// at most 4 bytes a character), then its `\n` if it has one. The rest of a longer line is
/// read in pieces of at most [`READ_BUFFER`] bytes and dropped, so memory stays bounded
/// whatever the line's length. Characters are counted as the bytes that do not continue a
/// UTF-8 sequence.
///
/// Returns `None` at the end of the input, else how many characters were dropped (a `\r`
/// before the `\n` not counted). With `utf8`, the line is checked to be UTF-8 as it is read.
fn next_line(
    reader: &mut impl BufRead,
    keep: &mut Vec<u8>,
    max_chars: usize,
    mut utf8: Option<&mut Utf8Check>,
) -> Result<Option<usize>, LineError> {
    keep.clear();
    let max_bytes = max_chars.saturating_mul(4);
    let (mut any, mut newline, mut eof, mut omitted) = (false, false, false, 0usize);
    let mut last = None;
    // What fits, read at once (`read_until` finds the newline fast).
    if max_bytes > 0 {
        let n = (&mut *reader)
            .take(max_bytes as u64)
            .read_until(b'\n', keep)
            .map_err(LineError::Io)?;
        any = n > 0;
        newline = keep.last() == Some(&b'\n');
        if newline {
            keep.pop();
        } else {
            eof = n < max_bytes;
        }
        if let Some(check) = utf8.as_deref_mut() {
            check.feed(keep).map_err(LineError::Utf8)?;
        }
        last = keep.last().copied();
        // Cut at `max_chars` characters.
        if keep.len() > max_chars {
            let mut chars = 0;
            let cut = keep
                .iter()
                .position(|&b| {
                    let start = starts_char(b);
                    if start {
                        chars += 1;
                    }
                    start && chars > max_chars
                })
                .unwrap_or(keep.len());
            omitted += count_chars(&keep[cut..]);
            keep.truncate(cut);
        }
    }
    // The rest of a longer line, dropped.
    if !newline && !eof {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            let n = (&mut *reader)
                .take(READ_BUFFER as u64)
                .read_until(b'\n', &mut rest)
                .map_err(LineError::Io)?;
            if n == 0 {
                break;
            }
            any = true;
            newline = rest.last() == Some(&b'\n');
            let body = if newline { &rest[..n - 1] } else { &rest[..] };
            if let Some(check) = utf8.as_deref_mut() {
                check.feed(body).map_err(LineError::Utf8)?;
            }
            omitted += count_chars(body);
            if let Some(&b) = body.last() {
                last = Some(b);
            }
            if newline {
                break;
            }
        }
    }
    if !any {
        return Ok(None);
    }
    if let Some(check) = utf8 {
        check.finish().map_err(LineError::Utf8)?;
    }
    if newline {
        if omitted > 0 && last == Some(b'\r') {
            omitted -= 1;
        }
        keep.push(b'\n');
    }
    Ok(Some(omitted))
}

/// Checks that bytes fed piece by piece are UTF-8 (a character may be split between pieces).
#[derive(Debug, Default)]
struct Utf8Check {
    pending: [u8; 4],
    len: usize,
}

impl Utf8Check {
    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), Utf8Error> {
        while self.len > 0 {
            let Some((&b, rest)) = bytes.split_first() else {
                return Ok(());
            };
            self.pending[self.len] = b;
            self.len += 1;
            bytes = rest;
            match std::str::from_utf8(&self.pending[..self.len]) {
                Ok(_) => self.len = 0,
                // Still incomplete (at most 3 bytes: a 4-byte sequence is complete or wrong).
                Err(e) if e.error_len().is_none() => {}
                Err(e) => return Err(e),
            }
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                let tail = &bytes[e.valid_up_to()..];
                self.pending[..tail.len()].copy_from_slice(tail);
                self.len = tail.len();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Checks that no character was left incomplete (at the end of a line or of the input).
    fn finish(&mut self) -> Result<(), Utf8Error> {
        let pending = &self.pending[..std::mem::take(&mut self.len)];
        std::str::from_utf8(pending).map(|_| ())
    }
}

// ===== walking =====

/// Visits the entries under `dir` (depth first, sorted by name, symlinks not followed) as
/// paths relative to `dir`, down to `max_depth` levels: `visit(parent, name, path, kind)`,
/// where `parent` is the open directory that holds `name`. Each directory is opened beneath
/// its parent, refusing symlinks. `visit` returns whether to go on.
fn walk(
    dir: &Dir,
    sub: &Path,
    max_depth: usize,
    skip_git: bool,
    visit: &mut dyn FnMut(&Dir, &OsStr, &Path, EntryKind) -> bool,
) -> bool {
    if max_depth == 0 {
        return true;
    }
    let Ok(read) = dir.entries() else {
        return true;
    };
    let mut entries: Vec<_> = read
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name(), entry_kind(&e.file_type().ok()?))))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in entries {
        let path = sub.join(&name);
        if !visit(dir, &name, &path, kind) {
            return false;
        }
        if kind == EntryKind::Dir
            && !(skip_git && name == ".git")
            && let Ok(child) = dir.open_dir_nofollow(&name)
            && !walk(&child, &path, max_depth - 1, skip_git, visit)
        {
            return false;
        }
    }
    true
}

fn entry_kind(t: &FileType) -> EntryKind {
    if t.is_symlink() {
        EntryKind::Symlink
    } else if t.is_dir() {
        EntryKind::Dir
    } else if t.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

/// Refuses what is not a regular file, saying what it is.
fn regular_file(t: &FileType, path: &str) -> Result<(), FsError> {
    if t.is_file() {
        return Ok(());
    }
    if t.is_dir() {
        return Err(FsError::new(
            FsErrorKind::IsADirectory,
            format!("`{path}` is a directory, not a file"),
        ));
    }
    #[cfg(unix)]
    let what = {
        use cap_std::fs::FileTypeExt;
        if t.is_fifo() {
            "a FIFO (named pipe)"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_block_device() || t.is_char_device() {
            "a device"
        } else {
            "a special file"
        }
    };
    #[cfg(not(unix))]
    let what = "a special file";
    Err(FsError::new(
        FsErrorKind::NotARegularFile,
        format!("`{path}` is {what}, not a regular file"),
    ))
}

/// Whether `e` is the error of an open that would have led out of the root.
fn is_escape(e: &io::Error) -> bool {
    // NOTE: cap-std reports escapes as `PermissionDenied` with this message (and `openat2`'s
    // `EXDEV` the same way).
    e.kind() == io::ErrorKind::PermissionDenied
        && e.to_string()
            .contains("a path led outside of the filesystem")
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

// ===== names =====

/// The name shown for a file name `name`: itself when it is UTF-8 and reads back as itself
/// ([`decode_name`]); otherwise each byte that is not UTF-8 as `\xHH` and each `\` as `\\`.
fn encode_name(name: &OsStr) -> String {
    let bytes = name.as_encoded_bytes();
    if let Ok(s) = std::str::from_utf8(bytes)
        && decode_name(s).is_none()
    {
        return s.to_owned();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    out
}

/// The bytes a path component written escaped names: `Some` if it holds `\\` or `\xHH` with
/// `HH` from `80` to `FF` (`\\` → `\`, `\xHH` → the byte, any other `\` kept), `None` if it is
/// to be taken literally.
fn decode_name(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut escaped, mut i) = (false, 0);
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                escaped = true;
                i += 2;
                continue;
            }
            if b.get(i + 1) == Some(&b'x')
                && let Some(&[hi, lo]) = b.get(i + 2..i + 4)
                && let (Some(hi), Some(lo)) = (hex_digit(hi), hex_digit(lo))
                && hi >= 8
            {
                out.push(hi << 4 | lo);
                escaped = true;
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    escaped.then_some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(unix)]
fn name_from_bytes(bytes: Vec<u8>) -> OsString {
    std::os::unix::ffi::OsStringExt::from_vec(bytes)
}

#[cfg(not(unix))]
fn name_from_bytes(bytes: Vec<u8>) -> OsString {
    String::from_utf8_lossy(&bytes).into_owned().into()
}

/// `path` (absolute) with `.` and `..` removed lexically (`..` stops at `/`).
fn normalize_absolute(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The root cannot be resolved.
fn root_error(root: &Path, e: io::Error) -> FsError {
    let kind = if e.kind() == io::ErrorKind::NotFound {
        FsErrorKind::NotFound
    } else {
        FsErrorKind::Io
    };
    FsError::new(
        kind,
        format!(
            "the filesystem root {} is not accessible: {e}",
            root.display()
        ),
    )
    .with_source(e)
}

/// An I/O error while doing `action` to `path`, with the kind and message it deserves.
fn io_error(action: &str, path: &str, e: io::Error) -> FsError {
    let (kind, message) = match e.kind() {
        io::ErrorKind::NotFound => (FsErrorKind::NotFound, format!("`{path}` does not exist")),
        io::ErrorKind::NotADirectory => (
            FsErrorKind::NotADirectory,
            format!("`{path}` does not exist: a part of it is a file, not a directory"),
        ),
        io::ErrorKind::IsADirectory => (
            FsErrorKind::IsADirectory,
            format!("`{path}` is a directory, not a file"),
        ),
        _ => (FsErrorKind::Io, format!("cannot {action} `{path}`: {e}")),
    };
    FsError::new(kind, message).with_source(e)
}

#[cfg(test)]
mod confined_tests {
    use super::*;

    /// A small seeded generator (xorshift), so failures replay.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// A random file name, rich in the bytes the escape is about.
    fn name(rng: &mut Rng) -> Vec<u8> {
        const PIECES: &[&[u8]] = &[
            b"\\",
            b"\\\\",
            b"x",
            b"\\x",
            b"\\xE9",
            b"\\xe9",
            b"\\x41",
            b"E9",
            b"a",
            b".",
            b"\xe9",
            b"\xff",
            b"\xc3",
            b"\xa9",
            b"\xc3\xa9",
            b"\xe2\x82\xac",
            b"\xf0\x9f\x98",
            b"\x80",
            b"\\x8",
            b"F",
            b" ",
        ];
        let len = 1 + rng.below(8);
        let mut out: Vec<u8> = (0..len)
            .flat_map(|_| PIECES[rng.below(PIECES.len())].iter().copied())
            .collect();
        if rng.below(4) == 0 {
            out.push(1 + rng.below(254) as u8);
        }
        out.retain(|&b| b != b'/' && b != 0);
        if out.is_empty() { b"n".to_vec() } else { out }
    }

    #[cfg(unix)]
    #[test]
    fn every_name_shown_reads_back_as_itself() {
        use std::os::unix::ffi::OsStrExt;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let bytes = name(&mut rng);
            let shown = encode_name(OsStr::from_bytes(&bytes));
            let back = decode_name(&shown).unwrap_or_else(|| shown.as_bytes().to_vec());
            assert_eq!(back, bytes, "{bytes:?} shown as {shown:?}");
            if let Ok(s) = std::str::from_utf8(&bytes)
                && !s.contains('\\')
            {
                assert_eq!(shown, s, "a plain UTF-8 name is shown as it is");
            }
        }
        assert_eq!(
            encode_name(OsStr::from_bytes(b"caf\xe9.txt")),
            "caf\\xE9.txt"
        );
        assert_eq!(encode_name(OsStr::from_bytes(b"a\\b")), "a\\b");
        assert_eq!(encode_name(OsStr::from_bytes(b"caf\\xE9")), "caf\\\\xE9");
        assert_eq!(decode_name("caf\\xe9.txt"), Some(b"caf\xe9.txt".to_vec()));
        assert_eq!(decode_name("a\\x41"), None, "ASCII bytes are never escaped");
    }

    /// The lines of `input` read by [`next_line`] in pieces of `piece` bytes.
    fn lines(input: &[u8], piece: usize, max_chars: usize) -> Vec<(Vec<u8>, usize)> {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.1.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut reader = BufReader::with_capacity(piece, Pieces(input, piece));
        let mut out = Vec::new();
        let mut line = Vec::new();
        while let Ok(Some(omitted)) = next_line(&mut reader, &mut line, max_chars, None) {
            out.push((line.clone(), omitted));
        }
        out
    }

    #[test]
    fn lines_are_cut_while_reading_in_any_pieces() {
        let input = "héllo wörld\r\nab\n\nlast €€€".as_bytes();
        for piece in 1..8 {
            assert_eq!(
                lines(input, piece, 5),
                vec![
                    ("héllo\n".as_bytes().to_vec(), 6),
                    (b"ab\n".to_vec(), 0),
                    (b"\n".to_vec(), 0),
                    (b"last ".to_vec(), 3),
                ],
                "pieces of {piece}"
            );
            assert_eq!(
                lines(input, piece, usize::MAX)[0].0,
                "héllo wörld\r\n".as_bytes()
            );
        }
        // Bytes that are not UTF-8 are bounded too (at most 4 bytes a character).
        let junk = vec![0x80u8; 10_000];
        assert_eq!(lines(&junk, 100, 10)[0].0.len(), 40);
    }

    #[test]
    fn utf8_is_checked_across_pieces() {
        let text = "aé€😀\n".repeat(3);
        for piece in 1..6 {
            let mut check = Utf8Check::default();
            for chunk in text.as_bytes().chunks(piece) {
                check.feed(chunk).unwrap();
            }
            check.finish().unwrap();
        }
        let mut check = Utf8Check::default();
        check.feed(b"ok \xe2\x82").unwrap();
        assert!(check.finish().is_err(), "a cut character is an error");
        let mut check = Utf8Check::default();
        check.feed(b"\xe2").unwrap();
        assert!(check.feed(b"A").is_err());
    }
}

// ===== exec =====

async fn exec(root: &Path, command: &str, options: ExecOptions) -> Result<ExecOutput, FsError> {
    use tokio::io::AsyncReadExt;

    if command.trim().is_empty() {
        return Err(FsError::new(
            FsErrorKind::InvalidInput,
            "the command is empty",
        ));
    }
    let root = tokio::fs::canonicalize(root)
        .await
        .map_err(|e| root_error(root, e))?;
    let mut cmd = tokio::process::Command::new("sh");
    // NOTE: the redirection is on a line of its own so that sh reports syntax errors of the
    // command (parsed line by line) on the merged output too.
    cmd.arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(&root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    // Kills the tree when this future is dropped, however it ends.
    let mut tree = ProcessTree::prepare(cmd.as_std_mut());
    let mut child = cmd.spawn().map_err(|e| {
        FsError::new(FsErrorKind::Io, format!("cannot run `sh`: {e}")).with_source(e)
    })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    tree.started(child.id(), &[&stdout]);
    let mut capture = Capture::new(options.max_output);

    let run = async {
        let mut buf = vec![0u8; 8192];
        let mut eof = false;
        let status = loop {
            tokio::select! {
                read = stdout.read(&mut buf), if !eof => match read {
                    Ok(0) => eof = true,
                    Ok(n) => capture.push(&buf[..n]),
                    Err(e) => return Err(exec_io_error(e)),
                },
                status = child.wait() => break status.map_err(exec_io_error)?,
            }
        };
        // Whatever the shell left running would keep the output open.
        tree.kill();
        if !eof {
            let _ = tokio::time::timeout(EXIT_GRACE, async {
                while let Ok(n) = stdout.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    capture.push(&buf[..n]);
                }
            })
            .await;
        }
        Ok(status)
    };
    let status = match tokio::time::timeout(options.timeout, run).await {
        Ok(status) => status?,
        Err(_) => {
            tree.kill();
            // Kills the shell (again) and reaps it.
            let _ = child.kill().await;
            return Err(FsError::new(
                FsErrorKind::Timeout,
                format!(
                    "command timed out after {}; it and the processes it started were killed",
                    format_duration(options.timeout)
                ),
            ));
        }
    };
    let (output, truncated) = capture.finish();
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    Ok(ExecOutput::new(output, status.code())
        .with_signal(signal)
        .with_truncated(truncated))
}

fn exec_io_error(e: io::Error) -> FsError {
    FsError::new(FsErrorKind::Io, format!("cannot run the command: {e}")).with_source(e)
}

/// `2s`, `1.5s` or `300ms`.
pub(super) fn format_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The output of a command, capped: the first and the last bytes, and how many characters
/// there were.
struct Capture {
    max_chars: usize,
    /// Bytes kept at each end: enough for `max_chars` characters of up to 4 bytes.
    keep: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    chars: usize,
}

impl Capture {
    fn new(max_chars: usize) -> Self {
        Capture {
            max_chars,
            keep: max_chars.saturating_mul(4).max(4),
            head: Vec::new(),
            tail: VecDeque::new(),
            chars: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        // Count characters as the bytes that do not continue a UTF-8 sequence.
        self.chars += bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        let room = self.keep - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.keep {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.keep..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.keep);
        self.tail.drain(..excess);
    }

    /// The output, and whether some was left out.
    fn finish(self) -> (String, bool) {
        let head = String::from_utf8_lossy(&self.head).into_owned();
        if self.tail.is_empty() && head.chars().count() <= self.max_chars {
            return (head, false);
        }
        let tail = if self.tail.is_empty() {
            head.clone()
        } else {
            let tail: Vec<u8> = self.tail.into_iter().collect();
            // Drop a character cut in half at the start.
            let start = tail
                .iter()
                .position(|&b| (b & 0xC0) != 0x80)
                .unwrap_or(tail.len());
            String::from_utf8_lossy(&tail[start..]).into_owned()
        };
        let first_n = self.max_chars / 2;
        let last_n = self.max_chars - first_n;
        let first: String = head.chars().take(first_n).collect();
        let tail_chars = tail.chars().count();
        let last: String = tail
            .chars()
            .skip(tail_chars.saturating_sub(last_n))
            .collect();
        let omitted = self
            .chars
            .saturating_sub(first.chars().count() + last.chars().count());
        (
            format!("{first}\n\n... (truncated {omitted} characters) ...\n\n{last}"),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_short_output() {
        let mut c = Capture::new(10);
        c.push(b"hello");
        assert_eq!(c.finish(), ("hello".to_owned(), false));
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(10);
        for chunk in "abcdefghijklmnopqrstuvwxyz".as_bytes().chunks(3) {
            c.push(chunk);
        }
        let (out, truncated) = c.finish();
        assert!(truncated);
        assert_eq!(out, "abcde\n\n... (truncated 16 characters) ...\n\nvwxyz");
    }

    #[test]
    fn capture_overflowing_keeps_the_true_tail() {
        let mut c = Capture::new(4);
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        c.push(text.as_bytes());
        let (out, truncated) = c.finish();
        assert!(truncated);
        assert!(out.starts_with("ab\n"), "{out}");
        assert!(out.ends_with(&text[998..]), "{out}");
        assert!(out.contains("truncated 996 characters"), "{out}");
    }

    #[test]
    fn capture_counts_multibyte_characters() {
        let mut c = Capture::new(4);
        c.push("ééééé€€€€€".as_bytes());
        let (out, _) = c.finish();
        assert_eq!(out, "éé\n\n... (truncated 6 characters) ...\n\n€€");
    }

    #[test]
    fn normalize() {
        assert_eq!(
            normalize_absolute(Path::new("/a/./b/../c/../../..")),
            Path::new("/")
        );
        assert_eq!(
            normalize_absolute(Path::new("/a/b/../c")),
            Path::new("/a/c")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
