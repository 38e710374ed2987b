//! Hook layers: one module per layer, each usable on its own with
//! [`ServiceBuilder`](tower::ServiceBuilder).
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
//! A layer of your own is written with the public API these use, and nothing else: what they
//! do, yours can (the stateful layer guide (`tower_agent::guide::stateful_layer`) lists how, with a
//! user-written layer that parks calls for a person's approval as [`hooks`] does). The example
//! `call_limits` (at most N model and tool calls per run, a stateful layer on both stacks) is
//! written outside the crate to show it: `cargo run --example call_limits`.
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
