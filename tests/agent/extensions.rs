//! Per-call extensions (issue 37, item 3): a value a layer puts in a model request reaches the
//! model through the agent's stack; a value a tool puts in its output reaches the tool layers
//! above it; neither reaches the model's messages, and each call starts with none.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    message::ToolOutput,
    model::{ModelRequest, ModelResponse, ScriptedModel},
    tool::{ToolRequest, tool_fn},
};

#[derive(Clone, Debug, PartialEq)]
struct Tenant(&'static str);

#[derive(Clone, Debug, PartialEq)]
struct Cached(bool);

#[tokio::test]
async fn a_model_layer_s_extension_reaches_the_model_and_each_call_starts_with_none() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = {
        let seen = Arc::clone(&seen);
        ScriptedModel::from_fn(
            move |req: &ModelRequest| -> Result<ModelResponse, BoxError> {
                let mut seen = seen.lock().unwrap();
                seen.push(req.extensions.get::<Tenant>().cloned());
                Ok(if seen.len() == 1 {
                    ModelResponse::tool_calls([tower_agent::message::ToolCall::new(
                        "c1",
                        "work",
                        json!({}),
                    )])
                } else {
                    ModelResponse::text("done")
                })
            },
        )
    };
    // The layer sets the tenant on the first call only: the second call must not inherit it.
    let first = Arc::new(Mutex::new(true));
    let stack = ServiceBuilder::new()
        .map_request(move |req: ModelRequest| {
            if std::mem::take(&mut *first.lock().unwrap()) {
                req.with_extension(Tenant("acme"))
            } else {
                req
            }
        })
        .service(model);
    let agent = Agent::builder()
        .model(stack)
        .tool(tool_fn(
            "work",
            "Works",
            json!({"type": "object"}),
            |_, _| async { Ok("ok") },
        ))
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.text, "done");
    assert_eq!(*seen.lock().unwrap(), [Some(Tenant("acme")), None]);
}

#[tokio::test]
async fn a_tool_s_output_extension_reaches_the_layers_above_it_not_the_model() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let layer = {
        let seen = Arc::clone(&seen);
        ServiceBuilder::new().map_response(move |output: ToolOutput| {
            seen.lock()
                .unwrap()
                .push(output.extensions.get::<Cached>().cloned());
            output
        })
    };
    let tool = tower::service_fn(|req: ToolRequest| async move {
        Ok::<_, BoxError>(ToolOutput::text(req.call.id, "42").with_extension(Cached(true)))
    });
    let model = ScriptedModel::new()
        .tool_calls([("answer", json!({}))])
        .text("It is 42.")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool_service(
            tower_agent::message::ToolSpec::new("answer", "Answers", json!({"type": "object"})),
            tool,
        )
        .tool_layer(layer)
        .build();
    let resp = agent.run("the answer?").await.unwrap();
    assert_eq!(resp.text, "It is 42.");
    assert_eq!(*seen.lock().unwrap(), [Some(Cached(true))]);
    // The model saw the output's text only.
    let last = model.requests()[1].messages.last().unwrap().clone();
    assert_eq!(last.text(), "42");
}
