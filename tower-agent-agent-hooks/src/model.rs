//! The model stack's layer: `pre_model_call`, `post_model_call` and `output`, buffered or
//! incremental.

use std::{
    collections::VecDeque,
    sync::Arc,
    task::{Context, Poll},
};

use agent_hooks::{HostError, InterceptionPoint};
use futures_util::{StreamExt, future::BoxFuture};
use serde_json::Value;
use tower::{Service, ServiceExt};
use tower_agent_core::{
    BoxError,
    error::Block,
    event::ModelDelta,
    model::{BoxModelService, ModelBody, ModelChunk, ModelRequest, ModelResponse},
};

use crate::{
    config::Config,
    envelope,
    session::{self, Session},
};

/// `pre_model_call`, the model stack under it, then `post_model_call` and, on an answer
/// without tool calls, `output`.
#[derive(Clone)]
pub(crate) struct ModelHooks {
    config: Arc<Config>,
    inner: BoxModelService,
}

impl ModelHooks {
    pub(crate) fn new(config: Arc<Config>, inner: BoxModelService) -> Self {
        ModelHooks { config, inner }
    }
}

impl Service<ModelRequest> for ModelHooks {
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<ModelResponse, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        Box::pin(guarded_call(config, inner, req))
    }
}

/// The call's model id: the model its settings name, else `default`.
fn model_id(req: &ModelRequest) -> String {
    req.settings
        .model
        .as_deref()
        .unwrap_or("default")
        .to_owned()
}

async fn guarded_call(
    config: Arc<Config>,
    inner: BoxModelService,
    mut req: ModelRequest,
) -> Result<ModelResponse, BoxError> {
    let session = session::of(&config, &req.ctx);
    let model = model_id(&req);
    {
        let mut state = session.lock().await;
        let before = envelope::messages(&req.messages);
        let ctx = state.contexts().pre_model_call(&model, before.clone());
        let emitted = state.emit(ctx).await;
        if let Some(why) = emitted.blocked {
            return Err(Block::new(why).into());
        }
        if let Some(after) = emitted.ctx.get("messages")
            && after.as_array() != Some(&before)
        {
            envelope::apply_messages(&mut req.messages, &before, after);
        }
    }
    let response = inner.oneshot(req).await?;
    if config.incremental && response.is_streaming() {
        return Ok(incremental(session, model, response));
    }
    // §12.1: the whole answer before its verdict; nothing of it streams before.
    let response = response.collect().await?;
    settle(&session, &model, response).await
}

/// `post_model_call` over the whole answer, then `output` if it calls no tool: the answer as
/// their transforms left it, or the [`Block`] of a deny.
async fn settle(
    session: &Session,
    model: &str,
    mut response: ModelResponse,
) -> Result<ModelResponse, BoxError> {
    let mut state = session.lock().await;
    if let Some(detail) = envelope::beyond_i_json(&response.message.tool_calls) {
        // §10.2: a value the identity domain refuses, kept by the provider as the model's
        // text; no context can carry it faithfully, so none is built (§10.3).
        let why = state.host_failure(InterceptionPoint::PostModelCall, detail);
        return Err(Block::new(why).into());
    }
    let content = envelope::content(&response.message);
    let calls = envelope::tool_calls(&response.message.tool_calls);
    let reason = envelope::finish_reason(&response);
    let ctx = state
        .contexts()
        .post_model_call(model, content, calls, &reason);
    let before = ctx.get("response").cloned().unwrap_or(Value::Null);
    let emitted = state.emit(ctx).await;
    if let Some(why) = emitted.blocked {
        return Err(Block::new(why).into());
    }
    if let Some(after) = emitted.ctx.get("response")
        && *after != before
    {
        envelope::apply_response(&mut response.message, &before, after);
    }
    if !response.message.tool_calls.is_empty() {
        return Ok(response);
    }
    let content = Value::String(response.message.text().into_owned());
    let ctx = state.contexts().output(content.clone());
    let emitted = state.emit(ctx).await;
    if let Some(why) = emitted.blocked {
        return Err(Block::new(why).into());
    }
    let after = emitted.ctx.get("output").and_then(|o| o.get("content"));
    if after != Some(&content) {
        envelope::set_text(&mut response.message, &envelope::text_of(after));
    }
    Ok(response)
}

