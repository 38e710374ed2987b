//! `Agent::compact`, the compaction a caller asks for (Claude Code's `/compact`): its hooks in
//! order, their inputs, what the thread and the next run hold, a block, and its errors.

use std::sync::{Arc, Mutex};

use tower_agent::{
    Agent, AgentRequest,
    agent::{CompactRequest, SessionSource},
    layers::hooks::{Hooks, PreCompact, SessionStart},
    message::{Message, Role},
    model::ScriptedModel,
    store::{MemoryStore, ThreadStore},
};

/// Hooks recording, in order, what each of PreCompact, SessionStart and PostCompact saw;
/// SessionStart (`compact`) adds a context, PreCompact blocks when `block` says so.
fn recording_hooks(
    log: &Arc<Mutex<Vec<String>>>,
    block: bool,
) -> tower_agent::layers::hooks::HookSet {
    let (pre, start, post) = (Arc::clone(log), Arc::clone(log), Arc::clone(log));
    Hooks::new()
        .on_pre_compact("*", move |input, _| {
            let instructions = input.custom_instructions.unwrap_or_else(|| "null".into());
            pre.lock()
                .unwrap()
                .push(format!("PreCompact {} {instructions}", input.trigger));
            if block {
                PreCompact::Block("not now".into())
            } else {
                PreCompact::Continue
            }
        })
        .on_session_start_for("compact", move |input, _| {
            assert_eq!(input.source, SessionSource::Compact);
            start.lock().unwrap().push("SessionStart compact".into());
            SessionStart::AddContext("Re-read the plan.".into())
        })
        .on_post_compact("manual", move |input, _| {
            post.lock().unwrap().push(format!(
                "PostCompact {} {}",
                input.trigger, input.compact_summary
            ));
        })
        .compile()
        .unwrap()
}

/// An agent whose model answers `first` to the first prompt, then `summary`, then `after`.
fn agent(
    model: &ScriptedModel,
    store: &MemoryStore,
    hooks: tower_agent::layers::hooks::HookSet,
) -> Agent {
    Agent::builder()
        .model(model.clone())
        .system_prompt("You are kind.")
        .store(store.clone())
        .hooks(hooks)
        .build()
}

#[tokio::test]
async fn a_manual_compaction_fires_its_hooks_in_claude_codes_order_and_the_next_run_goes_on_from_the_summary()
 {
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .text("Paris.")
        .text("<analysis>thinking</analysis>\n<summary>SUMMARY: Paris.</summary>")
        .text("2 million.")
        .recording();
    let agent = agent(&model, &store, recording_hooks(&log, false));
    agent
        .run(AgentRequest::new("Capital of France?").thread("t"))
        .await
        .unwrap();

    let resp = agent
        .compact(CompactRequest::new("t").instructions("Keep the city."))
        .await
        .unwrap();
    let raw = "<analysis>thinking</analysis>\n<summary>SUMMARY: Paris.</summary>";
    assert_eq!(
        *log.lock().unwrap(),
        [
            "PreCompact manual Keep the city.".to_owned(),
            "SessionStart compact".into(),
            format!("PostCompact manual {raw}"),
        ]
    );
    assert_eq!(resp.summary.as_deref(), Some(raw));
    assert_eq!(resp.blocked, None);
    assert_eq!(resp.replaced, 2, "the prompt and the answer");

    // The model was asked for the summary after the conversation, with the instructions, and
    // no tools.
    let ask = &model.requests()[1];
    assert_eq!(ask.messages.len(), 4);
    assert!(ask.tools.is_empty());
    let last = ask.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(last.text().ends_with("Keep the city."));

    // The thread: the system prompt, the summary (without the analysis), the context.
    let thread = store.load("t").await.unwrap().unwrap();
    let texts: Vec<String> = thread
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert_eq!(texts[0], "You are kind.");
    assert!(texts[1].ends_with("SUMMARY: Paris.") && !texts[1].contains("thinking"));
    assert!(texts[2].contains("Re-read the plan."));
    assert_eq!(resp.messages.len(), 3);

    agent
        .run(AgentRequest::new("Its population?").thread("t"))
        .await
        .unwrap();
    let next = &model.requests()[2];
    assert_eq!(next.messages.len(), 4);
    assert_eq!(next.messages.last().unwrap().text(), "Its population?");
}

#[tokio::test]
async fn a_pre_compact_block_leaves_the_thread_as_it_is() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("Paris.").recording();
    let agent = agent(&model, &store, recording_hooks(&log, true));
    agent
        .run(AgentRequest::new("Capital of France?").thread("t"))
        .await
        .unwrap();
    let before = store.load("t").await.unwrap().unwrap().messages;

    let resp = agent.compact(CompactRequest::new("t")).await.unwrap();
    assert_eq!(resp.blocked.as_deref(), Some("not now"));
    assert_eq!(resp.summary, None);
    assert_eq!(resp.replaced, 0);
    assert_eq!(*log.lock().unwrap(), ["PreCompact manual null"]);
    assert_eq!(model.requests().len(), 1, "no summary asked");
    assert_eq!(store.load("t").await.unwrap().unwrap().messages, before);
}

#[tokio::test]
async fn a_compaction_that_cannot_be_made_is_an_error_and_changes_nothing() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("Paris.").text("  ");
    let agent = Agent::builder().model(model).store(store.clone()).build();
    // No such thread.
    let err = agent
        .compact(CompactRequest::new("none"))
        .await
        .unwrap_err();
    assert!(err.is_compact(), "{err}");
    // Nothing but a system prompt.
    let mut thread = tower_agent::store::Thread::new("empty");
    thread.messages.push(Message::system("You are kind."));
    store.save(&thread).await.unwrap();
    let err = agent
        .compact(CompactRequest::new("empty"))
        .await
        .unwrap_err();
    assert!(err.is_compact(), "{err}");
    // A model that answers no summary.
    agent
        .run(AgentRequest::new("Capital of France?").thread("t"))
        .await
        .unwrap();
    let before = store.load("t").await.unwrap().unwrap().messages;
    let err = agent.compact(CompactRequest::new("t")).await.unwrap_err();
    assert!(err.is_compact(), "{err}");
    assert_eq!(store.load("t").await.unwrap().unwrap().messages, before);
}
