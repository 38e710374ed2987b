//! The HTTP server end to end, over real sockets on 127.0.0.1 with reqwest: runs, SSE
//! streams, threads, errors, concurrency, layers and graceful shutdown.

use crate::support;

use std::{
    future::IntoFuture,
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::{StreamExt, future::BoxFuture};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use tokio::{
    sync::{Notify, oneshot},
    task::JoinHandle,
};
use tower_agent::{
    Agent, BoxError,
    message::Role,
    model::{ModelResponse, ScriptedModel},
    server::{self, RunResponse, ThreadResponse},
    store::{Sqlite, Thread, ThreadStore},
    tool::tool_fn,
};

use support::{DropGuard, answers, any_object, assert_history_valid, within};

// ===== helpers =====

/// A server on 127.0.0.1:0, stopped by [`TestServer::stop`].
struct TestServer {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<io::Result<()>>,
}

impl TestServer {
    async fn start(agent: Agent) -> Self {
        Self::start_with(agent, |serve| serve).await
    }

    async fn start_with(
        agent: Agent,
        configure: impl FnOnce(
            server::Serve<BoxFuture<'static, ()>>,
        ) -> server::Serve<BoxFuture<'static, ()>>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown: BoxFuture<'static, ()> = Box::pin(async move {
            let _ = stopped.await;
        });
        let serve = configure(server::serve(listener, agent, shutdown));
        let url = format!("http://{}", serve.local_addr().unwrap());
        let handle = tokio::spawn(serve.into_future());
        TestServer {
            url,
            stop: Some(stop),
            handle,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Triggers the shutdown.
    fn begin_shutdown(&mut self) {
        let _ = self.stop.take().expect("not stopped yet").send(());
    }

    /// Triggers the shutdown and waits for the server to exit.
    async fn stop(mut self) {
        self.begin_shutdown();
        within("server exit", self.handle).await.unwrap().unwrap();
    }
}

async fn post(client: &Client, url: String, body: Value) -> (StatusCode, Value) {
    let resp = client.post(url).json(&body).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

async fn get(client: &Client, url: String) -> (StatusCode, Value) {
    let resp = client.get(url).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

/// One parsed SSE event: its `event:` name and its `data:` as JSON.
#[derive(Debug, Clone)]
struct SseEvent {
    name: String,
    data: Value,
}

/// Parses SSE text as it arrives: feed it chunks, take the events that are complete.
#[derive(Default)]
struct SseParser {
    buffer: String,
}

impl SseParser {
    fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.push_str(std::str::from_utf8(chunk).unwrap());
        let mut events = Vec::new();
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let (mut name, mut data) = (None, Vec::new());
            for line in block.lines() {
                if line.starts_with(':') || line.is_empty() {
                    continue; // comment (keep-alive)
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => name = Some(value.to_owned()),
                    "data" => data.push(value.to_owned()),
                    _ => {}
                }
            }
            if data.is_empty() {
                continue;
            }
            events.push(SseEvent {
                name: name.unwrap_or_else(|| "message".into()),
                data: serde_json::from_str(&data.join("\n")).expect("data is JSON"),
            });
        }
        events
    }
}

/// A gate a tool waits at: the test learns when the tool started and decides when it ends.
#[derive(Clone, Default)]
struct Gate {
    entered: Arc<Notify>,
    open: Arc<Notify>,
}

impl Gate {
    fn tool(&self, name: &'static str) -> impl tower_agent::tool::Tool {
        let gate = self.clone();
        tool_fn(name, "waits at the gate", any_object(), move |_, _| {
            let gate = gate.clone();
            async move {
                gate.entered.notify_one();
                gate.open.notified().await;
                Ok::<_, BoxError>(format!("{name} done"))
            }
        })
    }
}

fn echo_prompts_model() -> ScriptedModel {
    ScriptedModel::from_fn(|req| {
        let prompts: Vec<String> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text().into_owned())
            .collect();
        Ok(ModelResponse::text(format!(
            "prompts: {}",
            prompts.join(", ")
        )))
    })
}

// ===== tests =====

#[tokio::test]
async fn run_answers_json_and_saves_the_thread() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("lookup", json!({"q": "x"}))
                .text("Found it."),
        )
        .tool(answers("lookup", "x is 42"))
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    let (status, health) = get(&client, server.url("/healthz")).await;
    assert_eq!((status, health), (StatusCode::OK, json!({"status": "ok"})));

    let (status, body) = post(
        &client,
        server.url("/threads/t1/runs"),
        json!({"prompt": "Find x."}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["thread_id"], "t1");
    assert!(body["run_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(body["outcome"], json!({"kind": "finished"}));
    assert_eq!(body["text"], "Found it.");
    assert_eq!(body["steps"], 2);
    assert!(body["usage"].is_object());
    let run: RunResponse = serde_json::from_value(body).unwrap();
    assert!(run.outcome.is_finished());

    let (status, thread) = get(&client, server.url("/threads/t1")).await;
    assert_eq!(status, StatusCode::OK);
    let thread: ThreadResponse = serde_json::from_value(thread).unwrap();
    assert_eq!(thread.id, "t1");
    assert_eq!(thread.messages.len(), 4);
    assert_eq!(thread.messages[2].text(), "x is 42");
    assert!(thread.todos.is_empty());

    server.stop().await;
}

#[tokio::test]
async fn streamed_run_sends_events_as_they_happen() {
    let gate = Gate::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("wait", json!({}))
                .text("All done."),
        )
        .tool(gate.tool("wait"))
        .build();
    let server = TestServer::start(agent).await;

    let resp = Client::new()
        .post(server.url("/threads/s1/runs/stream"))
        .json(&json!({"prompt": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut body = resp.bytes_stream();
    let mut parser = SseParser::default();
    let mut events = Vec::new();

    // The run is held at the gate: the events so far must arrive before it goes on.
    while !events
        .iter()
        .any(|e: &SseEvent| e.name == "tool_call_start")
    {
        let chunk = within("events before the tool ends", body.next())
            .await
            .expect("stream open")
            .unwrap();
        events.extend(parser.feed(&chunk));
    }
    within("the tool starts", gate.entered.notified()).await;
    assert!(events.iter().all(|e| e.name != "tool_call_end"));
    gate.open.notify_one();

    while let Some(chunk) = within("the rest of the stream", body.next()).await {
        events.extend(parser.feed(&chunk.unwrap()));
    }

    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "agent_start",
            "step_start",
            "model_response",
            "tool_call_start",
            "tool_call_end",
            "step_start",
            "model_response",
            "agent_stop"
        ]
    );
    for e in &events {
        assert_eq!(e.data["type"], e.name.as_str(), "event name is the type");
        // Every data line is a whole AgentEvent.
        serde_json::from_value::<tower_agent::agent::AgentEvent>(e.data.clone()).unwrap();
    }
    assert_eq!(events[0].data["thread_id"], "s1");
    assert_eq!(events[4].data["output"]["content"], "wait done");
    let stop = &events.last().unwrap().data;
    assert_eq!(stop["outcome"], json!({"kind": "finished"}));
    assert_eq!(stop["text"], "All done.");
    assert_eq!(stop["steps"], 2);

    server.stop().await;
}

#[tokio::test]
async fn second_run_continues_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .model(echo_prompts_model())
        .store(Sqlite::open(dir.path().join("threads.db")).unwrap())
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    let (_, first) = post(
        &client,
        server.url("/threads/chat/runs"),
        json!({"prompt": "I am Ada."}),
    )
    .await;
    assert_eq!(first["text"], "prompts: I am Ada.");
    let (_, second) = post(
        &client,
        server.url("/threads/chat/runs"),
        json!({"prompt": "Who am I?"}),
    )
    .await;
    assert_eq!(second["text"], "prompts: I am Ada., Who am I?");
    assert_ne!(first["run_id"], second["run_id"]);

    // Another thread starts empty; a streamed run continues the same thread.
    let (_, other) = post(
        &client,
        server.url("/threads/other/runs"),
        json!({"prompt": "Hi."}),
    )
    .await;
    assert_eq!(other["text"], "prompts: Hi.");
    let text = client
        .post(server.url("/threads/chat/runs/stream"))
        .json(&json!({"prompt": "Again?"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = SseParser::default().feed(text.as_bytes());
    assert_eq!(events.first().unwrap().name, "agent_start");
    let stop = events.last().unwrap();
    assert_eq!(stop.name, "agent_stop");
    assert_eq!(stop.data["text"], "prompts: I am Ada., Who am I?, Again?");

    let (_, thread) = get(&client, server.url("/threads/chat")).await;
    assert_eq!(thread["messages"].as_array().unwrap().len(), 6);

    server.stop().await;
}

#[tokio::test]
async fn bad_requests_are_json_errors() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("unused"))
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    for path in ["/threads/t/runs", "/threads/t/runs/stream"] {
        // Not JSON.
        let resp = client
            .post(server.url(path))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("JSON"), "{body}");

        // No prompt.
        let (status, body) = post(&client, server.url(path), json!({"promt": "typo"})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(body["error"].as_str().unwrap().contains("prompt"), "{body}");

        // Wrong type, empty prompt.
        let (status, _) = post(&client, server.url(path), json!({"prompt": 7})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, body) = post(&client, server.url(path), json!({"prompt": "  "})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body, json!({"error": "`prompt` must not be empty"}));

        // Not declared as JSON.
        let resp = client
            .post(server.url(path))
            .body(r#"{"prompt": "hi"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"].is_string());
    }

    let (status, body) = get(&client, server.url("/threads/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"error": "no thread `nope`"}));
    let (status, body) = get(&client, server.url("/no/such/route")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string());
    let resp = client
        .delete(server.url("/threads/t/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);

    // None of this created a thread.
    let (status, _) = get(&client, server.url("/threads/t")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    server.stop().await;
}

/// A store whose every operation fails.
struct BrokenStore;

impl ThreadStore for BrokenStore {
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        Box::pin(async { Err("disk on fire".into()) })
    }
    fn save<'a>(&'a self, _: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("disk on fire".into()) })
    }
    fn delete<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("disk on fire".into()) })
    }
}

#[tokio::test]
async fn store_failures_are_500() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("unused"))
        .store(BrokenStore)
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    let (status, body) = post(
        &client,
        server.url("/threads/t/runs"),
        json!({"prompt": "hi"}),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body["error"].as_str().unwrap().contains("disk on fire"),
        "{body}"
    );
    let (status, body) = get(&client, server.url("/threads/t")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body["error"].as_str().unwrap().contains("disk on fire"),
        "{body}"
    );

    // A stream has already answered 200: the failure is its only event.
    let text = client
        .post(server.url("/threads/t/runs/stream"))
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = SseParser::default().feed(text.as_bytes());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].name, "agent_stop");
    assert_eq!(events[0].data["outcome"]["kind"], "aborted");

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_runs_on_twenty_threads() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("lookup", json!({}))
                .text("done")
                .per_run()
                .latency(Duration::from_millis(20)),
        )
        .tool(answers("lookup", "found"))
        .store(Sqlite::open(dir.path().join("threads.db")).unwrap())
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    let runs = (0..20).map(|i| {
        let (client, url) = (client.clone(), server.url(&format!("/threads/c{i}/runs")));
        tokio::spawn(async move { post(&client, url, json!({"prompt": format!("run {i}")})).await })
    });
    let results = within("20 runs", futures_util::future::join_all(runs)).await;
    for (i, result) in results.into_iter().enumerate() {
        let (status, body) = result.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["thread_id"], format!("c{i}"));
        assert_eq!(body["outcome"]["kind"], "finished");
    }
    for i in 0..20 {
        let (status, thread) = get(&client, server.url(&format!("/threads/c{i}"))).await;
        assert_eq!(status, StatusCode::OK);
        let thread: ThreadResponse = serde_json::from_value(thread).unwrap();
        assert_eq!(thread.messages.len(), 4);
        assert_eq!(thread.messages[0].text(), format!("run {i}"));
        assert_history_valid(&thread.messages);
    }

    server.stop().await;
}

