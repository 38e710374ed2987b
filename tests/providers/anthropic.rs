//! `Anthropic` against a loopback server speaking the Messages API: the exact JSON and headers
//! sent (system split out, tool results grouped), real-shaped answers, streaming with text and
//! tool-input deltas, retries, typed errors, and whole agent runs.

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
    layers::{summarize::SummarizeLayer, trace::TraceLayer},
    message::{Message, StopReason, ToolCall, ToolOutput, ToolSpec, Usage},
    model::{
        ModelRequest, ModelResponse, ModelSettings, ProviderError, RetryPolicy, ScriptedModel,
        anthropic::Anthropic,
    },
    tool::{Tool, tool_fn},
};

/// The provider of these tests, without prompt caching: they check the documented request
/// shape field by field (caching's breakpoints have their own test below).
fn provider(server: &Server) -> Anthropic {
    Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .model("claude-sonnet-4-5")
        .header("anthropic-beta", "token-efficient-tools-2025-02-19")
        .client(loopback::client())
        .prompt_caching(false)
        .build()
}

fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "city": { "type": "string" }, "unit": { "type": "string" } },
        "required": ["city"]
    })
}

fn weather_tool(calls: Arc<AtomicUsize>) -> impl Tool {
    tool_fn(
        "get_weather",
        "Current weather in a city",
        weather_schema(),
        move |args, _ctx| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                match args["city"].as_str() {
                    Some("Oslo") => Ok::<_, BoxError>("rain, 9°C"),
                    _ => Err("the weather service is down".into()),
                }
            }
        },
    )
}

fn provider_error(err: &BoxError) -> &ProviderError {
    ProviderError::find(&**err).unwrap_or_else(|| panic!("not a ProviderError: {err:?}"))
}

#[tokio::test]
async fn sends_the_documented_request_and_reads_tool_use() {
    let server = Server::start();
    server.reply(Reply::fixture("anthropic_tool_use.json"));

    let mut req = ModelRequest::new(vec![
        Message::system("You are a weather bot."),
        Message::user("Weather in Oslo and Lisbon?"),
        Message::assistant("Checking.").with_tool_calls(vec![
            ToolCall::new("toolu_prev_1", "get_weather", json!({ "city": "Oslo" })),
            ToolCall::new("toolu_prev_2", "get_weather", json!({ "city": "Lisbon" })),
        ]),
        Message::tool_result(&ToolOutput::text("toolu_prev_1", "rain, 9°C")),
        Message::tool_result(&ToolOutput::error("toolu_prev_2", "timed out")),
        Message::user("Try Lisbon again."),
    ]);
    req.tools = Arc::new(vec![ToolSpec::new(
        "get_weather",
        "Current weather in a city",
        weather_schema(),
    )]);
    req.settings = ModelSettings::default().temperature(0.5);

    let resp = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();

    let sent = &server.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.header("anthropic-beta"),
        Some("token-efficient-tools-2025-02-19")
    );
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "You are a weather bot.",
            "messages": [
                { "role": "user", "content": "Weather in Oslo and Lisbon?" },
                {
                    "role": "assistant",
                    "content": [
                        { "type": "text", "text": "Checking." },
                        { "type": "tool_use", "id": "toolu_prev_1", "name": "get_weather", "input": { "city": "Oslo" } },
                        { "type": "tool_use", "id": "toolu_prev_2", "name": "get_weather", "input": { "city": "Lisbon" } }
                    ]
                },
                {
                    "role": "user",
                    "content": [
                        { "type": "tool_result", "tool_use_id": "toolu_prev_1", "content": "rain, 9°C" },
                        { "type": "tool_result", "tool_use_id": "toolu_prev_2", "content": "timed out", "is_error": true },
                        { "type": "text", "text": "Try Lisbon again." }
                    ]
                }
            ],
            "tools": [{
                "name": "get_weather",
                "description": "Current weather in a city",
                "input_schema": weather_schema()
            }],
            "temperature": 0.5
        })
    );

    assert_eq!(
        resp.message.text(),
        "I'll check the weather in both cities."
    );
    assert_eq!(
        resp.message.tool_calls,
        vec![
            ToolCall::new(
                "toolu_01A09q90qw90lq917835lq9",
                "get_weather",
                json!({ "city": "Oslo" })
            ),
            ToolCall::new(
                "toolu_01B2xyzLisbon000000000001",
                "get_weather",
                json!({ "city": "Lisbon", "unit": "celsius" })
            ),
        ]
    );
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(
        resp.usage,
        Some(Usage {
            input_tokens: 412,
            output_tokens: 96,
            ..Usage::default()
        })
    );
}

