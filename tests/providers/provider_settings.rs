//! Issue 13, items 2, 3 and 5, against loopback servers speaking the Chat Completions and
//! Messages APIs: each setting in the request body as the APIs document it (or a clear error),
//! structured output into a Rust type on both providers, refusals, `pause_turn` continued,
//! every provider's "context too long" typed, and `SummarizeLayer` compacting and retrying once
//! on it. Payloads are written from the providers' API references.

use crate::loopback;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use loopback::{Reply, Server};
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::Outcome,
    layers::summarize::SummarizeLayer,
    message::{Message, Role, StopReason, ToolSpec},
    model::{
        Anthropic, ModelRequest, ModelResponse, ModelSettings, OpenAiChat, ProviderError,
        ResponseFormat, ScriptedModel, ToolChoice,
    },
    store::{MemoryStore, Thread, ThreadStore},
};

fn openai(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .client(loopback::client())
        .build()
}

fn anthropic(server: &Server) -> Anthropic {
    Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .client(loopback::client())
        .prompt_caching(false) // these tests check the request shape; caching has its own tests
        .build()
}

fn openai_text(text: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
}

fn anthropic_text(text: &str, stop_reason: &str) -> String {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })
    .to_string()
}

fn request_with_tool(settings: ModelSettings) -> ModelRequest {
    let mut req = ModelRequest::new(vec![Message::user("Weather in Oslo?")]);
    req.tools = Arc::new(vec![ToolSpec::new(
        "get_weather",
        "Current weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    )]);
    req.settings = settings;
    req
}

async fn call<S>(mut model: S, req: ModelRequest) -> Result<ModelResponse, BoxError>
where
    S: Service<ModelRequest, Response = ModelResponse, Error = BoxError>,
{
    model.ready().await?.call(req).await
}

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    city: String,
    celsius: i32,
    rain: bool,
}

// ===== settings =====

#[tokio::test]
async fn openai_settings_are_in_the_body_as_documented() {
    let server = Server::start();
    for _ in 0..4 {
        server.reply(Reply::json(openai_text("ok")));
    }
    let settings = ModelSettings::default()
        .tool_choice(ToolChoice::tool("get_weather"))
        .parallel_tool_calls(false)
        .stop(["\n\nUser:", "END"])
        .top_p(0.25)
        .seed(42)
        .prompt_cache_key("thread-7")
        .extra_body(json!({"service_tier": "flex", "top_p": 0.5, "metadata": {"run": "t1"}}));
    call(openai(&server), request_with_tool(settings.clone()))
        .await
        .unwrap();
    for choice in [ToolChoice::None, ToolChoice::Required, ToolChoice::Auto] {
        let settings = ModelSettings::default().tool_choice(choice);
        call(openai(&server), request_with_tool(settings))
            .await
            .unwrap();
    }
    let sent = server.requests();
    let body = &sent[0].body;
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(body["parallel_tool_calls"], json!(false));
    assert_eq!(body["stop"], json!(["\n\nUser:", "END"]));
    assert_eq!(body["seed"], json!(42));
    assert_eq!(body["prompt_cache_key"], json!("thread-7"));
    // Extra fields are merged at the top and win over the built ones.
    assert_eq!(body["top_p"], json!(0.5));
    assert_eq!(body["service_tier"], json!("flex"));
    assert_eq!(body["metadata"], json!({"run": "t1"}));
    assert_eq!(sent[1].body["tool_choice"], json!("none"));
    assert_eq!(sent[2].body["tool_choice"], json!("required"));
    assert_eq!(sent[3].body["tool_choice"], json!("auto"));
    assert!(sent[3].body.get("parallel_tool_calls").is_none());
    assert!(sent[3].body.get("stop").is_none());

    // Without tools, neither tool_choice nor parallel_tool_calls is sent (the API rejects
    // them), but top_p is.
    server.reply(Reply::json(openai_text("ok")));
    let mut req = ModelRequest::new(vec![Message::user("hi")]);
    req.settings = settings.extra_body(json!({}));
    call(openai(&server), req).await.unwrap();
    let body = &server.requests()[4].body;
    assert!(body.get("tool_choice").is_none() && body.get("parallel_tool_calls").is_none());
    assert_eq!(body["top_p"], json!(0.25));
}

#[tokio::test]
async fn anthropic_settings_are_in_the_body_as_documented() {
    let server = Server::start();
    for _ in 0..3 {
        server.reply(Reply::json(anthropic_text("ok", "end_turn")));
    }
    let settings = ModelSettings::default()
        .tool_choice(ToolChoice::tool("get_weather"))
        .parallel_tool_calls(false)
        .stop(["END"])
        .top_p(0.25)
        .extra_body(json!({"metadata": {"user_id": "u-1"}, "top_k": 5}));
    call(anthropic(&server), request_with_tool(settings))
        .await
        .unwrap();
    call(
        anthropic(&server),
        request_with_tool(ModelSettings::default().tool_choice(ToolChoice::Required)),
    )
    .await
    .unwrap();
    call(
        anthropic(&server),
        request_with_tool(ModelSettings::default().tool_choice(ToolChoice::None)),
    )
    .await
    .unwrap();
    let sent = server.requests();
    let body = &sent[0].body;
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true})
    );
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["top_p"], json!(0.25));
    assert_eq!(body["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(body["top_k"], json!(5));
    assert_eq!(sent[1].body["tool_choice"], json!({"type": "any"}));
    assert_eq!(sent[2].body["tool_choice"], json!({"type": "none"}));

    // The Messages API has no seed: a clear error, and nothing is sent.
    let err = call(
        anthropic(&server),
        request_with_tool(ModelSettings::default().seed(7)),
    )
    .await
    .unwrap_err();
    let e = ProviderError::find(&*err).expect("a ProviderError");
    assert!(e.is_invalid_request(), "{e:?}");
    assert!(e.to_string().contains("seed"), "{e}");
    assert_eq!(server.requests().len(), 3);
}

// ===== structured output =====

#[tokio::test]
async fn structured_output_into_a_rust_type_on_openai() {
    let server = Server::start();
    server.reply(Reply::json(openai_text(
        r#"{"city":"Oslo","celsius":9,"rain":true}"#,
    )));
    let agent = Agent::builder()
        .model(openai(&server))
        .settings(
            ModelSettings::default().response_format(ResponseFormat::of::<Weather>().strict(true)),
        )
        .build();
    let resp = agent.run("Weather in Oslo as JSON").await.unwrap();
    let weather: Weather = resp.parse().unwrap();
    assert_eq!(
        weather,
        Weather {
            city: "Oslo".into(),
            celsius: 9,
            rain: true
        }
    );
    let body = &server.requests()[0].body;
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "Weather");
    assert_eq!(format["json_schema"]["strict"], true);
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["celsius"]["type"], "integer");
    assert_eq!(schema["required"], json!(["city", "celsius", "rain"]));
    assert!(schema.get("$schema").is_none());
}

