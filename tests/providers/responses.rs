//! `OpenAiResponses` against a loopback server speaking the OpenAI Responses API (payloads
//! written from the API reference): stateless requests (`store: false`) whose reasoning items
//! come back with their `encrypted_content` on the next request, function calls and their
//! outputs, streaming events, usage with cached and reasoning tokens, typed errors, retries,
//! and images returned by a tool.

use crate::loopback;
use futures_util::TryFutureExt as _;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt;
use loopback::{End, Reply, Server};
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, ModelDelta},
    message::{Message, StopReason, ToolOutput, Usage},
    model::{
        ModelRequest, ModelSettings, ProviderError, RetryPolicy,
        responses::{ITEM_PROVIDER, OpenAiResponses},
    },
    tool::{Tool, tool_fn},
};

const ENCRYPTED: &str = "gAAAAABoRz3vX9qL2mZt8yJkP0a1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZ==";

fn provider(server: &Server) -> OpenAiResponses {
    OpenAiResponses::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test-resp")
        .model("o4-mini")
        .client(loopback::client())
        .build()
}

fn weather_tool(calls: Arc<AtomicUsize>) -> impl Tool {
    tool_fn(
        "get_weather",
        "Current weather in a city",
        json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"]
        }),
        move |args, _ctx| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(match args["city"].as_str() {
                    Some("Oslo") => "rain, 9°C",
                    _ => "sunny, 24°C",
                })
            }
        },
    )
}

fn provider_error(err: &BoxError) -> &ProviderError {
    ProviderError::find(&**err).unwrap_or_else(|| panic!("not a ProviderError: {err:?}"))
}

/// The reasoning item of the first answer, as the API documents it with
/// `include: ["reasoning.encrypted_content"]`.
fn reasoning_item() -> Value {
    json!({
        "id": "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7",
        "type": "reasoning",
        "summary": [
            { "type": "summary_text", "text": "**Checking the weather**\n\nThe user wants Oslo's weather; call get_weather." }
        ],
        "encrypted_content": ENCRYPTED
    })
}

fn function_call_response() -> Value {
    json!({
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": "o4-mini-2025-04-16",
        "output": [
            reasoning_item(),
            {
                "type": "function_call",
                "id": "fc_67ca09c6bedc8190a7abfec07b1a1332096610f474011cc0",
                "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
                "name": "get_weather",
                "arguments": "{\"city\":\"Oslo\"}",
                "status": "completed"
            }
        ],
        "parallel_tool_calls": true,
        "store": false,
        "usage": {
            "input_tokens": 291,
            "input_tokens_details": { "cached_tokens": 0 },
            "output_tokens": 154,
            "output_tokens_details": { "reasoning_tokens": 128 },
            "total_tokens": 445
        }
    })
}

