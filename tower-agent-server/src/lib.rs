//! An HTTP server for an [`Agent`] of [tower-agent](https://docs.rs/tower-agent) (its feature
//! `axum`, where this crate is `tower_agent::server`): runs, streamed runs (Server-Sent Events)
//! and threads, as an [`axum::Router`] — a whole app ([`router`]), or routes to embed in
//! yours over any agent service ([`AgentRoutes`]), with the pieces for handlers of your own
//! ([`events`], [`sse`], and `IntoResponse` for [`Error`](tower_agent_core::Error)).
//!
//! # Example
//!
//! The router is a tower service: drive it with `oneshot` (no network needed), or serve it.
//!
//! ```
//! use axum::{body::Body, http::{Request, StatusCode}};
//! use tower::ServiceExt;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//! use tower_agent_server::{self as server, RunResponse};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let agent = Agent::builder().model(ScriptedModel::new().text("Hello, Ada.")).build();
//! let app = server::router(agent);
//!
//! let request = Request::post("/threads/t1/runs")
//!     .header("content-type", "application/json")
//!     .body(Body::from(r#"{"prompt": "I am Ada."}"#))?;
//! let response = app.oneshot(request).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//!
//! let body = axum::body::to_bytes(response.into_body(), 1 << 20).await?;
//! let run: RunResponse = serde_json::from_slice(&body)?;
//! assert_eq!(run.thread_id, "t1");
//! assert_eq!(run.text, "Hello, Ada.");
//! assert!(run.outcome.is_finished());
//! # Ok(())
//! # }
//! ```
//!
//! # Routes
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /threads/{id}/runs` | [`RunRequest`] `{"prompt": "..."}` | `200` [`RunResponse`] `{thread_id, run_id, outcome, text, steps, usage, warnings}` |
//! | `POST /threads/{id}/runs/stream` | [`RunRequest`] | `200` `text/event-stream`, one event per [`AgentEvent`](tower_agent_core::agent::AgentEvent) (below) |
//! | `POST /threads/{id}/resume` | none | `200` [`RunResponse`]: the thread's interrupted run resumed ([`AgentRequest::recover`]), `404` for a thread the store does not have |
//! | `GET /threads/{id}` | | `200` [`ThreadResponse`] `{id, messages, todos, files}`, `404` if there is none (only with a [store](AgentRoutes::store)) |
//! | `POST /threads/{id}/approvals` | [`Approvals`](tower_agent_core::agent::Approvals) `{"decisions": [{"call_id": "...", "decision": "approve"}, …]}` | `200` [`RunResponse`] of the run that goes on (see [Approvals](#approvals)) |
//! | `GET /threads/{id}` | | `200` [`ThreadResponse`] `{id, messages, todos, files, pending}`, `404` if there is none (only with a [store](AgentRoutes::store)) |
//! | `GET /healthz` | | `200` `{"status": "ok"}`, `503` `{"status": "shutting_down"}` once shutdown began |
//!
//! A run continues the thread `{id}` (it is created by its first run), and is saved after every
//! step in the agent's [store](tower_agent_core::store) — use `Sqlite`
//! (`tower_agent::store::Sqlite`) for threads that outlive the process. One run at a time per
//! thread: a run asked for on a thread that has one going is refused with `409`: within this
//! router, and across replicas whose store leases threads across processes
//! ([`ThreadStore::lease`]: `Postgres` across replicas, `Sqlite` across the processes that open
//! one database file; with the in-memory store, replicas don't see each other's runs). A run
//! whose save found the thread written by another replica meanwhile (a `Postgres` conflict;
//! this crate's feature `postgres`, on with tower-agent's `postgres`) is a `409` too.
//!
//! A run whose replica died in the middle (a crash, `kill -9`) is finished by
//! `POST /threads/{id}/resume` on any replica: the thread is claimed and leased as for a run
//! (`409` while the dead replica's lease lasts — with `Postgres`, until its database session
//! ends — or while a live run holds it), then the step in flight is finished from the store's
//! [tool-call journal](tower_agent_core::store::journal) without running a side effect twice, and the run
//! goes on ([`AgentRequest::recover`]).
//!
//! Every error is JSON, [`ErrorResponse`] `{"error": "..."}`: `400` for a body that is not
//! JSON, lacks `prompt` or has an empty one (`415` without a JSON content type, `413` for a
//! body over axum's 2 MB default limit); `404` for an unknown thread or route; `409` for a run
//! on a busy thread; `403` for a thread the [`ThreadAccess`] refuses; `500` when the run could
//! not run (a setup stage or the thread store failed); `503` for a run asked for after
//! shutdown began (or refused by a `LoadShed` around the agent); `504` when a tower `Timeout`
//! around the agent elapsed (the run is dropped: the thread keeps what was saved). How a run
//! *ended* is not an HTTP error: a run the model could not finish is a `200` whose `outcome`
//! says why
//! (`{"kind": "aborted", "error": "..."}`, `max_steps`, `cancelled` …). What went wrong
//! without stopping the run — a hook that could not run (and so failed open), a retried
//! model call — is in the answer's `warnings` ([`RunResponse::warnings`]), in order: the
//! messages the streamed route sends as `warning` events.
//!
//! # Embedding
//!
//! [`AgentRoutes`] serves any `Service<AgentRequest, Response = AgentResponse>` that is
//! `Clone + Send + Sync + 'static` with an error that converts into a [`BoxError`]: an
//! [`Agent`], or an agent under tower middleware (`Timeout<Agent>`,
//! `ConcurrencyLimit<Agent>`, `LoadShed`, your own layers). The thread store and the shutdown
//! signal come from the builder, not from the service. [`AgentRoutes::routes`] has no
//! `/healthz` and no fallback, so it [`merge`](Router::merge)s and [`nest`](Router::nest)s
//! into an app that has its own (merging [`router`], which has both, into such an app panics,
//! as axum does for any two routers with a fallback or the same route).
//!
//! For a handler of your own, [`events`] calls an agent service and streams the run's events
//! (ending with `agent_stop`, even when the call fails), [`sse`] answers with such a stream in
//! this module's encoding, and a handler can `?` an [`Error`](tower_agent_core::Error) (a `500` with the
//! JSON error body).
//!
//! # Per-request data and thread access
//!
//! The run routes copy the HTTP request's [extensions](axum::http::Extensions) — what your
//! authentication middleware put there (the user, the tenant) — into the [`AgentRequest`]
//! ([`AgentRequest::extensions_mut`]); the run's tools, hooks and stages read them with
//! [`RunContext::extensions`](tower_agent_core::context::RunContext::extensions).
//!
//! Who may read (`GET /threads/{id}`) or continue (`POST /threads/{id}/runs…`) a thread is up
//! to the [`ThreadAccess`] given to [`AgentRoutes::thread_access`] (by default, anyone): it
//! sees the request's parts (headers and extensions), the thread id and the
//! [`ThreadAction`], and runs after the body is checked and before the thread is claimed or
//! the run starts. A refusal answers **`403`** `{"error": "not allowed on thread `{id}`"}`.
//! `403`, not `404`: a run on an unused id creates the thread, so a `404` could not hide
//! that an id is taken anyway, and a `403` tells a client its credentials are the problem.
//!
//! # Approvals
//!
//! A run whose agent has the deferring approval policy
//! (`tower_agent::layers::hooks::Hooks::defer_approvals`) ends with
//! `{"kind": "interrupted", "pending": [{"id", "name", "arguments", "reason"}, …]}` when calls
//! wait for a decision; `GET /threads/{id}` lists them too (`pending`). Any replica sharing
//! the store answers them with `POST /threads/{id}/approvals`, each pending call decided once:
//! `{"call_id": "...", "decision": "approve"}`, `{"call_id": "...", "decision": "deny",
//! "reason": "..."}` or `{"call_id": "...", "decision": "edit", "arguments": {…}}` (see
//! [`agent::interrupt`](tower_agent_core::agent::interrupt)). The run then goes on as a run of the
//! thread (the thread is claimed as for `/runs`: `409` while a run is going on it) and the
//! answer is its [`RunResponse`].
//!
//! Who may answer is the [`ThreadAccess`]'s call with [`ThreadAction::Approve`] (by default,
//! anyone; a refusal is a `403`). Refused decisions change nothing: `409` when the thread has
//! nothing pending (the calls were decided already: a stale request, e.g. the loser of two
//! concurrent answers), `422` for a call id that is not pending (forged or stale), a pending
//! call left undecided, a call decided twice, or more than
//! [`MAX_DECISIONS`](tower_agent_core::agent::interrupt::MAX_DECISIONS) (1024) decisions; `404` for a
//! thread that does not exist.
//!
//! # Server-Sent Events
//!
//! `POST /threads/{id}/runs/stream` answers with one SSE event per
//! [`AgentEvent`](tower_agent_core::agent::AgentEvent), in order: `event:` is the event's `type`
//! (`agent_start`, `step_start`, `model_response`, `tool_call_start`, `tool_call_end`, …) and
//! `data:` the event as JSON (the same JSON, `type` included). The last event is always
//! `agent_stop`, with the outcome; a run that could not run (store or setup failure) sends only an
//! `agent_stop` with an `aborted` outcome. Comment lines (`:`) keep an idle connection alive every
//! 15 s.
//!
//! ```text
//! event: agent_start
//! data: {"type":"agent_start","thread_id":"t1","run_id":"run_…"}
//!
//! event: agent_stop
//! data: {"type":"agent_stop","outcome":{"kind":"finished"},"text":"Hello, Ada.","steps":1,"usage":{…}}
//! ```
//!
//! # Layers
//!
//! The non-streamed route calls the agent as a tower [`Service`]
//! (`oneshot(AgentRequest)`), and the router is an ordinary axum `Router`: stack tower and
//! tower-http layers on it for tracing, timeouts, concurrency limits and body limits, and
//! merge it with your own routes.
//!
//! ```
//! use std::time::Duration;
//! use axum::http::StatusCode;
//! use tower::{ServiceBuilder, limit::ConcurrencyLimitLayer};
//! use tower_http::{limit::RequestBodyLimitLayer, timeout::TimeoutLayer, trace::TraceLayer};
//! use tower_agent_core::{Agent, model::ScriptedModel};
//! use tower_agent_server as server;
//!
//! let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
//! let app = server::router(agent).layer(
//!     ServiceBuilder::new()
//!         .layer(TraceLayer::new_for_http())
//!         .layer(ConcurrencyLimitLayer::new(64))
//!         .layer(TimeoutLayer::with_status_code(
//!             StatusCode::REQUEST_TIMEOUT,
//!             Duration::from_secs(120),
//!         ))
//!         .layer(RequestBodyLimitLayer::new(64 * 1024)),
//! );
//! # let _: axum::Router = app;
//! ```
//!
//! Mind what these layers see: an HTTP layer's response future ends when the response *head*
//! is ready. For `POST /threads/{id}/runs` that is when the run is over, so a timeout bounds
//! the run (a run cut off keeps what was saved after its last whole step) and a concurrency
//! limit bounds concurrent runs. For the streamed route the head is sent at once and the run
//! goes on in the body: a timeout or a concurrency limit there bounds only the start of the
//! stream. A client that disconnects drops its run the same way. To bound every run, streamed
//! or not, put the middleware around the agent service instead ([`AgentRoutes::new`] with a
//! `Timeout<Agent>` or a `ConcurrencyLimit<Agent>`): a streamed run cut off by a timeout ends
//! its stream with an `agent_stop`, a non-streamed one answers `504`.
//!
//! # Graceful shutdown
//!
//! [`serve`] serves the router until a shutdown future completes, then stops accepting
//! connections and cancels the agent's [`shutdown_signal`](Agent::shutdown_signal): every run
//! in flight ends after its current step (tool calls in flight finish, the thread is saved,
//! the run answers with outcome `cancelled`, a stream ends with its `agent_stop`), and `serve`
//! returns once they all have. With a [`grace_period`](Serve::grace_period), the runs still
//! going after that long are dropped, and with them their tool calls (a tool's child process is
//! killed when its future is dropped).
//!
//! ```no_run
//! use std::time::Duration;
//! use tower_agent_core::{Agent, model::ScriptedModel};
//! use tower_agent_server as server;
//!
//! # #[tokio::main]
//! # async fn main() -> std::io::Result<()> {
//! let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let ctrl_c = async { tokio::signal::ctrl_c().await.expect("listen for ctrl-c") };
//! server::serve(listener, agent, ctrl_c)
//!     .grace_period(Duration::from_secs(30))
//!     .await
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
// No function of the library over 100 lines (clippy's count, the threshold in clippy.toml).
#![warn(clippy::too_many_lines)]