#[tokio::test]
async fn tower_http_layers_compose() {
    use tower::ServiceBuilder;
    use tower_http::timeout::TimeoutLayer;

    let gate = Gate::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("wait", json!({}))
                .text("late"),
        )
        .tool(gate.tool("wait"))
        .build();
    let app = server::router(agent.clone()).layer(ServiceBuilder::new().layer(
        TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(200),
        ),
    ));
    let server = TestServer::start_with(agent, |serve| serve.router(app)).await;

    let resp = Client::new()
        .post(server.url("/threads/t/runs"))
        .json(&json!({"prompt": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::REQUEST_TIMEOUT);
    server.stop().await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_the_step_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.db");
    let gate = Gate::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("slow", json!({}))
                .text("never reached"),
        )
        .tool(gate.tool("slow"))
        .store(Sqlite::open(&path).unwrap())
        .build();
    let mut server = TestServer::start(agent.clone()).await;
    let client = Client::new();

    let run = tokio::spawn({
        let (client, url) = (client.clone(), server.url("/threads/g/runs"));
        async move { post(&client, url, json!({"prompt": "work slowly"})).await }
    });
    within("the slow tool starts", gate.entered.notified()).await;

    server.begin_shutdown();
    // The agent is told to stop after the step …
    within("the shutdown signal", agent.shutdown_signal().cancelled()).await;
    // … and the step in flight still finishes.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!run.is_finished(), "the run waits for its tool");
    gate.open.notify_one();

    let (status, body) = within("the run's answer", run).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], json!({"kind": "cancelled"}));
    assert_eq!(body["steps"], 1);
    within("server exit", &mut server.handle)
        .await
        .unwrap()
        .unwrap();

    // The server is gone …
    assert!(client.get(server.url("/healthz")).send().await.is_err());
    // … and the step it finished was saved.
    drop(agent);
    let thread = Sqlite::open(&path)
        .unwrap()
        .load("g")
        .await
        .unwrap()
        .unwrap();
    let texts: Vec<String> = thread
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(thread.messages.len(), 3, "{texts:?}");
    assert_eq!(thread.messages[1].tool_calls[0].name, "slow");
    assert_eq!(texts[2], "slow done");
    assert!(!thread.messages[2].is_error);
}

