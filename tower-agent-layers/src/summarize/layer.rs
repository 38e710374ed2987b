//! [`SummarizeLayer`]: the layer of [`Summarize`](super::Summarize), and its callbacks.

use super::*;

/// Compacts old messages with a summarizer model. See the
/// [module docs](crate::summarize).
///
/// # Clone
///
/// The configuration is shared; the summarizer service is cloned.
#[derive(Debug, Clone)]
#[must_use]
pub struct SummarizeLayer<Z> {
    summarizer: Z,
    pub(super) config: Arc<Config>,
}

impl<Z> SummarizeLayer<Z> {
    /// Summarize with `summarizer` (any model service), with the default settings.
    pub fn new(summarizer: Z) -> Self {
        SummarizeLayer {
            summarizer,
            config: Arc::new(Config {
                window: DEFAULT_CONTEXT_WINDOW,
                trigger: DEFAULT_TRIGGER,
                keep: DEFAULT_KEEP,
                min_keep: DEFAULT_MIN_KEEP,
                arg_chars: DEFAULT_ARG_CHARS,
                truncated_tools: vec!["write_file".into(), "edit_file".into()],
                summary_words: DEFAULT_SUMMARY_WORDS,
                counter: Arc::new(BytesPerFour),
                on_compact: None,
                retry_on_context_length: true,
            }),
        }
    }

    pub(super) fn config_mut(&mut self) -> &mut Config {
        Arc::get_mut(&mut self.config).expect("configure a SummarizeLayer before cloning it")
    }

    /// The context window, in tokens (default 128,000).
    pub fn context_window(mut self, tokens: usize) -> Self {
        self.config_mut().window = tokens;
        self
    }

    /// The share of the window that triggers compaction (default 0.85).
    pub fn trigger_at(mut self, share: f64) -> Self {
        self.config_mut().trigger = share;
        self
    }

    /// The share of messages kept as they are (default 0.10) and the least number kept
    /// (default 2).
    pub fn keep(mut self, share: f64, at_least: usize) -> Self {
        let config = self.config_mut();
        config.keep = share;
        config.min_keep = at_least;
        self
    }

    /// Cut the arguments of these tools to `chars` characters in the transcript the
    /// summarizer reads (default `write_file`, `edit_file`, 2,000).
    pub fn truncate_args<N: Into<String>>(
        mut self,
        tools: impl IntoIterator<Item = N>,
        chars: usize,
    ) -> Self {
        let config = self.config_mut();
        config.truncated_tools = tools.into_iter().map(Into::into).collect();
        config.arg_chars = chars;
        self
    }

    /// The word limit asked of the summarizer (default 2,000).
    pub fn summary_words(mut self, words: usize) -> Self {
        self.config_mut().summary_words = words;
        self
    }

    /// Whether a call the estimate let through but the provider rejected as too long
    /// ([`ProviderError::is_context_length_exceeded`](tower_agent_core::model::ProviderError::is_context_length_exceeded))
    /// is compacted and retried once (default on). See [the module docs](crate::summarize).
    pub fn retry_on_context_length(mut self, on: bool) -> Self {
        self.config_mut().retry_on_context_length = on;
        self
    }

    /// The token estimator (default [`BytesPerFour`]).
    pub fn token_counter<C: TokenCounter>(mut self, counter: C) -> Self {
        self.config_mut().counter = Arc::new(counter);
        self
    }

    /// A PreCompact callback: observe each compaction before it happens, or veto it. It
    /// may answer at once or return a future of its answer (`async move { … }`).
    pub fn on_compact<F, R, M>(mut self, f: F) -> Self
    where
        F: Fn(CompactInfo, ModelRequest) -> R + Send + Sync + 'static,
        R: HookResult<CompactDecision, M>,
    {
        self.config_mut().on_compact = Some(Arc::new(move |i, r| f(i, r).into_hook_future()));
        self
    }
}

impl<S, Z: Clone> Layer<S> for SummarizeLayer<Z> {
    type Service = Summarize<S, Z>;

    fn layer(&self, inner: S) -> Self::Service {
        Summarize {
            inner,
            summarizer: self.summarizer.clone(),
            config: Arc::clone(&self.config),
        }
    }
}
