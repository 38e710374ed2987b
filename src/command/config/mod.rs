//! Configuration: settings files and hooks directories, read into handlers per event.

mod dir;
mod error;
mod handler;
mod settings;

pub use self::error::ConfigError;
pub(crate) use self::{
    dir::load_dir,
    handler::{Config, Dialect, Entry, Exec, Extras, Handler},
    settings::{is_not_fired, load_file, load_settings, read_json, read_text},
};

pub use crate::layers::hooks::HookEvent;

/// Protocol events this crate does not fire: configuring them is not an error (settings
/// files written for Claude Code load unchanged); their handlers are skipped with a warning.
const NOT_FIRED: &[&str] = &[
    "Setup",
    "UserPromptExpansion",
    "TeammateIdle",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
];
