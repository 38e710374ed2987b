//! [`ProviderError`]: what went wrong talking to a model provider.
//!
//! The providers (`OpenAiChat`,
//! `Anthropic`) are model services, so their error type
//! is [`BoxError`]; every failure of theirs is a `ProviderError` inside it. Downcast to ask
//! what happened — [`RetryPolicy`](crate::model::RetryPolicy) does exactly this to decide
//! whether to try again.
//!
//! # Example
//!
//! ```
//! use tower_agent_core::{BoxError, model::ProviderError};
//!
//! fn describe(err: &BoxError) -> &'static str {
//!     match ProviderError::find(&**err) {
//!         Some(e) if e.is_rate_limited() => "slow down",
//!         Some(e) if e.is_authentication() => "check the API key",
//!         Some(e) if e.is_context_length_exceeded() => "the conversation is too long",
//!         Some(_) => "the provider failed",
//!         None => "something else failed",
//!     }
//! }
//! # let err: BoxError = "x".into();
//! # assert_eq!(describe(&err), "something else failed");
//! ```

// NOTE: the constructors are used by the providers; without any, only the tests use them.
#![cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]

use std::{error::Error as StdError, fmt, time::Duration};

use crate::error::BoxError;

/// The longest body excerpt kept in an error, in bytes (cut on a character boundary).
pub(crate) const EXCERPT_BYTES: usize = 512;

/// A failed call to a model provider: an HTTP error status, a response that could not be
/// read, a stream cut short, a transport failure.
///
/// It is opaque: ask it with the `is_*` predicates and the accessors, and read its cause with
/// [`source`](StdError::source). Its `Display` text (lowercase, `"openai: rate limited (http
/// 429): …"`) is meant for people and may change.
///
/// Exactly one of the kind predicates is true, except that
/// [`is_context_length_exceeded`](Self::is_context_length_exceeded) errors are also
/// [`is_invalid_request`](Self::is_invalid_request).
pub struct ProviderError {
    inner: Box<Inner>,
}

struct Inner {
    kind: Kind,
    provider: &'static str,
    status: Option<u16>,
    retry_after: Option<Duration>,
    code: Option<String>,
    message: Option<String>,
    body: Option<String>,
    cause: Option<BoxError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    RateLimited,
    Quota,
    Server,
    Authentication,
    InvalidRequest,
    ContextLength,
    Timeout,
    Malformed,
    Incomplete,
    Transport,
    Config,
}

impl Kind {
    fn description(self) -> &'static str {
        match self {
            Kind::RateLimited => "rate limited",
            Kind::Quota => "quota exceeded",
            Kind::Server => "server error",
            Kind::Authentication => "authentication failed",
            Kind::InvalidRequest => "invalid request",
            Kind::ContextLength => "context length exceeded",
            Kind::Timeout => "request timed out",
            Kind::Malformed => "malformed response",
            Kind::Incomplete => "response ended early",
            Kind::Transport => "connection failed",
            Kind::Config => "invalid configuration",
        }
    }
}

impl ProviderError {
    pub(crate) fn new(provider: &'static str, kind: Kind) -> Self {
        ProviderError {
            inner: Box::new(Inner {
                kind,
                provider,
                status: None,
                retry_after: None,
                code: None,
                message: None,
                body: None,
                cause: None,
            }),
        }
    }

    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.inner.status = Some(status);
        self
    }

    pub(crate) fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.inner.retry_after = retry_after;
        self
    }

    pub(crate) fn with_code(mut self, code: Option<String>) -> Self {
        self.inner.code = code;
        self
    }

    pub(crate) fn with_message(mut self, message: impl Into<String>) -> Self {
        self.inner.message = Some(message.into());
        self
    }

    pub(crate) fn with_body(mut self, body: &[u8]) -> Self {
        self.inner.body = Some(excerpt(body));
        self
    }

    pub(crate) fn with_cause(mut self, cause: impl Into<BoxError>) -> Self {
        self.inner.cause = Some(cause.into());
        self
    }

    /// The `ProviderError` in `err` or its [`source`](StdError::source) chain, so layers that
    /// wrap errors don't hide it.
    pub fn find<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a ProviderError> {
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(found) = e.downcast_ref::<ProviderError>() {
                return Some(found);
            }
            cur = e.source();
        }
        None
    }

    /// The provider's name: `"openai"` (also for compatible servers) or `"anthropic"`.
    pub fn provider(&self) -> &str {
        self.inner.provider
    }

    /// The HTTP status of the response, if there was one.
    pub fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// How long the provider asked to wait before trying again (`retry-after-ms` or
    /// `retry-after`, in seconds or as an HTTP date), if it said, clamped to
    /// [`MAX_RETRY_AFTER`](crate::model::MAX_RETRY_AFTER) (one day). A negative, `NaN` or
    /// unparsable value counts as not said.
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// The provider's error code or type (`"rate_limit_exceeded"`, `"overloaded_error"` …), if
    /// it sent one.
    pub fn code(&self) -> Option<&str> {
        self.inner.code.as_deref()
    }

    /// The provider's error message, or what was wrong with its response.
    pub fn message(&self) -> Option<&str> {
        self.inner.message.as_deref()
    }

    /// The start of the response body (at most 512 bytes), kept for malformed responses and
    /// error statuses.
    pub fn body_excerpt(&self) -> Option<&str> {
        self.inner.body.as_deref()
    }

    /// Too many requests (HTTP 429, or a `rate_limit_error` in a stream): try again later,
    /// after [`retry_after`](Self::retry_after) if set. Retried by
    /// [`RetryPolicy`](crate::model::RetryPolicy).
    pub fn is_rate_limited(&self) -> bool {
        self.inner.kind == Kind::RateLimited
    }

    /// The account is out of credit (OpenAI's 429 `insufficient_quota`): trying again won't
    /// help, so this is not [`is_rate_limited`](Self::is_rate_limited).
    pub fn is_quota_exceeded(&self) -> bool {
        self.inner.kind == Kind::Quota
    }

    /// The provider failed or is overloaded (HTTP 5xx, Anthropic's 529, or an
    /// `overloaded_error`/`api_error` in a stream). Retried by
    /// [`RetryPolicy`](crate::model::RetryPolicy).
    pub fn is_server_error(&self) -> bool {
        self.inner.kind == Kind::Server
    }

    /// The API key is missing, wrong, or not allowed to do this (HTTP 401 or 403).
    pub fn is_authentication(&self) -> bool {
        self.inner.kind == Kind::Authentication
    }

    /// The provider rejected the request (another 4xx: bad parameters, unknown model, request
    /// too large). Also true when [`is_context_length_exceeded`](Self::is_context_length_exceeded).
    pub fn is_invalid_request(&self) -> bool {
        matches!(self.inner.kind, Kind::InvalidRequest | Kind::ContextLength)
    }

    /// The conversation does not fit the model's context window. Compact the history
    /// (see `SummarizeLayer`) and try again.
    pub fn is_context_length_exceeded(&self) -> bool {
        self.inner.kind == Kind::ContextLength
    }

    /// The HTTP client's timeout elapsed, or the server answered 408.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == Kind::Timeout
    }

    /// The response (or a streamed event) is not what the API documents: not JSON, or JSON
    /// of another shape, or larger than the provider's `max_response_bytes` or
    /// [`MAX_SSE_EVENT_BYTES`](crate::model::MAX_SSE_EVENT_BYTES) (the
    /// [message](Self::message) says which limit). [`body_excerpt`](Self::body_excerpt) shows
    /// its start.
    pub fn is_malformed_response(&self) -> bool {
        self.inner.kind == Kind::Malformed
    }

    /// A streamed response ended before its end marker (`data: [DONE]` or `message_stop`):
    /// the answer would have been silently short.
    pub fn is_incomplete(&self) -> bool {
        self.inner.kind == Kind::Incomplete
    }

    /// The connection could not be made, or broke while sending or reading.
    pub fn is_transport(&self) -> bool {
        self.inner.kind == Kind::Transport
    }

    /// The provider was misconfigured: a base URL, API key or header that is not valid.
    pub fn is_config(&self) -> bool {
        self.inner.kind == Kind::Config
    }
}

