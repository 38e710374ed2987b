//! [`LocalFs`]: the local disk, confined to a root directory.

use std::{
    collections::VecDeque,
    ffi::OsString,
    fs,
    io::{self, BufRead, BufReader, Read},
    path::{Component, Path, PathBuf},
    process::Stdio,
    time::Duration,
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

/// A [`Backend`] over the local disk, confined to a root directory.
///
/// Every path is resolved against the root. A path is refused, with an error of kind
/// [`FsErrorKind::EscapesRoot`], when it leads out of the root:
///
/// - by `..` (`../x`, `a/../../x`),
/// - by being absolute and outside the root (an absolute path inside the root is fine),
/// - through a symlink whose target is outside the root. For a path that does not exist yet
///   (a new file), the deepest existing ancestor is resolved, so a new file cannot be created
///   through a symlinked directory either; a dangling symlink is followed by hand.
///
/// The file that is then read or written is the resolved one. (A process that changes the tree
/// between the check and the use can still race it: `LocalFs` protects against a model's
/// paths, not against a hostile local user.)
///
/// Text files must be UTF-8: reading or editing a file that is not fails with
/// [`FsErrorKind::NotUtf8`] rather than returning mangled text. [`grep`](Backend::grep) skips
/// binary files (a NUL in their first 8 KiB) and decodes other files lossily.
/// [`glob`](Backend::glob) and [`grep`](Backend::grep) do not follow symlinks while walking,
/// and grep does not walk into `.git` directories.
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
    /// The path to operate on (symlinks of its existing part resolved).
    real: PathBuf,
    /// The path relative to the root as the model named it, `/`-separated (`.` for the root).
    rel: String,
}

/// Resolves paths against the canonical root.
struct Resolver {
    /// The canonical root.
    root: PathBuf,
    /// The root as given (absolute), to accept absolute paths spelled with it.
    given: PathBuf,
}

impl Resolver {
    fn new(given: &Path) -> Result<Self, FsError> {
        let root = fs::canonicalize(given).map_err(|e| root_error(given, e))?;
        if !root.is_dir() {
            return Err(FsError::new(
                FsErrorKind::NotADirectory,
                format!("the filesystem root {} is not a directory", root.display()),
            ));
        }
        Ok(Resolver {
            root,
            given: given.to_path_buf(),
        })
    }

    fn escapes(&self, path: &str) -> FsError {
        FsError::new(
            FsErrorKind::EscapesRoot,
            format!("path `{path}` escapes the root {}", self.root.display()),
        )
    }

