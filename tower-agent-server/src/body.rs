//! The JSON bodies of the routes: run requests and responses, threads, errors.

use axum::{
    Json,
    extract::rejection::{JsonRejection, PathRejection},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use tower_agent_builtins::todo::Todo;
use tower_agent_core::{
    AgentResponse, BoxError, Outcome,
    agent::{ApprovalError, PendingCall},
    message::{Messages, Usage},
};

/// The body of `POST /threads/{id}/runs` and `POST /threads/{id}/runs/stream`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRequest {
    /// The user's prompt; must not be empty.
    pub prompt: String,
}

impl RunRequest {
    /// A run request with a prompt.
    pub fn new(prompt: impl Into<String>) -> Self {
        RunRequest {
            prompt: prompt.into(),
        }
    }
}

/// The answer of `POST /threads/{id}/runs`: what [`AgentResponse`] says, less the messages
/// (read them with `GET /threads/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunResponse {
    /// The thread.
    pub thread_id: String,
    /// The run.
    pub run_id: String,
    /// How the run ended.
    pub outcome: Outcome,
    /// The text of the last assistant message.
    pub text: String,
    /// Steps taken (model calls).
    pub steps: u32,
    /// Tokens used.
    pub usage: Usage,
    /// The run's warnings, in order ([`AgentResponse::warnings`]): a hook that could not
    /// run, a retried model call … — what the streamed route sends as `warning` events.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl From<AgentResponse> for RunResponse {
    fn from(r: AgentResponse) -> Self {
        RunResponse {
            thread_id: r.thread_id,
            run_id: r.run_id,
            outcome: r.outcome,
            text: r.text,
            steps: r.steps,
            usage: r.usage,
            warnings: r.warnings,
        }
    }
}

/// The answer of `GET /threads/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadResponse {
    /// The thread id.
    pub id: String,
    /// Its messages.
    pub messages: Messages,
    /// Its todo list.
    pub todos: Vec<Todo>,
    /// The paths of the files written in it (their contents are not sent).
    pub files: Vec<String>,
    /// Tool calls waiting for a decision (answer them with `POST /threads/{id}/approvals`).
    #[serde(default)]
    pub pending: Vec<PendingCall>,
}

/// The body of every error answer: `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: String,
}

/// An error answer: a status and an [`ErrorResponse`].
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorResponse {
                error: self.message,
            }),
        )
            .into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = match &rejection {
            // axum answers 422 for well-formed JSON of the wrong shape; one status for "your
            // body is wrong" is simpler for clients.
            JsonRejection::JsonDataError(_) | JsonRejection::JsonSyntaxError(_) => {
                StatusCode::BAD_REQUEST
            }
            other => other.status(),
        };
        ApiError::new(status, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(rejection.status(), rejection.body_text())
    }
}

impl ApiError {
    /// The answer for a failed call of the agent service: the status of the error (or of the
    /// first error of its source chain) that has one, else `500`.
    pub(super) fn from_service(err: BoxError) -> Self {
        ApiError::new(
            service_error_status(&*err),
            tower_agent_core::error::chain(&*err),
        )
    }
}

/// The status for an agent service's error: `504` for a tower `Timeout` that elapsed, `503`
/// for a load shedder's refusal, `500` for anything else (a failing setup stage or store).
fn service_error_status(err: &(dyn std::error::Error + 'static)) -> StatusCode {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<tower::timeout::error::Elapsed>() {
            return StatusCode::GATEWAY_TIMEOUT;
        }
        if e.is::<tower::load_shed::error::Overloaded>() {
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        if let Some(refused) = e.downcast_ref::<ApprovalError>() {
            return match refused {
                ApprovalError::NoThread => StatusCode::NOT_FOUND,
                e if e.is_stale() => StatusCode::CONFLICT,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            };
        }
        // A save refused because another replica wrote the thread meanwhile.
        #[cfg(feature = "postgres")]
        if e.is::<tower_agent_postgres::Conflict>() {
            return StatusCode::CONFLICT;
        }
        cur = e.source();
    }
    StatusCode::INTERNAL_SERVER_ERROR
}
