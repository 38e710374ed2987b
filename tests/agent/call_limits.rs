//! The unit tests of the call-limits layer (`tests/support/call_limits.rs`) (a layer written outside
//! the crate).

use crate::limit::*;
use serde_json::json;
use tower::ServiceExt;
use tower::{Layer, Service};
use tower_agent::message::ToolCall;
use tower_agent::{
    BoxError,
    context::RunContext,
    error::Abort,
    message::ToolOutput,
    model::{ModelRequest, ModelResponse},
    tool::ToolRequest,
};

fn echo() -> impl Service<ToolRequest, Response = ToolOutput, Error = BoxError> + Clone {
    tower::service_fn(|req: ToolRequest| async move {
        Ok::<_, BoxError>(ToolOutput::text(req.call.id, "ok"))
    })
}

#[tokio::test]
async fn total_and_per_tool_limits_count_only_calls_that_ran() {
    let layer = CallLimitsLayer::new()
        .max_tool_calls(3)
        .max_calls_of("a", 1);
    let svc = layer.layer(echo());
    let ctx = RunContext::new();
    let call = |name: &str| ToolRequest::new(ToolCall::new("1", name, json!({})), ctx.clone());
    let mut outs = Vec::new();
    for name in ["a", "a", "b", "b", "b"] {
        outs.push(svc.clone().oneshot(call(name)).await.unwrap());
    }
    let errors: Vec<bool> = outs.iter().map(|o| o.is_error).collect();
    assert_eq!(errors, [false, true, false, false, true]);
    assert!(
        outs[1]
            .content
            .contains("`a` may be called at most 1 times")
    );
    assert!(outs[4].content.contains("at most 3 tool calls per run"));
    let counts = layer.counts(&ctx);
    assert_eq!(
        (counts.tool_calls, counts.tool("a"), counts.tool("b")),
        (3, 1, 0),
        "per tool: only the tools with a per-tool limit"
    );
}

#[tokio::test]
async fn end_run_returns_an_abort() {
    let svc = CallLimitsLayer::new()
        .max_tool_calls(0)
        .on_limit(OnLimit::EndRun)
        .layer(echo());
    let req = ToolRequest::new(ToolCall::new("1", "a", json!({})), RunContext::new());
    let err = svc.oneshot(req).await.unwrap_err();
    assert_eq!(
        Abort::find(&*err).map(Abort::reason),
        Some(
            "tool call limit reached: at most 0 tool calls per run; do not call any more tools, answer with what you have"
        )
    );
}

#[tokio::test]
async fn layers_count_apart_and_clones_together() {
    let model = tower::service_fn(|_req: ModelRequest| async {
        Ok::<_, BoxError>(ModelResponse::text("ok"))
    });
    let a = CallLimitsLayer::new().max_model_calls(1);
    let b = CallLimitsLayer::new().max_model_calls(1);
    let ctx = RunContext::new();
    let call = |layer: &CallLimitsLayer| {
        let mut req = ModelRequest::new(vec![tower_agent::message::Message::user("hi")]);
        req.ctx = ctx.clone();
        layer.layer(model).oneshot(req)
    };
    assert!(call(&a).await.is_ok());
    assert!(call(&b).await.is_ok());
    let a2 = a.clone();
    assert!(call(&a2).await.is_err(), "a clone counts with its original");
    assert_eq!(a.counts(&ctx).model_calls, 1);
    assert_eq!(b.counts(&ctx).model_calls, 1);
}
