//! Conformance with the Claude Code hooks reference (`hooks.md`), organised by its sections:
//! real hook scripts (bash, python3) read their input from stdin and answer as the reference
//! documents; each test names the section it checks. One test binary, a module per section:
//! run it alone with `cargo test --all-features --test conformance`, one module of it with
//! `cargo test --all-features --test conformance -- pre_tool_use::`.
#![cfg(unix)]

#[path = "../loopback/mod.rs"]
mod loopback;
#[path = "../support/mod.rs"]
mod support;

mod common_ev2;
mod compact;
mod config_change;
mod cwd_changed;
mod directory_added;
mod env_file;
mod event_table;
mod exit_codes;
mod file_changed;
mod formats;
mod handlers_agent;
mod handlers_async;
mod handlers_http;
mod handlers_prompt;
mod if_conditions;
mod instructions_loaded;
mod json_output;
mod message_display;
mod model_switch;
mod notification;
mod on_failure;
mod permission;
mod permission_rules;
mod plugins;
mod post_tool;
mod post_tool_batch;
mod pre_tool_use;
mod project_dir;
mod prompt_expansion;
mod session_end;
mod session_start;
mod setup;
mod slow_machine;
mod stop_failure;
mod stop_loop;
mod subagent;
mod tasks;
mod transcript;
mod trust;
mod user_prompt_submit;

use serde_json::{Value, json};
use tower_agent::{Agent, AgentResponse, BoxError, model::ScriptedModel, tool::tool_fn};

use support::command::Scripts;

/// The tools the tests call, under Claude Code's names; each answers `ok <name>`.
const TOOLS: &[&str] = &[
    "Bash",
    "Edit",
    "Write",
    "Read",
    "WebFetch",
    "mcp__memory__create_entities",
    "mcp__github__search",
];

/// Runs an agent whose model makes each call in turn (one per step), then answers "done".
/// Returns the response and the run's warnings.
pub async fn run_calls(
    hooks: tower_agent::layers::hooks::Hooks,
    calls: &[(&str, Value)],
) -> (AgentResponse, Vec<String>) {
    let mut model = ScriptedModel::new();
    for (name, args) in calls {
        model = model.tool_call(*name, args.clone());
    }
    model = model.text("done");
    let (hooks, log) = support::command::warnings(hooks);
    let mut builder = Agent::builder().model(model);
    for name in TOOLS {
        let name = (*name).to_owned();
        let answer = format!("ok {name}");
        builder = builder.tool(tool_fn(
            name,
            "a test tool",
            json!({"type": "object"}),
            move |_: Value, _| {
                let answer = answer.clone();
                async move { Ok::<_, BoxError>(answer) }
            },
        ));
    }
    let agent = builder.hooks(hooks.compile().unwrap()).build();
    let resp = agent.run("go").await.unwrap();
    let warnings = log.lock().unwrap().clone();
    (resp, warnings)
}

/// A script that appends its first argument (a tag) to `runs.log` in the project dir and
/// its stdin to `inputs.log`: each line of `runs.log` is one spawn.
pub fn recorder(scripts: &Scripts) -> String {
    scripts.bash(
        "rec.sh",
        r#"input=$(cat)
echo "$1" >> "$CLAUDE_PROJECT_DIR/runs.log"
printf '%s\n' "$input" >> "$CLAUDE_PROJECT_DIR/inputs.log""#,
    )
}

/// The tags recorded by [`recorder`], in order.
pub fn runs(scripts: &Scripts) -> Vec<String> {
    scripts
        .read("runs.log")
        .lines()
        .map(str::to_owned)
        .collect()
}
