//! The guide: one short page per task, each a runnable example.
//!
//! Start with the [crate docs](crate) (the three service levels and the onion order of
//! layers), then pick the page for what you want to do:
//!
//! | I want to… | Page |
//! |---|---|
//! | give the model a tool: a closure, a typed function, a type, an MCP server's tools | [`tools`] |
//! | run code before or after a tool call, a model call or a run — and pick the right one of the five ways | [`hooks`] |
//! | write a layer that keeps per-run state (a token budget) and ends a run with its own reason | [`stateful_layer`] |
//! | call a real model: OpenAI-compatible, Anthropic, the Responses API, with retries and timeouts | [`models`] |
//! | show a run as it happens: tool calls, text as it is written | [`events`] |
//! | change or stop the model's answer as it streams; start tool calls while the model still writes | [`streaming`] |
//! | reuse hook scripts and plugins written for Claude Code | [`claude_code`] |
//! | check another agent's hooks against Claude Code itself, with recorded vectors | `hook_vectors` (feature `anthropic`) |
//! | write a hook in any language, in-process and sandboxed (WebAssembly) | `wasm_hooks` (feature `wasm`) |
//! | serve an agent over HTTP inside an axum app, with authentication | [`server`] |
//! | keep conversations across restarts (SQLite, PostgreSQL) and resume a crashed run | [`threads`] |
//! | let a person approve a tool call, now or tomorrow | [`approvals`] |
//! | guard a run with a policy written against AGENT-HOOKS, the framework-neutral interceptor contract | `agent_hooks` (feature `agent-hooks`) |
//! | export spans to OpenTelemetry | [`observability`] |
//! | test an agent without a network | [`testing`] |
//! | know which cargo feature turns on what | [`features`] |
//! | find answers | [`help`] |
//!
//! Every example on these pages is a doctest: `cargo test --doc --all-features guide` runs
//! them. Examples that need a provider or a server run against one started on 127.0.0.1 in
//! the example's hidden lines; only PostgreSQL is compiled and not run.

#[doc = include_str!("tools.md")]
pub mod tools {}

#[doc = include_str!("hooks.md")]
#[doc = "\n# Every event\n\nThe table of every event — where it fires, its Rust hook, what a hook can do there, its \
         matcher, and a command hook's input fields and answer — is on \
         [`HookEvent`](crate::layers::hooks::HookEvent), made from the crate's one list of events.\n"]
pub mod hooks {}

#[doc = include_str!("stateful_layer.md")]
pub mod stateful_layer {}

#[doc = include_str!("models.md")]
pub mod models {}

#[doc = include_str!("events.md")]
pub mod events {}

#[doc = include_str!("streaming.md")]
pub mod streaming {}

#[doc = include_str!("claude_code.md")]
pub mod claude_code {}

#[cfg(feature = "agent-hooks")]
#[doc = include_str!("agent_hooks.md")]
pub mod agent_hooks {}

#[cfg(all(unix, feature = "anthropic"))]
#[doc = include_str!("hook_vectors.md")]
pub mod hook_vectors {}

#[cfg(feature = "wasm")]
#[doc = include_str!("wasm_hooks.md")]
#[doc = "\n# The WIT\n\nThe file `wit/hook.wit` of the crate tower-agent-wasm, shown whole in the docs of [`wasm::WIT`](crate::wasm::WIT), the same text as a constant."]
pub mod wasm_hooks {}

#[doc = include_str!("server.md")]
pub mod server {}

#[doc = include_str!("threads.md")]
pub mod threads {}

#[doc = include_str!("approvals.md")]
pub mod approvals {}

#[doc = include_str!("observability.md")]
pub mod observability {}

#[doc = include_str!("testing.md")]
pub mod testing {}

#[doc = include_str!("features.md")]
pub mod features {}

#[doc = include_str!("help.md")]
pub mod help {}
