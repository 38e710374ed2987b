//! [`EvictLayer`]: the layer of [`Evict`](super::Evict).

use super::*;

/// Cuts tool outputs over a size to head + marker + tail. See the
/// [module docs](crate::evict).
///
/// # Clone
///
/// The configuration is shared (one reference count per clone).
#[derive(Debug, Clone)]
#[must_use]
pub struct EvictLayer {
    config: Arc<Config>,
}

impl EvictLayer {
    /// The defaults: 80,000 characters, 2,000 head and tail, the file tools excluded, no
    /// spill.
    pub fn new() -> Self {
        EvictLayer {
            config: Arc::new(Config {
                max_chars: DEFAULT_MAX_CHARS,
                head: DEFAULT_HEAD_TAIL,
                tail: DEFAULT_HEAD_TAIL,
                excluded: ToolMatcher::exact(DEFAULT_EXCLUDED),
                spill_dir: None,
            }),
        }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.config).expect("configure an EvictLayer before cloning it")
    }

    /// Evict outputs over `n` characters.
    ///
    /// # Panics
    ///
    /// Panics if called on a layer that has been cloned (configure first).
    pub fn max_chars(mut self, n: usize) -> Self {
        self.config_mut().max_chars = n;
        self
    }

    /// Keep `head` characters from the start and `tail` from the end.
    ///
    /// # Panics
    ///
    /// Panics if `head + tail` is not below the eviction threshold, or if called on a layer
    /// that has been cloned.
    pub fn keep(mut self, head: usize, tail: usize) -> Self {
        let config = self.config_mut();
        assert!(
            head + tail < config.max_chars,
            "head + tail must be below max_chars"
        );
        config.head = head;
        config.tail = tail;
        self
    }

    /// Never evict the tools `matcher` picks (replaces the default list; use
    /// [`ToolMatcher::all`]`().not()` to evict every tool).
    ///
    /// # Panics
    ///
    /// Panics if called on a layer that has been cloned.
    pub fn exclude(mut self, matcher: impl Into<ToolMatcher>) -> Self {
        self.config_mut().excluded = matcher.into();
        self
    }

    /// Save each evicted output in full to a file under `dir` (created if missing), and name
    /// the file in the marker.
    ///
    /// # Panics
    ///
    /// Panics if called on a layer that has been cloned.
    pub fn spill_to(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config_mut().spill_dir = Some(dir.into());
        self
    }
}

impl Default for EvictLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for EvictLayer {
    type Service = Evict<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Evict {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}
