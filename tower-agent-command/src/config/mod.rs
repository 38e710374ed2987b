//! Configuration: settings files and hooks directories, read into handlers per event.

mod dir;
mod parsed;
mod permissions;
mod settings;
mod wasm;

#[cfg(feature = "wasm")]
pub(crate) use self::dir::add_described;
pub(crate) use self::{
    dir::load_dir,
    parsed::{Config, SourceContext},
    settings::{digest, load_file, load_settings, not_fired, read_json, read_text, source_of},
};
pub(crate) use crate::error::ConfigError;

pub use tower_agent_layers::hooks::HookEvent;
