//! PreCompact, PostCompact and SessionStart with source `compact`, around the summarize
//! layer's compaction.

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    layers::summarize::SummarizeLayer,
    message::Message,
    model::{ModelResponse, ScriptedModel},
    store::{MemoryStore, Thread, ThreadStore},
    tool::tool_fn,
};

use super::common_ev2::{assert_common, dump, inputs, wait_inputs};
use crate::support::command::Scripts;

async fn long_thread(store: &MemoryStore, id: &str) {
    let mut thread = Thread::new(id);
    thread.messages.push(Message::system("You are kind."));
    for i in 0..40 {
        let text = format!("message {i}: {}", "lorem ipsum ".repeat(30));
        thread.messages.push(if i % 2 == 0 {
            Message::user(text)
        } else {
            Message::assistant(text)
        });
    }
    store.save(&thread).await.unwrap();
}

// hooks.md § "PreCompact input" (`trigger` auto, empty `custom_instructions`), § "PostCompact
// input" (`trigger`, `compact_summary`), and § "SessionStart" (matcher `compact`: fires after
// a compaction; its context is at the start of the compacted conversation, after the summary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_fires_pre_compact_post_compact_and_session_start_compact() {
    let s = Scripts::new();
    let pre = dump(&s, "pre", "");
    let post = dump(&s, "post", "");
    let start = dump(&s, "start", "");
    let compact = dump(
        &s,
        "compact",
        "echo 'Re-read CONTRIBUTING.md before editing.'",
    );
    let hooks = s.hooks(json!({
        "PreCompact": [{ "matcher": "auto", "hooks": [{ "type": "command", "command": pre }] }],
        "PostCompact": [{ "hooks": [{ "type": "command", "command": post }] }],
        "SessionStart": [
            { "matcher": "startup|resume", "hooks": [{ "type": "command", "command": start }] },
            { "matcher": "compact", "hooks": [{ "type": "command", "command": compact }] },
        ],
    }));
    let store = MemoryStore::new();
    long_thread(&store, "t").await;
    let summarizer = ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("SUMMARY OF IT")));
    let model = ScriptedModel::new()
        .tool_call("echo", json!({ "x": 1 }))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(
                    SummarizeLayer::new(summarizer)
                        .context_window(2_000)
                        .on_compact(hooks.pre_compact()),
                )
                .service(model.clone()),
        )
        .tool(tool_fn(
            "echo",
            "Echoes",
            json!({"type": "object"}),
            |args, _| async move { Ok::<_, BoxError>(args) },
        ))
        .store(store)
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent
        .run(AgentRequest::new("go on").thread("t"))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);

    let pre = inputs(&s, "pre");
    assert_eq!(pre.len(), 1);
    assert_common(&pre[0], "PreCompact", s.dir.path());
    assert_eq!(pre[0]["trigger"], "auto");
    assert_eq!(pre[0]["custom_instructions"], "");
    let post = wait_inputs(&s, "post", 1).await;
    assert_common(&post[0], "PostCompact", s.dir.path());
    assert_eq!(post[0]["trigger"], "auto");
    assert_eq!(post[0]["compact_summary"], "SUMMARY OF IT");
    let starts = inputs(&s, "start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["source"], "resume");
    let compacts = inputs(&s, "compact");
    assert_eq!(
        compacts.len(),
        1,
        "SessionStart(compact) fires once, after the compaction"
    );
    assert_eq!(compacts[0]["source"], "compact");

    let second = &model.requests()[1];
    let texts: Vec<String> = second
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    let summary = texts
        .iter()
        .position(|t| t.contains("SUMMARY OF IT"))
        .expect("summary");
    assert!(
        texts[summary + 1].contains("Re-read CONTRIBUTING.md before editing."),
        "the compact context follows the summary: {texts:?}"
    );
}
