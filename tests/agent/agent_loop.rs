//! The loop: how runs end (step limit, abort, drop, cancellation), the setup and prepare
//! stages, and thread continuation through the store.

use crate::support;

use std::{
    future::{Future, pending},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tower_agent::{
    Abort, Agent, AgentRequest, BoxError,
    agent::{Outcome, SetupContext},
    message::{Role, ToolCall},
    model::{ModelRequest, ModelResponse, ScriptedModel},
    store::MemoryStore,
    tool::{Tool, tool_fn},
};

use support::{
    DropGuard, answers, any_object, assert_history_valid, last_tool_message, tool_messages, within,
};

// ===== how a run ends =====

#[tokio::test(flavor = "current_thread")]
async fn max_steps_ends_a_run_whose_model_always_calls_a_tool() {
    let model = ScriptedModel::from_fn(|_| {
        Ok(ModelResponse::tool_calls([ToolCall::new(
            "",
            "noop",
            json!({}),
        )]))
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn(
            "noop",
            "does nothing",
            any_object(),
            move |_, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, BoxError>("ok") }
            },
        ))
        .max_steps(3)
        .build();

    let resp = agent.run("loop forever").await.unwrap();

    assert_eq!(resp.outcome, Outcome::MaxSteps);
    assert_eq!(resp.steps, 3);
    assert_eq!(model.calls(), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_history_valid(&resp.messages);
}

#[tokio::test(flavor = "current_thread")]
async fn abort_from_a_tool_ends_the_run() {
    let model = ScriptedModel::new()
        .tool_call("halt", json!({}))
        .text("never reached");
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn("halt", "aborts", any_object(), |_, _| async {
            Err::<String, BoxError>(Abort::new("stop now").into())
        }))
        .build();

    let resp = agent.run("go").await.unwrap();

    match &resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("stop now"), "{error}"),
        other => panic!("expected Aborted, got {other:?}"),
    }
    assert_eq!(model.calls(), 1, "the model is not called after an abort");
    assert_history_valid(&resp.messages);
    let results = tool_messages(&resp.messages);
    assert!(results[0].is_error);
    assert!(
        results[0].text().contains("stop now"),
        "{}",
        results[0].text()
    );
}

