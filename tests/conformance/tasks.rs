//! TaskCreated / TaskCompleted from the `write_todos` built-in.

use serde_json::json;
use tower_agent::{Agent, builtins::todo::TodoList, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::{Scripts, tool_texts};

fn todos(items: &[(&str, &str, &str)]) -> serde_json::Value {
    let items: Vec<_> = items
        .iter()
        .map(|(id, title, status)| json!({ "id": id, "title": title, "status": status }))
        .collect();
    json!({ "todos": items })
}

// hooks.md § "TaskCreated", § "TaskCreated input" and § "TaskCreated decision control":
// the hook sees `task_id` and `task_subject` of each task being created; exit 2 cancels the
// creation and returns stderr to the model as the tool's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_created_sees_each_new_task_and_exit_2_rolls_it_back() {
    let s = Scripts::new();
    let hook = dump(
        &s,
        "created",
        r#"subject=$(printf '%s' "$input" | python3 -c 'import json,sys; print(json.load(sys.stdin)["task_subject"])')
case "$subject" in
  "[T-"*) exit 0 ;;
  *) echo "Task subject must start with a ticket number, e.g. [T-1]" >&2; exit 2 ;;
esac"#,
    );
    let hooks =
        s.hooks(json!({ "TaskCreated": [{ "hooks": [{ "type": "command", "command": hook }] }] }));
    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            todos(&[("1", "[T-1] Read the spec", "in_progress")]),
        )
        .tool_call(
            "write_todos",
            todos(&[
                ("1", "[T-1] Read the spec", "in_progress"),
                ("2", "Write code", "pending"),
            ]),
        )
        .text("ok");
    let agent = Agent::builder()
        .model(model)
        .cwd(s.dir.path())
        .stage(TodoList::new())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("plan").await.unwrap();
    let got = inputs(&s, "created");
    assert_eq!(
        got.len(),
        2,
        "one call per new task, not for task 1 again: {got:?}"
    );
    assert_common(&got[0], "TaskCreated", s.dir.path());
    assert_eq!(got[0]["task_id"], "1");
    assert_eq!(got[0]["task_subject"], "[T-1] Read the spec");
    assert_eq!(got[1]["task_id"], "2");
    let outputs = tool_texts(&resp);
    assert!(outputs[0].contains("\"success\":true"), "{}", outputs[0]);
    assert!(
        outputs[1].contains("Task subject must start with a ticket number"),
        "{}",
        outputs[1]
    );
    assert!(
        resp.messages.iter().any(|m| m.is_error),
        "the blocked call is an error output"
    );
}

// hooks.md § "TaskCompleted", § "TaskCompleted input" and § "TaskCompleted decision
// control": exit 2 keeps the task from being marked completed and feeds stderr back to the
// model; once the hook exits 0 (its gate passes), the completion goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_completed_exit_2_keeps_the_task_open() {
    let s = Scripts::new();
    let gate = s.path("tests_pass");
    let hook = dump(
        &s,
        "completed",
        &format!(
            "if [ ! -e '{0}' ]; then touch '{0}'; echo 'Tests not passing. Fix failing tests before completing' >&2; exit 2; fi",
            gate.display()
        ),
    );
    let hooks = s
        .hooks(json!({ "TaskCompleted": [{ "hooks": [{ "type": "command", "command": hook }] }] }));
    let model = ScriptedModel::new()
        .tool_call("write_todos", todos(&[("7", "Fix the bug", "in_progress")]))
        .tool_call("write_todos", todos(&[("7", "Fix the bug", "done")]))
        .tool_call("write_todos", todos(&[("7", "Fix the bug", "done")]))
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .stage(TodoList::new())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("fix").await.unwrap();
    let got = inputs(&s, "completed");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["hook_event_name"], "TaskCompleted");
    assert_eq!(got[0]["task_id"], "7");
    assert_eq!(got[0]["task_subject"], "Fix the bug");
    let outputs = tool_texts(&resp);
    assert!(outputs[1].contains("Tests not passing"), "{}", outputs[1]);
    assert!(outputs[2].contains("\"completed\":1"), "{}", outputs[2]);
}
