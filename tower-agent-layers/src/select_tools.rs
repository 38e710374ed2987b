//! [`ToolSelectionLayer`]: with more tools than a model handles well, a cheap model picks the
//! ones the request needs before the main model sees the list.
//!
//! When a request offers more than [`max_tools`](ToolSelectionLayer::max_tools) tools (default
//! 10), the selector — any model service — gets the conversation's last user message and each
//! tool's name and description, and answers a JSON array of names. The request goes on with
//! those tools and the ones [`always`](ToolSelectionLayer::always) names, in their order. An
//! answer that names no known tool or is not an array keeps every tool (with a run warning):
//! a bad selection never leaves the model without its tools; a selector that fails fails the
//! call (its error).
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_agent_core::message::{Message, ToolSpec};
//! use tower_agent_layers::select_tools::ToolSelectionLayer;
//! use tower_agent_core::model::{ModelRequest, ModelResponse, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let selector = ScriptedModel::new().text(r#"["weather"]"#);
//! let main = ScriptedModel::from_fn(|req| {
//!     let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
//!     Ok(ModelResponse::text(names.join(",")))
//! });
//! let model = ServiceBuilder::new()
//!     .layer(ToolSelectionLayer::new(selector).max_tools(2).always(["read_file"]))
//!     .service(main);
//! let mut req = ModelRequest::new(vec![Message::user("Rain in Oslo?")]);
//! req.tools = std::sync::Arc::new(
//!     ["read_file", "weather", "stocks", "email"]
//!         .map(|n| ToolSpec::new(n, format!("The {n} tool"), json!({"type": "object"})))
//!         .to_vec(),
//! );
//! assert_eq!(model.oneshot(req).await?.message.text(), "read_file,weather");
//! # Ok(())
//! # }
//! ```

use std::{
    collections::HashSet,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Service, ServiceExt, util::BoxCloneSyncService};

use tower_agent_core::{
    error::BoxError,
    message::{Message, Role},
    model::{BoxModelService, ModelRequest, ModelResponse, ModelSettings},
};

/// The default most tools a request offers before the selector is asked (10).
pub const DEFAULT_MAX_TOOLS: usize = 10;

/// A selector model and its rules: see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct ToolSelectionLayer {
    selector: BoxModelService,
    max_tools: usize,
    always: Arc<HashSet<String>>,
}

impl fmt::Debug for ToolSelectionLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSelectionLayer")
            .field("max_tools", &self.max_tools)
            .field("always", &self.always)
            .finish_non_exhaustive()
    }
}

impl ToolSelectionLayer {
    /// Tool selection by `selector` (a cheap model).
    pub fn new<S>(selector: S) -> Self
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        ToolSelectionLayer {
            selector: BoxCloneSyncService::new(selector.map_err(Into::into)),
            max_tools: DEFAULT_MAX_TOOLS,
            always: Arc::default(),
        }
    }

    /// The selector is asked only when a request offers more than `n` tools.
    pub fn max_tools(mut self, n: usize) -> Self {
        self.max_tools = n;
        self
    }

    /// These tools are always offered, whatever the selector picks.
    pub fn always<N: Into<String>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        let mut always = (*self.always).clone();
        always.extend(names.into_iter().map(Into::into));
        self.always = Arc::new(always);
        self
    }
}

impl<S> tower::Layer<S> for ToolSelectionLayer {
    type Service = ToolSelection<S>;

    fn layer(&self, inner: S) -> ToolSelection<S> {
        ToolSelection {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`ToolSelectionLayer`].
///
/// Readiness: with a selection to make, the readied inner service is dropped (giving back
/// what it reserved) and a fresh clone takes the call once the selector answered.
#[derive(Clone, Debug)]
pub struct ToolSelection<S> {
    inner: S,
    layer: ToolSelectionLayer,
}

impl<S> Service<ModelRequest> for ToolSelection<S>
where
    S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        if req.tools.len() <= self.layer.max_tools {
            let fut = self.inner.call(req);
            return future::ResponseFuture(Box::pin(async move { fut.await.map_err(Into::into) }));
        }
        let inner = self.inner.clone();
        drop(std::mem::replace(&mut self.inner, inner.clone()));
        let layer = self.layer.clone();
        future::ResponseFuture(Box::pin(async move {
            let req = select(&layer, req).await?;
            inner.oneshot(req).await.map_err(Into::into)
        }))
    }
}

/// The instructions of the selector.
const INSTRUCTIONS: &str = "You choose the tools an assistant needs for the user's request. \
Answer with a JSON array of the names of the relevant tools, and nothing else.";

/// `req` with the tools the selector picked (and the ones always offered).
async fn select(
    layer: &ToolSelectionLayer,
    mut req: ModelRequest,
) -> Result<ModelRequest, BoxError> {
    let last_user = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.text().into_owned())
        .unwrap_or_default();
    let mut list = String::new();
    for t in req.tools.iter() {
        list.push_str(&format!("- {}: {}\n", t.name, t.description));
    }
    let ask = ModelRequest {
        messages: vec![
            Message::system(INSTRUCTIONS),
            Message::user(format!("Request:\n{last_user}\n\nTools:\n{list}")),
        ]
        .into(),
        tools: Arc::default(),
        settings: ModelSettings::default(),
        ctx: req.ctx.clone(),
        extensions: http::Extensions::new(),
    };
    let answer = layer.selector.clone().oneshot(ask).await?.collect().await?;
    let text = answer.message.text();
    let picked: Option<HashSet<String>> = text
        .find('[')
        .zip(text.rfind(']'))
        .and_then(|(a, b)| serde_json::from_str::<Vec<String>>(&text[a..=b.max(a)]).ok())
        .map(|names| names.into_iter().collect());
    let known = |names: &HashSet<String>| req.tools.iter().any(|t| names.contains(&t.name));
    match picked {
        Some(names) if known(&names) => {
            let tools = req
                .tools
                .iter()
                .filter(|t| names.contains(&t.name) || layer.always.contains(&t.name))
                .cloned()
                .collect();
            req.tools = Arc::new(tools);
        }
        _ => req.ctx.warn(format!(
            "tool selection: the selector's answer names no known tool; all {} tools are offered",
            req.tools.len()
        )),
    }
    Ok(req)
}

/// The response future of [`ToolSelection`].
pub mod future {
    use std::{
        fmt,
        future::Future,
        pin::Pin,
        task::{Context, Poll},
    };

    use futures_util::future::BoxFuture;

    use tower_agent_core::{error::BoxError, model::ModelResponse};

    /// The response future of [`ToolSelection`](super::ToolSelection): the selection, then the call (boxed).
    pub struct ResponseFuture(pub(super) BoxFuture<'static, Result<ModelResponse, BoxError>>);

    impl Future for ResponseFuture {
        type Output = Result<ModelResponse, BoxError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            self.0.as_mut().poll(cx)
        }
    }

    impl fmt::Debug for ResponseFuture {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}

/// The response future of [`ToolSelection`], by its former name.
#[deprecated(
    note = "renamed `select_tools::future::ResponseFuture`, as every layer module names its future"
)]
pub type ToolSelectionFuture = future::ResponseFuture;
