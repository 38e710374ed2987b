//! Eager tool dispatch (`AgentBuilder::eager_tools`): each call of a streamed answer starts as
//! soon as its arguments are complete, through the whole tool stack; results in call order;
//! calls started are cancelled when the stream fails, and the thread stays consistent.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, Outcome},
    event::ModelDelta,
    layers::hooks::{Hooks, PreToolUse},
    message::{Message, Role, StopReason, ToolCall},
    model::{ModelBody, ModelChunk, ModelResponse, ScriptedModel},
    store::MemoryStore,
    tool::tool_fn,
};

/// A scripted stream: each item after its delay (from the previous one).
fn timed(items: Vec<(u64, Result<ModelChunk, BoxError>)>) -> ModelResponse {
    let stream = futures_util::stream::iter(items).then(|(ms, item)| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        item
    });
    ModelResponse::streaming(ModelBody::new(stream))
}

fn piece(index: usize, id: Option<&str>, arguments: &str) -> Result<ModelChunk, BoxError> {
    Ok(ModelChunk::Delta(ModelDelta::ToolCall {
        index,
        id: id.map(str::to_owned),
        name: id.map(|_| "work".to_owned()),
        arguments: arguments.to_owned(),
    }))
}

fn end(index: usize) -> Result<ModelChunk, BoxError> {
    Ok(ModelChunk::Delta(ModelDelta::ToolCallEnd { index }))
}

fn call(id: &str, ms: u64) -> ToolCall {
    ToolCall::new(id, "work", json!({ "ms": ms }))
}

fn done(calls: Vec<ToolCall>, stop: StopReason) -> Result<ModelChunk, BoxError> {
    let mut resp = ModelResponse::new(Message::assistant("").with_tool_calls(calls));
    resp.stop_reason = stop;
    Ok(ModelChunk::Done(Box::new(resp)))
}

/// Three calls whose arguments end at 1.0, 2.0 and 3.0 s (the answer at 3.0 s); the first
/// tool takes 2.5 s, the others 0.1 s.
fn three_calls() -> ModelResponse {
    let mut items = Vec::new();
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        let ms = if i == 0 { 2500 } else { 100 };
        items.push((500, piece(i, Some(id), "{\"ms\":")));
        items.push((0, piece(i, None, &format!("{ms}}}"))));
        items.push((500, end(i)));
    }
    items.push((
        0,
        done(
            vec![call("a", 2500), call("b", 100), call("c", 100)],
            StopReason::ToolUse,
        ),
    ));
    timed(items)
}

/// What the `work` tool records: its `ms`, when it started and ended (ms since the test's start).
type WorkLog = Arc<Mutex<Vec<(String, u128, u128)>>>;

/// The `work` tool: sleeps `ms` (tokio time), records when it started and ended.
fn work(log: &WorkLog, t0: Instant) -> impl tower_agent::tool::Tool {
    let log = Arc::clone(log);
    tool_fn(
        "work",
        "Works",
        json!({"type": "object"}),
        move |args: Value, ctx| {
            let log = Arc::clone(&log);
            async move {
                let start = t0.elapsed().as_millis();
                tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
                let _ = ctx;
                log.lock()
                    .unwrap()
                    .push((args["ms"].to_string(), start, t0.elapsed().as_millis()));
                Ok::<_, BoxError>(format!("worked {}", args["ms"]))
            }
        },
    )
}

/// The case: with eager dispatch the step's calls end at 3.5 s (the first started at
/// 1.0 s), without at 5.5 s (all started at 3.0 s); the results are in call order either way.
#[tokio::test(start_paused = true)]
async fn eager_dispatch_ends_the_step_two_seconds_sooner() {
    let mut ends = Vec::new();
    for eager in [false, true] {
        let t0 = Instant::now();
        let log: WorkLog = Arc::default();
        let model = ScriptedModel::new()
            .decide(|_| Ok(three_calls()))
            .text("done")
            .recording();
        let mut builder = Agent::builder().model(model.clone()).tool(work(&log, t0));
        if eager {
            builder = builder.eager_tools();
        }
        let resp = builder.build().run("go").await.unwrap();
        assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
        let log = log.lock().unwrap().clone();
        let starts: Vec<u128> = log.iter().map(|l| l.1).collect::<Vec<_>>();
        let last_end = log.iter().map(|l| l.2).max().unwrap();
        if eager {
            let mut starts = starts.clone();
            starts.sort_unstable();
            assert_eq!(starts, [1000, 2000, 3000]);
        } else {
            assert_eq!(starts, [3000, 3000, 3000]);
        }
        ends.push(last_end);
        // Results in call order, as the model sees them.
        let outputs: Vec<String> = model.requests()[1]
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.text().into_owned())
            .collect();
        assert_eq!(outputs, ["worked 2500", "worked 100", "worked 100"]);
    }
    assert_eq!(ends, [5500, 3500]);
    println!(
        "step's calls end without eager dispatch: {} ms; with: {} ms",
        ends[0], ends[1]
    );
}

