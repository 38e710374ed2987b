//! `ServiceBuilder` order is the onion order on both the model and the tool path: the first
//! `.layer()` is the outermost (sees the request first and the response last).

use crate::support;

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    model::{ModelResponse, ScriptedModel},
    tool::tool_fn,
};

use support::{Log, RecordLayer, any_object};

const ONION: [&str; 5] = ["A in", "B in", "inner", "B out", "A out"];

#[tokio::test(flavor = "current_thread")]
async fn model_path_first_layer_is_outermost() {
    let log = Log::new();
    let inner_log = log.clone();
    let model = ScriptedModel::from_fn(move |_| {
        inner_log.push("inner");
        Ok(ModelResponse::text("done"))
    });
    let stack = ServiceBuilder::new()
        .layer(RecordLayer::new("A", &log))
        .layer(RecordLayer::new("B", &log))
        .service(model);

    let agent = Agent::builder().model(stack).build();
    let resp = agent.run("hi").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert_eq!(log.entries(), ONION);
}

/// A one-step script calling `probe`, whose tool logs `"inner"`.
fn probe_agent_parts(log: &Log) -> (ScriptedModel, impl tower_agent::tool::Tool) {
    let model = ScriptedModel::new()
        .tool_call("probe", json!({}))
        .text("done");
    let inner_log = log.clone();
    let tool = tool_fn("probe", "logs", any_object(), move |_, _| {
        let log = inner_log.clone();
        async move {
            log.push("inner");
            Ok::<_, BoxError>("ok")
        }
    });
    (model, tool)
}

#[tokio::test(flavor = "current_thread")]
async fn tool_path_service_builder_first_layer_is_outermost() {
    let log = Log::new();
    let (model, tool) = probe_agent_parts(&log);
    let agent = Agent::builder()
        .model(model)
        .tool(tool)
        .tool_layer(
            ServiceBuilder::new()
                .layer(RecordLayer::new("A", &log))
                .layer(RecordLayer::new("B", &log)),
        )
        .build();

    let resp = agent.run("hi").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert_eq!(log.entries(), ONION);
}

#[tokio::test(flavor = "current_thread")]
async fn tool_path_repeated_tool_layer_matches_service_builder_order() {
    let log = Log::new();
    let (model, tool) = probe_agent_parts(&log);
    let agent = Agent::builder()
        .model(model)
        .tool(tool)
        .tool_layer(RecordLayer::new("A", &log))
        .tool_layer(RecordLayer::new("B", &log))
        .build();

    let resp = agent.run("hi").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert_eq!(log.entries(), ONION);
}

#[tokio::test(flavor = "current_thread")]
async fn tool_layers_wrap_every_call_of_a_parallel_step() {
    let log = Log::new();
    let model = ScriptedModel::new()
        .tool_calls([("probe", json!({})), ("probe", json!({}))])
        .text("done");
    let inner_log = log.clone();
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn("probe", "logs", any_object(), move |_, _| {
            let log = inner_log.clone();
            async move {
                log.push("inner");
                Ok::<_, BoxError>("ok")
            }
        }))
        .tool_layer(RecordLayer::new("A", &log))
        .build();

    agent.run("hi").await.unwrap();

    let entries = log.entries();
    assert_eq!(entries.iter().filter(|e| *e == "A in").count(), 2);
    assert_eq!(entries.iter().filter(|e| *e == "A out").count(), 2);
    assert_eq!(entries.iter().filter(|e| *e == "inner").count(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn tool_layers_wrap_tools_registered_by_setup_stages() {
    let log = Log::new();
    let (model, tool) = probe_agent_parts(&log);
    let tool = std::sync::Arc::new(std::sync::Mutex::new(Some(tool)));
    let agent = Agent::builder()
        .model(model)
        .setup(move |cx: tower_agent::agent::SetupContext| {
            if let Some(tool) = tool.lock().unwrap().take() {
                cx.add_tool(tool);
            }
            async {}
        })
        .tool_layer(RecordLayer::new("A", &log))
        .tool_layer(RecordLayer::new("B", &log))
        .build();

    let resp = agent.run("hi").await.unwrap();

    assert!(resp.outcome.is_finished());
    assert_eq!(log.entries(), ONION);
}
