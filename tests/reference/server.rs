//! The model server both agents talk to: the Anthropic Messages API on 127.0.0.1, answering
//! each request with the scenario's answer for the turn it is at (the number of assistant
//! messages the request carries), streamed when the request asks for a stream, and recording
//! every request.

use std::sync::{Arc, Mutex};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{StatusCode, header::CONTENT_TYPE},
    response::Response,
};
use serde_json::{Value, json};

/// One request the server received: its path and JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) body: Value,
}

#[derive(Clone)]
struct Shared {
    answers: Arc<Vec<Vec<Value>>>,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

/// A message id of its own for each answer (`msg_ref_<n>`): Claude Code keeps one message per
/// id, so two answers with one id would be one.
fn message_id(shared: &Shared) -> String {
    format!("msg_ref_{}", shared.seen.lock().unwrap().len())
}

/// A running server; it stops with the test's runtime.
pub(crate) struct ModelServer {
    url: String,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl ModelServer {
    /// Serves `answers`: answer `i` (a list of content blocks, `text` or `tool_use`) goes to a
    /// request with `i` assistant messages; past the last, the last again.
    pub(crate) async fn start(answers: Vec<Vec<Value>>) -> Self {
        let shared = Shared {
            answers: Arc::new(answers),
            seen: Arc::default(),
        };
        let seen = Arc::clone(&shared.seen);
        let app = Router::new().fallback(answer).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        ModelServer {
            url: format!("http://{addr}"),
            seen,
        }
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The requests for a model answer (`/v1/messages`), in the order they came.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.starts_with("/v1/messages") && !r.path.contains("count_tokens"))
            .cloned()
            .collect()
    }
}

async fn answer(State(shared): State<Shared>, req: Request) -> Response {
    let path = req.uri().to_string();
    let bytes = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    shared.seen.lock().unwrap().push(Recorded {
        path: path.clone(),
        body: body.clone(),
    });
    if path.contains("count_tokens") {
        return json_response(json!({ "input_tokens": 10 }));
    }
    if !path.starts_with("/v1/messages") {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::empty())
            .unwrap();
    }
    let turn = body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0);
    let answers = &shared.answers;
    let blocks = answers[turn.min(answers.len() - 1)].clone();
    let model = body["model"].as_str().unwrap_or("model").to_owned();
    let id = message_id(&shared);
    let stop = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    if body["stream"] == true {
        sse(&id, &model, &blocks, stop)
    } else {
        json_response(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": { "input_tokens": 10, "output_tokens": 5 },
        }))
    }
}

fn json_response(v: Value) -> Response {
    Response::builder()
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .unwrap()
}

fn sse(id: &str, model: &str, blocks: &[Value], stop: &str) -> Response {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "tool_use" {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block":
                    {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta":
                    {"type": "input_json_delta", "partial_json": b["input"].to_string()}}),
            );
        } else {
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": i, "content_block":
                    {"type": "text", "text": ""}}),
            );
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta":
                    {"type": "text_delta", "text": b["text"]}}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .body(Body::from(Bytes::from(out)))
        .unwrap()
}
