//! [`ToolRouter`]: dispatch tool calls by name.

use std::{
    collections::HashMap,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use serde_json::Value;
use tower::{Service, ServiceExt, util::Oneshot};

use super::{
    BoxToolService, Tool, ToolRequest, ToolService,
    check::{CheckFn, ToolChecks},
};
use crate::{
    error::BoxError,
    message::{ToolOutput, ToolSpec},
};

/// Dispatches each [`ToolRequest`] to the tool its call names.
///
/// # Backpressure
///
/// The router reports ready at once and drives the chosen tool with
/// [`oneshot`](tower::ServiceExt::oneshot) inside its response future. A slow or busy tool
/// therefore never blocks calls to the other tools (tower's `Steer` is ready only when *every*
/// service is, which is head-of-line blocking), but the router cannot push a single tool's
/// backpressure up the stack: wrap that tool's service in a `ConcurrencyLimit` (or put a
/// limit in the tool layer stack) to bound it.
///
/// # Errors
///
/// Unknown tools and argument text that is not JSON become error outputs naming the problem
/// (and the available tools), not `Err`s: the model sees them and can correct itself. The
/// chosen tool's own `Err` passes through.
///
/// # Checks
///
/// The [checks](Tool::check) of the tools registered with [`tool`](Self::tool) (or
/// [`add_tool`](Self::add_tool)) are kept apart too, and handed out by
/// [`checks`](Self::checks), for the layers that decide about calls before the call reaches
/// the router (see [`check`](super::check)). Tools registered as services have none.
///
/// # Clone
///
/// Cloning is four reference counts; registering a tool on a clone copies the table once
/// (copy-on-write), leaving the original untouched.
#[derive(Clone, Default)]
pub struct ToolRouter {
    routes: Arc<HashMap<String, BoxToolService>>,
    specs: Arc<Vec<ToolSpec>>,
    /// Services for the names no route has, by name prefix (tools a service learns of while
    /// a run goes on, such as an MCP server's after its list changed).
    prefixes: Arc<Vec<(String, BoxToolService)>>,
    /// The checks of the tools registered as [`Tool`]s, by name.
    checks: ToolChecks,
}

impl ToolRouter {
    /// A router with no tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// This router with `tool` added (replacing a tool of the same name).
    #[must_use]
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.add_tool(tool);
        self
    }

    /// Adds `tool`, replacing a tool of the same name.
    pub fn add_tool<T: Tool>(&mut self, tool: T) {
        let spec = tool.spec();
        let name = spec.name.clone();
        let service = ToolService::new(tool);
        let tool = service.shared();
        self.add_service(spec, service);
        // Only a check the tool defines: with none, requests carry no checks (no cost per call).
        if T::CHECKS_INPUT {
            let check: CheckFn = Arc::new(move |req| tool.check(req));
            Arc::make_mut(&mut self.checks.checks).insert(name, check);
        }
    }

    /// This router with a tool that is any tower service, described by `spec`.
    #[must_use]
    pub fn service<S>(mut self, spec: ToolSpec, service: S) -> Self
    where
        S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.add_service(spec, service);
        self
    }

    /// Adds a tool that is any tower service, described by `spec`.
    pub fn add_service<S>(&mut self, spec: ToolSpec, service: S)
    where
        S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let svc = BoxToolService::new(service.map_err(Into::into));
        let specs = Arc::make_mut(&mut self.specs);
        match specs.iter_mut().find(|s| s.name == spec.name) {
            Some(old) => *old = spec.clone(),
            None => specs.push(spec.clone()),
        }
        if self.checks.contains(&spec.name) {
            Arc::make_mut(&mut self.checks.checks).remove(&spec.name);
        }
        Arc::make_mut(&mut self.routes).insert(spec.name, svc);
    }

    /// Adds a service for calls to tools that are not registered by name and whose name
    /// starts with `prefix` (replacing the service of the same prefix). It has no spec: the
    /// model learns of such tools some other way (e.g. a [`Prepare`](crate::agent::Prepare)
    /// stage that edits the request's tools). Registered names win over prefixes; the first
    /// matching prefix wins.
    pub fn add_prefix_service<S>(&mut self, prefix: impl Into<String>, service: S)
    where
        S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let prefix = prefix.into();
        let svc = BoxToolService::new(service.map_err(Into::into));
        let prefixes = Arc::make_mut(&mut self.prefixes);
        match prefixes.iter_mut().find(|(p, _)| *p == prefix) {
            Some(old) => old.1 = svc,
            None => prefixes.push((prefix, svc)),
        }
    }

    /// Adds every tool of `other` (its tools win on a name clash).
    pub fn merge(&mut self, other: &ToolRouter) {
        for (prefix, svc) in other.prefixes.iter() {
            let prefixes = Arc::make_mut(&mut self.prefixes);
            match prefixes.iter_mut().find(|(p, _)| p == prefix) {
                Some(old) => old.1 = svc.clone(),
                None => prefixes.push((prefix.clone(), svc.clone())),
            }
        }
        for spec in other.specs.iter() {
            let svc = other.routes[&spec.name].clone();
            let specs = Arc::make_mut(&mut self.specs);
            match specs.iter_mut().find(|s| s.name == spec.name) {
                Some(old) => *old = spec.clone(),
                None => specs.push(spec.clone()),
            }
            Arc::make_mut(&mut self.routes).insert(spec.name.clone(), svc);
            let checks = Arc::make_mut(&mut self.checks.checks);
            match other.checks.checks.get(&spec.name) {
                Some(check) => checks.insert(spec.name.clone(), Arc::clone(check)),
                None => checks.remove(&spec.name),
            };
        }
    }

    /// This router with every tool's service (prefix routes included) replaced by
    /// `f(service)` (the agent loop wraps each tool in its journal this way, innermost).
    pub(crate) fn map_services(
        &self,
        mut f: impl FnMut(BoxToolService) -> BoxToolService,
    ) -> ToolRouter {
        let routes = self
            .routes
            .iter()
            .map(|(name, svc)| (name.clone(), f(svc.clone())))
            .collect();
        let prefixes = self
            .prefixes
            .iter()
            .map(|(prefix, svc)| (prefix.clone(), f(svc.clone())))
            .collect();
        ToolRouter {
            routes: Arc::new(routes),
            prefixes: Arc::new(prefixes),
            specs: Arc::clone(&self.specs),
            checks: self.checks.clone(),
        }
    }

    /// The [checks](Tool::check) of the tools registered as [`Tool`]s that define one
    /// ([`Tool::CHECKS_INPUT`]): the handle the agent loop puts in each tool request's
    /// extensions when it holds any (see [`check`](super::check)).
    pub fn checks(&self) -> ToolChecks {
        self.checks.clone()
    }

    /// The specs of the tools, in registration order (shared, cheap to clone).
    pub fn specs(&self) -> &Arc<Vec<ToolSpec>> {
        &self.specs
    }

    /// Whether a tool of that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.routes.contains_key(name)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    fn unknown(&self, req: &ToolRequest) -> ToolOutput {
        let mut names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        let available = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        ToolOutput::error(
            req.call.id.clone(),
            format!(
                "unknown tool `{}`; available tools: {available}",
                req.call.name
            ),
        )
    }
}

