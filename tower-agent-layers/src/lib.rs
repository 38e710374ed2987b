//! The hook layers of [tower-agent](https://docs.rs/tower-agent): one module per layer, each
//! usable on its own with [`ServiceBuilder`](tower::ServiceBuilder), and
//! [`ServiceBuilderExt`] to add them as `ServiceBuilder` methods.
//!
//! They wrap the service levels of [`tower_agent_core`] — a model is a
//! `Service<ModelRequest>`, a tool a `Service<ToolRequest>`, the end of a step a
//! `Service<StepEnd>` — and are written with its public API only, as a layer of yours would
//! be. Most users do not add this crate: they add `tower-agent`, which re-exports these
//! modules as `tower_agent::layers::{hooks, trace, …}` and [`ServiceBuilderExt`] as
//! `tower_agent::ServiceBuilderExt`.
//!
//! | Module | On | What it does |
//! |---|---|---|
//! | [`trace`] | model, tool | spans `chat {model}` / `execute_tool {tool}` with OpenTelemetry GenAI attributes |
//! | [`evict`] | tool | cuts huge outputs to head + tail, optionally spilling them to a file |
//! | [`fallback`] | model | the next model of a list takes a request the model failed (retryable errors, context length) |
//! | [`summarize`] | model | compacts old messages into a summary near the context window |
//! | [`hooks`] | agent, model, tool | callback hooks for every event: decisions, matchers, priorities |
//! | [`matcher`] | tool | [`ToolMatcher`](matcher::ToolMatcher) syntax and [`when`](matcher::when): any layer, only for some tools |
//! | [`reminders`] | tool | trigger functions whose reminders follow the step's tool results |
//! | [`schema`] | tool | validates arguments against the tool's JSON Schema before the call (deny with errors + example); schema hint after validation errors |
//! | [`redact`] | model, tool | e-mails, card numbers, IPs, API keys and your regexes blocked, redacted, masked or hashed: in the prompt, the streamed answer, tool outputs |
//! | [`select_tools`] | model | past N tools, a cheap model picks the ones a request needs |
//! | [`stream_timeout`] | model | deadlines for a streamed answer: its first piece, and the whole stream |
//! | [`ledger`] | tool | records every tool call (input, output, duration, status) to JSONL or SQLite |
//!
//! A layer of your own is written with the public API these use, and nothing else: this crate
//! depends on [`tower_agent_core`] only, so what these layers do, yours can (the stateful
//! layer guide, `tower_agent::guide::stateful_layer`, lists how, with a user-written layer
//! that parks calls for a person's approval as [`hooks`] does). The example `call_limits` of
//! tower-agent (at most N model and tool calls per run, a stateful layer on both stacks) is
//! written outside the crates to show it: `cargo run --example call_limits`.
//!
//! # Example
//!
//! A hook set that denies a tool call, and a trace layer on the tools, on an agent with a
//! scripted model (offline):
//!
//! ```
//! use serde_json::json;
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_layers::{ServiceBuilderExt, hooks::{Hooks, PreToolUse}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hooks = Hooks::new()
//!     .before_tool_use("bash", |_call, _ctx| PreToolUse::Deny("no shell here".into()))
//!     .compile()?;
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("bash", json!({"command": "ls"})).text("done"))
//!     .tool(tool_fn("bash", "Runs a command", json!({"type": "object"}), |_, _| async {
//!         Ok("file.txt")
//!     }))
//!     .hooks(hooks)
//!     .tool_layer(ServiceBuilder::new().trace_agent())
//!     .build();
//! let resp = agent.run("list the files").await?;
//! assert_eq!(resp.text, "done");
//! # Ok(())
//! # }
//! ```
//!
//! # Feature flags
//!
//! | Feature | What it adds |
//! |---|---|
//! | `sqlite` | `ledger::SqliteLedger`: the tool-call ledger in a SQLite file (SQLite compiled in, bundled) |
//! | `opentelemetry` | span attributes that OpenTelemetry wants as arrays (`gen_ai.response.finish_reasons`) recorded as arrays through `tracing-opentelemetry` (else as JSON text) |
//!
//! tower-agent's features of the same names turn them on.
//!
//! # Readiness
//!
//! Every layer here passes its inner service's readiness through (`poll_ready` is the inner
//! one's), except [`when`](matcher::when), which is always ready and readies the branch it
//! picks inside its response future. No layer holds a readied inner service across an await
//! of something else: a layer that calls at once calls the service `poll_ready` readied; a
//! layer that first awaits hooks or a summarizer ([`hooks`], [`summarize`]) drops the readied
//! service (giving back what it reserved, e.g. a `ConcurrencyLimit` permit) and readies a
//! fresh clone when it calls; a layer that refuses a call ([`schema`], a call limit, a
//! denying hook) drops the readied service too. So a hook, a summarizer or another caller may share
//! the inner service's capacity — even a `ConcurrencyLimit(1)` — without a deadlock.

#![cfg_attr(docsrs, feature(doc_cfg))]
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml), as
// in tower-agent: `too_many_lines` is pedantic, so it is turned on here, for the library only.
#![warn(clippy::too_many_lines)]

#[macro_use]
mod macros;

pub mod builder;
pub mod evict;
pub mod fallback;
pub mod hooks;
pub mod ledger;
pub mod matcher;
pub mod redact;
pub mod reminders;
pub mod schema;
pub mod select_tools;
pub mod stream_timeout;
pub mod summarize;
pub mod trace;

pub use crate::builder::ServiceBuilderExt;
