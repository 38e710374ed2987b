//! [`AgentHooks`]: what builds each run's emitter, and the host's own options.

use std::{collections::BTreeSet, fmt, sync::Arc, time::Duration};

use agent_hooks::{
    ApprovalResolver, CompositionConfig, DeclarationError, EnforcementMode, HostDeclaration,
    HostRegistry, IdentityProvider, InterceptionEmitter, InterceptionPoint, InterceptionRecord,
    Interceptor,
};
use tower_agent_core::context::InstanceId;

/// The `agent.id` of every context unless [`AgentHooks::agent_id`] names another.
pub const DEFAULT_AGENT_ID: &str = "agent";

/// The `agent.framework` of every context.
pub const FRAMEWORK: &str = "tower-agent";

/// The record callback.
pub(crate) type RecordSink = Arc<dyn Fn(&InterceptionRecord) + Send + Sync>;

type IdentityFn = Arc<dyn Fn(&agent_hooks::AgentContext) -> String + Send + Sync>;
type RedactorFn =
    Arc<dyn Fn(&agent_hooks::AgentContext) -> agent_hooks::AgentContext + Send + Sync>;

/// The identity provider of a code configuration, kept so that each run's emitter gets one.
#[derive(Clone)]
enum Identity {
    JcsSha256,
    Null,
    Custom(String, IdentityFn),
}

/// One interceptor registered in code.
#[derive(Clone)]
struct Registered {
    interceptor: Arc<dyn Interceptor>,
    name: Option<String>,
    at: Option<BTreeSet<InterceptionPoint>>,
}

/// An interceptor shared by the emitters of every run.
struct Shared(Arc<dyn Interceptor>);

#[async_trait::async_trait]
impl Interceptor for Shared {
    async fn intercept(&self, context: &agent_hooks::AgentContext) -> agent_hooks::Verdict {
        self.0.intercept(context).await
    }

    fn name(&self) -> Option<String> {
        self.0.name()
    }
}

/// A resolver shared by the emitters of every run.
struct SharedResolver(Arc<dyn ApprovalResolver>);

#[async_trait::async_trait]
impl ApprovalResolver for SharedResolver {
    async fn resolve(
        &self,
        request: agent_hooks::ApprovalRequest<'_>,
    ) -> agent_hooks::ApprovalResolution {
        self.0.resolve(request).await
    }
}

/// A configuration written in code ([`AgentHooksBuilder`]).
#[derive(Clone)]
struct Code {
    interceptors: Vec<Registered>,
    mode: EnforcementMode,
    composition: CompositionConfig,
    identity: Identity,
    resolver: Option<Arc<dyn ApprovalResolver>>,
    redactor: Option<RedactorFn>,
    timeout: Option<Duration>,
    park: bool,
}

/// Where each run's emitter comes from.
#[derive(Clone)]
enum Source {
    Code(Code),
    Declaration {
        declaration: HostDeclaration,
        registry: Arc<HostRegistry>,
    },
}

#[derive(Clone)]
pub(crate) struct Config {
    source: Source,
    pub(crate) agent_id: String,
    pub(crate) on_record: Option<RecordSink>,
    pub(crate) incremental: bool,
    pub(crate) id: InstanceId,
}

impl Config {
    /// A new emitter for one run, with the record sink installed.
    pub(crate) fn emitter(&self) -> Result<InterceptionEmitter, DeclarationError> {
        let mut emitter = match &self.source {
            Source::Code(code) => code.emitter(),
            Source::Declaration {
                declaration,
                registry,
            } => InterceptionEmitter::from_declaration(declaration.clone(), registry)?,
        };
        if let Some(sink) = &self.on_record {
            let sink = Arc::clone(sink);
            emitter.set_record_sink(move |record| sink(record));
        }
        Ok(emitter)
    }

    /// The record meta a host-synthesized record needs when the run's emitter was built in
    /// code: the composition and the identity provider's name in force (an emitter built
    /// from a declaration carries its own: `InterceptionEmitter::declaration`).
    pub(crate) fn code_meta(&self) -> (CompositionConfig, Option<String>) {
        match &self.source {
            Source::Code(code) => (
                code.composition,
                match &code.identity {
                    Identity::JcsSha256 => Some(agent_hooks::JCS_SHA256.to_owned()),
                    Identity::Null => None,
                    Identity::Custom(name, _) => Some(name.clone()),
                },
            ),
            Source::Declaration { .. } => (CompositionConfig::default(), None),
        }
    }
}