#[tokio::test]
async fn shutdown_ends_streams_with_agent_stop() {
    let gate = Gate::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("slow", json!({}))
                .text("never"),
        )
        .tool(gate.tool("slow"))
        .build();
    let mut server = TestServer::start(agent.clone()).await;
    let resp = Client::new()
        .post(server.url("/threads/s/runs/stream"))
        .json(&json!({"prompt": "go"}))
        .send()
        .await
        .unwrap();
    within("the slow tool starts", gate.entered.notified()).await;
    server.begin_shutdown();
    // The agent is told to stop before the step in flight ends.
    within("the shutdown signal", agent.shutdown_signal().cancelled()).await;
    gate.open.notify_one();

    let text = within("the stream's end", resp.text()).await.unwrap();
    let events = SseParser::default().feed(text.as_bytes());
    let stop = events.last().unwrap();
    assert_eq!(stop.name, "agent_stop");
    assert_eq!(stop.data["outcome"], json!({"kind": "cancelled"}));
    assert!(events.iter().any(|e| e.name == "tool_call_end"));
    within("server exit", server.handle).await.unwrap().unwrap();
}

#[tokio::test]
async fn grace_period_bounds_the_wait() {
    let dropped = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(Notify::new());
    let hang = {
        let (dropped, entered) = (Arc::clone(&dropped), Arc::clone(&entered));
        tool_fn("hang", "never ends", any_object(), move |_, _| {
            let guard = DropGuard(Arc::clone(&dropped));
            let entered = Arc::clone(&entered);
            async move {
                let _guard = guard;
                entered.notify_one();
                std::future::pending::<()>().await;
                Ok::<_, BoxError>("unreachable")
            }
        })
    };
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("hang", json!({}))
                .text("never"),
        )
        .tool(hang)
        .build();
    let mut server = TestServer::start_with(agent, |serve| {
        serve.grace_period(Duration::from_millis(200))
    })
    .await;
    let client = Client::new();
    let run = tokio::spawn({
        let url = server.url("/threads/h/runs");
        async move { post(&client, url, json!({"prompt": "go"})).await }
    });
    within("the tool starts", entered.notified()).await;
    server.begin_shutdown();
    // Without its grace period the server would wait for the tool forever.
    within("server exit", &mut server.handle)
        .await
        .unwrap()
        .unwrap();
    // The run was dropped, and with it the tool's future.
    assert!(dropped.load(Ordering::SeqCst));
    let (status, body) = within("the run's answer", run).await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body["error"].as_str().unwrap().contains("shut down"),
        "{body}"
    );
}

