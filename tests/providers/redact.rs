//! `layers::redact` on answers streamed by the real providers from loopback servers (issue 35):
//! values in the reasoning (Anthropic `thinking` deltas, a Responses reasoning summary) are
//! redacted in the pieces, the `ModelResponse` event, the stored thread and what goes back to
//! the provider; a key split across two text blocks around a tool call is found in the pieces
//! as in the whole answer, whichever way the provider joins its text parts.

use crate::loopback;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use futures_util::StreamExt;
use loopback::{Reply, Server};
use serde_json::{Value, json};
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest, AgentResponse, BoxError,
    agent::{AgentEvent, ModelDelta},
    layers::redact::{Redaction, Strategy},
    message::{Message, Role},
    model::{
        ModelRequest, ModelResponse, ModelSettings, anthropic::Anthropic, openai::OpenAiChat,
        responses::OpenAiResponses,
    },
    store::MemoryStore,
    tool::{Tool, tool_fn},
};

fn redaction() -> Redaction {
    Redaction::new()
        .credit_card(Strategy::Redact)
        .api_keys(Strategy::Redact)
}

/// An agent on `model` behind the redaction layer, with a weather tool, streaming, saving to
/// `store`.
fn agent<S>(
    model: S,
    store: &MemoryStore,
    calls: &Arc<AtomicUsize>,
    settings: ModelSettings,
) -> Agent
where
    S: tower::Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let model = ServiceBuilder::new()
        .layer(redaction().model_layer())
        .service(model);
    Agent::builder()
        .model(model)
        .tool(weather_tool(Arc::clone(calls)))
        .settings(settings.stream(true))
        .store(store.clone())
        .build()
}

fn weather_tool(calls: Arc<AtomicUsize>) -> impl Tool {
    tool_fn(
        "get_weather",
        "Current weather in a city",
        json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
        move |_, _| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>("rain, 9°C")
            }
        },
    )
}

/// The run's events and its answer.
async fn run(agent: &Agent) -> (Vec<AgentEvent>, AgentResponse) {
    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo?").thread("t1"));
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e);
    }
    (events, stream.take_response().unwrap().unwrap())
}

/// The first step's streamed pieces.
fn first_step(events: &[AgentEvent]) -> Vec<ModelDelta> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { step: 0, delta } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

/// The first step's `ModelResponse` event's message.
fn first_answer(events: &[AgentEvent]) -> Message {
    events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ModelResponse {
                step: 0, message, ..
            } => Some(message.clone()),
            _ => None,
        })
        .expect("a ModelResponse event")
}

