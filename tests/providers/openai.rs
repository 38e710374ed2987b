//! `OpenAiChat` against a loopback server speaking the Chat Completions API: the exact JSON
//! and headers sent, real-shaped answers (text, several tool calls, usage), streaming with
//! deltas, retries with `Retry-After`, typed errors, and whole agent runs.

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
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, ModelDelta},
    layers::{summarize::SummarizeLayer, trace::TraceLayer},
    message::{Message, StopReason, ToolCall, ToolOutput, ToolSpec, Usage},
    model::{
        ModelRequest, ModelResponse, ModelSettings, ProviderError, RetryPolicy, ScriptedModel,
        openai::{MaxTokensParam, OpenAiChat},
    },
    tool::{Tool, tool_fn},
};

fn provider(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(format!("{}/v1/", server.url()))
        .api_key("sk-test-123")
        .organization("org-tower")
        .header("x-request-source", "tests")
        .model("gpt-4.1-mini")
        .client(loopback::client())
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
                Ok::<_, BoxError>(match args["city"].as_str() {
                    Some("Oslo") => "rain, 9°C",
                    _ => "sunny, 24°C",
                })
            }
        },
    )
}

fn time_tool() -> impl Tool {
    tool_fn(
        "get_time",
        "The current time",
        json!({ "type": "object" }),
        |_, _| async { Ok::<_, BoxError>("14:00") },
    )
}

fn provider_error(err: &BoxError) -> &ProviderError {
    ProviderError::find(&**err).unwrap_or_else(|| panic!("not a ProviderError: {err:?}"))
}

#[tokio::test]
async fn sends_the_documented_request_and_reads_several_tool_calls() {
    let server = Server::start();
    server.reply(Reply::fixture("openai_tool_calls.json"));

    let mut req = ModelRequest::new(vec![
        Message::system("You are a weather bot."),
        Message::user("Weather in Oslo?"),
        Message::assistant("Let me look.").with_tool_calls(vec![ToolCall::new(
            "call_prev",
            "get_weather",
            json!({ "city": "Oslo" }),
        )]),
        Message::tool_result(&ToolOutput::error("call_prev", "service unavailable")),
        Message::user("Try again, and Lisbon and the time too."),
    ]);
    req.tools = Arc::new(vec![
        ToolSpec::new("get_weather", "Current weather in a city", weather_schema()),
        ToolSpec::new("get_time", "The current time", json!({ "type": "object" })),
    ]);
    req.settings = ModelSettings::default().temperature(0.2).max_tokens(256);

    let resp = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();

    let sent = &server.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("openai-organization"), Some("org-tower"));
    assert_eq!(sent.header("x-request-source"), Some("tests"));
    assert_eq!(sent.header("x-api-key"), None);
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-4.1-mini",
            "messages": [
                { "role": "system", "content": "You are a weather bot." },
                { "role": "user", "content": "Weather in Oslo?" },
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "tool_calls": [{
                        "id": "call_prev",
                        "type": "function",
                        "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" }
                    }]
                },
                { "role": "tool", "tool_call_id": "call_prev", "content": "service unavailable" },
                { "role": "user", "content": "Try again, and Lisbon and the time too." }
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather in a city",
                        "parameters": weather_schema()
                    }
                },
                {
                    "type": "function",
                    "function": {
                        "name": "get_time",
                        "description": "The current time",
                        "parameters": { "type": "object" }
                    }
                }
            ],
            "tool_choice": "auto",
            "temperature": 0.2,
            "max_completion_tokens": 256
        })
    );

    assert_eq!(resp.message.text(), "");
    assert_eq!(
        resp.message.tool_calls,
        vec![
            ToolCall::new(
                "call_Oslo7sQ2xVb1",
                "get_weather",
                json!({ "city": "Oslo" })
            ),
            ToolCall::new(
                "call_Lisbon9fK3mP",
                "get_weather",
                json!({ "city": "Lisbon", "unit": "celsius" })
            ),
            ToolCall::new("call_Time4hT8wQz", "get_time", json!({})),
        ]
    );
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(
        resp.usage,
        Some(Usage {
            input_tokens: 82,
            output_tokens: 61,
            ..Usage::default()
        })
    );
}

