//! The agent level composes like the model and tool levels: per-request data reaches the run,
//! and agent-level layers (a cache that answers by itself, prompt hooks) wrap the agent.

use crate::support;

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
        "PreToolUse:whoami hook error: bob is not an admin"
    );

    // No extension: nobody calls, the hook denies.
    let model = ScriptedModel::new()
        .tool_call("whoami", json!({}))
        .text("done")
        .recording();
    agent_run(&model, AgentRequest::new("who am I?")).await;
    assert_eq!(
        last_tool_message(&model.requests()[1]).text(),
        "PreToolUse:whoami hook error: nobody is calling"
    );
}

async fn agent_run(model: &ScriptedModel, request: AgentRequest) {
    agent(model).run(request).await.unwrap();
}

mod cache {
    //! An agent-level layer that answers by itself: a cache keyed by prompt.

    use std::{
        collections::HashMap,
        sync::{Arc, Mutex},
        task::{Context, Poll},
    };

    use futures_util::future::BoxFuture;
    use tower::{Layer, Service};
    use tower_agent::{
        AgentRequest, AgentResponse,
        agent::{AgentEvent, Outcome},
    };

    #[derive(Clone, Default)]
    pub(super) struct CacheLayer {
        answers: Arc<Mutex<HashMap<String, String>>>,
    }

    impl<S> Layer<S> for CacheLayer {
        type Service = Cache<S>;

        fn layer(&self, inner: S) -> Cache<S> {
            Cache {
                inner,
                answers: Arc::clone(&self.answers),
            }
        }
    }

    #[derive(Clone)]
    pub(super) struct Cache<S> {
        inner: S,
        answers: Arc<Mutex<HashMap<String, String>>>,
    }

    impl<S> Service<AgentRequest> for Cache<S>
    where
        S: Service<AgentRequest, Response = AgentResponse> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Send,
    {
        type Response = AgentResponse;
        type Error = S::Error;
        type Future = BoxFuture<'static, Result<AgentResponse, S::Error>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
            self.inner.poll_ready(cx)
        }

