//! Configuration: settings files and hooks directories, read into handlers per event.

mod dir;
mod error;
mod handler;
mod settings;
mod wasm;

#[cfg(feature = "wasm")]
pub(crate) use self::dir::add_described;
pub use self::error::ConfigError;
pub(crate) use self::{
    dir::load_dir,
    handler::{Config, Dialect, Entry, Exec, Extras, Handler},
    settings::{MAX_SETTINGS, load_file, load_settings, not_fired, read_json, read_text},
};

pub use tower_agent_layers::hooks::HookEvent;
