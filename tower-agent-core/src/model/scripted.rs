//! A deterministic model that replays a script.

use std::{
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use serde_json::Value;
use tower::Service;

#[cfg(doc)]
use super::ResponseMeta;
use super::{ModelRequest, ModelResponse};
use crate::{
    error::BoxError,
    message::{StopReason, ToolCall},
};

type Decide = Arc<dyn Fn(&ModelRequest) -> Result<ModelResponse, BoxError> + Send + Sync>;

#[derive(Clone)]
enum Turn {
    Respond(Box<ModelResponse>),
    Fail(String),
    Decide(Decide),
}

/// A deterministic model service that replays a script of responses — text, tool calls,
/// errors, or a decision made from the request by a closure. For tests, docs and the offline
/// quickstart; no feature flag needed.
///
/// By default all clones share one cursor: the n-th call anywhere gets the n-th turn. With
/// [`per_run`](Self::per_run), the turn is chosen by the request's step instead, so
/// concurrent runs each replay the whole script. When the script is exhausted, the
/// [`otherwise`](Self::otherwise) closure answers, or the call fails with a clear error.
///
/// Tool calls scripted without an id get `call_{k}_{i}`, where `k` is the number of messages in
/// the request and `i` the call's position, which is unique within a thread.
///
/// # Example
///
/// ```
/// use serde_json::json;
/// use tower::{Service, ServiceExt};
/// use tower_agent_core::model::{ModelRequest, ScriptedModel};
/// use tower_agent_core::message::Message;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::BoxError> {
/// let mut model = ScriptedModel::new()
///     .tool_call("read_file", json!({ "path": "notes.txt" }))
///     .decide(|req| {
///         let last = req.messages.last().unwrap().text().into_owned();
///         Ok(tower_agent_core::model::ModelResponse::text(format!("The file says: {last}")))
///     });
///
/// let first = model.ready().await?.call(ModelRequest::new(vec![Message::user("Read it")])).await?;
/// assert_eq!(first.message.tool_calls[0].name, "read_file");
/// assert_eq!(first.message.tool_calls[0].id, "call_1_0");
///
/// let second = model.ready().await?.call(ModelRequest::new(vec![Message::user("hello")])).await?;
/// assert_eq!(second.message.text(), "The file says: hello");
///
/// // The script is exhausted now.
/// let err = model.ready().await?.call(ModelRequest::new(vec![])).await.unwrap_err();
/// assert!(err.to_string().contains("script"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    turns: Arc<Vec<Turn>>,
    cursor: Arc<AtomicUsize>,
    per_run: bool,
    otherwise: Option<Decide>,
    latency: Option<Duration>,
    log: Option<Arc<Mutex<Vec<ModelRequest>>>>,
    streaming: Option<usize>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        ScriptedModel {
            turns: Arc::new(Vec::new()),
            cursor: Arc::new(AtomicUsize::new(0)),
            per_run: false,
            otherwise: None,
            latency: None,
            log: None,
            streaming: None,
        }
    }

    /// A model that always decides with `f`.
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&ModelRequest) -> Result<ModelResponse, BoxError> + Send + Sync + 'static,
    {
        Self::new().otherwise(f)
    }

    fn push(mut self, turn: Turn) -> Self {
        Arc::make_mut(&mut self.turns).push(turn);
        self
    }

    /// Next turn: answer `text`.
    #[must_use]
    pub fn text(self, text: impl Into<String>) -> Self {
        self.push(Turn::Respond(Box::new(ModelResponse::text(text))))
    }

    /// Next turn: call one tool.
    #[must_use]
    pub fn tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls([(name, arguments)])
    }

    /// Next turn: call several tools at once (they run concurrently).
    #[must_use]
    pub fn tool_calls<N: Into<String>>(self, calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        let calls = calls
            .into_iter()
            .map(|(name, args)| ToolCall::new(String::new(), name, args));
        self.push(Turn::Respond(Box::new(ModelResponse::tool_calls(calls))))
    }

    /// Next turn: answer with `response` as it is.
    #[must_use]
    pub fn respond(self, response: ModelResponse) -> Self {
        self.push(Turn::Respond(Box::new(response)))
    }

    /// Next turn: fail with an error saying `message`.
    #[must_use]
    pub fn fail(self, message: impl Into<String>) -> Self {
        self.push(Turn::Fail(message.into()))
    }

    /// Next turn: let `f` decide from the request.
    #[must_use]
    pub fn decide<F>(self, f: F) -> Self
    where
        F: Fn(&ModelRequest) -> Result<ModelResponse, BoxError> + Send + Sync + 'static,
    {
        self.push(Turn::Decide(Arc::new(f)))
    }

    /// Answer with `f` once the script is exhausted.
    #[must_use]
    pub fn otherwise<F>(mut self, f: F) -> Self
    where
        F: Fn(&ModelRequest) -> Result<ModelResponse, BoxError> + Send + Sync + 'static,
    {
        self.otherwise = Some(Arc::new(f));
        self
    }

    /// Choose the turn by the request's step, so every run replays the script from its start.
    #[must_use]
    pub fn per_run(mut self) -> Self {
        self.per_run = true;
        self
    }

    /// Wait `latency` (tokio time) before each answer.
    #[must_use]
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// Answer as a streaming provider does: each answer a stream of pieces of at most
    /// `chars` characters ([`ModelResponse::into_streaming`]).
    #[must_use]
    pub fn streaming(mut self, chars: usize) -> Self {
        self.streaming = Some(chars);
        self
    }

    /// Keep a copy of every request (cheap: histories are shared); read them with
    /// [`requests`](Self::requests).
    #[must_use]
    pub fn recording(mut self) -> Self {
        self.log = Some(Arc::default());
        self
    }

    /// The requests seen so far, if [`recording`](Self::recording).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.log
            .as_ref()
            .map(|log| log.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// Number of calls answered from the shared cursor so far.
    pub fn calls(&self) -> usize {
        self.cursor.load(Ordering::Relaxed)
    }

    fn answer(&self, req: &ModelRequest) -> Result<ModelResponse, BoxError> {
        let index = if self.per_run {
            req.ctx.step() as usize
        } else {
            self.cursor.fetch_add(1, Ordering::Relaxed)
        };
        let mut resp = match self.turns.get(index) {
            Some(Turn::Respond(resp)) => (**resp).clone(),
            Some(Turn::Fail(msg)) => return Err(msg.clone().into()),
            Some(Turn::Decide(f)) => f(req)?,
            None => match &self.otherwise {
                Some(f) => f(req)?,
                None => {
                    // The shared cursor is the usual surprise: say so where it bites.
                    let shared = if self.per_run {
                        ""
                    } else {
                        "; its turns are shared by every run and clone of this model \
                         (`.per_run()` gives each run the whole script)"
                    };
                    return Err(format!(
                        "scripted model: the script has no turn {} (it has {} turns{shared})",
                        index + 1,
                        self.turns.len()
                    )
                    .into());
                }
            },
        };
        let k = req.messages.len();
        for (i, call) in resp.message.tool_calls.iter_mut().enumerate() {
            if call.id.is_empty() {
                call.id = call_id(k, i);
            }
        }
        fill_meta(&mut resp, req, index);
        Ok(resp)
    }
}