/// A tool `hang` that keeps a [`DropGuard`], tells `started` it runs, and never finishes.
fn hanging_tool(dropped: &Arc<AtomicBool>, started: &Arc<Notify>) -> impl Tool + use<> {
    let dropped = Arc::clone(dropped);
    let started = Arc::clone(started);
    tool_fn("hang", "never finishes", any_object(), move |_, _| {
        let guard = DropGuard(Arc::clone(&dropped));
        let started = Arc::clone(&started);
        async move {
            let _guard = guard;
            started.notify_one();
            pending::<()>().await;
            Ok::<_, BoxError>("unreachable")
        }
    })
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_run_future_drops_the_tool_future() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("hang", json!({})).text("x"))
        .tool(hanging_tool(&dropped, &started))
        .build();

    let mut run = Box::pin(agent.run("go"));
    tokio::select! {
        _ = &mut run => panic!("the run cannot finish while its tool hangs"),
        () = started.notified() => {}
    }
    assert!(!dropped.load(Ordering::SeqCst), "the tool is still running");

    drop(run);

    assert!(
        dropped.load(Ordering::SeqCst),
        "the tool future was dropped"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn aborting_the_task_of_a_run_drops_the_tool_future() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("hang", json!({})).text("x"))
        .tool(hanging_tool(&dropped, &started))
        .build();

    let task = tokio::spawn(async move { agent.run("go").await });
    within("the tool starts", started.notified()).await;
    task.abort();

    assert!(task.await.unwrap_err().is_cancelled());
    assert!(dropped.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_run_keeps_the_thread_saved_after_its_last_whole_step() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("quick", json!({}))
        .tool_call("hang", json!({}))
        .text("x");
    let agent = Agent::builder()
        .model(model)
        .tool(answers("quick", "quick result"))
        .tool(hanging_tool(&dropped, &started))
        .store(store.clone())
        .build();

    let mut run = Box::pin(agent.run(AgentRequest::new("go").thread("t")));
    tokio::select! {
        _ = &mut run => panic!("the run cannot finish while its tool hangs"),
        () = started.notified() => {}
    }
    drop(run);

    assert!(dropped.load(Ordering::SeqCst));
    let thread = store.get("t").expect("step 0 was saved");
    let roles: Vec<Role> = thread.messages.iter().map(|m| m.role).collect();
    // Step 0 whole; of step 1, the assistant message with its call, saved before the call ran
    // (`AgentRequest::recover` finishes it; a new run answers it as interrupted).
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(thread.messages[2].text(), "quick result");
    assert_eq!(thread.messages[3].tool_calls[0].name, "hang");
    let whole: tower_agent::message::Messages = thread.messages.iter().take(3).cloned().collect();
    assert_history_valid(&whole);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn cancelling_the_token_mid_tool_ends_the_run_cancelled_with_a_valid_history() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_calls([("hang", json!({})), ("quick", json!({}))])
        .text("never reached");
    let agent = Agent::builder()
        .model(model.clone())
        .tool(hanging_tool(&dropped, &started))
        .tool(answers("quick", "quick result"))
        .store(store.clone())
        .build();
    let token = CancellationToken::new();

    let request = AgentRequest::new("go")
        .thread("t")
        .cancellation(token.clone());
    let run = tokio::spawn(async move { agent.run(request).await });
    within("the tool starts", started.notified()).await;
    assert!(!dropped.load(Ordering::SeqCst));
    token.cancel();
    let resp = within("the cancelled run ends", run)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Cancelled);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the tool future was dropped"
    );
    assert_eq!(model.calls(), 1);
    assert_history_valid(&resp.messages);
    let results = tool_messages(&resp.messages);
    assert_eq!(results.len(), 2, "every call has a result");
    assert!(results[0].is_error);
    assert!(
        results[0].text().contains("cancelled"),
        "{}",
        results[0].text()
    );
    // The saved thread is valid too.
    let saved = store.get("t").expect("a cancelled run saves its thread");
    assert_eq!(saved.messages, resp.messages);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn cancelling_mid_step_keeps_the_results_of_calls_that_finished() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_calls([("hang", json!({})), ("quick", json!({}))])
                .text("never reached"),
        )
        .tool(hanging_tool(&dropped, &started))
        .tool(answers("quick", "quick result"))
        .build();
    let token = CancellationToken::new();

    let request = AgentRequest::new("go").cancellation(token.clone());
    let run = tokio::spawn(async move { agent.run(request).await });
    // `quick` answers in the same poll that starts `hang`.
    within("the tool starts", started.notified()).await;
    token.cancel();
    let resp = within("the cancelled run ends", run)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Cancelled);
    let results = tool_messages(&resp.messages);
    assert!(results[0].text().contains("cancelled"));
    assert_eq!(results[1].text(), "quick result", "{:?}", results[1]);
    assert!(!results[1].is_error);
}

#[tokio::test(flavor = "current_thread")]
async fn a_token_cancelled_before_the_run_ends_it_before_the_model_is_called() {
    let model = ScriptedModel::new().text("hi");
    let agent = Agent::builder().model(model.clone()).build();
    let token = CancellationToken::new();
    token.cancel();

    let resp = agent
        .run(AgentRequest::new("go").cancellation(token))
        .await
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Cancelled);
    assert_eq!(model.calls(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn cancelling_while_the_model_call_is_pending_ends_the_run_cancelled() {
    // The cancellation waiter is made only once the model call is pending: this is that path
    // (the token is cancelled when the model call's future is first polled).
    let token = CancellationToken::new();
    let cancel = token.clone();
    let model = tower::service_fn(move |_req: ModelRequest| {
        let cancel = cancel.clone();
        std::future::poll_fn(move |_| {
            cancel.cancel();
            std::task::Poll::<Result<ModelResponse, BoxError>>::Pending
        })
    });
    let agent = Agent::builder().model(model).build();

    let resp = within(
        "the cancelled run ends",
        agent.run(AgentRequest::new("go").cancellation(token)),
    )
    .await
    .unwrap();

    assert_eq!(resp.outcome, Outcome::Cancelled);
}

// ===== setup and prepare stages =====

#[tokio::test(flavor = "current_thread")]
async fn setup_registers_a_tool_the_model_then_calls() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let model = ScriptedModel::new()
        .tool_call("today", json!({}))
        .text("It is Monday.")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .setup(move |cx: SetupContext| {
            let counter = Arc::clone(&counter);
            async move {
                cx.add_tool(tool_fn(
                    "today",
                    "The weekday",
                    any_object(),
                    move |_, _| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        async { Ok::<_, BoxError>("Monday") }
                    },
                ));
            }
        })
        .build();

    let resp = agent.run("What day is it?").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let requests = model.requests();
    assert!(
        requests[0].tools.iter().any(|t| t.name == "today"),
        "the model is offered the setup tool"
    );
    let seen = last_tool_message(&requests[1]);
    assert_eq!(seen.text(), "Monday");
    assert!(!seen.is_error);
    // Registered for the run only.
    assert!(!agent.tools().contains("today"));
}

