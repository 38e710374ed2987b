//! The seven tools over a [`Backend`].

use std::{fmt::Write as _, sync::Arc, time::Duration};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    backend::{Backend, ExecOptions, FileText, FsError, FsErrorKind, GrepOptions, ReadRange},
    local::{GREP_LINE_CHARS, format_duration},
};
use tower_agent_core::{
    agent::SetupContext,
    context::RunContext,
    error::BoxError,
    message::ToolOutput,
    tool::{Tool, ToolRouter, typed_tool},
};

/// The settings of the tools (see the setters of [`Filesystem`](super::Filesystem)).
#[derive(Debug, Clone)]
pub(super) struct Config {
    pub(super) execute: bool,
    pub(super) exec_timeout: Duration,
    pub(super) max_exec_timeout: Duration,
    pub(super) max_output: usize,
    pub(super) read_limit: usize,
    pub(super) max_line_chars: usize,
    pub(super) grep_limit: usize,
    pub(super) glob_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            execute: true,
            exec_timeout: Duration::from_secs(120),
            max_exec_timeout: Duration::from_secs(600),
            max_output: 30_000,
            read_limit: 2_000,
            max_line_chars: 2_000,
            grep_limit: 200,
            glob_limit: 1_000,
        }
    }
}

/// Where tools get registered: a router or a setup context (the Claude Code tools' too).
pub(crate) trait Registry {
    fn add<T: Tool>(&mut self, tool: T);
}

impl Registry for ToolRouter {
    fn add<T: Tool>(&mut self, tool: T) {
        self.add_tool(tool);
    }
}

impl Registry for &SetupContext {
    fn add<T: Tool>(&mut self, tool: T) {
        self.add_tool(tool);
    }
}

/// Registers the tools (`execute` only if enabled).
pub(super) fn register(backend: &Arc<dyn Backend>, config: &Config, registry: &mut impl Registry) {
    registry.add(ls(Arc::clone(backend)));
    registry.add(read_file(Arc::clone(backend), config.clone()));
    registry.add(write_file(Arc::clone(backend)));
    registry.add(edit_file(Arc::clone(backend)));
    registry.add(glob(Arc::clone(backend), config.glob_limit));
    registry.add(grep(Arc::clone(backend), config.clone()));
    if config.execute {
        registry.add(execute(Arc::clone(backend), config.clone()));
    }
}

/// An error output for `e`, with advice for the model when there is some.
fn failure(e: &FsError) -> ToolOutput {
    let hint = match e.kind() {
        FsErrorKind::NotFound => "; use `ls` or `glob` to find the right path",
        FsErrorKind::EscapesRoot => "; use paths inside the root, relative to it",
        FsErrorKind::NotUtf8 => "; read_file and edit_file handle UTF-8 text files only",
        FsErrorKind::IsADirectory => "; use `ls` to list a directory",
        FsErrorKind::NotARegularFile => {
            "; the file tools read and write regular files only, not FIFOs, sockets or devices"
        }
        FsErrorKind::OldTextNotFound => {
            "; read the file again and copy old_text exactly, whitespace included, \
             without the line numbers read_file adds"
        }
        _ => "",
    };
    ToolOutput::error("", format!("{e}{hint}"))
}

type Out = Result<ToolOutput, BoxError>;

// ===== ls =====

#[derive(Deserialize, JsonSchema)]
struct LsArgs {
    /// The directory to list, relative to the root (default: the root).
    #[serde(default)]
    path: Option<String>,
}