/// `{prefix}{n}`, without the formatting machinery (this runs on every scripted turn, and the
/// overhead benches time it): one allocation of the exact size.
fn numbered(prefix: &str, n: usize) -> String {
    let mut buf = [0u8; 20];
    let digits = decimal(n, &mut buf);
    let mut id = String::with_capacity(prefix.len() + digits.len());
    id.push_str(prefix);
    id.push_str(digits);
    id
}

/// `call_{k}_{i}`: the id of a scripted call without one, in one allocation of the exact size.
fn call_id(k: usize, i: usize) -> String {
    let (mut kb, mut ib) = ([0u8; 20], [0u8; 20]);
    let (k, i) = (decimal(k, &mut kb), decimal(i, &mut ib));
    let mut id = String::with_capacity("call__".len() + k.len() + i.len());
    id.push_str("call_");
    id.push_str(k);
    id.push('_');
    id.push_str(i);
    id
}

/// `n` in decimal, written at the end of `buf` (20 digits hold any `usize`).
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &str {
    let mut start = buf.len();
    loop {
        start -= 1;
        // `n % 10` is a single decimal digit.
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[start..]).expect("ASCII digits")
}

/// Fills what a scripted response leaves out of its [`ResponseMeta`] as a provider would:
/// provider `"scripted"`, the request's model as the model asked for and the one that
/// answered, id `scripted_{turn}`, and the stop reason's serde name as the finish reason.
fn fill_meta(resp: &mut ModelResponse, req: &ModelRequest, index: usize) {
    let meta = &mut resp.meta;
    if meta.provider.is_none() {
        meta.provider = Some(PROVIDER.into());
    }
    if meta.request_model.is_none() {
        meta.request_model.clone_from(&req.settings.model);
    }
    if meta.model.is_none() {
        meta.model = meta.request_model.as_deref().map(str::to_owned);
    }
    if meta.id.is_none() {
        meta.id = Some(numbered("scripted_", index + 1));
    }
    if meta.finish_reasons.is_empty() {
        meta.finish_reasons = vec![
            match &resp.stop_reason {
                StopReason::EndTurn => "end_turn",
                StopReason::ToolUse => "tool_use",
                StopReason::MaxTokens => "max_tokens",
                StopReason::StopSequence => "stop_sequence",
                StopReason::Refusal => "refusal",
                StopReason::PauseTurn => "pause_turn",
                StopReason::Other(other) => other,
            }
            .to_owned(),
        ];
    }
}