#[tokio::test]
async fn structured_output_into_a_rust_type_on_anthropic() {
    let server = Server::start();
    server.reply(Reply::json(anthropic_text(
        r#"{"city":"Lisbon","celsius":24,"rain":false}"#,
        "end_turn",
    )));
    // A second run whose answer does not match the type: a clear error, not a panic.
    server.reply(Reply::json(anthropic_text(
        r#"{"city":"Lisbon"}"#,
        "end_turn",
    )));
    let agent = Agent::builder()
        .model(anthropic(&server))
        .settings(ModelSettings::default().response_format(ResponseFormat::of::<Weather>()))
        .build();
    let weather: Weather = agent.run("Lisbon?").await.unwrap().parse().unwrap();
    assert_eq!(weather.city, "Lisbon");
    assert_eq!(weather.celsius, 24);
    let body = &server.requests()[0].body;
    let format = &body["output_config"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["schema"]["properties"]["rain"]["type"], "boolean");

    let err = agent
        .run("Lisbon?")
        .await
        .unwrap()
        .parse::<Weather>()
        .unwrap_err();
    assert!(err.to_string().contains("missing field `celsius`"), "{err}");
}

// ===== stop reasons =====

#[tokio::test]
async fn an_openai_refusal_is_its_own_outcome_not_the_text() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "refusal": "I'm sorry, I can't help with that."}, "finish_reason": "stop"}],
        })
        .to_string(),
    ));
    let resp = call(openai(&server), ModelRequest::new(vec![Message::user("x")]))
        .await
        .unwrap();
    assert_eq!(resp.stop_reason, StopReason::Refusal);
    assert_eq!(resp.message.text(), "");
    assert_eq!(
        resp.meta.refusal.as_deref(),
        Some("I'm sorry, I can't help with that.")
    );

    // Streamed: refusal deltas are kept apart too; a whole run ends `Refused`.
    server.reply(Reply::openai_events(&json!([
        {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "refusal": ""}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"refusal": "I can't "}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"refusal": "do that."}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        "[DONE]",
    ])));
    let agent = Agent::builder()
        .model(openai(&server))
        .settings(ModelSettings::default().stream(true))
        .build();
    let resp = agent.run("x").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Refused {
            refusal: "I can't do that.".into()
        }
    );
    assert_eq!(resp.text, "");
    assert!(resp.parse::<Weather>().unwrap_err().is_empty_answer());
}

