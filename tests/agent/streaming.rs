//! Streaming through the onion: the model's answer is a stream that model layers wrap
//! (`ModelResponse::map_deltas`, `try_map_deltas`, `map_done`), the loop sends the pieces
//! that come out of the stack to the run's events, and the whole answer enters the thread.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use futures_util::StreamExt;
use serde_json::json;
use tower::{ServiceBuilder, util::MapResponseLayer};
use tower_agent::{
    Agent, BoxError,
    agent::{AgentEvent, Outcome},
    event::ModelDelta,
    layers::hooks::Hooks,
    message::Message,
    model::{ModelBody, ModelChunk, ModelResponse, ScriptedModel},
    tool::tool_fn,
};

/// The run's events and response.
async fn run(agent: &Agent, prompt: &str) -> (Vec<AgentEvent>, tower_agent::AgentResponse) {
    let mut stream = agent.stream(prompt);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    (events, stream.take_response().unwrap().unwrap())
}

fn deltas(events: &[AgentEvent]) -> Vec<ModelDelta> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

fn text(delta: &str) -> ModelDelta {
    serde_json::from_value(json!({ "kind": "text", "text": delta })).unwrap()
}

/// A layer that upper-cases the text as it streams, and the whole answer: the events show
/// upper-cased pieces, the answer and the thread the upper-cased text.
#[tokio::test]
async fn a_layer_changes_the_pieces_and_the_whole_answer() {
    let upper = MapResponseLayer::new(|resp: ModelResponse| {
        resp.map_deltas(|delta| match delta {
            ModelDelta::Text { text } => Some(ModelDelta::Text {
                text: text.to_uppercase(),
            }),
            other => Some(other),
        })
        .map_done(|mut done| {
            done.message = Message::assistant(done.message.text().to_uppercase());
            done
        })
    });
    let model = ServiceBuilder::new()
        .layer(upper)
        .service(ScriptedModel::new().text("hello world").streaming(4));
    let agent = Agent::builder().model(model).build();
    let (events, resp) = run(&agent, "go").await;

    assert_eq!(deltas(&events), [text("HELL"), text("O WO"), text("RLD")]);
    assert_eq!(resp.text, "HELLO WORLD");
    assert_eq!(resp.messages.last().unwrap().text(), "HELLO WORLD");
    let at = |kind: &str| {
        events
            .iter()
            .position(|e| format!("{e:?}").starts_with(kind))
    };
    assert!(
        at("ModelDelta") < at("ModelResponse"),
        "pieces come before the answer"
    );
}

/// Each tool call's pieces end with its `ToolCallEnd`.
#[tokio::test]
async fn each_tool_call_ends_with_its_marker() {
    let echo = tool_fn(
        "echo",
        "Echo",
        json!({"type": "object"}),
        |args, _| async move { Ok::<_, BoxError>(args.to_string()) },
    );
    let model = ScriptedModel::new()
        .tool_calls([("echo", json!({"a": 1})), ("echo", json!({"b": 22}))])
        .text("ok")
        .streaming(4);
    let agent = Agent::builder().model(model).tool(echo).build();
    let (events, resp) = run(&agent, "go").await;

    assert!(resp.outcome.is_finished());
    let deltas = deltas(&events);
    let end = |i| {
        deltas
            .iter()
            .position(|d| *d == ModelDelta::ToolCallEnd { index: i })
    };
    let last_piece = |i| {
        deltas
            .iter()
            .rposition(|d| matches!(d, ModelDelta::ToolCall { index, .. } if *index == i))
    };
    for i in 0..2 {
        assert!(end(i).is_some() && last_piece(i) < end(i), "{deltas:?}");
    }
    assert!(
        end(0) < last_piece(1),
        "the first call ends before the second streams"
    );
}

/// A layer that ends the stream when the model starts calling a forbidden tool: the run ends
/// on its error, and the call never runs.
#[tokio::test]
async fn a_layer_ends_the_stream_and_no_call_runs() {
    let ran = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&ran);
    let rm = tool_fn("rm", "Remove", json!({"type": "object"}), move |_, _| {
        count.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, BoxError>("removed".to_owned()) }
    });
    let guard = MapResponseLayer::new(|resp: ModelResponse| {
        resp.try_map_deltas(|delta| match &delta {
            ModelDelta::ToolCall {
                name: Some(name), ..
            } if name == "rm" => Err("the model tried to call rm".into()),
            _ => Ok(Some(delta)),
        })
    });
    let model = ServiceBuilder::new().layer(guard).service(
        ScriptedModel::new()
            .respond(ModelResponse::new(
                Message::assistant("Cleaning up.").with_tool_calls(vec![
                    tower_agent::message::ToolCall::new("c1", "rm", json!({"path": "/"})),
                ]),
            ))
            .text("never")
            .streaming(5),
    );
    let agent = Agent::builder().model(model).tool(rm).build();
    let (events, resp) = run(&agent, "go").await;

    match &resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("tried to call rm"), "{error}"),
        other => panic!("aborted, not {other:?}"),
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(deltas(&events), [text("Clean"), text("ing u"), text("p.")]);
}

/// AfterModel hooks get the whole streamed answer; their answer enters the thread (the pieces
/// already sent stay as they were).
#[tokio::test]
async fn after_model_hooks_see_the_whole_streamed_answer() {
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .after_model(move |mut resp: ModelResponse, _ctx| {
            *log.lock().unwrap() = resp.message.text().into_owned();
            resp.message = Message::assistant("[checked] ".to_owned() + &resp.message.text());
            resp
        })
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("all good").streaming(3))
        .hooks(hooks)
        .build();
    let (events, resp) = run(&agent, "go").await;

    assert_eq!(*seen.lock().unwrap(), "all good");
    assert_eq!(resp.text, "[checked] all good");
    assert_eq!(deltas(&events).len(), 3);
}

