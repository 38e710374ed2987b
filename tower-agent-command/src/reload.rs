//! [`CommandHooks::reload`]: the settings files read again when they changed, the
//! ConfigChange hooks asked first.

use std::path::PathBuf;

use crate::{
    CommandHooks, ConfigError,
    config::{digest, source_of},
};

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

impl CommandHooks {
    /// Reads the settings files again (those of
    /// [`settings_file`](crate::CommandHooksBuilder::settings_file),
    /// [`gemini_settings_file`](crate::CommandHooksBuilder::gemini_settings_file) and
    /// [`codex_hooks_file`](crate::CommandHooksBuilder::codex_hooks_file)) and, if any changed since
    /// these hooks were built, fires the **ConfigChange** hooks of these hooks for each
    /// changed file, in order: `source` (`user_settings`, `project_settings`,
    /// `local_settings`, `policy_settings`, by the file's place; the matcher is compared with
    /// it) and `file_path`. A block (exit 2, `decision: "block"`, `continue: false`, or a
    /// fail-closed handler that failed) keeps the configuration as it is
    /// ([`Reload::Blocked`]) — except for `policy_settings`, which cannot be blocked (as in
    /// the protocol). Otherwise every source is loaded again, as
    /// [`build`](crate::CommandHooksBuilder::build) did ([`Reload::Changed`]).
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
    /// The files as they are now do not load (see [`build`](crate::CommandHooksBuilder::build)):
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
