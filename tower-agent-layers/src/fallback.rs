//! [`FallbackLayer`]: when the model fails in a way another model may not, the next model of
//! a list takes the request.
//!
//! By default a call falls back on a provider error that is retryable (rate limited,
//! overloaded or another server error, a timeout, a broken connection) — put the layer
//! outside a [`RetryLayer`](tower_agent_core::model::retry) so that it falls back once the retries are
//! spent — and on a context-length error (a model with a larger window may take the
//! request). [`when`](FallbackLayer::when) sets another rule. Each fallback is a
//! `tracing` warning and a run warning naming the model that failed and why, and the answer
//! carries the reasons in its extensions ([`FellBack`]). A streaming answer falls back only
//! before its first piece (the call's error); a failure after it is the stream's.
//!
//! # Example
//!
//! ```
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_agent_layers::fallback::{FallbackLayer, FellBack};
//! use tower_agent_core::model::{ModelRequest, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let broken = ScriptedModel::new().fail("the primary model is down");
//! let backup = ScriptedModel::new().text("from the backup");
//! let model = ServiceBuilder::new()
//!     // Any error here; the default rule takes retryable provider errors and context length.
//!     .layer(FallbackLayer::new().then_model(backup, "backup-model").when(|_| true))
//!     .service(broken);
//! let resp = model.oneshot(ModelRequest::new(vec![])).await?;
//! assert_eq!(resp.message.text(), "from the backup");
//! assert_eq!(resp.extensions.get::<FellBack>().unwrap().reasons.len(), 1);
//! # Ok(())
//! # }
//! ```

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Service, ServiceExt, util::BoxCloneSyncService};

use tower_agent_core::{
    error::{self, BoxError},
    model::{BoxModelService, ModelRequest, ModelResponse, ProviderError},
};

type When = dyn Fn(&BoxError) -> bool + Send + Sync;

/// The models to fall back on, in order: see the [module docs](self).
#[derive(Clone)]
#[must_use]
pub struct FallbackLayer {
    models: Arc<[(BoxModelService, Option<Arc<str>>)]>,
    when: Arc<When>,
}

impl Default for FallbackLayer {
    fn default() -> Self {
        FallbackLayer {
            models: Arc::new([]),
            when: Arc::new(falls_back),
        }
    }
}

impl fmt::Debug for FallbackLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackLayer")
            .field("models", &self.models.len())
            .finish_non_exhaustive()
    }
}

/// The default rule: a retryable provider error, or a context-length error.
pub fn falls_back(err: &BoxError) -> bool {
    ProviderError::find(&**err).is_some_and(|e| {
        e.is_rate_limited()
            || e.is_server_error()
            || e.is_timeout()
            || e.is_transport()
            || e.is_context_length_exceeded()
    })
}

impl FallbackLayer {
    /// No model to fall back on yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Falls back on `model` next, with the request as it is (its model setting included).
    pub fn then<S>(self, model: S) -> Self
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.push(model, None)
    }

    /// Falls back on `model` next, the request naming `name` as its model
    /// ([`ModelSettings::model`](tower_agent_core::model::ModelSettings::model)).
    pub fn then_model<S>(self, model: S, name: impl Into<Arc<str>>) -> Self
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.push(model, Some(name.into()))
    }

    fn push<S>(self, model: S, name: Option<Arc<str>>) -> Self
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let model = BoxCloneSyncService::new(model.map_err(Into::into));
        let mut models = self.models.to_vec();
        models.push((model, name));
        FallbackLayer {
            models: models.into(),
            when: self.when,
        }
    }

    /// Falls back when `f` says so of the error (default: [`falls_back`]).
    pub fn when(mut self, f: impl Fn(&BoxError) -> bool + Send + Sync + 'static) -> Self {
        self.when = Arc::new(f);
        self
    }
}

impl<S> tower::Layer<S> for FallbackLayer {
    type Service = Fallback<S>;

    fn layer(&self, inner: S) -> Fallback<S> {
        Fallback {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`FallbackLayer`].
#[derive(Clone, Debug)]
pub struct Fallback<S> {
    inner: S,
    layer: FallbackLayer,
}

/// Why an answer came from a fallback model: one reason per model that failed before it, in
/// order (in the answer's [`extensions`](ModelResponse::extensions)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FellBack {
    /// `model: error`, per model that failed.
    pub reasons: Vec<String>,
}

impl<S> Service<ModelRequest> for Fallback<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
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
        let first = self.inner.call(req.clone());
        let layer = self.layer.clone();
        future::ResponseFuture(Box::pin(async move {
            let mut err = match first.await {
                Ok(resp) => return Ok(resp),
                Err(err) => err.into(),
            };
            let mut reasons = Vec::new();
            let mut failed = req
                .settings
                .model
                .as_deref()
                .unwrap_or("the model")
                .to_owned();
            for (model, name) in layer.models.iter() {
                if !(layer.when)(&err) {
                    return Err(err);
                }
                let reason = format!("{failed}: {}", error::chain(&*err));
                tracing::warn!(reason = %reason, "the model call fails over to the next model");
                req.ctx.warn(format!("model fallback: {reason}"));
                reasons.push(reason);
                let mut req = req.clone();
                if let Some(name) = name {
                    req.settings.model = Some(Arc::clone(name));
                }
                failed = req
                    .settings
                    .model
                    .as_deref()
                    .unwrap_or("the fallback model")
                    .to_owned();
                match model.clone().oneshot(req).await {
                    Ok(mut resp) => {
                        resp.extensions.insert(FellBack { reasons });
                        return Ok(resp);
                    }
                    Err(e) => err = e,
                }
            }
            Err(err)
        }))
    }
}

/// The response future of [`Fallback`].
pub mod future {
    use std::{
        fmt,
        future::Future,
        pin::Pin,
        task::{Context, Poll},
    };

    use futures_util::future::BoxFuture;

    use tower_agent_core::{error::BoxError, model::ModelResponse};

    /// The response future of [`Fallback`](super::Fallback): the call, then the fallbacks in turn (boxed).
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

/// The response future of [`Fallback`], by its former name.
#[deprecated(
    note = "renamed `fallback::future::ResponseFuture`, as every layer module names its future"
)]
pub type FallbackFuture = future::ResponseFuture;
