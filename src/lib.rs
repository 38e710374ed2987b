//! An AI agent loop made of [tower] services.
//!
//! New here? The [`guide`] has one short page per task (add a tool, add a hook, use a real
//! model, serve over HTTP, persist threads, test an agent), each a runnable example.
//!
//! > An agent run is nested services — the **agent** (one run), the **model** (one LLM
//! > call), the **tools** (one tool call each) and the **step** (how each step ended). Every
//! > hook is a [`Layer`](tower::Layer) on one of them, stacked with
//! > [`ServiceBuilder`](tower::ServiceBuilder); results travel back in the responses. One-time
//! > setup (before-agent) and request preparation (modify-request) are plain pre-stages that
//! > run before the stacks. Where each hook event fires: [the hooks guide](guide::hooks).
//!
//! ```text
//! Agent           Service<AgentRequest>     layers around it: prompt hooks, auth, timeout
//!  └─ run loop: SessionStart, UserPromptSubmit … then per step:
//!      ├─ Prepare stages (in order)         skills catalog, memory, dynamic prompt
//!      ├─ model stack  Service<ModelRequest> hooks → trace → summarize → retry → provider
//!      ├─ tool stack   Service<ToolRequest>  hooks → trace → guards → evict → ToolRouter → tool
//!      │  (the tool calls of one step run concurrently; results go back in call order)
//!      └─ step stack   Service<StepEnd>      hooks (Stop, PostToolBatch) → your step layers
//! ```
//!
//! `ServiceBuilder` order is the onion order: the first `.layer()` is the outermost, sees the
//! request first and the response last.
//!
//! ```text
//!            ServiceBuilder::new().layer(A).layer(B).service(tool)
//!
//!    request ──► A ──► B ──► tool ──┐
//!                                   │
//!   response ◄── A ◄── B ◄──────────┘
//! ```
//!
//! # Example
//!
//! An agent with a scripted model (offline), two tools and a tool stack of a tower
//! `TimeoutLayer` and a closure layer:
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use tower::ServiceBuilder;
//! use tower_agent::{Agent, BoxError, model::ScriptedModel, tool::{ToolRequest, tool_fn}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::Error> {
//! let model = ScriptedModel::new()
//!     .tool_calls([("weather", json!({"city": "Oslo"})), ("time", json!({"city": "Oslo"}))])
//!     .text("In Oslo it is 14:00 and raining.");
//!
//! let agent = Agent::builder()
//!     .model(model)
//!     .tool(tool_fn("weather", "Weather in a city", json!({"type": "object"}), |_, _| async {
//!         Ok("raining")
//!     }))
//!     .tool(tool_fn("time", "Local time in a city", json!({"type": "object"}), |_, _| async {
//!         Ok("14:00")
//!     }))
//!     .tool_layer(
//!         ServiceBuilder::new()
//!             .timeout(Duration::from_secs(30))
//!             .map_request(|req: ToolRequest| {
//!                 tracing::info!(tool = %req.call.name, "calling");
//!                 req
//!             }),
//!     )
//!     .build();
//!
//! let resp = agent.run("Weather and time in Oslo?").await?;
//! assert!(resp.outcome.is_finished());
//! assert_eq!(resp.text, "In Oslo it is 14:00 and raining.");
//! # Ok(())
//! # }
//! ```
//!
//! # The levels
//!
//! - [`model`]: any `Service<ModelRequest, Response = ModelResponse, Error = BoxError>`;
//!   [`ScriptedModel`](model::ScriptedModel) for tests and offline demos.
//! - [`tool`]: any `Service<ToolRequest, Response = ToolOutput, Error = BoxError>`;
//!   [`tool_fn`](tool::tool_fn), [`typed_tool`](tool::typed_tool), the [`Tool`](tool::Tool)
//!   trait, and the by-name [`ToolRouter`](tool::ToolRouter).
//! - [`agent`]: [`Agent`] is a `Service<AgentRequest, Response = AgentResponse>`, so it can sit
//!   behind an axum route or inside generic tower middleware.
//! - [`agent::step`]: a `Service<StepEnd, Response = StepControl>` decides at the end of each
//!   step whether the run goes on (Stop and PostToolBatch hooks are a layer of it).
//!
//! # Hooks
//!
//! - [`layers`]: one module per hook layer — [`trace`](layers::trace),
//!   [`evict`](layers::evict), [`summarize`](layers::summarize),
//!   [`reminders`](layers::reminders), [`matcher`](layers::matcher) (`when(matcher, layer)`),
//!   [`schema`](layers::schema), [`ledger`](layers::ledger) (a call-limits layer written
//!   outside the crate, with its public API only: `examples/call_limits`).
//! - [`layers::hooks`]: plain callbacks for every event (PreToolUse, PostToolUse, Stop,
//!   UserPromptSubmit, SessionStart …) with decisions, matchers, priorities and named order.
//! - [`command`]: external hook scripts and `settings.json` files of the Claude Code
//!   hooks protocol, run unchanged, and persistent hook processes.
//! - [`builtins`]: ready-made stages and tools (filesystem, todos, skills, memory).
//! - [`store`]: where threads live between runs (in memory, or SQLite with `sqlite`); the
//!   `server` module (feature `axum`) serves an agent over HTTP.
//!
//! Failures the model can act on are data: an unknown tool, bad arguments, a tool error or a
//! timeout become an error [`ToolOutput`](message::ToolOutput) and the run goes on. Only an
//! [`Abort`], a failed model call or a failed prepare stage end a run early.
//!
//! # Feature flags
//!
//! The core (all three levels, the loop, every hook layer and command hooks, the built-ins,
//! the scripted model, the in-memory store, the [`RetryPolicy`](model::RetryPolicy) and
//! [`ProviderError`](model::ProviderError)) needs no feature. `full` turns on every optional
//! feature. What each pulls in: the [features page](guide::features) of the guide.
//!
//! | Feature | Default | What it adds |
//! |---|---|---|
//! | `openai` | yes | [`model::openai::OpenAiChat`] (the Chat Completions API: OpenAI, vLLM, Ollama, llama.cpp, LiteLLM) and [`model::responses::OpenAiResponses`] (the Responses API), over reqwest |
//! | `http-hooks` | yes | `"type": "http"` [command hooks](command#http-hooks): the hook's input POSTed over reqwest (without it they are skipped with a warning) |
//! | `anthropic` | no | [`model::anthropic::Anthropic`]: the Messages API over reqwest |
//! | `sqlite` | no | `store::Sqlite`: threads in a SQLite file, and the SQLite tool-call ledger ([`layers::ledger`]); SQLite is compiled in |
//! | `postgres` | no | `store::Postgres`: threads shared by server replicas (leases, compare-and-swap saves), over tokio-postgres |
//! | `axum` | no | `server`: an axum `Router` for an agent (runs, SSE streams, threads, approvals) and a graceful `serve` |
//! | `agent-hooks` | no | `agent_hooks`: an AGENT-HOOKS 0.1 host — interceptors at the eight interception points as layers of the agent's stacks, on the `agent-hooks-sdk` crate |
//! | `mcp` | no | `mcp`: MCP servers' tools as tools (stdio, streamable HTTP), `mcp_tool` hooks, tools and agents served over MCP (the official `rmcp` SDK) |
//! | `wasm` | no | `wasm`: hooks as WebAssembly components, in-process and sandboxed, on Wasmtime (`"type": "wasm"` handlers, `.wasm` files in hooks directories) |
//! | `opentelemetry` | no | span attributes that OpenTelemetry wants as arrays (`gen_ai.response.finish_reasons`) recorded as arrays through `tracing-opentelemetry` |
//! | `full` | no | every feature above |
//!
//! The providers use reqwest with rustls (the aws-lc-rs crypto provider, the platform's
//! certificate verifier) and HTTP/2; pass your own `reqwest::Client` to change that.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.89.
#![cfg_attr(docsrs, feature(doc_cfg))]
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml):
// a longer one is split into helpers that each do one thing. `too_many_lines` is pedantic, so
// it is turned on here, for the library only (tests and benches are left as they are); CI runs
// clippy with `-D warnings`, so a warning fails it.
#![warn(clippy::too_many_lines)]

#[cfg(feature = "agent-hooks")]
#[cfg_attr(docsrs, doc(cfg(feature = "agent-hooks")))]
#[doc(inline)]
pub use tower_agent_agent_hooks as agent_hooks;
pub mod builder;
pub mod builtins;
#[doc(inline)]
pub use tower_agent_command as command;
pub mod guide;
pub mod layers;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
#[doc(inline)]
pub use tower_agent_mcp as mcp;
pub mod model;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
#[doc(inline)]
pub use tower_agent_server as server;
pub mod store;
#[cfg(feature = "wasm")]
#[cfg_attr(docsrs, doc(cfg(feature = "wasm")))]
#[doc(inline)]
pub use tower_agent_wasm as wasm;

#[doc(inline)]
pub use tower_agent_core::{agent, context, error, event, message, tool};

pub use crate::{
    agent::{Agent, AgentRequest, AgentResponse, Outcome},
    builder::ServiceBuilderExt,
    error::{Abort, BoxError, Error},
};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
