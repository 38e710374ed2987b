//! The agent as a plain tower service, and the `Clone + Send + Sync` guarantees the crate
//! promises (axum needs them).

use crate::support;

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tokio_test::assert_ready_ok;
use tower::{Service, ServiceBuilder, ServiceExt, timeout::error::Elapsed};
use tower_agent::{
    Agent, AgentRequest, AgentResponse, BoxError, Error,
    agent::{Outcome, SetupContext},
    context::RunContext,
    message::ToolCall,
    model::{BoxModelService, ModelRequest, ScriptedModel},
    tool::{BoxToolService, ToolRequest, ToolRouter},
};
use tower_test::mock;

use support::answers;

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn agent_behind_a_timeout_layer_answers() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("hello"))
        .build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(agent);

    let resp: AgentResponse = svc.oneshot(AgentRequest::new("hi")).await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "hello");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn timeout_layer_on_the_agent_fires_for_a_slow_model() {
    let model = ScriptedModel::new()
        .text("too late")
        .latency(Duration::from_secs(10));
    let agent = Agent::builder().model(model).build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(agent);

    let start = Instant::now();
    let err: BoxError = svc.oneshot(AgentRequest::new("hi")).await.unwrap_err();

    assert!(err.downcast_ref::<Elapsed>().is_some(), "{err:?}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(6),
        "{took:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn slow_model_within_the_agent_timeout_answers() {
    let model = ScriptedModel::new()
        .text("in time")
        .latency(Duration::from_secs(4));
    let agent = Agent::builder().model(model).build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(agent);

    let resp = svc.oneshot(AgentRequest::new("hi")).await.unwrap();

    assert_eq!(resp.text, "in time");
}

#[tokio::test(flavor = "current_thread")]
async fn agent_error_passes_through_tower_middleware() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("never"))
        .setup(|_cx: SetupContext| async { Err::<(), _>("no config") })
        .build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(agent);

    let err = svc.oneshot(AgentRequest::new("hi")).await.unwrap_err();

    let err = err.downcast_ref::<Error>().expect("the crate's error");
    assert!(err.is_setup());
}

#[tokio::test(flavor = "current_thread")]
async fn agent_is_always_ready_and_serves_concurrent_calls() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("one").text("two"))
        .build();
    let mut svc = mock::Spawn::new(agent);

    assert_ready_ok!(svc.poll_ready());
    let first = svc.call(AgentRequest::new("a"));
    assert_ready_ok!(svc.poll_ready());
    let second = svc.call(AgentRequest::new("b"));
    let (first, second) = tokio::join!(first, second);

    let mut texts = [first.unwrap().text, second.unwrap().text];
    texts.sort();
    assert_eq!(texts, ["one", "two"]);
}

#[tokio::test(flavor = "current_thread")]
async fn model_failure_is_an_aborted_outcome_not_an_error() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().fail("rate limited"))
        .build();

    let resp = agent
        .clone()
        .oneshot(AgentRequest::new("hi"))
        .await
        .unwrap();

    match resp.outcome {
        Outcome::Aborted { error } => {
            assert!(error.contains("model call failed"), "{error}");
            assert!(error.contains("rate limited"), "{error}");
        }
        other => panic!("expected Aborted, got {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn failing_prepare_stage_is_an_aborted_outcome() {
    let model = ScriptedModel::new().text("never");
    let agent = Agent::builder()
        .model(model.clone())
        .prepare(|_req: &mut ModelRequest| Err::<(), _>("bad prompt"))
        .build();

    let resp = agent.run("hi").await.unwrap();

    match resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("bad prompt"), "{error}"),
        other => panic!("expected Aborted, got {other:?}"),
    }
    assert_eq!(model.calls(), 0);
}

// ===== compile-time guarantees =====

fn assert_traits<T: Clone + Send + Sync + 'static>() {}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn public_services_are_clone_send_sync() {
    assert_traits::<Agent>();
    assert_traits::<BoxModelService>();
    assert_traits::<BoxToolService>();
    assert_traits::<ToolRouter>();
    assert_traits::<ScriptedModel>();
    assert_traits::<RunContext>();
    assert_traits::<AgentRequest>();
    assert_traits::<AgentResponse>();
    assert_traits::<ModelRequest>();
    assert_traits::<ToolRequest>();
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Error>();
}

#[test]
fn futures_are_send() {
    fn assert_future_send<S, R>()
    where
        S: Service<R>,
        S::Future: Send + 'static,
    {
    }
    assert_future_send::<ToolRouter, ToolRequest>();
    assert_future_send::<Agent, AgentRequest>();
    assert_future_send::<BoxToolService, ToolRequest>();
    assert_future_send::<BoxModelService, ModelRequest>();
    assert_future_send::<ScriptedModel, ModelRequest>();

    let agent = Agent::builder()
        .model(ScriptedModel::new().text("x"))
        .tool(answers("a", "b"))
        .build();
    let run = agent.run("hi");
    assert_send(&run);
    let stream = agent.stream("hi");
    assert_send(&stream);
    let call = ToolRouter::new()
        .tool(answers("a", "b"))
        .call(ToolRequest::new(
            ToolCall::new("1", "a", json!({})),
            RunContext::new(),
        ));
    assert_send(&call);
}