#[tokio::test]
async fn reads_text_and_counts_cached_input() {
    let server = Server::start();
    server.reply(Reply::fixture("anthropic_text.json"));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default()
        .model("claude-haiku-4-5")
        .max_tokens(100);
    let resp = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert_eq!(
        resp.message.text(),
        "Oslo: rain, 9°C. Lisbon: sunny, 24°C. Pack an umbrella for Oslo."
    );
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    // input_tokens + cache_read_input_tokens, the cache read also kept apart.
    assert_eq!(
        resp.usage,
        Some(Usage {
            input_tokens: 690,
            output_tokens: 25,
            cache_read_tokens: 100,
            ..Usage::default()
        })
    );
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 100,
            "messages": [{ "role": "user", "content": "Hi" }]
        })
    );
}

#[tokio::test]
async fn streams_text_and_tool_input_deltas_and_assembles_one_response() {
    let server = Server::start();
    server.reply(Reply::anthropic_stream("anthropic_stream_tool_use.json"));
    server.reply(Reply::anthropic_stream("anthropic_stream_text.json"));
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(weather_tool(Arc::clone(&calls)))
        .system_prompt("You are a weather bot.")
        .settings(ModelSettings::default().stream(true))
        .build();

    let mut stream = agent.stream(AgentRequest::new("Weather in Oslo and Lisbon?"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let resp = stream.take_response().unwrap().unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, 2);
    assert_eq!(resp.text, "Oslo: rain, 9°C. Lisbon: sunny, 24°C.");
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 412 + 590,
            output_tokens: 96 + 15,
            ..Usage::default()
        }
    );

    let deltas: Vec<(u32, ModelDelta)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { step, delta } => Some((*step, delta.clone())),
            _ => None,
        })
        .collect();
    let text = |step: u32| -> String {
        deltas
            .iter()
            .filter_map(|(s, d)| match d {
                ModelDelta::Text { text } if *s == step => Some(text.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(text(0), "I'll check both cities.");
    assert_eq!(text(1), "Oslo: rain, 9°C. Lisbon: sunny, 24°C.");
    let pieces: Vec<(usize, Option<String>, Option<String>, String)> = deltas
        .iter()
        .filter_map(|(_, d)| match d {
            ModelDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => Some((*index, id.clone(), name.clone(), arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        pieces[..5],
        [
            (
                0,
                Some("toolu_01A09q90qw90lq917835lq9".into()),
                Some("get_weather".into()),
                String::new()
            ),
            (0, None, None, String::new()),
            (0, None, None, "{\"ci".into()),
            (0, None, None, "ty\": \"Os".into()),
            (0, None, None, "lo\"}".into()),
        ]
    );
    let second: String = pieces
        .iter()
        .filter(|p| p.0 == 1)
        .map(|p| p.3.as_str())
        .collect();
    assert_eq!(second, "{\"city\": \"Lisbon\", \"unit\": \"celsius\"}");

    // The loop got whole tool calls, and the tool results went back grouped, the failed one
    // flagged.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    for r in &sent {
        assert_eq!(r.body["stream"], json!(true));
    }
    assert_eq!(
        sent[1].body["messages"],
        json!([
            { "role": "user", "content": "Weather in Oslo and Lisbon?" },
            {
                "role": "assistant",
                "content": [
                    { "type": "text", "text": "I'll check both cities." },
                    { "type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": { "city": "Oslo" } },
                    { "type": "tool_use", "id": "toolu_01B2xyzLisbon000000000001", "name": "get_weather", "input": { "city": "Lisbon", "unit": "celsius" } }
                ]
            },
            {
                "role": "user",
                "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "rain, 9°C" },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01B2xyzLisbon000000000001",
                        "content": sent[1].body["messages"][2]["content"][1]["content"].clone(),
                        "is_error": true
                    }
                ]
            }
        ])
    );
    let failed = sent[1].body["messages"][2]["content"][1]["content"]
        .as_str()
        .unwrap();
    assert!(failed.contains("the weather service is down"), "{failed}");
    assert_eq!(sent[1].body["system"], "You are a weather bot.");
}

#[tokio::test(start_paused = true)]
async fn overloaded_is_retried_after_retry_after() {
    let server = Server::start();
    server.reply(
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .header("retry-after", "3"),
    );
    server.reply(
        Reply::status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
        )
        .header("retry-after", "5"),
    );
    server.reply(Reply::fixture("anthropic_text.json"));

    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new().base_delay(Duration::from_secs(30)))
        .service(provider(&server));
    let start = tokio::time::Instant::now();
    let resp = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(9),
        "{waited:?}"
    );
    assert!(resp.message.text().starts_with("Oslo"));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn typed_errors() {
    let server = Server::start();
    server.reply(Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    server.reply(Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
    ));
    server.reply(Reply::json("<html><body>gateway</body></html>"));
    let model = provider(&server);
    let call = || {
        model
            .clone()
            .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
    };

    let err = call().await.unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_authentication(), "{e:?}");
    assert_eq!(e.code(), Some("authentication_error"));
    assert_eq!(
        e.to_string(),
        "anthropic: authentication failed (http 401): invalid x-api-key"
    );

    let err = call().await.unwrap_err();
    let e = provider_error(&err);
    assert!(
        e.is_context_length_exceeded() && e.is_invalid_request(),
        "{e:?}"
    );

    let err = call().await.unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_malformed_response(), "{e:?}");
    assert_eq!(e.body_excerpt(), Some("<html><body>gateway</body></html>"));
}

