//! A real agent on an OpenAI-compatible endpoint: the filesystem tools on a scratch
//! directory, `TraceLayer` and `SummarizeLayer` on the model path, tower's `retry` with our
//! `RetryPolicy` under them, and the answer streamed as it is written.
//!
//! ```text
//! OPENAI_API_KEY=sk-… cargo run --example openai
//! OPENAI_BASE_URL=http://localhost:11434/v1 TOWER_AGENT_MODEL=qwen3:8b cargo run --example openai
//! ```
//!
//! `TOWER_AGENT_MODEL` picks the model (default `gpt-4.1-mini`),
//! `TOWER_AGENT_REASONING_EFFORT` (`minimal`, `low`, `medium`, `high` …) asks a reasoning model
//! to think that hard; its reasoning is streamed to stderr. After the run it prints the
//! tokens, the prompt-cache reads and the reasoning tokens the provider reported, then asks for
//! a **structured answer** (a JSON schema derived from a Rust type) and parses it into that
//! type. Without `OPENAI_API_KEY` or
//! `OPENAI_BASE_URL` the example says how to set them and exits successfully, so it can run
//! where there is no network (CI runs every example).
//!
//! Spans (`invoke_agent`, `chat {model}`, `execute_tool {tool}`) go to stderr as they close; the answer goes to stdout.

#[cfg(not(feature = "openai"))]
fn main() {
    println!("examples/openai needs the `openai` feature (on by default).");
}

#[cfg(feature = "openai")]
#[tokio::main]
async fn main() -> Result<(), tower_agent::BoxError> {
    use std::{io::Write as _, time::Duration};

    use futures_util::StreamExt;
    use tower::ServiceBuilder;
    use tower_agent::{
        Agent, AgentRequest,
        agent::{AgentEvent, ModelDelta},
        builtins::filesystem::Filesystem,
        layers::{summarize::SummarizeLayer, trace::TraceLayer},
        model::{ModelSettings, ReasoningEffort, ResponseFormat, RetryPolicy, openai::OpenAiChat},
    };

    /// The structured answer of the second run: its JSON schema is derived from this type.
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    struct NotesDigest {
        /// One line per point of the notes.
        points: Vec<String>,
        /// How many TODO items the notes hold.
        todos: u32,
    }
    use tracing_subscriber::fmt::format::FmtSpan;

    let Some(model) = OpenAiChat::from_env() else {
        println!(
            "examples/openai: no endpoint configured, nothing to do. To run it, set:\n\
             \x20 OPENAI_API_KEY=sk-…                     for OpenAI\n\
             \x20 OPENAI_BASE_URL=http://host:port/v1     for a compatible server (vLLM, Ollama, llama.cpp, LiteLLM)\n\
             \x20 TOWER_AGENT_MODEL=<model>               optional (default gpt-4.1-mini)\n\
             then: cargo run --example openai"
        );
        return Ok(());
    };

    tracing_subscriber::fmt()
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "tower_agent=info".into()),
        )
        .init();

    // A scratch project for the agent to work in.
    let root = std::env::temp_dir().join(format!("tower-agent-openai-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    std::fs::write(
        root.join("notes.md"),
        "# Meeting notes\n\n- The agent loop is three nested tower services.\n\
         - Hooks are layers; ServiceBuilder order is the onion order.\n\
         - Providers: OpenAI-compatible and Anthropic, both over reqwest.\n\
         - TODO: benchmark the full stack at 10,000 concurrent runs.\n",
    )?;

    println!(
        "model: {} at {}\nworkspace: {}\n",
        model.model(),
        model.url(),
        root.display()
    );
    let agent_model = model.clone();
    let mut settings = ModelSettings::default();
    if let Ok(effort) = std::env::var("TOWER_AGENT_REASONING_EFFORT") {
        settings = settings.reasoning_effort(match effort.as_str() {
            "minimal" => ReasoningEffort::Minimal,
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            _ => ReasoningEffort::Other(effort.into()),
        });
    }
    let agent = Agent::builder()
        // Model path: tracing outermost (it covers the retries), then summarization, then
        // retries and a per-attempt timeout around the provider.
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(SummarizeLayer::new(model.clone()))
                .retry(RetryPolicy::new())
                .timeout(Duration::from_secs(180))
                .service(model.clone()),
        )
        .tool_layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .timeout(Duration::from_secs(60)),
        )
        .setup(Filesystem::local(&root))
        .system_prompt(
            "You are a careful assistant working in a project directory. Look at the files \
             with your tools before you answer, and keep answers short.",
        )
        .settings(settings.clone().stream(true))
        .cwd(&root)
        .max_steps(12)
        .build();

    let mut events = agent.stream(AgentRequest::new(
        "Read notes.md, then write summary.md with a three-line summary of it. \
         Finally tell me what you wrote.",
    ));
    let mut streaming = false;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::ModelDelta {
                delta: ModelDelta::Reasoning { text },
                ..
            } => eprint!("{text}"),
            AgentEvent::ModelDelta {
                delta: ModelDelta::Text { text },
                ..
            } => {
                print!("{text}");
                std::io::stdout().flush()?;
                streaming = true;
            }
            AgentEvent::ToolCallStart { call, .. } => {
                if std::mem::take(&mut streaming) {
                    println!();
                }
                println!("⚙ {}({})", call.name, call.arguments);
            }
            AgentEvent::ToolCallEnd { name, output, .. } => {
                let mark = if output.is_error { "✗" } else { "✓" };
                let first = output.content.lines().next().unwrap_or_default();
                println!("{mark} {name}: {first}");
            }
            AgentEvent::AgentStop {
                outcome,
                steps,
                usage,
                ..
            } => {
                println!(
                    "\n■ {outcome:?} after {steps} steps, {} tokens in ({} read from the \
                     prompt cache), {} out ({} reasoning)",
                    usage.input_tokens,
                    usage.cache_read_tokens,
                    usage.output_tokens,
                    usage.reasoning_tokens
                );
            }
            _ => {}
        }
    }
    let result = events
        .take_response()
        .ok_or("the run ended without a response")?;

    if let Ok(summary) = std::fs::read_to_string(root.join("summary.md")) {
        println!("\nsummary.md:\n{summary}");
    }
    let resp = result?;
    if !resp.outcome.is_finished() {
        return Err(format!("the run did not finish: {:?}", resp.outcome).into());
    }

    // Structured output: the same agent's model, asked for JSON of `NotesDigest`.
    let digest_agent = Agent::builder()
        .model(agent_model)
        .setup(Filesystem::local(&root))
        .settings(settings.response_format(ResponseFormat::of::<NotesDigest>()))
        .cwd(&root)
        .max_steps(6)
        .build();
    let digest = digest_agent
        .run("Read notes.md and answer with its points and its number of TODO items.")
        .await?;
    let parsed: NotesDigest = digest.parse()?;
    println!(
        "\nstructured answer, parsed into a Rust type: {} points, {} TODO items",
        parsed.points.len(),
        parsed.todos
    );
    for point in &parsed.points {
        println!("  - {point}");
    }
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
