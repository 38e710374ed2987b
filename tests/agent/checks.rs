//! A tool's input check (`Tool::check`), through the public API only: a refused call fires
//! no hook; the hooks see the normalised input (and a check's `ObservableInput`); a hook's
//! rewrite is checked again; a layer of the user's own reaches the checks the same way.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_agent::{
    Agent, BoxError,
    context::RunContext,
    layers::hooks::{HookSet, Hooks, PostToolUse, PostToolUseFailure, PreToolUse},
    message::{ToolCall, ToolOutput, ToolSpec},
    model::ScriptedModel,
    tool::{Check, ObservableInput, Tool, ToolChecks, ToolRequest, ToolRouter},
};

type Seen = Arc<Mutex<Vec<String>>>;

/// Copies a file named by `path`: refuses an empty path (at once) and a path that starts with
/// `missing` (later, as a check that looks at the disk); fills in `mode`; shows the hooks the
/// path under `/project`.
struct Copy {
    ran: Seen,
    checked: Arc<AtomicUsize>,
}

impl Copy {
    fn new(ran: &Seen, checked: &Arc<AtomicUsize>) -> Self {
        Copy {
            ran: Arc::clone(ran),
            checked: Arc::clone(checked),
        }
    }
}

impl Tool for Copy {
    const CHECKS_INPUT: bool = true;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new("copy", "Copies a file", json!({ "type": "object" }))
    }

    fn check(&self, mut req: ToolRequest) -> Check {
        self.checked.fetch_add(1, Ordering::Relaxed);
        let path = req.call.arguments["path"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if path.is_empty() {
            return Check::Refuse(ToolOutput::error(
                req.call.id,
                "<tool_use_error>no path</tool_use_error>",
            ));
        }
        req.call.arguments["mode"] = req
            .call
            .arguments
            .get("mode")
            .cloned()
            .unwrap_or(json!("copy"));
        let mut seen = req.call.arguments.clone();
        seen["path"] = json!(format!("/project/{path}"));
        req.extensions.insert(ObservableInput(seen));
        Check::later(async move {
            tokio::task::yield_now().await;
            if path.starts_with("missing") {
                Err(ToolOutput::error(req.call.id, format!("no file {path}")))
            } else {
                Ok(req)
            }
        })
    }

    async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
        self.ran
            .lock()
            .unwrap()
            .push(req.call.arguments.to_string());
        Ok(ToolOutput::text(req.call.id, "copied"))
    }
}

fn hooks(seen: &Seen) -> HookSet {
    let (pre, post, failed) = (Arc::clone(seen), Arc::clone(seen), Arc::clone(seen));
    Hooks::new()
        .before_tool_use("*", move |call: Arc<ToolCall>, _ctx| {
            pre.lock().unwrap().push(format!("pre {}", call.arguments));
            if call.arguments["path"] == "/project/rewrite" {
                return PreToolUse::Rewrite(json!({ "path": "b" }));
            }
            PreToolUse::Continue
        })
        .after_tool_use("*", move |call: Arc<ToolCall>, _out, _ctx| {
            post.lock()
                .unwrap()
                .push(format!("post {}", call.arguments));
            PostToolUse::Keep
        })
        .on_tool_failure("*", move |call: Arc<ToolCall>, _failure, _ctx| {
            failed
                .lock()
                .unwrap()
                .push(format!("failure {}", call.arguments));
            PostToolUseFailure::Keep
        })
        .compile()
        .unwrap()
}

fn take(seen: &Seen) -> Vec<String> {
    std::mem::take(&mut *seen.lock().unwrap())
}

#[tokio::test]
async fn a_refused_call_fires_no_hook_and_hooks_see_the_checked_input() {
    let (seen, ran) = (Seen::default(), Seen::default());
    let checked = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_call("copy", json!({ "path": "" }))
        .tool_call("copy", json!({ "path": "missing.txt" }))
        .tool_call("copy", json!({ "path": "a" }))
        .tool_call("copy", json!({ "path": "rewrite" }))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(Copy::new(&ran, &checked))
        .hooks(hooks(&seen))
        .build();
    let resp = agent.run("copy them").await.unwrap();

    // The refusals are the calls' results; no hook saw those calls.
    let results: Vec<(String, bool)> = model.requests()[1..5]
        .iter()
        .map(|r| {
            let m = r.messages.last().unwrap();
            (m.text().into_owned(), m.is_error)
        })
        .collect();
    assert_eq!(
        results[0],
        ("<tool_use_error>no path</tool_use_error>".into(), true)
    );
    assert_eq!(results[1], ("no file missing.txt".into(), true));
    assert_eq!(results[2], ("copied".into(), false));
    assert_eq!(
        take(&seen),
        [
            // The hooks see the observable input (with the default filled in) …
            r#"pre {"mode":"copy","path":"/project/a"}"#,
            r#"post {"mode":"copy","path":"/project/a"}"#,
            r#"pre {"mode":"copy","path":"/project/rewrite"}"#,
            r#"post {"path":"b"}"#,
        ]
    );
    // … the tool gets its own normalised input, or a hook's rewrite, checked again.
    assert_eq!(
        *ran.lock().unwrap(),
        [
            r#"{"mode":"copy","path":"a"}"#,
            r#"{"mode":"copy","path":"b"}"#
        ]
    );
    // Once per call, and once more for the rewrite.
    assert_eq!(checked.load(Ordering::Relaxed), 5);
    assert_eq!(resp.messages.last().unwrap().text(), "done");
}