#[tokio::test(flavor = "current_thread")]
async fn prepare_edit_reaches_every_model_call_but_not_the_saved_thread() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("noop", json!({}))
        .tool_call("noop", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(answers("noop", "ok"))
        .system_prompt("base")
        .prepare(|req: &mut ModelRequest| req.append_system("PREP"))
        .store(store.clone())
        .build();

    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();

    assert!(resp.outcome.is_finished());
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for (i, req) in requests.iter().enumerate() {
        // Exactly once: the edit is applied to a copy each step, not accumulated.
        assert_eq!(
            req.system().expect("a system message").text(),
            "base\n\nPREP",
            "request {i}"
        );
    }
    let saved = store.get("t").unwrap();
    assert_eq!(saved.messages[0].text(), "base");
    assert!(saved.messages.iter().all(|m| !m.text().contains("PREP")));
    assert!(resp.messages.iter().all(|m| !m.text().contains("PREP")));
}

#[tokio::test(flavor = "current_thread")]
async fn prepare_pushed_message_is_seen_once_per_call_and_not_kept() {
    let model = ScriptedModel::new()
        .tool_call("noop", json!({}))
        .tool_call("noop", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(answers("noop", "ok"))
        .prepare(|req: &mut ModelRequest| {
            req.messages
                .push(tower_agent::message::Message::user("NOTE"))
        })
        .build();

    let resp = agent.run("go").await.unwrap();

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for (i, req) in requests.iter().enumerate() {
        let notes = req.messages.iter().filter(|m| m.text() == "NOTE").count();
        assert_eq!(notes, 1, "request {i}");
        assert_eq!(req.messages.last().unwrap().text(), "NOTE", "request {i}");
    }
    assert!(resp.messages.iter().all(|m| m.text() != "NOTE"));
}

// ===== threads =====

#[tokio::test(flavor = "current_thread")]
async fn a_second_run_on_a_thread_continues_the_first() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .text("Nice to meet you, Ada.")
        .text("You are Ada.")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("sys")
        .store(store.clone())
        .build();

    let first = agent
        .run(AgentRequest::new("I am Ada.").thread("t1"))
        .await
        .unwrap();
    let second = agent
        .run(AgentRequest::new("Who am I?").thread("t1"))
        .await
        .unwrap();

    assert_eq!(first.thread_id, "t1");
    assert_eq!(second.thread_id, "t1");
    assert_eq!(second.text, "You are Ada.");
    let requests = model.requests();
    let seen: Vec<(Role, String)> = requests[1]
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    assert_eq!(
        seen,
        [
            (Role::System, "sys".to_owned()),
            (Role::User, "I am Ada.".to_owned()),
            (Role::Assistant, "Nice to meet you, Ada.".to_owned()),
            (Role::User, "Who am I?".to_owned()),
        ]
    );
    assert_eq!(store.get("t1").unwrap().messages.len(), 5);
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_without_thread_id_is_not_saved() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().tool_call("noop", json!({})).text("hi");
    let agent = Agent::builder()
        .model(model)
        .tool(answers("noop", "ok"))
        .store(store.clone())
        .build();

    let resp = agent.run("hello").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert!(!resp.thread_id.is_empty());
    assert!(store.is_empty(), "{store:?}");
    assert!(store.get(&resp.thread_id).is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn different_threads_do_not_see_each_other() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("a").text("b").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .build();

    agent
        .run(AgentRequest::new("first").thread("t1"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("second").thread("t2"))
        .await
        .unwrap();

    let requests = model.requests();
    assert_eq!(requests[1].messages.len(), 1);
    assert_eq!(requests[1].messages[0].text(), "second");
    assert_eq!(store.len(), 2);
}

/// A model that, like some providers, sends tool calls without ids: it calls `noop` when the
/// last message is the user's, and answers otherwise.
fn model_without_call_ids() -> impl tower::Service<
    ModelRequest,
    Response = ModelResponse,
    Error = BoxError,
    Future = impl Future<Output = Result<ModelResponse, BoxError>> + Send,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|req: ModelRequest| async move {
        let last = req.messages.last().map(|m| m.role);
        Ok::<_, BoxError>(if last == Some(Role::User) {
            ModelResponse::tool_calls([ToolCall::new("", "noop", json!({}))])
        } else {
            ModelResponse::text("ok")
        })
    })
}

