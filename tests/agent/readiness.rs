//! Readiness discipline of every layer of the crate, with `tower-test` mocks and real
//! `ConcurrencyLimit`s:
//!
//! - readiness is passed through: the layer is not ready while its inner service is not, is
//!   woken and ready when it is, and a `poll_ready` error comes out of the layer;
//! - no call without readiness: `tower-test`'s `Mock` panics when called unready, and a call
//!   a layer makes later (after awaiting hooks or a summarizer) waits until the inner service
//!   is ready *then*;
//! - no readied service is held across an await: a summarizer, a hook or another caller that
//!   shares the inner service's `ConcurrencyLimit(1)` gets the permit (a deadlock fails the
//!   test through a timeout instead of hanging it).

use std::{future::Future, os::unix::fs::PermissionsExt, task::Poll, time::Duration};

use crate::limit::{CallLimitsLayer, OnLimit};
use serde_json::{Value, json};
use tower::{
    Layer, Service, ServiceBuilder, ServiceExt, limit::ConcurrencyLimitLayer, timeout::TimeoutLayer,
};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    command::CommandHooks,
    context::RunContext,
    layers::{
        evict::EvictLayer,
        hooks::{BeforeModel, HookSet, Hooks, PostToolUse, PreToolUse},
        ledger::{JsonlLedger, LedgerLayer},
        matcher::when,
        reminders::RemindersLayer,
        schema::SchemaGuardLayer,
        summarize::SummarizeLayer,
        trace::TraceLayer,
    },
    message::{Message, ToolCall, ToolOutput, ToolSpec},
    model::{ModelRequest, ModelResponse, ScriptedModel},
    store::{MemoryStore, Thread, ThreadStore},
    tool::{ToolRequest, ToolRouter, tool_fn},
};
use tower_test::mock::{self, Mock};

// ===== helpers =====

/// How long a step may take before the test calls it a hang (generous: on tokio's real clock,
/// a machine busy compiling is slow; under paused time a hang fails at once).
const PATIENCE: Duration = crate::support::PATIENCE;

/// Awaits `fut`, failing the test if it hangs.
async fn deadline<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: timed out (a deadlock?)"))
}

fn model_req() -> ModelRequest {
    ModelRequest::new(vec![Message::user("hello")])
}

/// A request over the threshold of `SummarizeLayer::context_window(1_000)`.
fn long_model_req() -> ModelRequest {
    let mut messages = vec![Message::system("You are kind.")];
    for i in 0..20 {
        messages.push(Message::user(format!(
            "message {i}: {}",
            "blah ".repeat(40)
        )));
    }
    ModelRequest::new(messages)
}

fn tool_req(name: &str, args: Value) -> ToolRequest {
    ToolRequest::new(ToolCall::new("c1", name, args), RunContext::new())
}

fn is_summary_request(req: &ModelRequest) -> bool {
    req.system()
        .is_some_and(|m| m.text().starts_with("You compact the history"))
}

/// Checks that `layer` passes its inner mock's readiness through, calls it only when ready,
/// and gives back the inner response; returns the request the mock saw.
async fn passes_readiness<L, Req, Resp>(what: &str, layer: L, req: Req, resp: Resp) -> Req
where
    L: Layer<Mock<Req, Resp>>,
    L::Service: Service<Req, Response = Resp>,
    <L::Service as Service<Req>>::Error: std::fmt::Debug + Send + 'static,
    <L::Service as Service<Req>>::Future: Send + 'static,
    Resp: Send + 'static,
    Req: Send + 'static,
{
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(layer);
    handle.allow(0);
    assert!(
        svc.poll_ready().is_pending(),
        "{what}: ready while the inner service is not"
    );
    handle.allow(1);
    assert!(
        svc.is_woken(),
        "{what}: not woken when the inner service got ready"
    );
    assert!(
        matches!(svc.poll_ready(), Poll::Ready(Ok(()))),
        "{what}: not ready when the inner service is"
    );
    let fut = tokio::spawn(svc.call(req));
    let (seen, send) = deadline(what, handle.next_request())
        .await
        .unwrap_or_else(|| panic!("{what}: the inner service was not called"));
    send.send_response(resp);
    let out = deadline(what, fut).await.unwrap();
    out.unwrap_or_else(|e| panic!("{what}: {e:?}"));
    seen
}

