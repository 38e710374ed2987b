//! `RetryPolicy` on tower's parts, against a loopback OpenAI server: the retry budget
//! (`TpsBudget`) stops retries once spent, `Retry-After` is honoured (and a too long one is not
//! waited for), and the exponential backoff grows between attempts, with bounded jitter.

use crate::loopback;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use loopback::{Reply, Server};
use tower::{ServiceBuilder, ServiceExt, retry::budget::TpsBudget};
use tower_agent::{
    BoxError,
    message::Message,
    model::{ModelRequest, ProviderError, RetryPolicy, openai::OpenAiChat},
};

fn openai(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .client(loopback::client())
        .build()
}

fn hi() -> ModelRequest {
    ModelRequest::new(vec![Message::user("Hi")])
}

fn overloaded() -> Reply {
    Reply::status(
        503,
        r#"{"error":{"message":"The engine is currently overloaded","type":"server_error"}}"#,
    )
}

fn rate_limited() -> Reply {
    Reply::status(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
    )
}

/// Sends `hi()` through `policy` to `server` and returns the gaps between the attempts, in
/// paused tokio time.
async fn gaps_between_attempts(server: &Server, policy: RetryPolicy) -> Vec<Duration> {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&sent);
    let model = ServiceBuilder::new()
        .retry(policy)
        .map_request(move |req: ModelRequest| {
            log.lock().unwrap().push(tokio::time::Instant::now());
            req
        })
        .service(openai(server));
    model.oneshot(hi()).await.unwrap();
    let sent = sent.lock().unwrap();
    sent.windows(2).map(|w| w[1] - w[0]).collect()
}

fn provider_error(err: &BoxError) -> &ProviderError {
    ProviderError::find(&**err).unwrap_or_else(|| panic!("not a ProviderError: {err:?}"))
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_stops_retries() {
    let server = Server::start();
    for _ in 0..4 {
        server.reply(Reply::fixture("openai_text.json"));
    }
    for _ in 0..20 {
        server.reply(overloaded());
    }
    // No reserve; every 4 calls earn one retry (over a 60 s window, far longer than the test).
    let budget = Arc::new(TpsBudget::new(Duration::from_secs(60), 0, 0.25));
    let model = ServiceBuilder::new()
        .retry(
            RetryPolicy::new()
                .max_attempts(5)
                .base_delay(Duration::from_millis(10))
                .budget(Arc::clone(&budget)),
        )
        .service(openai(&server));
    for _ in 0..4 {
        model.clone().oneshot(hi()).await.unwrap();
    }
    assert_eq!(server.requests().len(), 4);
    // The fifth call has earned, with the others, one retry: not the four `max_attempts` allows.
    let err = model.clone().oneshot(hi()).await.unwrap_err();
    assert!(provider_error(&err).is_server_error(), "{err}");
    assert_eq!(
        server.requests().len(),
        6,
        "one retry, then the budget is spent"
    );
    // The next calls fail at once: the provider is not hammered.
    for _ in 0..2 {
        let err = model.clone().oneshot(hi()).await.unwrap_err();
        assert!(provider_error(&err).is_server_error(), "{err}");
    }
    assert_eq!(
        server.requests().len(),
        8,
        "no retry once the budget is spent"
    );

    // An empty budget: never a retry, whatever `max_attempts` says.
    let empty = Arc::new(TpsBudget::new(Duration::from_secs(60), 0, 0.0));
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new().max_attempts(5).budget(empty))
        .service(openai(&server));
    model.oneshot(hi()).await.unwrap_err();
    assert_eq!(server.requests().len(), 9);

    // The default budget (a reserve of 10 retries a second) allows a call's retries.
    let model = ServiceBuilder::new()
        .retry(
            RetryPolicy::new()
                .max_attempts(5)
                .base_delay(Duration::from_millis(10)),
        )
        .service(openai(&server));
    model.oneshot(hi()).await.unwrap_err();
    assert_eq!(server.requests().len(), 14);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_within_the_limit() {
    let server = Server::start();
    server.reply(overloaded().header("retry-after", "3"));
    server.reply(Reply::fixture("openai_text.json"));
    // A base delay far from 3 s shows which wait was used.
    let policy = RetryPolicy::new().base_delay(Duration::from_secs(30));
    let model = ServiceBuilder::new()
        .retry(policy.clone())
        .service(openai(&server));
    let start = tokio::time::Instant::now();
    model.oneshot(hi()).await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_millis(3_100),
        "{waited:?}"
    );
    assert_eq!(server.requests().len(), 2);

    // Longer than `max_retry_after`: not waited for, the caller gets the error and the wait.
    server.reply(overloaded().header("retry-after", "120"));
    let model = ServiceBuilder::new()
        .retry(policy.max_retry_after(Duration::from_secs(60)))
        .service(openai(&server));
    let start = tokio::time::Instant::now();
    let err = model.oneshot(hi()).await.unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(100));
    assert_eq!(
        provider_error(&err).retry_after(),
        Some(Duration::from_secs(120))
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_backoff_grows_with_bounded_jitter() {
    for jitter in [false, true] {
        let server = Server::start();
        for _ in 0..4 {
            server.reply(overloaded());
        }
        server.reply(Reply::fixture("openai_text.json"));
        // When each attempt leaves the client, in paused tokio time.
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&sent);
        let model = ServiceBuilder::new()
            .retry(
                RetryPolicy::new()
                    .max_attempts(5)
                    .base_delay(Duration::from_millis(100))
                    .max_delay(Duration::from_millis(700))
                    .jitter(jitter),
            )
            .map_request(move |req: ModelRequest| {
                log.lock().unwrap().push(tokio::time::Instant::now());
                req
            })
            .service(openai(&server));
        model.oneshot(hi()).await.unwrap();
        let sent = sent.lock().unwrap();
        let gaps: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps.len(), 4, "{gaps:?}");
        // 100, 200, 400 ms, then the cap (700 ms); jitter adds at most 25%, within the cap.
        for (gap, base) in gaps.iter().zip([100u64, 200, 400, 700]) {
            let base = Duration::from_millis(base);
            let most = if jitter {
                (base + base / 4).min(Duration::from_millis(700))
            } else {
                base
            };
            assert!(
                *gap >= base && *gap <= most + Duration::from_millis(5),
                "jitter {jitter}: {gaps:?}"
            );
        }
        assert_eq!(server.requests().len(), 5);
    }
}