impl Code {
    fn emitter(&self) -> InterceptionEmitter {
        let resolver: Option<Arc<dyn ApprovalResolver>> = match (&self.resolver, self.park) {
            (Some(r), true) => Some(Arc::new(crate::ParkResolver::new().or(Arc::clone(r)))),
            (None, true) => Some(Arc::new(crate::ParkResolver::new())),
            (r, false) => r.clone(),
        };
        let resolver = resolver.map(|r| Box::new(SharedResolver(r)) as Box<dyn ApprovalResolver>);
        let mut emitter = InterceptionEmitter::new(self.mode, resolver);
        emitter.set_composition(self.composition);
        let identity = match &self.identity {
            Identity::JcsSha256 => IdentityProvider::JcsSha256,
            Identity::Null => IdentityProvider::Null,
            Identity::Custom(name, f) => {
                let f = Arc::clone(f);
                IdentityProvider::Custom {
                    name: name.clone(),
                    f: Box::new(move |ctx| f(ctx)),
                }
            }
        };
        // The name was checked when the builder took it.
        let _ = emitter.set_identity_provider(identity);
        if let Some(redactor) = &self.redactor {
            let redactor = Arc::clone(redactor);
            emitter.set_approval_redactor(move |ctx| redactor(ctx));
        }
        if let Some(timeout) = self.timeout {
            emitter.set_timeout(timeout);
        }
        for r in &self.interceptors {
            emitter.register_at(
                Box::new(Shared(Arc::clone(&r.interceptor))),
                r.name.clone(),
                r.at.clone(),
            );
        }
        emitter
    }
}

/// An AGENT-HOOKS host: interceptors at the eight interception points of every run of the
/// agents it is given to ([`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks)).
/// See the [crate docs](crate).
///
/// Each run gets its own emitter (its own sequence, records and session), built from the
/// configuration, so one `AgentHooks` serves any number of runs at once.
#[derive(Clone)]
pub struct AgentHooks {
    config: Arc<Config>,
}

impl fmt::Debug for AgentHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.config.source {
            Source::Code(code) => format!("code ({} interceptors)", code.interceptors.len()),
            Source::Declaration { declaration, .. } => format!("declaration {declaration:?}"),
        };
        f.debug_struct("AgentHooks")
            .field("source", &source)
            .field("agent_id", &self.config.agent_id)
            .field("incremental_output", &self.config.incremental)
            .finish_non_exhaustive()
    }
}

impl AgentHooks {
    /// A host configured in code: interceptors, mode, composition, identity provider,
    /// approval resolver.
    pub fn builder() -> AgentHooksBuilder {
        AgentHooksBuilder {
            code: Code {
                interceptors: Vec::new(),
                mode: EnforcementMode::Enforce,
                composition: CompositionConfig::default(),
                identity: Identity::JcsSha256,
                resolver: None,
                redactor: None,
                timeout: Some(DEFAULT_TIMEOUT),
                park: false,
            },
        }
    }

    /// A host configured by an AGENT-HOOKS host declaration document (spec §7.7): its mode,
    /// composition, identity provider, approval resolver and redactor, timeouts, and the
    /// bindings of interceptors to points, each built by the `registry`'s kind resolvers.
    ///
    /// A surface stating `buffered_output: false` turns on
    /// [`incremental_output`](Self::incremental_output).
    ///
    /// The document is loaded, resolved and its bindings built once here, so a document the
    /// registry cannot honour is refused now, with the loader's
    /// [`DeclarationError`] (its `declaration_error:*` class); each run then builds its
    /// emitter from the same document and registry.
    ///
    /// # Errors
    ///
    /// The loader's refusal, unchanged.
    pub fn from_declaration(
        document: serde_json::Value,
        registry: HostRegistry,
    ) -> Result<Self, DeclarationError> {
        let declaration = HostDeclaration::from_value(document)?;
        let emitter = InterceptionEmitter::from_declaration(declaration.clone(), &registry)?;
        // §12.1a: a document whose surface says `buffered_output: false` (with the
        // `incremental_output` capability and its exposure bound) mediates incrementally.
        let incremental = emitter
            .declaration()
            .is_some_and(|resolved| !resolved.surface.buffered_output);
        let hooks = Self::new(Source::Declaration {
            declaration,
            registry: Arc::new(registry),
        });
        Ok(if incremental {
            hooks.incremental_output()
        } else {
            hooks
        })
    }

    /// What the set's layers share.
    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    fn new(source: Source) -> Self {
        AgentHooks {
            config: Arc::new(Config {
                source,
                agent_id: DEFAULT_AGENT_ID.to_owned(),
                on_record: None,
                incremental: false,
                id: InstanceId::new(),
            }),
        }
    }

