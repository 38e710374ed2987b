//! The start stack's layer: `agent_startup` and `input`.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use serde_json::Value;
use tower::{Service, ServiceExt};
use tower_agent_core::{
    BoxError,
    agent::start::{BoxStartService, RunStart},
};

use crate::{config::Config, envelope, session};

/// `agent_startup` (the agent's tools), then `input` (the prompt), then the start stack
/// under it.
#[derive(Clone)]
pub(crate) struct StartHooks {
    config: Arc<Config>,
    inner: BoxStartService,
}

impl StartHooks {
    pub(crate) fn new(config: Arc<Config>, inner: BoxStartService) -> Self {
        StartHooks { config, inner }
    }
}

impl Service<RunStart> for StartHooks {
    type Response = RunStart;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<RunStart, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, start: RunStart) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        Box::pin(async move {
            let start = match emit_start(&config, start).await {
                Ok(start) => start,
                Err(blocked) => return Ok(blocked),
            };
            inner.oneshot(start).await
        })
    }
}

/// The start as the two emissions left it; `Err` holds the start refused.
async fn emit_start(config: &Arc<Config>, mut start: RunStart) -> Result<RunStart, RunStart> {
    let session = session::of(config, &start.ctx);
    let mut state = session.lock().await;
    let mut tools: Vec<String> = start.tools.iter().map(|t| t.name.clone()).collect();
    tools.sort();
    let ctx = state.contexts().agent_startup(tools);
    if let Some(why) = state.emit(ctx).await.blocked {
        return Err(start.block(why));
    }
    let Some(prompt) = start.prompt.clone() else {
        return Ok(start);
    };
    let ctx = state
        .contexts()
        .input(Value::String(prompt.clone()), "user");
    let emitted = state.emit(ctx).await;
    if let Some(why) = emitted.blocked {
        return Err(start.block(why));
    }
    let content = emitted.ctx.get("input").and_then(|i| i.get("content"));
    let text = envelope::text_of(content);
    if text != prompt {
        start.prompt = Some(text);
    }
    Ok(start)
}
