//! Reasoning models end to end, against loopback servers with payloads written from the
//! providers' documentation: Anthropic extended thinking with tool use (signed `thinking` and
//! `redacted_thinking` blocks sent back unmodified before `tool_use`, streamed thinking deltas,
//! a thread with reasoning saved in SQLite and continued), DeepSeek's thinking mode with a tool
//! call (`reasoning_content` sent back on tool-call turns only), `api.openai.com` never getting
//! reasoning, Ollama streams with every tool call at `index: 0`, and the response cap applied to
//! reasoning.

use crate::loopback;
use futures_util::TryFutureExt as _;

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use futures_util::StreamExt;
use loopback::{Reply, Server};
use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, ModelDelta},
    message::{Content, Reasoning, Role},
    model::{
        ModelSettings, ProviderError, ReasoningEffort,
        anthropic::Anthropic,
        openai::{OpenAiChat, ReasoningReplay},
    },
    tool::{Tool, tool_fn},
};

fn weather_tool(seen: Arc<Mutex<Vec<String>>>) -> impl Tool {
    tool_fn(
        "get_weather",
        "Current weather in a city",
        json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"]
        }),
        move |args, _ctx| {
            let seen = Arc::clone(&seen);
            async move {
                let city = args["city"].as_str().unwrap_or_default().to_owned();
                seen.lock().unwrap().push(city.clone());
                Ok::<_, BoxError>(match city.as_str() {
                    "Oslo" => "rain, 9°C",
                    _ => "sunny, 24°C",
                })
            }
        },
    )
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

fn deltas(events: &[AgentEvent]) -> Vec<ModelDelta> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

fn reasoning_deltas(events: &[AgentEvent]) -> String {
    deltas(events)
        .into_iter()
        .filter_map(|d| match d {
            ModelDelta::Reasoning { text } => Some(text),
            _ => None,
        })
        .collect()
}

// ===== Anthropic =====

/// Thinking text with characters JSON escapes, so that "unmodified" means something.
const THINKING: &str = "The user wants Oslo's weather.\nI should call get_weather with {\"city\": \"Oslo\"} — then answer in °C.";
const SIGNATURE: &str =
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL==";
const REDACTED: &str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj";

fn thinking_block() -> Value {
    json!({ "type": "thinking", "thinking": THINKING, "signature": SIGNATURE })
}

fn redacted_block() -> Value {
    json!({ "type": "redacted_thinking", "data": REDACTED })
}

fn tool_use_block() -> Value {
    json!({ "type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": { "city": "Oslo" } })
}

#[tokio::test]
async fn anthropic_thinking_blocks_go_back_unmodified_before_tool_use() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [thinking_block(), redacted_block(), { "type": "text", "text": "Let me check." }, tool_use_block()],
            "stop_reason": "tool_use",
            "usage": { "input_tokens": 412, "output_tokens": 250 }
        })
        .to_string(),
    ));
    server.reply(Reply::json(
        json!({
            "id": "msg_01B",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": "Oslo: rain, 9°C." }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 700, "output_tokens": 12 }
        })
        .to_string(),
    ));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(anthropic(&server))
        .tool(weather_tool(Arc::clone(&seen)))
        .system_prompt("You are a weather bot.")
        .settings(ModelSettings::default().thinking_budget(10000))
        .build();
    let resp = agent
        .run(AgentRequest::new("Weather in Oslo?").thread("a"))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.text, "Oslo: rain, 9°C.");
    assert_eq!(*seen.lock().unwrap(), ["Oslo"]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body["thinking"],
        json!({ "type": "enabled", "budget_tokens": 10000 })
    );
    // The assistant turn goes back with its thinking blocks first, exactly as they came.
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"],
        json!([thinking_block(), redacted_block(), { "type": "text", "text": "Let me check." }, tool_use_block()])
    );
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    // The reasoning is on the message, not in its text.
    let history = agent.store().load("a").await.unwrap().unwrap().messages;
    let assistant = &history[2];
    assert_eq!(assistant.text(), "Let me check.");
    assert_eq!(
        assistant.reasoning().cloned().collect::<Vec<_>>(),
        [
            Reasoning::signed(THINKING, SIGNATURE),
            Reasoning::redacted(REDACTED)
        ]
    );
}

