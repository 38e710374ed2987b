//! A run's AGENT-HOOKS session: its emitter and its context builder, kept in the run's data
//! (one per [`AgentHooks`](crate::AgentHooks) set and run), shared by the set's layers.

use std::sync::Arc;

use agent_hooks::{
    AgentContext, AgentContextBuilder, EnforcementMode, FinalizeMeta, HostError, HostFailure,
    InterceptionEmitter, InterceptionPoint, InterceptionRecord, JCS_SHA256, Verdict,
    context_identity, finalize,
};
use tower_agent_core::{
    agent::{AgentResponse, Outcome},
    context::RunContext,
};

use crate::config::Config;

/// One run's session.
pub(crate) struct Session {
    state: tokio::sync::Mutex<State>,
}

/// What an emission decided, and the context as the composition left it (transforms
/// applied, spec §4.3).
pub(crate) struct Emitted {
    pub(crate) ctx: AgentContext,
    /// Why the action is blocked; `None` when it proceeds.
    pub(crate) blocked: Option<String>,
}

pub(crate) struct State {
    config: Arc<Config>,
    /// `Err`: the run's emitter could not be built; every emission of the run is denied.
    emitter: Result<InterceptionEmitter, String>,
    contexts: AgentContextBuilder,
    shut_down: bool,
}

/// The session of `config`'s set in the run of `ctx`, made at its first use.
pub(crate) fn of(config: &Arc<Config>, ctx: &RunContext) -> Arc<Session> {
    ctx.with_data(|data| {
        if let Some(session) = data.get_for::<Arc<Session>>(config.id) {
            return Arc::clone(session);
        }
        let emitter = config.emitter().map_err(|err| err.to_string());
        if let Err(err) = &emitter {
            tracing::error!("AGENT-HOOKS: the run's emitter could not be built: {err}");
        }
        let session = Arc::new(Session {
            state: tokio::sync::Mutex::new(State {
                config: Arc::clone(config),
                emitter,
                contexts: AgentContextBuilder::new(
                    &config.agent_id,
                    crate::FRAMEWORK,
                    ctx.session_id(),
                ),
                shut_down: false,
            }),
        });
        data.insert_for(config.id, Arc::clone(&session));
        session
    })
}

impl Session {
    /// The session's state, for one emission at a time (emissions of one run are serialized:
    /// their `sequence` is the order they ran in, spec §12.2).
    pub(crate) async fn lock(&self) -> tokio::sync::MutexGuard<'_, State> {
        self.state.lock().await
    }
}

impl State {
    /// The builder of the session's contexts (its sequence).
    pub(crate) fn contexts(&mut self) -> &mut AgentContextBuilder {
        &mut self.contexts
    }

    /// Runs one emission (spec §6–§10) on `ctx`.
    pub(crate) async fn emit(&mut self, mut ctx: AgentContext) -> Emitted {
        let point = point_of(&ctx).to_owned();
        let emitter = match &mut self.emitter {
            Ok(emitter) => emitter,
            Err(err) => {
                return Emitted {
                    ctx,
                    blocked: Some(format!(
                        "AGENT-HOOKS {point}: host_error:interceptor_failed (the run's emitter could not be built: {err})"
                    )),
                };
            }
        };
        let record = emitter.emit_unchecked(&mut ctx).await;
        // Delivered to the sink already; the buffer stays empty.
        emitter.take_records();
        let blocked = (!record.proceeds()).then(|| block_reason(&record));
        Emitted { ctx, blocked }
    }