impl fmt::Debug for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        let mut d = f.debug_struct("ProviderError");
        d.field("provider", &i.provider).field("kind", &i.kind);
        if let Some(status) = i.status {
            d.field("status", &status);
        }
        if let Some(retry_after) = i.retry_after {
            d.field("retry_after", &retry_after);
        }
        if let Some(code) = &i.code {
            d.field("code", code);
        }
        if let Some(message) = &i.message {
            d.field("message", message);
        }
        if let Some(body) = &i.body {
            d.field("body", body);
        }
        if let Some(cause) = &i.cause {
            d.field("cause", cause);
        }
        d.finish()
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        write!(f, "{}: {}", i.provider, i.kind.description())?;
        if let Some(status) = i.status {
            write!(f, " (http {status})")?;
        }
        if let Some(message) = &i.message {
            write!(f, ": {message}")?;
        } else if let Some(cause) = &i.cause {
            write!(f, ": {cause}")?;
        }
        if i.kind == Kind::Malformed
            && let Some(body) = &i.body
        {
            write!(f, "; body: {body:?}")?;
        }
        Ok(())
    }
}

impl StdError for ProviderError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .cause
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// The first [`EXCERPT_BYTES`] of `body` as text, cut on a character boundary, with `…` if
/// cut.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.len() <= EXCERPT_BYTES {
        return text.to_owned();
    }
    let mut end = EXCERPT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lowercase_with_status_and_message() {
        let e = ProviderError::new("openai", Kind::RateLimited)
            .with_status(429)
            .with_message("Rate limit reached");
        assert_eq!(
            e.to_string(),
            "openai: rate limited (http 429): Rate limit reached"
        );
        assert!(e.is_rate_limited() && !e.is_server_error());
    }

    #[test]
    fn malformed_shows_the_body() {
        let e = ProviderError::new("anthropic", Kind::Malformed)
            .with_status(200)
            .with_message("expected value at line 1 column 1")
            .with_body(b"<html>oops</html>");
        assert!(e.is_malformed_response());
        assert_eq!(e.body_excerpt(), Some("<html>oops</html>"));
        assert!(e.to_string().ends_with("; body: \"<html>oops</html>\""));
    }

    #[test]
    fn excerpt_cuts_on_char_boundaries() {
        let body = "é".repeat(400);
        let cut = excerpt(body.as_bytes());
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= EXCERPT_BYTES + '…'.len_utf8());
    }

    #[test]
    fn context_length_is_an_invalid_request() {
        let e = ProviderError::new("openai", Kind::ContextLength);
        assert!(e.is_context_length_exceeded() && e.is_invalid_request());
    }

    #[test]
    fn found_in_a_chain_and_send_sync() {
        #[derive(Debug)]
        struct Wrap(ProviderError);
        impl fmt::Display for Wrap {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl StdError for Wrap {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let err: BoxError = Box::new(Wrap(ProviderError::new("openai", Kind::Server)));
        assert!(ProviderError::find(&*err).unwrap().is_server_error());
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ProviderError>();
    }
}
