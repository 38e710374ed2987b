//! [`serve`]: the routes served on a listener until shutdown, then drained gracefully.

use std::{
    fmt,
    future::{Future, IntoFuture},
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    serve::ListenerExt,
};
use futures_util::{StreamExt, future::BoxFuture};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{body::ApiError, router};
use tower_agent_core::Agent;

/// Serves `agent` on `listener` until `shutdown` completes, then shuts down gracefully (see
/// the [module docs](crate#graceful-shutdown)). Await the returned [`Serve`].
///
/// The server also shuts down when the agent's
/// [`shutdown_signal`](Agent::shutdown_signal) is cancelled by someone else.
///
/// ```no_run
/// # use tower_agent_core::{Agent, model::ScriptedModel};
/// # use tower_agent_server as server;
/// # #[tokio::main]
/// # async fn main() -> std::io::Result<()> {
/// # let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(
///     server::serve(listener, agent, async { stopped.await.ok(); }).into_future(),
/// );
/// // … later:
/// stop.send(()).ok();
/// server.await??;
/// # Ok(())
/// # }
/// ```
pub fn serve<F>(listener: TcpListener, agent: Agent, shutdown: F) -> Serve<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    Serve {
        listener,
        agent,
        router: None,
        shutdown,
        grace_period: None,
    }
}

/// A server being set up; `.await` it to serve. See [`serve`].
#[must_use = "a server does nothing unless awaited"]
pub struct Serve<F> {
    listener: TcpListener,
    agent: Agent,
    router: Option<Router>,
    shutdown: F,
    grace_period: Option<Duration>,
}

impl<F> Serve<F> {
    /// Serves `router` instead of [`router(agent)`](router): typically that router with layers, an
    /// [`AgentRoutes`](crate::AgentRoutes) router over the agent under tower middleware, or
    /// an app the [`AgentRoutes::routes`](crate::AgentRoutes::routes) are merged into. On
    /// shutdown, the `agent` given to [`serve`] is the one whose runs are asked to stop, so the
    /// router should serve that agent.
    pub fn router(mut self, router: Router) -> Self {
        self.router = Some(router);
        self
    }

    /// Returns at most `period` (plus up to a second to flush) after shutdown began: the runs
    /// still going then are dropped, with their tool calls (a tool's child process is killed
    /// when its future is dropped); a non-streamed run answers `503`, a stream just ends. By
    /// default `serve` waits for every run.
    pub fn grace_period(mut self, period: Duration) -> Self {
        self.grace_period = Some(period);
        self
    }

    /// The address the server listens on (useful after binding port 0).
    ///
    /// # Errors
    ///
    /// As [`TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl<F> fmt::Debug for Serve<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("agent", &self.agent)
            .field("custom_router", &self.router.is_some())
            .field("grace_period", &self.grace_period)
            .finish_non_exhaustive()
    }
}

impl<F> IntoFuture for Serve<F>
where
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        let Serve {
            listener,
            agent,
            router: app,
            shutdown,
            grace_period,
        } = self;
        let token = agent.shutdown_signal().clone();
        let mut app = app.unwrap_or_else(|| router(agent));
        let began = CancellationToken::new();
        // Cancelled when the grace period is over: requests still running are dropped.
        let hard_stop = CancellationToken::new();
        if grace_period.is_some() {
            app = app.layer(axum::middleware::from_fn_with_state(
                hard_stop.clone(),
                stop_at_deadline,
            ));
        }
        let signal = {
            let began = began.clone();
            async move {
                tokio::select! {
                    () = shutdown => {}
                    () = token.cancelled() => {}
                }
                tracing::info!("shutting down: runs end after their current step");
                token.cancel();
                began.cancel();
            }
        };
        // Events of a stream go out as they happen, not when Nagle's algorithm lets them.
        let listener = listener.tap_io(|tcp| {
            if let Err(err) = tcp.set_nodelay(true) {
                tracing::trace!(%err, "cannot set TCP_NODELAY");
            }
        });
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .into_future();
        ServeFuture(Box::pin(async move {
            let Some(period) = grace_period else {
                return serve.await;
            };
            tokio::pin!(serve);
            tokio::select! {
                result = &mut serve => return result,
                () = async { began.cancelled().await; tokio::time::sleep(period).await } => {}
            }
            tracing::warn!(?period, "grace period over: dropping the runs still going");
            hard_stop.cancel();
            // The handlers and streams end now; their connections close once the last bytes
            // are written. Don't wait on a client that stopped reading.
            match tokio::time::timeout(FLUSH_AFTER_GRACE, serve).await {
                Ok(result) => result,
                Err(_) => Ok(()),
            }
        }))
    }
}

/// How long [`Serve`] waits, after the grace period, for connections to write their last
/// bytes.
const FLUSH_AFTER_GRACE: Duration = Duration::from_secs(1);

/// Ends a request when the grace period is over: a handler still running is dropped (with its
/// run and the run's tool calls) and answers `503`; a streamed body ends where it is.
async fn stop_at_deadline(
    State(hard_stop): State<CancellationToken>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = tokio::select! {
        response = next.run(request) => response,
        () = hard_stop.cancelled() => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server shut down before the run finished",
            )
            .into_response();
        }
    };
    if axum::body::HttpBody::size_hint(response.body())
        .exact()
        .is_some()
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body
        .into_data_stream()
        .take_until(hard_stop.cancelled_owned());
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// The future of a [`Serve`]: resolves once the server has shut down.
#[must_use = "futures do nothing unless polled"]
pub struct ServeFuture(BoxFuture<'static, io::Result<()>>);

impl Future for ServeFuture {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ServeFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeFuture").finish_non_exhaustive()
    }
}
