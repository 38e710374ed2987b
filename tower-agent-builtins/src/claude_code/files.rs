//! `Read`, `Write` and `Edit`, as Claude Code shapes them.

use std::{collections::HashSet, fmt::Write as _, future::Future, path::PathBuf, sync::Arc};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Shared, TOOL_RESPONSE, diff::structured_patch, paths::Paths};
use crate::filesystem::{EntryKind, FileText, FsError, FsErrorKind, ReadRange, record_file};
use tower_agent_core::{
    context::RunContext,
    error::BoxError,
    message::{ToolOutput, ToolSpec},
    tool::{Check, ObservableInput, Tool, ToolRequest, typed_tool},
};

type Out = Result<ToolOutput, BoxError>;

/// What `Write` and `Edit` tell the model of a file it has seen whole.
const CURRENT: &str = " (file state is current in your context — no need to Read it back)";
/// The most files a run remembers as read (past it, the oldest is not forgotten: new ones are
/// not added, and their edits read as of files not read).
const MAX_READ_FILES: usize = 10_000;

/// The files the run's model has read or written whole (absolute paths).
#[derive(Default)]
struct ReadFiles(HashSet<PathBuf>);

fn mark_read(ctx: &RunContext, path: PathBuf) {
    ctx.with_data(|d| {
        let files = &mut d.get_or_default::<ReadFiles>().0;
        if files.len() < MAX_READ_FILES {
            files.insert(path);
        }
    });
}

fn was_read(ctx: &RunContext, path: &PathBuf) -> bool {
    ctx.with_data(|d| d.get::<ReadFiles>().is_some_and(|f| f.0.contains(path)))
}

/// Claude Code's words for a file that is not there.
fn missing(ctx: &RunContext) -> String {
    format!(
        "File does not exist. Note: your current working directory is {}.",
        ctx.cwd().display()
    )
}

/// A refusal of Claude Code's input checks (`<tool_use_error>…</tool_use_error>`).
fn refused(text: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::error("", format!("<tool_use_error>{text}</tool_use_error>"))
}

// ===== Input checks =====

/// A Claude Code tool with the input check Claude Code runs before its PreToolUse hooks.
pub(super) struct Checking<T> {
    tool: T,
    shared: Arc<Shared>,
    check: fn(&Arc<Shared>, ToolRequest) -> Check,
}

impl<T: Tool> Tool for Checking<T> {
    const CHECKS_INPUT: bool = true;

    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }

    fn check(&self, req: ToolRequest) -> Check {
        (self.check)(&self.shared, req)
    }

    fn call(&self, req: ToolRequest) -> impl Future<Output = Result<ToolOutput, BoxError>> + Send {
        self.tool.call(req)
    }
}

/// `req` with what its hooks see of `file_path`: Claude Code shows them the path made
/// absolute (against the run's directory, `.` and `..` gone) and runs the tool on the path
/// as the model gave it.
fn observe_path(mut req: ToolRequest) -> ToolRequest {
    let Some(given) = req.call.arguments.get("file_path").and_then(Value::as_str) else {
        return req;
    };
    let abs = Paths::absolute(&req.ctx.cwd(), given);
    let abs = abs.to_string_lossy();
    if abs == given {
        return req;
    }
    let mut seen = req
        .extensions
        .remove::<ObservableInput>()
        .map_or_else(|| req.call.arguments.clone(), |o| o.0);
    seen["file_path"] = Value::String(abs.into_owned());
    req.extensions.insert(ObservableInput(seen));
    req
}

/// The check of `Read` and `Write`: the path their hooks see.
fn check_path(_shared: &Arc<Shared>, req: ToolRequest) -> Check {
    Check::Accept(observe_path(req))
}

// ===== Read =====

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// The absolute path to the file to read
    file_path: String,
    /// The line number to start reading from. Only provide if the file is too large to read
    /// at once
    #[serde(default)]
    offset: Option<usize>,
    /// The number of lines to read. Only provide if the file is too large to read at once.
    #[serde(default)]
    limit: Option<usize>,
}

pub(super) fn read(shared: Arc<Shared>) -> impl Tool {
    Checking {
        tool: read_tool(Arc::clone(&shared)),
        shared,
        check: check_path,
    }
}

