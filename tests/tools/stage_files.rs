//! The Skills and Memory stages read their files only when they changed (issue 16, target
//! 2): a run over unchanged files hands nothing to tokio's blocking pool, and an edit — the
//! agent's own, through the filesystem tools — shows at the next run.

use crate::support;

use std::{sync::mpsc, time::Duration};

use serde_json::json;
use support::write_skill;
use tower_agent::{
    Agent,
    builtins::{filesystem::Filesystem, memory::Memory, skills::Skills},
    model::{ModelRequest, ModelResponse, ScriptedModel},
};

fn system(req: &ModelRequest) -> String {
    req.system()
        .map(|m| m.text().into_owned())
        .unwrap_or_default()
}

/// A run of `agent` that must finish (within [`PATIENCE`](crate::support::PATIENCE): it hangs
/// if it waits for the blocking pool the test holds).
fn run(rt: &tokio::runtime::Runtime, agent: &Agent, prompt: &str) -> String {
    rt.block_on(async { tokio::time::timeout(crate::support::PATIENCE, agent.run(prompt)).await })
        .unwrap_or_else(|_| panic!("the run `{prompt}` hung"))
        .expect("run")
        .text
}

#[test]
fn unchanged_files_are_not_read_again_and_the_agents_edits_are_seen() {
    // One blocking thread: while a test task holds it, a run that hands a read to the
    // blocking pool waits for it (and times out).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_skill(
        &root.join("skills"),
        "notes",
        "---\nname: notes\ndescription: Take notes\n---\nWrite short notes.\n",
    );
    std::fs::write(root.join("AGENTS.md"), "- Be brief.\n").unwrap();
    // Past the window in which a just-changed file is read again at every run.
    std::thread::sleep(Duration::from_millis(2_100));

    let skills = Skills::new([root.join("skills")]);
    let memory = Memory::new([root.join("AGENTS.md")]).without_guidelines();
    // Reports its system prompt; the same stages (clones share what they read) as the editor.
    let reporter = Agent::builder()
        .model(ScriptedModel::from_fn(|req| {
            Ok(ModelResponse::text(system(req)))
        }))
        .cwd(root)
        .stage(skills.clone())
        .stage(memory.clone())
        .build();
    let editor = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call(
                    "edit_file",
                    json!({ "path": "AGENTS.md", "old_text": "brief", "new_text": "quick" }),
                )
                .text("edited the memory")
                .tool_call(
                    "write_file",
                    json!({
                        "path": "skills/notes/SKILL.md",
                        "content": "---\nname: notes\ndescription: Take tidy notes\n---\nBody.\n",
                    }),
                )
                .text("edited the skill"),
        )
        .cwd(root)
        .setup(Filesystem::local(root))
        .stage(skills.clone())
        .stage(memory.clone())
        .build();

    let first = run(&rt, &reporter, "one");
    assert!(first.contains("[notes] Take notes"), "{first}");
    assert!(first.contains("- Be brief."), "{first}");

    // Take the only blocking thread.
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = rt.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    started_rx.recv().unwrap();
    let second = run(&rt, &reporter, "two");
    assert_eq!(second, first, "the unchanged files, without a read");
    release_tx.send(()).unwrap();
    rt.block_on(blocker).unwrap();

    // The agent edits its memory (same size: only the stamp tells) ...
    assert_eq!(run(&rt, &editor, "remember"), "edited the memory");
    assert_eq!(
        std::fs::read_to_string(root.join("AGENTS.md")).unwrap(),
        "- Be quick.\n"
    );
    let third = run(&rt, &reporter, "three");
    assert!(third.contains("- Be quick."), "{third}");
    assert!(!third.contains("- Be brief."), "{third}");
    // ... and a skill.
    assert_eq!(run(&rt, &editor, "improve the skill"), "edited the skill");
    let fourth = run(&rt, &reporter, "four");
    assert!(fourth.contains("[notes] Take tidy notes"), "{fourth}");
    assert!(fourth.contains("- Be quick."), "{fourth}");

    // A new skill directory is found at the next run, and a deleted memory file is gone.
    write_skill(
        &root.join("skills"),
        "pdf",
        "---\nname: pdf\ndescription: Fill PDF forms\n---\nBody.\n",
    );
    std::fs::remove_file(root.join("AGENTS.md")).unwrap();
    let fifth = run(&rt, &reporter, "five");
    assert!(fifth.contains("[pdf] Fill PDF forms"), "{fifth}");
    assert!(fifth.contains("[notes] Take tidy notes"), "{fifth}");
    assert!(!fifth.contains("agent_memory"), "{fifth}");
}