/// Checks that a `poll_ready` error of the inner mock comes out of `layer`'s `poll_ready`.
fn passes_ready_error<L, Req, Resp>(what: &str, layer: L)
where
    L: Layer<Mock<Req, Resp>>,
    L::Service: Service<Req>,
    <L::Service as Service<Req>>::Error: std::fmt::Display,
{
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(layer);
    handle.send_error("transport down");
    match svc.poll_ready() {
        Poll::Ready(Err(e)) => assert!(e.to_string().contains("transport down"), "{what}: {e}"),
        Poll::Ready(Ok(())) => panic!("{what}: ready although the inner service failed"),
        Poll::Pending => panic!("{what}: pending although the inner service failed"),
    }
}

/// Checks that `layer` answers `req` itself without calling the inner mock (which would
/// panic unready, or show up in the handle).
async fn answers_without_calling<L, Req, Resp>(
    what: &str,
    layer: L,
    req: Req,
) -> Result<<L::Service as Service<Req>>::Response, <L::Service as Service<Req>>::Error>
where
    L: Layer<Mock<Req, Resp>>,
    L::Service: Service<Req>,
    <L::Service as Service<Req>>::Future: Send + 'static,
    <L::Service as Service<Req>>::Response: Send + 'static,
    <L::Service as Service<Req>>::Error: Send + 'static,
    Req: Send + 'static,
    Resp: Send + 'static,
{
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(layer);
    handle.allow(1);
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))), "{what}");
    let out = deadline(what, svc.call(req)).await;
    assert!(
        matches!(handle.poll_request(), Poll::Pending),
        "{what}: the inner service was called"
    );
    out
}

/// Checks that a call `layer` makes after an await (hooks, a summarizer) readies the inner
/// service *then*: readiness taken away right after the layer's `call` holds the inner call
/// back until it is given again.
async fn defers_until_ready<L, Req, Resp>(what: &str, layer: L, req: Req, resp: Resp) -> Req
where
    L: Layer<Mock<Req, Resp>>,
    L::Service: Service<Req, Response = Resp>,
    <L::Service as Service<Req>>::Error: std::fmt::Debug + Send + 'static,
    <L::Service as Service<Req>>::Future: Send + 'static,
    Resp: Send + 'static,
    Req: Send + 'static,
{
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(layer);
    handle.allow(1);
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))), "{what}");
    // NOTE: the current-thread runtime runs the task only at the next await, after `allow(0)`.
    let fut = tokio::spawn(svc.call(req));
    handle.allow(0);
    let early = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
    assert!(
        early.is_err(),
        "{what}: the inner service was called while it was not ready"
    );
    handle.allow(1);
    let (seen, send) = deadline(what, handle.next_request()).await.unwrap();
    send.send_response(resp);
    deadline(what, fut)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    seen
}

fn hook_set<S>(hooks: Hooks<S>) -> HookSet {
    hooks.compile().unwrap()
}

// ===== readiness passed through, no call without readiness: every layer =====

#[tokio::test]
async fn summarize_passes_readiness() {
    let summarizer = || ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("SUMMARY")));
    let layer = || SummarizeLayer::new(summarizer()).context_window(1_000);
    passes_ready_error::<_, ModelRequest, ModelResponse>("summarize", layer());
    passes_readiness(
        "summarize, short",
        layer(),
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    let seen = passes_readiness(
        "summarize, compacting",
        layer(),
        long_model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    assert!(seen.messages[1].text().contains("SUMMARY"), "compacted");
}

#[tokio::test]
async fn summarize_readies_the_inner_service_after_the_summary() {
    let summarizer = ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("SUMMARY")));
    let seen = defers_until_ready(
        "summarize, compacting",
        SummarizeLayer::new(summarizer).context_window(1_000),
        long_model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    assert!(seen.messages[1].text().contains("SUMMARY"));
}

