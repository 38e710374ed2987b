//! [`ProviderError`]: what went wrong talking to a model provider.
//!
//! A provider (tower-agent's `OpenAiChat` and `Anthropic`, or one of your own) is a model
//! service, so its error type is [`BoxError`]; every failure of theirs is a `ProviderError`
//! inside it, of a [`ProviderErrorKind`]. Downcast to ask what happened —
//! [`RetryPolicy`](crate::model::RetryPolicy) does exactly this to decide whether to try
//! again.
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

use std::{error::Error as StdError, fmt, time::Duration};

use super::MAX_RETRY_AFTER;
use crate::error::BoxError;

/// The longest body excerpt kept in an error, in bytes (cut on a character boundary).
const EXCERPT_BYTES: usize = 512;

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
///
/// # Failing in a provider of your own
///
/// A provider you write (for another API) fails the same way, so that
/// [`RetryPolicy`](crate::model::RetryPolicy) and the other layers treat its failures as
/// they treat the built-in providers': [`new`](Self::new) with your provider's name and a
/// [`ProviderErrorKind`], then what you know of the failure.
///
/// ```
/// use std::time::Duration;
/// use tower_agent_core::{BoxError, model::{ProviderError, ProviderErrorKind}};
///
/// fn gemini_status(status: u16, retry_after: Option<Duration>, body: &[u8]) -> ProviderError {
///     let kind = match status {
///         429 => ProviderErrorKind::RateLimited,
///         401 | 403 => ProviderErrorKind::Authentication,
///         400..=499 => ProviderErrorKind::InvalidRequest,
///         _ => ProviderErrorKind::ServerError,
///     };
///     let mut err = ProviderError::new("gemini", kind).with_status(status).with_body(body);
///     if let Some(delay) = retry_after {
///         err = err.with_retry_after(delay);
///     }
///     err
/// }
///
/// let err: BoxError = gemini_status(429, Some(Duration::from_secs(2)), b"{}").into();
/// let found = ProviderError::find(&*err).unwrap();
/// assert!(found.is_rate_limited());
/// assert_eq!(found.retry_after(), Some(Duration::from_secs(2)));
/// assert_eq!(found.to_string(), "gemini: rate limited (http 429)");
/// ```
pub struct ProviderError {
    inner: Box<Inner>,
}

struct Inner {
    kind: ProviderErrorKind,
    provider: &'static str,
    status: Option<u16>,
    retry_after: Option<Duration>,
    code: Option<String>,
    message: Option<String>,
    body: Option<String>,
    cause: Option<BoxError>,
}

/// What kind of failure a [`ProviderError`] is: what [`ProviderError::new`] takes and
/// [`ProviderError::kind`] gives back. Each kind has its predicate on `ProviderError`
/// (`is_rate_limited` for [`RateLimited`](Self::RateLimited) …), whose docs say when the
/// built-in providers use it; [`RetryPolicy`](crate::model::RetryPolicy) retries
/// [`RateLimited`](Self::RateLimited) and [`ServerError`](Self::ServerError).
///
/// More kinds may be added: match with a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// Too many requests (HTTP 429): try again later
    /// ([`is_rate_limited`](ProviderError::is_rate_limited)).
    RateLimited,
    /// The account is out of credit: trying again won't help
    /// ([`is_quota_exceeded`](ProviderError::is_quota_exceeded)).
    QuotaExceeded,
    /// The provider failed or is overloaded (HTTP 5xx)
    /// ([`is_server_error`](ProviderError::is_server_error)).
    ServerError,
    /// The API key is missing, wrong or not allowed (HTTP 401, 403)
    /// ([`is_authentication`](ProviderError::is_authentication)).
    Authentication,
    /// The provider rejected the request (another 4xx)
    /// ([`is_invalid_request`](ProviderError::is_invalid_request)).
    InvalidRequest,
    /// The conversation does not fit the model's context window; also an invalid request
    /// ([`is_context_length_exceeded`](ProviderError::is_context_length_exceeded)).
    ContextLengthExceeded,
    /// The request timed out ([`is_timeout`](ProviderError::is_timeout)).
    Timeout,
    /// The response is not what the API documents, or is over a size limit
    /// ([`is_malformed_response`](ProviderError::is_malformed_response)).
    MalformedResponse,
    /// A streamed response ended before its end marker
    /// ([`is_incomplete`](ProviderError::is_incomplete)).
    Incomplete,
    /// The connection could not be made, or broke
    /// ([`is_transport`](ProviderError::is_transport)).
    Transport,
    /// The provider is misconfigured: a base URL, API key or header that is not valid
    /// ([`is_config`](ProviderError::is_config)).
    Config,
}