fn read_tool(shared: Arc<Shared>) -> impl Tool {
    let description = format!(
        "Reads a file from the local filesystem. The file_path parameter must be an absolute \
         path (a relative one is taken from the working directory). By default, it reads up \
         to {lines} lines starting from the beginning of the file; you can give a line offset \
         and limit (at most {lines} lines are read at once). Lines longer than {chars} \
         characters are cut. Results are returned with line numbers starting at 1, as the \
         line number, a tab, and the line.",
        lines = shared.config.read_limit,
        chars = shared.config.max_line_chars,
    );
    typed_tool(
        "Read",
        description,
        move |args: ReadArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(read_call(&shared, args, &ctx).await) }
        },
    )
}

async fn read_call(shared: &Shared, args: ReadArgs, ctx: &RunContext) -> ToolOutput {
    let config = &shared.config;
    let abs = Paths::absolute(&ctx.cwd(), &args.file_path);
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args
        .limit
        .unwrap_or(config.read_limit)
        .min(config.read_limit);
    if limit == 0 {
        return ToolOutput::error("", "limit must be at least 1");
    }
    let range = ReadRange::lines(start - 1, limit).max_line_chars(config.max_line_chars);
    let text = match shared
        .backend
        .read_file(&shared.paths.backend(&abs), range)
        .await
    {
        Ok(text) => text,
        Err(e) if e.kind() == FsErrorKind::NotFound => return ToolOutput::error("", missing(ctx)),
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let read = Lines::of(&text, start, limit);
    let mut model = String::new();
    if read.total == 1 && text.total_lines == 0 {
        model.push_str(
            "<system-reminder>Warning: the file exists but the contents are empty.\
             </system-reminder>",
        );
    } else if read.lines.is_empty() {
        let _ = write!(
            model,
            "<system-reminder>Warning: the file exists but is shorter than the provided offset \
             ({start}). The file has {} lines.</system-reminder>",
            read.total
        );
    } else {
        for (i, line) in read.lines.iter().enumerate() {
            if i > 0 {
                model.push('\n');
            }
            let n = start.saturating_add(i);
            let _ = write!(model, "{n}\t{line}");
            if let Some((_, more)) = text.cut_lines.iter().find(|(l, _)| *l == n) {
                let _ = write!(model, "… ({more} more characters on this line)");
            }
        }
    }
    if start == 1 && read.lines.len() == read.total {
        mark_read(ctx, abs);
    }
    let response = json!({"type": "text", "file": {
        "filePath": args.file_path,
        "content": read.lines.join("\n"),
        "numLines": read.lines.len(),
        "startLine": start,
        "totalLines": read.total,
    }});
    ToolOutput::text("", model).with_metadata(TOOL_RESPONSE, response)
}

/// The lines of a read as Claude Code counts them: the file split at each `\n`, so a final
/// newline (and an empty file) ends with an empty line.
struct Lines<'a> {
    lines: Vec<&'a str>,
    total: usize,
}

impl<'a> Lines<'a> {
    fn of(text: &'a FileText, start: usize, limit: usize) -> Self {
        let extra = text.final_newline || text.total_lines == 0;
        let total = text.total_lines + usize::from(extra);
        let mut lines: Vec<&str> = text.text.lines().take(text.line_count).collect();
        // The empty line after the last newline, when the range reaches it.
        let next = start.saturating_add(lines.len());
        if extra && next == total && lines.len() < limit {
            lines.push("");
        }
        Lines { lines, total }
    }
}

// ===== Write =====

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    /// The absolute path to the file to write (must be absolute, not relative)
    file_path: String,
    /// The content to write to the file
    content: String,
}

pub(super) fn write(shared: Arc<Shared>) -> impl Tool {
    Checking {
        tool: write_tool(Arc::clone(&shared)),
        shared,
        check: check_path,
    }
}

fn write_tool(shared: Arc<Shared>) -> impl Tool {
    typed_tool(
        "Write",
        "Writes a file to the local filesystem: creates it (and its missing directories) or \
         overwrites it whole. Prefer Edit to change part of an existing file.",
        move |args: WriteArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(write_call(&shared, args, &ctx).await) }
        },
    )
}