    /// The `agent.id` of every context (default [`DEFAULT_AGENT_ID`]); `agent.framework` is
    /// [`FRAMEWORK`], `session.id` the run's thread id.
    #[must_use]
    pub fn agent_id(mut self, id: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.config).agent_id = id.into();
        self
    }

    /// Gives every interception record (spec §10.3) to `sink`, as it is made: one per
    /// emission, in order, the host-synthesized ones included. The host keeps none in memory
    /// past its emission (the emitter's buffer is drained after each).
    #[must_use]
    pub fn on_record(mut self, sink: impl Fn(&InterceptionRecord) + Send + Sync + 'static) -> Self {
        Arc::make_mut(&mut self.config).on_record = Some(Arc::new(sink));
        self
    }

    /// Mediates a streaming answer incrementally (spec §12.1 exception; see [Streaming](crate#streaming)):
    /// `buffered_output: false`, exposure bound `none`.
    #[must_use]
    pub fn incremental_output(mut self) -> Self {
        Arc::make_mut(&mut self.config).incremental = true;
        self
    }
}

/// The interceptor timeout of a configuration in code unless [`AgentHooksBuilder::timeout`]
/// says otherwise: 5 seconds, the spec's recommended default (§7). A breach is a
/// `host_error:interceptor_timeout` deny.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds an [`AgentHooks`] configured in code ([`AgentHooks::builder`]).
#[derive(Clone)]
#[must_use]
pub struct AgentHooksBuilder {
    code: Code,
}

impl fmt::Debug for AgentHooksBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentHooksBuilder")
            .field("interceptors", &self.code.interceptors.len())
            .field("mode", &self.code.mode)
            .field("composition", &self.code.composition)
            .finish_non_exhaustive()
    }
}

impl AgentHooksBuilder {
    /// Registers an interceptor at every point. Registration order is dispatch order (§7).
    pub fn interceptor(self, interceptor: impl Interceptor + 'static) -> Self {
        self.shared_interceptor(Arc::new(interceptor), None, None)
    }

    /// Registers an interceptor under a payload-free `name` (recorded on `verdicts[].name`),
    /// at `points` only (`None`: every point).
    pub fn shared_interceptor(
        mut self,
        interceptor: Arc<dyn Interceptor>,
        name: Option<String>,
        points: Option<BTreeSet<InterceptionPoint>>,
    ) -> Self {
        self.code.interceptors.push(Registered {
            interceptor,
            name,
            at: points,
        });
        self
    }

    /// `enforce` (the default) or `evaluate_only` (§8: verdicts are recorded, nothing is
    /// enforced).
    pub fn mode(mut self, mode: EnforcementMode) -> Self {
        self.code.mode = mode;
        self
    }

    /// The composition profile and knobs (§7.1); default `sequential/first_deny`,
    /// `on_approval: stop`.
    pub fn composition(mut self, composition: CompositionConfig) -> Self {
        self.code.composition = composition;
        self
    }

    /// The identity provider (§10.1): `jcs-sha256` (the default), `Null` (identity-unbound
    /// records), or a custom one ([`IdentityProvider::custom`] checks its name).
    pub fn identity_provider(mut self, provider: IdentityProvider) -> Self {
        self.code.identity = match provider {
            IdentityProvider::JcsSha256 => Identity::JcsSha256,
            IdentityProvider::Null => Identity::Null,
            IdentityProvider::Custom { name, f } => Identity::Custom(name, Arc::from(f)),
        };
        self
    }

    /// The approval resolver a liftable deny consults (§9); without one, such a deny
    /// stands.
    pub fn approval_resolver(mut self, resolver: Arc<dyn ApprovalResolver>) -> Self {
        self.code.resolver = Some(resolver);
        self
    }

    /// Parks an escalation at `pre_tool_call` as the crate's own pending approval (the run
    /// ends `Interrupted`, the call saved with its thread until a person decides): the
    /// approval resolver becomes a [`ParkResolver`](crate::ParkResolver), asking the one set
    /// with [`approval_resolver`](Self::approval_resolver) (if any) at the other points.
    pub fn park_escalations(mut self) -> Self {
        self.code.park = true;
        self
    }

    /// The approval redactor (§9): what the approval resolver sees of a context.
    pub fn approval_redactor(
        mut self,
        redactor: impl Fn(&agent_hooks::AgentContext) -> agent_hooks::AgentContext
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.code.redactor = Some(Arc::new(redactor));
        self
    }

    /// Bounds each interceptor call (default [`DEFAULT_TIMEOUT`]); `None`: unbounded.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.code.timeout = timeout;
        self
    }

    /// The host.
    pub fn build(self) -> AgentHooks {
        AgentHooks::new(Source::Code(self.code))
    }
}
