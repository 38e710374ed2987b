//! [`Redaction`]: personal data and secrets found and replaced — in the prompt before the model
//! sees it, in the model's answer as it streams (before any event or SSE client sees it), and
//! in tool outputs.
//!
//! Detectors: e-mail addresses, credit card numbers (13–19 digits, spaces or dashes allowed,
//! Luhn-checked), IP addresses (IPv4, full IPv6), API-key shapes (`sk-…`, `sk-proj-…`,
//! `sk-ant-…`, AWS `AKIA…`, GitHub `ghp_…`, Slack `xox…-`, Google `AIza…`), and regexes of your
//! own ([`Detector::regex`]); each with a [`Strategy`]: block, redact, mask or hash.
//!
//! # Example
//!
//! ```
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//! use tower_agent_layers::redact::{Redaction, Strategy};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let redaction = Redaction::new().email(Strategy::Redact).credit_card(Strategy::Mask);
//! let model = ServiceBuilder::new()
//!     .layer(redaction.model_layer())
//!     .service(ScriptedModel::new().text("Write to ada@example.com, card 4111 1111 1111 1111.").streaming(5));
//! let agent = Agent::builder().model(model).tool_layer(redaction.tool_layer()).build();
//! assert_eq!(
//!     agent.run("hi").await?.text,
//!     "Write to [REDACTED_EMAIL], card **** **** **** 1111."
//! );
//! # Ok(())
//! # }
//! ```
//!
//! # Where it applies
//!
//! - [`model_layer`](Redaction::model_layer): the text of the request's user messages (the
//!   prompt; a block fails the call), and the answer — as it streams and whole, which enters
//!   the thread (see [what it covers](#what-it-covers)).
//! - [`tool_layer`](Redaction::tool_layer): each tool output's text (a block makes it an
//!   error output naming the detector, not the value).
//!
//! # What it covers
//!
//! In the model's answer:
//!
//! - **Text**: the streamed [`ModelDelta::Text`](tower_agent_core::event::ModelDelta::Text) pieces and
//!   the answer's [`Content::Text`] parts, as one text — joined as
//!   [`Message::text`](tower_agent_core::message::Message::text) joins them, and as providers join the
//!   text around a tool call (Anthropic's text blocks around a `tool_use` become one part,
//!   Chat Completions has one `content`, the Responses API's `message` items are parts that
//!   are sent back as one): a value split around a tool call is found, and replaced in the
//!   part where it starts. The pieces let out, joined, are the answer's text. A refusal sent
//!   apart from the text ([`ResponseMeta::refusal`](tower_agent_core::model::ResponseMeta::refusal))
//!   too.
//! - **Reasoning**: the streamed [`ModelDelta::Reasoning`](tower_agent_core::event::ModelDelta::Reasoning)
//!   pieces and the text of each [`Content::Reasoning`] part (each part alone, as providers
//!   keep them), and the summary texts of an OpenAI Responses `reasoning` item kept as its
//!   [`opaque`](tower_agent_core::message::Reasoning::opaque) item (the API reads its
//!   `encrypted_content`, which is left as it is). An Anthropic `thinking` block's signature
//!   is over the text the model wrote, and Anthropic refuses a block changed under it (no
//!   other signature can be made, and a `redacted_thinking` block is Anthropic's own
//!   encryption): a reasoning part whose text had a value **loses its signature**, is kept
//!   in the thread redacted, and is no longer sent back to Anthropic (as reasoning from
//!   another provider is not). With thinking on, Anthropic wants the thinking of the latest
//!   answer that called tools back: the next request of that run then fails with
//!   Anthropic's error and the run ends `Aborted` — the value is neither sent back nor kept.
//!   `redacted_thinking` blocks are left as they are.
//! - **Not tool-call arguments** (the streamed
//!   [`ModelDelta::ToolCall`](tower_agent_core::event::ModelDelta::ToolCall) pieces and
//!   [`ToolCall::arguments`](tower_agent_core::message::ToolCall::arguments)): they are what the tool
//!   acts on — an address replaced in a `send_mail` call's arguments sends the mail to
//!   `[REDACTED_EMAIL]`, a masked number names another account — and the values a model
//!   could put there come from the prompt and tool outputs, which are redacted before it
//!   sees them. To refuse a call that carries one, check its arguments with
//!   [`Redaction::redact`] in a `before_tool_use` hook
//!   ([`Hooks`](crate::hooks::Hooks)).
//! - Not images, documents, nor provider items ([`Content::Provider`]: a built-in tool's
//!   call or results, sent back as they came).
//!
//! # Streams
//!
//! A value can arrive split across pieces (`ada@ex`, `amp`, `le.com`). The stream's text is
//! held back by [`LOOK_BEHIND`] bytes — the end of the text that could still be the start of
//! a value — and a value found across that line is held whole, never more than [`MAX_HELD`]
//! bytes in all; the rest is let out with its values replaced. The text's look-behind spans
//! pieces of every other kind: a piece that comes while text is held (a tool call's,
//! reasoning) waits behind it, so the pieces keep their order and a value split around a
//! tool call is found as the whole answer finds it. A tool call that follows text therefore
//! shows — and with [`eager_tools`](tower_agent_core::agent::AgentBuilder::eager_tools) starts — once
//! [`LOOK_BEHIND`] bytes of text came after it, or the answer ended.
//!
//! Reasoning is held back the same way while it streams; a piece of another kind ends its
//! run and lets it out whole, so thinking never holds the answer or a tool call back.
//! (A server that interleaved one reasoning text with other pieces, which none documented
//! does, would have a value split around them found in the thread, not in the pieces.)
//!
//! A value longer than [`LOOK_BEHIND`] bytes is caught in the whole answer (and so in the
//! thread) but may show in the pieces. A block ends the stream with a [`Blocked`] error: the
//! run ends `Aborted`, and the held text never shows.

