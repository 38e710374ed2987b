//! Hooks as WebAssembly components for [tower-agent](https://docs.rs/tower-agent):
//! in-process, sandboxed, in any language that compiles to a component (tower-agent's feature
//! `wasm`, where this crate is `tower_agent::wasm`).
//!
//! A hook is a component of the `hook` world of [`WIT`] (the file `wit/hook.wit` of this
//! crate). It gets the JSON a command hook reads on stdin and answers what a command hook
//! prints (or a blocking error, its exit 2), so a hook moves from a script to a component and
//! keeps its behaviour: tower-agent's `tower_agent::command::CommandHooks` runs it as a
//! handler of type `"wasm"` in a settings file, a `.wasm` file in a hooks directory, or one
//! given in Rust (`tower_agent::command::CommandHooksBuilder::wasm_hook`), in the same ordered
//! chain as every other hook, with the same matchers, `if` rules and `onFailure`. A
//! [`WasmHook`] is also usable alone, as below: [`WasmHook::call`] takes the event's JSON and
//! answers a [`WasmAnswer`].
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tower_agent_wasm::{WasmAnswer, WasmHook};
//!
//! // A component of the crate's `hook` world, e.g. the bytes of `guard.wasm`
//! // (`WasmHook::load("guard.wasm")` reads the file itself).
//! # let component = component()?;
//! let hook = WasmHook::builder().bytes("guard.wasm", component).build()?;
//! assert_eq!(hook.description()["events"][0], "PreToolUse");
//!
//! let rt = tokio::runtime::Runtime::new()?;
//! let answer = rt.block_on(hook.call(r#"{"hook_event_name": "PreToolUse"}"#))?;
//! let WasmAnswer::Json(decision) = answer else { panic!("{answer:?}") };
//! assert_eq!(decision["hookSpecificOutput"]["permissionDecision"], "allow");
//! # Ok(())
//! # }
//! # // A hand-written guest: WAT made a component of the `hook` world (as
//! # // `wasm-tools component new` does), its strings in data segments.
//! # fn component() -> Result<Vec<u8>, Box<dyn std::error::Error>> {
//! #     let describe = r#"{"events": ["PreToolUse"], "stateless": true}"#;
//! #     let allow = r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#;
//! #     let wat = format!(r#"(module
//! #       (memory (export "memory") 1)
//! #       (global $heap (mut i32) (i32.const 8192))
//! #       (data (i32.const 1024) "{}") (data (i32.const 2048) "{}")
//! #       (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
//! #         (local $at i32)
//! #         (local.set $at (global.get $heap))
//! #         (global.set $heap (i32.add (local.get $at) (local.get 3)))
//! #         (local.get $at))
//! #       (func (export "describe") (result i32)
//! #         (i32.store (i32.const 4096) (i32.const 1024))
//! #         (i32.store (i32.const 4100) (i32.const {}))
//! #         (i32.const 4096))
//! #       (func (export "handle") (param i32 i32) (result i32)
//! #         (i32.store8 (i32.const 4096) (i32.const 0))
//! #         (i32.store (i32.const 4100) (i32.const 2048))
//! #         (i32.store (i32.const 4104) (i32.const {}))
//! #         (global.set $heap (i32.const 8192))
//! #         (i32.const 4096)))"#,
//! #         describe.replace('"', "\\\""), allow.replace('"', "\\\""), describe.len(), allow.len());
//! #     let mut resolve = wit_parser::Resolve::default();
//! #     let package = resolve.push_str("hook.wit", tower_agent_wasm::WIT)?;
//! #     let world = resolve.select_world(&[package], Some("hook"))?;
//! #     let mut module = wat::parse_str(wat)?;
//! #     wit_component::embed_component_metadata(
//! #         &mut module, &resolve, world, wit_component::StringEncoding::UTF8, false)?;
//! #     Ok(wit_component::ComponentEncoder::default().module(&module)?.encode()?)
//! # }
//! ```
//!
//! # The sandbox
//!
//! An instance has no authority unless it is granted some ([`WasmGrants`]: directories, read
//! only or read and write; named environment variables; clocks; randomness — through WASI
//! 0.2). The host links only the interfaces granted, so a component that imports anything
//! else (a file system without a granted directory, sockets — never granted —, a clock)
//! fails to load, with an error naming the import. Its limits ([`WasmLimits`]): memory (default 64 MiB, at
//! most [`MAX_MEMORY_LIMIT`], 1 GiB), CPU (default 100 ms of running per call, metered by an
//! epoch that advances every millisecond while a guest runs; a guest yields to the executor
//! each millisecond, so it never holds a thread), the answer (default 1 MiB), its stack
//! ([`MAX_WASM_STACK`], 512 KiB: deep recursion traps), and its tables (100,000 elements). A
//! hook that traps, runs out of CPU or memory, answers more than its cap, answers text that is
//! not UTF-8 or not a JSON object, or outlives its handler's timeout is a hook failure
//! (fail-open, or blocking where the hook fails closed), never a panic or a hang; its instance
//! is dropped and the next call gets a fresh one.
//!
//! # Links in a granted directory
//!
//! A hook reaches paths inside its granted directories only: `..` past the top, an absolute
//! path, and a symbolic link that leads out — one already there included — are refused
//! (`cap-std`, under `wasmtime-wasi`). What a write-granted hook leaves behind for the
//! programs that come next (other hooks, tools, the agent's own file built-ins, which do
//! follow links) is guarded too:
//!
//! - the target of a symbolic link it makes (`symlink-at`) must descend from the link: names
//!   only, no `..`, not absolute — else it is refused (`not-permitted`) and nothing is made.
//!   Such a link leads inside wherever in the directory it is or is later moved; one with
//!   `..` is refused even where it would land inside, as a move nearer the top would carry
//!   it out;
//! - for the same reason a link whose target climbs (one that was there before) is neither
//!   renamed nor hard-linked (`rename-at`, `link-at`), and a directory is renamed only
//!   within its parent (its links would move with it); files move anywhere;
//! - a hard link or a rename names paths inside the granted directories only: no file
//!   outside gets a name inside.
//!
//! What is left: each check looks before the call it guards, so two instances granted the
//! same directory, calling at once, could race a directory into a name just checked; and a
//! link a hook makes may name a link that was there and leads out (it then leads where that
//! one does). Grant write access to a directory of the hook's own (its state, a scratch
//! directory) rather than a tree of links such as `node_modules`. A read-only grant makes
//! and moves nothing. The checks cost nothing without a write grant, and only these three
//! calls with one.
//!
//! # Fast path
//!
//! A component is compiled once per process (and cached on disk by content hash: see
//! [`cache_dir`](self#the-compiled-code-cache)); its imports are resolved once (an
//! `InstancePre`); instances come from a pooling allocator of [`MAX_INSTANCES`] slots (a call
//! that finds none free waits). A hook whose `describe` says `"stateless": true` keeps up to
//! 16 idle instances and reuses them call after call; any other gets a fresh instance per
//! call.
//!
//! # The compiled code cache
//!
//! Compiled hooks are cached in `$TOWER_AGENT_WASM_CACHE`, else
//! `$XDG_CACHE_HOME/tower-agent/wasm`, else `~/.cache/tower-agent/wasm` (Wasmtime's cache,
//! keyed by the component's hash and the engine's settings), or where [`set_cache_dir`]
//! says. An empty `TOWER_AGENT_WASM_CACHE` turns it off.
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

mod engine;
mod hook;
mod wasi;

use std::fmt;

pub use self::{
    engine::{MAX_INSTANCES, MAX_MEMORY_LIMIT, MAX_WASM_STACK, cache_dir, set_cache_dir},
    hook::{
        DEFAULT_ANSWER, DEFAULT_CPU, DEFAULT_MEMORY, WasmAnswer, WasmHook, WasmHookBuilder,
        WasmLimits,
    },
    wasi::{GrantedDir, WasmGrants},
};

/// The WIT of a hook: the `hook` world of package `tower-agent:hooks` (the file
/// `wit/hook.wit` of this crate). A guest is a component of this world; write this text out
/// (in a build script, a test, a small program) to build one against the version you run.
///
/// ```wit
#[doc = include_str!("../wit/hook.wit")]
/// ```
pub const WIT: &str = include_str!("../wit/hook.wit");

/// Why a WebAssembly hook could not be loaded or called: the message names the hook and the
/// cause (the import it lacks, the limit it reached, the trap, the answer it gave).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmError {
    message: String,
}

impl WasmError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        WasmError {
            message: message.into(),
        }
    }
}

impl fmt::Display for WasmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WasmError {}
