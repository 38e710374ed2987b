//! `TraceLayer` on the model and tool stacks, observed through a capturing subscriber.

use std::{
    collections::BTreeMap,
    fmt,
    future::Future,
    sync::{Arc, Mutex},
};

use serde_json::json;
use tokio_test::{assert_pending, assert_ready_ok};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_agent::{
    Agent, BoxError,
    context::RunContext,
    layers::trace::{Trace, TraceLayer, TracedRequest, TracedResponse},
    message::{Message, ToolCall, ToolOutput, Usage},
    model::{ModelRequest, ModelResponse, ModelSettings, ResponseMeta, ScriptedModel},
    tool::{ToolRequest, ToolRouter, tool_fn},
};
use tracing::{
    Level, Subscriber,
    field::{Field, Visit},
    span::{Attributes, Id, Record},
    subscriber::DefaultGuard,
};
use tracing_subscriber::{
    filter::LevelFilter,
    layer::{Context, SubscriberExt},
    registry::LookupSpan,
};

// ===== capturing subscriber =====

/// One span as the subscriber saw it: its name, target, level, parent (an index into the captured
/// spans) and every field recorded on it, at creation or later.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    target: &'static str,
    level: Level,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }

    #[track_caller]
    fn field(&self, field: &str) -> &str {
        self.get(field)
            .unwrap_or_else(|| panic!("span {} has no field {field}: {:?}", self.name, self.fields))
    }
}

#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Captured>>>,
}

/// The index of a span in `Capture::spans`, kept in the span's extensions (span ids are
/// reused once a span closes; this is not).
struct Index(usize);

impl Capture {
    fn spans(&self) -> Vec<Captured> {
        self.spans.lock().unwrap().clone()
    }

    #[track_caller]
    fn only(&self, name: &str) -> Captured {
        let spans: Vec<_> = self
            .spans()
            .into_iter()
            .filter(|s| s.name == name)
            .collect();
        assert_eq!(spans.len(), 1, "expected one {name} span: {spans:#?}");
        spans.into_iter().next().unwrap()
    }

    #[track_caller]
    fn index_of(&self, name: &str) -> usize {
        let spans = self.spans();
        let mut found = spans.iter().enumerate().filter(|(_, s)| s.name == name);
        let (i, _) = found.next().unwrap_or_else(|| panic!("no {name} span"));
        assert!(found.next().is_none(), "more than one {name} span");
        i
    }
}

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is in the registry");
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let mut captured = Captured {
            name: attrs.metadata().name(),
            target: attrs.metadata().target(),
            level: *attrs.metadata().level(),
            parent,
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut captured.fields));
        let mut spans = self.spans.lock().unwrap();
        span.extensions_mut().insert(Index(spans.len()));
        spans.push(captured);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is in the registry");
        if let Some(&Index(i)) = span.extensions().get::<Index>() {
            values.record(&mut Fields(&mut self.spans.lock().unwrap()[i].fields));
        }
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// A capturing subscriber, the default on this thread until the guard drops.
fn capture() -> (Capture, DefaultGuard) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    crate::support::scoped_subscribers();
    (capture, tracing::subscriber::set_default(subscriber))
}

/// A capturing subscriber that lets only spans at `max` or more severe through.
fn capture_up_to(max: LevelFilter) -> (Capture, DefaultGuard) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry()
        .with(max)
        .with(capture.clone());
    crate::support::scoped_subscribers();
    (capture, tracing::subscriber::set_default(subscriber))
}

// ===== helpers =====

/// A model that answers every request with `resp`.
fn model_answering(
    resp: ModelResponse,
) -> impl Service<ModelRequest, Response = ModelResponse, Error = BoxError, Future: Send> + Clone {
    service_fn(move |_req: ModelRequest| {
        let resp = resp.clone();
        async move { Ok::<_, BoxError>(resp) }
    })
}

/// A tool service that answers every call with `content`.
fn tool_answering(
    content: String,
) -> impl Service<ToolRequest, Response = ToolOutput, Error = BoxError, Future: Send> + Clone {
    service_fn(move |req: ToolRequest| {
        let out = ToolOutput::text(req.call.id, content.clone());
        async move { Ok::<_, BoxError>(out) }
    })
}

fn tool_request(name: &str, args: serde_json::Value) -> ToolRequest {
    ToolRequest::new(ToolCall::new("call_7", name, args), RunContext::new())
}