#[tokio::test]
async fn stream_errors_and_cuts() {
    let full = Reply::anthropic_stream("anthropic_stream_tool_use.json");
    let text = full.text().to_owned();
    let mid = text.find("ty\\\": \\\"Os").unwrap();
    let before_stop = text.find("event: message_stop").unwrap();
    let mut with_error = loopback::fixture("anthropic_stream_text.json");
    with_error.as_array_mut().unwrap().insert(
        3,
        json!({ "event": "error", "data": { "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } } }),
    );

    let server = Server::start();
    server.reply(full.clone().cut(mid, End::Clean));
    server.reply(full.clone().cut(before_stop, End::Clean));
    server.reply(full.cut(mid, End::Abort));
    server.reply(Reply::anthropic_events(&with_error));
    let model = provider(&server);
    let call = || {
        let mut req = ModelRequest::new(vec![Message::user("Hi")]);
        req.settings = ModelSettings::default().stream(true);
        model
            .clone()
            .oneshot(req)
            .and_then(tower_agent::model::ModelResponse::collect)
    };

    for _ in 0..2 {
        let err = call().await.unwrap_err();
        let e = provider_error(&err);
        assert!(e.is_incomplete(), "{e:?}");
        assert!(e.to_string().contains("message_stop"), "{e}");
    }
    let err = call().await.unwrap_err();
    assert!(provider_error(&err).is_transport(), "{err:?}");
    let err = call().await.unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_server_error(), "{e:?}");
    assert_eq!(e.code(), Some("overloaded_error"));
}

#[tokio::test]
async fn a_whole_agent_run_with_trace_and_summarize_on_the_model_path() {
    let server = Server::start();
    server.reply(Reply::fixture("anthropic_tool_use.json"));
    server.reply(Reply::fixture("anthropic_text.json"));
    let calls = Arc::new(AtomicUsize::new(0));
    let summarizer = ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("summary")));
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(SummarizeLayer::new(summarizer))
                .retry(RetryPolicy::new())
                .service(provider(&server)),
        )
        .tool(weather_tool(Arc::clone(&calls)))
        .system_prompt("You are a weather bot.")
        .build();

    let resp = agent.run("Weather in Oslo and Lisbon?").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, 2);
    assert_eq!(
        resp.text,
        "Oslo: rain, 9°C. Lisbon: sunny, 24°C. Pack an umbrella for Oslo."
    );
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 412 + 690,
            output_tokens: 96 + 25,
            cache_read_tokens: 100,
            ..Usage::default()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].body["system"], "You are a weather bot.");
    let messages = sent[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[2]["role"], "user");
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0],
        json!({ "type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "rain, 9°C" })
    );
    assert_eq!(results[1]["is_error"], json!(true));
}

#[test]
fn keys_are_redacted_and_defaults_documented() {
    let claude = Anthropic::builder().api_key("sk-ant-secret").build();
    let debug = format!("{claude:?}");
    assert!(
        !debug.contains("sk-ant-secret") && debug.contains("<redacted>"),
        "{debug}"
    );
    assert_eq!(claude.url(), "https://api.anthropic.com/v1/messages");
    assert_eq!(claude.model(), "claude-sonnet-4-5");
}

