//! Operating-system edges of [tower-agent](https://docs.rs/tower-agent), shared by its built-in
//! tools and its Claude Code command hooks: [`process`] (a command's whole process tree, swept
//! when its call ends) and [`bounded`] (reading a small file an outside party may have put in
//! place, never blocking on a FIFO and never past a cap).
//!
//! A support crate of the tower-agent workspace; applications use it through `tower-agent`.
//!
//! ```
//! // A settings file read with a cap: a missing file is `NotFound`, never a panic or a hang.
//! let err = tower_agent_os::bounded::read_regular(std::path::Path::new("/no/such/file"), 1024);
//! assert!(matches!(err, Err(tower_agent_os::bounded::ReadError::NotFound)));
//! ```
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

pub mod bounded;
pub mod process;
