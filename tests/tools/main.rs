//! The built-in tools and the tool path: the todo, skills and memory built-ins, the filesystem
//! tools over real directories and processes, hostile skill files, the stages that read files
//! only when they changed, and the tool path's concurrency and failures. One test binary, a
//! module per area (a file of its own before). Run this group alone with
//! `cargo test --all-features --test tools`, one module of it with
//! `cargo test --all-features --test tools -- filesystem::`.

#[path = "../support/mod.rs"]
mod support;

mod builtins;
mod claude_code;
mod filesystem;
mod skills_hardening;
mod stage_files;
mod tool_path;