#[tokio::test]
async fn one_run_at_a_time_per_thread() {
    let gate = Gate::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("wait", json!({}))
                .text("first")
                .text("second"),
        )
        .tool(gate.tool("wait"))
        .build();
    let server = TestServer::start(agent).await;
    let client = Client::new();

    let first = tokio::spawn({
        let (client, url) = (client.clone(), server.url("/threads/busy/runs"));
        async move { post(&client, url, json!({"prompt": "one"})).await }
    });
    within("the tool starts", gate.entered.notified()).await;
    for path in ["/threads/busy/runs", "/threads/busy/runs/stream"] {
        let (status, body) = post(&client, server.url(path), json!({"prompt": "two"})).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}");
        assert_eq!(
            body,
            json!({"error": "a run is already going on thread `busy`"})
        );
    }
    gate.open.notify_one();
    let (status, body) = within("the first run", first).await.unwrap();
    assert_eq!(
        (status, body["text"].as_str()),
        (StatusCode::OK, Some("first"))
    );

    // Free again once the run is over.
    let (status, body) = post(
        &client,
        server.url("/threads/busy/runs"),
        json!({"prompt": "two"}),
    )
    .await;
    assert_eq!(
        (status, body["text"].as_str()),
        (StatusCode::OK, Some("second"))
    );
    server.stop().await;
}

