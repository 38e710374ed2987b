//! Ready-made stages and tools: each optional, each a [`Setup`](crate::agent::Setup) and/or
//! [`Prepare`](crate::agent::Prepare) stage you add to an [`Agent`](crate::Agent).
//!
//! | Module | Kind | What it does |
//! |---|---|---|
//! | [`claude_code`] | setup (tools) | Claude Code's `Bash`, `Read`, `Write`, `Edit`, `Glob`, `Grep`, its input schemas and its `tool_response`s, over a [`Backend`](filesystem::Backend) |
//! | [`commands`] | start layer | `/name args` prompts expanded from command files (UserPromptExpansion) |
//! | [`filesystem`] | setup (tools) | `ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`, `execute` over a confined [`Backend`](filesystem::Backend) |
//! | [`todo`](mod@todo) | setup (tool) | `write_todos`: the todo list in the run state |
//! | [`skills`] | setup + prepare | `SKILL.md` discovery, catalog in the system prompt, just-in-time skill bodies |
//! | [`memory`] | setup + prepare | `AGENTS.md` memory in the system prompt |
//!
//! They are the crate [`tower_agent_builtins`], written against the public API of the core
//! (`tower_agent_core`) only, as tools and stages of your own would be.

#[doc(inline)]
pub use tower_agent_builtins::{claude_code, commands, filesystem, memory, skills, todo};
