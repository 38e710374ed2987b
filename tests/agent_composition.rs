//! The agent level composes like the model and tool levels: per-request data reaches the run,
//! and agent-level layers (a cache that answers by itself, prompt hooks) wrap the agent.

mod support;

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::Outcome,
    layers::hooks::{Hooks, PreToolUse},
    message::Role,
    model::{ModelRequest, ScriptedModel},
    tool::tool_fn,
};

use support::{any_object, last_tool_message};

/// Who is calling: put in by the caller (an auth middleware), read by tools and hooks.
#[derive(Clone, Debug, PartialEq)]
struct Principal {
    name: String,
    admin: bool,
}

fn principal(name: &str, admin: bool) -> Principal {
    Principal {
        name: name.into(),
        admin,
    }
}

/// An agent whose `whoami` tool answers the caller's name; a PreToolUse hook denies tool calls
/// of callers that are not admins; a prepare stage puts the name in the system prompt; and a
/// subagent tool whose own tool reads the caller too.
fn agent(model: &ScriptedModel) -> Agent {
    let whoami = || {
        tool_fn("whoami", "who calls", any_object(), |_, ctx| async move {
            match ctx.extensions().get::<Principal>() {
                Some(p) => Ok::<_, BoxError>(p.name.clone()),
                None => Err("no principal".into()),
            }
        })
    };
    let hooks = Hooks::new()
        .before_tool_use("*", |_call, ctx| {
            match ctx.extensions().get::<Principal>() {
                Some(p) if p.admin => PreToolUse::Continue,
                Some(p) => PreToolUse::Deny(format!("{} is not an admin", p.name)),
                None => PreToolUse::Deny("nobody is calling".into()),
            }
        })
        .compile()
        .unwrap();
    let sub = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("whoami", json!({}))
                .otherwise(|req: &ModelRequest| {
                    Ok(tower_agent::model::ModelResponse::text(format!(
                        "sub saw {}",
                        last_tool_message(req).text()
                    )))
                })
                .per_run(),
        )
        .tool(whoami())
        .build();
    Agent::builder()
        .model(model.clone())
        .tool(whoami())
        .tool(sub.into_tool("sub", "a subagent"))
        .prepare(|req: &mut ModelRequest| {
            let name = req
                .ctx
                .extensions()
                .get::<Principal>()
                .map(|p| p.name.clone());
            req.append_system(&format!("caller: {}", name.unwrap_or_default()));
        })
        .hooks(hooks)
        .build()
}

#[tokio::test(flavor = "current_thread")]
async fn tools_hooks_stages_and_subagents_read_the_callers_extensions() {
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .tool_call("sub", json!({"prompt": "who?"}))
        .text("done")
        .recording();
    let agent = agent(&model);

    let resp = agent
        .run(AgentRequest::new("who am I?").extension(principal("ada", true)))
        .await
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    let requests = model.requests();
    assert_eq!(last_tool_message(&requests[1]).text(), "ada");
    assert_eq!(last_tool_message(&requests[2]).text(), "sub saw ada");
    let system = &requests[0].messages[0];
    assert_eq!(system.role, Role::System);
    assert!(system.text().contains("caller: ada"), "{system:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_hook_denies_by_the_callers_extensions() {
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .text("done")
        .recording();
    let agent = agent(&model);

    let mut request = AgentRequest::new("who am I?");
    request.extensions_mut().insert(principal("bob", false));
    assert_eq!(
        request.extensions().get::<Principal>(),
        Some(&principal("bob", false))
    );
    agent.run(request).await.unwrap();

    let requests = model.requests();
    assert_eq!(
        last_tool_message(&requests[1]).text(),
        "denied: bob is not an admin"
    );

    // No extension: nobody calls, the hook denies.
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .text("done")
        .recording();
    agent_run(&model, AgentRequest::new("who am I?")).await;
    assert_eq!(
        last_tool_message(&model.requests()[1]).text(),
        "denied: nobody is calling"
    );
}

async fn agent_run(model: &ScriptedModel, request: AgentRequest) {
    agent(model).run(request).await.unwrap();
}
