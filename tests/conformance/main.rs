//! Conformance with the Claude Code hooks reference (`hooks.md`), organised by its sections:
//! one module per part, each test naming the section it checks.
#![cfg(unix)]

#[path = "../loopback/mod.rs"]
mod loopback;
#[path = "../support/mod.rs"]
mod support;

mod handlers_agent;
mod handlers_async;
mod handlers_http;
mod handlers_prompt;