/// A stream that fails after its first pieces ends the run `Aborted` with the error; one that
/// ends without its whole answer too.
#[tokio::test]
async fn a_stream_that_fails_midway_aborts_the_run() {
    for (last, expect) in [
        (Some("connection reset"), "connection reset"),
        (None, "ended before it was complete"),
    ] {
        let model = ScriptedModel::from_fn(move |_| {
            let mut items: Vec<Result<ModelChunk, BoxError>> =
                vec![Ok(ModelChunk::Delta(text("par")))];
            if let Some(err) = last {
                items.push(Err(err.into()));
            }
            Ok(ModelResponse::streaming(ModelBody::new(
                futures_util::stream::iter(items),
            )))
        });
        let agent = Agent::builder().model(model).build();
        let (events, resp) = run(&agent, "go").await;
        match &resp.outcome {
            Outcome::Aborted { error } => assert!(error.contains(expect), "{error}"),
            other => panic!("aborted, not {other:?}"),
        }
        assert_eq!(deltas(&events), [text("par")]);
    }
}

/// An answer that does not stream has no pieces: the events are as they always were.
#[tokio::test]
async fn an_answer_that_does_not_stream_has_no_pieces() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("whole"))
        .build();
    let (events, resp) = run(&agent, "go").await;
    assert_eq!(resp.text, "whole");
    assert!(deltas(&events).is_empty());
}

/// A body of `n` text pieces, one every `gap`, then the whole answer.
fn paced(n: usize, gap: std::time::Duration) -> ModelResponse {
    let items = futures_util::stream::unfold(0, move |i| async move {
        if i > n {
            return None;
        }
        tokio::time::sleep(gap).await;
        let item = if i < n {
            Ok(ModelChunk::Delta(text("x")))
        } else {
            Ok(ModelChunk::Done(Box::new(ModelResponse::text(
                "x".repeat(n),
            ))))
        };
        Some((item, i + 1))
    });
    ModelResponse::streaming(ModelBody::new(items))
}

/// `StreamTimeoutLayer`: the first piece and the whole answer have their own deadlines; the
/// first bounds the call, the second the stream (a run past it ends `Aborted`, with the
/// pieces that came).
#[tokio::test(start_paused = true)]
async fn first_piece_and_whole_answer_have_their_own_deadlines() {
    use std::time::Duration;
    use tower_agent::layers::stream_timeout::{StreamTimedOut, StreamTimeoutLayer};
    let secs = Duration::from_secs;
    let limits = StreamTimeoutLayer::new()
        .first_delta(secs(10))
        .whole(secs(60));

    // Slow to start: the call fails at 10 s.
    let late = ServiceBuilder::new()
        .layer(limits)
        .service(ScriptedModel::new().text("hi").latency(secs(20)));
    let started = tokio::time::Instant::now();
    let err = tower::ServiceExt::oneshot(late, tower_agent::model::ModelRequest::new(vec![]))
        .await
        .unwrap_err();
    assert_eq!(
        err.downcast_ref(),
        Some(&StreamTimedOut::FirstDelta(secs(10)))
    );
    assert_eq!(started.elapsed(), secs(10));

    // Quick to start, a piece every 7 s for 100 pieces: the stream fails at 60 s.
    let slow = ServiceBuilder::new()
        .layer(limits)
        .service(ScriptedModel::from_fn(move |_| Ok(paced(100, secs(7)))));
    let agent = Agent::builder().model(slow).build();
    let started = tokio::time::Instant::now();
    let (events, resp) = run(&agent, "go").await;
    match &resp.outcome {
        Outcome::Aborted { error } => {
            assert!(error.contains("not complete within 60s"), "{error}");
        }
        other => panic!("aborted, not {other:?}"),
    }
    assert_eq!(deltas(&events).len(), 8, "pieces at 7, 14, … 56 s");
    assert_eq!(started.elapsed(), secs(60));

    // Within both: the whole answer.
    let fine = ServiceBuilder::new()
        .layer(limits)
        .service(ScriptedModel::from_fn(move |_| Ok(paced(5, secs(7)))));
    let agent = Agent::builder().model(fine).build();
    let (_, resp) = run(&agent, "go").await;
    assert_eq!(resp.text, "xxxxx");
}

/// `then_done` with a future: on a streaming answer the stream waits for it; an answer that
/// does not stream becomes a stream of that one item. Either way the run gets its answer.
#[tokio::test]
async fn then_done_awaits_on_streamed_and_whole_answers() {
    for model in [
        ScriptedModel::new().text("plain"),
        ScriptedModel::new().text("plain").streaming(2),
    ] {
        let checked = MapResponseLayer::new(|resp: ModelResponse| {
            resp.then_done(|mut done| async move {
                tokio::task::yield_now().await;
                done.message = Message::assistant(format!("{} (checked)", done.message.text()));
                Ok(done)
            })
        });
        let agent = Agent::builder()
            .model(ServiceBuilder::new().layer(checked).service(model))
            .build();
        let (events, resp) = run(&agent, "go").await;
        assert_eq!(resp.text, "plain (checked)");
        let pieces: String = deltas(&events)
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert!(pieces.is_empty() || pieces == "plain", "{pieces}");
    }
}