mod body;
mod handlers;
mod listen;
mod stream;

use std::{
    collections::HashSet,
    fmt,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    http::{StatusCode, request::Parts},
    routing::{get, post},
};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceExt, util::BoxCloneSyncService};

use tower_agent_core::{
    Agent, AgentRequest, AgentResponse, BoxError,
    store::{Lease, ThreadBusy, ThreadStore},
};

use self::{
    body::ApiError,
    handlers::{
        approvals, healthz, method_not_allowed, not_found, resume, run, run_stream, thread,
    },
};
pub use self::{
    body::{ErrorResponse, RunRequest, RunResponse, ThreadResponse},
    listen::{Serve, ServeFuture, serve},
    stream::{events, sse},
};

/// The routes of the [module docs](crate) over `agent`, ready to serve or to layer:
/// [`AgentRoutes::for_agent(&agent).router()`](AgentRoutes::router).
///
/// The router has no state left to provide (`Router<()>`): add layers with
/// [`Router::layer`]. It has its own `/healthz` and fallbacks: to add the agent's routes to
/// an app that has its own, use [`AgentRoutes::routes`]. To serve it yourself rather than
/// with [`serve`], set `TCP_NODELAY` on the connections
/// (`axum::serve::ListenerExt::tap_io`), so streamed events are not held back, and cancel the
/// agent's [`shutdown_signal`](Agent::shutdown_signal) in your graceful shutdown.
pub fn router(agent: Agent) -> Router {
    AgentRoutes::for_agent(&agent).router()
}

