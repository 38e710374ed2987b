//! An agent behind an HTTP server, with threads in SQLite, offline.
//!
//! ```text
//! cargo run --features axum,sqlite --example server            # serve until Ctrl-C
//! cargo run --features axum,sqlite --example server -- --once  # one request to itself, exit
//! ```
//!
//! The server listens on `127.0.0.1:3000` (or `$TOWER_AGENT_ADDR`) and keeps its threads in
//! `./.tower-agent/threads.db` (or `$TOWER_AGENT_DATA/threads.db`). The model is scripted
//! (no network, no API key): it counts the words of your prompt with a tool, and tells how many
//! prompts the thread has seen, so a second run on the same thread shows it continues.
//!
//! The agent is served under a tower `Timeout` (a run longer than 120 s is dropped and answers
//! `504`, its thread keeping what was saved), with `server::AgentRoutes`; the router is
//! wrapped in tower-http and tower layers: a `TraceLayer` (logs every request), a concurrency
//! limit and a request body limit. Ctrl-C (or
//! SIGTERM) shuts down gracefully: no new connections, runs in flight end after their current
//! step and save their thread, then the process exits (after 10 s at most).
//!
//! # Several replicas
//!
//! The same binary scales out: start N copies behind a load balancer, all with
//! `TOWER_AGENT_DATABASE_URL=postgres://user:password@host/db` (feature `postgres`; the store
//! then is `store::Postgres`, whose run leases make a second run on a thread answer `409` on
//! any replica, and whose compare-and-swap keeps two replicas from interleaving a history).
//! Any replica serves any thread; an approval asked on one is answered on another
//! (`POST /threads/{id}/approvals`). Set `OTEL_EXPORTER_OTLP_ENDPOINT` (e.g.
//! `http://collector:4318`) to export every run's spans (the crate's `gen_ai` spans and the
//! HTTP requests) over OTLP/HTTP to a collector, tagged `service.name=tower-agent-server` (or
//! `$OTEL_SERVICE_NAME`). Unset, threads stay in the SQLite file and nothing is exported: the
//! embedded default. `TOWER_AGENT_DATABASE_URL` may also name a SQLite file
//! (`sqlite:///path/threads.db` or a plain path). See "Running several replicas" in the README.
//!
//! With `--once`, `--smoke` or when the `CI` environment variable is set, the example starts
//! the server on a free port (and, unless `$TOWER_AGENT_DATA` is set, with its database in a
//! temporary directory), makes one request and one streamed request to itself with reqwest,
//! prints the answers, shuts down gracefully and exits 0.

use std::{
    env,
    net::SocketAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use futures_util::StreamExt;
use serde_json::json;
use tower::{ServiceBuilder, limit::ConcurrencyLimitLayer};
use tower_agent::{
    Agent, BoxError,
    message::Role,
    model::{ModelResponse, ScriptedModel},
    server::{self, AgentRoutes, RunResponse},
    store::{Sqlite, ThreadStore},
    tool::tool_fn,
};
use tower_http::{limit::RequestBodyLimitLayer, trace::TraceLayer};
use tracing_subscriber::{EnvFilter, layer::SubscriberExt, util::SubscriberInitExt};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let once = env::args().any(|a| a == "--once" || a == "--smoke") || env::var_os("CI").is_some();
    let exporter = telemetry()?;

    // Where the threads live. A smoke run does not leave a database behind.
    let temp = tempfile::tempdir()?;
    let data_dir = match env::var_os("TOWER_AGENT_DATA") {
        Some(dir) => PathBuf::from(dir),
        None if once => temp.path().to_owned(),
        None => PathBuf::from(".tower-agent"),
    };
    let (agent, where_) = agent_with_store(&data_dir).await?;

    // The agent under tower middleware: a run is bounded, streamed or not.
    let service = ServiceBuilder::new()
        .timeout(Duration::from_secs(120))
        .service(agent.clone());
    // The HTTP stack: the first layer is the outermost.
    let app = AgentRoutes::new(service)
        .store(agent.store().clone())
        .shutdown_signal(agent.shutdown_signal().clone())
        .router()
        .layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new_for_http())
                .layer(ConcurrencyLimitLayer::new(64))
                .layer(RequestBodyLimitLayer::new(64 * 1024)),
        );

    let addr: SocketAddr = if once {
        "127.0.0.1:0".parse()?
    } else {
        env::var("TOWER_AGENT_ADDR")
            .unwrap_or_else(|_| "127.0.0.1:3000".into())
            .parse()?
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}", listener.local_addr()?);

    if once {
        let result = smoke(listener, agent, app, &url).await;
        if let Some(provider) = exporter {
            // Every span of the smoke run is sent before the process exits.
            provider.shutdown()?;
        }
        return result;
    }

    println!("tower-agent server on {url} (threads in {where_})");
    println!("try:");
    println!(
        "  curl -s {url}/threads/demo/runs -H 'content-type: application/json' -d '{{\"prompt\": \"hello there\"}}'"
    );
    println!(
        "  curl -N {url}/threads/demo/runs/stream -H 'content-type: application/json' -d '{{\"prompt\": \"and again\"}}'"
    );
    println!("  curl -s {url}/threads/demo");
    println!("Ctrl-C to stop.");

    server::serve(listener, agent, shutdown_signal())
        .router(app)
        .grace_period(Duration::from_secs(10))
        .await?;
    if let Some(provider) = exporter {
        provider.shutdown()?;
    }
    println!("bye");
    Ok(())
}

