//! `Glob` and `Grep`, as Claude Code shapes them.

use std::{cmp::Reverse, fmt::Write as _, sync::Arc, time::Instant};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Shared, TOOL_RESPONSE, paths::Paths};
use crate::filesystem::{EntryKind, FsErrorKind, GrepMatch, GrepOptions};
use tower_agent_core::{
    context::RunContext,
    error::BoxError,
    message::ToolOutput,
    tool::{Tool, typed_tool},
};

type Out = Result<ToolOutput, BoxError>;

/// Characters of a matching line `Grep` shows; a longer line is omitted, as ripgrep's
/// `--max-columns 500` does.
const GREP_COLUMNS: usize = 500;

/// The paths (relative to the root) sorted by modification time — oldest first, or newest
/// first — then by path; `files_only` drops what is not a file.
async fn by_time(
    shared: &Shared,
    paths: Vec<String>,
    newest_first: bool,
    files_only: bool,
) -> Vec<String> {
    let stats = shared.backend.stat(&paths).await;
    let mut rows: Vec<_> = paths
        .into_iter()
        .zip(stats)
        .filter(|(_, s)| !files_only || s.is_none_or(|s| s.kind == EntryKind::File))
        .map(|(p, s)| (s.and_then(|s| s.modified), p))
        .collect();
    if newest_first {
        rows.sort_by(|a, b| Reverse(a.0).cmp(&Reverse(b.0)).then_with(|| a.1.cmp(&b.1)));
    } else {
        rows.sort();
    }
    rows.into_iter().map(|(_, p)| p).collect()
}

// ===== Glob =====

#[derive(Deserialize, JsonSchema)]
struct GlobArgs {
    /// The glob pattern to match files against
    pattern: String,
    /// The directory to search in. If not specified, the current working directory will be
    /// used.
    #[serde(default)]
    path: Option<String>,
}

pub(super) fn glob(shared: Arc<Shared>) -> impl Tool {
    let description = format!(
        "Fast file pattern matching: finds files by glob pattern (`**/*.js`, `src/**/*.ts`; a \
         pattern without `/` matches file names at any depth), hidden files included. Returns \
         matching file paths sorted by modification time, oldest first, at most {}.",
        shared.config.glob_limit
    );
    typed_tool(
        "Glob",
        description,
        move |args: GlobArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(glob_call(&shared, args, &ctx).await) }
        },
    )
}

async fn glob_call(shared: &Shared, args: GlobArgs, ctx: &RunContext) -> ToolOutput {
    let started = Instant::now();
    let cwd = ctx.cwd();
    let base = Paths::absolute(&cwd, args.path.as_deref().unwrap_or("."));
    let base = shared.paths.backend(&base);
    let pattern = if args.pattern.starts_with('/') {
        shared.paths.backend(&Paths::absolute(&cwd, &args.pattern))
    } else {
        let pattern = if args.pattern.contains('/') {
            args.pattern.clone()
        } else {
            format!("**/{}", args.pattern)
        };
        if base == "." {
            pattern
        } else {
            format!("{}/{pattern}", base.trim_end_matches('/'))
        }
    };
    let found = match shared.backend.glob(&pattern).await {
        Ok(found) => found,
        Err(e) if e.kind() == FsErrorKind::NotFound => Vec::new(),
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let found = by_time(shared, found, false, true).await;
    let limit = shared.config.glob_limit;
    let truncated = found.len() > limit;
    let total = found.len();
    let names: Vec<String> = found
        .iter()
        .take(limit)
        .map(|p| shared.paths.display(&cwd, p))
        .collect();
    let mut model = if names.is_empty() {
        "No files found".to_owned()
    } else {
        names.join("\n")
    };
    if truncated {
        model
            .push_str("\n(Results are truncated. Consider using a more specific path or pattern.)");
    }
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let response = json!({
        "filenames": names,
        "durationMs": ms,
        "numFiles": names.len(),
        "truncated": truncated,
        "totalMatches": total,
        "countIsComplete": true,
    });
    ToolOutput::text("", model).with_metadata(TOOL_RESPONSE, response)
}

// ===== Grep =====

/// `Grep`'s output modes.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Default)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// Matching lines.
    Content,
    /// The files that match.
    #[default]
    FilesWithMatches,
    /// Matches per file.
    Count,
}

#[derive(Deserialize, JsonSchema)]
struct GrepArgs {
    /// The regular expression pattern to search for in file contents
    pattern: String,
    /// File or directory to search in. Defaults to the current working directory.
    #[serde(default)]
    path: Option<String>,
    /// Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")
    #[serde(default)]
    glob: Option<String>,
    /// Output mode: "content" shows matching lines, "files_with_matches" shows file paths
    /// (default), "count" shows match counts.
    #[serde(default)]
    output_mode: Mode,
    /// Case insensitive search
    #[serde(default, rename = "-i")]
    case_insensitive: bool,
    /// Show line numbers in output (content mode; default true).
    #[serde(default, rename = "-n")]
    line_numbers: Option<bool>,
    /// Limit output to the first N lines / entries (default 250; 0 for no limit).
    #[serde(default)]
    head_limit: Option<usize>,
    /// Skip the first N lines / entries before applying head_limit (default 0).
    #[serde(default)]
    offset: Option<usize>,
}

