//! The quickstart: an agent made of tower services, running offline.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! A scripted model (no network, no API key) drives two tools: it asks for the weather in two
//! cities at once (the calls run concurrently), then calls a slow search tool that the tower
//! `TimeoutLayer` on the tool path cuts off; the model sees the timeout as an error output and
//! answers anyway. The event stream of the run is printed as it happens.
//!
//! With a provider configured in the environment, a real model drives the same tools
//! instead (with tower's `retry` and our `RetryPolicy` under it):
//!
//! ```text
//! OPENAI_API_KEY=sk-… cargo run --example quickstart
//! OPENAI_BASE_URL=http://localhost:11434/v1 TOWER_AGENT_MODEL=qwen3:8b cargo run --example quickstart
//! ANTHROPIC_API_KEY=sk-ant-… cargo run --features anthropic --example quickstart
//! ```

use std::time::Duration;

use futures_util::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::AgentEvent,
    message::Role,
    model::{BoxModelService, ModelResponse, ScriptedModel},
    tool::{ToolRequest, typed_tool},
};

#[derive(Deserialize, JsonSchema)]
struct WeatherArgs {
    /// The city to look up.
    city: String,
}

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to search for.
    query: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // The model: a script, replayed in order. A real provider is a drop-in replacement.
    let model = ScriptedModel::new()
        .tool_calls([
            ("weather", json!({ "city": "lisbon" })),
            ("weather", json!({ "city": " OSLO " })),
        ])
        .tool_call("search", json!({ "query": "umbrella shops in Oslo" }))
        .decide(|req| {
            // The last answer reads what the tools returned, errors included.
            let results: Vec<String> = req
                .messages
                .iter()
                .filter(|m| m.role == Role::Tool)
                .map(|m| {
                    let mark = if m.is_error { "failed" } else { "ok" };
                    format!("{mark}: {}", m.text())
                })
                .collect();
            Ok(ModelResponse::text(format!(
                "Lisbon is sunny, Oslo is rainy — bring an umbrella. (I saw {} tool results: {})",
                results.len(),
                results.join("; ")
            )))
        });

    let weather = typed_tool(
        "weather",
        "Current weather in a city",
        |args: WeatherArgs, _ctx| async move {
            // Oslo answers faster than Lisbon, yet results come back in call order.
            let (delay, report) = match args.city.as_str() {
                "Oslo" => (40, "rain, 9°C"),
                _ => (120, "sunny, 24°C"),
            };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok(format!("{}: {report}", args.city))
        },
    );
    let search = typed_tool(
        "search",
        "Searches the web (slowly)",
        |args: SearchArgs, _ctx| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(format!("results for {}", args.query))
        },
    );

    // A real provider if the environment names one, else the script.
    let (model, banner) = match real_model() {
        Some((model, name)) => (model, format!("model: {name}")),
        None => (
            BoxModelService::new(model),
            "offline: scripted model, no network; set OPENAI_API_KEY, OPENAI_BASE_URL or \
             ANTHROPIC_API_KEY to use a real model"
                .to_owned(),
        ),
    };

    let agent = Agent::builder()
        .model(model)
        .system_prompt("You are a helpful travel assistant.")
        .tool(weather)
        .tool(search)
        // The tool stack: tower's own timeout, then a closure layer that rewrites arguments
        // (city names to title case). The first layer is the outermost: the timeout covers
        // everything below it.
        .tool_layer(
            ServiceBuilder::new()
                .timeout(Duration::from_millis(300))
                .map_request(normalize_city),
        )
        .build();

    println!("tower-agent quickstart ({banner})\n");
    let mut events = agent.stream(AgentRequest::new(
        "I'm off to Lisbon and then Oslo. Should I pack an umbrella?",
    ));
    let mut outcome_ok = false;
    while let Some(event) = events.next().await {
        print_event(&event);
        if let AgentEvent::AgentStop { outcome, .. } = &event {
            outcome_ok = outcome.is_finished();
        }
    }
    if !outcome_ok {
        return Err("the run did not finish".into());
    }
    Ok(())
}

/// The provider the environment configures, with retries, and its name: Anthropic when
/// `ANTHROPIC_API_KEY` is set and OpenAI is not (or `TOWER_AGENT_MODEL` names a Claude model),
/// else an OpenAI-compatible endpoint when `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set.
fn real_model() -> Option<(BoxModelService, String)> {
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    fn with_retry<S>(provider: S) -> BoxModelService
    where
        S: tower::Service<
                tower_agent::model::ModelRequest,
                Response = ModelResponse,
                Error = BoxError,
            > + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        BoxModelService::new(
            ServiceBuilder::new()
                .retry(tower_agent::model::RetryPolicy::new())
                .service(provider),
        )
    }
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let openai_set = cfg!(feature = "openai") && (set("OPENAI_API_KEY") || set("OPENAI_BASE_URL"));
    let wants_claude = std::env::var("TOWER_AGENT_MODEL").is_ok_and(|m| m.starts_with("claude"));
    #[cfg(feature = "anthropic")]
    if (!openai_set || wants_claude)
        && let Some(claude) = tower_agent::model::Anthropic::from_env()
    {
        let name = format!("{} at {}", claude.model(), claude.url());
        return Some((with_retry(claude), name));
    }
    #[cfg(feature = "openai")]
    if let Some(openai) = tower_agent::model::OpenAiChat::from_env() {
        let name = format!("{} at {}", openai.model(), openai.url());
        return Some((with_retry(openai), name));
    }
    let _ = (openai_set, wants_claude);
    None
}

/// A closure layer's function: `" OSLO "` → `"Oslo"`.
fn normalize_city(mut req: ToolRequest) -> ToolRequest {
    if let Some(city) = req.call.arguments.get_mut("city")
        && let Some(name) = city.as_str()
    {
        let name = name.trim().to_lowercase();
        let mut chars = name.chars();
        let titled: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        *city = json!(titled);
    }
    req
}

fn print_event(event: &AgentEvent) {
    match event {
        AgentEvent::AgentStart { thread_id, run_id } => {
            println!("▶ run {run_id} on thread {thread_id}");
        }
        AgentEvent::StepStart { step } => println!("── step {step}"),
        AgentEvent::ModelResponse { message, .. } => {
            if message.tool_calls.is_empty() {
                println!("  model answers: {}", message.text());
            } else {
                let calls: Vec<String> = message
                    .tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, c.arguments))
                    .collect();
                println!("  model calls: {}", calls.join(", "));
            }
        }
        AgentEvent::ToolCallStart { call, .. } => {
            println!("  ⚙ {} [{}] started", call.name, call.id);
        }
        AgentEvent::ToolCallEnd {
            name,
            output,
            duration_ms,
            ..
        } => {
            let mark = if output.is_error { "✗" } else { "✓" };
            println!(
                "  {mark} {name} [{}] after {duration_ms:.0} ms: {}",
                output.call_id, output.content
            );
        }
        AgentEvent::Reminders { reminders, .. } => {
            println!("  reminders: {reminders:?}");
        }
        AgentEvent::Warning { message } => println!("  warning: {message}"),
        AgentEvent::AgentStop { outcome, steps, .. } => {
            println!("■ {outcome:?} after {steps} steps");
        }
        other => println!("  {other:?}"),
    }
}
