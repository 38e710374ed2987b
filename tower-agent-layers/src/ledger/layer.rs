//! [`LedgerLayer`]: the layer of [`Ledger`](super::Ledger).

use super::*;

/// Records every tool call into a [`LedgerSink`]. See the [module docs](crate::ledger).
///
/// # Clone
///
/// Clones share the sink.
#[derive(Clone)]
#[must_use]
pub struct LedgerLayer {
    sink: Arc<dyn LedgerSink>,
}

impl LedgerLayer {
    /// Records into `sink`.
    pub fn new(sink: impl LedgerSink) -> Self {
        LedgerLayer {
            sink: Arc::new(sink),
        }
    }

    /// Resolves once every entry recorded so far is written (see [`LedgerSink::flush`]).
    pub fn flush(&self) -> BoxFuture<'static, ()> {
        self.sink.flush()
    }
}

impl fmt::Debug for LedgerLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LedgerLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for LedgerLayer {
    type Service = Ledger<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Ledger {
            inner,
            sink: Arc::clone(&self.sink),
        }
    }
}
