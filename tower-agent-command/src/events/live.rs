//! [`Live`]: the hooks a registry's callbacks call, as their settings files are now — a
//! change during a run is seen by the step hook layer between steps, fires ConfigChange, and,
//! unless a hook blocks it, the hooks read from the files as they are take over.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError, RwLock},
};

use futures_util::future::BoxFuture;

use super::Inner;
use crate::{
    config::{digest, source_of},
    error::ConfigError,
};
use tower_agent_core::context::RunContext;
use tower_agent_layers::hooks::SettingsSource;
use tower_agent_os::bounded::Stamp;

/// Builds the hooks again from their sources as they are now: the builder's `build`, passed
/// down by the crate root (the runtime does not know the builder).
pub(crate) type Rebuild = Box<dyn Fn() -> Result<Arc<Inner>, ConfigError> + Send + Sync>;

/// The hooks of a registry as they are now.
pub(crate) struct Live {
    current: RwLock<Arc<Inner>>,
    rebuild: Rebuild,
    /// Each settings file at the last look.
    seen: Mutex<Vec<Seen>>,
}

/// A settings file at the last look: its status (`None`: none taken yet, or no file) and
/// digest (`None`: no file).
struct Seen {
    path: PathBuf,
    stamp: Option<Stamp>,
    digest: Option<[u8; 32]>,
}

impl Seen {
    /// Looks again; whether the file changed. A `stat` when its status is as it was (and not
    /// within the racy window of a timestamp's tick); a read and digest only otherwise.
    fn changed(&mut self) -> bool {
        let stamp = std::fs::metadata(&self.path).ok().map(|m| Stamp::of(&m));
        if stamp.is_some() && stamp == self.stamp && !stamp.is_some_and(|s| s.is_recent()) {
            return false;
        }
        self.stamp = stamp;
        let digest = digest(&self.path);
        std::mem::replace(&mut self.digest, digest) != digest
    }
}

impl Live {
    /// `inner`, whose settings files are `files` (with their digests as they were when it was
    /// built), built again from its sources by `rebuild`.
    pub(crate) fn new(
        inner: Arc<Inner>,
        files: &[(PathBuf, Option<[u8; 32]>)],
        rebuild: Rebuild,
    ) -> Arc<Self> {
        let seen = (files.iter())
            .map(|(path, digest)| Seen {
                path: path.clone(),
                stamp: None,
                digest: *digest,
            })
            .collect();
        let seen = Mutex::new(seen);
        Arc::new(Live {
            current: RwLock::new(inner),
            rebuild,
            seen,
        })
    }

    /// The hooks now.
    pub(crate) fn current(&self) -> Arc<Inner> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether there are settings files to watch.
    pub(crate) fn watches(&self) -> bool {
        !(self.seen.lock().unwrap_or_else(PoisonError::into_inner)).is_empty()
    }
}

impl SettingsSource for Live {
    /// The files changed since the last look: a `stat` of each, a read only of those whose
    /// status changed.
    fn changed(&self) -> Vec<PathBuf> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        (seen.iter_mut())
            .filter_map(|file| file.changed().then(|| file.path.clone()))
            .collect()
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
            match (self.rebuild)() {
                Ok(inner) => {
                    for warning in &inner.config.warnings {
                        ctx.warn(warning.clone());
                    }
                    *self.current.write().unwrap_or_else(PoisonError::into_inner) = inner;
                }
                Err(err) => ctx.warn(format!(
                    "the settings changed during the run do not load, the hooks stay as they \
                     were: {err}"
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A settings file is changed when its bytes are: rewritten as it was, it is not; edited,
    /// removed or made again, it is; looked at again with nothing done, it is not.
    #[test]
    fn a_settings_file_changes_when_its_bytes_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{}").unwrap();
        let mut seen = Seen {
            path: path.clone(),
            stamp: None,
            digest: digest(&path),
        };
        assert!(!seen.changed(), "first look, as built");
        assert!(!seen.changed(), "nothing done");
        std::fs::write(&path, "{}").unwrap();
        assert!(!seen.changed(), "the same bytes again");
        std::fs::write(&path, r#"{"hooks": {}}"#).unwrap();
        assert!(seen.changed(), "edited");
        assert!(!seen.changed(), "seen");
        std::fs::remove_file(&path).unwrap();
        assert!(seen.changed(), "removed");
        assert!(!seen.changed(), "still none");
        std::fs::write(&path, "{}").unwrap();
        assert!(seen.changed(), "made again");
    }
}
