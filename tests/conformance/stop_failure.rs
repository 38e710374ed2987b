//! StopFailure: the run ends on a model (API) error.

use serde_json::json;
use tower_agent::{Agent, agent::Outcome, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, wait_inputs};
use crate::support::command::Scripts;

// hooks.md § "StopFailure" and § "StopFailure input": `error` (the type, what the matcher
// filters on), `error_details`, `last_assistant_message` (the API error text). Output and
// exit code are ignored: exit 2 changes nothing, and Stop hooks don't run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_fires_stop_failure_with_its_type() {
    let s = Scripts::new();
    let any = dump(&s, "failure", "echo 'ignored' >&2; exit 2");
    let rate = dump(&s, "rate", "");
    let auth = dump(&s, "auth", "");
    let stop = dump(&s, "stop", "");
    let hooks = s.hooks(json!({
        "StopFailure": [
            { "hooks": [{ "type": "command", "command": any }] },
            { "matcher": "rate_limit", "hooks": [{ "type": "command", "command": rate }] },
            { "matcher": "authentication_failed", "hooks": [{ "type": "command", "command": auth }] },
        ],
        "Stop": [{ "hooks": [{ "type": "command", "command": stop }] }],
    }));
    let agent = Agent::builder()
        .model(ScriptedModel::new().fail("429 Too Many Requests: rate limit reached"))
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("hi").await.unwrap();
    assert!(
        matches!(resp.outcome, Outcome::Aborted { .. }),
        "{:?}",
        resp.outcome
    );

    let got = wait_inputs(&s, "failure", 1).await;
    assert_common(&got[0], "StopFailure", s.dir.path());
    assert_eq!(got[0]["error"], "rate_limit");
    assert!(
        got[0]["error_details"]
            .as_str()
            .unwrap()
            .contains("429 Too Many Requests")
    );
    assert!(
        got[0]["last_assistant_message"]
            .as_str()
            .unwrap()
            .starts_with("API Error: "),
        "{}",
        got[0]
    );
    assert_eq!(wait_inputs(&s, "rate", 1).await.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(super::common_ev2::inputs(&s, "auth").is_empty());
    assert!(
        super::common_ev2::inputs(&s, "stop").is_empty(),
        "Stop does not run on an API error"
    );
}
