//! One vector's scenario as a real run: its model script served by a loopback server to the
//! OpenAI provider, its tools as tool services, the `AgentHooks` set in the agent.

use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::sync::mpsc;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, Outcome},
    agent_hooks::AgentHooks,
    event::ModelDelta,
    message::{TOOL_RESPONSE, ToolOutput},
    model::{ModelSettings, openai::OpenAiChat},
    store::{MemoryStore, ThreadStore},
    tool::tool_fn,
};

use crate::loopback::{self, End, Reply, Server};

/// What a run did, as the harness reports it.
pub(crate) struct Run {
    pub(crate) outcome: String,
    pub(crate) final_output: Value,
    pub(crate) tool_invocations: Vec<Value>,
    /// The answer's text the caller got as it streamed (the run's `ModelDelta` events), or
    /// the answer itself when nothing streamed.
    pub(crate) released: String,
    /// The thread as the store kept it, as JSON.
    pub(crate) persisted: String,
}

/// The arguments of the model script's tool calls as the vector writes them.
#[derive(Deserialize)]
struct RawVector {
    scenario: RawScenario,
}

#[derive(Deserialize)]
struct RawScenario {
    #[serde(default)]
    model_script: Vec<RawStep>,
}

#[derive(Deserialize)]
struct RawStep {
    respond: RawRespond,
}

#[derive(Deserialize)]
struct RawRespond {
    #[serde(default)]
    tool_calls: Vec<RawCall>,
}

#[derive(Deserialize)]
struct RawCall {
    args: Box<RawValue>,
}

/// The Chat Completions reply of one scripted answer; its tool calls' `arguments` are the
/// vector's text of them (an integer beyond 64 bits stays as written).
fn reply(respond: &Value, raw: &RawRespond) -> Reply {
    let calls: Vec<Value> = respond["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(&raw.tool_calls)
        .enumerate()
        .map(|(i, (call, raw))| {
            json!({
                "index": i,
                "id": call["id"],
                "type": "function",
                "function": { "name": call["name"], "arguments": raw.args.get() },
            })
        })
        .collect();
    let finish = respond["finish_reason"].as_str().unwrap_or("stop");
    let Some(stream) = respond.get("stream").and_then(Value::as_array) else {
        let mut message = json!({ "role": "assistant", "content": respond["content"] });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        return Reply::json(
            json!({
                "id": "chatcmpl-ctk",
                "object": "chat.completion",
                "model": "ctk-model",
                "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
            })
            .to_string(),
        );
    };
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-ctk",
            "object": "chat.completion.chunk",
            "model": "ctk-model",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events: Vec<Value> = stream
        .iter()
        .map(|piece| chunk(json!({ "content": piece }), Value::Null))
        .collect();
    if respond["stream_truncated"] == true {
        // The stream dies after its pieces: no finish reason, no `[DONE]`.
        let reply = Reply::openai_events(&Value::Array(events));
        let len = reply.text().len();
        return reply.cut(len, End::Abort);
    }
    if !calls.is_empty() {
        events.push(chunk(json!({ "tool_calls": calls }), Value::Null));
    }
    events.push(chunk(json!({}), json!(finish)));
    events.push(json!("[DONE]"));
    Reply::openai_events(&Value::Array(events))
}

type Log = Arc<Mutex<Vec<Value>>>;

/// The scenario's tool `spec` as a tool service: the first behaviour whose `when_args` equal
/// the call's arguments (or that has none) answers; each call is logged.
fn tool(spec: &Value, log: &Log) -> impl tower_agent::tool::Tool + use<> {
    let name = spec["name"].as_str().unwrap_or_default().to_owned();
    let behaviors = spec["behavior"].as_array().cloned().unwrap_or_default();
    let log = Arc::clone(log);
    let tool_name = name.clone();
    tool_fn(
        name,
        "A tool of the vector's scenario",
        json!({"type": "object"}),
        move |args, _| {
            log.lock()
                .unwrap()
                .push(json!({ "name": tool_name, "args": args }));
            let found = behaviors
                .iter()
                .find(|b| b.get("when_args").is_none_or(|w| *w == args))
                .cloned();
            async move {
                let Some(b) = found else {
                    return Ok::<_, BoxError>(ToolOutput::error(
                        "",
                        "no behaviour matches these arguments",
                    ));
                };
                let value = b["return"].clone();
                let text = match &value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut output = ToolOutput::text("", text);
                output.is_error = b["is_error"] == true;
                output.metadata.insert(TOOL_RESPONSE.into(), value);
                Ok(output)
            }
        },
    )
}

/// Runs the scenario through an agent guarded by `hooks`.
pub(crate) async fn run_scenario(scenario: &Value, text: &str, hooks: AgentHooks) -> Run {
    let raw: RawVector = serde_json::from_str(text).expect("the vector's scenario");
    let server = Server::start();
    let script = scenario["model_script"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let streams = script.iter().any(|s| s["respond"].get("stream").is_some());
    for (step, raw) in script.iter().zip(&raw.scenario.model_script) {
        server.reply(reply(&step["respond"], &raw.respond));
    }
    let provider = OpenAiChat::builder()
        .base_url(format!("{}/v1/", server.url()))
        .api_key("sk-ctk")
        .model("ctk-model")
        .client(loopback::client())
        .build();
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let mut builder = Agent::builder()
        .model(provider)
        .settings(ModelSettings::default().stream(streams))
        .store(store.clone());
    for spec in scenario["tools"].as_array().into_iter().flatten() {
        builder = builder.tool(tool(spec, &log));
    }
    let agent = builder.hooks(hooks).build();
    let input = match &scenario["input"]["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let resp = agent
        .run(AgentRequest::new(input).thread("ctk-thread").events(tx))
        .await
        .expect("the run");
    let mut released = String::new();
    while let Ok(event) = rx.try_recv() {
        if let AgentEvent::ModelDelta {
            delta: ModelDelta::Text { text },
            ..
        } = event
        {
            released.push_str(&text);
        }
    }
    let (outcome, final_output) = match &resp.outcome {
        Outcome::Finished => ("completed".to_owned(), Value::String(resp.text.clone())),
        Outcome::Blocked { .. } => ("blocked".to_owned(), Value::Null),
        other => (format!("{other:?}"), Value::Null),
    };
    if !streams && outcome == "completed" {
        released.clone_from(&resp.text);
    }
    let thread = store.load("ctk-thread").await.unwrap();
    let persisted = thread
        .map(|t| serde_json::to_string(&t.messages).unwrap())
        .unwrap_or_default();
    let tool_invocations = log.lock().unwrap().clone();
    Run {
        outcome,
        final_output,
        tool_invocations,
        released,
        persisted,
    }
}
