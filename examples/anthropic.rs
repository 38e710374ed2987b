//! An agent on Anthropic's Messages API: extended thinking, prompt caching and structured
//! output, with the figures the API reports printed after each run.
//!
//! ```text
//! ANTHROPIC_API_KEY=sk-ant-… cargo run --example anthropic --features anthropic
//! ```
//!
//! `TOWER_AGENT_MODEL` picks the model (default: the provider's). `TOWER_AGENT_THINKING` sets
//! a thinking budget in tokens (at least 1024), and the thinking is streamed to stderr; it is
//! sent back, signed, on the next call of the run, as the API requires. Prompt caching is on
//! (the provider's default): the tools, the system prompt and the conversation are cache
//! breakpoints, so the second run below reads the first one's prefix from the cache (once
//! the prefix passes the model's minimum cacheable length). Without `ANTHROPIC_API_KEY` the
//! example says what it needs and exits successfully (CI runs every example offline).

#[cfg(not(feature = "anthropic"))]
fn main() {
    println!("examples/anthropic needs the `anthropic` feature: --features anthropic");
}

#[cfg(feature = "anthropic")]
#[tokio::main]
async fn main() -> Result<(), tower_agent::BoxError> {
    use futures_util::StreamExt;
    use tower_agent::{
        Agent, AgentRequest,
        agent::{AgentEvent, ModelDelta},
        builtins::filesystem::Filesystem,
        message::Usage,
        model::{ModelSettings, ResponseFormat, anthropic::Anthropic},
    };

    /// The structured answer of the last run: its JSON schema is derived from this type.
    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    struct Review {
        /// The file reviewed.
        file: String,
        /// Problems found, one line each.
        problems: Vec<String>,
    }

    let Some(model) = Anthropic::from_env() else {
        println!(
            "examples/anthropic: no ANTHROPIC_API_KEY, nothing to do. To run it, set:\n\
             \x20 ANTHROPIC_API_KEY=sk-ant-…     the key\n\
             \x20 TOWER_AGENT_MODEL=<model>       optional\n\
             \x20 TOWER_AGENT_THINKING=<tokens>   optional, extended thinking (>= 1024)\n\
             then: cargo run --example anthropic --features anthropic"
        );
        return Ok(());
    };
    let root = std::env::temp_dir().join(format!("tower-agent-anthropic-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    std::fs::write(
        root.join("lib.rs"),
        "pub fn mean(xs: &[f64]) -> f64 {\n    xs.iter().sum::<f64>() / xs.len() as f64\n}\n",
    )?;

    let mut settings = ModelSettings::default().max_tokens(4096);
    if let Some(budget) = std::env::var("TOWER_AGENT_THINKING")
        .ok()
        .and_then(|b| b.parse().ok())
    {
        settings = settings.thinking_budget(budget).max_tokens(budget + 4096);
    }
    let report = |what: &str, usage: &Usage| {
        println!(
            "■ {what}: {} tokens in ({} read from the prompt cache, {} written to it), {} out",
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.output_tokens
        );
    };

    let agent = Agent::builder()
        .model(model.clone())
        .setup(Filesystem::local(&root))
        .system_prompt("You review Rust code. Read files with your tools before answering.")
        .settings(settings.clone().stream(true))
        .cwd(&root)
        .max_steps(8)
        .build();
    for prompt in [
        "Read lib.rs and tell me in two sentences what it does.",
        "Read lib.rs again: what happens on an empty slice?",
    ] {
        let mut events = agent.stream(AgentRequest::new(prompt).thread("review"));
        while let Some(event) = events.next().await {
            match event {
                AgentEvent::ModelDelta {
                    delta: ModelDelta::Reasoning { text },
                    ..
                } => eprint!("{text}"),
                AgentEvent::ModelDelta {
                    delta: ModelDelta::Text { text },
                    ..
                } => print!("{text}"),
                AgentEvent::AgentStop { usage, .. } => {
                    println!();
                    report(prompt, &usage);
                }
                _ => {}
            }
        }
    }

    // Structured output: the answer is JSON of `Review`, parsed into it.
    let reviewer = Agent::builder()
        .model(model)
        .setup(Filesystem::local(&root))
        .settings(settings.response_format(ResponseFormat::of::<Review>()))
        .cwd(&root)
        .max_steps(6)
        .build();
    let resp = reviewer.run("Review lib.rs.").await?;
    let review: Review = resp.parse()?;
    report("structured review", &resp.usage);
    println!("review of {}:", review.file);
    for problem in &review.problems {
        println!("  - {problem}");
    }
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
