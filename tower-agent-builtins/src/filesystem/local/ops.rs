//! The operations (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`) run on the
//! blocking pool through a [`Resolver`].

use std::{
    fs,
    io::{self, BufReader, Read, Seek, Write},
    path::Path,
};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::fs::OpenOptions;
use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use super::{
    BINARY_SNIFF, GREP_LINE_CHARS, MAX_EDIT_BYTES, READ_BUFFER,
    lines::{LineError, Utf8Check, next_line},
    names::encode_name,
    resolve::{Resolver, io_error},
    walk::{entry_kind, has_glob_meta, walk},
};
use crate::filesystem::backend::{
    DirEntry, Edit, EntryKind, FileStat, FileText, FsError, FsErrorKind, GrepMatch, GrepMatches,
    GrepOptions, ReadRange,
};

impl Resolver {
    pub(super) fn ls(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
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

    pub(super) fn read_file(&self, path: &str, range: ReadRange) -> Result<FileText, FsError> {
        let r = self.resolve(path)?;
        let file = self.open_file(&r, "read", path, OpenOptions::new().read(true))?;
        let mut reader = BufReader::with_capacity(READ_BUFFER, file);
        let limit = range.limit.unwrap_or(usize::MAX);
        let max_chars = range.max_line_chars.unwrap_or(usize::MAX);
        let (mut text, mut total, mut count) = (String::new(), 0usize, 0usize);
        let mut cut_lines = Vec::new();
        let mut line = Vec::new();
        let mut utf8 = Utf8Check::default();
        let mut final_newline = false;
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
            final_newline = line.last() == Some(&b'\n');
            if in_range {
                text.push_str(&String::from_utf8_lossy(&line));
                count += 1;
                if omitted > 0 {
                    cut_lines.push((total, omitted));
                }
            }
        }
        Ok(FileText::new(text, range.offset + 1, count, total)
            .with_cut_lines(cut_lines)
            .with_final_newline(final_newline))
    }

    pub(super) fn write_file(&self, path: &str, content: &str) -> Result<String, FsError> {
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

    pub(super) fn edit_file(&self, path: &str, old: &str, new: &str) -> Result<Edit, FsError> {
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

    pub(super) fn glob(&self, pattern: &str) -> Result<Vec<String>, FsError> {
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

    /// What each of `paths` is (see [`Backend::stat`](crate::filesystem::Backend::stat)).
    pub(super) fn stat(&self, paths: &[String]) -> Vec<Option<FileStat>> {
        paths
            .iter()
            .map(|path| {
                let r = self.resolve(path).ok()?;
                let meta = self.metadata(&r, "examine", path).ok()??;
                let modified = meta.modified().ok().map(|t| t.into_std());
                Some(FileStat::new(
                    entry_kind(&meta.file_type()),
                    meta.len(),
                    modified,
                ))
            })
            .collect()
    }

    pub(super) fn grep(
        &self,
        pattern: &str,
        options: &GrepOptions,
    ) -> Result<GrepMatches, FsError> {
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
            per_file: options.max_per_file.unwrap_or(usize::MAX),
            line_chars: options.max_line_chars.unwrap_or(usize::MAX),
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
    /// Matching lines kept per file.
    per_file: usize,
    /// Characters of a matching line kept.
    line_chars: usize,
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
        let (mut line, mut number, mut in_file) = (Vec::new(), 0usize, 0usize);
        loop {
            if in_file == self.per_file {
                return Ok(true);
            }
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
                let kept = match text.char_indices().nth(self.line_chars) {
                    Some((cut, _)) => &text[..cut],
                    None => text,
                };
                self.found
                    .matches
                    .push(GrepMatch::new(rel, number, kept.to_owned()));
                in_file += 1;
            }
        }
    }
}
