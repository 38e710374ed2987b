//! The model level: [`ModelRequest`] in, [`ModelResponse`] out.
//!
//! Any `Service<ModelRequest, Response = ModelResponse, Error = BoxError> + Clone + Send` is a
//! model. Wrap it in layers with [`ServiceBuilder`](tower::ServiceBuilder) — the first
//! `.layer()` is the outermost and sees the request first — and hand the stack to
//! [`AgentBuilder::model`](crate::agent::AgentBuilder::model).
//!
//! [`ScriptedModel`] is a deterministic model for tests, docs and offline demos. The real
//! providers speak HTTP with reqwest:
//!
//! - [`OpenAiChat`] (feature `openai`, on by default): the OpenAI Chat
//!   Completions API, for OpenAI and every compatible server (vLLM, Ollama, llama.cpp,
//!   LiteLLM);
//! - [`OpenAiResponses`] (feature `openai`): the OpenAI Responses API, stateless
//!   (`store: false`), reasoning items carried across turns encrypted;
//! - [`Anthropic`] (feature `anthropic`): the Anthropic Messages API.
//!
//! They all stream when [`ModelSettings::stream`] is on, fail with a typed [`ProviderError`], and
//! retry transient failures under tower's `retry` with [`RetryPolicy`].
//!
//! A provider of your own (for another API) is a model service built the same way: it fails
//! with [`ProviderError::new`] and a [`ProviderErrorKind`] (so [`RetryPolicy`] retries it as
//! it retries theirs), and it streams with [`body::driven`]: its future answers at the first
//! piece of the answer, and the body reads the rest.
//!
//! # Limits
//!
//! A provider's answer comes from outside the process, so what it may cost is capped; nothing
//! a server sends can panic the provider or make it hold more than these bounds:
//!
//! - **Response size**: a whole (non-streamed) body is read chunk by chunk and the call fails
//!   with a [malformed-response](ProviderError::is_malformed_response) error as soon as it
//!   passes the provider's `max_response_bytes` (default [`DEFAULT_MAX_RESPONSE_BYTES`],
//!   16 MiB; a `Content-Length` over it fails before the body is read). A streamed answer fails
//!   the same way when the text, reasoning, tool-call arguments and provider items
//!   ([`Content::Provider`](crate::message::Content::Provider), kept whole) put together from
//!   it pass that limit.
//! - **Server-sent events**: one event (its lines, buffered until the blank line that ends it)
//!   may hold at most [`MAX_SSE_EVENT_BYTES`] (4 MiB, or `max_response_bytes` if smaller); a
//!   longer line or event fails the call while it is being read. So a stream holds at most
//!   about `MAX_SSE_EVENT_BYTES + max_response_bytes`, however long it runs (bound its time
//!   with a timeout layer).
//! - **Error pages**: of an HTTP error response, only the first [`MAX_ERROR_BODY_BYTES`]
//!   (8 KiB) are read, for the error's code, message and
//!   [excerpt](ProviderError::body_excerpt); the rest is never read (the connection is closed).
//! - **`Retry-After`**: `retry-after-ms`, and `retry-after` in seconds or as an HTTP date, are
//!   parsed without overflow; a negative or unparsable value is ignored, and any delay is
//!   clamped to [`MAX_RETRY_AFTER`] (one day) before it reaches
//!   [`ProviderError::retry_after`]. [`RetryPolicy`] waits at most its
//!   [`max_retry_after`](RetryPolicy::max_retry_after) (default 60 s): asked to wait longer,
//!   it does not retry and returns the error, `retry_after` set.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent::model::{ModelRequest, ModelResponse, ScriptedModel};
//! use tower_agent::message::Message;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::BoxError> {
//! let mut model = ServiceBuilder::new()
//!     .timeout(Duration::from_secs(30))
//!     .map_request(|mut req: ModelRequest| {
//!         req.settings.temperature = Some(0.0);
//!         req
//!     })
//!     .service(ScriptedModel::new().text("Hello!"));
//!
//! let req = ModelRequest::new(vec![Message::user("Hi")]);
//! let resp: ModelResponse = model.ready().await?.call(req).await?;
//! assert_eq!(resp.message.text(), "Hello!");
//! # Ok(())
//! # }
//! ```

#[doc(inline)]
pub use tower_agent_core::model::*;

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
#[doc(inline)]
pub use tower_agent_providers::anthropic;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
#[doc(inline)]
pub use tower_agent_providers::openai;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
#[doc(inline)]
pub use tower_agent_providers::responses;

/// The response futures of the model services.
pub mod future {
    #[doc(inline)]
    pub use tower_agent_core::model::future::*;
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "openai", feature = "anthropic"))))]
    #[doc(inline)]
    pub use tower_agent_providers::future::ResponseFuture;
}

#[cfg(feature = "anthropic")]
pub use self::anthropic::Anthropic;
#[cfg(feature = "openai")]
pub use self::openai::OpenAiChat;
#[cfg(feature = "openai")]
pub use self::responses::OpenAiResponses;
