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

/// Reminders travel back in the answers (issue 37, item 3): a model's response and a tool's
/// output carry them in their extensions, where the layers above see them (and may drop
/// them); the loop adds what reaches it after the step's tool results, in one hook context,
/// in the order the answers came (the model's first).
#[tokio::test]
async fn reminders_ride_in_the_answers_and_a_layer_above_can_drop_one() {
    use tower_agent::message::Reminders;
    use tower_agent::message::Role;

    let model = ServiceBuilder::new()
        .map_response(|mut resp: ModelResponse| {
            if !resp.message.tool_calls.is_empty() {
                resp.remind("from the model");
            }
            resp
        })
        .service(
            ScriptedModel::new()
                .tool_calls([("a", json!({})), ("b", json!({}))])
                .text("done"),
        );
    let tool = |name: &'static str| {
        tool_fn(
            name,
            "answers",
            json!({"type": "object"}),
            move |_, _| async move {
                let mut out = ToolOutput::text("", format!("{name} done"));
                out.remind(format!("from {name}"));
                Ok::<_, BoxError>(out)
            },
        )
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dropper = {
        let seen = Arc::clone(&seen);
        tower::layer::layer_fn(move |inner| {
            let seen = Arc::clone(&seen);
            tower::util::MapResponse::new(inner, move |mut out: ToolOutput| {
                let texts = out
                    .extensions
                    .get::<Reminders>()
                    .map(|r| r.texts().to_vec());
                seen.lock().unwrap().push(texts.unwrap_or_default());
                if out.content.starts_with('b') {
                    Reminders::take(&mut out.extensions);
                }
                out
            })
        })
    };
    let agent = Agent::builder()
        .model(model)
        .tool(tool("a"))
        .tool(tool("b"))
        .max_concurrent_tools(1)
        .tool_layer(dropper)
        .build();
    let resp = agent.run("go").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    // The layer above saw each tool's reminder in its output.
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [vec!["from a".to_owned()], vec!["from b".to_owned()]]);
    // The model's reminder and a's reached the model, after both results; b's was dropped.
    let roles: Vec<Role> = resp.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::System,
            Role::Assistant
        ]
    );
    assert_eq!(resp.messages[4].text(), "from the model\n\nfrom a");
    // Nothing of them is in the tool messages.
    assert_eq!(resp.messages[2].text(), "a done");
}

/// A hook's context for a call rides in the output's extensions, not its metadata (which the
/// journal and the model's message keep).
#[test]
fn a_hook_context_is_not_metadata() {
    let mut out = ToolOutput::text("c1", "ok");
    out.add_context("note");
    assert!(out.metadata.is_empty());
    assert_eq!(out.contexts().collect::<Vec<_>>(), ["note"]);
    assert_eq!(out.take_contexts(), ["note"]);
    assert_eq!(out.contexts().count(), 0);
}
