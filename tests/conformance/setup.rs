//! Setup: a run asked to set the project up (`init`) or to maintain it (`maintenance`).
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "Setup" — fires on `--init` / `--init-only`
//! (trigger `init`) and `--maintenance` (trigger `maintenance`); the matcher is compared with
//! the trigger; the input adds `trigger`; it cannot block (exit 2 is shown, not a block);
//! `additionalContext` goes to the start of the conversation; § "Persist environment
//! variables": its hooks get `CLAUDE_ENV_FILE`. In a library the caller asks for setup on the
//! run's request ([`AgentRequest::setup`]).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest,
    agent::{Outcome, start::SetupTrigger},
    layers::hooks::{Hooks, Setup},
    model::ScriptedModel,
};

use crate::support::command::{Scripts, warnings};

/// A Rust hook fires only for the trigger its matcher names, only when the request asks, and
/// its context joins the system prompt.
#[tokio::test]
async fn a_rust_hook_fires_for_its_trigger_only() {
    let seen: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .on_setup("maintenance", move |trigger: SetupTrigger, _ctx| {
            log.lock().unwrap().push(trigger.as_str());
            Setup::AddContext("Caches were pruned.".into())
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").per_run().recording();
    let agent = Agent::builder().model(model.clone()).hooks(hooks).build();

    agent.run("no setup").await.unwrap();
    agent
        .run(AgentRequest::new("init").setup(SetupTrigger::Init))
        .await
        .unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    agent
        .run(AgentRequest::new("upkeep").setup(SetupTrigger::Maintenance))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), ["maintenance"]);
    let requests = model.requests();
    let system = |i: usize| {
        requests[i]
            .system()
            .map(|m| m.text().into_owned())
            .unwrap_or_default()
    };
    assert!(!system(1).contains("Caches were pruned."));
    assert!(system(2).contains("Caches were pruned."), "{}", system(2));
}

/// A command hook gets the reference's input, runs first (before SessionStart, which sees what
/// it exported through `CLAUDE_ENV_FILE`), gives the model nothing (its `additionalContext` is
/// discarded: hook-events-late-2026 "Setup … JSON fields are discarded", and measured against
/// Claude Code 2.1.328, vector `setup_init_context`), and cannot block: exit 2 and a
/// fail-closed failure are warnings, the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_the_trigger_exports_and_cannot_block() {
    let s = Scripts::new();
    let input = s.path("setup_input.json");
    let order = s.path("order");
    let setup = s.bash(
        "setup.sh",
        &format!(
            r#"cat > {input:?}
echo setup >> {order:?}
echo 'export TOOLCHAIN=ready' >> "$CLAUDE_ENV_FILE"
echo '{{"hookSpecificOutput": {{"hookEventName": "Setup", "additionalContext": "Run make first."}}}}'"#
        ),
    );
    let refuse = s.bash(
        "refuse.sh",
        "cat >/dev/null; echo 'no setup today' >&2; exit 2",
    );
    let broken = s.bash("broken.sh", "cat >/dev/null; exit 7");
    let start = s.bash(
        "start.sh",
        &format!(r#"cat >/dev/null; echo "start TOOLCHAIN=${{TOOLCHAIN:-unset}}" >> {order:?}"#),
    );
    let hooks = s.hooks(json!({
        "Setup": [{ "matcher": "init", "hooks": [
            { "type": "command", "command": setup },
            { "type": "command", "command": refuse },
            { "type": "command", "command": broken, "onFailure": "block" },
        ] }],
        "SessionStart": [{ "hooks": [{ "type": "command", "command": start }] }],
    }));
    let (hooks, warned) = warnings(hooks.into_hooks());
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .hooks(hooks.compile().unwrap())
        .build();
    let resp = agent
        .run(AgentRequest::new("go").setup(SetupTrigger::Init))
        .await
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Finished, "Setup cannot block");
    let got: Value = serde_json::from_str(&s.read("setup_input.json")).unwrap();
    assert_eq!(got["hook_event_name"], "Setup");
    assert_eq!(got["trigger"], "init");
    assert!(
        got["session_id"].is_string() && got["cwd"].is_string(),
        "{got}"
    );
    assert_eq!(s.read("order"), "setup\nstart TOOLCHAIN=ready\n");
    let req = &model.requests()[0];
    assert!(
        req.messages
            .iter()
            .all(|m| !m.text().contains("Run make first.")),
        "{:?}",
        req.messages
    );
    let warned = warned.lock().unwrap();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("no setup today") && w.contains("cannot block")),
        "{warned:?}"
    );
    assert!(
        warned
            .iter()
            .any(|w| w.contains("Setup cannot block") && w.contains("broken.sh")),
        "{warned:?}"
    );
}
