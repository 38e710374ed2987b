//! Conformance with the Claude Code hooks reference (`hooks.md`), section by section, with
//! real hook scripts (bash, python3).
#![cfg(unix)]

#[path = "../support/mod.rs"]
mod support;

mod exit_codes;
mod json_output;
mod notification;
mod permission;
mod post_tool;
mod post_tool_batch;
mod pre_tool_use;
