//! SessionEnd with a real `reason` (see `tower_agent::agent::session_end_reason` for the
//! mapping of run outcomes to the reference's values).

use std::time::Duration;

use serde_json::json;
use tower_agent::{Agent, AgentRequest, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, wait_inputs};
use crate::support::command::Scripts;

fn agent(s: &Scripts, model: ScriptedModel) -> Agent {
    let any = dump(s, "end", "");
    let other = dump(s, "end_other", "");
    let hooks = s.hooks(json!({ "SessionEnd": [
        { "hooks": [{ "type": "command", "command": any }] },
        { "matcher": "other", "hooks": [{ "type": "command", "command": other }] },
    ]}));
    Agent::builder()
        .model(model)
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build()
}

// hooks.md § "SessionEnd input", as Claude Code 2.1.328 does it headless (`claude -p`, measured
// in tests/reference): a session whose prompt finished ends with `other` (`prompt_input_exit`
// is a person leaving at the interactive prompt); the `other` matcher matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_ends_with_other() {
    let s = Scripts::new();
    agent(&s, ScriptedModel::new().text("bye"))
        .run("hi")
        .await
        .unwrap();
    let got = wait_inputs(&s, "end", 1).await;
    assert_common(&got[0], "SessionEnd", s.dir.path());
    assert_eq!(got[0]["reason"], "other");
    assert_eq!(got[0]["outcome"], json!({ "kind": "finished" }));
    let other = wait_inputs(&s, "end_other", 1).await;
    assert_eq!(other[0]["reason"], "other");
}

// hooks.md § "SessionEnd": a session that ends on an error reports `other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_run_ends_with_other() {
    let s = Scripts::new();
    let resp = agent(&s, ScriptedModel::new().fail("boom"))
        .run("hi")
        .await
        .unwrap();
    assert!(!resp.outcome.is_finished());
    let got = wait_inputs(&s, "end_other", 1).await;
    assert_eq!(got[0]["reason"], "other");
    assert_eq!(got[0]["outcome"]["kind"], "aborted", "{}", got[0]);
}

// hooks.md § "SessionEnd": a session that is cut off (here: the run's future dropped by a
// timeout around it) still ends, with `other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_still_fires_session_end() {
    let s = Scripts::new();
    let model = ScriptedModel::new()
        .text("slow")
        .latency(Duration::from_secs(30));
    let agent = agent(&s, model);
    let run = agent.run(AgentRequest::new("hi").thread("dropped"));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), run)
            .await
            .is_err()
    );
    let got = wait_inputs(&s, "end_other", 1).await;
    assert_eq!(got[0]["reason"], "other");
    assert_eq!(got[0]["outcome"], json!({ "kind": "cancelled" }));
    assert_eq!(got[0]["session_id"], "dropped");
}
