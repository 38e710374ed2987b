//! The tool stack's layer: `pre_tool_call` and `post_tool_call`.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use tower::{Service, ServiceExt};
use tower_agent_core::{
    BoxError,
    agent::{Approved, PendingApproval},
    error::{Abort, Deferred},
    message::ToolOutput,
    tool::{BoxToolService, ToolRequest},
};

use crate::{
    config::Config,
    envelope,
    park::{self, Scope},
    session,
};

/// Errors that are not the tool's result: an abort, a deferral, a parked call.
fn ends_the_call(err: &(dyn std::error::Error + 'static)) -> bool {
    Abort::find(err).is_some()
        || Deferred::find(err).is_some()
        || PendingApproval::find(err).is_some()
}

/// `pre_tool_call`, the tool stack under it, then `post_tool_call`.
#[derive(Clone)]
pub(crate) struct ToolHooks {
    config: Arc<Config>,
    inner: BoxToolService,
}

impl ToolHooks {
    pub(crate) fn new(config: Arc<Config>, inner: BoxToolService) -> Self {
        ToolHooks { config, inner }
    }
}

impl Service<ToolRequest> for ToolHooks {
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<ToolOutput, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        Box::pin(guarded_call(config, inner, req))
    }
}

async fn guarded_call(
    config: Arc<Config>,
    inner: BoxToolService,
    mut req: ToolRequest,
) -> Result<ToolOutput, BoxError> {
    let session = session::of(&config, &req.ctx);
    let id = req.call.id.clone();
    let name = req.call.name.clone();
    {
        let mut state = session.lock().await;
        let args = req.call.arguments.clone();
        let ctx = state.contexts().pre_tool_call(&id, &name, args);
        let scope = Arc::new(Scope {
            approved: req.extensions.get::<Approved>().is_some(),
            parked: std::sync::Mutex::new(None),
        });
        let emitted = park::scoped(Arc::clone(&scope), state.emit(ctx)).await;
        if let Some(why) = emitted.blocked {
            let parked = scope
                .parked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(escalation) = parked {
                // §9 through the crate's approvals: the call waits for a person.
                let why = format!("AGENT-HOOKS pre_tool_call: escalation {escalation}");
                return Err(PendingApproval::new(req.call, why).into());
            }
            return Ok(ToolOutput::error(id, why));
        }
        // §4.3: the tool gets the arguments the composition left.
        if let Some(args) = emitted.ctx.get("tool_call").and_then(|c| c.get("args"))
            && *args != req.call.arguments
        {
            req.call.arguments = args.clone();
        }
    }
    let args = req.call.arguments.clone();
    let mut output = match inner.oneshot(req).await {
        Ok(output) => output,
        Err(err) if ends_the_call(&*err) => return Err(err),
        // A tool that failed is an error result (§4.2 `tool_result.is_error`), in the words
        // the loop gives the model for it.
        Err(err) => ToolOutput::failed(id.clone(), &name, &*err),
    };
    let mut state = session.lock().await;
    let value = envelope::tool_value(&output);
    let ctx = state
        .contexts()
        .post_tool_call(&id, &name, args, value.clone(), output.is_error);
    let emitted = state.emit(ctx).await;
    if let Some(why) = emitted.blocked {
        // §6.1: a denied result is discarded, never shown to the model.
        return Ok(ToolOutput::error(id, why));
    }
    if let Some(new) = emitted.ctx.get("tool_result").and_then(|r| r.get("value"))
        && *new != value
    {
        envelope::apply_tool_value(&mut output, new.clone());
    }
    Ok(output)
}