pub(super) fn grep(shared: Arc<Shared>) -> impl Tool {
    let c = &shared.config;
    let description = format!(
        "Searches file contents with a regular expression (Rust `regex` syntax), hidden files \
         included. Output modes: `files_with_matches` (default; newest first), `content` \
         (matching lines, `path:line:text`), `count`. `glob` filters the files; `-i` ignores \
         case. At most {} entries are shown unless `head_limit` says otherwise; the search \
         stops after {} matching lines.",
        c.grep_limit, c.grep_cap
    );
    typed_tool(
        "Grep",
        description,
        move |args: GrepArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(grep_call(&shared, args, &ctx).await) }
        },
    )
}

/// The file globs of `Grep`'s `glob`: split at white space and at commas outside braces;
/// those with a `/` match the path under the searched directory, the others the file name.
struct Filter {
    include: Option<String>,
    paths: Option<GlobSet>,
}

fn filter(glob: Option<&str>) -> Result<Filter, String> {
    let mut names = Vec::new();
    let mut paths = Vec::new();
    for word in glob.unwrap_or_default().split_whitespace() {
        let parts: Vec<&str> = if word.contains('{') {
            vec![word]
        } else {
            word.split(',').filter(|p| !p.is_empty()).collect()
        };
        for p in parts {
            if p.contains('/') {
                paths.push(p.to_owned());
            } else {
                names.push(p.to_owned());
            }
        }
    }
    let include = match names.len() {
        0 => None,
        1 => names.pop(),
        _ => Some(format!("{{{}}}", names.join(","))),
    };
    let paths = if paths.is_empty() {
        None
    } else {
        let mut set = GlobSetBuilder::new();
        for p in &paths {
            let g = GlobBuilder::new(p.trim_start_matches("./"))
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid glob pattern `{p}`: {e}"))?;
            set.add(g);
        }
        Some(set.build().map_err(|e| e.to_string())?)
    };
    Ok(Filter { include, paths })
}