/// The agent service the routes call: any tower service of [`AgentRequest`]s, type-erased.
type BoxAgentService = BoxCloneSyncService<AgentRequest, AgentResponse, BoxError>;

/// The routes of the [module docs](crate) over any agent service — an [`Agent`] or
/// an `Agent` under tower middleware (`Timeout<Agent>`, `ConcurrencyLimit<Agent>`, your own
/// layers) — to embed in an app.
///
/// What the routes need beyond the service comes from here, not from the service's type: the
/// thread store that `GET /threads/{id}` reads ([`store`](Self::store)), the shutdown
/// signal that `/healthz` and new runs watch ([`shutdown_signal`](Self::shutdown_signal)) and
/// who may read or continue a thread ([`thread_access`](Self::thread_access)).
/// [`for_agent`](Self::for_agent) takes the first two from an agent.
///
/// [`routes`](Self::routes) gives only the `/threads/…` routes, no `/healthz` and no
/// fallback, so the router [`merge`](Router::merge)s and [`nest`](Router::nest)s into any
/// app; [`router`](Self::router) adds `/healthz` and the JSON `404`/`405` fallbacks.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use tower::ServiceBuilder;
/// use tower_agent_core::{Agent, model::ScriptedModel};
/// use tower_agent_server::{AgentRoutes, ThreadAction};
///
/// let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
/// let service = ServiceBuilder::new()
///     .timeout(Duration::from_secs(120))
///     .concurrency_limit(16)
///     .service(agent.clone());
/// let agent_routes = AgentRoutes::new(service)
///     .store(agent.store().clone())
///     .shutdown_signal(agent.shutdown_signal().clone())
///     // Here: threads named after the caller's tenant header only.
///     .thread_access(|parts: &axum::http::request::Parts, id: &str, _: ThreadAction| {
///         parts.headers.get("x-tenant").is_some_and(|t| id.as_bytes().starts_with(t.as_bytes()))
///     })
///     .routes();
/// let app: Router = Router::new()
///     .route("/healthz", get(|| async { "ok" }))
///     .nest("/agent", agent_routes)
///     .fallback(|| async { "not here" });
/// ```
#[derive(Clone)]
#[must_use]
pub struct AgentRoutes {
    state: AppState,
}