/// Incremental mediation (§12.1 exception): see [Streaming](crate#streaming).
struct Incremental {
    session: Arc<Session>,
    model: String,
    body: ModelBody,
    /// The text received so far.
    prefix: String,
    /// The last piece received, not yet covered by a verdict.
    pending: Option<String>,
    /// What the stream gives out next.
    out: VecDeque<Result<ModelChunk, BoxError>>,
    ended: bool,
}

fn incremental(session: Arc<Session>, model: String, head: ModelResponse) -> ModelResponse {
    let mut head = head;
    let body = std::mem::take(&mut head.body);
    let state = Incremental {
        session,
        model,
        body,
        prefix: String::new(),
        pending: None,
        out: VecDeque::new(),
        ended: false,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.out.pop_front() {
                return Some((item, state));
            }
            if state.ended {
                return None;
            }
            state.advance().await;
        }
    });
    let mut resp = ModelResponse::streaming(ModelBody::new(stream));
    resp.extensions = head.extensions;
    resp.meta = head.meta;
    resp
}

impl Incremental {
    /// Reads the next chunk of the model's stream and decides what it releases.
    async fn advance(&mut self) {
        match self.body.next().await {
            Some(Ok(ModelChunk::Delta(ModelDelta::Text { text }))) => self.piece(text).await,
            // Tool-call pieces and reasoning are held back: the answer's Done carries them,
            // after its verdict (no eager dispatch before `post_model_call`).
            Some(Ok(ModelChunk::Delta(_))) => {}
            Some(Ok(ModelChunk::Done(done))) => {
                self.ended = true;
                let settled = settle(&self.session, &self.model, *done).await;
                match settled {
                    Ok(done) => {
                        if let Some(text) = self.pending.take() {
                            self.out
                                .push_back(Ok(ModelChunk::Delta(ModelDelta::Text { text })));
                        }
                        self.out.push_back(Ok(ModelChunk::Done(Box::new(done))));
                    }
                    Err(err) => self.out.push_back(Err(err)),
                }
            }
            // A chunk of a kind this layer does not know: held back like the others.
            Some(Ok(_)) => {}
            Some(Err(err)) => self.residue(Some(err)).await,
            None => self.residue(None).await,
        }
    }

    /// A new piece closes the pending segment: its verdict releases it, or ends the stream.
    async fn piece(&mut self, text: String) {
        if let Some(pending) = self.pending.take() {
            let mut state = self.session.lock().await;
            let ctx = state.contexts().post_model_call(
                &self.model,
                Value::String(self.prefix.clone()),
                Vec::new(),
                "incremental",
            );
            if let Some(why) = state.emit(ctx).await.blocked {
                self.ended = true;
                self.out.push_back(Err(Block::new(why).into()));
                return;
            }
            self.out
                .push_back(Ok(ModelChunk::Delta(ModelDelta::Text { text: pending })));
        }
        self.prefix.push_str(&text);
        self.pending = Some(text);
    }

    /// The stream failed or ended without its answer: text no emission covered fails closed
    /// (§12.1 exception item 3); the stream's own error otherwise.
    async fn residue(&mut self, err: Option<BoxError>) {
        self.ended = true;
        let err = err.unwrap_or_else(|| "the model's stream ended without its answer".into());
        if self.pending.take().is_none() {
            self.out.push_back(Err(err));
            return;
        }
        let mut state = self.session.lock().await;
        let ctx = state.contexts().post_model_call(
            &self.model,
            Value::String(std::mem::take(&mut self.prefix)),
            Vec::new(),
            "stream_incomplete",
        );
        let detail = "the stream ended with text no emission covered";
        let record = state.synthesize(&ctx, HostError::StreamingUnsupported, detail);
        if record.proceeds() {
            // evaluate_only (§8): recorded; the stream failed on its own.
            self.out.push_back(Err(err));
            return;
        }
        let why = session::block_reason(&record);
        self.out
            .push_back(Err(Block::new(format!("{why} ({err})")).into()));
    }
}