/// The answer to "Weather in Oslo?" from `server`, scripted as [`function_call_response`].
async fn first_answer(server: &Server) -> tower_agent::model::ModelResponse {
    server.reply(Reply::json(function_call_response().to_string()));
    provider(server)
        .oneshot(ModelRequest::new(vec![Message::user("Weather in Oslo?")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap()
}

fn text_response() -> Value {
    json!({
        "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41",
        "object": "response",
        "created_at": 1741476777,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": "o4-mini-2025-04-16",
        "output": [
            {
                "id": "rs_6820f3a1b2c381918e2f0a1b2c3d4e5f0ac5ba57aafcbac7",
                "type": "reasoning",
                "summary": [],
                "encrypted_content": "gAAAAABoRz4aSecondTurn=="
            },
            {
                "type": "message",
                "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41",
                "status": "completed",
                "role": "assistant",
                "content": [
                    { "type": "output_text", "text": "Oslo: rain, 9°C.", "annotations": [] }
                ]
            }
        ],
        "store": false,
        "usage": {
            "input_tokens": 612,
            "input_tokens_details": { "cached_tokens": 384 },
            "output_tokens": 40,
            "output_tokens_details": { "reasoning_tokens": 24 },
            "total_tokens": 652
        }
    })
}

#[tokio::test]
async fn agent_run_sends_the_reasoning_item_back_with_its_encrypted_content() {
    let server = Server::start();
    server.reply(Reply::json(function_call_response().to_string()));
    server.reply(Reply::json(text_response().to_string()));
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(weather_tool(Arc::clone(&calls)))
        .system_prompt("You are a weather bot.")
        .build();

    let resp = agent.run("Weather in Oslo?").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, 2);
    assert_eq!(resp.text, "Oslo: rain, 9°C.");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 291 + 612,
            output_tokens: 154 + 40,
            cache_read_tokens: 384,
            reasoning_tokens: 128 + 24,
            ..Usage::default()
        }
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/responses");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-resp")
    );
    assert_eq!(
        requests[0].body,
        json!({
            "model": "o4-mini",
            "input": [
                { "role": "system", "content": "You are a weather bot." },
                { "role": "user", "content": "Weather in Oslo?" }
            ],
            "tools": [{
                "type": "function",
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": {
                    "type": "object",
                    "properties": { "city": { "type": "string" } },
                    "required": ["city"]
                },
                "strict": false
            }],
            "tool_choice": "auto",
            "store": false,
            "include": ["reasoning.encrypted_content"]
        })
    );
    // The second request replays the reasoning item exactly as it came, before the call.
    assert_eq!(
        requests[1].body["input"],
        json!([
            { "role": "system", "content": "You are a weather bot." },
            { "role": "user", "content": "Weather in Oslo?" },
            reasoning_item(),
            {
                "type": "function_call",
                "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
                "name": "get_weather",
                "arguments": "{\"city\":\"Oslo\"}"
            },
            {
                "type": "function_call_output",
                "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
                "output": "rain, 9°C"
            }
        ])
    );
    assert_eq!(requests[1].body["store"], json!(false));
}

#[tokio::test]
async fn reasoning_items_are_not_sent_to_chat_completions_and_survive_serde() {
    // A history produced by the Responses provider, then read back from JSON (as the thread
    // store keeps it), still carries the item; the Chat Completions provider leaves it out.
    let server = Server::start();
    let resp = first_answer(&server).await;
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    // The reasoning item is one reasoning part: its summary as text, the item whole as the
    // opaque item of this provider, before the (empty) text.
    let reasoning: Vec<_> = resp.message.reasoning().collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(
        reasoning[0].text,
        "**Checking the weather**\n\nThe user wants Oslo's weather; call get_weather."
    );
    assert_eq!(
        reasoning[0].opaque_from(ITEM_PROVIDER),
        Some(&reasoning_item())
    );
    assert_eq!(reasoning[0].opaque_from("anthropic"), None);
    assert_eq!(resp.message.text(), "");
    let stored = serde_json::to_string(&resp.message).unwrap();
    let back: Message = serde_json::from_str(&stored).unwrap();
    assert_eq!(back, resp.message);

    let chat_server = Server::start();
    chat_server.reply(Reply::json(
        json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}).to_string(),
    ));
    let chat = tower_agent::model::OpenAiChat::builder()
        .base_url(format!("{}/v1", chat_server.url()))
        .client(loopback::client())
        .build();
    chat.oneshot(ModelRequest::new(vec![
        Message::user("Weather in Oslo?"),
        back,
        Message::tool_result(&ToolOutput::text("call_unLAR8MvFNptuiZK6K6HCy5k", "rain")),
    ]))
    .await
    .unwrap();
    let body = chat_server.requests()[0].body.to_string();
    assert!(!body.contains(ENCRYPTED), "{body}");
}

