//! `cache_prefix_ratio` (issue 13, prompt caching): a provider serves a request from its prompt
//! cache when the request's prefix is byte-identical to an earlier one's. Over a 25-step run with
//! the full default stack (skills, memory, todos, filesystem, reminders, trace, eviction, and
//! summarization that does not trigger), through the real Anthropic provider against a loopback
//! server, this measures for each request the fraction of its body (the bytes sent) that is a
//! byte-identical prefix of the next request's body, prints the average and where each pair
//! first differs, and asserts the target (≥ 0.95).

use crate::loopback;

use std::path::Path;

use serde_json::{Value, json};
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest,
    builtins::{filesystem::Filesystem, memory::Memory, skills::Skills, todo::TodoList},
    layers::{
        evict::EvictLayer, reminders::RemindersLayer, summarize::SummarizeLayer, trace::TraceLayer,
    },
    model::{ScriptedModel, anthropic::Anthropic},
};

use loopback::{Reply, Server};

const STEPS: usize = 25;

/// The tool call of step `i` (of 24 tool steps): a realistic mix of the built-ins.
fn call(i: usize) -> (&'static str, Value) {
    match i % 6 {
        0 => (
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "Read the notes", "status": if i < 12 { "in_progress" } else { "done" } },
                { "id": "2", "title": format!("Write part {i}"), "status": "pending" },
            ]}),
        ),
        1 => (
            "write_file",
            json!({ "path": format!("notes/part{i}.md"), "content": format!("# Part {i}\n\nSome text.\n") }),
        ),
        2 => (
            "read_file",
            json!({ "path": format!("notes/part{}.md", i - 1) }),
        ),
        3 => ("ls", json!({ "path": "notes" })),
        4 => ("grep", json!({ "pattern": "Part", "path": "notes" })),
        _ => ("glob", json!({ "pattern": "notes/*.md" })),
    }
}

fn tool_use_reply(i: usize) -> Reply {
    let (name, input) = call(i);
    Reply::json(
        json!({
            "id": format!("msg_{i}"), "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                { "type": "text", "text": format!("Step {i}.") },
                { "type": "tool_use", "id": format!("toolu_{i:02}"), "name": name, "input": input }
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": { "input_tokens": 100, "output_tokens": 20 }
        })
        .to_string(),
    )
}

fn workspace(root: &Path) {
    std::fs::create_dir_all(root.join("skills/notes")).unwrap();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(
        root.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Take notes\n---\nWrite short notes.\n",
    )
    .unwrap();
    std::fs::write(root.join("AGENTS.md"), "- Be brief.\n").unwrap();
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_prefix_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    workspace(root);
    let server = Server::start();
    for i in 0..STEPS - 1 {
        server.reply(tool_use_reply(i));
    }
    server.reply(Reply::json(
        json!({
            "id": "msg_last", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{ "type": "text", "text": "All notes written." }],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": { "input_tokens": 100, "output_tokens": 5 }
        })
        .to_string(),
    ));
    let provider = Anthropic::builder()
        .base_url(server.url())
        .api_key("sk-ant-test")
        .model("claude-sonnet-4-5")
        .client(loopback::client())
        .build();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(SummarizeLayer::new(ScriptedModel::new().text("summary")))
                .service(provider),
        )
        .tool_layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(RemindersLayer::with_defaults())
                .layer(EvictLayer::new()),
        )
        .system_prompt("You are a careful note-taking agent.")
        .stage(TodoList::new())
        .setup(Filesystem::local(root))
        .stage(Skills::new([root.join("skills")]))
        .stage(Memory::new([root.join("AGENTS.md")]))
        .max_steps(STEPS as u32)
        .cwd(root)
        .build();
    let resp = agent
        .run(AgentRequest::new("Write the notes, part by part.").thread("cache-1"))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), STEPS, "{:?}", resp.outcome);

    let mut ratios = Vec::new();
    for (i, pair) in requests.windows(2).enumerate() {
        let (a, b) = (&pair[0].raw[..], &pair[1].raw[..]);
        let same = common_prefix(a, b);
        let ratio = same as f64 / a.len() as f64;
        ratios.push(ratio);
        let at = String::from_utf8_lossy(&a[same.saturating_sub(40)..(same + 40).min(a.len())]);
        println!(
            "step {i:2}: {same:6} of {:6} bytes ({ratio:.3}); first difference near: {at:?}",
            a.len()
        );
    }
    let average = ratios.iter().sum::<f64>() / ratios.len() as f64;
    println!(
        "cache_prefix_ratio = {average:.3} (average over {} request pairs)",
        ratios.len()
    );
    assert!(average >= 0.95, "cache_prefix_ratio {average:.3} < 0.95");
}
