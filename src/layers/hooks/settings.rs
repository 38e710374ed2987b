//! Settings a hook set was read from, watched during a run: the step hook layer asks each
//! [`SettingsSource`] between steps (after a step's tool calls, with the watched files of
//! FileChanged) and lets it apply what changed (command hooks: ConfigChange, then the hooks
//! of the settings files as they are now).

use std::{path::PathBuf, sync::Arc};

use futures_util::future::BoxFuture;

use super::HookSetInner;
use crate::context::RunContext;

/// Where a hook set's hooks come from, when that can change during a run (command hooks'
/// settings files). Defined here, implemented by the source (dependency inversion).
pub(crate) trait SettingsSource: Send + Sync + 'static {
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
