//! [`SchemaGuardLayer`]: the layer of [`SchemaGuard`](super::SchemaGuard), in its two modes.

use super::*;

/// The mode of a [`SchemaGuardLayer`] built from given specs ([`SchemaGuardLayer::new`],
/// [`SchemaGuardLayer::from_router`]): it wraps any tool service.
#[derive(Clone)]
pub struct Fixed {
    table: Arc<Table>,
}

impl fmt::Debug for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tools: Vec<&String> = self.table.keys().collect();
        tools.sort_unstable();
        f.debug_struct("Fixed").field("checked", &tools).finish()
    }
}

/// The mode of a [`SchemaGuardLayer`] that reads the specs from the service it wraps
/// ([`SchemaGuardLayer::from_tools`]), each time it is applied.
#[derive(Debug, Clone, Copy, Default)]
pub struct FromTools;

/// Validates tool call arguments against the tools' JSON Schemas before the call. See the
/// [module docs](crate::schema).
///
/// `M` is where the schemas come from: [`Fixed`] (given when the layer is built) or
/// [`FromTools`] (read from the wrapped service).
///
/// # Clone
///
/// Clones share the options and the cache of compiled schemas.
#[derive(Clone)]
#[must_use]
pub struct SchemaGuardLayer<M = Fixed> {
    shared: Arc<Shared>,
    mode: M,
    nudge: bool,
}

impl SchemaGuardLayer<Fixed> {
    /// Checks the calls of the tools `specs` describe (compiled now); calls to other tools
    /// pass.
    pub fn new(specs: impl IntoIterator<Item = ToolSpec>) -> Self {
        let shared = Arc::new(Shared::default());
        let specs: Vec<ToolSpec> = specs.into_iter().collect();
        let table = shared.table(&specs);
        SchemaGuardLayer {
            shared,
            mode: Fixed { table },
            nudge: true,
        }
    }

    /// Checks the calls of the tools of `router` (as they are now).
    pub fn from_router(router: &ToolRouter) -> Self {
        Self::new(router.specs().iter().cloned())
    }
}

impl SchemaGuardLayer<FromTools> {
    /// Checks the calls of the tools of the service it wraps, reading their specs through
    /// [`ToolSpecs`] each time the layer is applied (in an agent: once per run, after the setup
    /// stages).
    pub fn from_tools() -> Self {
        SchemaGuardLayer {
            shared: Arc::new(Shared::default()),
            mode: FromTools,
            nudge: true,
        }
    }
}

impl<M> SchemaGuardLayer<M> {
    /// Don't append schema hints to outputs that report validation errors (the check before
    /// the call stays).
    pub fn without_nudge(mut self) -> Self {
        self.nudge = false;
        self
    }

    /// Whether outputs that report a validation error get a schema hint.
    pub fn nudges(&self) -> bool {
        self.nudge
    }
}

impl<M: fmt::Debug> fmt::Debug for SchemaGuardLayer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchemaGuardLayer")
            .field("mode", &self.mode)
            .field("nudge", &self.nudge)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for SchemaGuardLayer<Fixed> {
    type Service = SchemaGuard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SchemaGuard {
            inner,
            table: Arc::clone(&self.mode.table),
            nudge: self.nudge,
        }
    }
}

impl<S: ToolSpecs> Layer<S> for SchemaGuardLayer<FromTools> {
    type Service = SchemaGuard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SchemaGuard {
            table: self.shared.table_for(inner.tool_specs()),
            inner,
            nudge: self.nudge,
        }
    }
}
