//! UserPromptExpansion: a typed slash command expands into the prompt the model gets.
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "UserPromptExpansion" — fires when a typed
//! command (`slash_command`) or MCP prompt (`mcp_prompt`) expands, before the text reaches the
//! model; the input adds `expansion_type`, `command_name`, `command_args`, `command_source`
//! and `prompt`; the matcher is compared with the command's name; it can block (exit 2,
//! `decision: "block"`), `additionalContext` goes next to the prompt, and (§ "Exit code 0")
//! its plain stdout is context, as UserPromptSubmit's. In a library the expansion is a layer
//! of the start stack: [`SlashCommands`] (command files, as `.claude/commands/*.md`).

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest,
    agent::Outcome,
    builtins::commands::SlashCommands,
    layers::hooks::{Hooks, UserPrompt},
    model::ScriptedModel,
    store::MemoryStore,
};

use crate::support::command::Scripts;

/// `commands/review.md` (with front matter) and `commands/git/commit.md`.
fn commands(s: &Scripts) -> SlashCommands {
    let dir = s.path("commands");
    std::fs::create_dir_all(dir.join("git")).unwrap();
    std::fs::write(
        dir.join("review.md"),
        "---\ndescription: Review\nargument-hint: FILE\n---\nReview $1 carefully ($ARGUMENTS).",
    )
    .unwrap();
    std::fs::write(dir.join("git/commit.md"), "Write a commit message.").unwrap();
    SlashCommands::new().dir(&dir, "project")
}

/// A command hook gets the reference's input after UserPromptSubmit saw the typed prompt; its
/// `additionalContext` and plain stdout follow the expanded prompt in the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_the_expansion_and_adds_context() {
    let s = Scripts::new();
    let input = s.path("input.json");
    let submit = s.bash(
        "submit.sh",
        &format!(
            r#"cat >> {:?}; echo >> {:?}"#,
            s.path("submit.json"),
            s.path("submit.json")
        ),
    );
    let json_hook = s.bash(
        "json.sh",
        &format!(
            r#"cat > {input:?}
echo '{{"hookSpecificOutput": {{"hookEventName": "UserPromptExpansion", "additionalContext": "Reviews cite lines."}}}}'"#
        ),
    );
    let plain = s.bash(
        "plain.sh",
        "cat >/dev/null; echo 'Plain stdout is context.'",
    );
    let hooks = s.hooks(json!({
        "UserPromptSubmit": [{ "hooks": [{ "type": "command", "command": submit }] }],
        "UserPromptExpansion": [{ "matcher": "review", "hooks": [
            { "type": "command", "command": json_hook },
            { "type": "command", "command": plain },
        ] }],
    }));
    let model = ScriptedModel::new().text("ok").recording();
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .start_layer(commands(&s))
        .build();
    let resp = agent
        .run(AgentRequest::new("/review src/lib.rs twice").thread("t"))
        .await
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    let got: Value = serde_json::from_str(&s.read("input.json")).unwrap();
    assert_eq!(got["hook_event_name"], "UserPromptExpansion");
    assert_eq!(got["expansion_type"], "slash_command");
    assert_eq!(got["command_name"], "review");
    assert_eq!(got["command_args"], "src/lib.rs twice");
    assert_eq!(got["command_source"], "project");
    assert_eq!(got["prompt"], "/review src/lib.rs twice");
    let submitted: Value =
        serde_json::from_str(s.read("submit.json").lines().next().unwrap()).unwrap();
    assert_eq!(
        submitted["prompt"], "/review src/lib.rs twice",
        "UserPromptSubmit sees it typed"
    );

    let thread = store.get("t").unwrap();
    let texts: Vec<String> = thread
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    let at = texts
        .iter()
        .position(|t| t == "Review src/lib.rs carefully (src/lib.rs twice).")
        .unwrap_or_else(|| panic!("{texts:?}"));
    assert!(texts[at + 1].contains("Reviews cite lines."), "{texts:?}");
    assert!(
        texts[at + 1].contains("Plain stdout is context."),
        "{texts:?}"
    );
}

/// Exit 2 blocks the expanded prompt: the run ends `Blocked`, nothing enters the thread. A hook
/// whose matcher names another command does not fire; a prompt naming no command file
/// expands to nothing and fires nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_blocks_and_the_matcher_picks_the_command() {
    let s = Scripts::new();
    let block = s.bash(
        "block.sh",
        "cat >/dev/null; echo 'no commits from here' >&2; exit 2",
    );
    let fired = s.path("fired");
    let other = s.bash("other.sh", &format!("cat >/dev/null; echo x >> {fired:?}"));
    let hooks = s.hooks(json!({
        "UserPromptExpansion": [
            { "matcher": "git:commit", "hooks": [{ "type": "command", "command": block }] },
            { "matcher": "review", "hooks": [{ "type": "command", "command": other }] },
        ],
    }));
    let model = ScriptedModel::new().text("ok").per_run().recording();
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(model.clone())
        .store(store.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .start_layer(commands(&s))
        .build();

    let resp = agent
        .run(AgentRequest::new("/git:commit").thread("t"))
        .await
        .unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "no commits from here".into()
        }
    );
    assert!(store.get("t").is_none_or(|t| t.messages.is_empty()));
    assert!(!fired.exists(), "the review hook does not match git:commit");

    let resp = agent.run("/unknown thing").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(
        model.requests()[0].messages.last().unwrap().text(),
        "/unknown thing"
    );
    assert!(!fired.exists());
}

/// A Rust hook sees the expansion and can rewrite the expanded prompt or block it.
#[tokio::test]
async fn a_rust_hook_rewrites_or_blocks() {
    let s = Scripts::new();
    let hooks = Hooks::new()
        .on_prompt_expansion("*", |expansion, _ctx| {
            if expansion.args.contains("secret") {
                UserPrompt::Block(format!("/{} with a secret", expansion.name))
            } else {
                UserPrompt::Rewrite(format!("{} (from {})", expansion.name, expansion.source))
            }
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").per_run().recording();
    let agent = Agent::builder()
        .model(model.clone())
        .hooks(hooks)
        .start_layer(commands(&s))
        .build();
    agent.run("/review a.rs").await.unwrap();
    assert_eq!(
        model.requests()[0].messages.last().unwrap().text(),
        "review (from project)"
    );
    let resp = agent.run("/review secret.rs").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "/review with a secret".into()
        }
    );
}
