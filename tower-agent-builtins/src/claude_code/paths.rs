//! Paths as Claude Code's tools take and show them: absolute, or relative to the run's working
//! directory; shown relative to it when under it.

use std::path::{Component, Path, PathBuf};

/// Where the backend's root is, in the paths the run sees.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    root: PathBuf,
}

impl Paths {
    pub(super) fn new(root: PathBuf) -> Self {
        let root = std::path::absolute(&root).unwrap_or(root);
        Paths {
            root: normalize(&root),
        }
    }

    /// `given` made absolute: relative to `cwd`, `.` and `..` removed.
    pub(super) fn absolute(cwd: &Path, given: &str) -> PathBuf {
        normalize(&cwd.join(given))
    }

    /// The backend's path for the absolute `abs`: relative to the root when inside it (`.` for
    /// the root), else `abs` itself (which the backend refuses as outside its root).
    pub(super) fn backend(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => abs.to_string_lossy().into_owned(),
        }
    }

    /// A path the backend gave (relative to its root) as Claude Code shows it: relative to
    /// `cwd` when under it, else absolute.
    pub(super) fn display(&self, cwd: &Path, rel: &str) -> String {
        let abs = self.root.join(rel);
        match abs.strip_prefix(cwd) {
            Ok(under) if !under.as_os_str().is_empty() => under.to_string_lossy().into_owned(),
            _ => abs.to_string_lossy().into_owned(),
        }
    }
}

/// `path` with `.` and `..` removed lexically (`..` stops at the root).
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_between_the_run_and_the_backend() {
        let p = Paths::new(PathBuf::from("/srv/project"));
        let cwd = Path::new("/srv/project/sub");
        let abs = Paths::absolute(cwd, "../notes.txt");
        assert_eq!(abs, Path::new("/srv/project/notes.txt"));
        assert_eq!(p.backend(&abs), "notes.txt");
        assert_eq!(p.backend(Path::new("/srv/project")), ".");
        assert_eq!(p.backend(Path::new("/etc/passwd")), "/etc/passwd");
        assert_eq!(p.display(cwd, "sub/a.rs"), "a.rs");
        assert_eq!(p.display(cwd, "b.rs"), "/srv/project/b.rs");
        assert_eq!(Paths::absolute(cwd, "/a/../../b"), Path::new("/b"));
    }
}