#[tokio::test]
async fn an_anthropic_refusal_ends_the_run_refused() {
    let server = Server::start();
    server.reply(Reply::json(anthropic_text("I won't", "refusal")));
    let agent = Agent::builder().model(anthropic(&server)).build();
    let resp = agent.run("x").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Refused {
            refusal: "I won't".into()
        }
    );
    assert_eq!(resp.steps, 1);
}

/// Runs `prompt` on an agent over `server`'s Anthropic API (whose first scripted answer
/// pauses), with `settings`, and checks that the run finished with `answer` after calling
/// the model again; returns the run and the two requests sent.
async fn run_paused(
    server: &Server,
    settings: ModelSettings,
    prompt: &str,
    answer: &str,
) -> (tower_agent::AgentResponse, Vec<loopback::Recorded>) {
    server.reply(Reply::json(anthropic_text(answer, "end_turn")));
    let agent = Agent::builder()
        .model(anthropic(server))
        .settings(settings)
        .build();
    let resp = agent.run(prompt).await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, answer);
    assert_eq!(resp.steps, 2);
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "the loop called the model again");
    (resp, sent)
}

#[tokio::test]
async fn pause_turn_is_continued_with_the_paused_content() {
    let server = Server::start();
    server.reply(Reply::json(anthropic_text(
        "Searching the web for that…",
        "pause_turn",
    )));
    let (_, sent) = run_paused(
        &server,
        ModelSettings::default(),
        "How many people live in Oslo?",
        "Oslo has 709,037 people.",
    )
    .await;
    // The second request is the first plus the paused assistant turn, as it was: no user
    // message in between.
    assert_eq!(
        sent[1].body["messages"],
        json!([
            {"role": "user", "content": "How many people live in Oslo?"},
            {"role": "assistant", "content": "Searching the web for that…"},
        ])
    );
}

/// The content of a web-search turn as the web search tool's documentation shows it: text, the
/// `server_tool_use` block, its `web_search_tool_result` (with `encrypted_content`, which the
/// API needs back to continue), more text.
fn web_search_blocks() -> Vec<Value> {
    vec![
        json!({"type": "text", "text": "I'll search for when Claude Shannon was born."}),
        json!({
            "type": "server_tool_use",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "name": "web_search",
            "input": {"query": "claude shannon birth date"}
        }),
        json!({
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "content": [{
                "type": "web_search_result",
                "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
                "title": "Claude Shannon - Wikipedia",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
                "page_age": "April 30, 2025"
            }]
        }),
        json!({"type": "text", "text": "Based on the search results, "}),
    ]
}

