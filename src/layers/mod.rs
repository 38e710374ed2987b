//! Hook layers: one module per layer, each usable on its own with
//! [`ServiceBuilder`](tower::ServiceBuilder) (the crate [`tower_agent_layers`], re-exported
//! here).
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
//! A layer of your own is written with the public API these use, and nothing else: they live
//! in a crate of their own, [`tower_agent_layers`], that depends on [`tower_agent_core`] only,
//! so what they do, yours can (the [stateful layer guide](crate::guide::stateful_layer) lists
//! how, with a user-written layer that parks calls for a person's approval as [`hooks`] does).
//! The example `call_limits` (at most N model and tool calls per run, a stateful layer on both
//! stacks) is written outside the crate to show it: `cargo run --example call_limits`.
//!
//! How each layer passes readiness through and shares its inner service's capacity:
//! [readiness](tower_agent_layers#readiness).

#[doc(inline)]
pub use tower_agent_layers::{
    evict, fallback, hooks, ledger, matcher, redact, reminders, schema, select_tools,
    stream_timeout, summarize, trace,
};

/// The layers as `ServiceBuilder` methods (also at [`crate::ServiceBuilderExt`]).
#[doc(no_inline)]
pub use tower_agent_layers::ServiceBuilderExt;
