//! The route handlers: runs (whole or streamed), approvals, threads, resume, health.

use std::convert::Infallible;

use axum::{
    Json,
    extract::{
        Path, State,
        rejection::{JsonRejection, PathRejection},
    },
    http::{StatusCode, request::Parts},
    response::{
        IntoResponse, Response,
        sse::{Event, Sse},
    },
};
use futures_core::Stream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::{
    AppState, Busy, ThreadAction,
    body::{ApiError, RunRequest, RunResponse, ThreadResponse},
    stream::{events, sse},
};
use tower_agent_builtins::{filesystem::FilesWritten, todo::Todos};
use tower_agent_core::{AgentRequest, agent::Approvals};

/// Checks the pieces of a run request, claims its thread and makes the [`AgentRequest`], with
/// the HTTP request's extensions.
async fn agent_request(
    state: &AppState,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<(AgentRequest, Busy), ApiError> {
    let Path(id) = id?;
    let Json(body) = body?;
    if body.prompt.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`prompt` must not be empty",
        ));
    }
    if state.shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ));
    }
    state.check_access(&parts, &id, ThreadAction::Run).await?;
    let busy = state.claim(&id).await?;
    let mut request = AgentRequest::new(body.prompt).thread(id);
    *request.extensions_mut() = parts.extensions;
    Ok((request, busy))
}

pub(super) async fn run(
    State(state): State<AppState>,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<Json<RunResponse>, ApiError> {
    let (request, _busy) = agent_request(&state, parts, id, body).await?;
    let response = state
        .service
        .oneshot(request)
        .await
        .map_err(ApiError::from_service)?;
    Ok(Json(response.into()))
}

pub(super) async fn approvals(
    State(state): State<AppState>,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<Approvals>, JsonRejection>,
) -> Result<Json<RunResponse>, ApiError> {
    let Path(id) = id?;
    let Json(body) = body?;
    if state.shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ));
    }
    state
        .check_access(&parts, &id, ThreadAction::Approve)
        .await?;
    let _busy = state.claim(&id).await?;
    let mut request = AgentRequest::approvals(id, body);
    *request.extensions_mut() = parts.extensions;
    let response = state
        .service
        .oneshot(request)
        .await
        .map_err(ApiError::from_service)?;
    Ok(Json(response.into()))
}

pub(super) async fn run_stream(
    State(state): State<AppState>,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let (request, busy) = agent_request(&state, parts, id, body).await?;
    // NOTE: the stream owns the run (and the thread's claim): a client that goes away drops
    // both (see the module docs).
    let events = events(state.service, request).map(move |event| {
        let _claim = &busy;
        event
    });
    Ok(sse(events))
}

pub(super) async fn thread(
    State(state): State<AppState>,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ThreadResponse>, ApiError> {
    let Path(id) = id?;
    state.check_access(&parts, &id, ThreadAction::Read).await?;
    let Some(store) = &state.store else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "no thread store"));
    };
    let thread = store.load(&id).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("thread store failed: {e}"),
        )
    })?;
    let Some(thread) = thread else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no thread `{id}`"),
        ));
    };
    let (todos, files) = (
        Todos::of(&thread.data),
        FilesWritten::paths(&thread.data)
            .map(str::to_owned)
            .collect(),
    );
    Ok(Json(ThreadResponse {
        id: thread.id,
        messages: thread.messages,
        todos,
        files,
        pending: thread.pending,
    }))
}

/// `POST /threads/{id}/resume`: a run that finishes the step a crashed run left in flight
/// ([`AgentRequest::recover`]), with the thread claimed (and leased) as for a run.
pub(super) async fn resume(
    State(state): State<AppState>,
    parts: Parts,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<RunResponse>, ApiError> {
    let Path(id) = id?;
    if state.shutting_down() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        ));
    }
    state.check_access(&parts, &id, ThreadAction::Run).await?;
    let _busy = state.claim(&id).await?;
    if let Some(store) = &state.store {
        let thread = store.load(&id).await.map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "thread store failed: {}",
                    tower_agent_core::error::chain(&*e)
                ),
            )
        })?;
        if thread.is_none() {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no thread `{id}`"),
            ));
        }
    }
    let mut request = AgentRequest::recover(id);
    *request.extensions_mut() = parts.extensions;
    let response = state
        .service
        .oneshot(request)
        .await
        .map_err(ApiError::from_service)?;
    Ok(Json(response.into()))
}

pub(super) async fn healthz(shutdown: Option<CancellationToken>) -> Response {
    if shutdown.is_some_and(|token| token.is_cancelled()) {
        let body = serde_json::json!({ "status": "shutting_down" });
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    } else {
        Json(serde_json::json!({ "status": "ok" })).into_response()
    }
}

pub(super) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    )
}
