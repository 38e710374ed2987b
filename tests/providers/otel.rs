//! Acceptance test of the GenAI observability (issue 11, item 7): runs of real agents, their
//! spans exported through `tracing-opentelemetry` to the OpenTelemetry SDK's in-memory
//! exporter, checked against the OpenTelemetry GenAI semantic conventions.

use crate::loopback;

use std::collections::BTreeMap;

use loopback::{Reply, Server};
use opentelemetry::{
    Array, Value,
    trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _},
};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::Outcome,
    context::RunContext,
    layers::trace::TraceLayer,
    message::{ToolCall, ToolOutput, Usage},
    model::{ModelResponse, ModelSettings, ScriptedModel, openai::OpenAiChat},
    tool::{ToolRequest, tool_fn},
};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::SubscriberExt;

// ===== the exporter =====

/// Spans of this thread go to an in-memory exporter while this lives.
struct Otel {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _guard: DefaultGuard,
}

fn otel() -> Otel {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let tracer = provider.tracer("tests");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
    crate::support::scoped_subscribers();
    let guard = tracing::subscriber::set_default(subscriber);
    Otel {
        exporter,
        _provider: provider,
        _guard: guard,
    }
}

impl Otel {
    fn spans(&self) -> Vec<SpanData> {
        self.exporter.get_finished_spans().unwrap()
    }
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

#[track_caller]
fn string(span: &SpanData, key: &str) -> String {
    match attr(span, key) {
        Some(Value::String(s)) => s.as_str().to_owned(),
        other => panic!("span {:?}: {key} is {other:?}", span.name),
    }
}

#[track_caller]
fn int(span: &SpanData, key: &str) -> i64 {
    match attr(span, key) {
        Some(Value::I64(n)) => *n,
        other => panic!("span {:?}: {key} is {other:?}", span.name),
    }
}

#[track_caller]
fn strings(span: &SpanData, key: &str) -> Vec<String> {
    match attr(span, key) {
        Some(Value::Array(Array::String(values))) => {
            values.iter().map(|v| v.as_str().to_owned()).collect()
        }
        other => panic!(
            "span {:?}: {key} is {other:?}, not a string array",
            span.name
        ),
    }
}

#[track_caller]
fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[track_caller]
fn only<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found = named(spans, name);
    let names: Vec<_> = spans.iter().map(|s| s.name.clone()).collect();
    assert_eq!(found.len(), 1, "expected one span {name:?} among {names:?}");
    found[0]
}

/// Every span: one trace, attribute keys unique (an attribute recorded twice would be
/// exported twice).
#[track_caller]
fn one_trace(spans: &[SpanData]) -> TraceId {
    let trace = spans[0].span_context.trace_id();
    for span in spans {
        assert_eq!(span.span_context.trace_id(), trace, "span {:?}", span.name);
        let mut keys = BTreeMap::new();
        for kv in &span.attributes {
            *keys.entry(kv.key.as_str().to_owned()).or_insert(0) += 1;
        }
        let repeated: Vec<_> = keys.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            repeated.is_empty(),
            "span {:?} repeats {repeated:?}",
            span.name
        );
    }
    let roots = spans
        .iter()
        .filter(|s| s.parent_span_id == SpanId::INVALID)
        .count();
    assert_eq!(roots, 1, "one root span");
    trace
}

/// Content (prompts, arguments, outputs) attributes.
const CONTENT_KEYS: [&str; 4] = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
];

// ===== a scripted run =====

const PROMPT: &str = "What does the secret file say?";
const SECRET: &str = "the secret is 42";

fn scripted_agent(trace: TraceLayer) -> Agent {
    let model = ScriptedModel::new()
        .respond(
            ModelResponse::tool_calls([ToolCall::new(
                "call_read",
                "read_secret",
                json!({ "path": "secret.txt" }),
            )])
            .with_usage(Usage {
                input_tokens: 11,
                output_tokens: 7,
                ..Usage::default()
            }),
        )
        .respond(ModelResponse::text("It says 42.").with_usage(Usage {
            input_tokens: 20,
            output_tokens: 5,
            ..Usage::default()
        }));
    Agent::builder()
        .name("support")
        .settings(
            ModelSettings::default()
                .model("scripted-1")
                .temperature(0.2)
                .max_tokens(256),
        )
        .model(ServiceBuilder::new().layer(trace.clone()).service(model))
        .tool(tool_fn(
            "read_secret",
            "Reads the secret",
            json!({ "type": "object" }),
            |_args, _ctx| async move { Ok::<_, BoxError>(SECRET) },
        ))
        .tool_layer(trace)
        .build()
}