/// A handler of the user's own: `?` on the crate's error answers a JSON `500`, and
/// `server::events` + `server::sse` stream a run (of any agent service) in the crate's SSE
/// encoding, ending with `agent_stop` even when the service fails.
#[tokio::test]
async fn own_handlers_use_events_sse_and_question_mark() {
    use axum::{Json, Router, extract::Path, routing::post as post_route};
    use tower::ServiceBuilder;
    use tower_agent::AgentRequest;

    let healthy = Agent::builder()
        .model(ScriptedModel::new().text("Hello."))
        .build();
    let broken = Agent::builder()
        .model(ScriptedModel::new().text("unused"))
        .store(BrokenStore)
        .build();
    let ask = {
        let broken = broken.clone();
        move |Path(id): Path<String>, Json(body): Json<Value>| async move {
            let prompt = body["prompt"].as_str().unwrap_or_default().to_owned();
            let response = broken.run(AgentRequest::new(prompt).thread(id)).await?;
            Ok::<_, tower_agent::Error>(Json(json!({ "text": response.text })))
        }
    };
    let stream = move |Path(which): Path<String>| async move {
        let agent = if which == "broken" {
            broken.clone()
        } else {
            healthy.clone()
        };
        let service = ServiceBuilder::new()
            .timeout(Duration::from_secs(30))
            .service(agent);
        server::sse(server::events(service, AgentRequest::new("hi").thread("t")))
    };
    let app = Router::new()
        .route("/ask/{id}", post_route(ask))
        .route("/stream/{which}", post_route(stream));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(axum::serve(listener, app).into_future());
    let client = Client::new();

    let (status, body) = post(&client, format!("{url}/ask/t"), json!({"prompt": "hi"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, json!({"error": "thread store failed: disk on fire"}));

    for (which, outcome) in [("healthy", "finished"), ("broken", "aborted")] {
        let resp = client
            .post(format!("{url}/stream/{which}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let events = SseParser::default().feed(resp.text().await.unwrap().as_bytes());
        for event in &events {
            assert_eq!(event.data["type"], event.name.as_str(), "{events:?}");
        }
        let last = events.last().expect("events");
        assert_eq!(last.name, "agent_stop", "{which}: {events:?}");
        assert_eq!(last.data["outcome"]["kind"], outcome, "{which}: {events:?}");
        let stops = events.iter().filter(|e| e.name == "agent_stop").count();
        assert_eq!(stops, 1, "{which}: {events:?}");
    }
}

/// Issue 29: SSE clients of the server see redacted text only — the model streams an e-mail
/// address and a card number split across pieces, a redaction layer sits in the model stack,
/// and no event on the wire carries any part of either.
#[tokio::test]
async fn sse_clients_see_redacted_text_only() {
    use tower_agent::{
        event::ModelDelta,
        layers::redact::{Redaction, Strategy},
        model::{ModelBody, ModelChunk},
    };
    let parts = [
        "Mail ada.love",
        "lace@analyt",
        "ical.org or pay with 4111 11",
        "11 1111 1111 now.",
    ];
    let model = ScriptedModel::from_fn(move |_| {
        let whole = ModelResponse::text(parts.concat());
        let items: Vec<Result<ModelChunk, BoxError>> = parts
            .iter()
            .map(|p| Ok(ModelChunk::Delta(ModelDelta::Text { text: (*p).into() })))
            .chain([Ok(ModelChunk::Done(Box::new(whole)))])
            .collect();
        Ok(ModelResponse::streaming(ModelBody::new(
            futures_util::stream::iter(items),
        )))
    });
    let redaction = Redaction::new()
        .email(Strategy::Redact)
        .credit_card(Strategy::Mask);
    let agent = Agent::builder()
        .model(
            tower::ServiceBuilder::new()
                .layer(redaction.model_layer())
                .service(model),
        )
        .build();
    let server = TestServer::start(agent).await;
    let resp = Client::new()
        .post(server.url("/threads/r/runs/stream"))
        .json(&json!({"prompt": "how do I reach Ada?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let wire = within("the stream's end", resp.text()).await.unwrap();
    let events = SseParser::default().feed(wire.as_bytes());
    let streamed: String = events
        .iter()
        .filter(|e| e.name == "model_delta")
        .map(|e| {
            e.data["delta"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        streamed,
        "Mail [REDACTED_EMAIL] or pay with **** **** **** 1111 now."
    );
    for secret in ["ada", "love", "lace", "analyt", "ical.org", "4111"] {
        assert!(!wire.contains(secret), "`{secret}` on the wire: {wire}");
    }
    server.stop().await;
}
