//! [`CommandHooks::reload`]: the settings files read again when they changed, the
//! ConfigChange hooks asked first.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{CommandHooks, CommandHooksBuilder, ConfigError};

/// What [`CommandHooks::reload`] found.
#[derive(Debug)]
#[non_exhaustive]
pub enum Reload {
    /// No settings file changed: the hooks stay as they are.
    Unchanged,
    /// Settings files changed and no ConfigChange hook blocked: the hooks built from the
    /// files as they are now. Build the agents that should use them again.
    Changed(CommandHooks),
    /// A ConfigChange hook blocked the change of `file`: the hooks stay as they are.
    Blocked {
        /// The changed file whose hook blocked.
        file: PathBuf,
        /// Why.
        reason: String,
    },
}

/// What a [`CommandHooks`] needs to reload: its builder, and the digests of its settings
/// files as they were when it was built (`None`: no file).
#[derive(Debug)]
pub(super) struct Reloader {
    pub(super) builder: CommandHooksBuilder,
    pub(super) files: Vec<(PathBuf, Option<[u8; 32]>)>,
}

/// The digest of each file now.
pub(super) fn snapshot(files: &[PathBuf]) -> Vec<(PathBuf, Option<[u8; 32]>)> {
    files.iter().map(|p| (p.clone(), digest(p))).collect()
}

/// The digest of a settings file; `None` if it cannot be read as one (missing, not a regular
/// file — a FIFO is never opened —, over the settings files' size limit).
pub(super) fn digest(path: &Path) -> Option<[u8; 32]> {
    let bytes =
        tower_agent_os::bounded::read_regular(path, super::config::MAX_SETTINGS as u64).ok()?;
    Some(Sha256::digest(&bytes).into())
}

/// The ConfigChange `source` of a settings file, by where it is: `policy_settings` (a
/// `managed-settings.json`), `local_settings` (a `settings.local.json`), `user_settings`
/// (under the user's `~/.claude`), else `project_settings`.
pub(crate) fn source_of(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "managed-settings.json" {
        return "policy_settings";
    }
    if name == "settings.local.json" {
        return "local_settings";
    }
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude"));
    match home {
        Some(dir) if path.starts_with(&dir) => "user_settings",
        _ => "project_settings",
    }
}

impl CommandHooks {
    /// Reads the settings files again (those of
    /// [`settings_file`](CommandHooksBuilder::settings_file),
    /// [`gemini_settings_file`](CommandHooksBuilder::gemini_settings_file) and
    /// [`codex_hooks_file`](CommandHooksBuilder::codex_hooks_file)) and, if any changed since
    /// these hooks were built, fires the **ConfigChange** hooks of these hooks for each
    /// changed file, in order: `source` (`user_settings`, `project_settings`,
    /// `local_settings`, `policy_settings`, by the file's place; the matcher is compared with
    /// it) and `file_path`. A block (exit 2, `decision: "block"`, `continue: false`, or a
    /// fail-closed handler that failed) keeps the configuration as it is
    /// ([`Reload::Blocked`]) — except for `policy_settings`, which cannot be blocked (as in
    /// the protocol). Otherwise every source is loaded again, as
    /// [`build`](CommandHooksBuilder::build) did ([`Reload::Changed`]).
    ///
    /// Hooks directories, plugin folders and settings values are loaded again with them but
    /// are not compared. Agents built with these hooks keep them — but for a change their own
    /// runs see between steps, which they apply themselves (see
    /// [the module docs](crate#settings-that-change-during-a-run)); build an agent
    /// with the new ones (building is cheap). The hooks' input has the project directory as
    /// `cwd` and a fresh `session_id`: a reload belongs to no run. The comparison is with the
    /// files as they were when these hooks were built.
    ///
    /// # Errors
    ///
    /// The files as they are now do not load (see [`build`](CommandHooksBuilder::build)):
    /// the configuration stays as it is.
    pub async fn reload(&self) -> Result<Reload, ConfigError> {
        let mut changed = Vec::new();
        for (path, before) in &self.reload.files {
            if digest(path) != *before {
                changed.push(path.clone());
            }
        }
        if changed.is_empty() {
            return Ok(Reload::Unchanged);
        }
        for file in changed {
            let source = source_of(&file);
            let Some(reason) = self.inner.config_change(&file, source, None).await else {
                continue;
            };
            if source == "policy_settings" {
                tracing::warn!(
                    "a ConfigChange hook blocked a change of {}, a policy file: it cannot be \
                     blocked ({reason})",
                    file.display()
                );
                continue;
            }
            return Ok(Reload::Blocked { file, reason });
        }
        self.reload.builder.clone().build().map(Reload::Changed)
    }
}
