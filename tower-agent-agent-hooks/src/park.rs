//! Escalations parked as the crate's own approvals: [`ParkResolver`].

use std::sync::{Arc, Mutex};

use agent_hooks::{
    ApprovalOutcome, ApprovalRequest, ApprovalResolution, ApprovalResolver, InterceptionPoint,
    Verdict,
};

/// The name [`ParkResolver`] is registered under for a host declaration to name it
/// (`"approval": {"resolver": "tower-agent-approvals"}`).
pub const PARK_RESOLVER: &str = "tower-agent-approvals";

/// What the tool layer tells the resolver about the call it emits `pre_tool_call` for, and
/// what the resolver answers back.
pub(crate) struct Scope {
    /// A person approved this call ([`Approved`](tower_agent_core::agent::Approved)).
    pub(crate) approved: bool,
    /// The escalation the resolver parked: its reason and message.
    pub(crate) parked: Mutex<Option<String>>,
}

tokio::task_local! {
    static SCOPE: Arc<Scope>;
}

/// Runs `f` (a `pre_tool_call` emission) with `scope` visible to a [`ParkResolver`].
pub(crate) async fn scoped<F: Future>(scope: Arc<Scope>, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// An approval resolver (spec §9) that parks a liftable deny at `pre_tool_call` as a pending
/// approval of the crate ([`agent::interrupt`](tower_agent_core::agent::interrupt)): the run
/// ends [`Interrupted`](tower_agent_core::agent::Outcome::Interrupted) with the call saved in
/// its thread, and a later request answers it with
/// [`Approvals`](tower_agent_core::agent::interrupt::Approvals) — from any process sharing
/// the store, after a restart too. An approved call comes back through the tool stack: its
/// escalation is then lifted (`resolved_by: "approval"`, the verdict an `allow`), and the
/// interceptors still decide everything else (a plain deny stands). A denied call never
/// runs.
///
/// Until the person decides, the consultation is recorded as unresolved (`resolved_by:
/// "rejection"`). At the other points, or for a tool call outside an
/// [`AgentHooks`](crate::AgentHooks) tool layer, it asks the resolver it wraps
/// ([`or`](Self::or)), else leaves the deny standing.
///
/// Configured in code with [`AgentHooksBuilder::park_escalations`](crate::AgentHooksBuilder::park_escalations);
/// for a host declaration, register it under [`PARK_RESOLVER`] in the
/// [`HostRegistry`](agent_hooks::HostRegistry).
#[derive(Clone, Default)]
pub struct ParkResolver {
    other: Option<Arc<dyn ApprovalResolver>>,
}

impl std::fmt::Debug for ParkResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkResolver")
            .field("other", &self.other.is_some())
            .finish()
    }
}

impl ParkResolver {
    /// A resolver that parks `pre_tool_call` escalations and leaves the others' denies
    /// standing.
    pub fn new() -> Self {
        Self::default()
    }

    /// This resolver, asking `other` about escalations it does not park.
    #[must_use]
    pub fn or(mut self, other: Arc<dyn ApprovalResolver>) -> Self {
        self.other = Some(other);
        self
    }
}

#[async_trait::async_trait]
impl ApprovalResolver for ParkResolver {
    async fn resolve(&self, request: ApprovalRequest<'_>) -> ApprovalResolution {
        let scope = SCOPE.try_with(Arc::clone).ok();
        match scope {
            Some(scope) if request.interception_point == InterceptionPoint::PreToolCall => {
                if scope.approved {
                    return ApprovalResolution {
                        outcome: ApprovalOutcome::Approve,
                        context_identity: request.context_identity.clone(),
                        verdict: Some(Verdict::allow()),
                    };
                }
                let verdict = request.verdict;
                let mut why = verdict
                    .reason
                    .clone()
                    .unwrap_or_else(|| "(no reason)".into());
                if let Some(message) = &verdict.message {
                    why.push_str(": ");
                    why.push_str(message);
                }
                *scope.parked.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                unresolved(&request)
            }
            _ => match &self.other {
                Some(other) => other.resolve(request).await,
                None => unresolved(&request),
            },
        }
    }
}

fn unresolved(request: &ApprovalRequest<'_>) -> ApprovalResolution {
    ApprovalResolution {
        outcome: ApprovalOutcome::Unresolved,
        context_identity: request.context_identity.clone(),
        verdict: None,
    }
}
