//! Plays a scenario through tower-agent: the scenario's settings read by `CommandHooks` (the
//! project directory the one holding `.claude/`; its allowed tools given as `--allowedTools`
//! is, in Claude Code's default permission mode), the Anthropic provider against the same
//! model server, the crate's Claude Code tools over the project (`builtins::claude_code`:
//! `Bash`, `Read`, `Write`, `Edit`, `Glob`, `Grep`, and `Agent` running a `general-purpose`
//! subagent of the same model, tools and hooks), the project's MCP servers (`.mcp.json`)
//! with the Elicitation hooks answering for the user, one run per prompt on one thread; a
//! model step makes the following runs name that model; a compact step compacts the thread
//! (`Agent::compact`, as `/compact [instructions]` does).

use serde_json::{Value, json};
use tower::{Layer, service_fn, util::BoxCloneSyncService};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{CompactRequest, start::SetupTrigger},
    builtins::{
        claude_code::{AgentTool, ClaudeCode, GENERAL_PURPOSE},
        commands::SlashCommands,
        memory::Memory,
    },
    command::{CommandHooks, CommandHooksBuilder},
    layers::hooks::HookSet,
    mcp::client::{ElicitationResponse, McpServers},
    model::{Anthropic, ModelSettings, ReasoningEffort},
    store::MemoryStore,
};

use hook_vectors::{Error, Host, Job, Step};

/// tower-agent, as a host of the vectors.
pub(crate) struct TowerAgent;

impl Host for TowerAgent {
    async fn play(&self, job: &Job) -> Result<(), Error> {
        // As `claude -p --allowedTools …` runs: its default mode asks about (and, with no one
        // to ask, refuses) a call no rule allows.
        let mut hooks = CommandHooks::builder()
            .settings_file(&job.settings)
            .allowed_tools(&job.scenario.allowed_tools)
            .ask_unless_allowed()
            .project_dir(&job.project)
            .transcripts_dir(job.root.join("transcripts"));
        // As `claude --plugin-dir`: the plugin's hooks beside the settings', its data under
        // the play's home.
        if let Some(plugin) = &job.plugin {
            hooks = hooks
                .plugin_dir(plugin)
                .plugin_data_dir(job.home.join("plugins-data"));
        }
        play(job, hooks).await;
        Ok(())
    }
}