mod body;
mod detect;
mod tool;
mod whole;

/// The response futures of [`RedactModel`] and [`RedactTool`].
pub mod future {
    pub use super::body::RedactModelFuture;
    pub use super::tool::RedactToolFuture;
}

/// The response future of [`RedactTool`], by its former path.
#[deprecated(
    note = "moved to `redact::future::RedactToolFuture`, as every layer module keeps its futures in `future`"
)]
pub type RedactToolFuture<F> = future::RedactToolFuture<F>;

use std::{
    borrow::Cow,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use self::detect::{API_KEY, CREDIT_CARD, EMAIL, IP, apply, luhn};
pub use self::{
    detect::{Detector, Strategy},
    tool::{RedactTool, RedactToolLayer},
};
use tower_agent_core::{
    error::BoxError,
    message::{Content, Role},
    model::{ModelRequest, ModelResponse},
};

/// How much of a stream's text is held back, in bytes (256): longer than any value the
/// built-in detectors find.
pub const LOOK_BEHIND: usize = 256;

/// The most text a stream holds back while a value found across [`LOOK_BEHIND`] is still
/// arriving, in bytes (512): a longer match (only a pattern of your own can make one) is let
/// out in parts, each redacted where it matches alone.
pub const MAX_HELD: usize = 2 * LOOK_BEHIND;

/// The detectors, and the layers that apply them. See the [module docs](self).
#[derive(Clone, Default)]
pub struct Redaction {
    detectors: Arc<[Detector]>,
}

impl fmt::Debug for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.detectors.iter().map(Detector::name))
            .finish()
    }
}

impl Redaction {
    /// No detector yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// This redaction with `detector` too (after the others: an earlier detector wins a
    /// value two find).
    #[must_use]
    pub fn detector(self, detector: Detector) -> Self {
        let mut all = self.detectors.to_vec();
        all.push(detector);
        Redaction {
            detectors: all.into(),
        }
    }

