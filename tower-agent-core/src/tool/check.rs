//! Input checks: a tool looks at a call's input — and normalises it — before the layers that
//! decide about the call (hooks, permission rules, approvals) see it.
//!
//! A tool offers a check with [`Tool::check`](super::Tool::check): it accepts a request (with its input
//! normalised, e.g. defaults filled in), refuses it with the output the model gets, or says
//! so later (a check that reads a file). Claude Code checks its tools' input this way before
//! its PreToolUse hooks, and the Claude Code tools of this
//! crate do the same.
//!
//! The checks reach the layers as data on the request, as axum's routing data reaches
//! middleware: a [`ToolRouter`](super::ToolRouter) hands out its tools' checks as a
//! [`ToolChecks`] handle, and the agent loop puts that handle in the
//! [`extensions`](super::ToolRequest::extensions) of each tool request (outermost, so every
//! tool layer finds it). A layer that decides about calls — the crate's
//! hook layer, or yours — runs
//! [`ToolChecks::check`] first: a refusal is the call's output and the layer does nothing
//! else; an accepted request goes on, marked [`Checked`] so the tool does not check it again.
//! A request nobody checked is checked by the tool's service itself
//! ([`ToolService`](super::ToolService)) before the call.
//!
//! A check may also give the layers a view of the input that the tool does not get: the
//! [`ObservableInput`] extension (Claude Code shows hooks a relative `file_path` made
//! absolute, and runs its tool on the path as the model gave it, unless a hook rewrote it).
//!
//! # Example
//!
//! ```
//! use serde_json::{Value, json};
//! use tower::ServiceExt;
//! use tower_agent_core::{BoxError, context::RunContext, message::{ToolCall, ToolOutput, ToolSpec}};
//! use tower_agent_core::tool::{Check, Tool, ToolRequest, ToolRouter};
//!
//! /// Greets someone; refuses an empty name, and fills in the greeting.
//! struct Greet;
//!
//! impl Tool for Greet {
//!     // This tool defines a check: the router hands it out, and it runs before the hooks.
//!     const CHECKS_INPUT: bool = true;
//!
//!     fn spec(&self) -> ToolSpec {
//!         ToolSpec::new("greet", "Greets someone", json!({ "type": "object" }))
//!     }
//!
//!     fn check(&self, mut req: ToolRequest) -> Check {
//!         let args = &mut req.call.arguments;
//!         if args["name"].as_str().is_none_or(str::is_empty) {
//!             return Check::Refuse(ToolOutput::error(req.call.id, "`name` must not be empty"));
//!         }
//!         if args.get("greeting").is_none() {
//!             args["greeting"] = json!("Hello");
//!         }
//!         Check::Accept(req)
//!     }
//!
//!     async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
//!         let args = &req.call.arguments;
//!         Ok(ToolOutput::text(req.call.id, format!("{}, {}!", args["greeting"].as_str().unwrap(), args["name"].as_str().unwrap())))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! let router = ToolRouter::new().tool(Greet);
//! let checks = router.checks();
//!
//! // What a layer sees before the call: the normalised input, or the refusal.
//! let req = ToolRequest::new(ToolCall::new("c1", "greet", json!({"name": "Ada"})), RunContext::new());
//! let req = checks.check(req).resolve().await.unwrap();
//! assert_eq!(req.call.arguments["greeting"], "Hello");
//!
//! let req = ToolRequest::new(ToolCall::new("c2", "greet", json!({"name": ""})), RunContext::new());
//! let refused = checks.check(req).resolve().await.unwrap_err();
//! assert!(refused.is_error && refused.call_id == "c2");
//!
//! // Called directly, the tool checks the input itself.
//! let req = ToolRequest::new(ToolCall::new("c3", "greet", json!({"name": "Bo"})), RunContext::new());
//! assert_eq!(router.oneshot(req).await?.content, "Hello, Bo!");
//! # Ok(())
//! # }
//! ```

