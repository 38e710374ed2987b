//! Settings a hook set was read from, watched during a run: the step hook layer asks each
//! [`SettingsSource`] between steps (after a step's tool calls, with the watched files of
//! FileChanged) and lets it apply what changed (command hooks: ConfigChange, then the hooks
//! of the settings files as they are now).

use std::{path::PathBuf, sync::Arc};

use futures_util::future::BoxFuture;

use super::HookSetInner;
use tower_agent_core::context::RunContext;

/// Where a hook set's hooks come from, when that can change during a run (command hooks'
/// settings files, or a configuration of yours that reloads): given to
/// [`Hooks::watch_settings`](super::Hooks::watch_settings).
///
/// Between steps (after a step's tool calls, before FileChanged and PostToolBatch), the step
/// hook layer calls [`changed`](Self::changed) of each source; when it names files, the layer
/// awaits [`apply`](Self::apply) with them before the run goes on. `changed` is called once
/// per step and should be cheap (compare modification times, not contents); the run waits for
/// `apply`, so bound its time yourself.
pub trait SettingsSource: Send + Sync + 'static {
    /// The files that changed since the last look (which this is).
    fn changed(&self) -> Vec<PathBuf>;

    /// Applies the change of `files`, seen in the run of `ctx` (ConfigChange first).
    fn apply<'a>(&'a self, files: Vec<PathBuf>, ctx: &'a RunContext) -> BoxFuture<'a, ()>;
}

/// A source and the files of it that changed.
pub(super) type SettingsChange = (Arc<dyn SettingsSource>, Vec<PathBuf>);

impl HookSetInner {
    /// The sources whose files changed since the last look, with those files.
    pub(super) fn settings_changes(&self) -> Vec<SettingsChange> {
        self.settings
            .iter()
            .filter_map(|s| {
                let files = s.changed();
                (!files.is_empty()).then(|| (Arc::clone(s), files))
            })
            .collect()
    }
}

/// Applies `changes`, in order.
pub(super) async fn apply(changes: Vec<SettingsChange>, ctx: &RunContext) {
    for (source, files) in changes {
        source.apply(files, ctx).await;
    }
}