#[tokio::test(flavor = "current_thread")]
async fn calls_without_ids_get_ids_that_results_refer_to() {
    let agent = Agent::builder()
        .model(model_without_call_ids())
        .tool(answers("noop", "ok"))
        .build();

    let resp = agent.run("go").await.unwrap();

    let id = &resp.messages[1].tool_calls[0].id;
    assert!(!id.is_empty());
    assert_eq!(resp.messages[2].tool_call_id.as_ref(), Some(id));
    assert_history_valid(&resp.messages);
}

#[tokio::test(flavor = "current_thread")]
async fn generated_call_ids_are_unique_within_a_continued_thread() {
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(model_without_call_ids())
        .tool(answers("noop", "ok"))
        .store(store.clone())
        .build();

    agent
        .run(AgentRequest::new("one").thread("t"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("two").thread("t"))
        .await
        .unwrap();

    let thread = store.get("t").unwrap();
    let ids: Vec<&str> = thread
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(
        ids[0], ids[1],
        "duplicate tool call ids in one thread: {ids:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn setup_context_reaches_every_model_call_but_not_the_saved_thread() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("noop", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(answers("noop", "ok"))
        .system_prompt("base")
        .setup(|cx: SetupContext| async move { cx.add_context("The user is in Lisbon.") })
        .store(store.clone())
        .build();

    agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();

    for req in model.requests() {
        assert_eq!(
            req.system().unwrap().text(),
            "base\n\nThe user is in Lisbon."
        );
    }
    assert_eq!(store.get("t").unwrap().messages[0].text(), "base");
}

#[tokio::test(flavor = "current_thread")]
async fn usage_is_summed_over_the_model_calls_of_a_run() {
    use tower_agent::message::Usage;
    let usage = |input, output| Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    };
    let model = ScriptedModel::new()
        .respond(
            ModelResponse::tool_calls([ToolCall::new("c1", "noop", json!({}))])
                .with_usage(usage(10, 1)),
        )
        .respond(ModelResponse::text("done").with_usage(usage(20, 2)));
    let agent = Agent::builder()
        .model(model)
        .tool(answers("noop", "ok"))
        .build();

    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.usage, usage(30, 3));
    assert_eq!(resp.last_usage, usage(20, 2), "the last answer's alone");
    assert_eq!(resp.steps, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_signal_ends_runs_after_the_current_step() {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let signal = shutdown.clone();
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("stop_server", json!({}))
                .text("never reached"),
        )
        .tool(tool_fn(
            "stop_server",
            "stops",
            json!({"type": "object"}),
            move |_, _| {
                let signal = signal.clone();
                async move {
                    signal.cancel();
                    Ok::<_, BoxError>("stopping")
                }
            },
        ))
        .store(store.clone())
        .shutdown_signal(shutdown)
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Cancelled);
    // The step in flight finished: its tool result is there, and saved.
    assert_eq!(resp.messages.last().unwrap().text(), "stopping");
    assert_eq!(store.get("t").unwrap().messages, resp.messages);
    assert!(agent.shutdown_signal().is_cancelled());
}