    /// The normalized components of `path` relative to the root, or an escape error.
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
                Component::Normal(s) => out.push(s.to_os_string()),
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
        let rel = if parts.is_empty() {
            ".".to_owned()
        } else {
            parts
                .iter()
                .map(|s| s.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        };
        Ok(Resolved { real, rel })
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
            return Err(FsError::new(
                FsErrorKind::EscapesRoot,
                format!(
                    "path `{path}` escapes the root {} through a symlink (to {})",
                    self.root.display(),
                    real.display()
                ),
            ));
        }
        let mut real = real;
        real.extend(rest.iter().rev());
        Ok(real)
    }

    /// The path of `sub` (relative to the resolved `base_rel`) relative to the root,
    /// `/`-separated.
    fn display_rel(&self, base_rel: &str, sub: &Path) -> String {
        let sub = sub
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        match (base_rel, sub.is_empty()) {
            (".", _) => sub,
            (_, true) => base_rel.to_owned(),
            _ => format!("{base_rel}/{sub}"),
        }
    }

    // ===== operations =====

    fn ls(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let r = self.resolve(path)?;
        let meta = fs::metadata(&r.real).map_err(|e| io_error("list", path, e))?;
        if !meta.is_dir() {
            return Err(FsError::new(
                FsErrorKind::NotADirectory,
                format!("`{path}` is a file, not a directory"),
            ));
        }
        let mut entries = Vec::new();
        for entry in fs::read_dir(&r.real).map_err(|e| io_error("list", path, e))? {
            let entry = entry.map_err(|e| io_error("list", path, e))?;
            // `DirEntry::metadata` does not follow symlinks.
            let meta = entry.metadata().map_err(|e| io_error("list", path, e))?;
            let kind = entry_kind(&meta.file_type());
            entries.push(DirEntry::new(
                entry.file_name().to_string_lossy(),
                kind,
                meta.len(),
            ));
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Resolves `path` and checks it is not a directory.
    fn resolve_file(&self, path: &str) -> Result<Resolved, FsError> {
        let r = self.resolve(path)?;
        if r.real.is_dir() {
            return Err(FsError::new(
                FsErrorKind::IsADirectory,
                format!("`{path}` is a directory, not a file"),
            ));
        }
        Ok(r)
    }

    fn read_file(&self, path: &str, range: ReadRange) -> Result<FileText, FsError> {
        let r = self.resolve_file(path)?;
        let file = fs::File::open(&r.real).map_err(|e| io_error("read", path, e))?;
        let mut reader = BufReader::new(file);
        let limit = range.limit.unwrap_or(usize::MAX);
        let (mut text, mut total, mut count) = (String::new(), 0usize, 0usize);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_error("read", path, e))?;
            if n == 0 {
                break;
            }
            total += 1;
            // NOTE: `\n` never occurs inside a multi-byte UTF-8 sequence, so checking line by
            // line checks the whole file.
            let s = std::str::from_utf8(&line).map_err(|e| {
                FsError::new(
                    FsErrorKind::NotUtf8,
                    format!("`{path}` is not valid UTF-8 text (line {total})"),
                )
                .with_source(e)
            })?;
            if total > range.offset && count < limit {
                text.push_str(s);
                count += 1;
            }
        }
        Ok(FileText::new(text, range.offset + 1, count, total))
    }

    fn write_file(&self, path: &str, content: &str) -> Result<String, FsError> {
        let r = self.resolve_file(path)?;
        if let Some(parent) = r.real.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| io_error("create the directories of", path, e))?;
        }
        fs::write(&r.real, content).map_err(|e| io_error("write", path, e))?;
        Ok(r.rel)
    }

    fn edit_file(&self, path: &str, old: &str, new: &str) -> Result<Edit, FsError> {
        if old.is_empty() {
            return Err(FsError::new(
                FsErrorKind::InvalidInput,
                "old_text is empty; give the exact text to replace",
            ));
        }
        let r = self.resolve_file(path)?;
        let bytes = fs::read(&r.real).map_err(|e| io_error("read", path, e))?;
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
        fs::write(&r.real, &content).map_err(|e| io_error("write", path, e))?;
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
        if !r.real.is_dir() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        walk(&r.real, Path::new(""), max_depth, false, &mut |sub, _| {
            let rel = self.display_rel(&r.rel, sub);
            if matcher.is_match(&rel) {
                out.push(rel);
            }
            true
        });
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
        let meta = fs::metadata(&r.real).map_err(|e| io_error("search", path, e))?;
        let mut search = Search {
            regex: &regex,
            include: include.as_ref(),
            max: options.max_matches,
            found: GrepMatches::default(),
        };
        if meta.is_dir() {
            walk(
                &r.real,
                Path::new(""),
                usize::MAX,
                true,
                &mut |sub, kind| {
                    if kind != EntryKind::File {
                        return true;
                    }
                    let rel = self.display_rel(&r.rel, sub);
                    // Unreadable files met while walking are skipped.
                    search.file(&r.real.join(sub), &rel).unwrap_or(true)
                },
            );
        } else {
            search
                .file(&r.real, &r.rel)
                .map_err(|e| io_error("search", path, e))?;
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
    /// Searches one file; returns whether to go on.
    fn file(&mut self, real: &Path, rel: &str) -> io::Result<bool> {
        if let Some(include) = self.include {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            if !include.is_match(name) {
                return Ok(true);
            }
        }
        let mut reader = BufReader::new(fs::File::open(real)?);
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
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                return Ok(true);
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

/// Visits the entries under `dir` (depth first, sorted by name, symlinks not followed) as
/// paths relative to `dir`, down to `max_depth` levels. `visit` returns whether to go on.
fn walk(
    dir: &Path,
    sub: &Path,
    max_depth: usize,
    skip_git: bool,
    visit: &mut dyn FnMut(&Path, EntryKind) -> bool,
) -> bool {
    if max_depth == 0 {
        return true;
    }
    let Ok(read) = fs::read_dir(dir.join(sub)) else {
        return true;
    };
    let mut entries: Vec<_> = read
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name(), entry_kind(&e.file_type().ok()?))))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind) in entries {
        let path = sub.join(&name);
        if !visit(&path, kind) {
            return false;
        }
        if kind == EntryKind::Dir
            && !(skip_git && name == ".git")
            && !walk(dir, &path, max_depth - 1, skip_git, visit)
        {
            return false;
        }
    }
    true
}

fn entry_kind(t: &fs::FileType) -> EntryKind {
    if t.is_symlink() {
        EntryKind::Symlink
    } else if t.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::File
    }
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
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
