//! [`RetryPolicy`]: a [`tower::retry::Policy`] for model calls that retries rate limits and
//! server errors with tower's exponential backoff, within a retry budget, honouring
//! `Retry-After`.
//!
//! The retrying itself is tower's: stack `ServiceBuilder::retry(RetryPolicy::new())` (or
//! [`RetryLayer`](tower::retry::RetryLayer)) on the model path. The policy only decides, with
//! tower's parts:
//!
//! - it retries a call that failed with a [`ProviderError`] that
//!   [`is_rate_limited`](ProviderError::is_rate_limited) or
//!   [`is_server_error`](ProviderError::is_server_error) — found anywhere in the error's source
//!   chain — and nothing else (an invalid request or a bad key fails the same way twice);
//! - it makes at most [`max_attempts`](RetryPolicy::max_attempts) calls in all (default 3, as
//!   the official SDKs);
//! - it retries only while its **retry budget** allows: a [`TpsBudget`] shared by every clone
//!   of the policy (so by every call through one `Retry` service). Each call deposits, each
//!   retry withdraws; by default (`TpsBudget::new(10 s, 10, 0.2)`, tower's own default) at most
//!   10 retries a second plus 20% of the calls of the last 10 s. A provider that keeps failing
//!   is therefore not hammered with `max_attempts` times the traffic: once the budget is spent,
//!   calls fail at once with the provider's error. Share one budget between several stacks
//!   with [`budget`](RetryPolicy::budget);
//! - it waits what the provider's `Retry-After` says, or else what tower's
//!   [`ExponentialBackoff`] says: `base_delay · 2ⁿ` (default 500 ms, doubling, at most
//!   [`max_delay`](RetryPolicy::max_delay), 8 s) plus up to 25% of random jitter, never more
//!   than `max_delay`; waits are [`tokio::time::sleep`]s (so paused-time tests run instantly).
//!   n is the number of retries this call has already taken — every one of them, those that
//!   waited a `Retry-After` included (as the official OpenAI SDK counts) — so the first retry
//!   waits `base_delay`, and a 503 after a 429 that was retried after its `Retry-After` waits
//!   `base_delay · 2`;
//! - it gives up at once when `Retry-After` asks for more than
//!   [`max_retry_after`](RetryPolicy::max_retry_after) (default 60 s) — the caller gets the
//!   provider's error, its [`retry_after`](ProviderError::retry_after) set (clamped to
//!   [`MAX_RETRY_AFTER`](crate::model::MAX_RETRY_AFTER), one day, so a `Retry-After: 1e20`
//!   neither panics nor sleeps for ages) — or when the run was cancelled. So no wait is ever
//!   longer than `max_retry_after` or [`max_delay`](RetryPolicy::max_delay);
//! - each retry is a warning of the run: sent to its events as an
//!   [`AgentEvent::Warning`](crate::agent::AgentEvent::Warning), logged at `WARN` and
//!   listed in the run's [`AgentResponse::warnings`](crate::AgentResponse::warnings) (it
//!   fires no Notification hook).
//!
//! Replaying a request is cheap: a [`ModelRequest`] shares its history.
//!
//! A streamed call answers at its first piece (see [`body`](crate::model::body)): a call that
//! fails before it (a refused connection, an error status, an `overloaded_error` event first)
//! is retried; once pieces went out, a failure is the stream's error, the run's to handle (it
//! ends `Aborted`), not retried: the pieces could not be taken back.
//!
//! # Example
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use tower::{Service, ServiceBuilder, ServiceExt, retry::budget::TpsBudget};
//! use tower_agent_core::message::Message;
//! use tower_agent_core::model::{ModelRequest, RetryPolicy, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! // At most 1 retry a second plus 10% of the calls, over a 10 s window.
//! let budget = Arc::new(TpsBudget::new(Duration::from_secs(10), 1, 0.1));
//! let mut model = ServiceBuilder::new()
//!     .retry(RetryPolicy::new().max_attempts(5).budget(budget))
//!     .timeout(Duration::from_secs(120)) // per attempt
//!     // A provider here, e.g. `tower_agent_core::model::openai::OpenAiChat`.
//!     .service(ScriptedModel::new().text("Hello!"));
//!
//! let resp = model.ready().await?.call(ModelRequest::new(vec![Message::user("Hi")])).await?;
//! assert_eq!(resp.message.text(), "Hello!");
//! # Ok(())
//! # }
//! ```