#[tokio::test]
async fn a_scripted_run_is_one_trace_with_the_genai_attributes() {
    let otel = otel();
    let agent = scripted_agent(TraceLayer::new());
    let resp = agent
        .run(AgentRequest::new(PROMPT).thread("thread-7"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);

    let spans = otel.spans();
    assert_eq!(spans.len(), 4, "{spans:#?}");
    one_trace(&spans);

    // The agent span parents everything.
    let agent_span = only(&spans, "invoke_agent support");
    let agent_id = agent_span.span_context.span_id();
    assert_eq!(agent_span.parent_span_id, SpanId::INVALID);
    assert_eq!(agent_span.span_kind, SpanKind::Internal);
    assert_eq!(string(agent_span, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(string(agent_span, "gen_ai.agent.name"), "support");
    assert_eq!(string(agent_span, "gen_ai.provider.name"), "scripted");
    assert_eq!(string(agent_span, "gen_ai.request.model"), "scripted-1");
    assert_eq!(string(agent_span, "gen_ai.conversation.id"), "thread-7");
    assert_eq!(int(agent_span, "gen_ai.usage.input_tokens"), 31);
    assert_eq!(int(agent_span, "gen_ai.usage.output_tokens"), 12);
    assert_eq!(string(agent_span, "tower_agent.outcome"), "finished");
    assert_eq!(string(agent_span, "tower_agent.run.id"), resp.run_id);
    assert!(attr(agent_span, "error.type").is_none());
    assert_eq!(agent_span.status, Status::Unset);

    let chats = named(&spans, "chat scripted-1");
    assert_eq!(chats.len(), 2);
    for (i, chat) in chats.iter().enumerate() {
        assert_eq!(chat.parent_span_id, agent_id);
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(string(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(string(chat, "gen_ai.provider.name"), "scripted");
        assert_eq!(string(chat, "gen_ai.request.model"), "scripted-1");
        assert_eq!(string(chat, "gen_ai.response.model"), "scripted-1");
        assert_eq!(
            string(chat, "gen_ai.response.id"),
            format!("scripted_{}", i + 1)
        );
        assert_eq!(string(chat, "gen_ai.conversation.id"), "thread-7");
        assert_eq!(int(chat, "gen_ai.request.max_tokens"), 256);
        // Exactly the value given, not the f32 widened to 0.20000000298023224.
        assert_eq!(
            attr(chat, "gen_ai.request.temperature"),
            Some(&Value::F64(0.2))
        );
    }
    assert_eq!(
        strings(chats[0], "gen_ai.response.finish_reasons"),
        ["tool_use"]
    );
    assert_eq!(
        strings(chats[1], "gen_ai.response.finish_reasons"),
        ["end_turn"]
    );
    assert_eq!(int(chats[0], "gen_ai.usage.input_tokens"), 11);
    assert_eq!(int(chats[0], "gen_ai.usage.output_tokens"), 7);

    let tool = only(&spans, "execute_tool read_secret");
    assert_eq!(tool.parent_span_id, agent_id);
    assert_eq!(tool.span_kind, SpanKind::Internal);
    assert_eq!(string(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(string(tool, "gen_ai.tool.name"), "read_secret");
    assert_eq!(string(tool, "gen_ai.tool.call.id"), "call_read");
    assert_eq!(string(tool, "gen_ai.tool.type"), "function");
    assert_eq!(string(tool, "gen_ai.conversation.id"), "thread-7");
    assert_eq!(tool.status, Status::Unset);

    // Content is off by default: no content attribute, and neither the prompt, the
    // arguments nor the tool's output appear in any attribute.
    for span in &spans {
        for key in CONTENT_KEYS {
            assert!(attr(span, key).is_none(), "{key} on {:?}", span.name);
        }
        for kv in &span.attributes {
            let value = kv.value.as_str();
            for secret in [PROMPT, SECRET, "secret.txt", "It says 42."] {
                assert!(
                    !value.contains(secret),
                    "{} = {value} on {:?}",
                    kv.key,
                    span.name
                );
            }
        }
    }
}

#[tokio::test]
async fn content_is_recorded_when_opted_in() {
    let otel = otel();
    let agent = scripted_agent(TraceLayer::new().capture_content(true));
    agent.run(PROMPT).await.unwrap();
    let spans = otel.spans();
    one_trace(&spans);

    let chats = named(&spans, "chat scripted-1");
    let input: serde_json::Value =
        serde_json::from_str(&string(chats[0], "gen_ai.input.messages")).unwrap();
    assert_eq!(
        input,
        json!([{ "role": "user", "parts": [{ "type": "text", "content": PROMPT }] }])
    );
    let output: serde_json::Value =
        serde_json::from_str(&string(chats[0], "gen_ai.output.messages")).unwrap();
    assert_eq!(
        output,
        json!([{
            "role": "assistant",
            "parts": [{
                "type": "tool_call",
                "id": "call_read",
                "name": "read_secret",
                "arguments": { "path": "secret.txt" },
            }],
            "finish_reason": "tool_use",
        }])
    );
    // The second call sees the tool's result.
    let input: serde_json::Value =
        serde_json::from_str(&string(chats[1], "gen_ai.input.messages")).unwrap();
    assert_eq!(
        input[2],
        json!({ "role": "tool", "parts": [{ "type": "tool_call_response", "id": "call_read", "result": SECRET }] })
    );
    let tool = only(&spans, "execute_tool read_secret");
    assert_eq!(
        string(tool, "gen_ai.tool.call.arguments"),
        r#"{"path":"secret.txt"}"#
    );
    assert_eq!(string(tool, "gen_ai.tool.call.result"), SECRET);
}

#[tokio::test]
async fn a_subagent_nests_under_its_tool_span() {
    let otel = otel();
    let researcher = Agent::builder()
        .name("researcher")
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(ScriptedModel::new().text("tower is a library of services")),
        )
        .build();
    let lead = Agent::builder()
        .name("lead")
        .model(
            ServiceBuilder::new().layer(TraceLayer::new()).service(
                ScriptedModel::new()
                    .tool_call("research", json!({ "prompt": "What is tower?" }))
                    .text("Tower is a library."),
            ),
        )
        .tool(researcher.into_tool("research", "Researches a question"))
        .tool_layer(TraceLayer::new())
        .build();
    let resp = lead.run("Find out what tower is").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);

    let spans = otel.spans();
    assert_eq!(spans.len(), 6, "{spans:#?}");
    one_trace(&spans);
    let lead_span = only(&spans, "invoke_agent lead");
    let tool = only(&spans, "execute_tool research");
    let sub = only(&spans, "invoke_agent researcher");
    assert_eq!(tool.parent_span_id, lead_span.span_context.span_id());
    assert_eq!(sub.parent_span_id, tool.span_context.span_id());
    let chats = named(&spans, "chat");
    assert_eq!(chats.len(), 3);
    let under = |parent: &SpanData| {
        chats
            .iter()
            .filter(|c| c.parent_span_id == parent.span_context.span_id())
            .count()
    };
    assert_eq!(under(lead_span), 2);
    assert_eq!(under(sub), 1);
    // Each agent reports its own conversation.
    assert_ne!(
        string(sub, "gen_ai.conversation.id"),
        string(lead_span, "gen_ai.conversation.id")
    );
}

// ===== a run against the loopback OpenAI server =====

fn openai(server: &Server) -> OpenAiChat {
    OpenAiChat::builder()
        .base_url(format!("{}/v1", server.url()))
        .api_key("sk-test")
        .model("gpt-4o")
        .client(loopback::client())
        .build()
}

#[tokio::test]
async fn an_openai_run_reports_provider_models_id_and_finish_reasons() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "chatcmpl-abc123",
            "object": "chat.completion",
            "model": "gpt-4o-2024-08-06",
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": "Hello there." },
                "finish_reason": "stop",
            }],
            "usage": { "prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12 },
        })
        .to_string(),
    ));
    let otel = otel();
    let agent = Agent::builder()
        .name("greeter")
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(openai(&server)),
        )
        .build();
    let resp = agent
        .run(AgentRequest::new("Hi").thread("conv-1"))
        .await
        .unwrap();
    assert_eq!(resp.text, "Hello there.");

    let spans = otel.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    one_trace(&spans);
    let agent_span = only(&spans, "invoke_agent greeter");
    assert_eq!(string(agent_span, "gen_ai.provider.name"), "openai");
    assert_eq!(string(agent_span, "gen_ai.request.model"), "gpt-4o");
    assert_eq!(string(agent_span, "gen_ai.conversation.id"), "conv-1");

    // The request named no model: the provider's own is the request model.
    let chat = only(&spans, "chat gpt-4o");
    assert_eq!(chat.parent_span_id, agent_span.span_context.span_id());
    assert_eq!(string(chat, "gen_ai.operation.name"), "chat");
    assert_eq!(string(chat, "gen_ai.provider.name"), "openai");
    assert_eq!(string(chat, "gen_ai.request.model"), "gpt-4o");
    assert_eq!(string(chat, "gen_ai.response.model"), "gpt-4o-2024-08-06");
    assert_eq!(string(chat, "gen_ai.response.id"), "chatcmpl-abc123");
    assert_eq!(string(chat, "gen_ai.conversation.id"), "conv-1");
    assert_eq!(strings(chat, "gen_ai.response.finish_reasons"), ["stop"]);
    assert_eq!(int(chat, "gen_ai.usage.input_tokens"), 9);
    assert_eq!(int(chat, "gen_ai.usage.output_tokens"), 3);
    assert!(attr(chat, "gen_ai.input.messages").is_none());
    assert_eq!(chat.status, Status::Unset);
}