use std::{
    collections::HashMap,
    fmt,
    future::Future,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use serde_json::Value;
use tower::{Layer, Service};

use super::ToolRequest;
use crate::message::ToolOutput;

/// What a tool's [`check`](super::Tool::check) makes of a request.
#[must_use]
pub enum Check {
    /// Run the call, with this request (its input normalised as the tool wants it).
    Accept(ToolRequest),
    /// Do not run the call: this output (an error, as a rule) is its result. Give it the
    /// call's id, as [`Tool::call`](super::Tool::call) does (the agent loop fills in an
    /// empty one).
    Refuse(ToolOutput),
    /// The answer needs awaiting (e.g. the check reads a file): `Ok` accepts, `Err` refuses.
    Later(BoxFuture<'static, Result<ToolRequest, ToolOutput>>),
}

impl Check {
    /// An answer that needs awaiting.
    pub fn later(
        answer: impl Future<Output = Result<ToolRequest, ToolOutput>> + Send + 'static,
    ) -> Self {
        Check::Later(Box::pin(answer))
    }

    /// The answer: the accepted request, or the refusal.
    pub async fn resolve(self) -> Result<ToolRequest, ToolOutput> {
        match self {
            Check::Accept(req) => Ok(req),
            Check::Refuse(output) => Err(output),
            Check::Later(answer) => answer.await,
        }
    }

    /// This answer with the mark of an accepted request: [`Checked`].
    pub(super) fn marked(self) -> Self {
        match self {
            Check::Accept(mut req) => {
                req.extensions.insert(Checked);
                Check::Accept(req)
            }
            Check::Refuse(output) => Check::Refuse(output),
            Check::Later(answer) => Check::later(async move {
                let mut req = answer.await?;
                req.extensions.insert(Checked);
                Ok(req)
            }),
        }
    }
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Accept(req) => f.debug_tuple("Accept").field(req).finish(),
            Check::Refuse(output) => f.debug_tuple("Refuse").field(output).finish(),
            Check::Later(_) => f.write_str("Later(..)"),
        }
    }
}

/// A request extension: its tool's check accepted it (its input is normalised). The tool's
/// service does not check it again. A layer that changes the input of a checked request
/// removes the mark, so that the tool checks what it is given (the hook layer does, when a
/// hook rewrites the input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked;

/// A request extension a check may add: the input as the layers that decide about the call
/// (hooks, permission rules, approvals) see it, when it differs from the input the tool runs
/// with. The hook layer shows its hooks this input; if
/// a hook rewrites it, the tool gets the rewrite, else the request's own input.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservableInput(pub Value);

/// One tool's check.
pub(super) type CheckFn = Arc<dyn Fn(ToolRequest) -> Check + Send + Sync>;

/// The checks of a router's tools, by name: a handle cheap to clone (one reference count),
/// which the agent loop puts in each tool request's
/// [`extensions`](super::ToolRequest::extensions). See the [module docs](self).
///
/// As a [`Layer`], it puts itself in the extensions of each request that goes through: the
/// way to hand the checks to layers when you call a tool stack outside the agent loop
/// (outermost, e.g. `ServiceBuilder::new().layer(router.checks()).layer(hooks.tool_layer())
/// .service(router)`).
#[derive(Clone, Default)]
pub struct ToolChecks {
    pub(super) checks: Arc<HashMap<String, CheckFn>>,
}

impl ToolChecks {
    /// Runs the check of the tool the request's call names, once: a request already
    /// [`Checked`] and a call of a tool with no check are accepted as they are. An accepted
    /// request is marked [`Checked`].
    pub fn check(&self, req: ToolRequest) -> Check {
        if req.extensions.get::<Checked>().is_some() {
            return Check::Accept(req);
        }
        match self.checks.get(&req.call.name) {
            Some(check) => check(req).marked(),
            None => Check::Accept(req),
        }
    }

    /// Whether the tool `name` has a check.
    pub fn contains(&self, name: &str) -> bool {
        self.checks.contains_key(name)
    }

    /// Whether no tool has a check.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }
}

impl fmt::Debug for ToolChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.checks.keys().collect();
        names.sort_unstable();
        f.debug_struct("ToolChecks").field("tools", &names).finish()
    }
}

impl<S> Layer<S> for ToolChecks {
    type Service = WithToolChecks<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithToolChecks {
            inner,
            checks: self.clone(),
        }
    }
}

/// The service of the [`ToolChecks`] layer: puts the checks in each request's extensions.
#[derive(Clone, Debug)]
pub struct WithToolChecks<S> {
    inner: S,
    checks: ToolChecks,
}

impl<S> WithToolChecks<S> {
    /// The service it wraps.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Service<ToolRequest>> Service<ToolRequest> for WithToolChecks<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: ToolRequest) -> Self::Future {
        req.extensions.insert(self.checks.clone());
        self.inner.call(req)
    }
}
