//! [`Error`] as an axum answer (feature `axum`, on the `axum-core` boundary crate).

use axum_core::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::error::Error;

/// A handler can `?` the crate's [`Error`]: it answers `500` with the server's JSON error body
/// `{"error": "..."}`, the error and its sources as text (`outer: inner: root`).
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": crate::error::chain(&self) });
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn error_answers_500_with_a_json_body() {
        let response = Error::store("disk full".into()).into_response();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()["content-type"], "application/json");
        let mut body = Vec::new();
        let mut data = response.into_body().into_data_stream();
        while let Some(chunk) = data.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": "thread store failed: disk full"})
        );
    }
}