/// Where each of `blocks` (as serde_json writes it) is in `raw`, which must hold them all in
/// this order.
fn positions_in_order(raw: &[u8], blocks: &[Value]) -> Vec<usize> {
    let raw = std::str::from_utf8(raw).unwrap();
    let mut from = 0;
    blocks
        .iter()
        .map(|block| {
            let bytes = block.to_string();
            let at = raw[from..].find(&bytes).unwrap_or_else(|| {
                panic!("{bytes} is not in the request after byte {from}: {raw}")
            }) + from;
            from = at + bytes.len();
            at
        })
        .collect()
}

#[tokio::test]
async fn pause_turn_sends_the_server_tool_blocks_back_in_order() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": web_search_blocks(),
            "stop_reason": "pause_turn", "stop_sequence": null,
            "usage": {"input_tokens": 2679, "output_tokens": 110, "server_tool_use": {"web_search_requests": 1}}
        })
        .to_string(),
    ));
    let (resp, sent) = run_paused(
        &server,
        ModelSettings::default(),
        "When was Claude Shannon born?",
        "Claude Shannon was born on April 30, 1916.",
    )
    .await;
    // The paused turn goes back as it came: the same blocks in the same order, the server
    // tool's call and result whole among the text.
    let messages = sent[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": web_search_blocks()})
    );
    let at = positions_in_order(&sent[1].raw, &web_search_blocks()[1..3]);
    assert!(at[0] < at[1]);
    // The blocks are not text: the paused answer's text is its text blocks only.
    let history = &resp.messages;
    let paused = history.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(
        paused.text(),
        "I'll search for when Claude Shannon was born.Based on the search results, "
    );
}

#[tokio::test]
async fn a_streamed_pause_turn_keeps_the_server_tool_blocks_whole() {
    // The events of a streamed web search, as the web search tool's documentation shows them.
    let events = json!([
        {"event": "message_start", "data": {"type": "message_start", "message": {"id": "msg_abc123", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}},
        {"event": "content_block_start", "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I'll search for that."}}},
        {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}},
        {"event": "content_block_start", "data": {"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use", "id": "srvtoolu_xyz789", "name": "web_search"}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"query\":\"latest quantum "}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "computing breakthroughs 2025\"}"}}},
        {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 1}},
        {"event": "content_block_start", "data": {"type": "content_block_start", "index": 2, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_xyz789", "content": [{"type": "web_search_result", "title": "Quantum Computing Breakthroughs in 2025", "url": "https://example.com", "encrypted_content": "EqgfCioIARgBIiQ3YTAw"}]}}},
        {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 2}},
        {"event": "message_delta", "data": {"type": "message_delta", "delta": {"stop_reason": "pause_turn", "stop_sequence": null}, "usage": {"output_tokens": 89}}},
        {"event": "message_stop", "data": {"type": "message_stop"}}
    ]);
    let server = Server::start();
    server.reply(Reply::anthropic_events(&events));
    let (_, sent) = run_paused(
        &server,
        ModelSettings::default().stream(true),
        "Latest quantum computing breakthroughs?",
        "Here is what I found.",
    )
    .await;
    let expected = [
        json!({"type": "text", "text": "I'll search for that."}),
        json!({
            "type": "server_tool_use", "id": "srvtoolu_xyz789", "name": "web_search",
            "input": {"query": "latest quantum computing breakthroughs 2025"}
        }),
        events[8]["data"]["content_block"].clone(),
    ];
    assert_eq!(
        sent[1].body["messages"][1],
        json!({"role": "assistant", "content": expected})
    );
    positions_in_order(&sent[1].raw, &expected[1..]);
}

