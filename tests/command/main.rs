//! Command hooks with real processes: bash and python3 hook scripts, hostile hook output,
//! process supervision (nothing a command or hook starts outlives it, no zombies), and what a
//! builder reads once. One test binary, a module per area (a file of its own before). Run this
//! group alone with `cargo test --all-features --test command`, one module of it with
//! `cargo test --all-features --test command -- command_hooks::`.

#[path = "../support/mod.rs"]
mod support;

#[cfg(unix)]
mod build_once;
#[cfg(unix)]
mod claude_words;
#[cfg(unix)]
mod command_hardening;
#[cfg(unix)]
mod command_hooks;
#[cfg(target_os = "linux")]
mod process_hardening;
#[cfg(all(unix, feature = "axum"))]
mod project_guard;
#[cfg(unix)]
mod subagents;