impl ProviderErrorKind {
    fn description(self) -> &'static str {
        match self {
            ProviderErrorKind::RateLimited => "rate limited",
            ProviderErrorKind::QuotaExceeded => "quota exceeded",
            ProviderErrorKind::ServerError => "server error",
            ProviderErrorKind::Authentication => "authentication failed",
            ProviderErrorKind::InvalidRequest => "invalid request",
            ProviderErrorKind::ContextLengthExceeded => "context length exceeded",
            ProviderErrorKind::Timeout => "request timed out",
            ProviderErrorKind::MalformedResponse => "malformed response",
            ProviderErrorKind::Incomplete => "response ended early",
            ProviderErrorKind::Transport => "connection failed",
            ProviderErrorKind::Config => "invalid configuration",
        }
    }
}

impl fmt::Display for ProviderErrorKind {
    /// Lowercase, as in the error's `Display` (`"rate limited"`); the text may change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

impl ProviderError {
    /// An error of `kind` from the provider named `provider` (e.g. `"gemini"`: the name
    /// [`provider`](Self::provider) returns and the `Display` text starts with), with nothing
    /// else known yet: add what you know with the `with_*` methods.
    pub fn new(provider: &'static str, kind: ProviderErrorKind) -> Self {
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

    /// This error with the HTTP status of the response ([`status`](Self::status)).
    #[must_use]
    pub fn with_status(mut self, status: u16) -> Self {
        self.inner.status = Some(status);
        self
    }

    /// This error with how long the provider asked to wait before trying again
    /// ([`retry_after`](Self::retry_after)), clamped to
    /// [`MAX_RETRY_AFTER`] (one day).
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.inner.retry_after = Some(retry_after.min(MAX_RETRY_AFTER));
        self
    }

    /// This error with the provider's error code or type ([`code`](Self::code)).
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.inner.code = Some(code.into());
        self
    }

