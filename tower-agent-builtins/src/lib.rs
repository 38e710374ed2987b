//! The built-in tools and stages of [tower-agent](https://docs.rs/tower-agent) (where this
//! crate is `tower_agent::builtins`): each optional, each a
//! [`Setup`](tower_agent_core::agent::Setup) and/or [`Prepare`](tower_agent_core::agent::Prepare)
//! stage you add to an [`Agent`](tower_agent_core::Agent).
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
//! They are written against the public API of [`tower_agent_core`] only, as tools and stages of
//! your own would be; most users reach them through `tower-agent` (`tower_agent::builtins`).
//!
//! # Example
//!
//! An agent with the file tools over one directory and a todo list:
//!
//! ```
//! use serde_json::json;
//! use tower_agent_builtins::{filesystem::Filesystem, todo::TodoList};
//! use tower_agent_core::{Agent, model::ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let dir = tempfile::tempdir()?;
//! let model = ScriptedModel::new()
//!     .tool_call("write_todos", json!({ "todos": [
//!         { "id": "1", "title": "Write the notes", "status": "in_progress" },
//!     ]}))
//!     .tool_call("write_file", json!({ "path": "notes.md", "content": "- buy milk\n" }))
//!     .text("Done.");
//! let agent = Agent::builder()
//!     .model(model)
//!     .setup(Filesystem::local(dir.path()))
//!     .setup(TodoList::new())
//!     .build();
//! agent.run("Take a note: buy milk.").await?;
//! assert_eq!(std::fs::read_to_string(dir.path().join("notes.md"))?, "- buy milk\n");
//! # Ok(())
//! # }
//! ```

// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

pub mod claude_code;
pub mod commands;
pub mod filesystem;
pub mod memory;
pub mod skills;
pub mod todo;