/// The text (`reasoning`: the reasoning) of these pieces, joined.
fn joined(deltas: &[ModelDelta], reasoning: bool) -> String {
    deltas
        .iter()
        .filter_map(|d| match (d, reasoning) {
            (ModelDelta::Text { text }, false) | (ModelDelta::Reasoning { text }, true) => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect()
}

/// No piece, nor the stored thread, nor `also` shows any of `parts`.
fn never_shows(deltas: &[ModelDelta], store: &MemoryStore, also: &[String], parts: &[&str]) {
    let thread = serde_json::to_string(&store.get("t1").expect("saved").messages).unwrap();
    for part in parts {
        for d in deltas {
            let text = match d {
                ModelDelta::Text { text } | ModelDelta::Reasoning { text } => text,
                _ => continue,
            };
            assert!(!text.contains(part), "a piece shows {part:?}: {deltas:?}");
        }
        assert!(
            !thread.contains(part),
            "the thread shows {part:?}: {thread}"
        );
        for a in also {
            assert!(!a.contains(part), "{part:?} in {a}");
        }
    }
}

// ===== Reasoning =====

const SIGNATURE: &str =
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL==";
const THINKING: [&str; 3] = [
    "The user pays with 4111 1111 ",
    "1111 1111 and their key is sk-ant-api03-",
    "abcdefghijklmnopqrstuvwxyz0123. I should call get_weather.",
];
const THINKING_REDACTED: &str = "The user pays with [REDACTED_CREDIT_CARD] and their key is \
                                 [REDACTED_API_KEY]. I should call get_weather.";
const VALUES: [&str; 4] = ["4111", "sk-ant", "abcdefghij", "api03"];

fn event(kind: &str, data: Value) -> Value {
    json!({ "event": kind, "data": data })
}

fn start(index: usize, block: Value) -> Value {
    event(
        "content_block_start",
        json!({ "type": "content_block_start", "index": index, "content_block": block }),
    )
}

fn delta(index: usize, delta: Value) -> Value {
    event(
        "content_block_delta",
        json!({ "type": "content_block_delta", "index": index, "delta": delta }),
    )
}

fn stop(index: usize) -> Value {
    event(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": index }),
    )
}

/// An Anthropic stream of these content events, ending with `stop_reason`.
fn anthropic_stream(blocks: Vec<Value>, stop_reason: &str) -> Reply {
    let mut events = vec![event(
        "message_start",
        json!({ "type": "message_start", "message": { "id": "msg_01R", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": { "input_tokens": 50, "output_tokens": 1 } } }),
    )];
    events.extend(blocks);
    events.push(event(
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason, "stop_sequence": null }, "usage": { "output_tokens": 90 } }),
    ));
    events.push(event("message_stop", json!({ "type": "message_stop" })));
    Reply::anthropic_events(&Value::Array(events))
}

fn anthropic_text(text: &str) -> Reply {
    anthropic_stream(
        vec![
            start(0, json!({ "type": "text", "text": "" })),
            delta(0, json!({ "type": "text_delta", "text": text })),
            stop(0),
        ],
        "end_turn",
    )
}

fn tool_use(index: usize) -> Vec<Value> {
    vec![
        start(
            index,
            json!({ "type": "tool_use", "id": "toolu_01R", "name": "get_weather", "input": {} }),
        ),
        delta(
            index,
            json!({ "type": "input_json_delta", "partial_json": "{\"city\": \"Os" }),
        ),
        delta(
            index,
            json!({ "type": "input_json_delta", "partial_json": "lo\"}" }),
        ),
        stop(index),
    ]
}

fn anthropic(server: &Server) -> Anthropic {
    Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .model("claude-sonnet-4-5")
        .max_tokens(16000)
        .client(loopback::client())
        .build()
}

/// Anthropic `thinking` deltas with a card number and an API key split across them: the
/// reasoning pieces, the `ModelResponse` event, the stored thread and the next request never
/// show them; the changed block lost its signature, so it is not sent back under it.
#[tokio::test]
async fn anthropic_thinking_is_redacted_in_pieces_answer_thread_and_request() {
    let server = Server::start();
    let mut blocks = vec![start(0, json!({ "type": "thinking", "thinking": "" }))];
    blocks.extend(
        THINKING
            .iter()
            .map(|t| delta(0, json!({ "type": "thinking_delta", "thinking": t }))),
    );
    blocks.push(delta(
        0,
        json!({ "type": "signature_delta", "signature": SIGNATURE }),
    ));
    blocks.push(stop(0));
    blocks.push(start(1, json!({ "type": "text", "text": "" })));
    blocks.push(delta(
        1,
        json!({ "type": "text_delta", "text": "Let me check." }),
    ));
    blocks.push(stop(1));
    blocks.extend(tool_use(2));
    server.reply(anthropic_stream(blocks, "tool_use"));
    server.reply(anthropic_text("Oslo: rain, 9°C."));
    let (store, calls) = (MemoryStore::new(), Arc::new(AtomicUsize::new(0)));
    let settings = ModelSettings::default().thinking_budget(2048);
    let agent = agent(anthropic(&server), &store, &calls, settings);
    let (events, resp) = run(&agent).await;
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let deltas = first_step(&events);
    assert_eq!(joined(&deltas, true), THINKING_REDACTED);
    let answer = first_answer(&events);
    let reasoning: Vec<_> = answer.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, THINKING_REDACTED);
    assert_eq!(reasoning[0].signature, None, "a signature over other text");
    let thread = store.get("t1").unwrap();
    let stored = thread
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .unwrap();
    assert_eq!(stored, &answer);
    let second = server.requests()[1].body.to_string();
    assert!(!second.contains(SIGNATURE), "{second}");
    assert_eq!(
        server.requests()[1].body["messages"][1]["content"][0],
        json!({ "type": "text", "text": "Let me check." })
    );
    let event_json = serde_json::to_string(&events).unwrap();
    never_shows(&deltas, &store, &[event_json, second], &VALUES);
}

/// A Responses API reasoning summary with a key: the pieces, the part's text and the summary
/// kept in its opaque item (stored, and sent back) are redacted; its `encrypted_content` is
/// sent back as it came.
#[tokio::test]
async fn responses_reasoning_summary_is_redacted_in_its_item_too() {
    const ENCRYPTED: &str = "gAAAAABoRz3vX9qL2mZt8yJkP0a1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZ==";
    let summary = "Their key is sk-proj-abcdefghijklmnopqrstuvwxyz0123; look it up.";
    let item = json!({"id": "rs_r1", "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}], "encrypted_content": ENCRYPTED});
    let call = json!({"id": "fc_r1", "type": "function_call", "status": "completed", "arguments": "{\"city\":\"Oslo\"}", "call_id": "call_r1", "name": "get_weather"});
    let (a, b) = summary.split_at(22);
    let events = vec![
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_r1", "type": "reasoning", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": a}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": b}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "fc_r1", "type": "function_call", "arguments": "", "call_id": "call_r1", "name": "get_weather"}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"city\":\"Oslo\"}"}),
        json!({"type": "response.function_call_arguments.done", "output_index": 1}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
        json!({"type": "response.completed", "response": {"id": "resp_r1", "status": "completed", "output": [item, call]}}),
    ];
    let server = Server::start();
    server.reply(Reply::sse(responses_sse(&events)));
    server.reply(Reply::sse(responses_sse(&responses_text("Rain."))));
    let (store, calls) = (MemoryStore::new(), Arc::new(AtomicUsize::new(0)));
    let agent = agent(responses(&server), &store, &calls, ModelSettings::default());
    let (events, resp) = run(&agent).await;
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let redacted = "Their key is [REDACTED_API_KEY]; look it up.";
    let deltas = first_step(&events);
    assert_eq!(joined(&deltas, true), redacted);
    let answer = first_answer(&events);
    let reasoning = answer.reasoning().next().unwrap();
    assert_eq!(reasoning.text, redacted);
    let input = &server.requests()[1].body["input"];
    assert_eq!(input[1]["type"], "reasoning");
    assert_eq!(input[1]["summary"][0]["text"], redacted);
    assert_eq!(input[1]["encrypted_content"], ENCRYPTED);
    let event_json = serde_json::to_string(&events).unwrap();
    never_shows(
        &deltas,
        &store,
        &[event_json, input.to_string()],
        &["sk-proj", "abcdefghij"],
    );
}

fn responses(server: &Server) -> OpenAiResponses {
    OpenAiResponses::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test-resp")
        .model("o4-mini")
        .client(loopback::client())
        .build()
}

fn responses_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn responses_message(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn responses_text(text: &str) -> Vec<Value> {
    let message = responses_message("msg_t", text);
    vec![
        json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": text}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": message}),
        json!({"type": "response.completed", "response": {"id": "resp_t", "status": "completed", "output": [message]}}),
    ]
}

