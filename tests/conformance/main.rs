//! Conformance with the Claude Code hooks reference (`hooks.md`), one module per part of it;
//! every test names the section it checks. Real processes (bash, python3) throughout.
#![cfg(unix)]

#[path = "../support/mod.rs"]
mod support;

mod stop_loop;
mod transcript;