/// Plays `job` with the hooks `hooks` configures; what each run answered (its outcome and
/// text), and each compaction (the messages it replaced).
pub(crate) async fn play(job: &Job, hooks: CommandHooksBuilder) -> Vec<Value> {
    let scenario = &job.scenario;
    let hooks = hooks.build().unwrap();
    let mcp = mcp_servers(job, &hooks);
    let hooks = hooks.into_hooks().compile().unwrap();
    let store = MemoryStore::new();
    let mut model = scenario.model.clone();
    let mut results = Vec::new();
    let mut runs = 0;
    for step in &scenario.steps {
        let prompt = match step {
            Step::SetModel(m) => {
                model = m.clone();
                continue;
            }
            Step::Prompt(p) | Step::Resume(p) => p,
            // As `/compact [instructions]` between prompts: the thread compacted now.
            Step::Compact(instructions) => {
                let agent = agent(job, &hooks, &store, mcp.as_ref(), &model);
                let req = CompactRequest::new("reference")
                    .instructions(instructions.as_str())
                    .cwd(&job.cwd);
                let resp = agent.compact(req).await.unwrap();
                results.push(json!({ "compacted": resp.replaced }));
                continue;
            }
        };
        let mut req = AgentRequest::new(prompt.as_str())
            .thread("reference")
            .cwd(&job.cwd);
        if runs == 0 {
            if scenario.init {
                req = req.setup(SetupTrigger::Init);
            } else if scenario.maintenance {
                req = req.setup(SetupTrigger::Maintenance);
            }
        }
        let agent = agent(job, &hooks, &store, mcp.as_ref(), &model);
        let resp = agent.run(req).await.unwrap();
        runs += 1;
        results.push(json!({ "outcome": format!("{:?}", resp.outcome), "text": resp.text }));
    }
    if let Some(mcp) = &mcp {
        mcp.close().await;
    }
    // SessionEnd hooks run in the background as a run ends: wait for each run's (or 30 s, a
    // bound no hook of the scenarios comes near; a missing one then shows as a difference).
    if scenario.observe.iter().any(|e| e == "SessionEnd") {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while session_ends(job) < runs && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    results
}

/// The agent of a run on `model`: the Anthropic provider against the job's model server,
/// Claude Code's tools and `general-purpose` subagent, the thread store, hooks and MCP
/// servers of the play, and what Claude Code reads from the project (its instructions, slash
/// commands).
fn agent(
    job: &Job,
    hooks: &HookSet,
    store: &MemoryStore,
    mcp: Option<&McpServers>,
    model: &str,
) -> Agent {
    let scenario = &job.scenario;
    // Hooks' contexts go where they arose, as system messages (as Claude Code sends
    // them to its models).
    let provider = Anthropic::builder()
        .base_url(&job.model_server)
        .api_key("sk-ant-reference")
        .model(model)
        .mid_conversation_system_messages(true)
        .build();
    // Claude Code's `general-purpose` subagent: the same model, Claude Code's tools (no
    // `Agent`) and the session's hooks.
    let general = Agent::builder()
        .model(provider.clone())
        .setup(ClaudeCode::local(job.project.clone()))
        .settings(settings(model))
        .hooks(hooks.clone())
        .build();
    let mut agent = Agent::builder()
        .model(provider)
        .setup(ClaudeCode::local(job.project.clone()))
        .tool(AgentTool::new().agent_type(
            GENERAL_PURPOSE,
            "General-purpose agent for researching and multi-step tasks",
            general,
        ))
        .settings(settings(model))
        .store(store.clone())
        .hooks(hooks.clone());
    // What Claude Code reads from the project: its instructions and slash commands.
    if scenario.files.contains_key("CLAUDE.md") {
        // Where Claude Code puts CLAUDE.md: a user message before the prompt.
        let memory = Memory::new([job.project.join("CLAUDE.md")]).in_user_message();
        agent = agent.stage(memory);
    }
    if let Some(mcp) = mcp {
        agent = agent.stage(mcp.clone());
    }
    let commands = job.project.join(".claude/commands");
    if commands.is_dir() {
        agent = agent.start_layer(SlashCommands::new().dir(commands, "projectSettings"));
    }
    agent.build()
}

/// The project's MCP servers (its `.mcp.json`, as Claude Code reads it), their elicitations
/// answered by the Elicitation hooks, else declined (a library has no one to ask).
fn mcp_servers(job: &Job, hooks: &CommandHooks) -> Option<McpServers> {
    let file = job.project.join(".mcp.json");
    if !file.is_file() {
        return None;
    }
    let nobody = service_fn(|_| async { Ok::<_, BoxError>(ElicitationResponse::Decline) });
    let elicitation = BoxCloneSyncService::new(hooks.elicitation_layer().layer(nobody));
    Some(
        McpServers::from_file(&file)
            .unwrap()
            .elicitation(elicitation)
            .build(),
    )
}

fn session_ends(job: &Job) -> usize {
    job.hooks()
        .iter()
        .filter(|h| h.input["hook_event_name"] == "SessionEnd")
        .count()
}

/// The settings of a run on `model`: Claude Code's defaults for it — an effort of `medium` for
/// the models that take one (those not named `haiku`), as its requests carry
/// (`output_config.effort`).
fn settings(model: &str) -> ModelSettings {
    let settings = ModelSettings::default().model(model);
    if model.contains("haiku") {
        settings
    } else {
        settings.reasoning_effort(ReasoningEffort::Medium)
    }
}