async fn write_call(shared: &Shared, args: WriteArgs, ctx: &RunContext) -> ToolOutput {
    let abs = Paths::absolute(&ctx.cwd(), &args.file_path);
    let path = shared.paths.backend(&abs);
    let original = match original(shared, &path).await {
        Ok(original) => original,
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let written = match shared.backend.write_file(&path, &args.content).await {
        Ok(written) => written,
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    record_file(ctx, written, Arc::from(args.content.as_str()));
    mark_read(ctx, abs);
    let (kind, patch, model) = match &original {
        Original::Missing => (
            "create",
            json!([]),
            format!("File created successfully at: {}{CURRENT}", args.file_path),
        ),
        Original::Text(old) => (
            "update",
            structured_patch(old, &args.content),
            format!(
                "The file {} has been updated successfully.{CURRENT}",
                args.file_path
            ),
        ),
        Original::TooLarge => (
            "update",
            json!([]),
            format!(
                "The file {} has been updated successfully.{CURRENT}",
                args.file_path
            ),
        ),
    };
    let response = json!({
        "type": kind,
        "filePath": args.file_path,
        "content": args.content,
        "structuredPatch": patch,
        "originalFile": original.text(),
        "userModified": false,
    });
    ToolOutput::text("", model).with_metadata(TOOL_RESPONSE, response)
}

/// A file's content before a change.
enum Original {
    Missing,
    Text(String),
    /// Larger than [`Config::max_edit_bytes`](super::Config): not read, not diffed.
    TooLarge,
}

impl Original {
    fn text(&self) -> Value {
        match self {
            Original::Text(t) => Value::String(t.clone()),
            _ => Value::Null,
        }
    }
}

async fn original(shared: &Shared, path: &str) -> Result<Original, FsError> {
    let paths = [path.to_owned()];
    let stat = shared.backend.stat(&paths).await.pop().flatten();
    if let Some(stat) = stat
        && stat.kind == EntryKind::File
        && stat.size > shared.config.max_edit_bytes
    {
        return Ok(Original::TooLarge);
    }
    match shared.backend.read_file(path, ReadRange::all()).await {
        Ok(text) => Ok(Original::Text(text.text)),
        Err(e) if e.kind() == FsErrorKind::NotFound => Ok(Original::Missing),
        Err(e) => Err(e),
    }
}

// ===== Edit =====

#[derive(Deserialize, JsonSchema)]
struct EditArgs {
    /// The absolute path to the file to modify
    file_path: String,
    /// The text to replace
    old_string: String,
    /// The text to replace it with (must be different from old_string)
    new_string: String,
    /// Replace all occurrences of old_string (default false)
    #[serde(default)]
    replace_all: bool,
}

pub(super) fn edit(shared: Arc<Shared>) -> impl Tool {
    Checking {
        tool: edit_tool(Arc::clone(&shared)),
        shared,
        check: check_edit,
    }
}

/// Edit's check, as Claude Code's: `replace_all` filled in (hooks and the tool get it), the
/// path hooks see, then the edit tried on the file as it is (the refusals of [`plan_edit`]).
/// Input that is not Edit's is left to the call, which says what is wrong.
fn check_edit(shared: &Arc<Shared>, mut req: ToolRequest) -> Check {
    if let Some(args) = req.call.arguments.as_object_mut() {
        args.entry("replace_all").or_insert(Value::Bool(false));
    }
    let Ok(args) = serde_json::from_value::<EditArgs>(req.call.arguments.clone()) else {
        return Check::Accept(req);
    };
    let req = observe_path(req);
    let shared = Arc::clone(shared);
    Check::later(async move {
        match plan_edit(&shared, &args, &req.ctx).await {
            Ok(_) => Ok(req),
            Err(mut refusal) => {
                refusal.call_id = req.call.id;
                Err(refusal)
            }
        }
    })
}

fn edit_tool(shared: Arc<Shared>) -> impl Tool {
    let description = format!(
        "Performs exact string replacements in files: replaces old_string by new_string, which \
         must differ. The edit fails if old_string is not found, or is found more than once \
         without replace_all (give more surrounding context to make it unique). An empty \
         old_string creates a new file. Files of at most {} MiB are edited.",
        shared.config.max_edit_bytes >> 20
    );
    typed_tool(
        "Edit",
        description,
        move |args: EditArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(edit_call(&shared, args, &ctx).await) }
        },
    )
}