#[tokio::test]
async fn a_failed_openai_call_sets_error_type_and_status() {
    let server = Server::start();
    server.reply(Reply::status(
        503,
        json!({ "error": { "message": "overloaded", "type": "server_error" } }).to_string(),
    ));
    let otel = otel();
    let agent = Agent::builder()
        .name("greeter")
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(openai(&server)),
        )
        .build();
    let resp = agent.run("Hi").await.unwrap();
    assert!(
        matches!(resp.outcome, Outcome::Aborted { .. }),
        "{:?}",
        resp.outcome
    );

    let spans = otel.spans();
    one_trace(&spans);
    let chat = only(&spans, "chat");
    assert_eq!(string(chat, "error.type"), "503");
    assert_eq!(string(chat, "gen_ai.operation.name"), "chat");
    match &chat.status {
        Status::Error { description } => {
            assert!(description.contains("overloaded"), "{description}")
        }
        other => panic!("status {other:?}"),
    }
    let agent_span = only(&spans, "invoke_agent greeter");
    assert_eq!(string(agent_span, "error.type"), "aborted");
    assert_eq!(string(agent_span, "tower_agent.outcome"), "aborted");
    assert!(matches!(agent_span.status, Status::Error { .. }));
    // An ephemeral run reports its fresh thread id.
    assert_eq!(string(agent_span, "gen_ai.conversation.id"), resp.thread_id);
}

