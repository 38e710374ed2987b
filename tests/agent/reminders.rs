//! RemindersLayer in the loop: everything triggered in one step lands once, after all of the
//! step's tool results, as one user message.

use std::time::Duration;

use serde_json::json;
use tower_agent::{
    Agent, BoxError,
    layers::reminders::RemindersLayer,
    message::{Role, ToolOutput},
    model::ScriptedModel,
    tool::tool_fn,
};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn reminders_follow_all_tool_results_in_one_message() {
    let sleeper = |name: &'static str, ms: u64| {
        tool_fn(
            name,
            "sleeps",
            json!({"type": "object"}),
            move |_, _| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, BoxError>(format!("{name} done"))
            },
        )
    };
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_calls([("a", json!({})), ("b", json!({})), ("quiet", json!({}))])
                .text("ok"),
        )
        .tool(sleeper("a", 30))
        .tool(sleeper("b", 10))
        .tool(sleeper("quiet", 20))
        .tool_layer(
            RemindersLayer::new()
                .trigger(|tool: &str, _: &ToolOutput| {
                    (tool != "quiet").then(|| format!("after {tool}"))
                })
                .trigger(|tool: &str, out: &ToolOutput| {
                    (tool == "a").then(|| format!("a said: {}", out.content))
                }),
        )
        .build();
    let resp = agent.run("go").await.unwrap();
    let roles: Vec<Role> = resp.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Tool,
            Role::System,
            Role::Assistant
        ]
    );
    // b finishes first (10 ms), then a (30 ms): reminders in the order they were triggered.
    assert_eq!(
        resp.messages[5].text(),
        "after b\n\nafter a\n\na said: a done"
    );
}

#[tokio::test]
async fn no_reminder_no_message() {
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("t", json!({})).text("ok"))
        .tool(tool_fn("t", "t", json!({"type": "object"}), |_, _| async {
            Ok::<_, BoxError>("x")
        }))
        .tool_layer(RemindersLayer::with_defaults())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.messages.len(), 4);
}

#[tokio::test]
async fn plan_completion_reminder_after_todos_done() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("write_todos", json!({}))
                .text("ok"),
        )
        .tool(tool_fn(
            "write_todos",
            "todos",
            json!({"type": "object"}),
            |_, _| async {
                Ok::<_, BoxError>(
                    json!({"success": true, "summary": {"total": 2, "completed": 2}}).to_string(),
                )
            },
        ))
        .tool_layer(RemindersLayer::with_defaults())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.messages[3].role, Role::System);
    assert_eq!(
        resp.messages[3].text(),
        tower_agent::layers::reminders::PLAN_COMPLETE_REMINDER
    );
}