#[tokio::test(flavor = "current_thread")]
async fn transcripts_are_jsonl_with_every_message_of_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let seen_path = Arc::new(std::sync::Mutex::new(None));
    let seen = Arc::clone(&seen_path);
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("echo", json!({"x": 1}))
                .text("one")
                .text("two"),
        )
        .tool(tool_fn(
            "echo",
            "echo",
            json!({"type": "object"}),
            move |args, ctx| {
                *seen.lock().unwrap() = ctx.transcript_path().map(|p| p.to_path_buf());
                async move { Ok::<_, BoxError>(args) }
            },
        ))
        .system_prompt("sys")
        .transcripts(dir.path())
        .build();
    agent
        .run(AgentRequest::new("first").thread("t/1"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("second").thread("t/1"))
        .await
        .unwrap();

    let path = dir.path().join("t%2F1.jsonl");
    assert_eq!(seen_path.lock().unwrap().as_deref(), Some(path.as_path()));
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    // run 1: system, user, assistant (call), tool result (a user line), assistant;
    // run 2: user, assistant
    assert_eq!(
        kinds,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(lines[2]["message"]["content"][0]["type"], "tool_use");
    assert_eq!(lines[2]["message"]["content"][0]["input"], json!({"x": 1}));
    let result = &lines[3]["message"]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["tool_use_id"],
        lines[2]["message"]["content"][0]["id"]
    );
    assert_eq!(lines[4]["message"]["content"][0]["text"], "one");
    assert_eq!(lines[6]["message"]["content"][0]["text"], "two");
    assert!(lines.iter().all(|l| l["sessionId"] == "t/1"));
    assert_ne!(lines[0]["runId"], lines[6]["runId"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_started_after_shutdown_leaves_the_thread_untouched() {
    let shutdown = tokio_util::sync::CancellationToken::new();
    shutdown.cancel();
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("never").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .shutdown_signal(shutdown)
        .build();
    let resp = agent
        .run(AgentRequest::new("hi").thread("t"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Cancelled);
    assert!(model.requests().is_empty());
    assert!(store.get("t").is_none(), "nothing saved");
}

/// A run's future is held by its task for the whole run, so its size is memory per run in
/// flight (issue 16: 100,000 runs at once). It holds the run's state once: the span wrapper
/// used to be an `async` block awaiting the future it captured, which holds it twice (about
/// 5.5 KB in a debug build, 5.7 KB in release, instead of about half that).
#[test]
fn a_run_future_holds_the_run_state_once() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("hi"))
        .build();
    let size = std::mem::size_of_val(&agent.run(AgentRequest::new("hi")));
    assert!(size <= 4096, "a run's future is {size} bytes");
}

/// A typed error of the caller's, carried by an [`Abort`] or returned by a model.
#[derive(Debug, PartialEq)]
struct OverBudget {
    tokens: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "over budget by {} tokens", self.tokens)
    }
}

impl std::error::Error for OverBudget {}

#[tokio::test]
async fn the_tool_stack_ends_the_run_with_its_own_reason_and_typed_error() {
    let model = ScriptedModel::new()
        .tool_call("spend", json!({}))
        .text("never reached");
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn("spend", "Spends", any_object(), |_, _| async {
            Err::<String, BoxError>(
                Abort::with_source("the run's budget is spent", OverBudget { tokens: 12 }).into(),
            )
        }))
        .build();
    let resp = agent.run("spend").await.expect("the run ends, not fails");
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "the run's budget is spent".into()
        }
    );
    let error = resp.error.as_deref().expect("the typed error");
    assert_eq!(
        Abort::find_source::<OverBudget>(error),
        Some(&OverBudget { tokens: 12 })
    );
    assert_eq!(
        Abort::find(error).map(Abort::reason),
        Some("the run's budget is spent")
    );
}

#[tokio::test]
async fn a_model_error_is_the_responses_typed_error() {
    let model = tower::service_fn(|_req: ModelRequest| async {
        Err::<ModelResponse, BoxError>(Box::new(OverBudget { tokens: 3 }))
    });
    let resp = Agent::builder()
        .model(model)
        .build()
        .run("hi")
        .await
        .unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "model call failed: over budget by 3 tokens".into()
        }
    );
    let error = resp.error.as_deref().expect("the model's error");
    assert_eq!(
        Abort::find_source::<OverBudget>(error),
        Some(&OverBudget { tokens: 3 })
    );
    // A run that finishes has none.
    let resp = Agent::builder()
        .model(ScriptedModel::new().text("done"))
        .build()
        .run("hi")
        .await
        .unwrap();
    assert!(resp.outcome.is_finished() && resp.error.is_none());
}