#[tokio::test]
async fn a_failed_tool_call_is_an_error_span() {
    let otel = otel();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new().layer(TraceLayer::new()).service(
                ScriptedModel::new()
                    .tool_call("boom", json!({}))
                    .text("It failed."),
            ),
        )
        .tool(tool_fn(
            "boom",
            "Fails",
            json!({ "type": "object" }),
            |_a, _c| async move { Err::<String, BoxError>("disk on fire".into()) },
        ))
        .tool_layer(TraceLayer::new())
        .build();
    agent.run("Go").await.unwrap();
    let spans = otel.spans();
    one_trace(&spans);
    // No name: the span is `invoke_agent`.
    only(&spans, "invoke_agent");
    let tool = only(&spans, "execute_tool boom");
    assert_eq!(string(tool, "error.type"), "_OTHER");
    match &tool.status {
        Status::Error { description } => assert!(description.contains("disk on fire")),
        other => panic!("status {other:?}"),
    }
}

#[tokio::test]
async fn a_tool_error_output_is_an_error_span() {
    let otel = otel();
    let mut tools = TraceLayer::new().layer(service_fn(|req: ToolRequest| async move {
        Ok::<_, BoxError>(ToolOutput::error(req.call.id, "no such file: secret.txt"))
    }));
    let call = ToolCall::new("c1", "read", json!({ "path": "secret.txt" }));
    let out = tools
        .ready()
        .await
        .unwrap()
        .call(ToolRequest::new(call, RunContext::new()))
        .await
        .unwrap();
    assert!(out.is_error);
    let spans = otel.spans();
    let tool = only(&spans, "execute_tool read");
    assert_eq!(string(tool, "error.type"), "tool_error");
    assert_eq!(int(tool, "tower_agent.output_length"), 24);
    match &tool.status {
        // The description does not carry the output (content is off).
        Status::Error { description } => assert!(!description.contains("secret")),
        other => panic!("status {other:?}"),
    }
}