impl AgentRoutes {
    /// The routes over `service`, with no thread store (no `GET /threads/{id}` route), no
    /// shutdown signal and every thread open to every caller.
    pub fn new<S>(service: S) -> Self
    where
        S: Service<AgentRequest, Response = AgentResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let service = BoxCloneSyncService::new(service.map_err(Into::into));
        AgentRoutes {
            state: AppState {
                service,
                store: None,
                shutdown: None,
                access: None,
                busy: Arc::default(),
            },
        }
    }

    /// The routes over `agent`, with its store and its shutdown signal.
    pub fn for_agent(agent: &Agent) -> Self {
        Self::new(agent.clone())
            .store(Arc::clone(agent.store()))
            .shutdown_signal(agent.shutdown_signal().clone())
    }

    /// The thread store `GET /threads/{id}` reads: the one the service's agent saves to.
    pub fn store(mut self, store: Arc<dyn ThreadStore>) -> Self {
        self.state.store = Some(store);
        self
    }

    /// The shutdown signal: once cancelled, runs are refused with `503` and `/healthz`
    /// answers `503` (use the agent's [`shutdown_signal`](Agent::shutdown_signal)).
    pub fn shutdown_signal(mut self, token: CancellationToken) -> Self {
        self.state.shutdown = Some(token);
        self
    }

    /// Who may read (`GET /threads/{id}`) or continue (`POST /threads/{id}/runs…`) a thread;
    /// a refusal answers `403` (see the [module docs](crate#thread-access)). A
    /// closure `Fn(&Parts, &str, ThreadAction) -> bool` is a [`ThreadAccess`].
    pub fn thread_access(mut self, access: impl ThreadAccess) -> Self {
        self.state.access = Some(Arc::new(access));
        self
    }

    /// Only the `/threads/…` routes: no `/healthz`, no fallback, so the router merges and
    /// nests into any app (the app's fallback answers unknown paths).
    pub fn routes(self) -> Router {
        let mut routes = Router::new()
            .route("/threads/{id}/runs", post(run))
            .route("/threads/{id}/runs/stream", post(run_stream))
            .route("/threads/{id}/approvals", post(approvals))
            .route("/threads/{id}/resume", post(resume));
        if self.state.store.is_some() {
            routes = routes.route("/threads/{id}", get(thread));
        }
        routes.with_state(self.state)
    }

    /// The routes, `/healthz`, and JSON answers for unknown routes (`404`) and methods
    /// (`405`): a whole app.
    pub fn router(self) -> Router {
        let shutdown = self.state.shutdown.clone();
        self.routes()
            .route("/healthz", get(move || healthz(shutdown)))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
    }
}