#[tokio::test]
async fn model_hooks_pass_readiness() {
    let none = || hook_set(Hooks::new()).model_layer();
    let after = || {
        hook_set(Hooks::new().after_model(|mut r: ModelResponse, _| {
            r.message = Message::assistant(format!("{} (checked)", r.message.text()));
            r
        }))
        .model_layer()
    };
    let before = || {
        hook_set(Hooks::new().before_model(|mut r: ModelRequest| async move {
            tokio::task::yield_now().await;
            r.messages.push(Message::user("from the hook"));
            BeforeModel::Continue(r)
        }))
        .model_layer()
    };
    passes_ready_error::<_, ModelRequest, ModelResponse>("model hooks", before());
    passes_readiness(
        "no model hooks",
        none(),
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    passes_readiness(
        "after_model",
        after(),
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    let seen = passes_readiness(
        "before_model",
        before(),
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    assert_eq!(seen.messages.last().unwrap().text(), "from the hook");

    let answers = hook_set(
        Hooks::new().before_model(|_| BeforeModel::Respond(ModelResponse::text("cached"))),
    )
    .model_layer();
    let resp = answers_without_calling::<_, ModelRequest, ModelResponse>(
        "before_model answers",
        answers,
        model_req(),
    )
    .await
    .unwrap();
    assert_eq!(resp.message.text(), "cached");
}

#[tokio::test]
async fn model_hooks_ready_the_inner_service_after_the_hooks() {
    let layer = hook_set(Hooks::new().before_model(|r: ModelRequest| async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        BeforeModel::Continue(r)
    }))
    .model_layer();
    defers_until_ready(
        "before_model",
        layer,
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
}

fn ok_output() -> ToolOutput {
    ToolOutput::text("c1", "ran")
}

#[tokio::test]
async fn tool_hooks_pass_readiness() {
    let none = || hook_set(Hooks::new()).tool_layer();
    let post = || {
        hook_set(
            Hooks::new()
                .after_tool_use("bash", |_, _, _| PostToolUse::AddContext("checked".into())),
        )
        .tool_layer()
    };
    let pre = || {
        hook_set(Hooks::new().before_tool_use("bash", |_, _| async {
            tokio::task::yield_now().await;
            PreToolUse::Rewrite(json!({"command": "ls -l"}))
        }))
        .tool_layer()
    };
    passes_ready_error::<_, ToolRequest, ToolOutput>("tool hooks", pre());
    let req = || tool_req("bash", json!({"command": "ls"}));
    passes_readiness("no tool hooks", none(), req(), ok_output()).await;
    passes_readiness("after_tool_use", post(), req(), ok_output()).await;
    let seen = passes_readiness("before_tool_use", pre(), req(), ok_output()).await;
    assert_eq!(seen.call.arguments, json!({"command": "ls -l"}));
    // A hook that matches another tool changes nothing.
    passes_readiness(
        "hooks of another tool",
        pre(),
        tool_req("read", json!({})),
        ok_output(),
    )
    .await;

    let deny = hook_set(Hooks::new().before_tool_use("bash", |_, _| PreToolUse::Deny("no".into())))
        .tool_layer();
    let out = answers_without_calling::<_, ToolRequest, ToolOutput>("denied", deny, req())
        .await
        .unwrap();
    assert!(
        out.is_error && out.content.contains("PreToolUse:bash hook error: no"),
        "{out:?}"
    );
}

#[tokio::test]
async fn tool_hooks_ready_the_inner_service_after_the_hooks() {
    let layer = hook_set(Hooks::new().before_tool_use("*", |_, _| async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        PreToolUse::Continue
    }))
    .tool_layer();
    defers_until_ready(
        "before_tool_use",
        layer,
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
}

#[tokio::test]
async fn evict_reminders_ledger_pass_readiness() {
    passes_ready_error::<_, ToolRequest, ToolOutput>("evict", EvictLayer::new());
    let seen = passes_readiness(
        "evict",
        EvictLayer::new(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
    assert_eq!(seen.call.name, "bash");

    let reminders = || RemindersLayer::with_defaults().trigger(|_, _| Some("remember".into()));
    passes_ready_error::<_, ToolRequest, ToolOutput>("reminders", reminders());
    passes_readiness(
        "reminders",
        reminders(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let ledger = LedgerLayer::new(JsonlLedger::new(dir.path().join("calls.jsonl")));
    passes_ready_error::<_, ToolRequest, ToolOutput>("ledger", ledger.clone());
    passes_readiness(
        "ledger",
        ledger.clone(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
    ledger.flush().await;
    let text = std::fs::read_to_string(dir.path().join("calls.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 1, "one call, one entry: {text}");
}

#[tokio::test]
async fn call_limits_pass_readiness() {
    let limits = CallLimitsLayer::new()
        .max_model_calls(1)
        .max_calls_of("bash", 1)
        .on_limit(OnLimit::Deny);
    passes_ready_error::<_, ModelRequest, ModelResponse>("limits, model", limits.clone());
    passes_ready_error::<_, ToolRequest, ToolOutput>("limits, tool", limits.clone());

    // The counts live in the run context: both calls share one.
    let ctx = RunContext::new();
    let model = || ModelRequest {
        ctx: ctx.clone(),
        ..model_req()
    };
    let tool = || ToolRequest::new(ToolCall::new("c1", "bash", json!({})), ctx.clone());
    passes_readiness(
        "limits, model",
        limits.clone(),
        model(),
        ModelResponse::text("ok"),
    )
    .await;
    passes_readiness("limits, tool", limits.clone(), tool(), ok_output()).await;

    let err = answers_without_calling::<_, ModelRequest, ModelResponse>(
        "limits, model over",
        limits.clone(),
        model(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    let out =
        answers_without_calling::<_, ToolRequest, ToolOutput>("limits, tool over", limits, tool())
            .await
            .unwrap();
    assert!(out.is_error, "{out:?}");
}

#[tokio::test]
async fn schema_guard_passes_readiness() {
    let guard = || {
        SchemaGuardLayer::new([ToolSpec::new(
            "search",
            "Searches",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        )])
    };
    passes_ready_error::<_, ToolRequest, ToolOutput>("schema", guard());
    passes_readiness(
        "schema, valid",
        guard(),
        tool_req("search", json!({"query": "tower"})),
        ok_output(),
    )
    .await;
    passes_readiness(
        "schema, unknown tool",
        guard(),
        tool_req("other", json!(1)),
        ok_output(),
    )
    .await;
    let out = answers_without_calling::<_, ToolRequest, ToolOutput>(
        "schema, invalid",
        guard(),
        tool_req("search", json!({"limit": 3})),
    )
    .await
    .unwrap();
    assert!(
        out.is_error && out.content.contains("invalid arguments"),
        "{out:?}"
    );
}

#[tokio::test]
async fn trace_passes_readiness() {
    passes_ready_error::<_, ModelRequest, ModelResponse>("trace, model", TraceLayer::new());
    passes_ready_error::<_, ToolRequest, ToolOutput>("trace, tool", TraceLayer::new());
    passes_readiness(
        "trace, model",
        TraceLayer::new(),
        model_req(),
        ModelResponse::text("ok"),
    )
    .await;
    passes_readiness(
        "trace, tool",
        TraceLayer::new(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
}

/// `When` is always ready (its docs: it drives the chosen branch with `oneshot`, like the
/// tool router), so a busy branch never blocks the other; the chosen branch is still only
/// called once it is ready.
#[tokio::test]
async fn when_drives_the_chosen_branch_only_when_ready() {
    for name in ["bash", "read"] {
        let layer = when("bash", TimeoutLayer::new(Duration::from_secs(30)));
        let (mut svc, mut handle) = mock::spawn_layer::<ToolRequest, ToolOutput, _>(layer);
        handle.allow(0);
        assert!(
            matches!(svc.poll_ready(), Poll::Ready(Ok(()))),
            "{name}: always ready"
        );
        let fut = tokio::spawn(svc.call(tool_req(name, json!({}))));
        let early = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
        assert!(early.is_err(), "{name}: called while not ready");
        handle.allow(1);
        let (seen, send) = deadline(name, handle.next_request()).await.unwrap();
        assert_eq!(seen.call.name, name);
        send.send_response(ok_output());
        let out = deadline(name, fut).await.unwrap().unwrap();
        assert_eq!(out.content, "ran");
    }
}

// ===== nothing readied is held across an await: a shared ConcurrencyLimit(1) =====

/// A scripted model behind one `ConcurrencyLimit(1)`; clones share the permit. It answers
/// summary requests with `SUMMARY` and the rest with `done`.
fn limited_model() -> tower::limit::ConcurrencyLimit<ScriptedModel> {
    let model = ScriptedModel::from_fn(|req| {
        Ok(ModelResponse::text(if is_summary_request(req) {
            "SUMMARY"
        } else {
            "done"
        }))
    })
    .recording();
    ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(1))
        .service(model)
}

#[tokio::test(start_paused = true)]
async fn summarizer_sharing_a_concurrency_limit_of_one_finishes() {
    let shared = limited_model();
    let mut model = ServiceBuilder::new()
        .layer(SummarizeLayer::new(shared.clone()).context_window(1_000))
        .service(shared.clone());
    let resp = deadline("the compacted call", async {
        model.ready().await?.call(long_model_req()).await
    })
    .await
    .unwrap();
    assert_eq!(resp.message.text(), "done");
    let requests = shared.get_ref().requests();
    assert_eq!(requests.len(), 2, "the summary, then the call");
    assert!(is_summary_request(&requests[0]));
    assert!(requests[1].messages[1].text().contains("SUMMARY"));
}

#[tokio::test(start_paused = true)]
async fn agent_with_a_summarizer_sharing_a_concurrency_limit_of_one_finishes() {
    let store = MemoryStore::new();
    let mut thread = Thread::new("t");
    thread.messages.push(Message::system("You are kind."));
    for i in 0..40 {
        let text = format!("message {i}: {}", "lorem ipsum ".repeat(30));
        thread.messages.push(if i % 2 == 0 {
            Message::user(text)
        } else {
            Message::assistant(text)
        });
    }
    store.save(&thread).await.unwrap();

    let shared = limited_model();
    let agent = Agent::builder()
        .model(
            ServiceBuilder::new()
                .layer(SummarizeLayer::new(shared.clone()).context_window(2_000))
                .service(shared.clone()),
        )
        .store(store.clone())
        .build();
    let resp = deadline(
        "the agent run",
        agent.run(AgentRequest::new("go on").thread("t")),
    )
    .await
    .unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let requests = shared.get_ref().requests();
    assert!(is_summary_request(&requests[0]), "summarized first");
    assert_eq!(resp.messages.last().unwrap().text(), "done");
}

#[tokio::test(start_paused = true)]
async fn before_model_hook_sharing_a_concurrency_limit_of_one_finishes() {
    let shared = limited_model();
    let classifier = shared.clone();
    let hooks = hook_set(Hooks::new().before_model(move |req: ModelRequest| {
        // A hook that asks a model (as Claude Code's prompt hooks do), through the same
        // limited service.
        let classifier = classifier.clone();
        async move {
            match classifier
                .oneshot(ModelRequest::new(vec![Message::user("safe?")]))
                .await
            {
                Ok(_) => BeforeModel::Continue(req),
                Err(e) => BeforeModel::Respond(ModelResponse::text(format!("failed: {e}"))),
            }
        }
    }));
    let mut model = ServiceBuilder::new()
        .layer(hooks.model_layer())
        .service(shared.clone());
    let resp = deadline("the hooked call", async {
        model.ready().await?.call(model_req()).await
    })
    .await
    .unwrap();
    assert_eq!(resp.message.text(), "done");
    assert_eq!(
        shared.get_ref().calls(),
        2,
        "the hook's call, then the model's"
    );
}

fn echo_router() -> ToolRouter {
    ToolRouter::new()
        .tool(tool_fn(
            "gate",
            "Waits for a hook",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, BoxError>("gate ran") },
        ))
        .tool(tool_fn(
            "probe",
            "Answers",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, BoxError>("probe ran") },
        ))
}

#[tokio::test(start_paused = true)]
async fn pre_tool_hook_sharing_a_concurrency_limit_of_one_finishes() {
    let shared = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(1))
        .service(echo_router());
    let probe = shared.clone();
    let hooks = hook_set(Hooks::new().before_tool_use("gate", move |_, ctx| {
        let probe = probe.clone();
        async move {
            let req = ToolRequest::new(ToolCall::new("p", "probe", json!({})), ctx);
            match probe.oneshot(req).await {
                Ok(out) if out.content == "probe ran" => PreToolUse::Continue,
                other => PreToolUse::Deny(format!("probe: {other:?}")),
            }
        }
    }));
    let mut tools = ServiceBuilder::new()
        .layer(hooks.tool_layer())
        .service(shared);
    let out = deadline("the hooked call", async {
        tools.ready().await?.call(tool_req("gate", json!({}))).await
    })
    .await
    .unwrap();
    assert_eq!(out.content, "gate ran");
}

/// A real PreToolUse command hook (a child process) that waits for a file: while it runs,
/// another caller of the same `ConcurrencyLimit(1)` tool service gets through.
#[tokio::test]
async fn command_hook_does_not_hold_the_permit_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let started = dir.path().join("started");
    let script = dir.path().join("wait.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\ntouch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done\nexit 0\n",
            started.display(),
            go.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({"hooks": {"PreToolUse": [{"matcher": "gate", "hooks": [
                {"type": "command", "command": script.to_string_lossy(), "timeout": 600}
            ]}]}}),
            "settings.json",
        )
        .project_dir(dir.path())
        .build()
        .unwrap();
    let set = hooks.into_hooks().compile().unwrap();

    let shared = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(1))
        .service(echo_router());
    let mut gated = ServiceBuilder::new()
        .layer(set.tool_layer())
        .service(shared.clone());
    let gate = tokio::spawn(
        gated
            .ready()
            .await
            .unwrap()
            .call(tool_req("gate", json!({}))),
    );
    deadline("the hook process starting", async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    // The hook is running (and runs until `go` exists, or for five minutes); another caller
    // of the same limited service must get through.
    let other = tokio::time::timeout(
        PATIENCE,
        shared.clone().oneshot(tool_req("probe", json!({}))),
    )
    .await;
    std::fs::write(&go, "").unwrap();
    let other = other.expect("another caller was blocked while the hook ran");
    assert_eq!(other.unwrap().content, "probe ran");

    let out = deadline("the gated call", gate).await.unwrap().unwrap();
    assert_eq!(out.content, "gate ran");
}

/// Every layer above, stacked on a tool service behind a `ConcurrencyLimit(1)` shared with
/// a PreToolUse hook: the whole stack finishes.
#[tokio::test(start_paused = true)]
async fn full_tool_stack_sharing_a_concurrency_limit_of_one_finishes() {
    let shared = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(1))
        .service(echo_router());
    let probe = shared.clone();
    let hooks = hook_set(Hooks::new().before_tool_use("*", move |_, ctx| {
        let probe = probe.clone();
        async move {
            let req = ToolRequest::new(ToolCall::new("p", "probe", json!({})), ctx);
            match probe.oneshot(req).await {
                Ok(_) => PreToolUse::Continue,
                Err(e) => PreToolUse::Deny(e.to_string()),
            }
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let mut tools = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .layer(LedgerLayer::new(JsonlLedger::new(
            dir.path().join("l.jsonl"),
        )))
        .layer(CallLimitsLayer::new().max_tool_calls(10))
        .layer(SchemaGuardLayer::new([ToolSpec::new(
            "gate",
            "g",
            json!({"type": "object"}),
        )]))
        .layer(when("gate", TimeoutLayer::new(Duration::from_secs(30))))
        .layer(RemindersLayer::with_defaults())
        .layer(EvictLayer::new())
        .layer(hooks.tool_layer())
        .service(shared);
    let out = deadline("the stacked call", async {
        tools.ready().await?.call(tool_req("gate", json!({}))).await
    })
    .await
    .unwrap();
    assert_eq!(out.content, "gate ran");
}

/// A call a layer refuses (over a limit, invalid arguments) gives back what `poll_ready`
/// reserved: while the refusing service is kept, another caller of the same
/// `ConcurrencyLimit(1)` gets through.
#[tokio::test(start_paused = true)]
async fn a_refused_call_gives_back_its_reservation() {
    let shared = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::new(1))
        .service(echo_router());
    let other_gets_through = |what: &'static str| {
        let shared = shared.clone();
        async move {
            let out = tokio::time::timeout(
                Duration::from_secs(5),
                shared.oneshot(tool_req("probe", json!({}))),
            )
            .await
            .unwrap_or_else(|_| panic!("{what}: the refused call kept the permit"))
            .unwrap();
            assert_eq!(out.content, "probe ran");
        }
    };

    let mut guard = SchemaGuardLayer::new([ToolSpec::new(
        "gate",
        "g",
        json!({"type": "object", "required": ["x"]}),
    )])
    .layer(shared.clone());
    let out = guard
        .ready()
        .await
        .unwrap()
        .call(tool_req("gate", json!({})))
        .await
        .unwrap();
    assert!(out.is_error, "{out:?}");
    other_gets_through("schema").await;

    for on_limit in [OnLimit::Deny, OnLimit::EndRun] {
        let mut limits = CallLimitsLayer::new()
            .max_tool_calls(0)
            .on_limit(on_limit)
            .layer(shared.clone());
        let refused = limits
            .ready()
            .await
            .unwrap()
            .call(tool_req("gate", json!({})))
            .await;
        assert!(refused.is_err() || refused.unwrap().is_error);
        other_gets_through("limits, tool").await;
    }

    let model = limited_model();
    let mut limits = CallLimitsLayer::new()
        .max_model_calls(0)
        .layer(model.clone());
    let refused = limits.ready().await.unwrap().call(model_req()).await;
    assert!(refused.is_err());
    let resp = tokio::time::timeout(Duration::from_secs(5), model.oneshot(model_req()))
        .await
        .expect("limits, model: the refused call kept the permit")
        .unwrap();
    assert_eq!(resp.message.text(), "done");
}

/// Command hooks (real child processes) are tool hooks: the same readiness through a mock.
#[tokio::test]
async fn command_hooks_pass_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("allow.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >/dev/null\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let layer = || {
        CommandHooks::builder()
            .settings_json(
                json!({"hooks": {
                    "PreToolUse": [{"matcher": "bash", "hooks": [
                        {"type": "command", "command": script.to_string_lossy()}
                    ]}],
                    "PostToolUse": [{"matcher": "bash", "hooks": [
                        {"type": "command", "command": script.to_string_lossy()}
                    ]}]
                }}),
                "settings.json",
            )
            .project_dir(dir.path())
            .build()
            .unwrap()
            .into_hooks()
            .compile()
            .unwrap()
            .tool_layer()
    };
    passes_ready_error::<_, ToolRequest, ToolOutput>("command hooks", layer());
    passes_readiness(
        "command hooks",
        layer(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
    defers_until_ready(
        "command hooks",
        layer(),
        tool_req("bash", json!({})),
        ok_output(),
    )
    .await;
}