#[tokio::test]
async fn server_tool_blocks_go_to_anthropic_only() {
    // A paused Anthropic answer, then the same history sent to Chat Completions: the blocks
    // are Anthropic's and stay out of the other provider's request.
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "type": "message", "role": "assistant", "content": web_search_blocks(),
            "stop_reason": "pause_turn", "usage": {"input_tokens": 1, "output_tokens": 1}
        })
        .to_string(),
    ));
    let resp = call(
        anthropic(&server),
        ModelRequest::new(vec![Message::user("When was Claude Shannon born?")]),
    )
    .await
    .unwrap();
    assert_eq!(resp.stop_reason, StopReason::PauseTurn);
    // Kept through the thread store's serde form.
    let stored: Message =
        serde_json::from_str(&serde_json::to_string(&resp.message).unwrap()).unwrap();
    assert_eq!(stored, resp.message);
    server.reply(Reply::json(openai_text("ok")));
    call(
        openai(&server),
        ModelRequest::new(vec![Message::user("When was Claude Shannon born?"), stored]),
    )
    .await
    .unwrap();
    let body = String::from_utf8(server.requests()[1].raw.to_vec()).unwrap();
    assert!(!body.contains("srvtoolu_"), "{body}");
    assert!(!body.contains("EqgfCioIARgB"), "{body}");
    assert!(body.contains("Based on the search results"), "{body}");
}

