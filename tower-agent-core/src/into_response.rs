//! [`Error`] as an axum answer (feature `axum`, on the `axum-core` boundary crate).

use axum_core::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::error::Error;

/// A handler can `?` the crate's [`Error`]: it answers `500` with the server's JSON error body
/// `{"error": "..."}`, the error and its sources as text (`outer: inner: root`).
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": crate::error::error_chain(&self) });
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}