/// A layer of the user's own, written with the public API: it logs the input the tool will
/// run with, after the tool's check (and does nothing for a refused call).
#[derive(Clone)]
struct LogChecked<S> {
    inner: S,
    seen: Seen,
}

impl<S> Service<ToolRequest> for LogChecked<S>
where
    S: Service<ToolRequest, Response = ToolOutput, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<ToolOutput, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let inner = self.inner.clone();
        let seen = Arc::clone(&self.seen);
        let checks = req
            .extensions
            .get::<ToolChecks>()
            .cloned()
            .unwrap_or_default();
        Box::pin(async move {
            let req = match checks.check(req).resolve().await {
                Ok(req) => req,
                Err(refusal) => return Ok(refusal),
            };
            seen.lock()
                .unwrap()
                .push(format!("layer {}", req.call.arguments));
            inner.oneshot(req).await
        })
    }
}

#[tokio::test]
async fn a_users_layer_reaches_the_checks_in_the_agent_and_outside_it() {
    let (seen, ran) = (Seen::default(), Seen::default());
    let checked = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_call("copy", json!({ "path": "" }))
        .tool_call("copy", json!({ "path": "a" }))
        .text("done");
    let log = {
        let seen = Arc::clone(&seen);
        tower::layer::layer_fn(move |inner| LogChecked {
            inner,
            seen: Arc::clone(&seen),
        })
    };
    let agent = Agent::builder()
        .model(model)
        .tool(Copy::new(&ran, &checked))
        .tool_layer(log.clone())
        .build();
    agent.run("copy").await.unwrap();
    assert_eq!(take(&seen), [r#"layer {"mode":"copy","path":"a"}"#]);
    // Checked once a call: the tool does not check again.
    assert_eq!(*ran.lock().unwrap(), [r#"{"mode":"copy","path":"a"}"#]);
    assert_eq!(checked.swap(0, Ordering::Relaxed), 2);

    // Outside the agent: the router's checks as the outermost layer, the hook layer inside.
    let router = ToolRouter::new().tool(Copy::new(&ran, &checked));
    let hooks = hooks(&seen);
    let stack = ServiceBuilder::new()
        .layer(router.checks())
        .layer(hooks.tool_layer())
        .service(router.clone());
    let call = |args: Value| ToolRequest::new(ToolCall::new("c1", "copy", args), RunContext::new());
    let out = stack
        .clone()
        .oneshot(call(json!({ "path": "" })))
        .await
        .unwrap();
    assert!(out.is_error && out.call_id == "c1");
    let out = stack.oneshot(call(json!({ "path": "x" }))).await.unwrap();
    assert_eq!(out.content, "copied");
    assert_eq!(checked.load(Ordering::Relaxed), 2);
    assert_eq!(
        take(&seen),
        [
            r#"pre {"mode":"copy","path":"/project/x"}"#,
            r#"post {"mode":"copy","path":"/project/x"}"#,
        ]
    );
}

/// A user's tool layer sees how many calls its step makes (`ToolRequest::step_calls`, the
/// power the hook layer's `defer` rule uses): each call of a two-call answer says 2, a lone
/// call 1, a call started eagerly (before the answer is whole) `None`.
#[tokio::test]
async fn a_users_layer_sees_how_many_calls_the_step_makes() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = Arc::clone(&seen);
        tower::layer::layer_fn(move |inner: ToolRouter| {
            let seen = Arc::clone(&seen);
            tower::service_fn(move |req: ToolRequest| {
                seen.lock()
                    .unwrap()
                    .push((req.call.name.clone(), req.step_calls));
                inner.clone().oneshot(req)
            })
        })
    };
    let echo = tower_agent::tool::tool_fn(
        "echo",
        "Echo",
        json!({"type": "object"}),
        |a, _| async move { Ok::<_, BoxError>(a.to_string()) },
    );
    let model = || {
        ScriptedModel::new()
            .tool_calls([("echo", json!({"n": 1})), ("echo", json!({"n": 2}))])
            .tool_call("echo", json!({"n": 3}))
            .text("done")
    };
    let agent = Agent::builder()
        .model(model())
        .tool(echo.clone())
        .tool_layer(record.clone())
        .build();
    agent.run("go").await.unwrap();
    let echo_n = |n: Option<usize>| ("echo".to_owned(), n);
    assert_eq!(
        std::mem::take(&mut *seen.lock().unwrap()),
        [echo_n(Some(2)), echo_n(Some(2)), echo_n(Some(1))]
    );
    let eager = Agent::builder()
        .model(model().streaming(4))
        .tool(echo)
        .tool_layer(record)
        .eager_tools()
        .build();
    eager.run("go").await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![echo_n(None); 3]);
}