use std::{fmt, sync::Arc, time::Duration};

use tokio::time::Sleep;
use tower::{
    retry::{
        Policy,
        backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff},
        budget::{Budget, TpsBudget},
    },
    util::rng::{HasherRng, Rng},
};

use super::{ModelRequest, ModelResponse, ProviderError};
use crate::error::BoxError;

/// The jitter of the computed delays when on: up to 25% of the delay, added.
const JITTER: f64 = 0.25;

/// Retries model calls that were rate limited or hit a server error. See the
/// [module docs](crate::model::retry).
///
/// # Clone
///
/// tower's `Retry` clones the policy for every call, so the attempt count and the backoff are
/// per call: a fresh policy (as built) has made no attempt. The retry budget is shared by
/// every clone.
#[derive(Clone)]
#[must_use]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
    max_retry_after: Duration,
    jitter: bool,
    budget: Arc<TpsBudget>,
    /// This call's backoff and jitter source, made at its first retry.
    backoff: Option<(ExponentialBackoff, HasherRng)>,
    /// Retries made so far in this call.
    retries: u32,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("max_retry_after", &self.max_retry_after)
            .field("jitter", &self.jitter)
            .field("budget", &self.budget)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl RetryPolicy {
    /// A policy with the defaults: 3 attempts, 500 ms base delay doubling up to 8 s, 25%
    /// jitter, `Retry-After` honoured up to 60 s, a fresh budget of tower's defaults
    /// (`TpsBudget::new(10 s, 10, 0.2)`).
    pub fn new() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
            budget: Arc::new(TpsBudget::default()),
            backoff: None,
            retries: 0,
        }
    }

    /// The most calls made in all, the first one included (default 3; 1 never retries).
    pub const fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The delay before the first retry when the provider gave no `Retry-After`; it doubles
    /// at each retry (default 500 ms). A base above [`max_delay`](Self::max_delay) is
    /// `max_delay`.
    pub const fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// The longest computed delay, jitter included (default 8 s; at least 1 ns). Does not cap
    /// `Retry-After`.
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

    /// Whether computed delays get up to 25% of random jitter, added (default on), so many
    /// clients don't retry in lockstep.
    pub const fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// The retry budget: every call deposits in it, every retry withdraws from it, and no
    /// retry is made when it is spent. Pass the same `Arc` to several policies to share one
    /// budget between them. See [`TpsBudget::new`] for its parameters.
    pub fn budget(mut self, budget: Arc<TpsBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// The longest computed delay: `max_delay`, at least 1 ns (tower's backoff wants one).
    fn cap(&self) -> Duration {
        self.max_delay.max(Duration::from_nanos(1))
    }

    /// tower's backoff for one call: `base_delay · 2ⁿ` up to `max_delay`, without jitter (see
    /// [`next_backoff`](Self::next_backoff)).
    fn make_backoff(&self) -> ExponentialBackoff {
        let max = self.cap();
        ExponentialBackoffMaker::new(self.base_delay.min(max), max, 0.0, HasherRng::default())
            .expect("min <= max, max > 0, jitter 0")
            .make_backoff()
    }

    /// Advances this call's backoff by one retry and returns the wait it computes (used unless
    /// the provider gave a `Retry-After`): tower's exponential backoff, plus up to 25% of
    /// jitter drawn from tower's [`HasherRng`], at most `max_delay`.
    ///
    /// NOTE: tower's own jitter (0.5.3) scales the whole seconds and the nanoseconds of a delay
    /// separately and truncates each, so a delay of whole seconds (1 s, 2 s, 4 s) gets none;
    /// hence the jitter here.
    fn next_backoff(&mut self) -> Sleep {
        if self.backoff.is_none() {
            // A fresh random state per call, so calls don't jitter in lockstep.
            self.backoff = Some((self.make_backoff(), HasherRng::default()));
        }
        let cap = self.cap();
        let jitter = self.jitter;
        let (backoff, rng) = self.backoff.as_mut().expect("made above");
        let sleep = backoff.next_backoff();
        if !jitter {
            return sleep;
        }
        let deadline = sleep.deadline();
        let base = deadline.saturating_duration_since(tokio::time::Instant::now());
        let room = cap.saturating_sub(base);
        // NOTE: checked, as `Duration::from_secs_f64` panics past `Duration::MAX`.
        let extra = Duration::try_from_secs_f64(base.as_secs_f64() * JITTER * rng.next_f64())
            .map_or(room, |extra| extra.min(room));
        match deadline.checked_add(extra) {
            Some(later) => tokio::time::sleep_until(later),
            None => sleep,
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
        if self.retries == 0 {
            // One deposit per call (at its first answer), whatever the answer.
            self.budget.deposit();
        }
        let err = result.as_ref().err()?;
        let provider = ProviderError::find(&**err)?;
        if !(provider.is_rate_limited() || provider.is_server_error()) || req.ctx.is_cancelled() {
            return None;
        }
        if self.retries.saturating_add(1) >= self.max_attempts {
            tracing::debug!(attempts = self.max_attempts, error = %provider, "model call failed; giving up");
            return None;
        }
        let retry_after = provider.retry_after();
        if let Some(wait) = retry_after
            && wait > self.max_retry_after
        {
            tracing::debug!(?wait, error = %provider, "retry-after too long; giving up");
            return None;
        }
        if !self.budget.withdraw() {
            tracing::debug!(error = %provider, "retry budget spent; giving up");
            return None;
        }
        // Every retry advances this call's backoff, one that waits a `Retry-After` too: n in
        // `base_delay · 2ⁿ` counts every retry taken.
        let backoff = self.next_backoff();
        let sleep = match retry_after {
            Some(wait) => tokio::time::sleep(wait),
            None => backoff,
        };
        let delay = sleep
            .deadline()
            .saturating_duration_since(tokio::time::Instant::now());
        self.retries += 1;
        let attempt = self.retries + 1;
        tracing::debug!(attempt, ?delay, error = %provider, "retrying model call");
        req.ctx.record_warning(format!(
            "model call failed ({provider}); retrying in {delay:?} (attempt {attempt} of {})",
            self.max_attempts
        ));
        Some(sleep)
    }

    fn clone_request(&mut self, req: &ModelRequest) -> Option<ModelRequest> {
        // Cheap: the history and tools are shared.
        Some(req.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        message::Message,
        model::error::{ProviderError, ProviderErrorKind as Kind},
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
        let err = ProviderError::new("openai", kind).with_status(429);
        Err(match retry_after {
            Some(delay) => err.with_retry_after(delay),
            None => err,
        }
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
        assert!(
            p.retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_some()
        );
        for kind in [
            Kind::Authentication,
            Kind::InvalidRequest,
            Kind::ContextLengthExceeded,
            Kind::QuotaExceeded,
            Kind::MalformedResponse,
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
        p.retry(&mut req, &mut failed(Kind::ServerError, None))
            .unwrap()
            .await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        p.retry(
            &mut req,
            &mut failed(Kind::ServerError, Some(Duration::from_secs(7))),
        )
        .unwrap()
        .await;
        assert_eq!(start.elapsed(), Duration::from_millis(7_500));
        // Third attempt failed: give up.
        assert!(
            p.retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_none()
        );

        let mut p = RetryPolicy::new().max_retry_after(Duration::from_secs(10));
        let too_long = Some(Duration::from_secs(11));
        assert!(
            p.retry(&mut req, &mut failed(Kind::RateLimited, too_long))
                .is_none()
        );

        req.ctx.cancellation().cancel();
        assert!(
            RetryPolicy::new()
                .retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_after_counts_toward_the_backoff() {
        let mut req = ModelRequest::new(vec![Message::user("hi")]);
        let mut p = RetryPolicy::new().max_attempts(4).jitter(false);
        let start = tokio::time::Instant::now();
        let retry_after = Some(Duration::from_secs(1));
        p.retry(&mut req, &mut failed(Kind::RateLimited, retry_after))
            .unwrap()
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        // The second retry: n = 1, whatever the first one waited.
        p.retry(&mut req, &mut failed(Kind::ServerError, None))
            .unwrap()
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        p.retry(&mut req, &mut failed(Kind::ServerError, None))
            .unwrap()
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(4));
    }

    /// The delays of one call's backoff, in order.
    fn delays(p: &RetryPolicy, n: usize) -> Vec<Duration> {
        let mut p = p.clone();
        (0..n)
            .map(|_| {
                p.next_backoff()
                    .deadline()
                    .duration_since(tokio::time::Instant::now())
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_caps_and_jitters() {
        let p = RetryPolicy::new().jitter(false);
        let d = delays(&p, 6);
        assert_eq!(d[0], Duration::from_millis(500));
        assert_eq!(d[1], Duration::from_secs(1));
        assert_eq!(d[4], Duration::from_secs(8));
        assert_eq!(d[5], Duration::from_secs(8));
        // Huge settings neither overflow nor panic (tokio clamps such a sleep to ~30 years).
        let p = RetryPolicy::new()
            .base_delay(Duration::MAX)
            .max_delay(Duration::MAX);
        for d in delays(&p, 100) {
            assert!(d > Duration::from_secs(86_400 * 365), "{d:?}");
        }
        // A zero max and a base above the max are clamped, not rejected.
        let p = RetryPolicy::new().max_delay(Duration::ZERO);
        assert!(delays(&p, 3).iter().all(|d| *d <= Duration::from_nanos(1)));
        // Jitter: up to 25% added, never past the cap; calls differ.
        let p = RetryPolicy::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100 {
            let d = delays(&p, 2)[1];
            assert!(
                d >= Duration::from_secs(1) && d <= Duration::from_millis(1250),
                "{d:?}"
            );
            seen.insert(d);
        }
        assert!(seen.len() > 50, "jitter in lockstep: {seen:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn budget_is_shared_by_clones_and_stops_retries() {
        let mut req = ModelRequest::new(vec![Message::user("hi")]);
        // No reserve beyond 1 retry a second, nothing from deposits.
        let budget = Arc::new(TpsBudget::new(Duration::from_secs(1), 1, 0.0));
        let policy = RetryPolicy::new().max_attempts(10).budget(budget);
        let mut first = policy.clone();
        assert!(
            first
                .retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_some()
        );
        assert!(
            first
                .retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_none()
        );
        let mut second = policy.clone();
        assert!(
            second
                .retry(&mut req, &mut failed(Kind::ServerError, None))
                .is_none()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any settings: every computed wait is within `[min(base, cap), cap]` (jitter
        /// included), grows or holds from one retry to the next, and nothing panics.
        #[test]
        fn backoff_stays_within_its_bounds(
            base_ms in 0u64..10_000_000,
            cap_ms in 0u64..10_000_000,
            jitter: bool,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let (base, cap) = (Duration::from_millis(base_ms), Duration::from_millis(cap_ms));
            let p = RetryPolicy::new().base_delay(base).max_delay(cap).jitter(jitter);
            let d = rt.block_on(async { delays(&p, 40) });
            let cap = cap.max(Duration::from_nanos(1));
            let mut last_base = Duration::ZERO;
            for (n, d) in d.iter().enumerate() {
                proptest::prop_assert!(*d <= cap, "{n}: {d:?} > {cap:?}");
                proptest::prop_assert!(*d >= base.min(cap), "{n}: {d:?} < {base:?}");
                // Without jitter the waits never shrink.
                if !jitter {
                    proptest::prop_assert!(*d >= last_base, "{n}: {d:?} < {last_base:?}");
                    last_base = *d;
                }
            }
        }
    }
}
