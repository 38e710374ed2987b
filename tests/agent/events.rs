//! The event stream of a run, and reminders queued by tools.

use crate::support;

use std::{
    future::pending,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt;
use serde_json::json;
use tokio::sync::Notify;
use tower_agent::{
    Agent, BoxError,
    agent::{AgentEvent, Outcome, SetupContext},
    message::Role,
    model::ScriptedModel,
    tool::tool_fn,
};

use support::{DropGuard, any_object, sleepy};

fn kind(event: &AgentEvent) -> &'static str {
    match event {
        AgentEvent::AgentStart { .. } => "AgentStart",
        AgentEvent::StepStart { .. } => "StepStart",
        AgentEvent::ModelResponse { .. } => "ModelResponse",
        AgentEvent::ToolCallStart { .. } => "ToolCallStart",
        AgentEvent::ToolCallEnd { .. } => "ToolCallEnd",
        AgentEvent::Reminders { .. } => "Reminders",
        AgentEvent::Warning { .. } => "Warning",
        AgentEvent::AgentStop { .. } => "AgentStop",
        _ => "other",
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn stream_reports_the_run_from_start_to_stop() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_calls([("slow", json!({})), ("fast", json!({}))])
                .text("done"),
        )
        .tool(sleepy("slow", 200))
        .tool(sleepy("fast", 50))
        .build();

    let mut stream = agent.stream("go");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let resp = stream.take_response().expect("the run's result").unwrap();

    let kinds: Vec<&str> = events.iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "AgentStart",
            "StepStart",
            "ModelResponse",
            "ToolCallStart",
            "ToolCallStart",
            "ToolCallEnd",
            "ToolCallEnd",
            "StepStart",
            "ModelResponse",
            "AgentStop",
        ]
    );
    match &events[0] {
        AgentEvent::AgentStart { thread_id, run_id } => {
            assert_eq!(thread_id, &resp.thread_id);
            assert_eq!(run_id, &resp.run_id);
        }
        other => panic!("{other:?}"),
    }
    match events.last().unwrap() {
        AgentEvent::AgentStop {
            outcome,
            text,
            steps,
            ..
        } => {
            assert_eq!(outcome, &Outcome::Finished);
            assert_eq!(text, "done");
            assert_eq!(*steps, 2);
        }
        other => panic!("{other:?}"),
    }
    // Starts in call order; ends as they happen: `fast` first.
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallStart { step: 0, call } => Some(call.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["slow", "fast"]);
    let ended: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallEnd {
                step: 0,
                name,
                output,
                ..
            } => Some((name.as_str(), output.content.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(ended, [("fast", "fast done"), ("slow", "slow done")]);
    // The history keeps call order regardless.
    assert_eq!(resp.messages[2].text(), "slow done");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn tool_call_events_carry_the_step_and_the_call_ids() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("fast", json!({}))
                .tool_call("fast", json!({}))
                .text("done"),
        )
        .tool(sleepy("fast", 50))
        .build();

    let events: Vec<AgentEvent> = agent.stream("go").collect().await;

    let steps: Vec<(&str, u32)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::StepStart { step } => Some(("step", *step)),
            AgentEvent::ModelResponse { step, .. } => Some(("model", *step)),
            AgentEvent::ToolCallStart { step, .. } => Some(("start", *step)),
            AgentEvent::ToolCallEnd { step, .. } => Some(("end", *step)),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("step", 0),
            ("model", 0),
            ("start", 0),
            ("end", 0),
            ("step", 1),
            ("model", 1),
            ("start", 1),
            ("end", 1),
            ("step", 2),
            ("model", 2),
        ]
    );
    // Each start names the call the model made in that step.
    for event in &events {
        if let AgentEvent::ToolCallStart { call, .. } = event {
            let made = events.iter().any(|e| {
                matches!(e, AgentEvent::ModelResponse { message, .. }
                    if message.tool_calls.iter().any(|c| c.id == call.id))
            });
            assert!(made, "call {} was not made by the model", call.id);
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn stream_ends_with_agent_stop_when_setup_fails() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("never"))
        .setup(|_cx: SetupContext| async { Err::<(), _>("no config") })
        .build();

    let mut stream = agent.stream("go");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }

    let kinds: Vec<&str> = events.iter().map(kind).collect();
    assert_eq!(kinds, ["AgentStart", "AgentStop"]);
    match events.last().unwrap() {
        AgentEvent::AgentStop { outcome, .. } => {
            assert!(
                matches!(outcome, Outcome::Aborted { error } if error.contains("no config")),
                "{outcome:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let err = stream.take_response().unwrap().unwrap_err();
    assert!(err.is_setup());
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_stream_drops_the_tool_future() {
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let (flag, signal) = (Arc::clone(&dropped), Arc::clone(&started));
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("hang", json!({})).text("x"))
        .tool(tool_fn("hang", "hangs", any_object(), move |_, _| {
            let guard = DropGuard(Arc::clone(&flag));
            let signal = Arc::clone(&signal);
            async move {
                let _guard = guard;
                signal.notify_one();
                pending::<()>().await;
                Ok::<_, BoxError>("unreachable")
            }
        }))
        .build();

    let mut stream = agent.stream("go");
    loop {
        if let Some(AgentEvent::ToolCallStart { .. }) = stream.next().await {
            break;
        }
    }
    // Poll once more so the tool future runs up to its `pending`.
    tokio::select! {
        _ = stream.next() => panic!("the run cannot go on"),
        () = started.notified() => {}
    }
    assert!(!dropped.load(Ordering::SeqCst));

    drop(stream);

    assert!(dropped.load(Ordering::SeqCst));
}

// ===== reminders =====

/// A tool that sleeps `ms`, then queues the reminder `text`.
fn reminding(name: &'static str, ms: u64, text: &'static str) -> impl tower_agent::tool::Tool {
    tool_fn(name, "reminds", any_object(), move |_, ctx| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ctx.remind(text);
        Ok::<_, BoxError>(format!("{name} done"))
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn reminders_of_a_step_are_one_system_message_after_all_tool_results() {
    let model = ScriptedModel::new()
        .tool_calls([("rx", json!({})), ("ry", json!({}))])
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        // `rx` finishes first, so its reminder is queued first.
        .tool(reminding("rx", 10, "x"))
        .tool(reminding("ry", 20, "y"))
        .build();

    let mut stream = agent.stream("go");
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let resp = stream.take_response().unwrap().unwrap();

    let expected = "x\n\ny";
    let shape: Vec<(Role, String)> = resp
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    assert_eq!(
        shape,
        [
            (Role::User, "go".to_owned()),
            (Role::Assistant, String::new()),
            (Role::Tool, "rx done".to_owned()),
            (Role::Tool, "ry done".to_owned()),
            (Role::System, expected.to_owned()),
            (Role::Assistant, "done".to_owned()),
        ]
    );
    // The model's next request ends with the reminder message.
    let next = &model.requests()[1];
    assert_eq!(next.messages.last().unwrap().text(), expected);
    let reminders: Vec<&Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Reminders { step: 0, reminders } => Some(reminders),
            _ => None,
        })
        .collect();
    assert_eq!(reminders, [&vec!["x".to_owned(), "y".to_owned()]]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn reminders_are_delivered_once_in_the_step_that_queued_them() {
    let model = ScriptedModel::new()
        .tool_call("rx", json!({}))
        .tool_call("plain", json!({}))
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool(reminding("rx", 10, "x"))
        .tool(sleepy("plain", 10))
        .build();

    let resp = agent.run("go").await.unwrap();

    let hooks: Vec<usize> = resp
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::System)
        .map(|(i, _)| i)
        .collect();
    // go, assistant, rx result, reminder, assistant, plain result, assistant
    assert_eq!(hooks, [3]);
    assert_eq!(resp.messages[3].text(), "x");
    assert_eq!(resp.messages.len(), 7);
}