/// A stream cut in the middle of the second call's arguments: the first call (a real child
/// process) was started and is cancelled — the process is gone —, the run ends `Aborted`, and
/// the thread has the answer as far as it came with an output for the started call.
#[tokio::test]
async fn a_stream_cut_mid_arguments_cancels_the_started_call() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let pid_path = pid_file.clone();
    let spawn = tool_fn(
        "work",
        "Runs a long process",
        json!({"type": "object"}),
        move |_, _| {
            let pid_path = pid_path.clone();
            async move {
                let mut child = tokio::process::Command::new("sleep")
                    .arg("60")
                    .kill_on_drop(true)
                    .spawn()?;
                std::fs::write(&pid_path, child.id().unwrap().to_string())?;
                child.wait().await?;
                Ok::<_, BoxError>("slept".to_owned())
            }
        },
    );
    let items = vec![
        (
            0,
            Ok(ModelChunk::Delta(ModelDelta::Text {
                text: "Working.".into(),
            })),
        ),
        (0, piece(0, Some("a"), "{}")),
        (0, end(0)),
        (300, piece(1, Some("b"), "{\"path\": \"/tm")),
        (0, Err("connection reset by peer".into())),
    ];
    let script = Arc::new(Mutex::new(Some(timed(items))));
    let model = ScriptedModel::from_fn(move |_| Ok(script.lock().unwrap().take().unwrap()));
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(model)
        .tool(spawn)
        .store(store.clone())
        .eager_tools()
        .build();
    let mut stream = agent.stream(AgentRequest::new("go").thread("t"));
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    let resp = stream.take_response().unwrap().unwrap();

    match &resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("connection reset"), "{error}"),
        other => panic!("aborted, not {other:?}"),
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolCallStart { call, .. } if call.id == "a"))
    );
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    // Killed on drop: gone (a zombie at most) soon. Polled on the real clock: tokio's is
    // paused here, and would race through its sleeps in no time.
    crate::support::eventually_blocking(&format!("the end of the call's process {pid}"), || {
        (!crate::support::alive(pid)).then_some(())
    });

    let thread = store.get("t").unwrap();
    let roles: Vec<Role> = thread.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    let partial = &thread.messages[1];
    assert_eq!(partial.text(), "Working.");
    assert_eq!(
        partial
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    let output = thread.messages[2].text();
    assert!(
        output.contains("cancelled") && output.contains("may or may not"),
        "{output}"
    );
}

/// An answer cut by `max_tokens` in the middle of the second call's arguments: the first call
/// ran once (started early), the second is an error output, as without eager dispatch.
#[tokio::test]
async fn max_tokens_mid_arguments_leaves_the_cut_call_an_error_output() {
    let ran: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = Arc::clone(&ran);
    let tool = tool_fn(
        "work",
        "Works",
        json!({"type": "object"}),
        move |args: Value, _| {
            log.lock().unwrap().push(args);
            async { Ok::<_, BoxError>("worked".to_owned()) }
        },
    );
    let cut = ToolCall::new("b", "work", Value::String("{\"ms\": 1".into()));
    let items = vec![
        (0, piece(0, Some("a"), "{\"ms\": 5}")),
        (0, end(0)),
        (0, piece(1, Some("b"), "{\"ms\": 1")),
        (0, done(vec![call("a", 5), cut], StopReason::MaxTokens)),
    ];
    let script = Arc::new(Mutex::new(Some(timed(items))));
    let model = ScriptedModel::new()
        .decide(move |_| Ok(script.lock().unwrap().take().unwrap()))
        .text("ok")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool)
        .eager_tools()
        .build();
    let resp = agent.run("go").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(
        *ran.lock().unwrap(),
        [json!({"ms": 5})],
        "the first call ran once"
    );
    let outputs: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(outputs[0], "worked");
    assert_ne!(
        outputs[1], "worked",
        "the cut call did not run: {outputs:?}"
    );
}

/// Eager calls go through the whole tool stack: a PreToolUse hook denies one as it starts.
#[tokio::test]
async fn eager_calls_go_through_the_hooks() {
    let hooks = Hooks::new()
        .before_tool_use("work", |call: Arc<ToolCall>, _ctx| {
            if call.arguments["ms"] == 2 {
                PreToolUse::Deny("not this one".into())
            } else {
                PreToolUse::Continue
            }
        })
        .compile()
        .unwrap();
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&ran);
    let tool = tool_fn("work", "Works", json!({"type": "object"}), move |_, _| {
        log.lock().unwrap().push("ran".into());
        async { Ok::<_, BoxError>("worked".to_owned()) }
    });
    let model = ScriptedModel::new()
        .tool_calls([("work", json!({"ms": 1})), ("work", json!({"ms": 2}))])
        .text("ok")
        .streaming(3)
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool)
        .hooks(hooks)
        .eager_tools()
        .build();
    let resp = agent.run("go").await.unwrap();
    assert!(resp.outcome.is_finished());
    assert_eq!(ran.lock().unwrap().len(), 1);
    let outputs: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(outputs[0], "worked");
    assert!(outputs[1].contains("not this one"), "{outputs:?}");
}

/// A store whose saves fail after the first (the prompt's): the save before an eager call
/// starts fails, so the run fails with the store's error, as any save that fails — and the
/// call never starts.
#[tokio::test]
async fn a_save_that_fails_before_an_eager_call_fails_the_run_with_the_stores_error() {
    use futures_util::future::BoxFuture;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower_agent::store::{Thread, ThreadStore};

    struct FailsAfterFirst(AtomicUsize);
    impl ThreadStore for FailsAfterFirst {
        fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
            Box::pin(async { Ok(None) })
        }
        fn save<'a>(&'a self, _: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n == 0 {
                    Ok(())
                } else {
                    Err("disk full".into())
                }
            })
        }
        fn delete<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
            Box::pin(async { Ok(()) })
        }
    }

    let ran: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = Arc::clone(&ran);
    let tool = tool_fn(
        "work",
        "Works",
        json!({"type": "object"}),
        move |args: Value, _| {
            log.lock().unwrap().push(args);
            async { Ok::<_, BoxError>("worked".to_owned()) }
        },
    );
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("work", json!({"ms": 1}))
                .text("ok")
                .streaming(4),
        )
        .tool(tool)
        .store(FailsAfterFirst(AtomicUsize::new(0)))
        .eager_tools()
        .build();
    let err = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap_err();
    assert!(err.is_store(), "{err:?}");
    assert!(ran.lock().unwrap().is_empty(), "the call never started");
}