// ===== A key split around a tool call =====

/// The answer's text in two halves, a tool call between them: the key starts in the first.
const BEFORE: &str = "Your key: sk-ant-api03-abcdefghij";
const AFTER: &str = "klmnopqrstuvwxyz0123 — keep it safe.";
const JOINED_REDACTED: &str = "Your key: [REDACTED_API_KEY] — keep it safe.";
const HALVES: [&str; 3] = ["sk-ant", "abcdefghij", "klmnop"];

/// What every provider's test checks: the pieces joined are the answer's text, redacted; no
/// piece, event, stored message or later request shows a part of the key; the tool ran.
fn split_key_checks(
    events: &[AgentEvent],
    resp: &AgentResponse,
    store: &MemoryStore,
    server: &Server,
) {
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let deltas = first_step(events);
    let answer = first_answer(events);
    assert_eq!(
        joined(&deltas, false),
        answer.text(),
        "pieces and answer agree"
    );
    assert_eq!(answer.text(), JOINED_REDACTED);
    // The order of the pieces is kept: text, the call, text (Chat Completions ends its call
    // at `finish_reason`, after the text).
    let kinds: Vec<&str> = deltas
        .iter()
        .map(|d| match d {
            ModelDelta::Text { .. } => "text",
            ModelDelta::ToolCallEnd { .. } => "end",
            _ => "call",
        })
        .collect();
    let first_call = kinds.iter().position(|k| *k != "text").unwrap();
    assert_eq!(kinds[0], "text", "{kinds:?}");
    assert!(kinds[first_call..].contains(&"text"), "{kinds:?}");
    assert!(kinds[first_call..].contains(&"end"), "{kinds:?}");
    let second = server.requests()[1].body.to_string();
    let event_json = serde_json::to_string(events).unwrap();
    never_shows(&deltas, store, &[second, event_json], &HALVES);
}

/// Anthropic joins the text blocks around a `tool_use` in one text part.
#[tokio::test]
async fn anthropic_a_key_split_around_a_tool_use_never_shows() {
    let server = Server::start();
    let mut blocks = vec![
        start(0, json!({ "type": "text", "text": "" })),
        delta(0, json!({ "type": "text_delta", "text": BEFORE })),
        stop(0),
    ];
    blocks.extend(tool_use(1));
    blocks.push(start(2, json!({ "type": "text", "text": "" })));
    blocks.push(delta(2, json!({ "type": "text_delta", "text": AFTER })));
    blocks.push(stop(2));
    server.reply(anthropic_stream(blocks, "tool_use"));
    server.reply(anthropic_text("Rain."));
    let (store, calls) = (MemoryStore::new(), Arc::new(AtomicUsize::new(0)));
    let agent = agent(anthropic(&server), &store, &calls, ModelSettings::default());
    let (events, resp) = run(&agent).await;
    split_key_checks(&events, &resp, &store, &server);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(first_answer(&events).content.len(), 1, "one text part");
}