/// The documented stream of a thinking block, a redacted block and a tool call, cut into 7-byte
/// chunks by the server.
fn anthropic_thinking_stream() -> Value {
    let (a, b) = THINKING.split_at(40);
    let (s1, s2) = SIGNATURE.split_at(30);
    json!([
        { "event": "message_start", "data": { "type": "message_start", "message": { "id": "msg_01S", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": { "input_tokens": 412, "output_tokens": 1 } } } },
        { "event": "content_block_start", "data": { "type": "content_block_start", "index": 0, "content_block": { "type": "thinking", "thinking": "" } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": a } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": b } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "signature_delta", "signature": s1 } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "signature_delta", "signature": s2 } } },
        { "event": "content_block_stop", "data": { "type": "content_block_stop", "index": 0 } },
        { "event": "content_block_start", "data": { "type": "content_block_start", "index": 1, "content_block": redacted_block() } },
        { "event": "content_block_stop", "data": { "type": "content_block_stop", "index": 1 } },
        { "event": "content_block_start", "data": { "type": "content_block_start", "index": 2, "content_block": { "type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {} } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 2, "delta": { "type": "input_json_delta", "partial_json": "{\"city\": \"Os" } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 2, "delta": { "type": "input_json_delta", "partial_json": "lo\"}" } } },
        { "event": "content_block_stop", "data": { "type": "content_block_stop", "index": 2 } },
        { "event": "message_delta", "data": { "type": "message_delta", "delta": { "stop_reason": "tool_use", "stop_sequence": null }, "usage": { "output_tokens": 250 } } },
        { "event": "message_stop", "data": { "type": "message_stop" } }
    ])
}

fn anthropic_text_stream(text: &str) -> Value {
    json!([
        { "event": "message_start", "data": { "type": "message_start", "message": { "id": "msg_01T", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": null, "usage": { "input_tokens": 700, "output_tokens": 1 } } } },
        { "event": "content_block_start", "data": { "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } } },
        { "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": text } } },
        { "event": "content_block_stop", "data": { "type": "content_block_stop", "index": 0 } },
        { "event": "message_delta", "data": { "type": "message_delta", "delta": { "stop_reason": "end_turn", "stop_sequence": null }, "usage": { "output_tokens": 9 } } },
        { "event": "message_stop", "data": { "type": "message_stop" } }
    ])
}

#[tokio::test]
async fn anthropic_streamed_thinking_reaches_the_stream_and_goes_back_signed() {
    let server = Server::start();
    server.reply(Reply::anthropic_events(&anthropic_thinking_stream()));
    server.reply(Reply::anthropic_events(&anthropic_text_stream(
        "Oslo: rain, 9°C.",
    )));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(anthropic(&server))
        .tool(weather_tool(Arc::clone(&seen)))
        .settings(ModelSettings::default().thinking_budget(2048).stream(true))
        .build();
    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo?"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert_eq!(resp.text, "Oslo: rain, 9°C.");
    assert_eq!(reasoning_deltas(&events), THINKING);
    // Reasoning is never text.
    assert!(deltas(&events).iter().all(|d| match d {
        ModelDelta::Text { text } => !text.contains("get_weather"),
        _ => true,
    }));
    let messages = server.requests()[1].body["messages"].clone();
    assert_eq!(
        messages[1]["content"],
        json!([thinking_block(), redacted_block(), tool_use_block()])
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_thread_with_reasoning_survives_sqlite_and_goes_back_signed() {
    use tower_agent::store::{Sqlite, ThreadStore};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let server = Server::start();
    server.reply(Reply::anthropic_events(&anthropic_thinking_stream()));
    server.reply(Reply::anthropic_events(&anthropic_text_stream(
        "Oslo: rain, 9°C.",
    )));
    server.reply(Reply::anthropic_events(&anthropic_text_stream(
        "You asked about Oslo.",
    )));
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let agent = Agent::builder()
            .model(anthropic(&server))
            .tool(weather_tool(Arc::clone(&seen)))
            .settings(ModelSettings::default().thinking_budget(2048).stream(true))
            .store(Sqlite::open(&path).unwrap())
            .build();
        let resp = agent
            .run(AgentRequest::new("Weather in Oslo?").thread("t1"))
            .await
            .unwrap();
        assert_eq!(resp.text, "Oslo: rain, 9°C.");
    }
    // Another store on the file: the reasoning is there, signature and all.
    let store = Sqlite::open(&path).unwrap();
    let thread = store.load("t1").await.unwrap().expect("saved");
    let assistant = thread
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .unwrap();
    assert_eq!(
        assistant.content,
        [
            Content::Reasoning(Reasoning::signed(THINKING, SIGNATURE)),
            Content::Reasoning(Reasoning::redacted(REDACTED)),
        ]
    );
    // …and a new run on it sends the blocks back unmodified.
    let agent = Agent::builder()
        .model(anthropic(&server))
        .tool(weather_tool(seen))
        .settings(ModelSettings::default().thinking_budget(2048).stream(true))
        .store(store)
        .build();
    let resp = agent
        .run(AgentRequest::new("What did I ask?").thread("t1"))
        .await
        .unwrap();
    assert_eq!(resp.text, "You asked about Oslo.");
    let third = &server.requests()[2].body;
    assert_eq!(
        third["messages"][1]["content"],
        json!([thinking_block(), redacted_block(), tool_use_block()])
    );
}

#[tokio::test]
async fn anthropic_reasoning_from_other_providers_is_not_sent() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({ "type": "message", "content": [{ "type": "text", "text": "ok" }], "stop_reason": "end_turn" })
            .to_string(),
    ));
    let mut req = tower_agent::model::ModelRequest::new(vec![
        tower_agent::message::Message::user("Hi"),
        tower_agent::message::Message::assistant("Hello.")
            .with_reasoning([Reasoning::text("unsigned reasoning from DeepSeek")]),
        tower_agent::message::Message::user("Again"),
    ]);
    req.settings = ModelSettings::default();
    let mut model = anthropic(&server);
    tower::ServiceExt::oneshot(&mut model, req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert_eq!(
        server.requests()[0].body["messages"][1],
        json!({ "role": "assistant", "content": "Hello." })
    );
}

// ===== OpenAI-compatible: DeepSeek =====

fn deepseek(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(server.url())
        .api_key("sk-deepseek")
        .model("deepseek-reasoner")
        .client(loopback::client())
        .build()
}

const R1: &str = "The user asks about Oslo. I need the weather tool.";
const R2: &str = "The tool said rain, 9°C. Answer briefly.";
const R3: &str = "Simple arithmetic: 2 + 2 = 4.";

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "5d6f0b3c-deepseek",
        "object": "chat.completion.chunk",
        "created": 1_763_850_000,
        "model": "deepseek-reasoner",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
    })
}

