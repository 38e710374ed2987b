//! [`SlashCommands`]: a layer of the start stack that expands a `/name args` prompt from a
//! command file, as Claude Code's custom slash commands do (`.claude/commands/*.md`), and
//! records the expansion so UserPromptExpansion hooks see it.
//!
//! # Example
//!
//! ```
//! use tower_agent_builtins::commands::SlashCommands;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! std::fs::write(
//!     dir.path().join("review.md"),
//!     "---\ndescription: Review a file\n---\nReview $ARGUMENTS for bugs; be brief.\n",
//! )?;
//! let model = ScriptedModel::new().text("Looks fine.").recording();
//! let agent = Agent::builder()
//!     .model(model.clone())
//!     .start_layer(SlashCommands::new().dir(dir.path(), "projectSettings"))
//!     .build();
//! agent.run("/review src/lib.rs").await?;
//! assert_eq!(
//!     model.requests()[0].messages.last().unwrap().text(),
//!     "Review src/lib.rs for bugs; be brief.\n"
//! );
//! # Ok(())
//! # }
//! ```
//!
//! # Expansion
//!
//! A prompt is a command when it starts with `/` and a name made of letters, digits, `_` and
//! `-`, in parts separated by `:` (`/frontend:test` is `frontend/test.md`); what follows the
//! name, after white space, are its arguments. The directories are searched in the order
//! given (relative ones from the run's directory); the first `<name>.md` found that is a
//! regular file of at most [`MAX_COMMAND_FILE`] is the command. Its front matter (between
//! two `---` lines at the top) is dropped; in the rest, `$ARGUMENTS` becomes the arguments and
//! `$1` … `$9` the arguments split on white space (an argument missing is empty). A body
//! with no placeholder gets the arguments, if any, after a blank line. A prompt that names no
//! command, or whose file cannot be read (a warning says why), goes on as typed. The shell
//! commands Claude Code runs while it expands a file (a `!` followed by a command in
//! backquotes, with `allowed-tools` permitting it) are not run: they stay in the prompt as
//! written, and PreSkillShellCommand hooks, which Claude Code fires before each, never fire.
//!
//! The expanded prompt replaces the typed one ([`RunStart::expand`]): the model and the thread
//! see it, and the start's [`expansion`](RunStart::expansion) tells the layers outside what
//! was typed. The start hook layer of a `tower_agent::layers::hooks::HookSet`, which
//! [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks) installs outermost, fires the
//! UserPromptExpansion hooks then (after the UserPromptSubmit hooks saw the typed prompt).

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use tower_agent_core::agent::start::{ExpansionKind, PromptExpansion, RunStart};

/// The largest command file read (256 KiB); a larger one is not a command (with a warning).
pub const MAX_COMMAND_FILE: u64 = 256 * 1024;

/// Expands `/name args` prompts from command files: see the [module docs](self).
#[derive(Clone, Default)]
pub struct SlashCommands {
    dirs: Arc<[(PathBuf, String)]>,
}

impl SlashCommands {
    /// No directory yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// This layer also looking in `dir` (after the directories given before), whose commands
    /// come from `source` (`command_source` of a UserPromptExpansion hook's input). Claude
    /// Code 2.1.328 says `projectSettings` for a project's `.claude/commands` (measured:
    /// `tests/reference`), and by the same pattern `userSettings` for the user's.
    #[must_use]
    pub fn dir(self, dir: impl Into<PathBuf>, source: impl Into<String>) -> Self {
        let mut dirs = self.dirs.to_vec();
        dirs.push((dir.into(), source.into()));
        SlashCommands { dirs: dirs.into() }
    }
}

impl fmt::Debug for SlashCommands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlashCommands")
            .field("dirs", &self.dirs)
            .finish()
    }
}

impl<S> Layer<S> for SlashCommands {
    type Service = SlashCommandsService<S>;

    fn layer(&self, inner: S) -> SlashCommandsService<S> {
        SlashCommandsService {
            inner,
            commands: self.clone(),
        }
    }
}

/// The service of [`SlashCommands`]: the start, expanded, goes to the inner service (whose
/// future it answers).
#[derive(Clone, Debug)]
pub struct SlashCommandsService<S> {
    inner: S,
    commands: SlashCommands,
}

