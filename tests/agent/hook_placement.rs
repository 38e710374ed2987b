//! Where the builder places hook sets (issue 37, item 4): every set registered with
//! `AgentBuilder::hooks` adds up (none replaces another), the first registered outermost at
//! every level; a set whose tool layer is placed by hand keeps its loop events through
//! `AgentBuilder::loop_hooks`; `Agent::describe` prints the stacks in that order.

use crate::support;

use std::time::Duration;

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    layers::hooks::{BeforeModel, HookSet, Hooks, PreToolUse, Stop, Task, UserPrompt},
    model::ScriptedModel,
    tool::tool_fn,
};

use support::{Log, RecordLayer, any_object};

/// A set whose hooks log `"{name} {event}"` at every level: start (UserPromptSubmit), model
/// (BeforeModel), tool (PreToolUse), step (Stop) and loop (SessionEnd, TaskCreated).
fn logging_set(name: &'static str, log: &Log) -> HookSet {
    let (l1, l2, l3, l4, l5, l6) = (
        log.clone(),
        log.clone(),
        log.clone(),
        log.clone(),
        log.clone(),
        log.clone(),
    );
    Hooks::new()
        .on_user_prompt(move |_, _| {
            l1.push(format!("{name} prompt"));
            UserPrompt::Continue
        })
        .before_model(move |req| {
            l2.push(format!("{name} model"));
            BeforeModel::Continue(req)
        })
        .before_tool_use("*", move |_, _| {
            l3.push(format!("{name} tool"));
            PreToolUse::Continue
        })
        .on_stop(move |_, _| {
            l4.push(format!("{name} stop"));
            Stop::Finish
        })
        .on_session_end(move |_, _| l5.push(format!("{name} end")))
        .on_task_created(move |_, _| {
            l6.push(format!("{name} task"));
            Task::Continue
        })
        .compile()
        .unwrap()
}

/// One step calling `probe` (which logs `"probe"`), then an answer.
fn probe_agent() -> (ScriptedModel, impl tower_agent::tool::Tool) {
    let model = ScriptedModel::new()
        .tool_call("probe", json!({}))
        .text("done");
    let tool = tool_fn("probe", "answers", any_object(), |_, _| async {
        Ok::<_, BoxError>("ok")
    });
    (model, tool)
}

fn entries(log: &Log, suffix: &str) -> Vec<String> {
    log.entries()
        .into_iter()
        .filter(|e| e.ends_with(suffix))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn two_hook_sets_add_up_the_first_outermost_at_every_level() {
    let log = Log::new();
    let (model, tool) = probe_agent();
    let agent = Agent::builder()
        .model(model)
        .tool(tool)
        .hooks(logging_set("A", &log))
        .hooks(logging_set("B", &log))
        .build();
    let resp = agent.run("hi").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    for event in ["prompt", "tool", "stop", "end"] {
        assert_eq!(
            entries(&log, event),
            [format!("A {event}"), format!("B {event}")]
        );
    }
    // Two model calls, each through A then B.
    assert_eq!(
        entries(&log, "model"),
        ["A model", "B model", "A model", "B model"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_tool_layer_placed_by_hand_keeps_the_sets_loop_events_through_loop_hooks() {
    for with_loop_hooks in [false, true] {
        let log = Log::new();
        let set = logging_set("A", &log);
        let (model, tool) = probe_agent();
        let builder = Agent::builder().model(model).tool(tool).tool_layer(
            ServiceBuilder::new()
                .layer(RecordLayer::new("outer", &log))
                .layer(set.tool_layer()),
        );
        let agent = match with_loop_hooks {
            true => builder.loop_hooks(set).build(),
            false => builder.build(),
        };
        agent.run("hi").await.unwrap();
        // The hand-placed tool hook runs once, inside the layer placed before it.
        let tool_log: Vec<String> = log
            .entries()
            .into_iter()
            .filter(|e| e.contains("outer in") || e.ends_with(" tool"))
            .collect();
        assert_eq!(tool_log, ["outer in", "A tool"]);
        // Only the loop fires SessionEnd: with the set's loop points registered, and not
        // without. Nothing else of the set was placed (no prompt, model or stop hook ran).
        let end: &[&str] = if with_loop_hooks { &["A end"] } else { &[] };
        assert_eq!(entries(&log, " end"), end);
        for event in [" prompt", " model", " stop"] {
            assert!(
                entries(&log, event).is_empty(),
                "{event}: {:?}",
                log.entries()
            );
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn loop_hooks_alone_reach_tools_that_raise_loop_events() {
    // The todo built-in fires TaskCreated through the run's hooks: registered with
    // `loop_hooks`, two sets are both asked, in order.
    let log = Log::new();
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [{ "id": "1", "title": "x", "status": "pending" }] }),
        )
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .stage(tower_agent::builtins::todo::TodoList::new())
        .loop_hooks(logging_set("A", &log))
        .loop_hooks(logging_set("B", &log))
        .build();
    let resp = agent.run("plan").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(entries(&log, " task"), ["A task", "B task"]);
    assert_eq!(entries(&log, " end"), ["A end", "B end"]);
}

#[test]
fn describe_prints_every_stack_outermost_first() {
    let log = Log::new();
    let set = logging_set("A", &log);
    let model = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(ScriptedModel::new().text("hi"));
    let agent = Agent::builder()
        .name("helper")
        .model(model)
        .tool(tool_fn("probe", "answers", any_object(), |_, _| async {
            Ok::<_, BoxError>("ok")
        }))
        .tool_layer(
            ServiceBuilder::new()
                .layer(RecordLayer::new("a", &log))
                .concurrency_limit(2),
        )
        .hooks(set.clone())
        .step_layer(tower::layer::layer_fn(|inner| inner))
        .loop_hooks(set)
        .build();
    let stacks = agent.describe();
    assert_eq!(stacks.model, ["HookSet (hooks)", "Timeout<ScriptedModel>"]);
    assert_eq!(
        stacks.tools,
        ["HookSet (hooks)", "RecordLayer", "ConcurrencyLimitLayer"]
    );
    assert_eq!(stacks.start, ["HookSet (hooks)"]);
    assert_eq!(stacks.step[0], "HookSet (hooks)");
    assert_eq!(stacks.step.len(), 2);
    assert_eq!(stacks.loop_hooks, ["HookSet (hooks)", "HookSet"]);
    let printed = stacks.to_string();
    assert!(printed.starts_with("agent `helper`\n"), "{printed}");
    assert!(
        printed.contains(
            "  tools:   HookSet (hooks) → RecordLayer → ConcurrencyLimitLayer → router [probe]\n"
        ),
        "{printed}"
    );
    assert!(printed.contains("  prepare: (none)\n"), "{printed}");
}