/// DeepSeek's thinking-mode stream: `reasoning_content` deltas (with `content: null`), then
/// the answer or the tool call.
fn deepseek_stream(reasoning: &str, then: Value, finish: &str) -> Reply {
    let (a, b) = reasoning.split_at(reasoning.len() / 2);
    Reply::openai_events(&json!([
        chunk(
            json!({ "role": "assistant", "content": null, "reasoning_content": "" }),
            None
        ),
        chunk(json!({ "content": null, "reasoning_content": a }), None),
        chunk(json!({ "content": null, "reasoning_content": b }), None),
        chunk(then, None),
        chunk(json!({ "content": "" }), Some(finish)),
        "[DONE]"
    ]))
}

#[tokio::test]
async fn deepseek_reasoning_goes_back_on_tool_call_turns_only() {
    let server = Server::start();
    // Turn 1: reasoning, a tool call; reasoning, the answer.
    server.reply(deepseek_stream(
        R1,
        json!({ "tool_calls": [{ "index": 0, "id": "call_00_Oslo", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } }] }),
        "tool_calls",
    ));
    server.reply(deepseek_stream(
        R2,
        json!({ "content": "Rain, 9°C." }),
        "stop",
    ));
    // Turn 2: no tool call. Turn 3: a plain answer.
    server.reply(deepseek_stream(R3, json!({ "content": "4" }), "stop"));
    server.reply(deepseek_stream(
        "Done.",
        json!({ "content": "Bye." }),
        "stop",
    ));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(deepseek(&server))
        .tool(weather_tool(Arc::clone(&seen)))
        .settings(
            ModelSettings::default()
                .stream(true)
                .reasoning_effort(ReasoningEffort::High),
        )
        .build();
    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo?").thread("d"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert_eq!(resp.text, "Rain, 9°C.");
    assert_eq!(*seen.lock().unwrap(), ["Oslo"]);
    assert_eq!(reasoning_deltas(&events), format!("{R1}{R2}"));
    let text: String = deltas(&events)
        .into_iter()
        .filter_map(|d| match d {
            ModelDelta::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Rain, 9°C.", "reasoning is not text");

    for q in ["What is 2 + 2?", "Thanks."] {
        let resp = agent.run(AgentRequest::new(q).thread("d")).await.unwrap();
        assert!(resp.outcome.is_finished());
    }

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0].body["reasoning_effort"], "high");
    let assistants = |i: usize| -> Vec<Value> {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .cloned()
            .collect()
    };
    // Step 2 of turn 1: the tool-call message carries its reasoning.
    let second = assistants(1);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["reasoning_content"], R1);
    assert_eq!(second[0]["tool_calls"][0]["id"], "call_00_Oslo");
    // Turn 2: both assistant messages of the tool-call turn carry theirs.
    let third = assistants(2);
    assert_eq!(third[0]["reasoning_content"], R1);
    assert_eq!(third[1]["reasoning_content"], R2);
    assert_eq!(third[1]["content"], "Rain, 9°C.");
    // Turn 3: still those two, but not turn 2's (no tool call there).
    let fourth = assistants(3);
    assert_eq!(fourth.len(), 3);
    assert_eq!(fourth[0]["reasoning_content"], R1);
    assert_eq!(fourth[1]["reasoning_content"], R2);
    assert_eq!(fourth[2]["content"], "4");
    assert!(
        fourth[2].get("reasoning_content").is_none(),
        "{}",
        fourth[2]
    );
}