/// The events of a streamed function call, as the API reference documents them.
fn function_call_events() -> String {
    let events = [
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_s1", "object": "response", "status": "in_progress", "model": "o4-mini-2025-04-16", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"id": "rs_s1", "type": "reasoning", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 2, "item_id": "rs_s1", "output_index": 0, "summary_index": 0, "delta": "**Weather** "}),
        json!({"type": "response.reasoning_summary_text.delta", "sequence_number": 3, "item_id": "rs_s1", "output_index": 0, "summary_index": 0, "delta": "look it up"}),
        json!({"type": "response.output_item.done", "sequence_number": 4, "output_index": 0, "item": {"id": "rs_s1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "**Weather** look it up"}], "encrypted_content": ENCRYPTED}}),
        json!({"type": "response.output_item.added", "sequence_number": 5, "output_index": 1, "item": {"id": "fc_s1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_s1", "name": "get_weather"}}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 6, "item_id": "fc_s1", "output_index": 1, "delta": "{\"city\":"}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 7, "item_id": "fc_s1", "output_index": 1, "delta": "\"Oslo\"}"}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 8, "item_id": "fc_s1", "output_index": 1, "arguments": "{\"city\":\"Oslo\"}"}),
        json!({"type": "response.output_item.done", "sequence_number": 9, "output_index": 1, "item": {"id": "fc_s1", "type": "function_call", "status": "completed", "arguments": "{\"city\":\"Oslo\"}", "call_id": "call_s1", "name": "get_weather"}}),
        // The final response as a compatible server may send it: no output listed.
        json!({"type": "response.completed", "sequence_number": 10, "response": {"id": "resp_s1", "object": "response", "status": "completed", "model": "o4-mini-2025-04-16", "output": [], "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 150}}}),
    ];
    sse(&events)
}

fn text_events() -> String {
    let message = json!({"id": "msg_s2", "type": "message", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Rain in Oslo.", "annotations": []}]});
    let events = [
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_s2", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"id": "msg_s2", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        json!({"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_s2", "output_index": 0, "content_index": 0, "delta": "Rain "}),
        json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_s2", "output_index": 0, "content_index": 0, "delta": "in Oslo."}),
        json!({"type": "response.output_text.done", "sequence_number": 4, "item_id": "msg_s2", "output_index": 0, "content_index": 0, "text": "Rain in Oslo."}),
        json!({"type": "response.output_item.done", "sequence_number": 5, "output_index": 0, "item": message}),
        json!({"type": "response.completed", "sequence_number": 6, "response": {"id": "resp_s2", "status": "completed", "model": "o4-mini-2025-04-16", "output": [message], "usage": {"input_tokens": 200, "input_tokens_details": {"cached_tokens": 128}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 205}}}),
    ];
    sse(&events)
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn streamed_agent_run_emits_reasoning_call_and_text_deltas() {
    let server = Server::start();
    server.reply(Reply::sse(function_call_events()));
    server.reply(Reply::sse(text_events()));
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(weather_tool(Arc::clone(&calls)))
        .settings(ModelSettings::default().stream(true))
        .build();

    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo?"));
    let mut deltas = Vec::new();
    while let Some(event) = stream.next().await {
        if let AgentEvent::ModelDelta { delta, .. } = event {
            deltas.push(delta);
        }
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, "Rain in Oslo.");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 300,
            output_tokens: 55,
            cache_read_tokens: 64 + 128,
            reasoning_tokens: 30,
            ..Usage::default()
        }
    );
    assert_eq!(
        deltas,
        vec![
            ModelDelta::Reasoning {
                text: "**Weather** ".into()
            },
            ModelDelta::Reasoning {
                text: "look it up".into()
            },
            ModelDelta::ToolCall {
                index: 1,
                id: Some("call_s1".into()),
                name: Some("get_weather".into()),
                arguments: String::new()
            },
            ModelDelta::ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: "{\"city\":".into()
            },
            ModelDelta::ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: "\"Oslo\"}".into()
            },
            // `response.function_call_arguments.done`: the call is complete.
            ModelDelta::ToolCallEnd { index: 1 },
            ModelDelta::Text {
                text: "Rain ".into()
            },
            ModelDelta::Text {
                text: "in Oslo.".into()
            },
        ]
    );
    let requests = server.requests();
    assert_eq!(requests[0].body["stream"], json!(true));
    let input = &requests[1].body["input"];
    assert_eq!(input[1]["type"], "reasoning");
    assert_eq!(input[1]["encrypted_content"], ENCRYPTED);
    assert_eq!(input[2]["type"], "function_call");
    assert_eq!(input[2]["call_id"], "call_s1");
    assert_eq!(input[3]["type"], "function_call_output");
}

#[tokio::test]
async fn a_stream_cut_before_completed_is_incomplete() {
    let server = Server::start();
    let full = Reply::sse(text_events());
    let keep = full.text().find("event: response.completed").unwrap();
    server.reply(full.cut(keep, End::Clean));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().stream(true);
    let err = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert!(provider_error(&err).is_incomplete(), "{err}");
}

#[tokio::test]
async fn errors_are_typed_in_bodies_and_streams() {
    // HTTP error with the documented error object.
    let server = Server::start();
    server.reply(Reply::status(
        400,
        json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}).to_string(),
    ));
    let err = provider(&server)
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let err = provider_error(&err);
    assert!(err.is_context_length_exceeded(), "{err}");
    assert_eq!(err.status(), Some(400));

    // A `response.failed` event carries the response's error.
    let server = Server::start();
    server.reply(Reply::sse(sse(&[
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_f", "status": "in_progress", "output": []}}),
        json!({"type": "response.failed", "sequence_number": 1, "response": {"id": "resp_f", "status": "failed", "output": [], "error": {"code": "server_error", "message": "The model failed to generate a response."}}}),
    ])));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().stream(true);
    let err = provider(&server)
        .oneshot(req.clone())
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let err = provider_error(&err);
    assert!(err.is_server_error(), "{err}");
    assert_eq!(err.code(), Some("server_error"));

    // An `error` event mid-stream.
    let server = Server::start();
    server.reply(Reply::sse(sse(&[
        json!({"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hel"}),
        json!({"type": "error", "sequence_number": 2, "code": "rate_limit_exceeded", "message": "Rate limit reached for o4-mini.", "param": null}),
    ])));
    let err = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert!(provider_error(&err).is_rate_limited(), "{err}");

    // A whole response that failed.
    let server = Server::start();
    server.reply(Reply::json(
        json!({"id": "resp_x", "status": "failed", "output": [], "error": {"code": "invalid_prompt", "message": "Invalid prompt."}}).to_string(),
    ));
    let err = provider(&server)
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert_eq!(provider_error(&err).code(), Some("invalid_prompt"));
}

