//! [`RetryPolicy`]: a [`tower::retry::Policy`] for model calls that retries rate limits and
//! server errors with exponential backoff, honouring `Retry-After`.
//!
//! The retrying itself is tower's: stack `ServiceBuilder::retry(RetryPolicy::new())` (or
//! [`RetryLayer`](tower::retry::RetryLayer)) on the model path. The policy only decides:
//!
//! - it retries a call that failed with a [`ProviderError`] that
//!   [`is_rate_limited`](ProviderError::is_rate_limited) or
//!   [`is_server_error`](ProviderError::is_server_error) — found anywhere in the error's source
//!   chain — and nothing else (an invalid request or a bad key fails the same way twice);
//! - it makes at most [`max_attempts`](RetryPolicy::max_attempts) calls in all (default 3, as
//!   the official SDKs);
//! - it waits what the provider's `Retry-After` says, or else `base_delay · 2ⁿ` (default
//!   500 ms, doubling, at most 8 s) less up to 25% of random jitter, with
//!   [`tokio::time::sleep`] (so paused-time tests run instantly);
//! - it gives up at once when `Retry-After` asks for more than
//!   [`max_retry_after`](RetryPolicy::max_retry_after) (default 60 s) — the caller gets the
//!   provider's error, its [`retry_after`](ProviderError::retry_after) set (clamped to
//!   [`MAX_RETRY_AFTER`](crate::model::MAX_RETRY_AFTER), one day, so a `Retry-After: 1e20`
//!   neither panics nor sleeps for ages) — or when the run was cancelled. So no wait is ever
//!   longer than `max_retry_after` or [`max_delay`](RetryPolicy::max_delay);
//! - each retry is sent to the run's events as an
//!   [`AgentEvent::Warning`].
//!
//! Replaying a request is cheap: a [`ModelRequest`] shares its history.
//!
//! A streamed call that fails mid-way (say an `overloaded_error` event) has already sent some
//! [`ModelDelta`](crate::agent::ModelDelta)s to the run's events; the retried call sends its
//! own from the start. Only the final [`ModelResponse`] counts.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent::message::Message;
//! use tower_agent::model::{ModelRequest, RetryPolicy, openai::OpenAiChat};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::BoxError> {
//! let mut model = ServiceBuilder::new()
//!     .retry(RetryPolicy::new().max_attempts(5))
//!     .timeout(Duration::from_secs(120)) // per attempt
//!     .service(OpenAiChat::builder().api_key("sk-…").model("gpt-4.1-mini").build());
//!
//! let resp = model.ready().await?.call(ModelRequest::new(vec![Message::user("Hi")])).await?;
//! println!("{}", resp.message.text());
//! # Ok(())
//! # }
//! ```

use std::{
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use tokio::time::Sleep;
use tower::retry::Policy;

use super::{ModelRequest, ModelResponse, ProviderError};
use crate::{agent::AgentEvent, error::BoxError};

/// Retries model calls that were rate limited or hit a server error. See the
/// [module docs](crate::model::retry).
///
/// # Clone
///
/// tower's `Retry` clones the policy for every call, so the attempt count is per call: a
/// fresh policy (as built) has made no attempt.
#[derive(Debug, Clone)]
#[must_use]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
    max_retry_after: Duration,
    jitter: bool,
    /// Retries made so far in this call.
    retries: u32,
}

impl RetryPolicy {
    /// A policy with the defaults: 3 attempts, 500 ms base delay doubling up to 8 s, 25%
    /// jitter, `Retry-After` honoured up to 60 s.
    pub const fn new() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
            retries: 0,
        }
    }

    /// The most calls made in all, the first one included (default 3; 1 never retries).
    pub const fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The delay before the first retry when the provider gave no `Retry-After`; it doubles
    /// at each retry (default 500 ms).
    pub const fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// The longest computed delay (default 8 s). Does not cap `Retry-After`.
    pub const fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// The longest `Retry-After` waited for (default 60 s): the policy's maximum wait. Asked
    /// to wait longer, the policy does not retry: the caller gets the error at once, with its
    /// [`retry_after`](ProviderError::retry_after) (at most
    /// [`MAX_RETRY_AFTER`](crate::model::MAX_RETRY_AFTER)) to decide for itself.
    pub const fn max_retry_after(mut self, limit: Duration) -> Self {
        self.max_retry_after = limit;
        self
    }

    /// Whether computed delays get up to 25% of random jitter (default on), so many clients
    /// don't retry in lockstep.
    pub const fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// How long to wait before retry number `retry` (from 1), without a `Retry-After`.
    fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let delay = self.base_delay.saturating_mul(factor).min(self.max_delay);
        if self.jitter {
            // NOTE: checked, as `mul_f64` panics when the product rounds past `Duration::MAX`.
            Duration::try_from_secs_f64(delay.as_secs_f64() * (1.0 - 0.25 * random_unit()))
                .map_or(delay, |jittered| jittered.min(delay))
        } else {
            delay
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl Policy<ModelRequest, ModelResponse, BoxError> for RetryPolicy {
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut ModelRequest,
        result: &mut Result<ModelResponse, BoxError>,
    ) -> Option<Self::Future> {
        let err = result.as_ref().err()?;
        let provider = ProviderError::find(&**err)?;
        if !(provider.is_rate_limited() || provider.is_server_error()) || req.ctx.is_cancelled() {
            return None;
        }
        if self.retries.saturating_add(1) >= self.max_attempts {
            tracing::debug!(attempts = self.max_attempts, error = %provider, "model call failed; giving up");
            return None;
        }
        let delay = match provider.retry_after() {
            Some(wait) if wait > self.max_retry_after => {
                tracing::debug!(?wait, error = %provider, "retry-after too long; giving up");
                return None;
            }
            Some(wait) => wait,
            None => self.backoff(self.retries + 1),
        };
        self.retries += 1;
        let attempt = self.retries + 1;
        tracing::debug!(attempt, ?delay, error = %provider, "retrying model call");
        req.ctx.emit_with(|| AgentEvent::Warning {
            message: format!(
                "model call failed ({provider}); retrying in {delay:?} (attempt {attempt} of {})",
                self.max_attempts
            ),
        });
        Some(tokio::time::sleep(delay))
    }

    fn clone_request(&mut self, req: &ModelRequest) -> Option<ModelRequest> {
        // Cheap: the history and tools are shared.
        Some(req.clone())
    }
}