#[tokio::test]
async fn reads_text_and_sends_only_what_is_set() {
    let server = Server::start();
    server.reply(Reply::fixture("openai_text.json"));
    server.reply(Reply::fixture("openai_text.json"));
    let local = OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .max_tokens_param(MaxTokensParam::MaxTokens)
        .client(loopback::client())
        .build();

    let resp = local
        .clone()
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert_eq!(
        resp.message.text(),
        "Oslo: rain, 9°C. Lisbon: sunny, 24°C. Pack an umbrella for Oslo."
    );
    assert!(resp.message.tool_calls.is_empty());
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(resp.usage.unwrap().total(), 194);

    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().model("llama3.2").max_tokens(64);
    local
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();

    let sent = server.requests();
    // No key: no Authorization header. No tools, temperature or stream: no such fields.
    assert_eq!(sent[0].header("authorization"), None);
    assert_eq!(
        sent[0].body,
        json!({
            "model": "gpt-4.1-mini",
            "messages": [{ "role": "user", "content": "Hi" }]
        })
    );
    // The request's model wins; the older token-limit field when asked for.
    assert_eq!(
        sent[1].body,
        json!({
            "model": "llama3.2",
            "messages": [{ "role": "user", "content": "Hi" }],
            "max_tokens": 64
        })
    );
}

#[tokio::test]
async fn streams_deltas_to_the_run_and_assembles_one_response() {
    let server = Server::start();
    server.reply(Reply::openai_stream("openai_stream_tool_calls.json"));
    server.reply(Reply::openai_stream("openai_stream_text.json"));
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
            input_tokens: 82 + 171,
            output_tokens: 64 + 15,
            ..Usage::default()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // The deltas, as they arrived.
    let deltas = |want: u32| -> Vec<ModelDelta> {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ModelDelta { step, delta } if *step == want => Some(delta.clone()),
                _ => None,
            })
            .collect()
    };
    let step0 = deltas(0);
    let text0: String = step0
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text0, "Checking both cities…");
    let call_pieces = |index: usize| -> Vec<(Option<String>, Option<String>, String)> {
        step0
            .iter()
            .filter_map(|d| match d {
                ModelDelta::ToolCall {
                    index: i,
                    id,
                    name,
                    arguments,
                } if *i == index => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        call_pieces(0),
        vec![
            (
                Some("call_Oslo7sQ2xVb1".into()),
                Some("get_weather".into()),
                String::new()
            ),
            (None, None, "{\"ci".into()),
            (None, None, "ty\":\"Os".into()),
            (None, None, "lo\"}".into()),
        ]
    );
    let args1: String = call_pieces(1).into_iter().map(|p| p.2).collect();
    assert_eq!(args1, "{\"city\":\"Lisbon\",\"unit\":\"celsius\"}");
    let text1: Vec<ModelDelta> = deltas(1);
    assert_eq!(
        text1,
        ["Oslo: rain, 9", "°C. Lisbon: sunny", ", 24°C."]
            .map(|t| ModelDelta::Text { text: t.into() })
            .to_vec()
    );

    // The assembled answer of step 0, as the loop saw it.
    let first = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ModelResponse {
                step: 0, message, ..
            } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(first.text(), "Checking both cities…");
    assert_eq!(
        first.tool_calls,
        vec![
            ToolCall::new(
                "call_Oslo7sQ2xVb1",
                "get_weather",
                json!({ "city": "Oslo" })
            ),
            ToolCall::new(
                "call_Lisbon9fK3mP",
                "get_weather",
                json!({ "city": "Lisbon", "unit": "celsius" })
            ),
        ]
    );

    // Both requests asked for a stream with usage; the second carries the tool results.
    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    for r in &sent {
        assert_eq!(r.body["stream"], json!(true));
        assert_eq!(r.body["stream_options"], json!({ "include_usage": true }));
    }
    assert_eq!(
        sent[1].body["messages"],
        json!([
            { "role": "system", "content": "You are a weather bot." },
            { "role": "user", "content": "Weather in Oslo and Lisbon?" },
            {
                "role": "assistant",
                "content": "Checking both cities…",
                "tool_calls": [
                    {
                        "id": "call_Oslo7sQ2xVb1",
                        "type": "function",
                        "function": { "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}" }
                    },
                    {
                        "id": "call_Lisbon9fK3mP",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": "{\"city\":\"Lisbon\",\"unit\":\"celsius\"}"
                        }
                    }
                ]
            },
            { "role": "tool", "tool_call_id": "call_Oslo7sQ2xVb1", "content": "rain, 9°C" },
            { "role": "tool", "tool_call_id": "call_Lisbon9fK3mP", "content": "sunny, 24°C" }
        ])
    );
}

#[tokio::test]
async fn a_whole_answer_to_a_stream_request_is_read_too() {
    let server = Server::start();
    server.reply(Reply::fixture("openai_text.json"));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().stream(true);
    let resp = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap();
    assert!(resp.message.text().starts_with("Oslo: rain"));
}

#[tokio::test(start_paused = true)]
async fn rate_limit_is_retried_after_retry_after() {
    let server = Server::start();
    server.reply(
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-tower on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 7s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        )
        .header("retry-after", "7"),
    );
    server.reply(Reply::fixture("openai_text.json"));

    // A base delay far from 7 s shows which wait was used.
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
        waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    assert!(resp.message.text().starts_with("Oslo: rain"));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn server_errors_are_retried_then_given_up_with_the_typed_error() {
    let server = Server::start();
    let body = r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#;
    for _ in 0..3 {
        server.reply(Reply::status(500, body));
    }
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new())
        .service(provider(&server));
    let start = tokio::time::Instant::now();
    let err = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let waited = start.elapsed();

    let err = provider_error(&err);
    assert!(err.is_server_error(), "{err:?}");
    assert_eq!(err.status(), Some(500));
    assert_eq!(err.code(), Some("server_error"));
    assert!(
        err.to_string()
            .starts_with("openai: server error (http 500): The server")
    );
    assert_eq!(server.requests().len(), 3);
    // Two backoffs: 500 ms and 1 s, each plus up to 25% jitter.
    assert!(
        waited >= Duration::from_millis(1500) && waited <= Duration::from_millis(1875),
        "{waited:?}"
    );
}

