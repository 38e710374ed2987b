//! SessionStart: `source` (`startup`, `resume`), `model`, the matcher on the source, and
//! context from plain stdout or `additionalContext`.

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest,
    model::{ModelSettings, ScriptedModel},
    store::MemoryStore,
};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::Scripts;

// hooks.md § "SessionStart" (matcher table) and § "SessionStart input": a new thread starts
// with `startup`, a thread that existed in the store with `resume`; `model` is the agent's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_is_startup_then_resume_and_matchers_pick_it() {
    let s = Scripts::new();
    let any = dump(&s, "any", "");
    let startup = dump(&s, "startup", "");
    let resume = dump(&s, "resume", "");
    let hooks = s.hooks(json!({ "SessionStart": [
        { "hooks": [{ "type": "command", "command": any }] },
        { "matcher": "startup", "hooks": [{ "type": "command", "command": startup }] },
        { "matcher": "resume", "hooks": [{ "type": "command", "command": resume }] },
    ]}));
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("one").text("two"))
        .settings(ModelSettings::default().model("claude-test-model"))
        .store(MemoryStore::new())
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();

    agent
        .run(AgentRequest::new("hi").thread("t1"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("again").thread("t1"))
        .await
        .unwrap();

    let all = inputs(&s, "any");
    assert_eq!(all.len(), 2);
    assert_common(&all[0], "SessionStart", s.dir.path());
    assert_eq!(all[0]["source"], "startup");
    assert_eq!(all[1]["source"], "resume");
    assert_eq!(all[0]["model"], "claude-test-model");
    assert_eq!(all[0]["session_id"], "t1");
    assert_eq!(
        inputs(&s, "startup").len(),
        1,
        "`startup` matches the first run only"
    );
    let resumed = inputs(&s, "resume");
    assert_eq!(resumed.len(), 1, "`resume` matches the second run only");
    assert_eq!(resumed[0]["source"], "resume");
}

// hooks.md § "SessionStart decision control": plain stdout and `additionalContext` both
// reach the model's context (Claude Code 2.1.328: system messages after the prompt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_stdout_and_additional_context_reach_the_model() {
    let s = Scripts::new();
    let plain = s.bash("plain.sh", "cat >/dev/null\necho 'Current branch: feat/x'");
    let json_hook = s.bash(
        "json.sh",
        r#"cat >/dev/null
echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "Open issue: #42"}}'"#,
    );
    let hooks = s.hooks(json!({ "SessionStart": [{ "matcher": "startup", "hooks": [
        { "type": "command", "command": plain },
        { "type": "command", "command": json_hook },
    ]}]}));
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    agent.run("hi").await.unwrap();
    let req = &model.requests()[0];
    assert_eq!(req.messages[0].text(), "hi");
    let context = &req.messages[1];
    assert_eq!(context.role, tower_agent::message::Role::System);
    let context = context.text();
    assert!(context.contains("Current branch: feat/x"), "{context}");
    assert!(context.contains("Open issue: #42"), "{context}");
}

/// An agent on the thread store `db` (opened afresh: a restarted process), with `hooks`,
/// answering `text`.
#[cfg(feature = "sqlite")]
fn restarted(
    s: &Scripts,
    db: &std::path::Path,
    hooks: &tower_agent::layers::hooks::HookSet,
    text: &str,
) -> Agent {
    Agent::builder()
        .model(ScriptedModel::new().text(text))
        .store(tower_agent::store::Sqlite::open(db).unwrap())
        .cwd(s.dir.path())
        .hooks(hooks.clone())
        .build()
}

/// Milliseconds since the Unix epoch.
#[cfg(feature = "sqlite")]
fn now_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.unwrap().as_millis()).unwrap()
}

