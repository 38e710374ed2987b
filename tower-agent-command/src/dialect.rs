//! [`Dialect`]: the configuration format a handler was written in (Claude Code, Gemini CLI,
//! Codex), and the little of each format the loader and the matchers share. Plain data; the
//! formats themselves are read, and their answers mapped, in `formats`.

/// The format a handler's configuration was written in: what its input names and what its
/// answers mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) enum Dialect {
    /// Claude Code (and hooks directories).
    #[default]
    Claude,
    /// Gemini CLI: its event names in the input, its output fields mapped.
    Gemini,
    /// Codex: Claude Code's protocol.
    Codex,
}

/// The field the Gemini CLI loader gives each handler of a `"sequential": true` group: the
/// group's id. Read from Gemini CLI sources only (see `config::settings::extras`).
pub(crate) const SEQUENTIAL_GROUP: &str = "__tower_agent_sequential_group";

/// The name Gemini CLI gives a tool of this crate's Claude Code tools: its shell tool
/// `run_shell_command` for `Bash` (measured: `hook-vectors/vectors-gemini`); any other name
/// as it is.
pub(crate) fn gemini_tool(name: &str) -> &str {
    match name {
        "Bash" => "run_shell_command",
        other => other,
    }
}