#[tokio::test]
async fn bad_key_is_an_authentication_error_and_not_retried() {
    let server = Server::start();
    server.reply(Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-test-123. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    ));
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new())
        .service(provider(&server));
    let err = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let err = provider_error(&err);
    assert!(err.is_authentication(), "{err:?}");
    assert!(!err.is_rate_limited() && !err.is_server_error());
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.code(), Some("invalid_api_key"));
    assert!(err.message().unwrap().starts_with("Incorrect API key"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn context_length_exceeded_is_recognised() {
    let server = Server::start();
    server.reply(Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ));
    let err = provider(&server)
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let err = provider_error(&err);
    assert!(err.is_context_length_exceeded() && err.is_invalid_request());
}

#[tokio::test]
async fn malformed_body_is_an_error_with_an_excerpt() {
    let server = Server::start();
    server.reply(Reply::json(
        r#"{"id":"chatcmpl-1","choices":[{"index":0,oops"#,
    ));
    server.reply(Reply::json(
        r#"{"id":"chatcmpl-2","object":"chat.completion","choices":[]}"#,
    ));
    let model = provider(&server);

    let err = model
        .clone()
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_malformed_response(), "{e:?}");
    assert_eq!(e.status(), Some(200));
    assert_eq!(
        e.body_excerpt(),
        Some(r#"{"id":"chatcmpl-1","choices":[{"index":0,oops"#)
    );
    assert!(e.to_string().contains("oops"), "{e}");

    let err = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_malformed_response());
    assert_eq!(e.message(), Some("the response has no choices"));
}

#[tokio::test]
async fn a_cut_stream_is_an_error_never_a_short_answer() {
    let full = Reply::openai_stream("openai_stream_tool_calls.json");
    let text = full.text().to_owned();
    let mid = text.find("Lisbon").unwrap();
    let before_done = text.find("data: [DONE]").unwrap();

    let server = Server::start();
    // Cut mid-event, the body ending cleanly.
    server.reply(full.clone().cut(mid, End::Clean));
    // Every event but the end marker.
    server.reply(full.clone().cut(before_done, End::Clean));
    // The connection dropped mid-way.
    server.reply(full.cut(mid, End::Abort));
    let stream_req = || {
        let mut req = ModelRequest::new(vec![Message::user("Hi")]);
        req.settings = ModelSettings::default().stream(true);
        req
    };
    let model = provider(&server);

    for _ in 0..2 {
        let err = model
            .clone()
            .oneshot(stream_req())
            .and_then(tower_agent::model::ModelResponse::collect)
            .await
            .unwrap_err();
        let e = provider_error(&err);
        assert!(e.is_incomplete(), "{e:?}");
        assert!(e.to_string().contains("[DONE]"), "{e}");
    }
    let err = model
        .oneshot(stream_req())
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    let e = provider_error(&err);
    assert!(e.is_transport(), "{e:?}");
}

