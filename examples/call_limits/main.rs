//! A stateful layer written outside the crate, with its public API only: at most so many
//! model calls and tool calls (in all, and per tool) in one run. The layer is in
//! `tests/support/call_limits.rs` (beside its tests; copy it into your project); this runs it.
//!
//! ```sh
//! cargo run --example call_limits
//! ```

// The layer lives with the tests that check it (in the published crate too).
#[path = "../../tests/support/call_limits.rs"]
mod limit;

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{Agent, agent::Outcome, model::ScriptedModel, tool::tool_fn};

use limit::{CallLimitsLayer, OnLimit};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), tower_agent::Error> {
    let limits = CallLimitsLayer::new()
        .max_model_calls(10)
        .max_calls_of("search", 2)
        .on_limit(OnLimit::Deny);
    let model = ScriptedModel::new()
        .tool_calls([
            ("search", json!({})),
            ("search", json!({})),
            ("search", json!({})),
        ])
        .text("two searches were enough");
    let agent = Agent::builder()
        .model(ServiceBuilder::new().layer(limits.clone()).service(model))
        .tool(tool_fn(
            "search",
            "Searches",
            json!({"type": "object"}),
            |_, _| async { Ok("results") },
        ))
        .tool_layer(limits)
        .build();

    let resp = agent.run("search three times").await?;
    assert_eq!(resp.outcome, Outcome::Finished);
    for message in resp.messages.iter().skip(2).take(3) {
        println!("tool output: {}", message.text());
    }
    let outputs: Vec<String> = resp
        .messages
        .iter()
        .skip(2)
        .take(3)
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(outputs.iter().filter(|o| *o == "results").count(), 2);
    assert!(outputs.iter().any(|o| {
        o.starts_with("tool call limit reached: `search` may be called at most 2 times")
    }));
    println!("outcome: {:?}", resp.outcome);
    Ok(())
}