/// An agent is a `Service` that axum-style generic code can box and clone.
#[tokio::test(flavor = "current_thread")]
async fn agent_boxes_into_a_clone_sync_service() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("boxed").per_run())
        .build();
    let boxed: tower::util::BoxCloneSyncService<AgentRequest, AgentResponse, Error> =
        tower::util::BoxCloneSyncService::new(agent);

    let resp = boxed
        .clone()
        .oneshot(AgentRequest::new("hi"))
        .await
        .unwrap();

    assert_eq!(resp.text, "boxed");
}

/// A store that loads nothing and cannot save.
#[derive(Debug)]
struct BrokenStore;

impl tower_agent::store::ThreadStore for BrokenStore {
    fn load<'a>(
        &'a self,
        _id: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<Option<tower_agent::store::Thread>, BoxError>>
    {
        Box::pin(async { Ok(None) })
    }

    fn save<'a>(
        &'a self,
        _thread: &'a tower_agent::store::Thread,
    ) -> futures_util::future::BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("disk full".into()) })
    }

    fn delete<'a>(
        &'a self,
        _id: &'a str,
    ) -> futures_util::future::BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_that_cannot_save_fails_the_run_with_a_store_error() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("hi").per_run())
        .store(BrokenStore)
        .build();

    let err = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap_err();

    assert!(err.is_store(), "{err:?}");
    assert_eq!(
        std::error::Error::source(&err).unwrap().to_string(),
        "disk full"
    );
    // An ephemeral run does not touch the store.
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.text, "hi");
}

/// A run cut off by a `tower::timeout` around the agent, while its second step's tool runs:
/// the event receiver still gets `AgentStop { Cancelled }` last and then ends, and the
/// thread store (SQLite, on disk) holds the prompt and the first whole step.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "current_thread")]
async fn a_run_cut_off_by_a_timeout_ends_its_stream_and_keeps_its_prompt() {
    use tower_agent::{agent::AgentEvent, message::Role, store::Sqlite, store::ThreadStore};

    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(Sqlite::open(dir.path().join("threads.db")).unwrap());
    let model = ScriptedModel::new()
        .tool_call("fast", json!({}))
        .tool_call("slow", json!({}))
        .text("never");
    let agent = Agent::builder()
        .model(model)
        .tool(answers("fast", "fast done"))
        .tool(support::sleepy("slow", 600_000))
        .store(store.clone())
        .build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_millis(500))
        .service(agent);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();

    // Cut off at 500 ms, not after the ten minutes of the slow tool.
    let err = support::within(
        "the cut-off run",
        svc.oneshot(AgentRequest::new("remember me").thread("t-cut").events(tx)),
    )
    .await
    .unwrap_err();
    assert!(err.downcast_ref::<Elapsed>().is_some(), "{err:?}");

    let mut events = Vec::new();
    while let Some(event) = support::within("the event stream ends", rx.recv()).await {
        events.push(event);
    }
    assert!(matches!(
        events.first(),
        Some(AgentEvent::AgentStart { .. })
    ));
    match events.last() {
        Some(AgentEvent::AgentStop { outcome, steps, .. }) => {
            assert_eq!(*outcome, Outcome::Cancelled);
            assert_eq!(*steps, 2);
        }
        other => panic!("last event: {other:?}"),
    }
    let stops = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::AgentStop { .. }))
        .count();
    assert_eq!(stops, 1, "{events:?}");

    let thread = store
        .load("t-cut")
        .await
        .unwrap()
        .expect("the thread was saved");
    let roles: Vec<Role> = thread.messages.iter().map(|m| m.role).collect();
    // And the assistant message of the step cut off, saved before its call ran (see
    // `store::journal`).
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
        "{thread:?}"
    );
    assert_eq!(thread.messages[0].text(), "remember me");
    assert_eq!(thread.messages[2].text(), "fast done");
    assert_eq!(thread.messages[3].tool_calls[0].name, "slow");
}

/// A run cut off during its first model call keeps its prompt in the store, and its stream
/// (an `Agent::stream` dropped by its consumer is the same drop) ends with `AgentStop`.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_run_cut_off_in_its_first_model_call_keeps_its_prompt() {
    use tower_agent::{agent::AgentEvent, store::MemoryStore, store::ThreadStore};

    let store = std::sync::Arc::new(MemoryStore::new());
    let model = ScriptedModel::new()
        .text("too late")
        .latency(Duration::from_secs(10));
    let agent = Agent::builder().model(model).store(store.clone()).build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .service(agent);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();

    svc.oneshot(AgentRequest::new("first words").thread("t-1").events(tx))
        .await
        .unwrap_err();

    let mut last = None;
    while let Some(event) = rx.recv().await {
        last = Some(event);
    }
    assert!(
        matches!(
            last,
            Some(AgentEvent::AgentStop {
                outcome: Outcome::Cancelled,
                steps: 1,
                ..
            })
        ),
        "{last:?}"
    );
    let thread = store.load("t-1").await.unwrap().expect("saved");
    assert_eq!(thread.messages.len(), 1);
    assert_eq!(thread.messages[0].text(), "first words");
}
