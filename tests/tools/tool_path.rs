//! The tool path: concurrency and result order, failures as error outputs the model sees,
//! and the router's readiness (with `tower_test::mock` tools).

use crate::support;

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready_ok};
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    agent::Outcome,
    context::RunContext,
    message::{Message, Role, ToolCall, ToolOutput, ToolSpec},
    model::ScriptedModel,
    tool::{ToolRequest, ToolRouter, tool_fn, typed_tool},
};
use tower_test::mock;

use support::{answers, any_object, last_tool_message, sleepy, tool_messages, within};

// ===== concurrency and order =====

/// `slow` (200 ms) is called before `fast` (50 ms) in one step.
fn slow_then_fast() -> ScriptedModel {
    ScriptedModel::new()
        .tool_calls([("slow", json!({})), ("fast", json!({}))])
        .text("done")
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn parallel_calls_run_concurrently_and_results_keep_call_order() {
    let agent = Agent::builder()
        .model(slow_then_fast())
        .tool(sleepy("slow", 200))
        .tool(sleepy("fast", 50))
        .build();

    let start = Instant::now();
    let resp = agent.run("go").await.unwrap();
    let took = start.elapsed();

    assert!(resp.outcome.is_finished());
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(250),
        "the step should take as long as the slowest call, took {took:?}"
    );
    let calls = &resp.messages[1].tool_calls;
    let results = tool_messages(&resp.messages);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].text(), "slow done");
    assert_eq!(results[0].tool_call_id.as_ref(), Some(&calls[0].id));
    assert_eq!(results[1].text(), "fast done");
    assert_eq!(results[1].tool_call_id.as_ref(), Some(&calls[1].id));
    // The results directly follow the assistant message, in call order.
    assert_eq!(resp.messages[2].text(), "slow done");
    assert_eq!(resp.messages[3].text(), "fast done");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn max_concurrent_tools_one_runs_calls_sequentially_in_call_order() {
    let agent = Agent::builder()
        .model(slow_then_fast())
        .tool(sleepy("slow", 200))
        .tool(sleepy("fast", 50))
        .max_concurrent_tools(1)
        .build();

    let start = Instant::now();
    let resp = agent.run("go").await.unwrap();
    let took = start.elapsed();

    assert!(resp.outcome.is_finished());
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(300),
        "one at a time, the step should take 200 + 50 ms, took {took:?}"
    );
    let results = tool_messages(&resp.messages);
    assert_eq!(results[0].text(), "slow done");
    assert_eq!(results[1].text(), "fast done");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn max_concurrent_tools_bounds_how_many_calls_run_at_once() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_calls([("a", json!({})), ("b", json!({})), ("c", json!({}))])
                .text("done"),
        )
        .tool(sleepy("a", 100))
        .tool(sleepy("b", 100))
        .tool(sleepy("c", 100))
        .max_concurrent_tools(2)
        .build();

    let start = Instant::now();
    let resp = agent.run("go").await.unwrap();
    let took = start.elapsed();

    // Two at a time: a and b, then c. Unbounded would be 100 ms, one at a time 300 ms.
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(300),
        "{took:?}"
    );
    let texts: Vec<String> = tool_messages(&resp.messages)
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(texts, ["a done", "b done", "c done"]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn max_concurrent_tools_keeps_call_order_when_a_later_call_finishes_first() {
    let agent = Agent::builder()
        .model(slow_then_fast())
        .tool(sleepy("slow", 200))
        .tool(sleepy("fast", 50))
        .max_concurrent_tools(2)
        .build();

    let resp = agent.run("go").await.unwrap();

    let calls = &resp.messages[1].tool_calls;
    let results = tool_messages(&resp.messages);
    assert_eq!(results[0].text(), "slow done");
    assert_eq!(results[0].tool_call_id.as_ref(), Some(&calls[0].id));
    assert_eq!(results[1].text(), "fast done");
    assert_eq!(results[1].tool_call_id.as_ref(), Some(&calls[1].id));
}

// ===== failures become error outputs, the run goes on =====

/// Runs an agent (built by `builder` around a recording model) whose model calls
/// `name(arguments)` once and then answers; checks the run finished and returns the tool
/// message the model saw on its second call, which must be an error.
async fn error_seen_by_model(
    builder: impl FnOnce(ScriptedModel) -> Agent,
    name: &str,
    arguments: Value,
) -> Message {
    let model = ScriptedModel::new()
        .tool_call(name, arguments)
        .text("recovered")
        .recording();
    let agent = builder(model.clone());

    let resp = agent.run("go").await.unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "recovered");
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        2,
        "the model is called again after the error"
    );
    let msg = last_tool_message(&requests[1]);
    assert_eq!(msg.role, Role::Tool);
    assert!(msg.is_error, "expected an error output, got {msg:?}");
    msg
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn timeout_layer_turns_a_slow_tool_into_an_error_output() {
    let msg = error_seen_by_model(
        |model| {
            Agent::builder()
                .model(model)
                .tool(sleepy("slow", 10_000))
                .tool_layer(ServiceBuilder::new().timeout(Duration::from_secs(1)))
                .build()
        },
        "slow",
        json!({}),
    )
    .await;
    assert!(msg.text().contains("timed out"), "{}", msg.text());
    assert!(msg.text().contains("slow"), "{}", msg.text());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn timeout_fires_at_the_deadline_not_after_the_tool() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("slow", json!({})).text("ok"))
        .tool(sleepy("slow", 10_000))
        .tool_layer(ServiceBuilder::new().timeout(Duration::from_secs(1)))
        .build();

    let start = Instant::now();
    agent.run("go").await.unwrap();

    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn unknown_tool_is_an_error_output_naming_the_available_tools() {
    let msg = error_seen_by_model(
        |model| {
            Agent::builder()
                .model(model)
                .tool(answers("beta", "b"))
                .tool(answers("alpha", "a"))
                .build()
        },
        "gamma",
        json!({}),
    )
    .await;
    assert_eq!(
        msg.text(),
        "unknown tool `gamma`; available tools: alpha, beta"
    );
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SquareArgs {
    n: u32,
}

#[tokio::test(flavor = "current_thread")]
async fn typed_tool_bad_arguments_are_an_error_output_with_the_serde_error() {
    let msg = error_seen_by_model(
        |model| {
            Agent::builder()
                .model(model)
                .tool(typed_tool(
                    "square",
                    "Squares n",
                    |args: SquareArgs, _| async move {
                        Ok::<_, BoxError>((args.n * args.n).to_string())
                    },
                ))
                .build()
        },
        "square",
        json!({ "n": "four" }),
    )
    .await;
    let text = msg.text();
    assert!(
        text.contains("invalid arguments for tool `square`"),
        "{text}"
    );
    // serde_json's own message
    assert!(text.contains("invalid type: string \"four\""), "{text}");
}

#[tokio::test(flavor = "current_thread")]
async fn argument_text_that_is_not_json_is_an_error_output() {
    let msg = error_seen_by_model(
        |model| {
            Agent::builder()
                .model(model)
                .tool(tool_fn(
                    "echo",
                    "echoes",
                    any_object(),
                    |args, _| async move { Ok::<_, BoxError>(args) },
                ))
                .build()
        },
        "echo",
        Value::String("{bad".into()),
    )
    .await;
    assert!(msg.text().contains("not valid JSON"), "{}", msg.text());
    assert!(msg.text().contains("`echo`"), "{}", msg.text());
}

#[tokio::test(flavor = "current_thread")]
async fn tool_error_is_an_error_output_naming_the_tool() {
    let msg = error_seen_by_model(
        |model| {
            Agent::builder()
                .model(model)
                .tool(tool_fn("x", "fails", any_object(), |_, _| async move {
                    Err::<String, _>("boom".into())
                }))
                .build()
        },
        "x",
        json!({}),
    )
    .await;
    assert_eq!(msg.text(), "tool `x` failed: boom");
}

#[tokio::test(flavor = "current_thread")]
async fn a_failing_call_does_not_spoil_the_other_calls_of_its_step() {
    let model = ScriptedModel::new()
        .tool_calls([("x", json!({})), ("ok", json!({}))])
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn("x", "fails", any_object(), |_, _| async move {
            Err::<String, _>("boom".into())
        }))
        .tool(answers("ok", "fine"))
        .build();

    let resp = agent.run("go").await.unwrap();

    assert!(resp.outcome.is_finished());
    let results = tool_messages(&resp.messages);
    assert_eq!(
        results
            .iter()
            .map(|m| (m.text().into_owned(), m.is_error))
            .collect::<Vec<_>>(),
        [
            ("tool `x` failed: boom".to_owned(), true),
            ("fine".to_owned(), false)
        ]
    );
}

