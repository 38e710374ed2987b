//! `Bash`, as Claude Code shapes it: the shell's working directory kept between calls.

use std::{
    hash::{BuildHasher, Hasher},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Shared, TOOL_RESPONSE};
use crate::filesystem::{ExecOptions, FsErrorKind};
use tower_agent_core::{
    agent::SessionEnv,
    context::RunContext,
    error::BoxError,
    message::ToolOutput,
    tool::{Tool, typed_tool},
};

type Out = Result<ToolOutput, BoxError>;

/// The commands Claude Code expects no output of (`noOutputExpected` when every command of
/// the line is one of them).
const SILENT: &[&str] = &[
    "mv", "cp", "rm", "mkdir", "rmdir", "chmod", "chown", "chgrp", "touch", "ln", "cd", "export",
    "unset", "wait",
];

#[derive(Deserialize, JsonSchema)]
struct BashArgs {
    /// The command to execute
    command: String,
    /// Optional timeout in milliseconds
    #[serde(default)]
    timeout: Option<u64>,
    /// Clear, concise description of what this command does in active voice.
    #[serde(default)]
    #[allow(dead_code)] // for the model and the hooks (`tool_input.description`)
    description: Option<String>,
}

pub(super) fn bash(shared: Arc<Shared>) -> impl Tool {
    let c = &shared.config;
    let description = format!(
        "Executes a shell command (`sh -c`) and returns its output (stdout and stderr merged, \
         at most {} characters: the middle is cut out of a longer one). The working directory \
         persists between commands: a `cd` moves the session. Optional timeout in \
         milliseconds (default {} ms, at most {} ms); a command that outlives it is killed, \
         with everything it started.",
        c.max_output,
        c.bash_timeout.as_millis(),
        c.max_bash_timeout.as_millis(),
    );
    typed_tool(
        "Bash",
        description,
        move |args: BashArgs, ctx: RunContext| {
            let shared = Arc::clone(&shared);
            async move { Out::Ok(bash_call(&shared, args, &ctx).await) }
        },
    )
}

async fn bash_call(shared: &Shared, args: BashArgs, ctx: &RunContext) -> ToolOutput {
    let config = &shared.config;
    let timeout = match args.timeout {
        Some(0) => return ToolOutput::error("", "timeout must be at least 1 millisecond"),
        Some(ms) => Duration::from_millis(ms).min(config.max_bash_timeout),
        None => config.bash_timeout,
    };
    if args.command.contains('\0') {
        return ToolOutput::error("", "the command contains a NUL character");
    }
    let cwd = ctx.cwd();
    let marker = marker();
    let script = script(&shared.paths.backend(&cwd), &args.command, &marker);
    let options = ExecOptions::default()
        .timeout(timeout)
        .max_output(config.max_output)
        .env(SessionEnv::of(ctx).0);
    let run = match shared.backend.exec(&script, options).await {
        Ok(run) => run,
        Err(e) if e.kind() == FsErrorKind::Timeout => {
            return ToolOutput::error(
                "",
                format!("Command timed out after {} ms", timeout.as_millis()),
            );
        }
        Err(e) => return ToolOutput::error("", e.to_string()),
    };
    let (output, moved_to) = take_marker(&run.output, &marker);
    if let Some(dir) = moved_to
        && !same_dir(&dir, &cwd)
    {
        ctx.set_cwd(dir);
    }
    let stdout = trim(&output);
    let code = run.exit_code.or(run.signal.map(|s| 128 + s)).unwrap_or(-1);
    if code != 0 {
        let mut text = format!("Exit code {code}");
        if !stdout.is_empty() {
            text.push('\n');
            text.push_str(stdout);
        }
        return ToolOutput::error("", text).with_metadata("exit_code", json!(code));
    }
    let response = json!({
        "stdout": stdout,
        "stderr": "",
        "interrupted": false,
        "isImage": false,
        "noOutputExpected": no_output_expected(&args.command),
    });
    let text = if stdout.is_empty() {
        "(Bash completed with no output)"
    } else {
        stdout
    };
    ToolOutput::text("", text)
        .with_metadata(TOOL_RESPONSE, response)
        .with_metadata("exit_code", json!(0))
}

/// A line no command prints by chance: where the shell says its directory at the end.
fn marker() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("__tower_agent_cwd_{:016x}__", h.finish())
}

/// The script run: the command, in the session's directory, then the directory it ended in
/// (after the marker), keeping the command's exit status.
fn script(dir: &str, command: &str, marker: &str) -> String {
    format!(
        "cd -- {} || exit 1\neval {}\n__tower_agent_status=$?\nprintf '\\n{marker}%s\\n' \"$(pwd -P)\"\nexit $__tower_agent_status\n",
        quote(dir),
        quote(command),
    )
}

/// `s` in single quotes, for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The output without the marker's line, and the directory it names.
fn take_marker(output: &str, marker: &str) -> (String, Option<PathBuf>) {
    let Some(at) = output.rfind(&format!("\n{marker}")) else {
        return (output.to_owned(), None);
    };
    let rest = &output[at + 1 + marker.len()..];
    let (dir, after) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut out = String::with_capacity(output.len());
    out.push_str(&output[..at]);
    out.push_str(after);
    let dir = (!dir.is_empty()).then(|| PathBuf::from(dir));
    (out, dir)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// The output as Claude Code gives it: without its leading blank lines and its trailing
/// white space.
fn trim(output: &str) -> &str {
    let mut s = output;
    while let Some((line, rest)) = s.split_once('\n') {
        if !line.trim().is_empty() {
            break;
        }
        s = rest;
    }
    s.trim_end()
}

/// Whether each command of `line` (split at `;`, `&&`, `||`, `|`, `&` and newlines outside
/// quotes) is one that prints nothing when it works.
fn no_output_expected(line: &str) -> bool {
    let mut any = false;
    for part in split_commands(line) {
        let Some(first) = part.split_whitespace().next() else {
            continue;
        };
        any = true;
        if !SILENT.contains(&first) {
            return false;
        }
    }
    any
}

fn split_commands(line: &str) -> Vec<&str> {
    let (mut parts, mut start, mut quote) = (Vec::new(), 0, None);
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => {
                chars.next();
            }
            (None, ';' | '&' | '|' | '\n') => {
                parts.push(&line[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&line[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_trimmed_as_claude_code_does() {
        assert_eq!(trim("\n\n  x  \n\n"), "  x");
        assert_eq!(trim("a\n\nb\n\n\n"), "a\n\nb");
        assert_eq!(trim(""), "");
        assert_eq!(trim(" \n\t\n"), "");
    }

    #[test]
    fn silent_commands_expect_no_output() {
        assert!(no_output_expected("touch a; mkdir -p b && cd b"));
        assert!(!no_output_expected(
            "mkdir -p sub && cd sub && echo x >> ../ran.log"
        ));
        assert!(!no_output_expected("true"));
        assert!(!no_output_expected(""));
        assert!(no_output_expected("touch 'a;echo'"));
    }

    #[test]
    fn the_marker_line_is_taken_out() {
        let (out, dir) = take_marker("hi\n\nM/srv/x\n", "M");
        assert_eq!((out.as_str(), dir), ("hi\n", Some(PathBuf::from("/srv/x"))));
        let (out, dir) = take_marker("no marker", "M");
        assert_eq!((out.as_str(), dir), ("no marker", None));
    }
}