    /// E-mail addresses (`email`).
    #[must_use]
    pub fn email(self, strategy: Strategy) -> Self {
        self.detector(Detector::builtin("email", EMAIL, None, strategy))
    }

    /// Credit card numbers (`credit_card`): 13 to 19 digits, spaces or dashes between them
    /// allowed, that pass the Luhn check.
    #[must_use]
    pub fn credit_card(self, strategy: Strategy) -> Self {
        self.detector(Detector::builtin(
            "credit_card",
            CREDIT_CARD,
            Some(luhn),
            strategy,
        ))
    }

    /// IP addresses (`ip`): IPv4, and IPv6 in full form.
    #[must_use]
    pub fn ip(self, strategy: Strategy) -> Self {
        self.detector(Detector::builtin("ip", IP, None, strategy))
    }

    /// API keys by their shape (`api_key`): see the [module docs](self).
    #[must_use]
    pub fn api_keys(self, strategy: Strategy) -> Self {
        self.detector(Detector::builtin("api_key", API_KEY, None, strategy))
    }

    /// `text` with every value found replaced.
    ///
    /// # Errors
    ///
    /// [`Blocked`] if a detector whose strategy is [`Strategy::Block`] finds a value.
    pub fn redact<'t>(&self, text: &'t str) -> Result<Cow<'t, str>, Blocked> {
        apply(&self.detectors, text).map_err(|detector| Blocked { detector })
    }

    /// The layer of the model stack: see the [module docs](self#where-it-applies).
    pub fn model_layer(&self) -> RedactModelLayer {
        RedactModelLayer {
            redaction: self.clone(),
        }
    }

    /// The layer of the tool stack: see the [module docs](self#where-it-applies).
    pub fn tool_layer(&self) -> RedactToolLayer {
        RedactToolLayer::new(self.clone())
    }

    /// The request with its user messages' text redacted.
    fn request(&self, mut req: ModelRequest) -> Result<ModelRequest, Blocked> {
        for i in 0..req.messages.len() {
            let Some(m) = req.messages.get(i) else { break };
            if m.role != Role::User {
                continue;
            }
            let mut changed = Vec::new();
            for (j, c) in m.content.iter().enumerate() {
                if let Content::Text { text } = c
                    && let Cow::Owned(new) = self.redact(text)?
                {
                    changed.push((j, new));
                }
            }
            if changed.is_empty() {
                continue;
            }
            let m = req.messages.get_mut(i).expect("present");
            for (j, new) in changed {
                m.content[j] = Content::Text { text: new };
            }
        }
        Ok(req)
    }
}

/// A value a [`Strategy::Block`] detector found: the text was refused. Names the detector,
/// never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    detector: String,
}

impl Blocked {
    /// The detector that found the value.
    pub fn detector(&self) -> &str {
        &self.detector
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blocked: the text holds a value of kind `{}`",
            self.detector
        )
    }
}

impl std::error::Error for Blocked {}

/// The model stack's layer of a [`Redaction`].
#[derive(Clone, Debug)]
pub struct RedactModelLayer {
    redaction: Redaction,
}

impl<S> Layer<S> for RedactModelLayer {
    type Service = RedactModel<S>;

    fn layer(&self, inner: S) -> RedactModel<S> {
        RedactModel {
            inner,
            redaction: self.redaction.clone(),
        }
    }
}

/// The service of [`RedactModelLayer`].
#[derive(Clone, Debug)]
pub struct RedactModel<S> {
    inner: S,
    redaction: Redaction,
}

impl<S> Service<ModelRequest> for RedactModel<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: Into<BoxError>,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::RedactModelFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        match self.redaction.request(req) {
            Ok(req) => body::RedactModelFuture::new(self.inner.call(req), self.redaction.clone()),
            Err(blocked) => body::RedactModelFuture::blocked(blocked),
        }
    }
}