// Prompt caching (issue 13): by default every request marks three `cache_control`
// breakpoints, within the API's limit of four — the last tool, the system prompt (as a text
// block), and the last block the next request repeats, which is before a trailing
// `<system-reminder>` (that one changes from request to request).
#[tokio::test]
async fn prompt_caching_marks_tools_system_and_the_repeated_conversation() {
    let server = Server::start();
    server.reply(Reply::fixture("anthropic_tool_use.json"));
    let mut req = ModelRequest::new(vec![
        Message::system("You are a weather bot."),
        Message::user("Weather in Oslo?"),
        Message::assistant("Checking.").with_tool_calls(vec![ToolCall::new(
            "toolu_prev_1",
            "get_weather",
            json!({ "city": "Oslo" }),
        )]),
        Message::tool_result(&ToolOutput::text("toolu_prev_1", "rain, 9°C")),
    ]);
    req.append_reminder("Your todo list: - [pending] 1: answer");
    req.tools = Arc::new(vec![
        ToolSpec::new("get_time", "The time", json!({"type": "object"})),
        ToolSpec::new("get_weather", "Current weather in a city", weather_schema()),
    ]);
    let cached = Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .client(loopback::client())
        .build();
    cached
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();

    let body = &server.requests()[0].body;
    let ephemeral = json!({ "type": "ephemeral" });
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    assert_eq!(
        body["system"],
        json!([{ "type": "text", "text": "You are a weather bot.", "cache_control": ephemeral }])
    );
    // The tool result and the reminder share the last user message; the breakpoint is on the
    // result, the reminder after it is left out.
    let last = &body["messages"][2]["content"];
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[0]["cache_control"], ephemeral);
    assert!(
        last[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("<system-reminder>")
    );
    assert!(last[1].get("cache_control").is_none());
    let marks = body.to_string().matches("cache_control").count();
    assert_eq!(marks, 3, "{body}");
}

/// What a StopFailure hook is given for each API error, as Claude Code 2.1.328 gives it
/// (measured in `tests/reference`, vectors `stop_failure_*`): the API's status and message,
/// a generic 400 `unknown`, a 401/403 `authentication_failed` with Claude Code's prefix, a
/// request too long `invalid_request` with the status and body as details; no details else.
#[tokio::test]
async fn stop_failure_input_of_each_api_error() {
    use tower_agent::agent::StopFailureInput;
    let error = |status: u16, kind: &str, message: &str| {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        (status, body.to_string())
    };
    let cases = [
        (
            error(400, "invalid_request_error", "hk-bad"),
            "unknown",
            "API Error: 400 hk-bad",
            None,
        ),
        (
            error(403, "permission_error", "hk-forbidden"),
            "authentication_failed",
            "Failed to authenticate. API Error: 403 hk-forbidden",
            None,
        ),
        (
            error(401, "authentication_error", "invalid x-api-key"),
            "authentication_failed",
            "Failed to authenticate. API Error: 401 invalid x-api-key",
            None,
        ),
        (
            error(
                400,
                "invalid_request_error",
                "prompt is too long: 300000 tokens > 200000 maximum",
            ),
            "invalid_request",
            "API Error: 400 prompt is too long: 300000 tokens > 200000 maximum",
            Some("400 {"),
        ),
        (
            error(404, "not_found_error", "model: x"),
            "model_not_found",
            "API Error: 404 model: x",
            None,
        ),
    ];
    for ((status, body), kind, shown, details) in cases {
        let server = Server::start();
        server.reply(Reply::status(status, body.clone()));
        let model = Anthropic::builder()
            .base_url(server.url())
            .api_key("sk-ant-test")
            .client(loopback::client())
            .build();
        let err = model
            .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
            .await
            .unwrap_err();
        let input = StopFailureInput::from_model_error(&*err);
        assert_eq!(input.error, kind, "{status} {body}");
        assert_eq!(input.last_assistant_message, shown, "{status} {body}");
        match details {
            None => assert_eq!(input.error_details, None, "{status}"),
            Some(start) => {
                let d = input.error_details.unwrap();
                assert!(
                    d.starts_with(start) && d.contains("prompt is too long"),
                    "{d}"
                );
            }
        }
    }
    // An error that is no provider's keeps its text as details.
    let input = StopFailureInput::from_model_error(&*BoxError::from("a layer gave up"));
    assert_eq!(input.error_details.as_deref(), Some("a layer gave up"));
    assert_eq!(input.last_assistant_message, "API Error: a layer gave up");
}