#[tokio::test]
async fn a_streamed_server_tool_block_is_bounded_by_max_response_bytes() {
    // A `server_tool_use` whose input grows without end (1 KiB deltas): the block is kept
    // whole, so its deltas count toward `max_response_bytes` and the call fails past it.
    let mut events = vec![
        json!({"event": "message_start", "data": {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1}}}}),
        json!({"event": "content_block_start", "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}}}),
    ];
    let piece = "a".repeat(1024);
    events.extend((0..200).map(|_| {
        json!({"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}}})
    }));
    let server = Server::start();
    server.reply(Reply::anthropic_events(&Value::Array(events)));
    let model = Anthropic::builder()
        .base_url(server.url())
        .client(loopback::client())
        .max_response_bytes(64 * 1024)
        .build();
    let mut req = ModelRequest::new(vec![Message::user("Search.")]);
    req.settings = ModelSettings::default().stream(true);
    let err = call(model, req).await.unwrap_err();
    let err = ProviderError::find(&*err).expect("a ProviderError");
    assert!(err.is_malformed_response(), "{err}");
}

// ===== context length =====

/// Error bodies for "the conversation is too long", written from each server's documentation
/// and source: (server, status, body).
fn context_length_errors() -> Vec<(&'static str, u16, Value)> {
    vec![
        (
            "openai",
            400,
            json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        ),
        (
            "openai responses",
            400,
            json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.", "type": "invalid_request_error", "param": "input", "code": null}}),
        ),
        (
            "anthropic prompt",
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"}}),
        ),
        (
            "anthropic max_tokens",
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 197000 + 21333 > 200000, decrease input length or `max_tokens` and try again"}}),
        ),
        (
            "vllm",
            400,
            json!({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.", "type": "BadRequestError", "param": null, "code": 400}),
        ),
        (
            "llama.cpp",
            400,
            json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}),
        ),
        (
            "ollama",
            400,
            json!({"error": "the input length exceeds the context length"}),
        ),
        (
            "deepseek",
            400,
            json!({"error": {"message": "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (140000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.", "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}}),
        ),
    ]
}

#[tokio::test]
async fn every_providers_context_length_error_is_typed() {
    for (name, status, body) in context_length_errors() {
        let server = Server::start();
        server.reply(Reply::status(status, body.to_string()));
        let err = if name.starts_with("anthropic") {
            call(
                anthropic(&server),
                ModelRequest::new(vec![Message::user("x")]),
            )
            .await
        } else {
            call(openai(&server), ModelRequest::new(vec![Message::user("x")])).await
        }
        .unwrap_err();
        let e = ProviderError::find(&*err).expect("a ProviderError");
        assert!(e.is_context_length_exceeded(), "{name}: {e:?}");
        assert!(e.is_invalid_request(), "{name}");
    }
    // Another 400 is not context length.
    let server = Server::start();
    server.reply(Reply::status(
        400,
        json!({"error": {"message": "Unknown parameter: 'foo'.", "type": "invalid_request_error", "code": "unknown_parameter"}}).to_string(),
    ));
    let err = call(openai(&server), ModelRequest::new(vec![Message::user("x")]))
        .await
        .unwrap_err();
    let e = ProviderError::find(&*err).unwrap();
    assert!(e.is_invalid_request() && !e.is_context_length_exceeded());
}

/// A thread of `n` user/assistant messages after a system message.
async fn long_thread(store: &MemoryStore, id: &str, n: usize) {
    let mut thread = Thread::new(id);
    thread.messages.push(Message::system("You are kind."));
    for i in 0..n {
        let text = format!("message {i}: {}", "lorem ipsum ".repeat(10));
        thread.messages.push(if i % 2 == 0 {
            Message::user(text)
        } else {
            Message::assistant(text)
        });
    }
    store.save(&thread).await.unwrap();
}

fn counting_summarizer(calls: &Arc<AtomicUsize>) -> ScriptedModel {
    let calls = Arc::clone(calls);
    ScriptedModel::new().otherwise(move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(ModelResponse::text("SUMMARY of the early talk"))
    })
}

#[tokio::test]
async fn context_length_compacts_and_retries_once_then_succeeds() {
    let server = Server::start();
    let (_, _, llama) = context_length_errors().remove(5);
    server.reply(Reply::status(400, llama.to_string()));
    server.reply(Reply::json(openai_text("All caught up.")));
    let store = MemoryStore::new();
    long_thread(&store, "t", 30).await;
    let summarized = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                // The estimate (a 128k window) sees no need to compact: only the server knows.
                .layer(SummarizeLayer::new(counting_summarizer(&summarized)))
                .service(openai(&server)),
        )
        .store(store.clone())
        .build();
    let resp = agent
        .run(AgentRequest::new("go on").thread("t"))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, "All caught up.");
    assert_eq!(summarized.load(Ordering::SeqCst), 1);
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "one retry");
    let first = sent[0].body["messages"].as_array().unwrap().len();
    let second = sent[1].body["messages"].as_array().unwrap();
    assert_eq!(first, 32);
    assert!(second.len() < first / 2, "{}", second.len());
    assert!(
        second[1]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY of the early talk")
    );
    // The compaction is kept in the thread (so the next run starts compacted).
    let saved = store.get("t").unwrap();
    assert!(saved.messages[1].text().contains("SUMMARY"));
    assert_eq!(saved.messages.last().unwrap().text(), "All caught up.");
}

#[tokio::test]
async fn a_second_context_length_failure_is_returned_not_looped() {
    let server = Server::start();
    let (_, _, anthropic_body) = context_length_errors().remove(2);
    for _ in 0..3 {
        server.reply(Reply::status(400, anthropic_body.to_string()));
    }
    let store = MemoryStore::new();
    long_thread(&store, "t", 30).await;
    let summarized = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(SummarizeLayer::new(counting_summarizer(&summarized)))
                .service(anthropic(&server)),
        )
        .store(store)
        .build();
    let resp = agent
        .run(AgentRequest::new("go on").thread("t"))
        .await
        .unwrap();
    match &resp.outcome {
        Outcome::Aborted { error } => assert!(error.contains("prompt is too long"), "{error}"),
        other => panic!("expected the second failure, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 2, "exactly one retry");
    assert_eq!(summarized.load(Ordering::SeqCst), 1);

    // Turned off: the first failure is returned as it is.
    let server = Server::start();
    server.reply(Reply::status(400, anthropic_body.to_string()));
    let store = MemoryStore::new();
    long_thread(&store, "t", 30).await;
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(
                    SummarizeLayer::new(counting_summarizer(&summarized))
                        .retry_on_context_length(false),
                )
                .service(anthropic(&server)),
        )
        .store(store)
        .build();
    let resp = agent
        .run(AgentRequest::new("go on").thread("t"))
        .await
        .unwrap();
    assert!(matches!(resp.outcome, Outcome::Aborted { .. }));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(summarized.load(Ordering::SeqCst), 1);
}