/// Logs to stderr, and spans to an OpenTelemetry collector over OTLP/HTTP when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the provider is returned so that `main` flushes it
/// before exiting).
fn telemetry() -> Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>, BoxError> {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,tower_http=debug,tower_agent=info".into());
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let Ok(endpoint) = env::var("OTEL_EXPORTER_OTLP_ENDPOINT") else {
        tracing_subscriber::registry().with(filter).with(fmt).init();
        return Ok(None);
    };
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()?;
    let service = env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "tower-agent-server".into());
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let tracer = provider.tracer("tower-agent-server");
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .init();
    println!("exporting spans over OTLP/HTTP to {endpoint}");
    Ok(Some(provider))
}

/// The agent, with its threads in the store `TOWER_AGENT_DATABASE_URL` names (PostgreSQL or a
/// SQLite file), else in `threads.db` in `data_dir`; and where they are, for the log.
async fn agent_with_store(data_dir: &std::path::Path) -> Result<(Agent, String), BoxError> {
    let url = env::var("TOWER_AGENT_DATABASE_URL").unwrap_or_default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let store = tower_agent::store::Postgres::connect(&url).await?;
            let target = format!("PostgreSQL {}", store.target());
            return Ok((agent(store), target));
        }
        #[cfg(not(feature = "postgres"))]
        return Err("a postgres:// TOWER_AGENT_DATABASE_URL needs the `postgres` feature".into());
    }
    let path = match url.strip_prefix("sqlite://") {
        Some(path) => PathBuf::from(path),
        None if !url.is_empty() => PathBuf::from(url),
        None => {
            std::fs::create_dir_all(data_dir)?;
            data_dir.join("threads.db")
        }
    };
    let store = Sqlite::open(&path)?;
    Ok((agent(store), path.display().to_string()))
}

/// The agent: a scripted model and one tool.
fn agent(store: impl ThreadStore) -> Agent {
    let model = ScriptedModel::from_fn(|req| {
        let last = req.messages.last().expect("a run has a prompt");
        if last.role == Role::User {
            // A new prompt: count its words with the tool.
            return Ok(ModelResponse::tool_calls([
                tower_agent::message::ToolCall::new(
                    "",
                    "word_count",
                    json!({ "text": last.text() }),
                ),
            ]));
        }
        // The tool answered: reply, saying how far the thread goes back.
        let prompts = req.messages.iter().filter(|m| m.role == Role::User).count();
        Ok(ModelResponse::text(format!(
            "Your prompt has {} words. This thread has seen {prompts} prompt{}. (scripted model)",
            last.text(),
            if prompts == 1 { "" } else { "s" },
        )))
    });
    let word_count = tool_fn(
        "word_count",
        "Counts the words of a text",
        json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        }),
        |args, _ctx| async move {
            let text = args["text"].as_str().unwrap_or_default();
            Ok(text.split_whitespace().count().to_string())
        },
    );
    Agent::builder()
        .model(model)
        .tool(word_count)
        .system_prompt("You count words.")
        .store(store)
        .build()
}

/// `--once`: serve, ask the server twice, shut down.
async fn smoke(
    listener: tokio::net::TcpListener,
    agent: Agent,
    app: axum::Router,
    url: &str,
) -> Result<(), BoxError> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        server::serve(listener, agent, async {
            let _ = stopped.await;
        })
        .router(app)
        .grace_period(Duration::from_secs(10))
        .into_future(),
    );
    println!("tower-agent server on {url} (smoke run: one request, then exit)");

    let client = reqwest::Client::new();
    let started = Instant::now();
    let run: RunResponse = client
        .post(format!("{url}/threads/smoke/runs"))
        .json(&json!({ "prompt": "how many words is this" }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!(
        "POST /threads/smoke/runs -> {:?} in {} steps ({:.1} ms): {}",
        run.outcome,
        run.steps,
        started.elapsed().as_secs_f64() * 1e3,
        run.text
    );

    let mut events = client
        .post(format!("{url}/threads/smoke/runs/stream"))
        .json(&json!({ "prompt": "and these words" }))
        .send()
        .await?
        .error_for_status()?
        .bytes_stream();
    println!("POST /threads/smoke/runs/stream ->");
    let mut text = String::new();
    while let Some(chunk) = events.next().await {
        text.push_str(std::str::from_utf8(&chunk?)?);
    }
    for line in text.lines().filter(|l| l.starts_with("event:")) {
        println!("  {line}");
    }
    let finished = text.contains(r#""outcome":{"kind":"finished"}"#);

    let _ = stop.send(());
    server.await??;
    println!("server shut down");
    if !run.outcome.is_finished() || !finished {
        return Err("a run did not finish".into());
    }
    Ok(())
}

/// Completes on Ctrl-C, or on SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        tokio::signal::ctrl_c().await.expect("listen for Ctrl-C");
    };
    #[cfg(unix)]
    let terminate = async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("listen for SIGTERM")
            .recv()
            .await;
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    println!("shutting down: runs in flight finish their step");
}