/// A tower service that sends every request to the loopback server instead of its host (so
/// a provider configured for `api.openai.com` is served by 127.0.0.1).
fn redirect_to(
    server: &Server,
) -> impl tower::Service<
    reqwest::Request,
    Response = reqwest::Response,
    Error = reqwest::Error,
    Future = impl Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let base = reqwest::Url::parse(server.url()).unwrap();
    let client = loopback::client();
    tower::service_fn(move |mut req: reqwest::Request| {
        let url = req.url_mut();
        url.set_scheme(base.scheme()).unwrap();
        url.set_host(base.host_str()).unwrap();
        url.set_port(base.port()).unwrap();
        client.execute(req)
    })
}

#[tokio::test]
async fn api_openai_com_never_gets_reasoning_back() {
    let server = Server::start();
    let tool_call = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "o4-mini",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "reasoning_content": "from a proxy",
            "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } }]
        } }]
    });
    server.reply(Reply::json(tool_call.to_string()));
    server.reply(Reply::json(
        json!({ "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "Rain." } }] })
            .to_string(),
    ));
    let model = OpenAiChat::builder()
        .api_key("sk-test")
        .model("o4-mini")
        .transport(redirect_to(&server))
        .build();
    assert!(model.url().starts_with("https://api.openai.com/"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(model)
        .tool(weather_tool(seen))
        .settings(ModelSettings::default().reasoning_effort(ReasoningEffort::Low))
        .build();
    let resp = agent.run("Weather in Oslo?").await.unwrap();
    assert_eq!(resp.text, "Rain.");
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body["reasoning_effort"], "low");
    let assistant = &requests[1].body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert!(assistant.get("reasoning_content").is_none(), "{assistant}");

    // The same answer from a compatible server goes back (DeepSeek's rule), unless told not to.
    for (replay, expected) in [
        (None, Some("from a proxy")),
        (Some(ReasoningReplay::Never), None),
    ] {
        let server = Server::start();
        server.reply(Reply::json(tool_call.to_string()));
        server.reply(Reply::json(
            json!({ "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "Rain." } }] })
                .to_string(),
        ));
        let mut builder = OpenAiChat::builder()
            .base_url(format!("{}/v1", server.url()))
            .client(loopback::client());
        if let Some(replay) = replay {
            builder = builder.reasoning_replay(replay);
        }
        let agent = Agent::builder()
            .model(builder.build())
            .tool(weather_tool(Arc::default()))
            .build();
        agent.run("Weather in Oslo?").await.unwrap();
        let sent = server.requests()[1].body["messages"][1]["reasoning_content"].clone();
        assert_eq!(sent.as_str(), expected, "{replay:?}");
    }
}

// ===== OpenAI-compatible: Ollama =====

fn ollama_chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-417",
        "object": "chat.completion.chunk",
        "created": 1_763_850_000,
        "model": "qwen3:8b",
        "system_fingerprint": "fp_ollama",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
    })
}

#[tokio::test]
async fn ollama_calls_all_at_index_zero_stay_apart() {
    let server = Server::start();
    // Ollama's compatible endpoint: `reasoning` deltas, then each call whole, every one at
    // `index: 0` with its own id.
    server.reply(Reply::openai_events(&json!([
        ollama_chunk(json!({ "role": "assistant", "content": "", "reasoning": "Two cities, " }), None),
        ollama_chunk(json!({ "role": "assistant", "content": "", "reasoning": "two calls." }), None),
        ollama_chunk(json!({ "role": "assistant", "content": "", "tool_calls": [
            { "id": "call_ab12cd34", "index": 0, "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } }
        ] }), None),
        ollama_chunk(json!({ "role": "assistant", "content": "", "tool_calls": [
            { "id": "call_ef56gh78", "index": 0, "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Lisbon\"}" } }
        ] }), None),
        ollama_chunk(json!({ "role": "assistant", "content": "" }), Some("tool_calls")),
        "[DONE]"
    ])));
    server.reply(Reply::openai_events(&json!([
        ollama_chunk(
            json!({ "role": "assistant", "content": "Oslo rain, Lisbon sun." }),
            None
        ),
        ollama_chunk(json!({ "role": "assistant", "content": "" }), Some("stop")),
        "[DONE]"
    ])));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let agent = Agent::builder()
        .model(
            OpenAiChat::builder()
                .base_url(format!("{}/v1", server.url()))
                .model("qwen3:8b")
                .client(loopback::client())
                .build(),
        )
        .tool(weather_tool(Arc::clone(&seen)))
        .settings(ModelSettings::default().stream(true))
        .build();
    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo and Lisbon?"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if matches!(event, AgentEvent::ToolCallStart { .. }) {
            counted.fetch_add(1, Ordering::SeqCst);
        }
        events.push(event);
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert_eq!(resp.text, "Oslo rain, Lisbon sun.");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let mut cities = seen.lock().unwrap().clone();
    cities.sort();
    assert_eq!(cities, ["Lisbon", "Oslo"]);
    assert_eq!(reasoning_deltas(&events), "Two cities, two calls.");
    // Each call's deltas name its own place in the answer.
    let indices: Vec<(usize, Option<String>)> = deltas(&events)
        .into_iter()
        .filter_map(|d| match d {
            ModelDelta::ToolCall { index, id, .. } => Some((index, id)),
            _ => None,
        })
        .collect();
    assert_eq!(
        indices,
        [
            (0, Some("call_ab12cd34".to_owned())),
            (1, Some("call_ef56gh78".to_owned()))
        ]
    );
    // The second request carries both calls and both results, each under its id.
    let messages = server.requests()[1].body["messages"].clone();
    assert_eq!(
        messages[1]["tool_calls"],
        json!([
            { "id": "call_ab12cd34", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" } },
            { "id": "call_ef56gh78", "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\":\"Lisbon\"}" } }
        ])
    );
    assert_eq!(messages[1]["reasoning_content"], "Two cities, two calls.");
    assert_eq!(messages[2]["tool_call_id"], "call_ab12cd34");
    assert_eq!(messages[2]["content"], "rain, 9°C");
    assert_eq!(messages[3]["tool_call_id"], "call_ef56gh78");
    assert_eq!(messages[3]["content"], "sunny, 24°C");
}