fn ls(fs: Arc<dyn Backend>) -> impl Tool {
    typed_tool(
        "ls",
        "Lists a directory: a JSON array of {name, type (\"file\", \"dir\", \"symlink\" or \
         \"other\"), size (bytes)}, sorted by name. A name that is not UTF-8 is shown with \
         `\\xHH` escapes (and `\\` as `\\\\`); pass it back as shown.",
        move |args: LsArgs, _ctx: RunContext| {
            let fs = Arc::clone(&fs);
            async move {
                let path = args.path.unwrap_or_else(|| ".".to_owned());
                Out::Ok(match fs.ls(&path).await {
                    Ok(entries) => ToolOutput::json("", &serde_json::json!(entries)),
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

// ===== read_file =====

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// The file to read, relative to the root.
    path: String,
    /// The line number to start reading at (1-based; default 1). Use it with `limit` to read
    /// a large file in parts.
    #[serde(default)]
    offset: Option<usize>,
    /// How many lines to read at most (default 2000).
    #[serde(default)]
    limit: Option<usize>,
}

fn read_file(fs: Arc<dyn Backend>, config: Config) -> impl Tool {
    let description = format!(
        "Reads a UTF-8 text file. Lines are numbered like `cat -n` (line number, tab, text); \
         the numbers are not part of the file. Reads at most {} lines from `offset`; lines \
         longer than {} characters are cut.",
        config.read_limit, config.max_line_chars
    );
    typed_tool(
        "read_file",
        description,
        move |args: ReadArgs, _ctx: RunContext| {
            let fs = Arc::clone(&fs);
            let config = config.clone();
            async move {
                let start = args.offset.unwrap_or(1).max(1);
                let limit = args.limit.unwrap_or(config.read_limit);
                if limit == 0 {
                    return Out::Ok(ToolOutput::error("", "limit must be at least 1"));
                }
                let range =
                    ReadRange::lines(start - 1, limit).max_line_chars(config.max_line_chars);
                Out::Ok(match fs.read_file(&args.path, range).await {
                    Ok(text) => format_read(&args.path, &text, config.max_line_chars),
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

fn format_read(path: &str, text: &FileText, max_line_chars: usize) -> ToolOutput {
    if text.total_lines == 0 {
        return ToolOutput::text("", format!("(`{path}` is empty)"));
    }
    if text.line_count == 0 {
        return ToolOutput::error(
            "",
            format!(
                "offset {} is past the end of `{path}`, which has {} lines",
                text.first_line, text.total_lines
            ),
        );
    }
    let mut out = String::with_capacity(text.text.len() + 8 * text.line_count);
    // Lines the backend cut while reading, by line number.
    let mut cut_lines = text.cut_lines.iter().peekable();
    for (i, line) in text.text.lines().enumerate() {
        let n = text.first_line + i;
        while cut_lines.next_if(|(line, _)| *line < n).is_some() {}
        let omitted = cut_lines
            .next_if(|(line, _)| *line == n)
            .map_or(0, |(_, o)| *o);
        let (kept, rest) = match line.char_indices().nth(max_line_chars) {
            Some((cut, _)) => (&line[..cut], line[cut..].chars().count() + omitted),
            None => (line, omitted),
        };
        if rest > 0 {
            let _ = writeln!(
                out,
                "{n:>6}\t{kept} ... ({rest} more characters on this line)"
            );
        } else {
            let _ = writeln!(out, "{n:>6}\t{line}");
        }
    }
    if text.is_partial() {
        let last = text.first_line + text.line_count - 1;
        let _ = write!(
            out,
            "\n(lines {}-{last} of {}",
            text.first_line, text.total_lines
        );
        if last < text.total_lines {
            let _ = write!(out, "; read on with offset {}", last + 1);
        }
        out.push(')');
    }
    ToolOutput::text("", out)
}

// ===== write_file =====

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    /// The file to write, relative to the root. Missing parent directories are created.
    path: String,
    /// The whole new content of the file.
    content: String,
}

fn write_file(fs: Arc<dyn Backend>) -> impl Tool {
    typed_tool(
        "write_file",
        "Creates a file, or replaces its whole content; creates missing parent directories. \
         To change part of an existing file, use edit_file.",
        move |args: WriteArgs, ctx: RunContext| {
            let fs = Arc::clone(&fs);
            async move {
                Out::Ok(match fs.write_file(&args.path, &args.content).await {
                    Ok(path) => {
                        let out = format!(
                            "wrote {} bytes ({} lines) to `{path}`",
                            args.content.len(),
                            args.content.lines().count()
                        );
                        super::record_file(&ctx, path, Arc::from(args.content));
                        ToolOutput::text("", out)
                    }
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

// ===== edit_file =====

#[derive(Deserialize, JsonSchema)]
struct EditArgs {
    /// The file to edit, relative to the root.
    path: String,
    /// The exact text to replace (whitespace included, without read_file's line numbers).
    /// Its first occurrence is replaced: include enough surrounding lines to make it unique.
    old_text: String,
    /// The text to put in its place.
    new_text: String,
}

fn edit_file(fs: Arc<dyn Backend>) -> impl Tool {
    typed_tool(
        "edit_file",
        "Edits a text file: replaces the first occurrence of `old_text` (an exact match) with \
         `new_text`.",
        move |args: EditArgs, ctx: RunContext| {
            let fs = Arc::clone(&fs);
            async move {
                let edit = fs
                    .edit_file(&args.path, &args.old_text, &args.new_text)
                    .await;
                Out::Ok(match edit {
                    Ok(edit) => {
                        let mut out = format!("edited `{}`", edit.path);
                        if edit.occurrences > 1 {
                            let _ = write!(
                                out,
                                ": replaced the first of {} occurrences of old_text (include \
                                 more surrounding text to edit another one)",
                                edit.occurrences
                            );
                        }
                        super::record_file(&ctx, edit.path, Arc::from(edit.content));
                        ToolOutput::text("", out)
                    }
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

// ===== glob =====

#[derive(Deserialize, JsonSchema)]
struct GlobArgs {
    /// A glob pattern relative to the root, e.g. `src/**/*.rs` or `*.{md,txt}`. `*` does not
    /// cross `/`; `**` does.
    pattern: String,
}

fn glob(fs: Arc<dyn Backend>, limit: usize) -> impl Tool {
    typed_tool(
        "glob",
        "Finds files and directories whose path matches a glob pattern; one path per line, \
         relative to the root, sorted.",
        move |args: GlobArgs, _ctx: RunContext| {
            let fs = Arc::clone(&fs);
            async move {
                Out::Ok(match fs.glob(&args.pattern).await {
                    Ok(paths) if paths.is_empty() => {
                        ToolOutput::text("", format!("no paths match `{}`", args.pattern))
                    }
                    Ok(paths) => {
                        let mut out = paths
                            .iter()
                            .take(limit)
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join("\n");
                        if paths.len() > limit {
                            let _ = write!(
                                out,
                                "\n\n(showing the first {limit} of {} paths; use a narrower \
                                 pattern)",
                                paths.len()
                            );
                        }
                        ToolOutput::text("", out)
                    }
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

// ===== grep =====

/// Characters of a matching line shown at most.
const GREP_LINE_CHARS_SHOWN: usize = 500;

#[derive(Deserialize, JsonSchema)]
struct GrepArgs {
    /// A regular expression (Rust `regex` syntax), e.g. `fn\s+main` or `TODO|FIXME`.
    pattern: String,
    /// The file or directory to search, relative to the root (default: the root).
    #[serde(default)]
    path: Option<String>,
    /// Search only files whose name matches this glob, e.g. `*.rs` or `*.{ts,tsx}`.
    #[serde(default)]
    include: Option<String>,
    /// Ignore case (default false).
    #[serde(default)]
    case_insensitive: bool,
}

fn grep(fs: Arc<dyn Backend>, config: Config) -> impl Tool {
    let description = format!(
        "Searches file contents with a regular expression; one `path:line: text` line per \
         match, at most {}, each shown up to {GREP_LINE_CHARS_SHOWN} characters. A line is \
         matched on its first {GREP_LINE_CHARS} characters. Binary files, FIFOs and devices, \
         and `.git` directories are skipped.",
        config.grep_limit
    );
    typed_tool(
        "grep",
        description,
        move |args: GrepArgs, _ctx: RunContext| {
            let fs = Arc::clone(&fs);
            let limit = config.grep_limit;
            async move {
                let mut options = GrepOptions::default()
                    .case_insensitive(args.case_insensitive)
                    .max_matches(limit);
                options.path = args.path;
                options.include = args.include;
                Out::Ok(match fs.grep(&args.pattern, options).await {
                    Ok(found) if found.matches.is_empty() => {
                        ToolOutput::text("", format!("no matches for `{}`", args.pattern))
                    }
                    Ok(found) => {
                        let mut out = String::new();
                        for m in &found.matches {
                            let _ = write!(out, "{}:{}: ", m.path, m.line_number);
                            match m.line.char_indices().nth(GREP_LINE_CHARS_SHOWN) {
                                Some((cut, _)) => {
                                    let _ = writeln!(out, "{} ...", &m.line[..cut]);
                                }
                                None => {
                                    let _ = writeln!(out, "{}", m.line);
                                }
                            }
                        }
                        if found.truncated {
                            let _ = write!(
                                out,
                                "\n(stopped at {limit} matches; narrow the search with `path` \
                                 or `include`, or a more precise pattern)"
                            );
                        }
                        ToolOutput::text("", out.trim_end().to_owned())
                    }
                    Err(e) => failure(&e),
                })
            }
        },
    )
}

// ===== execute =====

#[derive(Deserialize, JsonSchema)]
struct ExecuteArgs {
    /// The shell command (run with `sh -c` in the root directory).
    command: String,
    /// Seconds the command may run before it is killed (see the tool's description for the
    /// default and the maximum).
    #[serde(default)]
    timeout: Option<u64>,
}

fn execute(fs: Arc<dyn Backend>, config: Config) -> impl Tool {
    let description = format!(
        "Runs a shell command with `sh -c` in the root directory, stdin closed. Returns its \
         output (stdout and stderr merged; at most {} characters, the middle cut out if longer) \
         and its exit code. It is killed after `timeout` seconds (default {}, at most {}), and \
         processes it leaves running are killed when it exits.",
        config.max_output,
        format_duration(config.exec_timeout),
        format_duration(config.max_exec_timeout)
    );
    typed_tool(
        "execute",
        description,
        move |args: ExecuteArgs, ctx: RunContext| {
            let fs = Arc::clone(&fs);
            let config = config.clone();
            async move {
                let timeout = match args.timeout {
                    Some(0) => {
                        return Out::Ok(ToolOutput::error("", "timeout must be at least 1 second"));
                    }
                    Some(secs) => Duration::from_secs(secs).min(config.max_exec_timeout),
                    None => config.exec_timeout,
                };
                let options = ExecOptions::default()
                    .timeout(timeout)
                    .max_output(config.max_output)
                    .env(tower_agent_core::agent::SessionEnv::of(&ctx).0);
                Out::Ok(match fs.exec(&args.command, options).await {
                    Ok(run) => {
                        let mut out = if run.output.is_empty() {
                            "(no output)\n".to_owned()
                        } else {
                            run.output
                        };
                        if !out.ends_with('\n') {
                            out.push('\n');
                        }
                        match (run.exit_code, run.signal) {
                            (Some(code), _) => {
                                let _ = write!(out, "[exit code: {code}]");
                            }
                            (None, Some(signal)) => {
                                let _ = write!(out, "[killed by signal {signal}]");
                            }
                            (None, None) => out.push_str("[exit status unknown]"),
                        }
                        ToolOutput::text("", out)
                            .with_metadata("exit_code", serde_json::json!(run.exit_code))
                    }
                    Err(e) if e.kind() == FsErrorKind::Timeout => ToolOutput::error(
                        "",
                        format!(
                            "{e}; if it needs longer, pass a larger `timeout` (at most {})",
                            format_duration(config.max_exec_timeout)
                        ),
                    ),
                    Err(e) => failure(&e),
                })
            }
        },
    )
}
