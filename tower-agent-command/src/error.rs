//! [`ConfigError`]: a configuration that cannot be loaded, with its file and JSON path.

use std::fmt;

/// A configuration that cannot be loaded: names the file (or origin) and the JSON path in it.
///
/// Its `Display` is `file: path: message`, for example
/// `settings.json: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    file: String,
    path: String,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.into(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The file (or the origin name given to
    /// [`settings_json`](crate::CommandHooksBuilder::settings_json)).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The JSON path of the bad value (`hooks.PreToolUse[0].matcher`); empty when the whole
    /// file is at fault.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}