/// The provider name a [`ScriptedModel`] reports (`gen_ai.provider.name`).
const PROVIDER: &str = "scripted";

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("turns", &self.turns.len())
            .field("cursor", &self.cursor.load(Ordering::Relaxed))
            .field("per_run", &self.per_run)
            .field("otherwise", &self.otherwise.is_some())
            .field("latency", &self.latency)
            .finish_non_exhaustive()
    }
}

impl Service<ModelRequest> for ScriptedModel {
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::ScriptedFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        if let Some(log) = &self.log {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(req.clone());
        }
        let mut result = self.answer(&req);
        if let (Some(chars), Ok(resp)) = (self.streaming, &mut result) {
            *resp = std::mem::replace(resp, ModelResponse::text("")).into_streaming(chars);
        }
        future::ScriptedFuture::new(result, self.latency)
    }
}

/// Futures of [`ScriptedModel`].
pub(super) mod future {
    use std::{
        future::Future,
        pin::Pin,
        task::{Context, Poll, ready},
        time::Duration,
    };

    use pin_project_lite::pin_project;
    use tokio::time::Sleep;

    use crate::{error::BoxError, model::ModelResponse};

    pin_project! {
        /// The response future of [`ScriptedModel`](super::ScriptedModel).
        #[derive(Debug)]
        pub struct ScriptedFuture {
            #[pin]
            sleep: Option<Sleep>,
            result: Option<Result<ModelResponse, BoxError>>,
        }
    }

    impl ScriptedFuture {
        pub(super) fn new(
            result: Result<ModelResponse, BoxError>,
            latency: Option<Duration>,
        ) -> Self {
            ScriptedFuture {
                sleep: latency.map(tokio::time::sleep),
                result: Some(result),
            }
        }
    }

    impl Future for ScriptedFuture {
        type Output = Result<ModelResponse, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            if let Some(sleep) = this.sleep.as_pin_mut() {
                ready!(sleep.poll(cx));
            }
            Poll::Ready(
                this.result
                    .take()
                    .expect("ScriptedFuture polled after completion"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ScriptedModel, call_id, numbered};
    use crate::{Agent, agent::Outcome};

    #[test]
    fn numbered_ids() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, usize::MAX] {
            assert_eq!(numbered("scripted_", n), format!("scripted_{n}"));
            for i in [0, 7, 10, usize::MAX] {
                let id = call_id(n, i);
                assert_eq!(id, format!("call_{n}_{i}"));
                assert_eq!(id.capacity(), id.len());
            }
        }
    }

    /// The trap of a shared script: a second run finds no turn left, and the error says why
    /// and what to do; with `per_run` each run gets the whole script.
    #[tokio::test]
    async fn a_shared_script_run_out_names_per_run() {
        let agent = Agent::builder()
            .model(ScriptedModel::new().text("hi"))
            .build();
        assert_eq!(agent.run("one").await.unwrap().outcome, Outcome::Finished);
        let second = agent.run("two").await.unwrap();
        let Outcome::Aborted { error } = second.outcome else {
            panic!("{:?}", second.outcome)
        };
        assert!(error.contains("shared by every run"), "{error}");
        assert!(error.contains("`.per_run()`"), "{error}");

        let agent = Agent::builder()
            .model(ScriptedModel::new().text("hi").per_run())
            .build();
        for prompt in ["one", "two"] {
            assert_eq!(agent.run(prompt).await.unwrap().outcome, Outcome::Finished);
        }
    }
}