    /// This error with the provider's error message, or what was wrong with its response
    /// ([`message`](Self::message)); shown in the `Display` text in place of the cause's.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.inner.message = Some(message.into());
        self
    }

    /// This error with the start of the response body ([`body_excerpt`](Self::body_excerpt)):
    /// at most its first 512 bytes are kept, as text (bytes that are not UTF-8 replaced by
    /// `U+FFFD`), trimmed, cut on a character boundary and ended with `…` if cut. The
    /// `Display` text of a [`MalformedResponse`](ProviderErrorKind::MalformedResponse) shows
    /// it.
    #[must_use]
    pub fn with_body(mut self, body: &[u8]) -> Self {
        self.inner.body = Some(excerpt(body));
        self
    }

    /// This error caused by `cause` (a transport error, say): its [`source`](StdError::source),
    /// and its `Display` text when there is no [message](Self::with_message).
    #[must_use]
    pub fn with_cause(mut self, cause: impl Into<BoxError>) -> Self {
        self.inner.cause = Some(cause.into());
        self
    }

    /// What kind of failure this is. The `is_*` predicates ask the same (with
    /// [`is_invalid_request`](Self::is_invalid_request) also true of
    /// [`ContextLengthExceeded`](ProviderErrorKind::ContextLengthExceeded)).
    pub fn kind(&self) -> ProviderErrorKind {
        self.inner.kind
    }

    /// The `ProviderError` in `err` or its [`source`](StdError::source) chain, so layers that
    /// wrap errors don't hide it.
    pub fn find<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a ProviderError> {
        crate::error::Abort::find_source::<ProviderError>(err)
    }

    /// The provider's name, as given to [`new`](Self::new): `"openai"` (also for compatible
    /// servers) or `"anthropic"` for tower-agent's providers.
    pub fn provider(&self) -> &str {
        self.inner.provider
    }

    /// The HTTP status of the response, if there was one.
    pub fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// How long the provider asked to wait before trying again (`retry-after-ms` or
    /// `retry-after`, in seconds or as an HTTP date), if it said, clamped to
    /// [`MAX_RETRY_AFTER`] (one day). A negative, `NaN` or
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
        self.inner.kind == ProviderErrorKind::RateLimited
    }

    /// The account is out of credit (OpenAI's 429 `insufficient_quota`): trying again won't
    /// help, so this is not [`is_rate_limited`](Self::is_rate_limited).
    pub fn is_quota_exceeded(&self) -> bool {
        self.inner.kind == ProviderErrorKind::QuotaExceeded
    }

    /// The provider failed or is overloaded (HTTP 5xx, Anthropic's 529, or an
    /// `overloaded_error`/`api_error` in a stream). Retried by
    /// [`RetryPolicy`](crate::model::RetryPolicy).
    pub fn is_server_error(&self) -> bool {
        self.inner.kind == ProviderErrorKind::ServerError
    }

    /// The API key is missing, wrong, or not allowed to do this (HTTP 401 or 403).
    pub fn is_authentication(&self) -> bool {
        self.inner.kind == ProviderErrorKind::Authentication
    }

    /// The provider rejected the request (another 4xx: bad parameters, unknown model, request
    /// too large). Also true when [`is_context_length_exceeded`](Self::is_context_length_exceeded).
    pub fn is_invalid_request(&self) -> bool {
        matches!(
            self.inner.kind,
            ProviderErrorKind::InvalidRequest | ProviderErrorKind::ContextLengthExceeded
        )
    }

    /// The conversation does not fit the model's context window. Compact the history
    /// (tower-agent's `SummarizeLayer` does) and try again.
    pub fn is_context_length_exceeded(&self) -> bool {
        self.inner.kind == ProviderErrorKind::ContextLengthExceeded
    }

    /// The HTTP client's timeout elapsed, or the server answered 408.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == ProviderErrorKind::Timeout
    }

    /// The response (or a streamed event) is not what the API documents: not JSON, or JSON
    /// of another shape, or larger than the provider's `max_response_bytes` or
    /// [`MAX_SSE_EVENT_BYTES`](crate::model::MAX_SSE_EVENT_BYTES) (the
    /// [message](Self::message) says which limit). [`body_excerpt`](Self::body_excerpt) shows
    /// its start.
    pub fn is_malformed_response(&self) -> bool {
        self.inner.kind == ProviderErrorKind::MalformedResponse
    }

    /// A streamed response ended before its end marker (`data: [DONE]` or `message_stop`):
    /// the answer would have been silently short.
    pub fn is_incomplete(&self) -> bool {
        self.inner.kind == ProviderErrorKind::Incomplete
    }

    /// The connection could not be made, or broke while sending or reading.
    pub fn is_transport(&self) -> bool {
        self.inner.kind == ProviderErrorKind::Transport
    }

    /// The provider was misconfigured: a base URL, API key or header that is not valid.
    pub fn is_config(&self) -> bool {
        self.inner.kind == ProviderErrorKind::Config
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
        if i.kind == ProviderErrorKind::MalformedResponse
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
fn excerpt(body: &[u8]) -> String {
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
        let e = ProviderError::new("openai", ProviderErrorKind::RateLimited)
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
        let e = ProviderError::new("anthropic", ProviderErrorKind::MalformedResponse)
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
    fn kind_and_a_clamped_retry_after() {
        let e = ProviderError::new("gemini", ProviderErrorKind::RateLimited)
            .with_retry_after(Duration::from_secs(u64::MAX))
            .with_code("RESOURCE_EXHAUSTED");
        assert_eq!(e.kind(), ProviderErrorKind::RateLimited);
        assert_eq!(e.retry_after(), Some(MAX_RETRY_AFTER));
        assert_eq!(e.code(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(e.provider(), "gemini");
        assert_eq!(ProviderErrorKind::Timeout.to_string(), "request timed out");
    }

    #[test]
    fn context_length_is_an_invalid_request() {
        let e = ProviderError::new("openai", ProviderErrorKind::ContextLengthExceeded);
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
        let err: BoxError = Box::new(Wrap(ProviderError::new(
            "openai",
            ProviderErrorKind::ServerError,
        )));
        assert!(ProviderError::find(&*err).unwrap().is_server_error());
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ProviderError>();
    }
}