/// Chat Completions has one `content` string: the text around the call is one text.
#[tokio::test]
async fn openai_chat_a_key_split_around_a_tool_call_never_shows() {
    let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let first = json!([
        chunk(json!({"role": "assistant", "content": BEFORE}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_r", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
            Value::Null
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Oslo\"}"}}]}),
            Value::Null
        ),
        chunk(json!({"content": AFTER}), Value::Null),
        chunk(json!({}), json!("tool_calls")),
        "[DONE]"
    ]);
    let second = json!([
        chunk(
            json!({"role": "assistant", "content": "Rain."}),
            Value::Null
        ),
        chunk(json!({}), json!("stop")),
        "[DONE]"
    ]);
    let server = Server::start();
    server.reply(Reply::openai_events(&first));
    server.reply(Reply::openai_events(&second));
    let model = OpenAiChat::builder()
        .base_url(format!("{}/v1/", server.url()))
        .api_key("sk-test-123")
        .model("gpt-4.1-mini")
        .client(loopback::client())
        .build();
    let (store, calls) = (MemoryStore::new(), Arc::new(AtomicUsize::new(0)));
    let agent = agent(model, &store, &calls, ModelSettings::default());
    let (events, resp) = run(&agent).await;
    split_key_checks(&events, &resp, &store, &server);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// The Responses API answers with two `message` items around the `function_call`: two text
/// parts, which `Message::text` joins and the next request sends back as one.
#[tokio::test]
async fn responses_a_key_split_around_a_function_call_never_shows() {
    let before = responses_message("msg_a", BEFORE);
    let after = responses_message("msg_b", AFTER);
    let call = json!({"id": "fc_r", "type": "function_call", "status": "completed", "arguments": "{\"city\":\"Oslo\"}", "call_id": "call_r", "name": "get_weather"});
    let events = vec![
        json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": BEFORE}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": before}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "fc_r", "type": "function_call", "arguments": "", "call_id": "call_r", "name": "get_weather"}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"city\":\"Oslo\"}"}),
        json!({"type": "response.function_call_arguments.done", "output_index": 1}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
        json!({"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": AFTER}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": after}),
        json!({"type": "response.completed", "response": {"id": "resp_r", "status": "completed", "output": [before, call, after]}}),
    ];
    let server = Server::start();
    server.reply(Reply::sse(responses_sse(&events)));
    server.reply(Reply::sse(responses_sse(&responses_text("Rain."))));
    let (store, calls) = (MemoryStore::new(), Arc::new(AtomicUsize::new(0)));
    let agent = agent(responses(&server), &store, &calls, ModelSettings::default());
    let (events, resp) = run(&agent).await;
    split_key_checks(&events, &resp, &store, &server);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let parts = first_answer(&events).content;
    assert_eq!(parts.len(), 2, "two text parts: {parts:?}");
    assert_eq!(
        server.requests()[1].body["input"][1]["content"],
        JOINED_REDACTED
    );
}

/// An answer that does not stream: its thinking block is redacted in the answer and the
/// thread, and loses its signature, as a streamed one.
#[tokio::test]
async fn anthropic_thinking_of_a_whole_answer_is_redacted() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "msg_01W", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                { "type": "thinking", "thinking": THINKING.concat(), "signature": SIGNATURE },
                { "type": "text", "text": "Done." }
            ],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 50, "output_tokens": 90 }
        })
        .to_string(),
    ));
    let store = MemoryStore::new();
    let model = ServiceBuilder::new()
        .layer(redaction().model_layer())
        .service(anthropic(&server));
    let agent = Agent::builder()
        .model(model)
        .settings(ModelSettings::default().thinking_budget(2048))
        .store(store.clone())
        .build();
    let resp = agent
        .run(AgentRequest::new("Hi").thread("t1"))
        .await
        .unwrap();
    assert_eq!(resp.text, "Done.");
    let answer = resp.messages.last().unwrap();
    let reasoning = answer.reasoning().next().unwrap();
    assert_eq!(reasoning.text, THINKING_REDACTED);
    assert_eq!(reasoning.signature, None);
    never_shows(&[], &store, &[], &VALUES);
}