impl fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRouter")
            .field(
                "tools",
                &self.specs.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Service<ToolRequest> for ToolRouter {
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = future::ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // NOTE: always ready; the chosen tool is driven with `oneshot` (see the type docs).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: ToolRequest) -> Self::Future {
        let route = self.routes.get(&req.call.name).or_else(|| {
            self.prefixes
                .iter()
                .find(|(p, _)| req.call.name.starts_with(p.as_str()))
                .map(|(_, svc)| svc)
        });
        let Some(svc) = route else {
            return future::ResponseFuture::ready(self.unknown(&req));
        };
        // A provider that could not parse the model's argument text keeps it as a string.
        if let Value::String(text) = &req.call.arguments {
            match serde_json::from_str::<Value>(text) {
                Ok(parsed) if parsed.is_object() => req.call.arguments = parsed,
                Ok(_) | Err(_) => {
                    let why = serde_json::from_str::<Value>(text)
                        .err()
                        .map_or_else(|| "not a JSON object".to_owned(), |e| e.to_string());
                    return future::ResponseFuture::ready(ToolOutput::error(
                        req.call.id.clone(),
                        format!(
                            "the arguments of `{}` are not valid JSON ({why}); call it again with a JSON object",
                            req.call.name
                        ),
                    ));
                }
            }
        }
        future::ResponseFuture::call(svc.clone().oneshot(req))
    }
}

/// The response future of [`ToolRouter`].
pub(super) mod future {
    use std::{
        future::Future,
        pin::Pin,
        task::{Context, Poll},
    };