// Measured against Claude Code 2.1.328 (`tests/reference`, scenario `resumed_session`): a
// resumed session's SessionStart has `seconds_since_last_response`, `context_tokens`,
// `prompt_cache_likely_expired` and `estimated_cache_write_usd`; a new one has none of them.
// The thread keeps its last answer's time (key `tower_agent.last_response`), so they survive
// a restart; an answer older than the prompt cache's 5 minutes (a time stored in the past)
// makes the cache likely expired.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_says_how_old_its_last_answer_is() {
    use tower_agent::{
        message::tokens::{BytesPerFour, TokenCounter},
        store::ThreadStore,
    };
    const FIELDS: [&str; 4] = [
        "seconds_since_last_response",
        "context_tokens",
        "prompt_cache_likely_expired",
        "estimated_cache_write_usd",
    ];
    let s = Scripts::new();
    let any = dump(&s, "any", "");
    let hooks =
        s.hooks(json!({ "SessionStart": [{ "hooks": [{ "type": "command", "command": any }] }]}));
    let hooks = hooks.into_hooks().compile().unwrap();
    let db = s.path("threads.db");
    let request = |prompt| AgentRequest::new(prompt).thread("t");
    restarted(&s, &db, &hooks, "The tests pass.")
        .run(request("Do the tests pass?"))
        .await
        .unwrap();
    let store = tower_agent::store::Sqlite::open(&db).unwrap();
    let thread = store.load("t").await.unwrap().unwrap();
    let tokens = BytesPerFour.count_messages(&thread.messages);
    assert!(tokens > 0);
    restarted(&s, &db, &hooks, "two")
        .run(request("again"))
        .await
        .unwrap();

    let all = inputs(&s, "any");
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["source"], "startup");
    for field in FIELDS {
        assert!(all[0].get(field).is_none(), "a new session: {}", all[0]);
    }
    let resumed = &all[1];
    assert_eq!(resumed["source"], "resume");
    let seconds = resumed["seconds_since_last_response"].as_u64().unwrap();
    assert!(seconds < 60, "the last answer was just now: {resumed}");
    assert_eq!(resumed["prompt_cache_likely_expired"], false, "{resumed}");
    assert_eq!(resumed["context_tokens"], tokens, "{resumed}");
    assert_eq!(resumed["estimated_cache_write_usd"], 0.0, "no price list");

    // The thread's last answer ten minutes ago: past the cache's lifetime.
    let mut thread = store.load("t").await.unwrap().unwrap();
    let ten_minutes_ago = now_ms() - 10 * 60 * 1000;
    thread.data.set_value(
        "tower_agent.last_response",
        json!({ "at_ms": ten_minutes_ago }),
    );
    store.save(&thread).await.unwrap();
    restarted(&s, &db, &hooks, "three")
        .run(request("later"))
        .await
        .unwrap();
    let old = &inputs(&s, "any")[2];
    let seconds = old["seconds_since_last_response"].as_u64().unwrap();
    assert!((600..660).contains(&seconds), "{old}");
    assert_eq!(old["prompt_cache_likely_expired"], true, "{old}");
    let store = tower_agent::store::Sqlite::open(&db).unwrap();
    let thread = store.load("t").await.unwrap().unwrap();
    let at_ms = thread.data.value("tower_agent.last_response").unwrap()["at_ms"].as_u64();
    assert!(
        at_ms.unwrap() > ten_minutes_ago,
        "the new answer's time is kept"
    );
}

// The same fields for a Rust hook: `SessionStartInput::resumed`.
#[tokio::test]
async fn a_rust_hook_sees_the_resumed_session() {
    use std::sync::{Arc, Mutex};
    use tower_agent::layers::hooks::{Hooks, SessionStart, SessionStartInput};
    let seen: Arc<Mutex<Vec<SessionStartInput>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .on_session_start_for("*", move |input: SessionStartInput, _ctx| {
            log.lock().unwrap().push(input);
            SessionStart::Continue
        })
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("The tests pass.").text("Yes."))
        .store(MemoryStore::new())
        .hooks(hooks)
        .build();
    for prompt in ["Do the tests pass?", "Still?"] {
        agent
            .run(AgentRequest::new(prompt).thread("t"))
            .await
            .unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].resumed.is_none(), "{:?}", seen[0]);
    let resumed = seen[1].resumed.as_ref().expect("a resumed session");
    assert!(resumed.seconds_since_last_response < 60, "{resumed:?}");
    assert!(!resumed.prompt_cache_likely_expired);
    assert!(resumed.context_tokens > 0);
}
