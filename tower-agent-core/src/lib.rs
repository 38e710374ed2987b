//! The core of [tower-agent](https://docs.rs/tower-agent): the agent loop and what a layer,
//! a tool, a model provider or a thread store is written against.
//!
//! An agent run is nested [tower] services — the **agent** (one run), the **model** (one LLM
//! call), the **tools** (one tool call each), the **step** (how each step ended) and the
//! **start** (how a run starts). This crate has the three service levels with their request,
//! response and body types, messages, events, the run's context, errors, the thread store
//! traits with the in-memory store and the tool-call journal, and the loop with its builder.
//! It depends on no HTTP client, database, WebAssembly runtime or server.
//!
//! Most users add `tower-agent`, which re-exports this crate under the same paths
//! (`tower_agent_core::agent`, `tower_agent_core::message`, …) with the hook layers, the built-in
//! tools, Claude Code compatibility, MCP, the stores and the providers around it. Everything
//! those crates do, they do with this crate's public API: a layer of yours has every power
//! theirs have.
//!
//! ```
//! use serde_json::json;
//! use tower_agent_core::{Agent, model::ScriptedModel, tool::tool_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let agent = Agent::builder()
//!     .model(
//!         ScriptedModel::new()
//!             .tool_calls([("weather", json!({"city": "Oslo"}))])
//!             .text("Raining in Oslo."),
//!     )
//!     .tool(tool_fn("weather", "Weather in a city", json!({"type": "object"}), |_, _| async {
//!         Ok("raining")
//!     }))
//!     .build();
//! let resp = agent.run("Weather in Oslo?").await?;
//! assert_eq!(resp.text, "Raining in Oslo.");
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

pub mod agent;
pub mod context;
pub mod error;
pub mod event;
#[cfg(feature = "axum")]
mod into_response;
pub mod message;
pub mod model;
pub mod store;
pub mod tool;

pub use crate::{
    agent::{Agent, AgentRequest, AgentResponse, Outcome},
    error::{Abort, BoxError, Error},
};
