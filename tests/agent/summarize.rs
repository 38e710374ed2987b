//! SummarizeLayer inside the agent loop: compaction persists in the thread, a failing
//! summarizer passes the request through, PreCompact can veto.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use futures_util::StreamExt;
use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::AgentEvent,
    layers::summarize::{CompactDecision, SummarizeLayer},
    message::{Message, Role},
    model::{ModelResponse, ScriptedModel},
    store::{MemoryStore, Thread, ThreadStore},
    tool::tool_fn,
};

/// A thread of `n` long user/assistant messages after a system message.
async fn long_thread(store: &MemoryStore, id: &str, n: usize) {
    let mut thread = Thread::new(id);
    thread.messages.push(Message::system("You are kind."));
    for i in 0..n {
        let text = format!("message {i}: {}", "lorem ipsum ".repeat(30));
        thread.messages.push(if i % 2 == 0 {
            Message::user(text)
        } else {
            Message::assistant(text)
        });
    }
    store.save(&thread).await.unwrap();
}

fn echo() -> impl tower_agent::tool::Tool {
    tool_fn(
        "echo",
        "echo",
        json!({"type": "object"}),
        |args, _| async move { Ok::<_, BoxError>(args) },
    )
}

#[tokio::test]
async fn compaction_happens_once_and_persists_in_the_thread() {
    let store = MemoryStore::new();
    long_thread(&store, "t", 40).await;
    let summarizer = ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("SUMMARY")));
    let summarizer_calls = summarizer.clone();
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"x": 1}))
        .tool_call("echo", json!({"x": 2}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(SummarizeLayer::new(summarizer).context_window(2_000))
                .service(model.clone()),
        )
        .tool(echo())
        .store(store.clone())
        .build();

    let events: Vec<AgentEvent> = agent
        .stream(AgentRequest::new("go on").thread("t"))
        .collect()
        .await;
    assert!(matches!(
        events.last(),
        Some(AgentEvent::AgentStop { outcome, .. }) if outcome.is_finished()
    ));
    let compactions: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Compacted { .. }))
        .collect();
    assert_eq!(compactions.len(), 1, "compacted once, not at every step");
    assert_eq!(summarizer_calls.calls(), 1);

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for req in &requests {
        assert_eq!(req.messages[0].role, Role::System);
        assert!(
            req.messages[1].text().contains("SUMMARY"),
            "{:?}",
            req.messages[1]
        );
    }
    let saved = store.get("t").unwrap();
    assert_eq!(saved.messages[0].text(), "You are kind.");
    assert!(saved.messages[1].text().contains("SUMMARY"));
    // system + summary + kept + (assistant, tool) × 2 + final assistant
    assert!(saved.messages.len() < 15, "{}", saved.messages.len());
    assert_eq!(saved.messages.last().unwrap().text(), "done");
}

#[tokio::test]
async fn failing_summarizer_passes_request_through() {
    let store = MemoryStore::new();
    long_thread(&store, "t", 40).await;
    let model = ScriptedModel::new().text("answer").recording();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(
                    SummarizeLayer::new(ScriptedModel::new().fail("summarizer down"))
                        .context_window(2_000),
                )
                .service(model.clone()),
        )
        .store(store.clone())
        .build();
    let events: Vec<AgentEvent> = agent
        .stream(AgentRequest::new("hi").thread("t"))
        .collect()
        .await;
    let warning = events.iter().find_map(|e| match e {
        AgentEvent::Warning { message } => Some(message.clone()),
        _ => None,
    });
    assert!(
        warning
            .as_deref()
            .is_some_and(|w| w.contains("summarizer down")),
        "{warning:?}"
    );
    let req = &model.requests()[0];
    assert_eq!(req.messages.len(), 42, "system + 40 + prompt, unchanged");
    assert_eq!(store.get("t").unwrap().messages.len(), 43);
}

#[tokio::test]
async fn pre_compact_can_veto_and_observe() {
    let store = MemoryStore::new();
    long_thread(&store, "t", 40).await;
    let seen = Arc::new(AtomicUsize::new(0));
    let seen2 = Arc::clone(&seen);
    let summarizer = ScriptedModel::new().text("SUMMARY");
    let model = ScriptedModel::new().text("answer").recording();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(
                    SummarizeLayer::new(summarizer.clone())
                        .context_window(2_000)
                        .on_compact(
                            move |info: tower_agent::layers::summarize::CompactInfo, _req| {
                                assert!(info.tokens > info.threshold);
                                assert_eq!(info.kept + info.summarized, 41);
                                seen2.fetch_add(1, Ordering::SeqCst);
                                CompactDecision::Veto
                            },
                        ),
                )
                .service(model.clone()),
        )
        .store(store)
        .build();
    agent
        .run(AgentRequest::new("hi").thread("t"))
        .await
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        summarizer.calls(),
        0,
        "vetoed: the summarizer was not called"
    );
    assert_eq!(model.requests()[0].messages.len(), 42);
}

#[tokio::test]
async fn under_the_threshold_nothing_happens() {
    let summarizer = ScriptedModel::new().text("SUMMARY");
    let model = ScriptedModel::new().text("answer").recording();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(SummarizeLayer::new(summarizer.clone()))
                .service(model.clone()),
        )
        .build();
    agent.run("hi").await.unwrap();
    assert_eq!(summarizer.calls(), 0);
    assert_eq!(model.requests()[0].messages.len(), 1);
}

#[tokio::test]
async fn a_failed_summarization_notifies_the_notification_hooks() {
    let store = MemoryStore::new();
    long_thread(&store, "t", 40).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&seen);
    let hooks = tower_agent::layers::hooks::Hooks::new()
        .on_notification(move |message, _ctx| sink.lock().unwrap().push(message.to_owned()))
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(
                    SummarizeLayer::new(ScriptedModel::new().fail("summarizer down"))
                        .context_window(2_000),
                )
                .service(ScriptedModel::new().text("answer")),
        )
        .hooks(hooks)
        .store(store)
        .build();
    agent
        .run(AgentRequest::new("hi").thread("t"))
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].contains("summarizer down"), "{seen:?}");
}