impl<S> Service<RunStart> for SlashCommandsService<S>
where
    S: Service<RunStart, Response = RunStart>,
{
    type Response = RunStart;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, start: RunStart) -> S::Future {
        let start = match start.prompt.as_deref().and_then(parse) {
            Some((name, args)) => match self.commands.find(&start, name) {
                Some((body, source)) => {
                    let expansion = PromptExpansion::new(
                        ExpansionKind::SlashCommand,
                        name,
                        args,
                        source,
                        start.prompt.clone().unwrap_or_default(),
                    );
                    let expanded = substitute(&body, args);
                    start.expand(expansion, expanded)
                }
                None => start,
            },
            None => start,
        };
        self.inner.call(start)
    }
}

impl SlashCommands {
    /// The body of the command `name` (its front matter dropped) and its source.
    fn find(&self, start: &RunStart, name: &str) -> Option<(String, String)> {
        let mut rel = PathBuf::new();
        for part in name.split(':') {
            rel.push(part);
        }
        rel.set_extension("md");
        for (dir, source) in self.dirs.iter() {
            let path = start.ctx.cwd().join(dir).join(&rel);
            match read(&path) {
                Ok(Some(text)) => {
                    return Some((strip_front_matter(&text).to_owned(), source.clone()));
                }
                Ok(None) => {}
                Err(why) => {
                    start
                        .ctx
                        .warn(format!("command `/{name}` ({}): {why}", path.display()));
                    return None;
                }
            }
        }
        None
    }
}

/// The file's text; `None` if there is no file. Read as the crate reads any file it does not
/// own ([`bounded`](tower_agent_os::bounded)): a FIFO or device is refused without being waited on,
/// even one swapped in for the file, and nothing past the cap is read.
fn read(path: &Path) -> Result<Option<String>, String> {
    match tower_agent_os::bounded::read_regular(path, MAX_COMMAND_FILE) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "not UTF-8".into()),
        Err(tower_agent_os::bounded::ReadError::NotFound) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}

/// `/name args`: the name and the arguments, if the prompt is a command.
fn parse(prompt: &str) -> Option<(&str, &str)> {
    let rest = prompt.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    let valid = name.split(':').all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    valid.then(|| (name, rest[end..].trim()))
}

/// The text after the front matter, if the file starts with one.
fn strip_front_matter(text: &str) -> &str {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if line.trim_end() == "---" {
            return &rest[at..];
        }
    }
    text
}

/// `body` with `$ARGUMENTS` and `$1` … `$9` replaced; the arguments after a blank line when
/// it has no placeholder.
fn substitute(body: &str, args: &str) -> String {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + args.len());
    let mut placeholder = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            rest = tail;
            placeholder = true;
        } else if let Some(d) = after
            .chars()
            .next()
            .and_then(|c| c.to_digit(10))
            .filter(|d| *d > 0)
        {
            out.push_str(words.get(d as usize - 1).copied().unwrap_or(""));
            rest = &after[1..];
            placeholder = true;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !placeholder && !args.is_empty() {
        out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
        out.push_str(args);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_arguments() {
        assert_eq!(
            parse("/review src/a.rs  b"),
            Some(("review", "src/a.rs  b"))
        );
        assert_eq!(parse("/frontend:test"), Some(("frontend:test", "")));
        assert_eq!(parse("/../etc/passwd"), None);
        assert_eq!(parse("/a::b x"), None);
        assert_eq!(parse("review"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn substitutes_placeholders() {
        assert_eq!(
            substitute("Fix $1 in $2 ($ARGUMENTS)", "a b"),
            "Fix a in b (a b)"
        );
        assert_eq!(substitute("cost $5 and $", ""), "cost  and $");
        assert_eq!(substitute("Body\n", "x y"), "Body\n\nx y");
        assert_eq!(substitute("Body", ""), "Body");
        assert_eq!(strip_front_matter("---\na: b\n---\nText"), "Text");
        assert_eq!(strip_front_matter("---\nunclosed"), "---\nunclosed");
    }
}
