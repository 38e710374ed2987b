//! FileChanged: the files a run's hooks watch, and the hooks that see them change.
//!
//! The watch list of a run is the names of the FileChanged hooks' exact matchers
//! ([`ToolMatcher::exact`](crate::matcher::ToolMatcher::exact); in settings, the
//! matcher's names split on `|`, as in the protocol), taken from the run's directory, and the
//! paths the run's CwdChanged and FileChanged hooks answered last
//! ([`CwdChanged::Watch`](super::CwdChanged::Watch), [`FileChanged::Watch`]). The start hook
//! layer takes each file's status as the run starts; the step hook layer compares after each
//! step's tool calls (whoever changed the file: a tool, a hook, another process), fires the
//! hooks for each change, and takes the status again. No thread or watcher runs between
//! steps: a file changed and changed back between two looks is one `change` (its status
//! differs) or nothing (if it is the same).

use std::{
    path::{Path, PathBuf},
    time::SystemTime,
};

use super::{HookFuture, HookResult, HookSetInner, failure::Failed};
use tower_agent_core::context::RunContext;

/// The most files a run watches (1,000): the matchers' names first, then the paths hooks
/// answered, in order; the rest are dropped with a warning.
pub const MAX_WATCHED: usize = 1_000;

/// What happened to a watched file (`event` in a FileChanged hook's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileEvent {
    /// `"change"`: it existed and its status changed.
    Change,
    /// `"add"`: it did not exist and now does.
    Add,
    /// `"unlink"`: it existed and now does not.
    Unlink,
}

impl FileEvent {
    /// The protocol value: `change`, `add` or `unlink`.
    pub const fn as_str(self) -> &'static str {
        match self {
            FileEvent::Change => "change",
            FileEvent::Add => "add",
            FileEvent::Unlink => "unlink",
        }
    }
}

/// What a FileChanged hook gets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileChangedInput {
    /// The file, as watched (absolute when the run's directory is).
    pub file_path: PathBuf,
    /// What happened to it.
    pub event: FileEvent,
}

impl FileChangedInput {
    /// `event` happened to `file_path`.
    pub fn new(file_path: impl Into<PathBuf>, event: FileEvent) -> Self {
        FileChangedInput {
            file_path: file_path.into(),
            event,
        }
    }

    /// The file's name (what the matcher is compared with).
    pub fn file_name(&self) -> &str {
        self.file_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    }
}

/// What a FileChanged hook answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FileChanged {
    /// Go on.
    #[default]
    Continue,
    /// Watch these files from now on (the protocol's `watchPaths`; relative paths are taken
    /// from the run's directory), replacing the paths hooks answered before; the matchers'
    /// names stay watched.
    Watch(Vec<PathBuf>),
}

impl HookResult<FileChanged> for FileChanged {
    fn into_hook_future(self) -> HookFuture<FileChanged> {
        HookFuture::ready(self)
    }
}

impl Failed for FileChanged {
    fn failed(_: String, _: bool) -> Option<Self> {
        Some(FileChanged::Continue)
    }
}

/// What a file's status says: changed when any part differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: (u64, u64),
    #[cfg(unix)]
    changed: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        #[cfg(unix)]
        inode: (meta.dev(), meta.ino()),
        #[cfg(unix)]
        changed: (meta.ctime(), meta.ctime_nsec()),
    })
}

/// A run's watched files (per hook set), with their status at the last look.
struct Watched {
    files: Vec<(PathBuf, Option<Stamp>)>,
}

impl HookSetInner {
    /// The watch list of the run: the matchers' names and `answered`, each with its status
    /// now.
    pub(super) fn watch(&self, ctx: &RunContext, answered: Vec<PathBuf>) {
        if self.on_file_changed.is_empty() {
            return;
        }
        let mut names = Vec::new();
        for (m, _) in &self.on_file_changed {
            m.exact_names(&mut names);
        }
        let mut paths: Vec<PathBuf> = names
            .iter()
            .map(PathBuf::from)
            .chain(answered.iter().cloned())
            .map(|p| ctx.cwd().join(p))
            .collect();
        dedup(&mut paths);
        if paths.len() > MAX_WATCHED {
            ctx.warn(format!(
                "FileChanged hooks watch {} files; only the first {MAX_WATCHED} are watched",
                paths.len()
            ));
            paths.truncate(MAX_WATCHED);
        }
        let files = paths
            .into_iter()
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect();
        let id = self.id;
        ctx.with_data(|d| d.insert_for(id, Watched { files }));
    }

    /// The watched files whose status changed since the last look (which this is).
    pub(super) fn file_changes(&self, ctx: &RunContext) -> Vec<FileChangedInput> {
        if self.on_file_changed.is_empty() {
            return Vec::new();
        }
        let id = self.id;
        ctx.with_data(|d| {
            let Some(watched) = d.get_for_mut::<Watched>(id) else {
                return Vec::new();
            };
            let mut changes = Vec::new();
            for (path, last) in &mut watched.files {
                let now = stamp(path);
                let event = match (&last, &now) {
                    (None, Some(_)) => FileEvent::Add,
                    (Some(_), None) => FileEvent::Unlink,
                    (Some(a), Some(b)) if a != b => FileEvent::Change,
                    _ => continue,
                };
                *last = now;
                changes.push(FileChangedInput::new(path.clone(), event));
            }
            changes
        })
    }

    /// The FileChanged hooks for each change, in order; the paths the last hook that answered
    /// [`FileChanged::Watch`] gave replace the answered paths.
    pub(super) async fn files_changed(&self, ctx: &RunContext, changes: Vec<FileChangedInput>) {
        let mut answered = None;
        for change in changes {
            for (m, f) in &self.on_file_changed {
                if !m.matches_name(change.file_name()) {
                    continue;
                }
                if let FileChanged::Watch(paths) = f(change.clone(), ctx.clone()).await {
                    answered = Some(paths);
                }
            }
        }
        if let Some(paths) = answered {
            self.watch(ctx, paths);
        }
    }
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
}
