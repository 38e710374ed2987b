//! [`Live`]: the hooks a registry's callbacks call, as their settings files are now — a
//! change during a run is seen by the step hook layer between steps, fires ConfigChange, and,
//! unless a hook blocks it, the hooks read from the files as they are take over.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use futures_util::future::BoxFuture;

use super::super::reload::{Reloader, snapshot, source_of};
use super::Inner;
use crate::{context::RunContext, layers::hooks::SettingsSource};

/// The hooks of a registry as they are now.
pub(crate) struct Live {
    current: RwLock<Arc<Inner>>,
    reload: Arc<Reloader>,
    /// Each settings file's digest at the last look (`None`: no file).
    seen: Mutex<Vec<(PathBuf, Option<[u8; 32]>)>>,
}

impl Live {
    /// `inner`, whose settings files are those of `reload`, as they were when it was built.
    pub(crate) fn new(inner: Arc<Inner>, reload: Arc<Reloader>) -> Arc<Self> {
        let seen = Mutex::new(reload.files.clone());
        Arc::new(Live {
            current: RwLock::new(inner),
            reload,
            seen,
        })
    }

    /// The hooks now.
    pub(crate) fn current(&self) -> Arc<Inner> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether there are settings files to watch.
    pub(crate) fn watches(&self) -> bool {
        !self.reload.files.is_empty()
    }
}

impl SettingsSource for Live {
    fn changed(&self) -> Vec<PathBuf> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let paths: Vec<PathBuf> = seen.iter().map(|(p, _)| p.clone()).collect();
        let now = snapshot(&paths);
        let changed = seen
            .iter()
            .zip(&now)
            .filter(|((_, before), (_, after))| before != after)
            .map(|((p, _), _)| p.clone())
            .collect();
        *seen = now;
        changed
    }

    fn apply<'a>(&'a self, files: Vec<PathBuf>, ctx: &'a RunContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let current = self.current();
            for file in &files {
                let source = source_of(file);
                let Some(reason) = current.config_change(file, source, Some(ctx)).await else {
                    continue;
                };
                if source == "policy_settings" {
                    ctx.warn(format!(
                        "a ConfigChange hook blocked a change of {}, a policy file: it cannot \
                         be blocked ({reason})",
                        file.display()
                    ));
                    continue;
                }
                ctx.warn(format!(
                    "a ConfigChange hook blocked the change of {}: the hooks stay as they \
                     were ({reason})",
                    file.display()
                ));
                return;
            }
            match self.reload.builder.clone().build() {
                Ok(hooks) => {
                    for warning in hooks.warnings() {
                        ctx.warn(warning.clone());
                    }
                    *self.current.write().unwrap_or_else(PoisonError::into_inner) =
                        Arc::clone(&hooks.inner);
                }
                Err(err) => ctx.warn(format!(
                    "the settings changed during the run do not load, the hooks stay as they \
                     were: {err}"
                )),
            }
        })
    }
}
