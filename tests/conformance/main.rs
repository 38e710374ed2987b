//! Conformance with the Claude Code hooks reference (`hooks.md`), organised by its sections:
//! real hook scripts (bash, python3) read their input from stdin and answer as the reference
//! documents; each test names the section it checks.
#![cfg(unix)]

#[path = "../loopback/mod.rs"]
mod loopback;
#[path = "../support/mod.rs"]
mod support;

mod common_ev2;
mod compact;
mod env_file;
mod exit_codes;
mod handlers_agent;
mod handlers_async;
mod handlers_http;
mod handlers_prompt;
mod instructions_loaded;
mod json_output;
mod message_display;
mod notification;
mod permission;
mod post_tool;
mod post_tool_batch;
mod pre_tool_use;
mod session_end;
mod session_start;
mod stop_failure;
mod stop_loop;
mod subagent;
mod tasks;
mod transcript;
mod user_prompt_submit;