/// A number in `[0, 1)`, different at each call (randomly seeded hasher over a counter).
fn random_unit() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        message::Message,
        model::error::{Kind, ProviderError},
    };

    // The policy trait stays object safe with our future.
    fn _obj_safe(_: Box<dyn Policy<ModelRequest, ModelResponse, BoxError, Future = Sleep>>) {}

    #[test]
    fn send_sync_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<RetryPolicy>();
        fn assert_send<T: Send>() {}
        assert_send::<Sleep>();
    }

    fn failed(kind: Kind, retry_after: Option<Duration>) -> Result<ModelResponse, BoxError> {
        Err(ProviderError::new("openai", kind)
            .with_status(429)
            .with_retry_after(retry_after)
            .into())
    }

    #[tokio::test(start_paused = true)]
    async fn retries_what_is_transient_only() {
        let mut req = ModelRequest::new(vec![Message::user("hi")]);
        let mut p = RetryPolicy::new();
        assert!(
            p.retry(&mut req, &mut failed(Kind::RateLimited, None))
                .is_some()
        );
        let mut p = RetryPolicy::new();
        assert!(p.retry(&mut req, &mut failed(Kind::Server, None)).is_some());
        for kind in [
            Kind::Authentication,
            Kind::InvalidRequest,
            Kind::ContextLength,
            Kind::Quota,
            Kind::Malformed,
        ] {
            let mut p = RetryPolicy::new();
            assert!(
                p.retry(&mut req, &mut failed(kind, None)).is_none(),
                "{kind:?}"
            );
        }
        let mut ok = Ok(ModelResponse::text("x"));
        assert!(RetryPolicy::new().retry(&mut req, &mut ok).is_none());
        let mut other: Result<ModelResponse, BoxError> = Err("plain".into());
        assert!(RetryPolicy::new().retry(&mut req, &mut other).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn counts_attempts_and_honours_retry_after() {
        let mut req = ModelRequest::new(vec![Message::user("hi")]);
        let mut p = RetryPolicy::new().max_attempts(3).jitter(false);
        let start = tokio::time::Instant::now();
        p.retry(&mut req, &mut failed(Kind::Server, None))
            .unwrap()
            .await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        p.retry(
            &mut req,
            &mut failed(Kind::Server, Some(Duration::from_secs(7))),
        )
        .unwrap()
        .await;
        assert_eq!(start.elapsed(), Duration::from_millis(7_500));
        // Third attempt failed: give up.
        assert!(p.retry(&mut req, &mut failed(Kind::Server, None)).is_none());

        let mut p = RetryPolicy::new().max_retry_after(Duration::from_secs(10));
        let too_long = Some(Duration::from_secs(11));
        assert!(
            p.retry(&mut req, &mut failed(Kind::RateLimited, too_long))
                .is_none()
        );

        req.ctx.cancellation().cancel();
        assert!(
            RetryPolicy::new()
                .retry(&mut req, &mut failed(Kind::Server, None))
                .is_none()
        );
    }

    #[test]
    fn backoff_doubles_caps_and_jitters() {
        let p = RetryPolicy::new().jitter(false);
        assert_eq!(p.backoff(1), Duration::from_millis(500));
        assert_eq!(p.backoff(2), Duration::from_secs(1));
        assert_eq!(p.backoff(5), Duration::from_secs(8));
        assert_eq!(p.backoff(60), Duration::from_secs(8));
        let p = RetryPolicy::new()
            .base_delay(Duration::MAX)
            .max_delay(Duration::MAX);
        for retry in 1..100 {
            assert!(p.backoff(retry) >= Duration::MAX.mul_f64(0.74));
        }
        let p = RetryPolicy::new();
        for _ in 0..100 {
            let d = p.backoff(2);
            assert!(
                d > Duration::from_millis(750) && d <= Duration::from_secs(1),
                "{d:?}"
            );
        }
    }
}