    /// A host-synthesized deny (spec §11) over `ctx`, not dispatched to any interceptor:
    /// the record of a stream that failed closed. Delivered to the record sink.
    pub(crate) fn synthesize(
        &mut self,
        ctx: &AgentContext,
        error: HostError,
        detail: &str,
    ) -> InterceptionRecord {
        let resolved = self.emitter.as_ref().ok().and_then(|e| e.declaration());
        let (composition, provider, declaration) = match resolved {
            Some(d) => (
                d.configuration.composition,
                d.configuration.identity_provider.clone(),
                Some(d.declaration.clone()),
            ),
            None => {
                let (composition, provider) = self.config.code_meta();
                (composition, provider, None)
            }
        };
        let input_identity = match provider.as_deref() {
            Some(JCS_SHA256) => context_identity(ctx).ok(),
            _ => None,
        };
        let meta = FinalizeMeta {
            input_identity,
            identity_provider: provider,
            enforced_identity: None,
            jcs_input_rejected: false,
            unchanged_since_input: true,
            decided_by: None,
            composition,
            declaration,
            verdicts: Vec::new(),
            fold_truncated: None,
            resolved_by: None,
            interceptors_registered: 0,
        };
        let verdict = Verdict::host_error(error, Some(detail.to_owned()));
        let record = finalize(ctx, verdict, self.mode(), meta);
        if let Some(sink) = &self.config.on_record {
            sink(&record);
        }
        record
    }

    /// The §10.3 record of an emission whose context the host could not build (a value the
    /// identity domain refuses, kept as the model's raw text), delivered to the sink.
    pub(crate) fn host_failure(&mut self, point: InterceptionPoint, detail: &str) -> String {
        // What the host still knows of the emission it could not build (§10.3): its session,
        // the next sequence number (so records stay totally ordered) and the time, from an
        // envelope made for it and dropped.
        let envelope = self.contexts.agent_shutdown("");
        let session_id = envelope["session"]["id"].as_str().map(str::to_owned);
        let sequence = envelope["sequence"].as_i64();
        let timestamp = envelope["timestamp"].as_str().map(str::to_owned);
        if let Ok(emitter) = &mut self.emitter {
            emitter.record_host_failure(
                point,
                HostFailure {
                    detail: Some(detail.to_owned()),
                    session_id,
                    sequence,
                    timestamp,
                },
            );
            emitter.take_records();
        }
        format!(
            "AGENT-HOOKS {}: deny host_error:context_invalid ({detail})",
            point.as_str()
        )
    }

    fn mode(&self) -> EnforcementMode {
        match &self.emitter {
            Ok(emitter) => emitter.mode(),
            Err(_) => EnforcementMode::Enforce,
        }
    }
}

/// The interception point a context names.
fn point_of(ctx: &AgentContext) -> &str {
    ctx.get("interception_point")
        .and_then(|p| p.as_str())
        .unwrap_or("unknown")
}

/// Why a record blocks its action, for the run's outcome or the model's error output.
pub(crate) fn block_reason(record: &InterceptionRecord) -> String {
    let verdict = &record.verdict;
    let mut reason = format!(
        "AGENT-HOOKS {}: {} {}",
        record.interception_point.as_str(),
        verdict.decision.as_str(),
        verdict.reason.as_deref().unwrap_or("(no reason)")
    );
    if let Some(message) = &verdict.message {
        reason.push_str(": ");
        reason.push_str(message);
    }
    reason
}

/// `agent_shutdown` (spec §3.1): the run's last emission, once, whatever its outcome; its
/// verdict is recorded only.
pub(crate) async fn shutdown(config: &Arc<Config>, response: &AgentResponse, ctx: &RunContext) {
    let session = of(config, ctx);
    let mut state = session.lock().await;
    if std::mem::replace(&mut state.shut_down, true) {
        return;
    }
    let reason = match response.outcome {
        // An interrupted or deferred run ended its turn in order: it waits for a decision.
        Outcome::Finished
        | Outcome::Refused { .. }
        | Outcome::Interrupted { .. }
        | Outcome::Deferred { .. } => "completed",
        Outcome::Cancelled => "cancelled",
        _ => "error",
    };
    let ctx = state.contexts().agent_shutdown(reason);
    state.emit(ctx).await;
}
