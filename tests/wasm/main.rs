//! WebAssembly hooks (feature `wasm`): components of the crate's `hook` world, hand-written
//! in WAT and built here, run through `CommandHooks` as command hooks are; hostile guests
//! against the sandbox's limits. Run alone with `cargo test --all-features --test wasm`.

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "wasm")]
mod grants;
#[cfg(feature = "wasm")]
mod guests;
mod guide;
#[cfg(feature = "wasm")]
mod hooks;
#[cfg(feature = "wasm")]
mod hostile;
#[cfg(feature = "wasm")]
mod languages;
#[cfg(feature = "wasm")]
mod links;