async fn grep_call(shared: &Shared, args: GrepArgs, ctx: &RunContext) -> ToolOutput {
    let cwd = ctx.cwd();
    let base = Paths::absolute(&cwd, args.path.as_deref().unwrap_or("."));
    let base = shared.paths.backend(&base);
    let filter = match filter(args.glob.as_deref()) {
        Ok(f) => f,
        Err(e) => return ToolOutput::error("", e),
    };
    let mut options = GrepOptions::default()
        .path(base.clone())
        .case_insensitive(args.case_insensitive)
        .max_matches(shared.config.grep_cap)
        .max_line_chars(GREP_COLUMNS + 1);
    if args.output_mode == Mode::FilesWithMatches {
        options = options.max_per_file(1);
    }
    options.include = filter.include;
    let found = match shared.backend.grep(&args.pattern, options).await {
        Ok(found) => found,
        Err(e) if e.kind() == FsErrorKind::NotFound => {
            return ToolOutput::error("", format!("Path does not exist: {base}"));
        }
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let prefix = if base == "." {
        String::new()
    } else {
        format!("{base}/")
    };
    let matches: Vec<GrepMatch> = found
        .matches
        .into_iter()
        .filter(|m| {
            filter.paths.as_ref().is_none_or(|set| {
                set.is_match(m.path.strip_prefix(prefix.as_str()).unwrap_or(&m.path))
            })
        })
        .collect();
    let page = Page {
        limit: args.head_limit.unwrap_or(shared.config.grep_limit),
        offset: args.offset.unwrap_or(0),
    };
    let show = |p: &str| shared.paths.display(&cwd, p);
    let (model, response) = match args.output_mode {
        Mode::FilesWithMatches => {
            let mut files: Vec<String> = Vec::new();
            for m in &matches {
                if files.last() != Some(&m.path) {
                    files.push(m.path.clone());
                }
            }
            let files = by_time(shared, files, true, false).await;
            files_mode(files.iter().map(|p| show(p)).collect(), page)
        }
        Mode::Content => {
            let numbers = args.line_numbers.unwrap_or(true);
            let lines = matches
                .iter()
                .map(|m| content_line(m, &show(&m.path), numbers));
            content_mode(lines.collect(), page)
        }
        Mode::Count => {
            let mut counts: Vec<(String, usize)> = Vec::new();
            for m in &matches {
                match counts.last_mut() {
                    Some((p, n)) if *p == m.path => *n += 1,
                    _ => counts.push((m.path.clone(), 1)),
                }
            }
            let counts = counts.into_iter().map(|(p, n)| (show(&p), n)).collect();
            count_mode(counts, page)
        }
    };
    ToolOutput::text("", model).with_metadata(TOOL_RESPONSE, response)
}

fn content_line(m: &GrepMatch, path: &str, numbers: bool) -> String {
    let text = if m.line.chars().count() > GREP_COLUMNS {
        "[Omitted long matching line]"
    } else {
        m.line.as_str()
    };
    if numbers {
        format!("{path}:{}:{text}", m.line_number)
    } else {
        format!("{path}:{text}")
    }
}

/// `head_limit` and `offset`.
#[derive(Clone, Copy)]
struct Page {
    limit: usize,
    offset: usize,
}

impl Page {
    /// The entries shown, and the response's `appliedLimit` / `appliedOffset` and the words
    /// that say them (`limit: 2, offset: 1`), if any.
    fn apply<T>(self, items: Vec<T>, response: &mut Value) -> (Vec<T>, Option<String>) {
        let rest: Vec<T> = items.into_iter().skip(self.offset).collect();
        let (shown, limited) = if self.limit == 0 || rest.len() <= self.limit {
            (rest, false)
        } else {
            (rest.into_iter().take(self.limit).collect(), true)
        };
        let mut words = Vec::new();
        if limited {
            response["appliedLimit"] = json!(self.limit);
            words.push(format!("limit: {}", self.limit));
        }
        if self.offset > 0 {
            response["appliedOffset"] = json!(self.offset);
            words.push(format!("offset: {}", self.offset));
        }
        (shown, (!words.is_empty()).then(|| words.join(", ")))
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn files_mode(files: Vec<String>, page: Page) -> (String, Value) {
    let total = files.len();
    let mut response = json!({"mode": "files_with_matches", "totalFiles": total});
    let (shown, paged) = page.apply(files, &mut response);
    response["numFiles"] = json!(shown.len());
    let model = if shown.is_empty() {
        "No files found".to_owned()
    } else {
        let mut m = format!("Found {}", plural(shown.len(), "file", "files"));
        if let Some(p) = &paged {
            let _ = write!(m, " {p}");
        }
        let _ = write!(m, "\n{}", shown.join("\n"));
        m
    };
    response["filenames"] = json!(shown);
    (model, response)
}

fn content_mode(lines: Vec<String>, page: Page) -> (String, Value) {
    let total = lines.len();
    let mut response = json!({"mode": "content", "numFiles": 0, "filenames": [],
        "totalLines": total});
    let (shown, paged) = page.apply(lines, &mut response);
    let content = shown.join("\n");
    response["numLines"] = json!(shown.len());
    let mut model = if content.is_empty() {
        "No matches found".to_owned()
    } else {
        content.clone()
    };
    if let Some(p) = paged {
        let _ = write!(model, "\n\n[Showing results with pagination = {p}]");
    }
    response["content"] = json!(content);
    (model, response)
}

fn count_mode(counts: Vec<(String, usize)>, page: Page) -> (String, Value) {
    let files = counts.len();
    let matches: usize = counts.iter().map(|(_, n)| n).sum();
    let mut response = json!({"mode": "count", "filenames": [], "numFiles": files,
        "numMatches": matches});
    let (shown, paged) = page.apply(counts, &mut response);
    let content: Vec<String> = shown.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    let content = content.join("\n");
    let mut model = if content.is_empty() {
        "No matches found".to_owned()
    } else {
        content.clone()
    };
    let _ = write!(
        model,
        "\n\nFound {} total {} across {}.",
        matches,
        if matches == 1 {
            "occurrence"
        } else {
            "occurrences"
        },
        plural(files, "file", "files"),
    );
    if let Some(p) = paged {
        let _ = write!(model, " with pagination = {p}");
    }
    response["content"] = json!(content);
    (model, response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_into_names_and_paths() {
        let f = filter(Some("*.ts,*.tsx src/**/*.rs")).unwrap();
        assert_eq!(f.include.as_deref(), Some("{*.ts,*.tsx}"));
        assert!(f.paths.unwrap().is_match("src/a/b.rs"));
        let f = filter(Some("*.{ts,tsx}")).unwrap();
        assert_eq!(f.include.as_deref(), Some("*.{ts,tsx}"));
        assert!(filter(Some("src/[")).is_err());
    }

    #[test]
    fn pagination_reads_as_claude_codes() {
        let page = Page {
            limit: 1,
            offset: 1,
        };
        let (model, response) = count_mode(
            vec![("a".into(), 2), ("b".into(), 3), ("c".into(), 1)],
            page,
        );
        assert_eq!(
            model,
            "b:3\n\nFound 6 total occurrences across 3 files. with pagination = limit: 1, offset: 1"
        );
        assert_eq!(response["appliedLimit"], 1);
        let (model, _) = files_mode(
            vec!["x".into(), "y".into()],
            Page {
                limit: 1,
                offset: 0,
            },
        );
        assert_eq!(model, "Found 1 file limit: 1\nx");
    }
}
