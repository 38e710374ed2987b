//! Path resolution: a path the model named resolved inside the root, refused when it leads
//! out, and opened beneath the root handle; the errors it fails with.

use std::{
    ffi::OsString,
    fs,
    io::{self},
    path::{Component, Path, PathBuf},
};

use cap_fs_ext::OpenOptionsSyncExt;
use cap_std::{
    ambient_authority,
    fs::{Dir, Metadata, OpenOptions},
};

use super::{
    MAX_SYMLINK_HOPS,
    names::{decode_name, encode_name, name_from_bytes},
    walk::{is_escape, regular_file},
};
use crate::filesystem::backend::{FsError, FsErrorKind};

/// A path resolved inside the root.
pub(super) struct Resolved {
    /// The path relative to the root, symlinks of its existing part resolved (`.` for the
    /// root): what is opened beneath the root handle.
    pub(super) inner: PathBuf,
    /// The path relative to the root as the model named it, `/`-separated, names escaped
    /// (`.` for the root).
    pub(super) rel: String,
}

/// Resolves paths against the canonical root, and opens them beneath it.
pub(super) struct Resolver {
    /// The canonical root.
    pub(super) root: PathBuf,
    /// The root as given (absolute), to accept absolute paths spelled with it.
    pub(super) given: PathBuf,
    /// A handle on the root: every file operation goes through it.
    pub(super) dir: Dir,
}

impl Resolver {
    pub(super) fn new(given: &Path) -> Result<Self, FsError> {
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

    pub(super) fn escapes(&self, path: &str) -> FsError {
        FsError::new(
            FsErrorKind::EscapesRoot,
            format!("path `{path}` escapes the root {}", self.root.display()),
        )
    }

    /// The normalized components of `path` relative to the root (escaped names decoded), or
    /// an escape error.
    pub(super) fn relative(&self, path: &str) -> Result<Vec<OsString>, FsError> {
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

    pub(super) fn resolve(&self, path: &str) -> Result<Resolved, FsError> {
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
    pub(super) fn confine(
        &self,
        path: &str,
        candidate: PathBuf,
        hops: u32,
    ) -> Result<PathBuf, FsError> {
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
    pub(super) fn display_rel(&self, base_rel: &str, sub: &Path) -> String {
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
    pub(super) fn op_error(&self, action: &str, path: &str, e: io::Error) -> FsError {
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
    pub(super) fn metadata(
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
    pub(super) fn open_file(
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
}

/// `path` (absolute) with `.` and `..` removed lexically (`..` stops at `/`).
pub(super) fn normalize_absolute(path: &Path) -> PathBuf {
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
pub(super) fn root_error(root: &Path, e: io::Error) -> FsError {
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
pub(super) fn io_error(action: &str, path: &str, e: io::Error) -> FsError {
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
mod tests {
    use super::*;

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
}