/// An edit as Claude Code checks it: the file's path for the backend, its content before
/// (`None`: a file to create) and after, or the refusal.
struct Plan {
    abs: PathBuf,
    path: String,
    original: Option<String>,
    updated: String,
}

async fn plan_edit(shared: &Shared, args: &EditArgs, ctx: &RunContext) -> Result<Plan, ToolOutput> {
    if args.old_string == args.new_string {
        return Err(refused(
            "No changes to make: old_string and new_string are exactly the same.",
        ));
    }
    let abs = Paths::absolute(&ctx.cwd(), &args.file_path);
    let path = shared.paths.backend(&abs);
    let original = match original(shared, &path).await {
        Ok(Original::Text(text)) => Some(text),
        Ok(Original::Missing) => None,
        Ok(Original::TooLarge) => {
            return Err(refused(format!(
                "File is too large to edit (more than {} MiB).",
                shared.config.max_edit_bytes >> 20
            )));
        }
        Err(e) => return Err(refused(e)),
    };
    let updated = match (&original, args.old_string.is_empty()) {
        (None, true) => args.new_string.clone(),
        (None, false) => return Err(refused(missing(ctx))),
        (Some(old), true) if old.is_empty() => args.new_string.clone(),
        (Some(_), true) => return Err(refused("Cannot create new file - file already exists.")),
        (Some(old), false) => replace(old, args, shared.config.max_edit_bytes)?,
    };
    Ok(Plan {
        abs,
        path,
        original,
        updated,
    })
}

async fn edit_call(shared: &Shared, args: EditArgs, ctx: &RunContext) -> ToolOutput {
    // NOTE: checked before the hooks too; the file may have changed since.
    let Plan {
        abs,
        path,
        original,
        updated,
    } = match plan_edit(shared, &args, ctx).await {
        Ok(plan) => plan,
        Err(refusal) => return refusal,
    };
    let written = match shared.backend.write_file(&path, &updated).await {
        Ok(written) => written,
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let seen = was_read(ctx, &abs);
    let original = original.unwrap_or_default();
    let mut response = json!({
        "filePath": args.file_path,
        "oldString": args.old_string,
        "newString": args.new_string,
        "originalFile": original,
        "structuredPatch": structured_patch(&original, &updated),
        "userModified": false,
        "replaceAll": args.replace_all,
    });
    if !seen {
        response["contentNotInModelContext"] = json!(true);
    }
    record_file(ctx, written, Arc::from(updated));
    let mut model = if args.replace_all {
        format!(
            "The file {} has been updated. All occurrences were successfully replaced.",
            args.file_path
        )
    } else {
        format!("The file {} has been updated successfully.", args.file_path)
    };
    if seen {
        model.push_str(CURRENT);
    }
    ToolOutput::text("", model).with_metadata(TOOL_RESPONSE, response)
}

/// `old` with `args.old_string` replaced, or Claude Code's refusal; a result over `max_bytes`
/// is refused (replacing all of many short strings by a long one could grow without bound).
fn replace(old: &str, args: &EditArgs, max_bytes: u64) -> Result<String, ToolOutput> {
    let found = old.matches(args.old_string.as_str()).take(2).count();
    if found > 0 {
        let times = if args.replace_all {
            old.matches(args.old_string.as_str()).count()
        } else {
            1
        };
        let grown = (args.new_string.len() as u64).saturating_sub(args.old_string.len() as u64);
        let size = (old.len() as u64).saturating_add(grown.saturating_mul(times as u64));
        if size > max_bytes {
            return Err(refused(format!(
                "The edited file would have {size} bytes, more than the {max_bytes} bytes a \
                 file may have to be edited."
            )));
        }
    }
    match found {
        0 => Err(refused(format!(
            "String to replace not found in file.\nString: {}",
            args.old_string
        ))),
        _ if args.replace_all => Ok(old.replace(&args.old_string, &args.new_string)),
        1 => Ok(old.replacen(&args.old_string, &args.new_string, 1)),
        _ => {
            let n = old.matches(args.old_string.as_str()).count();
            Err(refused(format!(
                "Found {n} matches of the string to replace, but replace_all is false. To \
                 replace all occurrences, set replace_all to true. To replace only one \
                 occurrence, please provide more context to uniquely identify the instance.\n\
                 String: {}",
                args.old_string
            )))
        }
    }
}