        fn call(&mut self, req: AgentRequest) -> Self::Future {
            let hit = self.answers.lock().unwrap().get(&req.prompt).cloned();
            if let Some(text) = hit {
                let thread = req.thread_id.clone().unwrap_or_else(|| "cached".into());
                let resp = AgentResponse::new(thread.clone(), Outcome::Finished)
                    .with_text(text.clone())
                    .with_messages(
                        vec![
                            tower_agent::message::Message::user(req.prompt.clone()),
                            tower_agent::message::Message::assistant(text.clone()),
                        ]
                        .into(),
                    );
                if let Some(tx) = &req.events {
                    let _ = tx.send(AgentEvent::AgentStart {
                        thread_id: thread,
                        run_id: resp.run_id.clone(),
                    });
                    let _ = tx.send(AgentEvent::AgentStop {
                        outcome: Outcome::Finished,
                        text,
                        steps: 0,
                        usage: resp.usage,
                    });
                }
                return Box::pin(async move { Ok(resp) });
            }
            let answers = Arc::clone(&self.answers);
            let prompt = req.prompt.clone();
            let fut = self.inner.call(req);
            Box::pin(async move {
                let resp = fut.await?;
                if resp.outcome.is_finished() {
                    answers.lock().unwrap().insert(prompt, resp.text.clone());
                }
                Ok(resp)
            })
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_level_layer_answers_by_itself() {
    use std::time::Duration;
    use tower::{ServiceBuilder, ServiceExt};
    use tower_agent::agent::AgentEvent;

    let model = ScriptedModel::new().text("42").recording();
    let agent = Agent::builder().model(model.clone()).build();
    let svc = ServiceBuilder::new()
        .layer(cache::CacheLayer::default())
        .timeout(Duration::from_secs(30))
        .service(agent);

    let first = svc
        .clone()
        .oneshot(AgentRequest::new("the answer?"))
        .await
        .unwrap();
    assert_eq!((first.text.as_str(), first.steps), ("42", 1));
    assert_eq!(model.requests().len(), 1);

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let second = svc
        .clone()
        .oneshot(AgentRequest::new("the answer?").events(tx))
        .await
        .unwrap();
    assert_eq!(second.outcome, Outcome::Finished);
    assert_eq!((second.text.as_str(), second.steps), ("42", 0));
    assert_eq!(second.messages.len(), 2);
    assert_eq!(
        model.requests().len(),
        1,
        "the cache answered, not the model"
    );
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert!(matches!(events[0], AgentEvent::AgentStart { .. }));
    assert!(matches!(events[1], AgentEvent::AgentStop { steps: 0, .. }));

    // Another prompt goes through to the agent.
    let third = svc.oneshot(AgentRequest::new("other")).await.unwrap();
    assert_eq!(third.steps, 1);
    assert_eq!(model.requests().len(), 2);
}

/// SessionStart and UserPromptSubmit hooks as a tower layer on the agent: contexts reach the
/// model request, a rewrite replaces the prompt, a block answers without calling the agent.
#[tokio::test(flavor = "current_thread")]
async fn prompt_hooks_as_a_layer_on_the_agent() {
    use std::time::Duration;
    use tower::{ServiceBuilder, ServiceExt};
    use tower_agent::{
        agent::AgentEvent,
        layers::hooks::{SessionStart, UserPrompt},
    };

    let prompts = Hooks::new()
        .on_session_start(|ctx| {
            let who = ctx
                .extensions()
                .get::<Principal>()
                .map(|p| p.name.clone())
                .unwrap_or_default();
            SessionStart::AddContext(format!("session of {who}"))
        })
        .on_user_prompt(|prompt, _ctx| {
            if prompt.contains("password") {
                UserPrompt::Block("no secrets".into())
            } else if prompt.contains("hi") {
                UserPrompt::Rewrite(prompt.replace("hi", "hello"))
            } else {
                UserPrompt::AddContext("be brief".into())
            }
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new().text("ok").per_run().recording();
    let agent = Agent::builder()
        .model(model.clone())
        .system_prompt("base")
        .hooks(prompts)
        .build();
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(30))
        .service(agent);

    let resp = svc
        .clone()
        .oneshot(AgentRequest::new("hi there").extension(principal("ada", true)))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let req = &model.requests()[0];
    // SessionStart's context follows the prompt (a hook context: a system message), as in
    // Claude Code; the system prompt is the agent's.
    assert_eq!(req.messages[0].text(), "base");
    assert_eq!(req.messages[1].text(), "hello there");
    assert_eq!(req.messages[2].role, Role::System);
    assert_eq!(req.messages[2].text(), "session of ada");

    let resp = svc
        .clone()
        .oneshot(AgentRequest::new("what now?"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let req = &model.requests()[1];
    assert_eq!(req.messages[1].text(), "what now?");
    assert_eq!(req.messages[2].role, Role::System);
    assert_eq!(req.messages[2].text(), "session of \n\nbe brief");

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let resp = svc
        .oneshot(
            AgentRequest::new("my password is x")
                .thread("t-9")
                .events(tx),
        )
        .await
        .unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "no secrets".into()
        }
    );
    assert_eq!(resp.thread_id, "t-9");
    assert_eq!(model.requests().len(), 2, "the agent was not called");
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    assert!(
        matches!(events[0], AgentEvent::AgentStart { .. }),
        "{events:?}"
    );
    assert!(
        matches!(
            &events[1],
            AgentEvent::AgentStop {
                outcome: Outcome::Blocked { .. },
                ..
            }
        ),
        "{events:?}"
    );
}

/// Hooks written by hand (no callback registry): a step layer that sends the agent back to
/// work once (per-run data of its own instance), and a model layer counting the steps;
/// `stream()` sees the run they shape.
#[tokio::test(flavor = "current_thread")]
async fn a_hand_written_step_layer_shapes_the_run() {
    use std::sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    };

    use futures_util::StreamExt;
    use tower::layer::layer_fn;
    use tower_agent::{
        BoxError,
        agent::{
            AgentEvent,
            step::{BoxStepService, StepControl, StepEnd},
        },
        context::InstanceId,
    };

    /// Sends the agent back to work once per run.
    #[derive(Clone)]
    struct OneMore {
        inner: BoxStepService,
        id: InstanceId,
    }

    /// The per-run flag of one `OneMore` layer.
    #[derive(Default)]
    struct Resumed(bool);

    impl tower::Service<StepEnd> for OneMore {
        type Response = StepControl;
        type Error = BoxError;
        type Future = <BoxStepService as tower::Service<StepEnd>>::Future;

        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), BoxError>> {
            self.inner.poll_ready(cx)
        }

        fn call(&mut self, end: StepEnd) -> Self::Future {
            let first = end.is_final()
                && end.ctx.with_data(|data| {
                    !std::mem::replace(&mut data.get_or_default_for::<Resumed>(self.id).0, true)
                });
            if first {
                let feedback = format!("check '{}'", end.message.text());
                return Box::pin(async move { Ok(StepControl::resume(feedback)) });
            }
            self.inner.call(end)
        }
    }

    let id = InstanceId::new();
    let steps = Arc::new(AtomicU32::new(0));
    let model = ScriptedModel::new().text("draft").text("final").recording();
    let counted = Arc::clone(&steps);
    let agent = Agent::builder()
        .model(
            tower::ServiceBuilder::new()
                .map_request(move |req| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    req
                })
                .service(model.clone()),
        )
        .step_layer(layer_fn(move |inner| OneMore { inner, id }))
        .build();

    let events: Vec<AgentEvent> = agent.stream("write it").collect().await;

    match events.last() {
        Some(AgentEvent::AgentStop {
            outcome,
            text,
            steps,
            ..
        }) => {
            assert_eq!(*outcome, Outcome::Finished);
            assert_eq!(text, "final");
            assert_eq!(*steps, 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(steps.load(Ordering::SeqCst), 2);
    assert_eq!(
        model.requests()[1].messages.last().unwrap().text(),
        "check 'draft'"
    );
}

/// The prompt-hook layer of the start stack over a `ConcurrencyLimit(1)`: readying the hook
/// layer readies the limit (takes its one permit); the call, made after the hooks ran, must
/// not wait for that permit.
#[tokio::test(flavor = "current_thread")]
async fn the_prompt_hook_layer_over_a_concurrency_limit_of_one_answers() {
    use tower::{Service, ServiceExt};
    use tower_agent::layers::hooks::UserPrompt;

    let prompts = Hooks::new()
        .on_user_prompt(|_prompt, _ctx| async { UserPrompt::AddContext("noted".into()) })
        .compile()
        .unwrap();
    let mut svc = Agent::builder()
        .model(ScriptedModel::new().text("ok").per_run())
        .hooks(prompts)
        .start_layer(tower::limit::ConcurrencyLimitLayer::new(1))
        .build();

    for i in 0..3 {
        let call = async {
            let ready = svc.ready().await.unwrap();
            ready.call(AgentRequest::new(format!("run {i}"))).await
        };
        let resp = crate::support::within("the call", call).await.unwrap();
        assert_eq!(resp.outcome, Outcome::Finished);
    }
}