#[tokio::test]
async fn rate_limits_are_retried_and_incomplete_is_max_tokens() {
    let server = Server::start();
    server.reply(
        Reply::status(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}).to_string(),
        )
        .header("retry-after-ms", "10"),
    );
    server.reply(Reply::json(
        json!({
            "id": "resp_i", "status": "incomplete", "model": "o4-mini-2025-04-16",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "id": "msg_i", "role": "assistant", "status": "incomplete", "content": [{"type": "output_text", "text": "Partial", "annotations": []}]}],
            "usage": {"input_tokens": 10, "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 12}}
        })
        .to_string(),
    ));
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new().base_delay(Duration::from_millis(1)))
        .service(provider(&server));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().max_tokens(16);
    let resp = model
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert_eq!(resp.stop_reason, StopReason::MaxTokens);
    assert_eq!(resp.message.text(), "Partial");
    assert_eq!(resp.meta.finish_reasons, ["max_output_tokens"]);
    assert_eq!(resp.usage.unwrap().reasoning_tokens, 12);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["max_output_tokens"], json!(16));
}

#[tokio::test]
async fn a_stream_past_max_response_bytes_fails() {
    let server = Server::start();
    let delta = "x".repeat(1000);
    let events: Vec<Value> = (0..100)
        .map(|i| json!({"type": "response.output_text.delta", "sequence_number": i, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": delta}))
        .collect();
    server.reply(Reply::sse(sse(&events)));
    let model = OpenAiResponses::builder()
        .base_url(format!("{}/v1", server.url()))
        .client(loopback::client())
        .max_response_bytes(50_000)
        .build();
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().stream(true);
    let err = model
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert!(provider_error(&err).is_malformed_response(), "{err}");
}

const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn an_image_tool_result_is_an_input_image_of_the_function_call_output() {
    let server = Server::start();
    server.reply(Reply::json(function_call_response().to_string()));
    server.reply(Reply::json(text_response().to_string()));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(tool_fn(
            "get_weather",
            "A radar picture of a city",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, BoxError>(ToolOutput::text("", "radar:").with_image(PNG)) },
        ))
        .build();
    agent.run("Radar of Oslo?").await.unwrap();
    let input = &server.requests()[1].body["input"];
    let output = input.as_array().unwrap().last().unwrap();
    assert_eq!(
        output,
        &json!({
            "type": "function_call_output",
            "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k",
            "output": [
                {"type": "input_text", "text": "radar:"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"}
            ]
        })
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn reasoning_items_survive_the_sqlite_store_and_go_back_on_the_next_run() {
    use tower_agent::store::Sqlite;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let server = Server::start();
    server.reply(Reply::json(function_call_response().to_string()));
    server.reply(Reply::json(text_response().to_string()));
    // First agent (and store) : one tool step, then the answer; dropped afterwards.
    {
        let agent = Agent::builder()
            .model(provider(&server))
            .tool(weather_tool(Arc::new(AtomicUsize::new(0))))
            .store(Sqlite::open(&path).unwrap())
            .build();
        let resp = agent
            .run(AgentRequest::new("Weather in Oslo?").thread("t1"))
            .await
            .unwrap();
        assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    }
    // A new agent on the same file continues the thread: both answers' reasoning items are
    // read back from the store and sent again, unmodified.
    server.reply(Reply::json(text_response().to_string()));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(weather_tool(Arc::new(AtomicUsize::new(0))))
        .store(Sqlite::open(&path).unwrap())
        .build();
    agent
        .run(AgentRequest::new("And tomorrow?").thread("t1"))
        .await
        .unwrap();
    let input = server.requests()[2].body["input"].clone();
    let reasoning: Vec<&Value> = input
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .collect();
    assert_eq!(reasoning.len(), 2, "{input:#}");
    assert_eq!(reasoning[0], &reasoning_item());
    assert_eq!(
        reasoning[1]["encrypted_content"],
        json!("gAAAAABoRz4aSecondTurn==")
    );
}

#[tokio::test]
async fn a_document_tool_result_is_an_input_file() {
    let server = Server::start();
    server.reply(Reply::json(text_response().to_string()));
    let pdf = "data:application/pdf;base64,JVBERi0xLjQK";
    provider(&server)
        .oneshot(ModelRequest::new(vec![
            Message::user("Summarize the reports."),
            Message::assistant("").with_tool_calls(vec![tower_agent::message::ToolCall::new(
                "call_1",
                "report",
                json!({}),
            )]),
            Message::tool_result(
                &ToolOutput::text("call_1", "")
                    .with_document(pdf, Some("q3.pdf".into()))
                    .with_document("https://example.com/q4.pdf", None),
            ),
        ]))
        .await
        .unwrap();
    assert_eq!(
        server.requests()[0].body["input"][2],
        json!({
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_file", "file_data": pdf, "filename": "q3.pdf"},
                {"type": "input_file", "file_url": "https://example.com/q4.pdf"}
            ]
        })
    );
}

// ===== peak memory, measured in a child process =====

#[cfg(target_os = "linux")]
mod memory {
    use super::*;
    use crate::support::{passed, peak_rss_kib, reported, reported_number, rerun};

    const MIB: u64 = 1 << 20;
    const CASE: &str = "TOWER_AGENT_RESPONSES_MEMORY_CASE";
    const URL: &str = "TOWER_AGENT_RESPONSES_MEMORY_URL";
    /// What the child costs besides the answer (the binary, its runtime, the client): about
    /// 20 MiB measured for a JSON answer and 25 for a stream, with room to spare (16 and 21 when
    /// this file was a test binary of its own: the larger binary of the group touches more
    /// pages).
    const BASELINE: u64 = 32 * MIB;

    /// The child: one call against the parent's server, then its peak resident memory.
    #[test]
    #[ignore = "the child process of the memory tests, run by them"]
    fn memory_child() {
        let (Ok(case), Ok(url)) = (std::env::var(CASE), std::env::var(URL)) else {
            return;
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let result = rt.block_on(async {
            let mut req = ModelRequest::new(vec![Message::user("Hi")]);
            req.settings = ModelSettings::default().stream(case == "stream");
            OpenAiResponses::builder()
                .base_url(format!("{url}/v1"))
                .client(loopback::client())
                .build()
                .oneshot(req)
                .and_then(tower_agent::model::ModelResponse::collect)
                .await
        });
        match result {
            Ok(resp) => println!("answer of {} bytes", resp.message.text().len()),
            Err(err) => println!("error={}", provider_error(&err)),
        }
        println!("peak_kib={}", peak_rss_kib());
    }

    fn peak_of(case: &str, reply: Reply) -> (u64, String) {
        let server = Server::start();
        server.reply(reply);
        let out = rerun(&crate::support::test_name!("memory_child"))
            .env(CASE, case)
            .env(URL, server.url())
            .output()
            .unwrap();
        let stdout = passed(&out, case);
        let peak = reported_number(&out, "peak_kib") * 1024;
        let error = reported(&stdout, "error").unwrap_or_default().to_owned();
        eprintln!("{case}: peak resident memory {} KiB", peak / 1024);
        (peak, error)
    }

    #[test]
    fn a_300_mb_response_costs_at_most_the_limit() {
        let (peak, error) = peak_of(
            "json",
            Reply::generated(
                200,
                "application/json",
                r#"{"id":"resp_1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":""#,
                b'a',
                300 * MIB,
                r#""}]}]}"#,
            ),
        );
        assert!(error.contains("larger than the limit of 16 MiB"), "{error}");
        assert!(peak < 16 * MIB + BASELINE, "peak {} MiB", peak / MIB);
    }

    #[test]
    fn a_stream_of_100_one_mib_items_costs_at_most_the_limit() {
        // Each `output_item.done` holds a 1 MiB reasoning item: kept until the answer is
        // built, so the stream fails once they pass the 16 MiB limit.
        let blob = "e".repeat(MIB as usize - 200);
        let mut text = String::new();
        for i in 0..100 {
            let event = json!({"type": "response.output_item.done", "output_index": i, "item": {"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": blob}});
            text.push_str(&format!(
                "event: response.output_item.done\ndata: {event}\n\n"
            ));
        }
        let (peak, error) = peak_of(
            "stream",
            Reply::Sse {
                text,
                chunk_bytes: 64 * 1024,
                end: End::Clean,
            },
        );
        assert!(
            error.contains("streamed answer is larger than the limit of 16 MiB"),
            "{error}"
        );
        assert!(peak < 2 * 16 * MIB + BASELINE, "peak {} MiB", peak / MIB);
    }
}

#[tokio::test]
async fn a_built_in_tool_item_is_kept_in_content_order_and_sent_back() {
    // A web search turn as the API reference shows it: reasoning, the `web_search_call` item,
    // the message. Every item is kept at its place and goes back unmodified.
    let web_search_call = json!({
        "type": "web_search_call",
        "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609",
        "status": "completed"
    });
    let mut answer = text_response();
    answer["output"]
        .as_array_mut()
        .unwrap()
        .insert(1, web_search_call.clone());
    let first_reasoning = answer["output"][0].clone();
    let server = Server::start();
    server.reply(Reply::json(answer.to_string()));
    let resp = provider(&server)
        .oneshot(ModelRequest::new(vec![Message::user("Weather in Oslo?")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let m = &resp.message;
    assert_eq!(m.text(), "Oslo: rain, 9°C.");
    assert_eq!(m.content.len(), 3, "{m:?}");
    assert_eq!(
        m.content[0]
            .as_reasoning()
            .and_then(|r| r.opaque_from(ITEM_PROVIDER)),
        Some(&first_reasoning)
    );
    assert_eq!(
        m.content[1].provider_item(ITEM_PROVIDER),
        Some(&web_search_call)
    );
    assert_eq!(m.content[2].as_text(), Some("Oslo: rain, 9°C."));

    server.reply(Reply::json(text_response().to_string()));
    provider(&server)
        .oneshot(ModelRequest::new(vec![
            Message::user("Weather in Oslo?"),
            resp.message.clone(),
            Message::user("Thanks."),
        ]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert_eq!(
        server.requests()[1].body["input"],
        json!([
            {"role": "user", "content": "Weather in Oslo?"},
            first_reasoning,
            web_search_call,
            {"role": "assistant", "content": "Oslo: rain, 9°C."},
            {"role": "user", "content": "Thanks."},
        ])
    );
}

#[tokio::test]
async fn a_thread_stored_with_provider_items_still_reads_and_goes_back() {
    // An assistant message as earlier versions stored it, the reasoning item in
    // `provider_items`: it reads, and the item goes back before the text as it did.
    let stored = json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "Checking."}],
        "tool_calls": [{"id": "call_unLAR8MvFNptuiZK6K6HCy5k", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        "provider_items": [{"provider": "openai.responses", "item": reasoning_item()}]
    });
    let old: Message = serde_json::from_value(stored).unwrap();
    assert_eq!(old.text(), "Checking.");
    assert_eq!(old.reasoning().count(), 1);
    let server = Server::start();
    server.reply(Reply::json(text_response().to_string()));
    provider(&server)
        .oneshot(ModelRequest::new(vec![
            Message::user("Weather in Oslo?"),
            old,
            Message::tool_result(&ToolOutput::text("call_unLAR8MvFNptuiZK6K6HCy5k", "rain")),
        ]))
        .await
        .unwrap();
    let input = &server.requests()[0].body["input"];
    assert_eq!(input[1], reasoning_item());
    assert_eq!(
        input[2],
        json!({"role": "assistant", "content": "Checking."})
    );
    assert_eq!(input[3]["type"], json!("function_call"));
}

#[cfg(feature = "anthropic")]
#[tokio::test]
async fn opaque_reasoning_goes_to_its_own_provider_only() {
    use tower_agent::{message::Reasoning, model::Anthropic};

    // Responses reasoning (summary + encrypted item) and Anthropic signed thinking in one
    // history: each provider receives its own and never the other's.
    let server = Server::start();
    let from_responses = first_answer(&server).await.message;
    let from_anthropic = Message::assistant("Let me look.").with_reasoning([Reasoning::signed(
        "Oslo, so weather.",
        "EqQBCgIYAhIM1gbcDa9GJwZA",
    )]);
    let history = || {
        ModelRequest::new(vec![
            Message::user("Weather in Oslo?"),
            from_responses.clone(),
            Message::tool_result(&ToolOutput::text("call_unLAR8MvFNptuiZK6K6HCy5k", "rain")),
            from_anthropic.clone(),
            Message::user("And tomorrow?"),
        ])
    };

    server.reply(Reply::json(text_response().to_string()));
    provider(&server)
        .oneshot(history())
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let to_responses = String::from_utf8(server.requests()[1].raw.to_vec()).unwrap();
    assert!(to_responses.contains(ENCRYPTED), "{to_responses}");
    assert!(
        !to_responses.contains("EqQBCgIYAhIM1gbcDa9GJwZA"),
        "{to_responses}"
    );
    assert!(
        !to_responses.contains("Oslo, so weather."),
        "{to_responses}"
    );

    server.reply(Reply::json(
        json!({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
               "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})
        .to_string(),
    ));
    Anthropic::builder()
        .base_url(server.url())
        .client(loopback::client())
        .build()
        .oneshot(history())
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let to_anthropic = &server.requests()[2];
    let raw = String::from_utf8(to_anthropic.raw.to_vec()).unwrap();
    assert!(!raw.contains(ENCRYPTED), "{raw}");
    assert!(!raw.contains("Checking the weather"), "{raw}");
    assert_eq!(
        to_anthropic.body["messages"][3]["content"][0],
        json!({"type": "thinking", "thinking": "Oslo, so weather.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"})
    );
}

/// `ModelSettings::reasoning_effort` goes as `reasoning.effort`, beside a summary asked for
/// (API reference, "Create a model response": `reasoning: {effort, summary}`).
#[tokio::test]
async fn the_effort_is_reasoning_effort() {
    let server = Server::start();
    server.reply(Reply::json(text_response().to_string()));
    server.reply(Reply::json(text_response().to_string()));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings =
        ModelSettings::default().reasoning_effort(tower_agent::model::ReasoningEffort::High);
    provider(&server)
        .oneshot(req.clone())
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let summarising = OpenAiResponses::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test-resp")
        .model("o4-mini")
        .reasoning_summary("auto")
        .client(loopback::client())
        .build();
    summarising
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].body["reasoning"], json!({"effort": "high"}));
    assert_eq!(
        requests[1].body["reasoning"],
        json!({"summary": "auto", "effort": "high"})
    );
}
