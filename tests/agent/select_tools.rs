//! `layers::select_tools`: past N tools, a cheap model picks the tools a request needs.

use futures_util::StreamExt;
use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError, agent::AgentEvent, layers::select_tools::ToolSelectionLayer,
    model::ScriptedModel, tool::tool_fn,
};

/// An agent with twelve tools (`t0` … `t11`), the main model and the selector recording.
fn agent(selector: &ScriptedModel, main: &ScriptedModel, max: usize) -> Agent {
    let mut builder = Agent::builder().model(
        ServiceBuilder::new()
            .layer(
                ToolSelectionLayer::new(selector.clone())
                    .max_tools(max)
                    .always(["t0"]),
            )
            .service(main.clone()),
    );
    for i in 0..12 {
        builder = builder.tool(tool_fn(
            format!("t{i}"),
            format!("Tool number {i}"),
            json!({"type": "object"}),
            |_, _| async { Ok::<_, BoxError>("ok".to_owned()) },
        ));
    }
    builder.build()
}

fn offered(main: &ScriptedModel) -> Vec<String> {
    main.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// The selector sees the request and every tool; the main model gets its picks and the tools
/// always offered, in their order.
#[tokio::test]
async fn the_selector_picks_the_tools_the_model_sees() {
    let selector = ScriptedModel::new()
        .text(r#"Relevant: ["t7", "t3", "nope"]"#)
        .recording();
    let main = ScriptedModel::new().text("done").recording();
    agent(&selector, &main, 10)
        .run("what does tool seven do?")
        .await
        .unwrap();
    assert_eq!(offered(&main), ["t0", "t3", "t7"]);
    let asked = selector.requests()[0]
        .messages
        .last()
        .unwrap()
        .text()
        .into_owned();
    assert!(asked.contains("what does tool seven do?"), "{asked}");
    for i in 0..12 {
        assert!(
            asked.contains(&format!("- t{i}: Tool number {i}")),
            "{asked}"
        );
    }
}

/// An answer that names no known tool keeps every tool, with a warning; with no more tools than
/// the limit, the selector is not asked.
#[tokio::test]
async fn a_bad_answer_keeps_every_tool_and_few_tools_skip_the_selector() {
    let selector = ScriptedModel::new().text("I think t99 maybe").recording();
    let main = ScriptedModel::new().text("done").recording();
    let mut stream = agent(&selector, &main, 10).stream("go");
    let mut warnings = Vec::new();
    while let Some(e) = stream.next().await {
        if let AgentEvent::Warning { message } = e {
            warnings.push(message);
        }
    }
    assert_eq!(offered(&main).len(), 12);
    assert!(
        warnings.iter().any(|w| w.contains("tool selection")),
        "{warnings:?}"
    );

    let selector = ScriptedModel::new().recording();
    let main = ScriptedModel::new().text("done").recording();
    agent(&selector, &main, 12).run("go").await.unwrap();
    assert_eq!(selector.requests().len(), 0);
    assert_eq!(offered(&main).len(), 12);
}