impl fmt::Debug for AgentRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRoutes")
            .field("store", &self.state.store.is_some())
            .field("shutdown_signal", &self.state.shutdown.is_some())
            .field("thread_access", &self.state.access.is_some())
            .finish_non_exhaustive()
    }
}

/// What a request wants to do with a thread (see [`ThreadAccess`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThreadAction {
    /// Read it: `GET /threads/{id}`.
    Read,
    /// Run on it (creating it if it is new): `POST /threads/{id}/runs` and
    /// `POST /threads/{id}/runs/stream`; resume it: `POST /threads/{id}/resume`.
    Run,
    /// Answer its pending approvals: `POST /threads/{id}/approvals`.
    Approve,
}

/// Decides who may read or continue a thread: given the HTTP request's parts (its headers,
/// and the extensions your authentication middleware filled in), the thread id and the
/// [`ThreadAction`], allow (`true`) or refuse (`false`, answered `403`). See the
/// [module docs](crate#thread-access).
///
/// A closure `Fn(&Parts, &str, ThreadAction) -> bool` is one; implement the trait for a
/// check that must await (a database lookup).
pub trait ThreadAccess: Send + Sync + 'static {
    /// Whether the request `parts` may `action` the thread `thread_id`.
    fn allow<'a>(
        &'a self,
        parts: &'a Parts,
        thread_id: &'a str,
        action: ThreadAction,
    ) -> BoxFuture<'a, bool>;
}

