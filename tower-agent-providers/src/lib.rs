//! The HTTP model providers of [tower-agent](https://docs.rs/tower-agent): each one a model
//! service, `async fn(ModelRequest) -> Result<ModelResponse, BoxError>`, that speaks a
//! provider's API over reqwest.
//!
//! - [`OpenAiChat`] (feature `openai`): the OpenAI Chat Completions API, for OpenAI and every
//!   compatible server (vLLM, Ollama, llama.cpp, LiteLLM), in [`openai`];
//! - [`OpenAiResponses`] (feature `openai`): the OpenAI Responses API, stateless
//!   (`store: false`), reasoning items carried across turns encrypted, in [`responses`];
//! - [`Anthropic`] (feature `anthropic`): the Anthropic Messages API, in [`anthropic`].
//!
//! They are written with the public API of [`tower_agent_core`] only, as a provider of yours
//! would be: they stream with [`body::driven`](tower_agent_core::model::body::driven) when
//! [`ModelSettings::stream`](tower_agent_core::model::ModelSettings::stream) is on, fail with a
//! typed [`ProviderError`](tower_agent_core::model::ProviderError) that
//! [`RetryPolicy`](tower_agent_core::model::RetryPolicy) retries when it is transient, and
//! bound what they read of a server's answer as the
//! [model module docs](tower_agent_core::model#limits) say. Each sends through a transport: a
//! `reqwest::Client` by default, or any `Service<reqwest::Request>` (a client wrapped in tower
//! layers, a test double), set with the builder's `transport`.
//!
//! Most users add `tower-agent` with its `openai` or `anthropic` feature, which re-exports
//! this crate's modules as `tower_agent::model::{openai, responses, anthropic}`.
//!
//! # Example
//!
//! A model of OpenAI's API answering from a test double in place of the network:
//!
//! ```
//! # #[cfg(feature = "openai")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, BoxError, model::RetryPolicy};
//! use tower_agent_providers::openai::OpenAiChat;
//!
//! // Any `Service<reqwest::Request>` is a transport: here a function in place of the server.
//! let server = tower::service_fn(|req: reqwest::Request| async move {
//!     assert_eq!(req.url().as_str(), "http://localhost:8000/v1/chat/completions");
//!     let answer = r#"{"choices": [{"message": {"content": "Hello!"}, "finish_reason": "stop"}]}"#;
//!     let resp = http::Response::builder().header("content-type", "application/json");
//!     Ok::<_, BoxError>(reqwest::Response::from(resp.body(answer)?))
//! });
//! let model = OpenAiChat::builder()
//!     .base_url("http://localhost:8000/v1")
//!     .model("qwen3:8b")
//!     .transport(server)
//!     .build();
//!
//! let agent = Agent::builder()
//!     .model(ServiceBuilder::new().retry(RetryPolicy::new()).service(model))
//!     .build();
//! assert_eq!(agent.run("Say hello").await?.text, "Hello!");
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "openai"))]
//! # fn main() {}
//! ```
//!
//! # Feature flags
//!
//! | feature | what it adds |
//! |---|---|
//! | `openai` | [`openai`] ([`OpenAiChat`]) and [`responses`] ([`OpenAiResponses`]), over reqwest |
//! | `anthropic` | [`anthropic`] ([`Anthropic`]), over reqwest |
//!
//! With neither, the crate is empty.
#![cfg_attr(docsrs, feature(doc_cfg))]
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub mod anthropic;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub mod openai;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub mod responses;

/// The response future of the providers' services.
#[cfg(any(feature = "openai", feature = "anthropic"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "openai", feature = "anthropic"))))]
pub mod future {
    pub use crate::http::ResponseFuture;
}

#[cfg(feature = "anthropic")]
pub use crate::anthropic::Anthropic;
#[cfg(feature = "openai")]
pub use crate::openai::OpenAiChat;
#[cfg(feature = "openai")]
pub use crate::responses::OpenAiResponses;