    use pin_project_lite::pin_project;

    use super::*;

    pin_project! {
        /// The response future of [`ToolRouter`](super::ToolRouter).
        pub struct ResponseFuture {
            #[pin]
            kind: Kind,
        }
    }

    pin_project! {
        #[project = KindProj]
        enum Kind {
            Ready { output: Option<ToolOutput> },
            Call { #[pin] fut: Oneshot<BoxToolService, ToolRequest> },
        }
    }

    impl ResponseFuture {
        pub(super) fn ready(output: ToolOutput) -> Self {
            ResponseFuture {
                kind: Kind::Ready {
                    output: Some(output),
                },
            }
        }

        pub(super) fn call(fut: Oneshot<BoxToolService, ToolRequest>) -> Self {
            ResponseFuture {
                kind: Kind::Call { fut },
            }
        }
    }

    impl Future for ResponseFuture {
        type Output = Result<ToolOutput, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().kind.project() {
                KindProj::Ready { output } => Poll::Ready(Ok(output
                    .take()
                    .expect("ResponseFuture polled after completion"))),
                KindProj::Call { fut } => fut.poll(cx),
            }
        }
    }

    impl std::fmt::Debug for ResponseFuture {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{context::RunContext, message::ToolCall, tool::tool_fn};
    use serde_json::json;

    fn echo() -> impl Tool {
        tool_fn(
            "echo",
            "echo",
            json!({"type": "object"}),
            |args, _| async move { Ok::<_, BoxError>(args) },
        )
    }

    async fn call(router: &ToolRouter, name: &str, args: Value) -> ToolOutput {
        router
            .clone()
            .oneshot(ToolRequest::new(
                ToolCall::new("id", name, args),
                RunContext::new(),
            ))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn string_arguments_are_parsed_or_reported() {
        let router = ToolRouter::new().tool(echo());
        let out = call(&router, "echo", json!("{\"a\": 1}")).await;
        assert_eq!(out.content, "{\"a\":1}");
        let out = call(&router, "echo", json!("{\"a\": ")).await;
        assert!(out.is_error);
        assert!(out.content.contains("not valid JSON"), "{}", out.content);
        let out = call(&router, "echo", json!("[1]")).await;
        assert!(out.content.contains("not a JSON object"), "{}", out.content);
    }

    #[tokio::test]
    async fn unknown_tool_lists_available() {
        let router = ToolRouter::new();
        let out = call(&router, "nope", json!({})).await;
        assert_eq!(out.content, "unknown tool `nope`; available tools: none");
        let out = call(&router.tool(echo()), "nope", json!({})).await;
        assert_eq!(out.content, "unknown tool `nope`; available tools: echo");
        assert_eq!(out.call_id, "id");
    }

    #[tokio::test]
    async fn prefix_routes_take_unregistered_names() {
        let mut router = ToolRouter::new().tool(echo());
        router.add_prefix_service(
            "mcp__s__",
            tower::service_fn(|r: ToolRequest| async move {
                Ok::<_, BoxError>(ToolOutput::text(
                    r.call.id,
                    format!("prefix: {}", r.call.name),
                ))
            }),
        );
        assert_eq!(router.len(), 1, "a prefix route has no spec");
        let out = call(&router, "mcp__s__new", json!({})).await;
        assert_eq!(out.content, "prefix: mcp__s__new");
        // Registered names win; other names are still unknown.
        assert_eq!(
            call(&router, "echo", json!({"a": 1})).await.content,
            "{\"a\":1}"
        );
        assert!(call(&router, "mcp__t__x", json!({})).await.is_error);
        // Merged with the router's tools.
        let mut other = ToolRouter::new();
        other.merge(&router);
        let out = call(&other, "mcp__s__x", json!({})).await;
        assert_eq!(out.content, "prefix: mcp__s__x");
    }

    #[test]
    fn clone_on_write_registration() {
        let base = ToolRouter::new().tool(echo());
        let mut more = base.clone();
        more.add_service(
            ToolSpec::new("other", "", json!({})),
            tower::service_fn(|r: ToolRequest| async move {
                Ok::<_, BoxError>(ToolOutput::text(r.call.id, "x"))
            }),
        );
        assert_eq!(base.len(), 1);
        assert_eq!(more.len(), 2);
        more.add_tool(echo());
        assert_eq!(more.len(), 2, "same name replaces");
    }
}
