//! The model providers against loopback servers (`tests/loopback`): Anthropic Messages,
//! OpenAI Chat Completions and Responses, retries, hostile servers, provider settings,
//! reasoning models, tool images, the prompt-cache prefix ratio and the OpenTelemetry
//! attributes of real runs. One test binary, a module per area (a file of its own before).
//! Run this group alone with `cargo test --all-features --test providers`, one module of it
//! with `cargo test --all-features --test providers -- openai::`.

#[path = "../loopback/mod.rs"]
mod loopback;
#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "anthropic")]
mod anthropic;
mod cache_prefix;
mod fallback;
#[cfg(feature = "openai")]
mod openai;
#[cfg(all(feature = "opentelemetry", feature = "openai"))]
mod otel;
#[cfg(feature = "openai")]
mod provider_hardening;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod provider_settings;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod reasoning;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod redact;
#[cfg(feature = "openai")]
mod responses;
#[cfg(feature = "openai")]
mod retry;
#[cfg(all(feature = "openai", feature = "anthropic"))]
mod tool_images;