impl<F> ThreadAccess for F
where
    F: Fn(&Parts, &str, ThreadAction) -> bool + Send + Sync + 'static,
{
    fn allow<'a>(
        &'a self,
        parts: &'a Parts,
        thread_id: &'a str,
        action: ThreadAction,
    ) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(self(parts, thread_id, action)))
    }
}

/// The router's state: the service, what the routes need besides, and the threads that have
/// a run going.
#[derive(Clone)]
struct AppState {
    service: BoxAgentService,
    store: Option<Arc<dyn ThreadStore>>,
    shutdown: Option<CancellationToken>,
    access: Option<Arc<dyn ThreadAccess>>,
    busy: Arc<Mutex<HashSet<String>>>,
}

impl AppState {
    /// Marks the thread `id` busy and takes its lease in the store until the returned guard
    /// drops, or answers `409` if a run is already going on it (here, or in another replica
    /// sharing a store that leases across processes).
    async fn claim(&self, id: &str) -> Result<Busy, ApiError> {
        let busy_here = || {
            ApiError::new(
                StatusCode::CONFLICT,
                format!("a run is already going on thread `{id}`"),
            )
        };
        let mut claim = {
            let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
            if !busy.insert(id.to_owned()) {
                return Err(busy_here());
            }
            Busy {
                set: Arc::clone(&self.busy),
                id: id.to_owned(),
                _lease: None,
            }
        };
        if let Some(store) = &self.store {
            match store.lease(id).await {
                Ok(lease) => claim._lease = Some(lease),
                Err(e) if e.is::<ThreadBusy>() => return Err(busy_here()),
                Err(e) => {
                    return Err(ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        tower_agent_core::error::chain(&*e),
                    ));
                }
            }
        }
        Ok(claim)
    }

    fn shutting_down(&self) -> bool {
        self.shutdown
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// `403` unless the [`ThreadAccess`] allows `action` on `id`.
    async fn check_access(
        &self,
        parts: &Parts,
        id: &str,
        action: ThreadAction,
    ) -> Result<(), ApiError> {
        match &self.access {
            Some(access) if !access.allow(parts, id, action).await => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("not allowed on thread `{id}`"),
            )),
            _ => Ok(()),
        }
    }
}

/// A thread marked busy, with its lease in the store; unmarks it and releases the lease when
/// dropped (when the run ends or is dropped).
struct Busy {
    set: Arc<Mutex<HashSet<String>>>,
    id: String,
    _lease: Option<Lease>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Router>();
        fn send<T: Send>() {}
        send::<ServeFuture>();
    }
}
