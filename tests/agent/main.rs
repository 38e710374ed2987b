//! The agent loop and its layers, without a provider or a store: composition, the loop's
//! endings, the agent as a tower service, events, layer order, readiness, reminders,
//! summarizing, tracing, the ledger, guards and callback hooks. One test binary, a module per
//! area (a file of its own before). Run this group alone with
//! `cargo test --all-features --test agent`, one module of it with
//! `cargo test --all-features --test agent -- hooks::`.

#[path = "../support/mod.rs"]
mod support;

mod agent_composition;
mod agent_loop;
mod agent_service;
mod call_limits;
mod checks;
mod compact;
mod docs;
mod eager;
mod events;
mod extensions;
mod guards;
mod hook_failure;
mod hook_placement;
mod hooks;
mod layer_order;
mod ledger;
/// The call-limits layer (`tests/support/call_limits.rs`, run by `examples/call_limits`), written outside the crate with its public
/// API only: its unit tests run here, and `guards` and `readiness` run it in agents.
#[path = "../support/call_limits.rs"]
mod limit;
#[cfg(unix)]
mod readiness;
mod redact;
mod reminders;
mod select_tools;
mod streaming;
mod summarize;
mod trace;