async fn call_model<S>(service: &mut S, req: ModelRequest) -> Result<ModelResponse, BoxError>
where
    S: Service<ModelRequest, Response = ModelResponse, Error = BoxError>,
{
    service.ready().await?.call(req).await
}

async fn call_tool<S>(service: &mut S, req: ToolRequest) -> Result<ToolOutput, BoxError>
where
    S: Service<ToolRequest, Response = ToolOutput, Error = BoxError>,
{
    service.ready().await?.call(req).await
}

// ===== model path =====

/// `gen_ai.response.finish_reasons` as this subscriber sees it: with the `opentelemetry`
/// feature it is an array set through `tracing-opentelemetry` (tests/otel.rs checks it), not
/// a tracing field.
fn finish_reasons(span: &Captured) -> Option<&str> {
    span.get("gen_ai.response.finish_reasons")
}

#[track_caller]
fn assert_finish_reasons(span: &Captured, json: &str) {
    if cfg!(feature = "opentelemetry") {
        assert_eq!(finish_reasons(span), None);
    } else {
        assert_eq!(finish_reasons(span), Some(json));
    }
}

/// Content attributes: off unless asked for.
const CONTENT: [&str; 4] = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
];

#[tokio::test(flavor = "current_thread")]
async fn model_span_records_request_and_response_fields() {
    let (capture, _guard) = capture();
    let resp = ModelResponse::new(Message::assistant("Let me look.").with_tool_calls(vec![
        ToolCall::new("c1", "read_file", json!({ "path": "a.txt" })),
        ToolCall::new("c2", "grep", json!({ "pattern": "x" })),
    ]))
    .with_usage(Usage {
        input_tokens: 120,
        output_tokens: 7,
        ..Usage::default()
    })
    .with_meta(
        ResponseMeta::new("openai")
            .model("gpt-test-0613")
            .id("chatcmpl-1")
            .finish_reasons(["tool_calls"]),
    );
    let mut model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(model_answering(resp.clone()));

    let ctx = RunContext::builder()
        .session_id("thread-1")
        .run_id("run-9")
        .build()
        .with_step(2);
    let mut req = ModelRequest::new(vec![Message::system("Be terse."), Message::user("Héllo")]);
    req.settings = ModelSettings::default()
        .model("gpt-test")
        .temperature(0.2)
        .max_tokens(256);
    req.ctx = ctx;

    assert_eq!(call_model(&mut model, req).await.unwrap(), resp);

    let span = capture.only("chat");
    assert_eq!(span.level, Level::INFO);
    assert_eq!(span.target, "tower_agent::layers::trace");
    assert_eq!(span.parent, None);
    let expected = [
        ("otel.name", "chat gpt-test"),
        ("otel.kind", "client"),
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "gpt-test"),
        // The value given, not 0.20000000298023224 (the f32 widened).
        ("gen_ai.request.temperature", "0.2"),
        ("gen_ai.request.max_tokens", "256"),
        ("gen_ai.response.model", "gpt-test-0613"),
        ("gen_ai.response.id", "chatcmpl-1"),
        ("gen_ai.usage.input_tokens", "120"),
        ("gen_ai.usage.output_tokens", "7"),
        ("gen_ai.conversation.id", "thread-1"),
        ("tower_agent.run.id", "run-9"),
        ("tower_agent.step", "2"),
        ("tower_agent.message_count", "2"),
        ("tower_agent.tool_calls", "2"),
    ];
    for (field, value) in expected {
        assert_eq!(span.field(field), value, "field {field}");
    }
    assert_finish_reasons(&span, r#"["tool_calls"]"#);
    for absent in CONTENT.iter().chain(&["error.type", "otel.status_code"]) {
        assert_eq!(span.get(absent), None, "field {absent}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn model_span_leaves_out_what_is_unknown() {
    let (capture, _guard) = capture();
    let mut model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(model_answering(ModelResponse::text("Hi!")));
    call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();

    let span = capture.only("chat");
    assert_eq!(span.field("tower_agent.tool_calls"), "0");
    for absent in [
        "otel.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.request.temperature",
        "gen_ai.response.model",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "error.type",
    ] {
        assert_eq!(span.get(absent), None, "field {absent}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn scripted_model_reports_its_metadata() {
    let (capture, _guard) = capture();
    let mut model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(ScriptedModel::new().text("Hi!"));
    let resp = call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(resp.meta.provider.as_deref(), Some("scripted"));
    assert_eq!(resp.meta.finish_reasons, ["end_turn"]);
    let span = capture.only("chat");
    assert_eq!(span.field("gen_ai.provider.name"), "scripted");
    assert_eq!(span.field("gen_ai.response.id"), "scripted_1");
    assert_finish_reasons(&span, r#"["end_turn"]"#);
}

#[tokio::test(flavor = "current_thread")]
async fn model_error_is_recorded_and_passed_through() {
    let (capture, _guard) = capture();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&failures);
    let mut model = ServiceBuilder::new()
        .layer(
            TraceLayer::new()
                .provider_name("acme")
                .on_failure(move |err, _span| seen.lock().unwrap().push(err.to_string())),
        )
        .service(service_fn(|_req: ModelRequest| async {
            Err::<ModelResponse, BoxError>("provider down (503)".into())
        }));

    let err = call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "provider down (503)");

    let span = capture.only("chat");
    assert_eq!(span.field("otel.status_description"), "provider down (503)");
    assert_eq!(span.field("otel.status_code"), "error");
    assert_eq!(span.field("error.type"), "_OTHER");
    assert_eq!(span.field("gen_ai.provider.name"), "acme");
    assert_eq!(span.field("tower_agent.message_count"), "1");
    assert_eq!(span.get("tower_agent.tool_calls"), None);
    assert_eq!(*failures.lock().unwrap(), ["provider down (503)"]);
}

#[tokio::test(flavor = "current_thread")]
async fn timeouts_are_error_type_timeout() {
    let (capture, _guard) = capture();
    let mut model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .timeout(std::time::Duration::from_millis(1))
        .service(service_fn(|_req: ModelRequest| async {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            Ok::<_, BoxError>(ModelResponse::text("late"))
        }));
    call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    assert_eq!(capture.only("chat").field("error.type"), "timeout");
}

// ===== tool path =====

#[tokio::test(flavor = "current_thread")]
async fn tool_span_records_call_and_output_fields() {
    let (capture, _guard) = capture();
    let router = ToolRouter::new().tool(tool_fn(
        "read_file",
        "Reads a file",
        json!({ "type": "object" }),
        |_args, _ctx| async { Ok::<_, BoxError>("línea 1\nlínea 2") },
    ));
    let mut tools = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(router);

    let ctx = RunContext::builder()
        .session_id("thread-1")
        .run_id("run-9")
        .build()
        .with_step(4);
    let call = ToolCall::new("call_7", "read_file", json!({ "path": "notes.txt" }));
    let out = call_tool(&mut tools, ToolRequest::new(call, ctx))
        .await
        .unwrap();
    assert_eq!(out, ToolOutput::text("call_7", "línea 1\nlínea 2"));

    let span = capture.only("execute_tool");
    assert_eq!(span.target, "tower_agent::layers::trace");
    let expected = [
        ("otel.name", "execute_tool read_file"),
        ("otel.kind", "internal"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "read_file"),
        ("gen_ai.tool.call.id", "call_7"),
        ("gen_ai.tool.type", "function"),
        ("gen_ai.conversation.id", "thread-1"),
        ("tower_agent.run.id", "run-9"),
        ("tower_agent.step", "4"),
        ("tower_agent.output_length", "17"), // bytes: each "í" is two
    ];
    for (field, value) in expected {
        assert_eq!(span.field(field), value, "field {field}");
    }
    for absent in CONTENT.iter().chain(&["error.type", "otel.status_code"]) {
        assert_eq!(span.get(absent), None, "field {absent}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn tool_error_output_is_an_error_span() {
    let (capture, _guard) = capture();
    let mut tools = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(ToolRouter::new());

    let out = call_tool(&mut tools, tool_request("nope", json!({})))
        .await
        .unwrap();
    assert!(out.is_error);

    let span = capture.only("execute_tool");
    assert_eq!(span.field("error.type"), "tool_error");
    assert_eq!(span.field("otel.status_code"), "error");
    // The output is content: not in the description.
    assert!(!span.field("otel.status_description").contains("nope"));
    assert_eq!(span.get("gen_ai.tool.call.result"), None);
}

#[tokio::test(flavor = "current_thread")]
async fn tool_err_is_recorded_and_passed_through() {
    let (capture, _guard) = capture();
    let mut tools = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(service_fn(|_req: ToolRequest| async {
            Err::<ToolOutput, BoxError>("disk on fire".into())
        }));

    let err = call_tool(
        &mut tools,
        tool_request("write_file", json!({ "path": "x" })),
    )
    .await
    .unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");

    let span = capture.only("execute_tool");
    assert_eq!(span.field("otel.status_description"), "disk on fire");
    assert_eq!(span.field("otel.status_code"), "error");
    assert_eq!(span.field("error.type"), "_OTHER");
    assert_eq!(span.get("gen_ai.tool.call.arguments"), None);
    assert_eq!(span.get("tower_agent.output_length"), None);
}

// ===== content capture =====

/// The text of the first part of the first message of a captured messages attribute.
fn first_part(json_text: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json_text).unwrap();
    v[0]["parts"][0]["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "current_thread")]
async fn captured_content_is_cut_at_max_content_chars() {
    // ASCII, two-byte and four-byte characters.
    for unit in ["a", "é", "🦀"] {
        let (capture, _guard) = capture();
        let long = unit.repeat(1_000);
        let expected = unit.repeat(500);
        let layer = TraceLayer::new()
            .capture_content(true)
            .max_content_chars(500);

        let mut model = ServiceBuilder::new()
            .layer(layer.clone())
            .service(model_answering(ModelResponse::text(long.clone())));
        let resp = call_model(
            &mut model,
            ModelRequest::new(vec![Message::user(long.clone())]),
        )
        .await
        .unwrap();
        assert_eq!(resp.message.text(), long, "the response is not cut");

        let mut tool = ServiceBuilder::new()
            .layer(layer)
            .service(tool_answering(long.clone()));
        let args = json!({ "content": long });
        let out = call_tool(&mut tool, tool_request("write_file", args.clone()))
            .await
            .unwrap();
        assert_eq!(out.content, long, "the output is not cut");

        let chat = capture.only("chat");
        assert_eq!(first_part(chat.field("gen_ai.input.messages")), expected);
        assert_eq!(first_part(chat.field("gen_ai.output.messages")), expected);
        let tool = capture.only("execute_tool");
        assert_eq!(tool.field("gen_ai.tool.call.result"), expected);
        assert_eq!(
            tool.field("tower_agent.output_length"),
            (unit.len() * 1_000).to_string()
        );
        let tool_args = tool.field("gen_ai.tool.call.arguments");
        assert_eq!(tool_args.chars().count(), 500);
        assert!(args.to_string().starts_with(tool_args));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn content_of_exactly_the_cap_is_whole() {
    let (capture, _guard) = capture();
    let text = "ж".repeat(500);
    let mut model = ServiceBuilder::new()
        .layer(
            TraceLayer::new()
                .capture_content(true)
                .max_content_chars(500),
        )
        .service(model_answering(ModelResponse::text(text.clone())));
    call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    let span = capture.only("chat");
    assert_eq!(first_part(span.field("gen_ai.output.messages")), text);
    assert_eq!(first_part(span.field("gen_ai.input.messages")), "Hi");
}

#[tokio::test(flavor = "current_thread")]
async fn customised_spans_get_the_attributes_they_declare() {
    let (capture, _guard) = capture();
    let responses = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&responses);
    let layer = TraceLayer::new()
        .make_span_with(|req| match req {
            TracedRequest::Model(_) => tracing::info_span!(
                "my.chat",
                gen_ai.response.id = tracing::field::Empty,
                my.field = tracing::field::Empty,
            ),
            _ => tracing::info_span!("my.other"),
        })
        .on_response(move |resp, span| {
            *counted.lock().unwrap() += 1;
            if let TracedResponse::Model(resp) = resp {
                span.record("my.field", resp.message.text().as_ref());
            }
        });
    let mut model = ServiceBuilder::new()
        .layer(layer)
        .service(ScriptedModel::new().text("Hi!"));
    call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    let span = capture.only("my.chat");
    assert_eq!(span.field("gen_ai.response.id"), "scripted_1");
    assert_eq!(span.field("my.field"), "Hi!");
    assert_eq!(*responses.lock().unwrap(), 1);
}

// ===== nesting =====

#[tokio::test(flavor = "current_thread")]
async fn spans_of_inner_services_nest_under_the_call_span() {
    let (capture, _guard) = capture();
    let tools = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(tool_answering("42".into()));

    // A model that opens a span when called, and calls a traced tool from its future, after a
    // yield (so the future is polled more than once).
    let mut model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .service(service_fn(move |req: ModelRequest| {
            let request_span = tracing::info_span!("provider.request");
            let tools = tools.clone();
            async move {
                tokio::task::yield_now().await;
                let out = tools
                    .oneshot(ToolRequest::new(
                        ToolCall::new("c1", "answer", json!({})),
                        req.ctx.clone(),
                    ))
                    .await?;
                tokio::task::yield_now().await;
                drop(tracing::info_span!("after.tool"));
                drop(request_span);
                Ok::<_, BoxError>(ModelResponse::text(out.content))
            }
        }));

    let resp = call_model(&mut model, ModelRequest::new(vec![Message::user("?")]))
        .await
        .unwrap();
    assert_eq!(resp.message.text(), "42");
    // Opened after the call: the call's span is no longer entered.
    drop(tracing::info_span!("outside"));

    let llm = capture.index_of("chat");
    let spans = capture.spans();
    assert_eq!(spans[llm].parent, None);
    assert_eq!(
        spans[capture.index_of("provider.request")].parent,
        Some(llm)
    );
    assert_eq!(spans[capture.index_of("execute_tool")].parent, Some(llm));
    assert_eq!(spans[capture.index_of("after.tool")].parent, Some(llm));
    assert_eq!(spans[capture.index_of("outside")].parent, None);
}

#[tokio::test(flavor = "current_thread")]
async fn spans_of_an_agent_run() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new()
        .tool_calls([("weather", json!({ "city": "Oslo" })), ("time", json!({}))])
        .text("Raining, 14:00.");
    let agent = Agent::builder()
        .name("assistant")
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .service(model),
        )
        .tool(tool_fn(
            "weather",
            "Weather in a city",
            json!({ "type": "object" }),
            |_, _| async { Ok::<_, BoxError>("raining") },
        ))
        .tool(tool_fn(
            "time",
            "Local time",
            json!({ "type": "object" }),
            |_, _| async { Ok::<_, BoxError>("14:00") },
        ))
        .tool_layer(TraceLayer::new().capture_content(true))
        .build();

    let resp = agent.run("Weather and time in Oslo?").await.unwrap();
    assert_eq!(resp.text, "Raining, 14:00.");

    let spans = capture.spans();
    let run = capture.index_of("invoke_agent");
    assert_eq!(spans[run].parent, None);
    assert_eq!(spans[run].target, "tower_agent::agent");
    assert_eq!(spans[run].field("otel.name"), "invoke_agent assistant");
    assert_eq!(spans[run].field("gen_ai.agent.name"), "assistant");
    assert_eq!(spans[run].field("gen_ai.provider.name"), "scripted");
    assert_eq!(spans[run].field("gen_ai.conversation.id"), resp.thread_id);
    assert_eq!(spans[run].field("tower_agent.run.id"), resp.run_id);
    assert_eq!(spans[run].field("tower_agent.outcome"), "finished");

    let llm: Vec<_> = spans.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(llm.len(), 2);
    assert!(llm.iter().all(|s| s.parent == Some(run)));
    assert_eq!(llm[0].field("tower_agent.tool_calls"), "2");
    assert_eq!(llm[0].field("tower_agent.step"), "0");
    assert_eq!(llm[1].field("tower_agent.step"), "1");
    assert_eq!(llm[0].field("tower_agent.run.id"), resp.run_id);
    assert_eq!(llm[0].field("gen_ai.conversation.id"), resp.thread_id);

    let mut tools: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "execute_tool")
        .map(|s| {
            assert_eq!(s.parent, Some(run));
            (
                s.field("gen_ai.tool.name"),
                s.field("gen_ai.tool.call.result"),
                s.field("tower_agent.step"),
            )
        })
        .collect();
    tools.sort();
    assert_eq!(tools, [("time", "14:00", "0"), ("weather", "raining", "0")]);
}

// ===== levels and no subscriber =====

#[tokio::test(flavor = "current_thread")]
async fn level_is_configurable() {
    let (capture, _guard) = capture_up_to(LevelFilter::INFO);
    let mut quiet = ServiceBuilder::new()
        .layer(TraceLayer::new().level(Level::DEBUG))
        .service(model_answering(ModelResponse::text("a")));
    let mut loud = ServiceBuilder::new()
        .layer(TraceLayer::new().level(Level::WARN))
        .service(tool_answering("b".into()));

    let resp = call_model(&mut quiet, ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(resp, ModelResponse::text("a"));
    let out = call_tool(&mut loud, tool_request("t", json!({})))
        .await
        .unwrap();
    assert_eq!(out.content, "b");

    let spans = capture.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].name, "execute_tool");
    assert_eq!(spans[0].level, Level::WARN);
    assert_eq!(spans[0].field("tower_agent.output_length"), "1");
}

/// Runs `f` with no subscriber on this thread (none is set globally in this test binary).
async fn without_subscriber<F: Future>(f: F) -> F::Output {
    let _guard = tracing::subscriber::set_default(tracing::subscriber::NoSubscriber::default());
    f.await
}

#[tokio::test(flavor = "current_thread")]
async fn without_subscriber_responses_pass_through_unchanged() {
    without_subscriber(async {
        let resp = ModelResponse::new(
            Message::assistant("é".repeat(1_000)).with_tool_calls(vec![ToolCall::new(
                "c1",
                "ls",
                json!({ "path": "." }),
            )]),
        )
        .with_usage(Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Usage::default()
        });
        let inner_resp = resp.clone();
        let mut model = ServiceBuilder::new()
            .layer(TraceLayer::new())
            .service(service_fn(move |_req: ModelRequest| {
                assert!(tracing::Span::current().is_disabled());
                let resp = inner_resp.clone();
                async move { Ok::<_, BoxError>(resp) }
            }));
        let got = call_model(&mut model, ModelRequest::new(vec![Message::user("Hi")]))
            .await
            .unwrap();
        assert_eq!(got, resp);

        let expected = ToolOutput::error("call_7", "x".repeat(2_000))
            .with_metadata("k", json!({ "nested": [1, 2] }));
        let inner_out = expected.clone();
        let mut tool = ServiceBuilder::new()
            .layer(TraceLayer::new())
            .service(service_fn(move |_req: ToolRequest| {
                let out = inner_out.clone();
                async move { Ok::<_, BoxError>(out) }
            }));
        let got = call_tool(&mut tool, tool_request("ls", json!({ "path": "." })))
            .await
            .unwrap();
        assert_eq!(got, expected);

        let mut failing = Trace::new(service_fn(|_req: ToolRequest| async {
            Err::<ToolOutput, BoxError>("no".into())
        }));
        let err = call_tool(&mut failing, tool_request("ls", json!({})))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "no");
    })
    .await;
}

// ===== tower contract =====

#[tokio::test(flavor = "current_thread")]
async fn readiness_and_requests_pass_through() {
    let (capture, _guard) = capture();
    let (mut service, mut handle) =
        tower_test::mock::spawn_layer::<ModelRequest, ModelResponse, _>(TraceLayer::new());

    handle.allow(0);
    assert_pending!(service.poll_ready::<ModelRequest>());
    handle.allow(1);
    assert_ready_ok!(service.poll_ready::<ModelRequest>());

    let mut req = ModelRequest::new(vec![Message::user("ping")]);
    req.settings = ModelSettings::default().model("m");
    let future = service.call(req);
    let (seen, send) = handle.next_request().await.unwrap();
    assert_eq!(seen.messages[0].text(), "ping");
    assert_eq!(seen.settings.model.as_deref(), Some("m"));
    send.send_response(ModelResponse::text("pong"));
    assert_eq!(future.await.unwrap(), ModelResponse::text("pong"));

    let span = capture.only("chat");
    assert_eq!(span.field("otel.name"), "chat m");
    assert_eq!(span.field("gen_ai.request.model"), "m");
}

#[test]
fn traits() {
    fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}
    fn assert_send<T: Send>(_: &T) {}
    fn assert_model<S>(_: &S)
    where
        S: Service<ModelRequest, Response = ModelResponse, Error = BoxError>,
    {
    }
    fn assert_tool<S>(_: &S)
    where
        S: Service<ToolRequest, Response = ToolOutput, Error = BoxError>,
    {
    }

    assert_send_sync_clone::<TraceLayer>();
    assert_send_sync_clone::<Trace<ScriptedModel>>();
    assert_send_sync_clone::<Trace<ToolRouter>>();

    let mut model = TraceLayer::new().layer(ScriptedModel::new().text("x"));
    assert_model(&model);
    assert_send(&model.call(ModelRequest::new(vec![])));
    let mut tools = TraceLayer::default().layer(ToolRouter::new());
    assert_tool(&tools);
    assert_send(&tools.call(tool_request("x", json!({}))));

    assert_eq!(tools.get_ref().len(), 0);
    let _: &mut ToolRouter = tools.get_mut();
    let _: ToolRouter = tools.into_inner();
    let debug = format!("{:?}", TraceLayer::default());
    assert!(
        debug.contains("Info") && debug.contains("capture_content: false"),
        "{debug}"
    );
}