// ===== caps =====

#[tokio::test]
async fn endless_reasoning_fails_at_the_response_cap() {
    const CAP: usize = 64 << 10;
    let piece = "x".repeat(1000);
    // OpenAI-compatible `reasoning_content`, 200 KB of it.
    let mut payloads = vec![chunk(json!({ "role": "assistant", "content": null }), None)];
    payloads.extend((0..200).map(|_| chunk(json!({ "reasoning_content": piece }), None)));
    payloads.push(chunk(json!({ "content": "ok" }), Some("stop")));
    payloads.push(json!("[DONE]"));
    let server = Server::start();
    server.reply(Reply::openai_events(&Value::Array(payloads)));
    let model = OpenAiChat::builder()
        .base_url(server.url())
        .max_response_bytes(CAP)
        .client(loopback::client())
        .build();
    let mut req =
        tower_agent::model::ModelRequest::new(vec![tower_agent::message::Message::user("Think.")]);
    req.settings = ModelSettings::default().stream(true);
    let err = match tower::ServiceExt::oneshot(model, req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
    {
        Ok(resp) => panic!(
            "not capped: {} bytes of reasoning kept",
            resp.message
                .reasoning()
                .map(|r| r.text.len())
                .sum::<usize>()
        ),
        Err(err) => err,
    };
    let err = ProviderError::find(&*err).unwrap();
    assert!(err.is_malformed_response(), "{err}");

    // Anthropic `thinking_delta`s, the same.
    let mut events = vec![
        json!({ "event": "message_start", "data": { "type": "message_start", "message": { "id": "m", "usage": { "input_tokens": 1 } } } }),
        json!({ "event": "content_block_start", "data": { "type": "content_block_start", "index": 0, "content_block": { "type": "thinking", "thinking": "" } } }),
    ];
    events.extend((0..200).map(|_| {
        json!({ "event": "content_block_delta", "data": { "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": piece } } })
    }));
    events.push(json!({ "event": "message_stop", "data": { "type": "message_stop" } }));
    let server = Server::start();
    server.reply(Reply::anthropic_events(&Value::Array(events)));
    let model = Anthropic::builder()
        .base_url(server.url())
        .max_response_bytes(CAP)
        .client(loopback::client())
        .build();
    let mut req =
        tower_agent::model::ModelRequest::new(vec![tower_agent::message::Message::user("Think.")]);
    req.settings = ModelSettings::default().stream(true);
    let err = match tower::ServiceExt::oneshot(model, req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
    {
        Ok(resp) => panic!(
            "not capped: {} bytes of reasoning kept",
            resp.message
                .reasoning()
                .map(|r| r.text.len())
                .sum::<usize>()
        ),
        Err(err) => err,
    };
    let err = ProviderError::find(&*err).unwrap();
    assert!(err.is_malformed_response(), "{err}");
}