#[cfg(feature = "anthropic")]
#[tokio::test]
async fn an_anthropic_run_reports_its_own_stop_reason() {
    use tower_agent::model::anthropic::Anthropic;

    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "type": "message",
            "id": "msg_01XYZ",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": "Hello." }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 8, "output_tokens": 2 },
        })
        .to_string(),
    ));
    let otel = otel();
    let claude = Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .model("claude-sonnet-4-5")
        .client(loopback::client())
        .build();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(claude),
        )
        .build();
    agent.run("Hi").await.unwrap();

    let spans = otel.spans();
    one_trace(&spans);
    let chat = only(&spans, "chat claude-sonnet-4-5");
    assert_eq!(string(chat, "gen_ai.provider.name"), "anthropic");
    assert_eq!(string(chat, "gen_ai.request.model"), "claude-sonnet-4-5");
    assert_eq!(
        string(chat, "gen_ai.response.model"),
        "claude-sonnet-4-5-20250929"
    );
    assert_eq!(string(chat, "gen_ai.response.id"), "msg_01XYZ");
    // The provider's own wording, as an array.
    assert_eq!(
        strings(chat, "gen_ai.response.finish_reasons"),
        ["end_turn"]
    );
    assert_eq!(
        string(only(&spans, "invoke_agent"), "gen_ai.provider.name"),
        "anthropic"
    );
}

// Prompt caching (issue 13): Anthropic reports cache reads and writes apart from the other
// input tokens; `Usage` keeps them apart (all counted in `input_tokens`, as the conventions
// count them), and the chat span records them as `gen_ai.usage.cache_read.input_tokens` and
// `gen_ai.usage.cache_creation.input_tokens`.
#[tokio::test]
async fn anthropic_cache_reads_and_writes_are_reported_apart() {
    use tower_agent::model::anthropic::Anthropic;

    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "type": "message", "id": "msg_cache", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": "Hello." }],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 50, "output_tokens": 7,
                "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000
            },
        })
        .to_string(),
    ));
    let otel = otel();
    let claude = Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .model("claude-sonnet-4-5")
        .client(loopback::client())
        .build();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(claude),
        )
        .build();
    let resp = agent.run("Hi").await.unwrap();

    assert_eq!(resp.usage.input_tokens, 3050);
    assert_eq!(resp.usage.cache_read_tokens, 2000);
    assert_eq!(resp.usage.cache_write_tokens, 1000);
    assert_eq!(resp.usage.output_tokens, 7);
    let spans = otel.spans();
    let chat = only(&spans, "chat claude-sonnet-4-5");
    assert_eq!(int(chat, "gen_ai.usage.input_tokens"), 3050);
    assert_eq!(int(chat, "gen_ai.usage.cache_read.input_tokens"), 2000);
    assert_eq!(int(chat, "gen_ai.usage.cache_creation.input_tokens"), 1000);
}

// OpenAI Chat Completions: `prompt_tokens_details.cached_tokens` and
// `completion_tokens_details.reasoning_tokens` are kept apart; no cache write is reported, so
// none is recorded.
#[tokio::test]
async fn openai_cached_and_reasoning_tokens_are_reported_apart() {
    let server = Server::start();
    server.reply(Reply::json(
        json!({
            "id": "chatcmpl-cache", "object": "chat.completion", "model": "gpt-4o-2024-08-06",
            "choices": [{ "index": 0, "finish_reason": "stop",
                "message": { "role": "assistant", "content": "Hello." } }],
            "usage": {
                "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                "prompt_tokens_details": { "cached_tokens": 1920 },
                "completion_tokens_details": { "reasoning_tokens": 256 }
            }
        })
        .to_string(),
    ));
    let otel = otel();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(openai(&server)),
        )
        .build();
    let resp = agent.run("Hi").await.unwrap();

    assert_eq!(resp.usage.input_tokens, 2006);
    assert_eq!(resp.usage.cache_read_tokens, 1920);
    assert_eq!(resp.usage.cache_write_tokens, 0);
    assert_eq!(resp.usage.reasoning_tokens, 256);
    let spans = otel.spans();
    let chat = named(&spans, "invoke_agent");
    assert_eq!(chat.len(), 1);
    let chat = spans
        .iter()
        .find(|s| s.name.starts_with("chat "))
        .expect("a chat span");
    assert_eq!(int(chat, "gen_ai.usage.cache_read.input_tokens"), 1920);
    assert!(attr(chat, "gen_ai.usage.cache_creation.input_tokens").is_none());
}
