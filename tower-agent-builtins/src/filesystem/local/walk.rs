//! Walking a directory tree beneath the root handle, and the file types met on the way.

use std::{
    ffi::OsStr,
    io::{self},
    path::Path,
};

use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, FileType};

use crate::filesystem::backend::{EntryKind, FsError, FsErrorKind};

/// Visits the entries under `dir` (depth first, sorted by name, symlinks not followed) as
/// paths relative to `dir`, down to `max_depth` levels: `visit(parent, name, path, kind)`,
/// where `parent` is the open directory that holds `name`. Each directory is opened beneath
/// its parent, refusing symlinks. `visit` returns whether to go on.
pub(super) fn walk(
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

pub(super) fn entry_kind(t: &FileType) -> EntryKind {
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
pub(super) fn regular_file(t: &FileType, path: &str) -> Result<(), FsError> {
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
pub(super) fn is_escape(e: &io::Error) -> bool {
    // NOTE: cap-std reports escapes as `PermissionDenied` with this message (and `openat2`'s
    // `EXDEV` the same way).
    e.kind() == io::ErrorKind::PermissionDenied
        && e.to_string()
            .contains("a path led outside of the filesystem")
}

pub(super) fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}