/// Every retry taken counts toward the backoff's exponent, one that waited a `Retry-After`
/// too (as the official OpenAI SDK counts): a 503 after a retried 429 waits `base_delay · 2`.
#[tokio::test(start_paused = true)]
async fn every_retry_taken_counts_toward_the_backoff() {
    // 429 (Retry-After: 1), 503, 200: waits 1 s, then base · 2¹ = 1 s plus up to 25% jitter.
    let server = Server::start();
    server.reply(rate_limited().header("retry-after", "1"));
    server.reply(overloaded());
    server.reply(Reply::fixture("openai_text.json"));
    let gaps = gaps_between_attempts(&server, RetryPolicy::new()).await;
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    let slack = Duration::from_millis(5);
    assert!(
        gaps[0] >= Duration::from_secs(1) && gaps[0] <= Duration::from_secs(1) + slack,
        "the Retry-After: {gaps:?}"
    );
    assert!(
        gaps[1] >= Duration::from_secs(1) && gaps[1] <= Duration::from_millis(1_250) + slack,
        "n = 1 after a Retry-After retry: {gaps:?}"
    );
    assert_eq!(server.requests().len(), 3);

    // 503, 503, 200 without jitter: 0.5 s, then 1 s, exactly.
    let server = Server::start();
    server.reply(overloaded());
    server.reply(overloaded());
    server.reply(Reply::fixture("openai_text.json"));
    let gaps = gaps_between_attempts(&server, RetryPolicy::new().jitter(false)).await;
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert!(
        gaps[0] >= Duration::from_millis(500) && gaps[0] <= Duration::from_millis(500) + slack,
        "{gaps:?}"
    );
    assert!(
        gaps[1] >= Duration::from_secs(1) && gaps[1] <= Duration::from_secs(1) + slack,
        "{gaps:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

/// A retry is a warning of the run: logged at `WARN` with the run's ids (not only at debug),
/// as every other warning of a run.
#[tokio::test(start_paused = true)]
async fn a_retry_is_a_run_warning_logged_at_warn() {
    let server = Server::start();
    server.reply(overloaded());
    server.reply(Reply::fixture("openai_text.json"));
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new())
        .service(openai(&server));
    let agent = tower_agent::Agent::builder().model(model).build();
    let (log, _guard) = crate::support::capture_events();
    let resp = agent.run("Hi").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let warnings: Vec<_> = log
        .events()
        .into_iter()
        .filter(|e| e.level == tracing::Level::WARN)
        .collect();
    assert_eq!(warnings.len(), 1, "{:#?}", log.events());
    let warning = &warnings[0];
    assert!(
        warning
            .field("message")
            .is_some_and(|m| m.starts_with("model call failed") && m.contains("retrying")),
        "{warning:?}"
    );
    assert_eq!(warning.field("run_id"), Some(resp.run_id.as_str()));
    assert_eq!(warning.field("session_id"), Some(resp.thread_id.as_str()));
}