#[tokio::test]
async fn an_error_in_a_stream_fails_the_call() {
    let server = Server::start();
    server.reply(Reply::openai_events(&json!([
        { "id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1747000010, "model": "gpt-4.1-mini",
          "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "Hel" }, "finish_reason": null }] },
        { "error": { "message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null } }
    ])));
    let mut req = ModelRequest::new(vec![Message::user("Hi")]);
    req.settings = ModelSettings::default().stream(true);
    let err = provider(&server)
        .oneshot(req)
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert!(provider_error(&err).is_server_error());
}

#[tokio::test]
async fn invalid_tool_arguments_reach_the_model_as_an_error_output() {
    let server = Server::start();
    server.reply(Reply::fixture("openai_bad_arguments.json"));
    server.reply(Reply::fixture("openai_text.json"));
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder()
        .model(provider(&server))
        .tool(weather_tool(Arc::clone(&calls)))
        .build();

    let resp = agent.run("Weather in Oslo?").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the tool never ran");

    let messages = &server.requests()[1].body["messages"];
    // The model's broken argument text goes back as it was…
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        json!("{\"city\": \"Oslo")
    );
    // …and the model sees why the call failed.
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_Broken1aB2cD");
    let content = messages[2]["content"].as_str().unwrap();
    assert!(content.contains("not valid JSON"), "{content}");
}

#[tokio::test]
async fn a_whole_agent_run_with_trace_and_summarize_on_the_model_path() {
    let server = Server::start();
    server.reply(Reply::fixture("openai_tool_calls.json"));
    server.reply(Reply::fixture("openai_text.json"));
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
        .tool(time_tool())
        .system_prompt("You are a weather bot.")
        .build();

    let resp = agent
        .run("Weather in Oslo and Lisbon, and the time?")
        .await
        .unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, 2);
    assert_eq!(
        resp.text,
        "Oslo: rain, 9°C. Lisbon: sunny, 24°C. Pack an umbrella for Oslo."
    );
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 82 + 171,
            output_tokens: 61 + 23,
            ..Usage::default()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let sent = server.requests();
    assert_eq!(sent.len(), 2);
    let tool_names: Vec<&str> = sent[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tool_names.len(), 2);
    assert!(tool_names.contains(&"get_weather") && tool_names.contains(&"get_time"));
    let messages = sent[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[2]["content"], Value::Null);
    assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 3);
    assert_eq!(
        messages[3..],
        [
            json!({ "role": "tool", "tool_call_id": "call_Oslo7sQ2xVb1", "content": "rain, 9°C" }),
            json!({ "role": "tool", "tool_call_id": "call_Lisbon9fK3mP", "content": "sunny, 24°C" }),
            json!({ "role": "tool", "tool_call_id": "call_Time4hT8wQz", "content": "14:00" }),
        ]
    );
}

#[tokio::test]
async fn a_bad_base_url_is_a_config_error() {
    let model = OpenAiChat::builder().base_url("not a url").build();
    let err = model
        .oneshot(ModelRequest::new(vec![Message::user("Hi")]))
        .and_then(tower_agent::model::ModelResponse::collect)
        .await
        .unwrap_err();
    assert!(provider_error(&err).is_config());
}

#[test]
fn services_are_clone_send_sync_and_keys_are_redacted() {
    fn model<S>(_: &S)
    where
        S: Service<ModelRequest, Response = ModelResponse, Error = BoxError>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
    }
    let openai = OpenAiChat::builder().api_key("sk-secret").build();
    model(&openai);
    model(
        &ServiceBuilder::new()
            .retry(RetryPolicy::new())
            .service(openai.clone()),
    );
    let debug = format!("{openai:?}");
    assert!(
        !debug.contains("sk-secret") && debug.contains("<redacted>"),
        "{debug}"
    );
    assert_eq!(openai.url(), "https://api.openai.com/v1/chat/completions");
    assert_eq!(openai.model(), "gpt-4.1-mini");
}