// ===== tower_test::mock tools and router readiness =====

fn spec(name: &str) -> ToolSpec {
    ToolSpec::new(name, "a mock tool", any_object())
}

fn request(id: &str, name: &str) -> ToolRequest {
    ToolRequest::new(ToolCall::new(id, name, json!({})), RunContext::new())
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn router_is_ready_and_serves_other_tools_while_one_tool_is_not_ready() {
    let (blocked, mut handle) = mock::pair::<ToolRequest, ToolOutput>();
    handle.allow(0);
    let router = ToolRouter::new()
        .service(spec("blocked"), blocked)
        .tool(answers("free", "free answer"));
    let mut router = mock::Spawn::new(router);

    // Always ready, even though `blocked` is not.
    assert_ready_ok!(router.poll_ready());
    let mut blocked_call = tokio_test::task::spawn(router.call(request("1", "blocked")));
    assert_pending!(blocked_call.poll());

    // No head-of-line blocking: another tool answers meanwhile.
    assert_ready_ok!(router.poll_ready());
    let free = router.call(request("2", "free")).await.unwrap();
    assert_eq!(free.content, "free answer");
    assert!(handle.poll_request().is_pending(), "blocked got no request");

    // Once the blocked tool has capacity, its call goes through.
    handle.allow(1);
    assert!(blocked_call.is_woken());
    assert_pending!(blocked_call.poll());
    let (req, send) = within("the mock tool is called", handle.next_request())
        .await
        .unwrap();
    assert_eq!(req.call.name, "blocked");
    assert_eq!(req.call.id, "1");
    send.send_response(ToolOutput::text("1", "unblocked"));
    let out = assert_ready_ok!(blocked_call.poll());
    assert_eq!(out.content, "unblocked");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_tower_service_tool_answered_by_the_test_reaches_the_model() {
    let (tool, mut handle) = mock::pair::<ToolRequest, ToolOutput>();
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({ "key": "k1" }))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool_service(spec("lookup"), tool)
        .build();

    let run = tokio::spawn(async move { agent.run("go").await });
    let (req, send) = within("the mock tool is called", handle.next_request())
        .await
        .expect("the tool is called");
    assert_eq!(req.call.name, "lookup");
    assert_eq!(req.call.arguments, json!({ "key": "k1" }));
    assert_eq!(req.ctx.step(), 0);
    send.send_response(ToolOutput::text(req.call.id.clone(), "v1"));
    let resp = within("the run ends", run).await.unwrap().unwrap();

    assert!(resp.outcome.is_finished());
    let seen = last_tool_message(&model.requests()[1]);
    assert_eq!(seen.text(), "v1");
    assert_eq!(seen.tool_call_id, Some(req.call.id));
    assert!(!seen.is_error);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_mock_tool_error_becomes_an_error_output() {
    let (tool, mut handle) = mock::pair::<ToolRequest, ToolOutput>();
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool_service(spec("lookup"), tool)
        .build();

    let run = tokio::spawn(async move { agent.run("go").await });
    let (_req, send) = within("the mock tool is called", handle.next_request())
        .await
        .unwrap();
    send.send_error("backend down");
    let resp = within("the run ends", run).await.unwrap().unwrap();

    assert!(resp.outcome.is_finished());
    let seen = last_tool_message(&model.requests()[1]);
    assert!(seen.is_error);
    assert_eq!(seen.text(), "tool `lookup` failed: backend down");
}

#[tokio::test(flavor = "current_thread")]
async fn an_output_with_the_wrong_call_id_is_filed_under_the_call() {
    let model = ScriptedModel::new()
        .tool_call("sloppy", json!({}))
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool_service(
            spec("sloppy"),
            tower::service_fn(|_req: ToolRequest| async {
                Ok::<_, BoxError>(ToolOutput::text("not-the-call-id", "answer"))
            }),
        )
        .build();

    let resp = agent.run("go").await.unwrap();

    let call_id = &resp.messages[1].tool_calls[0].id;
    assert_eq!(resp.messages[2].tool_call_id.as_ref(), Some(call_id));
    assert_eq!(resp.messages[2].text(), "answer");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn tower_concurrency_limit_on_the_tool_path_serializes_a_step() {
    let agent = Agent::builder()
        .model(slow_then_fast())
        .tool(sleepy("slow", 200))
        .tool(sleepy("fast", 50))
        .tool_layer(ServiceBuilder::new().concurrency_limit(1))
        .build();

    let start = Instant::now();
    let resp = agent.run("go").await.unwrap();
    let took = start.elapsed();

    assert!(resp.outcome.is_finished());
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(300),
        "{took:?}"
    );
    let results = tool_messages(&resp.messages);
    assert_eq!(results[0].text(), "slow done");
    assert_eq!(results[1].text(), "fast done");
}
